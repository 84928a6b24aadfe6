//! skillhost's WebAssembly runtime: runs skills as components under wasmtime (WASI p2),
//! each call in a fresh store holding only what the skill's [`Grant`] names.
//!
//! - [`WasmRuntime`] owns the engine (pooling allocator, epoch ticker), the linker and
//!   the compiled-component cache, and implements [`SkillRuntime`].
//! - [`WasmSkill`] is one loaded skill: its tools, its pre-instantiated component and
//!   the call path with its limits.
//! - A component that does not export our world is a *generic* skill whose exported
//!   functions are its tools, as `skillhost_package::reflect` reads them from its WIT;
//!   `generic.rs` calls them, `value.rs` converts JSON ↔ component values. The package
//!   format itself (sections, the embedded manifest, reading a skill from disk) is
//!   `skillhost-package`'s.

mod bindings;
mod cache;
mod engine;
mod generic;
mod http;
mod skill;
mod state;
mod value;
pub mod worker;

#[cfg(test)]
mod proptests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use skillhost_core::{Annotations, Envelope, Grant, LoadError, Skill, SkillCode, SkillRuntime, SkillSource, ToolSpec};
use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use cache::{CacheOutcome, CacheStats};
pub use skill::WasmSkill;
pub use skillhost_egress::{EgressCa, NetConfig, SystemResolver};

use crate::bindings::SkillPre;
use crate::cache::{ComponentBytes, ComponentCache};
use crate::generic::GenericPre;
use crate::skill::{Code, Prepared};
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
    /// Run a component that no cache holds compiled on Winch, wasmtime's baseline
    /// compiler, for its first calls (it compiles about 6× faster than Cranelift, to code
    /// that runs slower), while Cranelift compiles it in the background (queued as the
    /// component is first needed; [`WasmRuntime::finish_optimizing`] waits for it to reach
    /// the cache); later calls and later loads run Cranelift's code. A component Winch cannot compile (it lacks tail
    /// calls, exceptions and GC) waits for Cranelift. Default: `false` (the host's
    /// default, `HostBuilder`, turns it on).
    pub baseline_compile: bool,
    /// How to start a process that compiles with Cranelift for the compiled cache
    /// ([`worker`]): this program as `[EXE, "__compile"]`, when it runs
    /// [`worker::main`] for that `argv[1]`. Default: `None` (compiles run in this
    /// process, and what they touch stays resident in it).
    pub compile_worker: Option<Vec<std::ffi::OsString>>,
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
            baseline_compile: false,
            compile_worker: None,
        }
    }
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the WebAssembly runtime: {0}")]
pub struct RuntimeError(String);

/// One compiler's engine and its linkers.
pub(crate) struct Tier {
    pub(crate) engine: Engine,
    /// `engine`'s configuration, for the engines the compiled cache compiles with.
    config: wasmtime::Config,
    /// For skills without network: no `wasi:http`.
    linker: Linker<CallState>,
    /// For skills granted network: `wasi:http` behind the gate. Made when the first
    /// such skill links: most hosts' first calls need only `linker`.
    linker_http: std::sync::OnceLock<Result<Linker<CallState>, RuntimeError>>,
}

impl Tier {
    fn new(config: &WasmConfig, baseline: bool) -> Result<Self, RuntimeError> {
        let (engine, wasmtime_config) = engine::build(config, baseline).map_err(|e| RuntimeError(format!("{e:#}")))?;
        engine::start_ticker(&engine, config.epoch_tick);
        let linker = Self::make_linker(&engine, false)?;
        Ok(Self { engine, config: wasmtime_config, linker, linker_http: std::sync::OnceLock::new() })
    }

    /// A linker of WASI, with `wasi:http` when `http`, and the host interface.
    fn make_linker(engine: &Engine, http: bool) -> Result<Linker<CallState>, RuntimeError> {
        let mut linker = Linker::new(engine);
        state::add_to_linker(&mut linker, http).map(|()| linker).map_err(|e| RuntimeError(format!("{e:#}")))
    }

    /// The linker for a skill with `network` or without.
    fn linker(&self, network: bool) -> Result<&Linker<CallState>, &RuntimeError> {
        if !network {
            return Ok(&self.linker);
        }
        self.linker_http.get_or_init(|| Self::make_linker(&self.engine, true)).as_ref()
    }
}

/// Shared by the runtime and every skill it loaded.
pub(crate) struct Inner {
    /// Cranelift: what is cached and what runs for good.
    optimized: Tier,
    /// Winch, for first calls of uncached components ([`WasmConfig::baseline_compile`]):
    /// built when the first one is prepared, so a host whose components are all cached
    /// never builds it (an engine, a pool, a ticker thread); `None` inside when it could
    /// not be built (Cranelift's compile is then waited for).
    baseline: Option<(WasmConfig, std::sync::OnceLock<Option<Tier>>)>,
    net: Arc<NetConfig>,
    cache: ComponentCache,
    /// One permit: background compiles run one at a time, each on one thread (see
    /// [`engine::build`]), so at most one core works on code nobody is waiting for.
    /// [`WasmRuntime::hold_compiles`] takes it too.
    optimizing: Arc<Semaphore>,
    /// The background compiles queued or running, by skill: what
    /// [`WasmRuntime::finish_optimizing`] waits for.
    in_flight: tokio::sync::watch::Sender<Vec<skillhost_core::SkillName>>,
    /// One permit per pooling-allocator slot, so calls wait instead of failing.
    pub(crate) pool: Semaphore,
    /// The data roots granted directories lie beneath, held open between calls.
    pub(crate) roots: skillhost_core::HeldRoots,
}

impl Inner {
    /// Winch's tier, built now if it was not yet (`None` if it cannot be).
    fn baseline_tier((config, tier): &(WasmConfig, std::sync::OnceLock<Option<Tier>>)) -> Option<&Tier> {
        tier.get_or_init(|| {
            Tier::new(config, true)
                .inspect_err(|error| tracing::warn!(%error, "no baseline compiler: first calls of uncached components wait for Cranelift"))
                .ok()
        })
        .as_ref()
    }
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
        let optimized = Tier::new(&config, false)?;
        let baseline = config.baseline_compile.then(|| (config.clone(), std::sync::OnceLock::new()));
        let worker = config.compile_worker.as_deref().and_then(|command| worker::Worker::new(command, &config));
        let cache = ComponentCache::new(config.cache_dir.as_deref(), &engine::fingerprint(&optimized.engine), worker);
        Ok(Self {
            inner: Arc::new(Inner {
                optimized,
                baseline,
                net: Arc::new(config.net.clone()),
                cache,
                optimizing: Arc::new(Semaphore::new(1)),
                in_flight: tokio::sync::watch::Sender::new(Vec::new()),
                pool: Semaphore::new(config.max_instances.max(1) as usize),
                roots: skillhost_core::HeldRoots::default(),
            }),
        })
    }

    /// Loads from the compiled cache and compilations so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// The skills whose optimised (Cranelift) compile is queued or running in the
    /// background ([`WasmConfig::baseline_compile`]), one entry per compile.
    pub fn optimizing(&self) -> Vec<skillhost_core::SkillName> {
        self.inner.in_flight.borrow().clone()
    }

    /// Wait until every background compile queued or running now or later has finished
    /// (its code is in the compiled cache, or it failed), or `limit` has passed: whether
    /// none is left. A process about to exit calls it, so that the next start takes the
    /// optimised code from the cache instead of compiling it again. Nothing else waits
    /// for it: calls never do.
    pub async fn finish_optimizing(&self, limit: Duration) -> bool {
        let mut in_flight = self.inner.in_flight.subscribe();
        tokio::time::timeout(limit, in_flight.wait_for(Vec::is_empty)).await.is_ok()
    }

    /// Hold the background compiles until the returned guard is dropped: one running now
    /// finishes first, and those queued before or meanwhile wait (a skill gone or a
    /// compile cancelled by then is dropped at its turn, as always). For an embedder that
    /// wants the cores for something else for a while, and for tests that order a change
    /// of a skill before its compile.
    pub async fn hold_compiles(&self) -> CompilesHeld {
        let permit = self.inner.optimizing.clone().acquire_owned().await;
        CompilesHeld(permit.expect("the background compile semaphore is never closed"))
    }

    /// Load `source` holding exactly `grant`; unlike [`SkillRuntime::load`] this returns
    /// the concrete type. Only a component of our own world whose tools are not known
    /// yet is compiled (to ask it for them, under a probe grant); any other is compiled
    /// by its first call.
    pub async fn load_wasm(&self, source: &SkillSource, grant: Grant) -> Result<Arc<WasmSkill>, LoadError> {
        self.load_inner(source, grant, None).await
    }

    /// Load `source` with `listing`, what [`Skill::listing`] of an earlier load of the
    /// same bytes returned: nothing compiles (see [`SkillRuntime::load_listed`]); unlike
    /// it, this returns the concrete type.
    pub async fn load_wasm_listed(
        &self,
        source: &SkillSource,
        grant: Grant,
        listing: &serde_json::Value,
    ) -> Result<Arc<WasmSkill>, LoadError> {
        self.load_inner(source, grant, Some(listing)).await
    }

    /// Load `source` with `listing` (what [`Skill::listing`] of an earlier load of the
    /// same bytes returned) or, without one, by asking the component.
    async fn load_inner(
        &self,
        source: &SkillSource,
        grant: Grant,
        listing: Option<&serde_json::Value>,
    ) -> Result<Arc<WasmSkill>, LoadError> {
        let SkillCode::Wasm { path, bytes } = &source.code else {
            return Err(LoadError::Runtime { skill: grant.skill.clone(), reason: "not a WebAssembly skill".into() });
        };
        let not_component = |reason: String| LoadError::NotAComponent { path: path.clone(), reason };
        // What it imports and exports decides how it links and where its tools come
        // from, read from its import and export sections alone: nothing compiles here.
        let interface = skillhost_package::Interface::read(bytes).map_err(|e| not_component(e.to_string()))?;
        if interface.imports_http() && grant.network.is_empty() {
            return Err(LoadError::NeedsNetwork { path: path.clone(), manifest: manifest_hint(source) });
        }
        let (reflection, generic_tools) = if interface.exports(OUR_WORLD_EXPORT) {
            (None, Vec::new())
        } else {
            let code = bytes.clone();
            let reflection = tokio::task::spawn_blocking(move || skillhost_package::reflect(&code))
                .await
                .map_err(|e| interrupted(&grant.skill, &e))?
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

        // A granted directory that is (or lies behind) a link is a load error; it is
        // opened again, the same way, at every call.
        for dir in &grant.dirs {
            dir.open_held(&grant.skill, false, &self.inner.roots)
                .map_err(|e| LoadError::Runtime { skill: grant.skill.clone(), reason: e.to_string() })?;
        }

        let net = http::SkillNet::new(&grant, self.inner.net.clone());
        let mut skill = WasmSkill {
            net,
            envelope: Envelope::new(grant),
            path: path.clone(),
            manifest: manifest_hint(source),
            bytes: Arc::new(ComponentBytes::new(path, bytes.clone())),
            reflection,
            compiled: Arc::default(),
            runtime: self.inner.clone(),
        };
        let tools = match (&skill.reflection, listing) {
            (Some(_), _) => generic_tools,
            (None, Some(listing)) => {
                let listed: Vec<ListedTool> = serde_json::from_value(listing.clone()).map_err(|e| LoadError::Tools {
                    skill: skill.grant().skill.clone(),
                    reason: format!("its kept listing is unreadable: {e}"),
                })?;
                tool_specs(&skill.grant().skill, listed)?
            }
            (None, None) => {
                // With a baseline tier, compiled by Winch and not cached; no background
                // compile is queued for code nobody may have approved.
                let code = skill.code_for(Purpose::Listing).await?;
                tool_specs(&skill.grant().skill, describe(&skill, &code).await?)?
            }
        };
        skill.envelope.set_tools(tools)?;
        // Code the compiled cache holds is read from there by the first call, without the
        // bytes (a compile still under way lets them go when it stores its code).
        if skill.compiled.get().is_none() && self.inner.cache.contains(&skill.bytes) {
            skill.bytes.release();
        }
        tracing::debug!(skill = %skill.grant().skill, tools = skill.tools().len(), cache = ?skill.cache_outcome(), "loaded wasm skill");
        Ok(Arc::new(skill))
    }

    /// Compile (or take from the compiled cache) and link a skill's component. For a
    /// call, with a baseline tier and nothing cached, Cranelift's compile starts at once in
    /// the background (so it is under way, and can reach the cache, however soon the
    /// process ends) and Winch compiles the code the first calls run (in the compile
    /// worker when there is one, as it does for a listing); Cranelift's replaces
    /// it in `skill.compiled` when ready. For the listing of its tools at load, nothing is
    /// queued in the background: only a call or a human's approval queues Cranelift.
    pub(crate) async fn prepare(inner: &Arc<Inner>, skill: &WasmSkill, purpose: Purpose) -> Result<Prepared, LoadError> {
        let link = Linking::of(skill);
        let not_component = |reason: String| LoadError::NotAComponent { path: skill.path.clone(), reason };
        if let Some(baseline) = inner.baseline.as_ref().filter(|_| !inner.cache.contains(&skill.bytes)).and_then(Inner::baseline_tier) {
            let code = skill.bytes.get().map_err(|e| not_component(e.to_string()))?;
            let (runtime, engine) = (inner.clone(), baseline.engine.clone());
            if purpose == Purpose::Call {
                Self::optimize_once(inner, skill);
            }
            match tokio::task::spawn_blocking(move || runtime.cache.compile_baseline(&engine, &code)).await {
                Ok(Ok(component)) => return link.link(baseline, &component, CacheOutcome::Baseline),
                Ok(Err(error)) => {
                    tracing::debug!(skill = %skill.grant().skill, error = %one_line(&error), "Winch cannot compile it; compiling with Cranelift")
                }
                Err(error) => tracing::debug!(skill = %skill.grant().skill, %error, "Winch compile failed; compiling with Cranelift"),
            }
        }
        // Cranelift's code, compiled here when a call waits for it (cached, or Winch could
        // not compile it: the queued background compile then finds it in the cache).
        let runtime = inner.clone();
        let code = skill.bytes.clone();
        let (component, outcome) =
            tokio::task::spawn_blocking(move || runtime.cache.load(&runtime.optimized.engine, &runtime.optimized.config, &code))
                .await
                .map_err(|e| interrupted(&skill.grant().skill, &e))?
                .map_err(|e| not_component(one_line(&e)))?;
        link.link(&inner.optimized, &component, outcome)
    }

    /// [`optimize_in_background`](Self::optimize_in_background) `skill`'s code, unless
    /// that was started already.
    pub(crate) fn optimize_once(inner: &Arc<Inner>, skill: &WasmSkill) {
        if !skill.compiled.queued.swap(true, Ordering::AcqRel) {
            Self::optimize_in_background(inner, Linking::of(skill), skill.bytes.clone(), skill.compiled.clone());
        }
    }

    /// Compile `code` with Cranelift in the background, one compile at a time, into the
    /// compiled cache and, for a skill whose calls run the baseline's code, linked into
    /// `slot` in place of it (a skill not called yet only gets the cache filled: see
    /// [`Compiled::cached`]). Counted in `in_flight` from now until it
    /// is done, whatever happens to it. A compile whose skill is gone by its turn (unloaded,
    /// or replaced by other bytes) or that was cancelled meanwhile is dropped: nothing is
    /// compiled or cached.
    fn optimize_in_background(inner: &Arc<Inner>, link: Linking, code: Arc<ComponentBytes>, slot: Arc<Compiled>) {
        let done = InFlight::start(inner, link.skill.clone());
        let runtime = inner.clone();
        tokio::spawn(async move {
            let _done = done;
            let Ok(_turn) = runtime.optimizing.acquire().await else { return };
            if Arc::strong_count(&slot) == 1 {
                tracing::debug!(skill = %link.skill, "its skill is gone: its queued compile is dropped");
                return;
            }
            if slot.cancelled.load(Ordering::Acquire) {
                // Queued again by the next approval.
                slot.queued.store(false, Ordering::Release);
                tracing::debug!(skill = %link.skill, "its approval was withdrawn: its queued compile is dropped");
                return;
            }
            // A skill not called yet (compiled ahead) needs the cache filled, nothing
            // loaded; one whose calls run the baseline's code needs Cranelift's.
            let load = slot.called.load(Ordering::Acquire) && slot.get().is_some();
            let compiled = skillhost_core::in_the_background("skillhost-optimize", {
                let runtime = runtime.clone();
                move || {
                    let compiled = if load {
                        runtime.cache.load(&runtime.optimized.engine, &runtime.optimized.config, &code).map(Some)
                    } else {
                        runtime.cache.fill(&runtime.optimized.config, &code).map(|()| None)
                    };
                    // What Cranelift allocated while compiling (hundreds of MB for an
                    // interpreter's component) goes back to the kernel, not to a heap the
                    // process keeps at that size for as long as it lives.
                    skillhost_core::give_back_freed_memory();
                    compiled
                }
            });
            match compiled.await {
                Ok(Ok(None)) => {
                    slot.cached();
                    tracing::debug!(skill = %link.skill, "optimised code in the compiled cache");
                }
                Ok(Ok(Some((component, outcome)))) => match link.link(&runtime.optimized, &component, outcome) {
                    Ok(prepared) => {
                        slot.optimized(prepared);
                        tracing::debug!(skill = %link.skill, "optimised code ready");
                    }
                    Err(error) => {
                        tracing::warn!(skill = %link.skill, %error, "the optimised code did not link; it keeps the baseline code")
                    }
                },
                Ok(Err(error)) => {
                    tracing::warn!(skill = %link.skill, error = %one_line(&error), "Cranelift could not compile it; it keeps the baseline code")
                }
                Err(error) => tracing::warn!(skill = %link.skill, %error, "compiling the optimised code failed"),
            }
        });
    }
}

/// What a skill's code is compiled for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Asking it for its tools at load, under a probe grant.
    Listing,
    /// Its calls, which only approved code gets.
    Call,
}

/// A skill's compiled and linked component, and the background compile that makes
/// Cranelift's code of it.
#[derive(Default)]
pub(crate) struct Compiled {
    /// What calls run: set by the first that needs it, replaced by Cranelift's code when
    /// it was a baseline compiler's (whose code then goes when the calls running on it
    /// end: tens of MB for an interpreter's component).
    current: parking_lot::RwLock<Option<Arc<Prepared>>>,
    /// Held while one caller prepares `current`, so the others wait for it.
    pub(crate) preparing: tokio::sync::Mutex<()>,
    /// Whether Cranelift's compile was queued, by the first call on the baseline tier or
    /// ahead of any at approval: once per skill (again only after a cancelled one).
    pub(crate) queued: AtomicBool,
    /// Whether the approval that queued it was withdrawn: it is dropped at its turn.
    pub(crate) cancelled: AtomicBool,
    /// Whether a call asked for its code: until then what `current` holds is the
    /// listing's, which a compile ahead lets go once the cache holds Cranelift's.
    pub(crate) called: AtomicBool,
}

impl Compiled {
    /// The code calls run now, if any.
    pub(crate) fn get(&self) -> Option<Arc<Prepared>> {
        self.current.read().clone()
    }

    /// The code a first caller prepared, unless the background compile set its own
    /// meanwhile: what calls run from now on.
    fn first(&self, prepared: Prepared) -> Arc<Prepared> {
        self.current.write().get_or_insert_with(|| Arc::new(prepared)).clone()
    }

    /// Cranelift's code, in place of what calls ran until now.
    fn optimized(&self, prepared: Prepared) {
        *self.current.write() = Some(Arc::new(prepared));
    }

    /// Cranelift's code is in the compiled cache, for a skill not called when its compile
    /// started (compiled ahead): the listing's code it may hold goes, and its first call
    /// maps Cranelift's from there. One called meanwhile, on the baseline's code, keeps
    /// it and queues the compile again (a cache hit then, which replaces it).
    fn cached(&self) {
        let mut current = self.current.write();
        if self.called.load(Ordering::Acquire) {
            if current.is_some() {
                self.queued.store(false, Ordering::Release);
            }
        } else {
            current.take();
        }
    }

    /// No code: the next caller prepares it again.
    pub(crate) fn release(&self) {
        self.current.write().take();
    }
}

/// Background compiles held by [`WasmRuntime::hold_compiles`] until this is dropped.
#[must_use = "the compiles resume as soon as this is dropped"]
pub struct CompilesHeld(#[allow(dead_code, reason = "held for its drop")] tokio::sync::OwnedSemaphorePermit);

/// One background compile counted in [`Inner::in_flight`] until dropped.
struct InFlight {
    runtime: Arc<Inner>,
    skill: skillhost_core::SkillName,
}

impl InFlight {
    fn start(runtime: &Arc<Inner>, skill: skillhost_core::SkillName) -> Self {
        runtime.in_flight.send_modify(|names| names.push(skill.clone()));
        Self { runtime: runtime.clone(), skill }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.runtime.in_flight.send_modify(|names| {
            if let Some(at) = names.iter().position(|n| *n == self.skill) {
                names.remove(at);
            }
        });
    }
}

/// What linking a skill's component needs to know, apart from the skill (so that the
/// background compile can link too).
#[derive(Clone)]
struct Linking {
    path: PathBuf,
    /// What its manifest is, for the message of a `wasi:http` import it may not use.
    manifest: skillhost_core::ManifestHint,
    skill: skillhost_core::SkillName,
    reflection: Option<skillhost_package::Reflection>,
    network: bool,
}

impl Linking {
    /// How `skill`'s code links.
    fn of(skill: &WasmSkill) -> Self {
        Self {
            path: skill.path.clone(),
            manifest: skill.manifest,
            skill: skill.grant().skill.clone(),
            reflection: skill.reflection.clone(),
            network: !skill.grant().network.is_empty(),
        }
    }

    /// Link `component`, compiled for `tier`'s engine, ready to instantiate.
    fn link(&self, tier: &Tier, component: &wasmtime::component::Component, outcome: CacheOutcome) -> Result<Prepared, LoadError> {
        let path = &self.path;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld { path: path.clone(), reason: one_line(&e) };
        let linker =
            tier.linker(self.network).map_err(|error| LoadError::Runtime { skill: self.skill.clone(), reason: error.to_string() })?;
        let pre = linker.instantiate_pre(component).map_err(|e| {
            let reason = one_line(&e);
            if !self.network && reason.contains("wasi:http/") {
                LoadError::NeedsNetwork { path: path.clone(), manifest: self.manifest }
            } else if self.reflection.is_some() {
                // A generic component is not expected to be ours: say what did not link.
                LoadError::Runtime { skill: self.skill.clone(), reason: format!("cannot link its imports: {reason}") }
            } else {
                wrong_world(e)
            }
        })?;
        let code = match &self.reflection {
            None => Code::Skill(SkillPre::new(pre).map_err(wrong_world)?),
            Some(reflection) => Code::Generic(
                GenericPre::new(pre, reflection).map_err(|e| LoadError::Runtime { skill: self.skill.clone(), reason: e.to_string() })?,
            ),
        };
        Ok(Prepared { code, engine: tier.engine.clone(), outcome })
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

    /// The tools of a component are decided by its bytes alone (and the host's version).
    fn listing_stamp(&self, _source: &SkillSource) -> Option<String> {
        Some(String::new())
    }

    async fn load_listed(&self, source: &SkillSource, grant: Grant, listing: &serde_json::Value) -> Result<Arc<dyn Skill>, LoadError> {
        Ok(self.load_wasm_listed(source, grant, listing).await?)
    }
}

/// One tool as a component of our world describes it, kept as its listing.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ListedTool {
    name: String,
    description: String,
    input_schema: String,
    output_schema: Option<String>,
    annotations: Annotations,
    examples: Vec<String>,
}

impl From<&ToolSpec> for ListedTool {
    fn from(tool: &ToolSpec) -> Self {
        Self {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.to_string(),
            output_schema: tool.output_schema.as_ref().map(ToString::to_string),
            annotations: tool.annotations,
            examples: tool.examples.iter().map(ToString::to_string).collect(),
        }
    }
}

/// The tools a component listed, each checked; how many there are and that no name
/// comes twice is the envelope's check ([`Envelope::set_tools`]).
fn tool_specs(name: &skillhost_core::SkillName, listed: Vec<ListedTool>) -> Result<Vec<ToolSpec>, LoadError> {
    listed
        .into_iter()
        .map(|tool| {
            ToolSpec::from_parts(
                tool.name,
                tool.description,
                &tool.input_schema,
                tool.output_schema.as_deref(),
                tool.annotations,
                &tool.examples,
            )
            .map_err(|e| LoadError::Tools { skill: name.clone(), reason: e.to_string() })
        })
        .collect()
}

/// Whether `source` has a skill.toml: embedded in the component, or beside it in its
/// folder (read for a message only: what loads was read by the package reader).
fn manifest_hint(source: &SkillSource) -> skillhost_core::ManifestHint {
    let SkillCode::Wasm { bytes, .. } = &source.code else { return skillhost_core::ManifestHint::NoHosts };
    let embedded = matches!(skillhost_package::read_section(bytes, skillhost_package::MANIFEST_SECTION), Ok(Some(_)));
    let beside = source.origin.is_dir() && std::fs::symlink_metadata(source.origin.join("skill.toml")).is_ok_and(|m| m.is_file());
    if embedded || beside { skillhost_core::ManifestHint::NoHosts } else { skillhost_core::ManifestHint::None }
}

/// A load's blocking task that did not finish: cancelled (the runtime shuts down) or
/// panicked. Never reported as a fault of the component.
fn interrupted(skill: &skillhost_core::SkillName, error: &tokio::task::JoinError) -> LoadError {
    let reason = if error.is_cancelled() {
        "it was cancelled (the host is shutting down); it loads again at the next start".to_owned()
    } else {
        format!("its compile task failed ({error}); this is a host bug, please report it")
    };
    LoadError::Interrupted { skill: skill.clone(), reason }
}

/// The export of our world, `skillhost:skill/guest` at the version this host runs.
const OUR_WORLD_EXPORT: &str = "skillhost:skill/guest@0.1.0";

/// Ask the skill for its tools, in a fresh instance under a probe grant (the skill may not
/// be approved: it gets no directory, no network and no secrets). The caller checks them.
async fn describe(skill: &WasmSkill, code: &Prepared) -> Result<Vec<ListedTool>, LoadError> {
    let name = skill.grant().skill.clone();
    let runtime_error = |reason: String| LoadError::Runtime { skill: name.clone(), reason };
    let Prepared { code: Code::Skill(pre), engine, .. } = code else {
        return Err(runtime_error("its component is not of our world".into()));
    };
    // No directory at all: describing its tools needs none, and so nothing it does here
    // can write to the host's disk.
    let probe = skill.grant().probe_in_memory();
    let offline = http::SkillNet::offline(&probe, skill.runtime.net.clone());
    let (raw, _) = skill
        .with_store(engine, (&probe, &offline), "tools", probe.limits.timeout, None, async |store| {
            pre.instantiate_async(&mut *store).await?.skillhost_skill_guest().call_tools(store).await
        })
        .await
        .map_err(|e| runtime_error(format!("describing its tools failed: {e}")))?;
    Ok(raw
        .into_iter()
        .map(|tool| ListedTool {
            name: tool.name,
            description: tool.description,
            input_schema: tool.input_schema,
            output_schema: tool.output_schema,
            annotations: Annotations {
                read_only: tool.annotations.read_only,
                destructive: tool.annotations.destructive,
                idempotent: tool.annotations.idempotent,
                open_world: tool.annotations.open_world,
            },
            examples: tool.examples,
        })
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `wasi:http` linker waits for the first skill granted network: a runtime whose
    /// skills have none never makes it.
    #[test]
    fn the_http_linker_is_made_by_the_first_skill_with_network() {
        let tier = Tier::new(&WasmConfig { cache_dir: None, ..WasmConfig::default() }, false).unwrap();
        assert!(tier.linker(false).is_ok());
        assert!(tier.linker_http.get().is_none(), "a skill without network made the wasi:http linker");
        let http = tier.linker(true).unwrap() as *const Linker<CallState>;
        assert!(tier.linker_http.get().is_some_and(Result::is_ok), "the first skill with network makes it");
        assert_eq!(tier.linker(true).unwrap() as *const Linker<CallState>, http, "and every later one shares it");
        assert_ne!(tier.linker(false).unwrap() as *const Linker<CallState>, http);
    }
}
