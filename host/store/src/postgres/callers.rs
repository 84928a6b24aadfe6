//! [`PgCallers`]: [`CallerStore`] in PostgreSQL (table `callers`), shared by the replicas:
//! a caller added or removed on one host is known to every other at its next request.

use std::sync::Arc;

use super::Pg;
use crate::callers::{CallerRecord, CallerStore, groups_of, groups_text, millis, time};
use crate::error::StoreError;

const FIX: &str = "check that PostgreSQL answers at [state] url";

/// The callers in PostgreSQL.
pub struct PgCallers {
    pg: Arc<Pg>,
}

impl PgCallers {
    /// The callers of `pg`.
    pub fn open(pg: Arc<Pg>) -> Self {
        Self { pg }
    }
}

fn record(row: &tokio_postgres::Row) -> CallerRecord {
    CallerRecord {
        name: row.get(0),
        token_sha256: row.get(1),
        groups: groups_of(row.get(2)),
        created: time(row.get(3)),
        expires: row.get::<_, Option<i64>>(4).map(time),
    }
}

impl CallerStore for PgCallers {
    fn add(&self, record: &CallerRecord) -> Result<(), StoreError> {
        let row = record.clone();
        let added = self
            .pg
            .block(move |client| async move {
                let insert = client
                    .prepare_cached(
                        "INSERT INTO callers (name, token, groups, created_ms, expires_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
                    )
                    .await?;
                let groups = groups_text(&row.groups);
                Ok(client.execute(&insert, &[&row.name, &row.token_sha256, &groups, &millis(row.created), &row.expires.map(millis)]).await?)
            })
            .map_err(|e| self.pg.error(e, FIX))?;
        if added == 1 { Ok(()) } else { Err(StoreError::CallerExists { name: record.name.clone() }) }
    }

    fn list(&self) -> Result<Vec<CallerRecord>, StoreError> {
        self.pg
            .block(|client| async move {
                let rows = client.query("SELECT name, token, groups, created_ms, expires_ms FROM callers ORDER BY name", &[]).await?;
                Ok(rows.iter().map(record).collect())
            })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.pg
            .block(move |client| async move { Ok(client.execute("DELETE FROM callers WHERE name = $1", &[&name]).await? > 0) })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn find(&self, token_sha256: &str) -> Result<Option<CallerRecord>, StoreError> {
        let token = token_sha256.to_owned();
        self.pg
            .block(move |client| async move {
                let select =
                    client.prepare_cached("SELECT name, token, groups, created_ms, expires_ms FROM callers WHERE token = $1").await?;
                Ok(client.query_opt(&select, &[&token]).await?.as_ref().map(record))
            })
            .map_err(|e| self.pg.error(e, FIX))
    }
}
