//! The stores in PostgreSQL: the state several hosts share (the replicas of a team
//! gateway, and the CLI a human approves with), chosen with `[state] url =
//! "postgres://…"`.
//!
//! | store | tables |
//! | --- | --- |
//! | [`PgTrustStore`] | `skills`, `approvals` (the same rows and rules as `trust.db`) |
//! | [`PgAuditLog`] | `egress`, `runs`, each row naming the replica that wrote it |
//! | [`PgStats`] | `calls`, `misses`, each row naming the replica |
//! | [`PgClaims`] | `call_claims`, `replicas` (heartbeats) |
//! | [`PgPolicies`] | `policies`: run policies, package locks, approved files |
//!
//! **Driver**: `tokio-postgres` with the `deadpool-postgres` pool: the asynchronous
//! driver of the tokio ecosystem the host already runs on, maintained with the
//! `postgres` crates, with LISTEN/NOTIFY delivered as connection messages; the pool keeps
//! a few connections open and hands each operation one. The stores' traits are
//! synchronous (the registry reads trust under a lock, never across an await), so
//! [`Pg`] runs every operation on a runtime thread of its own and waits for it, each
//! bounded by [`OP_TIMEOUT`]: a host never hangs on a database that stopped answering, it
//! fails the operation with what to check.
//!
//! **Migrations** (`migrate.rs`) are numbered steps applied in one transaction under an
//! advisory lock, so replicas starting together apply each once; a database newer than
//! this host is refused.
//!
//! **Approvals reach every replica within a second**: a human's approve, reject, disable
//! or enable sends `NOTIFY skillhost_trust` with the skill's identity in the transaction
//! that writes it; every [`PgTrustStore`] listens on a connection of its own and passes
//! the identity on ([`TrustStore::changes`](crate::TrustStore::changes)); the registry
//! reads that skill's state again. When the listener's connection drops, it reconnects
//! and asks for every state to be read again ([`TrustChange::All`]), since a notification
//! sent meanwhile is lost. Automatic approvals and the rows a load records notify nobody
//! (each replica computes those itself), so replicas never echo each other.
//!
//! [`cluster::Cluster`] starts a throwaway server for tests and for trying it out.
//!
//! Connections are plain TCP or a Unix socket (`host=/run/postgresql`): use a private
//! network or a socket; TLS to PostgreSQL is not offered yet.

mod audit;
mod callers;
pub mod claims;
pub mod cluster;
mod migrate;
mod policies;
mod run_files;
mod stats;
mod trust;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use audit::PgAuditLog;
pub use callers::PgCallers;
pub use claims::PgClaims;
pub use policies::PgPolicies;
pub use run_files::PgRunFiles;
pub use stats::PgStats;
pub use trust::PgTrustStore;

use crate::error::StoreError;

/// How long one operation may take before it fails (the database is unreachable or
/// locked).
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);

/// The notification channel of trust changes.
pub(crate) const TRUST_CHANNEL: &str = "skillhost_trust";

/// One PostgreSQL database, shared by the stores of a host: its pool, and the runtime
/// thread their operations run on.
pub struct Pg {
    handle: tokio::runtime::Handle,
    pool: deadpool_postgres::Pool,
    config: tokio_postgres::Config,
    shown: String,
    replica: String,
    /// Dropped with the last store: the runtime thread ends.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Why an operation failed, before it is told as a [`StoreError`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgFail {
    #[error("{0}")]
    Db(#[from] tokio_postgres::Error),
    #[error("no connection: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("no answer within {} s", OP_TIMEOUT.as_secs())]
    Timeout,
    #[error("{0}")]
    Schema(String),
}

impl Pg {
    /// Connect to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, or `host=… user=…`)
    /// as the replica `replica`, and bring the schema up to date.
    pub fn connect(url: &str, replica: &str) -> Result<Arc<Self>, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| StoreError::Postgres {
            url: shown(url),
            message: format!("not a PostgreSQL connection string: {e}"),
            fix: "write [state] url as postgres://USER@HOST:PORT/DATABASE (the password in the URL or in a .pgpass the host reads)",
        })?;
        let (handle, stop) = runtime_thread().map_err(|source| StoreError::Io {
            path: "postgres".into(),
            action: "cannot start the PostgreSQL runtime thread",
            source,
        })?;
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(8)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(OP_TIMEOUT))
            .create_timeout(Some(OP_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Postgres { url: shown(url), message: e.to_string(), fix: "check [state] url" })?;
        let pg = Arc::new(Self { handle, pool, config, shown: shown(url), replica: replica.to_owned(), _stop: stop });
        pg.block(migrate::migrate)
            .map_err(|e| pg.error(e, "check that PostgreSQL answers at [state] url and that its role may create tables"))?;
        Ok(pg)
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The replica this host is, as its rows name it.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Run `operation` with a pooled connection on the runtime thread, and wait for it
    /// (at most [`OP_TIMEOUT`]).
    pub(crate) fn block<T, F, Fut>(&self, operation: F) -> Result<T, PgFail>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, PgFail>> + Send + 'static,
    {
        let pool = self.pool.clone();
        self.spawn_and_wait(async move {
            let client = pool.get().await?;
            operation(client).await
        })
    }

    /// Run `future` on the runtime thread and wait for it (at most [`OP_TIMEOUT`]); its
    /// time is the `skillhost_store_latency_seconds` histogram.
    pub(crate) fn spawn_and_wait<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, PgFail>> + Send + 'static,
    ) -> Result<T, PgFail> {
        let (done, wait) = std::sync::mpsc::channel();
        let started = std::time::Instant::now();
        self.handle.spawn(async move {
            let result = tokio::time::timeout(OP_TIMEOUT, future).await.unwrap_or(Err(PgFail::Timeout));
            let _ = done.send(result);
        });
        let result = wait.recv().unwrap_or(Err(PgFail::Timeout));
        let outcome = if result.is_ok() { "ok" } else { "failed" };
        metrics::histogram!("skillhost_store_latency_seconds", "outcome" => outcome).record(started.elapsed().as_secs_f64());
        result
    }

    /// The runtime the stores' background tasks (the trust listener) run on.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// The connection settings, for a connection of its own (the trust listener).
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// `fail` as a [`StoreError`] naming this database.
    pub(crate) fn error(&self, fail: PgFail, fix: &'static str) -> StoreError {
        StoreError::Postgres { url: self.shown.clone(), message: fail.to_string(), fix }
    }
}

/// A thread running a tokio runtime until the returned sender is dropped.
fn runtime_thread() -> std::io::Result<(tokio::runtime::Handle, tokio::sync::oneshot::Sender<()>)> {
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new().name("skillhost-postgres".to_owned()).spawn(move || match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let _ = handle_tx.send(Ok(runtime.handle().clone()));
            runtime.block_on(async move {
                let _ = stopped.await;
            });
        }
        Err(e) => {
            let _ = handle_tx.send(Err(e));
        }
    })?;
    let handle = handle_rx.recv().map_err(std::io::Error::other)??;
    Ok((handle, stop))
}

/// `url` as errors, logs and `/readyz` may show it: rebuilt from what it parses to (user,
/// hosts, ports, database), never with its password, wherever the URL carried one
/// (`user:PASSWORD@`, a `password=` parameter, a key-value string). One that does not
/// parse is not shown at all.
pub(crate) fn shown(url: &str) -> String {
    let Ok(config) = url.parse::<tokio_postgres::Config>() else {
        return "(a PostgreSQL connection string that does not parse; not shown, it may hold a password)".to_owned();
    };
    let user = match (config.get_user(), config.get_password().is_some()) {
        (Some(user), true) => format!("{user}:***@"),
        (Some(user), false) => format!("{user}@"),
        (None, true) => ":***@".to_owned(),
        (None, false) => String::new(),
    };
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(n, host)| {
            let host = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            match ports.get(n).or(ports.first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    format!("postgres://{user}{}/{}", hosts.join(","), config.get_dbname().unwrap_or_default())
}

#[cfg(test)]
mod tests;
