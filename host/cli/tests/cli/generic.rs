//! Generic components (their own WIT world, no skillhost SDK) through the binary:
//! `skillhost inspect` shows the WIT, the tools the exports become with their schemas,
//! and the functions that are not tools and why (our own skills show their WIT too);
//! `call` reaches one by path; `serve` offers its tools over MCP like any skill's.

use fixtures::{FOREIGN_IMPORT, GENERIC, TEXT_TOOLS};
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
fn inspect_a_component_that_cannot_load_still_shows_its_wit() {
    let env = Env::new();
    let file = env.skills.path().join("app.wasm");
    std::fs::copy(FOREIGN_IMPORT.wasm, &file).unwrap();
    let out = env.run(&["inspect", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(4), "a load error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("component imports `test:foreign/clock@0.1.0`, which skillhost does not provide"), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "not loadable");
    assert_eq!(v["tools"][0]["name"], "uptime");
    assert!(v["component"]["wit"].as_str().unwrap().contains("import test:foreign/clock@0.1.0;"), "{v}");
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

/// A bare generic component (it asks for nothing, so it is auto-approved) served over
/// MCP on stdio and called with rmcp's client: structured output, an `err` result as a
/// tool error, a wrong input's error naming the field and the type.
#[tokio::test]
async fn its_tools_are_served_over_mcp() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let env = Env::new();
    std::fs::copy(GENERIC.wasm, env.skills.path().join("calc.wasm")).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.arg("--skills").arg(env.skills.path()).arg("--data-dir").arg(env.data.path()).arg("serve");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = crate::ready_tools(&client).await;
    let midpoint = tools.iter().find(|t| t.name == "calc__shapes-midpoint").unwrap_or_else(|| panic!("{tools:?}"));
    assert_eq!(midpoint.input_schema["required"], json!(["a", "b"]));

    let call = async |tool: &str, args: Value| {
        let args = args.as_object().unwrap().clone();
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)).await.unwrap()
    };
    let result = call("calc__shapes-midpoint", json!({"a": {"x": 0, "y": 0}, "b": {"x": 2, "y": 4}})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, Some(json!({"x": 1, "y": 2})));
    let result = call("calc__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(result.structured_content, Some(json!({"result": 5})), "a non-object answer is wrapped");

    let failed = call("calc__shapes-divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(failed.content[0].as_text().unwrap().text.contains("cannot divide 1 by zero"), "{failed:?}");
    let invalid = call("calc__add", json!({"a": 1, "b": true})).await;
    assert_eq!(invalid.is_error, Some(true));
    let text = invalid.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("input.b: expected u32 (0..=4294967295), got true"), "{text}");
    client.cancel().await.unwrap();
}
