//! The on-disk cache of compiled components, keyed by the component's content hash and
//! the engine's fingerprint, so a second load (or a restart) never recompiles, and a
//! changed engine configuration never loads stale code.
//!
//! Layout: `<dir>/<engine fingerprint>/<sha256 of the component>.cwasm`. Entries are
//! written to a temporary file and renamed into place, so a crash never leaves a torn
//! entry; an entry that fails to load is deleted and recompiled.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

pub use skillhost_core::CacheOutcome;

/// Counters of the cache, for tests, `--verbose` output and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Loads served from the cache.
    pub hits: u64,
    /// Loads that compiled.
    pub compiled: u64,
}

pub(crate) struct ComponentCache {
    dir: Option<PathBuf>,
    hits: AtomicU64,
    compiled: AtomicU64,
}

impl ComponentCache {
    pub(crate) fn new(root: Option<&Path>, engine_fingerprint: &str) -> Self {
        Self { dir: root.map(|r| r.join(engine_fingerprint)), hits: AtomicU64::new(0), compiled: AtomicU64::new(0) }
    }

    /// Whether the cache holds `bytes` compiled (then a load is a cheap read).
    pub(crate) fn contains(&self, bytes: &[u8]) -> bool {
        self.dir.as_ref().is_some_and(|dir| dir.join(format!("{}.cwasm", hex::encode(Sha256::digest(bytes)))).is_file())
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats { hits: self.hits.load(Ordering::Relaxed), compiled: self.compiled.load(Ordering::Relaxed) }
    }

    /// The compiled form of `bytes`, from the cache or compiled now.
    pub(crate) fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return self.compile(engine, bytes).map(|c| (c, CacheOutcome::Compiled));
        };
        let entry = dir.join(format!("{}.cwasm", hex::encode(Sha256::digest(bytes))));
        if entry.exists() {
            match deserialize(engine, &entry) {
                Ok(component) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(entry = %entry.display(), "compiled component cache hit");
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(e) => {
                    tracing::warn!(entry = %entry.display(), "discarding unusable cache entry: {e}");
                    let _ = std::fs::remove_file(&entry);
                }
            }
        }
        let component = self.compile(engine, bytes)?;
        if let Err(e) = store(&component, dir, &entry) {
            tracing::warn!(dir = %dir.display(), "cannot write the compiled cache: {e}");
        }
        Ok((component, CacheOutcome::Compiled))
    }

    fn compile(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let component = Component::new(engine, bytes)?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        Ok(component)
    }
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, entry: &Path) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize_file` trusts its input to be code wasmtime compiled. Entries
    // are only ever written by `store` below, into the host's own cache directory (not
    // writable by skills), and renamed into place complete; wasmtime itself checks the
    // header and that the entry matches this engine's version and settings.
    unsafe { Component::deserialize_file(engine, entry) }
}

fn store(component: &Component, dir: &Path, entry: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), rand_suffix()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, entry).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A suffix that keeps concurrent writers of the same entry from sharing a temp file.
fn rand_suffix() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
