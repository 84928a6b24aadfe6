//! The jail's profile: the exact `prlimit … -- bwrap … -- COMMAND` argv a jail runs
//! under (a server skill's, built from its grant and nothing else; a forge build's).
//!
//! - Namespaces: `--unshare-all` (user, ipc, pid, net, uts, cgroup), `--die-with-parent`,
//!   `--new-session` (no TIOCSTI into the host's terminal), `--cap-drop ALL`, uid and gid
//!   65534 (nobody) inside.
//! - Environment: `--clearenv`, then only `PATH`, `HOME=/tmp`, `TMPDIR`, `LANG`, the
//!   Python variables, the proxy variables when networked, and the secrets the skill
//!   declared (only for a call's server, never at load).
//! - Files: `/usr` read-only with the `/lib`, `/lib64`, `/bin`, `/sbin` symlinks (or binds
//!   where the host has real directories), a fresh `/proc` and `/dev`, `--tmpfs /tmp`
//!   (capped at the sandbox's memory) before any bind under `/tmp`, the Python base prefix and the venv read-only at their
//!   own paths (scripts in the venv name them in their `#!` lines), the skill's files
//!   read-only at `/skill` (the working directory), its data dirs at `/data…` read-only or
//!   writable as granted (for a probe run, which holds none, an empty size-capped tmpfs
//!   at `/data` instead: [`Profile::scratch`]), and a minimal `/etc` (`passwd`, `group`, `hosts`,
//!   `localtime`; a networked sandbox's CA bundle at [`CA_BUNDLE`], named by the
//!   [`CA_BUNDLE_ENV`] variables). No home, nothing else of the host; the root itself is read-only.
//! - Node in a networked sandbox: the directory of [`NetSetup::node_fetch`] read-only at
//!   [`NODE_DIR`], its preload named by `NODE_OPTIONS`, so node's `fetch` goes through the
//!   proxy (node 20 ignores `HTTPS_PROXY`), and `NODE_USE_ENV_PROXY=1` for the nodes that
//!   honour it.
//! - Data dirs are [`Bind`]s: directories the host opened without following a link
//!   ([`skillhost_core::DirGrant::open`]) and hands bwrap as inherited descriptors
//!   (`--bind-fd`, `--ro-bind-fd`). bwrap mounts the descriptor's directory and refuses to
//!   go on ("Race condition binding dirfd") unless the mount is that very inode, so a link
//!   swapped in after the host opened it is never what the sandbox gets.
//! - Nothing is created beneath what a skill can write. bubblewrap before 0.12 follows a
//!   link planted in bound-in content while it makes the mount points beneath it
//!   (CVE-2026-87766: a link at `/data/out` turns the mount point of `/data/out/in` into a
//!   directory made on the host, as the user running bwrap). So no mount point, `--dir`,
//!   `--file` or `--symlink` of a profile lies beneath one of its writable binds:
//!   [`check_mounts`] refuses such a profile (and, at load, such a grant), and
//!   [`Profile::argv_with`] builds none. The sandbox's own tmpfs (`/tmp`) and bwrap's root
//!   are fresh at setup, with nothing of anyone's in them, so binds beneath them are safe.
//! - Limits: `prlimit` (util-linux) sets them on itself before it execs `bwrap`, so every
//!   process of the sandbox inherits them with no window: processes, CPU seconds, file
//!   size, open files, no core dumps, and address space only where no cgroup limits the
//!   sandbox's memory. They are the second layer: the [`isolation`](crate::isolation)
//!   layers (uid drop through `setpriv`, a cgroup, a seccomp filter) come through
//!   [`Profile::argv_with`].

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost_core::FileMode;

use crate::Programs;
use crate::isolation::Confinement;

/// Where the skill's files are inside the sandbox (also the working directory).
pub const SKILL_DIR: &str = "/skill";
/// Where the egress socket is bound inside the sandbox.
pub const EGRESS_SOCKET: &str = "/run/skillhost/egress.sock";
/// Where the shim executable is bound inside the sandbox.
pub const SHIM_PATH: &str = "/run/skillhost/shim";
/// Where a run's init program (`Profile::init`) is bound inside.
pub const INIT_PATH: &str = "/run/skillhost/init";
/// The per-run workspace (`Profile::workspace`): a tmpfs, the working directory.
pub const WORKSPACE_DIR: &str = "/workspace";
/// The uid and gid the server runs as inside (nobody).
pub const SANDBOX_ID: u32 = 65534;

/// A profile that would make a mount point beneath a directory the skill can write (see
/// the module doc).
#[derive(Debug, thiserror::Error)]
#[error(
    "its sandbox would make the mount point {dest} inside {writable}, which it can write: a link planted there would turn bubblewrap's mount setup onto the host (CVE-2026-87766, bubblewrap before 0.12); grant such directories side by side, not inside a writable one"
)]
pub struct MountBeneathWritable {
    /// The mount point, as the sandbox sees it.
    pub dest: String,
    /// The writable bind it lies in.
    pub writable: String,
}

/// Refuse `mounts` (destination inside the sandbox, writable by the skill) when one lies
/// strictly beneath a writable one.
pub fn check_mounts<'a>(mounts: impl IntoIterator<Item = (&'a str, bool)>) -> Result<(), MountBeneathWritable> {
    let mounts: Vec<(&str, bool)> = mounts.into_iter().collect();
    for (writable, _) in mounts.iter().filter(|(_, writable)| *writable) {
        if let Some((dest, _)) = mounts.iter().find(|(dest, _)| dest != writable && Path::new(dest).starts_with(writable)) {
            return Err(MountBeneathWritable { dest: (*dest).to_owned(), writable: (*writable).to_owned() });
        }
    }
    Ok(())
}

/// Resource limits set with `prlimit` on the sandbox's first process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Address space of each process, bytes (`RLIMIT_AS`), set only when no cgroup limits
    /// the sandbox's resident memory.
    pub address_space: u64,
    /// Processes of the sandbox's user (`RLIMIT_NPROC`, counted over every process of
    /// that uid on the host). The kernel does not enforce it for uid 0; the uid drop and
    /// the cgroup's `pids.max` are what bound a fork bomb of a root host.
    pub processes: u64,
    /// CPU seconds of each process over its life (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Largest file a process may write, bytes (`RLIMIT_FSIZE`).
    pub file_size: u64,
    /// Open files of each process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

/// A directory bound into the sandbox by its open descriptor.
#[derive(Clone, Debug)]
pub struct Bind {
    /// The directory, opened by the host.
    pub fd: Arc<OwnedFd>,
    /// Where the sandbox sees it.
    pub guest: String,
    /// Read-only or read-write.
    pub mode: FileMode,
}

impl Bind {
    /// A directory of the host's own (a toolchain, a cache), opened by its path.
    pub fn host_dir(path: &Path, guest: &str, mode: FileMode) -> std::io::Result<Self> {
        let fd = std::fs::File::open(path)?;
        if !fd.metadata()?.is_dir() {
            return Err(std::io::Error::other(format!("{} is not a directory", path.display())));
        }
        Ok(Self { fd: Arc::new(fd.into()), guest: guest.to_owned(), mode })
    }
}

/// How a networked sandbox reaches the host's proxy.
#[derive(Clone, Debug)]
pub struct NetSetup {
    /// The proxy's Unix socket on the host.
    pub socket: PathBuf,
    /// The shim executable on the host, bound at [`SHIM_PATH`].
    pub shim: PathBuf,
    /// Arguments before the shim's own (e.g. `__shim` for the skillhost binary).
    pub shim_args: Vec<OsString>,
    /// The loopback port the shim listens on inside.
    pub port: u16,
    /// The CA bundle the sandbox trusts (the system's and, when the sandbox's requests
    /// carry secrets, the host's egress CA), bound read-only at [`CA_BUNDLE`] and named by
    /// [`CA_BUNDLE_ENV`]. None: the sandbox has no bundle (as before).
    pub ca_bundle: Option<PathBuf>,
    /// A directory holding undici and the preload [`NODE_PRELOAD_FILE`] that makes it the
    /// dispatcher of node's `fetch` (`skillhost_sandbox::node_fetch`), bound read-only at
    /// [`NODE_DIR`] and named by `NODE_OPTIONS`. None: node's fetch reaches
    /// nothing (below node 22.21).
    pub node_fetch: Option<PathBuf>,
}

/// Where a networked sandbox finds [`NetSetup::node_fetch`].
pub const NODE_DIR: &str = "/run/skillhost/node";

/// The preload's name in [`NODE_DIR`].
pub const NODE_PRELOAD_FILE: &str = "preload.cjs";

/// Where a networked sandbox finds its CA bundle ([`NetSetup::ca_bundle`]): the path
/// OpenSSL, curl and Python look at on Debian.
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The variables naming [`CA_BUNDLE`], so each client trusts it: OpenSSL (Python's `ssl`,
/// `urllib`, httpx), requests, node (added to its roots), curl and pip.
pub const CA_BUNDLE_ENV: &[&str] = &["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "PIP_CERT"];

/// Everything one sandbox is built from, bar the programs it runs through ([`Programs`]).
#[derive(Clone, Debug)]
pub struct Profile {
    /// The venv and the Python prefix it was made from, when the host has one.
    pub python: Option<(PathBuf, PathBuf)>,
    /// The skill's files on the host, bound read-only at [`SKILL_DIR`].
    pub skill_dir: PathBuf,
    /// Its data dirs, as granted, already open.
    pub dirs: Vec<Bind>,
    /// An empty tmpfs of this many bytes at `/data` (the probe runs of code no human
    /// approved, which hold no data dir): what they write stays in the sandbox's memory.
    pub scratch: Option<u64>,
    /// A private directory holding the synthetic `/etc` files.
    pub etc_dir: PathBuf,
    /// Extra environment (secrets), after the sandbox's own.
    pub env: Vec<(String, String)>,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// The proxy, for networked servers.
    pub net: Option<NetSetup>,
    /// A fresh tmpfs of this many bytes at [`WORKSPACE_DIR`], made the working directory
    /// (a run of a skill's scripts): what the run writes stays in the sandbox's memory,
    /// capped, and is gone with it.
    pub workspace: Option<u64>,
    /// A program on the host bound read-only at [`INIT_PATH`] (a run's init).
    pub init: Option<PathBuf>,
    /// A `node_modules` directory on the host bound read-only at `/node_modules`, where
    /// node's module resolution finds it from any script (a run's node packages).
    pub node_modules: Option<PathBuf>,
}

impl Profile {
    /// The argv that runs `command` (absolute inside the sandbox) with `args` through
    /// `programs`, with no isolation layer beyond bwrap and the rlimits (see
    /// [`argv_with`](Self::argv_with)).
    pub fn argv(&self, programs: &Programs, command: &OsStr, args: &[OsString]) -> Result<Vec<OsString>, MountBeneathWritable> {
        self.argv_with(programs, &Confinement::default(), command, args)
    }

    /// The argv that runs `command` with `args` through `programs` under `confinement`: `setpriv` to the
    /// unprivileged uid between `prlimit` and `bwrap` when the host is root, bwrap's
    /// `--add-seccomp-fd` for the filter, and no `RLIMIT_AS` when a cgroup limits the
    /// sandbox's resident memory (runtimes that reserve address space, node or a JVM,
    /// break under any address-space limit). The command must be spawned with
    /// [`isolation::attach`](crate::isolation::attach) and `confinement` kept alive
    /// ([`Jail::command`](crate::Jail::command) does both).
    /// Refused when a mount point would lie beneath a writable bind ([`check_mounts`]).
    pub fn argv_with(
        &self,
        programs: &Programs,
        confinement: &Confinement,
        command: &OsStr,
        args: &[OsString],
    ) -> Result<Vec<OsString>, MountBeneathWritable> {
        let mounts = self.mounts();
        check_mounts(mounts.iter().map(|(dest, writable)| (dest.as_str(), *writable)))?;
        let mut a = Argv::default();
        let l = &self.limits;
        a.push(&programs.prlimit);
        let address_space = (!confinement.limits_memory()).then_some(("--as", l.address_space));
        for (flag, value) in address_space.into_iter().chain([
            ("--nproc", l.processes),
            ("--cpu", l.cpu_seconds),
            ("--fsize", l.file_size),
            ("--nofile", l.open_files),
            ("--core", 0),
        ]) {
            a.push(format!("{flag}={value}"));
        }
        a.push("--");
        if let Some(user) = &confinement.user {
            for arg in user.argv() {
                a.push(arg);
            }
        }
        a.push(&programs.bwrap);
        a.args(["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]);
        for fd in confinement.seccomp_fds() {
            a.push("--add-seccomp-fd");
            a.push(fd.to_string());
        }
        a.args(["--uid", &SANDBOX_ID.to_string(), "--gid", &SANDBOX_ID.to_string()]);
        a.args(["--hostname", "skill"]);

        // System files: /usr, and the merged-/usr links (or the real directories).
        a.args(["--ro-bind", "/usr", "/usr"]);
        for top in ["/lib", "/lib64", "/bin", "/sbin"] {
            match std::fs::symlink_metadata(top) {
                Ok(meta) if meta.is_symlink() => {
                    if let Ok(target) = std::fs::read_link(top) {
                        a.push("--symlink");
                        a.push(target);
                        a.push(top);
                    }
                }
                Ok(meta) if meta.is_dir() => a.args(["--ro-bind", top, top]),
                _ => {}
            }
        }
        a.args(["--proc", "/proc", "--dev", "/dev"]);
        // Before any bind under /tmp (a venv or a data dir may live there). Capped at the
        // sandbox's memory: its pages are the sandbox's memory, and outlive no process.
        a.args(["--size", &l.address_space.max(1 << 20).to_string(), "--tmpfs", "/tmp"]);
        a.args(["--dir", "/etc"]);
        for file in ["passwd", "group", "hosts"] {
            a.push("--ro-bind");
            a.push(self.etc_dir.join(file));
            a.push(format!("/etc/{file}"));
        }
        if let Ok(target) = std::fs::read_link("/etc/localtime")
            && target.starts_with("/usr/")
        {
            a.push("--symlink");
            a.push(target);
            a.push("/etc/localtime");
        }

        if let Some((venv, prefix)) = &self.python {
            for dir in [prefix, venv] {
                a.push("--ro-bind");
                a.push(dir);
                a.push(dir);
            }
        }
        a.push("--ro-bind");
        a.push(&self.skill_dir);
        a.push(SKILL_DIR);
        let mut dirs = self.dirs.clone();
        dirs.sort_by_key(|d| d.guest.len());
        for dir in &dirs {
            a.push(match dir.mode {
                FileMode::ReadOnly => "--ro-bind-fd",
                FileMode::ReadWrite => "--bind-fd",
            });
            a.push(dir.fd.as_raw_fd().to_string());
            a.push(&dir.guest);
        }
        if let Some(bytes) = self.scratch {
            a.args(["--size", &bytes.to_string(), "--tmpfs", "/data"]);
        }
        if let Some(bytes) = self.workspace {
            a.args(["--size", &bytes.to_string(), "--tmpfs", WORKSPACE_DIR]);
        }
        if let Some(net) = &self.net {
            a.push("--ro-bind");
            a.push(&net.socket);
            a.push(EGRESS_SOCKET);
            a.push("--ro-bind");
            a.push(&net.shim);
            a.push(SHIM_PATH);
            if let Some(bundle) = &net.ca_bundle {
                a.push("--ro-bind");
                a.push(bundle);
                a.push(CA_BUNDLE);
            }
            if let Some(node) = &net.node_fetch {
                a.push("--ro-bind");
                a.push(node);
                a.push(NODE_DIR);
            }
        }
        if let Some(init) = &self.init {
            a.push("--ro-bind");
            a.push(init);
            a.push(INIT_PATH);
        }
        if let Some(modules) = &self.node_modules {
            a.push("--ro-bind");
            a.push(modules);
            a.push("/node_modules");
        }
        // The root itself (bwrap's private tmpfs holding the mount points) read-only.
        a.args(["--remount-ro", "/"]);
        let workdir = if self.workspace.is_some() { WORKSPACE_DIR } else { SKILL_DIR };
        a.args(["--chdir", workdir, "--clearenv"]);
        for (key, value) in self.env() {
            a.push("--setenv");
            a.push(key);
            a.push(value);
        }
        a.push("--");
        if let Some(net) = &self.net {
            a.push(SHIM_PATH);
            for arg in &net.shim_args {
                a.push(arg);
            }
            a.args(["--socket", EGRESS_SOCKET, "--port", &net.port.to_string(), "--"]);
        }
        a.push(command);
        for arg in args {
            a.push(arg);
        }
        Ok(a.0)
    }

    /// Every path bwrap creates or mounts over inside the sandbox with this profile (bar
    /// the fresh `/tmp` tmpfs's own contents), and whether the skill can write it.
    pub fn mounts(&self) -> Vec<(String, bool)> {
        let mut mounts: Vec<(String, bool)> = [
            "/usr",
            "/lib",
            "/lib64",
            "/bin",
            "/sbin",
            "/proc",
            "/dev",
            "/tmp",
            "/etc",
            "/etc/passwd",
            "/etc/group",
            "/etc/hosts",
            "/etc/localtime",
        ]
        .into_iter()
        .map(|p| (p.to_owned(), false))
        .collect();
        if let Some((venv, prefix)) = &self.python {
            mounts.extend([prefix, venv].map(|dir| (dir.display().to_string(), false)));
        }
        mounts.push((SKILL_DIR.to_owned(), false));
        mounts.extend(self.dirs.iter().map(|d| (d.guest.clone(), d.mode == FileMode::ReadWrite)));
        // The probe's tmpfs is fresh at setup, like /tmp: nothing of anyone's is in it yet.
        if self.scratch.is_some() {
            mounts.push(("/data".to_owned(), false));
        }
        if self.workspace.is_some() {
            mounts.push((WORKSPACE_DIR.to_owned(), false));
        }
        if let Some(net) = &self.net {
            mounts.extend([EGRESS_SOCKET, SHIM_PATH].map(|p| (p.to_owned(), false)));
            if net.ca_bundle.is_some() {
                mounts.push((CA_BUNDLE.to_owned(), false));
            }
            if net.node_fetch.is_some() {
                mounts.push((NODE_DIR.to_owned(), false));
            }
        }
        if self.init.is_some() {
            mounts.push((INIT_PATH.to_owned(), false));
        }
        if self.node_modules.is_some() {
            mounts.push(("/node_modules".to_owned(), false));
        }
        mounts
    }

    /// The command that runs `argv` (from [`argv`](Self::argv)): no environment of the
    /// host's, killed when dropped, and the descriptors of [`dirs`](Self::dirs) (and only
    /// those) inherited by the sandbox. Keep the profile alive until it has spawned.
    // `pre_exec` is the one way to clear close-on-exec on exactly these descriptors in the
    // child only (clearing it in the host would leak them into every other child).
    #[allow(unsafe_code)]
    pub fn command(&self, argv: &[OsString]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]).env_clear().kill_on_drop(true);
        let fds: Vec<RawFd> = self.dirs.iter().map(|d| d.fd.as_raw_fd()).collect();
        // SAFETY: between fork and exec only `fcntl` runs, which is async-signal-safe;
        // the descriptors are owned by `self.dirs`, open for as long as the caller keeps
        // the profile, which it does until `spawn` returns.
        unsafe {
            command.pre_exec(move || {
                for fd in &fds {
                    let fd = std::os::fd::BorrowedFd::borrow_raw(*fd);
                    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                }
                Ok(())
            });
        }
        command
    }

    /// The sandbox's environment.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut path = String::new();
        if let Some((venv, _)) = &self.python {
            path.push_str(&format!("{}:", venv.join("bin").display()));
        }
        path.push_str("/usr/local/bin:/usr/bin:/bin");
        let mut env = vec![
            ("PATH".to_owned(), path),
            ("HOME".to_owned(), "/tmp".to_owned()),
            ("TMPDIR".to_owned(), "/tmp".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
            ("PYTHONUNBUFFERED".to_owned(), "1".to_owned()),
            ("SKILLHOST_DATA".to_owned(), "/data".to_owned()),
        ];
        if let Some((venv, _)) = &self.python {
            env.push(("VIRTUAL_ENV".to_owned(), venv.display().to_string()));
        }
        if let Some(net) = &self.net {
            let proxy = format!("http://127.0.0.1:{}", net.port);
            for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
                env.push((key.to_owned(), proxy.clone()));
            }
            env.push(("NO_PROXY".to_owned(), String::new()));
            env.push(("no_proxy".to_owned(), String::new()));
            if net.ca_bundle.is_some() {
                env.extend(CA_BUNDLE_ENV.iter().map(|key| ((*key).to_owned(), CA_BUNDLE.to_owned())));
            }
            if net.node_fetch.is_some() {
                // Node starts with the preload, and the nodes that can (22.21 and 24.5 on)
                // honour the proxy variables themselves. A skill may start a node with
                // another NODE_OPTIONS, without the preload: that node's fetch then
                // reaches nothing, since the proxy, not the preload, is the sandbox's only
                // way out.
                env.push(("NODE_OPTIONS".to_owned(), format!("--require={NODE_DIR}/{NODE_PRELOAD_FILE}")));
                env.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
            }
        }
        env.extend(self.env.iter().cloned());
        env
    }
}

/// Write the synthetic `/etc` files into `dir`.
pub fn write_etc(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let id = SANDBOX_ID;
    std::fs::write(dir.join("passwd"), format!("nobody:x:{id}:{id}:nobody:/tmp:/usr/sbin/nologin\n"))?;
    std::fs::write(dir.join("group"), format!("nogroup:x:{id}:\n"))?;
    std::fs::write(dir.join("hosts"), "127.0.0.1 localhost\n::1 localhost\n")?;
    Ok(())
}

#[derive(Default)]
struct Argv(Vec<OsString>);

impl Argv {
    fn push(&mut self, arg: impl AsRef<OsStr>) {
        self.0.push(arg.as_ref().to_owned());
    }

    fn args<'a>(&mut self, args: impl IntoIterator<Item = &'a str>) {
        for arg in args {
            self.push(arg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let dir = |path: &str, guest: &str, mode| Bind::host_dir(Path::new(path), guest, mode).unwrap();
        Profile {
            python: Some(("/tmp/venv".into(), "/opt/py".into())),
            skill_dir: "/tmp/skills/x".into(),
            dirs: vec![dir("/usr/share", "/data/out", FileMode::ReadWrite), dir("/usr", "/data", FileMode::ReadOnly)],
            scratch: None,
            etc_dir: "/run/x/etc".into(),
            env: vec![("API_KEY".into(), "v".into())],
            limits: ResourceLimits { address_space: 1 << 30, processes: 64, cpu_seconds: 60, file_size: 1 << 20, open_files: 256 },
            net: None,
            workspace: None,
            init: None,
            node_modules: None,
        }
    }

    fn programs() -> Programs {
        Programs { bwrap: "/usr/bin/bwrap".into(), prlimit: "/usr/bin/prlimit".into() }
    }

    fn text(argv: &[OsString]) -> String {
        argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn the_profile() {
        let p = profile();
        let (out, data) = (p.dirs[0].fd.as_raw_fd(), p.dirs[1].fd.as_raw_fd());
        let argv = text(&p.argv(&programs(), OsStr::new("/tmp/venv/bin/python"), &["server.py".into()]).unwrap());
        assert!(argv.starts_with("/usr/bin/prlimit --as=1073741824 --nproc=64 --cpu=60 --fsize=1048576 --nofile=256 --core=0 -- /usr/bin/bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --uid 65534 --gid 65534"), "{argv}");
        let pos = |needle: &str| argv.find(needle).unwrap_or_else(|| panic!("{needle:?} missing from {argv}"));
        assert!(pos("--tmpfs /tmp") < pos("--ro-bind /tmp/venv /tmp/venv"), "tmpfs before binds under /tmp");
        assert!(pos("--ro-bind /tmp/skills/x /skill") > pos("--tmpfs /tmp"));
        assert!(
            pos(&format!("--ro-bind-fd {data} /data ")) < pos(&format!("--bind-fd {out} /data/out")),
            "parents before children, by descriptor"
        );
        assert!(pos("--clearenv") < pos("--setenv PATH /tmp/venv/bin:"));
        assert!(pos("--setenv API_KEY v") < pos("-- /tmp/venv/bin/python server.py"));
        assert!(!argv.contains("/root") && !argv.contains("HTTP_PROXY"), "{argv}");
    }

    #[test]
    fn a_confined_profile_drops_to_the_sandbox_uid_before_bwrap() {
        use crate::isolation::UserDrop;
        let seccomp = tempfile::tempfile().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&seccomp);
        let confinement = Confinement {
            user: Some(UserDrop { setpriv: "/usr/bin/setpriv".into(), uid: 65534, gid: 65534 }),
            seccomp: vec![seccomp],
            ..Default::default()
        };
        let argv = text(&profile().argv_with(&programs(), &confinement, OsStr::new("/usr/bin/node"), &[]).unwrap());
        assert!(argv.starts_with("/usr/bin/prlimit --as=1073741824 --nproc=64"), "no cgroup: RLIMIT_AS stays: {argv}");
        assert!(
            argv.contains("--core=0 -- /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- /usr/bin/bwrap --unshare-all"),
            "{argv}"
        );
        assert!(argv.contains(&format!("--cap-drop ALL --add-seccomp-fd {fd} ")), "{argv}");
    }

    /// A profile over real directories: a writable data dir at `/data` (and, when
    /// `nested`, a read-only one inside it at `/data/out/inner`), run with real bwrap.
    fn planted_profile(root: &Path, nested: bool) -> Profile {
        let dir = |path: &Path, guest: &str, mode| Bind::host_dir(path, guest, mode).unwrap();
        for sub in ["data", "skill", "etc", "other"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        write_etc(&root.join("etc")).unwrap();
        let mut dirs = vec![dir(&root.join("data"), "/data", FileMode::ReadWrite)];
        if nested {
            dirs.push(dir(&root.join("other"), "/data/out/inner", FileMode::ReadOnly));
        }
        Profile {
            python: None,
            skill_dir: root.join("skill"),
            dirs,
            scratch: None,
            etc_dir: root.join("etc"),
            env: Vec::new(),
            limits: ResourceLimits { address_space: 1 << 30, processes: 64, cpu_seconds: 60, file_size: 1 << 20, open_files: 256 },
            net: Some(NetSetup {
                socket: root.join("etc/hosts"),
                shim: "/usr/bin/true".into(),
                shim_args: vec![],
                port: 3128,
                ca_bundle: None,
                node_fetch: None,
            }),
            workspace: None,
            init: None,
            node_modules: None,
        }
    }

    /// bubblewrap before 0.12 follows a link planted in bound-in content while it makes
    /// the mount points beneath it (CVE-2026-87766). A skill's writable data dir holds
    /// links, planted by an earlier run, at every name the profile mounts anything at and
    /// at `out` (where a nested grant would go), each pointing at a host directory through
    /// bwrap's `/oldroot`: the sandbox starts, and nothing of the host's is made, written
    /// or mounted over; a profile with a mount point inside the writable dir is refused.
    #[tokio::test]
    async fn links_planted_in_writable_dirs_are_never_followed_by_mount_setup() {
        let root = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        let mut names: Vec<String> = vec!["out".into()];
        for (dest, _) in planted_profile(root.path(), false).mounts() {
            let first = Path::new(&dest).components().nth(1).unwrap().as_os_str().to_string_lossy().into_owned();
            if !names.contains(&first) {
                names.push(first);
            }
        }
        // Each link leads to an empty directory of the host's, where mount setup through
        // it would make its mount point.
        for name in &names {
            std::fs::create_dir(victim.path().join(name)).unwrap();
            let target = Path::new("/oldroot").join(victim.path().strip_prefix("/").unwrap()).join(name);
            std::os::unix::fs::symlink(&target, root.path().join("data").join(name)).unwrap();
        }

        let host = Programs::find(None, None).unwrap();
        let profile = planted_profile(root.path(), false);
        let argv = profile.argv(&host, OsStr::new("/usr/bin/true"), &[]).unwrap();
        let status = profile.command(&argv).stdin(std::process::Stdio::null()).status().await.unwrap();
        assert!(status.success(), "the sandbox did not run: {status}");

        let nested = planted_profile(root.path(), true);
        let refused = nested.argv(&host, OsStr::new("/usr/bin/true"), &[]).unwrap_err();
        assert_eq!((refused.dest.as_str(), refused.writable.as_str()), ("/data/out/inner", "/data"));
        assert!(refused.to_string().contains("CVE-2026-87766"), "{refused}");

        for name in &names {
            let left: Vec<_> = std::fs::read_dir(victim.path().join(name)).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert!(left.is_empty(), "mount setup followed the link planted at /data/{name} onto the host: {left:?}");
        }
        for name in &names {
            assert!(std::fs::symlink_metadata(root.path().join("data").join(name)).unwrap().is_symlink(), "{name} was replaced");
        }
    }

    #[test]
    fn only_mount_points_inside_writable_binds_are_refused() {
        assert!(check_mounts([("/data", false), ("/data/out", true), ("/data/out2", false), ("/database", false)]).is_ok());
        assert!(check_mounts([("/data", true), ("/data-ro", false), ("/tmp/venv", false)]).is_ok());
        let e = check_mounts([("/data/out/in", false), ("/data", true)]).unwrap_err();
        assert_eq!((e.dest.as_str(), e.writable.as_str()), ("/data/out/in", "/data"));
        assert!(check_mounts([("/build/src", true), ("/build/src/target", true)]).is_err());
    }

    #[test]
    fn networked_profile_runs_the_shim_first() {
        let mut p = profile();
        p.net = Some(NetSetup {
            socket: "/run/x/egress.sock".into(),
            shim: "/usr/bin/skillhost".into(),
            shim_args: vec!["__shim".into()],
            port: 3128,
            ca_bundle: Some("/run/x/etc/ca-bundle.pem".into()),
            node_fetch: None,
        });
        let argv = text(&p.argv(&programs(), OsStr::new("/usr/bin/node"), &[]).unwrap());
        assert!(argv.contains("--ro-bind /run/x/egress.sock /run/skillhost/egress.sock"), "{argv}");
        assert!(argv.contains("--setenv HTTPS_PROXY http://127.0.0.1:3128"), "{argv}");
        assert!(argv.contains("--ro-bind /run/x/etc/ca-bundle.pem /etc/ssl/certs/ca-certificates.crt"), "{argv}");
        for key in CA_BUNDLE_ENV {
            assert!(argv.contains(&format!("--setenv {key} /etc/ssl/certs/ca-certificates.crt")), "{argv}");
        }
        assert!(argv.ends_with("-- /run/skillhost/shim __shim --socket /run/skillhost/egress.sock --port 3128 -- /usr/bin/node"), "{argv}");
    }

    /// A networked sandbox with the node-fetch directory binds it read-only at
    /// `/run/skillhost/node` and starts node with its preload; without it, or without
    /// network, there is neither.
    #[test]
    fn a_networked_profile_starts_node_with_the_fetch_preload() {
        let net = |node_fetch: Option<PathBuf>| NetSetup {
            socket: "/run/x/egress.sock".into(),
            shim: "/usr/bin/skillhost".into(),
            shim_args: vec!["__shim".into()],
            port: 3128,
            ca_bundle: None,
            node_fetch,
        };
        let mut p = profile();
        p.net = Some(net(Some("/srv/toolchains/node-fetch".into())));
        let argv = text(&p.argv(&programs(), OsStr::new("/usr/bin/node"), &[]).unwrap());
        assert!(argv.contains("--ro-bind /srv/toolchains/node-fetch /run/skillhost/node "), "{argv}");
        assert!(argv.contains("--setenv NODE_OPTIONS --require=/run/skillhost/node/preload.cjs "), "{argv}");
        assert!(argv.contains("--setenv NODE_USE_ENV_PROXY 1 "), "{argv}");
        assert!(p.mounts().contains(&("/run/skillhost/node".to_owned(), false)));

        p.net = Some(net(None));
        let argv = text(&p.argv(&programs(), OsStr::new("/usr/bin/node"), &[]).unwrap());
        assert!(!argv.contains("/run/skillhost/node") && !argv.contains("NODE_OPTIONS"), "{argv}");
        p.net = None;
        let argv = text(&p.argv(&programs(), OsStr::new("/usr/bin/node"), &[]).unwrap());
        assert!(!argv.contains("/run/skillhost/node") && !argv.contains("NODE_"), "{argv}");
    }
}
