//! echo: the bench's tool as a skillhost skill. scripts/peer-bench.sh makes the skill with
//! `skillhost new echo --lang rust`, puts this file in place of the `src/lib.rs` it wrote
//! and builds it with `skillhost build`. It answers `{"text": T}` with `{"text": T}`, as
//! the hyper-mcp plugin beside it answers with one text content `T`.

use skillhost_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    /// The text to echo.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct EchoOutput {
    /// The same text.
    text: String,
}

/// Echo the text back.
#[tool(read_only, idempotent, example = r#"{"text": "hello"}"#)]
fn echo(input: EchoInput) -> Result<EchoOutput, ToolError> {
    Ok(EchoOutput { text: input.text })
}

skillhost_sdk::skill!(echo);
