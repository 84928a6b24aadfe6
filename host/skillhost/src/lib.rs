//! skillhost as a library: load skills, list their tools, call them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), skillhost::HostError> {
//! use skillhost::{CallContext, Host};
//!
//! let host = Host::builder().data_dir("/tmp/skillhost-data").build()?;
//! host.load_path("skills/text-tools".as_ref()).await?;
//! let out = host
//!     .call("text-tools", "word_count", serde_json::json!({"text": "one two"}), CallContext::default())
//!     .await?;
//! println!("{}", out.value);
//! # Ok(()) }
//! ```
//!
//! Every skill runs holding only its [`Grant`]: what its manifest asks for, within the
//! host's [`Policy`], once someone approved it. A skill loaded directly by its path is not
//! approved: [`Host::load_path`] runs it under a [probe grant](Grant::probe) (a scratch
//! `/data`, no network, no secrets, a short deadline) and [`Host::load_path_granted`] is
//! the caller's own approval of what it asks for. Nothing here knows which runtime runs a
//! skill: it speaks to the [`Skill`] trait.

pub mod audit;
pub mod secrets;

/// The forge: build, test and install skills from source ([`Host::forge`]).
pub use skillhost_forge as forge;
pub use skillhost_forge::{Forge, ForgeConfig, ForgeError, Forged, Language, Submission};

/// The MCP front: serve a [`Registry`] to agents over stdio, streamable HTTP or any
/// rmcp transport (an editor can serve it in-process over an in-memory pipe).
pub use skillhost_mcp as mcp;

/// The search index: BM25 over skills and tools, hybrid with the local embedding model.
pub use skillhost_index as index;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

pub use skillhost_core::{
    Annotations, ByteSize, CallContext, CallError, DataKey, FileMode, Grant, Limits, LoadError, Policy, Progress, ProgressSink, RiskTier,
    Skill, SkillManifest, SkillName, SkillSource, ToolOutput, ToolSpec, fmt_duration, parse_duration, parse_size,
};
pub use skillhost_core::{AuditSink, Denial, EgressOutcome, EgressPolicy, EgressRecord, Resolver, SecretBinding, SecretSource};
pub use skillhost_sandbox::check::{TestReport, TestRun};
pub use skillhost_sandbox::{BwrapConfig, BwrapRuntime, Venv, python, shim};
pub use skillhost_wasm::{CacheOutcome, CacheStats, NetConfig, SystemResolver, WasmConfig};

/// The skill package: the one reader of a skill's files, a component's custom sections,
/// WIT reflection.
pub use skillhost_package as package;

pub use skillhost_registry::{
    ApprovalChannel, ApprovalRequest, ApprovedBy, Entry, Layer, Loaded, Registry, RegistryConfig, RegistryError, RegistryEvent, TrustState,
};

use crate::audit::AuditLog;
use crate::secrets::SecretStore;
use skillhost_core::{Runtimes, SkillCode};
use skillhost_wasm::WasmRuntime;

/// Why the host could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// No loaded skill has that name.
    #[error("no skill named `{name}` is loaded{}; run `skillhost list` to see the skills", if available.is_empty() { String::new() } else { format!(" (loaded: {})", available.join(", ")) })]
    UnknownSkill {
        /// The name asked for.
        name: String,
        /// The loaded skills.
        available: Vec<String>,
    },
    /// Two skills in one directory have the same name.
    #[error("{}: a skill named `{name}` is already loaded from {}; rename one of them", path.display(), existing.display())]
    Duplicate {
        /// The skill's name.
        name: SkillName,
        /// The one being loaded.
        path: PathBuf,
        /// The one loaded first.
        existing: PathBuf,
    },
    /// A skill failed to load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The registry refused or failed (not approved, unknown skill, bad install...).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A skill's files could not be read (a symbolic link, a special file, a size cap).
    #[error(transparent)]
    Read(package::ReadError),
    /// The runtime could not start, or a directory could not be read.
    #[error("{0}")]
    Setup(String),
}

/// A loaded skill and where it came from.
#[derive(Clone)]
pub struct LoadedSkill {
    /// The skill.
    pub skill: Arc<dyn Skill>,
    /// Its manifest.
    pub manifest: SkillManifest,
    /// The file or folder it was loaded from.
    pub origin: PathBuf,
    /// Its SKILL.md, when present.
    pub instructions: Option<String>,
    /// The runtime that runs it (`wasm`, `bwrap`).
    pub runtime: &'static str,
    /// Whether this load compiled the component or took it from the cache (always `Hit`
    /// for a server skill: nothing is compiled).
    pub cache: CacheOutcome,
    /// What its skill.toml asks for, within the host's policy: what approving it (or
    /// [`Access::Granted`]) gives it. It runs with this grant only when `access` says so.
    pub asked: Grant,
    /// What it was loaded with.
    pub access: Access,
    /// The scratch dir of a probe grant, removed with the last clone.
    _scratch: Option<Arc<tempfile::TempDir>>,
}

/// What a skill loaded directly (not through the registry's trust store) runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The [probe grant](Grant::probe): a fresh scratch dir at `/data`, no network (a
    /// component's requests are refused by the gate), no secrets, the deadline cut to
    /// [`PROBE_TIMEOUT`](skillhost_core::PROBE_TIMEOUT). What code nobody approved gets.
    Probe,
    /// Everything its skill.toml asks for, within the host's policy: the caller approves it.
    Granted,
}

/// Builds a [`Host`].
#[derive(Debug, Default)]
pub struct HostBuilder {
    data_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    baseline_compile: Option<bool>,
    wasm: Option<WasmConfig>,
    sandbox: Option<BwrapConfig>,
    policy: Option<Policy>,
}

impl HostBuilder {
    /// Where skills' data dirs live (`<dir>/skills/<name>/`). Required.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Where compiled components are cached. Default: `<data_dir>/cache`, unless
    /// [`wasm_config`](Self::wasm_config) says otherwise; this setting wins over both.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Whether an uncached component's first calls run on Winch's code while Cranelift
    /// compiles it in the background ([`WasmConfig::baseline_compile`]); this setting wins
    /// over [`wasm_config`](Self::wasm_config)'s. Default: on. A process that exits after
    /// one call (a command line) wants it off: it would wait at exit for the background
    /// compile, or lose it, and the compiled cache keeps only Cranelift's code.
    pub fn baseline_compile(mut self, on: bool) -> Self {
        self.baseline_compile = Some(on);
        self
    }

    /// WebAssembly runtime settings, used as given: a `cache_dir` of `None` turns the
    /// compiled cache off. Default: [`WasmConfig::default`] with the cache in
    /// `<data_dir>/cache` and `baseline_compile` on (an uncached component's first calls
    /// run on Winch's code while Cranelift compiles it). Whatever `net` says, the host's secret store
    /// (`<data_dir>/secrets`) and audit log (`<data_dir>/audit.db`) are plugged in.
    pub fn wasm_config(mut self, config: WasmConfig) -> Self {
        self.wasm = Some(config);
        self
    }

    /// Sandbox runtime settings for `[server]` skills (stdio MCP servers in bubblewrap).
    /// Default: [`BwrapConfig::new`] over `<data_dir>/sandbox` with the managed venv at
    /// `<data_dir>/python` (see `skillhost setup python`). Whatever it says, the host's
    /// secret store is plugged in and its `net` is the WebAssembly runtime's (one egress,
    /// one audit log, for both runtimes). Without `bwrap` on the host, server skills fail to load
    /// with an error saying so; WebAssembly skills are unaffected.
    pub fn sandbox_config(mut self, config: BwrapConfig) -> Self {
        self.sandbox = Some(config);
        self
    }

    /// What skills may be granted. Default: [`Policy::new`] over `<data_dir>/skills`.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Start the host.
    pub fn build(self) -> Result<Host, HostError> {
        let data_dir = self.data_dir.ok_or_else(|| HostError::Setup("no data directory given; call HostBuilder::data_dir".into()))?;
        let mut wasm = self.wasm.unwrap_or_else(|| WasmConfig {
            cache_dir: Some(data_dir.join("cache")),
            baseline_compile: true,
            ..WasmConfig::default()
        });
        if let Some(dir) = self.cache_dir {
            wasm.cache_dir = Some(dir);
        }
        if let Some(on) = self.baseline_compile {
            wasm.baseline_compile = on;
        }
        let secrets = SecretStore::new(data_dir.join("secrets"));
        let audit = AuditLog::open(data_dir.join("audit.db")).map_err(|e| HostError::Setup(e.to_string()))?;
        wasm.net.secrets = Arc::new(secrets.clone());
        wasm.net.audit = audit.clone();
        let mut sandbox_config = self.sandbox.unwrap_or_else(|| {
            let mut config = BwrapConfig::new(data_dir.join("sandbox"));
            config.venv = Some(data_dir.join("python"));
            config
        });
        sandbox_config.secrets = Arc::new(secrets.clone());
        // One egress for both runtimes: the same resolver, secrets and audit log.
        sandbox_config.net = Arc::new(wasm.net.clone());
        let runtime = WasmRuntime::new(wasm).map_err(|e| HostError::Setup(e.to_string()))?;
        let sandbox = BwrapRuntime::new(sandbox_config).map_err(|e| e.to_string());
        if let Err(e) = &sandbox {
            tracing::debug!("no sandbox runtime: {e}");
        }
        let policy = self.policy.unwrap_or_else(|| Policy::new(data_dir.join("skills")));
        Ok(Host {
            runtime,
            sandbox,
            policy,
            secrets,
            audit,
            skills: RwLock::new(BTreeMap::new()),
            data_dir,
            index: std::sync::Mutex::default(),
        })
    }
}

/// Loads skills and calls their tools.
pub struct Host {
    runtime: WasmRuntime,
    sandbox: Result<BwrapRuntime, String>,
    policy: Policy,
    secrets: SecretStore,
    audit: Arc<AuditLog>,
    skills: RwLock<BTreeMap<SkillName, LoadedSkill>>,
    data_dir: PathBuf,
    /// Opened on first use (one per host: the writer lock is per process).
    index: std::sync::Mutex<Option<Arc<skillhost_index::SearchIndex>>>,
}

impl Host {
    /// Start building a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The policy skills are granted under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The secret store the egress gate reads.
    pub fn secrets(&self) -> &SecretStore {
        &self.secrets
    }

    /// The audit log of outbound requests.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Counters of the compiled-component cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.runtime.cache_stats()
    }

    /// The sandbox runtime for `[server]` skills, or why there is none.
    pub fn sandbox(&self) -> Result<&BwrapRuntime, &str> {
        self.sandbox.as_ref().map_err(String::as_str)
    }

    /// Both runtimes behind one [`skillhost_core::SkillRuntime`] that routes by code.
    fn runtimes(&self) -> Runtimes {
        Runtimes {
            wasm: Some(Arc::new(self.runtime.clone())),
            server: self.sandbox.as_ref().ok().map(|s| Arc::new(s.clone()) as Arc<dyn skillhost_core::SkillRuntime>),
            server_unavailable: self.sandbox.as_ref().err().cloned(),
        }
    }

    /// Where `skillhost setup model` installs the embedding model: `<data_dir>/model`
    /// (`SKILLHOST_MODEL_DIR` overrides it).
    pub fn model_dir(&self) -> PathBuf {
        self.data_dir.join("model")
    }

    /// This host's search index, opened on first use: on disk in `<data_dir>/index`,
    /// hybrid when the embedding model is installed (see [`Host::model_dir`]), BM25
    /// otherwise (said once in the log). Sync it with a registry before searching
    /// (`SearchIndex::sync` or `follow`). What is on disk never stops it from opening
    /// (see `SearchIndex::open`).
    pub fn search_index(&self) -> Result<Arc<skillhost_index::SearchIndex>, HostError> {
        let mut slot = self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = &*slot {
            return Ok(index.clone());
        }
        let model = skillhost_index::find_model(Some(&self.model_dir()));
        let embedder = model.map(|m| Arc::new(m) as Arc<dyn skillhost_index::Embedder>);
        let index =
            skillhost_index::SearchIndex::open(self.data_dir.join("index"), embedder).map_err(|e| HostError::Setup(e.to_string()))?;
        Ok(slot.insert(Arc::new(index)).clone())
    }

    /// Open the skill registry over `config`'s layers, running skills on this host's
    /// runtime under its policy: discovery, the trust store, approvals, install and hot
    /// reload. This is how an application serves skills; [`Host::load_path`] is for
    /// loading one skill directly (development, `inspect`), outside the trust store.
    pub async fn open_registry(&self, config: RegistryConfig) -> Result<Arc<Registry>, HostError> {
        let runtime: Arc<dyn skillhost_core::SkillRuntime> = Arc::new(self.runtimes());
        Ok(Registry::open(config, runtime, self.policy.clone()).await?)
    }

    /// A forge that builds and tests skills and installs them into `registry` (open it
    /// with [`Host::open_registry`]). Submissions run on the forge's own runtimes, without
    /// this host's secrets or network (its sandbox lends only its venv); the values of the
    /// host's secrets are scrubbed from the forge's reports.
    pub fn forge(&self, registry: Arc<Registry>, config: ForgeConfig) -> Forge {
        let store = self.secrets.clone();
        let values = move || store.list().unwrap_or_default().iter().filter_map(|name| store.secret(name)).collect();
        Forge::new(config, registry, self.sandbox.as_ref().ok().cloned()).redact_secrets(Arc::new(values))
    }

    /// Load the skill at `path` (a `.wasm` file or a skill folder, with a component or a
    /// `[server]`) as code nobody approved: under a [probe grant](Access::Probe), whatever
    /// it asks for.
    pub async fn load_path(&self, path: &Path) -> Result<LoadedSkill, HostError> {
        self.load_source(Self::read_path(path)?, Access::Probe).await
    }

    /// Load the skill at `path` with everything its skill.toml asks for (network, secrets,
    /// files in its own data dir, [`Host::dev_data_key`]): the caller approves it, as a
    /// human at a terminal does with `skillhost call --grant`, or an editor after showing
    /// the requests in its own UI.
    pub async fn load_path_granted(&self, path: &Path) -> Result<LoadedSkill, HostError> {
        self.load_source(Self::read_path(path)?, Access::Granted).await
    }

    /// Read a skill by its path, as the registry reads one: no link followed, size caps.
    fn read_path(path: &Path) -> Result<SkillSource, HostError> {
        package::read_source(path, &package::SizeLimits::default()).map_err(|e| match e {
            package::ReadError::Load(load) => HostError::Load(load),
            other => HostError::Read(other),
        })
    }

    /// Load a skill from its source, under the host's policy, with `access`. A skill loaded
    /// directly (not through the registry) has data of its own, `<data_root>/.dev/<name>`
    /// ([`Host::dev_data_key`]), never that of an installed skill of the same name.
    pub async fn load_source(&self, source: SkillSource, access: Access) -> Result<LoadedSkill, HostError> {
        let name = source.manifest.name.clone();
        if let Some(existing) = self.read().get(&name)
            && existing.origin != source.origin
        {
            return Err(HostError::Duplicate { name, path: source.origin, existing: existing.origin.clone() });
        }
        let asked = Grant::new(&source.manifest, &self.policy, &Self::dev_data_key(&name)).map_err(LoadError::from)?;
        let (grant, scratch) = match access {
            Access::Granted => (asked.clone(), None),
            Access::Probe => {
                let root = self.data_dir.join("scratch");
                let scratch = std::fs::create_dir_all(&root)
                    .and_then(|()| tempfile::Builder::new().prefix(&format!("{name}-")).tempdir_in(&root))
                    .map_err(|e| {
                        HostError::Setup(format!("skill `{name}`: cannot create its probe scratch dir in {}: {e}", root.display()))
                    })?;
                (asked.probe_for(&source.code, scratch.path()), Some(Arc::new(scratch)))
            }
        };
        let (skill, cache): (Arc<dyn Skill>, _) = match &source.code {
            SkillCode::Wasm { .. } => {
                let skill = self.runtime.load_wasm(&source, grant).await?;
                let cache = skill.cache_outcome();
                (skill, cache)
            }
            _ => (skillhost_core::SkillRuntime::load(&self.runtimes(), &source, grant).await?, CacheOutcome::Hit),
        };
        let loaded = LoadedSkill {
            cache,
            skill,
            runtime: source.code.kind(),
            manifest: source.manifest,
            origin: source.origin,
            instructions: source.instructions,
            asked,
            access,
            _scratch: scratch,
        };
        self.write().insert(name, loaded.clone());
        Ok(loaded)
    }

    /// Whose data a directly loaded skill `name` has: its own, apart from every layer's.
    pub fn dev_data_key(name: &SkillName) -> DataKey {
        DataKey::scoped("dev", name)
    }

    /// The loaded skills, by name.
    pub fn skills(&self) -> Vec<LoadedSkill> {
        self.read().values().cloned().collect()
    }

    /// One loaded skill.
    pub fn skill(&self, name: &str) -> Result<LoadedSkill, HostError> {
        let skills = self.read();
        skills
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, s)| s.clone())
            .ok_or_else(|| HostError::UnknownSkill { name: name.to_owned(), available: skills.keys().map(|n| n.to_string()).collect() })
    }

    /// Call `tool` of `skill` with `input`.
    pub async fn call(&self, skill: &str, tool: &str, input: serde_json::Value, cx: CallContext) -> Result<ToolOutput, HostError> {
        let loaded = self.skill(skill)?;
        Ok(loaded.skill.call(tool, input, cx).await?)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<SkillName, LoadedSkill>> {
        self.skills.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<SkillName, LoadedSkill>> {
        self.skills.write().unwrap_or_else(|e| e.into_inner())
    }
}
