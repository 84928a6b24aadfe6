//! Install and remove skills in the user layer. Install reads the source once through
//! [`Snapshot`] (no symlinks or special files, size caps), takes the skill's name from
//! its manifest (validated, so it can never be `..` or a path), loads it to prove it
//! works, writes it to a staging directory beside the user layer and renames it into
//! place; the previous version is moved aside first and restored if the rename fails.
//! Hidden files and a top-level `target/` are not copied. An installed skill gets its
//! trust state like any other: approved only when its tier is auto (or its exact
//! content was approved before).
//!
//! **Who wrote it.** What an agent wrote (the forge's installs,
//! [`Registry::install_agent_written`]) is never approved automatically, whatever its tier,
//! instructions only included: its content hash is recorded as agent-written
//! (`<data_dir>/agent-written/HASH`) before it is installed, and a skill loaded with those
//! bytes has at least the tier a human confirms, with a line of its request saying who
//! wrote it. Until a human approves it, nothing it wrote reaches an agent.
//!
//! **Versions.** The version an install replaces is kept in
//! `<data_dir>/versions/NAME/` (one version: the one before the current). [`Registry::rollback`]
//! swaps the two, so a second rollback rolls forward again. A rolled-back skill's trust
//! state is whatever the trust store holds for its content hash and capability digest:
//! back to `approved` when that exact version was approved.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost_core::{DataKey, Provenance, SkillName};
use skillhost_package as package;

use crate::catalog::Entry;
use crate::config::Layer;
use crate::error::RegistryError;
use crate::registry::Registry;
use crate::snapshot::{Candidate, Parsed, Snapshot};

impl Registry {
    /// Install the skill at `path` (a folder or a `.wasm` file) into the user layer,
    /// replacing an installed skill of the same name, and return its entry. Nothing is
    /// written unless the skill loads.
    pub async fn install(&self, path: &Path) -> Result<Arc<Entry>, RegistryError> {
        match Snapshot::read(path, &self.config.limits)? {
            Snapshot::Package(package::Snapshot::Wasm { .. }) if path.extension().is_none_or(|e| e != "wasm") => {
                Err(RegistryError::NotASkill { path: path.to_owned() })
            }
            Snapshot::Package(snapshot) => self.install_snapshot(snapshot).await,
            // Refused with its reason before anything is loaded or written.
            Snapshot::Pack { path, .. } => Err(crate::pack::not_installable(&path)),
        }
    }

    /// Install the skill `snapshot` holds into the user layer, as [`install`](Self::install)
    /// does: exactly its bytes are written, so the installed content hash is
    /// `snapshot.content_hash()`. The forge installs the snapshot it built and tested in
    /// memory this way, so what is installed is what was tested, and nothing is read back
    /// from a directory a build could write. A folder snapshot becomes `NAME/`, a
    /// component `NAME.wasm`, whatever its path says.
    pub async fn install_snapshot(&self, snapshot: package::Snapshot) -> Result<Arc<Entry>, RegistryError> {
        let snapshot = Snapshot::Package(snapshot);
        let parsed = snapshot.parse()?;
        let name = parsed.name().clone();
        let user = self.config.user.clone();
        let target = match &snapshot {
            Snapshot::Package(package::Snapshot::Wasm { .. }) => user.join(format!("{name}.wasm")),
            Snapshot::Package(package::Snapshot::Folder { .. }) => user.join(name.as_str()),
            Snapshot::Pack { path, .. } => return Err(crate::pack::not_installable(path)),
        };
        self.validate(&snapshot, parsed, &name, &target).await?;

        let staging = staging_dir(&user)?;
        let staged = staging.path().join("new");
        snapshot.write_to(&staged)?;

        let _guard = self.reload.lock().await;
        let old = existing(&user, &name);
        commit(&staged, &target, &old, staging.path())?;
        self.keep_previous(&name, &old, staging.path());
        tracing::info!(skill = %name, target = %target.display(), "installed");
        self.rescan_locked(&name).await?;
        drop(_guard);
        self.entry(name.as_str())
    }

    /// Install `snapshot` as [`install_snapshot`](Self::install_snapshot) does, fetched
    /// from a remote source: `provenance` is kept beside the content hash it describes
    /// (`<data_dir>/provenance/HASH.toml`), so `show` and the approval request of exactly
    /// these bytes display it, whichever version of the skill serves. It moves no trust:
    /// the trust state comes from the content hash and capability digest as for any
    /// install. On failure nothing is left behind.
    pub async fn install_fetched(&self, snapshot: package::Snapshot, provenance: &Provenance) -> Result<Arc<Entry>, RegistryError> {
        let path = self.provenance_path(&snapshot.content_hash());
        let existed = path.exists();
        let text = toml::to_string(provenance).map_err(|e| RegistryError::Io {
            path: path.clone(),
            action: "cannot write",
            source: std::io::Error::other(e),
        })?;
        write_atomic(&path, text.as_bytes())?;
        let installed = self.install_snapshot(snapshot).await;
        if installed.is_err() && !existed {
            let _ = std::fs::remove_file(&path);
        }
        installed
    }

    /// Install `snapshot` as [`install_snapshot`](Self::install_snapshot) does, written by
    /// an agent (the forge's `skill_create` and `skill_update`, a model's sources): those
    /// bytes are recorded as agent-written first, so the skill waits for a human whatever
    /// its tier (see the module docs). On failure a record made for it is removed.
    pub async fn install_agent_written(&self, snapshot: package::Snapshot) -> Result<Arc<Entry>, RegistryError> {
        let path = self.agent_written_path(&snapshot.content_hash());
        let existed = path.exists();
        write_atomic(&path, b"written by an agent; approved only by a human\n")?;
        let installed = self.install_snapshot(snapshot).await;
        if installed.is_err() && !existed {
            let _ = std::fs::remove_file(&path);
        }
        installed
    }

    /// Where the bytes hashing to `content_hash` are recorded as written by an agent.
    fn agent_written_path(&self, content_hash: &str) -> PathBuf {
        self.config.data_dir.join("agent-written").join(content_hash)
    }

    /// Whether the bytes hashing to `content_hash` were installed as written by an agent
    /// ([`install_agent_written`](Self::install_agent_written)).
    pub fn agent_written(&self, content_hash: &str) -> bool {
        // A content hash is hex; anything else names no record.
        content_hash.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') && self.agent_written_path(content_hash).exists()
    }

    /// Where a remote source's [`Provenance`] of the bytes hashing to `content_hash` is kept.
    pub fn provenance_path(&self, content_hash: &str) -> PathBuf {
        self.config.data_dir.join("provenance").join(format!("{content_hash}.toml"))
    }

    /// The provenance of the bytes hashing to `content_hash`, when they were fetched from
    /// a remote source.
    pub fn provenance(&self, content_hash: &str) -> Option<Provenance> {
        let text = std::fs::read_to_string(self.provenance_path(content_hash)).ok()?;
        toml::from_str(&text).inspect_err(|e| tracing::warn!(content_hash, "unreadable provenance: {e}")).ok()
    }

    /// The user layer: where [`install`](Self::install) puts skills.
    pub fn user_layer(&self) -> &Path {
        &self.config.user
    }

    /// The size caps every skill is read under.
    pub fn limits(&self) -> &package::SizeLimits {
        &self.config.limits
    }

    /// Load `parsed` (read from `snapshot`) as the user layer's `name` at `target` would be:
    /// a skill must load before anything of it is written.
    async fn validate(&self, snapshot: &Snapshot, parsed: Parsed, name: &SkillName, target: &Path) -> Result<(), RegistryError> {
        let hash = snapshot.hash_of(&parsed);
        let candidate = Candidate { layer: Layer::User, path: target.to_owned() };
        self.load(parsed, hash, snapshot.clone().into_files(), &candidate, &DataKey::named(name)).await?;
        Ok(())
    }

    /// Where the version before the installed one of `name` is kept.
    pub fn previous_dir(&self, name: &SkillName) -> PathBuf {
        self.config.data_dir.join("versions").join(name.as_str())
    }

    /// Put back the version of `name` the last install (or rollback) replaced, keeping
    /// the one it replaces in its stead. The previous version must load, or nothing
    /// changes. Its trust state is the one bound to its content hash.
    pub async fn rollback(&self, name: &str) -> Result<Arc<Entry>, RegistryError> {
        let name = SkillName::new(name)?;
        let user = self.config.user.clone();
        let kept = self.previous_dir(&name);
        let previous = existing(&kept, &name);
        let Some(previous) = previous.first() else {
            return Err(RegistryError::NoPreviousVersion { name: name.to_string(), dir: kept });
        };
        let target = user.join(previous.file_name().unwrap_or_default());
        let snapshot = Snapshot::read(previous, &self.config.limits)?;
        let parsed = snapshot.parse()?;
        if parsed.name() != &name {
            return Err(RegistryError::NameMismatch {
                path: previous.clone(),
                expected: name.to_string(),
                declared: parsed.name().to_string(),
            });
        }
        self.validate(&snapshot, parsed, &name, &target).await?;

        let staging = staging_dir(&user)?;
        let _guard = self.reload.lock().await;
        let old = existing(&user, &name);
        commit(previous, &target, &old, staging.path())?;
        self.keep_previous(&name, &old, staging.path());
        tracing::info!(skill = %name, "rolled back to the previous version");
        self.rescan_locked(&name).await?;
        drop(_guard);
        self.entry(name.as_str())
    }

    /// After a commit: move the versions `commit` set aside in `staging` to
    /// [`previous_dir`](Self::previous_dir), replacing what was kept there. A failure
    /// only costs the rollback, so it is logged, not returned.
    fn keep_previous(&self, name: &SkillName, old: &[PathBuf], staging: &Path) {
        if old.is_empty() {
            return;
        }
        let kept = self.previous_dir(name);
        let result = (|| -> std::io::Result<()> {
            if kept.exists() {
                std::fs::rename(&kept, staging.join("discarded"))?;
            }
            std::fs::create_dir_all(&kept)?;
            for (i, path) in old.iter().enumerate() {
                std::fs::rename(staging.join(format!("old-{i}")), kept.join(path.file_name().unwrap_or_default()))?;
            }
            Ok(())
        })();
        if let Err(error) = result {
            tracing::warn!(skill = %name, %error, dir = %kept.display(), "could not keep the previous version; rollback will not be possible");
        }
    }

    /// Remove `name` from the user layer. A skill of the same name in a lower layer is
    /// revealed; skills in the workspace or bundled layers cannot be removed this way.
    pub async fn remove(&self, name: &str) -> Result<(), RegistryError> {
        let name = SkillName::new(name)?;
        let user = self.config.user.clone();
        let existing = existing(&user, &name);
        if existing.is_empty() {
            let dir = self.entry(name.as_str()).ok().and_then(|e| e.origin.parent().map(Path::to_path_buf)).unwrap_or(user);
            return Err(RegistryError::NotInstalled { name: name.to_string(), dir });
        }
        let staging = staging_dir(&user)?;
        let _guard = self.reload.lock().await;
        for (i, path) in existing.iter().enumerate() {
            let aside = staging.path().join(format!("removed-{i}"));
            std::fs::rename(path, &aside).map_err(RegistryError::io(path, "cannot move aside to remove"))?;
        }
        tracing::info!(skill = %name, "removed from the user layer");
        self.rescan_locked(&name).await
        // `staging` drops here, deleting the removed files.
    }
}

/// The installed forms of `name` in the user layer.
fn existing(user: &Path, name: &SkillName) -> Vec<PathBuf> {
    [user.join(name.as_str()), user.join(format!("{name}.wasm"))].into_iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).collect()
}

/// A temporary directory beside the user layer (same file system, so renames are
/// atomic; hidden, so never mistaken for a skill), deleted when dropped.
fn staging_dir(user: &Path) -> Result<tempfile::TempDir, RegistryError> {
    let parent = user.parent().unwrap_or(user);
    tempfile::Builder::new()
        .prefix(".skillhost-staging-")
        .tempdir_in(parent)
        .map_err(RegistryError::io(parent, "cannot create a staging directory"))
}

/// Move the old versions aside into `staging`, rename `staged` to `target`; on failure
/// put the old versions back.
fn commit(staged: &Path, target: &Path, old: &[PathBuf], staging: &Path) -> Result<(), RegistryError> {
    let mut moved = Vec::new();
    let mut result = Ok(());
    for (i, path) in old.iter().enumerate() {
        let aside = staging.join(format!("old-{i}"));
        if let Err(e) = std::fs::rename(path, &aside) {
            result = Err(RegistryError::io(path, "cannot move the old version aside")(e));
            break;
        }
        moved.push((path, aside));
    }
    if result.is_ok() {
        result = std::fs::rename(staged, target).map_err(RegistryError::io(target, "cannot rename the staged skill into place"));
    }
    if result.is_err() {
        for (path, aside) in moved {
            if let Err(error) = std::fs::rename(&aside, path) {
                tracing::error!(path = %path.display(), %error, "could not restore the old version");
            }
        }
    }
    result
}

/// Write `bytes` to `path` through a temporary file beside it, creating its folder.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let io = |source| RegistryError::Io { path: path.to_owned(), action: "cannot write", source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let staged = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::fs::write(staged.path(), bytes).map_err(io)?;
    staged.persist(path).map(drop).map_err(|e| io(e.error))
}
