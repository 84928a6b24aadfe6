//! [`State`]: the stores a host keeps its state in, opened together from one setting
//! ([`StateUrl`], `[state] url` of the host config): SQLite files in the data dir for one
//! person's host (the default), or one PostgreSQL database the replicas of a team gateway
//! and the CLI a human approves with share.

use std::path::Path;
use std::sync::Arc;

use crate::audit::{AuditLog, SqliteAuditLog};
use crate::callers::{CallerStore, SqliteCallers};
use crate::claims::CallClaims;
use crate::error::StoreError;
use crate::policies::{FilePolicies, PolicyStore};
use crate::postgres::{Pg, PgAuditLog, PgCallers, PgClaims, PgPolicies, PgRunFiles, PgStats, PgTrustStore};
use crate::run_files::RunFileStore;
use crate::stats::{SqliteStats, Stats};
use crate::trust::{SqliteTrustStore, TrustStore};

/// Where a host's state lives. Its `Debug` never shows a password.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum StateUrl {
    /// `trust.db`, `audit.db` and `stats.db` in the data dir.
    #[default]
    Sqlite,
    /// One PostgreSQL database (`postgres://USER@HOST:PORT/DATABASE`).
    Postgres(String),
}

impl std::fmt::Debug for StateUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateUrl::Sqlite => f.write_str("Sqlite"),
            StateUrl::Postgres(url) => f.debug_tuple("Postgres").field(&crate::postgres::shown(url)).finish(),
        }
    }
}

/// A state URL that is neither `sqlite` nor `postgres://…` (shown by its scheme only: the
/// rest may hold a password).
#[derive(Debug, thiserror::Error)]
#[error("state `{given}` is neither `sqlite` nor a `postgres://USER@HOST:PORT/DATABASE` URL")]
pub struct BadStateUrl {
    given: String,
}

impl std::str::FromStr for StateUrl {
    type Err = BadStateUrl;

    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let given = given.trim();
        if given == "sqlite" {
            Ok(StateUrl::Sqlite)
        } else if given.starts_with("postgres://") || given.starts_with("postgresql://") {
            Ok(StateUrl::Postgres(given.to_owned()))
        } else {
            let given = match given.split_once("://") {
                Some((scheme, _)) => format!("{}://…", scheme.chars().take(20).collect::<String>()),
                None => given.chars().take(20).collect(),
            };
            Err(BadStateUrl { given })
        }
    }
}

/// What a scoped thread returned (its panic goes on in the caller).
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The stores of a host, opened together.
#[derive(Clone)]
pub struct State {
    /// Trust states and approvals.
    pub trust: Arc<dyn TrustStore>,
    /// Usage statistics; `None` when they cannot be kept (a read-only data dir).
    pub stats: Option<Arc<dyn Stats>>,
    /// The audit log of outbound requests and runs.
    pub audit: Arc<dyn AuditLog>,
    /// Skills' run policies, package locks and approved files.
    pub policies: Arc<dyn PolicyStore>,
    /// Calls run at most once across the hosts of the store, by a key the client gives;
    /// `None` for SQLite (one host: a client's retry reaches the same process).
    pub claims: Option<Arc<dyn CallClaims>>,
    /// The callers of the HTTP front, by their tokens' hashes.
    pub callers: Arc<dyn CallerStore>,
    /// The files runs left, readable from every host of the store; `None` for SQLite (one
    /// host keeps them in its memory).
    pub run_files: Option<Arc<dyn RunFileStore>>,
    /// `sqlite`, or the PostgreSQL URL without its password.
    pub shown: String,
    /// The replica's name in the rows it writes (PostgreSQL), else empty.
    pub replica: String,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("shown", &self.shown).field("replica", &self.replica).finish_non_exhaustive()
    }
}

impl State {
    /// Open the stores `url` names: SQLite files in `data_dir`, or the PostgreSQL
    /// database (its schema brought up to date), this host writing as `replica`.
    pub fn open(url: &StateUrl, replica: &str, data_dir: &Path) -> Result<Self, StoreError> {
        match url {
            // What a first answer needs opens now, the trust store and the audit log side
            // by side (each a few system calls, a schema check and a sync of nothing): a
            // `serve` answers nobody before, and a log that cannot be kept stops the host.
            // The statistics' database is opened by their writer at its first rows (or by
            // a reader), the callers' at their first use (only an HTTP front has any).
            StateUrl::Sqlite => std::thread::scope(|side| {
                let audit = side.spawn(|| SqliteAuditLog::open(data_dir.join("audit.db")));
                let trust = SqliteTrustStore::open(data_dir);
                let audit = joined(audit);
                Ok(State {
                    trust: Arc::new(trust?),
                    stats: SqliteStats::open(data_dir)
                        .inspect_err(|error| tracing::warn!(%error, "no usage statistics"))
                        .ok()
                        .map(|stats| Arc::new(stats) as Arc<dyn Stats>),
                    audit: Arc::new(audit?),
                    policies: Arc::new(FilePolicies::new(data_dir.join("policies"))),
                    claims: None,
                    callers: Arc::new(SqliteCallers::at(data_dir)),
                    run_files: None,
                    shown: "sqlite".to_owned(),
                    replica: String::new(),
                })
            }),
            StateUrl::Postgres(url) => {
                let pg = Pg::connect(url, replica)?;
                Ok(State {
                    trust: Arc::new(PgTrustStore::open(pg.clone())),
                    stats: Some(Arc::new(PgStats::open(pg.clone())?)),
                    audit: Arc::new(PgAuditLog::open(pg.clone())?),
                    policies: Arc::new(PgPolicies::open(pg.clone())),
                    claims: Some(Arc::new(PgClaims::open(pg.clone()))),
                    callers: Arc::new(PgCallers::open(pg.clone())),
                    run_files: Some(Arc::new(PgRunFiles::open(pg.clone()))),
                    shown: pg.shown().to_owned(),
                    replica: replica.to_owned(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start opens the trust store and the audit log; the statistics' database waits for
    /// the first rows (written off the call's path), the callers' for a use (HTTP only).
    #[test]
    fn a_start_opens_only_what_a_first_answer_needs() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(&StateUrl::Sqlite, "", dir.path()).unwrap();
        let exists = |name: &str| dir.path().join(name).exists();
        assert!(exists("trust.db") && exists("audit.db"));
        assert!(!exists("stats.db"), "the statistics' database was opened at start");
        assert!(!exists("callers.db"), "the callers' database was opened at start");

        let stats = state.stats.clone().unwrap();
        stats.record_call("echo", "echo", crate::stats::Outcome::Ok, std::time::Duration::from_millis(1));
        stats.flush();
        assert!(exists("stats.db"), "the first row opens it");
        assert_eq!(stats.tools().unwrap().len(), 1);
        assert_eq!(state.callers.list().unwrap(), vec![]);
        assert!(exists("callers.db"));
    }

    /// A reader before any row was written finds the schema, not an error.
    #[test]
    fn statistics_read_before_any_row_are_empty() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(&StateUrl::Sqlite, "", dir.path()).unwrap();
        let stats = state.stats.unwrap();
        assert!(stats.tools().unwrap().is_empty() && stats.failing().unwrap().is_empty() && stats.missing().unwrap().is_empty());
    }
}
