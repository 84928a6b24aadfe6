//! [`ToolSpec`]: one tool of a skill as the host and agents see it, validated from
//! whatever the runtime reported.

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
    /// Unique within the skill: `^[a-z][a-z0-9_-]*$`, at most 64 bytes.
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

fn validate_tool_name(name: &str) -> Result<(), &'static str> {
    let mut bytes = name.bytes();
    match bytes.next() {
        None => Err("the name is empty"),
        Some(b) if !b.is_ascii_lowercase() => Err("the name must start with a lowercase letter"),
        _ if name.len() > MAX_TOOL_NAME => Err("the name is longer than 64 bytes"),
        _ if !bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-') => {
            Err("the name may contain only a-z, 0-9, `_` and `-`")
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
        let table = [
            ("Bad", "{}", "start with a lowercase letter"),
            ("a b", "{}", "only a-z"),
            ("ok", "not json", "input schema is not JSON"),
            ("ok", "3", "must be a JSON Schema object"),
        ];
        for (name, schema, expected) in table {
            let err = ToolSpec::from_parts(name.into(), "d".into(), schema, None, Annotations::default(), &[]).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
    }
}
