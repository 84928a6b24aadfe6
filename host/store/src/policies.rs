//! [`PolicyStore`]: what a human decided about a skill's scripts, kept outside every skill
//! folder: its run policy (`skillhost policy`), the packages resolved for it before the
//! human was asked, and the files its last approval covered. [`FilePolicies`] keeps them
//! in `<data_dir>/policies` (one host); [`PgPolicies`](crate::postgres::PgPolicies) in the
//! database the replicas share, a change told to every host like a trust change.

use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// Which record of a skill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kept {
    /// Its run policy (TOML), written by `skillhost policy`.
    Policy,
    /// The packages resolved for its scripts (TOML).
    Lock,
    /// Path → SHA-256 of the files its last approval covered (JSON).
    ApprovedFiles,
}

impl Kept {
    /// The file name suffix, and the record's kind in the database.
    pub fn suffix(self) -> &'static str {
        match self {
            Kept::Policy => "toml",
            Kept::Lock => "lock",
            Kept::ApprovedFiles => "approved-files.json",
        }
    }
}

/// The records of skills' scripts, by skill identity.
pub trait PolicyStore: Send + Sync {
    /// The record, if there is one.
    fn read(&self, identity: &str, kept: Kept) -> Result<Option<String>, StoreError>;

    /// Replace the record.
    fn write(&self, identity: &str, kept: Kept, text: &str) -> Result<(), StoreError>;

    /// Where the record is, as messages name it: a file, or a row of the database.
    fn place(&self, identity: &str, kept: Kept) -> PathBuf;
}

/// Records as files in a directory (`<data_dir>/policies`), each written atomically.
pub struct FilePolicies {
    dir: PathBuf,
}

/// Largest record read (a lock of many packages with their hashes).
const MAX_RECORD: u64 = 4 << 20;

impl FilePolicies {
    /// Records in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> StoreError + 'a {
        move |source| StoreError::Io { path: path.to_owned(), action, source }
    }
}

impl PolicyStore for FilePolicies {
    fn read(&self, identity: &str, kept: Kept) -> Result<Option<String>, StoreError> {
        let path = self.place(identity, kept);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::io(&path, "cannot read it")(e)),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_RECORD), &mut text).map_err(Self::io(&path, "cannot read it"))?;
        Ok(Some(text))
    }

    fn write(&self, identity: &str, kept: Kept, text: &str) -> Result<(), StoreError> {
        let path = self.place(identity, kept);
        // A scoped identity (`.workspace-…/name`) is a folder of its own.
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir).map_err(Self::io(dir, "cannot create the policies directory"))?;
        let staged = tempfile::NamedTempFile::new_in(dir).map_err(Self::io(dir, "cannot write in it"))?;
        std::fs::write(staged.path(), text).map_err(Self::io(&path, "cannot write it"))?;
        staged.persist(&path).map_err(|e| Self::io(&path, "cannot write it")(e.error))?;
        Ok(())
    }

    fn place(&self, identity: &str, kept: Kept) -> PathBuf {
        self.dir.join(format!("{identity}.{}", kept.suffix()))
    }
}
