//! skillhost's jail: the one way the host runs a process of code it does not trust on the
//! host itself, in bubblewrap, with rlimits and the isolation layers under it.
//!
//! It owns:
//! - [`profile`]: the `prlimit … -- [setpriv …] bwrap … -- COMMAND` argv of one jail,
//!   built from a [`Profile`] and nothing else (namespaces, a read-only root, `/usr`, the
//!   files at [`SKILL_DIR`](profile::SKILL_DIR), directories bound by descriptor, a minimal
//!   `/etc`, the egress socket and shim of a networked jail, rlimits), and the refusal of
//!   a mount point beneath a writable bind ([`profile::check_mounts`]).
//! - [`isolation`]: the layers under bwrap (the uid drop of a root host, a cgroup per
//!   jail, a seccomp filter), detected once, and the fail-closed rule: a layer the host
//!   expects and lacks stops every jail unless the host's configuration names it in its
//!   `allow_weaker` list ([`Jail::weakened`]).
//! - [`Jail`]: `bwrap` and `prlimit` found once and the layers detected once for one user
//!   of the jail; [`Jail::command`] turns a [`Profile`] and a command into a ready
//!   [`tokio::process::Command`] with its [`Confinement`] (the cgroup, killed and removed
//!   when dropped).
//!
//! Its users: the sandbox runtime (`skillhost-sandbox`: server skills and `skillhost
//! test`), the forge's Rust builds (`skillhost-forge`), and any runner of a skill's
//! commands: each makes one [`Jail`] over the host paths its jails bind, checks
//! [`Jail::weakened`] with the host's `allow_weaker` before it runs anything, and spawns
//! through [`Jail::command`].

pub mod isolation;
pub mod profile;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

pub use isolation::{CgroupLimits, ConfineError, Confinement, Isolation, Layer, LayersMissing, UserDrop};
pub use profile::{Bind, MountBeneathWritable, NetSetup, Profile, ResourceLimits};

/// Find `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// Why a jail cannot be made or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// A program it needs is missing.
    #[error("`{program}` was not found on PATH; {fix}")]
    Missing {
        /// The program.
        program: &'static str,
        /// How to install it.
        fix: &'static str,
    },
    /// An opt-out list names a layer that does not exist.
    #[error(
        "`allow_weaker` names `{layer}`, which is not an isolation layer; use one of {}",
        isolation::OPTIONAL_LAYERS.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(", ")
    )]
    UnknownLayer {
        /// The name given.
        layer: String,
    },
    /// Its confinement (cgroup, seccomp program files) could not be set up.
    #[error(transparent)]
    Confine(#[from] ConfineError),
    /// Its profile would make a mount point beneath a writable bind.
    #[error(transparent)]
    Mounts(#[from] MountBeneathWritable),
}

/// The host programs every jail runs through.
#[derive(Clone, Debug)]
pub struct Programs {
    /// `bwrap`.
    pub bwrap: PathBuf,
    /// `prlimit` (util-linux): sets the rlimits on itself before it executes `bwrap`.
    pub prlimit: PathBuf,
}

impl Programs {
    /// `bwrap` and `prlimit` at the paths given, or else found on `PATH`.
    pub fn find(bwrap: Option<PathBuf>, prlimit: Option<PathBuf>) -> Result<Self, JailError> {
        let bwrap = bwrap
            .or_else(|| which("bwrap"))
            .ok_or(JailError::Missing { program: "bwrap", fix: "install bubblewrap (`apt-get install bubblewrap`)" })?;
        let prlimit = prlimit.or_else(|| which("prlimit")).ok_or(JailError::Missing { program: "prlimit", fix: "install util-linux" })?;
        Ok(Self { bwrap, prlimit })
    }
}

/// Refuse an opt-out list naming anything but [`isolation::OPTIONAL_LAYERS`].
pub fn check_allow_weaker(allow_weaker: &[String]) -> Result<(), JailError> {
    match allow_weaker.iter().find(|l| !isolation::OPTIONAL_LAYERS.contains(&l.as_str())) {
        Some(layer) => Err(JailError::UnknownLayer { layer: layer.clone() }),
        None => Ok(()),
    }
}

/// The jail of one user: its programs and the isolation layers this machine gives its
/// jails, detected once, when first asked for (a host that never starts a jail, such as
/// a `serve` of WebAssembly skills alone, probes nothing).
#[derive(Debug)]
pub struct Jail {
    programs: Programs,
    probe: isolation::Probe,
    isolation: std::sync::OnceLock<Isolation>,
}

impl Jail {
    /// The jail for `programs`; its layers are detected at the first question about them
    /// (runs bwrap, a few milliseconds; unavailable ones are logged then): a root host
    /// drops to `sandbox_id` (uid, gid), which must reach every path of `reach` (what this
    /// user's jails bind: work dirs, a venv, a toolchain), or the uid drop is reported
    /// unavailable. Paths in `reach` that do not exist yet are skipped: make them first.
    /// `kept`: the file where a verdict of probes that all passed is kept for the rest of
    /// the boot ([`isolation::Probe::kept`]), or `None`.
    pub fn new(programs: Programs, sandbox_id: (u32, u32), reach: Vec<PathBuf>, kept: Option<PathBuf>) -> Self {
        let probe = isolation::Probe { bwrap: programs.bwrap.clone(), sandbox_id, reach, kept };
        Self { programs, probe, isolation: std::sync::OnceLock::new() }
    }

    /// The programs its jails run through.
    pub fn programs(&self) -> &Programs {
        &self.programs
    }

    /// The layers its jails get, and those it lacks.
    pub fn isolation(&self) -> &Isolation {
        self.isolation.get_or_init(|| {
            let isolation = Isolation::detect(&self.probe);
            isolation.warn_unavailable();
            isolation
        })
    }

    /// The uid drop its jails get (a root host): the uid and gid that must own what a
    /// jail writes and reach what it binds.
    pub fn user(&self) -> Option<&UserDrop> {
        self.isolation().user.as_ref()
    }

    /// Fail closed: the layers this host expects that its jails lack, as `NAME (opted out
    /// in config)` lines when `allow_weaker` (the host's configuration) names every one;
    /// otherwise the refusal naming each missing layer, what was found and the fix
    /// ([`Isolation::weakened`]). Nothing may run in a jail of this host while it refuses.
    pub fn weakened(&self, allow_weaker: &[String]) -> Result<Vec<String>, LayersMissing> {
        self.isolation().weakened(allow_weaker)
    }

    /// The jail that runs `program` (a path inside it) with `args` under `profile`:
    /// confined as `name` (its cgroup made now with `limits`, the uid drop, the seccomp
    /// filter), the argv built ([`Profile::argv_with`]) and the command ready to spawn
    /// ([`Profile::command`], [`isolation::attach`]). Set its stdio and spawn it; keep
    /// `profile` alive until it has spawned and the [`Jailed::confinement`] as long as the
    /// jail runs (dropping it kills every process of the cgroup).
    pub fn command(
        &self,
        profile: &Profile,
        name: &str,
        limits: &CgroupLimits,
        program: &OsStr,
        args: &[OsString],
    ) -> Result<Jailed, JailError> {
        let confinement = self.isolation().confine(name, limits)?;
        let argv = profile.argv_with(&self.programs, &confinement, program, args)?;
        tracing::trace!(name, ?argv, "starting a jail");
        let mut command = profile.command(&argv);
        isolation::attach(command.as_std_mut(), &confinement);
        Ok(Jailed { command, confinement })
    }
}

/// A jail ready to start.
#[derive(Debug)]
pub struct Jailed {
    /// The command: `prlimit`, the jail's first process. Stdio is the caller's to set.
    pub command: tokio::process::Command,
    /// Its cgroup and seccomp programs: keep it as long as the jail runs.
    pub confinement: Confinement,
}
