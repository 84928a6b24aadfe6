//! Process limits that bind a sandboxed server as a whole, with real bubblewrap and real
//! Python (the `tests/python/limits-probe` fixture): a root host runs the sandbox as an
//! unprivileged uid, the server's process tree shares one cgroup (resident memory,
//! processes) that dies with the call's deadline or the server's stop, and a seccomp
//! filter refuses the kernel's riskier system calls with `EPERM`.
//!
//! Run as root (CI), every layer is asserted. Run as an unprivileged user (scripts/test.sh
//! does both), the host cannot create cgroups: those tests assert that the runtime reports
//! the layer unavailable with what to do, and say so on stderr.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fixtures::python;
use serde_json::{Value, json};
use skillhost::{CallContext, CallError, DirectSkill, Host, runtime::BwrapConfig, skill::CallFailure};
use tempfile::TempDir;

use crate::{HANG_GUARD, call, call_with, ok, processes_with, wait_gone};

/// A host with the sandbox runtime on the test venv, over fresh directories that the
/// sandbox's uid can pass through (as a deployment's data dir under /var/lib would be).
struct LimitsHost {
    host: Host,
    skills: TempDir,
    _data: TempDir,
}

impl LimitsHost {
    fn new(configure: impl FnOnce(&mut BwrapConfig)) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let data = tempfile::tempdir().unwrap();
        std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let skills = tempfile::tempdir().unwrap();
        let mut config = python::sandbox_config(data.path());
        config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
        configure(&mut config);
        let host = Host::builder().data_dir(data.path()).cache_dir(data.path().join("compiled")).sandbox_config(config).build().unwrap();
        assert!(host.sandbox().is_ok(), "no sandbox runtime: {:?}; run scripts/setup.sh", host.sandbox().err());
        Self { host, skills, _data: data }
    }

    /// Load the limits-probe fixture as skill `name`, with `extra` appended to its
    /// skill.toml.
    async fn load(&self, name: &str, extra: &str) -> DirectSkill {
        let dir = python::install("limits-probe", self.skills.path(), extra);
        let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
        std::fs::write(dir.join("skill.toml"), manifest.replace("name = \"limits-probe\"", &format!("name = \"{name}\""))).unwrap();
        let renamed = self.skills.path().join(name);
        std::fs::rename(&dir, &renamed).unwrap();
        tokio::time::timeout(HANG_GUARD, self.host.load_path_granted(&renamed))
            .await
            .expect("load hung")
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The runtime's isolation layer `name`: (available, detail, fix).
    fn layer(&self, name: &str) -> (bool, String, Option<String>) {
        let layers = self.host.sandbox().unwrap().isolation();
        let layer = layers.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no `{name}` layer in {layers:?}"));
        (layer.available, layer.detail.clone(), layer.fix.clone())
    }

    /// Whether cgroups bind here; when not, checks that the runtime says so with what to
    /// do, and says on stderr what the test skips.
    fn cgroups_or_skip(&self, test: &str) -> bool {
        let (available, detail, fix) = self.layer("cgroup");
        if !available {
            assert!(
                fix.as_deref().is_some_and(|f| f.contains("Delegate=yes")),
                "an unavailable cgroup layer says what to do: {detail} / {fix:?}"
            );
            eprintln!("SKIPPED {test}: cgroups unavailable to this user ({detail}); asserted the runtime reports it");
        }
        available
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Wait (up to 5 s) until `count` processes' command lines contain `needle` (a forked child
/// shows its marker only once it has exec'd); those found.
async fn wait_running(needle: &str, count: usize) -> Vec<u32> {
    for _ in 0..50 {
        if processes_with(needle).len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    processes_with(needle)
}

/// cgroup directories (in any tree) whose name starts with `prefix`.
fn cgroups_named(prefix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.filter_map(Result::ok) {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                out.push(entry.path());
            } else if depth > 0 {
                walk(&entry.path(), prefix, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), prefix, 5, &mut out);
    out
}

fn timeout(d: Duration) -> CallContext {
    CallContext { timeout: Some(d), ..CallContext::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_host_runs_the_sandbox_as_an_unprivileged_uid() {
    let env = LimitsHost::new(|_| {});
    let skill = env.load("uid-probe", "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n").await;
    let identity = ok(&skill, "identity", json!({})).await;
    assert_eq!(identity["uid"], 65534, "{identity}");
    // (The uid map proves nothing: bwrap nests a second user namespace, so the map seen
    // inside reads `65534 0 1` whoever the host is. Root's files are the proof.)
    if !is_root() {
        eprintln!("SKIPPED a_root_host_runs_the_sandbox_as_an_unprivileged_uid (root-owned files): the host is not root");
        return;
    }
    let (available, detail, fix) = env.layer("uid drop");
    assert!(available, "no uid drop for a root host: {detail} ({fix:?})");

    // Root's files handed to it through a bind stay root's.
    let data = env.host.policy().data_dir(&skillhost::DirectSkill::data_key(&skill.source.manifest.name));
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(data.join("root-owned"), "root's").unwrap();
    std::fs::set_permissions(data.join("root-owned"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(data.join("secret"), "s3cret").unwrap();
    std::fs::set_permissions(data.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let written = ok(&skill, "write_file", json!({"path": "/data/root-owned", "text": "pwned"})).await;
    assert_eq!(written["ok"], false, "a root-owned 0644 file was writable: {written}");
    assert_eq!(std::fs::read_to_string(data.join("root-owned")).unwrap(), "root's");
    let read = ok(&skill, "read_file", json!({"path": "/data/secret"})).await;
    assert_eq!(read["ok"], false, "a root-only 0600 file was readable: {read}");
    // What it was granted still works.
    let own = ok(&skill, "write_file", json!({"path": "/data/mine", "text": "x"})).await;
    assert_eq!(own["ok"], true, "its granted data dir is writable: {own}");
    assert_eq!(std::fs::read_to_string(data.join("mine")).unwrap(), "x");
}

/// A root host whose sandbox uid cannot reach a path every sandbox binds (here its work
/// dir, under a 0700 directory, as a venv made from a Python under /root/.pyenv would be)
/// has no uid drop, and its servers would run as host root: their files root's. They are
/// refused instead, with the layer's name and the fix; with the layer named in
/// `allow_weaker` they run (as root, which the runtime then reports for every server
/// skill, for `show` and the approval request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_host_that_cannot_drop_the_uid_refuses_to_start_servers() {
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        eprintln!("SKIPPED a_root_host_that_cannot_drop_the_uid_refuses_to_start_servers: only a root host drops to another uid");
        return;
    }
    let locked = tempfile::tempdir().unwrap();
    std::fs::set_permissions(locked.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let work_dir = locked.path().join("sandbox");
    let rw = "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n";

    let env = LimitsHost::new(|c| c.work_dir = work_dir.clone());
    let (available, detail, _) = env.layer("uid drop");
    assert!(!available, "uid 65534 reached a 0700 dir of root's: {detail}");
    let dir = python::install("limits-probe", env.skills.path(), rw);
    let loaded = tokio::time::timeout(HANG_GUARD, env.host.load_path_granted(&dir)).await.expect("load hung");
    let refused = match loaded {
        Ok(skill) => {
            let written = ok(&skill, "write_file", json!({"path": "/data/whose", "text": "x"})).await;
            let data = env.host.policy().data_dir(&DirectSkill::data_key(&skill.source.manifest.name));
            let owner = std::fs::metadata(data.join("whose")).map(|m| m.uid());
            panic!("a server without its uid drop started ({written}); the file it wrote belongs to uid {owner:?}");
        }
        Err(e) => e.to_string(),
    };
    for needle in ["limits-probe", "`uid drop`", "allow_weaker = [\"uid drop\"]", "[sandbox]"] {
        assert!(refused.contains(needle), "{needle:?} missing from: {refused}");
    }
    assert!(env.host.sandbox().unwrap().sandbox_without().is_err());

    let env = LimitsHost::new(|c| {
        c.work_dir = work_dir.clone();
        c.allow_weaker = vec!["uid drop".into()];
    });
    assert_eq!(env.host.sandbox().unwrap().sandbox_without().unwrap(), ["uid drop (opted out in config)"]);
    let skill = env.load("weaker-probe", rw).await;
    let written = ok(&skill, "write_file", json!({"path": "/data/whose", "text": "x"})).await;
    assert_eq!(written["ok"], true, "{written}");
    let data = env.host.policy().data_dir(&DirectSkill::data_key(&skill.source.manifest.name));
    assert_eq!(std::fs::metadata(data.join("whose")).unwrap().uid(), 0, "opted out, the server runs as host root, as accepted");

    let other = tempfile::tempdir().unwrap();
    let unknown = Host::builder()
        .data_dir(other.path())
        .sandbox_config({
            let mut c = python::sandbox_config(other.path());
            c.allow_weaker = vec!["uid-drop".into()];
            c
        })
        .build()
        .unwrap();
    let Err(error) = unknown.sandbox() else { panic!("an unknown layer name was accepted") };
    let error = error.to_string();
    assert!(error.contains("`uid-drop`") && error.contains("\"uid drop\""), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_tree_shares_one_memory_limit_and_dies_with_the_call() {
    let env = LimitsHost::new(|_| {});
    if !env.cgroups_or_skip("a_server_tree_shares_one_memory_limit_and_dies_with_the_call") {
        return;
    }
    let skill = env.load("tree-probe", "[limits]\nmemory = \"256MiB\"\ntimeout = \"30s\"\n").await;
    let marker = format!("tree-holder-{}", std::process::id());
    // Three children of 200 MiB each: the tree's 600 MiB is past the 256 MiB limit.
    let result = call(&skill, "fork_hold", json!({"children": 3, "mib": 200, "seconds": 20, "marker": marker})).await;
    assert!(matches!(&result, Err(CallError { failure: CallFailure::MemoryLimit { limit, .. }, .. }) if *limit == 256 << 20), "{result:?}");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("tree-probe") && message.contains("[limits] memory"), "{message}");
    assert_eq!(wait_gone(&marker).await, Vec::<u32>::new(), "children of the server outlived the call");

    // Children that outlive the server's own session are killed at the deadline too.
    let marker = format!("tree-sleeper-{}", std::process::id());
    let result =
        call_with(&skill, "fork_hold", json!({"children": 3, "mib": 8, "seconds": 600, "marker": marker}), timeout(Duration::from_secs(3)))
            .await;
    assert!(matches!(result, Err(CallError { failure: CallFailure::Timeout { .. }, .. })), "{result:?}");
    assert_eq!(wait_gone(&marker).await, Vec::<u32>::new(), "children of the server outlived the deadline");

    // And at the stop: no process, no cgroup left.
    let marker = format!("tree-stopped-{}", std::process::id());
    let out = ok(&skill, "fork_hold", json!({"children": 2, "mib": 8, "seconds": 600, "marker": marker, "wait": false})).await;
    assert_eq!(out["pids"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(wait_running(&marker, 2).await.len(), 2, "the children run");
    // The host keeps its own copy of loaded skills: dropping both stops the server.
    drop(skill);
    drop(env);
    assert_eq!(wait_gone(&marker).await, Vec::<u32>::new(), "children of the server outlived its stop");
    let prefix = format!("tree-probe-{}-", std::process::id());
    for _ in 0..50 {
        if cgroups_named(&prefix).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cgroups_named(&prefix), Vec::<PathBuf>::new(), "the server's cgroups were not removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_bounded_by_the_process_limit() {
    let env = LimitsHost::new(|config| config.max_processes = 64);
    let skill = env.load("bomb-probe", "[limits]\ntimeout = \"30s\"\n").await;
    let out = ok(&skill, "fork_bomb", json!({"limit": 400})).await;
    let forked = out["forked"].as_u64().unwrap();
    assert!(forked < 64, "a fork bomb started {forked} processes under a limit of 64: {out}");
    assert_eq!(out["error"], "EAGAIN", "{out}");
    // The host is fine and the server still answers.
    assert_eq!(ok(&skill, "identity", json!({})).await["uid"], 65534);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seccomp_filter_refuses_kernel_attack_surface_with_eperm() {
    let env = LimitsHost::new(|_| {});
    let (available, detail, fix) = env.layer("seccomp");
    assert!(available, "seccomp unavailable: {detail} ({fix:?})");
    let skill = env.load("seccomp-probe", "").await;
    let out = ok(&skill, "syscalls", json!({})).await;
    let results = out.as_object().unwrap();
    assert!(results.len() >= 9, "{out}");
    let allowed: Vec<(&String, &Value)> = results.iter().filter(|(_, r)| *r != "EPERM").collect();
    assert!(allowed.is_empty(), "system calls not refused with EPERM: {allowed:?}");
    // Ordinary work still runs: Python threads (clone3 falls back to clone) and forks.
    assert_eq!(ok(&skill, "fork_bomb", json!({"limit": 2})).await["forked"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_reports_every_isolation_layer() {
    let env = LimitsHost::new(|_| {});
    let layers = env.host.sandbox().unwrap().isolation();
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["bwrap", "user namespaces", "uid drop", "cgroup", "seccomp"]);
    for layer in layers {
        assert!(layer.available || layer.fix.is_some(), "{} is unavailable with no fix: {}", layer.name, layer.detail);
    }
    if is_root() {
        for name in ["bwrap", "user namespaces", "uid drop", "cgroup", "seccomp"] {
            let (available, detail, fix) = env.layer(name);
            assert!(available, "{name} unavailable to a root host: {detail} ({fix:?})");
        }
    }
}
