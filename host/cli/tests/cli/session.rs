//! What an honest MCP client sees of `skillhost serve` over stdio, driven by a raw
//! JSON-RPC client (one line per message, as the transport is): a client that lists its
//! tools once gets every skill's tools, a generic component's included, on a cold and on
//! a warm data dir; the ranker a session's `tool_search` answers with does not change
//! under it and says why it is the one; and a short session that called a large uncached
//! component leaves its optimised code in the compiled cache for the next one.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fixtures::{CSV_SUMMARY, GENERIC, TEXT_TOOLS, UNIT_CONVERT};
use serde_json::{Value, json};

/// The longest any one answer may take before the test calls the server hung.
const ANSWER: Duration = Duration::from_secs(120);

/// `skillhost serve` on stdio with a raw JSON-RPC client on its pipes.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: mpsc::Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl Raw {
    /// Start `serve` over `skills` and `data` (with `log` as SKILLHOST_LOG), and open a
    /// handshake-era session: `initialize`, then `notifications/initialized`.
    fn start(skills: &Path, data: &Path, log: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(skills)
            .arg("--data-dir")
            .arg(data)
            .arg("serve")
            .env("SKILLHOST_LOG", log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the skillhost binary runs");
        let (sender, messages) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let message = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not JSON-RPC: {line:?}: {e}"));
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let collected = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { return };
                let mut text = collected.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        let mut raw = Self { stdin: child.stdin.take(), child, messages, stderr, next_id: 0 };
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send `method` and wait for its answer (notifications in between are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {method} within {} s; stderr:\n{}", ANSWER.as_secs(), self.stderr()));
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Call `tool` with `args`: its result.
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": args}));
        answer.get("result").cloned().unwrap_or_else(|| panic!("{tool}: {answer}"))
    }

    /// The tool names of one `tools/list`.
    fn list_once(&mut self) -> BTreeSet<String> {
        let answer = self.request("tools/list", json!({}));
        let tools = answer["result"]["tools"].as_array().unwrap_or_else(|| panic!("{answer}"));
        tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until stderr holds a line containing one of `lines`; which one.
    fn wait_for_log(&self, lines: &[&str], within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let text = self.stderr();
            if let Some(line) = lines.iter().find(|l| text.contains(**l)) {
                return Some((*line).to_owned());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Leave as the official SDK's client does: close stdin, and if the server has not
    /// exited 2 s later, send SIGTERM. Then wait (up to `within`) for it to exit; its
    /// stderr.
    fn leave(mut self, within: Duration) -> String {
        drop(self.stdin.take());
        let exited = |child: &mut Child, wait: Duration| {
            let deadline = Instant::now() + wait;
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        };
        if !exited(&mut self.child, Duration::from_secs(2)) {
            let pid = rustix::process::Pid::from_child(&self.child);
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        }
        if !exited(&mut self.child, within) {
            let _ = self.child.kill();
            panic!("serve did not exit within {} s of SIGTERM; stderr:\n{}", within.as_secs(), self.stderr());
        }
        // The reader threads see the pipes close.
        std::thread::sleep(Duration::from_millis(100));
        self.stderr()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every tool `skillhost list` reports for the skills in `skills` (all loaded), by its
/// MCP name.
fn every_tool(skills: &Path, data: &Path) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(skills)
        .arg("--data-dir")
        .arg(data)
        .args(["list", "--json"])
        .env_remove("SKILLHOST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut tools = BTreeSet::new();
    for skill in list.as_array().unwrap() {
        assert!(skill["error"].is_null(), "every skill loads: {skill}");
        for tool in skill["tools"].as_array().unwrap() {
            tools.insert(format!("{}__{}", skill["name"].as_str().unwrap(), tool["name"].as_str().unwrap()));
        }
    }
    tools
}

/// A client that lists its tools once (an inspector's command line, a script) sees every
/// skill's tools, a generic component's included: on a cold data dir (nothing listed or
/// compiled yet: the first list waits, a bounded while, for the skills still loading) and
/// on a warm one (each skill's kept listing, a generic component's too, loads before the
/// first answer).
#[test]
fn a_client_that_lists_once_sees_every_tool_cold_and_warm() {
    let skills = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    for guest in [TEXT_TOOLS, UNIT_CONVERT, CSV_SUMMARY] {
        guest.folder(skills.path());
    }
    std::fs::copy(GENERIC.wasm, skills.path().join("calc.wasm")).unwrap();

    for start in ["cold", "warm"] {
        let mut client = Raw::start(skills.path(), data.path(), "warn");
        let listed = client.list_once();
        let stderr = client.leave(Duration::from_secs(120));
        let expected = every_tool(skills.path(), data.path());
        assert!(expected.contains("calc__add") && expected.contains("text-tools__slugify"), "{expected:?}");
        let missing: Vec<&String> = expected.difference(&listed).collect();
        assert!(missing.is_empty(), "{start} start: the first tools/list lacks {missing:?}; it held {listed:?}\nstderr:\n{stderr}");
    }
}

/// The ranker a session's `tool_search` answers with is the same right after the start
/// and once the search index (with the embedding model, when it is installed) has opened:
/// the same query keeps its order within a session, and each answer says which ranker
/// answered and why.
#[test]
fn a_session_keeps_its_ranker_and_says_why() {
    let skills = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    for guest in [TEXT_TOOLS, UNIT_CONVERT] {
        guest.folder(skills.path());
    }
    if std::env::var_os("SKILLHOST_MODEL_DIR").is_none() {
        eprintln!("note: SKILLHOST_MODEL_DIR is not set, so both answers rank with BM25 (scripts/setup.sh installs the model)");
    }
    let mut client = Raw::start(skills.path(), data.path(), "warn,skillhost::serve=debug");
    let search = |client: &mut Raw| {
        let result = client.call("tool_search", json!({"query": "convert miles to kilometres"}));
        assert_eq!(result["isError"], false, "{result}");
        result["structuredContent"].clone()
    };
    let first = search(&mut client);
    let opened = client.wait_for_log(&["search index ready", "the search index did not open", "opening the search index failed"], ANSWER);
    assert!(opened.is_some(), "the search index neither opened nor failed within {} s:\n{}", ANSWER.as_secs(), client.stderr());
    let later = search(&mut client);
    eprintln!("first: {} ({}); later: {} ({})", first["ranker"], first["why"], later["ranker"], later["why"]);
    assert_eq!(
        first["ranker"], later["ranker"],
        "the ranker changed under the session once the index opened ({opened:?}):\nfirst: {first}\nlater: {later}"
    );
    for answer in [&first, &later] {
        let why = answer["why"].as_str().unwrap_or_else(|| panic!("the answer does not say why this ranker answered: {answer}"));
        assert!(!why.is_empty() && why.contains("session"), "{answer}");
    }
    assert_eq!(first["tools"][0]["name"], later["tools"][0]["name"], "{first}\n{later}");
}

/// A short session that called a large uncached component (the Python example, 12-18 MB,
/// built with componentize-py), then left as the official SDK's client leaves (stdin
/// closed, SIGTERM 2 s later), leaves the component's optimised code in the compiled
/// cache: the next session does not compile it again.
#[test]
fn a_short_session_leaves_the_optimised_code_in_the_cache() {
    let Some(python) = crate::languages::python_skill() else { return };
    let skills = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    crate::startup::copy_folder(python.parent().unwrap(), skills.path(), "py-words");
    // Without its read-only data dir it is pure computation, approved without a human.
    let manifest = skills.path().join("py-words/skill.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.split("[[capabilities.files]]").next().unwrap()).unwrap();
    let bytes = std::fs::read(skills.path().join("py-words/skill.wasm")).unwrap();
    let entry = format!("{}.cwasm", sha256_hex(&bytes));

    let mut client = Raw::start(skills.path(), data.path(), "warn");
    let result = client.call("py-words__word_count", json!({"text": "the cat and the hat", "top": 1}));
    assert_eq!(result["isError"], false, "{result}\n{}", client.stderr());
    let stderr = client.leave(Duration::from_secs(180));
    eprintln!("serve's stderr:\n{stderr}");

    let cached: Vec<_> = std::fs::read_dir(data.path().join("cache"))
        .into_iter()
        .flatten()
        .filter_map(|fingerprint| std::fs::read_dir(fingerprint.ok()?.path()).ok())
        .flatten()
        .filter_map(|file| file.ok().map(|f| f.file_name().to_string_lossy().into_owned()))
        .collect();
    assert!(
        cached.contains(&entry),
        "the optimised code of py-words ({entry}) is not in the compiled cache after the session: {cached:?}\nstderr:\n{stderr}"
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}
