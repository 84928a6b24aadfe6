//! skillhost's forge: turns source an agent (or a person) submits into a built, tested,
//! installed skill, safely, and tells the submitter precisely what to fix when it fails.
//!
//! ```text
//! submission ─► stage (rules, in memory) ─► write into a fresh dir ─► build ─► load + tests ─► install (user layer)
//!                 refusals: file + rule        Rust: cargo in bwrap         [[tests]], pytest    pending_review, always
//!                                              Python: nothing to build     in the sandbox       (agent-written)
//! ```
//!
//! - `stage`: the extraction rules (names, paths, allow and deny lists, sizes)
//!   and writing files without following links.
//! - `rust`: the toolchain cache (SDK copy + vendored crates), the sandboxed offline
//!   `cargo build`, structured diagnostics, packaging.
//! - `probe`: what unapproved code runs with: the probe grant (an empty scratch dir at
//!   `/data`, no network, no secrets, a short deadline), the forge's own runtimes holding
//!   no secret source, which `[[tests]]` wait for approval, and scrubbing secret values
//!   out of reports.
//! - `check`: `[[tests]]` cases, before approval on the probe runtimes, after it through
//!   the registry ([`Forge::test_approved`], `skillhost test NAME`); Python skills'
//!   pytest and handshake through `skillhost-sandbox`'s `check`.
//! - `attempts`: the per-name attempt count (default 3), reset by a success or a human,
//!   and the cap on submissions across names in a time window (default 60 an hour).
//!
//! **Caps.** At most [`ForgeConfig::max_concurrent_builds`] submissions are built and
//! tested at once (default 2) and [`ForgeConfig::max_attempts_per_window`] submissions are
//! taken per [`ForgeConfig::attempt_window`] whatever their names (default 60 an hour);
//! beyond either the submission is refused at once with an error naming the cap
//! ([`ForgeError::Limited`], not counted as an attempt).
//! - [`llm`]: the optional generator for hosts used without an agent: a model behind an
//!   OpenAI-compatible endpoint writes the source, and every failure goes back to it.
//!
//! **Trust.** Nothing a submission holds runs with the host's secrets, network or data
//! before a human approved it (see `probe`). The forge never approves anything: it installs through
//! [`Registry::install_agent_written`], so what it installs waits for a human whatever its
//! tier, instructions only included (an agent's instructions are text later sessions
//! would follow): `pending_review`, or `needs_reapproval` for a new version, until a human
//! approves it (or this exact content was approved by one before). **Source.** A Rust skill is installed as a folder holding
//! `skill.toml`, `SKILL.md`, `skill.wasm` and `source/` (every submitted file); a
//! Python skill's folder is its source. Either way the source is inside the content
//! hash, so the code a human reviews (`skillhost show --code`, `skill_get`) is bound to
//! the approval of the binary it produced. **Versions.** Each install keeps the version
//! it replaces ([`Registry::rollback`]).

mod attempts;
mod check;
mod error;
pub mod llm;
pub mod probe;
pub mod rust;
pub mod stage;

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use skillhost_core::{CallContext, LoadError, RiskTier, SkillManifest, SkillName, SkillRuntime};
use skillhost_package::{ScratchDir, ScratchRoot};
use skillhost_registry::{Layer, Registry, RegistryError, TrustState};

pub use error::{Failure, ForgeError, TestFailure};
pub use probe::SecretValues;
pub use rust::{BuildFailure, Diagnostic, sdk_workspace_manifest};
pub use stage::{Language, Refusal, StageLimits};

use crate::attempts::{Attempts, Window};
use crate::probe::Redactor;

/// How the forge is set up.
#[derive(Clone, Debug)]
pub struct ForgeConfig {
    /// Its working directory: staging, per-skill build dirs, the toolchain cache, attempt
    /// counts. The facade uses `<data_dir>/forge`.
    pub dir: PathBuf,
    /// A checkout holding `guest-sdk/`, `wit/` and the workspace `Cargo.toml` Rust
    /// skills build against. Default: none, and Rust submissions fail saying so.
    pub sdk_workspace: Option<PathBuf>,
    /// Failed attempts allowed per skill name before a human must reset. Default: 3.
    pub max_attempts: u32,
    /// Wall-clock limit of one Rust build. Default: 5 minutes.
    pub build_timeout: Duration,
    /// Hard limit of a Python skill's pytest run and handshake. Default: 30 s.
    pub test_timeout: Duration,
    /// Size caps of a submission. Default: [`StageLimits::default`].
    pub limits: StageLimits,
    /// Offer "consider creating a skill for …" in `tool_search` responses once at least
    /// 3 similar searches found nothing good. Default: `false` (opt-in).
    pub suggest_missing: bool,
    /// Submissions built and tested at once; one more is refused until one finished.
    /// Default: 2.
    pub max_concurrent_builds: usize,
    /// Submissions taken per [`attempt_window`](Self::attempt_window), across all skill
    /// names (the per-name count alone lets an agent rotate names). Default: 60.
    pub max_attempts_per_window: u32,
    /// The window of [`max_attempts_per_window`](Self::max_attempts_per_window). Default:
    /// one hour.
    pub attempt_window: Duration,
    /// The isolation layers the host's configuration lets a sandbox run without (the
    /// sandbox's `allow_weaker`): a build missing any other layer the host expects does
    /// not run. Default: none.
    pub allow_weaker: Vec<String>,
}

impl ForgeConfig {
    /// A configuration over `dir` with the defaults above.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            sdk_workspace: None,
            max_attempts: 3,
            build_timeout: Duration::from_secs(300),
            test_timeout: Duration::from_secs(30),
            limits: StageLimits::default(),
            suggest_missing: false,
            max_concurrent_builds: 2,
            max_attempts_per_window: 60,
            attempt_window: Duration::from_secs(3600),
            allow_weaker: Vec::new(),
        }
    }
}

/// Source to turn into a skill.
#[derive(Clone, Debug)]
pub struct Submission {
    /// The skill's name (skill.toml must declare the same).
    pub name: String,
    /// Its language.
    pub language: Language,
    /// Relative path → file contents.
    pub files: BTreeMap<String, String>,
}

/// Where the pipeline is, for progress reports.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// A skill the forge built, tested and installed.
#[derive(Clone, Debug, Serialize)]
pub struct Forged {
    /// The skill.
    pub skill: String,
    /// Its language.
    pub language: Language,
    /// Its manifest's version.
    pub version: String,
    /// Its trust state after install: waiting for a human (`pending_review`,
    /// `needs_reapproval`), or `approved` when a human approved this exact content before.
    pub state: TrustState,
    /// Its risk tier.
    pub tier: RiskTier,
    /// Its tools.
    pub tools: Vec<String>,
    /// Declared test cases that passed.
    pub tests_passed: usize,
    /// Each declared test case and what became of it: `passed`, or `runs_after_approval`
    /// when the skill asks for network or secrets, which no unapproved code gets.
    pub tests: Vec<TestResult>,
    /// When some tests wait for approval: why, and how they will run.
    pub after_approval: Option<String>,
    /// Compiler warnings (Rust).
    pub warnings: Vec<Diagnostic>,
    /// Where it was installed.
    pub installed: PathBuf,
    /// The content hash of what was tested and installed: the same bytes (see
    /// [`Registry::install_snapshot`]).
    pub content_hash: String,
    /// Whether it replaced a version (kept for `skillhost rollback`).
    pub replaced: bool,
    /// Milliseconds per stage (`stage`, `build`, `test`, `install`) and in all.
    pub timings_ms: BTreeMap<&'static str, u64>,
}

/// One declared test case in a forge report.
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// The tool it calls.
    pub tool: String,
    /// What became of it.
    pub status: TestStatus,
}

/// What became of a declared test case in the forge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TestStatus {
    /// It ran under the probe grant and passed.
    Passed,
    /// Not run: the skill asks for network or secrets, which only an approved skill
    /// gets; `skillhost test NAME` runs it once a human approved the skill.
    RunsAfterApproval,
}

/// The outcome of an approved skill's declared tests, run with its real grant.
#[derive(Clone, Debug, Serialize)]
pub struct ApprovedTests {
    /// The skill.
    pub skill: String,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed (secret values replaced).
    pub failures: Vec<TestFailure>,
}

/// The forge over a registry.
pub struct Forge {
    config: ForgeConfig,
    registry: Arc<Registry>,
    /// What submissions run on before a human approved them: a runtime holding no
    /// secret source and no network (see [`probe`]).
    probe: Arc<dyn SkillRuntime>,
    secrets: Option<SecretValues>,
    attempts: Attempts,
    window: Window,
    builds: Arc<tokio::sync::Semaphore>,
    toolchain: tokio::sync::Mutex<Option<rust::Toolchain>>,
    busy: Mutex<BTreeSet<SkillName>>,
    /// Where submissions are staged, built and probed, or why those folders cannot be used:
    /// opened at the first submission that passes its stage checks, or at start when a
    /// host before this one left them (which sweeps what it left).
    work: std::sync::OnceLock<std::io::Result<WorkDirs>>,
}

/// The folders a submission's code writes into (a build's source dir, its scratch), and
/// the host's own files for a run: each a [`ScratchRoot`], so a dir is removed without
/// recursion, off the async runtime, when its run ends for any reason, and what a killed
/// host left is swept at the next start.
struct WorkDirs {
    scratch: Arc<ScratchRoot>,
    builds: Arc<ScratchRoot>,
    private: Arc<ScratchRoot>,
}

impl WorkDirs {
    const FOLDERS: [&str; 3] = ["scratch", "builds", "private"];

    fn open(dir: &Path) -> std::io::Result<Self> {
        Ok(Self {
            scratch: ScratchRoot::open(&dir.join(Self::FOLDERS[0]))?,
            builds: ScratchRoot::open(&dir.join(Self::FOLDERS[1]))?,
            private: ScratchRoot::open(&dir.join(Self::FOLDERS[2]))?,
        })
    }
}

/// Create, replace or update.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `skill_create`: the name must be new.
    Create,
    /// `skillhost forge DIR`: new, or replacing the user layer's skill.
    Replace,
}

impl Forge {
    /// A forge installing into `registry`. Submissions run on `probe` before a human
    /// approved them: a runtime the caller made for the forge alone, holding no secret
    /// source and no network (see [`probe`]; the facade's `Host::forge` makes it).
    pub fn new(config: ForgeConfig, registry: Arc<Registry>, probe: Arc<dyn SkillRuntime>) -> Self {
        let attempts = Attempts::new(&config.dir);
        let window = Window::new(&config.dir);
        let builds = Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_builds));
        let forge = Self {
            work: std::sync::OnceLock::new(),
            config,
            registry,
            probe,
            secrets: None,
            attempts,
            window,
            builds,
            toolchain: tokio::sync::Mutex::new(None),
            busy: Mutex::default(),
        };
        if WorkDirs::FOLDERS.iter().any(|folder| forge.config.dir.join(folder).is_dir()) {
            // Sweeps what an earlier host left, when no other process uses them.
            if let Err(Outcome::Error(error)) = forge.work() {
                tracing::warn!(%error, "the forge cannot use its work folders");
            }
        }
        forge
    }

    /// Replace the values `secrets` returns (the host's secrets) wherever they appear in
    /// what the forge reports: build output, test output, failures. Unapproved code gets
    /// no secret; this keeps a value out of reports even if one got through.
    pub fn redact_secrets(mut self, secrets: SecretValues) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &ForgeConfig {
        &self.config
    }

    /// The registry skills are installed into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Build, test and install a new skill; a name that exists is refused (use
    /// [`update`](Self::update)).
    pub async fn create(&self, submission: Submission, progress: Progress) -> Result<Forged, ForgeError> {
        self.run(submission, Mode::Create, progress).await
    }

    /// Build, test and install `submission`, replacing the user layer's skill of that
    /// name if there is one (`skillhost forge DIR`).
    pub async fn submit(&self, submission: Submission, progress: Progress) -> Result<Forged, ForgeError> {
        self.run(submission, Mode::Replace, progress).await
    }

    /// Merge `files` over the stored source of the installed skill `name`, then build,
    /// test and install it; the version it replaces is kept for rollback.
    pub async fn update(&self, name: &str, files: BTreeMap<String, String>, progress: Progress) -> Result<Forged, ForgeError> {
        let (language, mut source) = self.stored_source(name)?;
        source.extend(files);
        self.run(Submission { name: name.to_owned(), language, files: source }, Mode::Replace, progress).await
    }

    /// The source stored with the installed skill `name`: its language and files.
    pub fn stored_source(&self, name: &str) -> Result<(Language, BTreeMap<String, String>), ForgeError> {
        let entry = self.registry.entry(name).map_err(|e| ForgeError::Conflict(format!("{e}; create it with skill_create")))?;
        if entry.layer != Layer::User {
            return Err(ForgeError::Conflict(format!(
                "skill `{name}` is in the {} layer; the forge updates only skills in the user layer (copy it with skill_create under a new name)",
                entry.layer
            )));
        }
        let no_source = || {
            ForgeError::Conflict(format!(
                "skill `{name}` has no stored source to update (it was not made by the forge); submit it whole with skill_create under a new name"
            ))
        };
        // Read once, through the hardened reader every skill is read with (no links, size
        // caps): the files as they are installed, not a walk that checks, then reads.
        let snapshot = skillhost_package::Snapshot::read(&entry.origin, self.registry.limits())
            .map_err(|e| ForgeError::Conflict(format!("the stored source of `{name}` cannot be read: {e}")))?;
        let skillhost_package::Snapshot::Folder { files, .. } = snapshot else { return Err(no_source()) };
        let is_server = entry.loaded.as_ref().and_then(|l| l.manifest.as_ref()).is_some_and(|m| m.server.is_some());
        let is_scripts = entry.loaded.as_ref().is_some_and(|l| l.scripts.is_some());
        let (language, files): (Language, BTreeMap<String, Vec<u8>>) = if is_scripts {
            (Language::Scripts, files)
        } else if files.keys().any(|path| path.starts_with("source/")) {
            let source = files.into_iter().filter_map(|(path, bytes)| Some((path.strip_prefix("source/")?.to_owned(), bytes)));
            (Language::Rust, source.collect())
        } else if is_server {
            (Language::Python, files)
        } else {
            return Err(no_source());
        };
        let files = files
            .into_iter()
            .map(|(path, bytes)| match String::from_utf8(bytes) {
                Ok(text) => Ok((path, text)),
                Err(_) => Err(ForgeError::Conflict(format!("the stored source of `{name}` cannot be read: {path} is not UTF-8 text"))),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        Ok((language, files))
    }

    /// **Human only.** Allow `name` its attempts again.
    pub fn reset(&self, name: &str) -> Result<(), ForgeError> {
        let name = SkillName::new(name).map_err(|e| ForgeError::Conflict(e.to_string()))?;
        self.attempts.reset(&name)
    }

    /// Failed attempts recorded for `name`.
    pub fn failed_attempts(&self, name: &str) -> u32 {
        SkillName::new(name).map_or(0, |n| self.attempts.failed(&n))
    }

    /// Run the `[[tests]]` of the installed skill `name` through the registry, with its
    /// real grant: the cases the forge reported as `runs_after_approval`. Refused unless a
    /// human approved the version installed (`skillhost test NAME`). Secret values are
    /// replaced in the failures reported.
    pub async fn test_approved(&self, name: &str) -> Result<ApprovedTests, ForgeError> {
        let entry = self.registry.entry(name).map_err(|e| ForgeError::Conflict(e.to_string()))?;
        if entry.state != TrustState::Approved {
            return Err(ForgeError::Conflict(format!(
                "skill `{name}` is {}: its declared tests run with its real grant only once a human approved it \
                 (`skillhost approve {name}`, after reviewing it with `skillhost show {name} --code`)",
                entry.state
            )));
        }
        let tests = declared_tests(name, &entry.origin)?;
        let registry = &self.registry;
        let failures = check::run_with(&tests, |tool, input| async move {
            let cx = CallContext { caller: "skillhost test".into(), ..CallContext::default() };
            registry.call(name, &tool, input, cx).await.map(|out| out.value)
        })
        .await;
        let mut failure = Failure::Tests { failures };
        Redactor::new(self.secrets.as_ref()).failure(&mut failure);
        let Failure::Tests { failures } = failure else { unreachable!("built above") };
        Ok(ApprovedTests { skill: name.to_owned(), passed: tests.len() - failures.len(), failures })
    }

    async fn run(&self, submission: Submission, mode: Mode, progress: Progress) -> Result<Forged, ForgeError> {
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
    async fn pipeline(&self, name: &SkillName, submission: Submission, fresh: bool, progress: &Progress) -> Result<Forged, Outcome> {
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
    async fn scripts(&self, name: &SkillName, submission: Submission, progress: &Progress) -> Result<Forged, Outcome> {
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
    fn stage(&self, name: &SkillName, submission: Submission) -> Result<Staged, Outcome> {
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
    async fn build(&self, name: &SkillName, staged: Staged, fresh: bool) -> Result<Built, Outcome> {
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
    fn snapshot(&self, name: &SkillName, files: BTreeMap<String, Vec<u8>>) -> Result<skillhost_package::Snapshot, Outcome> {
        skillhost_package::Snapshot::from_files(self.registry.user_layer().join(name.as_str()), files, self.registry.limits())
            .map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))
    }

    /// Load what was built and run its tests, all under the probe grant, over a fresh
    /// empty scratch dir removed afterwards, on the probe runtime (no secrets, no network).
    async fn test(&self, name: &SkillName, built: Built) -> Result<Tested, Outcome> {
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
    async fn install(&self, name: &SkillName, tested: Tested, mut timings: Timings) -> Result<Forged, Outcome> {
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
    async fn build_rust(
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

/// The `[[tests]]` of the skill installed at `origin` (a folder holding `skill.toml`).
fn declared_tests(name: &str, origin: &Path) -> Result<Vec<skillhost_core::TestCase>, ForgeError> {
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
struct Staged {
    submission: Submission,
    manifest: SkillManifest,
    tests: Vec<skillhost_core::TestCase>,
}

/// What the build made: the snapshot that is tested and installed, and its code.
struct Built {
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
struct Tested {
    built: Built,
    results: Vec<TestResult>,
    after_approval: Option<String>,
}

/// Milliseconds per step of the pipeline, and in all.
struct Timings {
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
enum Outcome {
    Failure(Failure),
    Error(ForgeError),
}

/// A submission's text files as bytes.
fn bytes_of(files: &BTreeMap<String, String>) -> BTreeMap<String, Vec<u8>> {
    files.iter().map(|(path, text)| (path.clone(), text.as_bytes().to_vec())).collect()
}

fn manifest_failure(error: String) -> Outcome {
    Outcome::Failure(Failure::Manifest { error })
}

impl Forge {
    /// The work folders, or why the forge cannot run.
    fn work(&self) -> Result<&WorkDirs, Outcome> {
        let dir = &self.config.dir;
        let work = self.work.get_or_init(|| WorkDirs::open(dir));
        work.as_ref()
            .map_err(|e| Outcome::Error(ForgeError::Setup(format!("cannot open the forge's work folders in {}: {e}", dir.display()))))
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Outcome {
    move |source| Outcome::Error(ForgeError::Io { what, source })
}

/// Append `tests` (JSON objects with `tool`, `input`, `expect` or `expect_error`) to
/// skill.toml text as `[[tests]]` entries, as `skill_create`'s `tests` argument asks.
pub fn append_tests(manifest: &str, tests: &[serde_json::Value]) -> Result<String, TestsError> {
    #[derive(Serialize)]
    struct Tests {
        tests: Vec<toml::Value>,
    }
    let tests = tests
        .iter()
        .map(|t| toml::Value::try_from(t).map_err(|source| TestsError::Case { case: t.to_string(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let text = toml::to_string(&Tests { tests }).map_err(TestsError::All)?;
    Ok(format!("{}\n\n{text}", manifest.trim_end()))
}

/// Why [`append_tests`] could not write the test cases into skill.toml.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestsError {
    /// One case has no TOML form (a `null`, a mixed array).
    #[error("test case {case} cannot be written to skill.toml: {source}")]
    Case {
        /// The case, as JSON.
        case: String,
        /// The serializer's error.
        source: toml::ser::Error,
    },
    /// The list as a whole.
    #[error("the test cases cannot be written to skill.toml: {0}")]
    All(#[source] toml::ser::Error),
}

/// One pipeline per skill name at a time.
struct Busy<'a> {
    set: &'a Mutex<BTreeSet<SkillName>>,
    name: SkillName,
}

impl<'a> Busy<'a> {
    fn take(set: &'a Mutex<BTreeSet<SkillName>>, name: &SkillName) -> Result<Self, ForgeError> {
        let mut names = set.lock();
        if !names.insert(name.clone()) {
            return Err(ForgeError::Conflict(format!("skill `{name}` is being forged already; wait for that submission to finish")));
        }
        Ok(Self { set, name: name.clone() })
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set.lock().remove(&self.name);
    }
}
