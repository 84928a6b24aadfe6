//! Skills written in Python and JavaScript against our world: the example skills
//! (`examples/python-skill`, `examples/js-skill`) and the `new --lang` templates built
//! with the real `skillhost build` (componentize-py, componentize-js), called through the
//! CLI and through MCP, and a file outside the grant refused.
//!
//! Each component is built once per run of this binary and the compiled cache is shared
//! (`target/languages/cache`): a cold compile of these 12-18 MB components takes seconds.
//! The toolchains come from `SKILLHOST_TOOLCHAINS` (scripts/setup.sh installs them into
//! target/toolchains); when one truly cannot be installed, its tests say SKIPPED and why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};

/// This binary's scratch space under the shared target dir.
fn scratch() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/languages")
}

fn toolchains() -> PathBuf {
    std::env::var_os("SKILLHOST_TOOLCHAINS")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/toolchains"), PathBuf::from)
}

/// A data dir of its own whose compiled cache is the one this run shares. (The cache
/// starts empty each run: the toolchains' output differs from build to build, so old
/// entries would only pile up.)
fn data_dir() -> tempfile::TempDir {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let cache = scratch().join("cache");
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir_all(&cache).unwrap();
        cache
    });
    let data = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(std::fs::canonicalize(cache).unwrap(), data.path().join("cache")).unwrap();
    data
}

fn skillhost(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("SKILLHOST_TOOLCHAINS", toolchains())
        .env_remove("SKILLHOST_LOG")
        .output()
        .expect("the skillhost binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Install `toolchain` (a no-op when setup.sh did); `false`, with a loud message, when
/// it cannot be installed on this machine.
fn toolchain_ready(toolchain: &str) -> bool {
    static READY: OnceLock<std::sync::Mutex<std::collections::HashMap<String, bool>>> = OnceLock::new();
    let mut ready = READY.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    *ready.entry(toolchain.to_owned()).or_insert_with(|| {
        let data = tempfile::tempdir().unwrap();
        let out = skillhost(data.path(), &["setup", "toolchains", toolchain]);
        if !out.status.success() {
            eprintln!(
                "\n========\nSKIPPED: the {toolchain} guest toolchain cannot be installed here, so the {toolchain} skill tests did not run:\n{}\n(scripts/setup.sh installs it; CI must)\n========\n",
                stderr(&out)
            );
        }
        out.status.success()
    })
}

/// `skillhost build` of the skill folder `source` (copied, so the build leaves the
/// source tree alone) under `name`; the packaged `.wasm`, or `None` when its toolchain is
/// missing.
fn build(source: &Path, name: &str, toolchain: &str) -> Option<PathBuf> {
    if !toolchain_ready(toolchain) {
        return None;
    }
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().is_some_and(|n| n != "skill.wasm") {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let data = data_dir();
    let out = skillhost(data.path(), &["build", dir.to_str().unwrap()]);
    assert!(out.status.success(), "skillhost build {} failed:\n{}", source.display(), stderr(&out));
    Some(dir.join("skill.wasm"))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

/// The Python example, built once per run.
pub(crate) fn python_skill() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| build(&example("python-skill"), "python-skill", "python")).as_deref()
}

/// The JavaScript example, built once per run.
pub(crate) fn js_skill() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| build(&example("js-skill"), "js-skill", "js")).as_deref()
}

/// `skillhost call --grant` of a `.wasm` (its author trying it, with what its skill.toml
/// asks for): (exit code, stdout JSON or Null, stderr).
fn call(data: &Path, wasm: &Path, tool: &str, input: Value) -> (i32, Value, String) {
    let out = skillhost(data, &["call", wasm.to_str().unwrap(), tool, "--input", &input.to_string(), "--grant"]);
    let stdout = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), stdout, stderr(&out))
}

fn ok(data: &Path, wasm: &Path, tool: &str, input: Value) -> Value {
    let (code, out, stderr) = call(data, wasm, tool, input);
    assert_eq!(code, 0, "{} {tool} failed: {stderr}", wasm.display());
    out
}

#[test]
fn python_skill_counts_words_and_reads_only_granted_files() {
    let Some(wasm) = python_skill() else { return };
    let data = data_dir();

    let out = ok(data.path(), wasm, "word_count", json!({"text": "the cat and the hat\nthe end", "top": 2}));
    assert_eq!((out["words"].as_u64(), out["lines"].as_u64(), out["chars"].as_u64()), (Some(7), Some(2), Some(27)), "{out}");
    assert_eq!(out["top"], json!([{"word": "the", "count": 3}, {"word": "and", "count": 1}]), "{out}");

    let (code, _, stderr) = call(data.path(), wasm, "word_count", json!({"text": 5}));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("skill `py-words` tool `word_count`: invalid input: `text` must be a string"), "{stderr}");

    // A note in its data dir (granted read-only, seen as /data) can be read...
    // A skill called by its path is a development load, with data of its own.
    let notes = data.path().join("skills/.dev/py-words");
    std::fs::create_dir_all(&notes).unwrap();
    let secret = "buy milk\nbuy eggs and milk\n";
    std::fs::write(notes.join("todo.txt"), secret).unwrap();
    // Without --grant it is code nobody approved: the probe grant's empty scratch /data.
    let probed = skillhost(data.path(), &["call", wasm.to_str().unwrap(), "read_note", "--input", r#"{"path": "todo.txt"}"#]);
    let said = String::from_utf8_lossy(&probed.stderr).into_owned();
    assert_eq!(probed.status.code(), Some(1), "{said}");
    assert!(said.contains("runs under the probe grant") && said.contains("pass --grant") && !said.contains("eggs"), "{said}");
    let out = ok(data.path(), wasm, "read_note", json!({"path": "todo.txt"}));
    assert_eq!(out["text"], secret, "{out}");
    assert_eq!(out["words"], 6, "{out}");

    // ...but nothing outside it: not the same file by its host path, not by climbing out
    // of /data, not the host's files. The sandbox refuses; the skill reports a denial.
    let host_path = std::fs::canonicalize(notes.join("todo.txt")).unwrap();
    for path in [host_path.to_str().unwrap(), "../../../../../../etc/passwd", "/etc/passwd", "../py-words/todo.txt"] {
        let (code, out, stderr) = call(data.path(), wasm, "read_note", json!({"path": path}));
        assert_eq!((code, &out), (1, &Value::Null), "{path} must be refused: {stderr}");
        assert!(stderr.contains("skill `py-words` tool `read_note` was denied: cannot read"), "{path}: {stderr}");
        assert!(stderr.contains("to allow it, add the capability to the skill's skill.toml"), "{path}: {stderr}");
        assert!(!stderr.contains("eggs") && !stderr.contains("root:"), "{path}: nothing leaks: {stderr}");
    }
}

#[test]
fn js_skill_reverses_text_and_summarises_numbers() {
    let Some(wasm) = js_skill() else { return };
    let bytes = std::fs::read(wasm).unwrap();
    let needle = b"wasi:http/outgoing-handler";
    assert!(!bytes.windows(needle.len()).any(|w| w == needle), "a skill without [network] is built without wasi:http");
    let data = data_dir();

    let out = ok(data.path(), wasm, "reverse", json!({"text": "héllo wörld 🦀"}));
    assert_eq!(out["text"], "🦀 dlröw olléh", "code points, not UTF-16 units: {out}");
    let out = ok(data.path(), wasm, "reverse", json!({"text": "one  two three", "by": "words"}));
    assert_eq!(out["text"], "three two one", "{out}");

    let out = ok(data.path(), wasm, "stats", json!({"numbers": [3, 1.5, 2, 9.5]}));
    assert_eq!(out, json!({"count": 4, "sum": 16, "mean": 4, "min": 1.5, "max": 9.5}));

    for (input, message) in [
        (json!({"numbers": []}), "`numbers` must be a non-empty list of numbers"),
        (json!({"text": "x", "by": "lines"}), "`by` must be `chars` or `words`"),
    ] {
        let tool = if input.get("numbers").is_some() { "stats" } else { "reverse" };
        let (code, _, stderr) = call(data.path(), wasm, tool, input);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(&format!("skill `js-text` tool `{tool}`: invalid input: {message}")), "{stderr}");
    }
}

/// `skillhost new --lang python|js` writes a skill that `skillhost build` turns into one
/// that answers.
#[test]
fn new_python_and_js_skills_build_and_answer() {
    // The Python template checks its input with the guest SDK, which names the field's path.
    for (lang, file) in [("python", "app.py"), ("js", "skill.js")] {
        let data = data_dir();
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join(format!("greet-{lang}"));
        let out = skillhost(data.path(), &["new", &format!("greet-{lang}"), "--lang", lang, "--dir", dir.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        for name in [file, "skill.toml", "SKILL.md", "README.md"] {
            assert!(dir.join(name).is_file(), "{lang}: no {name}");
        }
        let Some(wasm) = build(&dir, &format!("greet-{lang}"), lang) else { continue };
        let out = ok(data.path(), &wasm, "hello", json!({"name": "Ada"}));
        assert_eq!(out["greeting"], "Hello, Ada!", "{lang}: {out}");
        let (code, _, stderr) = call(data.path(), &wasm, "hello", json!({"name": 7}));
        assert_eq!(code, 1, "{lang}: {stderr}");
        // Both SDKs check the input against its schema and name the field.
        assert!(stderr.contains("invalid input: name: expected a string"), "{lang}: {stderr}");
    }

    let data = data_dir();
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("skill.toml"), "name = \"x\"\nversion = \"0.1.0\"\ndescription = \"x\"\n").unwrap();
    let out = skillhost(data.path(), &["build", empty.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("no Cargo.toml, app.py or skill.js"), "{}", stderr(&out));
}

/// `skillhost new --lang python-server` writes a FastMCP 4 server skill that passes
/// `skillhost test` out of the box (its pytest in the sandbox, then the handshake) and
/// answers in the sandbox; the same skill written against the MCP Python SDK 2's
/// `MCPServer` answers too (the managed venv has both generations).
#[test]
fn the_python_server_template_passes_its_tests_and_both_server_generations_answer() {
    let data = data_dir();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("greeter");
    let venv = fixtures::python::venv();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .env("SKILLHOST_VENV", &venv)
            .env_remove("SKILLHOST_LOG")
            .output()
            .unwrap()
    };
    let out = run(&["new", "greeter", "--lang", "python-server", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["server.py", "test_server.py", "skill.toml", "SKILL.md", "README.md"] {
        assert!(dir.join(name).is_file(), "no {name}");
    }
    let out = run(&["test", dir.to_str().unwrap()]);
    assert!(out.status.success(), "skillhost test failed on the template:\n{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "{}", String::from_utf8_lossy(&out.stdout));

    let mcpserver = work.path().join("v2/greeter");
    std::fs::create_dir_all(&mcpserver).unwrap();
    std::fs::copy(dir.join("skill.toml"), mcpserver.join("skill.toml")).unwrap();
    std::fs::write(
        mcpserver.join("server.py"),
        "from mcp.server import MCPServer\n\nmcp = MCPServer(\"greeter\")\n\n\n@mcp.tool()\ndef hello(name: str) -> dict:\n    \"\"\"Greet someone by name.\"\"\"\n    return {\"greeting\": f\"Hello, {name}!\"}\n\n\nif __name__ == \"__main__\":\n    mcp.run()\n",
    )
    .unwrap();
    for (generation, folder) in [("FastMCP 4", &dir), ("MCPServer", &mcpserver)] {
        let out = run(&["inspect", folder.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{generation}: {}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"hello\""),
            "{generation} lists hello: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let out = run(&["call", folder.to_str().unwrap(), "hello", "--input", r#"{"name": "Ada"}"#]);
        assert!(out.status.success(), "{generation}: {}", stderr(&out));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["greeting"], "Hello, Ada!", "{generation}: {answer}");
    }
}

/// Both skills served over MCP (stdio) and called with rmcp's client.
#[tokio::test]
async fn python_and_js_skills_answer_through_mcp() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;

    let built = tokio::task::spawn_blocking(|| (python_skill(), js_skill())).await.unwrap();
    let (Some(python), Some(js)) = built else { return };
    let skills = tempfile::tempdir().unwrap();
    std::fs::copy(python, skills.path().join("py-words.wasm")).unwrap();
    std::fs::copy(js, skills.path().join("js-text.wasm")).unwrap();
    let data = data_dir();
    let shown = skillhost(data.path(), &["--skills", skills.path().to_str().unwrap(), "show", "py-words", "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap_or_else(|e| panic!("show --json: {e}: {}", stderr(&shown)));
    let notes = std::path::PathBuf::from(shown["data_dir"].as_str().unwrap());
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("todo.txt"), "a b c").unwrap();
    // Reading its data dir waits for a human.
    let approved = skillhost(data.path(), &["--skills", skills.path().to_str().unwrap(), "approve", "py-words", "--yes"]);
    assert!(approved.status.success(), "{}", stderr(&approved));

    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.arg("--skills").arg(skills.path()).arg("--data-dir").arg(data.path()).arg("serve");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = crate::ready_tools(&client).await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for name in ["py-words__word_count", "py-words__read_note", "js-text__reverse", "js-text__stats"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }

    let call = async |tool: &str, args: Value| {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().unwrap().clone());
        let result = client.call_tool(params).await.unwrap();
        let text = result.content[0].as_text().unwrap().text.clone();
        (result.is_error, text)
    };
    let (error, text) = call("py-words__word_count", json!({"text": "to be or not to be", "top": 1})).await;
    assert_eq!(error, Some(false), "{text}");
    let out: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((out["words"].as_u64(), &out["top"]), (Some(6), &json!([{"word": "be", "count": 2}])), "{out}");

    let (error, text) = call("js-text__reverse", json!({"text": "stressed"})).await;
    assert_eq!(error, Some(false), "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["text"], "desserts");

    let (error, text) = call("py-words__read_note", json!({"path": "todo.txt"})).await;
    assert_eq!(error, Some(false), "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["words"], 3);
    let (error, text) = call("py-words__read_note", json!({"path": "/etc/passwd"})).await;
    assert_eq!(error, Some(true), "{text}");
    assert!(text.contains("denied") && text.contains("cannot read `/etc/passwd`") && !text.contains("root:"), "{text}");
    client.cancel().await.unwrap();
}

/// A Python skill that tries to plant a symlink pointing out of its data dir.
const SYMLINK_PROBE: &str = r#"
import json, os
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports.types import Annotations, CallError_Denied, Tool

class Guest(exports.Guest):
    def tools(self):
        return [Tool(name="link", description="Make /data/link point at `target`.", input_schema='{"type": "object"}',
                     output_schema=None, annotations=Annotations(read_only=False, destructive=True, idempotent=False, open_world=False),
                     examples=[])]

    def call(self, tool, input):
        target = json.loads(input)["target"]
        try:
            os.symlink(target, "/data/link")
        except OSError as e:
            raise Err(CallError_Denied(f"{type(e).__name__}: {e}"))
        return json.dumps({"made": os.readlink("/data/link")})
"#;

/// componentize-py's guests import WASI 0.2.0 while the host links 0.2.12: the linker
/// matches them by semver, and the guard on `symlink-at` (defined on 0.2.12) must cover
/// those imports too, or an older guest could plant a link out of its directory.
#[test]
fn python_guest_on_older_wasi_cannot_plant_a_symlink_out() {
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("app.py"), SYMLINK_PROBE).unwrap();
    std::fs::write(
        source.path().join("skill.toml"),
        "name = \"symlink-probe\"\nversion = \"0.1.0\"\ndescription = \"tries to link out\"\n\n[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n",
    )
    .unwrap();
    let Some(wasm) = build(source.path(), "symlink-probe", "python") else { return };
    let bytes = std::fs::read(&wasm).unwrap();
    let imports = |name: &str| bytes.windows(name.len()).any(|w| w == name.as_bytes());
    assert!(imports("wasi:filesystem/types@0.2.0"), "the probe no longer imports WASI 0.2.0; the test would prove nothing");

    let data = data_dir();
    let dir = data.path().join("skills/.dev/symlink-probe");
    for target in ["../../../etc", "/etc", "a/../../b"] {
        let (code, _, stderr) = call(data.path(), &wasm, "link", json!({"target": target}));
        assert_eq!(code, 1, "{target}: {stderr}");
        assert!(stderr.contains("was denied: PermissionError"), "{target}: {stderr}");
        assert!(stderr.contains("a skill may only link inside its directories"), "{target}: the host's guard refused it: {stderr}");
        assert!(std::fs::symlink_metadata(dir.join("link")).is_err(), "{target}: no link on disk");
    }
    let out = ok(data.path(), &wasm, "link", json!({"target": "notes.txt"}));
    assert_eq!(out["made"], "notes.txt", "a link inside is allowed: {out}");
}

/// Skills written with the Python and JavaScript guest SDKs (`guest-sdk/*/example`), built
/// with `skillhost build`: typed input with a nested type, an optional field, an enum and
/// a list; a tool error; files inside and outside the grant (Python: componentize-js gives
/// JavaScript no file API); HTTP, a request to a host the skill may not reach refused by
/// name (both), and one to the host it may reach answered (Python, a loopback server). Called with `skillhost call`, then over MCP with
/// the official Python SDK, which checks the schemas an agent sees (`sdk_client.py`).
#[test]
fn sdk_skills_answer_through_the_cli_and_the_official_mcp_client() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk");
    let (Some(python), Some(js)) =
        (build(&sdk.join("python/example"), "py-sdk-example", "python"), build(&sdk.join("js/example"), "sdk-example", "js"))
    else {
        return;
    };
    let data = data_dir();

    // Python through the CLI.
    let out = ok(data.path(), &python, "hello", json!({"name": "Ada", "tone": "warm"}));
    assert_eq!(out["greeting"], "Hello, dear Ada!", "{out}");
    let (code, _, err) = call(data.path(), &python, "hello", json!({"name": "Ada", "tone": "loud"}));
    assert!(code == 1 && err.contains("tone: expected one of"), "{err}");
    let (code, _, err) = call(data.path(), &python, "divide", json!({"a": 1, "b": 0}));
    assert!(code == 1 && err.contains("ZeroDivisionError"), "an unexpected exception is a tool failure: {err}");
    let notes = data.path().join("skills/.dev/py-sdk-example");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("todo.txt"), "buy milk").unwrap();
    let out = ok(data.path(), &python, "read_note", json!({"path": "todo.txt"}));
    assert_eq!(out["result"], "buy milk", "{out}");
    let (code, _, err) = call(data.path(), &python, "read_note", json!({"path": "../../trust.db"}));
    assert!(code == 1 && err.contains("denied"), "a file outside the grant is refused: {err}");
    let (code, _, err) = call(data.path(), &python, "save_note", json!({"path": "x.txt", "text": "x"}));
    assert!(code == 1 && err.contains("rw"), "a read-only grant refuses a write, naming the mode: {err}");

    // JavaScript through the CLI.
    let out = ok(data.path(), &js, "hello", json!({"name": "Ada", "places": [{"city": "Oslo"}]}));
    assert_eq!(out["greeting"], "Hello, Ada, traveller of Oslo!", "{out}");
    let (code, _, err) = call(data.path(), &js, "hello", json!({"name": "Ada", "places": [{"city": 3}]}));
    assert!(code == 1 && err.contains("places[0].city: expected a string"), "{err}");

    // JavaScript HTTP: a host outside `[network] allow` is refused by the host, and the
    // SDK says which host and what to add.
    let fetcher = scratch().join("sdk-fetch-src");
    let _ = std::fs::remove_dir_all(&fetcher);
    std::fs::create_dir_all(&fetcher).unwrap();
    std::fs::write(
        fetcher.join("skill.toml"),
        "name = \"sdk-fetch\"\nversion = \"0.1.0\"\ndescription = \"Fetches a URL\"\n\n[network]\nallow = [\"https://allowed.example\"]\n",
    )
    .unwrap();
    std::fs::write(
        fetcher.join("skill.js"),
        "import { tool, skill, s, http } from \"./skillhost.js\";\n\nconst get = tool({\n  name: \"get\",\n  description: \"Fetch a URL.\",\n  input: s.object({ url: s.string(\"The URL.\") }),\n  output: s.object({ status: s.integer() }),\n  openWorld: true,\n  async run({ url }) {\n    const response = await http.get(url);\n    return { status: response.status };\n  },\n});\n\nexport const guest = skill(get);\n",
    )
    .unwrap();
    let fetch_wasm = build(&fetcher, "sdk-fetch", "js").expect("the js toolchain was ready a moment ago");
    let (code, _, err) = call(data.path(), &fetch_wasm, "get", json!({"url": "https://elsewhere.example/x"}));
    assert!(code == 1 && err.contains("elsewhere.example") && err.contains("[network] allow"), "{err}");

    // Python HTTP: a skill that asks for a host is built against the world with wasi:http;
    // a request to that host (a loopback server) answers, one elsewhere is denied by name.
    let server = fixtures::TestServer::start();
    let py_fetcher = scratch().join("py-fetch-src");
    let _ = std::fs::remove_dir_all(&py_fetcher);
    std::fs::create_dir_all(&py_fetcher).unwrap();
    std::fs::write(
        py_fetcher.join("skill.toml"),
        format!(
            "name = \"py-fetch\"\nversion = \"0.1.0\"\ndescription = \"Fetches a URL\"\n\n[network]\nallow = [\"http://127.0.0.1:{}\"]\n",
            server.port()
        ),
    )
    .unwrap();
    std::fs::write(
        py_fetcher.join("app.py"),
        "from typing import TypedDict\n\nfrom skillhost import Guest, http, tool  # noqa: F401\n\n\nclass Fetched(TypedDict):\n    status: int\n    length: int\n\n\n@tool(open_world=True)\ndef get(url: str) -> Fetched:\n    \"\"\"Fetch a URL.\n\n    Args:\n        url: The URL.\n    \"\"\"\n    response = http.get(url)\n    return {\"status\": response.status, \"length\": len(response.body)}\n",
    )
    .unwrap();
    let py_fetch = build(&py_fetcher, "py-fetch", "python").expect("the python toolchain was ready a moment ago");
    let out = ok(data.path(), &py_fetch, "get", json!({"url": format!("http://127.0.0.1:{}/ok", server.port())}));
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["length"], 1024, "{out}");
    let (code, _, err) = call(data.path(), &py_fetch, "get", json!({"url": "https://elsewhere.example/x"}));
    assert!(code == 1 && err.contains("was denied") && err.contains("\"https://elsewhere.example\" to `[network] allow`"), "{err}");

    // Over MCP, with the official Python SDK.
    let skills = tempfile::tempdir().unwrap();
    std::fs::copy(&python, skills.path().join("py-sdk-example.wasm")).unwrap();
    std::fs::copy(&js, skills.path().join("sdk-example.wasm")).unwrap();
    let served = data_dir();
    // Reading its data dir waits for a human.
    let approved = skillhost(served.path(), &["--skills", skills.path().to_str().unwrap(), "approve", "py-sdk-example", "--yes"]);
    assert!(approved.status.success(), "{}", stderr(&approved));
    let python_bin = fixtures::python::venv().join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/sdk_client.py");
    let out = Command::new(python_bin)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_skillhost"))
        .arg(skills.path())
        .arg(served.path())
        .env("SKILLHOST_TOOLCHAINS", toolchains())
        .output()
        .unwrap();
    assert!(out.status.success(), "the official MCP client:\n{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
}

/// The Python and JavaScript SDKs' own unit tests, run natively (no component): pytest
/// with the test venv, `node --test`.
#[test]
fn sdk_unit_tests_pass_natively() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk");
    let python = fixtures::python::venv().join("bin/python");
    let out = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(sdk.join("python/tests"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(" passed"), "pytest guest-sdk/python/tests:\n{text}\n{}", stderr(&out));
    let out = Command::new("node").arg("--test").arg(sdk.join("js/test")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("# pass"), "node --test guest-sdk/js/test:\n{text}\n{}", stderr(&out));
}
