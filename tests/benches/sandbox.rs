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

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::python;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use skillhost::{CallContext, Host, Skill};

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
    let grant = skillhost::Grant::new(&source.manifest, host.policy(), &skillhost::DirectSkill::data_key(&source.manifest.name)).unwrap();
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

criterion_group!(benches, sandbox);
criterion_main!(benches);
