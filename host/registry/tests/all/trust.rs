//! Trust: every state transition, the approval request and its diff, the call errors
//! that name the fixing command, and persistence across restarts.

use std::sync::Arc;

use serde_json::json;
use skillhost_core::{CacheOutcome, RiskTier};
use skillhost_registry::{ApprovedBy, Registry, RegistryError, RegistryEvent, TrustState};
use skillhost_wasm::{WasmConfig, WasmRuntime};

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

/// A compiled cache of its own and a registry over it, for the compile-ahead tests.
struct Ahead {
    cache: tempfile::TempDir,
}

impl Ahead {
    /// The first load asks the component for its tools (compiling it with Winch, which
    /// nothing caches, and queueing nothing in the background for code no human approved)
    /// and keeps the listing, so that the next load of the same bytes compiles nothing.
    async fn new(env: &Env) -> Self {
        let ahead = Self { cache: tempfile::tempdir().unwrap() };
        drop(ahead.open(env, ahead.runtime()).await);
        assert_eq!(ahead.files(), 0, "the listing of unapproved code compiled nothing into the cache");
        ahead
    }

    /// A runtime with the baseline tier, as `serve`'s: the listing's compile is Winch's,
    /// which is never cached.
    fn runtime(&self) -> Arc<WasmRuntime> {
        let config = WasmConfig { cache_dir: Some(self.cache.path().to_owned()), baseline_compile: true, ..WasmConfig::default() };
        Arc::new(WasmRuntime::new(config).unwrap())
    }

    async fn open(&self, env: &Env, wasm: Arc<WasmRuntime>) -> Arc<Registry> {
        let policy = skillhost_core::Policy::new(env.data.path().join("skill-data"));
        Registry::open(env.config(false), wasm, policy).await.unwrap()
    }

    fn empty(&self) {
        std::fs::remove_dir_all(self.cache.path()).unwrap();
        std::fs::create_dir_all(self.cache.path()).unwrap();
    }

    fn files(&self) -> usize {
        files_in(self.cache.path())
    }

    /// Whether the cache holds code compiled from `bytes`.
    fn holds(&self, bytes: &[u8]) -> bool {
        use sha2::Digest;
        let name = format!("{}.cwasm", hex::encode(sha2::Sha256::digest(bytes)));
        std::fs::read_dir(self.cache.path()).unwrap().flatten().any(|engine| engine.path().join(&name).is_file())
    }
}

/// LIMITS' component with a custom section of its own: other bytes, the same code.
fn other_limits_bytes() -> Vec<u8> {
    let bytes = std::fs::read(fixtures::LIMITS.wasm).unwrap();
    skillhost_package::embed(&bytes, &[("skillhost-test-other", b"2".as_slice())]).unwrap()
}

/// A human's approval compiles the approved code ahead of its first call, into the
/// compiled cache, and nothing else is compiled ahead: a pending skill loaded from its
/// kept listing (nothing compiled at load) has nothing in the cache until it is approved;
/// then Cranelift's compile is queued and reaches the cache, and the skill stays callable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_compiles_the_approved_code_ahead_of_its_first_call() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let ahead = Ahead::new(&env).await;
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview);
    assert!(wasm.optimizing().is_empty() && ahead.files() == 0, "nothing compiled for code no human approved");

    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await, "the compile queued at approval finished");
    assert!(ahead.files() > 0, "the approved code is in the compiled cache");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
}

/// A pending skill keeps no code: what its first load compiled to list its tools (Winch's
/// code, never cached) goes once it listed them, and so do its component's bytes; a
/// human's approval compiles it ahead, from the file read again and checked against the
/// bytes approved, and it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_skill_keeps_no_code_until_its_approval_compiles_it() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let ahead = Ahead { cache: tempfile::tempdir().unwrap() };
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;
    let compiled = |registry: &Registry| registry.entry("limits").unwrap().loaded.as_ref().unwrap().compiled();
    assert_eq!(state(&registry, "limits"), TrustState::PendingReview);
    assert_eq!(compiled(&registry), Some(CacheOutcome::Deferred), "the listing's code went");
    assert_eq!(ahead.files(), 0);

    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert_eq!(ahead.files(), 1, "compiled ahead at approval, into the cache");
    assert_eq!(compiled(&registry), Some(CacheOutcome::Deferred), "and held by nothing until a call");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
    assert_eq!(compiled(&registry), Some(CacheOutcome::Hit), "the first call mapped it from the cache");
}

/// A skill approved as it loads (pure computation, auto-approved) whose tools were listed
/// with Winch's code (never cached) is compiled ahead as an approval's is: the listing's
/// code goes, Cranelift's reaches the cache, and the first call (as the next start's)
/// maps it from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_skill_listed_at_load_is_compiled_ahead_in_place_of_the_baseline_code() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", "");
    let ahead = Ahead { cache: tempfile::tempdir().unwrap() };
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;
    assert_eq!(state(&registry, "limits"), TrustState::Approved, "pure computation is auto-approved");
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await, "the compile queued at load finished");
    let compiled = |registry: &Registry| registry.entry("limits").unwrap().loaded.as_ref().unwrap().compiled();
    assert_eq!(compiled(&registry), Some(CacheOutcome::Deferred), "the listing's code went");
    assert!(ahead.holds(&std::fs::read(fixtures::LIMITS.wasm).unwrap()), "the approved code is in the compiled cache");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
    assert_eq!(compiled(&registry), Some(CacheOutcome::Hit), "the first call mapped it from the cache");
}

/// An approved skill called before its compile ahead started keeps its listing's code
/// for those calls; the compile then loads Cranelift's code in place of Winch's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_called_before_its_compile_ahead_moves_to_cranelifts_code() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", "");
    let ahead = Ahead { cache: tempfile::tempdir().unwrap() };
    let wasm = ahead.runtime();
    let held = wasm.hold_compiles().await;
    let registry = ahead.open(&env, wasm.clone()).await;
    let compiled = |registry: &Registry| registry.entry("limits").unwrap().loaded.as_ref().unwrap().compiled();
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap().value, json!(1));
    assert_eq!(compiled(&registry), Some(CacheOutcome::Baseline), "the first call ran the listing's code");
    drop(held);
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert_eq!(ahead.files(), 1, "the compile ahead filled the cache");
    assert_eq!(compiled(&registry), Some(CacheOutcome::Compiled), "Cranelift's code in place of Winch's");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 2})).await.unwrap().value, json!(2));
}

/// A compile queued at approval and cancelled before its turn (the approval withdrawn)
/// compiles and caches nothing; approved again, the skill is compiled and callable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_cancelled_before_its_turn_caches_nothing_and_the_next_approval_compiles_it() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let ahead = Ahead::new(&env).await;
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;

    let held = wasm.hold_compiles().await;
    approve_as_seen(&registry, "limits").await;
    assert_eq!(wasm.optimizing().len(), 1, "queued at approval");
    registry.reject("limits").await.unwrap();
    drop(held);
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert_eq!((ahead.files(), wasm.cache_stats().compiled), (0, 0), "nothing compiled once the approval was withdrawn");
    let refused = call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap_err();
    assert!(refused.to_string().contains("skillhost approve limits"), "{refused}");

    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert_eq!((ahead.files(), wasm.cache_stats().compiled), (1, 1), "approved again: compiled ahead");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
}

/// A compile queued at approval and overtaken by other bytes before its turn compiles
/// the approved bytes or nothing: the new bytes, not approved, are not compiled (nor
/// cached by their listing); once a human approves them they are, and the skill is
/// callable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_overtaken_by_new_bytes_compiles_nothing_for_the_bytes_nobody_approved() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let ahead = Ahead::new(&env).await;
    let wasm = ahead.runtime();
    let policy = skillhost_core::Policy::new(env.data.path().join("skill-data"));
    let registry = Registry::open(env.config(true), wasm.clone(), policy).await.unwrap();
    let mut events = registry.subscribe();

    let held = wasm.hold_compiles().await;
    approve_as_seen(&registry, "limits").await;
    let other = other_limits_bytes();
    std::fs::write(dir.join("skill.wasm"), &other).unwrap();
    crate::wait_for(&mut events, "the new bytes loaded", |e| matches!(e, RegistryEvent::Updated(n) if n.as_str() == "limits")).await;
    assert_ne!(state(&registry, "limits"), TrustState::Approved, "other bytes wait for a human");
    drop(held);
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert!(!ahead.holds(&other), "nothing compiled for the bytes nobody approved");
    let approved = std::fs::read(fixtures::LIMITS.wasm).unwrap();
    assert_eq!(ahead.files(), usize::from(ahead.holds(&approved)), "at most the approved bytes were compiled");

    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert!(ahead.holds(&other), "approved: compiled ahead");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
}

/// A compile that fails, here because the file it must read the approved bytes from again
/// (the cache held them at load, and lost them since) now holds other bytes, caches
/// nothing: the other bytes are never compiled in place of the approved ones, a call says
/// to reload, and the reloaded skill waits for a human, then compiles and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_compile_caches_nothing_and_never_compiles_bytes_swapped_under_it() {
    let env = Env::new();
    let dir = limits_folder(env.ws(), "0.1.0", "2s", WRITABLE);
    let ahead = Ahead::new(&env).await;
    // Approved, compiled into the cache, then the approval withdrawn: the next load takes
    // its listing from the kept one and, the cache holding its code, lets its bytes go.
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;
    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    registry.reject("limits").await.unwrap();
    drop(registry);
    assert_eq!(ahead.files(), 1);
    let wasm = ahead.runtime();
    let registry = ahead.open(&env, wasm.clone()).await;
    ahead.empty();

    let held = wasm.hold_compiles().await;
    approve_as_seen(&registry, "limits").await;
    let other = other_limits_bytes();
    std::fs::write(dir.join("skill.wasm"), &other).unwrap();
    drop(held);
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert_eq!((ahead.files(), wasm.cache_stats().compiled), (0, 0), "the swapped bytes were not compiled");
    let failed = call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap_err().to_string();
    assert!(failed.contains("holds other bytes than the ones loaded; reload the skill"), "{failed}");
    drop(registry);

    let registry = ahead.open(&env, wasm.clone()).await;
    assert_ne!(state(&registry, "limits"), TrustState::Approved, "other bytes wait for a human");
    assert!(!ahead.holds(&other), "nothing compiled for the bytes nobody approved");
    approve_as_seen(&registry, "limits").await;
    assert!(wasm.finish_optimizing(crate::HANG_GUARD).await);
    assert!(ahead.holds(&other), "approved: compiled ahead");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));
}
