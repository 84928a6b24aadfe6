//! The examples run: each one's demo against the bundled text-tools skill (built from
//! source by the `skillhost-tests` fixtures), as `cargo run --example` runs it; their
//! `main` only adds the command line and Ctrl-C. And the editor plugin's own executable,
//! on a machine with no `skillhost` binary, runs a networked server skill and a skill's
//! scripts: it is its own egress shim and run init.

#[path = "../editor_plugin.rs"]
#[allow(dead_code, reason = "the example's own main is not called here")]
mod editor_plugin;
#[path = "../embed_host.rs"]
#[allow(dead_code, reason = "the example's own main is not called here")]
mod embed_host;

use std::path::Path;

use fixtures::TEXT_TOOLS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_plugin_calls_a_tool_over_its_in_memory_mcp_connection() {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    TEXT_TOOLS.folder(skills.path());
    let answers = editor_plugin::run(skills.path().to_owned(), data.path(), Vec::new(), async {}).await.unwrap();
    let answer = answers.first().expect("the demo call ran");
    let stats: serde_json::Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(stats["words"], 3, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_the_host_loads_a_skill_and_calls_its_first_tool() {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let folder = TEXT_TOOLS.folder(skills.path());
    let out = embed_host::run(&folder, data.path()).await.unwrap();
    assert!(out.is_object(), "the first tool's example answered: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_plugin_is_its_own_shim_and_run_init_with_no_skillhost_anywhere() {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // An upstream on 127.0.0.1 that records what reaches it (`/ok` answers 1 KiB of `x`).
    let upstream = fixtures::TestServer::start();
    let port = upstream.port();
    // A networked server skill (FastMCP, httpx through the egress proxy) ...
    let network = format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n");
    let prober = fixtures::python::install("sandbox-probe", skills.path(), &network);
    let manifest = std::fs::read_to_string(prober.join("skill.toml")).unwrap().replace("name = \"sandbox-probe\"", "name = \"prober\"");
    std::fs::rename(&prober, skills.path().join("prober")).unwrap();
    std::fs::write(skills.path().join("prober/skill.toml"), manifest).unwrap();
    // ... and a SKILL.md skill with a script.
    let report = skills.path().join("report");
    std::fs::create_dir_all(report.join("scripts")).unwrap();
    std::fs::write(report.join("SKILL.md"), "---\nname: report\ndescription: Says hello from a script.\n---\nRun scripts/hello.sh.\n")
        .unwrap();
    std::fs::write(report.join("scripts/hello.sh"), "#!/bin/sh\necho \"hello from the script\"\n").unwrap();
    // The host config the plugin reads: the tests' venv, and the cgroup opt-out an
    // unprivileged run without a delegated tree needs (as the other suites).
    let mut config = format!("[sandbox]\nvenv = \"{}\"\n", fixtures::python::venv().display());
    if fixtures::python::sandbox_config(data.path()).allow_weaker.iter().any(|layer| layer == "cgroup") {
        config.push_str("allow_weaker = [\"cgroup\"]\n");
    }
    std::fs::write(data.path().join("config.toml"), &config).unwrap();

    // A human approves both, through the library (the editor's own approval UI).
    {
        let config = skillhost::HostConfig::read(&data.path().join("config.toml")).unwrap();
        let host = skillhost::Host::builder().data_dir(data.path()).config(config).build().unwrap();
        let mut layers = host.registry_config();
        layers.workspace = Some(skills.path().to_owned());
        layers.watch = false;
        let registry = host.open_registry(layers).await.unwrap();
        for name in ["prober", "report"] {
            let request = registry.approval_request(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
        }
    }

    // The example's executable, built by `cargo test` beside this test's.
    let exe = std::env::current_exe().unwrap();
    let plugin = exe.parent().and_then(Path::parent).unwrap().join("examples/editor_plugin");
    assert!(plugin.is_file(), "{} was not built", plugin.display());
    let fetch = format!(r#"{{"url": "http://127.0.0.1:{port}/ok"}}"#);
    let run = r#"{"skill": "report", "command": ["sh", "scripts/hello.sh"]}"#;
    let args = ["--data", data.path().to_str().unwrap(), "--once", "--call", "prober__fetch_text", &fetch, "--call", "skill_run", run];
    // Nothing of cargo's environment (no CARGO_BIN_EXE_skillhost*), and a PATH with no
    // skillhost on it.
    let mut command = tokio::process::Command::new(&plugin);
    command.arg(skills.path()).args(args).env_clear().env("PATH", "/usr/local/bin:/usr/bin:/bin");
    for (name, value) in std::env::vars_os() {
        if name == "HOME" || name == "TMPDIR" {
            command.env(name, value);
        }
    }
    for dir in ["/usr/local/bin", "/usr/bin", "/bin"] {
        assert!(!Path::new(dir).join("skillhost").exists(), "a skillhost binary in {dir}: the test proves nothing here");
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), command.output()).await.expect("the plugin hung").unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the plugin failed:\n{stdout}\n{stderr}");
    let body = "x".repeat(1024);
    assert!(stdout.contains(&format!("prober__fetch_text -> {body}")), "the networked server skill: {stdout}\n{stderr}");
    assert_eq!(upstream.received().iter().filter(|r| r.target == "/ok").count(), 1, "the request reached the upstream once");
    assert!(stdout.contains("hello from the script"), "the script's run: {stdout}\n{stderr}");
}
