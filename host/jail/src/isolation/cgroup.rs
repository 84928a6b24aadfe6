//! A cgroup per sandbox: memory (resident, the whole tree, no swap), processes and CPU
//! bandwidth, on cgroup v2 (one unified tree) or v1 (one tree per controller), nested
//! under the host's own cgroup in each tree as `skillhost/<name>-<pid>-<n>`.
//!
//! The sandbox's first process joins the cgroup before it executes anything (its
//! `cgroup.procs` files are opened by the host and written from the child just before
//! exec, see [`super::attach`]), so every process bwrap and the server fork is counted.
//! [`ServerCgroup::kill`] kills the whole tree (v2 `cgroup.kill`, else `SIGKILL` to every
//! member until none is left) and dropping a [`ServerCgroup`] kills and removes it.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The controllers a sandbox's cgroup limits.
pub const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// The limits of one sandbox's cgroup.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgroupLimits {
    /// Resident memory of every process together, bytes (no swap).
    pub memory: u64,
    /// Processes and threads together.
    pub pids: u64,
    /// CPU bandwidth in cores (1.0: one core's worth of time per period).
    pub cpus: f64,
}

/// Which hierarchy holds a controller.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tree {
    /// cgroup v1: the controller's own mount.
    V1,
    /// cgroup v2: the unified mount.
    V2,
}

/// Where the host may create sandboxes' cgroups, per controller.
#[derive(Clone, Debug)]
pub struct Cgroups {
    /// `(controller, tree, the host's skillhost/ directory in that tree)`; one entry per
    /// controller (for v2 they share the directory).
    parents: Vec<(&'static str, Tree, PathBuf)>,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Cgroups {
    /// Find the controllers this process may create child cgroups under: for each of
    /// memory, pids and cpu, a v1 mount or the v2 tree with it enabled; create
    /// `skillhost/` under the host's own cgroup there. Controllers that cannot be used
    /// are returned with why.
    pub fn detect() -> (Option<Self>, Vec<String>) {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut parents = Vec::new();
        let mut problems = Vec::new();
        let v2 = mounts.lines().find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
        });
        let v2_own = own.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim().to_owned());
        for controller in CONTROLLERS {
            let v1 = mounts.lines().find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == controller)).then(|| PathBuf::from(f[1]))
            });
            let found = if let Some(mount) = v1 {
                let path = own.lines().find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
                    names.split(',').any(|n| n == controller).then(|| path.trim().to_owned())
                });
                Some((Tree::V1, mount.join(path.unwrap_or_default().trim_start_matches('/'))))
            } else if let (Some(mount), Some(path)) = (&v2, &v2_own) {
                let own_dir = mount.join(path.trim_start_matches('/'));
                let enabled = std::fs::read_to_string(own_dir.join("cgroup.controllers")).unwrap_or_default();
                if enabled.split_whitespace().any(|c| c == controller) {
                    Some((Tree::V2, own_dir))
                } else {
                    problems.push(format!("{controller}: not enabled in the host's cgroup v2 ({})", own_dir.display()));
                    None
                }
            } else {
                problems.push(format!("{controller}: no cgroup v1 mount and no cgroup v2 tree"));
                None
            };
            let Some((tree, own_dir)) = found else { continue };
            let dir = own_dir.join("skillhost");
            match prepare_parent(&tree, &own_dir, &dir, controller) {
                Ok(()) => {
                    // Made again by the first sandbox: nothing is left in the host's
                    // cgroup while no sandbox runs.
                    let _ = std::fs::remove_dir(&dir);
                    parents.push((controller, tree, dir));
                }
                Err(e) => problems.push(format!("{controller}: cannot create {}: {e}", dir.display())),
            }
        }
        let found = (!parents.is_empty()).then_some(Self { parents });
        (found, problems)
    }

    /// Which controllers, and in which tree (`memory (v1)`…), for reports.
    pub fn describe(&self) -> Vec<String> {
        self.parents.iter().map(|(c, t, _)| format!("{c} ({})", if *t == Tree::V1 { "v1" } else { "v2" })).collect()
    }

    /// Whether memory is limited by these cgroups.
    pub fn has(&self, controller: &str) -> bool {
        self.parents.iter().any(|(c, ..)| *c == controller)
    }

    /// Create the cgroup of one sandbox named after `name`, with `limits` set.
    pub fn create(&self, name: &str, limits: &CgroupLimits) -> std::io::Result<ServerCgroup> {
        let base: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let leaf = self.free_leaf(&base)?;
        let mut group = ServerCgroup { dirs: Vec::new(), procs: Vec::new(), memory: None, oom_at_start: 0 };
        for (controller, tree, parent) in &self.parents {
            let dir = parent.join(&leaf);
            if !group.dirs.iter().any(|(d, _)| *d == dir) {
                if let Err(e) = std::fs::create_dir(&dir) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(e);
                    }
                    // The last sandbox removed `skillhost/` just now: make it again.
                    for (c, t, p) in self.parents.iter().filter(|(_, _, p)| p == parent) {
                        prepare_parent(t, p.parent().unwrap_or(p), p, c)?;
                    }
                    std::fs::create_dir(&dir)?;
                }
                group.dirs.push((dir.clone(), tree.clone()));
                group.procs.push(File::options().write(true).open(dir.join("cgroup.procs"))?);
            }
            set_limit(&dir, tree, controller, limits)?;
            if *controller == "memory" {
                group.memory = Some((dir.clone(), tree.clone()));
            }
        }
        group.oom_at_start = group.oom_kills();
        Ok(group)
    }
}

impl Cgroups {
    /// A leaf name `<base>-<pid>-<n>` that no parent holds. The pid is this process's and
    /// `n` is never issued twice in it, so a directory of that name was left by a host
    /// killed with its sandboxes that had the same pid (pids wrap): it is removed when
    /// empty, else the next `n` is taken.
    fn free_leaf(&self, base: &str) -> std::io::Result<String> {
        for _ in 0..64 {
            let leaf = format!("{base}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
            // On v2 the controllers share one parent: a directory removed for the first is
            // gone for the others.
            let gone = |dir: PathBuf| match std::fs::remove_dir(dir) {
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                Ok(()) => true,
            };
            if self.parents.iter().all(|(_, _, parent)| gone(parent.join(&leaf))) {
                return Ok(leaf);
            }
        }
        Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, format!("every cgroup name for `{base}` is held by a live cgroup")))
    }
}

/// Make `dir` (`skillhost/` under the host's own cgroup) and, for v2, enable the
/// controller for its children.
fn prepare_parent(tree: &Tree, own: &Path, dir: &Path, controller: &str) -> std::io::Result<()> {
    if *tree == Tree::V2 {
        // v2 enables a controller for children only through every parent's
        // `cgroup.subtree_control`, and a cgroup with processes cannot (the host must
        // run in a leaf of a delegated subtree, e.g. a systemd unit with Delegate=yes).
        let enabled = std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == controller) {
            std::fs::write(own.join("cgroup.subtree_control"), format!("+{controller}"))?;
        }
    }
    // Another thread may remove `skillhost/` (its last sandbox ended) in between: retry.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let made = (|| {
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            if *tree == Tree::V2 {
                std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"))?;
            }
            // Prove a child can be made here (a delegated or root-owned tree).
            let probe = dir.join(format!(".probe-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
            std::fs::create_dir(&probe)?;
            let _ = std::fs::remove_dir(&probe);
            Ok(())
        })();
        match made {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempts < 5 => continue,
            other => return other,
        }
    }
}

fn set_limit(dir: &Path, tree: &Tree, controller: &str, limits: &CgroupLimits) -> std::io::Result<()> {
    let write = |file: &str, value: String| std::fs::write(dir.join(file), value);
    match (controller, tree) {
        ("memory", Tree::V1) => {
            write("memory.limit_in_bytes", limits.memory.to_string())?;
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                write("memory.memsw.limit_in_bytes", limits.memory.to_string())?;
            }
        }
        ("memory", Tree::V2) => {
            write("memory.max", limits.memory.to_string())?;
            if dir.join("memory.swap.max").exists() {
                write("memory.swap.max", "0".into())?;
            }
        }
        ("pids", _) => write("pids.max", limits.pids.to_string())?,
        ("cpu", Tree::V1) => {
            write("cpu.cfs_period_us", "100000".into())?;
            write("cpu.cfs_quota_us", ((limits.cpus * 100_000.0) as u64).max(1000).to_string())?;
        }
        ("cpu", Tree::V2) => write("cpu.max", format!("{} 100000", ((limits.cpus * 100_000.0) as u64).max(1000)))?,
        _ => {}
    }
    Ok(())
}

/// One sandbox's cgroup (one directory per tree). Dropping it kills every process in it
/// and removes it.
#[derive(Debug)]
pub struct ServerCgroup {
    dirs: Vec<(PathBuf, Tree)>,
    /// Its `cgroup.procs` files, open for the sandbox's first process to join.
    procs: Vec<File>,
    memory: Option<(PathBuf, Tree)>,
    oom_at_start: u64,
}

impl ServerCgroup {
    /// The open `cgroup.procs` files (for [`super::attach`]).
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// Its directories (one per tree).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(d, _)| d.clone()).collect()
    }

    /// Processes killed by the kernel for hitting the memory limit since it was made.
    pub fn oom_kills(&self) -> u64 {
        let Some((dir, tree)) = &self.memory else { return 0 };
        let (file, key) = match tree {
            Tree::V1 => ("memory.oom_control", "oom_kill"),
            Tree::V2 => ("memory.events", "oom_kill"),
        };
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        let count = text.lines().find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok()).unwrap_or(0);
        count.saturating_sub(self.oom_at_start)
    }

    /// Times a fork or clone in it failed at its `pids.max` since it was made.
    pub fn pids_max_hits(&self) -> u64 {
        self.dirs
            .iter()
            .filter_map(|(dir, _)| std::fs::read_to_string(dir.join("pids.events")).ok())
            .filter_map(|text| text.lines().find_map(|l| l.strip_prefix("max")?.trim().parse::<u64>().ok()))
            .sum()
    }

    /// Peak resident memory of the tree, bytes, where the kernel reports it.
    pub fn memory_peak(&self) -> Option<u64> {
        let (dir, tree) = self.memory.as_ref()?;
        let file = if *tree == Tree::V1 { "memory.max_usage_in_bytes" } else { "memory.peak" };
        std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    }

    /// The processes in it now.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        for (dir, _) in &self.dirs {
            let text = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kill every process in it, waiting (up to 2 s) until none is left.
    pub fn kill(&self) {
        for (dir, tree) in &self.dirs {
            if *tree == Tree::V2 && dir.join("cgroup.kill").exists() {
                let _ = std::fs::File::options().write(true).open(dir.join("cgroup.kill")).and_then(|mut f| f.write_all(b"1"));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() > deadline {
                if !pids.is_empty() {
                    tracing::warn!(cgroup = ?self.dirs(), left = pids.len(), "processes survived SIGKILL");
                }
                return;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        self.kill();
        self.procs.clear();
        for (dir, _) in &self.dirs {
            // Exited members leave asynchronously: retry briefly.
            for _ in 0..100 {
                match std::fs::remove_dir(dir) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    Ok(()) => break,
                }
            }
            // `skillhost/` goes with the last sandbox (it fails while others remain): the
            // host leaves its own cgroup as it found it.
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host killed with its sandboxes leaves their cgroups behind, named with its pid.
    /// A later host that gets the same pid (pids wrap, at 32768 on these machines) must
    /// still start its sandboxes: an empty cgroup of the name it picks is removed.
    #[test]
    fn a_cgroup_left_by_a_killed_host_with_the_same_pid_is_no_obstacle() {
        let (groups, problems) = Cgroups::detect();
        let Some(groups) = groups else {
            eprintln!("SKIPPED: no cgroup this process may create ({problems:?})");
            return;
        };
        let next = NEXT.load(Ordering::Relaxed);
        let mut stale = Vec::new();
        for (controller, tree, parent) in &groups.parents {
            prepare_parent(tree, parent.parent().unwrap(), parent, controller).unwrap();
            for n in next..next + 4 {
                let dir = parent.join(format!("left-behind-{}-{n}", std::process::id()));
                if !stale.contains(&dir) {
                    std::fs::create_dir(&dir).unwrap();
                    stale.push(dir);
                }
            }
        }
        let limits = CgroupLimits { memory: 64 << 20, pids: 16, cpus: 1.0 };
        let group = groups.create("left-behind", &limits);
        let left: Vec<_> = stale.iter().filter(|d| d.exists()).cloned().collect();
        for dir in &left {
            let _ = std::fs::remove_dir(dir);
        }
        let group = group.expect("a cgroup left by a dead host of the same pid stops no sandbox");
        assert!(group.dirs.iter().all(|(dir, _)| stale.contains(dir)), "the name was not one a dead host left: {:?}", group.dirs);
    }
}
