//! Kept tool listings: what a skill's code listed the last time it was run to list its
//! tools, so that loading the same code again runs none of it (no server starts, nothing
//! compiles) before its first call.
//!
//! [`ListingCache`] is a [`SkillRuntime`] decorator: the registry loads through it, one
//! call down. A load of code whose listing is kept is the wrapped runtime's
//! [`load_listed`](SkillRuntime::load_listed) of it; any other load runs the code, and what
//! it listed is kept for the next.
//!
//! A listing is kept in `<data_dir>/listings/<key>.json`, where the key is the SHA-256 of
//! everything that decides it: the host's version, the runtime kind, the skill's content
//! hash (its exact bytes) and the runtime's stamp for it
//! ([`SkillRuntime::listing_stamp`](skillhost_core::SkillRuntime::listing_stamp): for a
//! server skill, the program it runs and the venv's packages). A change to any of them
//! is another key, so a listing can never describe other code than what loads with it;
//! the runtime checks a kept listing as it checks a fresh one. Only the host writes the
//! directory (no skill is granted it); an unreadable or oversized entry is ignored and
//! listed again.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use skillhost_core::{
    CallContext, Grant, LoadError, RunError, RunOutput, ScriptJob, Skill, SkillCode, SkillRuntime, SkillSource, TestReport,
};

/// A runtime that keeps the tool listings of the code it loads (see the module docs).
pub(crate) struct ListingCache {
    inner: Arc<dyn SkillRuntime>,
    listings: Listings,
}

impl ListingCache {
    /// `inner`, keeping its listings in `<data_dir>/listings`.
    pub(crate) fn new(inner: Arc<dyn SkillRuntime>, data_dir: &std::path::Path) -> Self {
        Self { inner, listings: Listings { dir: data_dir.join("listings") } }
    }

    /// Whether loading `source` runs none of its code: its listing is kept.
    pub(crate) fn is_listed(&self, source: &SkillSource) -> bool {
        self.key(source).is_some_and(|key| self.listings.has(&key))
    }

    /// The key of `source`'s kept listing, when its runtime keeps listings of it.
    fn key(&self, source: &SkillSource) -> Option<String> {
        let stamp = self.inner.listing_stamp(source)?;
        Some(Listings::key(self.inner.kind_for(&source.code), &source.content_hash, &stamp))
    }
}

#[async_trait::async_trait]
impl SkillRuntime for ListingCache {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn kind_for(&self, code: &SkillCode) -> &'static str {
        self.inner.kind_for(code)
    }

    /// From the listing an earlier load of the same bytes kept when there is one (none of
    /// its code runs), else by running it to list its tools, keeping that listing.
    async fn load(&self, source: &SkillSource, grant: Grant) -> Result<Arc<dyn Skill>, LoadError> {
        let key = self.key(source);
        if let Some(listing) = key.as_deref().and_then(|key| self.listings.get(key)) {
            match self.inner.load_listed(source, grant.clone(), &listing).await {
                Ok(skill) => return Ok(skill),
                // A listing this host version cannot use: list again, and keep that.
                Err(LoadError::Tools { reason, .. }) => tracing::debug!(skill = %source.manifest.name, %reason, "listing again"),
                Err(error) => return Err(error),
            }
        }
        let skill = self.inner.load(source, grant).await?;
        if let (Some(key), Some(listing)) = (key, skill.listing()) {
            self.listings.put(&key, &listing);
        }
        Ok(skill)
    }

    fn listing_stamp(&self, source: &SkillSource) -> Option<String> {
        self.inner.listing_stamp(source)
    }

    fn weakened(&self, code: &SkillCode) -> Vec<String> {
        self.inner.weakened(code)
    }

    async fn load_listed(&self, source: &SkillSource, grant: Grant, listing: &Value) -> Result<Arc<dyn Skill>, LoadError> {
        self.inner.load_listed(source, grant, listing).await
    }

    async fn own_tests(&self, source: &SkillSource, grant: Grant, limit: Duration) -> Option<TestReport> {
        self.inner.own_tests(source, grant, limit).await
    }

    async fn run_script(&self, job: ScriptJob, cx: CallContext) -> Result<RunOutput, RunError> {
        self.inner.run_script(job, cx).await
    }
}

/// The largest kept listing read back (a skill's tool texts are capped at 1 MiB).
const MAX_LISTING: u64 = 4 << 20;

/// The directory of kept listings.
struct Listings {
    dir: PathBuf,
}

impl Listings {
    /// The key of a listing of `kind` code with `content_hash`, under `stamp`.
    fn key(kind: &str, content_hash: &str, stamp: &str) -> String {
        let mut hash = Sha256::new();
        for part in [env!("CARGO_PKG_VERSION"), kind, content_hash, stamp] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hex::encode(hash.finalize())
    }

    /// Whether a listing is kept under `key`.
    fn has(&self, key: &str) -> bool {
        self.dir.join(format!("{key}.json")).is_file()
    }

    /// The listing kept under `key`, if one is and it reads.
    fn get(&self, key: &str) -> Option<Value> {
        let path = self.dir.join(format!("{key}.json"));
        let file = std::fs::File::open(&path).ok()?;
        if file.metadata().ok()?.len() > MAX_LISTING {
            return None;
        }
        serde_json::from_reader(std::io::BufReader::new(file))
            .inspect_err(|error| tracing::debug!(path = %path.display(), %error, "ignoring an unreadable kept listing"))
            .ok()
    }

    /// Keep `listing` under `key` (written whole, then renamed into place). A failure
    /// only costs a listing run at the next load: it is logged, not returned.
    fn put(&self, key: &str, listing: &Value) {
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
            serde_json::to_writer(&mut file, listing)?;
            file.persist(self.dir.join(format!("{key}.json"))).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(error) = write() {
            tracing::debug!(dir = %self.dir.display(), %error, "cannot keep a tool listing");
        }
    }
}
