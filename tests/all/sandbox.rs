//! The sandbox runtime with real bubblewrap and real Python: FastMCP fixture servers in
//! `tests/python/` probe their sandbox from inside, and the PyPI `mcp-server-time` runs
//! as a skill. Every wait is bounded; nothing asserts on timing.

use std::path::Path;
use std::time::Duration;

use fixtures::{TestServer, python};
use serde_json::{Value, json};
use skillhost::{CallContext, CallError, DirectSkill, Host, skill::CallFailure, skill::Progress};
use tempfile::TempDir;

use crate::{HANG_GUARD, call, call_with, ok, processes_with, wait_gone};

/// A host with the sandbox runtime on the test venv, over fresh directories.
struct SandboxHost {
    host: Host,
    data: TempDir,
    skills: TempDir,
}

impl SandboxHost {
    fn new() -> Self {
        let data = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        let host = crate::sandbox_host(data.path());
        Self { host, data, skills }
    }

    /// Load fixture `name` with `extra` appended to its skill.toml.
    async fn load(&self, name: &str, extra: &str) -> DirectSkill {
        let dir = python::install(name, self.skills.path(), extra);
        tokio::time::timeout(HANG_GUARD, self.host.load_path_granted(&dir))
            .await
            .expect("load hung")
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

/// The probe's `{ok, value|error}` answer.
fn probe(out: Value) -> Result<Value, String> {
    if out["ok"] == true { Ok(out["value"].clone()) } else { Err(out["error"].as_str().unwrap_or_default().to_owned()) }
}

fn timeout(d: Duration) -> CallContext {
    CallContext { timeout: Some(d), ..CallContext::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fastmcp_server_is_a_skill() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    assert_eq!(skill.runtime(), "bwrap");
    let names: Vec<&str> = skill.skill.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"fork_bomb"), "{names:?}");
    let echo = skill.skill.tools().iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.description, "Return the text.");
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    assert_eq!(ok(&skill, "echo", json!({"text": "hi"})).await, json!({"text": "hi"}));
    // A plain `str` result comes back as the value itself (FastMCP's wrapping undone).
    assert_eq!(ok(&skill, "big", json!({"size": 3})).await, json!("xxx"));

    let err = call(&skill, "nope", json!({})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::UnknownTool { .. }, .. }), "{err}");
    let err = call(&skill, "fail", json!({"message": "boom"})).await.unwrap_err();
    assert!(matches!(&err, CallError { failure: CallFailure::Failed { message, .. }, .. } if message.contains("boom")), "{err}");
    let err = call(&skill, "echo", json!({"text": 5})).await.unwrap_err();
    assert!(err.is_tool_error(), "a bad input is the caller's error: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_holds_nothing_of_the_host() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n").await;
    let data = env.host.policy().data_dir(&skillhost::DirectSkill::data_key(&skill.source.manifest.name));
    std::fs::write(env.data.path().join("host-secret"), "s3cret").unwrap();

    let read = |path: String| {
        let skill = skill.clone();
        async move { probe(ok(&skill, "read_file", json!({"path": path})).await) }
    };
    let host_data = env.data.path().display().to_string();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().display().to_string();
    let sources = [format!("{workspace}/Cargo.toml"), format!("{workspace}/host"), format!("{workspace}/.git")];
    for path in ["/root/.ssh", "/root/.bashrc", "/root/.cargo", "/etc/shadow", "/home", "/proc/1/root/etc/shadow"]
        .into_iter()
        .chain(sources.iter().map(String::as_str))
    {
        let result = read(path.to_owned()).await;
        assert!(result.is_err(), "{path} was readable: {result:?}");
    }
    let result = read(format!("{host_data}/host-secret")).await;
    assert!(result.is_err(), "the host's data dir was readable: {result:?}");
    // The venv and its Python prefix are bound at their own paths (their scripts name
    // them): their parents show the way down to them and nothing else.
    let venv = skillhost_sandbox::Venv::open(&python::venv()).unwrap();
    for bound in [&venv.prefix, &venv.dir] {
        for parent in bound.ancestors().skip(1).filter(|p| *p != Path::new("/") && !p.starts_with("/usr")) {
            if let Ok(listing) = read(parent.display().to_string()).await {
                for name in listing.as_array().unwrap() {
                    let shown = parent.join(name.as_str().unwrap());
                    assert!(
                        venv.prefix.starts_with(&shown) || venv.dir.starts_with(&shown),
                        "{} shows {}",
                        parent.display(),
                        shown.display()
                    );
                }
            }
        }
    }

    let write = |path: &str| {
        let skill = skill.clone();
        let path = path.to_owned();
        async move { probe(ok(&skill, "write_file", json!({"path": path, "text": "x"})).await) }
    };
    for path in ["/skill/server.py", "/usr/pwned", "/etc/passwd", "/pwned", &format!("{host_data}/pwned")] {
        assert!(write(path).await.is_err(), "{path} was writable");
    }
    assert!(!env.data.path().join("pwned").exists());
    write("/data/out.txt").await.expect("the granted data dir is writable");
    assert_eq!(std::fs::read_to_string(data.join("out.txt")).unwrap(), "x");
    write("/tmp/scratch").await.expect("/tmp is a private tmpfs");

    let env_out = ok(&skill, "environment", json!({})).await;
    assert_eq!((env_out["uid"].as_u64(), env_out["gid"].as_u64()), (Some(65534), Some(65534)));
    assert_eq!(env_out["cwd"], "/skill");
    let vars: Vec<&str> = env_out["env"].as_object().unwrap().keys().map(String::as_str).collect();
    let allowed = [
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "SKILLHOST_DATA",
        "VIRTUAL_ENV",
        "LC_CTYPE",
        "PWD",
    ];
    for var in &vars {
        assert!(allowed.contains(var), "unexpected variable {var} in {vars:?}");
    }
    assert_eq!(env_out["env"]["HOME"], "/tmp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_direct_network() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let result = probe(ok(&skill, "connect", json!({"host": "127.0.0.1", "port": port})).await);
    assert!(result.is_err(), "connected to the host's loopback: {result:?}");
    assert!(listener.accept().is_err(), "the host's listener received a connection");
    let result = probe(ok(&skill, "connect", json!({"host": "1.1.1.1", "port": 80})).await);
    assert!(result.is_err(), "reached the internet: {result:?}");
}

/// A data dir granted inside a writable one would need a mount point where the skill can
/// plant a link, which bubblewrap before 0.12 follows while it sets up the mounts
/// (CVE-2026-87766): such a grant is refused at load, naming both directories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dir_granted_inside_a_writable_one_is_refused_at_load() {
    let env = SandboxHost::new();
    let extra = "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n[[capabilities.files]]\npath = \"out\"\nmode = \"ro\"\n";
    let dir = python::install("sandbox-probe", env.skills.path(), extra);
    let loaded = tokio::time::timeout(HANG_GUARD, env.host.load_path_granted(&dir)).await.expect("load hung");
    let Err(error) = loaded else { panic!("a mount point inside a writable data dir was accepted") };
    let error = error.to_string();
    for needle in ["sandbox-probe", "/data/out", "inside /data", "CVE-2026-87766"] {
        assert!(error.contains(needle), "{needle:?} missing from: {error}");
    }
}

/// A network namespace confines only the families it owns: vsock reaches the machine
/// (these hosts are VMs with virtio-vsock) from any namespace, and packet, alg, bluetooth,
/// xdp and the netlink protocols other than routing are kernel surface no server needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_families_beyond_unix_and_ip_are_refused() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    let out = ok(&skill, "sockets", json!({})).await;
    for allowed in ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK/ROUTE"] {
        assert_eq!(out[allowed], "ok", "{allowed}: {out}");
    }
    for refused in [
        "AF_VSOCK",
        "socketpair AF_VSOCK",
        "AF_PACKET",
        "AF_ALG",
        "AF_BLUETOOTH",
        "AF_XDP",
        "AF_NETLINK/AUDIT",
        "AF_NETLINK/KOBJECT_UEVENT",
    ] {
        assert_eq!(out[refused], "EPERM", "{refused}: {out}");
    }
    let listen = probe(ok(&skill, "vsock_listen", json!({"port": 45679})).await);
    assert!(listen.as_ref().is_err_and(|e| e.contains("Operation not permitted")), "listened on the machine's vsock: {listen:?}");
}

/// A deny-list knows only the system calls of its day: a newer one (here `open_tree_attr`,
/// Linux 6.15, a mount call) answers `ENOSYS` as on a kernel without it, and the mount
/// listing calls of 6.8 are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_calls_newer_than_the_filter_are_refused() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    for (number, expected) in [(467, "ENOSYS"), (469, "ENOSYS"), (100_000, "ENOSYS"), (457, "EPERM"), (458, "EPERM")] {
        let out = ok(&skill, "syscall", json!({"number": number})).await;
        assert_eq!(out["result"], expected, "system call {number}: {out}");
    }
    // Known calls still run (`getpid`).
    let getpid = if cfg!(target_arch = "aarch64") { 172 } else { 39 };
    assert_eq!(ok(&skill, "syscall", json!({"number": getpid})).await["result"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_dies_with_its_call_and_the_host_lives_on() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    // The bomb is bounded by the test itself (64 processes), tagged with a unique marker.
    let marker = format!("0.0{}{}", std::process::id(), env.data.path().to_string_lossy().len());
    let err = call_with(&skill, "fork_bomb", json!({"count": 64, "marker": marker}), timeout(Duration::from_secs(3))).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Timeout { .. }, .. }), "{err}");
    assert_eq!(wait_gone(&format!("sleep 3600 {marker}")).await, Vec::<u32>::new(), "processes of the bomb outlived the call");
    assert_eq!(ok(&skill, "echo", json!({"text": "alive"})).await["text"], "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_is_refused_its_memory() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "[limits]\nmemory = \"256MiB\"\n").await;
    let out = ok(&skill, "environment", json!({})).await;
    if out["as"].as_u64() == Some(256 << 20) {
        // No cgroup here: RLIMIT_AS is the skill's memory limit.
        let result = probe(ok(&skill, "memory_hog", json!({"mib": 1024})).await);
        assert!(result.as_ref().is_err_and(|e| e.contains("MemoryError")), "{result:?}");
    } else {
        // A cgroup limits the sandbox's resident memory (tests/all/life_limits.rs).
        let result = call(&skill, "memory_hog", json!({"mib": 1024})).await;
        assert!(
            matches!(result, Err(CallError { failure: CallFailure::MemoryLimit { limit, .. }, .. }) if limit == 256 << 20),
            "{result:?}"
        );
    }
    assert_eq!(ok(&skill, "echo", json!({"text": "alive"})).await["text"], "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_is_an_error_and_the_next_call_restarts_it() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    ok(&skill, "echo", json!({"text": "warm"})).await;
    let err = call(&skill, "crash", json!({})).await.unwrap_err();
    match &err {
        CallError { failure: CallFailure::Crashed { message, .. }, .. } => {
            assert!(message.contains("status 3") && message.contains("crashing on purpose"), "{message}")
        }
        other => panic!("expected a crash, got {other}"),
    }
    assert_eq!(ok(&skill, "echo", json!({"text": "again"})).await["text"], "again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_is_killed_at_its_deadline() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "[limits]\ntimeout = \"2s\"\n").await;
    let err = call(&skill, "hang", json!({})).await.unwrap_err();
    assert!(matches!(&err, CallError { failure: CallFailure::Timeout { limit, .. }, .. } if *limit == Duration::from_secs(2)), "{err}");
    assert!(err.to_string().contains("raise `[limits] timeout`"), "{err}");
    // The hung server was killed (its sandbox with it); a new one answers.
    let data = env.data.path().display().to_string();
    assert_eq!(ok(&skill, "echo", json!({"text": "next"})).await["text"], "next");
    assert!(processes_with(&data).len() <= 2, "one server (bwrap and its monitor) at most");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_output_cap() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "[limits]\noutput = \"1KiB\"\n").await;
    let (seen, cx) = crate::recording_progress();
    let out = call_with(&skill, "count", json!({"steps": 3}), cx).await.unwrap();
    assert_eq!(out.value["steps"], 3);
    let seen = seen.lock().unwrap().clone();
    // Reports arrive in order (a stale one is dropped), each out of 3.
    let done: Vec<u64> = seen.iter().map(|p| p.done).collect();
    assert!(!done.is_empty() && done.windows(2).all(|w| w[0] < w[1]) && done.iter().all(|&d| (1..=3).contains(&d)), "{seen:?}");
    assert!(seen.iter().all(|p| p.total == Some(3) && p.message.as_deref() == Some(&format!("step {}", p.done))), "{seen:?}");

    // Attack: a server floods its caller with progress notifications. Expected: at most
    // one report per interval passes, plus the final one, in order.
    let (flood, cx) = crate::recording_progress();
    let started = std::time::Instant::now();
    let out = call_with(&skill, "count", json!({"steps": 3000}), cx).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(out.value["steps"], 3000);
    let flood = flood.lock().unwrap().clone();
    let bound = (elapsed.as_millis() / Progress::INTERVAL.as_millis()) as usize + 2;
    assert!(flood.len() <= bound, "{} reports in {elapsed:?} (at most {bound})", flood.len());
    assert!(flood.windows(2).all(|w| w[0].done < w[1].done), "{flood:?}");
    // (rmcp may handle the final notification after the response, so it is not awaited.)
    assert!(!flood.is_empty());

    let err = call(&skill, "big", json!({"size": 4000})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::OutputLimit { limit: 1024, .. }, .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_skill_kills_its_server() {
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", "").await;
    ok(&skill, "echo", json!({"text": "start"})).await;
    let marker = env.data.path().display().to_string();
    assert!(!processes_with(&marker).is_empty(), "the server runs");
    drop(skill);
    // The host keeps its own copy of loaded skills: a fresh host drops it for good.
    drop(env.host);
    assert_eq!(wait_gone(&marker).await, Vec::<u32>::new(), "the server outlived its skill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_servers_stop_and_start_again_on_the_next_call() {
    let env = SandboxHost::new();
    let dir = python::install("sandbox-probe", env.skills.path(), "");
    std::fs::write(
        dir.join("skill.toml"),
        std::fs::read_to_string(dir.join("skill.toml")).unwrap().replace("[server]\n", "[server]\nidle_timeout = \"300ms\"\n"),
    )
    .unwrap();
    let source = skillhost_package::read_source(&dir, &Default::default()).unwrap();
    let grant = skillhost::skill::Grant::new(&source.manifest, env.host.policy(), &skillhost::DirectSkill::data_key(&source.manifest.name))
        .unwrap();
    let runtime = env.host.sandbox().unwrap();
    let skill = runtime.load_server(&source, grant).await.unwrap();
    assert!(!skill.running().await, "lazy: the load-time run is stopped");
    use skillhost::Skill;
    skill.call("echo", json!({"text": "a"}), CallContext::default()).await.unwrap();
    let mut stopped = false;
    for _ in 0..200 {
        if !skill.running().await {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "the idle server never stopped");
    let out = skill.call("echo", json!({"text": "b"}), CallContext::default()).await.unwrap();
    assert_eq!(out.value["text"], "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_from_pypi_is_a_skill() {
    let env = SandboxHost::new();
    let skill = env.load("time-server", "").await;
    let names: Vec<&str> = skill.skill.tools().iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"get_current_time") && names.contains(&"convert_time"), "{names:?}");
    let out =
        ok(&skill, "convert_time", json!({"source_timezone": "America/New_York", "time": "09:00", "target_timezone": "Asia/Tokyo"})).await;
    assert_eq!(out["target"]["timezone"], "Asia/Tokyo", "{out}");
    let target = out["target"]["datetime"].as_str().unwrap();
    assert!(target.ends_with("+09:00") && (target.contains("T22:00:00") || target.contains("T23:00:00")), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_goes_through_the_egress_proxy_only() {
    let server = TestServer::start();
    let port = server.port();
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;

    let allowed = probe(ok(&skill, "fetch", json!({"url": format!("http://127.0.0.1:{port}/ok?token=abc")})).await)
        .expect("an allowed request works");
    assert_eq!(allowed["status"], 200, "{allowed}");
    assert_eq!(server.received().len(), 1);

    let denied = probe(ok(&skill, "fetch", json!({"url": format!("http://127.0.0.2:{port}/secret")})).await);
    assert!(denied.as_ref().map_or(true, |r| r["status"] != 200), "a request to a host not allowed went through: {denied:?}");
    // Straight to the host's loopback, around the proxy: no route.
    let direct = probe(ok(&skill, "connect", json!({"host": "127.0.0.1", "port": port})).await);
    assert!(direct.is_err(), "{direct:?}");
    assert_eq!(server.received().len(), 1, "nothing else reached the server");

    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = env.host.audit().query(&Default::default()).unwrap();
        if rows.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let of = |url: &str| rows.iter().find(|r| r.url.starts_with(url)).unwrap_or_else(|| panic!("no audit row for {url}: {rows:?}"));
    let ok_row = of(&format!("http://127.0.0.1:{port}/ok"));
    assert_eq!((ok_row.skill.as_str(), &ok_row.outcome), ("sandbox-probe", &skillhost::net::EgressOutcome::Status(200)));
    assert!(!ok_row.url.contains("token"), "no query in the audit log");
    let refused = of(&format!("http://127.0.0.2:{port}/secret"));
    assert!(matches!(refused.outcome, skillhost::net::EgressOutcome::Refused(_)), "{refused:?}");
}

/// A server whose request the egress proxy refused tells the agent only what its own
/// code makes of the `403` ("status code 403"). The host's note saying which rule to add
/// reaches the call's error, worded as for a wasm skill (`host refused: …`), and a
/// successful answer gets it as one more text block; the audit rows name the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_explained_to_the_agent_and_audited_with_its_tool() {
    let server = TestServer::start();
    let port = server.port();
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let rule = format!("to allow it, add \"http://127.0.0.2:{port}\" to `[network] allow`");

    let err = call(&skill, "fetch_text", json!({"url": format!("http://127.0.0.2:{port}/secret")})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Failed { .. }, .. }), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("status code 403") && err.contains("(host refused: ") && err.contains(&rule), "{err}");

    let out = call(&skill, "fetch_status", json!({"url": format!("http://127.0.0.2:{port}/other")})).await.expect("the tool answers");
    assert_eq!(out.value, json!(403));
    let blocks = out.content.expect("a server skill's own content blocks");
    let note = blocks.last().and_then(|b| b["text"].as_str()).unwrap_or_default();
    assert!(note.starts_with("(host refused: ") && note.contains(&rule), "{blocks:?}");
    let out = call(&skill, "fetch_status", json!({"url": format!("http://127.0.0.1:{port}/ok")})).await.expect("the tool answers");
    assert_eq!(out.content.as_deref(), Some(&[json!({"type": "text", "text": "200"})][..]), "an earlier call's refusal is not this one's");

    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = env.host.audit().query(&Default::default()).unwrap();
        if rows.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut tools: Vec<(String, String)> = rows.iter().map(|r| (r.url.clone(), r.tool.clone())).collect();
    tools.sort();
    let row = |path: &str, tool: &str| (format!("http://{path}"), tool.to_owned());
    let expected = [
        row(&format!("127.0.0.1:{port}/ok"), "fetch_status"),
        row(&format!("127.0.0.2:{port}/other"), "fetch_status"),
        row(&format!("127.0.0.2:{port}/secret"), "fetch_text"),
    ];
    assert_eq!(tools, expected);
}

/// Attack: a sandboxed server skips its HTTP library and speaks to the egress proxy
/// directly: CONNECT to another port of an allowed host, CONNECT (a TLS tunnel) where
/// only `http` is allowed, userinfo, an allowed URL carrying a `Host` header that names
/// another server, a second request pipelined behind an allowed one, origin-form and
/// garbage.
/// Expected: 403 naming the rule for what is checked and not allowed, 400 for what is
/// not a proxy request; the allowed request is sent with the checked `Host`.
/// Checked: the canary listener received nothing; the allowed server saw exactly the
/// two allowed requests, each with its own authority as `Host`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_requests_to_the_proxy_cannot_reach_around_the_allowlist() {
    let server = TestServer::start();
    let canary = TestServer::start();
    let (port, other) = (server.port(), canary.port());
    let env = SandboxHost::new();
    let skill = env.load("sandbox-probe", &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let send = |request: String| {
        let skill = skill.clone();
        async move { probe(ok(&skill, "proxy_raw", json!({"request": request})).await).expect("the proxy answers").as_str().unwrap().to_owned() }
    };
    let close = "Connection: close\r\n\r\n";
    let https_rule = format!("https://127.0.0.1:{port}");

    for (request, status, says) in [
        (
            format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n{close}"),
            "403",
            "not in the skill's network allowlist",
        ),
        (format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{close}"), "403", https_rule.as_str()),
        (format!("GET http://127.0.0.1:{other}/ok HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n{close}"), "403", "to allow it"),
        (format!("GET http://x@127.0.0.1:{port}/ok HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{close}"), "403", "userinfo"),
        (format!("GET /ok HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n{close}"), "400", "not a proxy request"),
        ("\u{0}\u{1}NOT HTTP AT ALL\r\n\r\n".to_owned(), "400", ""),
    ] {
        let answer = send(request.clone()).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{request:?} got {answer:?}");
        assert!(answer.contains(says), "{request:?}: the answer should say {says:?}: {answer:?}");
    }

    // An allowed URL with a Host header naming the canary: sent, with the checked Host.
    let answer = send(format!("GET http://127.0.0.1:{port}/ok HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n{close}")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    // A refused request pipelined behind an allowed one on the same connection.
    let answer = send(format!(
        "GET http://127.0.0.1:{port}/ok HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nGET http://127.0.0.1:{other}/ok HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n{close}"
    ))
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(answer.contains("HTTP/1.1 403"), "the pipelined request is checked on its own: {answer:?}");

    assert!(canary.received().is_empty(), "the canary received {:?}", canary.received());
    let received = server.received();
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(received.iter().all(|r| r.header("host") == Some(format!("127.0.0.1:{port}").as_str())), "{received:?}");
    assert_eq!(ok(&skill, "echo", json!({"text": "alive"})).await["text"], "alive");
}

/// Attack: a stdio MCP server (hand-written, no SDK to keep it honest) declares
/// `{"count": integer}` as its tool's output schema, then answers with the wrong type, a
/// missing field, an array, or text that is not JSON.
/// Expected: `BadOutput` naming the skill, the tool and the rule broken: the check is the
/// one wasm outputs go through (`OutputSchemas`), applied before anything leaves the
/// runtime.
/// Checked: the honest answer and the server's camelCase tool still work afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_breaks_its_declared_output_schema_is_refused() {
    let env = SandboxHost::new();
    let skill = env.load("raw-server", "").await;
    assert_eq!(ok(&skill, "count", json!({"mode": "honest"})).await, json!({"count": 3}));
    for (mode, says) in [
        ("wrong_type", "output/count does not match the declared output schema: \"many\" is not of type \"integer\""),
        ("missing_field", "\"count\" is a required property"),
        ("not_an_object", "the output does not match the declared output schema"),
        ("text_not_json", "the output does not match the declared output schema"),
    ] {
        let err = call(&skill, "count", json!({"mode": mode})).await.unwrap_err();
        assert!(matches!(err, CallError { failure: CallFailure::BadOutput { .. }, .. }), "{mode}: {err:?}");
        let err = err.to_string();
        assert!(err.starts_with("skill `raw-server` tool `count` returned output that breaks its contract"), "{mode}: {err}");
        assert!(err.contains(says), "{mode}: {err}");
    }
    assert_eq!(ok(&skill, "count", json!({"mode": "honest"})).await, json!({"count": 3}));
    assert_eq!(ok(&skill, "addNumbers", json!({"a": 2, "b": 3})).await, json!(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_secrets_arrive_as_environment_variables_only() {
    let env = SandboxHost::new();
    env.host.secrets().set("probe-key", "s3cret-value").unwrap();
    let skill = env.load("sandbox-probe", "[[server.secrets]]\nname = \"probe-key\"\nenv = \"PROBE_KEY\"\n").await;
    let out = ok(&skill, "environment", json!({})).await;
    assert_eq!(out["env"]["PROBE_KEY"], "s3cret-value");
    assert_eq!(out["env"].as_object().unwrap().values().filter(|v| *v == "s3cret-value").count(), 1);
}

/// The bundled site-check skill, its `[network]` pointed at `port` on the loopback.
fn site_check(parent: &Path, port: u16) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills/site-check");
    let dir = parent.join("site-check");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["server.py", "test_server.py", "SKILL.md", "skill.toml"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
    let (head, _) = manifest.split_once("[network]").expect("site-check has a [network] section");
    std::fs::write(dir.join("skill.toml"), format!("{head}[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_site_check_skill_checks_a_local_server() {
    let server = TestServer::start();
    let env = SandboxHost::new();
    let dir = site_check(env.skills.path(), server.port());
    let skill = tokio::time::timeout(HANG_GUARD, env.host.load_path_granted(&dir)).await.unwrap().unwrap();
    let out = ok(&skill, "check_site", json!({"url": format!("http://127.0.0.1:{}/ok", server.port())})).await;
    assert_eq!((out["up"].clone(), out["status"].clone()), (json!(true), json!(200)), "{out}");
    let out = ok(&skill, "check_site", json!({"url": "https://example.org/"})).await;
    assert_eq!(out["up"], false, "a host not allowed is refused by the proxy: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_tests_run_in_a_throwaway_sandbox() {
    let env = SandboxHost::new();
    let host = &env.host;
    let test = async |dir: std::path::PathBuf| {
        let source = skillhost_package::read_source(&dir, &Default::default()).unwrap();
        let grant = skillhost::skill::Grant::new(&source.manifest, host.policy(), &skillhost::DirectSkill::data_key(&source.manifest.name))
            .unwrap();
        host.sandbox().unwrap().test_skill(&source, grant, Duration::from_secs(30)).await
    };
    let dir = site_check(env.skills.path(), 9);
    let report = test(dir.clone()).await;
    assert!(report.passed, "{report:?}");
    assert_eq!(report.tests.as_ref().unwrap().exit_code, Some(0));
    assert!(report.tests.as_ref().unwrap().output.contains("3 passed"), "{report:?}");
    assert_eq!(report.tools, ["check_site", "broken_links"]);

    // A failing test fails the report, with pytest's output; the sandbox is read-only.
    let tests = std::fs::read_to_string(dir.join("test_server.py")).unwrap();
    std::fs::write(dir.join("test_server.py"), format!("{tests}\n\ndef test_cannot_write_the_skill():\n    open('pwned', 'w')\n")).unwrap();
    let report = test(dir).await;
    assert!(!report.passed, "{report:?}");
    let output = &report.tests.as_ref().unwrap().output;
    assert!(output.contains("Read-only file system") && output.contains("1 failed"), "{output}");
}
