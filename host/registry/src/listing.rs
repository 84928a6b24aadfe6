//! Kept tool listings: what a skill's code listed the last time it was run to list its
//! tools, so that loading the same code again runs none of it (no server starts, nothing
//! compiles) before its first call.
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

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The largest kept listing read back (a skill's tool texts are capped at 1 MiB).
const MAX_LISTING: u64 = 4 << 20;

/// The directory of kept listings.
pub(crate) struct Listings {
    dir: PathBuf,
}

impl Listings {
    /// Listings kept in `<data_dir>/listings`.
    pub(crate) fn new(data_dir: &std::path::Path) -> Self {
        Self { dir: data_dir.join("listings") }
    }

    /// The key of a listing of `kind` code with `content_hash`, under `stamp`.
    pub(crate) fn key(kind: &str, content_hash: &str, stamp: &str) -> String {
        let mut hash = Sha256::new();
        for part in [env!("CARGO_PKG_VERSION"), kind, content_hash, stamp] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hex::encode(hash.finalize())
    }

    /// Whether a listing is kept under `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.dir.join(format!("{key}.json")).is_file()
    }

    /// The listing kept under `key`, if one is and it reads.
    pub(crate) fn get(&self, key: &str) -> Option<Value> {
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
    pub(crate) fn put(&self, key: &str, listing: &Value) {
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
