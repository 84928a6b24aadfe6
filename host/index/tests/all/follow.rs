//! Following a watching registry: a skill dropped into the skills folder becomes
//! searchable once the registry reloads it; a removed one never comes back.

use std::sync::Arc;
use std::time::Duration;

use skillhost_core::Policy;
use skillhost_index::{Query, SearchIndex, Target};
use skillhost_registry::{Registry, RegistryConfig};

use crate::{runtime, write_skill};

/// A guard against a hung host: nothing here should take this long.
const HANG_GUARD: Duration = Duration::from_secs(30);

async fn skills(index: &SearchIndex, text: &str) -> Vec<String> {
    index.search(&Query::new(text, Target::Skills)).unwrap().hits.into_iter().map(|h| h.skill).collect()
}

/// Poll until `check` holds for the search results of `text`.
async fn wait_until(index: &SearchIndex, text: &str, what: &str, check: impl Fn(&[String]) -> bool) {
    let wait = async {
        loop {
            if check(&skills(index, text).await) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(HANG_GUARD, wait).await.is_err() {
        panic!("{what}: search for `{text}` gave {:?}", skills(index, text).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_in_skills_are_found_and_removed_ones_never_return() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    write_skill(workspace.path(), "release-notes", "How we write release notes", "Group changes by crate.");
    let mut config = RegistryConfig::new(data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = true;
    let open = Registry::open(config, runtime(), Policy::new(data.path().join("skill-data")));
    let registry = tokio::time::timeout(HANG_GUARD, open).await.unwrap().unwrap();

    let index = Arc::new(SearchIndex::new().unwrap());
    let task = index.follow(registry.clone());
    wait_until(&index, "release notes", "initial sync", |s| s == ["release-notes"]).await;

    write_skill(workspace.path(), "uptime-runbook", "What to do when the site is down", "Check the status page first.");
    wait_until(&index, "site down", "dropped-in skill", |s| s.first().map(String::as_str) == Some("uptime-runbook")).await;

    std::fs::remove_dir_all(workspace.path().join("uptime-runbook")).unwrap();
    wait_until(&index, "site down", "removed skill", |s| !s.iter().any(|n| n == "uptime-runbook")).await;
    // It stays gone: a full resync from the catalog agrees with the events.
    index.sync(&registry).unwrap();
    assert!(!skills(&index, "site down status page").await.iter().any(|n| n == "uptime-runbook"));
    assert_eq!(skills(&index, "release notes").await, ["release-notes"]);
    task.abort();
}
