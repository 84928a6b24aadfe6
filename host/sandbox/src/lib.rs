//! skillhost's sandbox runtime: skills that are stdio MCP servers — a FastMCP
//! `server.py`, or any command speaking MCP on stdin/stdout — run in bubblewrap, behind
//! the same [`SkillRuntime`]/[`Skill`] seam as WebAssembly skills.
//!
//! - [`BwrapRuntime`] checks a `[server]` skill, writes its files (exactly the bytes the
//!   registry hashed) to a private directory, starts it once in the sandbox to read its
//!   tools (`tools/list`), and returns a [`BwrapSkill`].
//! - The jail (`skillhost-jail`): the bwrap argv of a server, built from the grant only
//!   (its [`Profile`]), with `prlimit` setting the resource limits before `bwrap` starts,
//!   and the isolation layers under bwrap (uid drop when the host is root, a cgroup per
//!   server, a seccomp filter), detected once by [`BwrapRuntime::new`] (the verdict of
//!   bwrap probes that all passed kept in the work dir for the rest of the boot, see
//!   [`KEPT_PROBES`]), which warns about each one this machine lacks;
//!   [`BwrapRuntime::isolation`] lists them.
//! - `skill`: the lifecycle (start at the first call, idle stop, restart with backoff, kill at
//!   the deadline and on drop) and the call path (deadline, cancellation, output cap).
//! - `server`: the process and the rmcp client over its stdio; progress notifications go
//!   to [`CallContext::progress`](skillhost_core::CallContext).
//! - [`python`]: the managed venv and its setup; [`node_fetch`]: the undici and preload
//!   that make node's `fetch` use the egress proxy; [`check`]: `skillhost test`.
//!
//! **The run that lists tools at load holds a probe grant** ([`Grant::probe`]): an empty
//! scratch dir instead of its data dirs, no network, no secrets; the skill may not be
//! approved yet. Servers started for calls hold the whole grant, with every data dir opened
//! without following links and handed to bwrap as a descriptor.

pub mod check;
mod error;
pub mod node_fetch;
pub mod python;
pub mod run;
mod server;
mod skill;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillhost_core::run::PackageSources;
use skillhost_core::{
    Annotations, Grant, LoadError, NoSecrets, SecretSource, Skill, SkillCode, SkillName, SkillRuntime, SkillSource, ToolSpec,
};
use skillhost_egress::{EgressProxy, NetConfig, ProxyCalls, ProxyConfig, SkillEgress};

pub use error::{CommandError, StartError};
pub use node_fetch::NodeFetchUnavailable;
pub use python::Venv;
pub use skill::BwrapSkill;
pub use skillhost_egress::shim;

use skillhost_jail::isolation::{self, CgroupLimits};
use skillhost_jail::profile::{self, Bind, NetSetup, Profile, ResourceLimits, SKILL_DIR};
use skillhost_jail::{Jail, JailError, Programs};

use crate::server::{Server, Spawn};

/// How the sandbox runtime is set up.
#[derive(Clone)]
pub struct BwrapConfig {
    /// The managed venv (`python` in `[server] command`). Default: none, so Python skills
    /// fail to load with an error naming `skillhost setup python`.
    pub venv: Option<PathBuf>,
    /// Where skills' files are written and servers' private runtime dirs are made.
    /// Required; the facade uses `<data_dir>/sandbox`.
    pub work_dir: PathBuf,
    /// `bwrap`. Default: found on `PATH`.
    pub bwrap: Option<PathBuf>,
    /// `prlimit` (util-linux). Default: found on `PATH`.
    pub prlimit: Option<PathBuf>,
    /// The egress shim as a command line (`["/usr/bin/skillhost", "__shim"]`, see
    /// [`skillhost_egress::shim`]): the first process of a networked sandbox, bound into
    /// it read-only. Default: none, and a networked skill's calls fail saying so.
    pub shim: Option<Vec<OsString>>,
    /// A run's init as a command line (`["/usr/bin/skillhost", "__run"]`, see
    /// [`run::init`]): the program a run of a skill's scripts starts in the jail, bound
    /// into it read-only. Default: none, and runs fail saying so.
    pub init: Option<Vec<OsString>>,
    /// Where the packages skills' scripts declare come from: the Python index (or a
    /// directory of wheels) and the npm registry (or an npm cache, offline). uv and npm
    /// are handed these and nothing else: they run in a private empty directory, with
    /// their configuration files off and a cleared environment, so no `uv.toml`,
    /// `.npmrc` or `UV_*`/`npm_config_*` variable of wherever the host was started
    /// chooses an index. Shown in every approval request of a skill with packages.
    /// Default: [`PackageSources::default`] (PyPI and registry.npmjs.org).
    pub packages: PackageSources,
    /// The directory `skillhost setup` installs [`node_fetch`] into: a networked sandbox
    /// binds it and starts node with its preload, so node's `fetch` goes through the
    /// egress proxy. Used only when it holds what this binary expects
    /// ([`node_fetch::installed`]) and the sandbox's uid reaches it; otherwise a Node
    /// script's fetch reaches nothing ([`BwrapRuntime::node_fetch`] says why). Default:
    /// none (the facade names `<toolchains>/node-fetch`).
    pub node_fetch: Option<PathBuf>,
    /// How networked skills reach the network: the egress proxy each of their servers
    /// gets applies these (resolver, audit sink, timeouts, caps). Default:
    /// [`NetConfig::default`] (system resolver, no audit).
    pub net: Arc<NetConfig>,
    /// Stop a server after this long without calls, unless its skill.toml says otherwise.
    /// Default: 5 minutes.
    pub idle_timeout: Duration,
    /// Longest wait for a server's MCP handshake. Default: 30 s.
    pub start_timeout: Duration,
    /// Longest a listing of a server's tools (under the probe grant: code no human may
    /// have approved) may take as a whole: start, handshake and every page of
    /// `tools/list`; at it the sandbox is killed and the skill listed with the error. It
    /// is not the skill's own `[limits] timeout`, which is for calls. Default:
    /// [`PROBE_TIMEOUT`](skillhost_core::PROBE_TIMEOUT), 10 s.
    pub listing_timeout: Duration,
    /// Memory of a server when the skill's `[limits] memory` is not set (Python with its
    /// libraries needs more than a component's default): resident memory of the whole
    /// sandbox where a cgroup limits it, else address space of each process. Default:
    /// 512 MiB.
    pub default_memory: u64,
    /// Processes and threads of one sandbox (its cgroup's `pids.max`), and `RLIMIT_NPROC`
    /// of the sandbox's uid. Default: 256.
    pub max_processes: u64,
    /// CPU bandwidth of one sandbox in cores (its cgroup's CPU quota). Default: 1.0.
    pub cpus: f64,
    /// The uid and gid sandboxes run as when the host is root (through `setpriv`):
    /// every path a sandbox binds must be reachable by it. Default: 65534 (nobody).
    pub sandbox_id: (u32, u32),
    /// `RLIMIT_CPU` of each process, seconds over its life. Default: 600.
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE`. Default: 256 MiB.
    pub max_file_size: u64,
    /// Values of the secrets skills declare in `[[server.secrets]]`. Default: none.
    pub secrets: Arc<dyn SecretSource>,
    /// Isolation layers ([`OPTIONAL_LAYERS`](skillhost_jail::isolation::OPTIONAL_LAYERS):
    /// `uid drop`, `cgroup`, `seccomp`) server skills may start without when this machine
    /// lacks them. A layer the host expects
    /// ([`expected`](skillhost_jail::isolation::expected)) and lacks stops every server skill from loading
    /// unless it is named here; a named layer is shown with each skill it weakens
    /// ([`SkillRuntime::weakened`]). Default: none.
    pub allow_weaker: Vec<String>,
}

impl BwrapConfig {
    /// A configuration writing into `work_dir`, with the defaults above.
    pub fn new(work_dir: impl Into<PathBuf>) -> Self {
        Self {
            venv: None,
            work_dir: work_dir.into(),
            bwrap: None,
            prlimit: None,
            shim: None,
            init: None,
            packages: PackageSources::default(),
            node_fetch: None,
            net: Arc::new(NetConfig::default()),
            idle_timeout: Duration::from_secs(300),
            start_timeout: Duration::from_secs(30),
            listing_timeout: skillhost_core::PROBE_TIMEOUT,
            default_memory: 512 << 20,
            max_processes: 256,
            cpus: 1.0,
            sandbox_id: (isolation::DEFAULT_SANDBOX_ID, isolation::DEFAULT_SANDBOX_ID),
            cpu_seconds: 600,
            max_file_size: 256 << 20,
            secrets: Arc::new(NoSecrets),
            allow_weaker: Vec::new(),
        }
    }
}

impl std::fmt::Debug for BwrapConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BwrapConfig")
            .field("venv", &self.venv)
            .field("work_dir", &self.work_dir)
            .field("shim", &self.shim)
            .field("init", &self.init)
            .field("node_fetch", &self.node_fetch)
            .field("idle_timeout", &self.idle_timeout)
            .field("allow_weaker", &self.allow_weaker)
            .field("packages", &self.packages)
            .finish_non_exhaustive()
    }
}

/// Why the sandbox runtime cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A program it needs is missing ([`JailError::Missing`]), or the opt-out list names
    /// a layer that does not exist ([`JailError::UnknownLayer`]).
    #[error("cannot start the sandbox runtime: {0}")]
    Jail(#[from] JailError),
    /// The work directory cannot be used.
    #[error("cannot start the sandbox runtime: {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

pub(crate) struct Runtime {
    config: BwrapConfig,
    venv: Option<Venv>,
    venv_error: Option<String>,
    /// [`BwrapConfig::node_fetch`] when networked sandboxes use it, or why not.
    node_fetch: Result<PathBuf, NodeFetchUnavailable>,
    /// bwrap, prlimit and the isolation layers every server gets.
    jail: Jail,
    /// Server processes started so far (tool listings and calls).
    started: std::sync::atomic::AtomicU64,
}

/// Runs `[server]` skills in bubblewrap.
#[derive(Clone)]
pub struct BwrapRuntime {
    inner: Arc<Runtime>,
}

impl Runtime {
    /// The jail that runs `program` with `args` under `profile` for `grant`'s skill: its
    /// cgroup with the skill's memory and this runtime's processes and CPU.
    pub(crate) fn command(
        &self,
        profile: &Profile,
        grant: &Grant,
        program: &std::ffi::OsStr,
        args: &[OsString],
    ) -> Result<skillhost_jail::Jailed, JailError> {
        let config = &self.config;
        let limits = CgroupLimits { memory: grant.limits.memory, pids: config.max_processes, cpus: config.cpus };
        self.jail.command(profile, grant.skill.as_str(), &limits, program, args)
    }
}

impl BwrapRuntime {
    /// Check that bwrap and prlimit exist, open the venv (a missing venv only fails
    /// Python skills) and create the work directory.
    pub fn new(mut config: BwrapConfig) -> Result<Self, SandboxError> {
        let programs = Programs::find(config.bwrap.clone(), config.prlimit.clone())?;
        skillhost_jail::check_allow_weaker(&config.allow_weaker)?;
        let root = rustix::process::geteuid().is_root();
        for dir in [config.work_dir.clone(), config.work_dir.join("skills"), config.work_dir.join("run"), config.work_dir.join("envs")] {
            std::fs::create_dir_all(&dir).map_err(|source| SandboxError::Io { path: dir.clone(), source })?;
            if root {
                // The sandbox's uid must pass through (not list) the host's work dir.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
                    .map_err(|source| SandboxError::Io { path: dir.clone(), source })?;
            }
        }
        let (uid, gid) = config.sandbox_id;
        for program in [config.shim.as_mut(), config.init.as_mut()].into_iter().flatten().filter_map(|c| c.first_mut()) {
            if root && isolation::unreachable_parent(Path::new(program), uid, gid).is_some() {
                match reachable_program(Path::new(program), &config.work_dir.join("bin")) {
                    Ok(reachable) => *program = reachable.into_os_string(),
                    // The uid drop's detection below names the unreachable path.
                    Err(e) => {
                        tracing::warn!(program = %Path::new(program).display(), "cannot make the program reachable by the sandbox's uid: {e}")
                    }
                }
            }
        }
        let (venv, venv_error) = match &config.venv {
            None => (None, Some("this host has no managed Python venv".to_owned())),
            Some(dir) => match Venv::open(dir) {
                Ok(venv) => (Some(venv), None),
                Err(e) => (None, Some(e.to_string())),
            },
        };
        let node_fetch = node_fetch::usable(config.node_fetch.as_deref(), root.then_some(config.sandbox_id));
        // The probes' verdict is kept for the boot in the work dir: the next command of
        // this host (a `skillhost run`) spawns no probe.
        let kept = Some(config.work_dir.join(KEPT_PROBES));
        let jail = Jail::new(programs, config.sandbox_id, Self::reach(&config, venv.as_ref()), kept);
        Ok(Self { inner: Arc::new(Runtime { config, venv, venv_error, node_fetch, jail, started: Default::default() }) })
    }

    /// The host paths every sandbox of `config` binds, which the uid a root host drops to
    /// must reach.
    fn reach(config: &BwrapConfig, venv: Option<&Venv>) -> Vec<PathBuf> {
        let mut reach = vec![config.work_dir.join("skills"), config.work_dir.join("run")];
        if let Some(venv) = venv {
            reach.extend([venv.dir.clone(), venv.prefix.clone()]);
        }
        for program in [&config.shim, &config.init].into_iter().flatten().filter_map(|c| c.first()) {
            reach.push(PathBuf::from(program));
        }
        reach
    }

    /// The isolation layers this runtime's sandboxes get (and those it lacks, with what
    /// to do).
    pub fn isolation(&self) -> &[skillhost_jail::Layer] {
        &self.inner.jail.isolation().layers
    }

    /// The isolation layers server skills run without by this host's configuration
    /// (`NAME (opted out in config)`), or why they do not start at all (an expected layer
    /// missing and not opted out; see [`isolation`]).
    pub fn sandbox_without(&self) -> Result<Vec<String>, skillhost_jail::LayersMissing> {
        self.inner.jail.weakened(&self.inner.config.allow_weaker)
    }

    /// The isolation layers the host's configuration lets a sandbox run without
    /// ([`BwrapConfig::allow_weaker`]), for other users of the same layers (the forge's
    /// builds).
    pub fn allow_weaker(&self) -> &[String] {
        &self.inner.config.allow_weaker
    }

    /// How many server processes this runtime started so far, to list tools or to serve
    /// calls (a load from a kept listing starts none).
    pub fn servers_started(&self) -> u64 {
        self.inner.started.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The directory node's fetch goes through the proxy with in networked sandboxes
    /// ([`BwrapConfig::node_fetch`]), or why there is none (with the fix).
    pub fn node_fetch(&self) -> Result<&Path, &NodeFetchUnavailable> {
        self.inner.node_fetch.as_deref()
    }

    /// The venv Python skills run with, if any.
    pub fn venv(&self) -> Option<&Venv> {
        self.inner.venv.as_ref()
    }

    /// Load `source` holding exactly `grant`; unlike [`SkillRuntime::load`] this returns
    /// the concrete type.
    pub async fn load_server(&self, source: &SkillSource, grant: Grant) -> Result<Arc<BwrapSkill>, LoadError> {
        self.load_inner(source, grant, None).await
    }

    /// Load `source` with the tools a `listing` (an earlier load's [`Skill::listing`])
    /// names or, without one, by asking its server in a probe run.
    async fn load_inner(
        &self,
        source: &SkillSource,
        grant: Grant,
        listing: Option<&serde_json::Value>,
    ) -> Result<Arc<BwrapSkill>, LoadError> {
        let (launch, grant) = self.prepare(source, grant)?;
        let name = grant.skill.clone();
        let raw = match listing {
            Some(serde_json::Value::Array(raw)) => raw.clone(),
            Some(_) => return Err(LoadError::Tools { skill: name, reason: "its kept listing is not a list of tools".into() }),
            None => self.list_tools(&launch, &grant).await?,
        };
        let (tools, wrapped) = tool_specs(&name, raw.clone())?;
        let inner = Arc::new(skill::Inner {
            envelope: skillhost_core::Envelope::with_tools(grant, tools)?,
            listed: raw,
            wrapped,
            launch,
            state: Default::default(),
            generation: Default::default(),
        });
        tracing::debug!(skill = %inner.grant().skill, tools = inner.envelope.tools().len(), kept = listing.is_some(), "loaded server skill");
        Ok(Arc::new(BwrapSkill { inner }))
    }

    /// The tools a server lists, as it sent them, from a run under a probe grant (the
    /// skill may not be approved yet): its `/data` an empty tmpfs inside the sandbox
    /// (nothing it writes reaches the host's disk), no network, no secrets. Spawn,
    /// handshake and every page of `tools/list` run under one deadline, the probe's; at
    /// the deadline, or once it answered, the sandbox is killed with its whole cgroup.
    /// Servers for calls start with the real grant.
    async fn list_tools(&self, launch: &Launch, grant: &Grant) -> Result<Vec<serde_json::Value>, LoadError> {
        let probe = grant.probe_in_memory();
        let deadline = self.inner.config.listing_timeout;
        let run = async {
            let discovery = launch.start(&probe, false, 0).await.map_err(|e| format!("its server did not start: {e}"))?;
            let listed = discovery.list_tools().await;
            discovery.kill().await;
            listed.map_err(|e| match e {
                server::RequestError::Closed(m) | server::RequestError::Protocol { message: m, .. } => format!("tools/list failed: {m}"),
                server::RequestError::Refused(m) => format!("tools/list refused: {m}"),
            })
        };
        // Dropping `run` at the deadline drops the server: bwrap and its cgroup are killed.
        let listed = tokio::time::timeout(deadline, run).await.unwrap_or_else(|_| {
            Err(format!(
                "it did not list its tools within {deadline:?}, the limit on code no human approved (start, MCP handshake and every page of tools/list); its sandbox was killed"
            ))
        });
        listed.map_err(|reason| LoadError::Runtime { skill: grant.skill.clone(), reason })
    }

    /// Check a `[server]` skill, write its files and say how to start it; the grant with
    /// the runtime's memory default applied.
    pub(crate) fn prepare(&self, source: &SkillSource, mut grant: Grant) -> Result<(Launch, Grant), LoadError> {
        let name = grant.skill.clone();
        let fail = |reason: String| LoadError::Runtime { skill: name.clone(), reason };
        let (SkillCode::Server { files, .. }, Some(server)) = (&source.code, &source.manifest.server) else {
            return Err(fail("not a `[server]` skill".into()));
        };
        let config = &self.inner.config;
        self.sandbox_without().map_err(|e| fail(e.to_string()))?;
        if source.manifest.limits.memory.is_none() {
            grant.limits.memory = config.default_memory;
        }
        let (command, _needs_python) = self.resolve(&server.command, files).map_err(|e| fail(e.to_string()))?;
        let executable = Path::new(&command).strip_prefix(SKILL_DIR).ok().map(Path::to_owned);
        let skill_dir = materialise(&config.work_dir.join("skills"), &name, files, &|path| executable.as_deref() == Some(Path::new(path)))
            .map_err(|e| fail(format!("cannot write its files: {e}")))?;
        // Granted directories nested inside a writable one would make a mount point where
        // the skill can plant a link (see `profile`).
        profile::check_mounts(grant.dirs.iter().map(|d| (d.guest.as_str(), d.mode == skillhost_core::FileMode::ReadWrite)))
            .map_err(|e| fail(e.to_string()))?;
        // A granted directory that is (or lies behind) a link is a load error; it is
        // opened again, the same way, at every start.
        for dir in &grant.dirs {
            open_granted(&self.inner, dir, &name).map_err(|e| fail(e.to_string()))?;
        }
        let launch = Launch {
            runtime: self.inner.clone(),
            skill_dir,
            command,
            args: server.args.iter().map(OsString::from).collect(),
            idle_timeout: server.idle_timeout.unwrap_or(config.idle_timeout),
            start_timeout: config.start_timeout,
        };
        Ok((launch, grant))
    }

    /// The command as seen inside the sandbox, and whether it needs the venv.
    fn resolve(&self, command: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<(OsString, bool), CommandError> {
        let venv = || {
            self.inner.venv.as_ref().ok_or_else(|| CommandError::NoPython {
                command: command.to_owned(),
                why: self.inner.venv_error.clone().unwrap_or_else(|| "no venv".into()),
            })
        };
        if matches!(command, "python" | "python3") {
            return Ok((venv()?.python().into_os_string(), true));
        }
        if command.starts_with('/') {
            let visible = ["/usr/", "/bin/", "/lib/", SKILL_DIR].iter().any(|p| command.starts_with(p))
                || self.inner.venv.as_ref().is_some_and(|v| Path::new(command).starts_with(&v.dir));
            if !visible || (!command.starts_with(SKILL_DIR) && !Path::new(command).exists()) {
                return Err(CommandError::NotInSandbox { command: command.to_owned() });
            }
            return Ok((command.into(), Path::new(command).starts_with(venv().map(|v| v.dir.clone()).unwrap_or_default())));
        }
        if command.contains('/') {
            let relative = command.trim_start_matches("./");
            if !files.contains_key(relative) {
                return Err(CommandError::NotInSkill { command: command.to_owned(), relative: relative.to_owned() });
            }
            return Ok((format!("{SKILL_DIR}/{relative}").into(), false));
        }
        if let Ok(venv) = venv() {
            let candidate = venv.dir.join("bin").join(command);
            if candidate.is_file() {
                return Ok((candidate.into_os_string(), true));
            }
        }
        for dir in ["/usr/local/bin", "/usr/bin"] {
            let candidate = Path::new(dir).join(command);
            if candidate.is_file() {
                return Ok((candidate.into_os_string(), false));
            }
        }
        Err(CommandError::NotFound { command: command.to_owned() })
    }
}

#[async_trait::async_trait]
impl SkillRuntime for BwrapRuntime {
    fn kind(&self) -> &'static str {
        "bwrap"
    }

    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError> {
        Ok(self.load_server(source, grant).await?)
    }

    /// A server's tools depend on what its command runs: the program (and, for Python,
    /// the venv's packages) besides its own files.
    fn listing_stamp(&self, source: &SkillSource) -> Option<String> {
        let (SkillCode::Server { files, .. }, Some(server)) = (&source.code, &source.manifest.server) else { return None };
        let (command, needs_python) = self.resolve(&server.command, files).ok()?;
        let mut stamp = command.to_string_lossy().into_owned();
        if let Ok(meta) = std::fs::metadata(&command) {
            stamp.push_str(&format!(" {}@{:?}", meta.len(), meta.modified().ok()));
        }
        if let (true, Some(venv)) = (needs_python || server.command.contains('/'), &self.inner.venv) {
            stamp.push(' ');
            stamp.push_str(&venv.contents_stamp());
        }
        Some(stamp)
    }

    async fn load_listed(&self, source: &SkillSource, grant: Grant, listing: &serde_json::Value) -> Result<Arc<dyn Skill>, LoadError> {
        Ok(self.load_inner(source, grant, Some(listing)).await?)
    }

    /// The layers this host's configuration lets server skills run without.
    fn weakened(&self, code: &SkillCode) -> Vec<String> {
        match code {
            SkillCode::Server { .. } => self.sandbox_without().unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// A server skill's `test_server.py` and handshake ([`check`]).
    async fn own_tests(&self, source: &SkillSource, grant: Grant, limit: Duration) -> Option<skillhost_core::TestReport> {
        Some(self.test_skill(source, grant, limit).await)
    }

    /// A command of a skill's scripts, in a jail of its own ([`run`]).
    async fn run_script(
        &self,
        job: skillhost_core::ScriptJob,
        cx: skillhost_core::CallContext,
    ) -> Result<skillhost_core::RunOutput, skillhost_core::RunError> {
        self.run(job, cx).await
    }
}

/// How to start one skill's server.
pub(crate) struct Launch {
    runtime: Arc<Runtime>,
    skill_dir: PathBuf,
    command: OsString,
    args: Vec<OsString>,
    pub(crate) idle_timeout: Duration,
    pub(crate) start_timeout: Duration,
}

impl Launch {
    /// The profile of a sandbox for `grant` (see [`start`](Self::start) for `full`), its
    /// private runtime dir and what must live as long as the sandbox.
    pub(crate) fn profile(&self, grant: &Grant, full: bool) -> Result<(Profile, Guards), StartError> {
        self.profile_with_calls(grant, full).map(|(profile, guards, _)| (profile, guards))
    }

    /// [`profile`](Self::profile), and the calls register of its egress proxy when it has one.
    pub(crate) fn profile_with_calls(&self, grant: &Grant, full: bool) -> Result<(Profile, Guards, Option<ProxyCalls>), StartError> {
        let runtime = &self.runtime;
        let config = &runtime.config;
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| StartError::Io { what, source }
        };
        let run_dir = tempfile::Builder::new()
            .prefix(&format!("{}-", grant.skill))
            .tempdir_in(config.work_dir.join("run"))
            .map_err(io("cannot create its runtime dir"))?;
        let user = runtime.jail.user();
        if user.is_some() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(run_dir.path(), std::fs::Permissions::from_mode(0o711))
                .map_err(io("cannot open its runtime dir to the sandbox's uid"))?;
        }
        let etc_dir = run_dir.path().join("etc");
        profile::write_etc(&etc_dir).map_err(io("cannot write its /etc"))?;
        // A secret the proxy adds to requests (`[[secrets]]`, terminating TLS with the
        // host's egress CA) never enters the sandbox: a variable naming it too holds a
        // placeholder, so code that checks for the variable still runs. So it is without
        // an egress CA too (the proxy then refuses `CONNECT` to its hosts, saying why):
        // what the approval showed holds either way.
        let proxied = |name: &str| grant.secrets.iter().any(|s| s.name == name);
        let mut env = Vec::new();
        if full {
            for secret in &grant.env_secrets {
                let value = config.secrets.secret(&secret.name).ok_or_else(|| StartError::SecretNotSet(secret.name.clone()))?;
                let value = if proxied(&secret.name) { format!("{SECRET_PLACEHOLDER}{}", secret.name) } else { value };
                env.push((secret.env.clone(), value));
            }
        }
        let mut guards: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        let mut net = None;
        let mut calls = None;
        if full && !grant.network.is_empty() {
            let shim = config.shim.as_ref().and_then(|s| s.split_first()).ok_or(StartError::NoShim)?;
            let socket = run_dir.path().join("egress.sock");
            let egress = SkillEgress::new(grant.skill.clone(), Arc::new(grant.network.clone()), config.net.clone());
            // What the sandbox trusts: the system's bundle, and the host's egress CA when
            // the proxy terminates TLS for the secrets its grant binds.
            let bundle = match &config.net.ca {
                Some(ca) if !grant.secrets.is_empty() => Some(
                    ca.authority()
                        .map_err(|e| StartError::Io { what: "cannot use the host's egress CA".into(), source: std::io::Error::other(e) })?
                        .bundle(),
                ),
                _ => skillhost_egress::ca::system_bundle(),
            };
            let ca_bundle = match bundle {
                Some(bundle) => {
                    let path = etc_dir.join("ca-bundle.pem");
                    std::fs::write(&path, bundle).map_err(io("cannot write its CA bundle"))?;
                    Some(path)
                }
                None => None,
            };
            // The secrets the proxy adds (a server's `[[secrets]]`, a run's policy's).
            let proxy_config = ProxyConfig { secrets: grant.secrets.clone(), ..ProxyConfig::default() };
            let proxy = EgressProxy::bind(&socket, egress, proxy_config).map_err(StartError::Proxy)?;
            if let Some(user) = user {
                // Connecting needs write permission on the socket.
                rustix::fs::chownat(
                    rustix::fs::CWD,
                    &socket,
                    Some(rustix::fs::Uid::from_raw(user.uid)),
                    Some(rustix::fs::Gid::from_raw(user.gid)),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| StartError::Io { what: format!("cannot give its egress socket to uid {}", user.uid), source: e.into() })?;
            }
            calls = Some(proxy.calls());
            guards.push(Box::new(proxy));
            net = Some(NetSetup {
                socket,
                shim: PathBuf::from(shim.0),
                shim_args: shim.1.to_vec(),
                port: skillhost_egress::shim::DEFAULT_PORT,
                ca_bundle,
                node_fetch: runtime.node_fetch.as_ref().ok().cloned(),
            });
        }
        // The probe runs write only to memory: an empty tmpfs at /data, capped.
        let scratch = (!full).then_some(PROBE_SCRATCH_BYTES.min(grant.limits.memory));
        let profile = Profile {
            scratch,
            python: runtime.venv.as_ref().map(|v| (v.dir.clone(), v.prefix.clone())),
            skill_dir: self.skill_dir.clone(),
            dirs: grant.dirs.iter().map(|d| open_granted(runtime, d, &grant.skill)).collect::<Result<_, _>>()?,
            etc_dir,
            env,
            limits: ResourceLimits {
                address_space: grant.limits.memory,
                processes: config.max_processes,
                cpu_seconds: config.cpu_seconds,
                file_size: config.max_file_size,
                open_files: 1024,
            },
            net,
            workspace: None,
            init: None,
            node_modules: None,
        };
        guards.push(Box::new(run_dir));
        Ok((profile, guards, calls))
    }

    /// Start a server. `full`: with the skill's secrets and network (a call's server);
    /// otherwise with neither (the load-time run that lists tools).
    pub(crate) async fn start(&self, grant: &Grant, full: bool, generation: u64) -> Result<Arc<Server>, StartError> {
        let config = &self.runtime.config;
        self.runtime.started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (profile, guards, calls) = self.profile_with_calls(grant, full)?;
        let jailed = self.runtime.command(&profile, grant, &self.command, &self.args)?;
        let (command, confinement) = (jailed.command, jailed.confinement);
        Server::start(Spawn {
            skill: grant.skill.clone(),
            command,
            max_line: (grant.limits.output as usize).saturating_mul(2).saturating_add(1 << 20),
            log_cap: grant.limits.log.saturating_mul(16),
            start_timeout: config.start_timeout,
            generation,
            confinement,
            calls,
            // The proxy (removing its socket) goes before the directory.
            guards,
        })
        .await
    }
}

/// The file in the work dir holding the verdict of the isolation probes that all passed
/// on this boot (`skillhost_jail::isolation::Probe::kept`): a later start of the same host
/// spawns no probe while the boot, the programs and the system are the same.
pub const KEPT_PROBES: &str = "isolation-probes";

/// The size of the tmpfs at `/data` a probe run (code no human approved) writes to: it
/// lives in the sandbox's mount namespace, dies with it, and its pages count against the
/// sandbox's memory cgroup besides.
pub const PROBE_SCRATCH_BYTES: u64 = 32 << 20;

/// What a server's variable for a secret the proxy adds holds instead of its value
/// (followed by the secret's name).
pub const SECRET_PLACEHOLDER: &str = "skillhost-proxy-adds-";

/// What must live as long as a sandbox (its runtime dir, its egress proxy).
type Guards = Vec<Box<dyn std::any::Any + Send + Sync>>;

/// Open a granted directory for a sandbox (see [`DirGrant::open`]: no link followed, at
/// load and at every start). When sandboxes run as an unprivileged uid, directories it
/// creates are searchable by others (0711) and the granted directory itself is handed to
/// that uid through its descriptor (never a path a skill could have replaced), so the
/// sandbox can use it; a read-only grant stays read-only through its bind.
fn open_granted(runtime: &Runtime, dir: &skillhost_core::DirGrant, skill: &SkillName) -> Result<Bind, StartError> {
    let user = runtime.jail.user();
    let fd = dir.open(skill, user.is_some())?;
    // A skill's data dir is handed to the sandbox's uid; a host directory a human granted
    // (opened from `/`) stays its owner's, reached with the permissions it has.
    let own_data = dir.root != Path::new("/");
    if let Some(user) = user.filter(|_| own_data) {
        user.give(&fd).map_err(|e| StartError::GiveDir { dir: dir.host.clone(), uid: user.uid, source: e.into() })?;
        if let Some(parent) = isolation::unreachable_parent(&dir.host, user.uid, user.gid) {
            return Err(StartError::Unreachable { dir: dir.host.clone(), uid: user.uid, parent });
        }
    }
    Ok(Bind { fd: Arc::new(fd), guest: dir.guest.clone(), mode: dir.mode })
}

/// A program bound into sandboxes (the egress shim, a run's init) where the sandbox's
/// unprivileged uid can reach it: a hard link (a copy across file systems) in `dir`, made
/// once per build of the program (its inode, size and modification time), the links to
/// earlier builds removed. A root host's binary often lives where that uid cannot go
/// (root's private `~/.cargo/bin`).
fn reachable_program(program: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(program)?;
    let stem = program.file_name().map_or_else(|| "program".into(), |n| n.to_string_lossy().into_owned());
    let name = format!("{stem}@{}-{}-{}.{}", meta.ino(), meta.size(), meta.mtime(), meta.mtime_nsec());
    let target = dir.join(&name);
    if target.is_file() {
        return Ok(target);
    }
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&format!("{stem}@")) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let staging = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    if std::fs::hard_link(program, &staging).is_err() {
        // A copy keeps the mode (0755 for an installed binary).
        std::fs::copy(program, &staging)?;
    }
    std::fs::rename(&staging, &target)?;
    Ok(target)
}

/// Write a skill's files to `<root>/<name>-<hash>/` (once per content), read-only, those
/// `executable` names executable. Returns the directory.
pub(crate) fn materialise(
    root: &Path,
    name: &SkillName,
    files: &BTreeMap<String, Vec<u8>>,
    executable: &dyn Fn(&str) -> bool,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // The skill's content hash, as the registry computes it.
    let hash = skillhost_package::folder_hash(files.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice())));
    let dir = root.join(format!("{name}-{}", &hash[..16]));
    if dir.is_dir() {
        return Ok(dir);
    }
    let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(root)?;
    for (relative, bytes) in files {
        let file = staging.path().join(relative);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, bytes)?;
        let mode = if executable(relative) { 0o555 } else { 0o444 };
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
    }
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))?;
    let staged = staging.keep();
    match std::fs::rename(&staged, &dir) {
        Ok(()) => Ok(dir),
        // Another load of the same content won the race.
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&staged);
            Ok(dir)
        }
        Err(e) => Err(e),
    }
}

/// Check each tool a server reported (how many and that no name comes twice is the
/// envelope's check, [`skillhost_core::Envelope::set_tools`]); also returns those whose
/// output FastMCP wrapped.
fn tool_specs(skill: &SkillName, raw: Vec<serde_json::Value>) -> Result<(Vec<ToolSpec>, Vec<String>), LoadError> {
    let bad = |reason: String| LoadError::Tools { skill: skill.clone(), reason };
    let mut tools = Vec::with_capacity(raw.len());
    let mut wrapped = Vec::new();
    for tool in raw {
        let name = tool["name"].as_str().unwrap_or_default().to_owned();
        let hints = &tool["annotations"];
        // Hints are only taken when stated: MCP's defaults (destructive unless said
        // otherwise) would make every tool without annotations need explicit approval.
        let annotations = Annotations {
            read_only: hints["readOnlyHint"] == true,
            destructive: hints["destructiveHint"] == true,
            idempotent: hints["idempotentHint"] == true,
            open_world: hints["openWorldHint"] == true,
        };
        let output = tool.get("outputSchema").filter(|s| !s.is_null());
        if output.is_some_and(|s| s["x-fastmcp-wrap-result"] == true) {
            wrapped.push(name.clone());
        }
        let description = tool["description"].as_str().or(tool["title"].as_str()).unwrap_or_default().to_owned();
        let input = tool.get("inputSchema").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let output = output.map(|s| {
            if s["x-fastmcp-wrap-result"] != true {
                return s.to_string();
            }
            // The `result` property alone, with the definitions its `$ref`s point to.
            let mut unwrapped = s["properties"]["result"].clone();
            if let Some(inner) = unwrapped.as_object_mut() {
                for key in ["$defs", "definitions"] {
                    if let Some(defs) = s.get(key) {
                        inner.entry(key).or_insert_with(|| defs.clone());
                    }
                }
            }
            unwrapped.to_string()
        });
        tools.push(
            ToolSpec::from_parts(name, description, &input.to_string(), output.as_deref(), annotations, &[])
                .map_err(|e| bad(e.to_string()))?,
        );
    }
    Ok((tools, wrapped))
}
