//! [`PgPolicies`]: skills' run policies, package locks and approved files in PostgreSQL
//! (table `policies`), shared by the replicas; a write tells every host, as a trust change
//! does, so each loads the skill again under what was written.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Pg, TRUST_CHANNEL};
use crate::error::StoreError;
use crate::policies::{Kept, PolicyStore};

const FIX: &str = "check that PostgreSQL answers at [state] url and that its role may write the skillhost tables";

/// The records of skills' scripts in PostgreSQL.
pub struct PgPolicies {
    pg: Arc<Pg>,
}

impl PgPolicies {
    /// The records of `pg`.
    pub fn open(pg: Arc<Pg>) -> Self {
        Self { pg }
    }
}

impl PolicyStore for PgPolicies {
    fn read(&self, identity: &str, kept: Kept) -> Result<Option<String>, StoreError> {
        let identity = identity.to_owned();
        self.pg
            .block(move |client| async move {
                let row =
                    client.query_opt("SELECT text FROM policies WHERE identity = $1 AND kind = $2", &[&identity, &kept.suffix()]).await?;
                Ok(row.map(|row| row.get(0)))
            })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn write(&self, identity: &str, kept: Kept, text: &str) -> Result<(), StoreError> {
        let (identity, text) = (identity.to_owned(), text.to_owned());
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        self.pg
            .block(move |mut client| async move {
                let tx = client.transaction().await?;
                tx.execute(
                    "INSERT INTO policies (identity, kind, text, updated_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (identity, kind) DO UPDATE SET text = $3, updated_at = $4",
                    &[&identity, &kept.suffix(), &text, &at],
                )
                .await?;
                tx.execute("SELECT pg_notify($1, $2)", &[&TRUST_CHANNEL, &identity]).await?;
                tx.commit().await?;
                Ok(())
            })
            .map_err(|e| self.pg.error(e, FIX))
    }

    fn place(&self, identity: &str, kept: Kept) -> PathBuf {
        PathBuf::from(format!("{}#policies/{identity}.{}", self.pg.shown(), kept.suffix()))
    }
}
