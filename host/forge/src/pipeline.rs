//! The forge's pipeline in typed steps: a submission staged (rules, in memory), built
//! (Rust in the jail), tested on the probe runtimes and installed, each step's failure an
//! `Outcome` the run reports; scripts skills skip the build.

use super::*;

/// The `[[tests]]` of the skill installed at `origin` (a folder holding `skill.toml`).
pub(crate) fn declared_tests(name: &str, origin: &Path) -> Result<Vec<skillhost_core::TestCase>, ForgeError> {
    let file = origin.join("skill.toml");
    let none =
        || ForgeError::Conflict(format!("skill `{name}` has no skill.toml folder at {} to read its [[tests]] from", origin.display()));
    // The registry wrote this folder; a link in its place is not followed.
    if !std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
        return Err(none());
    }
    let text = std::fs::read_to_string(&file).map_err(|source| ForgeError::Io { what: "cannot read the skill's manifest", source })?;
    SkillManifest::test_cases(&text, &file).map_err(|e| ForgeError::Conflict(format!("skill `{name}`: {e}")))
}

/// A submission whose files and manifest passed the checks.
pub(crate) struct Staged {
    submission: Submission,
    manifest: SkillManifest,
    tests: Vec<skillhost_core::TestCase>,
}

/// What the build made: the snapshot that is tested and installed, and its code.
pub(crate) struct Built {
    language: Language,
    manifest: SkillManifest,
    tests: Vec<skillhost_core::TestCase>,
    snapshot: skillhost_package::Snapshot,
    source: skillhost_core::SkillSource,
    /// A Python skill's `test_server.py`, run with pytest before its tools are listed.
    has_own_tests: bool,
    warnings: Vec<Diagnostic>,
}

/// A build whose tests passed (or wait for approval).
pub(crate) struct Tested {
    built: Built,
    results: Vec<TestResult>,
    after_approval: Option<String>,
}

/// Milliseconds per step of the pipeline, and in all.
pub(crate) struct Timings {
    started: Instant,
    lap: Instant,
    laps: BTreeMap<&'static str, u64>,
}

impl Timings {
    fn start() -> Self {
        Self { started: Instant::now(), lap: Instant::now(), laps: BTreeMap::new() }
    }

    fn mark(&mut self, step: &'static str) {
        self.laps.insert(step, self.lap.elapsed().as_millis() as u64);
        self.lap = Instant::now();
    }

    fn finish(mut self) -> BTreeMap<&'static str, u64> {
        self.laps.insert("total", self.started.elapsed().as_millis() as u64);
        self.laps
    }
}

/// Why the pipeline stopped: the submission's fault (counted) or the host's.
pub(crate) enum Outcome {
    Failure(Failure),
    Error(ForgeError),
}

/// A submission's text files as bytes.
pub(crate) fn bytes_of(files: &BTreeMap<String, String>) -> BTreeMap<String, Vec<u8>> {
    files.iter().map(|(path, text)| (path.clone(), text.as_bytes().to_vec())).collect()
}

pub(crate) fn manifest_failure(error: String) -> Outcome {
    Outcome::Failure(Failure::Manifest { error })
}

pub(crate) fn io(what: &'static str) -> impl Fn(std::io::Error) -> Outcome {
    move |source| Outcome::Error(ForgeError::Io { what, source })
}

impl Forge {
    pub(crate) async fn run(&self, submission: Submission, mode: Mode, progress: Progress) -> Result<Forged, ForgeError> {
        let name = SkillName::new(submission.name.clone()).map_err(|e| ForgeError::Conflict(e.to_string()))?;
        let max = self.config.max_attempts;
        if self.attempts.failed(&name) >= max {
            return Err(ForgeError::Exhausted { skill: name.to_string(), max });
        }
        let cap = self.config.max_concurrent_builds;
        let _build = self.builds.clone().try_acquire_owned().map_err(|_| {
            ForgeError::Limited(format!(
                "skill `{name}`: refused: the forge already builds and tests {cap} submissions at a time \
                 (ForgeConfig::max_concurrent_builds, default 2); submit again when one has finished, \
                 or a human raises the cap (`max_concurrent_builds` under `[forge]` in DATA_DIR/config.toml)"
            ))
        })?;
        let _busy = Busy::take(&self.busy, &name)?;
        if mode == Mode::Create
            && let Ok(entry) = self.registry.entry(name.as_str())
        {
            return Err(ForgeError::Conflict(format!(
                "a skill named `{name}` already exists ({} layer); change it with skill_update, or choose another name",
                entry.layer
            )));
        }
        self.window.admit(&name, self.config.max_attempts_per_window, self.config.attempt_window)?;
        // A new skill starts from an empty target dir (a skill removed and created again
        // may be someone else's); retries of one creation and updates reuse it.
        let fresh = mode == Mode::Create && self.attempts.failed(&name) == 0;
        match self.pipeline(&name, submission, fresh, &progress).await {
            Ok(forged) => {
                self.attempts.reset(&name)?;
                Ok(forged)
            }
            Err(Outcome::Failure(mut failure)) => {
                Redactor::new(self.secrets.as_ref()).failure(&mut failure);
                let attempt = self.attempts.record_failure(&name)?;
                tracing::info!(skill = %name, attempt, max, %failure, "forge attempt failed");
                Err(ForgeError::Failed { skill: name.to_string(), attempt, max, failure })
            }
            Err(Outcome::Error(e)) => Err(e),
        }
    }

    /// The pipeline, as typed steps: [`Staged`] → [`Built`] → [`Tested`] → [`Forged`].
    pub(crate) async fn pipeline(
        &self,
        name: &SkillName,
        submission: Submission,
        fresh: bool,
        progress: &Progress,
    ) -> Result<Forged, Outcome> {
        if submission.language == Language::Scripts {
            return self.scripts(name, submission, progress).await;
        }
        let mut timings = Timings::start();
        progress("stage: checking the files");
        let staged = self.stage(name, submission)?;
        timings.mark("stage");
        if staged.submission.language == Language::Rust {
            progress("build: cargo build in the sandbox (offline)");
        }
        let built = self.build(name, staged, fresh).await?;
        timings.mark("build");
        progress("test: loading it and running its tests (probe grant: no network, no secrets)");
        let tested = self.test(name, built).await?;
        timings.mark("test");
        progress("install: into the user layer");
        self.install(name, tested, timings).await
    }

    /// An Agent Skills folder: checked, made into one snapshot in memory and installed.
    /// Nothing of it runs here: its scripts are code a human approves (with each script's
    /// hash, its packages and the policy the human gives it) before any run, and the
    /// install checks its SKILL.md and declared packages as every load does.
    pub(crate) async fn scripts(&self, name: &SkillName, submission: Submission, progress: &Progress) -> Result<Forged, Outcome> {
        let mut timings = Timings::start();
        progress("stage: checking the files");
        let refused = stage::validate(name.as_str(), submission.language, &submission.files, &self.config.limits);
        if !refused.is_empty() {
            return Err(Outcome::Failure(Failure::Stage { refused }));
        }
        timings.mark("stage");
        let snapshot = self.snapshot(name, bytes_of(&submission.files))?;
        let content_hash = snapshot.content_hash();
        let replaced = self.registry.entry(name.as_str()).is_ok_and(|e| e.layer == Layer::User);
        progress("install: into the user layer (nothing of it reaches an agent or runs before the user approves it)");
        let entry = self.registry.install_agent_written(snapshot).await.map_err(|e| match e {
            RegistryError::Store(_) | RegistryError::Io { .. } => Outcome::Error(e.into()),
            e => Outcome::Failure(Failure::Load { error: e.to_string() }),
        })?;
        timings.mark("install");
        Ok(Forged {
            skill: name.to_string(),
            language: Language::Scripts,
            version: String::new(),
            state: entry.state,
            tier: entry.loaded.as_ref().map_or(RiskTier::Confirm, |l| l.tier),
            tools: Vec::new(),
            tests_passed: 0,
            tests: Vec::new(),
            after_approval: Some(match entry.loaded.as_ref().is_some_and(|l| l.scripts.is_some()) {
                true => format!(
                    "its scripts run only once the user approves them (`skillhost show {name}`, `skillhost approve {name}`), then with `skill_run`"
                ),
                false => format!(
                    "its instructions reach agents (skill_get, skill_list, the session's instructions) only once the user approves them (`skillhost show {name}`, `skillhost approve {name}`)"
                ),
            }),
            warnings: Vec::new(),
            installed: entry.origin.clone(),
            content_hash,
            replaced,
            timings_ms: timings.finish(),
        })
    }

    /// Check the submission's files and manifest; nothing is written or run.
    pub(crate) fn stage(&self, name: &SkillName, submission: Submission) -> Result<Staged, Outcome> {
        let refused = stage::validate(name.as_str(), submission.language, &submission.files, &self.config.limits);
        if !refused.is_empty() {
            return Err(Outcome::Failure(Failure::Stage { refused }));
        }
        let toml = &submission.files["skill.toml"];
        let manifest = SkillManifest::parse(toml, Path::new("skill.toml")).map_err(|e| manifest_failure(e.to_string()))?;
        let tests = SkillManifest::test_cases(toml, Path::new("skill.toml")).map_err(|e| manifest_failure(e.to_string()))?;
        match (submission.language, &manifest.server) {
            (Language::Rust, Some(_)) => {
                Err(manifest_failure("a Rust skill is a component: remove `[server]` (or submit it as language `python`)".into()))
            }
            (Language::Python, None) => {
                Err(manifest_failure("a Python skill needs `[server]` with `command = \"python\"` and `args = [\"server.py\"]`".into()))
            }
            _ => Ok(Staged { submission, manifest, tests }),
        }
    }

    /// Build what runs (a Rust crate in the sandbox; a Python skill is its source) into
    /// one snapshot, made in memory and never read back from a directory: what is tested
    /// and then installed, so the bytes installed are the bytes tested.
    pub(crate) async fn build(&self, name: &SkillName, staged: Staged, fresh: bool) -> Result<Built, Outcome> {
        let Staged { submission, manifest, tests } = staged;
        let mut warnings = Vec::new();
        let files: BTreeMap<String, Vec<u8>> = match submission.language {
            Language::Rust => {
                let component = match self.build_rust(name, &submission.files, fresh).await? {
                    Ok(built) => {
                        warnings = built.warnings;
                        built.component
                    }
                    Err(failure) => return Err(Outcome::Failure(Failure::Build(failure))),
                };
                let toml = &submission.files["skill.toml"];
                let md = submission.files.get("SKILL.md").map(String::as_bytes);
                let packaged = skillhost_package::pack(&component, toml.as_bytes(), md).map_err(|e| {
                    Outcome::Failure(Failure::Load { error: format!("cargo produced something that is not a component: {e}") })
                })?;
                let mut installed =
                    BTreeMap::from([("skill.toml".to_owned(), toml.as_bytes().to_vec()), ("skill.wasm".to_owned(), packaged)]);
                if let Some(md) = md {
                    installed.insert("SKILL.md".into(), md.to_vec());
                }
                for (path, content) in &submission.files {
                    installed.insert(format!("source/{path}"), content.as_bytes().to_vec());
                }
                installed
            }
            Language::Python | Language::Scripts => bytes_of(&submission.files),
        };
        let snapshot = self.snapshot(name, files)?;
        let source = snapshot
            .source()
            .map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))?
            .ok_or_else(|| Outcome::Failure(Failure::Load { error: "the submission holds no code to run".into() }))?;
        let has_own_tests = submission.language == Language::Python && submission.files.contains_key("test_server.py");
        Ok(Built { language: submission.language, manifest, tests, snapshot, source, has_own_tests, warnings })
    }

    /// `files` as the one snapshot of `name` that is tested and installed, made in memory.
    pub(crate) fn snapshot(&self, name: &SkillName, files: BTreeMap<String, Vec<u8>>) -> Result<skillhost_package::Snapshot, Outcome> {
        skillhost_package::Snapshot::from_files(self.registry.user_layer().join(name.as_str()), files, self.registry.limits())
            .map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))
    }

    /// Load what was built and run its tests, all under the probe grant, over a fresh
    /// empty scratch dir removed afterwards, on the probe runtime (no secrets, no network).
    pub(crate) async fn test(&self, name: &SkillName, built: Built) -> Result<Tested, Outcome> {
        let scratch = self.work()?.scratch.dir(&format!("{name}-")).map_err(io("cannot create a scratch dir"))?;
        let grant = probe::grant(&built.manifest, &built.source.code, scratch.path())
            .map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))?;
        // pytest (and its handshake) only when there are tests: the load below starts the
        // server and lists its tools anyway.
        if built.has_own_tests {
            let report = self.probe.own_tests(&built.source, grant.clone(), self.config.test_timeout).await.ok_or_else(|| {
                Outcome::Error(ForgeError::Setup("this host has no sandbox runtime (bubblewrap) for Python skills".into()))
            })?;
            if !report.passed {
                let error = report.error.unwrap_or_else(|| "its tests failed".into());
                return Err(Outcome::Failure(Failure::Python { tests: report.tests, error }));
            }
        }
        let skill = self.probe.load(&built.source, grant).await.map_err(|e| match e {
            // The host's setup, not the submission, is at fault: not counted as an attempt.
            LoadError::NoRuntime { .. } => Outcome::Error(ForgeError::Setup(e.to_string())),
            e => Outcome::Failure(Failure::Load { error: e.to_string() }),
        })?;
        let (results, after_approval) = match built.manifest.probe_withholds() {
            Some(asks) => {
                drop(skill);
                let results: Vec<TestResult> =
                    built.tests.iter().map(|t| TestResult { tool: t.tool.clone(), status: TestStatus::RunsAfterApproval }).collect();
                let note = (!results.is_empty()).then(|| {
                    format!(
                        "{} declared test(s) run after approval: the skill asks for {asks}, which no code gets before a human \
                         approved it; once approved, `skillhost test {name}` runs them with its real grant",
                        results.len()
                    )
                });
                (results, note)
            }
            None => {
                let failures = check::run_cases(skill.as_ref(), &built.tests).await;
                drop(skill);
                if !failures.is_empty() {
                    return Err(Outcome::Failure(Failure::Tests { failures }));
                }
                (built.tests.iter().map(|t| TestResult { tool: t.tool.clone(), status: TestStatus::Passed }).collect(), None)
            }
        };
        drop(scratch);
        Ok(Tested { built, results, after_approval })
    }

    /// Install exactly the snapshot that was tested.
    pub(crate) async fn install(&self, name: &SkillName, tested: Tested, mut timings: Timings) -> Result<Forged, Outcome> {
        let Tested { built, results, after_approval } = tested;
        let content_hash = built.snapshot.content_hash();
        let replaced = self.registry.entry(name.as_str()).is_ok_and(|e| e.layer == Layer::User);
        let entry = self.registry.install_agent_written(built.snapshot).await.map_err(|e| Outcome::Error(e.into()))?;
        timings.mark("install");
        let loaded = entry.loaded.as_ref();
        let redactor = Redactor::new(self.secrets.as_ref());
        let mut warnings = built.warnings;
        for warning in &mut warnings {
            redactor.diagnostic(warning);
        }
        Ok(Forged {
            skill: name.to_string(),
            language: built.language,
            version: built.manifest.version.clone(),
            state: entry.state,
            tier: loaded.map_or(RiskTier::Auto, |l| l.tier),
            tools: loaded.map(|l| l.tools.iter().map(|t| t.name.clone()).collect()).unwrap_or_default(),
            tests_passed: results.iter().filter(|t| t.status == TestStatus::Passed).count(),
            tests: results,
            after_approval,
            warnings,
            installed: entry.origin.clone(),
            content_hash,
            replaced,
            timings_ms: timings.finish(),
        })
    }

    /// Stage the crate into the skill's build dir and build it in the sandbox.
    pub(crate) async fn build_rust(
        &self,
        name: &SkillName,
        files: &BTreeMap<String, String>,
        fresh: bool,
    ) -> Result<Result<rust::Built, BuildFailure>, Outcome> {
        let toolchain = {
            let mut cached = self.toolchain.lock().await;
            if cached.is_none() {
                let workspace = self.config.sdk_workspace.clone().ok_or_else(|| {
                    Outcome::Error(ForgeError::Setup("no SDK sources configured for Rust skills (ForgeConfig::sdk_workspace)".into()))
                })?;
                let dir = self.config.dir.clone();
                let made = tokio::task::spawn_blocking(move || rust::toolchain(&dir, &workspace))
                    .await
                    .map_err(|e| Outcome::Error(ForgeError::Setup(e.to_string())))?
                    .map_err(Outcome::Error)?;
                *cached = Some(made);
            }
            cached.clone().expect("set above")
        };
        // A build runs code no human approved (build scripts, proc macros): it gets every
        // isolation layer the host expects, or it does not run, unless the host's config
        // accepts a weaker sandbox, as for server skills.
        toolchain
            .jail
            .weakened(&self.config.allow_weaker)
            .map_err(|e| Outcome::Error(ForgeError::Setup(format!("cannot build `{name}`: {}", e.message("its build sandbox")))))?;
        // The target dir is the name's own and kept across its attempts (its parent is the
        // host's, never mounted, so a build can change what is inside `target/` but not
        // what `target` is); a new skill of that name starts from none.
        let cache = self.config.dir.join("targets").join(name.as_str());
        if fresh && std::fs::symlink_metadata(&cache).is_ok() {
            // A tree a build made: removed without recursion and off the async runtime;
            // links as links, nothing they point to touched.
            let clear = cache.clone();
            tokio::task::spawn_blocking(move || skillhost_package::remove_tree(&clear))
                .await
                .map_err(|e| Outcome::Error(ForgeError::Setup(format!("clearing the target dir: {e}"))))?
                .map_err(io("cannot clear the target dir"))?;
        }
        // Every attempt builds its source in a fresh directory, and the host's own files
        // for it (/etc) go to a fresh private one no build can write. Both are searchable
        // (0711), not listable, by others: a root host's build runs as an unprivileged uid.
        let work = self.work()?;
        let fresh_dir = |root: &Arc<ScratchRoot>| -> Result<ScratchDir, Outcome> {
            use std::os::unix::fs::PermissionsExt;
            let dir = root.dir(&format!("{name}-")).map_err(io("cannot create the build dir"))?;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).map_err(io("cannot create the build dir"))?;
            Ok(dir)
        };
        let attempt = fresh_dir(&work.builds)?;
        let private = fresh_dir(&work.private)?;
        let mut files = files.clone();
        let manifest = files.entry("Cargo.toml".into()).or_insert_with(|| rust::cargo_toml(name.as_str(), &rust::sdk_path()));
        *manifest = rust::with_sandbox_sdk(manifest);
        let dirs = rust::BuildDirs { src: attempt.path().join("src"), target: cache.join("target"), private: private.path().to_owned() };
        stage::write(&dirs.src, &files).map_err(io("cannot stage the crate"))?;
        rust::build(&toolchain, &dirs, rust::BuildLimits { wall: self.config.build_timeout }).await.map_err(Outcome::Error)
    }
}
