//! The compiled-component cache: the second load of a component does not compile (seen
//! in the load outcome, the counters and on disk), a restart reuses it, and a changed
//! engine configuration does not load stale code.

use fixtures::{LIMITS, TestHost};
use serde_json::json;
use skillhost::{CacheOutcome, WasmConfig};

use crate::ok;

fn cwasm_files(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for entry in walk(dir) {
        if entry.extension().is_some_and(|e| e == "cwasm") {
            count += 1;
        }
    }
    count
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(Result::ok).flat_map(|e| if e.path().is_dir() { walk(&e.path()) } else { vec![e.path()] }).collect()
}

#[tokio::test]
async fn second_load_comes_from_the_cache_and_engine_changes_invalidate_it() {
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() };

    let first = TestHost::with_config(config.clone());
    let dir = LIMITS.folder(first.skills.path());
    let loaded = first.host.load_path_granted(&dir).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!((first.host.cache_stats().compiled, first.host.cache_stats().hits), (1, 0));
    assert_eq!(cwasm_files(cache.path()), 1, "one entry on disk");

    // Same runtime, second load: from the cache.
    let again = first.host.load_path_granted(&dir).await.unwrap();
    assert_eq!(again.cache_outcome(), Some(CacheOutcome::Hit));

    // A restarted host (new engine, same settings) loads from the cache and runs it.
    let restarted = TestHost::with_config(config.clone());
    let loaded = restarted.host.load_path_granted(&LIMITS.folder(restarted.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Hit));
    assert_eq!((restarted.host.cache_stats().compiled, restarted.host.cache_stats().hits), (0, 1));
    assert_eq!(ok(&loaded, "echo", json!({"value": 7})).await, json!(7));

    // A different engine configuration compiles again, beside the old entry.
    let changed = TestHost::with_config(WasmConfig { optimize: false, ..config.clone() });
    let loaded = changed.host.load_path_granted(&LIMITS.folder(changed.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!(cwasm_files(cache.path()), 2);
    assert_eq!(ok(&loaded, "echo", json!({"value": 8})).await, json!(8));
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() };
    let first = TestHost::with_config(config.clone());
    first.host.load_path_granted(&LIMITS.folder(first.skills.path())).await.unwrap();
    let entry = walk(cache.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm")).unwrap();
    std::fs::write(&entry, b"not compiled code").unwrap();

    let second = TestHost::with_config(config);
    let loaded = second.host.load_path_granted(&LIMITS.folder(second.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!(ok(&loaded, "echo", json!({"value": "fine"})).await, json!("fine"));
}
