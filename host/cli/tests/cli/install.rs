//! The binary installed outside its checkout works from any directory: in an empty
//! directory, with a HOME of its own (so the default data dir) and nothing of the
//! checkout in its environment, `new`, `forge`, `build`, `call` and `serve` (one tool
//! call over MCP, by the official Python SDK) all work. The SDK and WIT that `new` and
//! the forge need come from the binary itself.
//!
//! "Installed" is what `cargo install` does after it builds: the binary copied into
//! `ROOT/bin`. (Running `cargo install` here would build the whole host again for its
//! own feature set.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

/// An install root, a HOME and an empty working directory.
struct Installed {
    bin: PathBuf,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    _root: tempfile::TempDir,
}

impl Installed {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin/skillhost");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_skillhost"), &bin).unwrap();
        Self { bin, home: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap(), _root: root }
    }

    /// The default data dir under this HOME (the XDG one).
    fn data_dir(&self) -> PathBuf {
        self.home.path().join(".local/share/skillhost")
    }

    /// Run the installed binary in the working directory with a bare environment: PATH
    /// (cargo and bwrap), this HOME, the real cargo and rustup homes (the toolchain and
    /// the crates.io cache, not the checkout).
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// [`run`](Self::run) with `env` added.
    fn run_with(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let real_home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
        let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(|| real_home.join(".cargo"), PathBuf::from);
        let rustup_home = std::env::var_os("RUSTUP_HOME").map_or_else(|| real_home.join(".rustup"), PathBuf::from);
        let mut command = Command::new(&self.bin);
        command
            .args(args)
            .current_dir(self.work.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            // A root host's default is /var/lib/skillhost unless XDG_DATA_HOME is set: the
            // XDG default under this HOME keeps the test to its own directories.
            .env("XDG_DATA_HOME", self.home.path().join(".local/share"))
            .env("CARGO_HOME", cargo_home)
            .env("RUSTUP_HOME", rustup_home);
        if let Some(toolchain) = std::env::var_os("RUSTUP_TOOLCHAIN") {
            command.env("RUSTUP_TOOLCHAIN", toolchain);
        }
        command.envs(env.iter().copied());
        command.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "skillhost {}: {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }
}

#[test]
fn an_installed_binary_works_from_an_empty_directory_with_nothing_of_the_checkout() {
    let installed = Installed::new();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();

    // `new` writes a crate on the SDK by version; the forge and `build` give it the SDK
    // embedded in the binary (written out to the data dir), not the checkout's.
    installed.ok(&["new", "greeter"]);
    let manifest = std::fs::read_to_string(installed.work.path().join("greeter/Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    assert_eq!(manifest["dependencies"]["skillhost-sdk"].as_str(), Some(sdk_requirement().as_str()), "{manifest}");

    // The forge builds it in its sandbox against the same SDK and installs it, pending.
    let forged = installed.ok(&["forge", "greeter", "--json"]);
    let forged: Value = serde_json::from_slice(&forged.stdout).unwrap();
    assert_eq!(forged["skill"], "greeter", "{forged}");
    assert_eq!(forged["tools"], serde_json::json!(["hello"]), "{forged}");
    let toolchains: Vec<_> =
        std::fs::read_dir(installed.data_dir().join("forge")).unwrap().filter_map(Result::ok).map(|e| e.file_name()).collect();
    assert!(toolchains.iter().any(|n| n.to_string_lossy().starts_with("toolchain-")), "{toolchains:?}");

    // `build` and a direct `call` of the folder, for development.
    let built = installed.ok(&["build", "greeter"]);
    assert!(String::from_utf8_lossy(&built.stderr).contains("tools: hello"), "{}", String::from_utf8_lossy(&built.stderr));
    let sdks: Vec<PathBuf> = std::fs::read_dir(installed.data_dir().join("sdk")).unwrap().map(|e| e.unwrap().path()).collect();
    let [sdk] = &sdks[..] else { panic!("one SDK written out: {sdks:?}") };
    assert!(!sdk.starts_with(&checkout) && sdk.join("guest-sdk/src/lib.rs").is_file() && sdk.join("wit/skill.wit").is_file());
    let called = installed.ok(&["call", "./greeter", "hello", "--input", r#"{"name": "Ada"}"#]);
    let called: Value = serde_json::from_slice(&called.stdout).unwrap();
    assert_eq!(called["greeting"], "Hello, Ada!");

    // A human approves the forged skill; an agent calls it over MCP.
    installed.ok(&["approve", "greeter", "--yes"]);
    let skills = installed.work.path().join("skills");
    std::fs::create_dir(&skills).unwrap();
    let python = fixtures::python::venv().join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp_client.py");
    let request = serde_json::json!({"tool": "greeter__hello", "arguments": {"name": "Grace"}}).to_string();
    let out = Command::new(&python)
        .arg(&script)
        .args(["call_one", "auto"])
        .arg(&installed.bin)
        .arg(&skills)
        .arg(installed.data_dir())
        .arg(&request)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; run scripts/setup.sh", python.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the MCP call failed:\n{stderr}\n{stdout}");
    let facts: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(facts["value"]["greeting"], "Hello, Grace!", "{facts}");
}

/// The version requirement `new` names the SDK by: `MAJOR.MINOR` of the checkout's SDK.
fn sdk_requirement() -> String {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk/Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    let version = manifest["package"]["version"].as_str().unwrap();
    version.rsplit_once('.').unwrap().0.to_owned()
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    files
}

/// A Rust skill's source builds anywhere skillhost is installed: `new` (data dir A) names the
/// SDK by version, not by a path into A, so a copy of the skill's folder alone, with A gone,
/// builds with a fresh data dir B against the SDK the binary carries, offline, and the build
/// writes nothing into the folder but its Cargo.lock and skill.wasm, neither naming a path
/// of this machine. (Before, the Cargo.toml named A's SDK by its absolute path, and with A
/// gone the build failed.)
#[test]
fn a_new_skill_copied_elsewhere_builds_with_another_data_dir() {
    let installed = Installed::new();
    let first = tempfile::tempdir().unwrap();
    let first_path = first.path().to_owned();
    let out = installed.run_with(&["new", "portable"], &[("SKILLHOST_DATA_DIR", first.path())]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let made = installed.work.path().join("portable");
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("portable");
    let sources = files_under(&made);
    for file in &sources {
        std::fs::create_dir_all(copy.join(file).parent().unwrap()).unwrap();
        std::fs::copy(made.join(file), copy.join(file)).unwrap();
    }
    std::fs::remove_dir_all(&made).unwrap();
    drop(first);
    assert!(!first_path.exists());

    let second = tempfile::tempdir().unwrap();
    // The guest crates' target dir the other `new` tests share: the dependencies build once.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/guests-new");
    let out = installed.run_with(
        &["build", copy.to_str().unwrap()],
        &[("SKILLHOST_DATA_DIR", second.path()), ("CARGO_TARGET_DIR", &target), ("CARGO_NET_OFFLINE", Path::new("true"))],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("tools: hello"), "the copy does not build with another data dir: {stderr}");

    let manifest = std::fs::read_to_string(copy.join("Cargo.toml")).unwrap();
    let table: toml::Table = manifest.parse().unwrap();
    assert_eq!(table["dependencies"]["skillhost-sdk"].as_str(), Some(sdk_requirement().as_str()), "{manifest}");
    fn strings(value: &toml::Value, out: &mut Vec<String>) {
        match value {
            toml::Value::String(s) => out.push(s.clone()),
            toml::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            toml::Value::Table(table) => table.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut said = Vec::new();
    strings(&toml::Value::Table(table), &mut said);
    assert!(said.iter().all(|s| !Path::new(s).is_absolute()), "an absolute path in the skill's Cargo.toml: {manifest}");
    let mut expected = sources.clone();
    expected.extend(["Cargo.lock".to_owned(), "skill.wasm".to_owned()]);
    expected.sort();
    assert_eq!(files_under(&copy), expected, "the build wrote into the skill's folder");
    let lock = std::fs::read_to_string(copy.join("Cargo.lock")).unwrap();
    for data_dir in [first_path.as_path(), second.path()] {
        assert!(!lock.contains(data_dir.to_str().unwrap()), "Cargo.lock names {}: {lock}", data_dir.display());
    }
    assert!(!lock.contains("[[patch.unused]]"), "{lock}");
}

/// Attack surface: a root host whose binary is installed where the sandbox's unprivileged
/// uid cannot go (root's `~/.cargo/bin` is 0700; here a 0700 install root). The binary is
/// the egress shim every networked sandbox runs, so the uid drop used to fail and every
/// sandbox ran as host root.
/// Expected: the host hands its sandboxes a link to the binary in its data dir, and the
/// uid drop holds.
/// Checked: `doctor --json` reports the uid drop available; the link is in
/// `DATA_DIR/sandbox/bin`; a networked server loaded by its path with `--grant` reaches a
/// listener on 127.0.0.1 through it.
#[test]
fn a_root_host_drops_its_sandboxes_to_an_unprivileged_uid_wherever_the_binary_is_installed() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: the uid drop is what a root host does; this host is not root");
        return;
    }
    let installed = Installed::new();
    let private = installed.bin.parent().unwrap().parent().unwrap();
    std::fs::set_permissions(private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let venv = fixtures::python::venv();
    let env = [("SKILLHOST_DATA_DIR", data.path()), ("SKILLHOST_VENV", venv.as_path())];

    let out = installed.run_with(&["doctor", "--json"], &env);
    let layers: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor --json: {e}: {out:?}"));
    let drop = layers.as_array().unwrap().iter().find(|l| l["name"] == "uid drop").expect("doctor lists the uid drop");
    assert_eq!(drop["available"], true, "a root host's sandboxes run as host root: {drop}");
    let links: Vec<_> = std::fs::read_dir(data.path().join("sandbox/bin")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(links.len(), 1, "one link to the binary: {links:?}");

    let listener = fixtures::TestServer::start();
    let skill = installed.work.path().join("fetcher");
    fixtures::python::install(
        "sandbox-probe",
        installed.work.path(),
        &format!("[network]\nallow = [\"http://127.0.0.1:{}\"]\n", listener.port()),
    );
    std::fs::rename(installed.work.path().join("sandbox-probe"), &skill).unwrap();
    let url = format!("{{\"url\": \"http://127.0.0.1:{}/through-the-shim\"}}", listener.port());
    let out = installed.run_with(&["call", "./fetcher", "fetch", "--input", &url, "--grant"], &env);
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && answer.contains("\"ok\": true"), "{answer}\n{}", String::from_utf8_lossy(&out.stderr));
    let received: Vec<String> = listener.received().iter().map(|r| r.target.clone()).collect();
    assert_eq!(received, ["/through-the-shim"]);
}
