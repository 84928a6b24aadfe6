//! skillhost's forge: turns source an agent (or a person) submits into a built, tested,
//! installed skill, safely, and tells the submitter precisely what to fix when it fails.
//!
//! ```text
//! submission ─► stage (rules, in memory) ─► write into a fresh dir ─► build ─► load + tests ─► install (user layer)
//!                 refusals: file + rule        Rust: cargo in bwrap         [[tests]], pytest    pending_review, always
//!                                              Python: nothing to build     in the sandbox       (agent-written)
//! ```
//!
//! - `pipeline`: the steps in types (`Staged` → `Built` → `Tested` → installed) and each
//!   step's failure; `report`: what a run reports ([`Forged`], [`TestStatus`]); `edit`:
//!   `[[tests]]` appended to a submitted skill.toml.
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
mod edit;
mod error;
pub mod llm;
mod pipeline;
pub mod probe;
mod report;
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

pub use edit::{TestsError, append_tests};
pub use error::{Failure, ForgeError, TestFailure};
pub use probe::SecretValues;
pub use report::{ApprovedTests, Forged, TestResult, TestStatus};
pub use rust::{BuildFailure, Diagnostic, sdk_workspace_manifest};
pub use stage::{Language, Refusal, StageLimits};

use crate::attempts::{Attempts, Window};
use crate::pipeline::{Outcome, declared_tests};
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
