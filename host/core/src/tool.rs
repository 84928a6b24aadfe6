//! [`ToolSpec`]: one tool of a skill as the host and agents see it, validated from
//! whatever the runtime reported; [`OutputSchemas`]: the declared output schemas,
//! compiled once per loaded skill, that every output is checked against before it
//! leaves the runtime.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

/// Longest tool name, in bytes.
const MAX_TOOL_NAME: usize = 64;
/// Most tools one skill may offer.
pub const MAX_TOOLS: usize = 256;

/// Behaviour hints, mirrored to MCP tool annotations. Hints only: the grant decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Annotations {
    /// Changes nothing outside its own call.
    pub read_only: bool,
    /// May delete or overwrite data.
    pub destructive: bool,
    /// Repeating a call with the same input has no further effect.
    pub idempotent: bool,
    /// Talks to things outside the host.
    pub open_world: bool,
}

/// One tool a skill offers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Unique within the skill: `^[A-Za-z][A-Za-z0-9_-]*$`, at most 64 bytes, case
    /// sensitive. Uppercase is allowed because third-party MCP servers use camelCase
    /// names; dots and slashes are not, since clients such as the Anthropic API refuse
    /// them in the `SKILL__TOOL` names the MCP front shows.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
    /// JSON Schema of the output, when structured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
    /// Example inputs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Value>,
}

/// Why a tool description reported by a skill is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`: {reason}")]
pub struct ToolSpecError {
    /// The tool's name as reported.
    pub tool: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ToolSpec {
    /// Build a spec from the texts a guest reports, checking every field.
    pub fn from_parts(
        name: String,
        description: String,
        input_schema: &str,
        output_schema: Option<&str>,
        annotations: Annotations,
        examples: &[String],
    ) -> Result<Self, ToolSpecError> {
        let fail = |reason: String| ToolSpecError { tool: name.clone(), reason };
        validate_tool_name(&name).map_err(|r| fail(r.to_owned()))?;
        let schema = |text: &str, what: &str| -> Result<Value, ToolSpecError> {
            let value: Value = serde_json::from_str(text)
                .map_err(|e| fail(format!("{what} is not JSON: {e}")))?;
            if !value.is_object() && !value.is_boolean() {
                return Err(fail(format!("{what} must be a JSON Schema object")));
            }
            Ok(value)
        };
        let input_schema = schema(input_schema, "input schema")?;
        let output_schema = output_schema.map(|s| schema(s, "output schema")).transpose()?;
        let examples = examples
            .iter()
            .map(|e| serde_json::from_str(e).map_err(|err| fail(format!("example `{e}` is not JSON: {err}"))))
            .collect::<Result<_, _>>()?;
        Ok(ToolSpec { name, description, input_schema, output_schema, annotations, examples })
    }
}

/// The output schemas of a skill's tools, compiled once when the skill loads. A
/// runtime checks every successful output against its tool's schema, so what reaches a
/// caller (and MCP's `structuredContent`) is what the tool declared, whatever the skill
/// is: a guest that returns `{"count": "many"}` for `{"count": integer}` gets an error
/// naming the field, not a client that trusts a lie.
#[derive(Default)]
pub struct OutputSchemas {
    by_tool: HashMap<String, jsonschema::Validator>,
}

impl OutputSchemas {
    /// Compile the output schema of each tool that has one. A schema that is not a valid
    /// JSON Schema (or refers to documents outside itself) is an error naming the tool.
    pub fn new(tools: &[ToolSpec]) -> Result<Self, ToolSpecError> {
        let mut by_tool = HashMap::new();
        for tool in tools {
            let Some(schema) = &tool.output_schema else { continue };
            let validator = jsonschema::validator_for(schema).map_err(|e| ToolSpecError {
                tool: tool.name.clone(),
                reason: format!("output schema is not a usable JSON Schema: {e}"),
            })?;
            by_tool.insert(tool.name.clone(), validator);
        }
        Ok(OutputSchemas { by_tool })
    }

    /// Check `output` of `tool` against its declared schema: `Ok` when it has none or the
    /// output fits; otherwise the first mismatch, with its place in the output (a JSON
    /// pointer), and whether there are more.
    pub fn check(&self, tool: &str, output: &Value) -> Result<(), String> {
        let Some(validator) = self.by_tool.get(tool) else { return Ok(()) };
        let mut errors = validator.iter_errors(output);
        let Some(first) = errors.next() else { return Ok(()) };
        let at = first.instance_path().to_string();
        let at = if at.is_empty() { "the output".to_owned() } else { format!("output{at}") };
        let more = if errors.next().is_some() { " (and further mismatches)" } else { "" };
        Err(format!("{at} does not match the declared output schema: {first}{more}"))
    }
}

impl std::fmt::Debug for OutputSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_tool.keys()).finish()
    }
}

fn validate_tool_name(name: &str) -> Result<(), &'static str> {
    let mut bytes = name.bytes();
    match bytes.next() {
        None => Err("the name is empty"),
        Some(b) if !b.is_ascii_alphabetic() => Err("the name must start with a letter"),
        _ if name.len() > MAX_TOOL_NAME => Err("the name is longer than 64 bytes"),
        _ if !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') => {
            Err("the name may contain only ASCII letters, digits, `_` and `-`")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_parts() {
        let ok = ToolSpec::from_parts("word_count".into(), "d".into(), "{}", None, Annotations::default(), &["{\"a\":1}".into()]);
        assert!(ok.is_ok());
        assert!(ToolSpec::from_parts("getCurrentTime".into(), "d".into(), "{}", None, Annotations::default(), &[]).is_ok(), "camelCase, as third-party servers name tools");
        let table = [
            ("1st", "{}", "start with a letter"),
            ("_x", "{}", "start with a letter"),
            ("a b", "{}", "only ASCII letters"),
            ("a.b", "{}", "only ASCII letters"),
            ("ok", "not json", "input schema is not JSON"),
            ("ok", "3", "must be a JSON Schema object"),
        ];
        for (name, schema, expected) in table {
            let err = ToolSpec::from_parts(name.into(), "d".into(), schema, None, Annotations::default(), &[]).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    fn with_output(name: &str, schema: Option<&str>) -> ToolSpec {
        ToolSpec::from_parts(name.into(), "d".into(), "{}", schema, Annotations::default(), &[]).unwrap()
    }

    #[test]
    fn outputs_are_checked_against_their_declared_schema() {
        let count = r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}"#;
        let schemas = OutputSchemas::new(&[with_output("count", Some(count)), with_output("free", None)]).unwrap();
        assert_eq!(schemas.check("count", &serde_json::json!({"count": 3})), Ok(()));
        let wrong = schemas.check("count", &serde_json::json!({"count": "many"})).unwrap_err();
        assert!(wrong.starts_with("output/count does not match the declared output schema"), "{wrong}");
        assert!(wrong.contains("\"many\" is not of type \"integer\""), "{wrong}");
        let missing = schemas.check("count", &serde_json::json!({})).unwrap_err();
        assert!(missing.starts_with("the output does not match") && missing.contains("count"), "{missing}");
        // A tool without a schema, or an unknown one, has nothing to break.
        assert_eq!(schemas.check("free", &serde_json::json!("anything")), Ok(()));
        assert_eq!(schemas.check("unknown", &serde_json::json!(null)), Ok(()));
    }

    #[test]
    fn unusable_output_schemas_are_refused_at_load() {
        let err = OutputSchemas::new(&[with_output("bad", Some(r#"{"type": 12}"#))]).unwrap_err();
        assert_eq!(err.tool, "bad");
        assert!(err.reason.contains("output schema is not a usable JSON Schema"), "{err}");
        // References outside the schema are not fetched.
        let remote = OutputSchemas::new(&[with_output("remote", Some(r#"{"$ref": "https://example.com/s.json"}"#))]);
        assert!(remote.is_err());
    }
}
