//! The on-disk cache of compiled components, keyed by the component's content hash and
//! the engine's fingerprint, so a second load (or a restart) never recompiles, and a
//! changed engine configuration never loads stale code.
//!
//! Layout: `<dir>/<engine fingerprint>/<sha256 of the component>.cwasm`. Entries are
//! written to a temporary file and renamed into place, so a crash never leaves a torn
//! entry; an entry that fails to load is deleted and recompiled.
//!
//! A component's bytes ([`ComponentBytes`]) are held in memory only until the cache
//! holds its code: a skill nobody calls then costs its hash, not its size.
//!
//! Each lookup is counted through the `metrics` facade (`skillhost_wasm_cache_total`,
//! `result` `hit` or `miss`), kept only when the embedder installed a recorder.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use crate::worker::{Compiler, Worker, WorkerError};
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

/// The metric counting lookups of the compiled cache, by `result` (`hit`, `miss`).
const CACHE_LOOKUPS: &str = "skillhost_wasm_cache_total";

pub(crate) struct ComponentCache {
    dir: Option<PathBuf>,
    /// Where the code stored is compiled, when not in this process.
    worker: Option<Worker>,
    hits: AtomicU64,
    compiled: AtomicU64,
}

impl ComponentCache {
    pub(crate) fn new(root: Option<&Path>, engine_fingerprint: &str, worker: Option<Worker>) -> Self {
        Self { dir: root.map(|r| r.join(engine_fingerprint)), worker, hits: AtomicU64::new(0), compiled: AtomicU64::new(0) }
    }

    /// Whether the cache holds `bytes` compiled (then a load is a cheap read).
    pub(crate) fn contains(&self, bytes: &ComponentBytes) -> bool {
        self.entry(bytes).is_some_and(|entry| entry.is_file())
    }

    fn entry(&self, bytes: &ComponentBytes) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| dir.join(format!("{}.cwasm", hex::encode(bytes.hash))))
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats { hits: self.hits.load(Ordering::Relaxed), compiled: self.compiled.load(Ordering::Relaxed) }
    }

    /// The compiled form of `bytes` for `engine`, from the cache or compiled now (and then
    /// stored, and the bytes let go). What is stored is compiled in a worker process
    /// ([`crate::worker`]) when there is one, else here by an engine of its own, made from
    /// `config` (`engine`'s) and dropped after: with it goes what a compiler keeps between
    /// compiles for the engine's life (Cranelift's register allocator's buffers, 4 MB once
    /// the bundled skills were compiled).
    pub(crate) fn load(
        &self,
        engine: &Engine,
        config: &wasmtime::Config,
        bytes: &ComponentBytes,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let (Some(dir), Some(entry)) = (&self.dir, self.entry(bytes)) else {
            return self.compile(engine, &bytes.get()?).map(|c| (c, CacheOutcome::Compiled));
        };
        if entry.exists() {
            match deserialize(engine, &entry) {
                Ok(component) => {
                    bytes.release();
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!(CACHE_LOOKUPS, "result" => "hit").increment(1);
                    tracing::debug!(entry = %entry.display(), "compiled component cache hit");
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(e) => {
                    tracing::warn!(entry = %entry.display(), "discarding unusable cache entry: {e}");
                    let _ = std::fs::remove_file(&entry);
                }
            }
        }
        metrics::counter!(CACHE_LOOKUPS, "result" => "miss").increment(1);
        let compiled = self.compile_for_cache(config, &bytes.get()?)?;
        match store(&compiled, dir, &entry) {
            Ok(()) => bytes.release(),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "cannot write the compiled cache: {e}");
                return Ok((adopt(engine, &compiled)?, CacheOutcome::Compiled));
            }
        }
        // The code the process keeps is the stored entry, mapped from its file: pages the
        // kernel can drop and read again, not the compile's anonymous copy (as large as
        // the entry, tens of MB for an interpreter), which goes back to the kernel now.
        match deserialize(engine, &entry) {
            Ok(stored) => Ok((stored, CacheOutcome::Compiled)),
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "cannot map the entry just written: {e}");
                Ok((adopt(engine, &compiled)?, CacheOutcome::Compiled))
            }
        }
    }

    /// Compile `bytes` into the cache unless it holds them already, loading nothing: what a
    /// compile ahead of a first call does. Without a cache there is nothing to fill.
    pub(crate) fn fill(&self, config: &wasmtime::Config, bytes: &ComponentBytes) -> wasmtime::Result<()> {
        let (Some(dir), Some(entry)) = (&self.dir, self.entry(bytes)) else { return Ok(()) };
        if entry.is_file() {
            return Ok(());
        }
        let compiled = self.compile_for_cache(config, &bytes.get()?)?;
        store(&compiled, dir, &entry)?;
        bytes.release();
        Ok(())
    }

    /// `bytes` compiled for the cache, serialized: by the worker, or here when there is
    /// none or it cannot be started.
    fn compile_for_cache(&self, config: &wasmtime::Config, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match self.in_worker(Compiler::Cranelift, bytes) {
            Some(code) => {
                let code = code?;
                self.compiled.fetch_add(1, Ordering::Relaxed);
                Ok(code)
            }
            None => self.compile(&Engine::new(config)?, bytes)?.serialize(),
        }
    }

    /// `bytes` compiled by Winch for `engine` (the baseline tier's), never cached: in the
    /// worker when there is one (the code a listing of unapproved bytes runs is then
    /// compiled under the worker's limits, and Winch's code and heap are not this
    /// process's), else here.
    pub(crate) fn compile_baseline(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        match self.in_worker(Compiler::Winch, bytes) {
            Some(code) => adopt(engine, &code?),
            None => Component::new(engine, bytes),
        }
    }

    /// `bytes` compiled by `compiler` in the worker; `None` when there is none or it cannot
    /// be started (the caller compiles here).
    fn in_worker(&self, compiler: Compiler, bytes: &[u8]) -> Option<Result<Vec<u8>, WorkerError>> {
        match self.worker.as_ref()?.compile(compiler, bytes) {
            Err(error @ WorkerError::Spawn { .. }) => {
                tracing::warn!(%error, "compiling in this process");
                None
            }
            compiled => Some(compiled),
        }
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

/// `compiled` (what [`Component::serialize`] made of a compile just now, in this process
/// or in its compile worker, by an engine of `engine`'s configuration) as `engine`'s, from
/// memory.
#[allow(unsafe_code)]
fn adopt(engine: &Engine, compiled: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize` trusts its input to be code wasmtime compiled: `compiled` was
    // serialized by wasmtime a moment ago, in this process or in the worker this process
    // started (its own executable, or the embedder's command), read from a pipe only the
    // two of them hold; wasmtime checks it matches this engine.
    unsafe { Component::deserialize(engine, compiled) }
}

fn store(bytes: &[u8], dir: &Path, entry: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
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

/// A component's bytes and their SHA-256 (its key in the cache), held in memory until
/// the cache holds its code ([`release`](Self::release)). A compile that needs them after
/// that (the entry was removed, or is unusable) reads the file again, and takes it only
/// if it hashes the same: what compiles is always what was loaded.
pub(crate) struct ComponentBytes {
    path: PathBuf,
    len: usize,
    hash: [u8; 32],
    held: parking_lot::Mutex<Option<Arc<[u8]>>>,
}

impl ComponentBytes {
    /// `bytes`, read from `path`.
    pub(crate) fn new(path: &Path, bytes: Arc<[u8]>) -> Self {
        let hash = Sha256::digest(&bytes).into();
        Self { path: path.to_owned(), len: bytes.len(), hash, held: parking_lot::Mutex::new(Some(bytes)) }
    }

    /// The bytes: held, or read again from the file when it still holds exactly them
    /// (opened without following a link, read no further than one byte past their
    /// length).
    pub(crate) fn get(&self) -> std::io::Result<Arc<[u8]>> {
        if let Some(bytes) = &*self.held.lock() {
            return Ok(bytes.clone());
        }
        let gone = |why: String| {
            std::io::Error::other(format!(
                "the component's compiled code is no longer cached and {} {why}; reload the skill",
                self.path.display()
            ))
        };
        use rustix::fs::{CWD, Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = rustix::fs::openat(CWD, &self.path, flags, Mode::empty())
            .map(std::fs::File::from)
            .map_err(|e| gone(format!("cannot be read again ({e})")))?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(gone("is no longer a file".into()));
        }
        let mut read = Vec::with_capacity(self.len);
        file.take(self.len as u64 + 1).read_to_end(&mut read).map_err(|e| gone(format!("cannot be read again ({e})")))?;
        if read.len() != self.len || <[u8; 32]>::from(Sha256::digest(&read)) != self.hash {
            return Err(gone("holds other bytes than the ones loaded".into()));
        }
        Ok(read.into())
    }

    /// Let the bytes go: the cache holds their code.
    pub(crate) fn release(&self) {
        self.held.lock().take();
    }

    /// Whether the bytes are held in memory.
    pub(crate) fn is_held(&self) -> bool {
        self.held.lock().is_some()
    }
}
