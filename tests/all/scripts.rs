//! Agent Skills that run: a SKILL.md skill's scripts, written in the test (Python, shell,
//! node), approved by a "human" through the registry, run in the jail with
//! `Registry::run` (what `skillhost run` and `skill_run` call), with real bubblewrap,
//! cgroups and seccomp. Then the attacks a script can try, each refused with an error
//! naming the skill, what was refused and what to change, the host serving on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost::{Host, Registry, RegistryConfig, RegistryError, TrustState, run::RunError, run::RunInput, run::RunOutput, run::RunPolicy};
use tempfile::TempDir;

use crate::HANG_GUARD;

/// A host with the sandbox runtime and a workspace layer of SKILL.md skills.
struct Env {
    host: Host,
    data: TempDir,
    skills: TempDir,
}

impl Env {
    fn new() -> Self {
        Self::with(|_| {})
    }

    /// An environment whose sandbox configuration `adjust` changes.
    fn with(adjust: impl FnOnce(&mut skillhost::runtime::BwrapConfig)) -> Self {
        let data = tempfile::tempdir().unwrap();
        Self { host: crate::sandbox_host_with(data.path(), adjust), data, skills: tempfile::tempdir().unwrap() }
    }

    /// A skill `name` with SKILL.md and `files` (path, contents).
    fn skill(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.skills.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let md = format!("---\nname: {name}\ndescription: A test skill with scripts. Use it in tests.\n---\nRun its scripts.\n");
        std::fs::write(dir.join("SKILL.md"), md).unwrap();
        for (path, text) in files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        dir
    }

    async fn open(&self) -> Arc<Registry> {
        let mut config = RegistryConfig::new(self.data.path());
        config.workspace = Some(self.skills.path().to_owned());
        config.watch = false;
        tokio::time::timeout(HANG_GUARD, self.host.open_registry(config)).await.expect("open hung").expect("registry opens")
    }
}

/// Approve `name` as a human would after reading its request.
async fn approve(registry: &Registry, name: &str) {
    let request = registry.approval_request(name).unwrap();
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
}

async fn run(registry: &Registry, skill: &str, command: &[&str], inputs: Vec<RunInput>) -> Result<RunOutput, RegistryError> {
    let command = command.iter().map(|w| (*w).to_owned()).collect();
    tokio::time::timeout(HANG_GUARD, registry.run(skill, command, inputs, Default::default()))
        .await
        .unwrap_or_else(|_| panic!("run of {skill} did not return within {HANG_GUARD:?}: the host hung"))
}

fn stdout(out: &RunOutput) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The refusal of a run stopped at a limit: its text, checked to name the skill and a fix.
fn limit(result: Result<RunOutput, RegistryError>, skill: &str) -> String {
    match result {
        Err(RegistryError::Run(error @ RunError::Limit { .. })) => {
            let text = error.to_string();
            assert!(text.contains(&format!("`{skill}`")), "names the skill: {text}");
            assert!(text.contains("skillhost policy") || text.contains("limit"), "says what to change: {text}");
            text
        }
        other => panic!("expected a limit refusal, got {other:?}"),
    }
}

/// An HTTP server on 127.0.0.1 that answers one request with `body`: its port, and the
/// request's head once answered.
async fn one_request_server(body: &'static str) -> (u16, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        stream.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, server)
}

/// A script writing a 1×1 PNG into the workspace.
const DOT_PNG: &str = "import zlib, struct\ndef chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\nraw = b'\\x00\\xff\\x00\\x00'\nopen('dot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\n";

const TRANSFORM: &str = r#"
import sys, json, os
src, dst = sys.argv[1], sys.argv[2]
rows = [line.split(",") for line in open(src).read().splitlines()]
total = sum(int(r[1]) for r in rows)
os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
open(dst, "w").write(json.dumps({"rows": len(rows), "total": total}))
print("cwd", os.getcwd(), "script", __file__)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn scripts_in_python_shell_and_node_transform_inputs_into_files() {
    let env = Env::new();
    env.skill(
        "report",
        &[
            ("scripts/sum.py", TRANSFORM),
            ("scripts/count.sh", "#!/bin/sh\nwc -l < \"$1\" > lines.txt\necho counted\n"),
            ("scripts/upper.mjs", "import fs from 'node:fs';\nconst t = fs.readFileSync(process.argv[2], 'utf8');\nfs.writeFileSync('upper.txt', t.toUpperCase());\nconsole.log('node', process.version.startsWith('v'));\n"),
            ("references/format.md", "# rows\nname,value\n"),
            ("scripts/dot.py", DOT_PNG),
        ],
    );
    let registry = env.open().await;
    let entry = registry.entry("report").unwrap();
    assert_eq!(entry.state, TrustState::PendingReview, "scripts are code: they wait for a human");
    let request = registry.approval_request("report").unwrap();
    for script in ["scripts/sum.py", "scripts/count.sh", "scripts/upper.mjs"] {
        assert!(
            request.requests.iter().any(|l| l.contains(script) && l.contains("sha256")),
            "the request lists {script}: {:?}",
            request.requests
        );
    }
    approve(&registry, "report").await;

    let csv = RunInput::file("in/sales.csv", b"apples,3\npears,4\n".to_vec());
    let out = run(&registry, "report", &["python", "scripts/sum.py", "in/sales.csv", "out/summary.json"], vec![csv.clone()]).await.unwrap();
    assert_eq!(out.exit_code, Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).contains("cwd /workspace script /skill/scripts/sum.py"), "{}", stdout(&out));
    let summary = out.files.iter().find(|f| f.path == "out/summary.json").expect("the output file comes back");
    assert_eq!(summary.bytes, br#"{"rows": 2, "total": 7}"#);
    assert_eq!(summary.size, summary.bytes.len() as u64);
    assert_eq!(summary.sha256, hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&summary.bytes)));
    assert_eq!(out.unchanged_inputs, ["in/sales.csv"], "an input left as it came is listed apart");
    assert!(!out.files.iter().any(|f| f.path == "in/sales.csv"), "not among what the run wrote");

    let out = run(&registry, "report", &["sh", "scripts/count.sh", "sales.csv"], vec![RunInput { path: "sales.csv".into(), ..csv }])
        .await
        .unwrap();
    assert_eq!(stdout(&out).trim(), "counted");
    assert_eq!(out.files.iter().find(|f| f.path == "lines.txt").map(|f| f.bytes.clone()), Some(b"2\n".to_vec()));

    let out = run(&registry, "report", &["node", "scripts/upper.mjs", "references/format.md"], Vec::new()).await.unwrap();
    assert_eq!(out.exit_code, Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.files.iter().find(|f| f.path == "upper.txt").map(|f| f.bytes.clone()), Some(b"# ROWS\nNAME,VALUE\n".to_vec()));

    let out = run(&registry, "report", &["python", "scripts/dot.py"], Vec::new()).await.unwrap();
    let image = out.files.iter().find(|f| f.path == "dot.png").expect("the image comes back");
    assert!(image.bytes.starts_with(b"\x89PNG"), "as written");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_reaches_an_allowed_loopback_host_with_a_secret_it_never_sees() {
    let env = Env::new();
    let (port, server) = one_request_server("ok").await;
    let fetch = format!(
        "import os, urllib.request, urllib.error\nprint(urllib.request.urlopen('http://127.0.0.1:{port}/data').read().decode())\nprint('env holds secret:', any('s3cr3t' in v for v in os.environ.values()))\ntry:\n    urllib.request.urlopen('http://127.0.0.1:{}/other')\n    print('undeclared host reached')\nexcept urllib.error.HTTPError as e:\n    print('undeclared host refused', e.code)\n",
        port + 1
    );
    env.skill("fetcher", &[("scripts/fetch.py", &fetch)]);
    env.host.secrets().set("api-token", "s3cr3t-value-77").unwrap();
    let registry = env.open().await;
    let origin = format!("http://127.0.0.1:{port}");
    let policy = RunPolicy::parse(
        &format!("[network]\nallow = [\"{origin}\"]\n[[secrets]]\nname = \"api-token\"\nheader = \"Authorization\"\nformat = \"Bearer {{}}\"\nhosts = [\"{origin}\"]\n"),
        Path::new("policy"),
    )
    .unwrap();
    registry.set_policy("fetcher", &policy).await.unwrap();
    let request = registry.approval_request("fetcher").unwrap();
    assert!(request.requests.iter().any(|l| l.contains("secret `api-token`")), "the policy is shown: {:?}", request.requests);
    assert!(request.requests.iter().any(|l| l.contains(&format!("network allow: {origin}"))));
    approve(&registry, "fetcher").await;
    let out = run(&registry, "fetcher", &["python", "scripts/fetch.py"], Vec::new()).await.unwrap();
    assert_eq!(
        stdout(&out),
        "ok\nenv holds secret: False\nundeclared host refused 403\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = tokio::time::timeout(HANG_GUARD, server).await.unwrap().unwrap();
    assert!(head.to_ascii_lowercase().contains("authorization: bearer s3cr3t-value-77"), "the proxy added it: {head}");

    // A changed policy is a change: back to review before anything runs.
    let wider = RunPolicy::parse(&format!("[network]\nallow = [\"{origin}\", \"http://127.0.0.1:1\"]\n"), Path::new("policy")).unwrap();
    registry.set_policy("fetcher", &wider).await.unwrap();
    assert_eq!(registry.entry("fetcher").unwrap().state, TrustState::NeedsReapproval);
    let refused = run(&registry, "fetcher", &["python", "scripts/fetch.py"], Vec::new()).await.unwrap_err();
    assert!(matches!(refused, RegistryError::NotCallable { .. }), "{refused}");
}

const PROBE: &str = r#"
import os, sys, socket
def attempt(what, f):
    try:
        f()
        print(what, "ALLOWED")
    except Exception as e:
        print(what, "denied", type(e).__name__)
for path in sys.argv[2:]:
    attempt("read " + path, lambda: open(path).read())
attempt("write /skill/scripts/evil.py", lambda: open("/skill/scripts/evil.py", "w").write("x"))
attempt("write /usr/evil", lambda: open("/usr/evil", "w").write("x"))
attempt("write /etc/evil", lambda: open("/etc/evil", "w").write("x"))
def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.close()
attempt("connect host loopback", lambda: connect(int(sys.argv[1])))
import urllib.request
attempt("fetch through no proxy", lambda: urllib.request.urlopen("http://example.com/", timeout=2).read())
os.symlink("/etc/passwd", "leak-passwd")
os.symlink("/skill", "leak-skill")
os.mkdir("d")
os.symlink("/proc/1/environ", "d/leak-env")
print("home", os.environ.get("HOME"), "user", os.getuid())
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_script_cannot_reach_the_host_other_skills_or_the_network_and_its_links_are_never_followed() {
    let env = Env::new();
    // What a script must never read: the host's home, a secret file, another skill's data.
    let outside = tempfile::tempdir().unwrap();
    let secret_file = outside.path().join("secret.txt");
    std::fs::write(&secret_file, "ROOT-ONLY").unwrap();
    let other_data = env.data.path().join("skills").join("notes");
    std::fs::create_dir_all(&other_data).unwrap();
    std::fs::write(other_data.join("diary.txt"), "private").unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = env.skill("prober", &[("scripts/probe.py", PROBE)]);
    let registry = env.open().await;

    let refused = run(&registry, "prober", &["python", "scripts/probe.py"], Vec::new()).await.unwrap_err();
    assert!(matches!(refused, RegistryError::NotCallable { state: TrustState::PendingReview, .. }), "runs before approval: {refused}");
    assert!(refused.to_string().contains("skillhost approve prober"), "{refused}");

    approve(&registry, "prober").await;
    let paths = [
        format!("{home}/.bashrc"),
        format!("{home}/.ssh/id_rsa"),
        secret_file.display().to_string(),
        other_data.join("diary.txt").display().to_string(),
    ];
    let mut command = vec!["python".to_owned(), "scripts/probe.py".to_owned(), listener.local_addr().unwrap().port().to_string()];
    command.extend(paths.iter().cloned());
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let out = run(&registry, "prober", &words, Vec::new()).await.unwrap();
    let text = stdout(&out);
    assert!(!text.contains("ALLOWED"), "every attempt is refused:\n{text}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("denied").count(), paths.len() + 5, "{text}");
    assert!(text.contains("home /tmp user 65534"), "{text}");
    // Links it planted are listed as left out, never followed or returned.
    let names: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
    assert!(names.is_empty(), "no file comes back through a link: {names:?}");
    assert_eq!(out.skipped.iter().filter(|l| l.contains("a link")).count(), 3, "{:?}", out.skipped);
    assert!(!dir.join("scripts/evil.py").exists() && !Path::new("/usr/evil").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_floods_forks_fills_overruns_or_outlives_its_deadline_is_stopped() {
    let env = Env::new();
    env.skill("hostile", &[("scripts/noop.sh", "#!/bin/sh\necho fine\n")]);
    let registry = env.open().await;
    // Inline commands, to reach each limit without a script for each.
    let policy = RunPolicy::parse(
        "any_command = true\nworkspace = \"1MiB\"\n[limits]\ntimeout = \"3s\"\nmemory = \"256MiB\"\n",
        Path::new("policy"),
    )
    .unwrap();
    registry.set_policy("hostile", &policy).await.unwrap();
    approve(&registry, "hostile").await;

    let text = limit(run(&registry, "hostile", &["sh", "-c", "yes flood"], Vec::new()).await, "hostile");
    assert!(text.contains("without end"), "{text}");

    let text = limit(run(&registry, "hostile", &["sh", "-c", "head -c 4000000 /dev/zero > big; echo done"], Vec::new()).await, "hostile");
    assert!(text.contains("filled its workspace"), "{text}");

    let text =
        limit(run(&registry, "hostile", &["sh", "-c", "for i in $(seq 1 400); do sleep 1 & done; wait"], Vec::new()).await, "hostile");
    assert!(text.contains("processes"), "{text}");

    let text = limit(run(&registry, "hostile", &["python", "-c", "x = bytearray(600 << 20); print(len(x))"], Vec::new()).await, "hostile");
    assert!(text.contains("memory"), "{text}");

    // A grandchild that would outlive the deadline dies with the run.
    let marker = "299.7";
    let text = limit(run(&registry, "hostile", &["sh", "-c", &format!("(sleep {marker}) & sleep {marker}")], Vec::new()).await, "hostile");
    assert!(text.contains("timeout"), "{text}");
    assert_eq!(crate::wait_gone(&format!("sleep {marker}")).await, Vec::<u32>::new(), "nothing of the run is left");
    // And when the command itself exits, what it left running dies too.
    let out = run(&registry, "hostile", &["sh", "-c", "(sleep 298.3) & echo left"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "left\n");
    assert_eq!(crate::wait_gone("sleep 298.3").await, Vec::<u32>::new());

    // Installing a package at run time fails: no network, a read-only venv (with the
    // default time limit: pip's own start takes seconds on a loaded machine).
    registry.set_policy("hostile", &RunPolicy { any_command: true, ..RunPolicy::none() }).await.unwrap();
    approve(&registry, "hostile").await;
    let out = run(
        &registry,
        "hostile",
        &["python", "-m", "pip", "install", "--no-cache-dir", "--force-reinstall", "--no-deps", "--timeout", "3", "--retries", "0", "six"],
        Vec::new(),
    )
    .await
    .unwrap();
    assert_ne!(out.exit_code, Some(0), "pip cannot install: {}", stdout(&out));

    // The host serves on.
    let out = run(&registry, "hostile", &["sh", "scripts/noop.sh"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "fine\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_script_is_a_new_version_that_waits_for_a_human() {
    let env = Env::new();
    let dir = env.skill("drifter", &[("scripts/say.sh", "echo approved\n")]);
    let registry = env.open().await;
    approve(&registry, "drifter").await;
    assert_eq!(stdout(&run(&registry, "drifter", &["sh", "scripts/say.sh"], Vec::new()).await.unwrap()), "approved\n");
    // Changed on disk: until a rescan, the approved snapshot is what runs.
    std::fs::write(dir.join("scripts/say.sh"), "echo changed\n").unwrap();
    assert_eq!(stdout(&run(&registry, "drifter", &["sh", "scripts/say.sh"], Vec::new()).await.unwrap()), "approved\n");
    drop(registry);
    let registry = env.open().await;
    assert_eq!(registry.entry("drifter").unwrap().state, TrustState::NeedsReapproval);
    let refused = run(&registry, "drifter", &["sh", "scripts/say.sh"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve drifter"), "{refused}");
    // A bad request is refused before anything runs.
    approve(&registry, "drifter").await;
    let bad = RunInput::file("../escape", Vec::new());
    let refused = run(&registry, "drifter", &["sh", "scripts/say.sh"], vec![bad]).await.unwrap_err();
    assert!(matches!(refused, RegistryError::Run(RunError::Refused { .. })), "{refused}");
}

/// A wheel of a pure-Python package `tinypkg` 1.2.3, written into `dir` (a package index
/// of one file, so the test needs no network).
fn tiny_wheel(dir: &Path) {
    fixtures::python::tinypkg_wheel(dir, "1.2.3", "tiny 1.2.3");
}

/// The package environments under `env`'s sandbox work dir.
fn envs(env: &Env) -> Vec<String> {
    let dir = env.data.path().join("sandbox/envs");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

const USE_TINY: &str = "# /// script\n# dependencies = [\"tinypkg>=1.0\"]\n# ///\nimport tinypkg\nprint(tinypkg.VALUE)\n";

/// Skill `tiny` (importing `tinypkg`) on `env`, its packages resolved from `env`'s index
/// and recorded (nothing installed), and approved: the registry and the lock.
async fn resolved_tiny(env: &Env) -> (Arc<Registry>, skillhost::run::PackageLock) {
    env.skill("tiny", &[("scripts/use.py", USE_TINY)]);
    let registry = env.open().await;
    let loaded = registry.entry("tiny").unwrap().loaded.clone().unwrap();
    let sandbox = env.host.sandbox().unwrap();
    let lock = sandbox.resolve_packages(&loaded.scripts.as_ref().unwrap().packages, &loaded.files).await.unwrap();
    registry.set_lock("tiny", &lock).await.unwrap();
    approve(&registry, "tiny").await;
    (registry, lock)
}

#[tokio::test(flavor = "multi_thread")]
async fn packages_a_script_declares_are_installed_at_approval_and_used_offline() {
    let index = tempfile::tempdir().unwrap();
    tiny_wheel(index.path());
    let wheels = index.path().to_owned();
    let env = Env::with(|config| config.packages.python = skillhost::run::PythonIndex::Wheels(wheels));
    env.skill("tiny", &[("scripts/use.py", USE_TINY)]);
    env.skill("direct", &[("scripts/evil.py", "# /// script\n# dependencies = [\"evil @ https://example.com/evil.whl\"]\n# ///\n")]);
    let registry = env.open().await;

    // A direct reference is refused at load, naming the file.
    let direct = registry.entry("direct").unwrap();
    let error = direct.error.as_ref().map(ToString::to_string).unwrap_or_default();
    assert!(error.contains("scripts/evil.py") && error.contains("direct reference"), "{error}");

    let request = registry.approval_request("tiny").unwrap();
    let from = format!("the wheels in {} (no index)", index.path().display());
    assert!(
        request.requests.iter().any(|l| l.contains("not resolved yet") && l.contains(&from) && l.contains("tinypkg>=1.0")),
        "the index is shown: {:?}",
        request.requests
    );
    approve(&registry, "tiny").await;
    let refused = run(&registry, "tiny", &["python", "scripts/use.py"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve tiny"), "nothing is installed at run time: {refused}");

    // Before the question: resolved to exact versions and hashes, recorded, nothing installed.
    let scripts = registry.entry("tiny").unwrap().loaded.as_ref().unwrap().scripts.clone().unwrap();
    let files = registry.entry("tiny").unwrap().loaded.as_ref().unwrap().files.clone();
    let sandbox = env.host.sandbox().unwrap();
    let lock = sandbox.resolve_packages(&scripts.packages, &files).await.unwrap();
    assert_eq!(lock.packages, ["tinypkg==1.2.3"]);
    assert_eq!(lock.index, from);
    assert!(lock.hashes["tinypkg==1.2.3"][0].starts_with("sha256:"), "{lock:?}");
    assert!(lock.env.starts_with("py-") && lock.env.len() == 35, "{}", lock.env);
    registry.set_lock("tiny", &lock).await.unwrap();
    assert_eq!(envs(&env), Vec::<String>::new(), "resolving installs nothing");
    assert_eq!(registry.entry("tiny").unwrap().state, TrustState::NeedsReapproval, "the exact set is a change a human sees");
    let request = registry.approval_request("tiny").unwrap();
    let hash = &lock.hashes["tinypkg==1.2.3"][0];
    assert!(request.requests.iter().any(|l| l == &format!("package tinypkg==1.2.3 {hash}")), "{:?}", request.requests);
    assert!(
        request.requests.iter().any(|l| l.starts_with(&format!("Python packages from {from} for Python ")) && l.contains(&lock.env)),
        "{:?}",
        request.requests
    );
    // Approved without its install (the CLI installs between the yes and the approval):
    // the run is refused, saying to approve again.
    approve(&registry, "tiny").await;
    let refused = run(&registry, "tiny", &["python", "scripts/use.py"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve tiny"), "{refused}");

    sandbox.install_packages(&lock, &files).await.unwrap();
    assert_eq!(envs(&env), std::slice::from_ref(&lock.env));
    let out = run(&registry, "tiny", &["python", "scripts/use.py"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "tiny 1.2.3\n", "stderr: {}", String::from_utf8_lossy(&out.stderr));

    // The same set resolved and installed again (another skill declaring it) is the same
    // lock, and reuses the environment as it is.
    let marker = env.data.path().join("sandbox/envs").join(&lock.env).join(".skillhost-complete");
    let made = std::fs::metadata(&marker).unwrap().modified().unwrap();
    let again = sandbox.resolve_packages(&scripts.packages, &files).await.unwrap();
    assert_eq!(again, lock);
    sandbox.install_packages(&again, &files).await.unwrap();
    assert_eq!(std::fs::metadata(&marker).unwrap().modified().unwrap(), made, "kept, not made again");

    // The same version from another index, with other bytes, is another environment.
    let other = tempfile::tempdir().unwrap();
    fixtures::python::tinypkg_wheel(other.path(), "1.2.3", "other bytes");
    let wheels = other.path().to_owned();
    let elsewhere = Env::with(|config| config.packages.python = skillhost::run::PythonIndex::Wheels(wheels));
    let (_, other_lock) = resolved_tiny(&elsewhere).await;
    assert_eq!(other_lock.packages, lock.packages);
    assert_ne!(other_lock.hashes, lock.hashes);
    assert_ne!(other_lock.env, lock.env, "an environment is named by its index and artifact hashes, not its list");
}

/// Issue 40, item 2: an environment is used only when what it records is what its lock
/// says. One whose manifest was changed, one planted under its name, and one whose files
/// were changed (poisoned) since it was made are never taken for it: the run is refused,
/// saying to approve again, and the install (at approval) makes it again.
#[tokio::test(flavor = "multi_thread")]
async fn an_environment_that_does_not_match_its_lock_is_never_used() {
    let index = tempfile::tempdir().unwrap();
    tiny_wheel(index.path());
    let poison = tempfile::tempdir().unwrap();
    fixtures::python::tinypkg_wheel(poison.path(), "1.2.3", "poisoned");
    let wheels = index.path().to_owned();
    let env = Env::with(|config| config.packages.python = skillhost::run::PythonIndex::Wheels(wheels));
    let (registry, lock) = resolved_tiny(&env).await;
    let files = registry.entry("tiny").unwrap().loaded.as_ref().unwrap().files.clone();
    let sandbox = env.host.sandbox().unwrap();
    let dir = env.data.path().join("sandbox/envs").join(&lock.env);
    let tiny = || async { run(&registry, "tiny", &["python", "scripts/use.py"], Vec::new()).await };
    let refused_saying_approve = |result: Result<RunOutput, RegistryError>| {
        let error = result.expect_err("the environment is not used").to_string();
        assert!(error.contains("skillhost approve tiny") && error.contains(&lock.env), "{error}");
    };

    // Planted before any install: a poisoned tinypkg under the lock's name, marked complete
    // by a manifest of the list alone (what an environment was keyed by before).
    let planted = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(fixtures::python::venv().join("bin/uv"))
        .args(["venv", "--no-config", "--quiet", "--python"])
        .arg(fixtures::python::venv().join("bin/python"))
        .arg(planted.path().join("env"))
        .status()
        .unwrap();
    assert!(status.success());
    let status = std::process::Command::new(fixtures::python::venv().join("bin/uv"))
        .args(["pip", "install", "--no-config", "--quiet", "--no-index", "--find-links"])
        .arg(poison.path())
        .arg("--python")
        .arg(planted.path().join("env/bin/python"))
        .arg("tinypkg==1.2.3")
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(planted.path().join("env/.skillhost-complete"), "tinypkg==1.2.3").unwrap();
    // A venv's scripts name its path: made where it is used.
    std::fs::rename(planted.path().join("env"), &dir).unwrap();
    refused_saying_approve(tiny().await);

    // The install (at approval) replaces it; the run then sees the approved bytes.
    sandbox.install_packages(&lock, &files).await.unwrap();
    assert_eq!(stdout(&tiny().await.unwrap()), "tiny 1.2.3\n");

    // Its manifest changed: not used.
    let marker = dir.join(".skillhost-complete");
    let manifest = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(manifest, lock.python_manifest(), "it records what it was made from");
    std::fs::write(&marker, manifest.replace("tinypkg==1.2.3 sha256:", "tinypkg==1.2.3 sha256:00")).unwrap();
    refused_saying_approve(tiny().await);
    sandbox.install_packages(&lock, &files).await.unwrap();
    assert_eq!(stdout(&tiny().await.unwrap()), "tiny 1.2.3\n");

    // Its files changed under an intact manifest: the install does not keep it.
    let module = std::fs::read_dir(dir.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages/tinypkg/__init__.py");
    std::fs::write(&module, "VALUE = 'poisoned'\n").unwrap();
    sandbox.install_packages(&lock, &files).await.unwrap();
    assert_eq!(stdout(&tiny().await.unwrap()), "tiny 1.2.3\n", "made again from the approved artifacts");

    // Round 5: a link in its place, to a copy whose manifest matches, is never bound (the
    // run binds the environment by path): refused, naming the link.
    let aside = dir.with_extension("aside");
    std::fs::rename(&dir, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &dir).unwrap();
    let error = tiny().await.expect_err("a linked environment is not used").to_string();
    assert!(error.contains("skillhost approve tiny") && error.contains(&lock.env), "{error}");
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&aside, &dir).unwrap();
    assert_eq!(stdout(&tiny().await.unwrap()), "tiny 1.2.3\n");

    // A lock changed by hand (a hash of other bytes, the name left) is stale: never run,
    // not even once approved again.
    let mut forged = lock.clone();
    forged.hashes.insert("tinypkg==1.2.3".into(), vec![format!("sha256:{}", "0".repeat(64))]);
    registry.set_lock("tiny", &forged).await.unwrap();
    assert!(registry.entry("tiny").unwrap().loaded.as_ref().unwrap().scripts.as_ref().unwrap().lock.is_none(), "stale");
    let refused = tiny().await.unwrap_err().to_string();
    assert!(refused.contains("skillhost approve tiny"), "{refused}");
    approve(&registry, "tiny").await;
    let refused = tiny().await.unwrap_err().to_string();
    assert!(refused.contains("not resolved and installed yet") && refused.contains("skillhost approve tiny"), "{refused}");
    assert!(sandbox.install_packages(&forged, &files).await.unwrap_err().to_string().contains("approve it again"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_toml_beside_the_scripts_says_what_they_ask_until_a_human_writes_a_policy() {
    let env = Env::new();
    let toml = "name = \"asker\"\nversion = \"0.1.0\"\ndescription = \"Asks for a host\"\n[network]\nallow = [\"http://127.0.0.1:9\"]\n[limits]\ntimeout = \"7s\"\n";
    env.skill("asker", &[("skill.toml", toml), ("scripts/go.sh", "echo $HTTP_PROXY\n")]);
    let registry = env.open().await;
    let request = registry.approval_request("asker").unwrap();
    assert!(request.requests[0].contains("what its skill.toml asks"), "{:?}", request.requests);
    assert!(request.requests.iter().any(|l| l == "network allow: http://127.0.0.1:9"), "{:?}", request.requests);
    assert!(request.requests.iter().any(|l| l == "limit timeout of each run: 7s"), "{:?}", request.requests);
    approve(&registry, "asker").await;
    let out = run(&registry, "asker", &["sh", "scripts/go.sh"], Vec::new()).await.unwrap();
    assert!(stdout(&out).starts_with("http://127.0.0.1:"), "its run goes through the egress proxy: {}", stdout(&out));

    // A human's policy wins over what the skill asks, and is a change to review.
    registry.set_policy("asker", &RunPolicy::none()).await.unwrap();
    assert_eq!(registry.entry("asker").unwrap().state, TrustState::NeedsReapproval);
    assert!(registry.approval_request("asker").unwrap().requests[0].contains("written on this host"));
    approve(&registry, "asker").await;
    let out = run(&registry, "asker", &["sh", "scripts/go.sh"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "\n", "no proxy, no network");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_run_is_in_the_audit_log_with_its_command_exit_bytes_and_requests() {
    use skillhost::audit::{AuditQuery, RunOutcome};
    let env = Env::new();
    let (port, server) = one_request_server("hello").await;
    let script = format!(
        "import sys, urllib.request\nbody = urllib.request.urlopen('http://127.0.0.1:{port}/ping').read()\ndata = open(sys.argv[1], 'rb').read() + open(sys.argv[2], 'rb').read()\nopen('out.bin', 'wb').write(data * 3 + body)\nprint('wrote', len(data) * 3 + len(body))\nsys.exit(3)\n"
    );
    env.skill("audited", &[("scripts/work.py", &script)]);
    let registry = env.open().await;
    let policy = RunPolicy::parse(
        &format!("any_command = true\n[network]\nallow = [\"http://127.0.0.1:{port}\"]\n[limits]\ntimeout = \"3s\"\n"),
        Path::new("policy"),
    )
    .unwrap();
    registry.set_policy("audited", &policy).await.unwrap();
    let runs = || env.host.audit().runs(&AuditQuery { skill: Some("audited".into()), ..AuditQuery::default() }).unwrap();

    // Before approval: refused, and recorded as refused.
    run(&registry, "audited", &["python", "scripts/work.py", "a.txt", "b.bin"], Vec::new()).await.unwrap_err();
    let rows = runs();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(matches!(&rows[0].outcome, RunOutcome::Refused(why) if why.contains("skillhost approve audited")), "{rows:?}");

    approve(&registry, "audited").await;
    let inputs = vec![RunInput::file("a.txt", b"0123456789".to_vec()), RunInput::file("b.bin", vec![7u8; 1000])];
    let out = run(&registry, "audited", &["python", "scripts/work.py", "a.txt", "b.bin"], inputs).await.unwrap();
    assert_eq!(out.exit_code, Some(3), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout(&out), "wrote 3035\n");
    tokio::time::timeout(HANG_GUARD, server).await.unwrap().unwrap();
    let rows = runs();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = &rows[1];
    assert_eq!(row.command, r#""python" "scripts/work.py" "a.txt" "b.bin""#, "the command as the caller gave it");
    assert_eq!(row.outcome, RunOutcome::Exit(3));
    assert_eq!(row.bytes_in, 1010, "the input files' bytes");
    let files: u64 = out.files.iter().map(|f| f.size).sum();
    assert_eq!(files, 3035, "out.bin comes back; the inputs, left as they came, are listed apart");
    assert_eq!(out.unchanged_inputs, ["a.txt", "b.bin"]);
    assert_eq!(row.bytes_out, out.stdout_bytes + out.stderr_bytes + files, "printed and written");
    assert!(row.duration >= out.duration && row.duration < HANG_GUARD, "{:?} vs the run's {:?}", row.duration, out.duration);
    // Its outbound request is a row of its own, made after the run started.
    let requests = env.host.audit().query(&AuditQuery { skill: Some("audited".into()), ..AuditQuery::default() }).unwrap();
    let request = requests.iter().find(|r| r.url.contains(&format!("127.0.0.1:{port}/ping"))).expect("the run's request is audited");
    assert_eq!(request.bytes_in, 5);
    assert!(request.time >= row.time, "{request:?} {row:?}");

    // A value of the host's secrets in a command is never recorded.
    env.host.secrets().set("api-token", "s3cr3t-value-77").unwrap();
    run(&registry, "audited", &["sh", "-c", "true", "--token=s3cr3t-value-77"], Vec::new()).await.unwrap();
    let rows = runs();
    assert_eq!(rows[2].command, r#""sh" "-c" "true" "--token=[redacted secret]""#, "{rows:?}");

    // Stopped at a limit: recorded with the refusal.
    let text = limit(run(&registry, "audited", &["sh", "-c", "sleep 30"], Vec::new()).await, "audited");
    let rows = runs();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[3].command, r#""sh" "-c" "sleep 30""#);
    assert!(matches!(&rows[3].outcome, RunOutcome::Refused(why) if why == &text && why.contains("timeout")), "{rows:?}");
    assert_eq!((rows[3].bytes_in, rows[3].bytes_out), (0, 0));
    assert!(rows[3].duration >= std::time::Duration::from_secs(3), "{:?}", rows[3].duration);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_directory_a_human_granted_is_seen_at_host_name_with_its_mode_and_never_followed_out() {
    let env = Env::new();
    let granted = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("in.txt"), "from the host\n").unwrap();
    std::os::unix::fs::symlink("/etc", granted.path().join("etc-link")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(granted.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(granted.path().join("in.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = "cat /host/docs/in.txt\nif echo x > /host/docs/new.txt 2>/dev/null; then echo wrote; else echo read-only; fi\nls /host/docs/etc-link/ | head -3\n";
    env.skill("reader", &[("scripts/read.sh", script)]);
    let registry = env.open().await;
    let policy =
        RunPolicy::parse(&format!("[[paths]]\nhost = \"{}\"\nas = \"docs\"\nmode = \"ro\"\n", granted.path().display()), Path::new("p"))
            .unwrap();
    registry.set_policy("reader", &policy).await.unwrap();
    let request = registry.approval_request("reader").unwrap();
    assert!(
        request.requests.iter().any(|l| l == &format!("host directory {} at /host/docs: read-only", granted.path().display())),
        "the grant is shown: {:?}",
        request.requests
    );
    approve(&registry, "reader").await;
    let out = run(&registry, "reader", &["sh", "scripts/read.sh"], Vec::new()).await.unwrap();
    let text = stdout(&out);
    assert!(text.starts_with("from the host\nread-only\n"), "{text}");
    // The link inside resolves inside the jail (its synthetic /etc), never to the host's /etc.
    assert!(!text.contains("shadow") && !text.contains("ssh"), "{text}");
    assert!(!granted.path().join("new.txt").exists());
    // A granted directory that is itself a link is refused, naming it.
    let link = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(granted.path(), link.path().join("docs")).unwrap();
    let via_link =
        RunPolicy::parse(&format!("[[paths]]\nhost = \"{}\"\nmode = \"ro\"\n", link.path().join("docs").display()), Path::new("p"))
            .unwrap();
    registry.set_policy("reader", &via_link).await.unwrap();
    approve(&registry, "reader").await;
    let refused = run(&registry, "reader", &["sh", "scripts/read.sh"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("reader") && refused.to_string().contains("link"), "{refused}");
}

/// A node package `tinynode` 1.0.0, packed with npm and put into npm's cache at `cache`
/// (a registry of one package, so the test needs no network); its lockfile entry.
fn tiny_node_package(dir: &Path, cache: &Path) -> String {
    let package = dir.join("tinynode");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("package.json"), r#"{"name": "tinynode", "version": "1.0.0", "main": "index.js"}"#).unwrap();
    std::fs::write(package.join("index.js"), "module.exports = { shout: (s) => s.toUpperCase() + '!' };\n").unwrap();
    let npm = |args: &[&str], cwd: &Path| {
        let out = std::process::Command::new("npm").args(args).current_dir(cwd).output().expect("npm is installed with node");
        assert!(out.status.success(), "npm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    npm(&["pack", "--silent"], &package);
    let tarball = package.join("tinynode-1.0.0.tgz");
    npm(&["cache", "add", tarball.to_str().unwrap(), "--cache", cache.to_str().unwrap()], dir);
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha512::digest(std::fs::read(&tarball).unwrap());
    let integrity = format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode(digest));
    format!(
        r#"{{"name": "skill", "version": "0.0.0", "lockfileVersion": 3, "requires": true, "packages": {{
  "": {{"name": "skill", "version": "0.0.0", "dependencies": {{"tinynode": "1.0.0"}}}},
  "node_modules/tinynode": {{"version": "1.0.0", "resolved": "https://registry.npmjs.org/tinynode/-/tinynode-1.0.0.tgz", "integrity": "{integrity}"}}
}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn node_packages_of_a_lockfile_are_installed_at_approval_and_found_by_scripts() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("npm-cache");
    let lock = tiny_node_package(work.path(), &cache);
    let env = Env::with(|config| config.packages.npm.offline_cache = Some(cache.clone()));
    let manifest = r#"{"name": "skill", "version": "0.0.0", "private": true, "dependencies": {"tinynode": "1.0.0"}}"#;
    let script = "import tiny from 'tinynode';\nconsole.log(tiny.shout('hi'));\n";
    env.skill("noder", &[("package.json", manifest), ("package-lock.json", &lock), ("scripts/shout.mjs", script)]);
    env.skill("unlocked", &[("package.json", manifest), ("scripts/x.js", "")]);
    let git = lock.replace("https://registry.npmjs.org/tinynode/-/tinynode-1.0.0.tgz", "git+ssh://git@example.com/evil.git");
    env.skill("gitdep", &[("package.json", manifest), ("package-lock.json", &git), ("scripts/x.js", "")]);
    // Issue 40, item 3: a lockfile whose `resolved` points at another host is refused at
    // load, naming the line, whatever its integrity says.
    let elsewhere = lock.replace("https://registry.npmjs.org/tinynode/", "https://evil.example/tinynode/");
    env.skill("elsewhere", &[("package.json", manifest), ("package-lock.json", &elsewhere), ("scripts/x.js", "")]);
    let lookalike = lock.replace("https://registry.npmjs.org/tinynode/", "https://registry.npmjs.org.evil.example/tinynode/");
    env.skill("lookalike", &[("package.json", manifest), ("package-lock.json", &lookalike), ("scripts/x.js", "")]);
    let registry = env.open().await;

    for (name, says) in [
        ("unlocked", "no package-lock.json"),
        ("gitdep", "not a registry tarball"),
        (
            "elsewhere",
            "package-lock.json:3: \"node_modules/tinynode\" resolves to \"https://evil.example/tinynode/-/tinynode-1.0.0.tgz\", which is not on this host's npm registry https://registry.npmjs.org/",
        ),
        ("lookalike", "package-lock.json:3: \"node_modules/tinynode\" resolves to \"https://registry.npmjs.org.evil.example/"),
    ] {
        let error = registry.entry(name).unwrap().error.as_ref().map(ToString::to_string).unwrap_or_default();
        assert!(error.contains(says), "{name}: {error}");
    }
    let request = registry.approval_request("noder").unwrap();
    let from = format!("https://registry.npmjs.org/ (offline, from the npm cache {})", cache.display());
    assert!(
        request.requests.iter().any(|l| l.contains("not installed yet") && l.contains(&from) && l.contains("tinynode@1.0.0")),
        "{:?}",
        request.requests
    );
    approve(&registry, "noder").await;
    let refused = run(&registry, "noder", &["node", "scripts/shout.mjs"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve noder"), "{refused}");

    // Resolving runs no npm and installs nothing: the lockfile is the resolution.
    let files = registry.entry("noder").unwrap().loaded.as_ref().unwrap().files.clone();
    let sandbox = env.host.sandbox().unwrap();
    let lock = sandbox.resolve_packages(&[], &files).await.unwrap();
    let node = lock.node.clone().unwrap();
    assert_eq!(node.packages, ["tinynode@1.0.0"]);
    assert_eq!(node.registry, "https://registry.npmjs.org/");
    assert_eq!(envs(&env), Vec::<String>::new());
    registry.set_lock("noder", &lock).await.unwrap();
    let request = registry.approval_request("noder").unwrap();
    let integrity = &node.integrity["tinynode@1.0.0"];
    assert!(integrity.starts_with("sha512-"));
    assert!(request.requests.iter().any(|l| l == &format!("node package tinynode@1.0.0 {integrity}")), "{:?}", request.requests);
    assert!(request.requests.iter().any(|l| l.starts_with(&format!("node packages from {from}")) && l.contains(&node.env)));
    approve(&registry, "noder").await;
    sandbox.install_packages(&lock, &files).await.unwrap();
    assert_eq!(envs(&env), std::slice::from_ref(&node.env));
    let out = run(&registry, "noder", &["node", "scripts/shout.mjs"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "HI!\n", "stderr: {}", String::from_utf8_lossy(&out.stderr));

    // Its recorded manifest changed: not used, and made again at the next install.
    let marker = env.data.path().join("sandbox/envs").join(&node.env).join(".skillhost-complete");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), node.manifest());
    std::fs::write(&marker, node.manifest().replace("registry https://registry.npmjs.org/", "registry https://evil.example/")).unwrap();
    let refused = run(&registry, "noder", &["node", "scripts/shout.mjs"], Vec::new()).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve noder"), "{refused}");
    sandbox.install_packages(&lock, &files).await.unwrap();
    let out = run(&registry, "noder", &["node", "scripts/shout.mjs"], Vec::new()).await.unwrap();
    assert_eq!(stdout(&out), "HI!\n");
}

/// An HTTP server on 127.0.0.1 answering every request with 200 until dropped: its port,
/// and the heads of the requests it got.
async fn recording_server() -> (u16, Arc<std::sync::Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let seen = heads.clone();
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
            });
        }
    });
    (port, heads, server)
}

/// What an agent's own code does with a run's grants: deletes the file in the granted
/// read-write host directory and calls the host the secret is bound to.
fn evil_py(port: u16) -> String {
    format!(
        "import os, urllib.request\ntry:\n    os.remove('/host/data/victim.txt')\n    print('REMOVED')\nexcept Exception as e:\n    print('remove failed', e)\ntry:\n    print('FETCHED', urllib.request.urlopen('http://127.0.0.1:{port}/leak', timeout=5).read())\nexcept Exception as e:\n    print('fetch failed', e)\n"
    )
}

/// A skill's scripts in the forms public skills write commands in: a Python script with
/// arguments, a module of `scripts` importing another (`python -m scripts.package_skill`,
/// run from the skill's root), a package's `__main__`, a shell script, a node script.
const FORMS: &[(&str, &str)] = &[
    ("scripts/tidy.py", "import sys\nprint('tidy', *sys.argv[1:])\n"),
    ("scripts/helper.py", "NAME = 'helper'\n"),
    ("scripts/package_skill.py", "import sys\nfrom scripts.helper import NAME\nprint('module', NAME, *sys.argv[1:])\n"),
    ("scripts/pack/__main__.py", "print('package main')\n"),
    ("scripts/tidy.sh", "#!/bin/sh\necho \"sh $*\"\n"),
    ("scripts/tidy.js", "console.log('node', process.argv.slice(2).join(' '));\n"),
];

/// Attack (issue 40, item 4): the approval lists a skill's scripts with their hashes, and
/// its policy grants a read-write host directory and a secret added to requests for one
/// host. An agent sends a command that is not one of those scripts: inline code (`-c`,
/// `-e`, stdin), a file of its own passed as input, a module of its own, a program of its
/// choice (`rm`, `env`), an interpreter option loading its code (`node --require`).
/// Expected: the approval binds what runs: each is refused before anything runs, the
/// error naming the skill, the command, why, and `skillhost policy NAME --any-command`;
/// the scripts run in every form public skills write them in, and a module the agent
/// planted in the workspace under the name of the skill's never replaces it.
/// Checked: the file in the granted directory survives; the secret-bound host gets no
/// request; each script form prints what the script prints.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_starts_one_of_the_skills_scripts_never_the_agents_own_code() {
    let env = Env::new();
    let (port, heads, server) = recording_server().await;
    env.skill("tidy", FORMS);
    env.host.secrets().set("api-token", "s3cr3t-value-40").unwrap();
    let granted = tempfile::tempdir().unwrap();
    let victim = granted.path().join("victim.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(granted.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o666)).unwrap();
    let registry = env.open().await;
    let origin = format!("http://127.0.0.1:{port}");
    let policy = format!(
        "[network]\nallow = [\"{origin}\"]\n[[secrets]]\nname = \"api-token\"\nheader = \"Authorization\"\nhosts = [\"{origin}\"]\n[[paths]]\nhost = \"{}\"\nas = \"data\"\nmode = \"rw\"\n",
        granted.path().display()
    );
    registry.set_policy("tidy", &RunPolicy::parse(&policy, Path::new("policy")).unwrap()).await.unwrap();
    approve(&registry, "tidy").await;

    let evil = evil_py(port);
    let input = |path: &str, text: &str| RunInput::file(path, text.as_bytes().to_vec());
    let rm = "rm -f /host/data/victim.txt";
    let attacks: Vec<(Vec<&str>, Vec<RunInput>)> = vec![
        (vec!["python3", "-c", &evil], vec![]),
        (vec!["python", "-uc", &evil], vec![]),
        (vec!["python3", "-", "scripts/tidy.py"], vec![]),
        (vec!["python3", "evil.py"], vec![input("evil.py", &evil)]),
        (vec!["python3", "-m", "evil"], vec![input("evil.py", &evil)]),
        (vec!["python3", "-m", "scripts.evil"], vec![input("scripts/evil.py", &evil)]),
        (vec!["python3", "-i", "scripts/tidy.py"], vec![]),
        (vec!["sh", "-c", rm], vec![]),
        (vec!["bash", "-c", rm], vec![]),
        (vec!["bash", "-s", "scripts/tidy.sh"], vec![]),
        (vec!["node", "-e", "require('fs').unlinkSync('/host/data/victim.txt')"], vec![]),
        (
            vec!["node", "--require", "./evil.js", "scripts/tidy.js"],
            vec![input("evil.js", "require('fs').unlinkSync('/host/data/victim.txt');\n")],
        ),
        (vec!["/bin/rm", "-rf", "/host/data/victim.txt"], vec![]),
        (vec!["rm", "-f", "/host/data/victim.txt"], vec![]),
        (vec!["env", "python3", "-c", &evil], vec![]),
        (vec!["./evil.py"], vec![input("evil.py", &format!("#!/usr/bin/env python3\n{evil}"))]),
    ];
    for (command, inputs) in attacks {
        let shown = format!("{command:?}");
        let result = run(&registry, "tidy", &command, inputs).await;
        assert!(victim.exists(), "{shown} deleted the file in the granted directory: {result:?}");
        assert_eq!(heads.lock().unwrap().len(), 0, "{shown} reached the secret-bound host: {result:?}");
        match result {
            Err(RegistryError::Run(error @ RunError::Refused { .. })) => {
                let text = error.to_string();
                assert!(text.contains("`tidy`"), "{shown}: names the skill: {text}");
                assert!(text.contains(&format!("\"{}\"", command[0])), "{shown}: names the command: {text}");
                assert!(text.contains("skillhost policy tidy --any-command"), "{shown}: says how to allow it: {text}");
            }
            other => panic!("{shown} was not refused: {other:?}"),
        }
    }

    // The scripts run, in each form.
    for (command, printed) in [
        (&["python", "scripts/tidy.py", "in.txt", "out.txt"][..], "tidy in.txt out.txt\n"),
        (&["python3", "-u", "scripts/tidy.py"], "tidy\n"),
        (&["python3", "./scripts/tidy.py", "-c", "x"], "tidy -c x\n"),
        (&["python3", "-m", "scripts.package_skill", "dist"], "module helper dist\n"),
        (&["python", "-m", "scripts.pack"], "package main\n"),
        (&["./scripts/tidy.sh", "a"], "sh a\n"),
        (&["scripts/tidy.sh"], "sh \n"),
        (&["bash", "scripts/tidy.sh", "-c", "b"], "sh -c b\n"),
        (&["sh", "-e", "scripts/tidy.sh"], "sh \n"),
        (&["node", "scripts/tidy.js", "-e", "c"], "node -e c\n"),
    ] {
        let out = run(&registry, "tidy", command, Vec::new()).await.unwrap_or_else(|e| panic!("{command:?}: {e}"));
        assert_eq!((stdout(&out).as_str(), out.exit_code), (printed, Some(0)), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A module the agent planted in the workspace under the skill's module's name is not
    // what runs: the skill's is, found from its root.
    let planted = vec![input("scripts/package_skill.py", &evil), input("scripts/__init__.py", "")];
    let out = run(&registry, "tidy", &["python3", "-m", "scripts.package_skill"], planted).await.unwrap();
    assert_eq!(stdout(&out), "module helper\n", "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(victim.exists() && heads.lock().unwrap().is_empty());

    // A human lets it run any command: a change of policy, shown in words of its own and
    // approved again; then inline code runs with every grant.
    let any = RunPolicy::parse(&format!("any_command = true\n{policy}"), Path::new("policy")).unwrap();
    registry.set_policy("tidy", &any).await.unwrap();
    assert_eq!(registry.entry("tidy").unwrap().state, TrustState::NeedsReapproval);
    let refused = run(&registry, "tidy", &["python3", "-c", &evil], Vec::new()).await.unwrap_err();
    assert!(matches!(refused, RegistryError::NotCallable { .. }), "not before a human approved it: {refused}");
    let request = registry.approval_request("tidy").unwrap();
    assert_eq!(request.tier, skillhost::skill::RiskTier::Explicit, "{request:?}");
    assert!(
        request
            .requests
            .iter()
            .any(|l| l.starts_with("runs ANY command an agent sends (not only its scripts") && l.ends_with("with every grant above")),
        "the request says so: {:?}",
        request.requests
    );
    assert!(request.diff.iter().any(|l| l.contains("ANY command")), "and shows it as what changed: {:?}", request.diff);
    approve(&registry, "tidy").await;
    let out = run(&registry, "tidy", &["python3", "-c", &evil], Vec::new()).await.unwrap();
    assert!(stdout(&out).starts_with("REMOVED\nFETCHED"), "{} {}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!victim.exists());
    let heads = heads.lock().unwrap().clone();
    assert!(heads.len() == 1 && heads[0].to_ascii_lowercase().contains("authorization: s3cr3t-value-40"), "{heads:?}");
    server.abort();
}
