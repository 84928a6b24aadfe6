//! [`PgTrustStore`]: the trust store in PostgreSQL, with the rows and rules of
//! `trust.db` (the rules are [`TrustStore::observe`]'s, written once), and the listener
//! that passes on the trust changes other hosts make.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use tokio::sync::broadcast;

use super::{Pg, PgFail, TRUST_CHANNEL};
use crate::error::StoreError;
use crate::trust::{ApprovalChannel, ApprovedBy, Observation, Record, TrustChange, TrustState, TrustStore};

/// How long the listener waits before connecting again after its connection failed.
const RECONNECT: Duration = Duration::from_millis(500);

const WRITE_FIX: &str = "check that PostgreSQL answers at [state] url and that its role may write the skillhost tables";

/// The trust store in PostgreSQL, shared by every host pointed at the database.
pub struct PgTrustStore {
    pg: Arc<Pg>,
    changes: broadcast::Sender<TrustChange>,
}

impl PgTrustStore {
    /// The trust store of `pg`, listening for the changes other hosts make.
    pub fn open(pg: Arc<Pg>) -> Self {
        let changes = broadcast::channel(1024).0;
        pg.handle().spawn(listen(pg.config().clone(), changes.clone(), pg.shown().to_owned()));
        Self { pg, changes }
    }

    fn run<T: Send + 'static, Fut>(
        &self,
        operation: impl FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
    ) -> Result<T, StoreError>
    where
        Fut: std::future::Future<Output = Result<T, PgFail>> + Send + 'static,
    {
        self.pg.block(operation).map_err(|e| self.pg.error(e, WRITE_FIX))
    }

    /// Run the statements `sql` (parameters: `$1` the name, `$2` the time, where used) and notify every host of `name`, in
    /// one transaction.
    fn change(&self, name: &str, sql: &'static [&'static str]) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.run(move |mut client| async move {
            let tx = client.transaction().await?;
            let at = now();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&name, &at];
            for statement in sql {
                let statement = tx.prepare(statement).await?;
                tx.execute(&statement, &params[..statement.params().len()]).await?;
            }
            tx.execute("SELECT pg_notify($1, $2)", &[&TRUST_CHANNEL, &name]).await?;
            tx.commit().await?;
            Ok(())
        })
    }
}

impl TrustStore for PgTrustStore {
    fn get(&self, name: &str) -> Result<Option<Record>, StoreError> {
        let name = name.to_owned();
        self.run(move |client| async move {
            let row = client
                .query_opt(
                    "SELECT state, approved_hash, approved_digest, approved_requests, approved_by, rejected, approved_via FROM skills WHERE name = $1",
                    &[&name],
                )
                .await?;
            Ok(row.map(|row| {
                Record::from_columns(
                    row.get::<_, &str>(0),
                    [row.get(1), row.get(2), row.get(3)],
                    row.get::<_, Option<&str>>(4),
                    row.get::<_, Option<&str>>(6),
                    row.get(5),
                )
            }))
        })
    }

    fn write_approval(&self, seen: &Observation<'_>, requests: &[String], channel: ApprovalChannel) -> Result<(), StoreError> {
        let requests = serde_json::to_string(requests).expect("strings serialise");
        let by = match channel.approved_by() {
            ApprovedBy::Auto => "auto",
            ApprovedBy::Human => "human",
        };
        let via = channel.as_str();
        // A human's approval is news to the other hosts; an automatic one each host
        // makes itself (and telling it would echo between replicas).
        let notify = channel != ApprovalChannel::Auto;
        let (name, hash, digest) = (seen.name.to_owned(), seen.content_hash.to_owned(), seen.capability_digest.to_owned());
        self.run(move |mut client| async move {
            let tx = client.transaction().await?;
            let at = now();
            tx.execute(
                "INSERT INTO skills (name, state, seen_hash, seen_digest, approved_hash, approved_digest, approved_requests, approved_by, approved_via, approved_at, rejected, updated_at)
                 VALUES ($1, 'approved', $2, $3, $2, $3, $4, $5, $7, $6, FALSE, $6)
                 ON CONFLICT (name) DO UPDATE SET state = 'approved', seen_hash = $2, seen_digest = $3, approved_hash = $2,
                     approved_digest = $3, approved_requests = $4, approved_by = $5, approved_via = $7, approved_at = $6, rejected = FALSE, updated_at = $6",
                &[&name, &hash, &digest, &requests, &by, &at, &via],
            )
            .await?;
            tx.execute(
                "INSERT INTO approvals (name, content_hash, capability_digest, requests, approved_by, approved_via, approved_at)
                 VALUES ($1, $2, $3, $4, $5, $7, $6)
                 ON CONFLICT (name, content_hash, capability_digest) DO UPDATE SET requests = $4, approved_by = $5, approved_via = $7, approved_at = $6",
                &[&name, &hash, &digest, &requests, &by, &at, &via],
            )
            .await?;
            if notify {
                tx.execute("SELECT pg_notify($1, $2)", &[&TRUST_CHANNEL, &name]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn reject(&self, name: &str) -> Result<(), StoreError> {
        self.change(
            name,
            &[
                "INSERT INTO skills (name, state, rejected, updated_at) VALUES ($1, 'pending_review', TRUE, $2)
                 ON CONFLICT (name) DO UPDATE SET state = CASE skills.state WHEN 'disabled' THEN 'disabled' ELSE 'pending_review' END,
                     approved_hash = NULL, approved_digest = NULL, approved_requests = NULL, approved_by = NULL, approved_via = NULL,
                     approved_at = NULL, rejected = TRUE, updated_at = $2",
                "DELETE FROM approvals WHERE name = $1",
            ],
        )
    }

    fn disable(&self, name: &str) -> Result<(), StoreError> {
        self.change(
            name,
            &["INSERT INTO skills (name, state, updated_at) VALUES ($1, 'disabled', $2)
               ON CONFLICT (name) DO UPDATE SET state = 'disabled', updated_at = $2"],
        )
    }

    fn enable(&self, name: &str) -> Result<(), StoreError> {
        self.change(name, &["UPDATE skills SET state = 'pending_review', updated_at = $2 WHERE name = $1 AND state = 'disabled'"])
    }

    fn restore_approval(&self, seen: &Observation<'_>) -> Result<bool, StoreError> {
        let (name, hash, digest) = (seen.name.to_owned(), seen.content_hash.to_owned(), seen.capability_digest.to_owned());
        self.run(move |client| async move {
            let restored = client
                .execute(
                    "UPDATE skills SET state = 'approved', seen_hash = $2, seen_digest = $3, approved_hash = $2, approved_digest = $3,
                         approved_requests = a.requests, approved_by = a.approved_by, approved_via = a.approved_via, approved_at = a.approved_at, updated_at = $4
                     FROM (SELECT requests, approved_by, approved_via, approved_at FROM approvals WHERE name = $1 AND content_hash = $2 AND capability_digest = $3) AS a
                     WHERE skills.name = $1 AND NOT skills.rejected AND skills.state <> 'disabled'",
                    &[&name, &hash, &digest, &now()],
                )
                .await?;
            Ok(restored > 0)
        })
    }

    fn record_seen(&self, seen: &Observation<'_>, state: TrustState) -> Result<TrustState, StoreError> {
        let (name, hash, digest) = (seen.name.to_owned(), seen.content_hash.to_owned(), seen.capability_digest.to_owned());
        let stored = self.run(move |client| async move {
            let row = client
                .query_one(
                    "INSERT INTO skills (name, state, seen_hash, seen_digest, updated_at) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (name) DO UPDATE SET state = CASE skills.state WHEN 'disabled' THEN 'disabled' ELSE $2 END,
                         seen_hash = $3, seen_digest = $4, updated_at = $5
                     RETURNING state",
                    &[&name, &state.as_str(), &hash, &digest, &now()],
                )
                .await?;
            Ok(row.get::<_, String>(0))
        })?;
        Ok(TrustState::parse(&stored).unwrap_or(state))
    }

    fn changes(&self) -> Option<broadcast::Receiver<TrustChange>> {
        Some(self.changes.subscribe())
    }

    fn ping(&self) -> Result<Duration, StoreError> {
        let started = std::time::Instant::now();
        self.run(|client| async move {
            client.query_one("SELECT 1", &[]).await?;
            Ok(())
        })?;
        Ok(started.elapsed())
    }
}

/// Listen for trust changes on a connection of its own, passing each on; after a
/// reconnection, ask for everything to be read again. Ends with the runtime thread, when
/// the last store of the database is dropped.
async fn listen(config: tokio_postgres::Config, changes: broadcast::Sender<TrustChange>, shown: String) {
    let mut reconnected = false;
    loop {
        match config.connect(tokio_postgres::NoTls).await {
            Ok((client, mut connection)) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let url = shown.clone();
                let forward = tokio::spawn(async move {
                    let mut messages = std::pin::pin!(messages);
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                                let _ = tx.send(n.payload().to_owned());
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(%url, error = %e, "the trust listener's connection failed");
                                break;
                            }
                        }
                    }
                });
                if let Err(e) = client.batch_execute(&format!("LISTEN {TRUST_CHANNEL}")).await {
                    tracing::warn!(url = %shown, error = %e, "cannot listen for trust changes");
                } else {
                    if reconnected {
                        // Notifications sent while the connection was down are lost.
                        let _ = changes.send(TrustChange::All);
                    }
                    while let Some(name) = rx.recv().await {
                        let _ = changes.send(TrustChange::Skill(name));
                    }
                }
                forward.abort();
            }
            Err(e) => tracing::warn!(url = %shown, error = %e, "cannot connect to listen for trust changes; retrying"),
        }
        reconnected = true;
        tokio::time::sleep(RECONNECT).await;
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
