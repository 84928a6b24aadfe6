//! [`RegistryError`]: every way the registry can refuse or fail, each one line naming the
//! skill or file and the fix.

use std::path::PathBuf;

use skillhost_core::{CallError, LoadError, NameError};
use skillhost_package::ReadError;

use skillhost_store::{StoreError, TrustState};

use crate::skillmd::RuleError;

/// Why the registry could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No skill has that name in any layer.
    #[error("no skill named `{name}`; run `skillhost list` to see the skills")]
    UnknownSkill {
        /// The name asked for.
        name: String,
    },
    /// The skill exists but its trust state forbids calls.
    #[error("skill `{name}` {}; {}", state.describe(), state.fix(name))]
    NotCallable {
        /// The skill.
        name: String,
        /// Its trust state.
        state: TrustState,
    },
    /// The skill is instructions only (a SKILL.md): it has no tools to call.
    #[error("skill `{name}` has instructions only (SKILL.md) and no tools; read its instructions instead of calling it")]
    InstructionsOnly {
        /// The skill.
        name: String,
    },
    /// The skill is a SKILL.md skill with scripts: it has no tools, its scripts run.
    #[error(
        "skill `{name}` has scripts and no tools; run them with `skillhost run {name} -- COMMAND` (or the `skill_run` tool), as its SKILL.md says"
    )]
    ScriptsOnly {
        /// The skill.
        name: String,
    },
    /// The skill has nothing to run (no scripts).
    #[error("skill `{name}` has no scripts to run: {reason}")]
    NotRunnable {
        /// The skill.
        name: String,
        /// What it is instead, and what to do.
        reason: String,
    },
    /// Its scripts cannot run as written: a declared package or its skill.toml is wrong.
    #[error("skill `{name}` cannot run its scripts as written: {reason}")]
    BadScripts {
        /// The skill.
        name: String,
        /// Which file and what to change.
        reason: String,
    },
    /// A run of its scripts was refused or stopped.
    #[error(transparent)]
    Run(#[from] skillhost_core::RunError),
    /// Its run policy cannot be read or written.
    #[error("skill `{name}`: its run policy {}: {reason}", path.display())]
    Policy {
        /// The skill.
        name: String,
        /// The policy file.
        path: PathBuf,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// Team mode: the skill's files are not what the lockfile pins (or it names no such
    /// skill), so it is not served.
    #[error(
        "skill `{name}` is not served: {why}; run `skillhost sync --lock {}` so that this host has the locked bytes (or change the lock), so every replica serves the same",
        lock.display()
    )]
    NotAsLocked {
        /// The skill.
        name: String,
        /// The lockfile.
        lock: std::path::PathBuf,
        /// How its files differ from the lock.
        why: String,
    },
    /// The skill has never loaded, so there is nothing to call or approve.
    #[error("skill `{name}` is not loaded: {reason}")]
    NotLoaded {
        /// The skill.
        name: String,
        /// Its load error.
        reason: String,
    },
    /// The skill could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A name is not a valid skill name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A skill's file or folder name and the name in its manifest differ.
    #[error("{}: the skill is named `{declared}` but its file or folder is named `{expected}`; rename one so they match", path.display())]
    NameMismatch {
        /// The skill's file or folder.
        path: PathBuf,
        /// The name its location gives.
        expected: String,
        /// The name its manifest declares.
        declared: String,
    },
    /// A skill's files could not be read: a symbolic link, a special file, a path out of
    /// the skill, a file over its size cap.
    #[error(transparent)]
    Read(ReadError),
    /// A SKILL.md or skill-pack file breaks a rule of its format (Agent Skills, skill
    /// packs): the error names the file, the value, the rule and the fix.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// The folder or file is not any skill form.
    #[error("{}: not a skill; a skill is a `.wasm` file with an embedded manifest, or a folder with skill.toml (+ skill.wasm) or SKILL.md", path.display())]
    NotASkill {
        /// The path.
        path: PathBuf,
    },
    /// `approve` was given a hash or digest other than the current one.
    #[error(
        "skill `{name}` changed since it was reviewed (reviewed {what} {reviewed}, now {current}); review it again with `skillhost show {name}` before approving"
    )]
    ChangedSinceReview {
        /// The skill.
        name: String,
        /// `content hash` or `capability digest`.
        what: &'static str,
        /// What the reviewer saw.
        reviewed: String,
        /// What is on disk now.
        current: String,
    },
    /// An answer through an MCP client would approve a skill a human rejected.
    #[error(
        "skill `{name}` was rejected by a human; an answer through an MCP client cannot approve it: review it with `skillhost show {name}` and approve it with `skillhost approve {name}`"
    )]
    RejectedByHuman {
        /// The skill.
        name: String,
    },
    /// `remove` of a skill that is not in the user layer.
    #[error("skill `{name}` is not installed in the user layer ({}); only installed skills can be removed, delete it from {} by hand", dir.display(), dir.display())]
    NotInstalled {
        /// The skill.
        name: String,
        /// The directory where it lives, or the user layer when it is nowhere.
        dir: PathBuf,
    },
    /// `rollback` found no previous version.
    #[error("skill `{name}` has no previous version to roll back to (looked in {}); versions are kept when an install or `skill_update` replaces one", dir.display())]
    NoPreviousVersion {
        /// The skill.
        name: String,
        /// Where previous versions are kept.
        dir: PathBuf,
    },
    /// The trust store or the usage statistics failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file system operation failed.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`cannot read`, `cannot rename`).
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file watcher could not start.
    #[error("cannot watch {}: {message}; check that the directory exists and the inotify limits (fs.inotify.max_user_watches)", path.display())]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What notify said.
        message: String,
    },
}

impl RegistryError {
    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RegistryError::Io { path, action, source }
    }
}

impl From<ReadError> for RegistryError {
    /// A load error stays one ([`RegistryError::Load`]), whoever found it.
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Load(load) => RegistryError::Load(load),
            other => RegistryError::Read(other),
        }
    }
}
