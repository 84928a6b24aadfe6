//! Generic components: a component of its own world (`tests/guests/generic`, WIT
//! `test:generic/calc`, no skillhost SDK) loads as a skill whose tools are its exported
//! functions. Every WIT type goes through the host and back, wrong inputs name the field
//! and the type, `err` results are tool errors, functions using resources are refused,
//! the network stays closed, and the registry's approval applies as to any skill.

use std::path::{Path, PathBuf};

use fixtures::GENERIC;
use serde_json::{Value, json};
use skillhost::{CallError, RegistryConfig, RegistryError, TrustState, skill::CallFailure};
use skillhost_package as package;

use crate::{call, load_error, ok, test_host};

/// The component as a bare `NAME.wasm` (no manifest) in `dir`.
fn bare(dir: &Path, name: &str) -> PathBuf {
    let file = dir.join(format!("{name}.wasm"));
    std::fs::copy(GENERIC.wasm, &file).unwrap();
    file
}

/// The component as `dir/NAME/skill.wasm` beside a skill.toml with `extra` appended.
fn folder(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(GENERIC.wasm, folder.join("skill.wasm")).unwrap();
    std::fs::write(
        folder.join("skill.toml"),
        format!("name = \"{name}\"\nversion = \"1.0.0\"\ndescription = \"a calculator of its own world\"\n{extra}"),
    )
    .unwrap();
    folder
}

fn drawing() -> Value {
    json!({
        "name": "plan ✓",
        "shapes": [
            {"circle": 1.5},
            {"rectangle": [2.0, 3.25]},
            {"polygon": [{"x": 0, "y": 0}, {"x": -4, "y": 0}, {"x": 0, "y": 3}]},
            {"empty": null},
        ],
        "style": ["bold", "filled"],
        "unit": "foot",
        "label": "kitchen",
        "origin": {"x": -2147483648, "y": 2147483647},
        "tags": [["a", 0], ["b", 255]],
        "initial": "é",
        "scale": 0.5,
        "id": u64::MAX,
        "offset": i64::MIN,
        "layer": -128,
        "width": 65535,
        "depth": -32768,
        "visible": true,
        "bytes": [0, 1, 254, 255],
        "maybe": {"some": 7},
        "outcome": {"ok": 4294967295u32},
    })
}

#[tokio::test]
async fn a_bare_component_is_a_skill_named_after_its_file() {
    let t = test_host();
    let file = bare(t.skills.path(), "calc");
    let loaded = t.host.load_path_granted(&file).await.unwrap();
    assert_eq!(loaded.source.manifest.name.as_str(), "calc");
    assert_eq!(loaded.source.manifest.description, "component exports add, greet, test:generic/shapes@0.1.0, math, stress, math-add");
    assert!(loaded.skill.grant().dirs.is_empty() && loaded.skill.grant().network.is_empty(), "a bare component holds nothing");
    let names: Vec<&str> = loaded.skill.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "add",
            "greet",
            "shapes-area",
            "shapes-echo",
            "shapes-midpoint",
            "shapes-divide",
            "shapes-check",
            "shapes-connect",
            "math-add-pairs",
            "stress-spin",
            "stress-allocate"
        ]
    );
    let add = &loaded.skill.tools()[0];
    assert_eq!(add.description, "`add: func(a: u32, b: u32) -> u64`, exported by the component");
    assert_eq!(
        add.input_schema,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 0, "maximum": 4294967295u32},
                "b": {"type": "integer", "minimum": 0, "maximum": 4294967295u32},
            },
            "required": ["a", "b"],
            "additionalProperties": false,
        })
    );
    assert_eq!(add.output_schema, Some(json!({"type": "integer", "minimum": 0, "maximum": u64::MAX})));
    let divide = loaded.skill.tools().iter().find(|t| t.name == "shapes-divide").unwrap();
    assert_eq!(divide.output_schema, Some(json!({"type": "number"})), "a result's schema is its ok value's");
    assert_eq!(ok(&loaded, "add", json!({"a": 4294967295u32, "b": 4294967295u32})).await, json!(8589934590u64));
    assert_eq!(ok(&loaded, "greet", json!({})).await, json!("hello, world"), "an option parameter may be left out");
    assert_eq!(ok(&loaded, "greet", json!({"name": "ada"})).await, json!("hello, ada"));
    // A function of an interface defined inline in the world.
    assert_eq!(ok(&loaded, "math-add-pairs", json!({"pairs": [[1, 2], [4294967295u32, 1]]})).await, json!([3, 4294967296u64]));
}

#[tokio::test]
async fn every_type_round_trips() {
    let t = test_host();
    let loaded = t.host.load_path_granted(&bare(t.skills.path(), "calc")).await.unwrap();
    let full = drawing();
    assert_eq!(ok(&loaded, "shapes-echo", json!({"drawing": full})).await, full);

    // The other sides of each option, result and nested option.
    let mut other = drawing();
    other["label"] = Value::Null;
    other["origin"] = Value::Null;
    other["maybe"] = json!({"some": null});
    other["outcome"] = json!({"err": "bad"});
    other["style"] = json!([]);
    other["shapes"] = json!([]);
    other["bytes"] = json!([]);
    assert_eq!(ok(&loaded, "shapes-echo", json!({"drawing": other})).await, other);
    other["maybe"] = Value::Null;
    assert_eq!(ok(&loaded, "shapes-echo", json!({"drawing": other})).await, other);

    // Option fields may be left out of a record; they come back as null.
    let mut sparse = other.clone();
    for field in ["label", "origin", "maybe"] {
        sparse.as_object_mut().unwrap().remove(field);
    }
    assert_eq!(ok(&loaded, "shapes-echo", json!({"drawing": sparse})).await, other);

    // Flags come back in declaration order whatever order they went in.
    let mut flags = drawing();
    flags["style"] = json!(["filled", "dashed", "bold"]);
    assert_eq!(ok(&loaded, "shapes-echo", json!({"drawing": flags})).await["style"], json!(["bold", "dashed", "filled"]));

    // The guest computes with what it got.
    assert_eq!(ok(&loaded, "shapes-area", json!({"shape": {"rectangle": [2.0, 3.25]}})).await, json!(6.5));
    assert_eq!(
        ok(&loaded, "shapes-area", json!({"shape": {"polygon": [{"x": 0, "y": 0}, {"x": 4, "y": 0}, {"x": 0, "y": 3}]}})).await,
        json!(6.0)
    );
    assert_eq!(ok(&loaded, "shapes-area", json!({"shape": {"empty": null}})).await, json!(0.0));
    assert_eq!(ok(&loaded, "shapes-midpoint", json!({"a": {"x": 0, "y": 0}, "b": {"x": 4, "y": -6}})).await, json!({"x": 2, "y": -3}));
    assert_eq!(ok(&loaded, "shapes-divide", json!({"a": 1, "b": 4})).await, json!(0.25), "an ok result answers with its value");
    assert_eq!(ok(&loaded, "shapes-check", json!({"fail": false})).await, Value::Null, "an ok without a value answers null");
}

#[tokio::test]
async fn a_wrong_input_names_the_field_and_the_expected_type() {
    let t = test_host();
    let loaded = t.host.load_path_granted(&bare(t.skills.path(), "calc")).await.unwrap();
    let invalid = async |tool: &str, input: Value| match call(&loaded, tool, input).await {
        Err(CallError { failure: CallFailure::InvalidInput { message, .. }, .. }) => message,
        other => panic!("expected invalid input, got {other:?}"),
    };
    let mut d = drawing();
    d["width"] = json!(70000);
    assert_eq!(invalid("shapes-echo", json!({"drawing": d})).await, "input.drawing.width: expected u16 (0..=65535), got 70000");
    let mut d = drawing();
    d["shapes"][2]["polygon"][1]["x"] = json!(1.5);
    assert_eq!(
        invalid("shapes-echo", json!({"drawing": d})).await,
        "input.drawing.shapes[2].polygon[1].x: expected s32 (-2147483648..=2147483647), got 1.5"
    );
    let mut d = drawing();
    d["unit"] = json!("yard");
    assert_eq!(
        invalid("shapes-echo", json!({"drawing": d})).await,
        "input.drawing.unit: expected enum (one of \"metre\", \"foot\"), got a string \"yard\""
    );
    assert_eq!(
        invalid("shapes-area", json!({"shape": {"square": 1}})).await,
        "input.shape: expected variant (an object with one key, one of `circle`, `rectangle`, `polygon`, `empty`), got an object {\"square\":1}"
    );
    assert_eq!(invalid("add", json!({"a": 1})).await, "input.b: missing; expected u32 (0..=4294967295)");
    assert_eq!(invalid("add", json!({"a": 1, "b": 2, "c": 3})).await, "input.c: unknown field; expected only `a`, `b`");
    assert_eq!(invalid("add", json!([1, 2])).await, "input: expected record (an object with fields `a`, `b`), got an array [1,2]");
    // The error reaches the caller through the usual message, naming skill and tool.
    let err = call(&loaded, "add", json!({"a": -1, "b": 0})).await.unwrap_err();
    assert_eq!(err.to_string(), "skill `calc` tool `add`: invalid input: input.a: expected u32 (0..=4294967295), got -1");
}

#[tokio::test]
async fn an_err_result_is_a_tool_error() {
    let t = test_host();
    let loaded = t.host.load_path_granted(&bare(t.skills.path(), "calc")).await.unwrap();
    match call(&loaded, "shapes-divide", json!({"a": 1, "b": 0})).await {
        Err(CallError { failure: CallFailure::Failed { message, .. }, .. }) => assert_eq!(message, "cannot divide 1 by zero"),
        other => panic!("expected a tool error, got {other:?}"),
    }
    match call(&loaded, "shapes-check", json!({"fail": true})).await {
        Err(CallError { failure: CallFailure::Failed { message, .. }, .. }) => {
            assert_eq!(serde_json::from_str::<Value>(&message).unwrap(), json!({"code": 7, "message": "asked to fail"}))
        }
        other => panic!("expected a tool error, got {other:?}"),
    }
}

#[test]
fn functions_using_resources_are_refused_and_reported() {
    let bytes = std::fs::read(GENERIC.wasm).unwrap();
    let reflection = package::reflect(&bytes).unwrap();
    assert!(!reflection.is_skill);
    assert!(reflection.missing_imports.is_empty(), "{:?}", reflection.missing_imports);
    let refused: Vec<(&str, &str)> = reflection.refused.iter().map(|r| (r.function.as_str(), r.reason.as_str())).collect();
    assert_eq!(
        refused,
        [
            ("shapes.[constructor]counter", "belongs to resource `counter`; resources have no JSON form"),
            ("shapes.[method]counter.next", "belongs to resource `counter`; resources have no JSON form"),
            ("shapes.total", "parameter `c` uses resource `counter`, which has no JSON form"),
            ("math-add.pairs", "its tool name `math-add-pairs` is already taken by `math.add-pairs`; rename one of them in the WIT"),
            ("exports.init", TOOLCHAIN_HOOK),
        ]
    );
    assert!(reflection.wit.contains("world root {"), "{}", reflection.wit);
    assert!(reflection.wit.contains("package test:generic@0.1.0"), "the exported package is printed: {}", reflection.wit);
    assert!(reflection.wit.contains("total: func(c: borrow<counter>) -> u32;"), "{}", reflection.wit);
}

/// Why componentize-py's `exports.init` is not a tool.
const TOOLCHAIN_HOOK: &str = "is componentize-py's own initialisation hook, which it calls while building the component; it is not a tool";

/// componentize-py adds an `exports` interface of its own (an `init` hook it calls while
/// building) to every component it builds; the fixture carries that WIT verbatim. It is
/// neither listed nor callable nor named in the generated description.
#[tokio::test]
async fn a_toolchains_own_exports_are_not_tools() {
    let t = test_host();
    let loaded = t.host.load_path_granted(&bare(t.skills.path(), "calc")).await.unwrap();
    let names: Vec<&str> = loaded.skill.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(!names.iter().any(|n| n.contains("init")), "{names:?}");
    assert!(
        !loaded.source.manifest.description.contains("exports,") && !loaded.source.manifest.description.ends_with("exports"),
        "{}",
        loaded.source.manifest.description
    );
    let symbols = json!({"exports": [], "resources": [], "records": [], "flags": [], "tuples": [], "variants": [], "enums": [], "options": [], "results": []});
    let err = call(&loaded, "exports-init", json!({"app-name": "app", "symbols": symbols, "stub-wasi": false})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::UnknownTool { .. }, .. }), "{err}");
}

#[tokio::test]
async fn doc_comments_describe_the_tools_when_the_component_carries_them() {
    let t = test_host();
    let docs = package::docs_section(&Path::new(GENERIC.dir).join("wit")).unwrap();
    let bytes = std::fs::read(GENERIC.wasm).unwrap();
    let file = t.skills.path().join("documented.wasm");
    std::fs::write(&file, package::embed(&bytes, &[(package::DOCS_SECTION, &docs)]).unwrap()).unwrap();
    let loaded = t.host.load_path_granted(&file).await.unwrap();
    let description = |name: &str| loaded.skill.tools().iter().find(|t| t.name == name).unwrap().description.clone();
    assert_eq!(description("shapes-area"), "The area of a shape, in square units.");
    assert_eq!(description("add"), "Adds two numbers.");
    assert_eq!(description("greet"), "Says hello; `name` may be left out.");
    assert_eq!(description("math-add-pairs"), "Adds each pair.", "an inline interface's function");
    assert_eq!(description("shapes-connect"), "Tries to open a TCP connection to 127.0.0.1:`port` and says what happened.");
}

#[tokio::test]
async fn without_a_network_grant_it_cannot_reach_the_network() {
    let t = test_host();
    let loaded = t.host.load_path_granted(&bare(t.skills.path(), "calc")).await.unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    match call(&loaded, "shapes-connect", json!({"port": port})).await {
        Err(CallError { failure: CallFailure::Failed { message, .. }, .. }) => {
            assert!(message.starts_with("connect failed: "), "{message}")
        }
        other => panic!("expected the connection to be refused, got {other:?}"),
    }
    // The call has returned, so a connection it made would be waiting to be accepted.
    listener.set_nonblocking(true).unwrap();
    let accepted = listener.accept();
    assert!(matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock), "the guest reached the listener: {accepted:?}");
}

#[tokio::test]
async fn a_wasi_command_is_not_a_generic_skill() {
    let t = test_host();
    let file = t.skills.path().join("cli-tool.wasm");
    std::fs::copy(fixtures::NOT_A_SKILL.wasm, &file).unwrap();
    let err = load_error(t.host.load_path_granted(&file).await);
    assert!(
        err.contains("exports neither `skillhost:skill/guest@0.1.0` nor any function skillhost can call as a tool (`wasi:cli/run@"),
        "{err}"
    );
    assert!(err.contains("is a WASI entry point for other hosts, not a library function"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_registry_its_manifest_and_the_approval_decide() {
    let t = test_host();
    let workspace = tempfile::tempdir().unwrap();
    // Bare: asks for nothing, so the pure-computation tier approves it.
    bare(workspace.path(), "calc");
    // With a sidecar skill.toml asking for the network: waits for a human.
    folder(workspace.path(), "calc-net", "\n[network]\nallow = [\"http://127.0.0.1:9\"]\n");
    let mut config = RegistryConfig::new(t.data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = false;
    let registry = t.host.open_registry(config).await.unwrap();

    assert_eq!(registry.entry("calc").unwrap().state, TrustState::Approved);
    let out = registry.call("calc", "add", json!({"a": 1, "b": 2}), Default::default()).await.unwrap();
    assert_eq!(out.value, json!(3));

    assert_eq!(registry.entry("calc-net").unwrap().state, TrustState::PendingReview);
    let err = registry.call("calc-net", "add", json!({"a": 1, "b": 2}), Default::default()).await.unwrap_err();
    assert!(matches!(err, RegistryError::NotCallable { state: TrustState::PendingReview, .. }), "{err:?}");
    let request = registry.approval_request("calc-net").unwrap();
    assert!(request.requests.iter().any(|r| r.contains("127.0.0.1")), "{:?}", request.requests);
    registry.approve("calc-net", &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
    let out = registry.call("calc-net", "add", json!({"a": 1, "b": 2}), Default::default()).await.unwrap();
    assert_eq!(out.value, json!(3));
}

#[tokio::test]
async fn an_import_skillhost_does_not_provide_is_named() {
    let t = test_host();
    let file = t.skills.path().join("app.wasm");
    std::fs::copy(fixtures::FOREIGN_IMPORT.wasm, &file).unwrap();
    let err = load_error(t.host.load_path_granted(&file).await);
    assert_eq!(
        err,
        "skill `app` could not be loaded: component imports `test:foreign/clock@0.1.0`, which skillhost does not provide (it provides WASI 0.2 and `skillhost:skill/host`)"
    );
}

#[tokio::test]
async fn the_skill_limits_apply() {
    let t = test_host();
    let dir = folder(t.skills.path(), "calc", "\n[limits]\ntimeout = \"300ms\"\nmemory = \"32MiB\"\n");
    let loaded = t.host.load_path_granted(&dir).await.unwrap();
    let err = call(&loaded, "stress-spin", json!({})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Timeout { .. }, .. }), "{err:?}");
    assert_eq!(ok(&loaded, "stress-allocate", json!({"mebibytes": 4})).await, json!(4));
    let err = call(&loaded, "stress-allocate", json!({"mebibytes": 64})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::MemoryLimit { limit, .. }, .. } if limit == 32 << 20), "{err:?}");
    // A fresh instance for the next call: the limits left nothing behind.
    assert_eq!(ok(&loaded, "add", json!({"a": 1, "b": 1})).await, json!(2));
}
