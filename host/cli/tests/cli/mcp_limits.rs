//! `skillhost serve` over stdio at its size limits: a `skill_run` whose inputs are under
//! the documented cap (16 MiB, counted decoded) is answered whatever its encoding makes
//! of the line (the official Python SDK sends 13 MiB as base64: a 17 MiB line), and a
//! line over the transport's limit gets a JSON-RPC error naming the limit, with its id
//! when the line has one (wherever it stands in the line), `null` when it has none, and
//! the session answers what comes next. Every wait is bounded: silence fails the test.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Env;

/// The longest message `serve` reads (24 MiB: the input cap as base64, and room).
const MAX_MESSAGE_BYTES: usize = skillhost::mcp::MAX_MESSAGE_BYTES;

/// How long one answer may take before the test calls it silence.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A SKILL.md skill whose `scripts/size.sh FILE` prints FILE's size and SHA-256.
fn sizer(env: &Env, name: &str) {
    let dir = env.skills.path().join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Measures a file. Use it in tests.\n---\nRun `sh scripts/size.sh FILE`.\n"),
    )
    .unwrap();
    std::fs::write(dir.join("scripts/size.sh"), "#!/bin/sh\nwc -c < \"$1\" | tr -d ' '\nsha256sum \"$1\" | cut -d' ' -f1\n").unwrap();
    let out = env.run(&["approve", name, "--yes"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Attack of issue 40 (7): 13 MiB of input, under the 16 MiB cap, is a 17 MiB line as
/// base64; rmcp's stdio transport dropped it with a log line and the agent waited for
/// ever. Through the official Python SDK, in both protocol eras, it runs and is answered.
#[test]
fn a_run_under_the_input_cap_is_answered_over_stdio_whatever_its_line_length() {
    let env = Env::new();
    sizer(&env, "sizer");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp_limits.py");
    let python = fixtures::python::venv().join("bin/python");
    for mode in ["auto", "legacy"] {
        let mut cmd = Command::new(&python);
        cmd.env("SKILLHOST_VENV", fixtures::python::venv())
            .arg(&script)
            .args([mode, env!("CARGO_BIN_EXE_skillhost")])
            .arg(env.skills.path())
            .arg(env.data.path())
            .args(["sizer", "13"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}; run scripts/setup.sh", python.display()));
        let out = wait_bounded(child, Duration::from_secs(240), mode);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        let facts: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap_or_else(|e| panic!("{mode}: {e}: {stderr}"));
        assert!(facts["message_bytes"].as_u64().unwrap() > 16 << 20, "the line is longer than rmcp's default limit: {facts}");
        eprintln!("{mode}: {facts}");
    }
}

/// Attack of issue 40 (7), the other half: a line longer than the limit. Each gets a
/// JSON-RPC error (-32600) naming the limit in bytes and what to do instead, with the
/// request's id whether it comes first or after the megabytes of params, or `null`; the
/// session then answers the next request.
#[test]
fn a_line_over_the_limit_gets_an_error_naming_it_and_the_session_goes_on() {
    let env = Env::new();
    sizer(&env, "sizer");
    let mut server = Stdio2::start(&env);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}));
    let init = server.answer(&json!(1));
    assert!(init.get("result").is_some(), "{init}");
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let over = MAX_MESSAGE_BYTES + 1;
    let padding = |prefix: &str, suffix: &str| over.saturating_sub(prefix.len() + suffix.len());
    let cases: [(&str, &str, Value); 3] = [
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"skill_run","arguments":{"skill":"sizer","command":["sh","scripts/size.sh","a"],"inputs":[{"path":"a","text":""#,
            r#""}]}}}"#,
            json!(7),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"skill_run","arguments":{"skill":"sizer","command":["sh"],"inputs":[{"path":"a","text":"\"id\": 3, "#,
            r#""}]}},"id":"late-8"}"#,
            json!("late-8"),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"skill_run","arguments":{"skill":"sizer","inputs":[{"path":"a","base64":""#,
            r#""}]}}}"#,
            Value::Null,
        ),
    ];
    for (prefix, suffix, id) in cases {
        let started = Instant::now();
        server.send_padded(prefix, padding(prefix, suffix), suffix);
        let error = server.answer(&id);
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(error["error"]["code"], -32600, "{error}");
        assert!(message.contains(&MAX_MESSAGE_BYTES.to_string()), "names the limit in bytes: {message}");
        assert!(message.contains("16 MiB") && message.contains("--path"), "says what to do instead: {message}");
        eprintln!("{over} bytes (id {id}) refused in {:?}: {message}", started.elapsed());
    }
    server.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}));
    let listed = server.answer(&json!(9));
    assert!(listed["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "the session goes on: {listed}");
    server.stop();
}

/// `skillhost serve` on pipes, its stdout read line by line on a thread so that every wait
/// is bounded.
struct Stdio2 {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Stdio2 {
    fn start(env: &Env) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let stderr = dir.path().join("stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .arg("serve")
            .env("SKILLHOST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("the skillhost binary runs");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, stdin: Some(stdin), lines, stderr, _dir: dir }
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
    }

    /// `prefix`, `padding` bytes of `a`, `suffix`, a newline: written as a stream.
    fn send_padded(&mut self, prefix: &str, padding: usize, suffix: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(prefix.as_bytes()).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        let mut left = padding;
        while left > 0 {
            let n = left.min(chunk.len());
            stdin.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
        stdin.write_all(suffix.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message answering `id` (notifications in between are skipped); fails on
    /// silence.
    fn answer(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:.200}"));
                    if message.get("method").is_none() && message.get("id") == Some(id) {
                        return message;
                    }
                }
                Err(_) => panic!(
                    "no answer to request {id} within {ANSWER_WITHIN:?}: silence. serve's stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                ),
            }
        }
    }

    fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "serve did not stop after stdin closed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stdio2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait for `child` up to `limit`; kill it and fail past that.
fn wait_bounded(mut child: Child, limit: Duration, what: &str) -> std::process::Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what}: the client hung for {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
