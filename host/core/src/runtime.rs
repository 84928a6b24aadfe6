//! The seam between the host and the runtimes that execute skills: a [`SkillRuntime`]
//! turns a [`SkillSource`] and its [`Grant`] into a loaded [`Skill`], whose tools are
//! called with a [`CallContext`]. WebAssembly and sandboxed-process runtimes implement
//! the same traits, so nothing above them knows which one runs a skill.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::call::{Envelope, Invocation, InvokeError, Invoked};
use crate::grant::{Grant, GrantError};
use crate::limits::{ByteSize, fmt_duration};
use crate::manifest::{ManifestError, SkillManifest};
use crate::name::SkillName;
use crate::run::{RunError, RunOutput, ScriptJob};
use crate::tool::ToolSpec;

/// The code of a skill, by runtime.
#[derive(Clone)]
#[non_exhaustive]
pub enum SkillCode {
    /// A WebAssembly component implementing `skillhost:skill/skill@0.1.0`.
    Wasm {
        /// Where the component was read from.
        path: PathBuf,
        /// The component's bytes.
        bytes: Arc<[u8]>,
    },
    /// A stdio MCP server (`[server]` in its manifest), run in a sandbox.
    Server {
        /// The skill's folder, for messages.
        dir: PathBuf,
        /// The folder's files as they were hashed (relative `/`-separated path to
        /// contents): what runs is exactly what was approved, whatever the folder holds now.
        files: Arc<BTreeMap<String, Vec<u8>>>,
    },
}

impl SkillCode {
    /// The runtime kind that runs this code (`wasm`, `bwrap`).
    pub fn kind(&self) -> &'static str {
        match self {
            SkillCode::Wasm { .. } => "wasm",
            SkillCode::Server { .. } => "bwrap",
        }
    }
}

impl fmt::Debug for SkillCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkillCode::Wasm { path, bytes } => {
                write!(f, "Wasm({}, {} bytes)", path.display(), bytes.len())
            }
            SkillCode::Server { dir, files } => write!(f, "Server({}, {} files)", dir.display(), files.len()),
        }
    }
}

/// A skill as found on disk, before it is loaded.
#[derive(Clone, Debug)]
pub struct SkillSource {
    /// The parsed manifest.
    pub manifest: SkillManifest,
    /// The `.wasm` file or the skill's folder, for messages.
    pub origin: PathBuf,
    /// The code to run.
    pub code: SkillCode,
    /// The SKILL.md instructions, when present.
    pub instructions: Option<String>,
    /// SHA-256 (lowercase hex) of the skill's bytes as they were read, which approvals
    /// bind to (skillhost-package's content hash): code with the same hash is the same
    /// code, so a tool listing kept for one describes the other.
    pub content_hash: String,
}

/// What a component's manifest is, for [`LoadError::NeedsNetwork`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestHint {
    /// It has none: neither embedded nor a skill.toml beside it.
    None,
    /// It has one, which allows no network host.
    NoHosts,
}

/// Turns skill sources into runnable skills.
#[async_trait::async_trait]
pub trait SkillRuntime: Send + Sync {
    /// A short name for messages and listings (`wasm`, `bwrap`).
    fn kind(&self) -> &'static str;

    /// The kind shown for a skill with this code; a runtime that dispatches to others
    /// names the one that runs it. Default: [`kind`](Self::kind).
    fn kind_for(&self, _code: &SkillCode) -> &'static str {
        self.kind()
    }

    /// Load `source` so that it holds exactly `grant`.
    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError>;

    /// What, besides a skill's own bytes and the host's version, decides the tools this
    /// runtime lists for `source` (for a server skill, the venv it runs with). `None`:
    /// listings of this code are not kept, and every load runs it to list its tools.
    /// Default: `None`.
    fn listing_stamp(&self, _source: &SkillSource) -> Option<String> {
        None
    }

    /// The isolation this host's configuration lets skills with `code` run without, one
    /// line each (e.g. `uid drop (opted out in config)`), for the human who approves them
    /// and for `skillhost show`. Default: none.
    fn weakened(&self, _code: &SkillCode) -> Vec<String> {
        Vec::new()
    }

    /// Load `source` from the [`Skill::listing`] an earlier load of the same bytes (and
    /// the same [`listing_stamp`](Self::listing_stamp)) recorded: none of its code runs and
    /// nothing is compiled until a call needs it. The listing is checked as a fresh one
    /// would be. Default: [`load`](Self::load), which ignores it.
    async fn load_listed(&self, source: &SkillSource, grant: Grant, _listing: &Value) -> Result<Arc<dyn Skill>, LoadError> {
        self.load(source, grant).await
    }

    /// Run the skill's own tests (a server skill's `test_server.py`, with pytest) under
    /// `grant` (a probe grant: the skill may not be approved), then check that it starts
    /// and lists its tools, all within `limit`. `None` when this runtime has no tests of
    /// its own for this code (a component's cases are its `[[tests]]`, called as tools).
    /// Default: `None`.
    async fn own_tests(&self, _source: &SkillSource, _grant: Grant, _limit: Duration) -> Option<TestReport> {
        None
    }

    /// Run a command of an approved skill's scripts in this runtime's jail (see
    /// [`crate::run`]): the caller checked the approval and made `job`'s grant from the
    /// skill's policy. Default: refused, this runtime runs no scripts.
    async fn run_script(&self, job: ScriptJob, _cx: CallContext) -> Result<RunOutput, RunError> {
        Err(RunError::Unavailable { skill: job.skill, reason: format!("the {} runtime runs no scripts", self.kind()) })
    }
}

/// The outcome of a skill's own tests ([`SkillRuntime::own_tests`], `skillhost test`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TestReport {
    /// The skill.
    pub skill: String,
    /// Tests passed (or there were none) and the skill answered the handshake.
    pub passed: bool,
    /// The test run; `None` when the skill has no tests of its own.
    pub tests: Option<TestRun>,
    /// The tools it listed (empty when it did not start).
    pub tools: Vec<String>,
    /// What failed, one line.
    pub error: Option<String>,
}

/// One run of a skill's own tests.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TestRun {
    /// The command, as run inside the sandbox.
    pub command: String,
    /// Its exit code (`None` when it was killed).
    pub exit_code: Option<i32>,
    /// Its stdout and stderr, interleaved by stream (the tail, when long).
    pub output: String,
}

/// A runtime made on first use: the wrapped one is built when a skill first needs it, so
/// a host that never loads code of its kind never pays for it (an engine, the sandbox's
/// isolation probes). A runtime that cannot be built fails each load with
/// [`LoadError::NoRuntime`], saying why.
pub struct LazyRuntime {
    kind: &'static str,
    make: Box<dyn Fn() -> Result<Arc<dyn SkillRuntime>, Unbuilt> + Send + Sync>,
    made: std::sync::OnceLock<Result<Arc<dyn SkillRuntime>, Unbuilt>>,
}

/// Why a [`LazyRuntime`] could not be built: the error its maker returned.
type Unbuilt = Box<dyn std::error::Error + Send + Sync>;

impl LazyRuntime {
    /// A runtime of `kind` that `make` builds at its first use; its error (the runtime's
    /// own, boxed: `?` does it) is kept and given to every load.
    pub fn new(
        kind: &'static str,
        make: impl Fn() -> Result<Arc<dyn SkillRuntime>, Box<dyn std::error::Error + Send + Sync>> + Send + Sync + 'static,
    ) -> Self {
        Self { kind, make: Box::new(make), made: std::sync::OnceLock::new() }
    }

    /// The runtime, built now if it was not yet, or why it cannot be.
    pub fn get(&self) -> Result<&Arc<dyn SkillRuntime>, &(dyn std::error::Error + Send + Sync + 'static)> {
        self.made.get_or_init(|| (self.make)()).as_ref().map_err(|e| &**e)
    }

    fn unavailable(&self, source: &SkillSource, reason: &dyn std::error::Error) -> LoadError {
        LoadError::NoRuntime { skill: source.manifest.name.clone(), reason: format!("its {} runtime cannot start: {reason}", self.kind) }
    }
}

impl fmt::Debug for LazyRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyRuntime").field("kind", &self.kind).field("made", &self.made.get().map(Result::is_ok)).finish()
    }
}

#[async_trait::async_trait]
impl SkillRuntime for LazyRuntime {
    fn kind(&self) -> &'static str {
        self.kind
    }

    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError> {
        let runtime = self.get().map_err(|reason| self.unavailable(source, reason))?;
        runtime.load(source, grant).await
    }

    fn listing_stamp(&self, source: &SkillSource) -> Option<String> {
        self.get().ok()?.listing_stamp(source)
    }

    fn weakened(&self, code: &SkillCode) -> Vec<String> {
        self.get().map(|runtime| runtime.weakened(code)).unwrap_or_default()
    }

    async fn load_listed(&self, source: &SkillSource, grant: Grant, listing: &Value) -> Result<Arc<dyn Skill>, LoadError> {
        let runtime = self.get().map_err(|reason| self.unavailable(source, reason))?;
        runtime.load_listed(source, grant, listing).await
    }

    async fn own_tests(&self, source: &SkillSource, grant: Grant, limit: Duration) -> Option<TestReport> {
        match self.get() {
            Ok(runtime) => runtime.own_tests(source, grant, limit).await,
            Err(reason) => Some(TestReport {
                skill: source.manifest.name.to_string(),
                passed: false,
                tests: None,
                tools: Vec::new(),
                error: Some(self.unavailable(source, reason).to_string()),
            }),
        }
    }

    async fn run_script(&self, job: ScriptJob, cx: CallContext) -> Result<RunOutput, RunError> {
        match self.get() {
            Ok(runtime) => runtime.run_script(job, cx).await,
            Err(reason) => {
                Err(RunError::Unavailable { skill: job.skill, reason: format!("its {} runtime cannot start: {reason}", self.kind) })
            }
        }
    }
}

/// A [`SkillRuntime`] that routes each skill to the runtime for its [`SkillCode`]: the
/// WebAssembly runtime for components, the sandbox runtime for `[server]` skills. The
/// registry and the facade hold one of these, so nothing above them knows which
/// runtime runs a skill.
#[derive(Clone, Default)]
pub struct Runtimes {
    /// Runs [`SkillCode::Wasm`].
    pub wasm: Option<Arc<dyn SkillRuntime>>,
    /// Runs [`SkillCode::Server`]; `None` when the host has no sandbox (skills of this
    /// kind then fail to load with an error saying how to set one up).
    pub server: Option<Arc<dyn SkillRuntime>>,
    /// Why there is no sandbox runtime, for that error (e.g. "bwrap was not found").
    pub server_unavailable: Option<String>,
}

impl fmt::Debug for Runtimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtimes")
            .field("wasm", &self.wasm.as_ref().map(|r| r.kind()))
            .field("server", &self.server.as_ref().map(|r| r.kind()))
            .finish()
    }
}

#[async_trait::async_trait]
impl SkillRuntime for Runtimes {
    fn kind(&self) -> &'static str {
        "mixed"
    }

    fn kind_for(&self, code: &SkillCode) -> &'static str {
        code.kind()
    }

    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError> {
        if let Some(runtime) = self.route(&source.code) {
            return runtime.load(source, grant).await;
        }
        let reason = match &source.code {
            SkillCode::Wasm { .. } => "this host has no WebAssembly runtime".to_owned(),
            SkillCode::Server { .. } => format!(
                "it is a stdio MCP server skill (`[server]` in skill.toml) and this host has no sandbox runtime ({}); install bubblewrap and run `skillhost setup python`",
                self.server_unavailable.as_deref().unwrap_or("none configured")
            ),
        };
        Err(LoadError::NoRuntime { skill: source.manifest.name.clone(), reason })
    }

    fn listing_stamp(&self, source: &SkillSource) -> Option<String> {
        self.route(&source.code)?.listing_stamp(source)
    }

    fn weakened(&self, code: &SkillCode) -> Vec<String> {
        self.route(code).map(|runtime| runtime.weakened(code)).unwrap_or_default()
    }

    async fn load_listed(&self, source: &SkillSource, grant: Grant, listing: &Value) -> Result<Arc<dyn Skill>, LoadError> {
        match self.route(&source.code) {
            Some(runtime) => runtime.load_listed(source, grant, listing).await,
            None => self.load(source, grant).await,
        }
    }

    async fn own_tests(&self, source: &SkillSource, grant: Grant, limit: Duration) -> Option<TestReport> {
        self.route(&source.code)?.own_tests(source, grant, limit).await
    }

    /// Scripts run in the sandbox runtime's jail.
    async fn run_script(&self, job: ScriptJob, cx: CallContext) -> Result<RunOutput, RunError> {
        match &self.server {
            Some(runtime) => runtime.run_script(job, cx).await,
            None => Err(RunError::Unavailable {
                skill: job.skill,
                reason: format!(
                    "scripts run in the sandbox, and this host has none ({}); install bubblewrap",
                    self.server_unavailable.as_deref().unwrap_or("none configured")
                ),
            }),
        }
    }
}

impl Runtimes {
    /// The runtime for `code`, when this host has one.
    fn route(&self, code: &SkillCode) -> Option<&Arc<dyn SkillRuntime>> {
        match code {
            SkillCode::Wasm { .. } => self.wasm.as_ref(),
            SkillCode::Server { .. } => self.server.as_ref(),
        }
    }
}

/// A loaded skill whose tools can be called.
///
/// A runtime implements two methods: [`envelope`](Self::envelope), what every call is held
/// to, and [`invoke`](Self::invoke), one call run in the runtime; [`call`](Self::call), the
/// one callers use, wraps each invocation in the envelope (`call.rs`), the same for every
/// runtime. [`ready`](Self::ready) is for a runtime with work to do before a call's clock
/// starts.
#[async_trait::async_trait]
pub trait Skill: Send + Sync {
    /// What every call of it is held to: its grant, tools, output schemas and permits.
    fn envelope(&self) -> &Envelope;

    /// Run one call in the runtime and return its raw outcome; [`call`](Self::call) is
    /// what callers use. The tool is one of [`tools`](Self::tools), a permit of the
    /// skill's concurrency is held, and the envelope drops the future at
    /// [`Invocation::deadline`] or when the caller cancels: whatever must happen then
    /// (a server that overran is killed) happens when it is dropped.
    async fn invoke(&self, invocation: Invocation<'_>) -> Result<Invoked, InvokeError>;

    /// Get ready to call `tool` before the call's clock starts (compile the code, start a
    /// server), bounding the wait itself: a call's deadline is `limit`. The caller's
    /// cancellation drops it. Default: nothing to do.
    async fn ready(&self, _tool: &str, _limit: Duration, _cx: &CallContext) -> Result<(), CallFailure> {
        Ok(())
    }

    /// The skill's name.
    fn name(&self) -> &SkillName {
        &self.envelope().grant().skill
    }

    /// The tools it offers.
    fn tools(&self) -> &[ToolSpec] {
        self.envelope().tools()
    }

    /// What it holds.
    fn grant(&self) -> &Grant {
        self.envelope().grant()
    }

    /// Call `tool` with `input`, under the grant's limits and `cx`: the envelope
    /// (`call.rs`) around [`invoke`](Self::invoke).
    async fn call(&self, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, CallError> {
        self.envelope().call(self, tool, input, cx).await
    }

    /// What its runtime needs to load the same code again without running it
    /// ([`SkillRuntime::load_listed`]): the tools as the code listed them. `None` when its
    /// tools cost nothing to read again. Default: `None`.
    fn listing(&self) -> Option<Value> {
        None
    }

    /// Start compiling its code in the background (bounded, at a low priority), so that
    /// its first call finds it compiled (in the compiled cache, or in place of the code a
    /// call already runs): what a host does when a human approves it. Its calls never
    /// wait for it. Default: nothing to compile.
    fn compile_ahead(&self) {}

    /// Drop the compile [`compile_ahead`](Self::compile_ahead) queued, if it has not
    /// started: what a host does when the approval is withdrawn before it ran, so that
    /// nothing is compiled for code no human approves. Default: nothing to cancel.
    fn cancel_compile_ahead(&self) {}

    /// Let go of the code compiled to list its tools (and of what it was compiled from,
    /// when it can be read again): what a host does with a skill no human approved, which
    /// is not called until one does (the approval compiles it ahead). Default: nothing
    /// held.
    fn release_code(&self) {}

    /// Whether its code was compiled, taken from a compiled cache, or is not compiled
    /// yet; `None` for code that is not compiled (a server skill). Default: `None`.
    fn cache_outcome(&self) -> Option<CacheOutcome> {
        None
    }
}

/// Where a skill's compiled code came from ([`Skill::cache_outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the compiled cache.
    Hit,
    /// Compiled now (and stored when a cache directory is configured).
    Compiled,
    /// Compiled now with a baseline compiler (quick to compile, slower code), because no
    /// cache held it; the optimised code replaces it once compiled (and is cached for
    /// later loads).
    Baseline,
    /// Not compiled yet: nothing needed the code so far (its tools were read from its
    /// interface or from the listing an earlier load kept). The first call compiles it,
    /// or takes it from the compiled cache.
    Deferred,
}

/// One progress report from a running call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Units done.
    pub done: u64,
    /// Units in all, when known.
    pub total: Option<u64>,
    /// What is happening.
    pub message: Option<String>,
}

/// Receives progress reports of a call.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

impl Progress {
    /// Least time between two reports [`guard`](Self::guard) passes on; a final report
    /// (`done ≥ total`) always goes.
    pub const INTERVAL: Duration = Duration::from_millis(20);
    /// Longest message passed on, in bytes; longer ones are cut at a character boundary.
    pub const MAX_MESSAGE: usize = 1024;

    /// Wrap a caller's `sink` so that no skill can flood it: a report that does not move
    /// forward is dropped (MCP progress only ever increases, and a transport may deliver
    /// notifications out of order), at most one report per [`INTERVAL`](Self::INTERVAL)
    /// passes, except the final one, and messages are cut to
    /// [`MAX_MESSAGE`](Self::MAX_MESSAGE) bytes. Every runtime wraps the sink of each
    /// call with it, so a guest reporting a million steps costs its caller at most 50
    /// notifications a second.
    pub fn guard(sink: ProgressSink) -> ProgressSink {
        struct Seen {
            next: u64,
            at: Option<std::time::Instant>,
        }
        let seen = parking_lot::Mutex::new(Seen { next: 0, at: None });
        Arc::new(move |mut progress: Progress| {
            let mut seen = seen.lock();
            if progress.done < seen.next {
                return;
            }
            let now = std::time::Instant::now();
            let last = progress.total.is_some_and(|total| progress.done >= total);
            if !last && seen.at.is_some_and(|at| now.duration_since(at) < Self::INTERVAL) {
                return;
            }
            seen.next = progress.done.saturating_add(1);
            seen.at = Some(now);
            if let Some(message) = &mut progress.message
                && message.len() > Self::MAX_MESSAGE
            {
                let mut cut = Self::MAX_MESSAGE;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
            }
            sink(progress);
        })
    }
}

/// Everything a call carries besides its input.
#[derive(Clone, Default)]
pub struct CallContext {
    /// A deadline shorter than the skill's own limit; never lengthens it.
    pub timeout: Option<Duration>,
    /// Cancelled by the caller to stop the call.
    pub cancel: CancellationToken,
    /// Where progress goes; `None` drops it.
    pub progress: Option<ProgressSink>,
    /// Who called, for the log and audit (`cli`, an MCP session id).
    pub caller: String,
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("timeout", &self.timeout)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("progress", &self.progress.is_some())
            .field("caller", &self.caller)
            .finish()
    }
}

/// What a successful call returned.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The output, parsed: what the output schema is checked against and what a caller
    /// that wants JSON reads.
    pub value: Value,
    /// The MCP content blocks a server skill's server answered with, exactly as it sent
    /// them (text, images, audio, resources), so that an MCP front passes them on
    /// verbatim, followed by one text block of the host's when its egress proxy refused
    /// a request during the call (`(host refused: …)`, naming the rule to add); `None`
    /// for a wasm skill, whose output is `value` alone. Within the output cap, like
    /// `value`.
    pub content: Option<Vec<Value>>,
    /// Size of the output text, in bytes.
    pub bytes: usize,
    /// Wall-clock time of the call.
    pub elapsed: Duration,
}

/// Why a skill could not be loaded. Each displays as one line naming the file and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The manifest asks for what the host does not allow.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// The file is not a WebAssembly component.
    #[error("{}: not a valid WebAssembly component ({reason}); rebuild it with `skillhost build`", path.display())]
    NotAComponent {
        /// The file.
        path: PathBuf,
        /// What the parser or compiler said.
        reason: String,
    },
    /// The component does not implement the skill world.
    #[error("{}: not a skillhost skill: {reason}; build it against skillhost-sdk (world `skillhost:skill/skill@0.1.0`)", path.display())]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// What is missing or mismatched.
        reason: String,
    },
    /// The component imports `wasi:http` but the manifest asks for no network.
    #[error("{}: the component imports wasi:http, {}", path.display(), match manifest {
        ManifestHint::None => "and it has no skill.toml (none embedded, none beside it), so it asks for no network; put it in a folder as NAME/skill.wasm beside a skill.toml with `[network] allow = [\"https://HOST\"]`, or build it with `skillhost build`, which embeds one",
        ManifestHint::NoHosts => "but its skill.toml allows no network host (no `[network]` section, or one whose `allow` is empty); add `[network] allow = [\"https://HOST\"]` for the hosts it needs",
    })]
    NeedsNetwork {
        /// The component.
        path: PathBuf,
        /// Whether it has a skill.toml at all.
        manifest: ManifestHint,
    },
    /// The load stopped before it finished: the host is shutting down, or the task
    /// loading it failed.
    #[error("skill `{skill}`: its load did not finish: {reason}")]
    Interrupted {
        /// The skill.
        skill: SkillName,
        /// Why.
        reason: String,
    },
    /// A `.wasm` file without an embedded manifest.
    #[error("{}: no embedded skill.toml; build it with `skillhost build` (which embeds one), or put a skill.toml beside it in its folder (`NAME/skill.wasm` and `NAME/skill.toml`)", path.display())]
    NoManifest {
        /// The file.
        path: PathBuf,
    },
    /// A skill folder whose component has not been built.
    #[error("{}: no skill.wasm; build it with `skillhost build {}`", dir.display(), dir.display())]
    NotBuilt {
        /// The skill's folder.
        dir: PathBuf,
    },
    /// The skill reported invalid tools.
    #[error("skill `{skill}` reports an invalid tool: {reason}; fix the tool definition and rebuild")]
    Tools {
        /// The skill.
        skill: SkillName,
        /// What is wrong.
        reason: String,
    },
    /// This host has no runtime for the skill's kind of code (no sandbox for a server
    /// skill), or that runtime could not start: the host's setup, not the skill, is at
    /// fault.
    #[error("skill `{skill}` could not be loaded: {reason}")]
    NoRuntime {
        /// The skill.
        skill: SkillName,
        /// Why, and what to install or set up.
        reason: String,
    },
    /// The runtime failed to prepare the skill.
    #[error("skill `{skill}` could not be loaded: {reason}")]
    Runtime {
        /// The skill.
        skill: SkillName,
        /// What failed.
        reason: String,
    },
}

/// Why a call produced no output: the skill, the tool, and what went wrong. Displays as
/// one line naming the skill, the tool and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.line())]
pub struct CallError {
    /// The skill.
    pub skill: SkillName,
    /// The tool asked for.
    pub tool: String,
    /// What went wrong.
    pub failure: CallFailure,
}

/// What went wrong in a call ([`CallError::failure`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallFailure {
    /// The input does not fit the tool.
    InvalidInput {
        /// What is wrong with the input.
        message: String,
    },
    /// The tool ran and failed.
    Failed {
        /// What failed.
        message: String,
    },
    /// The tool was refused something it needed.
    Denied {
        /// What was refused.
        message: String,
    },
    /// No such tool.
    UnknownTool {
        /// The tools it has.
        available: Vec<String>,
    },
    /// The call ran out of time: the skill's `[limits] timeout`, or a shorter deadline
    /// its caller set ([`CallContext::timeout`]).
    Timeout {
        /// The limit that was hit.
        limit: Duration,
        /// `Some(the skill's own limit)` when the deadline that ran out was the caller's,
        /// shorter than the skill's; `None` when it was the skill's own.
        skill_limit: Option<Duration>,
    },
    /// The call tried to use more memory than allowed.
    MemoryLimit {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The output is larger than allowed.
    OutputLimit {
        /// The output's size, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The output is not JSON, or not of the tool's declared output schema.
    BadOutput {
        /// What the parser or the schema check said.
        message: String,
    },
    /// The guest trapped (panicked, hit `unreachable`, ...).
    Crashed {
        /// The trap and its backtrace summary.
        message: String,
    },
    /// The caller cancelled the call.
    Cancelled,
    /// The host could not run the call.
    Host {
        /// What failed.
        message: String,
    },
}

fn timeout_fix(skill_limit: Option<Duration>) -> String {
    match skill_limit {
        Some(own) => format!(
            "the deadline its caller set ran out, not the skill's own limit of {own}; a longer \
             deadline (up to {own}) gives the tool more time",
            own = fmt_duration(own)
        ),
        None => "raise `[limits] timeout` in its skill.toml if the tool needs longer".to_owned(),
    }
}

impl CallError {
    /// `failure` of `tool` of `skill`.
    pub fn new(skill: SkillName, tool: impl Into<String>, failure: CallFailure) -> Self {
        Self { skill, tool: tool.into(), failure }
    }

    /// The call ran out of `limit`, the deadline it ran under, for a skill whose own
    /// `[limits] timeout` is `own`: the caller's deadline when it is the shorter.
    pub fn timeout(skill: SkillName, tool: impl Into<String>, limit: Duration, own: Duration) -> Self {
        Self::new(skill, tool, CallFailure::Timeout { limit, skill_limit: (limit < own).then_some(own) })
    }

    /// The one line it displays as.
    fn line(&self) -> String {
        let (skill, tool) = (&self.skill, &self.tool);
        match &self.failure {
            CallFailure::InvalidInput { message } => format!("skill `{skill}` tool `{tool}`: invalid input: {message}"),
            CallFailure::Failed { message } => format!("skill `{skill}` tool `{tool}` failed: {message}"),
            CallFailure::Denied { message } => format!(
                "skill `{skill}` tool `{tool}` was denied: {message}; to allow it, add the capability to the skill's skill.toml and approve the skill again"
            ),
            CallFailure::UnknownTool { available } => {
                format!("skill `{skill}` has no tool `{tool}`; its tools are: {}", available.join(", "))
            }
            CallFailure::Timeout { limit, skill_limit } => {
                format!("skill `{skill}` tool `{tool}`: timeout after {}; {}", fmt_duration(*limit), timeout_fix(*skill_limit))
            }
            CallFailure::MemoryLimit { limit } => format!(
                "skill `{skill}` tool `{tool}`: memory limit {} exceeded; raise `[limits] memory` in its skill.toml if the tool needs more",
                ByteSize(*limit)
            ),
            CallFailure::OutputLimit { size, limit } => format!(
                "skill `{skill}` tool `{tool}`: output of {} exceeds the output limit of {}; raise `[limits] output` in its skill.toml or ask for less",
                ByteSize(*size),
                ByteSize(*limit)
            ),
            CallFailure::BadOutput { message } => format!(
                "skill `{skill}` tool `{tool}` returned output that breaks its contract: {message}; this is a bug in the skill, report it to its author"
            ),
            CallFailure::Crashed { message } => format!("skill `{skill}` tool `{tool}` crashed: {message}"),
            CallFailure::Cancelled => format!("skill `{skill}` tool `{tool}`: cancelled by the caller"),
            CallFailure::Host { message } => format!("skill `{skill}` tool `{tool}`: host error: {message}"),
        }
    }

    /// Whether the tool itself reported the failure (as opposed to a limit or the host).
    pub fn is_tool_error(&self) -> bool {
        use CallFailure::*;
        matches!(self.failure, InvalidInput { .. } | Failed { .. } | Denied { .. } | UnknownTool { .. })
    }

    /// Whether a hard limit stopped the call.
    pub fn is_limit(&self) -> bool {
        matches!(self.failure, CallFailure::Timeout { .. } | CallFailure::MemoryLimit { .. } | CallFailure::OutputLimit { .. })
    }

    /// A stable, machine-readable name for the kind of error (`timeout`, `denied`, ...).
    pub fn code(&self) -> &'static str {
        match self.failure {
            CallFailure::InvalidInput { .. } => "invalid_input",
            CallFailure::Failed { .. } => "failed",
            CallFailure::Denied { .. } => "denied",
            CallFailure::UnknownTool { .. } => "unknown_tool",
            CallFailure::Timeout { .. } => "timeout",
            CallFailure::MemoryLimit { .. } => "memory_limit",
            CallFailure::OutputLimit { .. } => "output_limit",
            CallFailure::BadOutput { .. } => "bad_output",
            CallFailure::Crashed { .. } => "crashed",
            CallFailure::Cancelled => "cancelled",
            CallFailure::Host { .. } => "host",
        }
    }
}
