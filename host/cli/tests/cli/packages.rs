//! Issue 40, items 2 and 3, through `skillhost approve` as a user runs it: the package
//! installers read only what the host hands them. A `uv.toml`, `.npmrc` or `UV_*` /
//! `npm_config_*` variable where the command was started chooses nothing; packages are
//! resolved before the question (metadata only) and installed only after a yes, so a "no"
//! leaves nothing installed and downloaded no package; a git source ignores the repository
//! the command was started in.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::Env;

const USE_TINY: &str = "# /// script\n# dependencies = [\"tinypkg>=1.0\"]\n# ///\nimport tinypkg\nprint(tinypkg.VALUE)\n";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `skillhost ARGS` over `env` from the working directory `cwd`, with the test venv, the
/// environment `vars` added and `stdin` fed.
fn skillhost(env: &Env, cwd: &Path, vars: &[(&str, &str)], args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.arg("--skills").arg(env.skills.path()).arg("--data-dir").arg(env.data.path()).args(args);
    command.current_dir(cwd).env_remove("SKILLHOST_LOG").env("SKILLHOST_VENV", fixtures::python::venv());
    command.envs(vars.iter().copied());
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the skillhost binary runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// A SKILL.md skill `name` with `files`.
fn skill(env: &Env, name: &str, files: &[(&str, &str)]) {
    let dir = env.skills.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: A test skill. Use it in tests.\n---\nRun it.\n"))
        .unwrap();
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
}

/// The package environments of `env`'s sandbox.
fn envs(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.data.path().join("sandbox/envs"))
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// What `skillhost run NAME --json -- COMMAND` printed.
fn run_stdout(env: &Env, cwd: &Path, name: &str, command: &[&str]) -> String {
    let mut args = vec!["run", name, "--json", "--"];
    args.extend(command);
    let out = skillhost(env, cwd, &[], &args, "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    result["stdout"].as_str().unwrap_or_default().to_owned()
}

/// Attack (a): a cloned repository's `uv.toml` (and a `pyproject.toml` with `[tool.uv]`)
/// where `approve` is started, and `UV_*` variables in its environment, all naming a
/// poisoned index (a `tinypkg` 6.6.6 the requirement `>=1.0` would prefer, an unreachable
/// URL), choose nothing: the package is the host's index's, as the approval showed.
#[test]
fn approve_ignores_the_uv_configuration_and_environment_it_was_started_with() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    fixtures::python::tinypkg_wheel(&good, "1.2.3", "tiny 1.2.3");
    let poison = work.path().join("poison");
    fixtures::python::tinypkg_wheel(&poison, "6.6.6", "poisoned");
    std::fs::write(env.data.path().join("config.toml"), format!("[packages]\npython_wheels = \"{}\"\n", good.display())).unwrap();
    let repo = work.path().join("cloned");
    std::fs::create_dir_all(&repo).unwrap();
    let poisoned_config = format!(
        "index-url = \"http://127.0.0.1:1/simple\"\nfind-links = [\"{}\"]\n[pip]\nextra-index-url = [\"http://127.0.0.1:1/extra\"]\nfind-links = [\"{}\"]\n",
        poison.display(),
        poison.display()
    );
    std::fs::write(repo.join("uv.toml"), &poisoned_config).unwrap();
    std::fs::write(
        repo.join("pyproject.toml"),
        format!("[project]\nname = \"x\"\nversion = \"0\"\n[tool.uv]\nfind-links = [\"{}\"]\n", poison.display()),
    )
    .unwrap();
    let config_file = work.path().join("elsewhere.toml");
    std::fs::write(&config_file, &poisoned_config).unwrap();
    let poison_dir = poison.to_str().unwrap();
    let vars = [
        ("UV_INDEX_URL", "http://127.0.0.1:1/simple"),
        ("UV_DEFAULT_INDEX", "http://127.0.0.1:1/simple"),
        ("UV_EXTRA_INDEX_URL", "http://127.0.0.1:1/extra"),
        ("UV_FIND_LINKS", poison_dir),
        ("UV_CONFIG_FILE", config_file.to_str().unwrap()),
        ("UV_NO_INDEX", "0"),
        ("PIP_INDEX_URL", "http://127.0.0.1:1/simple"),
        ("PIP_FIND_LINKS", poison_dir),
    ];
    skill(&env, "tiny", &[("scripts/use.py", USE_TINY)]);

    let out = skillhost(&env, &repo, &vars, &["approve", "tiny", "--yes"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stderr(&out);
    assert!(shown.contains(&format!("Python packages from the wheels in {} (no index)", good.display())), "the index is shown: {shown}");
    assert!(shown.contains("package tinypkg==1.2.3 sha256:"), "the exact version and its hash are shown: {shown}");
    assert!(!shown.contains("6.6.6"), "{shown}");
    assert_eq!(run_stdout(&env, &repo, "tiny", &["python", "scripts/use.py"]), "tiny 1.2.3\n");
}

/// A package index on 127.0.0.1 serving `tinypkg` 1.2.3 (the PEP 503 page with each
/// wheel's hash and PEP 658 metadata): its URL and the paths it was asked for.
fn index_server(wheel: &Path) -> (String, Arc<Mutex<Vec<String>>>) {
    use sha2::Digest;
    let bytes = std::fs::read(wheel).unwrap();
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let metadata = b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.2.3\n".to_vec();
    let hash = |b: &[u8]| format!("{:x}", sha2::Sha256::digest(b));
    let page = format!(
        "<!DOCTYPE html><html><body><a href=\"/files/{name}#sha256={}\" data-dist-info-metadata=\"sha256={m}\" data-core-metadata=\"sha256={m}\">{name}</a></body></html>\n",
        hash(&bytes),
        m = hash(&metadata)
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/simple", listener.local_addr().unwrap().port());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
            log.lock().unwrap().push(path.clone());
            let (status, kind, body) = match path.as_str() {
                "/simple/tinypkg/" => ("200 OK", "text/html", page.clone().into_bytes()),
                p if p == format!("/files/{name}") => ("200 OK", "application/octet-stream", bytes.clone()),
                p if p == format!("/files/{name}.metadata") => ("200 OK", "text/plain", metadata.clone()),
                _ => ("404 Not Found", "text/plain", b"not here".to_vec()),
            };
            let head = format!("HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    (url, asked)
}

/// Attack (b): the install waits for the yes. Declining (a "n" on a terminal, or no
/// terminal to say yes on) leaves the lock with the exact versions it showed and nothing
/// installed, and no package was downloaded from the index (its page and metadata only);
/// the yes then installs exactly that, from that index.
#[test]
fn a_declined_approval_installs_nothing_and_downloads_no_package() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let wheel = fixtures::python::tinypkg_wheel(&work.path().join("wheels"), "1.2.3", "tiny 1.2.3");
    let (url, asked) = index_server(&wheel);
    std::fs::write(env.data.path().join("config.toml"), format!("[packages]\npython_index = \"{url}\"\n")).unwrap();
    skill(&env, "tiny", &[("scripts/use.py", USE_TINY)]);
    let downloads = || asked.lock().unwrap().iter().filter(|p| p.ends_with(".whl")).count();

    // "n" on a terminal (script(1) gives the command one).
    let command = format!(
        "SKILLHOST_VENV={} {} --skills {} --data-dir {} approve tiny",
        fixtures::python::venv().display(),
        env!("CARGO_BIN_EXE_skillhost"),
        env.skills.path().display(),
        env.data.path().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(work.path())
        .env("LINES", "1000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The terminal keeps the answer until the question reads it (the resolution first).
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"n\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{shown}");
    assert!(shown.contains("`tiny` was not approved"), "{shown}");
    assert!(
        shown.contains(&format!("Python packages from {url} for Python")) && shown.contains("package tinypkg==1.2.3 sha256:"),
        "{shown}"
    );
    assert!(!shown.contains("installing"), "{shown}");
    assert_eq!(envs(&env), Vec::<String>::new(), "a no installs nothing");
    assert_eq!(downloads(), 0, "resolving fetched the index page and metadata only: {:?}", asked.lock().unwrap());
    assert!(asked.lock().unwrap().iter().any(|p| p == "/simple/tinypkg/"), "{:?}", asked.lock().unwrap());

    // No terminal to say yes on: the same.
    let out = skillhost(&env, work.path(), &[], &["approve", "tiny"], "y\n");
    assert!(!out.status.success() && stderr(&out).contains("needs a yes on a terminal"), "{}", stderr(&out));
    assert_eq!(envs(&env), Vec::<String>::new());
    assert_eq!(downloads(), 0);
    let refused = skillhost(&env, work.path(), &[], &["run", "tiny", "--json", "--", "python", "scripts/use.py"], "");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));

    // The yes installs exactly that, from that index, before the approval is recorded.
    let out = skillhost(&env, work.path(), &[], &["approve", "tiny", "--yes"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(envs(&env).len(), 1, "{:?}", envs(&env));
    assert_eq!(downloads(), 1, "{:?}", asked.lock().unwrap());
    assert_eq!(run_stdout(&env, work.path(), "tiny", &["python", "scripts/use.py"]), "tiny 1.2.3\n");
}

/// A node package `tinynode` 1.0.0 in an npm cache at `cache` (offline); its lockfile.
fn tiny_node(dir: &Path, cache: &Path) -> String {
    use sha2::Digest;
    let package = dir.join("tinynode");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("package.json"), r#"{"name": "tinynode", "version": "1.0.0", "main": "index.js"}"#).unwrap();
    std::fs::write(package.join("index.js"), "module.exports = { shout: (s) => s.toUpperCase() + '!' };\n").unwrap();
    let npm = |args: &[&str], cwd: &Path| {
        let out = Command::new("npm").args(args).current_dir(cwd).output().expect("npm is installed with node");
        assert!(out.status.success(), "npm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    npm(&["pack", "--silent"], &package);
    let tarball = package.join("tinynode-1.0.0.tgz");
    npm(&["cache", "add", tarball.to_str().unwrap(), "--cache", cache.to_str().unwrap()], dir);
    let digest = sha2::Sha512::digest(std::fs::read(&tarball).unwrap());
    let integrity = format!("sha512-{}", base64(&digest));
    format!(
        r#"{{"name": "skill", "version": "0.0.0", "lockfileVersion": 3, "requires": true, "packages": {{
  "": {{"name": "skill", "version": "0.0.0", "dependencies": {{"tinynode": "1.0.0"}}}},
  "node_modules/tinynode": {{"version": "1.0.0", "resolved": "https://registry.npmjs.org/tinynode/-/tinynode-1.0.0.tgz", "integrity": "{integrity}"}}
}}}}"#
    )
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Attack (d): an `.npmrc` where `approve` is started, one in `HOME` and `npm_config_*`
/// variables (another registry, online, scripts on) choose nothing: npm installs from the
/// host's registry and cache only; and a lockfile whose `resolved` names another host is
/// refused when the skill loads, naming the line, before anything could fetch it.
#[test]
fn approve_ignores_the_npm_configuration_it_was_started_with_and_refuses_foreign_lockfile_urls() {
    let env = Env::new();
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("npm-cache");
    let lock = tiny_node(work.path(), &cache);
    std::fs::write(env.data.path().join("config.toml"), format!("[packages]\nnpm_offline_cache = \"{}\"\n", cache.display())).unwrap();
    let manifest = r#"{"name": "skill", "version": "0.0.0", "private": true, "dependencies": {"tinynode": "1.0.0"}}"#;
    let script = "import tiny from 'tinynode';\nconsole.log(tiny.shout('hi'));\n";
    skill(&env, "noder", &[("package.json", manifest), ("package-lock.json", &lock), ("scripts/shout.mjs", script)]);
    let foreign = lock.replace("https://registry.npmjs.org/tinynode/", "https://127.0.0.1:1/tinynode/");
    skill(&env, "foreign", &[("package.json", manifest), ("package-lock.json", &foreign), ("scripts/x.mjs", "")]);
    let repo = work.path().join("cloned");
    let home = work.path().join("home");
    let poisoned = "registry=http://127.0.0.1:1/\noffline=false\nignore-scripts=false\ncache=/nonexistent\nreplace-registry-host=always\n";
    for dir in [&repo, &home] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(".npmrc"), poisoned).unwrap();
    }
    let user = home.join(".npmrc");
    let vars = [
        ("HOME", home.to_str().unwrap()),
        ("npm_config_registry", "http://127.0.0.1:1/"),
        ("NPM_CONFIG_REGISTRY", "http://127.0.0.1:1/"),
        ("npm_config_userconfig", user.to_str().unwrap()),
        ("npm_config_offline", "false"),
        ("npm_config_cache", "/nonexistent"),
    ];

    let out = skillhost(&env, &repo, &vars, &["approve", "foreign", "--yes"], "");
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("package-lock.json:3: \"node_modules/tinynode\" resolves to \"https://127.0.0.1:1/tinynode/-/tinynode-1.0.0.tgz\", which is not on this host's npm registry https://registry.npmjs.org/"),
        "{}",
        stderr(&out)
    );

    let out = skillhost(&env, &repo, &vars, &["approve", "noder", "--yes"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stderr(&out);
    assert!(shown.contains("node packages from https://registry.npmjs.org/ (offline, from the npm cache"), "{shown}");
    assert!(shown.contains("node package tinynode@1.0.0 sha512-"), "{shown}");
    assert_eq!(envs(&env).len(), 1, "{:?}", envs(&env));
    assert_eq!(run_stdout(&env, &repo, "noder", &["node", "scripts/shout.mjs"]), "HI!\n");
}

/// A git source ignores the repository `install` was started in: its `.git/config`
/// rewriting the source's URL (`insteadOf`) to another repository is never read.
#[test]
fn a_git_source_ignores_the_repository_it_was_started_in() {
    use fixtures::git::{GitRepo, git};
    let good = GitRepo::new();
    good.commit(&[("skills/notes/SKILL.md", b"---\nname: notes\ndescription: Team notes.\n---\nThe real notes.\n")]);
    let evil = GitRepo::new();
    evil.commit(&[("skills/notes/SKILL.md", b"---\nname: notes\ndescription: Team notes.\n---\nThe attacker's notes.\n")]);
    let cwd = tempfile::tempdir().unwrap();
    git(cwd.path(), &["init", "-q"]);
    let good_url = format!("file://{}", good.bare.display());
    let evil_url = format!("file://{}", evil.bare.display());
    git(cwd.path(), &["config", &format!("url.{evil_url}.insteadOf"), &good_url]);
    let env = Env::new();
    let source = format!("git+{good_url}#path=skills/notes&rev=main");
    let out = skillhost(&env, cwd.path(), &[], &["install", &source, "--no-lock"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let installed = std::fs::read_to_string(env.data.path().join("user-skills/notes/SKILL.md")).unwrap();
    assert!(installed.contains("The real notes."), "{installed}");
}

/// cargo reads no configuration from the skill's tree (`forge DIR` leaves hidden files
/// out, and the stager refuses them in a submission: `stage.rs`'s unit tests) nor from
/// where `forge` was started: a `.cargo/config.toml` there replacing crates.io with a
/// directory that does not exist (which `cargo vendor` of the toolchain cache, run on the
/// host, would obey) changes nothing, and the build itself runs cargo in an empty
/// directory of the sandbox.
#[test]
fn forge_builds_read_no_cargo_configuration_of_the_skill_or_the_callers_directory() {
    let env = Env::new();
    let poisoned = "[source.crates-io]\nreplace-with = \"poisoned\"\n[source.poisoned]\ndirectory = \"/nonexistent/poisoned\"\n[build]\ntarget-dir = \"/nonexistent/target\"\n";
    let skill = tempfile::tempdir().unwrap();
    std::fs::write(skill.path().join("skill.toml"), "name = \"cwd-probe\"\nversion = \"0.1.0\"\ndescription = \"Says where cargo runs\"\n")
        .unwrap();
    std::fs::create_dir_all(skill.path().join("src")).unwrap();
    std::fs::write(skill.path().join("src/lib.rs"), "").unwrap();
    let probe = "fn main() {\n    let stat = std::fs::read_to_string(\"/proc/self/stat\").unwrap_or_default();\n    let ppid = stat.rsplit(')').next().unwrap_or_default().split_whitespace().nth(1).unwrap_or_default().to_owned();\n    let cwd = std::fs::read_link(format!(\"/proc/{ppid}/cwd\")).map(|p| p.display().to_string()).unwrap_or_else(|e| format!(\"unknown ({e})\"));\n    panic!(\"cargo runs in {cwd}\");\n}\n";
    std::fs::write(skill.path().join("build.rs"), probe).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    for dir in [skill.path(), cwd.path()] {
        std::fs::create_dir_all(dir.join(".cargo")).unwrap();
        std::fs::write(dir.join(".cargo/config.toml"), poisoned).unwrap();
    }
    std::fs::write(cwd.path().join("rust-toolchain.toml"), "[toolchain]\nchannel = \"0.0.1-poisoned\"\n").unwrap();

    let out = skillhost(&env, cwd.path(), &[], &["forge", skill.path().to_str().unwrap(), "--json"], "");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains("/nonexistent/") && !stderr(&out).contains("/nonexistent/"), "{text}\n{}", stderr(&out));
    let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}\n{}", stderr(&out)));
    assert_eq!(report["failure"]["stage"], "build", "the toolchain was made and the build ran: {report}");
    assert!(text.contains("cargo runs in /workspace"), "{report}");
}
