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
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last `data:` line of an
    /// SSE stream.
    pub(crate) fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        let data = self.body.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).rfind(|d| d.starts_with('{'));
        serde_json::from_str(data.unwrap_or_else(|| panic!("no JSON-RPC message in {:?}", self.body))).unwrap()
    }
}

/// Send one HTTP/1.1 request (`Connection: close`) and read the whole response.
pub(crate) fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
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

/// One exported span, as the collector decoded it.
#[derive(Debug)]
struct ExportedSpan {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: Vec<(String, String)>,
    error: bool,
}

impl ExportedSpan {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Every span in the OTLP/HTTP exports `collector` received, decoded with the protocol's
/// own messages (a body that does not decode fails the test).
fn exported_spans(collector: &fixtures::TestServer) -> Vec<ExportedSpan> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message as _;
    let mut spans = Vec::new();
    for export in collector.received().into_iter().filter(|r| r.target == "/v1/traces") {
        assert_eq!(export.method, "POST");
        assert_eq!(export.header("content-type"), Some("application/x-protobuf"), "{:?}", export.headers);
        let request = ExportTraceServiceRequest::decode(&export.body[..]).expect("an OTLP ExportTraceServiceRequest");
        for resource in request.resource_spans {
            let service = resource.resource.iter().flat_map(|r| &r.attributes).find(|a| a.key == "service.name");
            let service = service.and_then(|a| a.value.as_ref()).and_then(|v| v.value.as_ref());
            assert!(matches!(service, Some(Any::StringValue(s)) if s == "skillhost"), "service.name: {service:?}");
            for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                let attributes = span
                    .attributes
                    .iter()
                    .map(|a| {
                        let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(Any::StringValue(s)) => s.clone(),
                            Some(Any::IntValue(i)) => i.to_string(),
                            other => format!("{other:?}"),
                        };
                        (a.key.clone(), value)
                    })
                    .collect();
                let error = span.status.as_ref().is_some_and(|s| s.code == 2);
                spans.push(ExportedSpan {
                    name: span.name,
                    trace: hex(&span.trace_id),
                    id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    attributes,
                    error,
                });
            }
        }
    }
    spans
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// With `[telemetry] otlp_endpoint`, a call and a run are each one trace under the trace
/// context the client sent (the `traceparent` header over HTTP; `_meta.traceparent` as a
/// stdio client would), each span the child of the one before: `tools/call` → the
/// registry's `registry.call` → `wasm.invoke` → `egress.request` (with the host asked and
/// the status), and `tools/call skill_run` → `registry.run` → `sandbox.run`; a refused
/// request is a failed span. The spans still queued when SIGTERM stops `serve` are
/// exported before it exits.
#[test]
fn traces_of_a_call_and_a_run_reach_the_collector_under_the_clients_trace_context() {
    let (collector, target) = (fixtures::TestServer::start_keep_alive(), fixtures::TestServer::start());
    let env = OpsEnv::new("10s");
    let net = env.skills.path().join("net");
    std::fs::create_dir_all(&net).unwrap();
    std::fs::copy(fixtures::NET.wasm, net.join("skill.wasm")).unwrap();
    let origin = format!("http://127.0.0.1:{}", target.port());
    std::fs::write(net.join("skill.toml"), format!("{}\n[network]\nallow = [\"{origin}\"]\n", fixtures::NET.manifest())).unwrap();
    let tally = env.skills.path().join("tally");
    std::fs::create_dir_all(tally.join("scripts")).unwrap();
    std::fs::write(tally.join("SKILL.md"), "---\nname: tally\ndescription: Counts. Use it in tests.\n---\nRun `sh scripts/count.sh`.\n")
        .unwrap();
    std::fs::write(tally.join("scripts/count.sh"), "#!/bin/sh\necho 3\n").unwrap();
    std::fs::write(env.data.path().join("config.toml"), format!("[telemetry]\notlp_endpoint = \"http://{}\"\n", collector.addr)).unwrap();
    for skill in ["net", "tally"] {
        let approved = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .args(["approve", skill, "--yes"])
            .output()
            .unwrap();
        assert!(approved.status.success(), "approve {skill}: {}", String::from_utf8_lossy(&approved.stderr));
    }

    let (mut child, mcp, ops, _stderr) = env.serve(&[], &[]);
    eventually(180, "/readyz 200 once the skills loaded", || request(&ops, "GET", "/readyz", &[], "").status == 200);
    let session = Session::open(&mcp);
    let (call_trace, run_trace, refused_trace) =
        ("4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c", "5e0c63257de34c92bf9efcd03927272e");
    let fetch = |id, url: &str, trace: &str| {
        let message =
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "net__fetch", "arguments": {"url": url}}});
        let traceparent = format!("00-{trace}-00f067aa0ba902b7-01");
        let headers = [("Mcp-Session-Id", session.id.as_str()), ("MCP-Protocol-Version", "2025-11-25"), ("traceparent", &traceparent)];
        post(&mcp, &headers, &message).message()
    };
    let fetched = fetch(1, &format!("{origin}/ok"), call_trace);
    assert_eq!(fetched["result"]["structuredContent"]["status"], 200, "{fetched}");
    let refused = fetch(2, "http://127.0.0.2:9/", refused_trace);
    assert!(refused["result"].is_object(), "{refused}");
    let run = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "skill_run", "arguments": {"skill": "tally", "command": ["sh", "scripts/count.sh"]},
        "_meta": {"traceparent": format!("00-{run_trace}-b7ad6b7169203331-01")}}});
    let ran = session.post(&run).message();
    assert!(ran["result"]["isError"] != true, "{ran}");

    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert!(child.wait().unwrap().success(), "drained and exited 0");
    let spans = exported_spans(&collector);
    let names = |trace: &str| spans.iter().filter(|s| s.trace == trace).map(|s| s.name.as_str()).collect::<Vec<_>>();
    // Each span's parent is the one named before it; the first's is the client's span.
    let chain = |trace: &str, names: &[&str], client: &str| -> Vec<&ExportedSpan> {
        let mut parent = client.to_owned();
        names
            .iter()
            .map(|name| {
                let span = spans.iter().find(|s| s.trace == trace && s.name == *name).unwrap_or_else(|| {
                    panic!(
                        "no span `{name}` in trace {trace}; it has {:?}",
                        spans.iter().filter(|s| s.trace == trace).map(|s| &s.name).collect::<Vec<_>>()
                    )
                });
                assert_eq!(span.parent, parent, "the parent of `{name}`: {span:?}");
                parent = span.id.clone();
                span
            })
            .collect()
    };
    let call = chain(call_trace, &["tools/call net__fetch", "call net", "wasm.invoke", "GET"], "00f067aa0ba902b7");
    assert_eq!(call[0].attribute("gen_ai.tool.name"), Some("net__fetch"), "{:?}", call[0]);
    assert_eq!(call[0].attribute("mcp.session.id"), Some(session.id.as_str()), "{:?}", call[0]);
    assert_eq!(call[1].attribute("skillhost.skill"), Some("net"), "{:?}", call[1]);
    assert_eq!(call[3].attribute("server.address"), Some("127.0.0.1"), "{:?}", call[3]);
    assert_eq!(call[3].attribute("http.response.status_code"), Some("200"), "{:?}", call[3]);
    assert!(call.iter().all(|s| !s.error), "{call:?}");
    let refused = chain(refused_trace, &["tools/call net__fetch", "call net", "wasm.invoke", "GET"], "00f067aa0ba902b7");
    assert!(refused[3].error && refused[3].attribute("error.type") == Some("denied"), "{:?}", refused[3]);
    let run = chain(run_trace, &["tools/call skill_run", "run tally", "sandbox.run"], "b7ad6b7169203331");
    assert_eq!(run[2].attribute("skillhost.skill"), Some("tally"), "{:?}", run[2]);
    assert!(names(call_trace).len() == 4 && names(run_trace).len() == 3, "no other spans: {:?} {:?}", names(call_trace), names(run_trace));
}

/// A client that opens a connection and never finishes its request head holds it no
/// longer than the header timeout, on the MCP listener and the operations one alike (it
/// would otherwise hold a file descriptor for as long as it likes, and many such clients
/// every descriptor the host has).
#[test]
fn a_request_head_that_never_ends_is_cut_off() {
    let env = OpsEnv::new("2s");
    let (mut child, mcp, ops, _stderr) = env.serve(&[], &[]);
    for addr in [&mcp, &ops] {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        assert!(read.is_ok(), "{addr}: the connection is still open after 60 s: {read:?}");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{addr}: {answer}");
    }
    child.kill().unwrap();
    let _ = child.wait();
}
