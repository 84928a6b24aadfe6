//! [`PgStats`]: the usage statistics in PostgreSQL, every replica's calls and missed
//! searches in one table each (rows naming the replica), summed by the rules of
//! [`Stats`] written once in `stats.rs`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Pg, PgFail};
use crate::error::StoreError;
use crate::stats::{Failing, KEPT_MISSES, Missing, Outcome, Stats, ToolStats, WINDOW, kept_query};
use crate::writer::{GATHER, Writer};

const FIX: &str = "check that PostgreSQL answers at [state] url";

enum Row {
    Call { skill: String, tool: String, outcome: Outcome, ms: f64 },
    Miss { query: String },
}

/// The usage statistics in PostgreSQL.
pub struct PgStats {
    pg: Arc<Pg>,
    writer: Writer<Row>,
}

impl PgStats {
    /// The statistics of `pg`, written by a thread of their own.
    pub fn open(pg: Arc<Pg>) -> Result<Self, StoreError> {
        let db = pg.clone();
        let writer = Writer::with_batches("skillhost-stats", pg.shown().to_owned(), GATHER, move |rows: &[Row]| {
            let replica = db.replica().to_owned();
            let at = now();
            let calls: Vec<(String, String, i16, f64)> = rows
                .iter()
                .filter_map(|r| match r {
                    Row::Call { skill, tool, outcome, ms } => Some((skill.clone(), tool.clone(), outcome.code() as i16, *ms)),
                    Row::Miss { .. } => None,
                })
                .collect();
            let misses: Vec<String> =
                rows.iter().filter_map(|r| if let Row::Miss { query } = r { Some(query.clone()) } else { None }).collect();
            db.block(move |mut client| async move {
                let tx = client.transaction().await?;
                let call = tx.prepare("INSERT INTO calls (replica, skill, tool, outcome, ms, at) VALUES ($1, $2, $3, $4, $5, $6)").await?;
                for (skill, tool, outcome, ms) in &calls {
                    tx.execute(&call, &[&replica, skill, tool, outcome, ms, &at]).await?;
                }
                let miss = tx.prepare("INSERT INTO misses (replica, query, at) VALUES ($1, $2, $3)").await?;
                for query in &misses {
                    tx.execute(&miss, &[&replica, query, &at]).await?;
                }
                if !misses.is_empty() {
                    tx.execute("DELETE FROM misses WHERE id <= (SELECT max(id) FROM misses) - $1", &[&KEPT_MISSES]).await?;
                }
                tx.commit().await?;
                Ok(())
            })
        })
        .map_err(|source| StoreError::Io {
            path: "postgres".into(),
            action: "cannot start the statistics writer thread",
            source,
        })?;
        Ok(Self { pg, writer })
    }

    fn read<T: Send + 'static, Fut>(&self, query: impl FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static) -> Result<T, StoreError>
    where
        Fut: std::future::Future<Output = Result<T, PgFail>> + Send + 'static,
    {
        self.flush();
        self.pg.block(query).map_err(|e| self.pg.error(e, FIX))
    }
}

impl Stats for PgStats {
    fn record_call(&self, skill: &str, tool: &str, outcome: Outcome, elapsed: Duration) {
        self.writer.send(Row::Call { skill: skill.to_owned(), tool: tool.to_owned(), outcome, ms: elapsed.as_secs_f64() * 1000.0 });
    }

    fn record_miss(&self, query: &str) {
        self.writer.send(Row::Miss { query: kept_query(query) });
    }

    fn flush(&self) {
        self.writer.flush();
    }

    fn tools(&self) -> Result<Vec<ToolStats>, StoreError> {
        self.read(|client| async move {
            let rows = client
                .query(
                    "SELECT skill, tool, count(*), count(*) FILTER (WHERE outcome = 1), count(*) FILTER (WHERE outcome = 2),
                            (SELECT array_agg(ms) FROM (SELECT ms FROM calls l WHERE l.skill = c.skill AND l.tool = c.tool ORDER BY id DESC LIMIT 1000) AS last)
                     FROM calls c GROUP BY skill, tool ORDER BY skill, tool",
                    &[],
                )
                .await?;
            Ok(rows
                .into_iter()
                .map(|row| {
                    let latencies: Option<Vec<f64>> = row.get(5);
                    ToolStats::of(row.get(0), row.get(1), [row.get(2), row.get(3), row.get(4)], latencies.unwrap_or_default())
                })
                .collect())
        })
    }

    fn failing(&self) -> Result<Vec<Failing>, StoreError> {
        self.read(|client| async move {
            let rows = client
                .query(
                    "SELECT s.skill, (SELECT array_agg(ok) FROM (SELECT outcome = 0 AS ok FROM calls c WHERE c.skill = s.skill AND outcome <> 2 ORDER BY id DESC LIMIT $1) AS last)
                     FROM (SELECT DISTINCT skill FROM calls) AS s ORDER BY s.skill",
                    &[&(WINDOW as i64)],
                )
                .await?;
            Ok(rows
                .into_iter()
                .filter_map(|row| {
                    let oks: Option<Vec<bool>> = row.get(1);
                    Failing::of(row.get(0), &oks.unwrap_or_default())
                })
                .collect())
        })
    }

    fn missing(&self) -> Result<Vec<Missing>, StoreError> {
        self.read(|client| async move {
            let rows = client.query("SELECT query FROM misses WHERE query <> '' ORDER BY id DESC LIMIT 500", &[]).await?;
            Ok(Missing::group(rows.into_iter().map(|row| row.get(0)).collect()))
        })
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
