//! Trust: every state transition, the approval request and its diff, the call errors
//! that name the fixing command, and persistence across restarts.

use serde_json::json;
use skillhost_core::RiskTier;
use skillhost_registry::{ApprovedBy, Registry, RegistryError, TrustState};

use crate::{Env, WRITABLE, call, limits_folder};

fn state(registry: &Registry, name: &str) -> TrustState {
    registry.entry(name).unwrap().state
}

async fn approve_as_seen(registry: &Registry, name: &str) {
    let request = registry.approval_request(name).unwrap();
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unapproved_skill_cannot_be_called_and_says_how_to_approve() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview);
    let err = call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap_err();
    assert!(matches!(err, RegistryError::NotCallable { state: TrustState::PendingReview, .. }), "{err:?}");
    assert_eq!(err.to_string(), "skill `limits` is pending review; approve it with `skillhost approve limits`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_request_shows_requests_and_binds_to_what_was_seen() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let registry = env.open().await;
    let request = registry.approval_request("limits").unwrap();
    assert_eq!((request.tier, request.state, request.version.as_str()), (RiskTier::Explicit, TrustState::PendingReview, "0.1.0"));
    let data_dir = env.data.path().join("skill-data").join(registry.entry("limits").unwrap().identity.as_str());
    assert!(
        request.requests.contains(&format!("files `.` in its data dir ({}): read-write", data_dir.display())),
        "{:?}",
        request.requests
    );
    assert!(request.requests.contains(&"limit timeout: 2s".to_owned()), "{:?}", request.requests);
    assert!(request.diff.is_empty(), "a first approval has nothing to compare with: {:?}", request.diff);
    assert_eq!(request.last_approved_by, None);

    // Reviewed one version, another is on disk by approval time: nothing is approved.
    let err = registry
        .approve("limits", &"0".repeat(64), &request.capability_digest, skillhost_registry::ApprovalChannel::Cli)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("changed since it was reviewed"), "{err}");
    let err = registry.approve("limits", &request.content_hash, "other", skillhost_registry::ApprovalChannel::Cli).await.unwrap_err();
    assert!(matches!(err, RegistryError::ChangedSinceReview { what: "capability digest", .. }), "{err}");
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview);

    registry.approve("limits", &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli).await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::Approved);
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 2})).await.unwrap().value, json!(2));
    assert_eq!(registry.approval_request("limits").unwrap().diff, Vec::<String>::new(), "nothing changed since approval");
    drop(registry);

    // Narrowed (a shorter timeout): still a different digest, so reapproval, and the
    // diff shows both sides.
    std::fs::write(dir.join("skill.toml"), crate::limits_manifest("0.1.0", "1s", WRITABLE)).unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::NeedsReapproval);
    let err = call(&registry, "limits", "echo", json!({"value": 3})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "skill `limits` changed since it was approved and needs reapproval; review the changes and approve it with `skillhost approve limits`"
    );
    let request = registry.approval_request("limits").unwrap();
    assert!(request.content_changed);
    assert_eq!(request.last_approved_by, Some(ApprovedBy::Human));
    assert_eq!(request.diff, ["+ limit timeout: 1s", "- limit timeout: 2s"]);
    approve_as_seen(&registry, "limits").await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_disable_enable() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let registry = env.open().await;
    let mut events = registry.subscribe();
    approve_as_seen(&registry, "limits").await;
    assert_eq!(
        events.try_recv().unwrap(),
        skillhost_registry::RegistryEvent::StateChanged {
            name: registry.entry("limits").unwrap().name.clone(),
            state: TrustState::Approved
        }
    );

    registry.reject("limits").await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview, "approved -> rejected");
    approve_as_seen(&registry, "limits").await;

    registry.disable("limits").await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::Disabled);
    let err = call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap_err();
    assert_eq!(err.to_string(), "skill `limits` is disabled; enable it with `skillhost enable limits`");
    let request = registry.approval_request("limits").unwrap();
    let err = registry
        .approve("limits", &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("enable it with"), "approve does not lift disabled: {err}");
    registry.reject("limits").await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::Disabled, "reject does not lift disabled");
    drop(registry);

    // Disabled sticks across a change and a restart.
    std::fs::write(dir.join("SKILL.md"), "---\nname: limits\ndescription: changed\n---\n").unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Disabled);
    registry.enable("limits").await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview, "it was rejected, then changed: back to review");
    approve_as_seen(&registry, "limits").await;
    registry.disable("limits").await.unwrap();
    registry.enable("limits").await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::Approved, "enable restores a matching approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_tier_is_approved_automatically_unless_rejected() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", "");
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved);
    assert_eq!(registry.approval_request("limits").unwrap().last_approved_by, Some(ApprovedBy::Auto));
    assert_eq!(registry.approval_request("limits").unwrap().last_approved_via, Some(skillhost_registry::ApprovalChannel::Auto));
    registry.reject("limits").await.unwrap();
    drop(registry);

    std::fs::write(dir.join("SKILL.md"), "---\nname: limits\ndescription: v2\n---\n").unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview, "a rejected auto skill waits for a human");
    approve_as_seen(&registry, "limits").await;
    assert_eq!(registry.approval_request("limits").unwrap().last_approved_by, Some(ApprovedBy::Human));
    assert_eq!(registry.approval_request("limits").unwrap().last_approved_via, Some(skillhost_registry::ApprovalChannel::Cli));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_persist_and_offline_edits_need_reapproval() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let registry = env.open().await;
    approve_as_seen(&registry, "limits").await;
    drop(registry);

    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved, "approval survives a restart");
    drop(registry);

    // Edited while the host is stopped.
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/helper.sh"), "echo hi\n").unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::NeedsReapproval);
    drop(registry);

    // Still so after another restart, and reverting the edit restores the approval.
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::NeedsReapproval);
    drop(registry);
    std::fs::remove_dir_all(dir.join("scripts")).unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved, "the approved content again");
}

/// Every approval is kept: going back to a version a human approved earlier (a rollback)
/// is approved again without asking; a version never approved is not; a rejection drops
/// the whole history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_approved_version_is_approved_again_until_rejected() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let v1 = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
    let registry = env.open().await;
    approve_as_seen(&registry, "limits").await;
    drop(registry);

    limits_folder(env.ws(), "0.2.0", "2s", WRITABLE);
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::NeedsReapproval);
    approve_as_seen(&registry, "limits").await;
    drop(registry);

    std::fs::write(dir.join("skill.toml"), &v1).unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved, "v1 was approved by a human before");
    assert_eq!(registry.approval_request("limits").unwrap().last_approved_by, Some(ApprovedBy::Human));
    drop(registry);

    limits_folder(env.ws(), "0.3.0", "2s", WRITABLE);
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::NeedsReapproval, "a version never approved still waits");
    registry.reject("limits").await.unwrap();
    drop(registry);

    std::fs::write(dir.join("skill.toml"), &v1).unwrap();
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview, "a rejection drops every earlier approval");
}

/// A schema-1 store (before approvals were kept per version) is migrated with its
/// approvals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_1_store_keeps_its_approvals() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let registry = env.open().await;
    approve_as_seen(&registry, "limits").await;
    drop(registry);
    let db = rusqlite::Connection::open(env.data.path().join("trust.db")).unwrap();
    db.execute_batch("DROP TABLE approvals; PRAGMA user_version = 1;").unwrap();
    drop(db);
    let registry = env.open().await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved);
    // A workspace skill's record is under its identity, not its bare name.
    let identity = registry.entry("limits").unwrap().identity.as_str().to_owned();
    assert!(identity.starts_with(".workspace-") && identity.ends_with("/limits"), "{identity}");
    drop(registry);
    let db = rusqlite::Connection::open(env.data.path().join("trust.db")).unwrap();
    let kept: i64 = db.query_row("SELECT count(*) FROM approvals WHERE name = ?1", [&identity], |r| r.get(0)).unwrap();
    assert_eq!(kept, 1);
    let version: i64 = db.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, 3, "migrated through 2 to 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_store_is_versioned() {
    let env = Env::new();
    drop(env.open().await);
    let db = rusqlite::Connection::open(env.data.path().join("trust.db")).unwrap();
    let version: i64 = db.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    let mode: String = db.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
    assert_eq!((version, mode.as_str()), (3, "wal"));
    db.pragma_update(None, "user_version", 99).unwrap();
    drop(db);
    let err = match Registry::open(env.config(false), crate::runtime(), skillhost_core::Policy::new(env.data.path())).await {
        Ok(_) => panic!("a newer schema must not be opened"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("schema version 99 is newer") && err.contains("upgrade skillhost"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_asks_to_confirm_and_shows_its_hosts() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", "[network]\nallow = [\"https://api.example.com\"]\n");
    let registry = env.open().await;
    let request = registry.approval_request("limits").unwrap();
    assert_eq!((request.tier, request.state), (RiskTier::Confirm, TrustState::PendingReview));
    assert!(request.requests.contains(&"network allow: https://api.example.com".to_owned()), "{:?}", request.requests);
}

/// Files under `dir`, recursively.
fn files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| if e.path().is_dir() { files_in(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// A human's approval compiles the approved code ahead of its first call, into the
/// compiled cache, and nothing else is compiled ahead: a pending skill loaded from its
/// kept listing (nothing compiled at load) has nothing in the cache until it is approved;
/// then Cranelift's compile is queued and reaches the cache, and the skill stays callable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_compiles_the_approved_code_ahead_of_its_first_call() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let cache = tempfile::tempdir().unwrap();
    let runtime = || {
        std::sync::Arc::new(
            skillhost_wasm::WasmRuntime::new(skillhost_wasm::WasmConfig {
                cache_dir: Some(cache.path().to_owned()),
                ..skillhost_wasm::WasmConfig::default()
            })
            .unwrap(),
        )
    };
    let open = |wasm: std::sync::Arc<skillhost_wasm::WasmRuntime>| {
        let policy = skillhost_core::Policy::new(env.data.path().join("skill-data"));
        Registry::open(env.config(false), wasm, policy)
    };
    // The first load asks the component for its tools (compiling it) and keeps the listing.
    drop(open(runtime()).await.unwrap());
    std::fs::remove_dir_all(cache.path()).unwrap();
    std::fs::create_dir_all(cache.path()).unwrap();

    let wasm = runtime();
    let registry = open(wasm.clone()).await.unwrap();
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview);
    assert!(wasm.optimizing().is_empty() && files_in(cache.path()) == 0, "nothing compiled for code no human approved");

    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await, "the compile queued at approval finished");
    assert!(files_in(cache.path()) > 0, "the approved code is in the compiled cache");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
}
