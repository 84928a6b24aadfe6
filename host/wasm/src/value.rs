//! The strict conversion between JSON and a generic component's values ([`Val`]), in both
//! directions, in the JSON shape of each [`WitType`] (see `skillhost_package::WitType`).

use serde_json::{Map, Number, Value};
use skillhost_package::WitType;
use wasmtime::component::Val;

/// Why a JSON value does not fit a WIT type (or a component value does not fit the type
/// the host expected). Displays as `PATH: expected TYPE, got VALUE`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ValueError {
    /// Where in the value: `input.points[2].x`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn mismatch(path: &str, ty: &WitType, got: &Value) -> ValueError {
    ValueError { path: path.to_owned(), message: format!("expected {}, got {}", ty.expected(), describe(got)) }
}

/// A JSON value, shortened for an error message.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    let kind = match value {
        Value::Null => return "null".into(),
        Value::Bool(_) | Value::Number(_) => return text,
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    if text.len() <= 40 {
        format!("{kind} {text}")
    } else {
        let mut cut = 37;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{kind} {}...", &text[..cut])
    }
}

/// Convert JSON to a component value of type `ty`; `path` names the value in errors.
pub fn json_to_val(ty: &WitType, value: &Value, path: &str) -> Result<Val, ValueError> {
    let bad = || mismatch(path, ty, value);
    Ok(match ty {
        WitType::Bool => Val::Bool(value.as_bool().ok_or_else(bad)?),
        WitType::S8 | WitType::U8 | WitType::S16 | WitType::U16 | WitType::S32 | WitType::U32 | WitType::S64 | WitType::U64 => {
            let n = integer(value).ok_or_else(bad)?;
            let (min, max) = ty.int_range().expect("an integer type");
            if n < min || n > max {
                return Err(bad());
            }
            // The range check above makes every conversion below exact.
            match ty {
                WitType::S8 => Val::S8(n as i8),
                WitType::U8 => Val::U8(n as u8),
                WitType::S16 => Val::S16(n as i16),
                WitType::U16 => Val::U16(n as u16),
                WitType::S32 => Val::S32(n as i32),
                WitType::U32 => Val::U32(n as u32),
                WitType::S64 => Val::S64(n as i64),
                _ => Val::U64(n as u64),
            }
        }
        WitType::F32 => {
            let n = value.as_f64().ok_or_else(bad)?;
            if n.abs() > f64::from(f32::MAX) {
                return Err(ValueError {
                    path: path.to_owned(),
                    message: format!("expected f32 (a number of magnitude at most {:e}), got {n:e}", f32::MAX),
                });
            }
            Val::Float32(n as f32)
        }
        WitType::F64 => Val::Float64(value.as_f64().ok_or_else(bad)?),
        WitType::Char => {
            let s = value.as_str().ok_or_else(bad)?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(bad()),
            }
        }
        WitType::String => Val::String(value.as_str().ok_or_else(bad)?.to_owned()),
        WitType::List(item) => {
            let items = value.as_array().ok_or_else(bad)?;
            Val::List(items.iter().enumerate().map(|(i, v)| json_to_val(item, v, &format!("{path}[{i}]"))).collect::<Result<_, _>>()?)
        }
        WitType::Option(inner) => {
            if value.is_null() {
                Val::Option(None)
            } else if matches!(**inner, WitType::Option(_)) {
                let object = single_key(value, &["some"]).ok_or_else(bad)?;
                Val::Option(Some(Box::new(json_to_val(inner, object.1, &format!("{path}.some"))?)))
            } else {
                Val::Option(Some(Box::new(json_to_val(inner, value, path)?)))
            }
        }
        WitType::Result { ok, err } => {
            let (key, payload) = single_key(value, &["ok", "err"]).ok_or_else(bad)?;
            let side = if key == "ok" { ok } else { err };
            let payload_path = format!("{path}.{key}");
            let payload = match side {
                Some(t) => Some(Box::new(json_to_val(t, payload, &payload_path)?)),
                None if payload.is_null() => None,
                None => {
                    return Err(ValueError {
                        path: payload_path,
                        message: format!("expected null (this side has no value), got {}", describe(payload)),
                    });
                }
            };
            Val::Result(if key == "ok" { Ok(payload) } else { Err(payload) })
        }
        WitType::Tuple(types) => {
            let items = value.as_array().filter(|a| a.len() == types.len()).ok_or_else(bad)?;
            Val::Tuple(
                types
                    .iter()
                    .zip(items)
                    .enumerate()
                    .map(|(i, (t, v))| json_to_val(t, v, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        WitType::Record(fields) => Val::Record(object_to_fields(fields, value, path, ty)?),
        WitType::Variant(cases) => {
            let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
            let (key, payload) = single_key(value, &names).ok_or_else(bad)?;
            let (name, payload_ty) = cases.iter().find(|(n, _)| n == key).expect("single_key matched a case");
            let payload_path = format!("{path}.{key}");
            let payload = match payload_ty {
                Some(t) => Some(Box::new(json_to_val(t, payload, &payload_path)?)),
                None if payload.is_null() => None,
                None => {
                    return Err(ValueError {
                        path: payload_path,
                        message: format!("expected null (case `{name}` has no value), got {}", describe(payload)),
                    });
                }
            };
            Val::Variant(name.clone(), payload)
        }
        WitType::Enum(cases) => {
            let case = value.as_str().filter(|s| cases.iter().any(|c| c == s)).ok_or_else(bad)?;
            Val::Enum(case.to_owned())
        }
        WitType::Flags(names) => {
            let items = value.as_array().ok_or_else(bad)?;
            let mut set = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let flag =
                    item.as_str().filter(|s| names.iter().any(|n| n == s)).ok_or_else(|| mismatch(&format!("{path}[{i}]"), ty, item))?;
                if set.iter().any(|f| f == flag) {
                    return Err(ValueError { path: format!("{path}[{i}]"), message: format!("flag \"{flag}\" is given twice") });
                }
                set.push(flag.to_owned());
            }
            Val::Flags(set)
        }
    })
}

/// Convert a JSON object to the named, ordered values of `fields` (a record's fields or
/// a function's parameters): every non-`option` field present, no unknown keys.
pub fn object_to_fields(fields: &[(String, WitType)], value: &Value, path: &str, ty: &WitType) -> Result<Vec<(String, Val)>, ValueError> {
    let object = value.as_object().ok_or_else(|| mismatch(path, ty, value))?;
    if let Some(unknown) = object.keys().find(|k| !fields.iter().any(|(n, _)| n == *k)) {
        let known: Vec<String> = fields.iter().map(|(n, _)| format!("`{n}`")).collect();
        return Err(ValueError {
            path: format!("{path}.{unknown}"),
            message: format!("unknown field; expected only {}", if known.is_empty() { "no fields".into() } else { known.join(", ") }),
        });
    }
    fields
        .iter()
        .map(|(name, field_ty)| {
            let field_path = format!("{path}.{name}");
            let val = match object.get(name) {
                Some(v) => json_to_val(field_ty, v, &field_path)?,
                None if field_ty.optional() => Val::Option(None),
                None => return Err(ValueError { path: field_path, message: format!("missing; expected {}", field_ty.expected()) }),
            };
            Ok((name.clone(), val))
        })
        .collect()
}

/// An exact integer from JSON: integers as written, or a float with no fractional part
/// that is exactly representable (`3.0`; never `3.5`).
fn integer(value: &Value) -> Option<i128> {
    let n = value.as_number()?;
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    let f = n.as_f64()?;
    if f.fract() != 0.0 {
        return None;
    }
    // Within these bounds the casts are exact; beyond them no WIT integer fits anyway.
    let two_63 = (1u64 << 63) as f64;
    if (-two_63..two_63).contains(&f) {
        Some(f as i64 as i128)
    } else if (0.0..2.0 * two_63).contains(&f) {
        Some(f as u64 as i128)
    } else {
        None
    }
}

/// The one key of a single-key object, if it is one of `keys`, and its value.
fn single_key<'a>(value: &'a Value, keys: &[&str]) -> Option<(&'a str, &'a Value)> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (key, payload) = object.iter().next()?;
    keys.contains(&key.as_str()).then_some((key.as_str(), payload))
}

/// Convert a component value of type `ty` to JSON (the inverse of [`json_to_val`]);
/// `path` names the value in errors, which mean the component returned a value of
/// another type than it declared.
pub fn val_to_json(ty: &WitType, val: &Val, path: &str) -> Result<Value, ValueError> {
    let bad = || ValueError { path: path.to_owned(), message: format!("expected {ty}, the component returned {val:?}") };
    Ok(match (ty, val) {
        (WitType::Bool, Val::Bool(b)) => Value::Bool(*b),
        (WitType::S8, Val::S8(n)) => Value::from(*n),
        (WitType::U8, Val::U8(n)) => Value::from(*n),
        (WitType::S16, Val::S16(n)) => Value::from(*n),
        (WitType::U16, Val::U16(n)) => Value::from(*n),
        (WitType::S32, Val::S32(n)) => Value::from(*n),
        (WitType::U32, Val::U32(n)) => Value::from(*n),
        (WitType::S64, Val::S64(n)) => Value::from(*n),
        (WitType::U64, Val::U64(n)) => Value::from(*n),
        (WitType::F32, Val::Float32(n)) => float(f64::from(*n)),
        (WitType::F64, Val::Float64(n)) => float(*n),
        (WitType::Char, Val::Char(c)) => Value::String(c.to_string()),
        (WitType::String, Val::String(s)) => Value::String(s.clone()),
        (WitType::List(item), Val::List(items)) => {
            Value::Array(items.iter().enumerate().map(|(i, v)| val_to_json(item, v, &format!("{path}[{i}]"))).collect::<Result<_, _>>()?)
        }
        (WitType::Option(_), Val::Option(None)) => Value::Null,
        (WitType::Option(inner), Val::Option(Some(v))) => {
            if matches!(**inner, WitType::Option(_)) {
                let mut object = Map::new();
                object.insert("some".into(), val_to_json(inner, v, &format!("{path}.some"))?);
                Value::Object(object)
            } else {
                val_to_json(inner, v, path)?
            }
        }
        (WitType::Result { ok, err }, Val::Result(result)) => {
            let (key, side, payload) = match result {
                Ok(payload) => ("ok", ok, payload),
                Err(payload) => ("err", err, payload),
            };
            let payload = match (side, payload) {
                (Some(t), Some(v)) => val_to_json(t, v, &format!("{path}.{key}"))?,
                (None, None) => Value::Null,
                _ => return Err(bad()),
            };
            let mut object = Map::new();
            object.insert(key.into(), payload);
            Value::Object(object)
        }
        (WitType::Tuple(types), Val::Tuple(items)) if types.len() == items.len() => Value::Array(
            types.iter().zip(items).enumerate().map(|(i, (t, v))| val_to_json(t, v, &format!("{path}[{i}]"))).collect::<Result<_, _>>()?,
        ),
        (WitType::Record(fields), Val::Record(values)) if fields.len() == values.len() => {
            let mut object = Map::new();
            for ((name, t), (got, v)) in fields.iter().zip(values) {
                if name != got {
                    return Err(bad());
                }
                object.insert(name.clone(), val_to_json(t, v, &format!("{path}.{name}"))?);
            }
            Value::Object(object)
        }
        (WitType::Variant(cases), Val::Variant(name, payload)) => {
            let (_, case_ty) = cases.iter().find(|(n, _)| n == name).ok_or_else(bad)?;
            let payload = match (case_ty, payload) {
                (Some(t), Some(v)) => val_to_json(t, v, &format!("{path}.{name}"))?,
                (None, None) => Value::Null,
                _ => return Err(bad()),
            };
            let mut object = Map::new();
            object.insert(name.clone(), payload);
            Value::Object(object)
        }
        (WitType::Enum(cases), Val::Enum(name)) if cases.contains(name) => Value::String(name.clone()),
        (WitType::Flags(names), Val::Flags(set)) if set.iter().all(|f| names.contains(f)) => {
            // Declaration order, whatever order the runtime reports them in.
            Value::Array(names.iter().filter(|n| set.contains(n)).map(|n| Value::String(n.clone())).collect())
        }
        _ => return Err(bad()),
    })
}

/// A float as JSON: NaN and the infinities have no JSON form and become `null`.
fn float(n: f64) -> Value {
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point() -> WitType {
        WitType::Record(vec![("x".into(), WitType::U8), ("y".into(), WitType::U8)])
    }

    #[test]
    fn errors_name_the_path_and_the_type() {
        let ty = WitType::Record(vec![("points".into(), WitType::List(Box::new(point())))]);
        let input = json!({"points": [{"x": 1, "y": 2}, {"x": 1, "y": 2}, {"x": 300, "y": 2}]});
        let err = json_to_val(&ty, &input, "input").unwrap_err();
        assert_eq!(err.to_string(), "input.points[2].x: expected u8 (0..=255), got 300");

        let table = [
            (WitType::U32, json!(3.5), "input: expected u32 (0..=4294967295), got 3.5"),
            (WitType::U32, json!(-1), "input: expected u32 (0..=4294967295), got -1"),
            (WitType::S8, json!("1"), "input: expected s8 (-128..=127), got a string \"1\""),
            (WitType::Char, json!("ab"), "input: expected char (a string of one character), got a string \"ab\""),
            (point(), json!({"x": 1}), "input.y: missing; expected u8 (0..=255)"),
            (point(), json!({"x": 1, "y": 2, "z": 3}), "input.z: unknown field; expected only `x`, `y`"),
            (WitType::Enum(vec!["a".into()]), json!("b"), "input: expected enum (one of \"a\"), got a string \"b\""),
            (WitType::Flags(vec!["a".into()]), json!(["a", "a"]), "input[1]: flag \"a\" is given twice"),
            (WitType::F32, json!(1e300), "input: expected f32 (a number of magnitude at most 3.4028235e38), got 1e300"),
        ];
        for (ty, value, expected) in table {
            assert_eq!(json_to_val(&ty, &value, "input").unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn integers_are_exact() {
        assert_eq!(json_to_val(&WitType::U64, &json!(u64::MAX), "i").unwrap(), Val::U64(u64::MAX));
        assert_eq!(json_to_val(&WitType::S64, &json!(i64::MIN), "i").unwrap(), Val::S64(i64::MIN));
        assert_eq!(json_to_val(&WitType::U8, &json!(3.0), "i").unwrap(), Val::U8(3));
        assert!(json_to_val(&WitType::S64, &json!(1e19), "i").is_err());
    }

    #[test]
    fn nested_options_keep_some_none_apart() {
        let ty = WitType::Option(Box::new(WitType::Option(Box::new(WitType::U8))));
        for (json, val) in [
            (json!(null), Val::Option(None)),
            (json!({"some": null}), Val::Option(Some(Box::new(Val::Option(None))))),
            (json!({"some": 4}), Val::Option(Some(Box::new(Val::Option(Some(Box::new(Val::U8(4)))))))),
        ] {
            assert_eq!(json_to_val(&ty, &json, "v").unwrap(), val);
            assert_eq!(val_to_json(&ty, &val, "v").unwrap(), json);
        }
    }

    #[test]
    fn non_finite_floats_become_null() {
        assert_eq!(val_to_json(&WitType::F64, &Val::Float64(f64::NAN), "v").unwrap(), Value::Null);
        assert!(json_to_val(&WitType::F64, &Value::Null, "v").is_err());
    }
}
