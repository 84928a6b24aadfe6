//! Integration tests of the registry: one binary, one module per concern, real
//! components built from source by the `skillhost-tests` fixtures. Every wait is
//! guarded by a timeout; no test asserts on timing.

mod agent_skills;
mod discovery;
mod install;
mod packs;
mod sandbox;
mod stats;
mod trust;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fixtures::LIMITS;
use serde_json::Value;
use skillhost_core::{CallContext, Policy, SkillRuntime, ToolOutput};
use skillhost_package as package;
use skillhost_registry::{Registry, RegistryConfig, RegistryError, RegistryEvent};
use skillhost_wasm::{WasmConfig, WasmRuntime};
use tempfile::TempDir;

/// A guard against a hung host: nothing in these tests should take this long.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Fresh data, workspace and bundled directories (the user layer is the default one,
/// inside the data dir).
struct Env {
    data: TempDir,
    workspace: TempDir,
    bundled: TempDir,
}

impl Env {
    fn new() -> Self {
        Self { data: tempfile::tempdir().unwrap(), workspace: tempfile::tempdir().unwrap(), bundled: tempfile::tempdir().unwrap() }
    }

    fn config(&self, watch: bool) -> RegistryConfig {
        let mut config = RegistryConfig::new(self.data.path());
        config.workspace = Some(self.workspace.path().to_owned());
        config.bundled = Some(self.bundled.path().to_owned());
        config.watch = watch;
        config
    }

    fn user(&self) -> PathBuf {
        self.config(false).user
    }

    fn ws(&self) -> &Path {
        self.workspace.path()
    }

    /// A registry that does not watch (tests rescan by reopening).
    async fn open(&self) -> Arc<Registry> {
        self.open_with(self.config(false)).await
    }

    /// A registry that watches its layers.
    async fn open_watching(&self) -> Arc<Registry> {
        self.open_with(self.config(true)).await
    }

    async fn open_with(&self, config: RegistryConfig) -> Arc<Registry> {
        let open = Registry::open(config, runtime(), Policy::new(self.data.path().join("skill-data")));
        tokio::time::timeout(HANG_GUARD, open).await.expect("open hung").expect("registry opens")
    }
}

/// A WebAssembly runtime over the compiled cache shared by all tests.
fn runtime() -> Arc<dyn SkillRuntime> {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("registry-compiled");
    Arc::new(WasmRuntime::new(WasmConfig { cache_dir: Some(cache), ..WasmConfig::default() }).unwrap())
}

/// The LIMITS manifest with another version and timeout, plus `extra` TOML at the end.
fn limits_manifest(version: &str, timeout: &str, extra: &str) -> String {
    let text = LIMITS
        .manifest()
        .replace("version = \"0.1.0\"", &format!("version = \"{version}\""))
        .replace("timeout = \"2s\"", &format!("timeout = \"{timeout}\""));
    assert!(text.contains(version) && text.contains(timeout), "the fixture manifest changed: {text}");
    format!("{text}\n{extra}")
}

/// A LIMITS folder in `parent` with the given manifest changes.
fn limits_folder(parent: &Path, version: &str, timeout: &str, extra: &str) -> PathBuf {
    let dir = LIMITS.folder(parent);
    std::fs::write(dir.join("skill.toml"), limits_manifest(version, timeout, extra)).unwrap();
    dir
}

/// LIMITS as one `.wasm` with the given manifest embedded.
fn limits_packaged(version: &str, timeout: &str) -> Vec<u8> {
    let bytes = std::fs::read(LIMITS.wasm).unwrap();
    package::embed(&bytes, &[(package::MANIFEST_SECTION, limits_manifest(version, timeout, "").as_bytes())]).unwrap()
}

/// Asks for a writable directory: tier explicit, so it starts `pending_review`.
const WRITABLE: &str = "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n";

async fn call(registry: &Registry, skill: &str, tool: &str, input: Value) -> Result<ToolOutput, RegistryError> {
    tokio::time::timeout(HANG_GUARD, registry.call(skill, tool, input, CallContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{skill}.{tool} did not return within {HANG_GUARD:?}"))
}

/// Wait for the first event that `pred` accepts; fails the test after [`HANG_GUARD`].
async fn wait_for(
    events: &mut tokio::sync::broadcast::Receiver<RegistryEvent>,
    what: &str,
    pred: impl Fn(&RegistryEvent) -> bool,
) -> RegistryEvent {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(event) if pred(&event) => return event,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream closed: {e}"),
            }
        }
    };
    tokio::time::timeout(HANG_GUARD, wait).await.unwrap_or_else(|_| panic!("no {what} event within {HANG_GUARD:?}"))
}

/// Write `bytes` to `path` atomically (write beside, rename), as editors and `cp` to a
/// temp name do.
fn replace_file(path: &Path, bytes: &[u8]) {
    let tmp = path.with_file_name(format!(".{}.tmp", path.file_name().unwrap().to_str().unwrap()));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
