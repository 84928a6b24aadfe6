//! Load and call costs of the wasm runtime, each against its baseline in the same run:
//!
//! - `load/cold` compiles the component (no cache); `load/cached` takes it from the
//!   compiled cache. Both include pre-instantiation and asking the skill for its tools.
//! - `call/warm` calls a trivial tool (`echo`) on a loaded skill: fresh store and
//!   instance per call, as always. `call/compile_per_call` is the baseline a naive host
//!   pays: compile, instantiate and call for every request.

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::{LIMITS, TestHost};
use serde_json::json;
use skillhost::{CallContext, WasmConfig};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn load(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("load");
    group.sample_size(20).measurement_time(Duration::from_secs(10));

    let cold = TestHost::with_config(WasmConfig::default());
    let dir = LIMITS.folder(cold.skills.path());
    group.bench_function("cold", |b| b.iter(|| rt.block_on(cold.host.load_path(&dir)).unwrap()));

    let cache = tempfile::tempdir().unwrap();
    let cached = TestHost::with_config(WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() });
    let dir = LIMITS.folder(cached.skills.path());
    rt.block_on(cached.host.load_path(&dir)).unwrap();
    group.bench_function("cached", |b| b.iter(|| rt.block_on(cached.host.load_path(&dir)).unwrap()));
    group.finish();
}

fn call(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("call");

    let t = TestHost::with_config(WasmConfig::default());
    let loaded = rt.block_on(t.host.load_path(&LIMITS.folder(t.skills.path()))).unwrap();
    let input = json!({"value": {"n": 1}});
    group.bench_function("warm", |b| {
        b.iter(|| rt.block_on(loaded.skill.call("echo", input.clone(), CallContext::default())).unwrap())
    });

    group.sample_size(20).measurement_time(Duration::from_secs(10));
    let dir = LIMITS.folder(t.skills.path());
    group.bench_function("compile_per_call", |b| {
        b.iter(|| {
            rt.block_on(async {
                let fresh = t.host.load_path(&dir).await.unwrap();
                fresh.skill.call("echo", input.clone(), CallContext::default()).await.unwrap()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, load, call);
criterion_main!(benches);
