//! skillhost's WebAssembly runtime: runs skills as components under wasmtime (WASI p2),
//! each call in a fresh store holding only what the skill's [`Grant`] names.
//!
//! - [`WasmRuntime`] owns the engine (pooling allocator, epoch ticker), the linker and
//!   the compiled-component cache, and implements [`SkillRuntime`].
//! - [`WasmSkill`] is one loaded skill: its tools, its pre-instantiated component and
//!   the call path with its limits.
//! - [`package`] reads and writes the embedded manifest that makes one `.wasm` a skill,
//!   and [`package::reflect`]s any component's WIT: a component that does not export our
//!   world is a *generic* skill whose exported functions are its tools (`generic.rs`, with
//!   `schema.rs` and `value.rs` for JSON Schema and JSON ↔ component values).

mod bindings;
mod cache;
mod engine;
mod generic;
mod http;
pub mod package;
mod schema;
mod skill;
mod state;
mod value;

#[cfg(test)]
mod proptests;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skillhost_core::{
    Annotations, Grant, LoadError, MAX_TOOLS, OutputSchemas, Skill, SkillCode, SkillRuntime, SkillSource, ToolSpec,
};
use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use cache::{CacheOutcome, CacheStats};
pub use skillhost_egress::{NetConfig, SystemResolver};
pub use skill::WasmSkill;

use crate::bindings::SkillPre;
use crate::cache::ComponentCache;
use crate::generic::GenericPre;
use crate::skill::Code;
use crate::state::CallState;

/// How the WebAssembly runtime is set up.
#[derive(Clone, Debug)]
pub struct WasmConfig {
    /// Directory of the compiled-component cache. Default: `None` (compile on every load).
    pub cache_dir: Option<PathBuf>,
    /// Instances that may exist at once across all skills; further calls wait for a slot.
    /// Default: 64.
    pub max_instances: u32,
    /// The most linear memory any instance may reserve; per-skill limits sit below it.
    /// Default: [`Limits::MAX`](skillhost_core::Limits::MAX)`.memory` (1 GiB).
    pub max_memory: u64,
    /// Optimise compiled code (Cranelift `speed`). Default: `true`. Part of the cache key.
    pub optimize: bool,
    /// Resolution of deadlines: how often the epoch advances. Default: 10 ms.
    pub epoch_tick: Duration,
    /// How skills granted network access reach it.
    pub net: NetConfig,
}

impl Default for WasmConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            max_instances: 64,
            max_memory: skillhost_core::Limits::MAX.memory,
            optimize: true,
            epoch_tick: Duration::from_millis(10),
            net: NetConfig::default(),
        }
    }
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the WebAssembly runtime: {0}")]
pub struct RuntimeError(String);

/// Shared by the runtime and every skill it loaded.
pub(crate) struct Inner {
    pub(crate) engine: Engine,
    /// For skills without network: no `wasi:http`.
    linker: Linker<CallState>,
    /// For skills granted network: `wasi:http` behind the gate.
    linker_http: Linker<CallState>,
    net: Arc<NetConfig>,
    cache: ComponentCache,
    /// One permit per pooling-allocator slot, so calls wait instead of failing.
    pub(crate) pool: Semaphore,
}

/// Loads and runs WebAssembly skills.
#[derive(Clone)]
pub struct WasmRuntime {
    inner: Arc<Inner>,
}

impl WasmRuntime {
    /// Start a runtime: build the engine, start its epoch ticker, link WASI and the host
    /// interface.
    pub fn new(config: WasmConfig) -> Result<Self, RuntimeError> {
        let engine = engine::build(&config).map_err(|e| RuntimeError(format!("{e:#}")))?;
        engine::start_ticker(&engine, config.epoch_tick);
        let linker = |http| {
            let mut linker = Linker::new(&engine);
            state::add_to_linker(&mut linker, http).map(|()| linker).map_err(|e| RuntimeError(format!("{e:#}")))
        };
        let (linker, linker_http) = (linker(false)?, linker(true)?);
        let cache = ComponentCache::new(config.cache_dir.as_deref(), &engine::fingerprint(&engine));
        Ok(Self {
            inner: Arc::new(Inner {
                linker,
                linker_http,
                net: Arc::new(config.net.clone()),
                engine,
                cache,
                pool: Semaphore::new(config.max_instances.max(1) as usize),
            }),
        })
    }

    /// Loads from the compiled cache and compilations so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// Load `source` holding exactly `grant`; unlike [`SkillRuntime::load`] this returns
    /// the concrete type.
    pub async fn load_wasm(&self, source: &SkillSource, grant: Grant) -> Result<Arc<WasmSkill>, LoadError> {
        let SkillCode::Wasm { path, bytes } = &source.code else {
            return Err(LoadError::Runtime {
                skill: grant.skill.clone(),
                reason: "not a WebAssembly skill".into(),
            });
        };
        let not_component = |reason: String| LoadError::NotAComponent { path: path.clone(), reason };
        package::check_component(bytes).map_err(|e| not_component(e.to_string()))?;

        let inner = self.inner.clone();
        let code = bytes.clone();
        let (component, outcome) = tokio::task::spawn_blocking(move || inner.cache.load(&inner.engine, &code))
            .await
            .map_err(|e| not_component(e.to_string()))?
            .map_err(|e| not_component(one_line(&e)))?;

        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld { path: path.clone(), reason: one_line(&e) };
        // Our own world, or a generic component whose exported functions are the tools.
        let (reflection, generic_tools) = if component.get_export_index(None, OUR_WORLD_EXPORT).is_some() {
            (None, Vec::new())
        } else {
            let code = bytes.clone();
            let reflection = tokio::task::spawn_blocking(move || package::reflect(&code))
                .await
                .map_err(|e| not_component(e.to_string()))?
                .map_err(|e| not_component(e.to_string()))?;
            if let Some(reason) = reflection.import_error() {
                return Err(LoadError::Runtime { skill: grant.skill.clone(), reason });
            }
            if let Some(reason) = reflection.nothing_callable() {
                return Err(LoadError::WrongWorld { path: path.clone(), reason });
            }
            let tools = reflection.tools.clone();
            (Some(reflection), tools)
        };
        let has_network = !grant.network.is_empty();
        let linker = if has_network { &self.inner.linker_http } else { &self.inner.linker };
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            let reason = one_line(&e);
            if !has_network && reason.contains("wasi:http/") {
                LoadError::NeedsNetwork { path: path.clone() }
            } else if reflection.is_some() {
                // A generic component is not expected to be ours: say what did not link.
                LoadError::Runtime { skill: grant.skill.clone(), reason: format!("cannot link its imports: {reason}") }
            } else {
                wrong_world(e)
            }
        })?;
        let code = match reflection {
            None => Code::Skill(SkillPre::new(pre).map_err(wrong_world)?),
            Some(reflection) => Code::Generic(
                GenericPre::new(pre, reflection).map_err(|reason| LoadError::Runtime { skill: grant.skill.clone(), reason })?,
            ),
        };

        // A granted directory that is (or lies behind) a link is a load error; it is
        // opened again, the same way, at every call.
        for dir in &grant.dirs {
            dir.open(&grant.skill, false).map_err(|e| LoadError::Runtime { skill: grant.skill.clone(), reason: e.to_string() })?;
        }

        let net = http::SkillNet::new(&grant, self.inner.net.clone());
        let mut skill = WasmSkill {
            net,
            concurrency: Semaphore::new(grant.limits.concurrency as usize),
            grant,
            tools: Vec::new(),
            outputs: OutputSchemas::default(),
            code,
            runtime: self.inner.clone(),
            cache: outcome,
        };
        skill.tools = match &skill.code {
            Code::Skill(_) => describe(&skill).await?,
            Code::Generic(_) => generic_tools,
        };
        skill.outputs = OutputSchemas::new(&skill.tools)
            .map_err(|e| LoadError::Tools { skill: skill.grant.skill.clone(), reason: e.to_string() })?;
        tracing::debug!(skill = %skill.grant.skill, tools = skill.tools.len(), cache = ?outcome, "loaded wasm skill");
        Ok(Arc::new(skill))
    }
}

#[async_trait::async_trait]
impl SkillRuntime for WasmRuntime {
    fn kind(&self) -> &'static str {
        "wasm"
    }

    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError> {
        Ok(self.load_wasm(source, grant).await?)
    }
}

/// The export of our world, `skillhost:skill/guest` at the version this host runs.
const OUR_WORLD_EXPORT: &str = "skillhost:skill/guest@0.1.0";

/// Ask the skill for its tools, in a fresh instance under a probe grant (the skill may not
/// be approved: it gets an empty scratch dir, removed after, and neither network nor
/// secrets), and check them.
async fn describe(skill: &WasmSkill) -> Result<Vec<ToolSpec>, LoadError> {
    let name = skill.grant.skill.clone();
    let Code::Skill(pre) = &skill.code else { unreachable!("describe is only called for our own world") };
    let runtime_error = |reason: String| LoadError::Runtime { skill: name.clone(), reason };
    let scratch = tempfile::Builder::new()
        .prefix("skillhost-probe-")
        .tempdir()
        .map_err(|e| runtime_error(format!("cannot create its probe scratch dir: {e}")))?;
    let probe = skill.grant.probe(scratch.path());
    let offline = http::SkillNet::offline(&probe, skill.runtime.net.clone());
    let (raw, _) = skill
        .with_store((&probe, &offline), "tools", probe.limits.timeout, None, async |store| {
            pre.instantiate_async(&mut *store).await?.skillhost_skill_guest().call_tools(store).await
        })
        .await
        .map_err(|e| runtime_error(format!("describing its tools failed: {e}")))?;
    let bad = |reason: String| LoadError::Tools { skill: name.clone(), reason };
    if raw.len() > MAX_TOOLS {
        return Err(bad(format!("it offers {} tools, more than {MAX_TOOLS}", raw.len())));
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(raw.len());
    for tool in raw {
        if !seen.insert(tool.name.clone()) {
            return Err(bad(format!("tool `{}` is defined twice", tool.name)));
        }
        let a = tool.annotations;
        let annotations = Annotations {
            read_only: a.read_only,
            destructive: a.destructive,
            idempotent: a.idempotent,
            open_world: a.open_world,
        };
        tools.push(
            ToolSpec::from_parts(tool.name, tool.description, &tool.input_schema, tool.output_schema.as_deref(), annotations, &tool.examples)
                .map_err(|e| bad(e.to_string()))?,
        );
    }
    Ok(tools)
}

/// An error and its causes on one line.
fn one_line(error: &wasmtime::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !text.is_empty() {
            if text.contains(&cause) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(cause.lines().next().unwrap_or(""));
    }
    text
}
