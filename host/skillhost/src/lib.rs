//! skillhost as a library: wiring (the runtimes, the secret store, the audit log, the
//! search index) over one [`Registry`], which finds skills, decides with the trust store
//! whether they may run, and calls them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), skillhost::HostError> {
//! use skillhost::prelude::*;
//!
//! let host = Host::builder().data_dir("/var/lib/skillhost").build()?;
//! let mut config = host.registry_config();
//! config.workspace = Some("skills".into());
//! let registry = host.open_registry(config).await?;
//! for entry in registry.catalog() {
//!     println!("{} ({}, {})", entry.name, entry.layer, entry.state);
//! }
//! // Fails, naming the command that approves it, unless a human approved `text-tools`.
//! let out = registry.call("text-tools", "word_count", serde_json::json!({"text": "one two"}), CallContext::default()).await?;
//! println!("{}", out.value);
//! # Ok(()) }
//! ```
//!
//! Every skill runs holding only its [`Grant`](skill::Grant): what its manifest asks for, within the
//! host's [`Policy`], once a human approved it. Developing a skill, load it by its path,
//! in the registry's trust-less mode: [`Host::load_path`] runs it under a [probe
//! grant](skill::Grant::probe) (a scratch `/data`, no network, no secrets, a short deadline);
//! [`Host::load_path_granted`] is the caller's own approval of what it asks for.
//!
//! ```no_run
//! # async fn demo(host: skillhost::Host) -> Result<(), Box<dyn std::error::Error>> {
//! use skillhost::prelude::*;
//!
//! let skill = host.load_path("skills/text-tools".as_ref()).await?;
//! for tool in skill.skill.tools() {
//!     println!("{}: {}", tool.name, tool.description);
//! }
//! let out = skill.call("word_count", serde_json::json!({"text": "one two"}), CallContext::default()).await?;
//! # Ok(()) }
//! ```
//!
//! Nothing here knows which runtime runs a skill: it speaks to the [`Skill`] trait.

/// The audit log of outbound requests and runs of scripts ([`Host::audit`](crate::Host::audit)), `<data_dir>/audit.db`.
pub mod audit {
    pub use skillhost_store::audit::{
        AuditError, AuditLog, AuditQuery, DecisionRecord, RunAudit, RunOutcome, RunRecord, SqliteAuditLog, command_text, rfc3339,
    };
}

/// Where trust, the audit log and the statistics live ([`Host::state`](crate::Host::state),
/// `[state]` of the host config): SQLite files in the data dir, or a PostgreSQL database
/// the replicas of a team gateway share.
pub mod state {
    pub use skillhost_store::postgres::{OP_TIMEOUT, Pg, PgAuditLog, PgStats, PgTrustStore, cluster};
    pub use skillhost_store::{State, StateUrl, StoreError, TrustChange, TrustStore};
}

/// Who may use the host: callers and their tokens ([`State::callers`](crate::state::State)),
/// and the org policy in Cedar (`[org] policies`).
pub mod access {
    pub use skillhost_access::{
        Action, Caller, Decision, OAuthError, OAuthSettings, OrgPolicy, Policies, PolicyError, PolicyLine, ResourceServer, Target, Via,
        caller, jwt, oauth, policy, token,
    };
    pub use skillhost_store::{CallerRecord, CallerStore};
}

/// The secret store the egress gate reads ([`Host::secrets`](crate::Host::secrets)), `<data_dir>/secrets/`.
pub mod secrets {
    pub use skillhost_store::secrets::{FileSecretStore, SecretError, SecretStore};
}

/// The types most embedders need: `use skillhost::prelude::*;`.
pub mod prelude {
    pub use crate::registry::{Access, ApprovalRequest};
    pub use crate::skill::{CallFailure, ToolSpec};
    pub use crate::{
        CallContext, CallError, DirectSkill, Entry, Host, HostConfig, HostError, Registry, RegistryConfig, RegistryError, RegistryEvent,
        Skill, ToolOutput, TrustState,
    };
}

/// The forge: build, test and install skills from source ([`Host::forge`](crate::Host::forge)).
pub mod forge {
    #[doc(no_inline)]
    pub use skillhost_forge::{
        Failure, Forge, ForgeConfig, ForgeError, Forged, Language, Progress, Submission, TestStatus, sdk_workspace_manifest,
    };

    /// The optional generator: a model writes a skill from requirements, the forge checks it.
    pub mod llm {
        #[doc(no_inline)]
        pub use skillhost_forge::llm::{GenerateError, Generator, LlmConfig, Request, Step};
    }

    /// What a submission may hold.
    pub mod stage {
        #[doc(no_inline)]
        pub use skillhost_forge::stage::read_dir;
    }

    /// The probe runtimes submissions run on.
    pub mod probe {
        #[doc(no_inline)]
        pub use skillhost_forge::probe::REDACTED;
    }
}

/// The MCP front: serve a [`Registry`] to agents over stdio, streamable HTTP or any
/// rmcp transport (an editor can serve it in-process over an in-memory pipe).
pub mod mcp {
    #[doc(no_inline)]
    pub use skillhost_mcp::{
        ApprovalKeys, ApprovalPackages, CALL_KEY, DIRECTORY_BUDGET, Directory, HttpConfig, LineTransport, MAX_DIRECTORY_BUDGET,
        MAX_MESSAGE_BYTES, MIN_DIRECTORY_BUDGET, McpConfig, OAuthFront, PackagesFailure, PackagesFuture, SearchIndex, SkillhostMcp,
        load_or_create_token, read_token_file, serve, serve_http, serve_stdio, skills_directory,
    };
    #[doc(no_inline)]
    pub use skillhost_mcp::{Drain, MetricsRender, OpsConfig, ReadinessCheck, serve_ops};
}

/// The search index: BM25 over skills and tools, hybrid with the local embedding model.
pub mod index {
    #[doc(no_inline)]
    pub use skillhost_index::{Embedder, MODEL_DIR_ENV, MiniLm, ModelFiles, Query, SearchIndex, SyncProgress, SyncStats, Target};
}

/// Skills from remote sources: OCI registries (with cosign-format signatures), git, the
/// Agent Skills well-known index, and `skills.lock`.
pub mod source {
    #[doc(no_inline)]
    pub use skillhost_source::{
        Artifact, Caps, FetchOptions, FetchProgress, Fetched, Installed, Installer, KeyPolicy, Outdated, Quiet, SourceAddr, SourceError,
        Synced, address, archive, fetch, http, index, lock, oci, resolve, sign,
    };
}

/// The registry's entries, layers, approvals and loading, beyond what the root names.
pub mod registry {
    #[doc(no_inline)]
    pub use skillhost_registry::{
        Access, ApprovalChannel, ApprovalRequest, ApprovedBy, DirectSkill, Entry, FirstLoad, Layer, Loaded, Registry, RegistryConfig,
        RegistryError, RegistryEvent, SCRIPTS_RUNTIME, Scripts, TrustState, parse_skill_md,
    };
}

/// What a skill is and is granted: its manifest, name, code, tools, limits, grant and
/// the policy grants are made under, the errors of loading and calling it, provenance.
pub mod skill {
    #[doc(no_inline)]
    pub use skillhost_core::{
        Annotations, ByteSize, CallFailure, DataKey, FileMode, Grant, Limits, LoadError, MAX_MANIFEST_BYTES, Policy, Progress,
        ProgressSink, Provenance, RiskTier, SignatureStatus, Skill, SkillCode, SkillManifest, SkillName, SkillSource, ToolSpec,
        fmt_duration, parse_duration,
    };
}

/// The egress gate both runtimes share: the network policy of a grant, and what the host
/// plugs into it (name resolution, secrets, the audit of each request).
pub mod net {
    #[doc(no_inline)]
    pub use skillhost_core::{AuditSink, EgressOutcome, EgressPolicy, EgressRecord, Resolver, SecretSource};
    #[doc(no_inline)]
    pub use skillhost_wasm::{EgressCa, NetConfig};
}

/// The concrete runtimes behind the seam, for an embedder that configures them
/// ([`HostBuilder::wasm_config`], [`HostBuilder::sandbox_config`]).
pub mod runtime {
    #[doc(no_inline)]
    pub use skillhost_core::{BackgroundError, CacheOutcome, give_back_freed_memory, in_the_background, trim_as_freed};
    #[doc(no_inline)]
    pub use skillhost_sandbox::{BwrapConfig, BwrapRuntime, SandboxError};
    #[doc(no_inline)]
    pub use skillhost_wasm::{CacheStats, WasmConfig};
}

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs of a skill's scripts: the policy a human approves, the inputs, outputs and errors.
#[doc(no_inline)]
pub use skillhost_core::run;
/// The one text rule: which characters a skill's texts may hold, and how to show them.
#[doc(no_inline)]
pub use skillhost_core::text;
#[doc(no_inline)]
pub use skillhost_core::{CallContext, CallError, Skill, ToolOutput};
#[doc(no_inline)]
pub use skillhost_registry::{ApprovalChannel, DirectSkill, Entry, Registry, RegistryConfig, RegistryError, RegistryEvent, TrustState};

use registry::Access;
use runtime::{BwrapConfig, BwrapRuntime, CacheStats, WasmConfig};
use skill::{Policy, SkillName};
use skillhost_core::{LazyRuntime, Runtimes};
use skillhost_forge::{Forge, ForgeConfig};
use skillhost_store::{AuditLog, FileSecretStore, SecretStore};
use skillhost_wasm::WasmRuntime;

pub mod config;
pub mod helpers;
pub mod oauth;
pub mod packages;

pub use config::HostConfig;

/// Why the host could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The registry refused or failed: a skill that did not load or could not be read,
    /// one not approved, an unknown name, a bad install.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The host config cannot be used ([`HostBuilder::config`]).
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// [`HostBuilder::build`] was not given a data directory.
    #[error("no data directory given; call HostBuilder::data_dir")]
    NoDataDir,
    /// The audit log (`<data_dir>/audit.db`) cannot be opened.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// The state store (`[state] url`: the data dir's SQLite files, or PostgreSQL) cannot
    /// be opened.
    #[error(transparent)]
    State(#[from] skillhost_store::StoreError),
    /// The search index (`<data_dir>/index`) cannot be opened.
    #[error(transparent)]
    Index(#[from] skillhost_index::IndexError),
    /// The HTTP front cannot take OAuth access tokens (`[oauth]`).
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthSetupError),
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
    config: Option<HostConfig>,
    toolchains: Option<PathBuf>,
    warm_up: bool,
}

impl HostBuilder {
    /// Where skills' data dirs live (`<dir>/skills/<name>/`). Required.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Where `skillhost setup` installs toolchains; the sandbox finds node's fetch preload
    /// there (`node-fetch`, [`BwrapConfig::node_fetch`], unless the sandbox config names
    /// one). Default: `<data_dir>/toolchains`.
    pub fn toolchains(mut self, dir: impl Into<PathBuf>) -> Self {
        self.toolchains = Some(dir.into());
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

    /// Whether [`build`](Self::build) starts making, on threads of its own, what the
    /// first component's load needs and every later one reuses: what output schemas are
    /// checked with ([`skillhost_core::prepare_output_checks`]) as it begins, the
    /// WebAssembly runtime (its engine, linkers and pools) once the state store is open.
    /// A server wants it on, so that its first answers do not wait for them (a load that
    /// comes first waits for what it needs as if it made it); a command that may load
    /// no component wants it off (the default), so that it never pays for them.
    pub fn warm_up(mut self, on: bool) -> Self {
        self.warm_up = on;
        self
    }

    /// WebAssembly runtime settings, used as given: a `cache_dir` of `None` turns the
    /// compiled cache off. Default: [`WasmConfig::default`] with the cache in
    /// `<data_dir>/cache` and `baseline_compile` on (an uncached component's first calls
    /// run on Winch's code while Cranelift compiles it). Whatever `net` says, the host's secret store
    /// (`<data_dir>/secrets`) and audit log (`<data_dir>/audit.db`) are plugged in, and
    /// unless `net.ca` names one, the egress CA is `<data_dir>/egress-ca`.
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

    /// The host config ([`HostConfig::read`], e.g. of `<data_dir>/config.toml`): the
    /// sandbox's venv, `allow_weaker` and package sources come from it unless
    /// [`sandbox_config`](Self::sandbox_config) is given; [`Host::config`] hands it to the
    /// rest (the forge's caps, remote sources, other agents' folders). Default:
    /// [`HostConfig::default`].
    pub fn config(mut self, config: HostConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// What skills may be granted. Default: [`Policy::new`] over `<data_dir>/skills`.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Start the host. The WebAssembly runtime is made when the host first loads a
    /// component (or ahead of it, [`warm_up`](Self::warm_up)); if it cannot start, each
    /// such load fails saying why.
    pub fn build(self) -> Result<Host, HostError> {
        let data_dir = self.data_dir.ok_or(HostError::NoDataDir)?;
        if self.warm_up {
            in_a_thread("skillhost-warm-up", skillhost_core::prepare_output_checks);
        }
        let config = self.config.unwrap_or_default();
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
        let secrets: Arc<dyn SecretStore> = Arc::new(FileSecretStore::new(data_dir.join("secrets")));
        let state = skillhost_store::State::open(&config.state.url.clone().unwrap_or_default(), &config.replica(), &data_dir)?;
        let audit: Arc<dyn AuditLog> = state.audit.clone();
        wasm.net.secrets = secrets.clone();
        wasm.net.audit = audit.clone();
        // The CA the sandbox proxy terminates TLS with for secret-bound hosts, made on
        // first need.
        let egress_ca = wasm.net.ca.get_or_insert_with(|| Arc::new(skillhost_wasm::EgressCa::new(data_dir.join("egress-ca")))).clone();
        let cache_dir = wasm.cache_dir.clone();
        let mut sandbox_config = match self.sandbox {
            Some(given) => given,
            None => {
                let mut sandbox = BwrapConfig::new(data_dir.join("sandbox"));
                sandbox.venv = Some(config.sandbox.venv.clone().unwrap_or_else(|| data_dir.join("python")));
                sandbox.allow_weaker = config.sandbox.allow_weaker.clone();
                sandbox.packages = config.package_sources()?;
                sandbox
            }
        };
        let helpers = helpers::commands();
        if let Some(helpers) = &helpers {
            sandbox_config.shim.get_or_insert_with(|| helpers.shim.clone());
            sandbox_config.init.get_or_insert_with(|| helpers.init.clone());
            wasm.compile_worker.get_or_insert_with(|| helpers.compile.clone());
        }
        let toolchains = self.toolchains.unwrap_or_else(|| data_dir.join("toolchains"));
        sandbox_config.node_fetch.get_or_insert_with(|| toolchains.join(skillhost_sandbox::node_fetch::DIR_NAME));
        sandbox_config.secrets = secrets.clone();
        // One egress for both runtimes: the same resolver, secrets and audit log.
        sandbox_config.net = Arc::new(wasm.net.clone());
        let wasm = LazyWasm::new(wasm);
        if self.warm_up {
            let lazy = wasm.clone();
            in_a_thread("skillhost-warm-up", move || {
                let _ = lazy.get();
            });
        }
        let sandbox = BwrapRuntime::new(sandbox_config);
        if let Err(e) = &sandbox {
            tracing::debug!("no sandbox runtime: {e}");
        }
        let policy = self.policy.unwrap_or_else(|| Policy::new(data_dir.join("skills")));
        Ok(Host {
            wasm,
            sandbox,
            policy,
            secrets,
            audit,
            egress_ca,
            state,
            data_dir,
            cache_dir,
            config,
            index: parking_lot::Mutex::default(),
        })
    }
}

/// Run `work` on a thread of its own named `name`, for what is made ahead of its first
/// use ([`HostBuilder::warm_up`]); without a thread, the first use makes it.
fn in_a_thread(name: &str, work: impl FnOnce() + Send + 'static) {
    if let Err(error) = std::thread::Builder::new().name(name.into()).spawn(work) {
        tracing::debug!(%error, "no {name} thread: the first use makes what it would have");
    }
}

/// The host's WebAssembly runtime, made when a component first loads: its engines (a pooling allocator, compilers) cost tens of
/// milliseconds, which a host that runs no component (`skillhost run` of a SKILL.md
/// skill's scripts, `approve`) never pays. Every clone shares the one runtime.
#[derive(Clone)]
struct LazyWasm(Arc<(WasmConfig, std::sync::OnceLock<MadeWasm>)>);

/// What [`LazyWasm`] made of its config: the runtime, or why it cannot start.
type MadeWasm = Result<WasmRuntime, Arc<skillhost_wasm::RuntimeError>>;

impl LazyWasm {
    fn new(config: WasmConfig) -> Self {
        Self(Arc::new((config, std::sync::OnceLock::new())))
    }

    /// The runtime, made now if it was not yet, or why it cannot start.
    fn get(&self) -> Result<&WasmRuntime, &Arc<skillhost_wasm::RuntimeError>> {
        let (config, made) = &*self.0;
        made.get_or_init(|| WasmRuntime::new(config.clone()).map_err(Arc::new)).as_ref()
    }

    /// The runtime if it was made.
    fn made(&self) -> Option<&WasmRuntime> {
        self.0.1.get().and_then(|made| made.as_ref().ok())
    }

    /// The runtime as the registry sees it: made at the first component it loads, its
    /// error (if it cannot start) given to each such load.
    fn runtime(&self) -> Arc<dyn skillhost_core::SkillRuntime> {
        let lazy = self.clone();
        Arc::new(LazyRuntime::new("wasm", move || {
            let runtime = lazy.get().map_err(|e| Box::new(e.clone()) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Arc::new(runtime.clone()) as Arc<dyn skillhost_core::SkillRuntime>)
        }))
    }
}

/// Loads skills and calls their tools.
pub struct Host {
    wasm: LazyWasm,
    sandbox: Result<BwrapRuntime, runtime::SandboxError>,
    policy: Policy,
    secrets: Arc<dyn SecretStore>,
    audit: Arc<dyn AuditLog>,
    /// The CA the sandbox proxy terminates TLS with for secret-bound hosts.
    egress_ca: Arc<net::EgressCa>,
    /// Trust, audit and statistics: SQLite in the data dir, or a shared PostgreSQL.
    state: skillhost_store::State,
    data_dir: PathBuf,
    /// The compiled-component cache (`None`: off); the embedding model's optimised graph
    /// is kept in its `model` folder.
    cache_dir: Option<PathBuf>,
    config: HostConfig,
    /// Opened on first use (one per host: the writer lock is per process).
    index: parking_lot::Mutex<Option<Arc<skillhost_index::SearchIndex>>>,
}

impl Drop for Host {
    /// The audit log's writer gathers rows for a few milliseconds; what it holds is
    /// written now, even if a loaded skill or a background compile still holds the log
    /// (and keeps its writer from draining when the host goes).
    fn drop(&mut self) {
        self.audit.flush();
    }
}

impl Host {
    /// Start building a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The host config it was built with ([`HostBuilder::config`]).
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The policy skills are granted under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The secret store the egress gate reads.
    pub fn secrets(&self) -> &dyn SecretStore {
        &*self.secrets
    }

    /// The CA the sandbox proxy terminates TLS with for hosts a secret is bound to
    /// (`<data_dir>/egress-ca` unless the wasm config's `net.ca` named another): sandboxes
    /// that reach such a host trust it.
    pub fn egress_ca(&self) -> &net::EgressCa {
        &self.egress_ca
    }

    /// The audit log of outbound requests and of runs of skills' scripts.
    pub fn audit(&self) -> &dyn AuditLog {
        &*self.audit
    }

    /// Where trust, the audit log and the statistics live (`[state]` of the host config):
    /// the data dir's SQLite files, or a PostgreSQL database other hosts share. Every
    /// registry this host opens uses it.
    pub fn state(&self) -> &skillhost_store::State {
        &self.state
    }

    /// A registry configuration over this host's data dir (its user layer; the trust
    /// store and usage statistics of its [`state`](Self::state)), with the defaults of [`RegistryConfig::new`] and the
    /// host config's `skills_from` folders as external layers: set its workspace, then
    /// [`open_registry`](Self::open_registry).
    pub fn registry_config(&self) -> RegistryConfig {
        let mut config = RegistryConfig::new(&self.data_dir);
        config.external = config::Agent::existing_folders(&self.config.skills_from, None).unwrap_or_else(|e| {
            tracing::warn!("no skills_from folders: {e}");
            Vec::new()
        });
        config
    }

    /// Counters of the compiled-component cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.wasm.made().map(WasmRuntime::cache_stats).unwrap_or_default()
    }

    /// The skills whose optimised compile is queued or running in the background (see
    /// [`HostBuilder::baseline_compile`]).
    pub fn optimizing(&self) -> Vec<SkillName> {
        self.wasm.made().map(WasmRuntime::optimizing).unwrap_or_default()
    }

    /// Wait, up to `limit`, for the background compiles to put their optimised code in
    /// the compiled cache: whether none is left. A server calls it as it stops (no call
    /// is waiting by then), so that the next start does not compile them again.
    pub async fn finish_optimizing(&self, limit: std::time::Duration) -> bool {
        match self.wasm.made() {
            Some(runtime) => runtime.finish_optimizing(limit).await,
            None => true,
        }
    }

    /// The sandbox runtime for `[server]` skills, or why there is none.
    pub fn sandbox(&self) -> Result<&BwrapRuntime, &runtime::SandboxError> {
        self.sandbox.as_ref()
    }

    /// Both runtimes behind one [`skillhost_core::SkillRuntime`] that routes by code.
    fn runtimes(&self) -> Runtimes {
        Runtimes {
            wasm: Some(self.wasm.runtime()),
            server: self.sandbox.as_ref().ok().map(|s| Arc::new(s.clone()) as Arc<dyn skillhost_core::SkillRuntime>),
            server_unavailable: self.sandbox.as_ref().err().map(ToString::to_string),
        }
    }

    /// Where `skillhost setup model` installs the embedding model: `<data_dir>/model`
    /// (`SKILLHOST_MODEL_DIR` overrides it).
    pub fn model_dir(&self) -> PathBuf {
        self.data_dir.join("model")
    }

    /// This host's search index, opened on first use: on disk in `<data_dir>/index`,
    /// hybrid when the embedding model is installed (see [`Host::model_dir`]), BM25
    /// otherwise (said once in the log); the model's optimised graph is kept in the
    /// compiled cache's `model` folder. Sync it with a registry before searching
    /// (`SearchIndex::sync` or `follow`). What is on disk never stops it from opening
    /// (see `SearchIndex::open`).
    pub fn search_index(&self) -> Result<Arc<skillhost_index::SearchIndex>, HostError> {
        let mut slot = self.index.lock();
        if let Some(index) = &*slot {
            return Ok(index.clone());
        }
        let model = skillhost_index::find_model(Some(&self.model_dir()), self.cache_dir.as_ref().map(|dir| dir.join("model")).as_deref());
        let embedder = model.map(|m| Arc::new(m) as Arc<dyn skillhost_index::Embedder>);
        let index = skillhost_index::SearchIndex::open(self.data_dir.join("index"), embedder)?;
        Ok(slot.insert(Arc::new(index)).clone())
    }

    /// Open the skill registry over `config`'s layers, running skills on this host's
    /// runtime under its policy: discovery, the trust store, approvals, install and hot
    /// reload. This is how an application serves skills; [`Host::load_path`] is for
    /// loading one skill directly (development, `inspect`), outside the trust store.
    /// Whatever `config.audit` says, runs of skills' scripts are recorded in this host's
    /// audit log ([`Host::audit`]), beside their outbound requests, with the values of its
    /// secrets kept out of the commands recorded; and whatever `config.packages` says,
    /// skills' packages come from the sources of this host's sandbox
    /// ([`BwrapConfig::packages`]), the only ones it installs from.
    pub async fn open_registry(&self, mut config: RegistryConfig) -> Result<Arc<Registry>, HostError> {
        config.state.get_or_insert_with(|| self.state.clone());
        if config.pins.is_none() {
            config.pins = self.config.pins()?;
        }
        config.audit = Some(skillhost_store::audit::RunAudit { log: self.audit.clone(), secrets: Some(self.secrets.clone()) });
        if let Ok(sandbox) = &self.sandbox {
            config.packages = sandbox.package_sources().clone();
        }
        let runtime: Arc<dyn skillhost_core::SkillRuntime> = Arc::new(self.runtimes());
        Ok(Registry::open(config, runtime, self.policy.clone()).await?)
    }

    /// A forge that builds and tests skills and installs them into `registry` (open it
    /// with [`Host::open_registry`]). Submissions run on probe runtimes made for the forge
    /// alone (on first use, under `<config.dir>/probe`): a WebAssembly runtime with no
    /// secret source and a sandbox runtime with no secret source and no egress shim, lending
    /// only this host's venv and its `allow_weaker`; the values of the host's secrets are
    /// scrubbed from the forge's reports.
    pub fn forge(&self, registry: Arc<Registry>, config: ForgeConfig) -> Forge {
        let probe = self.probe_runtimes(&config.dir.join("probe"));
        let store = self.secrets.clone();
        let values = move || store.list().unwrap_or_default().iter().filter_map(|name| store.secret(name)).collect();
        Forge::new(config, registry, probe).redact_secrets(Arc::new(values))
    }

    /// The runtimes code no human approved runs on in the forge (see [`Host::forge`]).
    fn probe_runtimes(&self, dir: &Path) -> Arc<dyn skillhost_core::SkillRuntime> {
        let compiled = dir.join("compiled");
        let wasm = LazyRuntime::new("wasm", move || {
            let config = WasmConfig { cache_dir: Some(compiled.clone()), max_instances: 8, ..WasmConfig::default() };
            Ok(Arc::new(WasmRuntime::new(config)?) as Arc<dyn skillhost_core::SkillRuntime>)
        });
        let server = self.sandbox.as_ref().ok().map(|sandbox| {
            let (work, venv, allow_weaker) = (dir.join("sandbox"), sandbox.venv().map(|v| v.dir.clone()), sandbox.allow_weaker().to_vec());
            let runtime = LazyRuntime::new("bwrap", move || {
                let mut config = BwrapConfig::new(work.clone());
                config.venv = venv.clone();
                config.allow_weaker = allow_weaker.clone();
                Ok(Arc::new(BwrapRuntime::new(config)?) as Arc<dyn skillhost_core::SkillRuntime>)
            });
            Arc::new(runtime) as Arc<dyn skillhost_core::SkillRuntime>
        });
        Arc::new(Runtimes { wasm: Some(Arc::new(wasm)), server, server_unavailable: self.sandbox.as_ref().err().map(ToString::to_string) })
    }

    /// Load the skill at `path` (a `.wasm` file or a skill folder, with a component or a
    /// `[server]`) in the registry's trust-less mode, as code nobody approved: under a
    /// [probe grant](Access::Probe), whatever it asks for. The host keeps nothing: the
    /// returned skill is the caller's.
    pub async fn load_path(&self, path: &Path) -> Result<DirectSkill, HostError> {
        self.load_direct(path, Access::Probe).await
    }

    /// Load the skill at `path` with everything its skill.toml asks for (network, secrets,
    /// files in its own data dir, [`DirectSkill::data_key`]): the caller approves it, as a
    /// human at a terminal does with `skillhost call --grant`, or an editor after showing
    /// the requests in its own UI.
    pub async fn load_path_granted(&self, path: &Path) -> Result<DirectSkill, HostError> {
        self.load_direct(path, Access::Granted).await
    }

    async fn load_direct(&self, path: &Path, access: Access) -> Result<DirectSkill, HostError> {
        Ok(DirectSkill::load(&self.runtimes(), &self.policy, &self.data_dir.join("scratch"), path, access).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A host built with `warm_up` makes its wasm runtime with no component loaded; one
    /// built without leaves it to the first load.
    #[test]
    fn warm_up_makes_the_wasm_runtime_ahead_of_the_first_load() {
        let data = tempfile::tempdir().unwrap();
        let cold = Host::builder().data_dir(data.path().join("cold")).build().unwrap();
        let warm = Host::builder().data_dir(data.path().join("warm")).warm_up(true).build().unwrap();
        let started = Instant::now();
        while warm.wasm.made().is_none() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(warm.wasm.made().is_some(), "warm_up made no wasm runtime in 30 s");
        assert!(cold.wasm.made().is_none(), "a host built without warm_up made its runtime with nothing loaded");
    }
}
