//! Why a skill could not be read from disk.

use std::path::{Path, PathBuf};

use skillhost_core::LoadError;

/// Why a skill's files could not be read, or do not make a skill.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A symbolic link inside a skill (or the skill itself is one).
    #[error("{}: symbolic links are not allowed in a skill; replace it with a copy of the file", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Something that is neither a regular file nor a directory (a fifo, a socket, a device).
    #[error("{}: not a regular file or directory; remove it from the skill", path.display())]
    SpecialFile {
        /// The file.
        path: PathBuf,
    },
    /// A path that would leave the skill (`..`, absolute) or is not UTF-8.
    #[error("{}: {reason}; install a skill by the path of its folder or `.wasm` file", path.display())]
    BadPath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A file or a skill is larger than the configured cap.
    #[error("{}: {what} is {size} bytes, more than the {limit} allowed; {fix}", path.display())]
    TooLarge {
        /// The file or skill.
        path: PathBuf,
        /// What was measured (`this file`, `the skill's text`, `the component`).
        what: &'static str,
        /// Its size, in bytes.
        size: u64,
        /// The cap, in bytes.
        limit: u64,
        /// How to get under it.
        fix: &'static str,
    },
    /// The folder holds no code: neither a skill.toml nor a skill.wasm (a folder with only
    /// SKILL.md is an instruction-only skill, which the registry serves).
    #[error("{}: no code to load; a skill with code is a `.wasm` file with an embedded manifest, or a folder with skill.toml (+ skill.wasm, or a `[server]`)", path.display())]
    NoCode {
        /// The folder.
        path: PathBuf,
    },
    /// The files were read but do not make a skill that loads.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A file system operation failed.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`cannot read`).
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl ReadError {
    /// Wrap an I/O error on `path`.
    pub fn io(path: impl AsRef<Path>, action: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.as_ref().to_owned();
        move |source| ReadError::Io { path, action, source }
    }
}
