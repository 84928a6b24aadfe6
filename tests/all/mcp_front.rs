//! The MCP front in process, as an editor plugin embeds it (rmcp's client over an
//! in-memory pipe): an agent reading a skill's files with `read_skill_resource` or
//! `resources/read` cannot leave the skill's folder, whatever form the path takes, nor
//! through symlinks swapped in while it reads. The same front over the real binary and
//! the official Python SDK is tested in `host/cli/tests/cli/mcp.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fixtures::LIMITS;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use serde_json::json;
use skillhost::mcp::{McpConfig, SkillhostMcp};
use skillhost::{Registry, RegistryConfig};

use crate::{HANG_GUARD, Swapper, test_host};

const CANARY: &str = "SECRET-CANARY-51d0";

/// An MCP client connected to the front of `registry` over an in-memory pipe.
async fn front(registry: Arc<Registry>) -> RunningService<RoleClient, ()> {
    let (client_side, host_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(skillhost::mcp::serve(SkillhostMcp::new(registry, McpConfig::default()).unwrap(), host_side));
    tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("the front answers the handshake")
}

/// `read_skill_resource` of `path` in the `limits` skill: the text, or the error's text.
async fn read(client: &RunningService<RoleClient, ()>, path: &str) -> Result<String, String> {
    let args = json!({"skill": "limits", "path": path}).as_object().cloned().unwrap();
    let call = client.call_tool(CallToolRequestParams::new("read_skill_resource").with_arguments(args));
    let result =
        tokio::time::timeout(HANG_GUARD, call).await.expect("read_skill_resource hung").expect("a tool result, not a protocol error");
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n");
    if result.is_error == Some(true) {
        Err(text)
    } else {
        Ok(result.structured_content.as_ref().and_then(|s| s["text"].as_str()).map(str::to_owned).unwrap_or(text))
    }
}

/// The `limits` skill as a folder with a SKILL.md and a reference, in a registry that
/// does not watch (so planted links are not reloaded away); a secret file and folder
/// outside it.
struct Planted {
    t: fixtures::TestHost,
    workspace: tempfile::TempDir,
    secrets: tempfile::TempDir,
}

impl Planted {
    fn new() -> Self {
        let (t, workspace, secrets) = (test_host(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = LIMITS.folder(workspace.path());
        std::fs::write(dir.join("SKILL.md"), "---\nname: limits\ndescription: Echo values back.\n---\n# Limits\n").unwrap();
        std::fs::create_dir(dir.join("references")).unwrap();
        std::fs::write(dir.join("references/notes.md"), "harmless").unwrap();
        std::fs::write(dir.join("notes.md"), "harmless").unwrap();
        std::fs::write(secrets.path().join("id_rsa"), CANARY).unwrap();
        std::fs::create_dir(secrets.path().join("ssh")).unwrap();
        std::fs::write(secrets.path().join("ssh/notes.md"), CANARY).unwrap();
        Self { t, workspace, secrets }
    }

    fn skill_dir(&self) -> std::path::PathBuf {
        self.workspace.path().join("limits")
    }

    async fn registry(&self) -> Arc<Registry> {
        let mut config = RegistryConfig::new(self.t.data.path());
        config.workspace = Some(self.workspace.path().to_owned());
        config.watch = false;
        self.t.host.open_registry(config).await.expect("registry opens")
    }
}

/// Attack: an agent asks for paths that leave the skill folder: `..`, absolute,
/// `.`-prefixed, percent-encoded, backslashed, with a NUL byte, empty, through a
/// directory link and a file link planted after the skill loaded, and the same through
/// `skill://` resource URIs (including another skill's name).
/// Expected: each is an error naming the skill and the path (a tool error for the tool,
/// a protocol error for `resources/read`).
/// Checked: no answer carries the secret; the skill's own files still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_cannot_leave_the_skill_folder_whatever_the_path() {
    let planted = Planted::new();
    let registry = planted.registry().await;
    let client = front(registry).await;
    assert!(read(&client, "SKILL.md").await.expect("its own SKILL.md reads").starts_with("---"));
    assert_eq!(read(&client, "references/notes.md").await.as_deref(), Ok("harmless"));

    let dir = planted.skill_dir();
    std::os::unix::fs::symlink(planted.secrets.path().join("ssh"), dir.join("link")).unwrap();
    std::os::unix::fs::symlink(planted.secrets.path().join("id_rsa"), dir.join("secret-link")).unwrap();
    let secret = planted.secrets.path().join("id_rsa").display().to_string();
    let escapes = [
        "../limits/skill.toml".to_owned(),
        "references/../../limits/skill.toml".to_owned(),
        secret.clone(),
        format!("/proc/self/root{secret}"),
        "./SKILL.md".to_owned(),
        "%2e%2e/%2e%2e/etc/passwd".to_owned(),
        "..\\..\\etc\\passwd".to_owned(),
        "SKILL.md\0../../etc/passwd".to_owned(),
        String::new(),
        "link/notes.md".to_owned(),
        "secret-link".to_owned(),
        "references".to_owned(),
    ];
    for path in &escapes {
        let answer = read(&client, path).await;
        let error = answer.as_ref().expect_err(&format!("{path:?} was read: {answer:?}"));
        assert!(error.contains("`limits`"), "{path:?}: the error names the skill: {error}");
        assert!(!error.contains(CANARY), "{path:?}: {error}");
    }

    for uri in [
        "skill://limits/../limits/skill.toml",
        "skill://limits/link/notes.md",
        "skill://limits/secret-link",
        "skill://nope/SKILL.md",
        "skill://limits/%2e%2e/skill.toml",
    ] {
        let read = client.read_resource(ReadResourceRequestParams::new(uri));
        match tokio::time::timeout(HANG_GUARD, read).await.expect("resources/read hung") {
            Err(e) => assert!(!e.to_string().contains(CANARY), "{uri}: {e}"),
            Ok(result) => panic!(
                "{uri} was read: {:?}",
                result.contents.iter().map(|c| matches!(c, ResourceContents::TextResourceContents { .. })).collect::<Vec<_>>()
            ),
        }
    }
    assert_eq!(read(&client, "notes.md").await.as_deref(), Ok("harmless"), "the skill's files still read");
}

/// Attack: once the skill loaded (and was approved: its tier is auto), its reference is
/// rewritten on disk and a file is added, with no reload (the registry does not watch).
/// Expected: an agent reads the bytes that were hashed and approved; the rewritten text
/// and the new file are not served, nor listed, until a rescan hashed them.
/// Checked: the answers carry no canary; the catalog still shows the approved hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_serve_the_approved_bytes_not_the_live_folder() {
    let planted = Planted::new();
    let registry = planted.registry().await;
    let approved = registry.entry("limits").unwrap().loaded.as_ref().unwrap().content_hash.clone();
    let client = front(registry.clone()).await;
    std::fs::write(planted.skill_dir().join("references/notes.md"), CANARY).unwrap();
    std::fs::write(planted.skill_dir().join("references/added.md"), CANARY).unwrap();
    assert_eq!(read(&client, "references/notes.md").await.as_deref(), Ok("harmless"), "the approved text is served");
    let added = read(&client, "references/added.md").await;
    let error = added.as_ref().expect_err("a file added since the load is not served");
    assert!(error.contains("no such file") && !error.contains(CANARY), "{error}");
    let listed = tokio::time::timeout(HANG_GUARD, client.list_all_resources()).await.expect("resources/list hung").unwrap();
    assert!(!listed.iter().any(|r| r.uri.contains("added.md")), "{listed:?}");
    let uri = "skill://limits/references/notes.md";
    let read = tokio::time::timeout(HANG_GUARD, client.read_resource(ReadResourceRequestParams::new(uri))).await.unwrap().unwrap();
    assert!(!format!("{read:?}").contains(CANARY), "{read:?}");
    assert_eq!(registry.entry("limits").unwrap().loaded.as_ref().unwrap().content_hash, approved);
}

/// Attack: while an agent reads `notes.md` and `references/notes.md` in a loop, another
/// thread keeps swapping the file for a symlink to a secret and the folder for a symlink
/// to a secret folder (a check-then-open race against a reader of the live folder).
/// Expected: every read answers the harmless text: resources are served from the files
/// the registry hashed at load, so nothing on disk is consulted, swapped or not.
/// Checked: over two seconds of reads racing the swaps, every answer is the approved text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_swapped_in_during_reads_are_never_followed() {
    let planted = Planted::new();
    let registry = planted.registry().await;
    let client = front(registry).await;
    let dir = planted.skill_dir();
    std::os::unix::fs::symlink(planted.secrets.path().join("id_rsa"), dir.join(".notes-link")).unwrap();
    std::os::unix::fs::symlink(planted.secrets.path().join("ssh"), dir.join(".refs-link")).unwrap();
    let swapper = Swapper::start(&dir, &[("notes.md", ".notes-link"), ("references", ".refs-link")]);

    let mut served = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        for path in ["notes.md", "references/notes.md"] {
            let answer = read(&client, path).await;
            assert_eq!(answer.as_deref(), Ok("harmless"), "{path} served something else");
            served += 1;
        }
    }
    let swaps = swapper.stop();
    eprintln!("{served} reads served, {swaps} swap rounds");
    assert!(served > 0 && swaps > 0, "the reads were raced");
}

/// Attack: reach the MCP front over HTTP without its token (none, wrong, a prefix of the
/// right one, the right one in the query string or under another scheme), from a web
/// page (a foreign or `null` browser `Origin` POSTing to the loopback port), or by DNS
/// rebinding (a foreign `Host`); and start it on a public address without a token.
/// Expected: 401 for every token failure, 403 for a foreign Origin or Host, and a
/// configuration error naming `--token-file` for the public address.
/// Checked: the right token from a loopback Host answers the handshake (200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_front_refuses_requests_without_its_token_or_from_other_origins() {
    use skillhost::mcp::{HttpConfig, serve_http};
    let planted = Planted::new();
    let registry = planted.registry().await;
    let public = HttpConfig { addr: "0.0.0.0:0".parse().unwrap(), ..HttpConfig::default() };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let err =
        serve_http(SkillhostMcp::new(registry.clone(), McpConfig::default()).unwrap(), public, shutdown.clone(), None).await.unwrap_err();
    assert!(err.to_string().contains("needs a bearer token: pass --token-file FILE"), "{err}");

    let config = HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), token: Some("sesame-7c1f".into()), ..HttpConfig::default() };
    let (ready, bound) = tokio::sync::oneshot::channel();
    let server =
        tokio::spawn(serve_http(SkillhostMcp::new(registry, McpConfig::default()).unwrap(), config, shutdown.clone(), Some(ready)));
    let addr = tokio::time::timeout(HANG_GUARD, bound).await.expect("the front did not start").unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = |target: &str, headers: &str| {
        format!(
            "POST {target} HTTP/1.1\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let host = format!("Host: {addr}\r\n");
    let right = format!("{host}Authorization: Bearer sesame-7c1f\r\n");
    for (what, target, headers, expected) in [
        ("no token", "/mcp", host.clone(), "401"),
        ("a wrong token", "/mcp", format!("{host}Authorization: Bearer nope\r\n"), "401"),
        ("a prefix of the token", "/mcp", format!("{host}Authorization: Bearer sesame\r\n"), "401"),
        ("the token in the query", "/mcp?token=sesame-7c1f", host.clone(), "401"),
        ("the token under Basic", "/mcp", format!("{host}Authorization: Basic sesame-7c1f\r\n"), "401"),
        ("a foreign browser origin", "/mcp", format!("{right}Origin: https://evil.example\r\n"), "403"),
        ("a null origin", "/mcp", format!("{right}Origin: null\r\n"), "403"),
        ("a rebound Host", "/mcp", "Host: evil.example:80\r\nAuthorization: Bearer sesame-7c1f\r\n".to_owned(), "403"),
        ("the right token", "/mcp", right.clone(), "200"),
    ] {
        let status = crate::status_of(addr, request(target, &headers)).await;
        assert!(status.contains(expected), "{what}: expected {expected}, got {status:?}");
    }
    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, server).await.expect("the front did not stop").unwrap().unwrap();
}

/// The whole answer to a call of `tool` with `args`, as JSON.
async fn answer(client: &RunningService<RoleClient, ()>, tool: &str, args: serde_json::Value) -> serde_json::Value {
    let call = client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().cloned().unwrap()));
    let result = tokio::time::timeout(HANG_GUARD, call).await.expect("the call hung").expect("a tool result, not a protocol error");
    serde_json::to_value(result).unwrap()
}

/// Fidelity: what a skill answers reaches the agent as it answered it. A server's text
/// that is not JSON (mcp-server-fetch's answers) arrives as that text, not JSON-quoted;
/// its image block as the image; its structured content as structured content beside
/// its own text. A wasm skill's string output arrives as its text, any other value as
/// its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_reach_the_agent_as_the_skill_answered_them() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = crate::sandbox_host(data.path());
    fixtures::python::install("raw-server", workspace.path(), "");
    LIMITS.folder(workspace.path());
    let mut config = RegistryConfig::new(data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = false;
    let registry = tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("open hung").expect("registry opens");
    let client = front(registry).await;

    let page = answer(&client, "raw-server__page", json!({})).await;
    assert_eq!(page["isError"], false, "{page}");
    let text = "Content type text/html cannot be simplified to markdown:\n<p class=\"x\">\"hi\"</p>";
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    assert_eq!(page["content"], json!([{"type": "text", "text": text}, {"type": "image", "mimeType": "image/png", "data": png}]), "{page}");

    let count = answer(&client, "raw-server__count", json!({"mode": "honest"})).await;
    assert_eq!(count["structuredContent"], json!({"count": 3}), "{count}");
    assert_eq!(count["content"], json!([{"type": "text", "text": "{\"count\": 3}"}]), "the server's own text, spacing and all: {count}");

    let words = answer(&client, "limits__echo", json!({"value": "plain \"words\""})).await;
    assert_eq!(words["content"], json!([{"type": "text", "text": "plain \"words\""}]), "{words}");
    let object = answer(&client, "limits__echo", json!({"value": {"a": [1, "two"]}})).await;
    assert_eq!(object["content"], json!([{"type": "text", "text": "{\"a\":[1,\"two\"]}"}]), "{object}");
}

/// One full-text engine: every `fts` answer of `tool_search` and `skill_search` is
/// ranked by the search index (tantivy BM25, hybrid with the model), `regex` and `exact`
/// by the matcher; a query the matcher cannot run is an error naming the tool and what to
/// do, not an empty result.
#[tokio::test]
async fn full_text_search_is_answered_by_the_search_index_alone() {
    let planted = Planted::new();
    let client = front(planted.registry().await).await;
    for tool in ["tool_search", "skill_search"] {
        let fts = answer(&client, tool, json!({"query": "echo values"})).await;
        let found = &fts["structuredContent"];
        assert!(matches!(found["ranker"].as_str(), Some("bm25" | "hybrid")), "{tool}: {fts}");
        assert!(found.to_string().contains("limits"), "{tool} did not find the limits skill: {fts}");
        let regex = answer(&client, tool, json!({"query": "lim", "search_type": "regex"})).await;
        assert_eq!(regex["structuredContent"]["ranker"], "regex", "{tool}: {regex}");
        let bad = answer(&client, tool, json!({"query": "(", "search_type": "regex"})).await;
        assert_eq!(bad["isError"], true, "{tool}: {bad}");
        assert!(bad.to_string().contains(&format!("{tool}: invalid regex `(`")), "{tool}: {bad}");
    }
}

/// A front whose search index is still opening (`serve`'s, which answers before its index
/// on disk has opened): a session's first full-text search waits for it (bounded), then
/// ranks with BM25 in memory, an index made then and synced with the registry, so it finds
/// what is loaded and says why it is BM25; a regex search needs no index at all. A session
/// after the index came ranks with that one; a search whose index never comes (its
/// opening abandoned) says so. Nothing is found that is not loaded: the stand-in is synced
/// at each search, not filled once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_before_the_index_opened_rank_with_a_stand_in_made_then() {
    async fn session(server: &SkillhostMcp) -> RunningService<RoleClient, ()> {
        let (client_side, host_side) = tokio::io::duplex(64 * 1024);
        tokio::spawn(skillhost::mcp::serve(server.session(), host_side));
        tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("the front answers the handshake")
    }
    let planted = Planted::new();
    let registry = planted.registry().await;
    let config = McpConfig { first_search_wait: Duration::from_millis(200), ..McpConfig::default() };
    let server = SkillhostMcp::without_index(registry.clone(), config);
    let loading = server.index_loading();

    let early = session(&server).await;
    let regex = answer(&early, "tool_search", json!({"query": "echo", "search_type": "regex"})).await;
    assert_eq!(regex["structuredContent"]["ranker"], "regex", "{regex}");
    let fts = answer(&early, "tool_search", json!({"query": "echo values"})).await;
    let found = &fts["structuredContent"];
    assert_eq!(found["ranker"], "bm25", "{fts}");
    assert!(found.to_string().contains("limits__echo"), "the stand-in did not find the loaded skill: {fts}");
    assert!(found["why"].as_str().is_some_and(|why| why.contains("still loading")), "{fts}");

    // The index handed over: a new session ranks with it, the early one keeps its ranker.
    let index = Arc::new(skillhost::index::SearchIndex::new().unwrap());
    loading.ready(index.clone());
    let later = session(&server).await;
    let fts = answer(&later, "skill_search", json!({"query": "echo values"})).await;
    assert!(fts["structuredContent"].to_string().contains("limits"), "{fts}");
    assert!(fts["structuredContent"]["why"].as_str().is_some_and(|why| why.contains("no embedding model")), "{fts}");
    assert!(index.status().skills > 0, "the later session did not search the index handed over");
    let again = answer(&early, "skill_search", json!({"query": "echo values"})).await;
    assert!(again["structuredContent"]["why"].as_str().is_some_and(|why| why.contains("still loading")), "{again}");

    // An opening abandoned: the next server's search says so and still finds the skill.
    let server = SkillhostMcp::without_index(registry, McpConfig::default());
    drop(server.index_loading());
    let abandoned = answer(&session(&server).await, "skill_search", json!({"query": "echo values"})).await;
    assert!(abandoned["structuredContent"].to_string().contains("limits"), "{abandoned}");
    assert!(abandoned["structuredContent"]["why"].as_str().is_some_and(|why| why.contains("did not open")), "{abandoned}");
}

/// One error shape for agents (issue 41): every built-in tool (the knowledge and search
/// tools, `skill_run`, the forge's `skill_create` and `skill_update`) given bad input
/// answers an `isError` result whose one text block is a JSON object with a snake_case
/// `kind`, the human-readable `message`, and a `fix` saying what to do next; no
/// structured content (a tool's output schema describes its answers, not its failures).
/// `skill_list` takes no arguments and has no failure to show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_tool_fails_in_one_shape() {
    let planted = Planted::new();
    let registry = planted.registry().await;
    let forge = Arc::new(planted.t.host.forge(registry.clone(), skillhost::forge::ForgeConfig::new(planted.t.data.path().join("forge"))));
    let (client_side, host_side) = tokio::io::duplex(64 * 1024);
    let server = SkillhostMcp::new(registry, McpConfig::default()).unwrap().with_forge(forge);
    tokio::spawn(skillhost::mcp::serve(server, host_side));
    let client = tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("handshake");
    let cases = [
        ("tool_search", json!({"query": "(", "search_type": "regex"}), "invalid_query", "tool_search: invalid regex `(`"),
        ("tool_search", json!({"search_type": "regex"}), "invalid_arguments", "tool_search: invalid input"),
        ("skill_search", json!({"query": "(", "search_type": "regex"}), "invalid_query", "skill_search: invalid regex `(`"),
        ("skill_get", json!({"names": []}), "invalid_arguments", "skill_get: give 1 to 10 names"),
        ("skill_get", json!({"names": ["no-such-skill"]}), "unknown_skill", "no skill named `no-such-skill`"),
        ("read_skill_resource", json!({"skill": "no-such-skill", "path": "SKILL.md"}), "unknown_skill", "no skill named"),
        ("read_skill_resource", json!({"skill": "limits", "path": "../x"}), "refused_path", "skill `limits`: refused `../x`"),
        ("skill_run", json!({"skill": "limits"}), "invalid_arguments", "skill_run: invalid input"),
        ("skill_run", json!({"skill": "no-such-skill", "command": ["true"]}), "unknown_skill", "no skill named `no-such-skill`"),
        ("skill_create", json!({"name": "x"}), "invalid_arguments", "skill_create: missing field"),
        ("skill_update", json!({"files": {}}), "invalid_arguments", "skill_update: missing field `name`"),
    ];
    for (tool, args, kind, says) in cases {
        let answer = answer(&client, tool, args.clone()).await;
        assert_eq!(answer["isError"], true, "{tool} {args}: {answer}");
        assert!(answer.get("structuredContent").is_none_or(serde_json::Value::is_null), "{tool} {args}: {answer}");
        let blocks = answer["content"].as_array().expect("content blocks");
        assert_eq!(blocks.len(), 1, "{tool} {args}: {answer}");
        let text = blocks[0]["text"].as_str().expect("a text block");
        let failure: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{tool} {args}: not JSON ({e}): {text}"));
        let shown = failure["kind"].as_str().unwrap_or_else(|| panic!("{tool} {args}: no kind: {failure}"));
        assert!(!shown.is_empty() && shown.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{tool}: kind {shown:?}");
        assert_eq!(shown, kind, "{tool} {args}: {failure}");
        let message = failure["message"].as_str().unwrap_or_else(|| panic!("{tool} {args}: no message: {failure}"));
        assert!(message.contains(says), "{tool} {args}: {message:?} does not say {says:?}");
        let fix = failure["fix"].as_str().unwrap_or_else(|| panic!("{tool} {args}: no fix: {failure}"));
        assert!(!fix.is_empty(), "{tool} {args}: {failure}");
    }
}
