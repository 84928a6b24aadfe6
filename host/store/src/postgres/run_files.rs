//! [`PgRunFiles`]: [`RunFileStore`] in PostgreSQL (table `run_files`): a run's files are
//! written in one transaction with the collection of the runs past the budget, so the
//! table never holds more than [`SHARED_RUNS`] runs and about [`SHARED_BYTES`] bytes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Pg;
use crate::error::StoreError;
use crate::run_files::{RunFile, RunFileStore, SHARED_BYTES, SHARED_RUNS};

const FIX: &str = "check that PostgreSQL answers at [state] url";

/// Runs' files in PostgreSQL.
pub struct PgRunFiles {
    pg: Arc<Pg>,
    runs: i64,
    bytes: i64,
}

impl PgRunFiles {
    /// The run files of `pg`, within [`SHARED_RUNS`] and [`SHARED_BYTES`].
    pub fn open(pg: Arc<Pg>) -> Self {
        Self::with_budget(pg, SHARED_RUNS, SHARED_BYTES)
    }

    /// The run files of `pg`, the newest `runs` runs kept within `bytes` in all.
    pub fn with_budget(pg: Arc<Pg>, runs: i64, bytes: i64) -> Self {
        Self { pg, runs, bytes }
    }
}

impl RunFileStore for PgRunFiles {
    fn keep(&self, run: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<(), StoreError> {
        let (run, files, budget) = (run.to_owned(), files.clone(), (self.runs, self.bytes));
        self.pg
            .block(move |mut client| async move {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                let tx = client.transaction().await?;
                let insert =
                    tx.prepare_cached("INSERT INTO run_files (run, path, bytes, size, kept_ms) VALUES ($1, $2, $3, $4, $5)").await?;
                for (path, bytes) in &files {
                    tx.execute(&insert, &[&run, path, bytes, &(bytes.len() as i64), &now]).await?;
                }
                // The newest runs (by the order they were kept in, not the clock: two in
                // one millisecond stay in order) within the budget stay; a run alone over
                // it stays too (the one just kept), as the host's own memory does.
                tx.execute(
                    "DELETE FROM run_files WHERE run IN (
                         SELECT run FROM (
                             SELECT run,
                                    row_number() OVER newest AS n,
                                    (sum(sum(size)) OVER newest)::BIGINT AS total
                             FROM run_files GROUP BY run
                             WINDOW newest AS (ORDER BY max(seq) DESC)
                         ) ranked
                         WHERE n > $1 OR (n > 1 AND total > $2))",
                    &[&budget.0, &budget.1],
                )
                .await?;
                tx.commit().await?;
                Ok(())
            })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn read(&self, run: &str, path: &str) -> Result<RunFile, StoreError> {
        let (run, path) = (run.to_owned(), path.to_owned());
        self.pg
            .block(move |client| async move {
                let select = client.prepare_cached("SELECT path = $2, CASE WHEN path = $2 THEN bytes END FROM run_files WHERE run = $1 ORDER BY path = $2 DESC LIMIT 1").await?;
                Ok(match client.query_opt(&select, &[&run, &path]).await? {
                    None => RunFile::NotKept,
                    Some(row) if row.get::<_, bool>(0) => RunFile::Bytes(row.get(1)),
                    Some(_) => RunFile::NoFile,
                })
            })
            .map_err(|e| self.pg.error(e, FIX))
    }
}
