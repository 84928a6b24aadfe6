//! The isolation layers under bubblewrap, beyond its namespaces: what this machine offers,
//! detected once, and how one sandbox is confined with them.
//!
//! - **Unprivileged uid.** A host running as root starts the sandbox as an unprivileged
//!   uid and gid (65534 unless configured) through `setpriv` (util-linux), so bwrap makes
//!   an unprivileged user namespace and no process inside is host root: files of root
//!   stay root's through any bind. Needs user namespaces for unprivileged users
//!   (`/proc/sys/user/max_user_namespaces`, Debian's `kernel.unprivileged_userns_clone`)
//!   and every path bound into the sandbox reachable by that uid.
//! - **A cgroup per sandbox** ([`cgroup`]): resident memory of the whole tree, processes,
//!   CPU; the tree is killed at the deadline or the stop and the cgroup removed.
//! - **A seccomp filter** ([`seccomp`]) installed by bwrap just before the command runs.
//!
//! [`Isolation::detect`] finds what works (it runs bwrap to prove it, or takes the verdict
//! of probes that passed on this boot, see [`Probe::kept`]); a layer that is unavailable is reported with what to do ([`Isolation::layers`], the `skillhost
//! doctor` command).
//!
//! **A missing layer fails closed.** The layers [`expected`] for this host (a root host:
//! the uid drop, the cgroup, the seccomp filter; any other: the seccomp filter and the
//! cgroup, which needs root or a delegated cgroup v2 tree) must all be there, or no jail
//! starts (server skills, forge builds): [`Isolation::weakened`] refuses with the layer's
//! name, what was found and the fix, unless the host's configuration names the layer in
//! its opt-out list (the sandbox runtime's `BwrapConfig::allow_weaker`, `[sandbox]
//! allow_weaker` of the CLI's config file), one list for every user of the jail.
//! An accepted weakening is shown with every skill it applies to (`skillhost show`, the
//! approval request, `skillhost doctor`), never only logged.
//! [`Isolation::confine`] gives one sandbox its [`Confinement`]: the argv prefix and bwrap
//! flags ([`crate::profile::Profile::argv_with`]) and the hook that puts the first
//! process into the cgroup and hands bwrap the filter ([`attach`]).

pub mod cgroup;
mod proven;
pub mod seccomp;

use std::ffi::OsString;
use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use cgroup::{CgroupLimits, Cgroups, ServerCgroup};
use proven::Proven;

/// The uid and gid a root host runs sandboxes as by default (nobody/nogroup).
pub const DEFAULT_SANDBOX_ID: u32 = 65534;

/// The layers that may be named in an opt-out list, as [`Layer::name`] spells them.
pub const OPTIONAL_LAYERS: &[&str] = &[UID_DROP, CGROUP, SECCOMP];
/// The drop from root to an unprivileged uid.
pub const UID_DROP: &str = "uid drop";
/// The cgroup per sandbox.
pub const CGROUP: &str = "cgroup";
/// The seccomp filter.
pub const SECCOMP: &str = "seccomp";

/// The layers a host running as root (`root`) or not expects every sandbox to have.
pub fn expected(root: bool) -> &'static [&'static str] {
    if root { &[UID_DROP, CGROUP, SECCOMP] } else { &[SECCOMP, CGROUP] }
}

/// One isolation layer as found on this machine.
#[derive(Clone, Debug, Serialize)]
pub struct Layer {
    /// Its name (`bwrap`, `user namespaces`, `uid drop`, `cgroup`, `seccomp`).
    pub name: String,
    /// Whether sandboxes get it.
    pub available: bool,
    /// What was found (version, controllers, uid).
    pub detail: String,
    /// What to do when it is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Dropping from root to an unprivileged uid before bwrap.
#[derive(Clone, Debug)]
pub struct UserDrop {
    /// `setpriv` executable.
    pub setpriv: PathBuf,
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

impl UserDrop {
    /// Give what `fd` is open on (a directory a jail writes, a workspace) to the uid and
    /// gid: through the descriptor, never a path a jail could have replaced.
    pub fn give(&self, fd: impl std::os::fd::AsFd) -> rustix::io::Result<()> {
        rustix::fs::fchown(fd, Some(rustix::fs::Uid::from_raw(self.uid)), Some(rustix::fs::Gid::from_raw(self.gid)))
    }

    /// `setpriv --reuid=U --regid=G --clear-groups --`.
    pub fn argv(&self) -> Vec<OsString> {
        vec![
            self.setpriv.clone().into_os_string(),
            format!("--reuid={}", self.uid).into(),
            format!("--regid={}", self.gid).into(),
            "--clear-groups".into(),
            "--".into(),
        ]
    }
}

/// What to detect with.
#[derive(Clone, Debug)]
pub struct Probe {
    /// `bwrap`.
    pub bwrap: PathBuf,
    /// The uid and gid to drop to when running as root.
    pub sandbox_id: (u32, u32),
    /// Paths every sandbox binds (the work dir, the venv, the shim): the uid dropped to
    /// must reach them.
    pub reach: Vec<PathBuf>,
    /// A file (the host's own, beside what its sandboxes bind) where the verdict of probes
    /// that all passed is kept for the rest of this boot, so that the next process of the
    /// same host runs none; `None`: probe every time. What it may keep and when it is
    /// used again is [`Proven`]'s to say.
    pub kept: Option<PathBuf>,
}

/// The isolation layers this host uses.
#[derive(Debug, Default)]
pub struct Isolation {
    /// The uid drop, when the host is root and it works.
    pub user: Option<UserDrop>,
    /// The cgroup trees, when the host may create cgroups.
    pub cgroups: Option<Cgroups>,
    /// The compiled seccomp programs, when bwrap installs them.
    pub seccomp: Option<Vec<Vec<u8>>>,
    /// Every layer, available or not.
    pub layers: Vec<Layer>,
}

impl Isolation {
    /// Find what works here; runs bwrap (a few milliseconds) to prove the uid drop, the
    /// user namespaces and the seccomp filter, unless [`Probe::kept`] holds the verdict of
    /// probes that all passed on this boot for the same programs and system ([`Proven`]).
    pub fn detect(probe: &Probe) -> Self {
        let mut iso = Isolation::default();
        let root = rustix::process::geteuid().is_root();
        let (uid, gid) = probe.sandbox_id;
        let drop = root.then(|| crate::which("setpriv").map(|setpriv| UserDrop { setpriv, uid, gid }));
        let programs = seccomp::programs();
        let proven = Proven::find(probe, drop.as_ref(), programs.as_deref().ok());
        let version = proven.version.clone();
        iso.layers.push(Layer {
            name: "bwrap".into(),
            available: version.is_some(),
            detail: version.clone().unwrap_or_else(|| format!("{} does not run", probe.bwrap.display())),
            fix: version.is_none().then(|| "install bubblewrap 0.8 or later (`apt-get install bubblewrap`)".into()),
        });

        let max_userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").ok().and_then(|s| s.trim().parse::<u64>().ok());
        let debian_switch = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone").ok().map(|s| s.trim() == "1");
        let userns = max_userns.unwrap_or(0) > 0 && debian_switch != Some(false);
        iso.layers.push(Layer {
            name: "user namespaces".into(),
            available: userns,
            detail: format!(
                "user.max_user_namespaces = {}{}",
                max_userns.map_or("?".into(), |n| n.to_string()),
                debian_switch.map_or(String::new(), |on| format!(", kernel.unprivileged_userns_clone = {}", on as u8)),
            ),
            fix: (!userns).then(|| "allow them: `sysctl -w user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1`".into()),
        });

        let user_layer = match (drop, &proven.user) {
            (None, _) => Layer {
                name: UID_DROP.into(),
                available: true,
                detail: format!("the host runs as uid {}, not root: sandboxes run as that uid", rustix::process::geteuid().as_raw()),
                fix: None,
            },
            (Some(Some(drop)), Ok(())) => {
                iso.user = Some(drop);
                Layer { name: UID_DROP.into(), available: true, detail: format!("sandboxes run as uid {uid} gid {gid}"), fix: None }
            }
            (Some(Some(_)), Err(e)) => Layer {
                name: UID_DROP.into(),
                available: false,
                detail: format!("bwrap as uid {uid} failed: {e}"),
                fix: Some(format!(
                    "without it sandboxes would run as host root; let uid {uid} use user namespaces and reach the paths sandboxes bind (every parent directory searchable: `chmod o+x`, or put the data dir under a path such as /var/lib/skillhost)"
                )),
            },
            (Some(None), _) => Layer {
                name: UID_DROP.into(),
                available: false,
                detail: "`setpriv` was not found on PATH".into(),
                fix: Some("install util-linux (`setpriv`); without it sandboxes would run as host root".into()),
            },
        };
        iso.layers.push(user_layer);

        let (cgroups, problems) = cgroup::Cgroups::detect();
        let missing: Vec<&str> = cgroup::CONTROLLERS.iter().copied().filter(|c| !cgroups.as_ref().is_some_and(|g| g.has(c))).collect();
        iso.layers.push(Layer {
            name: CGROUP.into(),
            available: missing.is_empty(),
            detail: match &cgroups {
                Some(g) if problems.is_empty() => g.describe().join(", "),
                Some(g) => format!("{}; missing: {}", g.describe().join(", "), problems.join("; ")),
                None => problems.join("; "),
            },
            fix: (!missing.is_empty()).then(|| {
                format!(
                    "no {} limit per sandbox (memory falls back to each process's address space, processes to RLIMIT_NPROC): run the host as root or in a delegated cgroup v2 subtree (a systemd unit with `Delegate=yes`, the host in a leaf)",
                    missing.join("/")
                )
            }),
        });
        iso.cgroups = cgroups;

        let seccomp = match (programs, proven.seccomp) {
            (Ok(programs), Ok(())) => Ok(programs),
            (Err(e), _) => Err(e.to_string()),
            (Ok(_), Err(e)) => Err(e.to_string()),
        };
        iso.layers.push(match seccomp {
            Ok(programs) => {
                iso.seccomp = Some(programs);
                Layer {
                    name: SECCOMP.into(),
                    available: true,
                    detail: format!(
                        "{} system calls, namespace clones and socket families other than {} refused with EPERM; system calls above number {} with ENOSYS",
                        seccomp::DENIED.len(),
                        seccomp::SOCKET_FAMILIES.iter().map(|(name, _)| *name).collect::<Vec<_>>().join("/"),
                        seccomp::HIGHEST_KNOWN
                    ),
                    fix: None,
                }
            }
            Err(e) => Layer {
                name: SECCOMP.into(),
                available: false,
                detail: e,
                fix: Some("use bubblewrap 0.8 or later on a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)".into()),
            },
        });
        iso
    }

    /// The [`expected`] layers this machine lacks, as `NAME (opted out in config)` lines
    /// when `allowed` names every one of them; otherwise the refusal, naming each missing
    /// layer with what was found and the fix.
    pub fn weakened(&self, allowed: &[String]) -> Result<Vec<String>, LayersMissing> {
        let root = rustix::process::geteuid().is_root();
        let missing = self.layers.iter().filter(|l| !l.available && expected(root).contains(&l.name.as_str()));
        let (accepted, refused): (Vec<&Layer>, Vec<&Layer>) = missing.partition(|l| allowed.contains(&l.name));
        if refused.is_empty() {
            return Ok(accepted.iter().map(|l| format!("{} (opted out in config)", l.name)).collect());
        }
        Err(LayersMissing { missing: refused.into_iter().cloned().collect() })
    }

    /// Log every unavailable layer once, as a warning.
    pub fn warn_unavailable(&self) {
        for layer in self.layers.iter().filter(|l| !l.available) {
            tracing::warn!(layer = %layer.name, "sandbox isolation layer unavailable: {}; {}", layer.detail, layer.fix.as_deref().unwrap_or(""));
        }
    }

    /// The confinement of one sandbox named after `name`: its cgroup (made now, with
    /// `limits`), the uid drop and the seccomp programs.
    pub fn confine(&self, name: &str, limits: &CgroupLimits) -> Result<Confinement, ConfineError> {
        let cgroup = match &self.cgroups {
            Some(groups) => Some(groups.create(name, limits).map_err(ConfineError::Cgroup)?),
            None => None,
        };
        let mut seccomp = Vec::new();
        for program in self.seccomp.iter().flatten() {
            seccomp.push(program_file(program).map_err(ConfineError::Seccomp)?);
        }
        Ok(Confinement { user: self.user.clone(), cgroup, seccomp })
    }
}

/// The fail-closed verdict of [`Isolation::weakened`]: sandboxes would lack isolation
/// layers this host expects, and its configuration does not accept that. Nothing may run
/// in a jail of this host while it holds; the message names each missing layer, what was
/// found and the fix.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{}", self.message("its sandbox"))]
pub struct LayersMissing {
    /// Each expected layer this machine lacks and the configuration does not opt out of.
    pub missing: Vec<Layer>,
}

impl LayersMissing {
    /// The refusal with `subject` for whose sandbox it is (`its sandbox` in the message a
    /// skill's load gets, `its build sandbox` for the forge's builds, `a sandbox` for a
    /// report of the host).
    pub fn message(&self, subject: &str) -> String {
        let missing = &self.missing;
        format!(
            "{subject} would lack the isolation layer{} {} this host expects, so it does not start ({}); fix the host, or accept a weaker sandbox for every server skill with `allow_weaker = [{}]` under `[sandbox]` in the host config (BwrapConfig::allow_weaker)",
            if missing.len() == 1 { "" } else { "s" },
            missing.iter().map(|l| format!("`{}`", l.name)).collect::<Vec<_>>().join(", "),
            missing.iter().map(|l| format!("{}: {}; {}", l.name, l.detail, l.fix.as_deref().unwrap_or(""))).collect::<Vec<_>>().join("; "),
            missing.iter().map(|l| format!("\"{}\"", l.name)).collect::<Vec<_>>().join(", ")
        )
    }
}

/// Why one sandbox's confinement could not be set up (see [`Isolation::confine`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// Its cgroup could not be made.
    #[error("cannot create its cgroup: {0}")]
    Cgroup(#[source] std::io::Error),
    /// Its seccomp program file could not be written.
    #[error("cannot write its seccomp filter: {0}")]
    Seccomp(#[source] std::io::Error),
}

/// Why a probe run of bwrap failed, or did not run (reported as the layer's detail).
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("`setpriv` was not found on PATH")]
    NoSetpriv,
    /// The seccomp programs could not be built (their own error is reported).
    #[error("no seccomp programs to install")]
    NoPrograms,
    #[error(transparent)]
    SeccompFile(std::io::Error),
    #[error("cannot run {program}: {source}")]
    Start { program: String, source: std::io::Error },
    /// bwrap's stderr.
    #[error("{0}")]
    Failed(String),
}

/// What skillhost relies on against CVE-2026-87766 for bwrap `version` (`bubblewrap
/// 0.8.0`): before 0.12, bwrap follows a link planted in bound-in content while it sets up
/// the mounts beneath it, so the profile creates none beneath a skill-writable directory.
pub fn mount_advisory(version: &str) -> String {
    let number = version.rsplit(' ').next().unwrap_or_default();
    let mut parts = number.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let relied = "skillhost creates no mount point beneath a skill-writable directory";
    if (major, minor) < (0, 12) {
        format!("{version}: before 0.12, mount setup follows links in bound content (CVE-2026-87766); {relied}")
    } else {
        format!("{version}: mount setup does not follow links in bound content (fixed in 0.12); {relied} all the same")
    }
}

/// A seccomp program in an unlinked file, at offset 0 (bwrap reads it to the end).
fn program_file(program: &[u8]) -> std::io::Result<std::fs::File> {
    let mut file = tempfile::tempfile()?;
    file.write_all(program)?;
    file.rewind()?;
    Ok(file)
}

/// Run `bwrap … true` with `user` and `seccomp`, binding every path of `probe.reach`.
fn run_probe(probe: &Probe, user: Option<&UserDrop>, seccomp: Option<&[Vec<u8>]>) -> Result<(), ProbeError> {
    let mut argv: Vec<OsString> = user.map(UserDrop::argv).unwrap_or_default();
    argv.push(probe.bwrap.clone().into_os_string());
    for a in ["--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"] {
        argv.push(a.into());
    }
    for top in ["/lib", "/lib64", "/bin"] {
        if let Ok(target) = std::fs::read_link(top) {
            argv.extend(["--symlink".into(), target.into_os_string(), top.into()]);
        }
    }
    for path in probe.reach.iter().filter(|p| p.exists()) {
        argv.extend(["--ro-bind".into(), path.clone().into_os_string(), path.clone().into_os_string()]);
    }
    let files =
        seccomp.unwrap_or_default().iter().map(|p| program_file(p)).collect::<Result<Vec<_>, _>>().map_err(ProbeError::SeccompFile)?;
    for file in &files {
        argv.extend(["--add-seccomp-fd".into(), file.as_raw_fd().to_string().into()]);
    }
    argv.extend(["--".into(), "/usr/bin/true".into()]);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
    let confinement = Confinement { user: None, cgroup: None, seccomp: files };
    attach(&mut cmd, &confinement);
    let out = cmd.output().map_err(|source| ProbeError::Start { program: argv[0].to_string_lossy().into_owned(), source })?;
    if out.status.success() { Ok(()) } else { Err(ProbeError::Failed(String::from_utf8_lossy(&out.stderr).trim().to_owned())) }
}

/// How one sandbox is confined; dropping it kills and removes its cgroup.
#[derive(Debug, Default)]
pub struct Confinement {
    /// The uid drop (`setpriv` before bwrap), when the host is root.
    pub user: Option<UserDrop>,
    /// Its cgroup.
    pub cgroup: Option<ServerCgroup>,
    /// The seccomp programs, open for bwrap's `--add-seccomp-fd`.
    pub(crate) seccomp: Vec<std::fs::File>,
}

impl Confinement {
    /// The descriptors bwrap reads its seccomp programs from.
    pub fn seccomp_fds(&self) -> Vec<RawFd> {
        self.seccomp.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Whether its memory limit is a cgroup's (then `RLIMIT_AS` is not set).
    pub fn limits_memory(&self) -> bool {
        self.cgroup
            .as_ref()
            .is_some_and(|c| c.dirs().iter().any(|d| d.join("memory.limit_in_bytes").exists() || d.join("memory.max").exists()))
    }
}

/// Prepare `cmd` (the sandbox's first process, `prlimit`) for `confinement`: just before
/// it executes, the child joins the cgroup (so everything it forks is counted) and keeps
/// the seccomp descriptors open for bwrap.
#[allow(unsafe_code)]
pub fn attach(cmd: &mut std::process::Command, confinement: &Confinement) {
    use std::os::unix::process::CommandExt;
    let procs = confinement.cgroup.as_ref().map(ServerCgroup::procs_fds).unwrap_or_default();
    let keep = confinement.seccomp_fds();
    if procs.is_empty() && keep.is_empty() {
        return;
    }
    let hook = move || -> std::io::Result<()> {
        let os = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
        for fd in &procs {
            // SAFETY: `fd` is a `cgroup.procs` file the parent holds open until the spawn
            // returns; "0" moves the writing process.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
            rustix::io::write(fd, b"0").map_err(os)?;
        }
        for fd in &keep {
            // SAFETY: as above, a seccomp program file the parent holds open.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).map_err(os)?;
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec; it only makes system calls
    // (write, fcntl) on descriptors the parent opened, allocates nothing, takes no lock.
    unsafe { cmd.pre_exec(hook) };
}

/// Whether `path` has every parent searchable by `uid`/`gid` (for error messages).
pub fn unreachable_parent(path: &Path, uid: u32, gid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut prefix = PathBuf::new();
    for part in path.components() {
        prefix.push(part);
        if prefix == path {
            break;
        }
        let Ok(meta) = std::fs::metadata(&prefix) else { return Some(prefix) };
        let mode = meta.mode();
        let ok = if meta.uid() == uid {
            mode & 0o100 != 0
        } else if meta.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !ok {
            return Some(prefix);
        }
    }
    None
}
