//! [`PgClaims`]: [`CallClaims`] in PostgreSQL: a new call is one statement (the claim),
//! and its answer one more. Each host writes a heartbeat every [`HEARTBEAT`] (table
//! `replicas`); a claim whose host has not beaten for [`GONE`] is
//! [`Claim::Interrupted`] (a host whose heartbeat merely stalled then finishes the call
//! it runs, and the other's caller is told the outcome is unknown: still never twice).
//! Claims older than [`KEPT`] are dropped.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Pg;
use crate::claims::{CallClaims, Claim};
use crate::error::StoreError;

/// How often a host writes its heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long without a heartbeat before a host's claims count as interrupted.
pub const GONE: Duration = Duration::from_secs(3);
/// How long a claim and its answer are kept.
pub const KEPT: Duration = Duration::from_secs(24 * 3600);

const FIX: &str = "check that PostgreSQL answers at [state] url";

/// Claims of calls in PostgreSQL.
pub struct PgClaims {
    pg: Arc<Pg>,
}

impl PgClaims {
    /// The claims of `pg`; this host's heartbeat starts (and ends with the database's
    /// last store).
    pub fn open(pg: Arc<Pg>) -> Self {
        let beat = pg.clone();
        pg.handle().spawn(async move {
            let (pool, replica) = (beat.pool.clone(), beat.replica.clone());
            drop(beat);
            let mut ticks = tokio::time::interval(HEARTBEAT);
            let mut swept = 0;
            loop {
                ticks.tick().await;
                let Ok(client) = pool.get().await else { continue };
                let now = now_ms();
                let _ = client
                    .execute(
                        "INSERT INTO replicas (name, seen_ms) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET seen_ms = $2",
                        &[&replica, &now],
                    )
                    .await;
                swept += 1;
                if swept % 600 == 1 {
                    let _ = client.execute("DELETE FROM call_claims WHERE started_ms < $1", &[&(now - KEPT.as_millis() as i64)]).await;
                }
            }
        });
        Self { pg }
    }
}

impl CallClaims for PgClaims {
    fn claim(&self, key: &str) -> Result<Claim, StoreError> {
        let (key, replica) = (key.to_owned(), self.pg.replica().to_owned());
        self.pg
            .block(move |client| async move {
                let now = now_ms();
                let insert = client
                    .prepare_cached("INSERT INTO call_claims (key, replica, started_ms) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING")
                    .await?;
                let claimed = client.execute(&insert, &[&key, &replica, &now]).await?;
                if claimed == 1 {
                    return Ok(Claim::New);
                }
                let found = client
                    .prepare_cached(
                        "SELECT c.replica, c.answer, COALESCE(r.seen_ms, 0) FROM call_claims c LEFT JOIN replicas r ON r.name = c.replica WHERE c.key = $1",
                    )
                    .await?;
                let row = client.query_one(&found, &[&key]).await?;
                let (owner, answer, seen): (String, Option<String>, i64) = (row.get(0), row.get(1), row.get(2));
                Ok(match answer {
                    Some(answer) => Claim::Done(answer),
                    None if now - seen > GONE.as_millis() as i64 => Claim::Interrupted { replica: owner },
                    None => Claim::Running { replica: owner },
                })
            })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn finish(&self, key: &str, answer: &str) -> Result<(), StoreError> {
        let (key, answer, replica) = (key.to_owned(), answer.to_owned(), self.pg.replica().to_owned());
        self.pg
            .block(move |client| async move {
                let update = client.prepare_cached("UPDATE call_claims SET answer = $2 WHERE key = $1 AND replica = $3").await?;
                client.execute(&update, &[&key, &answer, &replica]).await?;
                Ok(())
            })
            .map_err(|e| self.pg.error(e, FIX))
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
