//! The sandbox's cost: the same FastMCP server (`tests/python/sandbox-probe`, tool
//! `echo`) in bubblewrap through the host, against the same server started directly
//! with an rmcp client over its stdio, in one run:
//!
//! - `sandbox_spawn/{sandboxed,direct}`: spawn to first answer — start the process,
//!   MCP handshake, one `tools/call`.
//! - `sandbox_call/{sandboxed,direct}`: a warm `tools/call` on a running server.
//!
//! Both sides run the same interpreter from the same venv; the direct side runs under
//! `setsid` as bwrap's `--new-session` does (same session setup, same CPU-share group).
//!
//! - `run/{jail,bare}_{sh,python}`: a trivial command of a SKILL.md skill's scripts
//!   (`sh -c true`, `python3 -c pass`) run through `Registry::run` (what `skillhost run`
//!   and `skill_run` call: a jail of its own with its workspace, its init and its report)
//!   against the same interpreter path spawned bare with `std::process::Command`, its
//!   output captured: what the jail adds to a run.

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::python;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use skillhost::{CallContext, Host, Registry, RegistryConfig, Skill};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// The probe server started directly (no sandbox), with an rmcp client.
async fn direct() -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let venv = skillhost_sandbox::Venv::open(&python::venv()).unwrap();
    let mut child = tokio::process::Command::new("setsid")
        .arg(venv.python())
        .arg("server.py")
        .current_dir(python::fixture("sandbox-probe"))
        .env_clear()
        .env("HOME", "/tmp")
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    // The child lives as long as the client's transport; leak the handle to keep it.
    std::mem::forget(child);
    ().serve(io).await.unwrap()
}

async fn direct_echo(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) {
    let mut params = CallToolRequestParams::new("echo");
    params.arguments = Some(json!({"text": "hi"}).as_object().unwrap().clone());
    client.peer().call_tool(params).await.unwrap();
}

fn sandbox(c: &mut Criterion) {
    let rt = runtime();
    let data = tempfile::tempdir().unwrap();
    let host = Host::builder().data_dir(data.path()).sandbox_config(python::sandbox_config(data.path())).build().unwrap();
    let dir = python::install("sandbox-probe", data.path(), "");
    let source = skillhost_package::read_source(&dir, &Default::default()).unwrap();
    let grant =
        skillhost::skill::Grant::new(&source.manifest, host.policy(), &skillhost::DirectSkill::data_key(&source.manifest.name)).unwrap();
    let skill = rt.block_on(host.sandbox().unwrap().load_server(&source, grant)).unwrap();
    let skill = Arc::new(skill);

    let mut group = c.benchmark_group("sandbox_spawn");
    group.sample_size(10).measurement_time(Duration::from_secs(20)).warm_up_time(Duration::from_secs(1));
    group.bench_function("sandboxed", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    skill.stop().await;
                    let start = Instant::now();
                    skill.call("echo", json!({"text": "hi"}), CallContext::default()).await.unwrap();
                    total += start.elapsed();
                }
                total
            })
        })
    });
    group.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let client = direct().await;
                    direct_echo(&client).await;
                    total += start.elapsed();
                    let _ = client.cancel().await;
                }
                total
            })
        })
    });
    group.finish();

    let mut group = c.benchmark_group("sandbox_call");
    group.sample_size(50).measurement_time(Duration::from_secs(10));
    rt.block_on(skill.call("echo", json!({"text": "warm"}), CallContext::default())).unwrap();
    group.bench_function("sandboxed", |b| {
        b.iter(|| rt.block_on(skill.call("echo", json!({"text": "hi"}), CallContext::default())).unwrap())
    });
    let client = rt.block_on(direct());
    group.bench_function("direct", |b| b.iter(|| rt.block_on(direct_echo(&client))));
    group.finish();
}

/// The host the jail side runs on: the sandbox with the test binaries as shim and init,
/// as the integration tests set it up.
fn run_host(data: &std::path::Path) -> Host {
    let mut config = python::sandbox_config(data);
    config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
    config.init = Some(vec![env!("CARGO_BIN_EXE_skillhost-run-init").into()]);
    let host = Host::builder().data_dir(data).sandbox_config(config).build().unwrap();
    host.sandbox().expect("no sandbox runtime; run scripts/setup.sh");
    host
}

/// A workspace layer holding the SKILL.md skill `bench` with one script, approved with a
/// policy that lets it run any command.
async fn approved_registry(host: &Host, data: &std::path::Path, skills: &std::path::Path) -> Arc<Registry> {
    let dir = skills.join("bench");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: bench\ndescription: Runs nothing, to time the jail.\n---\nRun it.\n").unwrap();
    std::fs::write(dir.join("scripts/noop.sh"), "#!/bin/sh\n").unwrap();
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(skills.to_owned());
    config.watch = false;
    let registry = host.open_registry(config).await.unwrap();
    // The bench times the jail around `sh -c true` and `python3 -c pass`: inline commands,
    // which the policy must allow.
    registry.set_policy("bench", &skillhost::run::RunPolicy { any_command: true, ..skillhost::run::RunPolicy::none() }).await.unwrap();
    let request = registry.approval_request("bench").unwrap();
    registry.approve("bench", &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
    registry
}

/// The path a word of a command resolves to in the jail: the venv's `bin` first, then
/// `/usr/local/bin:/usr/bin:/bin` (the jail's `PATH`).
fn jail_path_of(program: &str) -> std::path::PathBuf {
    std::iter::once(python::venv().join("bin"))
        .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(std::path::PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("`{program}` is not on the jail's PATH"))
}

fn run(c: &mut Criterion) {
    let rt = runtime();
    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let host = run_host(data.path());
    let registry = rt.block_on(approved_registry(&host, data.path(), skills.path()));
    let bare_dir = tempfile::tempdir().unwrap();

    let mut group = c.benchmark_group("run");
    group.sample_size(30).measurement_time(Duration::from_secs(15)).warm_up_time(Duration::from_secs(2));
    for (name, command) in [("sh", ["sh", "-c", "true"]), ("python", ["python3", "-c", "pass"])] {
        let words: Vec<String> = command.map(str::to_owned).into();
        let out = rt.block_on(registry.run("bench", words.clone(), Vec::new(), CallContext::default())).unwrap();
        assert_eq!(out.exit_code, Some(0), "{name} in the jail: {out:?}");
        group.bench_function(format!("jail_{name}"), |b| {
            b.iter(|| {
                let out = rt.block_on(registry.run("bench", words.clone(), Vec::new(), CallContext::default())).unwrap();
                assert_eq!(out.exit_code, Some(0));
            })
        });
        let program = jail_path_of(command[0]);
        group.bench_function(format!("bare_{name}"), |b| {
            b.iter(|| {
                let out = std::process::Command::new(&program)
                    .args(&command[1..])
                    .current_dir(bare_dir.path())
                    .env_clear()
                    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                    .env("HOME", "/tmp")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sandbox, run);
criterion_main!(benches);
