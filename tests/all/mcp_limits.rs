//! The MCP front at its limits (issue 40, items 7 and 11), against a host with the real
//! jail: over streamable HTTP a `skill_run` under the documented input cap is answered
//! (the official Python SDK sends 13 MiB as base64), and a body over the limit gets a 413
//! whose body is a JSON-RPC error naming the limit, refused by its `Content-Length` before
//! anything is read, or by what was read when it comes chunked; runs held at once are
//! bounded per session and per host, across sessions, with an error naming the limit and
//! the setting that raises it.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use skillhost::mcp::{HttpConfig, McpConfig, SkillhostMcp, serve_http};
use skillhost::{ApprovalChannel, Registry, RegistryConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::HANG_GUARD;

/// The longest message the front reads (24 MiB: the input cap as base64, and room).
const MAX_MESSAGE_BYTES: usize = skillhost::mcp::MAX_MESSAGE_BYTES;

const TOKEN: &str = "limits-40-token";

/// A SKILL.md skill `name` with `scripts/size.sh FILE` (its size and SHA-256) and
/// `scripts/wait.sh` (sleeps a minute), approved as a human would.
async fn registry(data: &Path, workspace: &Path) -> Arc<Registry> {
    let dir = workspace.join("sizer");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: sizer\ndescription: Measures a file. Use it in tests.\n---\nRun `sh scripts/size.sh FILE`.\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/size.sh"), "#!/bin/sh\nwc -c < \"$1\" | tr -d ' '\nsha256sum \"$1\" | cut -d' ' -f1\n").unwrap();
    std::fs::write(dir.join("scripts/wait.sh"), "#!/bin/sh\nsleep 60\n").unwrap();
    let host = crate::sandbox_host(data);
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(workspace.to_owned());
    config.watch = false;
    let registry = tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("open hung").expect("opens");
    let request = registry.approval_request("sizer").unwrap();
    registry.approve("sizer", &request.content_hash, &request.capability_digest, ApprovalChannel::Cli).await.unwrap();
    registry
}

/// The front of `server` over streamable HTTP on a free port.
async fn http_front(server: SkillhostMcp) -> (SocketAddr, tokio_util::sync::CancellationToken) {
    let config = HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), token: Some(TOKEN.into()), ..HttpConfig::default() };
    let (ready, bound) = tokio::sync::oneshot::channel();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve_http(server, config, shutdown.clone(), Some(ready)));
    (tokio::time::timeout(HANG_GUARD, bound).await.expect("the front did not start").unwrap(), shutdown)
}

/// Attack of issue 40 (7) over HTTP: 13 MiB of input, under the cap, was over rmcp's
/// 4 MiB body limit (a 413 in plain text the SDK reports as "Server returned an error
/// response"). Through the official Python SDK it runs and is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_under_the_input_cap_is_answered_over_http() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let registry = registry(data.path(), workspace.path()).await;
    let (addr, shutdown) = http_front(SkillhostMcp::new(registry, McpConfig::default()).unwrap()).await;
    for mode in ["auto", "legacy"] {
        let facts =
            crate::mcp_run::mcp_run_py(&["big", mode, &format!("http://{addr}/mcp"), TOKEN, "sizer", "13"], Duration::from_secs(240)).await;
        eprintln!("{mode}: {facts}");
    }
    shutdown.cancel();
}

/// One HTTP response read by its `Content-Length` (the server may keep the connection).
async fn response(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u16, String, Value) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        if stream.read(&mut byte).await.unwrap() == 0 {
            panic!("the connection closed before a response: {}", String::from_utf8_lossy(&head));
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let header = |name: &str| {
        head.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned()))
    };
    let length: usize = header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    let content_type = header("content-type").unwrap_or_default();
    (status, content_type, serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())))
}

fn post_head(addr: SocketAddr, length: Option<usize>) -> String {
    let framing = length.map_or_else(|| "Transfer-Encoding: chunked".to_owned(), |n| format!("Content-Length: {n}"));
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{framing}\r\n\r\n"
    )
}

/// Checks a 413 answer: a JSON-RPC error naming the limit, with `id`.
fn assert_refused((status, content_type, body): &(u16, String, Value), id: &Value) {
    assert_eq!(*status, 413, "{body}");
    assert!(content_type.starts_with("application/json"), "{content_type}: {body}");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(&body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&MAX_MESSAGE_BYTES.to_string()), "names the limit in bytes: {message}");
}

/// Attack of issue 40 (7) over HTTP: a body over the limit. Declared by its
/// Content-Length, it is refused before a byte of it is read (the client sends none);
/// chunked, it is read up to the limit and refused with the request's id; the front
/// serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_gets_a_json_rpc_error() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let registry = registry(data.path(), workspace.path()).await;
    let (addr, shutdown) = http_front(SkillhostMcp::new(registry, McpConfig::default()).unwrap()).await;
    let over = MAX_MESSAGE_BYTES + 1;

    // Declared too long: nothing of the body is sent, and the answer comes anyway.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(post_head(addr, Some(over)).as_bytes()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), response(&mut stream)).await.expect("no answer: silence");
    assert_refused(&answer, &Value::Null);

    // Chunked, the id first: the body is streamed while the answer is read.
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = post_head(addr, None);
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let prefix = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"skill_run","arguments":{"skill":"sizer","command":["sh"],"inputs":[{"path":"a","text":""#;
        write.write_all(format!("{:x}\r\n", prefix.len()).as_bytes()).await?;
        write.write_all(prefix).await?;
        write.write_all(b"\r\n").await?;
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..=over >> 20 {
            write.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
            write.write_all(&chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"6\r\n\"}]}}}\r\n0\r\n\r\n").await?;
        Ok::<_, std::io::Error>(())
    });
    let answer = tokio::time::timeout(Duration::from_secs(60), response(&mut read)).await.expect("no answer: silence");
    assert_refused(&answer, &json!(5));
    // The writer may stop on a closed connection once the answer is out: either is fine.
    let _ = tokio::time::timeout(HANG_GUARD, writer).await.expect("the front neither read nor closed the rest of the body");

    // The front goes on: a client's handshake is answered.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(format!("{}{init}", post_head(addr, Some(init.len()))).as_bytes()).await.unwrap();
    let (status, _, _) = tokio::time::timeout(HANG_GUARD, response(&mut stream)).await.expect("the handshake hung");
    assert_eq!(status, 200);
    shutdown.cancel();
}

/// A client of a new session of `server`, over an in-memory pipe.
async fn session(server: &SkillhostMcp) -> RunningService<RoleClient, ()> {
    let (client_side, host_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(skillhost::mcp::serve(server.session(), host_side));
    tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("the front answers")
}

/// Start `skill_run` of `scripts/wait.sh` (a minute) in `client`'s session, in the
/// background.
fn start_wait(client: &RunningService<RoleClient, ()>) -> tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, String>> {
    start_run(client, &["sh", "scripts/wait.sh"])
}

/// Start `skill_run` of `command` in `client`'s session, in the background.
fn start_run(
    client: &RunningService<RoleClient, ()>,
    command: &[&str],
) -> tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, String>> {
    let peer = client.peer().clone();
    let args = json!({"skill": "sizer", "command": command}).as_object().cloned().unwrap();
    tokio::spawn(
        async move { peer.call_tool(CallToolRequestParams::new("skill_run").with_arguments(args)).await.map_err(|e| e.to_string()) },
    )
}

/// The text of a refused run, which must come at once.
async fn refused(run: tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, String>>, what: &str) -> String {
    let result =
        tokio::time::timeout(Duration::from_secs(20), run).await.unwrap_or_else(|_| panic!("{what}: not refused, it ran")).unwrap();
    let result = result.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(result.is_error, Some(true), "{what}: {result:?}");
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// Attack of issue 40 (11): thirty runs held at once by one session held ~650 MiB, with
/// nothing to bound them. One session gets its share and no more; two sessions together
/// get the host's and no more; each refusal names the limit, the setting that raises it,
/// and says to wait. A run that failed, and the runs of a client that left, give their
/// slots back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_held_at_once_are_bounded_per_session_and_per_host() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let registry = registry(data.path(), workspace.path()).await;
    let (per_session, per_host) = (4, 8);
    let server = SkillhostMcp::new(registry, McpConfig::default()).unwrap();
    let first = session(&server).await;
    let second = session(&server).await;

    // A run that fails gives its slot back: more of them in a row than a session holds.
    for _ in 0..=per_session {
        let text = refused(start_run(&first, &["python3", "-c", "pass"]), "inline code").await;
        assert!(!text.contains("max-"), "a failed run kept its slot: {text}");
    }
    let held: Vec<_> = (0..per_session).map(|_| start_wait(&first)).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = refused(start_wait(&first), "one run more than a session may hold").await;
    assert!(text.contains(&per_session.to_string()) && text.contains("max-session-runs") && text.contains("wait"), "{text}");

    let mut others: Vec<_> = (0..per_host - per_session).map(|_| start_wait(&second)).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = refused(start_wait(&second), "one run more than the host may hold, from another session").await;
    assert!(text.contains(&per_host.to_string()) && text.contains("max-runs") && text.contains("wait"), "{text}");
    for run in held.iter().chain(&others) {
        assert!(!run.is_finished(), "the runs in their bounds are still running");
    }
    // A client that goes away gives its runs' slots back: a third session runs once the
    // first one's are free (how soon is the jail's business: asked again until then).
    drop(first);
    let third = session(&server).await;
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let result = start_run(&third, &["sh", "scripts/size.sh", "scripts/size.sh"]).await.unwrap().unwrap();
        if result.is_error != Some(true) {
            break;
        }
        let text = format!("{:?}", result.content);
        assert!(text.contains("max-runs"), "{text}");
        assert!(tokio::time::Instant::now() < deadline, "the runs of a client that left still hold the host's slots: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    others.clear();
    drop((second, third, held));
}
