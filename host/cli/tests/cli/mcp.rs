//! `skillhost serve` driven by real MCP clients: the official Python SDK (`mcp` 2.x, in
//! both its default `server/discover` mode and the legacy `initialize` mode) through
//! `mcp_client.py`, and rmcp's Rust client. Plus the HTTP transport's token check.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fixtures::{LIMITS, TEXT_TOOLS};
use serde_json::Value;

const MODES: [&str; 2] = ["auto", "legacy"];

/// A skills dir and a data dir for one scenario.
struct McpEnv {
    skills: tempfile::TempDir,
    data: tempfile::TempDir,
}

impl McpEnv {
    fn new() -> Self {
        Self { skills: tempfile::tempdir().unwrap(), data: tempfile::tempdir().unwrap() }
    }

    /// The limits fixture as a folder named `name`, with `manifest` extra lines.
    fn limits(&self, name: &str, extra: &str) -> PathBuf {
        let dir = self.skills.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
        let manifest = LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"{name}\""));
        std::fs::write(dir.join("skill.toml"), format!("{manifest}\n{extra}")).unwrap();
        dir
    }

    /// Run `scenario` of mcp_client.py in `mode`; its JSON facts line.
    fn run(&self, scenario: &str, mode: &str, arg: Option<&str>) -> Value {
        let python = fixtures::python::venv().join("bin/python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp_client.py");
        let mut cmd = Command::new(&python);
        cmd.env("SKILLHOST_VENV", fixtures::python::venv())
            .arg(&script)
            .args([scenario, mode, env!("CARGO_BIN_EXE_skillhost")])
            .arg(self.skills.path())
            .arg(self.data.path())
            .args(arg);
        let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}; run scripts/setup.sh", python.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{scenario} ({mode}) failed:\n{stderr}\n{stdout}");
        let line = stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{scenario} ({mode}): bad output {line:?}: {e}\n{stderr}"))
    }
}

#[test]
fn tools_structured_output_errors_and_progress_in_both_protocol_eras() {
    for mode in MODES {
        let env = McpEnv::new();
        env.limits("limits", "");
        TEXT_TOOLS.folder(env.skills.path());
        let facts = env.run("basics", mode, None);
        let protocol = facts["protocol"].as_str().unwrap();
        match mode {
            "auto" => assert_eq!(protocol, "2026-07-28", "the SDK's default mode negotiates the newest protocol"),
            _ => assert!(protocol < "2026-07-28", "legacy mode uses the initialize handshake: {protocol}"),
        }
        assert_eq!(facts["progress"].as_f64(), Some(3.0), "the last progress report arrives");
        assert!(facts["unknown"].as_str().unwrap().contains("tool_search"), "{facts}");
    }
}

#[test]
fn sandboxed_python_skills_are_served_like_wasm_ones() {
    for mode in MODES {
        let env = McpEnv::new();
        fixtures::python::install("sandbox-probe", env.skills.path(), "");
        fixtures::python::install("time-server", env.skills.path(), "");
        let facts = env.run("sandboxed", mode, None);
        eprintln!("{mode}: next sandboxed call answered {} ms after cancelling a hung one", facts["next_call_ms"]);
    }
}

#[test]
fn cancelling_a_spinning_guest_frees_it() {
    for mode in MODES {
        let env = McpEnv::new();
        // One call at a time and a 30 s deadline: the next call can only run once the
        // spinning one is stopped, and without cancellation that would take ~30 s.
        let manifest = LIMITS.manifest().replace("timeout = \"2s\"", "timeout = \"30s\"\nconcurrency = 1");
        let dir = env.limits("limits", "");
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        let facts = env.run("cancel", mode, None);
        let freed = facts["freed_ms"].as_u64().unwrap();
        eprintln!("{mode}: spinning guest freed {freed} ms after the client cancelled");
        assert!(freed < 10_000, "{mode}: the cancelled call held the skill for {freed} ms");
    }
}

#[test]
fn a_dropped_in_skill_is_announced_with_list_changed() {
    let packaged = tempfile::tempdir().unwrap();
    let wasm = LIMITS.packaged(packaged.path());
    for mode in MODES {
        let env = McpEnv::new();
        let facts = env.run("list_changed", mode, Some(wasm.to_str().unwrap()));
        assert!(facts["tools"].as_u64().unwrap() > 5, "{facts}");
    }
}

#[test]
fn two_hundred_tools_are_deferred_and_found_with_tool_search() {
    let env = McpEnv::new();
    for i in 0..20 {
        env.limits(&format!("pack-{i}"), "");
    }
    for mode in MODES {
        let facts = env.run("deferred", mode, None);
        assert!(facts["listed"].as_u64().unwrap() <= 10, "{facts}");
        assert!(facts["top"]["name"].as_str().unwrap().ends_with("__echo"), "{facts}");
    }
}

#[test]
fn an_unapproved_skill_runs_only_after_the_human_accepts() {
    // A [network] section puts the skill in the confirm tier: it waits for approval.
    let gated = "[network]\nallow = [\"http://127.0.0.1:9\"]";
    for mode in MODES {
        let env = McpEnv::new();
        env.limits("gated", gated);
        let declined = env.run("approval", mode, Some("decline"));
        assert_eq!(declined["error"], true, "{declined}");
        assert!(declined["asked"].as_str().unwrap().contains("http://127.0.0.1:9"), "{declined}");
        let accepted = env.run("approval", mode, Some("accept"));
        assert_eq!(accepted["error"], false, "{accepted}");
        let list = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .args(["list", "--json"])
            .output()
            .unwrap();
        let list: Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(list[0]["state"], "approved", "the approval is recorded in the trust store: {list}");
        // Recorded as an answer relayed by an MCP client, told apart from a terminal's.
        let show = |json: bool| {
            let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
                .arg("--skills")
                .arg(env.skills.path())
                .arg("--data-dir")
                .arg(env.data.path())
                .args(["show", "gated"])
                .args(json.then_some("--json"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let shown: Value = serde_json::from_str(&show(true)).unwrap();
        assert_eq!(shown["approval"]["last_approved_by"], "human", "{shown}");
        assert_eq!(shown["approval"]["last_approved_via"], "mcp-elicitation", "{shown}");
        let text = show(false);
        assert!(
            text.contains("approved by: a human's answer relayed by an MCP client (mcp-elicitation)")
                && text.contains("skillhost reject gated"),
            "{text}"
        );
    }
    let env = McpEnv::new();
    env.limits("gated", gated);
    env.run("no_elicitation", "auto", None);
}

/// Issue 45, item 6: a SKILL.md skill whose script declares a package, approved by the
/// answer to an elicitation its `skill_run` asked (the official Python SDK, both protocol
/// eras): the question lists the package as resolved from the host's index (wheels made in
/// the test), the yes installs it, and the run imports it. Without the install, the run
/// was refused after the yes ("`skillhost approve tiny` installs it again").
#[test]
fn an_approval_answered_over_mcp_installs_the_packages_its_question_listed() {
    for mode in MODES {
        let env = McpEnv::new();
        let wheels = env.data.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        fixtures::python::tinypkg_wheel(&wheels, "1.2.3", "tiny 1.2.3");
        std::fs::write(env.data.path().join("config.toml"), format!("[packages]\npython_wheels = \"{}\"\n", wheels.display())).unwrap();
        let dir = env.skills.path().join("tiny");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: tiny\ndescription: Prints tinypkg's value. Use it in tests.\n---\nRun `python scripts/use.py`.\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("scripts/use.py"),
            "# /// script\n# dependencies = [\"tinypkg>=1.0\"]\n# ///\nimport tinypkg\nprint(tinypkg.VALUE)\n",
        )
        .unwrap();
        let facts = env.run("run_approval", mode, None);
        assert_eq!(facts["stdout"], "tiny 1.2.3\n", "{mode}: {facts}");
        let asked = facts["asked"].as_str().unwrap();
        assert!(asked.starts_with("skillhost: approve skill `tiny`?"), "{mode}: the host's words first: {asked}");
    }
}

#[test]
fn skill_instructions_and_resources_stay_inside_the_skill_folder() {
    let env = McpEnv::new();
    let dir = env.limits("limits", "");
    let body: String = (0..200).map(|i| format!("Step {i}: do the thing carefully.\n")).collect();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: limits\ndescription: Test limits.\n---\n\n# Limits\n{body}")).unwrap();
    let outside = env.data.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    // The script plants symlinks in the folder once the skill is loaded (the registry
    // refuses to load a folder with symlinks), then tries to read through them.
    let facts = env.run("knowledge", "auto", Some(outside.to_str().unwrap()));
    assert!(facts["instructions"].as_u64().unwrap() <= 800, "{facts}");
}

#[test]
fn agent_skills_resources_directory_and_packs() {
    for mode in MODES {
        let env = McpEnv::new();
        let dir = env.limits("limits", "");
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: limits\ndescription: Echo values back.\nlicense: Apache-2.0\ncompatibility: needs nothing\nmetadata:\n  author: ada\nallowed-tools: Read Grep\n---\n# Limits\n",
        )
        .unwrap();
        for (path, bytes) in [
            ("references/api.md", &b"# API\nCall echo.\n"[..]),
            ("scripts/run.sh", b"#!/bin/sh\ntouch \"$MARKER\"\n"),
            ("assets/logo.png", b"\x89PNG\r\n\x1a\n\xff\x00"),
            ("notes.txt", b"not listed"),
        ] {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        }
        let notes = env.skills.path().join("notes");
        std::fs::create_dir(&notes).unwrap();
        std::fs::write(notes.join("SKILL.md"), "---\nname: notes\ndescription: How we write release notes\n---\n").unwrap();
        // Two skill pack examples (and two broken files), as the registry tests use them.
        let pack = Path::new(env!("CARGO_MANIFEST_DIR")).join("../registry/tests/fixtures/packs/core");
        let core = env.skills.path().join("core");
        std::fs::create_dir(&core).unwrap();
        for file in std::fs::read_dir(pack).unwrap() {
            let file = file.unwrap();
            std::fs::copy(file.path(), core.join(file.file_name())).unwrap();
        }
        let marker = env.data.path().join("script-ran");
        let facts = env.run("agent_skills", mode, Some(marker.to_str().unwrap()));
        assert!(!marker.exists(), "{facts}");
        assert_eq!(facts["resources"], 7, "{facts}");
    }
    // The same from the command line: the frontmatter in `show`, the directory in `list`.
    let env = McpEnv::new();
    let dir = env.limits("limits", "");
    std::fs::write(dir.join("SKILL.md"), "---\nname: limits\ndescription: d\nlicense: MIT\nallowed-tools: Read\n---\n").unwrap();
    for i in 0..30 {
        let folder = env.skills.path().join(format!("notes-{i:02}"));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: notes-{i:02}\ndescription: Notes number {i} about release writing.\n---\n"),
        )
        .unwrap();
    }
    let skillhost = |args: &[&str]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let show = skillhost(&["show", "limits", "--json"]);
    assert_eq!(show["frontmatter"]["license"], "MIT", "{show}");
    assert_eq!(show["frontmatter"]["allowed-tools"][0], "Read", "{show}");
    let directory = skillhost(&["list", "--directory", "--budget", "100", "--json"]);
    let text = directory["text"].as_str().unwrap();
    assert!(text.len() <= 400, "{directory}");
    assert_eq!(directory["total"], 31, "{directory}");
    let listed = directory["listed"].as_u64().unwrap();
    assert!(listed < 31 && text.ends_with(&format!("({} more skills: call skill_search)\n", 31 - listed)), "{directory}");
}

/// Send one raw HTTP request and return the status line.
fn http_status(addr: &str, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or_default().to_owned()
}

/// `skillhost serve --http ADDR` with `envs`; its child and the address from its start
/// line, and the stderr lines before it.
fn serve_http(env: &McpEnv, addr: &str, envs: &[(&str, &str)]) -> (std::process::Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(env.skills.path())
        .arg("--data-dir")
        .arg(env.data.path())
        .args(["serve", "--http", addr])
        .env_remove("SKILLHOST_MCP_TOKEN")
        .envs(envs.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (mut line, mut before) = (String::new(), String::new());
    let addr = loop {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0, "serve exited before listening: {before}");
        if let Some(rest) = line.trim().strip_prefix("skillhost: serving MCP at http://") {
            break rest.split('/').next().unwrap().to_owned();
        }
        before.push_str(&line);
    };
    (child, addr, before)
}

/// A `serve --http` on loopback without a token option makes one in DATA_DIR/http-token
/// (mode 0600), says where it is but not what it is, refuses requests without it, and
/// reuses it; a token file that is a symlink or readable by others is refused.
#[test]
fn http_on_loopback_makes_and_needs_its_own_token() {
    use std::os::unix::fs::PermissionsExt;
    let env = McpEnv::new();
    env.limits("limits", "");
    let (mut child, addr, said) = serve_http(&env, "127.0.0.1:0", &[]);
    let file = env.data.path().join("http-token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "{token:?}");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(said.contains(&file.display().to_string()) && !said.contains(&token), "the start line names the file, not the token: {said}");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = |auth: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let missing = http_status(&addr, &request(""));
    let right = http_status(&addr, &request(&format!("Authorization: Bearer {token}\r\n")));
    child.kill().unwrap();
    let _ = child.wait();
    assert!(missing.contains("401"), "no token on loopback: {missing}");
    assert!(right.contains("200"), "the generated token: {right}");

    let (mut again, _, _) = serve_http(&env, "127.0.0.1:0", &[]);
    again.kill().unwrap();
    let _ = again.wait();
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token, "reused, not replaced");

    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
            .env_remove("SKILLHOST_MCP_TOKEN")
            .output()
            .unwrap()
    };
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = run(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("readable by others") && stderr.contains("chmod 600"), "{stderr}");
    std::fs::remove_file(&file).unwrap();
    let elsewhere = env.data.path().join("elsewhere");
    std::fs::write(&elsewhere, "sesame\n").unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let refused = run(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("symlink"), "{stderr}");
    let refused = run(&["--token-file", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("symlink"), "--token-file is checked the same way: {refused:?}");
}

#[test]
fn http_transport_requires_its_bearer_token() {
    let env = McpEnv::new();
    env.limits("limits", "");
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(env.skills.path())
        .arg("--data-dir")
        .arg(env.data.path())
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("SKILLHOST_MCP_TOKEN", "sesame")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0, "serve exited before listening");
        if let Some(rest) = line.trim().strip_prefix("skillhost: serving MCP at http://") {
            break rest.split('/').next().unwrap().to_owned();
        }
    };
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = |auth: &str, host: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let missing = http_status(&addr, &request("", &addr));
    let wrong = http_status(&addr, &request("Authorization: Bearer nope\r\n", &addr));
    let right = http_status(&addr, &request("Authorization: Bearer sesame\r\n", &addr));
    let rebinding = http_status(&addr, &request("Authorization: Bearer sesame\r\n", "evil.example:80"));
    let url = format!("http://{addr}/mcp");
    let protocols: Vec<Value> = MODES.iter().map(|mode| env.run("http", mode, Some(&url))["protocol"].clone()).collect();
    child.kill().unwrap();
    let _ = child.wait();
    assert!(missing.contains("401"), "no token: {missing}");
    assert!(wrong.contains("401"), "wrong token: {wrong}");
    assert!(right.contains("200"), "right token: {right}");
    assert!(rebinding.contains("403") || rebinding.contains("400"), "foreign Host header: {rebinding}");
    assert_eq!(protocols, ["2026-07-28", "2025-11-25"], "the Python SDK over HTTP, both modes");

    let refused = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(env.skills.path())
        .arg("--data-dir")
        .arg(env.data.path())
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("SKILLHOST_MCP_TOKEN")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a bearer token"), "{refused:?}");
}

/// `skillhost serve` on stdio with rmcp's own client, and a raw JSON-RPC exchange.
mod rmcp_client {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::TokioChildProcess;
    use serde_json::json;

    use super::McpEnv;

    fn command(env: &McpEnv) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
        cmd.arg("--skills").arg(env.skills.path()).arg("--data-dir").arg(env.data.path()).arg("serve");
        cmd
    }

    #[tokio::test]
    async fn list_and_call_with_the_rmcp_client() {
        let env = McpEnv::new();
        env.limits("limits", "");
        let client = ().serve(TokioChildProcess::new(command(&env)).unwrap()).await.unwrap();
        let tools = crate::ready_tools(&client).await;
        assert!(tools.iter().any(|t| t.name == "limits__echo"), "{tools:?}");
        let args = json!({"value": [1, 2]}).as_object().unwrap().clone();
        let result = client.call_tool(CallToolRequestParams::new("limits__echo").with_arguments(args)).await.unwrap();
        assert_eq!(result.is_error, Some(false));
        let text = result.content[0].as_text().unwrap().text.clone();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), json!([1, 2]));
        let failed = client
            .call_tool(CallToolRequestParams::new("limits__fail").with_arguments(json!({"kind": "denied"}).as_object().unwrap().clone()))
            .await
            .unwrap();
        assert_eq!(failed.is_error, Some(true));
        client.cancel().await.unwrap();
    }

    /// Send `lines` to a fresh `skillhost serve` and return the reply with id `id`.
    async fn reply_to(env: &McpEnv, lines: &[String], id: i64) -> serde_json::Value {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let mut child =
            command(env).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines {
            stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(30), stdout.next_line()).await.unwrap().unwrap().unwrap();
            let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    }

    #[tokio::test]
    async fn unknown_methods_get_method_not_found_at_once() {
        let env = McpEnv::new();
        // A 2026-07-28 request carries its lifecycle in `_meta`.
        let modern = [r#"{"jsonrpc":"2.0","id":7,"method":"skills/teleport","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_owned()];
        // The handshake era initializes first.
        let legacy = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":8,"method":"skills/teleport","params":{}}"#.to_owned(),
        ];
        for reply in [reply_to(&env, &modern, 7).await, reply_to(&env, &legacy, 8).await] {
            assert_eq!(reply["error"]["code"], -32601, "{reply}");
            assert!(reply["error"]["message"].as_str().unwrap().contains("skills/teleport"), "{reply}");
        }
    }
}
