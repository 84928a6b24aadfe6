//! The smallest complete skillhost skill: one tool, `greet`.
//!
//! A skill is a library crate built as a `cdylib` for `wasm32-wasip2` from
//! `skill.toml` (name, description, search keywords and, when it needs them,
//! capabilities and limits) and code like this file: input and output types
//! deriving `Deserialize`/`Serialize` and `JsonSchema`, a function per tool
//! marked `#[tool]` whose doc comment tells an agent when to call it, and one
//! `skill!` listing the tools. Build it with
//! `cargo build --release --target wasm32-wasip2 -p minimal-skill` and put
//! `minimal_skill.wasm` next to `skill.toml` in a skills directory.

use skillhost_sdk::prelude::*;

/// Whom to greet.
#[derive(Deserialize, JsonSchema)]
struct GreetInput {
    /// The name of the person to greet.
    name: String,
}

/// The greeting.
#[derive(Serialize, JsonSchema)]
struct GreetOutput {
    /// A friendly sentence addressed to `name`.
    greeting: String,
}

/// Greet someone by name.
#[tool(read_only, idempotent, example = r#"{"name": "Ada"}"#)]
fn greet(input: GreetInput) -> Result<GreetOutput, ToolError> {
    let name = input.name.trim();
    if name.is_empty() {
        return Err(ToolError::invalid_input("name: must not be empty"));
    }
    Ok(GreetOutput { greeting: format!("Hello, {name}!") })
}

skillhost_sdk::skill!(greet);
