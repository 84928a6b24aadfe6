//! skillhost's stores, each behind a trait, with a SQLite implementation over the data
//! dir (one person's host) and a PostgreSQL one (the state the replicas of a team gateway
//! share), opened together as a [`State`] from one [`StateUrl`]:
//!
//! | trait | SQLite, in the data dir | PostgreSQL |
//! | --- | --- | --- |
//! | [`TrustStore`]: trust states and approvals | [`SqliteTrustStore`], `trust.db` | [`PgTrustStore`], tells other hosts of changes |
//! | [`Stats`]: usage statistics of calls and missed searches | [`SqliteStats`], `stats.db` | [`PgStats`] |
//! | [`AuditLog`]: every outbound request, and every run of scripts | [`SqliteAuditLog`], `audit.db` | [`PgAuditLog`] |
//! | [`PolicyStore`]: run policies, package locks, approved files | [`FilePolicies`], `policies/` | [`PgPolicies`] |
//! | [`CallerStore`]: the callers of the HTTP front, by their tokens' hashes | [`SqliteCallers`], `callers.db` | [`PgCallers`] |
//! | [`RunFileStore`]: the files runs left, for their links | (the MCP front's memory) | [`PgRunFiles`] |
//! | [`SecretStore`]: secrets the egress gate adds to requests | [`FileSecretStore`], `secrets/` | (per host) |
//!
//! - [`state`]: [`State`], the stores opened from a [`StateUrl`].
//! - [`claims`]: [`CallClaims`], calls run at most once across the hosts of a shared
//!   store, by a key the client gives (PostgreSQL only).
//! - [`run_files`]: [`RunFileStore`], the files runs left, readable from every host of a
//!   shared store (PostgreSQL only; one host keeps them in memory).
//! - [`postgres`]: the PostgreSQL stores, their schema and the trust listener.
//! - `writer`: the background writer of the append-only stores, whatever holds them.
//! - `sqlite`: how the SQLite files are opened (WAL, commits synced but the statistics',
//!   no checkpoint at close, busy timeout, owner-only 0600 files), and the background
//!   writer the append-only ones (stats, audit) share.
//! - [`trust`]: the trust store and the [`TrustState`] rules, including why a narrowed
//!   capability also needs reapproval.
//! - [`stats`]: per-tool latency and failures, failing skills, searches that found
//!   nothing.
//! - [`audit`]: the audit log of outbound requests (an [`AuditSink`](skillhost_core::AuditSink))
//!   and of runs of skills' scripts.
//! - [`secrets`]: one file per secret, a [`SecretSource`](skillhost_core::SecretSource).
//! - `error`: [`StoreError`], the trust store's and the statistics' errors.

pub mod audit;
pub mod callers;
pub mod claims;
mod error;
pub mod policies;
pub mod postgres;
pub mod run_files;
pub mod secrets;
mod sqlite;
pub mod state;
pub mod stats;
pub mod trust;
mod writer;

pub use audit::{AuditError, AuditLog, AuditQuery, DecisionRecord, RunAudit, RunOutcome, RunRecord, SqliteAuditLog};
pub use callers::{CallerRecord, CallerStore, SqliteCallers};
pub use claims::{CallClaims, Claim};
pub use error::StoreError;
pub use policies::{FilePolicies, Kept, PolicyStore};
pub use postgres::{PgAuditLog, PgCallers, PgPolicies, PgRunFiles, PgStats, PgTrustStore};
pub use run_files::{RunFile, RunFileStore};
pub use secrets::{FileSecretStore, SecretError, SecretStore};
pub use state::{State, StateUrl};
pub use stats::{SqliteStats, Stats};
pub use trust::{ApprovalChannel, ApprovedBy, Observation, Record, SqliteTrustStore, TrustChange, TrustState, TrustStore};
