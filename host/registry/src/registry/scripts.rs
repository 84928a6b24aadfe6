//! Runs of a SKILL.md skill's scripts through [`Registry`]: `run` (the approval and the
//! command checked, the run audited), the policy and package lock a human keeps beside
//! the skill, and what an approval request says of them.

use super::approval::loaded;
use super::*;

/// The audit row of one run, begun when the request arrives (its time, command and
/// input bytes) and finished with what became of it.
pub(super) struct RunAuditRow {
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
        self.record(outcome, bytes_out)
    }

    /// The row, with what became of the run.
    fn record(self, outcome: RunOutcome, bytes_out: u64) -> RunRecord {
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

/// What a SKILL.md skill with scripts asks for, one line each: every script with its
/// hash, then what its policy grants, its packages (where they come from, each with its
/// hashes) and the limits of each run.
pub(super) fn script_requests(
    scripts: &Scripts,
    host: &skillhost_core::Policy,
    sources: &skillhost_core::run::PackageSources,
) -> Vec<String> {
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

impl Registry {
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
        let span = super::observe::run_span(skill);
        let ran = async {
            self.wait_loaded(skill).await;
            let entry = self.entry(skill).inspect_err(|_| super::observe::run_unknown())?;
            let result = self.run_entry(&entry, skill, command, inputs, cx).await;
            super::observe::run_done(&entry, &result);
            result
        };
        let result = tracing::Instrument::instrument(ran, span.clone()).await;
        super::observe::span_outcome(&span, &result);
        result
    }

    /// [`run`](Self::run) of the catalog's `entry` for `skill`.
    async fn run_entry(
        &self,
        entry: &Arc<Entry>,
        skill: &str,
        command: Vec<String>,
        inputs: Vec<skillhost_core::RunInput>,
        cx: CallContext,
    ) -> Result<skillhost_core::RunOutput, RegistryError> {
        let entry = entry.clone();
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

    /// Audit a run of `skill` refused before it reached [`run`](Self::run), with `why` (its
    /// approval was asked over MCP and not given): a row like every refused run's.
    pub fn audit_refused_run(&self, skill: &str, command: &[String], inputs: &[skillhost_core::RunInput], why: &str) {
        if let Some(log) = &self.config.audit {
            let row = RunAuditRow::start(log, skill, command, inputs);
            log.log.record_run(row.record(RunOutcome::Refused(skillhost_core::text::one_line(why, 600)), 0));
        }
    }

    /// Where the run policy of the skill identified by `identity` is kept, outside every
    /// skill folder: a file in the host's data dir, or a row of the shared state.
    pub fn policy_path(&self, identity: &DataKey) -> PathBuf {
        self.policies.place(identity.as_str(), Kept::Policy)
    }

    /// Write `name`'s run policy (a human's command, like [`approve`](Self::approve)) and
    /// load the skill again: a policy that grants something else changes its capability
    /// digest, so it needs approval again. Returns where the policy is kept.
    pub async fn set_policy(&self, name: &str, policy: &RunPolicy) -> Result<PathBuf, RegistryError> {
        let (_, identity) = self.identity_of(name)?;
        let text = format!("# The run policy of skill `{name}`, written by `skillhost policy`.\n{}", policy.to_toml());
        self.write_record(name, &identity, Kept::Policy, &text).await?;
        Ok(self.policy_path(&identity))
    }

    /// Where the resolved packages of the skill identified by `identity` are kept, beside
    /// its policy.
    pub fn lock_path(&self, identity: &DataKey) -> PathBuf {
        self.policies.place(identity.as_str(), Kept::Lock)
    }

    /// What makes the SKILL.md skill `name` (identified by `identity`, holding `files`)
    /// runnable code, if anything: its scripts; the policy they run under, the host's
    /// (`skillhost policy`) when a human wrote one, else what its skill.toml asks, else
    /// nothing; the packages they declare and, when still fresh, their lock.
    pub(super) fn scripts_of(
        &self,
        identity: &DataKey,
        name: &str,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Option<Scripts>, RegistryError> {
        let scripts: Vec<(String, String)> =
            skillhost_core::run::scripts_of(files).into_iter().map(|(path, hash)| (path.to_owned(), hash)).collect();
        if scripts.is_empty() {
            return Ok(None);
        }
        let policy_error = |path: &Path, reason: String| RegistryError::Policy { name: name.to_owned(), path: path.to_owned(), reason };
        let path = self.policy_path(identity);
        let (policy, policy_from) = if let Some(text) = self.policies.read(identity.as_str(), Kept::Policy)? {
            (RunPolicy::parse(&text, &path).map_err(|e| policy_error(&path, e.to_string()))?, PolicyFrom::Host)
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
        let lock = match self.policies.read(identity.as_str(), Kept::Lock)? {
            Some(text) => Some(skillhost_core::PackageLock::parse(&text, &path).map_err(|e| policy_error(&path, e.to_string()))?),
            None => None,
        };
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
        self.write_record(name, &identity, Kept::Lock, &lock.to_toml()).await
    }

    /// Keep `text` as `identity`'s record `kept`, then load `name` again.
    pub(super) async fn write_record(&self, name: &str, identity: &DataKey, kept: Kept, text: &str) -> Result<(), RegistryError> {
        self.policies.write(identity.as_str(), kept, text)?;
        let name = SkillName::new(name).map_err(|e| RegistryError::UnknownSkill { name: e.name })?;
        self.rescan(&BTreeSet::from([name])).await
    }
}
