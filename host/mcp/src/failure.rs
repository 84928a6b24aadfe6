//! The one shape every built-in tool fails with (`tool_search`, `skill_list`,
//! `skill_search`, `skill_get`, `read_skill_resource`, `skill_run`, and the forge's
//! `skill_create` and `skill_update`): an `isError` result whose one text block is a JSON
//! object an agent can act on without parsing prose:
//!
//! ```json
//! {"kind": "invalid_arguments", "message": "skill_get: invalid input: …", "fix": "call it again with …"}
//! ```
//!
//! - `kind`: a stable snake_case word saying what went wrong ([`AgentFailure::kind`]);
//! - `message`: the human-readable text, the error's own message;
//! - `fix`: what to do next, when there is something ([`AgentFailure::fix`]);
//! - a tool may add fields of its own (the forge: `skill`, `attempt`, `failure`, …).
//!
//! A skill's own tools (`SKILL__TOOL`) answer as the skill does; this is the host's shape.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use skillhost_core::RunError;
use skillhost_registry::RegistryError;

/// An error a built-in tool hands to the agent.
pub(crate) trait AgentFailure: std::fmt::Display {
    /// What went wrong, as a stable snake_case word.
    fn kind(&self) -> &'static str;

    /// What to do next, when the agent (or its user) can do something.
    fn fix(&self) -> Option<String> {
        None
    }

    /// The tool result: `isError`, its text the JSON object of the module docs.
    fn to_result(&self) -> CallToolResult {
        result(shape(self.kind(), &self.to_string(), self.fix()))
    }
}

/// The JSON object of a failure, for a tool that adds fields of its own.
pub(crate) fn shape(kind: &str, message: &str, fix: Option<String>) -> Map<String, Value> {
    let mut value = Map::new();
    value.insert("kind".into(), kind.into());
    value.insert("message".into(), message.into());
    if let Some(fix) = fix {
        value.insert("fix".into(), fix.into());
    }
    value
}

/// An `isError` result carrying `value` (a [`shape`], maybe with more fields) as its text.
/// No structured content: a tool's output schema describes its answers, not its failures.
pub(crate) fn result(value: Map<String, Value>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(Value::Object(value).to_string())])
}

/// What to do about arguments that do not parse.
pub(crate) const FIX_ARGUMENTS: &str = "call the tool again with arguments that match its input schema (tools/list shows it)";

/// The kind and fix of a registry error an agent's request met (a run, a read).
pub(crate) fn registry_failure(error: &RegistryError) -> (&'static str, Option<String>) {
    match error {
        RegistryError::UnknownSkill { .. } => ("unknown_skill", Some("call skill_list or skill_search to see the skills".into())),
        RegistryError::NotCallable { name, state } => ("not_approved", Some(state.fix(name))),
        RegistryError::InstructionsOnly { .. } | RegistryError::ScriptsOnly { .. } | RegistryError::NotRunnable { .. } => {
            ("not_runnable", Some("read the skill's instructions with skill_get to see how it is used".into()))
        }
        RegistryError::BadScripts { .. } | RegistryError::Policy { .. } => ("bad_skill", None),
        RegistryError::Run(run) => match run {
            RunError::Refused { .. } => ("refused", None),
            RunError::Unavailable { .. } => ("unavailable", None),
            RunError::Limit { fix, .. } => ("limit", Some(fix.clone())),
            RunError::Cancelled { .. } => ("cancelled", None),
            _ => ("host_error", None),
        },
        _ => ("host_error", None),
    }
}

/// The forge's failure (already JSON with a `kind`) in the shared shape: its `fix`
/// added.
pub(crate) fn forge_failure(error: &skillhost_forge::ForgeError) -> CallToolResult {
    use skillhost_forge::ForgeError;
    let mut value = match error.to_json() {
        Value::Object(map) => map,
        other => shape("host_error", &other.to_string(), None),
    };
    let fix = match error {
        ForgeError::Failed { skill, attempt, max, .. } if attempt >= max => {
            Some(format!("that was the last attempt: the user can allow more with `skillhost forge --reset {skill}`"))
        }
        ForgeError::Failed { .. } => Some("fix what `failure` names and submit the whole skill again".into()),
        ForgeError::Exhausted { skill, .. } => Some(format!("the user can allow more attempts with `skillhost forge --reset {skill}`")),
        ForgeError::Conflict(_) => Some("use skill_update for a skill that exists, skill_create for a new one".into()),
        ForgeError::Limited(_) => Some("wait a little and submit again".into()),
        _ => None,
    };
    if let Some(fix) = fix {
        value.entry("fix").or_insert(json!(fix));
    }
    result(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bad;

    impl std::fmt::Display for Bad {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("it broke")
        }
    }

    impl AgentFailure for Bad {
        fn kind(&self) -> &'static str {
            "broken"
        }

        fn fix(&self) -> Option<String> {
            Some("mend it".into())
        }
    }

    #[test]
    fn a_failure_is_an_error_result_holding_kind_message_and_fix() {
        let result = Bad.to_result();
        assert_eq!(result.is_error, Some(true));
        assert!(result.structured_content.is_none());
        let text = &result.content[0].as_text().expect("a text block").text;
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(value, json!({"kind": "broken", "message": "it broke", "fix": "mend it"}));
    }
}
