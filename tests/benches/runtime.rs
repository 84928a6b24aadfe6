//! Load and call costs of the wasm runtime, each against its baseline in the same run:
//!
//! - `load/cold` compiles the component (no cache); `load/cached` takes it from the
//!   compiled cache. Both include pre-instantiation and asking the skill for its tools.
//! - `call/warm` calls a trivial tool (`echo`) on a loaded skill: fresh store and
//!   instance per call, as always. `call/compile_per_call` is the baseline a naive host
//!   pays: compile, instantiate and call for every request.
//! - `egress/gated` is a skill's GET of a 1 KiB response from a local server through the
//!   host's gate (rule check, pinned connect, audit row) inside a tool call;
//!   `egress/direct` is the same request made by the host itself with hyper, no skill and
//!   no gate, to the same server, on a new connection per request; `egress/direct_kept`
//!   the same on one connection kept open. The gate keeps a skill's connections (a
//!   response read to its end leaves its connection for the next request), so `gated` and
//!   `gate` measure kept connections after their first request.
//!   `egress/gate` is the same request sent through the gate from the host
//!   (`SkillEgress::send`: rules, pinned connect, caps, an audit row in SQLite), no wasm:
//!   against `direct` it is the gate's own cost, against `gated` what the wasm call and
//!   the `wasi:http` plumbing add.

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::{LIMITS, TestHost};
use serde_json::json;
use skillhost::{CallContext, runtime::WasmConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn load(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("load");
    group.sample_size(20).measurement_time(Duration::from_secs(10));

    let cold = TestHost::with_config(WasmConfig::default());
    let dir = LIMITS.folder(cold.skills.path());
    group.bench_function("cold", |b| b.iter(|| rt.block_on(cold.host.load_path_granted(&dir)).unwrap()));

    let cache = tempfile::tempdir().unwrap();
    let cached = TestHost::with_config(WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() });
    let dir = LIMITS.folder(cached.skills.path());
    rt.block_on(cached.host.load_path_granted(&dir)).unwrap();
    group.bench_function("cached", |b| b.iter(|| rt.block_on(cached.host.load_path_granted(&dir)).unwrap()));
    group.finish();
}

fn call(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("call");

    let t = TestHost::with_config(WasmConfig::default());
    let loaded = rt.block_on(t.host.load_path_granted(&LIMITS.folder(t.skills.path()))).unwrap();
    let input = json!({"value": {"n": 1}});
    group.bench_function("warm", |b| b.iter(|| rt.block_on(loaded.skill.call("echo", input.clone(), CallContext::default())).unwrap()));

    // The same call with a granted data dir: every call opens it again, component by
    // component without following links, and preopens the open directory.
    let granted = TestHost::with_config(WasmConfig::default());
    let with_dir = LIMITS.folder_with(granted.skills.path(), "[[capabilities.files]]\npath = \"cache\"\nmode = \"ro\"\n");
    let with_dir = rt.block_on(granted.host.load_path_granted(&with_dir)).unwrap();
    group.bench_function("warm_with_granted_dir", |b| {
        b.iter(|| rt.block_on(with_dir.skill.call("echo", input.clone(), CallContext::default())).unwrap())
    });

    group.sample_size(20).measurement_time(Duration::from_secs(10));
    let dir = LIMITS.folder(t.skills.path());
    group.bench_function("compile_per_call", |b| {
        b.iter(|| {
            rt.block_on(async {
                let fresh = t.host.load_path_granted(&dir).await.unwrap();
                fresh.skill.call("echo", input.clone(), CallContext::default()).await.unwrap()
            })
        })
    });
    group.finish();
}

fn egress(c: &mut Criterion) {
    let rt = runtime();
    let server = fixtures::TestServer::start_keep_alive();
    let url = format!("http://127.0.0.1:{}/ok", server.port());
    let mut group = c.benchmark_group("egress");

    let t = TestHost::with_config(WasmConfig::default());
    let network = format!("[network]\nallow = [\"http://127.0.0.1:{}\"]\n", server.port());
    let loaded = rt.block_on(t.host.load_path_granted(&fixtures::NET.folder_with(t.skills.path(), &network))).unwrap();
    let input = json!({ "url": url });
    group.bench_function("gated", |b| {
        b.iter(|| {
            let out = rt.block_on(loaded.skill.call("fetch", input.clone(), CallContext::default())).unwrap();
            assert_eq!(out.value["status"], 200);
        })
    });

    let audit_dir = tempfile::tempdir().unwrap();
    let net = skillhost::net::NetConfig {
        audit: std::sync::Arc::new(skillhost::audit::SqliteAuditLog::open(audit_dir.path().join("audit.db")).unwrap()),
        ..skillhost::net::NetConfig::default()
    };
    let section =
        skillhost_core::egress::NetworkSection { allow: vec![format!("http://127.0.0.1:{}", server.port())], ..Default::default() };
    let policy = skillhost::net::EgressPolicy::from_section(&section).unwrap();
    let gate = skillhost_egress::SkillEgress::new(skillhost_core::SkillName::new("net").unwrap(), Arc::new(policy), Arc::new(net));
    group.bench_function("gate", |b| {
        b.iter(|| {
            rt.block_on(async {
                let request = hyper::Request::get(&url).body(http_body_util::Empty::<bytes::Bytes>::new()).unwrap();
                let response = gate.send("fetch", request, &[]).await.unwrap();
                let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
                assert_eq!(body.len(), 1024);
            })
        })
    });

    // The host's direct request on one kept connection: what a client that pools pays.
    let uri: hyper::Uri = url.parse().unwrap();
    let mut kept = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        sender
    });
    group.bench_function("direct_kept", |b| {
        b.iter(|| {
            rt.block_on(async {
                kept.ready().await.unwrap();
                get_1k(&mut kept, &uri).await;
            })
        })
    });

    group.bench_function("direct", |b| {
        b.iter(|| {
            rt.block_on(async {
                let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
                let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
                tokio::spawn(conn);
                get_1k(&mut sender, &uri).await;
            })
        })
    });
    group.finish();
}

/// The host's own GET of `uri` (a 1 KiB answer) on `sender`, read to its end.
async fn get_1k(sender: &mut hyper::client::conn::http1::SendRequest<http_body_util::Empty<bytes::Bytes>>, uri: &hyper::Uri) {
    let request = hyper::Request::get(uri.path())
        .header("host", uri.authority().unwrap().as_str())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    assert_eq!(body.len(), 1024);
}

criterion_group!(benches, load, call, egress);
criterion_main!(benches);
