//! A team gateway on one machine: a real PostgreSQL (`Cluster`), two `serve --http`
//! replicas sharing it, and HAProxy in front, all on 127.0.0.1. An approval question one
//! replica asked is answered on the other, once; an approval made with the CLI is
//! honoured by both replicas within a second, and a rejection likewise; the calls
//! of both replicas are one table naming each; 1,000 calls through the balancer with
//! replica `a` killed (SIGKILL) halfway are each answered, or retried with their key and
//! answered, or (a call that was running on `a` when it died) told that their outcome is
//! unknown, and no call ran twice, counted in the skill's own ledgers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fixtures::balancer::Balancer;
use serde_json::{Value, json};
use skillhost::state::cluster::Cluster;

use crate::Served;

const CALLS: usize = 1000;
const WORKERS: usize = 8;
/// The skill whose tool appends each call's id to a ledger in its data dir.
const SKILL: &str = "sandbox-probe";

/// The shared pieces: PostgreSQL, the skills, the token, the keys.
struct Team {
    cluster: Cluster,
    skills: tempfile::TempDir,
    secrets: tempfile::TempDir,
}

/// One replica: its data dir and process.
struct Replica {
    name: &'static str,
    data: tempfile::TempDir,
    served: Option<Served>,
    addr: String,
    /// Its operations listener (`--ops`).
    ops: String,
}

impl Team {
    fn new() -> Self {
        let team = Self {
            cluster: Cluster::start().expect("PostgreSQL starts"),
            skills: tempfile::tempdir().unwrap(),
            secrets: tempfile::tempdir().unwrap(),
        };
        fixtures::python::install(SKILL, team.skills.path(), "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n");
        private(&team.token_file(), &"7".repeat(64));
        private(&team.secrets.path().join("keys"), &format!("{}\n", "ab".repeat(32)));
        // The operator may do everything (answer approval questions included); agents
        // may call, not approve.
        std::fs::create_dir_all(team.secrets.path().join("policy")).unwrap();
        std::fs::write(
            team.secrets.path().join("policy/team.cedar"),
            "@id(\"operator\")\npermit(principal == Caller::\"operator\", action, resource);\n\
             @id(\"agents-call\")\npermit(principal in Group::\"agents\", action in [Action::\"call\", Action::\"list\", Action::\"read\"], resource);\n",
        )
        .unwrap();
        team
    }

    fn token_file(&self) -> PathBuf {
        self.secrets.path().join("token")
    }

    fn replica(&self, name: &'static str) -> Replica {
        let data = tempfile::tempdir().unwrap();
        let config = format!(
            "[state]\nurl = \"{}\"\nreplica = \"{name}\"\nkeys = \"{}\"\n[org]\npolicies = \"{}\"\n",
            self.cluster.url(),
            self.secrets.path().join("keys").display(),
            self.secrets.path().join("policy").display()
        );
        std::fs::write(data.path().join("config.toml"), config).unwrap();
        Replica { name, data, served: None, addr: String::new(), ops: String::new() }
    }

    /// `skillhost COMMAND` over `replica`'s data dir (its config names the shared state).
    fn cli(&self, replica: &Replica, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(self.skills.path())
            .arg("--data-dir")
            .arg(replica.data.path())
            .args(args)
            .env("SKILLHOST_VENV", fixtures::python::venv())
            .output()
            .unwrap()
    }

    /// `serve --http --ops` over the replica's data dir, both listeners on free ports.
    fn start(&self, replica: &mut Replica) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--skills")
            .arg(self.skills.path())
            .arg("--data-dir")
            .arg(replica.data.path())
            .args(["serve", "--http", "127.0.0.1:0", "--ops", "127.0.0.1:0", "--drain-timeout", "10s", "--token-file"])
            .arg(self.token_file())
            .env_remove("SKILLHOST_MCP_TOKEN")
            .env("SKILLHOST_VENV", fixtures::python::venv())
            .env("SKILLHOST_LOG", "warn")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let (mut mcp, mut ops) = (None, None);
        while mcp.is_none() || ops.is_none() {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "replica {} exited before listening", replica.name);
            let address = |prefix: &str| line.trim().strip_prefix(prefix).map(|rest| rest.split('/').next().unwrap_or_default().to_owned());
            mcp = mcp.or_else(|| address("skillhost: serving MCP at http://"));
            ops = ops.or_else(|| address("skillhost: serving /healthz, /readyz and /metrics at http://"));
        }
        // Keep draining stderr so the replica never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        replica.addr = mcp.unwrap();
        replica.ops = ops.unwrap();
        replica.served = Some(Served(child));
    }

    fn psql(&self, sql: &str) -> String {
        let out = Command::new(Cluster::bin_dir().join("psql")).arg(self.cluster.url()).args(["-Atc", sql]).output().unwrap();
        assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

fn private(path: &Path, text: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// `GET PATH` on an operations listener: the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

/// The value of the Prometheus sample whose line starts with `name{` and holds each of
/// `labels`.
fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|label| l.contains(label)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// What became of one HTTP attempt of a call.
enum Attempt {
    /// The JSON-RPC reply.
    Reply(Value),
    /// Nothing reached a replica, or no answer came back (a dropped connection, a 502 or
    /// 503 of the balancer or of a draining replica): send it again with its key.
    Retriable(String),
}

/// One stateless (2026-07-28) `tools/call` of `tool` over HTTP at `addr`, named `key`.
fn call(addr: &str, token: &str, tool: &str, arguments: Value, key: &str) -> Attempt {
    let params = json!({
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "skillhost/call-key": key,
        }
    });
    call_with(addr, token, params)
}

/// One stateless `tools/call` with these `params`.
fn call_with(addr: &str, token: &str, params: Value) -> Attempt {
    let tool = params["name"].as_str().unwrap_or_default().to_owned();
    request(addr, token, "tools/call", &tool, params)
}

/// One stateless request of `method` about `name` (the tool, or the resource's URI).
fn request(addr: &str, token: &str, method: &str, name: &str, params: Value) -> Attempt {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = match TcpStream::connect(addr) {
        Ok(stream) => stream,
        Err(e) => return Attempt::Retriable(format!("connect: {e}")),
    };
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return Attempt::Retriable(format!("send: {e}"));
    }
    let mut response = String::new();
    if let Err(e) = stream.read_to_string(&mut response) {
        return Attempt::Retriable(format!("read: {e}"));
    }
    let status = response.split_whitespace().nth(1).unwrap_or_default().to_owned();
    if response.is_empty() || ["502", "503", "504"].contains(&status.as_str()) {
        return Attempt::Retriable(format!("status {status:?}"));
    }
    let (_, body) = response.split_once("\r\n\r\n").unwrap_or_default();
    // A JSON body, or server-sent events whose `data:` line holds the reply.
    let reply = serde_json::from_str(body.trim()).ok().or_else(|| {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str::<Value>(d.trim()).ok().filter(|v| v.get("id").is_some()))
    });
    match reply {
        Some(reply) => Attempt::Reply(reply),
        None => panic!("status {status} without a JSON-RPC reply: {response}"),
    }
}

/// Call until a reply comes (at most 50 attempts, 100 ms apart).
fn call_retrying(addr: &str, token: &str, tool: &str, arguments: Value, key: &str, retries: &AtomicUsize) -> Value {
    for _ in 0..50 {
        match call(addr, token, tool, arguments.clone(), key) {
            Attempt::Reply(reply) => return reply,
            Attempt::Retriable(_) => {
                retries.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    panic!("call {key} got no answer in 50 attempts");
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect()
}

/// The lines of `replica`'s ledger.
fn ledger(replica: &Replica) -> Vec<String> {
    lines_of(replica, "ledger")
}

/// The lines of every file called `file` in `replica`'s data dir.
fn lines_of(replica: &Replica, file: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![replica.data.path().to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == file) {
                found.extend(std::fs::read_to_string(&path).unwrap().lines().map(str::to_owned));
            }
        }
    }
    found
}

/// Call the skill on `replica` directly until whether it ran is `runs`, and how long that
/// took (at most 10 s).
fn until(replica: &Replica, token: &str, runs: bool) -> Duration {
    let started = Instant::now();
    let mut n = 0;
    loop {
        n += 1;
        let key = format!("probe-{}-{n}-{}", replica.name, started.elapsed().as_nanos());
        if let Attempt::Reply(reply) =
            call(&replica.addr, token, &format!("{SKILL}__append"), json!({"path": "/data/probe", "line": key}), &key)
            && ran(&reply, &key) == runs
        {
            return started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(10) {
            let last = call(&replica.addr, token, &format!("{SKILL}__append"), json!({"path": "/data/probe", "line": "x"}), "last");
            let last = match last {
                Attempt::Reply(reply) => reply.to_string(),
                Attempt::Retriable(why) => why,
            };
            panic!("replica {} did not change within 10 s; it answers {last}", replica.name);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long until `replica`'s `skill_list` says the skill is `state` (at most 10 s): the
/// trust state itself, apart from starting the approved server for a first call.
fn until_state(replica: &Replica, token: &str, state: &str) -> Duration {
    let started = Instant::now();
    loop {
        if let Attempt::Reply(reply) = call(&replica.addr, token, "skill_list", json!({}), "list")
            && state_of(&reply["result"]["structuredContent"]).as_deref() == Some(state)
        {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "replica {} did not show {state} within 10 s", replica.name);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The `state` of the object named [`SKILL`] anywhere in `value`.
fn state_of(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) if map.get("name").and_then(Value::as_str) == Some(SKILL) => map.get("state")?.as_str().map(str::to_owned),
        Value::Object(map) => map.values().find_map(state_of),
        Value::Array(items) => items.iter().find_map(state_of),
        _ => None,
    }
}

/// Whether the reply is the skill's answer to the call that appended `line`.
fn ran(reply: &Value, line: &str) -> bool {
    reply["result"]["isError"] != true && reply.get("error").is_none() && text_of(reply).contains(&format!("\"{line}\""))
}

#[test]
fn two_replicas_on_postgres_behind_haproxy_share_approvals_and_lose_or_repeat_no_call_when_one_is_killed() {
    let team = Team::new();
    let token = "7".repeat(64);
    let (mut a, mut b) = (team.replica("a"), team.replica("b"));
    team.start(&mut a);
    team.start(&mut b);
    // Nobody approved the skill: both replicas refuse it.
    until(&a, &token, false);
    until(&b, &token, false);

    // 0. A question asked by replica a (an MCP client's elicitation, 2026-07-28: the
    // answer comes back in a retried call) is answered on replica b: signed with the
    // shared keys, used once through the shared store, the approval then held by both.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let params = json!({"name": format!("{SKILL}__append"), "arguments": {"path": "/data/probe", "line": "asked"}, "_meta": meta});
    let Attempt::Reply(asked) = call_with(&a.addr, &token, params.clone()) else { panic!("replica a did not answer") };
    let state = asked["result"]["requestState"].as_str().unwrap_or_else(|| panic!("an approval question: {asked}")).to_owned();
    let mut answered = params.clone();
    answered["requestState"] = json!(state);
    answered["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    let Attempt::Reply(reply) = call_with(&b.addr, &token, answered.clone()) else { panic!("replica b did not answer") };
    assert!(ran(&reply, "asked"), "replica b took the answer to replica a's question and ran the call: {reply}");
    until_state(&a, &token, "approved");
    assert_eq!(team.psql(&format!("SELECT approved_via FROM skills WHERE name LIKE '%{SKILL}'")), "mcp-elicitation");
    let reject = team.cli(&a, &["reject", SKILL]);
    assert!(reject.status.success(), "{}", String::from_utf8_lossy(&reject.stderr));
    until_state(&a, &token, "pending_review");
    until_state(&b, &token, "pending_review");
    // The same answer again, on either replica, approves nothing: it was used.
    for replica in [&a, &b] {
        let Attempt::Reply(replayed) = call_with(&replica.addr, &token, answered.clone()) else { panic!("no answer") };
        assert!(!ran(&replayed, "asked"), "a used answer approved again on replica {}: {replayed}", replica.name);
    }
    assert_eq!(team.psql(&format!("SELECT state FROM skills WHERE name LIKE '%{SKILL}'")), "pending_review");
    // A fresh question, answered yes, cannot lift a human's rejection either; and a
    // caller the org policy does not give `approve` is not even asked.
    let Attempt::Reply(asked) = call_with(&a.addr, &token, params.clone()) else { panic!("replica a did not answer") };
    let mut fresh = params.clone();
    fresh["requestState"] = asked["result"]["requestState"].clone();
    fresh["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": true}}});
    let Attempt::Reply(refused) = call_with(&b.addr, &token, fresh) else { panic!("replica b did not answer") };
    assert!(text_of(&refused).contains("was rejected by a human") && !ran(&refused, "asked"), "{refused}");
    let added = team.cli(&a, &["caller", "add", "agent", "--group", "agents", "--json"]);
    let agent: Value = serde_json::from_slice(&added.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&added.stderr)));
    let Attempt::Reply(not_asked) = call_with(&b.addr, agent["token"].as_str().unwrap(), params.clone()) else { panic!("no answer") };
    assert!(text_of(&not_asked).contains("caller `agent` may not approve"), "{not_asked}");
    assert!(not_asked["result"]["requestState"].is_null(), "{not_asked}");
    assert_eq!(team.psql(&format!("SELECT state FROM skills WHERE name LIKE '%{SKILL}'")), "pending_review");

    // 1. A human approves with the CLI against the same state: both replicas honour it
    // (their trust state within a second of the CLI's exit; then the call runs).
    let approve = team.cli(&a, &["approve", SKILL, "--yes"]);
    assert!(approve.status.success(), "{}", String::from_utf8_lossy(&approve.stderr));
    let approved = [until_state(&b, &token, "approved"), until_state(&a, &token, "approved")];
    until(&b, &token, true);
    until(&a, &token, true);
    // 2. A rejection likewise: neither runs it again.
    let reject = team.cli(&b, &["reject", SKILL]);
    assert!(reject.status.success(), "{}", String::from_utf8_lossy(&reject.stderr));
    let rejected = [until_state(&a, &token, "pending_review"), until_state(&b, &token, "pending_review")];
    until(&a, &token, false);
    until(&b, &token, false);
    eprintln!("after the CLI exited: approval shown by b and a after {approved:?}; rejection by a and b after {rejected:?}");
    for took in approved.iter().chain(&rejected) {
        assert!(*took < Duration::from_secs(1), "a trust change took {took:?} to reach a replica");
    }
    let approve = team.cli(&b, &["approve", SKILL, "--yes"]);
    assert!(approve.status.success(), "{}", String::from_utf8_lossy(&approve.stderr));
    until(&a, &token, true);
    until(&b, &token, true);

    // 3. 1,000 calls through the balancer; replica a killed halfway.
    let balancer = Balancer::start(
        &[("a", &a.addr), ("b", &b.addr)],
        "check inter 200ms fall 2 rise 1",
        "    retries 3\n    option redispatch\n    option http-buffer-request\n    retry-on conn-failure empty-response response-timeout\n",
    );
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (next, done, retries, outcomes) = (next.clone(), done.clone(), retries.clone(), outcomes.clone());
            let (addr, token) = (balancer.addr.clone(), token.clone());
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= CALLS {
                        return;
                    }
                    let id = format!("call-{i}");
                    let reply = call_retrying(
                        &addr,
                        &token,
                        &format!("{SKILL}__append"),
                        json!({"path": "/data/ledger", "line": id}),
                        &id,
                        &retries,
                    );
                    outcomes.lock().unwrap().push((id, reply));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    while done.load(Ordering::Relaxed) < CALLS / 2 {
        std::thread::sleep(Duration::from_millis(1));
    }
    a.served.as_mut().unwrap().kill();
    let killed_after = done.load(Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    let elapsed = started.elapsed();

    let outcomes = outcomes.lock().unwrap();
    assert_eq!(outcomes.len(), CALLS, "every call came back");
    let (mut answered, mut interrupted, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for (id, reply) in outcomes.iter() {
        if ran(reply, id) {
            answered.push(id.clone());
        } else if reply["result"]["isError"] == true && text_of(reply).contains("whether it had its effect is unknown") {
            interrupted.push(id.clone());
        } else {
            other.push(format!("{id}: {reply}"));
        }
    }
    let ledgers: Vec<String> = ledger(&a).into_iter().chain(ledger(&b)).collect();
    let mut counted = std::collections::HashMap::<&str, usize>::new();
    for line in &ledgers {
        *counted.entry(line.as_str()).or_default() += 1;
    }
    eprintln!(
        "{CALLS} calls through HAProxy in {elapsed:?}, a killed after {killed_after}: {} answered, {} interrupted (outcome unknown), {} retried sends; ledgers: a {} b {} lines",
        answered.len(),
        interrupted.len(),
        retries.load(Ordering::Relaxed),
        ledger(&a).len(),
        ledger(&b).len()
    );
    assert!(other.is_empty(), "calls neither answered nor told their outcome is unknown: {:?}", &other[..other.len().min(5)]);
    assert!(interrupted.len() <= WORKERS, "at most the calls in flight on a were interrupted: {}", interrupted.len());
    let twice: Vec<_> = counted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "calls ran twice: {twice:?}");
    for id in &answered {
        assert_eq!(counted.get(id.as_str()), Some(&1), "{id} was answered but is not in a ledger once");
    }
    assert_eq!(ledgers.len(), answered.len() + interrupted.iter().filter(|id| counted.contains_key(id.as_str())).count());
    assert!(!ledger(&a).is_empty() && !ledger(&b).is_empty(), "both replicas served calls");

    // 4. The calls of both replicas are one table, each row naming its replica.
    let by_replica = team.psql(&format!("SELECT replica, count(*) FROM calls WHERE skill = '{SKILL}' GROUP BY replica ORDER BY replica"));
    let rows: Vec<&str> = by_replica.lines().collect();
    assert!(rows.len() == 2 && rows[0].starts_with("a|") && rows[1].starts_with("b|"), "calls by replica: {by_replica}");
    // 5. Replica b's metrics counted exactly the calls its skill ran, and it is ready;
    // SIGTERM drains it and it exits 0.
    let (status, metrics) = get(&b.ops, "/metrics");
    assert_eq!(status, 200);
    let ran_on_b = ledger(&b).len() + lines_of(&b, "probe").len();
    let counted = sample(&metrics, "skillhost_calls_total", &[&format!("skill=\"{SKILL}\""), "tool=\"append\"", "outcome=\"ok\""]);
    assert_eq!(counted, Some(ran_on_b as f64), "b's calls_total against the lines its skill wrote");
    assert!(sample(&metrics, "skillhost_store_latency_seconds_count", &["outcome=\"ok\""]).is_some_and(|n| n > 0.0), "store latency");
    assert_eq!(get(&b.ops, "/readyz").0, 200);
    assert_eq!(get(&b.ops, "/healthz").0, 200);
    let mut served = b.served.take().unwrap();
    rustix::process::kill_process(rustix::process::Pid::from_raw(served.0.id() as i32).unwrap(), rustix::process::Signal::TERM).unwrap();
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = served.0.try_wait().unwrap() {
            break status;
        }
        assert!(stopped.elapsed() < Duration::from_secs(20), "replica b did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "a drained replica exits 0: {status}");

    // Every call was claimed by its key once, by the replica that ran it.
    let claimed = team.psql("SELECT count(*), count(answer) FROM call_claims WHERE key LIKE 'caller:operator%call-%'");
    assert_eq!(claimed, format!("{CALLS}|{}", answered.len()), "claims, and answers kept");
    drop(balancer);
}

/// A replica in team mode whose skill's bytes are not what `[team] lock` pins refuses that
/// skill (the call says why and what to run), serves the one that matches, and `doctor`
/// says which is refused; so does a skill the lock does not name.
#[test]
fn a_skill_whose_bytes_differ_from_the_lock_is_refused_and_doctor_says_so() {
    let data = tempfile::tempdir().unwrap();
    let user = data.path().join("user-skills");
    for name in ["good", "bad", "stray"] {
        let dir = user.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixtures::LIMITS.wasm, dir.join("skill.wasm")).unwrap();
        std::fs::write(dir.join("skill.toml"), fixtures::LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"{name}\"")))
            .unwrap();
    }
    let cli = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_skillhost")).arg("--data-dir").arg(data.path()).args(args).output().unwrap();
    let content_hash = |name: &str| {
        let out = cli(&["show", name, "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        fn find(value: &Value) -> Option<String> {
            match value {
                Value::Object(map) => {
                    map.get("content_hash").and_then(Value::as_str).map(str::to_owned).or_else(|| map.values().find_map(find))
                }
                Value::Array(items) => items.iter().find_map(find),
                _ => None,
            }
        }
        find(&serde_json::from_slice(&out.stdout).unwrap()).expect("show --json names the content hash")
    };
    let good = content_hash("good");
    let bad = content_hash("bad");
    // The lock pins `bad` at other bytes, from a registry nothing listens on; it does not
    // name `stray`.
    let digest = format!("sha256:{}", "0".repeat(64));
    let lock = format!(
        "version = 1\n\
         [[skill]]\nname = \"good\"\nsource = \"oci://127.0.0.1:9/team/good:1\"\ndigest = \"{digest}\"\ncontent = \"{good}\"\n\
         [[skill]]\nname = \"bad\"\nsource = \"oci://127.0.0.1:9/team/bad:1\"\ndigest = \"{digest}\"\ncontent = \"{}\"\n",
        good.replace(&good[good.len() - 4..], "beef")
    );
    std::fs::write(data.path().join("skills.lock"), lock).unwrap();
    std::fs::write(data.path().join("config.toml"), "[team]\nlock = \"skills.lock\"\n").unwrap();

    let (code, out, err) = {
        let out = cli(&["call", "good", "echo", "--input", "{\"value\": 1}"]);
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(code, Some(0), "the skill as locked is served: {out}{err}");
    let out = cli(&["call", "bad", "echo", "--input", "{\"value\": 1}"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the skill whose bytes differ is refused");
    assert!(err.contains(&format!("its files hash to {bad}")) && err.contains("skillhost sync --lock"), "{err}");
    let out = cli(&["call", "stray", "echo", "--input", "{\"value\": 1}"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the lock does not name it"), "{}", String::from_utf8_lossy(&out.stderr));

    // A replica serving that data dir is not ready, and says which skills and why.
    let token = data.path().join("token");
    private(&token, &"7".repeat(64));
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--data-dir")
        .arg(data.path())
        .args(["serve", "--http", "127.0.0.1:0", "--ops", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .env("SKILLHOST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let ops = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited before listening");
        if let Some(rest) = line.trim().strip_prefix("skillhost: serving /healthz, /readyz and /metrics at http://") {
            break rest.split('/').next().unwrap().to_owned();
        }
    };
    let served = Served(child);
    let started = Instant::now();
    let (status, body) = loop {
        let (status, body) = get(&ops, "/readyz");
        // Until the first load ends, it is not ready for that reason; then for the lock's.
        if body.contains("`bad`") || started.elapsed() > Duration::from_secs(30) {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(served);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("its files hash to") && body.contains("`stray`") && !body.contains("`good`"), "{body}");

    let out = cli(&["doctor", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let checks: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lock_check = checks.as_array().unwrap().iter().find(|c| c["name"] == "team lock").expect("doctor checks the lock");
    assert_eq!(lock_check["available"], false, "{lock_check}");
    let detail = lock_check["detail"].as_str().unwrap();
    assert!(detail.contains("`bad`") && detail.contains("`stray`") && !detail.contains("`good`"), "{detail}");
}

/// A file a run on replica `a` left is linked from its answer (`skillhost-run://`), and the
/// link reads on replica `b`, which never ran it: the files are kept in the shared store.
#[test]
fn a_file_a_run_left_on_one_replica_is_read_through_its_link_on_the_other() {
    let team = Team::new();
    let dir = team.skills.path().join("bin-maker");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: bin-maker\ndescription: Writes a binary file. Use it in tests.\n---\nRun `sh scripts/make.sh`.\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/make.sh"), "#!/bin/sh\nprintf 'BIN\\377\\001' > out.bin\n").unwrap();
    let (mut a, mut b) = (team.replica("a"), team.replica("b"));
    let approved = team.cli(&a, &["approve", "bin-maker", "--yes"]);
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    team.start(&mut a);
    team.start(&mut b);
    let token = std::fs::read_to_string(team.token_file()).unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let run = json!({"name": "skill_run", "arguments": {"skill": "bin-maker", "command": ["sh", "scripts/make.sh"]}, "_meta": meta});
    let Attempt::Reply(ran) = call_with(&a.addr, token.trim(), run) else { panic!("replica a did not answer") };
    let files = &ran["result"]["structuredContent"]["files"];
    let file = files.as_array().into_iter().flatten().find(|f| f["path"] == "out.bin").unwrap_or_else(|| panic!("no out.bin: {ran}"));
    assert_eq!(file["returned"], "resource", "{file}");
    let uri = file["uri"].as_str().unwrap();
    let read = |replica: &Replica, uri: &str| match request(
        &replica.addr,
        token.trim(),
        "resources/read",
        uri,
        json!({"uri": uri, "_meta": meta}),
    ) {
        Attempt::Reply(reply) => reply,
        Attempt::Retriable(why) => panic!("resources/read on {}: {why}", replica.name),
    };
    let on_b = read(&b, uri);
    let blob = on_b["result"]["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("no blob read on b: {on_b}"));
    assert_eq!(blob, "QklO/wE=", "the bytes the run left on a (base64 of BIN\\xff\\x01): {on_b}");
    let missing = read(&b, &uri.replace("out.bin", "other.bin"));
    assert!(missing["error"]["message"].as_str().unwrap_or_default().contains("left no file `other.bin`"), "{missing}");
    let stranger = read(&b, &format!("skillhost-run://{}/out.bin", "0".repeat(32)));
    assert!(stranger["error"]["message"].as_str().unwrap_or_default().contains("is not kept"), "{stranger}");
}

/// A call key is its caller's own and names one call: another caller using it gets its
/// own call run (never the first caller's kept answer), and the same caller sending
/// another call under it is refused rather than answered with the first call's result.
#[test]
fn a_call_key_is_its_callers_own_and_names_one_call() {
    let team = Team::new();
    let mut a = team.replica("a");
    let add = |name: &str| {
        let added = team.cli(&a, &["caller", "add", name, "--group", "agents", "--json"]);
        let added: Value =
            serde_json::from_slice(&added.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&added.stderr)));
        added["token"].as_str().unwrap().to_owned()
    };
    let (alice, bob) = (add("alice"), add("bob"));
    let approved = team.cli(&a, &["approve", SKILL, "--yes"]);
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    team.start(&mut a);
    until(&a, &"7".repeat(64), true);
    let append = format!("{SKILL}__append");
    let reply = |token: &str, line: &str| match call(&a.addr, token, &append, json!({"path": "/data/keyed", "line": line}), "K") {
        Attempt::Reply(reply) => reply,
        Attempt::Retriable(why) => panic!("no answer: {why}"),
    };
    assert!(ran(&reply(&alice, "alice's"), "alice's"));
    let bobs = reply(&bob, "bob's");
    assert!(ran(&bobs, "bob's"), "bob's call under alice's key ran as bob's, not answered with alice's: {bobs}");
    let again = reply(&alice, "alice's");
    assert!(ran(&again, "alice's"), "a retry gets the kept answer: {again}");
    let other = reply(&alice, "something else");
    let message = other["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("names another call"), "the same key with other arguments is refused: {other}");
    assert_eq!(lines_of(&a, "keyed"), ["alice's", "bob's"], "each ran once, the refused one not at all");
}
