//! The host's secret store: one file per secret under `<data_dir>/secrets/`, the
//! directory 0700 and each file 0600, written atomically. Values are never logged or
//! printed; skills never read them (the egress gate adds them to requests).
//!
//! [`SecretStore`] is what the host and `skillhost secret` ask of it; [`FileSecretStore`]
//! keeps the files.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use skillhost_core::SecretSource;
use skillhost_core::egress::valid_secret_name;

/// Why a secret operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The name breaks the naming rule.
    #[error("invalid secret name `{0}`: use lowercase letters, digits, `_` or `-` (at most 64), e.g. `github`")]
    BadName(String),
    /// The value is empty or has a line break.
    #[error("the value for secret `{0}` is empty or contains a line break; pass the bare value on stdin")]
    BadValue(String),
    /// No such secret.
    #[error("no secret named `{0}`; `skillhost secret list` shows the secrets that are set")]
    NotFound(String),
    /// The store could not be read or written.
    #[error("secret store {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Secrets kept for the egress gate: set, removed and listed by a human, read by the
/// gate through [`SecretSource`].
pub trait SecretStore: SecretSource {
    /// Set secret `name` to `value` (a trailing newline is dropped).
    fn set(&self, name: &str, value: &str) -> Result<(), SecretError>;

    /// Remove secret `name`.
    fn remove(&self, name: &str) -> Result<(), SecretError>;

    /// The names of the secrets that are set, sorted.
    fn list(&self) -> Result<Vec<String>, SecretError>;
}

/// Secrets kept on disk, one file each.
#[derive(Clone, Debug)]
pub struct FileSecretStore {
    dir: PathBuf,
}

impl FileSecretStore {
    /// The store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, name: &str) -> Result<PathBuf, SecretError> {
        if !valid_secret_name(name) {
            return Err(SecretError::BadName(name.to_owned()));
        }
        Ok(self.dir.join(name))
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SecretError + '_ {
        move |source| SecretError::Io { path: path.to_owned(), source }
    }
}

impl SecretStore for FileSecretStore {
    fn set(&self, name: &str, value: &str) -> Result<(), SecretError> {
        let path = self.path(name)?;
        let value = value.strip_suffix('\n').unwrap_or(value);
        let value = value.strip_suffix('\r').unwrap_or(value);
        if value.is_empty() || value.contains(['\n', '\r']) {
            return Err(SecretError::BadValue(name.to_owned()));
        }
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(Self::io(&self.dir))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).map_err(Self::io(&self.dir))?;
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(Self::io(&tmp))?;
        file.write_all(value.as_bytes()).and_then(|()| file.sync_all()).map_err(Self::io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            SecretError::Io { path: path.clone(), source: e }
        })
    }

    fn remove(&self, name: &str) -> Result<(), SecretError> {
        let path = self.path(name)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SecretError::NotFound(name.to_owned())),
            Err(e) => Err(SecretError::Io { path, source: e }),
        }
    }

    fn list(&self) -> Result<Vec<String>, SecretError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SecretError::Io { path: self.dir.clone(), source: e }),
        };
        let mut names: Vec<String> =
            entries.filter_map(Result::ok).filter_map(|e| e.file_name().into_string().ok()).filter(|n| valid_secret_name(n)).collect();
        names.sort();
        Ok(names)
    }
}

impl SecretSource for FileSecretStore {
    fn secret(&self, name: &str) -> Option<String> {
        let path = self.path(name).ok()?;
        std::fs::read_to_string(path).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_list_get_remove_with_private_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::new(dir.path().join("secrets"));
        store.set("github", "t0ken\n").unwrap();
        assert_eq!(store.secret("github").as_deref(), Some("t0ken"));
        assert_eq!(store.list().unwrap(), vec!["github"]);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("secrets")), 0o700);
        assert_eq!(mode(&dir.path().join("secrets/github")), 0o600);
        assert!(matches!(store.set("../x", "v"), Err(SecretError::BadName(_))));
        assert!(matches!(store.set("k", "a\nb"), Err(SecretError::BadValue(_))));
        store.remove("github").unwrap();
        assert!(matches!(store.remove("github"), Err(SecretError::NotFound(_))));
        assert_eq!(store.secret("github"), None);
    }
}
