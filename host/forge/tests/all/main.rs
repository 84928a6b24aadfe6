//! Integration tests of the forge: real sandboxed cargo builds of submitted crates, real
//! Python servers in bubblewrap, a real registry. One binary, one module per concern;
//! no test asserts on timing (waits are guarded by a timeout against hangs only).

mod contain;
mod pipeline;
mod stage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillhost_core::{CallContext, Policy, Runtimes, SkillRuntime};
use skillhost_forge::{Forge, ForgeConfig, ForgeError, Forged, Progress, Submission};
use skillhost_registry::{Registry, RegistryConfig};
use skillhost_sandbox::{BwrapConfig, BwrapRuntime};
use skillhost_wasm::{WasmConfig, WasmRuntime};
use tempfile::TempDir;

/// A guard against a hung forge: a cold sandboxed build on a loaded two-core machine
/// takes a few minutes at most.
const HANG_GUARD: Duration = Duration::from_secs(900);

/// The checkout (holding guest-sdk/, wit/ and the workspace Cargo.toml).
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The test venv made by scripts/setup.sh (or `$SKILLHOST_TEST_VENV`).
fn venv() -> PathBuf {
    std::env::var_os("SKILLHOST_TEST_VENV").map(PathBuf::from).unwrap_or_else(|| checkout().join("target/python"))
}

/// A forge over a fresh data dir, with a registry on both runtimes.
struct Env {
    data: TempDir,
    registry: Arc<Registry>,
    forge: Forge,
}

impl Env {
    async fn new(max_attempts: u32) -> Self {
        let data = tempfile::tempdir().unwrap();
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("forge-compiled");
        let wasm = Arc::new(WasmRuntime::new(WasmConfig { cache_dir: Some(cache), ..WasmConfig::default() }).unwrap());
        let mut sandbox = BwrapConfig::new(data.path().join("sandbox"));
        sandbox.venv = Some(venv());
        let sandbox = BwrapRuntime::new(sandbox).expect("bwrap and prlimit are installed (scripts/setup.sh)");
        let runtime: Arc<dyn SkillRuntime> =
            Arc::new(Runtimes { wasm: Some(wasm), server: Some(Arc::new(sandbox)), server_unavailable: None });
        let mut config = RegistryConfig::new(data.path());
        config.watch = false;
        let registry = Registry::open(config, runtime.clone(), Policy::new(data.path().join("skills"))).await.unwrap();
        let mut forge_config = ForgeConfig::new(data.path().join("forge"));
        forge_config.sdk_workspace = Some(checkout());
        forge_config.max_attempts = max_attempts;
        // The registry's runtimes hold no secret source and no network here, like the
        // probe runtimes a host makes for its forge.
        let forge = Forge::new(forge_config, registry.clone(), runtime);
        Self { data, registry, forge }
    }

    fn forge_dir(&self) -> PathBuf {
        self.data.path().join("forge")
    }

    async fn create(&self, submission: Submission) -> Result<Forged, ForgeError> {
        tokio::time::timeout(HANG_GUARD, self.forge.create(submission, quiet())).await.expect("the forge hung")
    }

    async fn update(&self, name: &str, files: &[(&str, &str)]) -> Result<Forged, ForgeError> {
        tokio::time::timeout(HANG_GUARD, self.forge.update(name, files_of(files), quiet())).await.expect("the forge hung")
    }

    async fn call(&self, skill: &str, tool: &str, input: serde_json::Value) -> serde_json::Value {
        self.registry.call(skill, tool, input, CallContext::default()).await.unwrap().value
    }

    /// Approve `name` as a human would, after reading its request.
    async fn approve(&self, name: &str) {
        let request = self.registry.approval_request(name).unwrap();
        self.registry
            .approve(name, &request.content_hash, &request.capability_digest, skillhost_registry::ApprovalChannel::Cli)
            .await
            .unwrap();
    }
}

fn quiet() -> Progress {
    Arc::new(|_: &str| {})
}

fn files_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
}

fn rust(name: &str, files: &[(&str, &str)]) -> Submission {
    Submission { name: name.into(), language: skillhost_forge::Language::Rust, files: files_of(files) }
}

fn python(name: &str, files: &[(&str, &str)]) -> Submission {
    Submission { name: name.into(), language: skillhost_forge::Language::Python, files: files_of(files) }
}
