//! `skillhost serve --http --ops`: health, readiness and metrics without the token, the
//! drain on SIGTERM (in-flight calls answered, new requests 503 with `Retry-After`, exit
//! 0), and `--log-format json`. MCP is spoken as raw HTTP, as a balancer would see it.

use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fixtures::LIMITS;
use serde_json::{Value, json};

/// A skills dir with the limits fixture (its timeout raised to `timeout`) and a data dir.
struct OpsEnv {
    skills: tempfile::TempDir,
    data: tempfile::TempDir,
}

impl OpsEnv {
    fn new(timeout: &str) -> Self {
        let env = Self { skills: tempfile::tempdir().unwrap(), data: tempfile::tempdir().unwrap() };
        let dir = env.skills.path().join("limits");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
        let manifest = LIMITS.manifest().replace("timeout = \"2s\"", &format!("timeout = \"{timeout}\""));
        assert!(manifest.contains(timeout), "the fixture's timeout line changed: {manifest}");
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        env
    }

    /// `serve --http 127.0.0.1:0 --ops 127.0.0.1:0 EXTRA` with token `sesame`: the child, the
    /// MCP address and the ops address, from its start lines.
    fn serve(&self, global: &[&str], extra: &[&str]) -> (Child, String, String, std::io::BufReader<std::process::ChildStderr>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(self.skills.path())
            .arg("--data-dir")
            .arg(self.data.path())
            .args(global)
            .args(["serve", "--http", "127.0.0.1:0", "--ops", "127.0.0.1:0"])
            .args(extra)
            .env("SKILLHOST_MCP_TOKEN", "sesame")
            .env_remove("SKILLHOST_LOG_FORMAT")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (mut mcp, mut ops, mut said) = (None, None, String::new());
        while mcp.is_none() || ops.is_none() {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited before listening: {said}");
            if let Some(rest) = line.trim().strip_prefix("skillhost: serving MCP at http://") {
                mcp = Some(rest.split('/').next().unwrap().to_owned());
            }
            if let Some(rest) = line.trim().strip_prefix("skillhost: serving /healthz, /readyz and /metrics at http://") {
                ops = Some(rest.split('/').next().unwrap().to_owned());
            }
            said.push_str(&line);
        }
        (child, mcp.unwrap(), ops.unwrap(), stderr)
    }
}

/// A raw HTTP response: status, headers (lowercase names), body (de-chunked).
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last `data:` line of an
    /// SSE stream.
    fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        let data = self.body.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).rfind(|d| d.starts_with('{'));
        serde_json::from_str(data.unwrap_or_else(|| panic!("no JSON-RPC message in {:?}", self.body))).unwrap()
    }
}

/// Send one HTTP/1.1 request (`Connection: close`) and read the whole response.
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP response: {raw:?}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_owned() };
    Response { status, headers, body }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

/// An MCP session over raw HTTP with the bearer token.
struct Session {
    addr: String,
    id: String,
}

const AUTH: (&str, &str) = ("Authorization", "Bearer sesame");

impl Session {
    fn open(addr: &str) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ops-test", "version": "1"}}});
        let response = post(addr, &[], &init);
        assert_eq!(response.status, 200, "initialize: {}", response.body);
        let id = response.header("mcp-session-id").expect("a session id").to_owned();
        let session = Self { addr: addr.to_owned(), id };
        let done = session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(done.status == 202 || done.status == 200, "initialized: {} {}", done.status, done.body);
        session
    }

    fn post(&self, message: &Value) -> Response {
        post(&self.addr, &[("Mcp-Session-Id", &self.id), ("MCP-Protocol-Version", "2025-11-25")], message)
    }

    /// Call `tool` with `arguments`; the JSON-RPC response.
    fn call(&self, id: u64, tool: &str, arguments: Value) -> Response {
        self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
    }
}

fn post(addr: &str, headers: &[(&str, &str)], message: &Value) -> Response {
    let mut all = vec![AUTH, ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    all.extend_from_slice(headers);
    request(addr, "POST", "/mcp", &all, &message.to_string())
}

/// Poll `check` every 50 ms until it holds, for at most `secs` seconds (a bound on a
/// broken server, not a timing assertion).
fn eventually(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < Duration::from_secs(secs), "{what}: not after {secs} s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the sample `name{labels}` in a Prometheus text exposition (labels in the
/// exporter's order), if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// `/healthz` and `/readyz` answer without the token once the skills have loaded; calls
/// through MCP are counted in `/metrics` (calls by outcome, the duration histogram, calls
/// in flight, approvals pending), and the MCP front still wants its token.
#[test]
fn ops_listener_health_readiness_and_metrics() {
    let env = OpsEnv::new("2s");
    // A skill waiting for a human: counted in skillhost_approvals_pending.
    fixtures::ESCAPE.folder(env.skills.path());
    let (mut child, mcp, ops, _stderr) = env.serve(&[], &[]);
    let health = request(&ops, "GET", "/healthz", &[], "");
    assert_eq!((health.status, health.body.trim()), (200, "ok"));
    eventually(180, "/readyz 200 once the skills loaded", || request(&ops, "GET", "/readyz", &[], "").status == 200);

    let unauthorized = request(&mcp, "POST", "/mcp", &[], "{}");
    assert_eq!(unauthorized.status, 401, "the MCP front still asks for its token");

    let session = Session::open(&mcp);
    for i in 0..3 {
        let answer = session.call(10 + i, "limits__echo", json!({"value": i})).message();
        assert!(answer["result"].is_object() && answer["result"]["isError"] != true, "{answer}");
    }
    let failed = session.call(20, "limits__fail", json!({"kind": "failed"})).message();
    assert_eq!(failed["result"]["isError"], true, "{failed}");

    let metrics = request(&ops, "GET", "/metrics", &[], "");
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(metrics.header("content-type").unwrap_or_default().starts_with("text/plain"), "{:?}", metrics.headers);
    let text = &metrics.body;
    let calls = sample(text, r#"skillhost_calls_total{skill="limits",tool="echo",outcome="ok"}"#);
    assert_eq!(calls, Some(3.0), "three echo calls:\n{text}");
    let count = sample(text, r#"skillhost_call_duration_seconds_count{skill="limits",tool="echo"}"#);
    assert_eq!(count, Some(3.0), "the histogram counts each call:\n{text}");
    assert_eq!(sample(text, r#"skillhost_calls_total{skill="limits",tool="fail",outcome="failed"}"#), Some(1.0), "{text}");
    assert_eq!(sample(text, "skillhost_calls_in_flight"), Some(0.0), "{text}");
    assert_eq!(sample(text, "skillhost_approvals_pending"), Some(1.0), "escape waits for a human:\n{text}");
}

/// SIGTERM while a call is in flight: `/readyz` turns 503 with the reason while
/// `/healthz` stays 200, a new request gets 503 with `Retry-After: 1` and a JSON-RPC
/// error saying it may be retried, the call in flight is answered, and the process exits 0.
#[test]
fn sigterm_drains_calls_in_flight_and_refuses_new_ones() {
    let env = OpsEnv::new("60s");
    let (mut child, mcp, ops, _stderr) = env.serve(&[], &["--drain-timeout", "60s"]);
    eventually(180, "/readyz 200 once the skills loaded", || request(&ops, "GET", "/readyz", &[], "").status == 200);
    let session = Session::open(&mcp);
    let slow = {
        let (addr, id) = (session.addr.clone(), session.id.clone());
        std::thread::spawn(move || Session { addr, id }.call(1, "limits__sleep", json!({"ms": 8000})).message())
    };
    eventually(60, "the slow call in flight", || {
        sample(&request(&ops, "GET", "/metrics", &[], "").body, "skillhost_calls_in_flight") == Some(1.0)
    });
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    eventually(30, "/readyz 503 while draining", || request(&ops, "GET", "/readyz", &[], "").status == 503);
    let ready = request(&ops, "GET", "/readyz", &[], "");
    let reasons: Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!(reasons["ready"], false, "{reasons}");
    assert!(reasons["reasons"][0].as_str().unwrap().contains("draining"), "{reasons}");
    assert_eq!(request(&ops, "GET", "/healthz", &[], "").status, 200, "alive while draining");

    let refused = session.call(2, "limits__echo", json!({"value": 1}));
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after"), Some("1"), "{:?}", refused.headers);
    let error = refused.message();
    assert_eq!(error["id"], 2, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("draining"), "{error}");
    assert_eq!(error["error"]["data"]["retriable"], true, "{error}");
    let metrics = request(&ops, "GET", "/metrics", &[], "").body;
    assert_eq!(
        sample(&metrics, r#"skillhost_calls_total{skill="limits",tool="echo",outcome="ok"}"#),
        None,
        "nothing of it ran:\n{metrics}"
    );

    let answered = slow.join().unwrap();
    assert!(answered["result"].is_object() && answered["result"]["isError"] != true, "the call in flight finished: {answered}");
    assert!(answered["result"].to_string().contains("8000"), "it slept its 8 s: {answered}");
    let mut status = None;
    eventually(120, "serve exits after the drain", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "exit 0 after a drain: {status:?}");
}

/// `--log-format json` writes each log line as one JSON object.
#[test]
fn log_format_json_writes_json_lines() {
    let env = OpsEnv::new("2s");
    let (mut child, _mcp, ops, mut stderr) = env.serve(&["--log-format", "json", "-v"], &[]);
    // Read all along: a full pipe would stop the server at its next log line.
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    eventually(180, "/readyz 200 once the skills loaded", || request(&ops, "GET", "/readyz", &[], "").status == 200);
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let rest = reader.join().unwrap();
    let _ = child.wait();
    let logs: Vec<Value> = rest.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!logs.is_empty(), "no JSON log line in:\n{rest}");
    assert!(logs.iter().all(|l| l["level"].is_string() && l["fields"].is_object()), "{logs:?}");
    assert!(!rest.lines().any(|l| l.contains(" DEBUG ") || l.contains(" INFO ")), "no text-format line:\n{rest}");
}
