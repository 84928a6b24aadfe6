//! JSON Schema (draft 2020-12) for the JSON shape of each [`WitType`] (see `value.rs` for
//! the shapes), and for a function's parameters as one object.

use serde_json::{Value, json};

use crate::value::WitType;

/// The schema of a tool's input: one object whose properties are the parameters, by
/// their WIT names; `option` parameters may be left out; no other keys.
pub fn params_schema(params: &[(String, WitType)]) -> Value {
    object_schema(params)
}

/// The schema of values of `ty`.
pub fn schema(ty: &WitType) -> Value {
    match ty {
        WitType::Bool => json!({"type": "boolean"}),
        WitType::F32 => json!({"type": "number", "minimum": -f64::from(f32::MAX), "maximum": f64::from(f32::MAX)}),
        WitType::F64 => json!({"type": "number"}),
        WitType::Char => json!({"type": "string", "minLength": 1, "maxLength": 1, "description": "one Unicode character"}),
        WitType::String => json!({"type": "string"}),
        WitType::List(item) => json!({"type": "array", "items": schema(item)}),
        WitType::Option(inner) => {
            if matches!(**inner, WitType::Option(_)) {
                json!({"anyOf": [{"type": "null"}, single_key("some", Some(inner))]})
            } else {
                json!({"anyOf": [{"type": "null"}, schema(inner)]})
            }
        }
        WitType::Result { ok, err } => {
            json!({"oneOf": [single_key("ok", ok.as_deref()), single_key("err", err.as_deref())]})
        }
        WitType::Tuple(items) => json!({
            "type": "array",
            "prefixItems": items.iter().map(schema).collect::<Vec<_>>(),
            "items": false,
            "minItems": items.len(),
            "maxItems": items.len(),
        }),
        WitType::Record(fields) => object_schema(fields),
        WitType::Variant(cases) => {
            json!({"oneOf": cases.iter().map(|(name, t)| single_key(name, t.as_ref())).collect::<Vec<_>>()})
        }
        WitType::Enum(cases) => json!({"type": "string", "enum": cases}),
        WitType::Flags(names) => json!({"type": "array", "items": {"type": "string", "enum": names}, "uniqueItems": true}),
        int => {
            let (min, max) = int.int_range().expect("every other type is an integer");
            // i128 bounds fit i64 or u64 for every WIT integer.
            let bound = |n: i128| u64::try_from(n).map_or_else(|_| json!(n as i64), |u| json!(u));
            json!({"type": "integer", "minimum": bound(min), "maximum": bound(max)})
        }
    }
}

/// `{"KEY": VALUE}` and nothing else; a missing type means the value is `null`.
fn single_key(key: &str, ty: Option<&WitType>) -> Value {
    let value = ty.map_or_else(|| json!({"type": "null"}), schema);
    json!({"type": "object", "properties": {key: value}, "required": [key], "additionalProperties": false})
}

fn object_schema(fields: &[(String, WitType)]) -> Value {
    let properties: serde_json::Map<String, Value> = fields.iter().map(|(n, t)| (n.clone(), schema(t))).collect();
    let required: Vec<&str> = fields.iter().filter(|(_, t)| !t.optional()).map(|(n, _)| n.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}
