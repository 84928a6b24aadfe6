//! [`ToolSpec`]: one tool of a skill as the host and agents see it, validated from
//! whatever the runtime reported; [`OutputSchemas`]: the declared output schemas,
//! compiled once per loaded skill, that every output is checked against before it
//! leaves the runtime.
//!
//! What a skill writes about its tools ends up in an agent's context, so it is bounded
//! where both runtimes build it: a description is at most [`MAX_TOOL_DESCRIPTION`]
//! bytes, a schema [`MAX_TOOL_SCHEMA`], all of a skill's descriptions together
//! [`MAX_SKILL_DESCRIPTIONS`] and its schemas [`MAX_SKILL_SCHEMAS`]; and no tool may be
//! named like one of the host's own MCP tools ([`RESERVED_TOOL_NAMES`]). A skill past a
//! cap does not load: the error names the skill, the tool, the size and the cap.
//!
//! Its texts follow the one text rule ([`crate::text`]): a description, and every
//! `description`, `title` and `$comment` inside a schema, may hold line breaks and tabs
//! but no other control character and no bidirectional control; a schema's keys may hold
//! neither. Schemas are advertised as the skill wrote them but for `format`: one outside
//! the JSON Schema 2020-12 vocabulary ([`STANDARD_FORMATS`]) is dropped at load
//! ([`standard_formats`]), as clients' validators warn about each (`uint32`, `double`),
//! and no validator asserts a format it does not know.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::text::{self, TextKind};

/// Longest tool name, in bytes.
const MAX_TOOL_NAME: usize = 64;
/// Most tools one skill may offer.
pub const MAX_TOOLS: usize = 256;
/// Longest tool description, in bytes: what a tool does, not its manual (that belongs
/// in SKILL.md).
pub const MAX_TOOL_DESCRIPTION: usize = 4 * 1024;
/// Longest input or output schema of one tool, in bytes of JSON.
pub const MAX_TOOL_SCHEMA: usize = 64 * 1024;
/// Most bytes of tool descriptions one skill may have over all its tools.
pub const MAX_SKILL_DESCRIPTIONS: usize = 64 * 1024;
/// Most bytes of schemas (input and output) one skill may have over all its tools.
pub const MAX_SKILL_SCHEMAS: usize = 1024 * 1024;
/// Most examples one tool may give, and the longest one, in bytes of JSON.
pub const MAX_TOOL_EXAMPLES: usize = 16;
const MAX_TOOL_EXAMPLE: usize = 4 * 1024;
/// The names of the host's own MCP tools. No skill may name a tool like one of them:
/// MCP names skill tools `SKILL__TOOL`, but agents, clients that show bare tool names and
/// `tool_search`'s `exact` mode (which matches bare names) would take it for the host's.
pub const RESERVED_TOOL_NAMES: &[&str] =
    &["tool_search", "skill_list", "skill_search", "skill_get", "read_skill_resource", "skill_run", "skill_create", "skill_update"];

/// Behaviour hints, mirrored to MCP tool annotations. Hints only: the grant decides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
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
        if RESERVED_TOOL_NAMES.contains(&name.as_str()) {
            return Err(fail(format!(
                "the name is the host's: `{name}` is a built-in MCP tool of skillhost, and agents would take this one for it; rename the tool"
            )));
        }
        // Sizes first, before any parsing: a 2 MB description is refused unread.
        let too_big = |what: &str, size: usize, cap: usize, fix: &str| {
            fail(format!("its {what} is {size} bytes, over the cap of {cap} bytes per tool; {fix}"))
        };
        if description.len() > MAX_TOOL_DESCRIPTION {
            return Err(too_big(
                "description",
                description.len(),
                MAX_TOOL_DESCRIPTION,
                "say what the tool does in a few lines and put the rest in SKILL.md",
            ));
        }
        for (what, text) in [("input schema", Some(input_schema)), ("output schema", output_schema)] {
            if let Some(text) = text.filter(|t| t.len() > MAX_TOOL_SCHEMA) {
                return Err(too_big(what, text.len(), MAX_TOOL_SCHEMA, "simplify the schema"));
            }
        }
        if examples.len() > MAX_TOOL_EXAMPLES {
            return Err(fail(format!("it gives {} examples, more than {MAX_TOOL_EXAMPLES}", examples.len())));
        }
        if let Some(example) = examples.iter().find(|e| e.len() > MAX_TOOL_EXAMPLE) {
            return Err(too_big("example", example.len(), MAX_TOOL_EXAMPLE, "give a smaller example"));
        }
        let schema = |text: &str, what: &str| -> Result<Value, ToolSpecError> {
            let value: Value = serde_json::from_str(text).map_err(|e| fail(format!("{what} is not JSON: {e}")))?;
            if !value.is_object() && !value.is_boolean() {
                return Err(fail(format!("{what} must be a JSON Schema object")));
            }
            Ok(value)
        };
        let text_in = |what: &str, at: &str, found: text::Forbidden| {
            let at = if at.is_empty() { String::new() } else { format!(" at `{at}`") };
            fail(format!("its {what} holds {found}{at}; remove it: tool texts are read by humans and agents, never terminal controls"))
        };
        text::check(&description, TextKind::Prose).map_err(|f| text_in("description", "", f))?;
        let mut input_schema = schema(input_schema, "input schema")?;
        let mut output_schema = output_schema.map(|s| schema(s, "output schema")).transpose()?;
        for (what, schema) in [("input schema", Some(&mut input_schema)), ("output schema", output_schema.as_mut())] {
            let Some(schema) = schema else { continue };
            check_schema_text(schema, &mut String::new()).map_err(|(at, f)| text_in(what, &at, f))?;
            standard_formats(schema);
        }
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
    /// Every runtime builds these once per load, over all the skill's tools, so this is
    /// also where the caps over a whole skill are applied ([`check_skill_tools`]).
    pub fn new(tools: &[ToolSpec]) -> Result<Self, ToolSpecError> {
        check_skill_tools(tools)?;
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
    pub fn check(&self, tool: &str, output: &Value) -> Result<(), OutputMismatch> {
        let Some(validator) = self.by_tool.get(tool) else { return Ok(()) };
        let mut errors = validator.iter_errors(output);
        let Some(first) = errors.next() else { return Ok(()) };
        let at = first.instance_path().to_string();
        let at = if at.is_empty() { "the output".to_owned() } else { format!("output{at}") };
        Err(OutputMismatch { at, first: first.to_string(), more: errors.next().is_some() })
    }
}

/// Make what compiling any output schema needs and builds once per process: the
/// validator of the JSON Schema meta-schema (draft 2020-12, what schemars and the SDKs
/// declare), which each schema is checked against before it compiles. A host calls it
/// on a thread of its own as it starts, so that its first load does not wait for it.
pub fn prepare_output_checks() {
    let _ = jsonschema::meta::is_valid(&Value::Object(serde_json::Map::new()));
}

/// An output that does not fit its tool's declared schema (see [`OutputSchemas::check`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{at} does not match the declared output schema: {first}{}", if *more { " (and further mismatches)" } else { "" })]
pub struct OutputMismatch {
    /// Where: `the output`, or `output` and a JSON pointer into it.
    pub at: String,
    /// The first mismatch, as the validator words it.
    pub first: String,
    /// Whether there are more.
    pub more: bool,
}

impl std::fmt::Debug for OutputSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_tool.keys()).finish()
    }
}

/// The caps over all of one skill's tools: [`MAX_SKILL_DESCRIPTIONS`] bytes of
/// descriptions and [`MAX_SKILL_SCHEMAS`] of schemas. The error names the tool that
/// went past the cap.
pub fn check_skill_tools(tools: &[ToolSpec]) -> Result<(), ToolSpecError> {
    let (mut descriptions, mut schemas) = (0usize, 0usize);
    for tool in tools {
        descriptions += tool.description.len();
        schemas += tool.input_schema.to_string().len() + tool.output_schema.as_ref().map_or(0, |s| s.to_string().len());
        let over = |what: &str, total: usize, cap: usize, fix: &str| ToolSpecError {
            tool: tool.name.clone(),
            reason: format!("with it the skill's tool {what} come to {total} bytes, over the cap of {cap} bytes per skill; {fix}"),
        };
        if descriptions > MAX_SKILL_DESCRIPTIONS {
            return Err(over("descriptions", descriptions, MAX_SKILL_DESCRIPTIONS, "shorten the descriptions or split the skill"));
        }
        if schemas > MAX_SKILL_SCHEMAS {
            return Err(over("schemas", schemas, MAX_SKILL_SCHEMAS, "simplify the schemas or split the skill"));
        }
    }
    Ok(())
}

/// The `format` values of the JSON Schema 2020-12 vocabulary, the only ones the host
/// advertises.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose values are instances (data), not schemas: nothing in them is a
/// schema's `format`.
const INSTANCE_KEYWORDS: &[&str] = &["const", "enum", "default", "examples"];
/// Keywords whose values map names to schemas.
const NAMED_SCHEMAS: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];

/// Drop every `format` of `schema` that is not in [`STANDARD_FORMATS`] (`uint32`,
/// `int64`, `double`: what schemars and other generators write for number widths).
/// Validation is unchanged: validators assert no format they do not know, and a range is
/// already written as `minimum`/`maximum` by generators that mean one.
pub fn standard_formats(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("format").and_then(Value::as_str).is_some_and(|f| !STANDARD_FORMATS.contains(&f)) {
                map.remove("format");
            }
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    (key, _) if INSTANCE_KEYWORDS.contains(&key) => {}
                    // Maps of names to schemas: a property may be named `default`.
                    (key, Value::Object(named)) if NAMED_SCHEMAS.contains(&key) => named.values_mut().for_each(standard_formats),
                    (_, value) => standard_formats(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(standard_formats),
        _ => {}
    }
}

/// Check the text rule inside a schema: every key as one line, every `description`,
/// `title` and `$comment` as prose. The error carries the place (a JSON pointer).
fn check_schema_text(schema: &Value, at: &mut String) -> Result<(), (String, text::Forbidden)> {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&text::visible(&key.replace('~', "~0").replace('/', "~1")));
                text::check(key, TextKind::Line).map_err(|f| (at.clone(), f))?;
                match value {
                    Value::String(s) if matches!(key.as_str(), "description" | "title" | "$comment") => {
                        text::check(s, TextKind::Prose).map_err(|f| (at.clone(), f))?
                    }
                    _ => check_schema_text(value, at)?,
                }
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                check_schema_text(item, at)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
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
        assert!(
            ToolSpec::from_parts("getCurrentTime".into(), "d".into(), "{}", None, Annotations::default(), &[]).is_ok(),
            "camelCase, as third-party servers name tools"
        );
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

    #[test]
    fn tool_text_is_capped_per_tool_and_per_skill() {
        let spec = |name: &str, description: String, schema: &str| {
            ToolSpec::from_parts(name.into(), description, schema, None, Annotations::default(), &[])
        };
        assert!(spec("ok", "d".repeat(MAX_TOOL_DESCRIPTION), "{}").is_ok());
        let err = spec("big", "d".repeat(2_000_000), "{}").unwrap_err();
        assert_eq!(err.tool, "big");
        assert!(err.reason.contains("description is 2000000 bytes, over the cap of 4096 bytes per tool"), "{err}");
        let wide = format!("{{\"description\": \"{}\"}}", "s".repeat(MAX_TOOL_SCHEMA));
        let err = spec("wide", "d".into(), &wide).unwrap_err();
        assert!(err.reason.contains("input schema is") && err.reason.contains("65536 bytes per tool"), "{err}");
        let examples: Vec<String> = vec!["1".into(); MAX_TOOL_EXAMPLES + 1];
        assert!(ToolSpec::from_parts("ex".into(), "d".into(), "{}", None, Annotations::default(), &examples).is_err());

        let tools: Vec<ToolSpec> = (0..20).map(|i| spec(&format!("t{i}"), "d".repeat(4000), "{}").unwrap()).collect();
        let err = check_skill_tools(&tools).unwrap_err();
        assert_eq!(err.tool, "t16", "the tool that went past the cap is named");
        assert!(err.reason.contains("descriptions come to 68000 bytes, over the cap of 65536 bytes per skill"), "{err}");
        assert!(OutputSchemas::new(&tools).is_err(), "both runtimes apply the per-skill caps through OutputSchemas");
        assert!(check_skill_tools(&tools[..16]).is_ok());
    }

    #[test]
    fn terminal_controls_in_tool_texts_are_refused() {
        let spec = |description: &str, schema: &str| {
            ToolSpec::from_parts("t".into(), description.into(), schema, None, Annotations::default(), &[])
        };
        assert!(spec("two\nlines\tok", r#"{"description": "a\nb"}"#).is_ok(), "prose keeps line breaks and tabs");
        // (description, input schema, what the error says)
        let table = [
            ("harmless\u{1b}[2K", "{}", "its description holds a control character (U+001B at byte 8)"),
            ("a\rb", "{}", "its description holds a control character (U+000D at byte 1)"),
            ("x\u{202E}y", "{}", "its description holds a bidirectional text control (U+202E at byte 1)"),
            (
                "d",
                r#"{"properties": {"q": {"description": "\u001b[1A"}}}"#,
                "its input schema holds a control character (U+001B at byte 0) at `/properties/q/description`",
            ),
            ("d", r#"{"title": "\u2067"}"#, "its input schema holds a bidirectional text control (U+2067 at byte 0) at `/title`"),
            ("d", r#"{"properties": {"q\u0007": {}}}"#, "at `/properties/q\\x07`"),
        ];
        for (description, schema, expected) in table {
            let err = spec(description, schema).unwrap_err();
            assert_eq!(err.tool, "t");
            assert!(err.reason.contains(expected), "{description:?} {schema}: {err}");
        }
        let out = ToolSpec::from_parts("t".into(), "d".into(), "{}", Some(r#"{"description": "\u0085"}"#), Annotations::default(), &[]);
        assert!(out.unwrap_err().reason.contains("its output schema holds a control character (U+0085"));
    }

    #[test]
    fn non_standard_formats_are_dropped_at_load() {
        let schema = r#"{
            "type": "object",
            "format": "uint",
            "properties": {
                "n": {"type": "integer", "format": "uint32", "minimum": 0},
                "x": {"type": "number", "format": "double"},
                "when": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "format": "email"},
                "default": {"type": "integer", "format": "int32"},
                "list": {"type": "array", "items": [{"format": "int64"}]}
            },
            "default": {"format": "uint8"},
            "$defs": {"D": {"anyOf": [{"format": "float"}, {"format": "uuid"}]}}
        }"#;
        let tool = ToolSpec::from_parts("t".into(), "d".into(), schema, Some(schema), Annotations::default(), &[]).unwrap();
        let expected = serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 0},
                "x": {"type": "number"},
                "when": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "format": "email"},
                "default": {"type": "integer"},
                "list": {"type": "array", "items": [{}]}
            },
            "default": {"format": "uint8"},
            "$defs": {"D": {"anyOf": [{}, {"format": "uuid"}]}}
        });
        assert_eq!(tool.input_schema, expected);
        assert_eq!(tool.output_schema, Some(expected));
    }

    #[test]
    fn built_in_names_are_refused() {
        for name in RESERVED_TOOL_NAMES {
            let err = ToolSpec::from_parts((*name).into(), "d".into(), "{}", None, Annotations::default(), &[]).unwrap_err();
            assert!(err.reason.contains("built-in MCP tool"), "{err}");
        }
        assert!(ToolSpec::from_parts("tool_searcher".into(), "d".into(), "{}", None, Annotations::default(), &[]).is_ok());
    }

    fn with_output(name: &str, schema: Option<&str>) -> ToolSpec {
        ToolSpec::from_parts(name.into(), "d".into(), "{}", schema, Annotations::default(), &[]).unwrap()
    }

    #[test]
    fn outputs_are_checked_against_their_declared_schema() {
        let count = r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}"#;
        let schemas = OutputSchemas::new(&[with_output("count", Some(count)), with_output("free", None)]).unwrap();
        assert_eq!(schemas.check("count", &serde_json::json!({"count": 3})), Ok(()));
        let wrong = schemas.check("count", &serde_json::json!({"count": "many"})).unwrap_err().to_string();
        assert!(wrong.starts_with("output/count does not match the declared output schema"), "{wrong}");
        assert!(wrong.contains("\"many\" is not of type \"integer\""), "{wrong}");
        let missing = schemas.check("count", &serde_json::json!({})).unwrap_err().to_string();
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
