//! [`StoreError`]: how the trust store and the usage statistics fail, each one line
//! naming the file and the fix. (The audit log and the secret store have their own
//! errors, [`AuditError`](crate::audit::AuditError) and
//! [`SecretError`](crate::secrets::SecretError).)

use std::path::PathBuf;

/// Why the trust store or the usage statistics could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The trust store failed.
    #[error("trust store {}: {message}; {fix}", path.display())]
    Trust {
        /// The database file.
        path: PathBuf,
        /// What failed.
        message: String,
        /// What to do about it.
        fix: &'static str,
    },
    /// The usage statistics database failed.
    #[error("usage statistics {}: {message}; check that the data directory is writable, or move the file away to start over", path.display())]
    Stats {
        /// The database file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The callers database failed.
    #[error("callers {}: {message}", path.display())]
    Callers {
        /// The database file.
        path: PathBuf,
        /// What failed, and what to do.
        message: String,
    },
    /// A caller of that name exists.
    #[error("a caller named `{name}` exists; remove it first (`skillhost caller remove {name}`) or pick another name")]
    CallerExists {
        /// The name.
        name: String,
    },
    /// The PostgreSQL state store failed.
    #[error("state store {url}: {message}; {fix}")]
    Postgres {
        /// Its URL, without the password.
        url: String,
        /// What failed.
        message: String,
        /// What to do about it.
        fix: &'static str,
    },
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// A file system operation failed.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`cannot create the data directory`).
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
}
