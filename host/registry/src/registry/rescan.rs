//! Loading: bringing a name in line with the disk (`rescan_pass`, under that name's
//! lock), the first load's queue, a rescan of every layer, and `load`, which validates a
//! new version before it replaces the old.

use super::approval::{AGENT_WRITTEN, NO_CAPABILITIES, observation, requests};
use super::scripts::script_requests;
use super::*;

/// Whether this is the first time this process sees `skill` fail to load with `error`:
/// an unchanged broken skill fails again at every rescan and reload, and every registry
/// the process opens loads it again, but one warning says all there is to say. A
/// different error (the skill was edited) is reported again.
pub(super) fn first_report(skill: &SkillName, error: &str) -> bool {
    static REPORTED: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());
    REPORTED.lock().insert((skill.as_str().to_owned(), error.to_owned()))
}

/// The skill name a candidate stands for, for messages.
pub(super) fn candidate_name(candidate: &Candidate) -> String {
    snapshot::entry_name(&candidate.path).map_or_else(|| candidate.path.display().to_string(), |n| n.to_string())
}

impl Registry {
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
    pub(super) async fn rescan_names(
        &self,
        names: impl IntoIterator<Item = SkillName>,
        pass: Pass,
    ) -> Result<BTreeSet<SkillName>, RegistryError> {
        self.rescan_queue(&Mutex::new(names.into_iter().collect()), pass, RESCAN_CONCURRENCY).await
    }

    /// [`rescan_names`](Self::rescan_names) over `queue` with `slots` loads at once, taking
    /// each next name from its front when a slot frees; but a loading name a call waits
    /// for ([`wait_loaded`](Self::wait_loaded)) starts before any other, and while one
    /// loads, a freed slot starts nothing else.
    pub(super) async fn rescan_queue(
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
    pub(super) async fn rescan_pass(&self, name: &SkillName, pass: Pass) -> Result<bool, RegistryError> {
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
    pub(super) async fn rescan_pass_held(&self, name: &SkillName, pass: Pass) -> Result<bool, RegistryError> {
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
                if let Some(refused) = self.pin_refusal(name, &hash) {
                    return self.commit_refused(name, winner, shadows, identity, refused);
                }
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
                // Nobody calls it before a human approves it, and the approval compiles it.
                // Approved code whose tools the baseline compiler listed (which is never
                // cached) is compiled ahead as an approval's is, into the cache, where the
                // next start finds it; first calls meanwhile run the listing's code, which
                // goes once the cache holds Cranelift's if nothing called it.
                if let Some(skill) = &loaded.skill {
                    if state != TrustState::Approved {
                        skill.release_code();
                    } else if skill.cache_outcome() == Some(skillhost_core::CacheOutcome::Baseline) {
                        skill.compile_ahead();
                    }
                }
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

    /// Team mode: why `name` with files hashing to `hash` is not served, if it is not.
    fn pin_refusal(&self, name: &SkillName, hash: &str) -> Option<RegistryError> {
        let pins = self.pins.read();
        let pins = pins.as_ref()?;
        let why = match pins.hashes.get(name.as_str()) {
            Some(locked) if locked == hash => return None,
            Some(locked) => format!("its files hash to {hash}, the lock pins {locked}"),
            None => "the lock does not name it".to_owned(),
        };
        Some(RegistryError::NotAsLocked { name: name.to_string(), lock: pins.lock.clone(), why })
    }

    /// Commit `name` as refused by the lock: no version of it serves (not even the one
    /// that served before), its error says why.
    fn commit_refused(
        &self,
        name: &SkillName,
        winner: &Candidate,
        shadows: Vec<Shadowed>,
        identity: DataKey,
        refused: RegistryError,
    ) -> Result<bool, RegistryError> {
        let _trust = self.trust_ops.lock();
        if first_report(name, &refused.to_string()) {
            tracing::warn!(skill = %name, error = %refused, "not served");
        }
        let entry = Entry {
            name: name.clone(),
            state: self.stored_state(&identity)?,
            identity,
            layer: winner.layer,
            origin: winner.path.clone(),
            shadows,
            error: Some(Arc::new(refused)),
            loaded: None,
        };
        let error = entry.error.as_ref().map(|e| e.to_string()).unwrap_or_default();
        let old = self.entries.write().insert(name.clone(), Arc::new(entry));
        match old {
            None => self.emit(RegistryEvent::Added(name.clone())),
            Some(_) => self.emit(RegistryEvent::Updated(name.clone())),
        }
        self.emit(RegistryEvent::LoadFailed { name: name.clone(), error });
        Ok(true)
    }

    /// Read and parse a candidate, checking that it declares the name it was found by.
    pub(super) fn read_candidate(&self, name: &SkillName, candidate: &Candidate) -> Result<(Snapshot, Parsed), RegistryError> {
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

    pub(super) async fn load_parsed(
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
                // What its frontmatter calls its version, else its content hash's first
                // 12 digits: every version of a SKILL.md skill has a name to be approved as.
                let version = frontmatter
                    .as_ref()
                    .and_then(|fm| fm.metadata.get("version"))
                    .map(|v| skillhost_core::text::one_line(v, 64))
                    .filter(|v| !v.trim().is_empty())
                    .unwrap_or_else(|| short_hash(&content_hash));
                Ok(Loaded {
                    origin: candidate.path.clone(),
                    runtime,
                    version,
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
    pub(super) fn loads_without_running(&self, parsed: &Parsed) -> bool {
        match parsed {
            Parsed::Instructions(_) => true,
            Parsed::Code(source) => self.runtime.is_listed(source),
        }
    }
}

/// The first 12 hex digits of a content hash (after its `sha256:` prefix, if any).
fn short_hash(content_hash: &str) -> String {
    let digits = content_hash.rsplit(':').next().unwrap_or(content_hash);
    digits.chars().take(12).collect()
}
