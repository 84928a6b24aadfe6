//! Reading a skill's files without ever following a symlink, even one swapped in while
//! the skill is being read (a TOCTOU race against a check-then-open).
//!
//! Each file is classified with `lstat` relative to an already-open directory, then
//! opened relative to that same directory with `O_NOFOLLOW` (and `O_NONBLOCK`, so a fifo
//! cannot block the host), and the open file must be the inode that was classified. A
//! directory is walked through its open descriptor, never by path again, so swapping a
//! subdirectory for a link to `~/.ssh` mid-walk changes nothing that is read.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::ReadError;

/// What a path holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// An entry classified but not yet opened: what `lstat` saw.
pub struct Seen {
    /// File or directory.
    pub kind: Kind,
    /// Its size when classified.
    pub len: u64,
    stat: Stat,
}

fn io_error(path: &Path) -> impl FnOnce(Errno) -> ReadError {
    let path = path.to_owned();
    move |e| ReadError::io(path, "cannot read")(e.into())
}

/// Classify `name` inside `dir` (or a path from the working directory with [`CWD`])
/// without following a final symlink. Symlinks and special files are refused.
pub fn classify(dir: impl AsFd, name: &CStr, path: &Path) -> Result<Seen, ReadError> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io_error(path))?;
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::Symlink => return Err(ReadError::Symlink { path: path.to_owned() }),
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        _ => return Err(ReadError::SpecialFile { path: path.to_owned() }),
    };
    Ok(Seen { kind, len: stat.st_size as u64, stat })
}

/// Open what [`classify`] saw; refuse a symlink or any other inode put there since.
pub fn open(dir: impl AsFd, name: &CStr, path: &Path, seen: &Seen) -> Result<OwnedFd, ReadError> {
    let mut flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    if seen.kind == Kind::Dir {
        flags |= OFlags::DIRECTORY;
    }
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| match e {
        Errno::LOOP | Errno::NOTDIR => ReadError::Symlink { path: path.to_owned() },
        e => io_error(path)(e),
    })?;
    let now = rustix::fs::fstat(&fd).map_err(io_error(path))?;
    if (now.st_dev, now.st_ino) != (seen.stat.st_dev, seen.stat.st_ino) {
        return Err(ReadError::io(path, "cannot read")(std::io::Error::other(
            "it was replaced while being read; read it again once it is written",
        )));
    }
    Ok(fd)
}

/// Read at most `cap + 1` bytes of an open file, so a file that grew past its cap since
/// it was classified is seen to be over it without reading all of it.
pub fn read_capped(fd: OwnedFd, cap: u64, path: &Path) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    File::from(fd).take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::io(path, "cannot read"))?;
    Ok(bytes)
}

/// The names in an open directory, without `.` and `..`.
pub fn names(dir: &OwnedFd, path: &Path) -> Result<Vec<CString>, ReadError> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir).map_err(io_error(path))? {
        let name = entry.map_err(io_error(path))?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

/// A path's bytes as a C string (paths with NUL cannot exist on disk).
pub fn c_path(path: &Path, shown: &Path) -> Result<CString, ReadError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ReadError::BadPath { path: shown.to_owned(), reason: "the path contains a NUL byte" })
}

/// Classify and open a path given from the working directory (a skill's root, a `.wasm`).
pub fn open_path(path: &Path) -> Result<(Seen, OwnedFd), ReadError> {
    let c = c_path(path, path)?;
    let seen = classify(CWD, &c, path)?;
    let fd = open(CWD, &c, path, &seen)?;
    Ok((seen, fd))
}

/// Read the regular file at `path`, at most `cap` bytes, refusing a symlink (at its last
/// step) or a special file: how a project's own `skill.toml` and SKILL.md are read when
/// `skillhost build` packages them. A missing file is [`ReadError::Io`] of kind
/// `NotFound`.
pub fn read_file(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (seen, fd) = open_path(path)?;
    if seen.kind != Kind::File {
        return Err(ReadError::SpecialFile { path: path.to_owned() });
    }
    crate::check_size(path, "this file", seen.len, cap)?;
    let bytes = read_capped(fd, cap, path)?;
    crate::check_size(path, "this file", bytes.len() as u64, cap)?;
    Ok(bytes)
}
