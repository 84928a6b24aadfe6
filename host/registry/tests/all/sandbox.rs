//! The registry with the second runtime: `[server]` skills (FastMCP fixtures in
//! `tests/python/`, run in bubblewrap) are found, tiered, approved and hot-reloaded
//! exactly as WebAssembly skills are, side by side with them.

use std::sync::Arc;
use std::time::Duration;

use fixtures::{TEXT_TOOLS, python};
use serde_json::json;
use skillhost_core::{Policy, RiskTier, Runtimes, SkillRuntime};
use skillhost_registry::{Registry, RegistryConfig, RegistryError, RegistryEvent, TrustState};
use skillhost_sandbox::{BwrapConfig, BwrapRuntime};

use crate::{Env, HANG_GUARD, call, wait_for};

/// Both runtimes behind one, as the facade builds them.
fn runtimes(env: &Env) -> Arc<dyn SkillRuntime> {
    let mut config = BwrapConfig::new(env.data.path().join("sandbox"));
    config.venv = Some(python::venv());
    Arc::new(Runtimes {
        wasm: Some(crate::runtime()),
        server: Some(Arc::new(BwrapRuntime::new(config).expect("bwrap and prlimit are installed (scripts/setup.sh)"))),
        server_unavailable: None,
    })
}

async fn open(env: &Env, watch: bool) -> Arc<Registry> {
    let config: RegistryConfig = env.config(watch);
    let open = Registry::open(config, runtimes(env), Policy::new(env.data.path().join("skill-data")));
    tokio::time::timeout(HANG_GUARD, open).await.expect("open hung").expect("registry opens")
}

/// Install the probe fixture as `name` in the workspace, with `extra` in its skill.toml.
fn probe(env: &Env, name: &str, extra: &str) -> std::path::PathBuf {
    let staging = tempfile::tempdir().unwrap();
    let dir = python::install("sandbox-probe", staging.path(), extra);
    let target = env.ws().join(name);
    std::fs::create_dir(&target).unwrap();
    for file in ["server.py", "skill.toml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap().replace("name = \"sandbox-probe\"", &format!("name = \"{name}\""));
        std::fs::write(target.join(file), text).unwrap();
    }
    target
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_skills_have_the_same_tiers_and_approvals() {
    let env = Env::new();
    TEXT_TOOLS.folder(env.ws());
    probe(&env, "pure", "");
    probe(&env, "networked", "[network]\nallow = [\"https://example.com\"]\n");
    probe(&env, "keyed", "[[server.secrets]]\nname = \"api\"\nenv = \"API_KEY\"\n");
    probe(
        &env,
        "proxied",
        "[network]\nallow = [\"https://api.example.com\"]\n[[secrets]]\nname = \"api\"\nheader = \"Authorization\"\nformat = \"Bearer {}\"\nhosts = [\"https://api.example.com\"]\n[[server.secrets]]\nname = \"api\"\nenv = \"API_KEY\"\n",
    );
    let registry = open(&env, false).await;

    let runtime = |name: &str| registry.entry(name).unwrap().loaded.as_ref().map(|l| l.runtime);
    assert_eq!((runtime("text-tools"), runtime("pure")), (Some("wasm"), Some("bwrap")));
    let state = |name: &str| registry.entry(name).unwrap().state;
    assert_eq!(state("pure"), TrustState::Approved, "pure computation is approved automatically");
    let out = call(&registry, "pure", "echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(out.value["text"], "hi");

    for (name, tier) in [("networked", RiskTier::Confirm), ("keyed", RiskTier::Explicit)] {
        let request = registry.approval_request(name).unwrap();
        assert_eq!((request.tier, request.state), (tier, TrustState::PendingReview), "{name}");
        let err = call(&registry, name, "echo", json!({"text": "x"})).await.unwrap_err();
        assert!(matches!(err, RegistryError::NotCallable { .. }), "{err}");
        assert!(err.to_string().contains("skillhost approve"), "{err}");
    }
    let request = registry.approval_request("keyed").unwrap();
    assert!(
        request.requests.iter().any(|r| r.contains("secret `api` given to the server as environment variable `API_KEY`")),
        "{:?}",
        request.requests
    );
    assert!(request.requests.iter().any(|r| r.contains("runs `python server.py` in a bubblewrap sandbox")), "{:?}", request.requests);
    // A secret the proxy adds is shown as it is sent, and its variable as a placeholder.
    let proxied = registry.approval_request("proxied").unwrap().requests;
    assert!(
        proxied.iter().any(|r| r.starts_with("environment variable `API_KEY` holds a placeholder for secret `api`, never its value")),
        "{proxied:?}"
    );
    assert!(
        proxied.iter().any(|r| r.starts_with(
            "secret `api` sent as `Authorization: Bearer <secret api>` to https://api.example.com by the host's proxy, over HTTPS too"
        )),
        "{proxied:?}"
    );
    assert!(proxied.iter().all(|r| !r.contains("given to the server")), "{proxied:?}");

    // An approved skill whose declared secret is not set says how to set it.
    registry.approve("keyed", &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli).await.unwrap();
    let err = call(&registry, "keyed", "echo", json!({"text": "x"})).await.unwrap_err();
    assert!(err.to_string().contains("skillhost secret set api"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_need_reapproval_and_hot_reload_replaces_the_process() {
    let env = Env::new();
    // A writable data dir puts it in the explicit tier (network would need the egress
    // shim, which only the skillhost binary and the tests crate provide).
    let dir = probe(&env, "probe", "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n");
    let registry = open(&env, true).await;
    let mut events = registry.subscribe();
    let request = registry.approval_request("probe").unwrap();
    registry.approve("probe", &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli).await.unwrap();
    assert_eq!(call(&registry, "probe", "echo", json!({"text": "v1"})).await.unwrap().value["text"], "v1");
    let skills_dir = env.data.path().join("sandbox/skills");
    let old: Vec<String> = std::fs::read_dir(&skills_dir).unwrap().map(|e| e.unwrap().path().display().to_string()).collect();
    assert_eq!(old.len(), 1, "{old:?}");

    let server = std::fs::read_to_string(dir.join("server.py")).unwrap();
    let edited = server.replace("return {\"text\": text}", "return {\"text\": text + \" (v2)\"}");
    assert_ne!(server, edited, "the fixture changed");
    crate::replace_file(&dir.join("server.py"), edited.as_bytes());
    wait_for(
        &mut events,
        "state change",
        |e| matches!(e, RegistryEvent::StateChanged { name, state: TrustState::NeedsReapproval } if name.as_str() == "probe"),
    )
    .await;
    let err = call(&registry, "probe", "echo", json!({"text": "x"})).await.unwrap_err();
    assert!(matches!(err, RegistryError::NotCallable { state: TrustState::NeedsReapproval, .. }), "{err}");

    // The old version's server is gone with the old version.
    assert_eq!(wait_gone(&old[0]).await, 0, "the old server outlived its version");
    let request = registry.approval_request("probe").unwrap();
    assert!(request.content_changed);
    registry.approve("probe", &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli).await.unwrap();
    assert_eq!(call(&registry, "probe", "echo", json!({"text": "v"})).await.unwrap().value["text"], "v (v2)");
}

/// Wait until no process's command line mentions `needle`; the count left.
async fn wait_gone(needle: &str) -> usize {
    let count = || {
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                    .filter(|c| String::from_utf8_lossy(c).contains(needle))
                    .count()
            })
            .unwrap_or(0)
    };
    for _ in 0..200 {
        if count() == 0 {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    count()
}
