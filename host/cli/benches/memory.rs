//! `skillhost serve`'s resident memory, idle, with the bundled skills (`skills/`) and the
//! search model (when `SKILLHOST_MODEL_DIR` names it, as in the test environment):
//!
//! - `cold`: after a first start on a cold data dir, once every component was compiled to
//!   list its tools, the background compiles are done (the compiled cache has not grown
//!   for [`SETTLED`]) and the search index is open (with the model, its graph optimised
//!   by this process);
//! - `warm`: after a start on the data dir the cold one left (everything from the caches).
//!
//! Each spawn is left alone for [`IDLE`] once that is done; then `VmRSS`, `RssAnon` and
//! `RssFile` are read from `/proc/PID/status`. Three rounds, the median of each. When
//! `SKILLHOST_BENCH_OTHER` names another `skillhost` binary (a release build of an earlier
//! commit), it is measured the same way in the same run, alternating with this build's:
//! the before and after of a change.
//!
//! "This build" is the binary users install: `cargo build --release -p skillhost-cli`, run
//! by the bench first (what `cargo install --path host/cli` makes), not the bench profile's
//! own, whose dependencies carry the dev-dependencies' features and so other symbol names:
//! the release link's startup order (`build.rs`) would not apply to it.
//!
//! The wasm skills of `skills/` are built in place with this build's `skillhost build`
//! when their component is missing or older than a source, as `scripts/run.sh` does.
//! Not a criterion bench: it measures bytes, not time.

#![allow(missing_docs, reason = "a bench binary")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use fixtures::figures::Figure;
use serde_json::Value;

/// How long a spawn is left alone before its memory is read.
const IDLE: Duration = Duration::from_secs(5);
/// Rounds per binary.
const ROUNDS: usize = 3;
/// How long the compiled cache must stay as it is for the background compiles to count as done.
const SETTLED: Duration = Duration::from_secs(10);
/// A spawn that has not settled after this fails the bench.
const GIVE_UP: Duration = Duration::from_secs(600);
/// The goal for `cold` and `warm` alike (issue 46).
const GOAL: &str = "≤ 100 MB";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `skills/`, as `scripts/run.sh` serves it: each wasm skill built in place (its
/// `skill.wasm`, ignored by git) when missing or older than a source of it.
fn bundled_skills() -> (PathBuf, usize) {
    let skills = workspace().join("skills");
    let mut components = 0;
    for entry in std::fs::read_dir(&skills).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("Cargo.toml").exists() {
            continue;
        }
        components += 1;
        if stale(&dir) {
            eprintln!("memory: building {}", dir.display());
            common::build_skill(&dir);
        }
    }
    (skills, components)
}

/// Whether `dir`'s component is missing or older than a source of it.
fn stale(dir: &Path) -> bool {
    let Ok(built) = std::fs::metadata(dir.join("skill.wasm")).and_then(|m| m.modified()) else { return true };
    fn newer(dir: &Path, than: std::time::SystemTime) -> bool {
        std::fs::read_dir(dir).unwrap().flatten().any(|e| {
            let path = e.path();
            let name = e.file_name();
            if name == "target" || name == "skill.wasm" {
                return false;
            }
            if path.is_dir() { newer(&path, than) } else { e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m > than) }
        })
    }
    newer(dir, built)
}

/// The compiled components in `data`'s cache.
fn compiled(data: &Path) -> usize {
    let Ok(engines) = std::fs::read_dir(data.join("cache")) else { return 0 };
    engines
        .flatten()
        .filter_map(|e| std::fs::read_dir(e.path()).ok())
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .count()
}

/// A `serve` child and the lines of its stdout.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Server {
    fn spawn(bin: &Path, skills: &Path, data: &Path) -> Self {
        let mut cmd = Command::new(bin);
        cmd.arg("--skills").arg(skills).arg("--data-dir").arg(data).arg("serve");
        cmd.env_remove("SKILLHOST_LOG").env("SKILLHOST_VENV", fixtures::python::venv());
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("the skillhost binary runs");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, stdin, lines, next_id: 0 }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send a request and wait for its answer (notifications in between are skipped).
    fn ask(&mut self, method: &str, params: &str) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#));
        loop {
            let line = match self.lines.recv_timeout(GIVE_UP) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {GIVE_UP:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("serve closed its stdout before answering {method}"),
            };
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line:?}: {e}"));
            if message["id"] == id {
                return message;
            }
        }
    }

    /// `[VmRSS, RssAnon, RssFile]` in bytes.
    fn rss(&self) -> [u64; 3] {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        ["VmRSS:", "RssAnon:", "RssFile:"].map(|name| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in /proc/PID/status"));
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        })
    }

    fn stop(mut self) {
        drop(self.stdin.take());
        let until = Instant::now() + Duration::from_secs(90);
        while Instant::now() < until {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One spawn of `bin` over `skills` and `data`: initialize, `skill_list` until nothing is
/// loading, the compiled cache settled, a `tool_search` (the search index open, with the
/// model when installed), [`IDLE`], then its resident memory.
fn idle(bin: &Path, skills: &Path, data: &Path) -> [u64; 3] {
    let start = Instant::now();
    let mut server = Server::spawn(bin, skills, data);
    let init = server
        .ask("initialize", r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"memory-bench","version":"1"}}"#);
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    loop {
        let answer = server.ask("tools/call", r#"{"name":"skill_list","arguments":{}}"#);
        let value = match &answer["result"]["structuredContent"] {
            Value::Null => {
                let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
                serde_json::from_str(text).unwrap_or_else(|e| panic!("skill_list is not JSON: {answer}: {e}"))
            }
            value => value.clone(),
        };
        if value.get("loading").is_none() {
            break;
        }
        assert!(start.elapsed() < GIVE_UP, "{} still loading after {GIVE_UP:?}", bin.display());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Background compiles (of a host that compiles every component it listed) are done
    // when the cache has not grown for SETTLED.
    let (mut count, mut since) = (compiled(data), Instant::now());
    while since.elapsed() < SETTLED {
        assert!(start.elapsed() < GIVE_UP, "{} still compiling after {GIVE_UP:?}", bin.display());
        std::thread::sleep(Duration::from_millis(250));
        if compiled(data) != count {
            (count, since) = (compiled(data), Instant::now());
        }
    }
    let found = server.ask("tools/call", r#"{"name":"tool_search","arguments":{"query":"convert units"}}"#);
    assert!(found["result"]["isError"] != true && found.get("result").is_some(), "tool_search failed: {found}");
    std::thread::sleep(IDLE);
    let rss = server.rss();
    server.stop();
    rss
}

/// `cargo build --release -p skillhost-cli`, and the binary it made.
fn release_binary() -> PathBuf {
    eprintln!("memory: cargo build --release -p skillhost-cli");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--release", "--quiet", "-p", "skillhost-cli"]).current_dir(workspace());
    // What cargo set for this bench: some build scripts read it, and with it the build would
    // not be the one a shell's `cargo build` makes (and the next one would redo it).
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = (name.starts_with("CARGO_") && name != "CARGO_HOME" && name != "CARGO_TARGET_DIR")
            || ["OUT_DIR", "LD_LIBRARY_PATH", "RUSTUP_TOOLCHAIN", "RUSTUP_TOOLCHAIN_SOURCE", "RUST_RECURSION_COUNT"].contains(&&*name);
        if set_by_cargo {
            build.env_remove(&*name);
        }
    }
    let built = build.status().unwrap();
    assert!(built.success(), "cargo build --release -p skillhost-cli failed");
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("release/skillhost")
}

/// How much of `host/cli/startup-order.txt` the binary was linked by: the names the file
/// lists that the binary has. A toolchain or dependency update renames them; then
/// `scripts/startup-order.py` makes the file again (see `build.rs`).
fn startup_order(binary: &Path) -> String {
    let order = workspace().join("host/cli/startup-order.txt");
    let Ok(order) = std::fs::read_to_string(&order) else {
        return "no startup-order.txt".to_owned();
    };
    let Ok(nm) = Command::new("nm").arg(binary).output() else {
        return "nm is not installed: not checked".to_owned();
    };
    let nm = String::from_utf8_lossy(&nm.stdout);
    let defined: std::collections::HashSet<&str> = nm.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let listed: Vec<&str> = order.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
    let found = listed.iter().filter(|name| defined.contains(*name)).count();
    format!("{found} of the {} functions startup-order.txt lists are in it", listed.len())
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let this = release_binary();
    let (skills, components) = bundled_skills();
    let mut binaries = vec![("this build", this)];
    if let Some(other) = std::env::var_os("SKILLHOST_BENCH_OTHER") {
        binaries.push(("SKILLHOST_BENCH_OTHER", PathBuf::from(other)));
    }
    eprintln!(
        "memory: {} bundled skills ({components} components); search model {}",
        std::fs::read_dir(&skills).unwrap().count(),
        std::env::var("SKILLHOST_MODEL_DIR").map_or_else(|_| "not set (BM25)".to_owned(), |d| format!("from {d}"))
    );
    for (name, bin) in &binaries {
        eprintln!("memory: {name}: {}", startup_order(bin));
    }
    // [binary][cold, warm][round] -> [VmRSS, RssAnon, RssFile]
    let mut measured = vec![[Vec::new(), Vec::new()]; binaries.len()];
    for round in 0..ROUNDS {
        for (i, (name, bin)) in binaries.iter().enumerate() {
            let data = tempfile::tempdir().unwrap();
            let cold = idle(bin, &skills, data.path());
            let warm = idle(bin, &skills, data.path());
            eprintln!("  round {}: {name}: cold {} MB, warm {} MB", round + 1, cold[0] / 1_000_000, warm[0] / 1_000_000);
            measured[i][0].push(cold);
            measured[i][1].push(warm);
        }
    }
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let mut figures = Vec::new();
    for ((name, bin), cases) in binaries.iter().zip(&measured) {
        let [cold, warm] = [0, 1].map(|case| [0, 1, 2].map(|i| median(cases[case].iter().map(|r| r[i]).collect())));
        eprintln!(
            "memory: {name} ({}): idle after a cold first start {:.1} MB (anonymous {:.1}, file {:.1}); after a warm start {:.1} MB (anonymous {:.1}, file {:.1})",
            bin.display(),
            mb(cold[0]),
            mb(cold[1]),
            mb(cold[2]),
            mb(warm[0]),
            mb(warm[1]),
            mb(warm[2])
        );
        if *name == "this build" {
            let what = "serve idle with the bundled skills and the model";
            figures.push(
                Figure::new(format!("{what}, after a first start on a cold data dir: VmRSS"), mb(cold[0]), "MB")
                    .against(format!("{what}, after a warm start: VmRSS"), mb(warm[0]))
                    .goal(GOAL),
            );
            figures.push(Figure::new(format!("{what}, after a warm start: VmRSS"), mb(warm[0]), "MB").goal(GOAL));
        }
    }
    if let [(_, _), (_, _)] = binaries.as_slice() {
        let cold = |i: usize| median(measured[i][0].iter().map(|r| r[0]).collect());
        let warm = |i: usize| median(measured[i][1].iter().map(|r| r[0]).collect());
        eprintln!(
            "memory: this build ÷ the other: cold {:.2}×, warm {:.2}×",
            cold(0) as f64 / cold(1) as f64,
            warm(0) as f64 / warm(1) as f64
        );
        figures.push(
            Figure::new("serve idle after a cold first start, bundled skills and model: this build", mb(cold(0)), "MB")
                .against("the same, SKILLHOST_BENCH_OTHER's binary", mb(cold(1))),
        );
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "memory", &figures) {
        eprintln!("memory: cannot record figures: {e}");
    }
}
