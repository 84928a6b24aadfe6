//! `skill_run`: a command of an approved SKILL.md skill's scripts, run in the jail
//! through the registry (`Registry::run`), as the skill's instructions write it. Inputs
//! come by content (text or base64, capped); the answer is structured (exit code, capped
//! stdout and stderr, every file the run left with its size and SHA-256, small text files
//! inline) and carries images as image content and other files, up to a cap, as embedded
//! resources. An agent runs what a human approved under the policy the human approved;
//! it can grant nothing (no path, no host, no secret).

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use skillhost_core::{CallContext, RunInput, RunOutput};
use skillhost_registry::Registry;

/// Text files up to this size are inlined in the structured answer.
const INLINE_TEXT: usize = 16 << 10;
/// Images and other files returned as content blocks, all together.
const CONTENT_CAP: usize = 8 << 20;

/// The arguments of `skill_run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// The skill (runtime `scripts` in skill_list).
    skill: String,
    /// The command as the skill's SKILL.md writes it, one word per item, e.g.
    /// ["python", "scripts/fill.py", "in.pdf", "out.pdf"]. Paths of the skill's own files
    /// work as written; other relative paths are the run's workspace.
    #[schemars(length(min = 1, max = 256))]
    command: Vec<String>,
    /// Files put into the workspace before the command starts (16 MiB in all).
    #[serde(default)]
    #[schemars(length(max = 64))]
    inputs: Vec<InputFile>,
}

/// One input file, by content.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InputFile {
    /// Its path in the workspace, relative (e.g. `in.csv`, `data/a.json`).
    path: String,
    /// Its content as text.
    #[serde(default)]
    text: Option<String>,
    /// Its content as base64 (for binary files).
    #[serde(default)]
    base64: Option<String>,
}

/// What `skill_run` answers.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunAnswer {
    /// The command's exit code, when it exited.
    exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    signal: Option<i32>,
    /// What it printed on stdout (lossy UTF-8), cut at `output_cap` bytes.
    stdout: String,
    /// What it printed on stderr (lossy UTF-8), cut at `output_cap` bytes.
    stderr: String,
    /// Bytes it printed on stdout, kept or not.
    stdout_bytes: u64,
    /// Bytes it printed on stderr, kept or not.
    stderr_bytes: u64,
    /// The cap on each of stdout and stderr.
    output_cap: u64,
    /// The files it left in its workspace.
    files: Vec<FileAnswer>,
    /// Entries of the workspace left out (links are never followed or returned).
    skipped: Vec<String>,
    /// How long it ran, in milliseconds.
    duration_ms: u64,
}

/// A file the run left.
#[derive(Serialize, JsonSchema)]
pub(crate) struct FileAnswer {
    /// Its path in the workspace.
    path: String,
    /// Its size in bytes.
    size: u64,
    /// SHA-256 of its bytes, lowercase hex.
    sha256: String,
    /// Its content, for a small text file.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    /// How its bytes are returned: `inline`, `image` or `resource` (a content block of this
    /// answer, URI `skillhost-run:///PATH`), or `omitted` (past the answer's cap).
    returned: &'static str,
}

/// The input schema of `skill_run`.
pub(crate) fn input_schema() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<RunArgs>()
}

/// Run it and build the answer; `Err` is the tool's error text.
pub(crate) async fn skill_run(registry: &Registry, args: RunArgs, cx: CallContext) -> Result<CallToolResult, String> {
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for input in args.inputs {
        let bytes = match (input.text, input.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| format!("skill_run: input `{}` is not valid base64: {e}", skillhost_core::text::quote(&input.path, 80)))?,
            _ => {
                return Err(format!(
                    "skill_run: input `{}`: give exactly one of text or base64",
                    skillhost_core::text::quote(&input.path, 80)
                ));
            }
        };
        inputs.push(RunInput { path: input.path, bytes });
    }
    let output = registry.run(&args.skill, args.command, inputs, cx).await.map_err(|e| e.to_string())?;
    Ok(answer(output))
}

/// The structured answer and its content blocks.
fn answer(output: RunOutput) -> CallToolResult {
    let mut blocks = Vec::new();
    let mut budget = CONTENT_CAP;
    let mut files = Vec::with_capacity(output.files.len());
    for file in &output.files {
        let text = std::str::from_utf8(&file.bytes).ok().filter(|t| t.len() <= INLINE_TEXT && !t.contains('\0'));
        let image = image_type(&file.bytes);
        let returned = if text.is_some() {
            "inline"
        } else if file.bytes.len() > budget {
            "omitted"
        } else {
            budget -= file.bytes.len();
            let data = base64::engine::general_purpose::STANDARD.encode(&file.bytes);
            match image {
                Some(mime) => {
                    blocks.push(ContentBlock::image(data, mime));
                    "image"
                }
                None => {
                    let uri = format!("skillhost-run:///{}", file.path);
                    blocks.push(ContentBlock::resource(ResourceContents::blob(data, uri).with_mime_type("application/octet-stream")));
                    "resource"
                }
            }
        };
        files.push(FileAnswer {
            path: file.path.clone(),
            size: file.size,
            sha256: file.sha256.clone(),
            text: text.map(str::to_owned),
            returned,
        });
    }
    let value = RunAnswer {
        exit_code: output.exit_code,
        signal: output.signal,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        stdout_bytes: output.stdout_bytes,
        stderr_bytes: output.stderr_bytes,
        output_cap: output.output_cap,
        files,
        skipped: output.skipped,
        duration_ms: output.duration.as_millis() as u64,
    };
    let value = serde_json::to_value(value).unwrap_or_default();
    let mut result = CallToolResult::structured(value);
    result.content.extend(blocks);
    result
}

/// The MIME type of an image, from its first bytes.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    const SIGNATURES: [(&[u8], &str); 3] = [(b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif")];
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    SIGNATURES.iter().find(|(magic, _)| bytes.starts_with(magic)).map(|(_, mime)| *mime)
}
