//! Remote skills into a registry: [`Installer::install`] fetches one source, checks it and
//! installs exactly the bytes it checked (with their [`Provenance`]); [`Installer::sync`]
//! makes a data dir hold exactly the set a [`Lockfile`] pins; [`Installer::outdated`] says
//! which pins moved upstream without changing anything.
//!
//! **Keys.** [`KeyPolicy`] says which public keys must have signed what: keys a human passed
//! for this command (`--verify KEY`) apply to every OCI source, keys of the host config
//! (`[[sources.verify]]`) to the addresses under their prefix. A locked skill signed at
//! install time must be signed by the same key (its fingerprint is in the lock) on every
//! later sync. Git and index sources carry no signature: a key asked for one is refused
//! rather than silently unchecked.

use std::path::PathBuf;
use std::sync::Arc;

use skillhost_package::Snapshot;
use skillhost_registry::{Entry, Layer, Registry};

use crate::address::SourceAddr;
use crate::error::SourceError;
use crate::lock::{Locked, Lockfile};
use crate::sign::PublicKey;
use crate::{Artifact, FetchOptions, Fetched, Provenance, SignatureStatus};

/// Which keys must have signed which sources.
#[derive(Clone, Debug, Default)]
pub struct KeyPolicy {
    /// Keys for every OCI source of this command.
    always: Vec<PublicKey>,
    /// `(address prefix, key)` from the host config.
    rules: Vec<(String, PublicKey)>,
}

impl KeyPolicy {
    /// Require `key` of every OCI source (a human's `--verify KEY`).
    pub fn always(&mut self, key: PublicKey) {
        self.always.push(key);
    }

    /// Require `key` of the sources whose address starts with `prefix` (the host config).
    pub fn rule(&mut self, prefix: impl Into<String>, key: PublicKey) {
        self.rules.push((prefix.into(), key));
    }

    /// The keys one of which must have signed `addr`; empty when none is asked for.
    pub fn keys_for(&self, addr: &SourceAddr) -> Vec<PublicKey> {
        let text = addr.to_string();
        let ruled = self.rules.iter().filter(|(prefix, _)| text.starts_with(prefix.as_str())).map(|(_, key)| key);
        let always = self.always.iter().filter(|_| matches!(addr, SourceAddr::Oci(_)));
        always.chain(ruled).cloned().collect()
    }

    /// Every key it knows, for a lock's fingerprint to be found among.
    fn all(&self) -> impl Iterator<Item = &PublicKey> {
        self.always.iter().chain(self.rules.iter().map(|(_, key)| key))
    }
}

/// One skill installed from a remote source.
pub struct Installed {
    /// Its entry in the registry, with its trust state.
    pub entry: Arc<Entry>,
    /// Where its bytes came from.
    pub provenance: Provenance,
    /// Its line in the lockfile.
    pub locked: Locked,
}

/// What [`Installer::sync`] did with one locked skill.
#[derive(Debug)]
pub enum Synced {
    /// Its installed files were already the locked ones; nothing was fetched.
    UpToDate,
    /// The locked bytes were fetched, checked and installed.
    Installed(Arc<Entry>),
    /// `--update`: the pin moved to what the source names now, and that was installed.
    Updated {
        /// The entry.
        entry: Arc<Entry>,
        /// The digest it was locked at.
        from: String,
    },
}

/// Whether one locked skill moved upstream.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Outdated {
    /// The skill.
    pub name: String,
    /// Its source.
    pub source: String,
    /// The digest locked.
    pub locked: String,
    /// The digest the source names now.
    pub upstream: String,
}

impl Outdated {
    /// Whether upstream moved.
    pub fn moved(&self) -> bool {
        self.locked != self.upstream
    }
}

/// Installs remote skills into one registry.
pub struct Installer<'a> {
    registry: &'a Registry,
    options: FetchOptions,
    keys: KeyPolicy,
}

impl<'a> Installer<'a> {
    /// An installer into `registry`, fetching under `options`, verifying under `keys`.
    pub fn new(registry: &'a Registry, options: FetchOptions, keys: KeyPolicy) -> Self {
        Self { registry, options, keys }
    }

    /// Fetch `addr` with exactly `keys` to verify (none: signatures not checked).
    pub async fn fetch_with(&self, addr: &SourceAddr, keys: Vec<PublicKey>) -> Result<Fetched, SourceError> {
        if !keys.is_empty() && !matches!(addr, SourceAddr::Oci(_)) {
            return Err(SourceError::Signature {
                reference: addr.to_string(),
                reason: "a key is required for it, but only OCI sources carry signatures (git and index sources have none); \
                         drop the key rule for this address, or publish the skill to an OCI registry signed"
                    .into(),
            });
        }
        let mut options = self.options.clone();
        options.verify_keys = keys;
        let fetched = crate::fetch(addr, &options).await?;
        if !options.verify_keys.is_empty() && !matches!(fetched.provenance.signature, SignatureStatus::Verified { .. }) {
            // A fetcher that returned unverified bytes despite keys would be a bug; refuse.
            return Err(SourceError::Signature { reference: addr.to_string(), reason: "no signature was verified".into() });
        }
        Ok(fetched)
    }

    /// Fetch `addr`, check it (its signature when a key is asked for it), install exactly
    /// those bytes into the user layer, and return the lockfile line that pins them.
    pub async fn install(&self, addr: &SourceAddr) -> Result<Installed, SourceError> {
        let fetched = self.fetch_with(addr, self.keys.keys_for(addr)).await?;
        self.put(fetched).await
    }

    /// Install `fetched` and make its lockfile line.
    async fn put(&self, fetched: Fetched) -> Result<Installed, SourceError> {
        let snapshot = snapshot(&fetched, self.registry)?;
        let content = snapshot.content_hash();
        let entry = self.registry.install_fetched(snapshot, &fetched.provenance).await?;
        let key = match &fetched.provenance.signature {
            SignatureStatus::Verified { key } => Some(key.clone()),
            SignatureStatus::NotChecked => None,
        };
        let locked = Locked {
            name: entry.name.to_string(),
            source: fetched.provenance.source.clone(),
            digest: fetched.provenance.digest.clone(),
            content,
            key,
        };
        Ok(Installed { entry, provenance: fetched.provenance, locked })
    }

    /// Make the user layer hold what `lock` pins, one skill at a time (each installed
    /// atomically, or not at all): a skill whose installed files are the locked ones is
    /// left alone; any other is fetched at its pinned digest, which must give the locked
    /// digest and content hash. With `update`, each source is asked what it names now and
    /// the pin moves there (the lock's line is updated in `lock`). Skills the lock does not
    /// name are left alone. Returns each skill's outcome, in the lock's order.
    pub async fn sync(&self, lock: &mut Lockfile, update: bool) -> Vec<(String, Result<Synced, SourceError>)> {
        let mut outcomes = Vec::new();
        for locked in lock.skills.clone() {
            let outcome = self.sync_one(&locked, update).await;
            if let Ok((_, Some(line))) = &outcome {
                lock.upsert(line.clone());
            }
            outcomes.push((locked.name.clone(), outcome.map(|(synced, _)| synced)));
        }
        outcomes
    }

    async fn sync_one(&self, locked: &Locked, update: bool) -> Result<(Synced, Option<Locked>), SourceError> {
        let source = locked.address()?;
        let keys = self.locked_keys(locked, &source)?;
        if update {
            let now = crate::resolve(&source, &self.options).await?;
            if now != locked.digest {
                let mut fetched = self.fetch_with(&source.pinned(&now), keys).await?;
                expect_digest(locked, &fetched, &now)?;
                fetched.provenance.source = locked.source.clone();
                let installed = self.put(fetched).await?;
                return Ok((Synced::Updated { entry: installed.entry, from: locked.digest.clone() }, Some(installed.locked)));
            }
        }
        if self.installed_hash(&locked.name).as_deref() == Some(locked.content.as_str()) {
            return Ok((Synced::UpToDate, None));
        }
        let mut fetched = self.fetch_with(&locked.pinned()?, keys).await?;
        expect_digest(locked, &fetched, &locked.digest)?;
        // Fetched by its pin; its source is still what the lock asked for.
        fetched.provenance.source = locked.source.clone();
        let snapshot = snapshot(&fetched, self.registry)?;
        let content = snapshot.content_hash();
        if content != locked.content {
            return Err(SourceError::Digest {
                what: format!("the files of skill `{}` at {}", locked.name, fetched.provenance.pinned),
                expected: locked.content.clone(),
                actual: content,
            });
        }
        let entry = self.registry.install_fetched(snapshot, &fetched.provenance).await?;
        Ok((Synced::Installed(entry), None))
    }

    /// For each locked skill, the digest its source names now; nothing is installed.
    pub async fn outdated(&self, lock: &Lockfile) -> Vec<(String, Result<Outdated, SourceError>)> {
        let mut out = Vec::new();
        for locked in &lock.skills {
            let now = match locked.address() {
                Ok(source) => crate::resolve(&source, &self.options).await,
                Err(e) => Err(e),
            };
            let row = now.map(|upstream| Outdated {
                name: locked.name.clone(),
                source: locked.source.clone(),
                locked: locked.digest.clone(),
                upstream,
            });
            out.push((locked.name.clone(), row));
        }
        out
    }

    /// The keys a locked skill must verify with: the one its lock line names (which must
    /// be among the keys this command has), else what the policy asks for its source.
    fn locked_keys(&self, locked: &Locked, source: &SourceAddr) -> Result<Vec<PublicKey>, SourceError> {
        let Some(fingerprint) = &locked.key else {
            return Ok(self.keys.keys_for(source));
        };
        match self.keys.all().find(|key| key.fingerprint() == fingerprint) {
            Some(key) => Ok(vec![key.clone()]),
            None => Err(SourceError::Signature {
                reference: locked.source.clone(),
                reason: format!(
                    "the lock says skill `{}` was signed by key {fingerprint}, and no key given has that fingerprint; \
                     pass it with --verify KEY.pub (or name it in [[sources.verify]] of the host config)",
                    locked.name
                ),
            }),
        }
    }

    /// The content hash of `name` as installed in the user layer, if it is.
    fn installed_hash(&self, name: &str) -> Option<String> {
        let entry = self.registry.entry(name).ok()?;
        let loaded = entry.loaded.as_ref().filter(|_| entry.layer == Layer::User)?;
        Some(loaded.content_hash.clone())
    }
}

/// `fetched` must be what `digest` pins.
fn expect_digest(locked: &Locked, fetched: &Fetched, digest: &str) -> Result<(), SourceError> {
    if fetched.provenance.digest != digest {
        return Err(SourceError::Digest {
            what: format!("skill `{}` from {}", locked.name, locked.source),
            expected: digest.to_owned(),
            actual: fetched.provenance.digest.clone(),
        });
    }
    Ok(())
}

/// `fetched` as a snapshot under the registry's size caps, named by its source in messages.
pub fn snapshot(fetched: &Fetched, registry: &Registry) -> Result<Snapshot, SourceError> {
    let path = PathBuf::from(&fetched.provenance.pinned);
    let limits = registry.limits();
    let snapshot = match &fetched.artifact {
        Artifact::Component(bytes) => {
            skillhost_package::check_size(&path, "the component", bytes.len() as u64, limits.component)?;
            Snapshot::Wasm { path, bytes: bytes.clone() }
        }
        Artifact::Folder(files) => Snapshot::from_files(path, files.clone(), limits)?,
    };
    Ok(snapshot)
}
