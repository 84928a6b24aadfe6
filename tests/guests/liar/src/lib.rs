//! Test fixture `liar`: a skill built straight on the `skillhost:skill` world with
//! wit-bindgen, without the SDK (which can only produce well-formed output), so that
//! it can break every promise the world asks of a call's output:
//!
//! - `invalid_json` returns text that is not JSON;
//! - `wrong_schema` declares an output schema (`{"count": integer}`) and returns
//!   `{"count": "many"}`;
//! - `missing_field` returns `{}` for the same schema;
//! - `honest` returns `{"count": 3}` (the control: the same schema, kept);
//! - `not_utf8` returns a string whose bytes are not UTF-8, which the canonical ABI
//!   forbids.

// The generated bindings use `unsafe` and `export_name` for the canonical ABI, and
// `not_utf8` builds an invalid `String` on purpose.
#![allow(missing_docs, unsafe_code)]

wit_bindgen::generate!({ world: "skill", path: "../../../wit" });

use exports::skillhost::skill::guest::{CallError, Guest, Tool};
use skillhost::skill::types::Annotations;

const COUNT_SCHEMA: &str = r#"{"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}"#;

struct Liar;

fn tool(name: &str, description: &str, output_schema: Option<&str>) -> Tool {
    Tool {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: r#"{"type": "object"}"#.to_owned(),
        output_schema: output_schema.map(str::to_owned),
        annotations: Annotations { read_only: true, destructive: false, idempotent: true, open_world: false },
        examples: Vec::new(),
    }
}

impl Guest for Liar {
    fn tools() -> Vec<Tool> {
        vec![
            tool("invalid_json", "Return text that is not JSON.", None),
            tool("wrong_schema", "Return a count that is a string.", Some(COUNT_SCHEMA)),
            tool("missing_field", "Return an object without the required count.", Some(COUNT_SCHEMA)),
            tool("honest", "Return a count of 3.", Some(COUNT_SCHEMA)),
            tool("not_utf8", "Return bytes that are not UTF-8.", None),
        ]
    }

    fn call(tool: String, _input: String) -> Result<String, CallError> {
        Ok(match tool.as_str() {
            "invalid_json" => r#"{"count": 3"#.to_owned(),
            "wrong_schema" => r#"{"count": "many"}"#.to_owned(),
            "missing_field" => "{}".to_owned(),
            "honest" => r#"{"count": 3}"#.to_owned(),
            // SAFETY: none; this is the lie. The host must refuse it when lifting.
            "not_utf8" => unsafe { String::from_utf8_unchecked(vec![b'"', 0xff, 0xfe, b'"']) },
            other => return Err(CallError::UnknownTool(other.to_owned())),
        })
    }
}

export!(Liar);
