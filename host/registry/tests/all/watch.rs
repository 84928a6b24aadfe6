//! Hot reload: additions, edits and removals picked up by the watcher; a call in flight
//! finishes on the version it started on while new calls get the new one. (A torn
//! write is an attack: it is in the adversarial suite, `tests/all/hostile_files.rs`.)

use std::time::Duration;

use fixtures::{LIMITS, TEXT_TOOLS};
use serde_json::json;
use skillhost_core::{CallError, CallFailure};
use skillhost_registry::{Layer, RegistryError, RegistryEvent};

use crate::{Env, call, limits_folder, limits_packaged, replace_file, wait_for};

fn is(kind: &'static str, name: &'static str) -> impl Fn(&RegistryEvent) -> bool {
    move |event| {
        event.name().as_str() == name
            && match event {
                RegistryEvent::Added(_) => kind == "added",
                RegistryEvent::Updated(_) => kind == "updated",
                RegistryEvent::Removed(_) => kind == "removed",
                RegistryEvent::LoadFailed { .. } => kind == "load_failed",
                RegistryEvent::StateChanged { .. } => kind == "state_changed",
                _ => false,
            }
    }
}

fn version(registry: &skillhost_registry::Registry, name: &str) -> String {
    registry.entry(name).unwrap().loaded.as_ref().unwrap().version.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_modify_remove_are_picked_up() {
    let env = Env::new();
    let registry = env.open_watching().await;
    let mut events = registry.subscribe();
    assert!(registry.catalog().is_empty());

    let dir = TEXT_TOOLS.folder(env.ws());
    wait_for(&mut events, "added", is("added", "text-tools")).await;
    assert_eq!(registry.entry("text-tools").unwrap().layer, Layer::Workspace);
    let out = call(&registry, "text-tools", "slugify", json!({"text": "Hello World"})).await.unwrap();
    assert!(out.value.to_string().contains("hello-world"), "{}", out.value);

    let manifest = TEXT_TOOLS.manifest().replace("version = \"0.1.0\"", "version = \"0.2.0\"");
    replace_file(&dir.join("skill.toml"), manifest.as_bytes());
    wait_for(&mut events, "updated", is("updated", "text-tools")).await;
    assert_eq!(version(&registry, "text-tools"), "0.2.0");

    std::fs::remove_dir_all(&dir).unwrap();
    wait_for(&mut events, "removed", is("removed", "text-tools")).await;
    assert!(registry.entry("text-tools").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_shadowing_skill_reveals_the_lower_one() {
    let env = Env::new();
    limits_folder(env.bundled.path(), "1.0.0-bundled", "2s", "");
    let registry = env.open_watching().await;
    let mut events = registry.subscribe();
    assert_eq!(version(&registry, "limits"), "1.0.0-bundled");

    std::fs::write(env.ws().join("limits.wasm"), limits_packaged("2.0.0-workspace", "2s")).unwrap();
    wait_for(&mut events, "updated", is("updated", "limits")).await;
    let entry = registry.entry("limits").unwrap();
    assert_eq!((entry.layer, version(&registry, "limits").as_str()), (Layer::Workspace, "2.0.0-workspace"));
    assert_eq!(entry.shadows.len(), 1);

    std::fs::remove_file(env.ws().join("limits.wasm")).unwrap();
    wait_for(&mut events, "updated", is("updated", "limits")).await;
    assert_eq!((registry.entry("limits").unwrap().layer, version(&registry, "limits").as_str()), (Layer::Bundled, "1.0.0-bundled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_finishes_on_its_version() {
    let env = Env::new();
    // v1 allows 10 s per call, v2 only 300 ms: a 3 s sleep can only succeed on v1.
    let dir = limits_folder(env.ws(), "1.0.0", "10s", "");
    let registry = env.open_watching().await;
    let mut events = registry.subscribe();

    let long = tokio::spawn({
        let registry = registry.clone();
        async move { crate::call(&registry, "limits", "sleep", json!({"ms": 3000})).await }
    });
    // Let the call start (it takes its version on its first poll) before the swap.
    tokio::time::sleep(Duration::from_millis(200)).await;
    replace_file(&dir.join("skill.toml"), crate::limits_manifest("2.0.0", "300ms", "").as_bytes());
    wait_for(&mut events, "updated", is("updated", "limits")).await;
    assert_eq!(version(&registry, "limits"), "2.0.0");

    let err = call(&registry, "limits", "sleep", json!({"ms": 3000})).await.unwrap_err();
    assert!(matches!(err, RegistryError::Call(CallError { failure: CallFailure::Timeout { .. }, .. })), "a new call runs on v2: {err}");
    let out = long.await.unwrap().expect("the call started on v1 finishes on v1");
    assert_eq!(out.value, json!(3000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_new_skill_is_listed_and_fixed_by_the_next_write() {
    let env = Env::new();
    let registry = env.open_watching().await;
    let mut events = registry.subscribe();
    let dir = env.ws().join("limits");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("skill.toml"), LIMITS.manifest()).unwrap();
    wait_for(&mut events, "load failed", is("load_failed", "limits")).await;
    let err = call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap_err().to_string();
    assert!(err.contains("no skill.wasm"), "{err}");

    std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
    wait_for(&mut events, "updated", is("updated", "limits")).await;
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap().value, json!(1));
}
