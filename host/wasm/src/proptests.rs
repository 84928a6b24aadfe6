//! Property tests of the JSON ↔ component value conversion (`value.rs`) and the JSON
//! Schema written for it (`schema.rs`), over generated WIT types of bounded depth.
//!
//! - Every JSON value of a type converts to a component value and back to itself.
//! - Every such value validates against the type's schema.
//! - Mutated values (a part replaced by arbitrary JSON): the converter and the schema
//!   agree on whether the result is acceptable.
//!
//! The schema is checked by a small validator of exactly the keywords `schema.rs` uses
//! (structural, no schema crate).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use skillhost_package::{WitType, schema};

use crate::value::{json_to_val, val_to_json};

/// Distinct kebab-case names (record fields, cases, flags).
fn names(max: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::btree_set("[a-z][a-z0-9]{0,3}(-[a-z][a-z0-9]{0,2})?", 1..=max).prop_map(|s| s.into_iter().collect())
}

fn wit_type() -> impl Strategy<Value = WitType> {
    let leaf = prop_oneof![
        Just(WitType::Bool),
        Just(WitType::S8),
        Just(WitType::U8),
        Just(WitType::S16),
        Just(WitType::U16),
        Just(WitType::S32),
        Just(WitType::U32),
        Just(WitType::S64),
        Just(WitType::U64),
        Just(WitType::F32),
        Just(WitType::F64),
        Just(WitType::Char),
        Just(WitType::String),
        names(4).prop_map(WitType::Enum),
        names(5).prop_map(WitType::Flags),
    ];
    leaf.prop_recursive(4, 48, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| WitType::List(Box::new(t))),
            inner.clone().prop_map(|t| WitType::Option(Box::new(t))),
            (prop::option::of(inner.clone()), prop::option::of(inner.clone()))
                .prop_map(|(ok, err)| WitType::Result { ok: ok.map(Box::new), err: err.map(Box::new) }),
            prop::collection::vec(inner.clone(), 1..4).prop_map(WitType::Tuple),
            (names(4), prop::collection::vec(inner.clone(), 4)).prop_map(|(n, t)| WitType::Record(n.into_iter().zip(t).collect())),
            (names(4), prop::collection::vec(prop::option::of(inner), 4))
                .prop_map(|(n, t)| WitType::Variant(n.into_iter().zip(t).collect())),
        ]
    })
}

/// JSON values of `ty` in the shape the host writes (so that the round trip is exact).
fn value_of(ty: &WitType) -> BoxedStrategy<Value> {
    match ty {
        WitType::Bool => any::<bool>().prop_map(Value::from).boxed(),
        WitType::S8 => any::<i8>().prop_map(Value::from).boxed(),
        WitType::U8 => any::<u8>().prop_map(Value::from).boxed(),
        WitType::S16 => any::<i16>().prop_map(Value::from).boxed(),
        WitType::U16 => any::<u16>().prop_map(Value::from).boxed(),
        WitType::S32 => any::<i32>().prop_map(Value::from).boxed(),
        WitType::U32 => any::<u32>().prop_map(Value::from).boxed(),
        WitType::S64 => any::<i64>().prop_map(Value::from).boxed(),
        WitType::U64 => any::<u64>().prop_map(Value::from).boxed(),
        WitType::F32 => prop::num::f32::NORMAL.prop_map(|f| json!(f64::from(f))).boxed(),
        WitType::F64 => prop::num::f64::NORMAL.prop_map(|f| json!(f)).boxed(),
        WitType::Char => any::<char>().prop_map(|c| Value::String(c.to_string())).boxed(),
        WitType::String => any::<String>().prop_map(Value::String).boxed(),
        WitType::List(item) => prop::collection::vec(value_of(item), 0..4).prop_map(Value::Array).boxed(),
        WitType::Option(inner) => {
            let nested = matches!(**inner, WitType::Option(_));
            prop_oneof![Just(Value::Null), value_of(inner).prop_map(move |v| if nested { json!({"some": v}) } else { v })].boxed()
        }
        WitType::Result { ok, err } => {
            let side = |key: &'static str, t: &Option<Box<WitType>>| match t {
                Some(t) => value_of(t).prop_map(move |v| json!({key: v})).boxed(),
                None => Just(json!({key: null})).boxed(),
            };
            prop_oneof![side("ok", ok), side("err", err)].boxed()
        }
        WitType::Tuple(types) => types.iter().map(value_of).collect::<Vec<_>>().prop_map(Value::Array).boxed(),
        WitType::Record(fields) => {
            let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
            fields
                .iter()
                .map(|(_, t)| value_of(t))
                .collect::<Vec<_>>()
                .prop_map(move |values| Value::Object(names.iter().cloned().zip(values).collect()))
                .boxed()
        }
        WitType::Variant(cases) => {
            let options: Vec<BoxedStrategy<Value>> = cases
                .iter()
                .map(|(name, t)| {
                    let name = name.clone();
                    match t {
                        Some(t) => value_of(t).prop_map(move |v| json!({name.clone(): v})).boxed(),
                        None => Just(json!({name: null})).boxed(),
                    }
                })
                .collect();
            prop::strategy::Union::new(options).boxed()
        }
        WitType::Enum(cases) => prop::sample::select(cases.clone()).prop_map(Value::String).boxed(),
        WitType::Flags(names) => {
            let names = names.clone();
            prop::collection::vec(any::<bool>(), names.len())
                .prop_map(move |set| {
                    Value::Array(names.iter().zip(set).filter(|(_, on)| *on).map(|(n, _)| Value::from(n.as_str())).collect())
                })
                .boxed()
        }
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e40f64..1e40).prop_map(|f| json!(f)),
        Just(json!(1.5)),
        Just(json!(3.0)),
        "[a-z]{0,3}".prop_map(Value::String),
        any::<char>().prop_map(|c| Value::String(c.to_string())),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof!["[a-z]{1,3}", Just("ok".to_owned()), Just("err".to_owned()), Just("some".to_owned())],
                inner,
                0..3
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// The `n`-th node (pre-order, modulo the count) of `value`.
fn nth(value: &Value, n: usize) -> Value {
    fn walk(v: &Value, n: &mut usize) -> Option<Value> {
        if *n == 0 {
            return Some(v.clone());
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter().find_map(|c| walk(c, n)),
            Value::Object(o) => o.values().find_map(|c| walk(c, n)),
            _ => None,
        }
    }
    walk(value, &mut (n % count(value))).expect("n is below the count")
}

/// Replace the `n`-th node (pre-order, modulo the count) of `value` with `with`.
fn replace_nth(value: &mut Value, n: usize, with: Value) {
    fn walk(v: &mut Value, n: &mut usize, with: &mut Option<Value>) {
        if *n == 0 {
            if let Some(w) = with.take() {
                *v = w;
            }
            return;
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, n, with)),
            Value::Object(o) => o.values_mut().for_each(|c| walk(c, n, with)),
            _ => {}
        }
    }
    let mut n = n % count(value);
    walk(value, &mut n, &mut Some(with));
}

/// Whether `value` is valid against `schema`, for the keywords `schema.rs` writes.
fn valid(schema: &Value, value: &Value) -> bool {
    let Some(s) = schema.as_object() else { return schema.as_bool().unwrap_or(false) };
    let number = |key: &str| s.get(key).and_then(Value::as_f64);
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.as_number().is_some_and(|n| n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)),
            "array" => value.is_array(),
            "object" => value.is_object(),
            other => panic!("schema.rs wrote an unknown type {other}"),
        };
        if !ok {
            return false;
        }
    }
    if let Some(n) = value.as_number() {
        // Compare exactly where both sides are integers (u64/i64 bounds do not fit f64).
        let below = |bound: &Value| match (bound.as_i64(), bound.as_u64(), n.as_i64(), n.as_u64()) {
            (Some(b), _, Some(v), _) => v < b,
            (_, Some(b), _, Some(v)) => v < b,
            _ => n.as_f64().unwrap() < bound.as_f64().unwrap(),
        };
        let above = |bound: &Value| match (bound.as_i64(), bound.as_u64(), n.as_i64(), n.as_u64()) {
            (Some(b), _, Some(v), _) => v > b,
            (_, Some(b), _, Some(v)) => v > b,
            (_, Some(_), Some(_), None) => false,
            _ => n.as_f64().unwrap() > bound.as_f64().unwrap(),
        };
        if s.get("minimum").is_some_and(below) || s.get("maximum").is_some_and(above) {
            return false;
        }
    }
    if let Some(text) = value.as_str() {
        let len = text.chars().count() as f64;
        if number("minLength").is_some_and(|m| len < m) || number("maxLength").is_some_and(|m| len > m) {
            return false;
        }
    }
    if let Some(cases) = s.get("enum").and_then(Value::as_array)
        && !cases.contains(value)
    {
        return false;
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as f64;
        if number("minItems").is_some_and(|m| len < m) || number("maxItems").is_some_and(|m| len > m) {
            return false;
        }
        let prefix = s.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if !items.iter().zip(prefix).all(|(v, p)| valid(p, v)) {
            return false;
        }
        if let Some(rest) = s.get("items")
            && !items.iter().skip(prefix.len()).all(|v| valid(rest, v))
        {
            return false;
        }
        if s.get("uniqueItems") == Some(&Value::Bool(true)) && (1..items.len()).any(|i| items[..i].contains(&items[i])) {
            return false;
        }
    }
    if let Some(object) = value.as_object() {
        let properties = s.get("properties").and_then(Value::as_object);
        if let Some(required) = s.get("required").and_then(Value::as_array)
            && !required.iter().all(|k| object.contains_key(k.as_str().unwrap()))
        {
            return false;
        }
        for (key, v) in object {
            match properties.and_then(|p| p.get(key)) {
                Some(p) if !valid(p, v) => return false,
                Some(_) => {}
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => return false,
                None => {}
            }
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|sub| valid(sub, value))
    {
        return false;
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array)
        && one.iter().filter(|sub| valid(sub, value)).count() != 1
    {
        return false;
    }
    true
}

fn typed_value() -> impl Strategy<Value = (WitType, Value)> {
    wit_type().prop_flat_map(|ty| {
        let values = value_of(&ty);
        (Just(ty), values)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn json_to_val_to_json_is_the_identity((ty, json) in typed_value()) {
        let val = json_to_val(&ty, &json, "input").map_err(|e| TestCaseError::fail(format!("{ty}: {e}")))?;
        let back = val_to_json(&ty, &val, "output").map_err(|e| TestCaseError::fail(format!("{ty}: {e}")))?;
        prop_assert_eq!(back, json);
    }

    #[test]
    fn values_validate_against_their_schema((ty, json) in typed_value()) {
        let schema = schema(&ty);
        prop_assert!(valid(&schema, &json), "{} not valid against {} for {}", json, schema, ty);
    }

    #[test]
    fn converter_and_schema_agree_on_mutated_values(
        (ty, mut json) in typed_value(),
        at in any::<usize>(),
        with in any_json(),
        copy in prop::option::of(any::<usize>()),
    ) {
        // A part replaced by arbitrary JSON, or by another part of the same value (which
        // makes duplicate flags, swapped fields, values of the wrong case...).
        let with = match copy {
            Some(from) => nth(&json, from),
            None => with,
        };
        replace_nth(&mut json, at, with);
        let converts = json_to_val(&ty, &json, "input");
        let schema = schema(&ty);
        prop_assert_eq!(converts.is_ok(), valid(&schema, &json), "{} for {}: converter says {:?}, schema {}", json, ty, converts.err(), schema);
    }
}

#[test]
fn the_validator_rejects_what_it_should() {
    let ty = WitType::Record(vec![("a".into(), WitType::U8), ("b".into(), WitType::Option(Box::new(WitType::Char)))]);
    let s = schema(&ty);
    assert!(valid(&s, &json!({"a": 1})));
    assert!(!valid(&s, &json!({"a": 256})));
    assert!(!valid(&s, &json!({"a": 1, "c": 1})));
    assert!(!valid(&s, &json!({"b": "x"})));
    assert!(!valid(&s, &json!({"a": 1, "b": "xy"})));
    let mut unused = Map::new();
    unused.insert("a".into(), json!(1));
    assert!(valid(&s, &Value::Object(unused)));
}
