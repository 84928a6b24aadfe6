//! `skill_create` and `skill_update`: an agent submits source and the forge
//! (`skillhost-forge`) stages, builds, tests and installs it, reporting its stages as
//! progress. A failure is an `isError` result whose content is JSON the agent can act on
//! (refused files with their rule, compiler diagnostics with file:line, failing test
//! cases with expected and actual, the attempt count). A success installs the skill in
//! the user layer, where it waits for a human whatever it asks for, instructions only
//! included (an agent's text is what later sessions would follow): asked through
//! elicitation at its first tool call, or `skillhost approve NAME`. Until then no session
//! is shown what it wrote. Neither tool approves anything.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skillhost_core::{Progress, ProgressSink};
use skillhost_forge::{Forge, Forged, Language, Submission};
use skillhost_registry::TrustState;

use crate::tools::public_name;

/// A forge tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForgeTool {
    /// Build a new skill from source.
    Create,
    /// Change an installed skill's source.
    Update,
}

/// Stages reported as progress (stage, build, test, install).
const STAGES: u64 = 4;

impl ForgeTool {
    /// The forge tool called `name`, if any.
    pub fn named(name: &str) -> Option<Self> {
        [ForgeTool::Create, ForgeTool::Update].into_iter().find(|t| t.name() == name)
    }

    /// Its MCP name.
    pub fn name(self) -> &'static str {
        match self {
            ForgeTool::Create => "skill_create",
            ForgeTool::Update => "skill_update",
        }
    }

    /// Both tools' MCP definitions.
    pub fn all() -> Vec<Tool> {
        [ForgeTool::Create, ForgeTool::Update].into_iter().map(ForgeTool::to_mcp).collect()
    }

    fn to_mcp(self) -> Tool {
        let (description, schema) = match self {
            ForgeTool::Create => (CREATE_DESCRIPTION, schema_for_type::<CreateArgs>()),
            ForgeTool::Update => (UPDATE_DESCRIPTION, schema_for_type::<UpdateArgs>()),
        };
        crate::builtin::standard_formats(
            Tool::new(self.name(), description, schema)
                .with_annotations(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false)),
        )
    }
}

const CREATE_DESCRIPTION: &str = "Create a skill from source: the host checks the files, builds them (Rust: to a WebAssembly component, in a \
                 sandbox without network; Python: a FastMCP server), runs its tests ([[tests]] in skill.toml: tool, input, \
                 expect or expect_error; pytest for Python) and installs it. On failure the result is JSON with what to fix \
                 (diagnostics with file:line, failing cases with expected/actual) and the attempt count (3 per skill). Every \
                 skill it creates waits for the user's approval (asked at its first tool call, or `skillhost approve NAME`); \
                 until then no session sees its instructions or runs its code.";

const UPDATE_DESCRIPTION: &str = "Change an installed skill made by skill_create: the files given replace (or add to) its stored source, then it \
                 is built, tested and installed like skill_create. The version it replaces is kept (a human can roll back). \
                 Changed content needs the user's approval again.";

/// The arguments of `skill_create` (its input schema is derived from them).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// Lowercase letters, digits, inner hyphens; equal to skill.toml's name.
    name: String,
    language: Language,
    /// Relative path -> file contents. Rust: skill.toml, SKILL.md, src/**.rs, optional
    /// Cargo.toml (depend on `skillhost-sdk = { path = "/sdk/guest-sdk" }`; without one the
    /// forge writes it), build.rs, tests/**.rs. Python: skill.toml (with [server] command =
    /// "python", args = ["server.py"]), server.py (FastMCP), test_server.py (pytest), other
    /// *.py. Plus references/**.md. Scripts (an Agent Skills folder, run with skill_run once
    /// the user approves it): SKILL.md, scripts/** (.py .sh .js .mjs ...), references/**,
    /// assets/**, requirements.txt, and an optional skill.toml asking for what the scripts
    /// need ([network], [[secrets]], [limits]), which the user reviews.
    files: BTreeMap<String, String>,
    /// Test cases added to skill.toml as [[tests]].
    #[serde(default)]
    tests: Vec<TestArg>,
}

/// One `[[tests]]` case: call `tool` with `input`, expect `expect` (any JSON) or an error
/// containing `expect_error`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TestArg {
    tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<JsonObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect_error: Option<String>,
}

/// The arguments of `skill_update` (its input schema is derived from them).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    /// The installed skill to change.
    name: String,
    /// Relative path -> file contents, replacing or adding to its stored source.
    files: BTreeMap<String, String>,
}

/// Run `tool` with `args`, reporting stages to `progress`.
pub async fn call(forge: &Forge, tool: ForgeTool, args: &JsonObject, progress: Option<ProgressSink>) -> CallToolResult {
    let step = std::sync::atomic::AtomicU64::new(0);
    let report: skillhost_forge::Progress = Arc::new(move |message: &str| {
        let done = step.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(sink) = &progress {
            sink(Progress { done, total: Some(STAGES), message: Some(message.to_owned()) });
        }
    });
    let args = Value::Object(args.clone());
    let outcome = match tool {
        ForgeTool::Create => match serde_json::from_value::<CreateArgs>(args) {
            Ok(mut a) => {
                if !a.tests.is_empty()
                    && let Some(toml) = a.files.get_mut("skill.toml")
                {
                    let tests: Vec<Value> = a.tests.iter().filter_map(|t| serde_json::to_value(t).ok()).collect();
                    match skillhost_forge::append_tests(toml, &tests) {
                        Ok(text) => *toml = text,
                        Err(e) => return invalid(e.to_string()),
                    }
                }
                forge.create(Submission { name: a.name, language: a.language, files: a.files }, report).await
            }
            Err(e) => return invalid(format!("skill_create: {e}")),
        },
        ForgeTool::Update => match serde_json::from_value::<UpdateArgs>(args) {
            Ok(a) => forge.update(&a.name, a.files, report).await,
            Err(e) => return invalid(format!("skill_update: {e}")),
        },
    };
    match outcome {
        Ok(forged) => success(&forged),
        Err(e) => crate::failure::forge_failure(&e),
    }
}

fn success(forged: &Forged) -> CallToolResult {
    let name = forged.skill.as_str();
    let skill = skillhost_core::SkillName::new(name).ok();
    let tools: Vec<String> = forged.tools.iter().filter_map(|t| skill.as_ref().and_then(|s| public_name(s, t))).collect();
    let next = match forged.state {
        TrustState::Approved => format!("`{name}` is live: call {}", tools.join(", ")),
        _ if tools.is_empty() => format!(
            "`{name}` is installed and waits for the user's approval ({}): the user runs `skillhost show {name}` and \
             `skillhost approve {name}`; until then no session is shown its instructions",
            forged.state
        ),
        _ => format!(
            "`{name}` is installed and waits for the user's approval ({}): calling one of its tools asks the user, \
             or the user runs `skillhost approve {name}`",
            forged.state
        ),
    };
    let value = json!({
        "skill": name,
        "state": forged.state,
        "tier": forged.tier,
        "version": forged.version,
        "tools": tools,
        "tests_passed": forged.tests_passed,
        "tests": forged.tests,
        "after_approval": forged.after_approval,
        "warnings": forged.warnings,
        "replaced": forged.replaced,
        "timings_ms": forged.timings_ms,
        "next": next,
    });
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// Arguments that do not parse, in the shape of every built-in tool's failure.
fn invalid(message: String) -> CallToolResult {
    crate::failure::result(crate::failure::shape("invalid_arguments", &message, Some(crate::failure::FIX_ARGUMENTS.into())))
}

/// When the host opted in ([`skillhost_forge::ForgeConfig::suggest_missing`]), add to a
/// `tool_search` response that matched nothing well the requests that keep missing (at
/// least 3 similar ones): `consider_creating`.
pub fn suggest(forge: &Forge, value: &mut Value) {
    if !forge.config().suggest_missing {
        return;
    }
    let Some(stats) = forge.registry().stats() else { return };
    let missing = stats.missing().unwrap_or_default();
    if missing.is_empty() {
        return;
    }
    let lines: Vec<String> = missing
        .iter()
        .take(3)
        .map(|m| format!("consider creating a skill for \"{}\" (asked {} times with no good match): skill_create", m.query, m.count))
        .collect();
    value["consider_creating"] = json!(lines);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_input_schema_is_the_contract_its_arguments_parse() {
        let create = Value::Object((*ForgeTool::Create.to_mcp().input_schema).clone());
        assert_eq!(create["required"], json!(["name", "language", "files"]), "{create}");
        assert_eq!(create["additionalProperties"], json!(false), "{create}");
        let text = create.to_string();
        assert!(text.contains("\"rust\"") && text.contains("\"python\""), "the languages are listed: {create}");
        let update = Value::Object((*ForgeTool::Update.to_mcp().input_schema).clone());
        assert_eq!(update["required"], json!(["name", "files"]), "{update}");
        let parse = |v: Value| serde_json::from_value::<CreateArgs>(v);
        let files = json!({"skill.toml": "name = \"x\""});
        assert!(parse(json!({"name": "x", "language": "python", "files": files, "tests": [{"tool": "t", "expect": 1}]})).is_ok());
        assert!(parse(json!({"name": "x", "language": "go", "files": files})).is_err(), "a language the schema does not list");
        assert!(parse(json!({"name": "x", "language": "rust", "files": files, "tests": [{"tool": "t", "typo": 1}]})).is_err());
    }
}
