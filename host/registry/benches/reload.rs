//! Registry benchmarks (issue 4, "Measure"):
//!
//! - `reload_latency`: from the moment an edited skill.toml is closed to the new
//!   version answering a call, through the watcher, the 150 ms debounce and the reload.
//! - `start_to_first_answer_100_cached`: `Registry::open` over 100 skills whose
//!   components are in the compiled cache (and whose trust rows exist), then one call.

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::LIMITS;
use serde_json::json;
use skillhost_core::{CallContext, Policy, SkillRuntime};
use skillhost_registry::{Registry, RegistryConfig, RegistryEvent};
use skillhost_wasm::{WasmConfig, WasmRuntime};

fn runtime(cache: &Path) -> Arc<dyn SkillRuntime> {
    Arc::new(WasmRuntime::new(WasmConfig { cache_dir: Some(cache.to_owned()), ..WasmConfig::default() }).unwrap())
}

fn config(data: &Path, workspace: &Path, watch: bool) -> RegistryConfig {
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(workspace.to_owned());
    config.watch = watch;
    config
}

fn reload_latency(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let dir = LIMITS.folder(workspace.path());
    let registry = rt
        .block_on(Registry::open(
            config(data.path(), workspace.path(), true),
            runtime(&data.path().join("cache")),
            Policy::new(data.path().join("d")),
        ))
        .unwrap();
    let mut version = 0u64;
    c.bench_function("reload_latency", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    version += 1;
                    let mut events = registry.subscribe();
                    let manifest = LIMITS.manifest().replace("version = \"0.1.0\"", &format!("version = \"0.1.{version}\""));
                    std::fs::write(dir.join("skill.toml"), manifest).unwrap();
                    let closed = Instant::now();
                    loop {
                        let event = tokio::time::timeout(Duration::from_secs(30), events.recv()).await.expect("reloaded").unwrap();
                        if matches!(event, RegistryEvent::Updated(_)) {
                            break;
                        }
                    }
                    registry.call("limits", "echo", json!({"value": 1}), CallContext::default()).await.unwrap();
                    total += closed.elapsed();
                }
                total
            })
        })
    });
}

fn start_to_first_answer(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    for i in 0..100 {
        let dir = workspace.path().join(format!("skill-{i}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
        std::fs::write(dir.join("skill.toml"), LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"skill-{i}\""))).unwrap();
    }
    let cache = data.path().join("cache");
    let open = || Registry::open(config(data.path(), workspace.path(), false), runtime(&cache), Policy::new(data.path().join("d")));
    rt.block_on(open()).unwrap(); // fills the compiled cache and the trust store
    c.bench_function("start_to_first_answer_100_cached", |b| {
        b.iter(|| {
            rt.block_on(async {
                let registry = open().await.unwrap();
                registry.call("skill-0", "echo", json!({"value": 1}), CallContext::default()).await.unwrap();
            })
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(10));
    targets = reload_latency, start_to_first_answer
}
criterion_main!(benches);
