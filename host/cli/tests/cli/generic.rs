//! `skillhost inspect` on components: a generic component (its own WIT world) shows its
//! WIT, the tools its exports become with their schemas, and the functions that are not
//! tools and why; one of our own skills shows its WIT too; `call` reaches a generic
//! component by path like any skill.

use fixtures::{GENERIC, TEXT_TOOLS};
use serde_json::{Value, json};

use crate::Env;

#[test]
fn inspect_a_generic_component() {
    let env = Env::new();
    let file = env.skills.path().join("calc.wasm");
    std::fs::copy(GENERIC.wasm, &file).unwrap();

    let out = env.run(&["inspect", file.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], "calc");
    assert_eq!(v["component"]["world"], "generic");
    let wit = v["component"]["wit"].as_str().unwrap();
    assert!(wit.contains("export add: func(a: u32, b: u32) -> u64;"), "{wit}");
    assert!(wit.contains("variant shape {"), "{wit}");
    let area = v["tools"].as_array().unwrap().iter().find(|t| t["name"] == "shapes-area").expect("shapes-area is a tool");
    assert_eq!(area["input_schema"]["required"], json!(["shape"]));
    assert_eq!(area["input_schema"]["properties"]["shape"]["oneOf"][0]["properties"]["circle"], json!({"type": "number"}));
    let refused = v["component"]["refused"].as_array().unwrap();
    assert!(
        refused.contains(&json!({"function": "shapes.total", "reason": "parameter `c` uses resource `counter`, which has no JSON form"})),
        "{refused:?}"
    );

    let out = env.run(&["inspect", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\ntool shapes-echo\n"), "{text}");
    assert!(text.contains("not a tool: shapes.[method]counter.next belongs to resource `counter`; resources have no JSON form"), "{text}");
    assert!(text.contains("\nWIT:\n"), "{text}");

    // Called by path like any skill; a wrong input exits 1 naming the field and the type.
    let out = env.run(&["call", file.to_str().unwrap(), "shapes-midpoint", "--input", r#"{"a": {"x": 2, "y": 2}, "b": {"x": 4, "y": 8}}"#]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!({"x": 3, "y": 5}));
    let out = env.run(&["call", file.to_str().unwrap(), "add", "--input", r#"{"a": "1", "b": 2}"#]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("input.a: expected u32 (0..=4294967295), got a string \"1\""), "{stderr}");
}

#[test]
fn inspect_one_of_our_skills_shows_its_wit() {
    let env = Env::new();
    let file = TEXT_TOOLS.packaged(env.skills.path());
    let out = env.run(&["inspect", file.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["component"]["world"], "skillhost:skill");
    assert!(v["component"]["wit"].as_str().unwrap().contains("export skillhost:skill/guest@0.1.0;"), "{v}");
    assert_eq!(v["component"]["refused"], json!([]));
}
