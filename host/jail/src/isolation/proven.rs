//! What the bwrap probes proved ([`Proven`]): bwrap's version, that bwrap runs as the
//! dropped uid (a root host), that it installs the seccomp filter. Run, or taken from the
//! host's file of a verdict kept for this boot ([`Probe::kept`]).
//!
//! **Only a verdict of probes that all passed is kept, and it is used again only for the
//! same boot, programs and system.** Its key is the boot id, this process's user and
//! mount namespaces, the host's uid and gid and the sandbox's, every bwrap and `setpriv`
//! file by path, inode, size, mode and times, the kernel switches of user namespaces
//! (`user.max_user_namespaces`, `kernel.unprivileged_userns_clone`,
//! `kernel.apparmor_restrict_unprivileged_userns`) and of seccomp
//! (`kernel.seccomp.actions_avail`), the seccomp programs themselves and the paths the
//! probes bound; each use re-checks that the dropped uid still reaches every one of those
//! paths (a `stat` of each parent). A verdict that does not match is probed again.
//!
//! Why it cannot weaken a jail: a kept verdict only ever says a layer *works*, so a jail
//! gets every layer it would get after probing; a layer that stopped working on a system
//! that changed anyway (its key did not see it) fails that jail at its start (`setpriv`
//! cannot drop, bwrap cannot install the filter), never runs it without the layer. A
//! probe that fails is never kept: the next process probes again, and reports it.

use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{Probe, ProbeError, UserDrop, run_probe, unreachable_parent};

/// What the probes found.
#[derive(Debug)]
pub(super) struct Proven {
    /// `bwrap --version`, when it runs.
    pub(super) version: Option<String>,
    /// bwrap as the dropped uid (`Ok` when the host is not root: nothing to drop).
    pub(super) user: Result<(), ProbeError>,
    /// bwrap installing the seccomp filter (as the dropped uid when that works); not
    /// probed without the programs.
    pub(super) seccomp: Result<(), ProbeError>,
}

/// The first line of a kept verdict: a file of another format is probed again.
const FORMAT: &str = "skillhost isolation probes v1";

impl Proven {
    /// The verdict kept for this boot in `probe.kept`, or else the probes run now (and
    /// kept there when all of them passed). `drop` is `None` on a host that is not root,
    /// `Some(None)` on a root host without `setpriv`; `programs`, the seccomp programs
    /// when they could be built.
    pub(super) fn find(probe: &Probe, drop: Option<&Option<UserDrop>>, programs: Option<&[Vec<u8>]>) -> Self {
        let key = probe.kept.as_ref().and_then(|_| programs.and_then(|programs| key(probe, drop, programs)));
        if let (Some(file), Some(key)) = (&probe.kept, &key)
            && let Some(kept) = Self::kept(file, key, probe)
        {
            tracing::debug!(file = %file.display(), "isolation probes passed earlier on this boot");
            return kept;
        }
        let proven = Self::probe(probe, drop, programs);
        if let (Some(file), Some(key), Some(version), Ok(()), Ok(())) = (&probe.kept, &key, &proven.version, &proven.user, &proven.seccomp)
            && let Err(error) = keep(file, &format!("{key}bwrap {version}\n"))
        {
            tracing::debug!(file = %file.display(), %error, "cannot keep the isolation probes' verdict; the next start probes again");
        }
        proven
    }

    /// The verdict in `file` if it was kept under `key` and the dropped uid still
    /// reaches every path the probes bound.
    fn kept(file: &Path, key: &str, probe: &Probe) -> Option<Self> {
        let text = std::fs::read_to_string(file).ok()?;
        let version = text.strip_prefix(key)?.strip_prefix("bwrap ")?.strip_suffix('\n')?;
        if version.is_empty() || version.contains('\n') {
            return None;
        }
        let (uid, gid) = probe.sandbox_id;
        if rustix::process::geteuid().is_root()
            && probe.reach.iter().filter(|p| p.exists()).any(|p| unreachable_parent(p, uid, gid).is_some())
        {
            return None;
        }
        Some(Self { version: Some(version.to_owned()), user: Ok(()), seccomp: Ok(()) })
    }

    /// Run the probes: `bwrap --version` beside one run of bwrap with every layer, and
    /// only when that fails, one run per layer to tell which.
    fn probe(probe: &Probe, drop: Option<&Option<UserDrop>>, programs: Option<&[Vec<u8>]>) -> Self {
        let asked = std::process::Command::new(&probe.bwrap)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn();
        let user = drop.and_then(Option::as_ref);
        let (user, seccomp) = match programs {
            None => (probe_user(probe, drop), Err(ProbeError::NoPrograms)),
            Some(programs) => match (run_probe(probe, user, Some(programs)), user) {
                (Ok(()), _) => (probe_user_result(drop), Ok(())),
                (Err(failed), None) => (probe_user_result(drop), Err(failed)),
                (Err(failed), Some(user)) => match run_probe(probe, Some(user), None) {
                    Ok(()) => (Ok(()), Err(failed)),
                    Err(dropped) => (Err(dropped), run_probe(probe, None, Some(programs))),
                },
            },
        };
        let version = asked
            .and_then(std::process::Child::wait_with_output)
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|v| !v.is_empty());
        Self { version, user, seccomp }
    }
}

/// bwrap as the dropped uid, when there is one to drop to.
fn probe_user(probe: &Probe, drop: Option<&Option<UserDrop>>) -> Result<(), ProbeError> {
    match drop {
        Some(Some(user)) => run_probe(probe, Some(user), None),
        _ => probe_user_result(drop),
    }
}

/// The uid drop's verdict when there is no uid to drop to, or it was proved with the rest.
fn probe_user_result(drop: Option<&Option<UserDrop>>) -> Result<(), ProbeError> {
    match drop {
        Some(None) => Err(ProbeError::NoSetpriv),
        _ => Ok(()),
    }
}

/// The key a verdict is kept under (see the module docs), ending in a newline; `None`
/// when this system has no boot id to bind it to (then nothing is kept).
fn key(probe: &Probe, drop: Option<&Option<UserDrop>>, programs: &[Vec<u8>]) -> Option<String> {
    let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "-".to_owned());
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let link = |path: &str| std::fs::read_link(path).map(|l| l.display().to_string()).unwrap_or_else(|_| "-".to_owned());
    let file = |path: &Path| match std::fs::metadata(path) {
        Ok(m) => format!(
            "{} {}:{} {} {:o} {}:{} {}.{} {}.{}",
            path.display(),
            m.dev(),
            m.ino(),
            m.size(),
            m.mode(),
            m.uid(),
            m.gid(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(_) => format!("{} missing", path.display()),
    };
    let mut programs_hash = std::collections::hash_map::DefaultHasher::new();
    programs.hash(&mut programs_hash);
    let setpriv = match drop {
        None => "not root".to_owned(),
        Some(None) => "no setpriv".to_owned(),
        Some(Some(user)) => file(&user.setpriv),
    };
    let reach: Vec<String> = probe.reach.iter().filter(|p| p.exists()).map(|p| p.display().to_string()).collect();
    let lines = [
        FORMAT.to_owned(),
        format!("boot {}", boot.trim()),
        format!("namespaces {} {}", link("/proc/self/ns/user"), link("/proc/self/ns/mnt")),
        format!(
            "ids {}:{} sandbox {}:{}",
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
            probe.sandbox_id.0,
            probe.sandbox_id.1
        ),
        format!("bwrap {}", file(&probe.bwrap)),
        format!("setpriv {setpriv}"),
        format!(
            "userns {} {} {}",
            read("/proc/sys/user/max_user_namespaces"),
            read("/proc/sys/kernel/unprivileged_userns_clone"),
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        ),
        format!("seccomp {} programs {:016x}", read("/proc/sys/kernel/seccomp/actions_avail"), programs_hash.finish()),
        format!("reach {}", reach.join(" ")),
    ];
    Some(lines.iter().map(|line| format!("{}\n", line.replace('\n', " "))).collect())
}

/// Write `text` to `file` whole (a new file renamed over it), readable by the host alone.
fn keep(file: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut new = tempfile::NamedTempFile::new_in(dir)?;
    new.write_all(text.as_bytes())?;
    new.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_verdict_is_used_only_under_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        let probe = Probe { bwrap: "/usr/bin/bwrap".into(), sandbox_id: (65534, 65534), reach: Vec::new(), kept: Some(file.clone()) };
        let programs = [vec![1u8, 2, 3]];
        let mine = key(&probe, None, &programs).expect("a boot id");
        keep(&file, &format!("{mine}bwrap bubblewrap 0.8.0\n")).unwrap();
        let kept = Proven::kept(&file, &mine, &probe).expect("the same key");
        assert_eq!(kept.version.as_deref(), Some("bubblewrap 0.8.0"));
        assert!(kept.user.is_ok() && kept.seccomp.is_ok());
        // Other seccomp programs, another sandbox uid, another bwrap: probed again.
        for other in [
            key(&probe, None, &[vec![1u8, 2, 4]]),
            key(&Probe { sandbox_id: (1000, 1000), ..probe.clone() }, None, &programs),
            key(&Probe { bwrap: "/usr/local/bin/bwrap".into(), ..probe.clone() }, None, &programs),
        ] {
            let other = other.unwrap();
            assert_ne!(other, mine);
            assert!(Proven::kept(&file, &other, &probe).is_none());
        }
        // Anything but one version line after the key is no verdict.
        for tail in ["", "bwrap \n", "bwrap a\nb\n", "uid drop failed\n"] {
            keep(&file, &format!("{mine}{tail}")).unwrap();
            assert!(Proven::kept(&file, &mine, &probe).is_none(), "{tail:?}");
        }
    }
}
