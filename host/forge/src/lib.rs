//! skillhost's forge: turns source an agent (or a person) submits into a built, tested,
//! installed skill, safely, and tells the submitter precisely what to fix when it fails.
//!
//! ```text
//! submission ─► stage (rules, in memory) ─► write into a fresh dir ─► build ─► load + tests ─► install (user layer)
//!                 refusals: file + rule        Rust: cargo in bwrap         [[tests]], pytest    pending_review, or
//!                                              Python: nothing to build     in the sandbox       approved for tier auto
//! ```
//!
//! - `stage`: seed 001's extraction rules (names, paths, allow and deny lists, sizes)
//!   and writing files without following links.
//! - `rust`: the toolchain cache (SDK copy + vendored crates), the sandboxed offline
//!   `cargo build`, structured diagnostics, packaging.
//! - `check`: `[[tests]]` cases on the real runtime, with the declared grant, over a
//!   throwaway data dir; Python skills' pytest and handshake through
//!   `skillhost-sandbox`'s `check`.
//! - `attempts`: the per-name attempt count (default 3), reset by a success or a human.
//! - [`llm`]: the optional generator for hosts used without an agent: a model behind an
//!   OpenAI-compatible endpoint writes the source, and every failure goes back to it.
//!
//! **Trust.** The forge never approves anything: it installs through
//! [`Registry::install`], so the registry's tiers decide (pending review, or approved
//! for pure computation). **Source.** A Rust skill is installed as a folder holding
//! `skill.toml`, `SKILL.md`, `skill.wasm` and `source/` (every submitted file); a
//! Python skill's folder is its source. Either way the source is inside the content
//! hash, so the code a human reviews (`skillhost show --code`, `skill_get`) is bound to
//! the approval of the binary it produced. **Versions.** Each install keeps the version
//! it replaces ([`Registry::rollback`]).

mod attempts;
mod check;
mod error;
pub mod llm;
pub mod rust;
pub mod stage;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use skillhost_core::{Grant, Policy, RiskTier, SkillCode, SkillManifest, SkillName, SkillRuntime, SkillSource};
use skillhost_registry::{Layer, Registry, TrustState};
use skillhost_sandbox::BwrapRuntime;

pub use error::{Failure, ForgeError, TestFailure};
pub use rust::{BuildFailure, Diagnostic, package_skill};
pub use stage::{Language, Refusal, StageLimits};

use crate::attempts::Attempts;

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
    /// 3 similar searches found nothing good (seed 003 C4a). Default: `false`.
    pub suggest_missing: bool,
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
    /// Its trust state after install: `approved` only when its tier is auto (or this
    /// exact content was approved before).
    pub state: TrustState,
    /// Its risk tier.
    pub tier: RiskTier,
    /// Its tools.
    pub tools: Vec<String>,
    /// Declared test cases that passed.
    pub tests_passed: usize,
    /// Compiler warnings (Rust).
    pub warnings: Vec<Diagnostic>,
    /// Where it was installed.
    pub installed: PathBuf,
    /// Whether it replaced a version (kept for `skillhost rollback`).
    pub replaced: bool,
    /// Milliseconds per stage (`stage`, `build`, `test`, `install`) and in all.
    pub timings_ms: BTreeMap<&'static str, u64>,
}

/// The forge over a registry.
pub struct Forge {
    config: ForgeConfig,
    registry: Arc<Registry>,
    runtime: Arc<dyn SkillRuntime>,
    sandbox: Option<BwrapRuntime>,
    attempts: Attempts,
    toolchain: tokio::sync::Mutex<Option<rust::Toolchain>>,
    busy: Mutex<BTreeSet<SkillName>>,
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
    /// A forge installing into `registry`, loading and testing with `runtime` (both
    /// runtimes, e.g. `skillhost_core::Runtimes`) and running Python checks in
    /// `sandbox`.
    pub fn new(config: ForgeConfig, registry: Arc<Registry>, runtime: Arc<dyn SkillRuntime>, sandbox: Option<BwrapRuntime>) -> Self {
        let attempts = Attempts::new(&config.dir);
        Self { config, registry, runtime, sandbox, attempts, toolchain: tokio::sync::Mutex::new(None), busy: Mutex::default() }
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
        let no_source = || ForgeError::Conflict(format!("skill `{name}` has no stored source to update (it was not made by the forge); submit it whole with skill_create under a new name"));
        let origin = &entry.origin;
        let (language, dir) = if origin.join("source").is_dir() {
            (Language::Rust, origin.join("source"))
        } else if origin.is_dir() && entry.loaded.as_ref().and_then(|l| l.manifest.as_ref()).is_some_and(|m| m.server.is_some()) {
            (Language::Python, origin.clone())
        } else {
            return Err(no_source());
        };
        let files = stage::read_dir(&dir, &self.config.limits).map_err(|refused| {
            ForgeError::Conflict(format!("the stored source of `{name}` cannot be read: {}", refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
        })?;
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

    async fn run(&self, submission: Submission, mode: Mode, progress: Progress) -> Result<Forged, ForgeError> {
        let name = SkillName::new(submission.name.clone()).map_err(|e| ForgeError::Conflict(e.to_string()))?;
        let max = self.config.max_attempts;
        if self.attempts.failed(&name) >= max {
            return Err(ForgeError::Exhausted { skill: name.to_string(), max });
        }
        let _busy = Busy::take(&self.busy, &name)?;
        if mode == Mode::Create && let Ok(entry) = self.registry.entry(name.as_str()) {
            return Err(ForgeError::Conflict(format!(
                "a skill named `{name}` already exists ({} layer); change it with skill_update, or choose another name",
                entry.layer
            )));
        }
        // A new skill starts from an empty target dir (a skill removed and created again
        // may be someone else's); retries of one creation and updates reuse it.
        let fresh = mode == Mode::Create && self.attempts.failed(&name) == 0;
        match self.pipeline(&name, submission, fresh, &progress).await {
            Ok(forged) => {
                self.attempts.reset(&name)?;
                Ok(forged)
            }
            Err(Outcome::Failure(failure)) => {
                let attempt = self.attempts.record_failure(&name)?;
                tracing::info!(skill = %name, attempt, max, %failure, "forge attempt failed");
                Err(ForgeError::Failed { skill: name.to_string(), attempt, max, failure })
            }
            Err(Outcome::Error(e)) => Err(e),
        }
    }

    async fn pipeline(&self, name: &SkillName, submission: Submission, fresh: bool, progress: &Progress) -> Result<Forged, Outcome> {
        let started = Instant::now();
        let mut timings = BTreeMap::new();
        let mut lap = Instant::now();
        let mut mark = |stage: &'static str, timings: &mut BTreeMap<&'static str, u64>| {
            timings.insert(stage, lap.elapsed().as_millis() as u64);
            lap = Instant::now();
        };
        progress("stage: checking the files");
        let refused = stage::validate(name.as_str(), submission.language, &submission.files, &self.config.limits);
        if !refused.is_empty() {
            return Err(Outcome::Failure(Failure::Stage { refused }));
        }
        let toml = &submission.files["skill.toml"];
        let manifest = SkillManifest::parse(toml, Path::new("skill.toml")).map_err(|e| manifest_failure(e.to_string()))?;
        let tests = SkillManifest::test_cases(toml, Path::new("skill.toml")).map_err(|e| manifest_failure(e.to_string()))?;
        match (submission.language, &manifest.server) {
            (Language::Rust, Some(_)) => {
                return Err(manifest_failure("a Rust skill is a component: remove `[server]` (or submit it as language `python`)".into()));
            }
            (Language::Python, None) => {
                return Err(manifest_failure("a Python skill needs `[server]` with `command = \"python\"` and `args = [\"server.py\"]`".into()));
            }
            _ => {}
        }
        let stage_root = self.config.dir.join("stage");
        std::fs::create_dir_all(&stage_root).map_err(io("cannot create the staging directory"))?;
        let staging = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(&stage_root)
            .map_err(io("cannot create the staging directory"))?;
        let out = staging.path().join(name.as_str());
        mark("stage", &mut timings);

        let mut warnings = Vec::new();
        let source = match submission.language {
            Language::Rust => {
                progress("build: cargo build in the sandbox (offline)");
                let component = self.build_rust(name, &submission.files, fresh).await?;
                let component = match component {
                    Ok(built) => {
                        warnings = built.warnings;
                        built.component
                    }
                    Err(failure) => return Err(Outcome::Failure(Failure::Build(failure))),
                };
                let md = submission.files.get("SKILL.md").map(String::as_bytes);
                let packaged = package_skill(&component, toml.as_bytes(), md)
                    .map_err(|e| Outcome::Failure(Failure::Load { error: format!("cargo produced something that is not a component: {e}") }))?;
                let mut installed: BTreeMap<String, String> = BTreeMap::new();
                installed.insert("skill.toml".into(), toml.clone());
                if let Some(md) = submission.files.get("SKILL.md") {
                    installed.insert("SKILL.md".into(), md.clone());
                }
                for (path, content) in &submission.files {
                    installed.insert(format!("source/{path}"), content.clone());
                }
                stage::write(&out, &installed).map_err(io("cannot stage the skill"))?;
                std::fs::write(out.join("skill.wasm"), &packaged).map_err(io("cannot stage the skill"))?;
                SkillSource {
                    manifest: manifest.clone(),
                    origin: out.clone(),
                    code: SkillCode::Wasm { path: out.join("skill.wasm"), bytes: Arc::from(packaged) },
                    instructions: submission.files.get("SKILL.md").cloned(),
                }
            }
            Language::Python => {
                stage::write(&out, &submission.files).map_err(io("cannot stage the skill"))?;
                skillhost_sandbox::read_source(&out).map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))?
            }
        };
        mark("build", &mut timings);

        progress("test: loading it and running its tests");
        let data = tempfile::tempdir().map_err(io("cannot create a throwaway data dir"))?;
        let grant = Grant::new(&manifest, &Policy::new(data.path()), &skillhost_core::DataKey::named(&manifest.name)).map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))?;
        // pytest (and its handshake) only when there are tests: the load below starts the
        // server and lists its tools anyway.
        if submission.language == Language::Python && submission.files.contains_key("test_server.py") {
            let sandbox = self.sandbox.as_ref().ok_or_else(|| {
                Outcome::Error(ForgeError::Setup("this host has no sandbox runtime (bubblewrap) for Python skills".into()))
            })?;
            let report = sandbox.test_skill(&source, grant.clone(), self.config.test_timeout).await;
            if !report.passed {
                let error = report.error.unwrap_or_else(|| "its tests failed".into());
                return Err(Outcome::Failure(Failure::Python { tests: report.tests, error }));
            }
        }
        let skill = self.runtime.load(&source, grant).await.map_err(|e| Outcome::Failure(Failure::Load { error: e.to_string() }))?;
        let failures = check::run_cases(skill.as_ref(), &tests).await;
        drop(skill);
        if !failures.is_empty() {
            return Err(Outcome::Failure(Failure::Tests { failures }));
        }
        mark("test", &mut timings);

        progress("install: into the user layer");
        let replaced = self.registry.entry(name.as_str()).is_ok_and(|e| e.layer == Layer::User);
        let entry = self.registry.install(&out).await.map_err(|e| Outcome::Error(e.into()))?;
        mark("install", &mut timings);
        timings.insert("total", started.elapsed().as_millis() as u64);
        let loaded = entry.loaded.as_ref();
        Ok(Forged {
            skill: name.to_string(),
            language: submission.language,
            version: manifest.version.clone(),
            state: entry.state,
            tier: loaded.map_or(RiskTier::Auto, |l| l.tier),
            tools: loaded.map(|l| l.tools.iter().map(|t| t.name.clone()).collect()).unwrap_or_default(),
            tests_passed: tests.len(),
            warnings,
            installed: entry.origin.clone(),
            replaced,
            timings_ms: timings,
        })
    }

    /// Stage the crate into the skill's build dir and build it in the sandbox.
    async fn build_rust(&self, name: &SkillName, files: &BTreeMap<String, String>, fresh: bool) -> Result<Result<rust::Built, BuildFailure>, Outcome> {
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
        let build_dir = self.config.dir.join("builds").join(name.as_str());
        if fresh && build_dir.exists() {
            std::fs::remove_dir_all(&build_dir).map_err(io("cannot clear the build dir"))?;
        }
        let src = build_dir.join("src");
        if src.exists() {
            std::fs::remove_dir_all(&src).map_err(io("cannot clear the build dir"))?;
        }
        let mut files = files.clone();
        files.entry("Cargo.toml".into()).or_insert_with(|| rust::cargo_toml(name.as_str(), &rust::sdk_path()));
        stage::write(&src, &files).map_err(io("cannot stage the crate"))?;
        rust::build(&toolchain, &build_dir, rust::BuildLimits { wall: self.config.build_timeout }).await.map_err(Outcome::Error)
    }
}

/// Why the pipeline stopped: the submission's fault (counted) or the host's.
enum Outcome {
    Failure(Failure),
    Error(ForgeError),
}

fn manifest_failure(error: String) -> Outcome {
    Outcome::Failure(Failure::Manifest { error })
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Outcome {
    move |source| Outcome::Error(ForgeError::Io { what, source })
}

/// Append `tests` (JSON objects with `tool`, `input`, `expect` or `expect_error`) to
/// skill.toml text as `[[tests]]` entries, as `skill_create`'s `tests` argument asks.
pub fn append_tests(manifest: &str, tests: &[serde_json::Value]) -> Result<String, String> {
    #[derive(Serialize)]
    struct Tests {
        tests: Vec<toml::Value>,
    }
    let tests = tests
        .iter()
        .map(|t| toml::Value::try_from(t).map_err(|e| format!("test case {t} cannot be written to skill.toml: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let text = toml::to_string(&Tests { tests }).map_err(|e| format!("the test cases cannot be written to skill.toml: {e}"))?;
    Ok(format!("{}\n\n{text}", manifest.trim_end()))
}

/// One pipeline per skill name at a time.
struct Busy<'a> {
    set: &'a Mutex<BTreeSet<SkillName>>,
    name: SkillName,
}

impl<'a> Busy<'a> {
    fn take(set: &'a Mutex<BTreeSet<SkillName>>, name: &SkillName) -> Result<Self, ForgeError> {
        let mut names = set.lock().unwrap_or_else(|e| e.into_inner());
        if !names.insert(name.clone()) {
            return Err(ForgeError::Conflict(format!("skill `{name}` is being forged already; wait for that submission to finish")));
        }
        Ok(Self { set, name: name.clone() })
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.name);
    }
}
