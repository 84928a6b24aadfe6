//! Writing what a sandbox produced onto the host: a run's files saved with `--out`.
//!
//! The host may run as root, and a skill granted a writable host directory can plant a
//! link there while it runs (at the folder the files are saved into, or inside it). So
//! the target folder is opened once, before the sandbox starts, without following a link
//! at its last component, and held as a descriptor; everything below it is created
//! relative to that descriptor with the walls of
//! [`dir_beneath`](skillhost_core::dir_beneath) (no link, `..` or non-directory at any
//! component), and each file with `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing that
//! already exists (a link, a hard link to a root file, a file the run left) is written
//! through. The check and the write are one descriptor, never two looks at a path.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::Errno;
use skillhost_core::Beneath;

/// Why a file could not be written into an [`OutDir`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The folder, or a component below it, is a link (or not a directory): nothing is
    /// written through it.
    #[error("{}: it, or a folder on its way, is a link or not a directory; nothing is written through a link (give the path without links: `realpath`)", path.display())]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// Something already exists where a file was to be created.
    #[error("{}: already exists; save into a new or empty folder", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The folder given holds files already.
    #[error("{}: the folder is not empty; give a new or empty one", path.display())]
    NotEmpty {
        /// The folder.
        path: PathBuf,
    },
    /// A path below the folder is not a plain relative path.
    #[error("{}: {reason}", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: &'static str,
    },
    /// Any other file system error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A new or empty folder, opened once, that files are written below without following a
/// link anywhere (see the module docs).
#[derive(Debug)]
pub struct OutDir {
    fd: OwnedFd,
    path: PathBuf,
    created: bool,
}

/// Mode of the folders and files written: what a user's own tool would make.
const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;
const EXECUTABLE_MODE: u32 = 0o755;

impl OutDir {
    /// Open `path` for writing: created when missing (its parent must exist), or an
    /// existing empty folder. No component of `path` may be a link (a run may have
    /// planted one in a folder above it, on an earlier run): give the path without links.
    pub fn create(path: &Path) -> Result<Self, WriteError> {
        use rustix::fs::ResolveFlags;
        let io = |source: Errno| WriteError::Io { path: path.to_owned(), source: source.into() };
        let link = |e: Errno| match e {
            Errno::LOOP | Errno::NOTDIR => WriteError::Link { path: path.to_owned() },
            e => io(e),
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(WriteError::BadPath { path: path.to_owned(), reason: "names no folder" });
        };
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let parent = rustix::fs::openat2(CWD, parent, flags, Mode::empty(), resolve).map_err(link)?;
        let open = || rustix::fs::openat(&parent, name, flags, Mode::empty());
        let (fd, created) = match open() {
            Err(Errno::NOENT) => match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) => (open(), true),
                Err(e) => return Err(io(e)),
            },
            opened => (opened, false),
        };
        let fd = fd.map_err(link)?;
        let dir = Self { fd, path: path.to_owned(), created };
        if !created && dir.has_entries()? {
            return Err(WriteError::NotEmpty { path: path.to_owned() });
        }
        Ok(dir)
    }

    /// The folder's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the folder holds anything now.
    fn has_entries(&self) -> Result<bool, WriteError> {
        let io = |source: Errno| WriteError::Io { path: self.path.clone(), source: source.into() };
        let mut dir = rustix::fs::Dir::read_from(&self.fd).map_err(io)?;
        while let Some(entry) = dir.read() {
            let name = entry.map_err(io)?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Write `bytes` as the new file `relative` (plain `/`-separated names), mode 0644 or
    /// (`executable`) 0755 under the umask, creating the folders on its way: its path on
    /// the host.
    pub fn write(&self, relative: &str, bytes: &[u8], executable: bool) -> Result<PathBuf, WriteError> {
        let shown = self.path.join(relative);
        skillhost_core::run::check_relative(relative).map_err(|reason| WriteError::BadPath { path: shown.clone(), reason })?;
        let relative = Path::new(relative);
        let (parent, name) = match (relative.parent(), relative.file_name()) {
            (Some(parent), Some(name)) => (parent, name),
            _ => return Err(WriteError::BadPath { path: shown, reason: "names no file" }),
        };
        let dir = skillhost_core::dir_beneath(&self.fd, parent, DIR_MODE).map_err(|e| match e {
            Beneath::Link(at) => WriteError::Link { path: self.path.join(at) },
            Beneath::Io(source) => WriteError::Io { path: self.path.join(parent), source },
        })?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = if executable { EXECUTABLE_MODE } else { FILE_MODE };
        let fd = rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(mode)).map_err(|e| match e {
            Errno::EXIST => WriteError::Exists { path: shown.clone() },
            Errno::LOOP => WriteError::Link { path: shown.clone() },
            e => WriteError::Io { path: shown.clone(), source: e.into() },
        })?;
        std::fs::File::from(fd).write_all(bytes).map_err(|source| WriteError::Io { path: shown.clone(), source })?;
        Ok(shown)
    }

    /// Remove the folder if this opened it new and nothing was written (a run that failed):
    /// only while it is still the folder opened, never through a link swapped in.
    pub fn discard_if_unused(self) {
        if !self.created || self.has_entries().unwrap_or(true) {
            return;
        }
        let same = |a: &rustix::fs::Stat, b: &rustix::fs::Stat| a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        let now = rustix::fs::statat(CWD, &self.path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
        if let (Ok(now), Ok(held)) = (now, rustix::fs::fstat(&self.fd))
            && same(&now, &held)
        {
            let _ = rustix::fs::unlinkat(CWD, &self.path, rustix::fs::AtFlags::REMOVEDIR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_below_the_folder_opened_never_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let out = OutDir::create(&root.path().join("out")).unwrap();
        assert_eq!(out.write("a/b/c.txt", b"one", false).unwrap(), root.path().join("out/a/b/c.txt"));
        assert_eq!(std::fs::read(root.path().join("out/a/b/c.txt")).unwrap(), b"one");

        // The folder swapped for a link after it was opened: writes still land in the
        // folder opened (moved aside), never where the link points.
        std::fs::rename(root.path().join("out"), root.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("out")).unwrap();
        out.write("d.txt", b"two", false).unwrap();
        out.write("run.sh", b"#!/bin/sh\n", true).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |name: &str| std::fs::metadata(root.path().join("moved").join(name)).unwrap().permissions().mode() & 0o777;
            assert_eq!((mode("d.txt") & 0o111, mode("run.sh") & 0o100), (0, 0o100), "the executable bit is kept, only where it was");
        }
        assert!(root.path().join("moved/d.txt").is_file());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0, "nothing written through the link");

        // A link below it, at a folder or at the file itself: refused, naming it.
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("moved/sub")).unwrap();
        let err = out.write("sub/e.txt", b"x", false).unwrap_err();
        assert!(matches!(&err, WriteError::Link { path } if path.ends_with("sub")), "{err}");
        std::os::unix::fs::symlink(elsewhere.path().join("f.txt"), root.path().join("moved/f.txt")).unwrap();
        let err = out.write("f.txt", b"x", false).unwrap_err();
        assert!(matches!(err, WriteError::Exists { .. }), "{err}");
        // A hard link (or any file) already there is not written through either.
        std::fs::write(elsewhere.path().join("g.txt"), b"theirs").unwrap();
        std::fs::hard_link(elsewhere.path().join("g.txt"), root.path().join("moved/g.txt")).unwrap();
        assert!(matches!(out.write("g.txt", b"x", false).unwrap_err(), WriteError::Exists { .. }));
        assert_eq!(std::fs::read(elsewhere.path().join("g.txt")).unwrap(), b"theirs");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1);
        assert!(matches!(out.write("../x", b"x", false).unwrap_err(), WriteError::BadPath { .. }));
    }

    #[test]
    fn the_folder_given_must_not_be_a_link_nor_hold_files() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("link")).unwrap();
        assert!(matches!(OutDir::create(&root.path().join("link")).unwrap_err(), WriteError::Link { .. }));
        // A link in a folder above it (planted by an earlier run) is refused too.
        assert!(matches!(OutDir::create(&root.path().join("link/sub")).unwrap_err(), WriteError::Link { .. }));
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        std::fs::create_dir(root.path().join("full")).unwrap();
        std::fs::write(root.path().join("full/x"), b"").unwrap();
        assert!(matches!(OutDir::create(&root.path().join("full")).unwrap_err(), WriteError::NotEmpty { .. }));
        std::fs::create_dir(root.path().join("empty")).unwrap();
        OutDir::create(&root.path().join("empty")).unwrap().discard_if_unused();
        assert!(root.path().join("empty").is_dir(), "a folder that was there is kept");
        OutDir::create(&root.path().join("new")).unwrap().discard_if_unused();
        assert!(!root.path().join("new").exists(), "a folder made for a run that wrote nothing is removed");
    }
}
