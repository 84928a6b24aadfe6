//! What a skill finally holds: a [`Grant`] is what its manifest asks for, cut to what the
//! host's [`Policy`] allows. (Human approval, the third part of the intersection, is the
//! registry's, which only ever narrows a grant.) Runtimes build their sandboxes from a
//! `Grant` and nothing else.
//!
//! Two rules keep a grant from reaching more than it says:
//!
//! - **Data belongs to an identity, not a name.** A skill's data dir is
//!   `<data_root>/<DataKey>`: the user layer's skill `notes` owns `<data_root>/notes`, a
//!   skill of the same name in another layer (a cloned repository's workspace, the bundled
//!   skills, a direct development load) owns a directory of its own, so shadowing a skill
//!   never hands over its data.
//! - **Code no human approved runs under a [probe grant](Grant::probe)**: one fresh scratch
//!   dir, no network, no secrets, a short deadline.
//!
//! A [`DirGrant`] is never opened by its path: [`DirGrant::open`] walks down from the
//! host's own root one component at a time without following a link (see [`open_beneath`]),
//! and runtimes hand the sandbox the directory so opened. A runtime that opens them at
//! every call holds the root open between calls ([`HeldRoots`], [`DirGrant::open_held`]):
//! one lookup below it that refuses links, the same walls.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::{EgressPolicy, SecretBinding};
use crate::limits::{ByteSize, Limits, fmt_duration};
use crate::manifest::SkillManifest;
use crate::name::SkillName;
use crate::runtime::SkillCode;
use crate::server::EnvSecret;

/// How a granted directory may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum FileMode {
    /// Read files and list directories.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Also create, write, rename and delete files and directories.
    #[serde(rename = "rw")]
    ReadWrite,
}

/// What the host allows any skill, whatever its manifest asks.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Directory holding one data dir per skill (`<data_root>/<skill>/`).
    pub data_root: PathBuf,
    /// The largest limits a manifest may ask for. Default: [`Limits::MAX`].
    pub max: Limits,
    /// Limits for skills that ask for none. Default: [`Limits::DEFAULT`].
    pub default: Limits,
    /// Whether skills may be granted writable directories. Default: `true`.
    pub allow_writable_files: bool,
    /// Whether skills may be granted outbound HTTP to the hosts they declare. Default: `true`.
    pub allow_network: bool,
}

impl Policy {
    /// A policy with the default limits and data dirs under `data_root`.
    pub fn new(data_root: impl Into<PathBuf>) -> Self {
        Self { data_root: data_root.into(), max: Limits::MAX, default: Limits::DEFAULT, allow_writable_files: true, allow_network: true }
    }

    /// The data dir of the skill identified by `key`.
    pub fn data_dir(&self, key: &DataKey) -> PathBuf {
        self.data_root.join(&key.0)
    }
}

/// Whose data a grant opens: the path of a skill's data dir below [`Policy::data_root`],
/// and the key its approval is stored under. Two skills of the same name in different
/// places have different keys, so neither sees the other's data or inherits its approval.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DataKey(String);

impl DataKey {
    /// The key of skill `name` installed by the user: `<data_root>/<name>`.
    pub fn named(name: &SkillName) -> Self {
        Self(name.as_str().to_owned())
    }

    /// The key of skill `name` in `space` (`bundled`, `dev`, `workspace-<hash>`...):
    /// `<data_root>/.<space>/<name>`. The leading dot keeps every space apart from the user
    /// layer's names, which never start with one. `space` must be a plain file name
    /// (ASCII letters, digits, `-`).
    pub fn scoped(space: &str, name: &SkillName) -> Self {
        assert!(
            !space.is_empty() && space.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "a data key's space is a plain name: {space:?}"
        );
        Self(format!(".{space}/{name}"))
    }

    /// The key as stored by the trust store: `notes`, `.bundled/notes`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long code no human approved may run at a time under a [probe grant](Grant::probe).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A directory the skill may open, and where it sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DirGrant {
    /// The directory on the host, as shown to people. Never opened by this path: see
    /// [`DirGrant::open`].
    pub host: PathBuf,
    /// The host's own directory `host` lies beneath ([`Policy::data_root`], or a probe's
    /// scratch dir). Opened as a trusted path; everything below it is walked without
    /// following links.
    pub root: PathBuf,
    /// Where the guest sees it: `/data` or `/data/<path>`.
    pub guest: String,
    /// Read-only or read-write.
    pub mode: FileMode,
}

/// Everything one skill may do. Deny by default: what is not here, the skill cannot do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The skill this grant belongs to.
    pub skill: SkillName,
    /// Preopened directories.
    pub dirs: Vec<DirGrant>,
    /// Hard limits on each call.
    pub limits: Limits,
    /// Where it may send HTTP requests; empty: nowhere (and no HTTP interface is linked).
    pub network: EgressPolicy,
    /// Secrets the host adds to its requests.
    pub secrets: Vec<SecretBinding>,
    /// Secrets a sandboxed server gets in its environment (`[[server.secrets]]`).
    pub env_secrets: Vec<EnvSecret>,
}

/// Why a skill's request cannot be granted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// A limit asked for is above the host's maximum.
    #[error(
        "skill `{skill}` asks for {limit} = {asked}, above the host maximum of {max}; lower `[limits] {limit}` in its skill.toml or raise the host maximum"
    )]
    LimitAboveMax {
        /// The skill.
        skill: SkillName,
        /// Which limit (`timeout`, `memory`, `output`, `concurrency`).
        limit: &'static str,
        /// What the manifest asked, formatted.
        asked: String,
        /// The host's maximum, formatted.
        max: String,
    },
    /// A limit of zero would make every call fail.
    #[error("skill `{skill}` asks for {limit} = 0; remove the line or give a positive value")]
    ZeroLimit {
        /// The skill.
        skill: SkillName,
        /// Which limit.
        limit: &'static str,
    },
    /// The host allows no network access.
    #[error(
        "skill `{skill}` asks for network access but this host allows none; remove `[network]` from its skill.toml or allow network in the host policy"
    )]
    NetworkDenied {
        /// The skill.
        skill: SkillName,
    },
    /// The host does not allow writable directories.
    #[error(
        "skill `{skill}` asks to write to `{path}` but this host allows read-only files only; change its mode to \"ro\" or allow writable files in the host policy"
    )]
    WritableDenied {
        /// The skill.
        skill: SkillName,
        /// The path asked for.
        path: String,
    },
}

impl Grant {
    /// The grant for `manifest` under `policy`: what it asks, within what the host allows,
    /// its data dirs those of the skill identified by `key`.
    pub fn new(manifest: &SkillManifest, policy: &Policy, key: &DataKey) -> Result<Self, GrantError> {
        let skill = manifest.name.clone();
        let asked = &manifest.limits;
        let base = policy.default;
        let mut limits = Limits {
            timeout: asked.timeout.unwrap_or(base.timeout),
            memory: asked.memory.unwrap_or(base.memory),
            output: asked.output.unwrap_or(base.output),
            concurrency: asked.concurrency.unwrap_or(base.concurrency),
            log: base.log,
        };
        let max = policy.max;
        let checks: [(&'static str, bool, bool, String, String); 4] = [
            ("timeout", limits.timeout > max.timeout, limits.timeout.is_zero(), fmt_duration(limits.timeout), fmt_duration(max.timeout)),
            (
                "memory",
                limits.memory > max.memory,
                limits.memory == 0,
                ByteSize(limits.memory).to_string(),
                ByteSize(max.memory).to_string(),
            ),
            (
                "output",
                limits.output > max.output,
                limits.output == 0,
                ByteSize(limits.output).to_string(),
                ByteSize(max.output).to_string(),
            ),
            (
                "concurrency",
                limits.concurrency > max.concurrency,
                limits.concurrency == 0,
                limits.concurrency.to_string(),
                max.concurrency.to_string(),
            ),
        ];
        for (limit, above, zero, asked, max) in checks {
            if zero {
                return Err(GrantError::ZeroLimit { skill, limit });
            }
            if above {
                return Err(GrantError::LimitAboveMax { skill, limit, asked, max });
            }
        }
        limits.log = limits.log.min(max.log);

        let data_dir = policy.data_dir(key);
        let mut dirs = Vec::with_capacity(manifest.files.len());
        for file in &manifest.files {
            if file.mode == FileMode::ReadWrite && !policy.allow_writable_files {
                return Err(GrantError::WritableDenied { skill, path: file.path.clone() });
            }
            let (host, guest) = if file.path == "." {
                (data_dir.clone(), "/data".to_owned())
            } else {
                (data_dir.join(&file.path), format!("/data/{}", file.path))
            };
            dirs.push(DirGrant { host, root: policy.data_root.clone(), guest, mode: file.mode });
        }
        if !manifest.network.is_empty() && !policy.allow_network {
            return Err(GrantError::NetworkDenied { skill });
        }
        let env_secrets = manifest.server.as_ref().map_or_else(Vec::new, |s| s.secrets.clone());
        Ok(Grant { skill, dirs, limits, network: manifest.network.clone(), secrets: manifest.secrets.clone(), env_secrets })
    }

    /// A grant with no capabilities and the given limits: pure computation only.
    pub fn pure(skill: SkillName, limits: Limits) -> Self {
        Self { skill, dirs: Vec::new(), limits, network: EgressPolicy::default(), secrets: Vec::new(), env_secrets: Vec::new() }
    }

    /// The grant code no human approved runs with (listing its tools at load, `skillhost
    /// test`, the forge's tests): instead of its data dirs one writable `scratch` dir at
    /// `/data`, which the caller makes empty for this run and removes after it; no network;
    /// no secrets; its own limits with the deadline cut to [`PROBE_TIMEOUT`]. Whatever the
    /// code does, it leaves nothing behind and reaches nothing of the host's.
    pub fn probe(&self, scratch: &Path) -> Grant {
        let mut probe = self.probe_in_memory();
        probe.dirs =
            vec![DirGrant { host: scratch.to_owned(), root: scratch.to_owned(), guest: "/data".into(), mode: FileMode::ReadWrite }];
        probe
    }

    /// The [probe grant](Self::probe) without a host directory: for a runtime that gives
    /// the code its empty `/data` in memory, inside its sandbox and bounded there (the
    /// bubblewrap runtime's size-capped tmpfs), so nothing the code writes ever lands on
    /// the host's disk.
    pub fn probe_in_memory(&self) -> Grant {
        let mut limits = self.limits;
        limits.timeout = limits.timeout.min(PROBE_TIMEOUT);
        Grant {
            skill: self.skill.clone(),
            dirs: Vec::new(),
            limits,
            network: EgressPolicy::default(),
            secrets: Vec::new(),
            env_secrets: Vec::new(),
        }
    }

    /// The [probe grant](Self::probe) for running `code`. A WebAssembly component that asks
    /// for network keeps `wasi:http` linked so that it loads, and every origin this grant
    /// allows is also denied (deny wins): the gate refuses each request, naming the rule. A
    /// server's sandbox gets no network at all.
    pub fn probe_for(&self, code: &SkillCode, scratch: &Path) -> Grant {
        let mut probe = self.probe(scratch);
        if matches!(code, SkillCode::Wasm { .. }) && !self.network.is_empty() {
            let rules: Vec<_> = self.network.allow.iter().chain(&self.network.private).cloned().collect();
            probe.network = EgressPolicy { allow: rules.clone(), deny: rules, private: Vec::new() };
        }
        probe
    }

    /// Whether this grant holds nothing beyond computation and one directory: no network,
    /// no secrets. True of every [probe grant](Self::probe).
    pub fn is_offline(&self) -> bool {
        self.network.is_empty() && self.secrets.is_empty() && self.env_secrets.is_empty()
    }
}

/// Why a granted directory cannot be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// A component of the path is a symbolic link (or not a directory).
    #[error("skill `{skill}`: its granted directory `{}` is reached through a link or a non-directory at `{}`; grants never follow links: remove it (`rm {}`) and let the host create the directory", host.display(), at.display(), at.display())]
    Link {
        /// The skill.
        skill: SkillName,
        /// The granted directory.
        host: PathBuf,
        /// The offending component.
        at: PathBuf,
    },
    /// Any other failure.
    #[error("skill `{skill}`: cannot open its granted directory `{}`: {source}", host.display())]
    Io {
        /// The skill.
        skill: SkillName,
        /// The granted directory.
        host: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl DirGrant {
    /// Open this directory without following a link anywhere below [`root`](Self::root),
    /// creating missing components (mode 0700, or 0711 with `shared`: searchable, not
    /// listable, for a sandbox whose processes run as another user). The descriptor is what a runtime hands the sandbox.
    pub fn open(&self, skill: &SkillName, shared: bool) -> Result<OwnedFd, DirError> {
        let below = self.host.strip_prefix(&self.root).map_err(|_| DirError::Io {
            skill: skill.clone(),
            host: self.host.clone(),
            source: std::io::Error::other(format!("it is not below {}", self.root.display())),
        })?;
        open_beneath(&self.root, below, shared).map_err(|e| self.error(skill, e))
    }

    /// [`open`](Self::open) with `root` [held open](HeldRoots) between calls: one lookup
    /// below the held root (`openat2` refusing links, as `open` does) instead of a walk
    /// from `/` first. When that lookup fails (a component is missing, is a link, or the
    /// held root was deleted) the directory is opened as `open` does, with the root opened
    /// again by its path (and held from then on), so a refusal reads the same.
    pub fn open_held(&self, skill: &SkillName, shared: bool, roots: &HeldRoots) -> Result<OwnedFd, DirError> {
        // A probe's scratch dir is its own root: nothing below it to look up, and it is
        // not kept open past its probe.
        let Some(below) = self.host.strip_prefix(&self.root).ok().filter(|below| !below.as_os_str().is_empty()) else {
            return self.open(skill, shared);
        };
        if let Some(root) = roots.get(&self.root)
            && let Some(opened) = lookup_below(&root, below)
        {
            return Ok(opened);
        }
        let root = open_root(&self.root).map_err(|e| self.error(skill, e))?;
        let opened = walk_below(root.try_clone().map_err(|e| self.error(skill, Beneath::Io(e)))?, below, dir_mode(shared))
            .map_err(|e| self.error(skill, e))?;
        roots.put(&self.root, root);
        Ok(opened)
    }

    fn error(&self, skill: &SkillName, error: Beneath) -> DirError {
        match error {
            Beneath::Link(at) => DirError::Link { skill: skill.clone(), host: self.host.clone(), at: self.root.join(at) },
            Beneath::Io(source) => DirError::Io { skill: skill.clone(), host: self.host.clone(), source },
        }
    }
}

/// The roots of granted directories a runtime keeps open between calls
/// ([`DirGrant::open_held`]), as the host keeps its databases open: the host's own
/// directories, opened by their paths once. At most [`HeldRoots::MAX`], the most recently
/// opened kept.
#[derive(Debug, Default)]
pub struct HeldRoots(parking_lot::Mutex<Vec<(PathBuf, std::sync::Arc<OwnedFd>)>>);

impl HeldRoots {
    /// The most roots held at once.
    pub const MAX: usize = 8;

    fn get(&self, root: &Path) -> Option<std::sync::Arc<OwnedFd>> {
        self.0.lock().iter().find(|(path, _)| path == root).map(|(_, fd)| fd.clone())
    }

    fn put(&self, root: &Path, fd: OwnedFd) {
        let mut held = self.0.lock();
        held.retain(|(path, _)| path != root);
        if held.len() >= Self::MAX {
            held.remove(0);
        }
        held.push((root.to_owned(), std::sync::Arc::new(fd)));
    }
}

/// Why [`open_beneath`] failed.
#[derive(Debug)]
pub enum Beneath {
    /// This component (relative to the root) is a link or not a directory.
    Link(PathBuf),
    /// Any other error.
    Io(std::io::Error),
}

/// Open the directory `root/below` as a descriptor: `root` by its path (it is the host's
/// own), then each component of `below` relative to the descriptor of its parent with
/// `O_NOFOLLOW | O_DIRECTORY`, creating a missing one. No component may be a link, `..`,
/// or anything but a directory, so a link planted anywhere below `root` (even swapped in
/// between two calls) is refused, never followed.
pub fn open_beneath(root: &Path, below: &Path, shared: bool) -> Result<OwnedFd, Beneath> {
    walk_below(open_root(root)?, below, dir_mode(shared))
}

/// The directory `below` an already open directory `root`, under the walls of
/// [`open_beneath`] (no link, `..` or non-directory at any component), creating missing
/// components with `mode`: how the host writes below a directory it opened once, such as
/// the `--out` folder a run's files are saved into.
pub fn dir_beneath(root: &OwnedFd, below: &Path, mode: u32) -> Result<OwnedFd, Beneath> {
    walk_below(root.try_clone().map_err(Beneath::Io)?, below, mode)
}

/// The mode of a data directory the host creates: searchable by the sandbox's uid when
/// `shared`, else the owner's alone.
fn dir_mode(shared: bool) -> u32 {
    if shared { 0o711 } else { 0o700 }
}

const DIR_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY.union(rustix::fs::OFlags::DIRECTORY).union(rustix::fs::OFlags::CLOEXEC);

/// `root`, opened by its path (it is the host's own), created when missing.
fn open_root(root: &Path) -> Result<OwnedFd, Beneath> {
    use rustix::fs::{CWD, Mode};
    let open = || rustix::fs::openat(CWD, root, DIR_FLAGS, Mode::empty());
    match open() {
        Err(rustix::io::Errno::NOENT) => {
            std::fs::create_dir_all(root).map_err(Beneath::Io)?;
            open()
        }
        opened => opened,
    }
    .map_err(|e| Beneath::Io(e.into()))
}

/// `below` opened from `root` in one lookup when it is all there: the kernel refuses a
/// link anywhere in it (`RESOLVE_NO_SYMLINKS`, magic links included) and any step out of
/// `root` (`RESOLVE_BENEATH`), the walls of [`walk_below`]. `None` when the lookup fails:
/// a component is missing or a link, or the kernel has no `openat2` (before 5.6).
fn lookup_below(root: &OwnedFd, below: &Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let normal = below.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    if !normal || below.as_os_str().is_empty() {
        return None;
    }
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH;
    rustix::fs::openat2(root, below, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty(), resolve).ok()
}

/// `below` opened from `root`: in one [lookup](lookup_below), or when that fails, each
/// component relative to the descriptor of its parent with `O_NOFOLLOW | O_DIRECTORY`,
/// creating a missing one with `mode` and naming the first that is a link.
fn walk_below(root: OwnedFd, below: &Path, mode: u32) -> Result<OwnedFd, Beneath> {
    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;
    if let Some(opened) = lookup_below(&root, below) {
        return Ok(opened);
    }
    let mut dir = root;
    let mut at = PathBuf::new();
    for component in below.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(Beneath::Link(at.join(component)));
        };
        at.push(name);
        let open = |dir: &OwnedFd| rustix::fs::openat(dir, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty());
        let next = match open(&dir) {
            Err(Errno::NOENT) => match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(Errno::EXIST) => open(&dir),
                Err(e) => Err(e),
            },
            other => other,
        };
        dir = next.map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => Beneath::Link(at.clone()),
            e => Beneath::Io(e.into()),
        })?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    use crate::manifest::test_manifest as manifest;

    fn key() -> DataKey {
        DataKey::named(&SkillName::new("demo").unwrap())
    }

    #[test]
    fn data_keys_keep_layers_apart() {
        let name = SkillName::new("notes").unwrap();
        let policy = Policy::new("/var/skills");
        assert_eq!(policy.data_dir(&DataKey::named(&name)), Path::new("/var/skills/notes"));
        assert_eq!(policy.data_dir(&DataKey::scoped("bundled", &name)), Path::new("/var/skills/.bundled/notes"));
        assert_eq!(DataKey::scoped("workspace-0a1b", &name).as_str(), ".workspace-0a1b/notes");
    }

    #[test]
    fn a_probe_holds_one_scratch_dir_and_nothing_else() {
        let m = manifest(
            "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n[network]\nallow = [\"https://api.example.com\"]\n[limits]\ntimeout = \"60s\"\n",
        );
        let grant = Grant::new(&m, &Policy::new("/var/skills"), &key()).unwrap();
        assert!(!grant.is_offline());
        let probe = grant.probe(Path::new("/tmp/scratch"));
        assert!(probe.is_offline());
        assert_eq!(
            probe.dirs,
            vec![DirGrant { host: "/tmp/scratch".into(), root: "/tmp/scratch".into(), guest: "/data".into(), mode: FileMode::ReadWrite }]
        );
        assert_eq!(probe.limits.timeout, PROBE_TIMEOUT);
    }

    #[test]
    fn open_beneath_refuses_links_anywhere_below_the_root() {
        let root = tempfile_dir();
        let outside = tempfile_dir();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a/link")).unwrap();
        std::os::unix::fs::symlink("b", root.join("a/rel")).unwrap();
        assert!(open_beneath(&root, Path::new("a/b/new"), false).is_ok());
        assert!(root.join("a/b/new").is_dir(), "a missing component is created");
        for below in ["a/link", "a/link/x", "a/rel", "a/../a/b"] {
            match open_beneath(&root, Path::new(below), false) {
                Err(Beneath::Link(_)) => {}
                other => panic!("{below}: {other:?}"),
            }
        }
        assert!(!outside.join("x").exists(), "nothing was created through the link");
        // Whole paths that exist: the single lookup refuses a link in them as the walk does.
        std::fs::create_dir(outside.join("there")).unwrap();
        std::fs::write(root.join("a/file"), "").unwrap();
        for below in ["a/link/there", "a/link", "a/file"] {
            match open_beneath(&root, Path::new(below), false) {
                Err(Beneath::Link(_)) => {}
                other => panic!("{below}: {other:?}"),
            }
        }
        use std::os::unix::fs::MetadataExt;
        let opened = open_beneath(&root, Path::new("a/b"), false).unwrap();
        let opened = rustix::fs::fstat(&opened).unwrap();
        assert_eq!(opened.st_ino, std::fs::metadata(root.join("a/b")).unwrap().ino(), "the directory itself is opened");
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    /// The held root is the one opened first, reused while it serves; a root deleted and
    /// made again, or a link swapped in below it, is met exactly as a fresh open meets it.
    #[test]
    fn a_held_root_serves_until_its_lookup_fails_and_refuses_links_as_a_fresh_open_does() {
        use std::os::unix::fs::MetadataExt;
        let skill = SkillName::new("demo").unwrap();
        let root = tempfile_dir().join("data");
        let grant = |below: &str| DirGrant { host: root.join(below), root: root.clone(), guest: "/data".into(), mode: FileMode::ReadOnly };
        let ino = |fd: &OwnedFd| rustix::fs::fstat(fd).unwrap().st_ino;
        let roots = HeldRoots::default();

        let first = grant("demo/cache").open_held(&skill, false, &roots).unwrap();
        assert!(root.join("demo/cache").is_dir(), "missing components are created, the root too");
        let held = roots.get(&root).expect("the root is held after the first open");
        assert_eq!(ino(&held), std::fs::metadata(&root).unwrap().ino());
        let again = grant("demo/cache").open_held(&skill, false, &roots).unwrap();
        assert_eq!(ino(&again), ino(&first));
        assert!(std::sync::Arc::ptr_eq(&held, &roots.get(&root).unwrap()), "a lookup that works keeps the held root");

        // The whole data root deleted and made again while held: the next open finds the
        // new one (its own directory, created), not the deleted one.
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::create_dir_all(root.join("demo/cache")).unwrap();
        let fresh = grant("demo/cache").open_held(&skill, false, &roots).unwrap();
        assert_eq!(ino(&fresh), std::fs::metadata(root.join("demo/cache")).unwrap().ino(), "the root made again is used");
        assert_eq!(ino(&roots.get(&root).unwrap()), std::fs::metadata(&root).unwrap().ino(), "and held from then on");

        // A link swapped in anywhere below the held root is refused, naming it.
        let outside = tempfile_dir();
        std::fs::rename(root.join("demo/cache"), root.join("demo/cache.old")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("demo/cache")).unwrap();
        match grant("demo/cache").open_held(&skill, false, &roots) {
            Err(DirError::Link { at, .. }) => assert_eq!(at, root.join("demo/cache")),
            other => panic!("a link below the held root was not refused: {other:?}"),
        }
        std::fs::rename(root.join("demo"), root.join("demo.old")).unwrap();
        std::os::unix::fs::symlink(root.join("demo.old"), root.join("demo")).unwrap();
        match grant("demo/cache.old").open_held(&skill, false, &roots) {
            Err(DirError::Link { at, .. }) => assert_eq!(at, root.join("demo")),
            other => panic!("a link in the middle was not refused: {other:?}"),
        }
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none(), "nothing was created through a link");

        // A probe's scratch dir (its own root) is opened, not held; the number held is bounded.
        let scratch = tempfile_dir();
        let probe = DirGrant { host: scratch.clone(), root: scratch.clone(), guest: "/data".into(), mode: FileMode::ReadWrite };
        probe.open_held(&skill, false, &roots).unwrap();
        assert!(roots.get(&scratch).is_none(), "a scratch dir is not held");
        let others: Vec<PathBuf> = (0..HeldRoots::MAX).map(|_| tempfile_dir()).collect();
        for other in &others {
            let dir = DirGrant { host: other.join("x"), root: other.clone(), guest: "/data".into(), mode: FileMode::ReadOnly };
            dir.open_held(&skill, false, &roots).unwrap();
        }
        assert!(roots.get(&root).is_none(), "the oldest root is let go past the bound");
        assert!(others.iter().all(|other| roots.get(other).is_some()));
        assert_eq!(roots.0.lock().len(), HeldRoots::MAX);
        for dir in others.iter().chain([&scratch, &outside, &root.parent().unwrap().to_owned()]) {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!("grant-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn nothing_asked_nothing_granted() {
        let grant = Grant::new(&manifest(""), &Policy::new("/var/skills"), &key()).unwrap();
        assert!(grant.dirs.is_empty());
        assert_eq!(grant.limits, Limits::DEFAULT);
    }

    #[test]
    fn dirs_map_into_the_data_dir() {
        let m = manifest("[[capabilities.files]]\npath = \".\"\nmode = \"ro\"\n[[capabilities.files]]\npath = \"out\"\nmode = \"rw\"\n");
        let grant = Grant::new(&m, &Policy::new("/var/skills"), &key()).unwrap();
        let root = PathBuf::from("/var/skills");
        assert_eq!(
            grant.dirs,
            vec![
                DirGrant { host: "/var/skills/demo".into(), root: root.clone(), guest: "/data".into(), mode: FileMode::ReadOnly },
                DirGrant { host: "/var/skills/demo/out".into(), root, guest: "/data/out".into(), mode: FileMode::ReadWrite },
            ]
        );
        let mut strict = Policy::new("/var/skills");
        strict.allow_writable_files = false;
        let err = Grant::new(&m, &strict, &key()).unwrap_err().to_string();
        assert!(err.contains("`demo` asks to write to `out`"), "{err}");
    }

    #[test]
    fn limits_within_maxima() {
        let table = [
            ("timeout = \"5s\"", Ok(())),
            ("timeout = \"10m\"", Err("timeout = 600s, above the host maximum of 120s")),
            ("memory = \"2GiB\"", Err("memory = 2 GiB, above the host maximum of 1 GiB")),
            ("output = \"0\"", Err("output = 0")),
            ("concurrency = 1000", Err("concurrency = 1000, above the host maximum of 64")),
        ];
        for (line, expected) in table {
            let result = Grant::new(&manifest(&format!("[limits]\n{line}\n")), &Policy::new("/d"), &key());
            match (result, expected) {
                (Ok(grant), Ok(())) => assert_eq!(grant.limits.timeout, Duration::from_secs(5)),
                (Err(err), Err(text)) => assert!(err.to_string().contains(text), "{err}"),
                (result, expected) => panic!("{line}: got {result:?}, expected {expected:?}"),
            }
        }
    }
}
