//! [`RunFileStore`]: the files runs of skills' scripts left, kept for the agent to read
//! (`resources/read` of a `skillhost-run://RUN/PATH` link) from any host sharing the
//! store. One host keeps them in its own memory; the replicas of a team gateway keep them
//! in PostgreSQL ([`PgRunFiles`](crate::postgres::PgRunFiles)), so a link one replica
//! gave is read on whichever replica the balancer picks.

use std::collections::BTreeMap;

use crate::error::StoreError;

/// What a read of one file of a kept run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunFile {
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// The run is kept, without that file.
    NoFile,
    /// No run is kept under that id (never, or collected).
    NotKept,
}

/// Runs' files, kept newest first within a budget: past [`SHARED_RUNS`] runs or
/// [`SHARED_BYTES`] bytes the oldest runs are dropped.
pub trait RunFileStore: Send + Sync {
    /// Keep `files` (path → bytes) as run `run`'s.
    fn keep(&self, run: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<(), StoreError>;

    /// File `path` of run `run`.
    fn read(&self, run: &str, path: &str) -> Result<RunFile, StoreError>;
}

/// Runs whose files the hosts of a shared store keep, all hosts together.
pub const SHARED_RUNS: i64 = 256;
/// Bytes of runs' files the hosts of a shared store keep, all hosts together.
pub const SHARED_BYTES: i64 = 256 << 20;
