//! The value types of a generic component's functions: [`WitType`], a closed copy of the
//! WIT types a tool can take or return, and the JSON Schema of the JSON shape of each
//! ([`schema`], [`params_schema`]). The runtime converts values strictly, both ways, in
//! these shapes:
//!
//! | WIT | JSON |
//! | --- | --- |
//! | `bool` | `true` / `false` |
//! | `s8`..`u64` | an integer in the type's range (`3.0` is accepted, `3.5` is not) |
//! | `f32`, `f64` | a number; a NaN or infinity coming out of a component becomes `null` |
//! | `char` | a string of exactly one Unicode scalar value |
//! | `string` | a string |
//! | `list<T>` | an array (`list<u8>` too: an array of integers) |
//! | `option<T>` | `null` for `none`, the value for `some`; `option<option<T>>` writes an outer `some` as `{"some": …}` |
//! | `result<T, E>` | `{"ok": …}` or `{"err": …}` (`null` when the side has no type) |
//! | `tuple<…>` | an array of exactly that many items |
//! | `record` | an object with every field; `option` fields may be left out; no other keys |
//! | `variant` | an object with exactly one key, the case name: `{"circle": 2.0}`, `{"empty": null}` |
//! | `enum` | the case name as a string |
//! | `flags` | an array of the names of the set flags, each at most once |
//!
//! `u64` and `s64` are written as exact JSON integers. JSON itself has no integer limit,
//! but clients that read numbers as doubles (JavaScript) round values beyond 2^53.

use std::fmt;

use serde_json::{Value, json};

/// A WIT type a tool can take or return. Resources, futures, streams and error contexts
/// have no JSON form: functions using them are refused before a `WitType` is built.
#[derive(Clone, Debug, PartialEq)]
pub enum WitType {
    /// `bool`
    Bool,
    /// `s8`
    S8,
    /// `u8`
    U8,
    /// `s16`
    S16,
    /// `u16`
    U16,
    /// `s32`
    S32,
    /// `u32`
    U32,
    /// `s64`
    S64,
    /// `u64`
    U64,
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `char`
    Char,
    /// `string`
    String,
    /// `list<T>`
    List(Box<WitType>),
    /// `option<T>`
    Option(Box<WitType>),
    /// `result<T, E>`, either side possibly absent.
    Result {
        /// The `ok` type, if any.
        ok: Option<Box<WitType>>,
        /// The `err` type, if any.
        err: Option<Box<WitType>>,
    },
    /// `tuple<…>`
    Tuple(Vec<WitType>),
    /// `record { … }`: field names and types, in order.
    Record(Vec<(String, WitType)>),
    /// `variant { … }`: case names and payload types, in order.
    Variant(Vec<(String, Option<WitType>)>),
    /// `enum { … }`
    Enum(Vec<String>),
    /// `flags { … }`
    Flags(Vec<String>),
}

impl fmt::Display for WitType {
    /// The type as WIT would spell it, with records, variants, enums and flags written
    /// out structurally (their names are not kept).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, items: &mut dyn Iterator<Item = String>| -> fmt::Result {
            f.write_str(&items.collect::<Vec<_>>().join(", "))
        };
        match self {
            WitType::Bool => f.write_str("bool"),
            WitType::S8 => f.write_str("s8"),
            WitType::U8 => f.write_str("u8"),
            WitType::S16 => f.write_str("s16"),
            WitType::U16 => f.write_str("u16"),
            WitType::S32 => f.write_str("s32"),
            WitType::U32 => f.write_str("u32"),
            WitType::S64 => f.write_str("s64"),
            WitType::U64 => f.write_str("u64"),
            WitType::F32 => f.write_str("f32"),
            WitType::F64 => f.write_str("f64"),
            WitType::Char => f.write_str("char"),
            WitType::String => f.write_str("string"),
            WitType::List(t) => write!(f, "list<{t}>"),
            WitType::Option(t) => write!(f, "option<{t}>"),
            WitType::Result { ok, err } => match (ok, err) {
                (None, None) => f.write_str("result"),
                (Some(ok), None) => write!(f, "result<{ok}>"),
                (None, Some(err)) => write!(f, "result<_, {err}>"),
                (Some(ok), Some(err)) => write!(f, "result<{ok}, {err}>"),
            },
            WitType::Tuple(items) => {
                f.write_str("tuple<")?;
                list(f, &mut items.iter().map(ToString::to_string))?;
                f.write_str(">")
            }
            WitType::Record(fields) => {
                f.write_str("record { ")?;
                list(f, &mut fields.iter().map(|(n, t)| format!("{n}: {t}")))?;
                f.write_str(" }")
            }
            WitType::Variant(cases) => {
                f.write_str("variant { ")?;
                list(f, &mut cases.iter().map(|(n, t)| t.as_ref().map_or_else(|| n.clone(), |t| format!("{n}({t})"))))?;
                f.write_str(" }")
            }
            WitType::Enum(cases) => write!(f, "enum {{ {} }}", cases.join(", ")),
            WitType::Flags(names) => write!(f, "flags {{ {} }}", names.join(", ")),
        }
    }
}

impl WitType {
    /// What a JSON value of this type looks like, for error messages.
    pub fn expected(&self) -> String {
        match self {
            WitType::Bool => "bool (true or false)".into(),
            WitType::Char => "char (a string of one character)".into(),
            WitType::String => "string".into(),
            WitType::F32 | WitType::F64 => format!("{self} (a number)"),
            WitType::List(t) => format!("list<{t}> (an array)"),
            WitType::Option(t) => format!("option<{t}> (null or the value)"),
            WitType::Result { .. } => format!("{self} (an object {{\"ok\": …}} or {{\"err\": …}})"),
            WitType::Tuple(items) => format!("{self} (an array of {} items)", items.len()),
            WitType::Record(fields) => {
                format!("record (an object with fields {})", fields.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", "))
            }
            WitType::Variant(cases) => format!(
                "variant (an object with one key, one of {})",
                cases.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
            WitType::Enum(cases) => {
                format!("enum (one of {})", cases.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "))
            }
            WitType::Flags(names) => format!(
                "flags (an array of distinct names from {})",
                names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
            ),
            int => {
                let (min, max) = int.int_range().expect("every other type is an integer");
                format!("{int} ({min}..={max})")
            }
        }
    }

    /// The range of an integer type, as `i128` so that every bound fits.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        Some(match self {
            WitType::S8 => (i8::MIN.into(), i8::MAX.into()),
            WitType::U8 => (0, u8::MAX.into()),
            WitType::S16 => (i16::MIN.into(), i16::MAX.into()),
            WitType::U16 => (0, u16::MAX.into()),
            WitType::S32 => (i32::MIN.into(), i32::MAX.into()),
            WitType::U32 => (0, u32::MAX.into()),
            WitType::S64 => (i64::MIN.into(), i64::MAX.into()),
            WitType::U64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// Whether a record field or parameter of this type may be left out (it is an `option`).
    pub fn optional(&self) -> bool {
        matches!(self, WitType::Option(_))
    }
}

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
