//! [`SourceError`]: every refusal of a remote source, naming what was refused and what to do.

use std::path::PathBuf;

/// A remote source refused, or failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The address does not parse.
    #[error("`{address}` is not a skill source: {reason}")]
    BadAddress {
        /// As given.
        address: String,
        /// Why, and the forms that are.
        reason: String,
    },
    /// A download failed or was refused (scheme, status, timeout).
    #[error("{url}: {reason}")]
    Http {
        /// What was asked for.
        url: String,
        /// Why it failed, and what to do.
        reason: String,
    },
    /// Something fetched is larger than its cap.
    #[error("{what} is larger than the cap of {limit} bytes; nothing was written{}", .fix.as_deref().map(|f| format!("; {f}")).unwrap_or_default())]
    TooLarge {
        /// What (a download, an archive's files).
        what: String,
        /// The cap.
        limit: u64,
        /// What to do, when there is more to say than that it is too large.
        fix: Option<String>,
    },
    /// A fetch a remote named (a redirect, an index entry, a token service, an upload
    /// location) refused: another host than the source's, plain HTTP after HTTPS, or a
    /// loopback or private address a remote source may not send a fetch to.
    #[error("{url}: refused: {reason}")]
    Refused {
        /// The URL refused.
        url: String,
        /// Who named it, why it is refused, and the setting that would allow it.
        reason: String,
    },
    /// Bytes whose digest is not the one they were fetched by.
    #[error("{what}: digest {actual} is not the expected {expected}; nothing was written (the source changed or was tampered with)")]
    Digest {
        /// What was checked.
        what: String,
        /// The digest asked for.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// An archive entry breaking the archive rules.
    #[error("{archive}: entry `{entry}` refused: {reason}; nothing was written")]
    Archive {
        /// The archive (its URL or name).
        archive: String,
        /// The entry's name, control characters escaped.
        entry: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A well-known index that cannot be read or does not offer the skill.
    #[error("index {url}: {reason}")]
    Index {
        /// The index.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A git source failed.
    #[error("git source {url}: {reason}")]
    Git {
        /// The repository.
        url: String,
        /// What failed, and what to do.
        reason: String,
    },
    /// An OCI registry refused or failed.
    #[error("{reference}: {reason}")]
    Oci {
        /// The reference (`oci://REGISTRY/REPO:TAG`).
        reference: String,
        /// What failed, and what to do.
        reason: String,
    },
    /// A signature missing, or not made by any of the keys asked for.
    #[error("{reference}: signature refused: {reason}")]
    Signature {
        /// The artifact's reference.
        reference: String,
        /// Missing, or which key it did not verify with, and what to do.
        reason: String,
    },
    /// A key that cannot be read.
    #[error("key {path}: {reason}")]
    Key {
        /// Where it was read from.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `skills.lock` that cannot be read, or is not kept.
    #[error("{path}: {reason}")]
    Lock {
        /// The lockfile.
        path: PathBuf,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// The fetched skill does not read as a skill.
    #[error(transparent)]
    Read(#[from] skillhost_package::ReadError),
    /// The registry refused to install it.
    #[error(transparent)]
    Registry(#[from] skillhost_registry::RegistryError),
    /// A local file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl SourceError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// The index format's refusals as the source's own: the same messages, and the kinds
/// callers already match on ([`SourceError::Index`], [`SourceError::TooLarge`]).
impl From<skillhost_package::wellknown::IndexError> for SourceError {
    fn from(error: skillhost_package::wellknown::IndexError) -> Self {
        use skillhost_package::wellknown::{INDEX_FIX, IndexError};
        match error {
            IndexError::Refused { url, reason } => SourceError::Index { url, reason },
            IndexError::TooLarge { url, limit } => {
                SourceError::TooLarge { what: format!("the index {url}"), limit, fix: Some(INDEX_FIX.into()) }
            }
        }
    }
}
