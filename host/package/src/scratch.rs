//! Directories that code no human approved writes into (a forge build, a probe's scratch,
//! a skill loaded by its path), and how the host gets rid of them.
//!
//! - [`remove_tree`] removes a tree whatever its shape: iteratively (a tree 100,000
//!   directories deep costs a few bytes per level, never a stack frame), through open
//!   directory descriptors (no path longer than `PATH_MAX`, no link followed: a link is
//!   removed as a link), stepping back up through `..` only after checking it is the
//!   directory it came from, and bounded in entries ([`MAX_REMOVED`]).
//! - [`ScratchRoot`] is a folder of such directories shared by every host process on a
//!   data dir. Each process holds a shared lock on `<root>/.lock` while it uses the root;
//!   the first one to open it (no other holds the lock) removes whatever is left there: a
//!   host killed mid-run leaves its scratch behind, and the next start sweeps it.
//! - [`ScratchDir`] is one fresh directory in a root, removed when dropped on a thread of
//!   its own, so dropping it never blocks an async runtime, however big the tree.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, CWD, Dir, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

/// The most entries [`remove_tree`] removes before it gives up: far more than any build
/// or probe writes in its time, and a bound on a tree that something keeps growing.
pub const MAX_REMOVED: u64 = 16 << 20;

/// Remove `path` and everything beneath it, without recursion and without following a
/// link (see the module docs). A missing `path` is not an error; a link at `path` is
/// removed, not what it points to. Returns how many entries were removed.
pub fn remove_tree(path: &Path) -> io::Result<u64> {
    let root = match rustix::fs::openat(CWD, path, dir_flags(), Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(0),
        // A link or a file in its place: removed as what it is.
        Err(Errno::NOTDIR | Errno::LOOP) => return remove_entry(CWD, path).map(|()| 1),
        Err(e) => return Err(e.into()),
    };
    let removed = empty_tree(root)?;
    match rustix::fs::unlinkat(CWD, path, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(removed + 1),
        Err(e) => Err(e.into()),
    }
}

/// Remove everything beneath the open directory `root`, depth first, one directory
/// descriptor open at a time.
fn empty_tree(root: OwnedFd) -> io::Result<u64> {
    let mut removed = 0u64;
    let mut current = root;
    // The names walked down from the root, each with the identity of the directory that
    // holds it: the way back up is checked against it.
    let mut path: Vec<(CString, (u64, u64))> = Vec::new();
    loop {
        let next = match first_subdirectory(&current, &mut removed)? {
            Some(name) => name,
            None => {
                // `current` is empty: step up, check where that is, remove it.
                let Some((name, parent_id)) = path.pop() else { return Ok(removed) };
                let parent = rustix::fs::openat(&current, c"..", dir_flags(), Mode::empty())?;
                if identity(&parent)? != parent_id {
                    return Err(io::Error::other("the tree was moved while it was being removed"));
                }
                match rustix::fs::unlinkat(&parent, name.as_c_str(), AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => removed += 1,
                    Err(e) => return Err(e.into()),
                }
                current = parent;
                continue;
            }
        };
        match rustix::fs::openat(&current, next.as_c_str(), dir_flags(), Mode::empty()) {
            Ok(child) => {
                path.push((next, identity(&current)?));
                current = child;
            }
            Err(Errno::NOENT) => {}
            // Replaced by a link or a file since it was listed.
            Err(Errno::NOTDIR | Errno::LOOP) => remove_entry(&current, next.as_c_str())?,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Unlink every entry of `dir` that is not a directory; the name of the first directory
/// found, if any (the caller descends into it and lists `dir` again after).
fn first_subdirectory(dir: &OwnedFd, removed: &mut u64) -> io::Result<Option<CString>> {
    let mut entries = Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            },
            kind => kind,
        };
        if kind == FileType::Directory {
            return Ok(Some(name.to_owned()));
        }
        remove_entry(dir, name)?;
        *removed += 1;
        if *removed > MAX_REMOVED {
            return Err(io::Error::other(format!("more than {MAX_REMOVED} entries: left as it is")));
        }
    }
    Ok(None)
}

fn remove_entry<Fd: AsFd, P: rustix::path::Arg>(dir: Fd, name: P) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let stat = rustix::fs::fstat(fd)?;
    Ok((stat.st_dev, stat.st_ino))
}

/// Remove `path` (see [`remove_tree`]) on a thread of its own; failures are logged.
/// Without a thread to be had, on this one (still without recursion).
pub fn remove_in_background(path: PathBuf) {
    let on_thread = path.clone();
    let spawned = std::thread::Builder::new().name("skillhost-remove".into()).spawn(move || remove_logged(&on_thread));
    if spawned.is_err() {
        remove_logged(&path);
    }
}

fn remove_logged(path: &Path) {
    if let Err(error) = remove_tree(path) {
        tracing::warn!(path = %path.display(), %error, "cannot remove a scratch directory");
    }
}

/// A folder of scratch directories (see the module docs): opened by each process that
/// makes scratch directories in it, swept by the first.
#[derive(Debug)]
pub struct ScratchRoot {
    dir: PathBuf,
    /// Holds the shared lock on `<dir>/.lock` while this process uses the root.
    _lock: File,
}

impl ScratchRoot {
    /// Open (create) the root at `dir`. When no other process uses it, everything left
    /// in it is removed, in the background.
    pub fn open(dir: &Path) -> io::Result<Arc<Self>> {
        std::fs::create_dir_all(dir)?;
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(".lock"))?;
        if rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
            // No other process uses the root: what is in it was left by one that died.
            for entry in std::fs::read_dir(dir)?.flatten() {
                if entry.file_name() != ".lock" {
                    remove_in_background(entry.path());
                }
            }
        }
        rustix::fs::flock(&lock, FlockOperation::LockShared)?;
        Ok(Arc::new(Self { dir: dir.to_owned(), _lock: lock }))
    }

    /// Its folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A fresh, empty directory in the root (mode 0700), named `<prefix>XXXXXX`.
    pub fn dir(self: &Arc<Self>, prefix: &str) -> io::Result<ScratchDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(&self.dir)?.keep();
        Ok(ScratchDir { path: dir, _root: self.clone() })
    }
}

/// One scratch directory (see the module docs): removed, off the caller's thread, when
/// dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    _root: Arc<ScratchRoot>,
}

impl ScratchDir {
    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove_in_background(std::mem::take(&mut self.path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree deeper than a recursion fits in the stack it runs on, and than `PATH_MAX`:
    /// `a/a/a/…` 3,000 levels (6,000 bytes of path), a file at each hundredth, a link
    /// pointing out at the bottom, removed on a thread with a 64 KiB stack.
    #[test]
    fn removes_a_tree_deeper_than_a_stack_without_following_links() {
        let top = tempfile::tempdir().unwrap();
        let outside = top.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"x").unwrap();
        let tree = top.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        let mut dir = rustix::fs::openat(CWD, &tree, dir_flags(), Mode::empty()).unwrap();
        for level in 0..3_000 {
            rustix::fs::mkdirat(&dir, c"a", Mode::from_raw_mode(0o755)).unwrap();
            if level % 100 == 0 {
                let file = rustix::fs::openat(&dir, c"f", OFlags::CREATE | OFlags::WRONLY, Mode::from_raw_mode(0o644)).unwrap();
                drop(file);
            }
            dir = rustix::fs::openat(&dir, c"a", dir_flags(), Mode::empty()).unwrap();
        }
        rustix::fs::symlinkat(&outside, &dir, c"out").unwrap();
        drop(dir);
        let removed = std::thread::Builder::new().stack_size(64 << 10).spawn(move || remove_tree(&tree)).unwrap().join().unwrap().unwrap();
        assert_eq!(removed, 3_000 + 30 + 1 + 1);
        assert!(!top.path().join("tree").exists());
        assert!(outside.join("keep").exists(), "the link's target is untouched");
    }

    #[test]
    fn a_link_in_place_of_the_tree_is_removed_as_a_link() {
        let top = tempfile::tempdir().unwrap();
        std::fs::create_dir(top.path().join("target")).unwrap();
        std::fs::write(top.path().join("target/keep"), b"x").unwrap();
        std::os::unix::fs::symlink(top.path().join("target"), top.path().join("link")).unwrap();
        assert_eq!(remove_tree(&top.path().join("link")).unwrap(), 1);
        assert!(top.path().join("target/keep").exists());
        assert_eq!(remove_tree(&top.path().join("missing")).unwrap(), 0);
    }

    #[test]
    fn the_first_process_on_a_root_sweeps_what_a_dead_one_left() {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("scratch");
        std::fs::create_dir_all(root.join("left-behind/deep/er")).unwrap();
        let first = ScratchRoot::open(&root).unwrap();
        let mine = first.dir("run-").unwrap();
        // A second user of the root (another process: flock locks belong to the open
        // file description) sweeps nothing while the first holds it.
        let second = ScratchRoot::open(&root).unwrap();
        let theirs = second.dir("run-").unwrap();
        for _ in 0..500 {
            if !root.join("left-behind").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!root.join("left-behind").exists(), "swept at the first open");
        assert!(mine.path().is_dir() && theirs.path().is_dir(), "live scratch is never swept");
        let path = mine.path().to_owned();
        drop(mine);
        for _ in 0..500 {
            if !path.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!path.exists(), "removed when dropped");
    }
}
