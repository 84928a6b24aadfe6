//! Whole-process start-up of `skillhost serve`, measured the way an agent's MCP client
//! sees it: from spawning the process to (a) `initialize` answered, (b) the first
//! `tools/call` of a wasm tool answered (successfully), and (c) the first call of a
//! Python component answered. The skill set is 20 wasm skills (the limits fixture, each with a custom
//! section of its own so that each is a distinct component to compile), 2 FastMCP server
//! skills, one Python component (componentize-py) and one JavaScript component
//! (componentize-js), served from a compiled cache and tool-listing cache that are cold
//! (a fresh data dir per spawn) or warm (a data dir a previous spawn used). The baseline,
//! measured in the same run, is `serve` over an empty skills dir: its `initialize`, its
//! first call (of the built-in `skill_list`) and its complete `tools/list`.
//!
//! It also measures (d) spawn → a `tools/list` that holds every skill: `serve` answers
//! `initialize` at once and loads skills in the background, so a client that does not
//! follow `notifications/tools/list_changed` has the whole catalogue only once nothing
//! is loading. The client asks `skill_list` right after `notifications/initialized`,
//! again at each `list_changed` and 100 ms after each answer that still has a `loading`
//! array, and, at the first answer without one, `tools/list`: the figure is that
//! answer (late by up to the 100 ms between two `skill_list`s).
//!
//! The client is a raw JSON-RPC line client on blocking pipes (no SDK overhead). The
//! first call goes out right after `notifications/initialized`, alongside the first
//! `skill_list`; the Python call goes out once the first call succeeded. A call to a
//! skill still loading waits for it in the server, so each call should succeed at the
//! first try; one answered with an error is printed, counted and asked again (at the
//! next `list_changed`, or after 500 ms without one) until it succeeds, and the time
//! of the success is the figure.
//!
//! Last, (e) an idle `serve`: with no skills and with the set above on warm caches, three
//! spawns each are left alone for five seconds once nothing is loading; then their
//! resident memory is read from `/proc/PID/status` and two `tool_search` calls are
//! timed, the first after the idle against the one right after it.
//!
//! One spawn yields all four figures of its case, so the `first_call`, `python_call`
//! and `tools_listed` benchmarks replay, in order, the figures taken from the spawns
//! their case's `initialize` benchmark made, one spawn per sample (criterion's one
//! warm-up call and ten samples line up with the `initialize` benchmark's eleven
//! spawns): a cold spawn costs seconds, and one spawn per figure would multiply that.
//! The medians and ranges printed at the end are computed from the spawns directly.
//!
//! The Python and JavaScript components are `target/languages/{python-skill,js-skill}`
//! (left there by the CLI's language tests) or, when absent, built once with
//! `skillhost build` into `target/startup-bench` (toolchains from
//! `SKILLHOST_TOOLCHAINS`). The server skills run on the venv `SKILLHOST_VENV` names
//! (the test venv by default); the search model is used when `SKILLHOST_MODEL_DIR` is
//! set, as it is in the test environment.

#![allow(missing_docs, reason = "criterion's macros generate undocumented items")]

mod common;

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
    common::build_skill(&dir);
    dir
}

/// Copy a built component's folder (manifest, SKILL.md, component) into `skills`, its
/// manifest without `[[capabilities.files]]`: a skill that asks for data waits for a
/// human's approval, and the tools the bench calls need none.
fn install_component(built: &Path, skills: &Path, folder: &str) {
    let dir = skills.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["SKILL.md", "skill.wasm"] {
        if built.join(file).exists() {
            std::fs::copy(built.join(file), dir.join(file)).unwrap();
        }
    }
    let manifest = std::fs::read_to_string(built.join("skill.toml")).unwrap();
    let mut kept = String::new();
    let mut skipping = false;
    for line in manifest.lines() {
        if line.trim_start().starts_with('[') {
            skipping = line.trim() == "[[capabilities.files]]";
        }
        if !skipping {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    std::fs::write(dir.join("skill.toml"), kept).unwrap();
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
        let wasm = skillhost_package::embed(&bytes, &[("skillhost-bench-nonce", nonce.as_bytes())]).unwrap();
        std::fs::write(dir.join("skill.wasm"), wasm).unwrap();
        let manifest = LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"{name}\""));
        assert!(manifest.contains(&name), "the limits manifest names itself `limits`");
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
    }
    for name in ["probe-a", "probe-b"] {
        let dir = fixtures::python::install("sandbox-probe", skills, "");
        let manifest =
            std::fs::read_to_string(dir.join("skill.toml")).unwrap().replace("name = \"sandbox-probe\"", &format!("name = \"{name}\""));
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        std::fs::rename(&dir, skills.join(name)).unwrap();
    }
    install_component(&language_component("python-skill"), skills, "py-words");
    install_component(&language_component("js-skill"), skills, "js-text");
}

/// What one spawn measured, from the spawn.
#[derive(Clone, Debug)]
struct Spawn {
    initialize: Duration,
    first_call: Duration,
    python_call: Option<Duration>,
    /// `tools/list` answered once `skill_list` no longer names a skill loading.
    tools_listed: Duration,
    /// The calls answered with an error before the one that succeeded (none expected:
    /// a call to a skill still loading waits for it).
    errors: Vec<String>,
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

    /// Ask `method` and wait for its answer (notifications in between are skipped): when
    /// it was read, and the answer.
    fn answer(&mut self, method: &str, params: &str, start: Instant) -> (Instant, Value) {
        let id = self.request(method, params);
        loop {
            let Some((at, message)) = self.next(Duration::from_secs(1)) else {
                assert!(start.elapsed() < GIVE_UP, "no answer to {method} after {GIVE_UP:?}; log:\n{}", self.log_tail());
                continue;
            };
            if message["id"] == id {
                return (at, message);
            }
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

/// A `tools/call` the client is making: asked again after an error (at the next
/// `notifications/tools/list_changed`, or after 500 ms without one) until it succeeds.
struct Call<'a> {
    tool: &'a str,
    params: String,
    /// The id of the request in flight, if one is.
    id: Option<u64>,
    /// When the last error came back (the call is asked again from then).
    failed_at: Option<Instant>,
    errors: Vec<String>,
}

impl<'a> Call<'a> {
    fn new((tool, arguments): (&'a str, &str)) -> Self {
        Self { tool, params: format!(r#"{{"name":"{tool}","arguments":{arguments}}}"#), id: None, failed_at: None, errors: Vec::new() }
    }
}

/// Whether every skill found at start has loaded, asked with `skill_list` (its
/// `loading` array is gone), then `tools/list` asked once more: the list a client that
/// does not follow `list_changed` would have to wait for.
#[derive(Default)]
struct Listed {
    /// The `skill_list` or `tools/list` request in flight.
    id: Option<u64>,
    /// When `skill_list` is to be asked again.
    next_poll: Option<Instant>,
    /// `skill_list` said nothing is loading; the `tools/list` in flight is the last.
    loaded: bool,
    at: Option<Instant>,
    /// `skill_list` answers that still named a skill loading.
    polls: u32,
}

/// `skill_list` is asked again this long after an answer that still named a skill
/// loading (or at once on `list_changed`): the figure is late by up to this much.
const POLL: Duration = Duration::from_millis(100);

/// One spawn over `skills` and `data`: initialize, then, at once, `first` (then
/// `python`, if given, once `first` succeeded) and the wait for a complete listing.
fn measure(skills: &Path, data: &Path, log: &Path, first: (&str, &str), python: Option<(&str, &str)>) -> Spawn {
    let (start, mut server) = Server::spawn(skills, data, log);
    let initialize = server.initialize(start) - start;
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let mut calls: Vec<Call<'_>> = std::iter::once(first).chain(python).map(Call::new).collect();
    let mut answered: Vec<Instant> = Vec::new();
    let mut listed = Listed::default();
    let skill_list = format!(r#"{{"name":"{}","arguments":{}}}"#, BUILTIN_TOOL.0, BUILTIN_TOOL.1);
    listed.id = Some(server.request("tools/call", &skill_list));
    loop {
        let now = Instant::now();
        if let Some(call) = calls.get_mut(answered.len()) {
            let again = call.failed_at.is_none_or(|at| now - at >= Duration::from_millis(500));
            if call.id.is_none() && (call.errors.is_empty() || again) {
                call.id = Some(server.request("tools/call", &call.params));
            }
        }
        if listed.id.is_none() && listed.at.is_none() && listed.next_poll.is_some_and(|at| now >= at) {
            listed.id = Some(server.request("tools/call", &skill_list));
            listed.next_poll = None;
        }
        if answered.len() == calls.len() && listed.at.is_some() {
            break;
        }
        let pending = calls.get(answered.len()).map_or("(none)", |c| c.tool);
        assert!(
            start.elapsed() < GIVE_UP,
            "not done within {GIVE_UP:?} (call pending: {pending}, listing complete: {}); errors: {:?}; log:\n{}",
            listed.at.is_some(),
            calls.iter().map(|c| &c.errors).collect::<Vec<_>>(),
            server.log_tail()
        );
        let Some((at, message)) = server.next(Duration::from_millis(20)) else { continue };
        if message["method"] == "notifications/tools/list_changed" {
            if let Some(call) = calls.get_mut(answered.len())
                && call.id.is_none()
            {
                // Asked again at once.
                call.failed_at = at.checked_sub(Duration::from_secs(1));
            }
            if listed.next_poll.is_some() {
                listed.next_poll = Some(at);
            }
            continue;
        }
        if message.get("method").is_some() || message.get("id").is_none() {
            continue;
        }
        let id = message["id"].as_u64();
        if let Some(call) = calls.get_mut(answered.len())
            && call.id.is_some()
            && call.id == id
        {
            call.id = None;
            let failed = message.get("error").is_some() || message["result"]["isError"] == true;
            if failed {
                call.failed_at = Some(at);
                call.errors.push(message.to_string());
            } else {
                answered.push(at);
            }
        } else if listed.id.is_some() && listed.id == id {
            listed.id = None;
            if listed.loaded {
                assert!(message.get("result").is_some(), "tools/list failed: {message}");
                listed.at = Some(at);
            } else {
                let value = match &message["result"]["structuredContent"] {
                    Value::Null => {
                        let text = message["result"]["content"][0]["text"].as_str().unwrap_or_default();
                        serde_json::from_str(text).unwrap_or_else(|e| panic!("skill_list is not JSON: {message}: {e}"))
                    }
                    value => value.clone(),
                };
                assert!(value.get("skills").is_some(), "skill_list failed: {message}");
                if value.get("loading").is_some() {
                    listed.polls += 1;
                    listed.next_poll = Some(at + POLL);
                } else {
                    listed.loaded = true;
                    listed.id = Some(server.request("tools/list", "{}"));
                }
            }
        }
    }
    server.stop();
    let errors: Vec<String> = calls.iter().flat_map(|c| c.errors.iter().map(move |e| format!("{}: {e}", c.tool))).collect();
    Spawn {
        initialize,
        first_call: answered[0] - start,
        python_call: answered.get(1).map(|&at| at - start),
        tools_listed: listed.at.expect("the loop ends with the listing complete") - start,
        errors,
    }
}

/// What an idle `serve` holds, and how its first search after the idle answers.
#[derive(Clone, Debug)]
struct Idle {
    /// `VmRSS`, `RssAnon` and `RssFile` of `/proc/PID/status`, in bytes.
    rss: [u64; 3],
    /// A `tool_search` (with the query embedding, when the model is installed) sent
    /// after the idle, and a second one right after it.
    first_search: Duration,
    second_search: Duration,
}

/// How long `serve` is left alone, once nothing is loading, before its memory is read.
const IDLE: Duration = Duration::from_secs(5);

/// The query of the search after the idle.
const IDLE_QUERY: &str = r#"{"name":"tool_search","arguments":{"query":"count the words in a piece of text"}}"#;

/// One spawn over `skills` and `data` left idle: initialize, `skill_list` until nothing
/// is loading, [`IDLE`] without a request, its resident memory, then two searches.
fn idle(skills: &Path, data: &Path, log: &Path) -> Idle {
    let (start, mut server) = Server::spawn(skills, data, log);
    server.initialize(start);
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let skill_list = format!(r#"{{"name":"{}","arguments":{}}}"#, BUILTIN_TOOL.0, BUILTIN_TOOL.1);
    loop {
        let (_, answer) = server.answer("tools/call", &skill_list, start);
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        let value = match &answer["result"]["structuredContent"] {
            Value::Null => serde_json::from_str(&text).unwrap_or_else(|e| panic!("skill_list is not JSON: {answer}: {e}")),
            value => value.clone(),
        };
        if value.get("loading").is_none() {
            break;
        }
        std::thread::sleep(POLL);
    }
    std::thread::sleep(IDLE);
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in /proc/PID/status"));
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    };
    let rss = [field("VmRSS:"), field("RssAnon:"), field("RssFile:")];
    let mut search = || {
        let asked = Instant::now();
        let (at, answer) = server.answer("tools/call", IDLE_QUERY, start);
        assert!(answer.get("result").is_some() && answer["result"]["isError"] != true, "tool_search failed: {answer}");
        at - asked
    };
    let (first_search, second_search) = (search(), search());
    server.stop();
    Idle { rss, first_search, second_search }
}

/// Where a case's spawns keep their figures for the replaying benchmarks.
#[derive(Default)]
struct Recorded {
    spawns: Mutex<Vec<Spawn>>,
    cursor: Mutex<[usize; 3]>,
}

impl Recorded {
    fn push(&self, spawn: Spawn) {
        eprintln!(
            "  spawn: initialize {:?}, first call {:?}, python call {:?}, tools/list complete {:?}, {} calls answered with an error",
            spawn.initialize,
            spawn.first_call,
            spawn.python_call,
            spawn.tools_listed,
            spawn.errors.len()
        );
        for error in &spawn.errors {
            eprintln!("    answered with an error: {error}");
        }
        self.spawns.lock().unwrap().push(spawn);
    }

    /// The figure `pick` of the next recorded spawn for replayer `which` (in order,
    /// starting over at the end), as the total of `iters` iterations: one spawn per
    /// sample, whatever iteration count criterion derives from a replay's wall time.
    fn replay(&self, which: usize, pick: fn(&Spawn) -> Option<Duration>, iters: u64) -> Duration {
        let spawns = self.spawns.lock().unwrap();
        let mut cursor = self.cursor.lock().unwrap();
        let spawn = &spawns[cursor[which] % spawns.len()];
        cursor[which] += 1;
        pick(spawn).expect("this case measured that figure").saturating_mul(u32::try_from(iters).unwrap_or(u32::MAX))
    }

    /// The median, the least and the greatest of figure `pick` over every spawn.
    fn spread(&self, pick: fn(&Spawn) -> Option<Duration>) -> Option<[Duration; 3]> {
        let mut values: Vec<Duration> = self.spawns.lock().unwrap().iter().filter_map(pick).collect();
        values.sort();
        Some([*values.get(values.len() / 2)?, *values.first()?, *values.last()?])
    }

    /// How many spawns had a call answered with an error, of how many.
    fn failing(&self) -> (usize, usize) {
        let spawns = self.spawns.lock().unwrap();
        (spawns.iter().filter(|s| !s.errors.is_empty()).count(), spawns.len())
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
    let mut idles: Vec<(&str, Vec<Idle>)> = Vec::new();
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
        group.bench_function(format!("{case}/first_call"), |b| b.iter_custom(|iters| record.replay(0, |s| Some(s.first_call), iters)));
        if python.is_some() {
            group.bench_function(format!("{case}/python_call"), |b| b.iter_custom(|iters| record.replay(1, |s| s.python_call, iters)));
        }
        group.bench_function(format!("{case}/tools_listed"), |b| b.iter_custom(|iters| record.replay(2, |s| Some(s.tools_listed), iters)));
        recorded.push((case, record));
        if *case != "cold" {
            let data = warm_data.as_ref().map_or_else(|| scratch.path().to_owned(), |d| d.path().to_owned());
            let spawns: Vec<Idle> = (0..IDLE_SPAWNS).map(|_| idle(skills_dir, &data, &log)).collect();
            eprintln!("startup/{case}: idle {spawns:?}");
            idles.push((case, spawns));
        }
    }
    group.finish();
    report(&recorded);
    report_idle(&idles);
}

/// Idle spawns per case (baseline and warm).
const IDLE_SPAWNS: usize = 3;

/// The median of `pick` over `spawns`.
fn median<T: Copy + PartialOrd>(spawns: &[Idle], pick: impl Fn(&Idle) -> T) -> T {
    let mut values: Vec<T> = spawns.iter().map(pick).collect();
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

/// The idle figures, printed and recorded for `bench-report`: resident memory against
/// `serve` with no skills, and the first search after the idle against the next one.
fn report_idle(idles: &[(&str, Vec<Idle>)]) {
    let find = |case: &str| idles.iter().find(|(c, _)| *c == case).map(|(_, s)| s.as_slice());
    let (Some(base), Some(warm)) = (find("baseline"), find("warm")) else { return };
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut figures = Vec::new();
    for (what, i) in [("resident memory (VmRSS)", 0), ("of it anonymous (RssAnon)", 1), ("of it file-backed (RssFile)", 2)] {
        let (value, baseline) = (mb(median(warm, |s| s.rss[i])), mb(median(base, |s| s.rss[i])));
        eprintln!("  idle {what}: {value:.1} MB with the skills, {baseline:.1} MB with none");
        let mut figure = Figure::new(
            format!("serve idle {IDLE:?} after loading, 20 wasm + 2 server + Python + JS skills, warm caches: {what}"),
            value,
            "MB",
        )
        .against(format!("serve idle, no skills: {what}"), baseline);
        if i == 0 {
            figure = figure.goal("≤ 100 MB");
        }
        figures.push(figure);
    }
    for (case, spawns) in [("no skills", base), ("20 wasm + 2 server + Python + JS skills", warm)] {
        let (first, second) = (ms(median(spawns, |s| s.first_search)), ms(median(spawns, |s| s.second_search)));
        eprintln!("  {case}: first tool_search after the idle {first:.1} ms, the next {second:.1} ms");
        figures.push(
            Figure::new(format!("serve, {case}: first tool_search after {IDLE:?} idle"), first, "ms")
                .against("the tool_search right after it", second)
                .goal("≤ 50 ms"),
        );
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "startup-idle", &figures) {
        eprintln!("startup: cannot record figures: {e}");
    }
}

/// Medians (and ranges) of every spawn made, against the baseline's, printed and
/// recorded for `bench-report`.
fn report(recorded: &[(&str, Recorded)]) {
    let record = |case: &str| recorded.iter().find(|(c, _)| *c == case).map(|(_, r)| r);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let spread = |case: &str, pick: fn(&Spawn) -> Option<Duration>| record(case).and_then(|r| r.spread(pick)).map(|s| s.map(ms));
    let (Some([base_init, ..]), Some([base_call, ..]), Some([base_listed, ..])) = (
        spread("baseline", |s| Some(s.initialize)),
        spread("baseline", |s| Some(s.first_call)),
        spread("baseline", |s| Some(s.tools_listed)),
    ) else {
        return;
    };
    let mut figures = Vec::new();
    eprintln!("\nstartup, medians [least – greatest] of every spawn (warm-up included), against `serve` with no skills in the same run:");
    eprintln!(
        "  baseline: initialize {base_init:.1} ms, first call (skill_list) {base_call:.1} ms, tools/list complete {base_listed:.1} ms"
    );
    for case in ["cold", "warm"] {
        let rows = [
            ("initialize answered", spread(case, |s| Some(s.initialize)), base_init, "baseline initialize", "≤ 200 ms"),
            (
                "first wasm tools/call answered",
                spread(case, |s| Some(s.first_call)),
                base_call,
                "baseline first call (skill_list)",
                if case == "warm" { "≤ 250 ms" } else { "" },
            ),
            ("first Python component call answered", spread(case, |s| s.python_call), base_call, "baseline first call (skill_list)", ""),
            (
                "tools/list complete (no skill loading)",
                spread(case, |s| Some(s.tools_listed)),
                base_listed,
                "baseline tools/list complete",
                "",
            ),
        ];
        for (what, value, base, base_what, goal) in rows {
            let Some([value, least, greatest]) = value else { continue };
            eprintln!(
                "  {case}: spawn → {what}: {value:.1} ms [{least:.1} – {greatest:.1}] ({:.1}× the {base_what}){}",
                value / base,
                if goal.is_empty() { String::new() } else { format!("; goal {goal}") }
            );
            let mut figure =
                Figure::new(format!("serve, 20 wasm + 2 server + Python + JS skills, caches {case}: spawn → {what}"), value, "ms")
                    .against(format!("serve, no skills: spawn → {base_what}"), base);
            if !goal.is_empty() {
                figure = figure.goal(goal);
            }
            figures.push(figure);
        }
        if let Some((failing, spawns)) = record(case).map(Recorded::failing) {
            eprintln!("  {case}: {failing} of {spawns} spawns had a call answered with an error before it succeeded");
        }
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "startup", &figures) {
        eprintln!("startup: cannot record figures: {e}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
