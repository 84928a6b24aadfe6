//! skillhost's stores, each behind a trait a later backend (PostgreSQL) can implement,
//! with the SQLite (and, for secrets, file) implementations the host opens over its data
//! dir:
//!
//! | trait | implementation | in the data dir |
//! | --- | --- | --- |
//! | [`TrustStore`]: trust states and approvals | [`SqliteTrustStore`] | `trust.db` |
//! | [`Stats`]: usage statistics of calls and missed searches | [`SqliteStats`] | `stats.db` |
//! | [`AuditLog`]: every outbound request, and every run of scripts | [`SqliteAuditLog`] | `audit.db` |
//! | [`SecretStore`]: secrets the egress gate adds to requests | [`FileSecretStore`] | `secrets/` |
//!
//! - `sqlite`: how the SQLite files are opened (WAL, busy timeout, owner-only 0600
//!   files), and the background writer the append-only ones (stats, audit) share.
//! - [`trust`]: the trust store and the [`TrustState`] rules, including why a narrowed
//!   capability also needs reapproval.
//! - [`stats`]: per-tool latency and failures, failing skills, searches that found
//!   nothing.
//! - [`audit`]: the audit log of outbound requests (an [`AuditSink`](skillhost_core::AuditSink))
//!   and of runs of skills' scripts.
//! - [`secrets`]: one file per secret, a [`SecretSource`](skillhost_core::SecretSource).
//! - `error`: [`StoreError`], the trust store's and the statistics' errors.

pub mod audit;
mod error;
pub mod secrets;
mod sqlite;
pub mod stats;
pub mod trust;

pub use audit::{AuditError, AuditLog, AuditQuery, RunAudit, RunOutcome, RunRecord, SqliteAuditLog};
pub use error::StoreError;
pub use secrets::{FileSecretStore, SecretError, SecretStore};
pub use stats::{SqliteStats, Stats};
pub use trust::{ApprovalChannel, ApprovedBy, Observation, Record, SqliteTrustStore, TrustState, TrustStore};
