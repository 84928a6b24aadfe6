//! [`Registry`]: the catalog over the layers, opening it (and when the skills found load,
//! [`FirstLoad`]), and the call path with its trust check. One job per child module:
//! `rescan` loads (a name brought in line with the disk, a new version validated before
//! it replaces the old), `approval` holds the human-only trust operations, `scripts` the
//! runs of a skill's scripts and their policy; `crate::install` changes the user layer.
//!
//! # Human-only operations
//!
//! [`Registry::approve`], [`Registry::reject`], [`Registry::disable`] and
//! [`Registry::enable`] change what may run. **They must only ever be reachable by a
//! human** (the CLI, an editor's own UI). Never expose them, directly or through a
//! wrapper, to an agent: not as an MCP tool, not as a forge step, not as anything a
//! skill or a model can invoke. An agent that can approve is an agent that can grant
//! itself anything.

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use skillhost_core::{
    ByteSize, CallContext, DataKey, FileMode, Grant, LoadError, Policy, RiskTier, RunPolicy, SkillCode, SkillName, SkillRuntime,
    ToolOutput, text,
};
use tokio::sync::broadcast;

use crate::catalog::{
    ApprovalRequest, Entry, INSTRUCTIONS_RUNTIME, Loaded, PolicyFrom, RegistryEvent, SCRIPTS_RUNTIME, Scripts, Shadowed, diff_lines,
};
use crate::config::{FirstLoad, Layer, RegistryConfig};
use crate::error::RegistryError;
use crate::listing::ListingCache;
use crate::snapshot::{self, Candidate, Instructions, Parsed, Snapshot};
use crate::{pack, skillmd};
use sha2::Digest;
use skillhost_store::audit::{RunAudit, RunOutcome, RunRecord};
use skillhost_store::stats::Outcome;
use skillhost_store::{ApprovalChannel, Kept, Observation, PolicyStore, SqliteStats, SqliteTrustStore, Stats, TrustState, TrustStore};

mod approval;
mod observe;
mod rescan;
mod scripts;

/// Skill discovery over layered directories, trust, hot reload and calls.
pub struct Registry {
    pub(crate) config: RegistryConfig,
    pub(crate) layers: Vec<(Layer, PathBuf)>,
    /// The runtime skills load on, keeping their tool listings (`<data_dir>/listings`).
    runtime: ListingCache,
    policy: Policy,
    trust: Arc<dyn TrustStore>,
    /// Run policies, package locks and approved files ([`skillhost_store::State::policies`]).
    policies: Arc<dyn PolicyStore>,
    entries: RwLock<BTreeMap<SkillName, Arc<Entry>>>,
    /// Held while the catalog is rescanned or the user layer changed (install, remove,
    /// rollback), so those apply one at a time. The first load of the skills found at open
    /// does not hold it: an install waits for no other skill's code.
    pub(crate) reload: tokio::sync::Mutex<()>,
    /// One lock per name, held while that name is brought in line with the disk: two
    /// loads of one name never interleave, loads of different names never wait on each
    /// other. An entry is dropped when nobody holds or waits for it.
    name_locks: Mutex<BTreeMap<SkillName, Arc<tokio::sync::Mutex<()>>>>,
    /// Held, briefly and never across skill code, while an entry's trust state is read
    /// and written: by the human's commands (approve, reject, disable, enable) and by a
    /// rescan committing the entry it loaded, which reads the trust store again under it.
    trust_ops: Mutex<()>,
    events: broadcast::Sender<RegistryEvent>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    /// Usage statistics (`<data_dir>/stats.db`, opened by its writer at the first rows); `None`
    /// when they cannot be kept (no writer thread).
    stats: Option<Arc<dyn Stats>>,
    /// Team mode: the content hash each skill must have ([`RegistryConfig::pins`]).
    pins: RwLock<Option<crate::config::Pins>>,
    /// The names found at open whose first load has not finished yet.
    loading: tokio::sync::watch::Sender<BTreeSet<SkillName>>,
    /// The names of the background first load not started yet, in the order they start:
    /// smallest code first, except that a name a call waits for ([`wanted`](Self::wanted))
    /// starts before any other.
    queued: Mutex<VecDeque<SkillName>>,
    /// The loading names calls wait for, and how many calls wait for each: while one is
    /// waited for, the background load starts no skill nobody waits for.
    wanted: tokio::sync::watch::Sender<BTreeMap<SkillName, usize>>,
}

/// Which skills a rescan loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// Only those whose load runs none of their code (the rest are left for later).
    RunsNothing,
    /// Every one.
    All,
}

/// One call waiting for a loading skill, counted in [`Registry::wanted`] until dropped
/// (the call answered, or given up).
struct Wanted<'a> {
    wanted: &'a tokio::sync::watch::Sender<BTreeMap<SkillName, usize>>,
    name: SkillName,
}

impl<'a> Wanted<'a> {
    fn new(wanted: &'a tokio::sync::watch::Sender<BTreeMap<SkillName, usize>>, name: SkillName) -> Self {
        wanted.send_modify(|w| *w.entry(name.clone()).or_default() += 1);
        Self { wanted, name }
    }
}

impl Drop for Wanted<'_> {
    fn drop(&mut self) {
        self.wanted.send_modify(|w| {
            if let Some(count) = w.get_mut(&self.name) {
                *count -= 1;
                if *count == 0 {
                    w.remove(&self.name);
                }
            }
        });
    }
}

/// Skills loaded at once by a full rescan.
const RESCAN_CONCURRENCY: usize = 8;

impl Registry {
    /// Open the trust store, scan and load every layer, and (if `config.watch`) start
    /// watching them. Skills that fail to load are listed with their error. Unless
    /// `config.first_load` is [`FirstLoad::Open`], return once what loads without running
    /// any of its code has loaded (instructions, and code whose tool listing an earlier
    /// load kept); the rest loads in the background ([`FirstLoad::Background`]), smallest
    /// code first, each skill announced ([`RegistryEvent::Added`]) as it is ready.
    /// Opened [`FirstLoad::OnDemand`], nothing loads until asked for, not even what would
    /// run nothing. [`loading`](Self::loading) tells which are still to come.
    pub async fn open(config: RegistryConfig, runtime: Arc<dyn SkillRuntime>, policy: Policy) -> Result<Arc<Self>, RegistryError> {
        std::fs::create_dir_all(&config.user).map_err(RegistryError::io(&config.user, "cannot create the user skills directory"))?;
        // The host's stores when it gave them, else SQLite files and a policies folder in
        // the data dir.
        let state = config.state.as_ref();
        let trust: Arc<dyn TrustStore> = match state {
            Some(state) => state.trust.clone(),
            None => Arc::new(SqliteTrustStore::open(&config.data_dir)?),
        };
        let stats: Option<Arc<dyn Stats>> = match state {
            Some(state) => state.stats.clone(),
            None => SqliteStats::open(&config.data_dir)
                .inspect_err(|error| tracing::warn!(%error, "no usage statistics"))
                .ok()
                .map(|stats| Arc::new(stats) as Arc<dyn Stats>),
        };
        let policies: Arc<dyn PolicyStore> = match state {
            Some(state) => state.policies.clone(),
            None => Arc::new(skillhost_store::FilePolicies::new(config.data_dir.join("policies"))),
        };
        // Canonical paths, so watcher events map back to their layer.
        let layers = config.layers().into_iter().map(|(layer, dir)| (layer, std::fs::canonicalize(&dir).unwrap_or(dir))).collect();
        let registry = Arc::new(Self {
            layers,
            runtime: ListingCache::new(runtime, &config.data_dir),
            policy,
            trust,
            policies,
            entries: RwLock::new(BTreeMap::new()),
            reload: tokio::sync::Mutex::new(()),
            name_locks: Mutex::new(BTreeMap::new()),
            trust_ops: Mutex::new(()),
            events: broadcast::channel(1024).0,
            watcher: Mutex::new(None),
            stats,
            pins: RwLock::new(config.pins.clone()),
            loading: tokio::sync::watch::Sender::new(BTreeSet::new()),
            queued: Mutex::new(VecDeque::new()),
            wanted: tokio::sync::watch::Sender::new(BTreeMap::new()),
            config,
        });
        // Trust changes a human made on another host sharing the store apply here too.
        if let Some(changes) = registry.trust.changes() {
            tokio::spawn(follow_trust(Arc::downgrade(&registry), changes));
        }
        // Watch first: a change made while the layers load is applied after.
        if registry.config.watch {
            let watcher = crate::watch::start(&registry)?;
            *registry.watcher.lock() = Some(watcher);
        }
        if registry.config.first_load == FirstLoad::Open {
            registry.rescan_all().await?;
            return Ok(registry);
        }
        // A command about one skill reads no other: every name waits until asked for.
        if registry.config.first_load == FirstLoad::OnDemand {
            let names = registry.names_on_disk();
            registry.loading.send_replace(names.clone());
            *registry.queued.lock() = names.into_iter().collect();
            return Ok(registry);
        }
        // What loads without running anything (instructions, code with a kept listing)
        // loads now, in milliseconds: a restart answers with its whole catalog. The rest
        // (a first listing, which compiles a component or starts a server) loads after.
        let later = {
            let _guard = registry.reload.lock().await;
            registry.rescan_names(registry.names_on_disk(), Pass::RunsNothing).await?
        };
        registry.loading.send_replace(later.clone());
        registry.queue_smallest_first(later);
        let loader = registry.clone();
        tokio::spawn(async move {
            // First listings compile: as many at once as there are cores, so that the
            // skill a call moves to the front gets a slot soon.
            let slots = std::thread::available_parallelism().map_or(2, std::num::NonZero::get).clamp(2, RESCAN_CONCURRENCY);
            if let Err(error) = loader.rescan_queue(&loader.queued, Pass::All, slots).await {
                tracing::error!(%error, "loading the skills failed");
            }
            loader.loading.send_replace(BTreeSet::new());
        });
        Ok(registry)
    }

    /// The names found at open whose first load has not finished (empty when the
    /// registry was opened with [`FirstLoad::Open`]).
    pub fn loading(&self) -> BTreeSet<SkillName> {
        self.loading.borrow().clone()
    }

    /// Wait until `name` is no longer loading (at once if it is not): then its entry, if
    /// it has one, is what the first load made of it.
    ///
    /// The wait has the cores: a skill not started yet starts next, ahead of every skill
    /// nobody waits for, and until it has loaded the background load starts no other
    /// (what is already loading finishes). Opened [`FirstLoad::OnDemand`], it loads it.
    pub async fn wait_loaded(&self, name: &str) {
        let Some(name) = self.loading.borrow().iter().find(|n| n.as_str() == name).cloned() else { return };
        if self.config.first_load == FirstLoad::OnDemand && self.unqueue(&name) {
            if let Err(error) = self.rescan_pass(&name, Pass::All).await {
                tracing::error!(skill = %name, %error, "loading the skill failed");
            }
            self.loading.send_if_modified(|loading| loading.remove(&name));
            return;
        }
        let _wanted = Wanted::new(&self.wanted, name.clone());
        let mut loading = self.loading.subscribe();
        let _ = loading.wait_for(|names| !names.contains(&name)).await;
    }

    /// Wait until every skill found at open has loaded (or failed to). Opened
    /// [`FirstLoad::OnDemand`], it loads them.
    pub async fn ready(&self) {
        if self.config.first_load == FirstLoad::OnDemand && !self.queued.lock().is_empty() {
            let queued: Vec<SkillName> = self.queued.lock().drain(..).collect();
            self.queue_smallest_first(queued);
            let slots = std::thread::available_parallelism().map_or(2, std::num::NonZero::get).clamp(2, RESCAN_CONCURRENCY);
            if let Err(error) = self.rescan_queue(&self.queued, Pass::All, slots).await {
                tracing::error!(%error, "loading the skills failed");
            }
        }
        let mut loading = self.loading.subscribe();
        let _ = loading.wait_for(BTreeSet::is_empty).await;
    }

    /// Queue `names` for their first load smallest code first: compiles share the cores,
    /// and a large component started first would hold up every small one behind it. A
    /// skill a call waits for starts first, and alone ([`wait_loaded`](Self::wait_loaded)).
    fn queue_smallest_first(&self, names: impl IntoIterator<Item = SkillName>) {
        let mut names: Vec<SkillName> = names.into_iter().collect();
        names.sort_by_cached_key(|name| snapshot::code_size(&self.layers, name));
        *self.queued.lock() = names.into();
    }

    /// Take `name` out of the first load's queue: whether it was in it (not started yet).
    fn unqueue(&self, name: &SkillName) -> bool {
        let mut queued = self.queued.lock();
        queued.iter().position(|n| n == name).and_then(|at| queued.remove(at)).is_some()
    }

    /// Every name in a layer, on disk now.
    fn names_on_disk(&self) -> BTreeSet<SkillName> {
        self.layers.iter().flat_map(|(layer, dir)| snapshot::names_in(*layer, dir)).collect()
    }

    /// The layers, in precedence order, as the registry resolved them.
    pub fn layers(&self) -> &[(Layer, PathBuf)] {
        &self.layers
    }

    /// Receive every catalog change from now on. A receiver that falls more than 1024
    /// events behind gets `Lagged` and should re-read [`catalog`](Self::catalog).
    pub fn subscribe(&self) -> broadcast::Receiver<RegistryEvent> {
        self.events.subscribe()
    }

    /// Every entry, by name.
    pub fn catalog(&self) -> Vec<Arc<Entry>> {
        self.entries.read().values().cloned().collect()
    }

    /// The entry of `name`.
    pub fn entry(&self, name: &str) -> Result<Arc<Entry>, RegistryError> {
        let unknown = || RegistryError::UnknownSkill { name: name.to_owned() };
        let key = SkillName::new(name).map_err(|_| unknown())?;
        self.entries.read().get(&key).cloned().ok_or_else(unknown)
    }

    /// Call `tool` of `skill`. Fails without running anything unless the skill is
    /// loaded and approved; the error names the command that fixes it. A skill still
    /// loading is waited for. The version serving at the start of the call finishes it,
    /// whatever reloads meanwhile.
    pub async fn call(&self, skill: &str, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, RegistryError> {
        let span = observe::call_span(skill, tool);
        let called = async {
            let _in_flight = observe::InFlight::start();
            self.wait_loaded(skill).await;
            let entry = self.entry(skill).inspect_err(|_| observe::call_refused(None, tool))?;
            let runnable = entry.callable().inspect_err(|_| observe::call_refused(Some(&entry), tool))?;
            let started = std::time::Instant::now();
            let result = runnable.call(tool, input, cx).await;
            observe::call_done(&entry, tool, &result, started.elapsed());
            if let Some(stats) = &self.stats {
                stats.record_call(skill, tool, Outcome::of(&result), started.elapsed());
            }
            Ok(result?)
        };
        let result = tracing::Instrument::instrument(called, span.clone()).await;
        observe::span_outcome(&span, &result);
        result
    }

    /// The usage statistics of calls made through [`call`](Self::call), when the store
    /// could be opened.
    pub fn stats(&self) -> Option<&dyn Stats> {
        self.stats.as_deref()
    }

    /// Team mode: serve exactly what `pins` pins from now on (`None`: whatever the layers
    /// hold), and bring every skill in line with it.
    pub async fn set_pins(&self, pins: Option<crate::config::Pins>) -> Result<(), RegistryError> {
        *self.pins.write() = pins;
        self.rescan_all().await
    }

    /// Team mode: why what is served is not what the lock pins, one sentence per skill: a
    /// skill refused because its files are not the locked ones (or the lock does not name
    /// it), and a locked skill not served (not installed yet, or failing to load). Empty
    /// when every locked skill serves its locked bytes, or without a lock (for a readiness
    /// check and `doctor`).
    pub fn not_as_locked(&self) -> Vec<String> {
        let pins = self.pins.read();
        let Some(pins) = pins.as_ref() else { return Vec::new() };
        let entries = self.entries.read();
        let mut reasons: Vec<String> = entries
            .values()
            .filter_map(|e| e.error.as_ref().filter(|e| matches!(***e, RegistryError::NotAsLocked { .. })).map(|e| e.to_string()))
            .collect();
        for name in pins.hashes.keys() {
            let served = SkillName::new(name).ok().and_then(|n| entries.get(&n)).is_some_and(|e| e.loaded.is_some() && e.error.is_none());
            let refused = reasons.iter().any(|r| r.starts_with(&format!("skill `{name}` ")));
            if !served && !refused {
                reasons.push(format!(
                    "skill `{name}` is pinned by {} but not served yet (not installed, or it does not load); see `skillhost list` and the log",
                    pins.lock.display()
                ));
            }
        }
        reasons
    }

    /// Claims of calls that run at most once across the hosts of a shared state store
    /// ([`RegistryConfig::state`]), for a front whose clients name their calls; `None`
    /// with a store of one host's.
    pub fn claims(&self) -> Option<Arc<dyn skillhost_store::CallClaims>> {
        self.config.state.as_ref().and_then(|state| state.claims.clone())
    }

    /// The stores this registry was opened over ([`RegistryConfig::state`]), when given.
    pub fn state(&self) -> Option<&skillhost_store::State> {
        self.config.state.as_ref()
    }

    /// The files runs left, readable from every host of a shared state store; `None` with
    /// SQLite (the MCP front keeps them in its memory).
    pub fn run_files(&self) -> Option<Arc<dyn skillhost_store::RunFileStore>> {
        self.config.state.as_ref().and_then(|state| state.run_files.clone())
    }

    /// The stored state of a skill that has not loaded.
    fn stored_state(&self, identity: &DataKey) -> Result<TrustState, RegistryError> {
        Ok(self.trust.get(identity.as_str())?.map_or(TrustState::PendingReview, |r| r.state))
    }

    /// Replace `entry` with a copy in `state`, announcing the change.
    fn set_state(&self, entry: &Entry, state: TrustState) {
        let changed = entry.state != state;
        self.entries.write().insert(entry.name.clone(), Arc::new(Entry { state, ..entry.clone() }));
        if changed {
            tracing::info!(skill = %entry.name, %state, "trust state changed");
            // Approved code is compiled now, so its first call need not; nothing a human
            // did not approve is compiled ahead or kept compiled, and a compile queued by an
            // approval withdrawn before its turn is dropped.
            if let Some(skill) = entry.loaded.as_ref().and_then(|l| l.skill.as_ref()) {
                if state == TrustState::Approved {
                    skill.compile_ahead();
                } else {
                    skill.cancel_compile_ahead();
                    skill.release_code();
                }
            }
            self.emit(RegistryEvent::StateChanged { name: entry.name.clone(), state });
        }
    }

    fn emit(&self, event: RegistryEvent) {
        // No receivers is fine: nobody is listening yet.
        let _ = self.events.send(event);
    }
}

/// Apply the trust (and run policy) changes the store tells of, while the registry lives. A change the
/// receiver fell behind on (more than the channel holds) reads every state again.
async fn follow_trust(registry: std::sync::Weak<Registry>, mut changes: broadcast::Receiver<skillhost_store::TrustChange>) {
    loop {
        let identity = match changes.recv().await {
            Ok(skillhost_store::TrustChange::Skill(identity)) => Some(identity),
            Ok(skillhost_store::TrustChange::All) | Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(registry) = registry.upgrade() else { return };
        if let Err(error) = registry.refresh_trust(identity.as_deref()) {
            tracing::warn!(%error, "cannot read a trust change made on another host; it applies when the skill next loads");
        }
        // A run policy or package lock written elsewhere: the skill loads again under it
        // (a load whose files and records are unchanged does nothing).
        let names: BTreeSet<SkillName> = registry
            .catalog()
            .iter()
            .filter(|e| {
                e.loaded.as_ref().is_some_and(|l| l.scripts.is_some()) && identity.as_deref().is_none_or(|id| e.identity.as_str() == id)
            })
            .map(|e| e.name.clone())
            .collect();
        if !names.is_empty()
            && let Err(error) = registry.rescan(&names).await
        {
            tracing::warn!(%error, "cannot load skills again under a policy written on another host");
        }
    }
}
