//! [`Registry`]: the catalog over the layers, the call path with its trust check, the
//! (re)scan that validates a new version before it replaces the old, and the human-only
//! trust operations.
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
use skillhost_store::{ApprovalChannel, Observation, SqliteStats, SqliteTrustStore, Stats, TrustState, TrustStore};

/// The capability digest of an instruction-only skill, which asks for nothing.
const NO_CAPABILITIES: &str = "none";
/// The first line of the request of a skill whose bytes an agent wrote.
const AGENT_WRITTEN: &str = "written by an agent (the forge's skill_create or skill_update): every file of it, instructions included, is text no human has read yet";

/// Skill discovery over layered directories, trust, hot reload and calls.
pub struct Registry {
    pub(crate) config: RegistryConfig,
    pub(crate) layers: Vec<(Layer, PathBuf)>,
    /// The runtime skills load on, keeping their tool listings (`<data_dir>/listings`).
    runtime: ListingCache,
    policy: Policy,
    trust: Arc<dyn TrustStore>,
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
    /// Usage statistics (`<data_dir>/stats.db`); `None` when it cannot be opened.
    stats: Option<Arc<dyn Stats>>,
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

/// Whether this is the first time this process sees `skill` fail to load with `error`:
/// an unchanged broken skill fails again at every rescan and reload, and every registry
/// the process opens loads it again, but one warning says all there is to say. A
/// different error (the skill was edited) is reported again.
fn first_report(skill: &SkillName, error: &str) -> bool {
    static REPORTED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());
    REPORTED.lock().insert((skill.as_str().to_owned(), error.to_owned()))
}

/// The audit row of one run, begun when the request arrives (its time, command and
/// input bytes) and finished with what became of it.
struct RunAuditRow {
    time: std::time::SystemTime,
    started: std::time::Instant,
    skill: String,
    command: String,
    bytes_in: u64,
}

impl RunAuditRow {
    fn start(log: &RunAudit, skill: &str, command: &[String], inputs: &[skillhost_core::RunInput]) -> Self {
        Self {
            time: std::time::SystemTime::now(),
            started: std::time::Instant::now(),
            skill: skill.to_owned(),
            command: log.command(command),
            bytes_in: inputs.iter().map(|i| i.bytes.len() as u64).sum(),
        }
    }

    /// The row: exit code or signal and the bytes that came out (printed, and the files
    /// of its workspace), or the refusal or failure as its error says it.
    fn finish(self, result: &Result<skillhost_core::RunOutput, RegistryError>) -> RunRecord {
        use skillhost_core::RunError;
        let (outcome, bytes_out) = match result {
            Ok(out) => {
                let outcome = match (out.exit_code, out.signal) {
                    (Some(code), _) => RunOutcome::Exit(code),
                    (None, Some(signal)) => RunOutcome::Signal(signal),
                    (None, None) => RunOutcome::Failed("it ended with neither an exit code nor a signal".into()),
                };
                (outcome, out.stdout_bytes + out.stderr_bytes + out.files.iter().map(|f| f.size).sum::<u64>())
            }
            Err(error) => {
                let text = skillhost_core::text::one_line(&error.to_string(), 600);
                let outcome = match error {
                    RegistryError::Run(RunError::Unavailable { .. } | RunError::Jail { .. } | RunError::Cancelled { .. }) => {
                        RunOutcome::Failed(text)
                    }
                    _ => RunOutcome::Refused(text),
                };
                (outcome, 0)
            }
        };
        RunRecord {
            time: self.time,
            skill: self.skill,
            command: self.command,
            outcome,
            bytes_in: self.bytes_in,
            bytes_out,
            duration: self.started.elapsed(),
        }
    }
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
    /// code first, each skill announced ([`RegistryEvent::Added`]) as it is ready, or when
    /// asked for ([`FirstLoad::OnDemand`]); [`loading`](Self::loading) tells which are
    /// still to come.
    pub async fn open(config: RegistryConfig, runtime: Arc<dyn SkillRuntime>, policy: Policy) -> Result<Arc<Self>, RegistryError> {
        std::fs::create_dir_all(&config.user).map_err(RegistryError::io(&config.user, "cannot create the user skills directory"))?;
        let trust: Arc<dyn TrustStore> = Arc::new(SqliteTrustStore::open(&config.data_dir)?);
        // Canonical paths, so watcher events map back to their layer.
        let layers = config.layers().into_iter().map(|(layer, dir)| (layer, std::fs::canonicalize(&dir).unwrap_or(dir))).collect();
        let stats = SqliteStats::open(&config.data_dir)
            .inspect_err(|error| tracing::warn!(%error, "no usage statistics"))
            .ok()
            .map(|stats| Arc::new(stats) as Arc<dyn Stats>);
        let registry = Arc::new(Self {
            layers,
            runtime: ListingCache::new(runtime, &config.data_dir),
            policy,
            trust,
            entries: RwLock::new(BTreeMap::new()),
            reload: tokio::sync::Mutex::new(()),
            name_locks: Mutex::new(BTreeMap::new()),
            trust_ops: Mutex::new(()),
            events: broadcast::channel(1024).0,
            watcher: Mutex::new(None),
            stats,
            loading: tokio::sync::watch::Sender::new(BTreeSet::new()),
            queued: Mutex::new(VecDeque::new()),
            wanted: tokio::sync::watch::Sender::new(BTreeMap::new()),
            config,
        });
        // Watch first: a change made while the layers load is applied after.
        if registry.config.watch {
            let watcher = crate::watch::start(&registry)?;
            *registry.watcher.lock() = Some(watcher);
        }
        if registry.config.first_load == FirstLoad::Open {
            registry.rescan_all().await?;
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
        let loader = registry.clone();
        // Smallest code first: compiles share the cores, and a large component started
        // first would hold up every small one behind it. A skill a call waits for starts
        // first, and alone ([`wait_loaded`](Self::wait_loaded)).
        let mut later: Vec<SkillName> = later.into_iter().collect();
        later.sort_by_cached_key(|name| snapshot::code_size(&registry.layers, name));
        *registry.queued.lock() = later.into();
        if registry.config.first_load == FirstLoad::OnDemand {
            return Ok(registry);
        }
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
            let slots = std::thread::available_parallelism().map_or(2, std::num::NonZero::get).clamp(2, RESCAN_CONCURRENCY);
            if let Err(error) = self.rescan_queue(&self.queued, Pass::All, slots).await {
                tracing::error!(%error, "loading the skills failed");
            }
        }
        let mut loading = self.loading.subscribe();
        let _ = loading.wait_for(BTreeSet::is_empty).await;
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
        self.wait_loaded(skill).await;
        let runnable = self.entry(skill)?.callable()?;
        let started = std::time::Instant::now();
        let result = runnable.call(tool, input, cx).await;
        if let Some(stats) = &self.stats {
            stats.record_call(skill, tool, Outcome::of(&result), started.elapsed());
        }
        Ok(result?)
    }

    /// Run `command` of `skill`'s scripts, with `inputs` in its workspace, in the jail
    /// (see [`skillhost_core::run`]). Fails without running anything unless the skill is a
    /// SKILL.md skill with scripts, loaded and approved, and `command` starts one of the
    /// scripts that approval listed ([`skillhost_core::run::command_starts_script`]), unless
    /// the policy it showed allows any command; what runs is the snapshot its approval
    /// covered, under that policy. Counted in the statistics like a call (tool `run`).
    pub async fn run(
        &self,
        skill: &str,
        command: Vec<String>,
        inputs: Vec<skillhost_core::RunInput>,
        cx: CallContext,
    ) -> Result<skillhost_core::RunOutput, RegistryError> {
        self.wait_loaded(skill).await;
        let entry = self.entry(skill)?;
        let loaded = loaded(&entry)?;
        let Some(scripts) = &loaded.scripts else {
            let reason = match loaded.runtime {
                INSTRUCTIONS_RUNTIME => "it is instructions only; read its SKILL.md".to_owned(),
                _ => format!("it is a {} skill; call its tools (`skillhost call {skill} TOOL`)", loaded.runtime),
            };
            return Err(RegistryError::NotRunnable { name: skill.to_owned(), reason });
        };
        // From here on the request is a run of this skill's scripts: audited, refused or not.
        let audit = self.config.audit.as_ref().map(|log| RunAuditRow::start(log, skill, &command, &inputs));
        let result = async {
            if entry.state != TrustState::Approved {
                return Err(RegistryError::NotCallable { name: skill.to_owned(), state: entry.state });
            }
            let (env, node_env) = match (&scripts.lock, scripts.declares_packages()) {
                (_, false) => (None, None),
                (Some(lock), true) => ((!lock.env.is_empty()).then(|| lock.env.clone()), lock.node.as_ref().map(|n| n.env.clone())),
                (None, true) => {
                    let node = scripts.node.as_ref().map(|n| n.packages.clone()).unwrap_or_default();
                    return Err(RegistryError::NotRunnable {
                        name: skill.to_owned(),
                        reason: format!(
                            "its packages ({}) are not resolved and installed yet; `skillhost approve {skill}` does both, showing the exact versions",
                            scripts.packages.iter().chain(&node).cloned().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            };
            let grant = scripts.policy.grant(&entry.name, &self.policy, &entry.identity).map_err(LoadError::from)?;
            let job = skillhost_core::ScriptJob {
                skill: entry.name.clone(),
                content_hash: loaded.content_hash.clone(),
                files: loaded.files.clone(),
                grant,
                workspace: scripts.policy.workspace,
                command,
                inputs,
                env,
                node_env,
                any_command: scripts.policy.any_command,
            };
            let started = std::time::Instant::now();
            // The approval binds what runs: a command that starts none of its scripts (unless
            // its policy allows any) is refused here, before the runtime is asked.
            let result = match job.check() {
                Ok(()) => self.runtime.run_script(job, cx).await,
                Err(refused) => Err(refused),
            };
            if let Some(stats) = &self.stats {
                let outcome = match &result {
                    Ok(_) => Outcome::Ok,
                    Err(skillhost_core::RunError::Refused { .. } | skillhost_core::RunError::Cancelled { .. }) => Outcome::CallerError,
                    Err(_) => Outcome::Failed,
                };
                stats.record_call(skill, "run", outcome, started.elapsed());
            }
            Ok(result?)
        }
        .await;
        if let (Some(log), Some(row)) = (&self.config.audit, audit) {
            log.log.record_run(row.finish(&result));
        }
        result
    }

    /// Where the run policy of the skill identified by `identity` is kept: in the host's
    /// data dir, outside every skill folder.
    pub fn policy_path(&self, identity: &DataKey) -> PathBuf {
        self.config.data_dir.join("policies").join(format!("{identity}.toml"))
    }

    /// Write `name`'s run policy (a human's command, like [`approve`](Self::approve)) and
    /// load the skill again: a policy that grants something else changes its capability
    /// digest, so it needs approval again. Returns the policy file.
    pub async fn set_policy(&self, name: &str, policy: &RunPolicy) -> Result<PathBuf, RegistryError> {
        let (_, identity) = self.identity_of(name)?;
        let path = self.policy_path(&identity);
        let text = format!("# The run policy of skill `{name}`, written by `skillhost policy`.\n{}", policy.to_toml());
        self.write_beside(name, &path, &text).await?;
        Ok(path)
    }

    /// Where the resolved packages of the skill identified by `identity` are kept, beside
    /// its policy.
    pub fn lock_path(&self, identity: &DataKey) -> PathBuf {
        self.config.data_dir.join("policies").join(format!("{identity}.lock"))
    }

    /// What makes the SKILL.md skill `name` (identified by `identity`, holding `files`)
    /// runnable code, if anything: its scripts; the policy they run under, the host's
    /// (`skillhost policy`) when a human wrote one, else what its skill.toml asks, else
    /// nothing; the packages they declare and, when still fresh, their lock.
    fn scripts_of(&self, identity: &DataKey, name: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<Option<Scripts>, RegistryError> {
        let scripts: Vec<(String, String)> =
            skillhost_core::run::scripts_of(files).into_iter().map(|(path, hash)| (path.to_owned(), hash)).collect();
        if scripts.is_empty() {
            return Ok(None);
        }
        let policy_error = |path: &Path, reason: String| RegistryError::Policy { name: name.to_owned(), path: path.to_owned(), reason };
        let path = self.policy_path(identity);
        let (policy, policy_from) = if path.exists() {
            (RunPolicy::read(&path).map_err(|e| policy_error(&path, e.to_string()))?, PolicyFrom::Host)
        } else if let Some(toml) = files.get("skill.toml") {
            let manifest = skillhost_core::SkillManifest::parse_bytes(toml, Path::new("skill.toml"))
                .map_err(|e| RegistryError::BadScripts { name: name.to_owned(), reason: format!("its skill.toml: {e}") })?;
            if manifest.name.as_str() != name {
                let reason = format!("its skill.toml names `{}`; write `name = \"{name}\"`", manifest.name);
                return Err(RegistryError::BadScripts { name: name.to_owned(), reason });
            }
            (RunPolicy::asked_by(&manifest), PolicyFrom::Manifest)
        } else {
            (RunPolicy::none(), PolicyFrom::Default)
        };
        let packages = skillhost_core::run::declared_packages(files, &policy)
            .map_err(|e| RegistryError::BadScripts { name: name.to_owned(), reason: e.to_string() })?;
        let sources = &self.config.packages;
        let node = skillhost_core::run::declared_node(files, &sources.npm)
            .map_err(|e| RegistryError::BadScripts { name: name.to_owned(), reason: e.to_string() })?;
        let path = self.lock_path(identity);
        let lock = skillhost_core::PackageLock::read(&path).map_err(|e| policy_error(&path, e.to_string()))?;
        // A lock of other packages, from other sources, or not whole is stale: resolved
        // and approved again before anything runs.
        let lock = lock.filter(|l| (!packages.is_empty() || node.is_some()) && l.fresh(&packages, node.as_ref(), sources).is_ok());
        Ok(Some(Scripts { files: scripts, policy, policy_from, packages, node, lock }))
    }

    /// Record the packages of `name`'s scripts as resolved (the host's step before a human
    /// is asked to approve; nothing is installed until the human said yes) and load the
    /// skill again, so that its approval request shows the exact versions, their hashes
    /// and where they come from.
    pub async fn set_lock(&self, name: &str, lock: &skillhost_core::PackageLock) -> Result<(), RegistryError> {
        let (_, identity) = self.identity_of(name)?;
        self.write_beside(name, &self.lock_path(&identity), &lock.to_toml()).await
    }

    /// Write `text` to `path` atomically, then load `name` again.
    async fn write_beside(&self, name: &str, path: &Path, text: &str) -> Result<(), RegistryError> {
        let fail = |e: std::io::Error| RegistryError::Policy { name: name.to_owned(), path: path.to_owned(), reason: e.to_string() };
        let dir = path.parent().map(Path::to_owned).unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(fail)?;
        let staged = tempfile::NamedTempFile::new_in(&dir).map_err(fail)?;
        std::fs::write(staged.path(), text).map_err(fail)?;
        staged.persist(path).map_err(|e| fail(e.error))?;
        let name = SkillName::new(name).map_err(|e| RegistryError::UnknownSkill { name: e.name })?;
        self.rescan(&BTreeSet::from([name])).await
    }

    /// The usage statistics of calls made through [`call`](Self::call), when the store
    /// could be opened.
    pub fn stats(&self) -> Option<&dyn Stats> {
        self.stats.as_deref()
    }

    /// What a human should see before approving `name`. Pass its `content_hash` and
    /// `capability_digest` back to [`approve`](Self::approve).
    pub fn approval_request(&self, name: &str) -> Result<ApprovalRequest, RegistryError> {
        let entry = self.entry(name)?;
        let loaded = loaded(&entry)?;
        let record = self.trust.get(entry.identity.as_str())?;
        let approved: Option<Vec<String>> =
            record.as_ref().and_then(|r| r.approved_requests.as_deref()).and_then(|json| serde_json::from_str(json).ok());
        let mut requests = loaded.requests.clone();
        if let (Some(manifest), Some(data_dir)) = (&loaded.manifest, &loaded.data_dir) {
            requests.extend(data_held(manifest, data_dir));
        }
        Ok(ApprovalRequest {
            name: entry.name.clone(),
            version: loaded.version.clone(),
            tier: loaded.tier,
            state: entry.state,
            content_hash: loaded.content_hash.clone(),
            capability_digest: loaded.capability_digest.clone(),
            requests,
            sandbox_without: loaded.sandbox_without.clone(),
            diff: diff_lines(approved.as_deref().unwrap_or_default(), &loaded.requests),
            content_changed: record.as_ref().and_then(|r| r.approved_hash.as_deref()).is_some_and(|hash| hash != loaded.content_hash),
            files: self.approved_files(&entry.identity).map(|approved| file_diff(&approved, &loaded.files)).unwrap_or_default(),
            provenance: self.provenance(&loaded.content_hash),
            last_approved_by: record.as_ref().and_then(|r| r.approved_by),
            last_approved_via: record.and_then(|r| r.approved_via),
        })
    }

    /// **Human only** (see the module docs). Approve `name` as reviewed: `content_hash`
    /// and `capability_digest` are those of the [`ApprovalRequest`] the human saw; if the
    /// skill changed since, nothing is approved. `channel` is how the human's answer came
    /// (a terminal, or an MCP client's elicitation), recorded with the approval so that it
    /// can be told apart, and revoked, later.
    pub async fn approve(
        &self,
        name: &str,
        content_hash: &str,
        capability_digest: &str,
        channel: ApprovalChannel,
    ) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let entry = self.entry(name)?;
        let loaded = loaded(&entry)?;
        if entry.state == TrustState::Disabled {
            return Err(RegistryError::NotCallable { name: name.to_owned(), state: TrustState::Disabled });
        }
        for (what, reviewed, current) in
            [("content hash", content_hash, &loaded.content_hash), ("capability digest", capability_digest, &loaded.capability_digest)]
        {
            if reviewed != current {
                return Err(RegistryError::ChangedSinceReview {
                    name: name.to_owned(),
                    what,
                    reviewed: reviewed.to_owned(),
                    current: current.clone(),
                });
            }
        }
        self.trust.write_approval(&observation(&entry.identity, loaded), &loaded.requests, channel)?;
        self.record_approved_files(&entry.identity, loaded);
        self.set_state(&entry, TrustState::Approved);
        Ok(())
    }

    /// Where the files of `identity`'s last approval are listed (path → SHA-256).
    fn approved_files_path(&self, identity: &DataKey) -> PathBuf {
        self.config.data_dir.join("policies").join(format!("{identity}.approved-files.json"))
    }

    /// Keep what a folder skill's approval covered, file by file, so that the request for
    /// a later version can say which files changed. Best effort: the approval itself is
    /// in the trust store.
    fn record_approved_files(&self, identity: &DataKey, loaded: &Loaded) {
        if loaded.files.is_empty() {
            return;
        }
        let hashes: BTreeMap<&str, String> =
            loaded.files.iter().map(|(path, bytes)| (path.as_str(), hex::encode(sha2::Sha256::digest(bytes)))).collect();
        let path = self.approved_files_path(identity);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            let dir = path.parent().unwrap_or(Path::new("."));
            let staged = tempfile::NamedTempFile::new_in(dir)?;
            std::fs::write(staged.path(), serde_json::to_vec(&hashes).unwrap_or_default())?;
            staged.persist(&path).map(drop).map_err(|e| e.error)
        });
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), "cannot record the approved files: {e}");
        }
    }

    /// The files of `identity`'s last approval, when recorded.
    fn approved_files(&self, identity: &DataKey) -> Option<BTreeMap<String, String>> {
        let bytes = std::fs::read(self.approved_files_path(identity)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// **Human only** (see the module docs). Decline `name`: its approval is dropped, it
    /// is `pending_review` and not auto-approved again until approved. A disabled skill
    /// stays disabled.
    pub async fn reject(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.reject(identity.as_str())?;
        if let Some(entry) = entry.filter(|e| e.state != TrustState::Disabled) {
            self.set_state(&entry, TrustState::PendingReview);
        }
        Ok(())
    }

    /// **Human only** (see the module docs). Turn `name` off: not callable, whatever
    /// changes, until [`enable`](Self::enable)d. Its approval is kept.
    pub async fn disable(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.disable(identity.as_str())?;
        if let Some(entry) = entry {
            self.set_state(&entry, TrustState::Disabled);
        }
        Ok(())
    }

    /// **Human only** (see the module docs). Turn `name` back on: it is `approved` again
    /// if its approval still matches (or its tier is auto), otherwise `needs_reapproval`
    /// or `pending_review`.
    pub async fn enable(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.enable(identity.as_str())?;
        // A skill still loading takes its state from the store when its load commits.
        let Some(entry) = entry else { return Ok(()) };
        let state = match &entry.loaded {
            Some(loaded) => self.trust.observe(&observation(&entry.identity, loaded), &loaded.requests)?,
            None => self.stored_state(&entry.identity)?,
        };
        self.set_state(&entry, state);
        Ok(())
    }

    /// The entry of `name` and the identity its trust record has; for a skill found on
    /// disk whose first load has not committed (its code may be running now, to list its
    /// tools), no entry and the identity of the candidate that will load, so that a
    /// human's reject, disable or enable applies at once and its load commits the state.
    fn identity_of(&self, name: &str) -> Result<(Option<Arc<Entry>>, DataKey), RegistryError> {
        match self.entry(name) {
            Ok(entry) => {
                let identity = entry.identity.clone();
                Ok((Some(entry), identity))
            }
            Err(unknown) => {
                let key = SkillName::new(name).map_err(|_| RegistryError::UnknownSkill { name: name.to_owned() })?;
                let candidate = snapshot::candidates(&self.layers, &key).into_iter().next().ok_or(unknown)?;
                Ok((None, self.identity(&candidate, &key)))
            }
        }
    }

    /// Rescan every name in every layer (and every name in the catalog, for removals).
    pub(crate) async fn rescan_all(&self) -> Result<(), RegistryError> {
        let _guard = self.reload.lock().await;
        let mut names: BTreeSet<SkillName> = self.entries.read().keys().cloned().collect();
        names.extend(self.names_on_disk());
        self.rescan_names(names, Pass::All).await.map(drop)
    }

    /// Rescan `names` in `pass`; the names it left for a later pass. The caller holds
    /// `reload`. Names are independent: several load at once (reading, hashing and
    /// instantiating overlap across cores), each announced as soon as it is done; the
    /// first failure of the trust store is reported after all ran.
    async fn rescan_names(&self, names: impl IntoIterator<Item = SkillName>, pass: Pass) -> Result<BTreeSet<SkillName>, RegistryError> {
        self.rescan_queue(&Mutex::new(names.into_iter().collect()), pass, RESCAN_CONCURRENCY).await
    }

    /// [`rescan_names`](Self::rescan_names) over `queue` with `slots` loads at once, taking
    /// each next name from its front when a slot frees; but a loading name a call waits
    /// for ([`wait_loaded`](Self::wait_loaded)) starts before any other, and while one
    /// loads, a freed slot starts nothing else.
    async fn rescan_queue(
        &self,
        queue: &Mutex<VecDeque<SkillName>>,
        pass: Pass,
        slots: usize,
    ) -> Result<BTreeSet<SkillName>, RegistryError> {
        let later = Mutex::new(BTreeSet::new());
        let first_error = Mutex::new(None);
        let worker = || async {
            let (mut wanted, mut loading) = (self.wanted.subscribe(), self.loading.subscribe());
            loop {
                // A skill a call waits for starts first; while one loads, nothing else starts.
                let next = loop {
                    let pick = {
                        let (wanted, loading) = (wanted.borrow_and_update(), loading.borrow_and_update());
                        let mut queue = queue.lock();
                        let waited = |name: &SkillName| wanted.contains_key(name) && loading.contains(name);
                        match queue.iter().position(waited) {
                            _ if queue.is_empty() => break None,
                            Some(at) => queue.remove(at),
                            None if !wanted.keys().any(|name| loading.contains(name)) => queue.pop_front(),
                            None => None,
                        }
                    };
                    if pick.is_some() {
                        break pick;
                    }
                    tokio::select! {
                        _ = wanted.changed() => {}
                        _ = loading.changed() => {}
                    }
                };
                let Some(name) = next else { return };
                match self.rescan_pass(&name, pass).await {
                    Ok(true) => {
                        self.loading.send_if_modified(|loading| loading.remove(&name));
                    }
                    Ok(false) => {
                        later.lock().insert(name);
                    }
                    Err(error) => {
                        self.loading.send_if_modified(|loading| loading.remove(&name));
                        first_error.lock().get_or_insert(error);
                    }
                }
            }
        };
        futures::future::join_all((0..slots).map(|_| worker())).await;
        first_error.into_inner().map_or(Ok(later.into_inner()), Err)
    }

    /// Rescan the given names. A name that is a skill pack's (its folder changed) stands
    /// for every skill of the pack, on disk or in the catalog.
    pub(crate) async fn rescan(&self, names: &BTreeSet<SkillName>) -> Result<(), RegistryError> {
        let _guard = self.reload.lock().await;
        let mut names = names.clone();
        for name in names.clone() {
            names.extend(pack::members(&self.layers, name.as_str()));
            names.extend(self.entries.read().keys().filter(|k| pack::pack_of(k) == Some(name.as_str())).cloned());
        }
        for name in &names {
            self.rescan_locked(name).await?;
        }
        Ok(())
    }

    /// Bring `name`'s entry in line with the disk. The caller holds `reload`.
    ///
    /// The highest-precedence candidate is read once; if its bytes are those already
    /// serving, nothing reloads. Otherwise the new version is loaded first and replaces
    /// the old only if that succeeded; a failure is recorded on the entry and the last
    /// good version keeps serving.
    /// A name of the first load brought in line this way (an install of it) is loaded:
    /// it leaves the queue, and whoever waits for it stops waiting.
    pub(crate) async fn rescan_locked(&self, name: &SkillName) -> Result<(), RegistryError> {
        self.unqueue(name);
        let result = self.rescan_pass(name, Pass::All).await.map(drop);
        self.loading.send_if_modified(|loading| loading.remove(name));
        result
    }

    /// [`rescan_locked`](Self::rescan_locked) in `pass`: whether `name` was brought in
    /// line (`false`: it would run code to load, left for a later pass untouched).
    async fn rescan_pass(&self, name: &SkillName, pass: Pass) -> Result<bool, RegistryError> {
        let lock = self.name_locks.lock().entry(name.clone()).or_default().clone();
        let held = lock.lock().await;
        let result = self.rescan_pass_held(name, pass).await;
        drop(held);
        let mut locks = self.name_locks.lock();
        // Ours and the map's: nobody else holds or waits for it.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(name);
        }
        result
    }

    /// [`rescan_pass`](Self::rescan_pass) with `name`'s lock held.
    async fn rescan_pass_held(&self, name: &SkillName, pass: Pass) -> Result<bool, RegistryError> {
        let found = snapshot::candidates(&self.layers, name);
        let old = self.entries.read().get(name).cloned();
        let Some(winner) = found.first() else {
            if self.entries.write().remove(name).is_some() {
                tracing::info!(skill = %name, "removed");
                self.emit(RegistryEvent::Removed(name.clone()));
            }
            return Ok(true);
        };
        let shadows: Vec<Shadowed> = found[1..].iter().map(|c| Shadowed { layer: c.layer, origin: c.path.clone() }).collect();
        let identity = self.identity(winner, name);

        let result = match self.read_candidate(name, winner) {
            Ok((snapshot, parsed)) => {
                let hash = snapshot.hash_of(&parsed);
                // A skill's scripts run under its policy and packages, kept apart from
                // its files: a changed policy or lock is a changed skill.
                let same_policy = |l: &Loaded| {
                    l.scripts.as_ref().is_none_or(|s| {
                        self.scripts_of(&identity, name.as_str(), &l.files)
                            .is_ok_and(|now| now.is_some_and(|now| now.policy == s.policy && now.lock == s.lock))
                    })
                };
                let unchanged = old
                    .as_ref()
                    .and_then(|e| e.loaded.as_ref())
                    .is_some_and(|l| l.origin == winner.path && l.content_hash == hash && same_policy(l));
                if let (true, Some(old)) = (unchanged, &old) {
                    // The entry as it is now: a human may have changed its state meanwhile.
                    let _trust = self.trust_ops.lock();
                    let old = self.entries.read().get(name).cloned().unwrap_or_else(|| old.clone());
                    let entry = Entry { layer: winner.layer, origin: winner.path.clone(), shadows, error: None, ..Entry::clone(&old) };
                    let changed = old.error.is_some() || old.shadows != entry.shadows;
                    self.entries.write().insert(name.clone(), Arc::new(entry));
                    if changed {
                        self.emit(RegistryEvent::Updated(name.clone()));
                    }
                    return Ok(true);
                }
                if pass == Pass::RunsNothing && !self.loads_without_running(&parsed) {
                    return Ok(false);
                }
                self.load(parsed, hash, snapshot.into_files(), winner, &identity).await
            }
            Err(e) => Err(e),
        };

        // Commit: the trust store is read again, and the entry as it is now, under the
        // lock a human's command takes, so an approval, rejection or disabling made while
        // the load ran holds.
        let _trust = self.trust_ops.lock();
        let old = self.entries.read().get(name).cloned();
        let entry = match result {
            Ok(loaded) => {
                let state = self.trust.observe(&observation(&identity, &loaded), &loaded.requests)?;
                tracing::info!(skill = %name, layer = %winner.layer, version = %loaded.version, %state, "loaded");
                Entry {
                    name: name.clone(),
                    identity: identity.clone(),
                    layer: winner.layer,
                    origin: winner.path.clone(),
                    state,
                    shadows,
                    error: None,
                    loaded: Some(loaded),
                }
            }
            Err(error) => {
                if matches!(error, RegistryError::Load(LoadError::Interrupted { .. })) {
                    // The host is stopping: nothing is wrong with the skill.
                    tracing::debug!(skill = %name, %error, "load interrupted");
                } else if first_report(name, &error.to_string()) {
                    tracing::warn!(skill = %name, %error, "load failed");
                } else {
                    tracing::debug!(skill = %name, %error, "load failed again, as before");
                }
                let error = Arc::new(error);
                match &old {
                    Some(old) if old.loaded.is_some() && old.identity == identity => {
                        Entry { layer: winner.layer, origin: winner.path.clone(), shadows, error: Some(error), ..Entry::clone(old) }
                    }
                    _ => Entry {
                        name: name.clone(),
                        state: self.stored_state(&identity)?,
                        identity: identity.clone(),
                        layer: winner.layer,
                        origin: winner.path.clone(),
                        shadows,
                        error: Some(error),
                        loaded: None,
                    },
                }
            }
        };
        let failed = entry.error.as_ref().map(|e| e.to_string());
        let state = entry.state;
        self.entries.write().insert(name.clone(), Arc::new(entry));
        match (&old, &failed) {
            (None, _) => self.emit(RegistryEvent::Added(name.clone())),
            (Some(_), None) => self.emit(RegistryEvent::Updated(name.clone())),
            (Some(_), Some(_)) => {}
        }
        if let Some(error) = failed {
            self.emit(RegistryEvent::LoadFailed { name: name.clone(), error });
        }
        if old.is_some_and(|old| old.state != state) {
            self.emit(RegistryEvent::StateChanged { name: name.clone(), state });
        }
        Ok(true)
    }

    /// Read and parse a candidate, checking that it declares the name it was found by.
    fn read_candidate(&self, name: &SkillName, candidate: &Candidate) -> Result<(Snapshot, Parsed), RegistryError> {
        let snapshot = Snapshot::read(&candidate.path, &self.config.limits)?;
        // An external layer is read, never run: its skills are instructions only.
        let parsed = match candidate.layer {
            Layer::External => snapshot.parse_instructions()?,
            _ => snapshot.parse()?,
        };
        if let Parsed::Instructions(Instructions { frontmatter: Some(frontmatter), .. }) = &parsed {
            skillmd::check_name(frontmatter, name.as_str(), &candidate.path.join("SKILL.md"))?;
        }
        if parsed.name() != name {
            return Err(RegistryError::NameMismatch {
                path: candidate.path.clone(),
                expected: name.to_string(),
                declared: parsed.name().to_string(),
            });
        }
        Ok((snapshot, parsed))
    }

    /// Whose data and approval a candidate of `name` has: the user layer's skill owns the
    /// name's own data dir and trust record; a skill of that name elsewhere (bundled, a
    /// workspace or an external folder, each told apart by its directory) has its own, so
    /// a skill never inherits the data or the approval of one it shadows or that shadows
    /// it.
    pub(crate) fn identity(&self, candidate: &Candidate, name: &SkillName) -> DataKey {
        let scoped = |space: &str, dir: &[u8]| {
            let digest = sha2::Sha256::digest(dir);
            DataKey::scoped(&format!("{space}-{}", &hex::encode(digest)[..12]), name)
        };
        match candidate.layer {
            Layer::User => DataKey::named(name),
            Layer::Bundled => DataKey::scoped("bundled", name),
            Layer::Workspace => {
                let dir = self.layers.iter().find(|(l, _)| *l == Layer::Workspace).map(|(_, d)| d.as_os_str().as_encoded_bytes());
                scoped("workspace", dir.unwrap_or_default())
            }
            Layer::External => scoped("external", candidate.path.parent().unwrap_or(&candidate.path).as_os_str().as_encoded_bytes()),
        }
    }

    /// Load a parsed skill under the policy: the validation a new version must pass.
    /// Bytes an agent wrote ([`install_agent_written`](Self::install_agent_written)) have at
    /// least the tier a human confirms, whatever they ask for: never approved
    /// automatically, and the request says who wrote them.
    pub(crate) async fn load(
        &self,
        parsed: Parsed,
        content_hash: String,
        files: Arc<BTreeMap<String, Vec<u8>>>,
        candidate: &Candidate,
        identity: &DataKey,
    ) -> Result<Loaded, RegistryError> {
        let agent_written = self.agent_written(&content_hash);
        let mut loaded = self.load_parsed(parsed, content_hash, files, candidate, identity).await?;
        if agent_written {
            loaded.tier = loaded.tier.max(RiskTier::Confirm);
            loaded.requests.insert(0, AGENT_WRITTEN.to_owned());
        }
        Ok(loaded)
    }

    async fn load_parsed(
        &self,
        parsed: Parsed,
        content_hash: String,
        files: Arc<BTreeMap<String, Vec<u8>>>,
        candidate: &Candidate,
        identity: &DataKey,
    ) -> Result<Loaded, RegistryError> {
        match parsed {
            Parsed::Instructions(Instructions { description, text, frontmatter, pack, .. }) => {
                // Scripts are code: a human approves them, with the policy they run under.
                let scripts = self.scripts_of(identity, &candidate_name(candidate), &files)?;
                let (runtime, tier, capability_digest, requests, sandbox_without) = match &scripts {
                    None => (INSTRUCTIONS_RUNTIME, RiskTier::Auto, NO_CAPABILITIES.to_owned(), Vec::new(), Vec::new()),
                    Some(scripts) => {
                        // Any command with its grants is an agent's own code holding them.
                        let explicit = scripts.policy.grants_writes_or_secrets() || scripts.policy.any_command;
                        let tier = if explicit { RiskTier::Explicit } else { RiskTier::Confirm };
                        let jail = SkillCode::Server { dir: candidate.path.clone(), files: files.clone() };
                        (
                            SCRIPTS_RUNTIME,
                            tier,
                            scripts.digest(),
                            script_requests(scripts, &self.policy, &self.config.packages),
                            self.runtime.weakened(&jail),
                        )
                    }
                };
                Ok(Loaded {
                    origin: candidate.path.clone(),
                    runtime,
                    version: String::new(),
                    description,
                    tier,
                    tools: Vec::new(),
                    content_hash,
                    capability_digest,
                    requests,
                    sandbox_without,
                    instructions: Some(text),
                    frontmatter,
                    pack,
                    manifest: None,
                    data_dir: None,
                    files,
                    scripts,
                    skill: None,
                })
            }
            Parsed::Code(source) => {
                // Its SKILL.md follows the standard too, and names this skill.
                let frontmatter = match &source.instructions {
                    Some(md) => {
                        let path = if source.origin.is_dir() {
                            source.origin.join("SKILL.md")
                        } else {
                            PathBuf::from(format!("{}#SKILL.md", source.origin.display()))
                        };
                        let frontmatter = skillmd::parse(md, &path)?;
                        skillmd::check_name(&frontmatter, source.manifest.name.as_str(), &path)?;
                        Some(frontmatter)
                    }
                    None => None,
                };
                let grant = Grant::new(&source.manifest, &self.policy, identity).map_err(LoadError::from)?;
                let skill = self.runtime.load(&source, grant).await?;
                let tools = skill.tools().to_vec();
                let tier = RiskTier::of(&source.manifest).with_tools(&tools);
                let data_dir = self.policy.data_dir(identity);
                let requests = requests(&source.manifest, skill.grant(), &tools, &data_dir);
                Ok(Loaded {
                    origin: candidate.path.clone(),
                    runtime: self.runtime.kind_for(&source.code),
                    version: source.manifest.version.clone(),
                    description: source.manifest.description.clone(),
                    tier,
                    tools,
                    content_hash,
                    capability_digest: source.manifest.capability_digest(),
                    requests,
                    sandbox_without: self.runtime.weakened(&source.code),
                    instructions: source.instructions,
                    frontmatter,
                    pack: None,
                    manifest: Some(source.manifest),
                    data_dir: Some(data_dir),
                    files,
                    scripts: None,
                    skill: Some(skill),
                })
            }
        }
    }

    /// Whether loading `parsed` runs none of its code: instructions, or code whose
    /// listing an earlier load kept.
    fn loads_without_running(&self, parsed: &Parsed) -> bool {
        match parsed {
            Parsed::Instructions(_) => true,
            Parsed::Code(source) => self.runtime.is_listed(source),
        }
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
            self.emit(RegistryEvent::StateChanged { name: entry.name.clone(), state });
        }
    }

    fn emit(&self, event: RegistryEvent) {
        // No receivers is fine: nobody is listening yet.
        let _ = self.events.send(event);
    }
}

fn loaded(entry: &Entry) -> Result<&Loaded, RegistryError> {
    entry.loaded.as_ref().ok_or_else(|| RegistryError::NotLoaded {
        name: entry.name.to_string(),
        reason: entry.error.as_ref().map_or_else(|| "it has not loaded".to_owned(), |e| e.to_string()),
    })
}

fn observation<'a>(identity: &'a DataKey, loaded: &'a Loaded) -> Observation<'a> {
    Observation {
        name: identity.as_str(),
        content_hash: &loaded.content_hash,
        capability_digest: &loaded.capability_digest,
        tier: loaded.tier,
    }
}

/// What a skill asks for, one line per request, as a human reviews it: files with modes,
/// network rules, secrets with where they go, effective limits, destructive tools.
/// What a human approving `manifest`'s code should know of its data dir now: the data dir
/// outlives the code, so what an earlier version (or a removed skill of this name and
/// layer) stored is what this code would be handed. Read when the request is shown, not
/// at load, and never recorded with the approval (it changes as the skill writes).
fn data_held(manifest: &skillhost_core::SkillManifest, data_dir: &std::path::Path) -> Option<String> {
    if manifest.files.is_empty() {
        return None;
    }
    let held = std::fs::read_dir(data_dir).ok()?.count();
    (held > 0).then(|| {
        format!(
            "its data dir already holds {held} entr{} written by an earlier version or an earlier skill of this name",
            if held == 1 { "y" } else { "ies" }
        )
    })
}

/// What a SKILL.md skill with scripts asks for, one line each: every script with its
/// hash, then what its policy grants, its packages (where they come from, each with its
/// hashes) and the limits of each run.
fn script_requests(scripts: &Scripts, host: &skillhost_core::Policy, sources: &skillhost_core::run::PackageSources) -> Vec<String> {
    let mut lines = vec![format!(
        "runs its scripts in the jail ({} script(s), each below with its SHA-256) under {}",
        scripts.files.len(),
        scripts.policy_from.describe()
    )];
    for (path, hash) in &scripts.files {
        lines.push(format!("script `{}` sha256 {hash}", text::quote(path, 120)));
    }
    lines.extend(scripts.policy.requests());
    match &scripts.lock {
        Some(lock) => {
            if !lock.packages.is_empty() {
                lines.push(format!(
                    "Python packages from {} for Python {}, resolved with the hash of every artifact; installed into environment {} once approved, each artifact checked against its hashes",
                    lock.index, lock.python, lock.env
                ));
            }
            for package in &lock.packages {
                lines.push(format!("package {package} {}", lock.hashes.get(package).map(|h| h.join(" ")).unwrap_or_default()));
            }
            if let Some(node) = &lock.node {
                lines.push(format!(
                    "node packages from {} (every `resolved` URL of its {}package-lock.json is on it), installed into environment {} once approved, each checked against its integrity hash",
                    sources.npm.describe(),
                    scripts.node.as_ref().map_or("", |n| n.dir.as_str()),
                    node.env
                ));
                for package in &node.packages {
                    lines.push(format!("node package {package} {}", node.integrity.get(package).map_or("", String::as_str)));
                }
            }
        }
        None if scripts.declares_packages() => {
            if !scripts.packages.is_empty() {
                lines.push(format!(
                    "packages declared, not resolved yet (`skillhost approve` resolves them from {} and shows exact versions and hashes): {}",
                    sources.python.describe(),
                    scripts.packages.join(", ")
                ));
            }
            if let Some(node) = &scripts.node {
                lines.push(format!(
                    "node packages declared by its {}package-lock.json, from {}, not installed yet (`skillhost approve` installs them once approved): {}",
                    node.dir,
                    sources.npm.describe(),
                    node.packages.join(", ")
                ));
            }
        }
        None => {}
    }
    let limits = &scripts.policy.limits;
    let timeout = limits.timeout.unwrap_or(skillhost_core::run::DEFAULT_RUN_TIMEOUT.min(host.max.timeout));
    let memory = limits.memory.unwrap_or(skillhost_core::run::DEFAULT_RUN_MEMORY.min(host.max.memory));
    lines.push(format!("limit timeout of each run: {timeout:?}"));
    lines.push(format!("limit memory of each run (whole process tree): {}", ByteSize(memory)));
    lines.push(format!("limit output of each run: {}", ByteSize(limits.output.unwrap_or(host.default.output))));
    lines
}

/// `files` against `approved` (path → SHA-256): one line per file added, changed or
/// removed, in path order.
fn file_diff(approved: &BTreeMap<String, String>, files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let now: BTreeMap<&str, String> = files.iter().map(|(p, b)| (p.as_str(), hex::encode(sha2::Sha256::digest(b)))).collect();
    let mut lines = Vec::new();
    let paths: BTreeSet<&str> = now.keys().copied().chain(approved.keys().map(String::as_str)).collect();
    for path in paths {
        let shown = text::quote(path, 120);
        match (approved.get(path), now.get(path)) {
            (None, Some(hash)) => lines.push(format!("+ {shown} (sha256 {hash})")),
            (Some(old), None) => lines.push(format!("- {shown} (was sha256 {old})")),
            (Some(old), Some(new)) if old != new => lines.push(format!("~ {shown} (sha256 {old} → {new})")),
            _ => {}
        }
    }
    lines
}

/// The skill name a candidate stands for, for messages.
fn candidate_name(candidate: &Candidate) -> String {
    snapshot::entry_name(&candidate.path).map_or_else(|| candidate.path.display().to_string(), |n| n.to_string())
}

fn requests(
    manifest: &skillhost_core::SkillManifest,
    grant: &Grant,
    tools: &[skillhost_core::ToolSpec],
    data_dir: &std::path::Path,
) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &manifest.files {
        let mode = match file.mode {
            FileMode::ReadOnly => "read-only",
            FileMode::ReadWrite => "read-write",
        };
        lines.push(format!("files `{}` in its data dir ({}): {mode}", file.path, data_dir.display()));
    }
    let network = &manifest.network;
    for (kind, rules) in [("allow", &network.allow), ("deny", &network.deny), ("private address allowed", &network.private)] {
        for rule in rules {
            lines.push(format!("network {kind}: {}", rule.text));
        }
    }
    if let Some(server) = &manifest.server {
        lines.push(format!(
            "runs `{}` in a bubblewrap sandbox",
            std::iter::once(&server.command).chain(&server.args).cloned().collect::<Vec<_>>().join(" ")
        ));
        for secret in &server.secrets {
            lines.push(format!(
                "secret `{}` given to the server as environment variable `{}` (it can send it to any allowed host)",
                secret.name, secret.env
            ));
        }
    }
    for secret in &manifest.secrets {
        let hosts: Vec<&str> = secret.hosts.iter().map(|r| r.text.as_str()).collect();
        lines.push(format!("secret `{}` sent in header `{}` to {}", secret.name, secret.header, hosts.join(", ")));
    }
    let limits = &grant.limits;
    lines.push(format!("limit timeout: {:?}", limits.timeout));
    lines.push(format!("limit memory: {}", ByteSize(limits.memory)));
    lines.push(format!("limit output: {}", ByteSize(limits.output)));
    lines.push(format!("limit concurrency: {}", limits.concurrency));
    for tool in tools.iter().filter(|t| t.annotations.destructive) {
        lines.push(format!("tool `{}` is destructive", tool.name));
    }
    lines
}
