//! Whole-process start-up of `skillhost serve`, measured the way an agent's MCP client
//! sees it: from spawning the process to (a) `initialize` answered, (b) the first
//! `tools/call` of a wasm tool answered, and (c) the first call of a Python component
//! answered. The skill set is 20 wasm skills (the limits fixture, each with a custom
//! section of its own so that each is a distinct component to compile), 2 FastMCP server
//! skills, one Python component (componentize-py) and one JavaScript component
//! (componentize-js), served from a compiled cache and tool-listing cache that are cold
//! (a fresh data dir per spawn) or warm (a data dir a previous spawn used). The baseline,
//! measured in the same run, is `serve` over an empty skills dir: its `initialize` and
//! its first call (of the built-in `skill_list`).
//!
//! The client is a raw JSON-RPC line client on blocking pipes (no SDK overhead). The
//! first call goes out right after `notifications/initialized`; a server that answers
//! it with an error (the tool not known yet) is asked again at each
//! `notifications/tools/list_changed` (and every 500 ms without one) until the call
//! succeeds, and the time of the success is the figure.
//!
//! One spawn yields all three figures of its case, so the `first_call` and
//! `python_call` benchmarks replay, in order, the figures taken from the spawns their
//! case's `initialize` benchmark made, one spawn per sample (criterion's one warm-up
//! call and ten samples line up with the `initialize` benchmark's eleven spawns): a
//! cold spawn costs tens of seconds today, and three spawns per sample would triple
//! that. The medians printed at the end are computed from the spawns directly.
//!
//! The Python and JavaScript components are `target/languages/{python-skill,js-skill}`
//! (left there by the CLI's language tests) or, when absent, built once with
//! `skillhost build` into `target/startup-bench` (toolchains from
//! `SKILLHOST_TOOLCHAINS`). The server skills run on the venv `SKILLHOST_VENV` names
//! (the test venv by default); the search model is used when `SKILLHOST_MODEL_DIR` is
//! set, as it is in the test environment.

#![allow(missing_docs, reason = "criterion's macros generate undocumented items")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use fixtures::LIMITS;
use fixtures::figures::Figure;
use serde_json::Value;

/// A spawn that has not reached its last figure after this is a failure of the bench.
const GIVE_UP: Duration = Duration::from_secs(600);

/// The wasm tool called first.
const WASM_TOOL: (&str, &str) = ("wasm-00__echo", r#"{"value":1}"#);
/// The Python component's tool.
const PYTHON_TOOL: (&str, &str) = ("py-words__word_count", r#"{"text":"the cat and the hat","top":1}"#);
/// The baseline's call: a built-in tool, there with no skill at all.
const BUILTIN_TOOL: (&str, &str) = ("skill_list", "{}");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the built example components are looked for, or built.
fn language_component(name: &str) -> PathBuf {
    let shared = workspace().join("target/languages").join(name);
    if shared.join("skill.wasm").exists() {
        return shared;
    }
    let dir = workspace().join("target/startup-bench").join(name);
    if dir.join("skill.wasm").exists() {
        return dir;
    }
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(workspace().join("examples").join(name)).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("build")
        .arg(&dir)
        .output()
        .expect("the skillhost binary runs");
    assert!(
        out.status.success(),
        "skillhost build {} failed (toolchains from SKILLHOST_TOOLCHAINS; scripts/setup.sh installs them):\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Copy a built component's folder (manifest, SKILL.md, component) into `skills`.
fn install_component(built: &Path, skills: &Path, folder: &str) {
    let dir = skills.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["skill.toml", "SKILL.md", "skill.wasm"] {
        if built.join(file).exists() {
            std::fs::copy(built.join(file), dir.join(file)).unwrap();
        }
    }
}

/// The measured skill set: 20 distinct wasm skills, 2 FastMCP servers, the Python and
/// the JavaScript component.
fn skill_set(skills: &Path) {
    let bytes = std::fs::read(LIMITS.wasm).unwrap();
    for i in 0..20 {
        let name = format!("wasm-{i:02}");
        let dir = skills.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        // A section of its own: a distinct content hash, so a distinct compile.
        let nonce = format!("{name} of the startup bench");
        let wasm = skillhost::package::embed(&bytes, &[("skillhost-bench-nonce", nonce.as_bytes())]).unwrap();
        std::fs::write(dir.join("skill.wasm"), wasm).unwrap();
        let manifest = LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"{name}\""));
        assert!(manifest.contains(&name), "the limits manifest names itself `limits`");
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
    }
    for name in ["probe-a", "probe-b"] {
        let dir = fixtures::python::install("sandbox-probe", skills, "");
        let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap().replace("name = \"sandbox-probe\"", &format!("name = \"{name}\""));
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        std::fs::rename(&dir, skills.join(name)).unwrap();
    }
    install_component(&language_component("python-skill"), skills, "py-words");
    install_component(&language_component("js-skill"), skills, "js-text");
}

/// What one spawn measured, from the spawn.
#[derive(Clone, Copy, Debug)]
struct Spawn {
    initialize: Duration,
    first_call: Duration,
    python_call: Option<Duration>,
    /// Calls answered with an error before the one that succeeded.
    retries: u32,
}

/// A `skillhost serve` child and a thread reading its stdout lines, each stamped with
/// the time it was read.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(Instant, String)>,
    log: PathBuf,
    next_id: u64,
}

impl Server {
    fn spawn(skills: &Path, data: &Path, log: &Path) -> (Instant, Self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillhost"));
        cmd.arg("--skills").arg(skills).arg("--data-dir").arg(data).arg("serve");
        cmd.env("SKILLHOST_VENV", fixtures::python::venv()).env_remove("SKILLHOST_LOG");
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(std::fs::File::create(log).unwrap());
        let start = Instant::now();
        let mut child = cmd.spawn().expect("the skillhost binary runs");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if send.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        (start, Self { child, stdin, lines, log: log.to_owned(), next_id: 0 })
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#));
        id
    }

    /// The next line, or `None` after `wait`; fails the bench if the server is gone.
    fn next(&self, wait: Duration) -> Option<(Instant, Value)> {
        match self.lines.recv_timeout(wait) {
            Ok((at, line)) => Some((at, serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line:?}: {e}")))),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("skillhost serve closed its stdout; its log:\n{}", self.log_tail()),
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// `initialize`, answered; the time of the answer.
    fn initialize(&mut self, start: Instant) -> Instant {
        let id = self.request(
            "initialize",
            r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"startup-bench","version":"1"}}"#,
        );
        loop {
            let Some((at, message)) = self.next(Duration::from_secs(1)) else {
                assert!(start.elapsed() < GIVE_UP, "no answer to initialize after {GIVE_UP:?}; log:\n{}", self.log_tail());
                continue;
            };
            if message["id"] == id {
                assert!(message.get("result").is_some(), "initialize failed: {message}");
                return at;
            }
        }
    }

    /// Call `tool` until a call succeeds; the time of that answer and the number of
    /// calls answered with an error before it.
    fn call_until_ok(&mut self, start: Instant, (tool, arguments): (&str, &str)) -> (Instant, u32) {
        let params = format!(r#"{{"name":"{tool}","arguments":{arguments}}}"#);
        let mut id = self.request("tools/call", &params);
        let mut retries = 0;
        let mut last_error = Value::Null;
        // Asked again at the next list change, or after a pause without one.
        let mut waiting_since: Option<Instant> = None;
        let mut changed = false;
        loop {
            if let Some(since) = waiting_since
                && (changed || since.elapsed() >= Duration::from_millis(500))
            {
                id = self.request("tools/call", &params);
                waiting_since = None;
                changed = false;
            }
            assert!(
                start.elapsed() < GIVE_UP,
                "{tool} did not succeed within {GIVE_UP:?}; last error: {last_error}; log:\n{}",
                self.log_tail()
            );
            let Some((at, message)) = self.next(Duration::from_millis(100)) else { continue };
            if message["method"] == "notifications/tools/list_changed" {
                changed = true;
                continue;
            }
            if message["id"] != id || message.get("method").is_some() {
                continue;
            }
            let failed = message.get("error").is_some() || message["result"]["isError"] == true;
            if !failed {
                return (at, retries);
            }
            retries += 1;
            last_error = message;
            waiting_since = Some(Instant::now());
        }
    }

    /// Close stdin (the server's cue to stop) and wait for it; kill it if it lingers.
    fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One spawn over `skills` and `data`: initialize, then `first`, then `python` if given.
fn measure(skills: &Path, data: &Path, log: &Path, first: (&str, &str), python: Option<(&str, &str)>) -> Spawn {
    let (start, mut server) = Server::spawn(skills, data, log);
    let initialize = server.initialize(start) - start;
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let (at, mut retries) = server.call_until_ok(start, first);
    let first_call = at - start;
    let python_call = python.map(|tool| {
        let (at, more) = server.call_until_ok(start, tool);
        retries += more;
        at - start
    });
    server.stop();
    Spawn { initialize, first_call, python_call, retries }
}

/// Where a case's spawns keep their figures for the replaying benchmarks.
#[derive(Default)]
struct Recorded {
    spawns: Mutex<Vec<Spawn>>,
    cursor: Mutex<[usize; 2]>,
}

impl Recorded {
    fn push(&self, spawn: Spawn) {
        eprintln!(
            "  spawn: initialize {:?}, first call {:?}, python call {:?}, {} calls answered with an error first",
            spawn.initialize, spawn.first_call, spawn.python_call, spawn.retries
        );
        self.spawns.lock().unwrap().push(spawn);
    }

    /// The figure `pick` of the next recorded spawn for replayer `which` (in order,
    /// starting over at the end), as the total of `iters` iterations: one spawn per
    /// sample, whatever iteration count criterion derives from a replay's wall time.
    fn replay(&self, which: usize, pick: fn(&Spawn) -> Option<Duration>, iters: u64) -> Duration {
        let spawns = self.spawns.lock().unwrap();
        let mut cursor = self.cursor.lock().unwrap();
        let spawn = spawns[cursor[which] % spawns.len()];
        cursor[which] += 1;
        pick(&spawn).expect("this case measured that figure").saturating_mul(u32::try_from(iters).unwrap_or(u32::MAX))
    }

    fn median(&self, pick: fn(&Spawn) -> Option<Duration>) -> Option<Duration> {
        let mut values: Vec<Duration> = self.spawns.lock().unwrap().iter().filter_map(pick).collect();
        values.sort();
        (!values.is_empty()).then(|| values[values.len() / 2])
    }
}

fn bench(c: &mut Criterion) {
    let skills = tempfile::tempdir().unwrap();
    skill_set(skills.path());
    let empty = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("serve.log");
    eprintln!(
        "startup: 20 wasm + 2 FastMCP + 1 Python + 1 JavaScript skill; search model {}",
        std::env::var("SKILLHOST_MODEL_DIR").map_or_else(|_| "not set (BM25)".to_owned(), |d| format!("from {d}"))
    );

    let mut group = c.benchmark_group("startup");
    group.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_nanos(1)).measurement_time(Duration::from_secs(1));

    let cases: [(&str, Option<tempfile::TempDir>); 3] = [("baseline", None), ("cold", None), ("warm", Some(tempfile::tempdir().unwrap()))];
    let mut recorded: Vec<(&str, Recorded)> = Vec::new();
    for (case, warm_data) in &cases {
        let record = Recorded::default();
        let (skills_dir, first, python) = match *case {
            "baseline" => (empty.path(), BUILTIN_TOOL, None),
            _ => (skills.path(), WASM_TOOL, Some(PYTHON_TOOL)),
        };
        if let Some(data) = warm_data {
            eprintln!("startup/{case}: one spawn to fill the caches");
            let spawn = measure(skills_dir, data.path(), &log, first, python);
            eprintln!("  filling spawn: {spawn:?}");
        }
        group.bench_function(format!("{case}/initialize"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let fresh = tempfile::tempdir().unwrap();
                    let data = warm_data.as_ref().map_or(fresh.path(), |d| d.path());
                    let spawn = measure(skills_dir, data, &log, first, python);
                    total += spawn.initialize;
                    record.push(spawn);
                }
                total
            })
        });
        group.bench_function(format!("{case}/first_call"), |b| {
            b.iter_custom(|iters| record.replay(0, |s| Some(s.first_call), iters))
        });
        if python.is_some() {
            group.bench_function(format!("{case}/python_call"), |b| {
                b.iter_custom(|iters| record.replay(1, |s| s.python_call, iters))
            });
        }
        recorded.push((case, record));
    }
    group.finish();
    report(&recorded);
}

/// Medians of every spawn made, against the baseline's, printed and recorded for
/// `bench-report`.
fn report(recorded: &[(&str, Recorded)]) {
    let median = |case: &str, pick: fn(&Spawn) -> Option<Duration>| {
        recorded.iter().find(|(c, _)| *c == case).and_then(|(_, r)| r.median(pick)).map(|d| d.as_secs_f64() * 1e3)
    };
    let (Some(base_init), Some(base_call)) = (median("baseline", |s| Some(s.initialize)), median("baseline", |s| Some(s.first_call))) else {
        return;
    };
    let mut figures = Vec::new();
    eprintln!("\nstartup, medians of every spawn (warm-up included), against `serve` with no skills in the same run:");
    eprintln!("  baseline: initialize {base_init:.1} ms, first call (skill_list) {base_call:.1} ms");
    for case in ["cold", "warm"] {
        let rows = [
            ("initialize answered", median(case, |s| Some(s.initialize)), base_init, "baseline initialize", "≤ 200 ms"),
            ("first wasm tools/call answered", median(case, |s| Some(s.first_call)), base_call, "baseline first call (skill_list)", if case == "warm" { "≤ 250 ms" } else { "" }),
            ("first Python component call answered", median(case, |s| s.python_call), base_call, "baseline first call (skill_list)", ""),
        ];
        for (what, value, base, base_what, goal) in rows {
            let Some(value) = value else { continue };
            eprintln!("  {case}: spawn → {what}: {value:.1} ms ({:.1}× the {base_what}){}", value / base, if goal.is_empty() { String::new() } else { format!("; goal {goal}") });
            let mut figure = Figure::new(format!("serve, 20 wasm + 2 server + Python + JS skills, caches {case}: spawn → {what}"), value, "ms")
                .against(format!("serve, no skills: spawn → {base_what}"), base);
            if !goal.is_empty() {
                figure = figure.goal(goal);
            }
            figures.push(figure);
        }
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "startup", &figures) {
        eprintln!("startup: cannot record figures: {e}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
