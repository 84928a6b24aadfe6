//! [`CallerStore`]: the agents and people that may reach a host's HTTP front, each by a
//! token of its own. Only a token's SHA-256 is kept (a token is 32 random bytes, so its
//! hash cannot be searched back); a caller has a name, the groups the org policy sees it
//! in, and an optional expiry. Removing a caller revokes its token at once, on every host
//! of the store (each request looks its token up).
//!
//! One host keeps them in `callers.db` in its data dir ([`SqliteCallers`]); the replicas
//! of a team gateway in PostgreSQL ([`PgCallers`](crate::postgres::PgCallers)).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;

/// One caller, as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallerRecord {
    /// Its name: the principal of the org policy (`Caller::"NAME"`) and the name in the
    /// audit.
    pub name: String,
    /// The SHA-256 of its token, lowercase hex.
    pub token_sha256: String,
    /// The groups it is in (`Group::"NAME"` in the org policy).
    pub groups: Vec<String>,
    /// When it was added.
    pub created: SystemTime,
    /// When its token stops working; `None`: never.
    pub expires: Option<SystemTime>,
}

impl CallerRecord {
    /// Whether its token has expired at `now`.
    pub fn expired(&self, now: SystemTime) -> bool {
        self.expires.is_some_and(|expires| expires <= now)
    }
}

/// The callers of a host, or of the hosts sharing a state store.
pub trait CallerStore: Send + Sync {
    /// Whether the store can be used now (SQLite's file is opened at its first use): a
    /// front that looks tokens up asks as it starts, and does not start if it cannot.
    fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Add `record`; refused when a caller of that name exists.
    fn add(&self, record: &CallerRecord) -> Result<(), StoreError>;

    /// Every caller, by name.
    fn list(&self) -> Result<Vec<CallerRecord>, StoreError>;

    /// Remove the caller `name` (its token stops working); whether it existed.
    fn remove(&self, name: &str) -> Result<bool, StoreError>;

    /// The caller whose token hashes to `token_sha256`, expired or not.
    fn find(&self, token_sha256: &str) -> Result<Option<CallerRecord>, StoreError>;
}

pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// Groups as kept in one column: comma-separated (a group name holds no comma).
pub(crate) fn groups_text(groups: &[String]) -> String {
    groups.join(",")
}

pub(crate) fn groups_of(text: &str) -> Vec<String> {
    text.split(',').filter(|g| !g.is_empty()).map(str::to_owned).collect()
}

/// The callers in SQLite, `callers.db` in the data dir, opened at its first use: a host
/// that serves no HTTP front (`serve` on stdio, a command) never opens it.
pub struct SqliteCallers {
    path: PathBuf,
    db: Mutex<Option<Connection>>,
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS callers (
    name       TEXT PRIMARY KEY,
    token      TEXT NOT NULL UNIQUE,
    groups     TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER
)";

impl SqliteCallers {
    /// `callers.db` in `data_dir`, opened (and created) when first used: its errors come
    /// from that use, or from [`CallerStore::ready`].
    pub fn at(data_dir: &Path) -> Self {
        Self { path: data_dir.join("callers.db"), db: Mutex::new(None) }
    }

    /// Open (creating) `callers.db` in `data_dir` now.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let callers = Self::at(data_dir);
        callers.ready()?;
        Ok(callers)
    }

    /// The connection, opened now if it was not (an open that failed is tried again at
    /// the next use).
    fn db(&self) -> Result<MappedMutexGuard<'_, Connection>, StoreError> {
        let mut db = self.db.lock();
        if db.is_none() {
            *db = Some(self.connect()?);
        }
        MutexGuard::try_map(db, Option::as_mut).map_err(|_| Self::fail(&self.path, "the connection went away"))
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_owned(),
                action: "cannot create the data directory",
                source,
            })?;
        }
        let db = crate::sqlite::connect(&self.path).map_err(|e| Self::fail(&self.path, e))?;
        db.execute_batch(SCHEMA).map_err(|e| Self::fail(&self.path, e))?;
        Ok(db)
    }

    fn fail(path: &Path, error: impl std::fmt::Display) -> StoreError {
        StoreError::Callers { path: path.to_owned(), message: error.to_string() }
    }

    fn row(row: &rusqlite::Row<'_>) -> rusqlite::Result<CallerRecord> {
        Ok(CallerRecord {
            name: row.get(0)?,
            token_sha256: row.get(1)?,
            groups: groups_of(&row.get::<_, String>(2)?),
            created: time(row.get(3)?),
            expires: row.get::<_, Option<i64>>(4)?.map(time),
        })
    }
}

impl CallerStore for SqliteCallers {
    fn ready(&self) -> Result<(), StoreError> {
        self.db().map(drop)
    }

    fn add(&self, record: &CallerRecord) -> Result<(), StoreError> {
        let db = self.db()?;
        let added = db.execute(
            "INSERT INTO callers (name, token, groups, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (name) DO NOTHING",
            params![record.name, record.token_sha256, groups_text(&record.groups), millis(record.created), record.expires.map(millis)],
        );
        match added {
            Ok(1) => Ok(()),
            Ok(_) => Err(StoreError::CallerExists { name: record.name.clone() }),
            Err(e) => Err(Self::fail(&self.path, e)),
        }
    }

    fn list(&self) -> Result<Vec<CallerRecord>, StoreError> {
        let db = self.db()?;
        let mut statement = db
            .prepare("SELECT name, token, groups, created_ms, expires_ms FROM callers ORDER BY name")
            .map_err(|e| Self::fail(&self.path, e))?;
        let rows = statement.query_map([], Self::row).map_err(|e| Self::fail(&self.path, e))?;
        rows.collect::<rusqlite::Result<_>>().map_err(|e| Self::fail(&self.path, e))
    }

    fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let db = self.db()?;
        db.execute("DELETE FROM callers WHERE name = ?1", [name]).map(|n| n > 0).map_err(|e| Self::fail(&self.path, e))
    }

    fn find(&self, token_sha256: &str) -> Result<Option<CallerRecord>, StoreError> {
        let db = self.db()?;
        db.query_row("SELECT name, token, groups, created_ms, expires_ms FROM callers WHERE token = ?1", [token_sha256], Self::row)
            .optional()
            .map_err(|e| Self::fail(&self.path, e))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(name: &str, token: &str, expires: Option<SystemTime>) -> CallerRecord {
        CallerRecord {
            name: name.to_owned(),
            token_sha256: token.to_owned(),
            groups: vec!["readers".to_owned(), "team".to_owned()],
            created: time(1_700_000_000_000),
            expires,
        }
    }

    /// What every backend must do; run on SQLite here and on PostgreSQL in its tests.
    pub(crate) fn the_caller_rules(store: &dyn CallerStore) {
        let soon = time(1_800_000_000_000);
        store.add(&record("alice", "aa", None)).unwrap();
        store.add(&record("bob", "bb", Some(soon))).unwrap();
        let again = store.add(&record("alice", "cc", None)).unwrap_err().to_string();
        assert!(again.contains("a caller named `alice` exists") && again.contains("skillhost caller remove alice"), "{again}");
        assert!(store.add(&record("carol", "aa", None)).is_err(), "a token hash belongs to one caller");
        assert_eq!(store.find("bb").unwrap(), Some(record("bob", "bb", Some(soon))));
        assert!(store.find("bb").unwrap().unwrap().expired(soon) && !store.find("bb").unwrap().unwrap().expired(time(0)));
        assert_eq!(store.find("zz").unwrap(), None);
        assert_eq!(store.list().unwrap().iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
        assert!(store.remove("alice").unwrap());
        assert!(!store.remove("alice").unwrap());
        assert_eq!(store.find("aa").unwrap(), None, "a removed caller's token finds nobody");
    }

    /// A host that serves no HTTP front never opens `callers.db`; the first use opens it,
    /// and a file that cannot be opened is an error there, naming it.
    #[test]
    fn callers_db_is_opened_at_its_first_use() {
        let dir = tempfile::tempdir().unwrap();
        let callers = SqliteCallers::at(dir.path());
        assert!(!dir.path().join("callers.db").exists(), "made before anything used it");
        assert_eq!(callers.find("aa").unwrap(), None);
        assert!(dir.path().join("callers.db").exists());

        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let error = SqliteCallers::at(&file).ready().unwrap_err().to_string();
        assert!(error.contains("not-a-dir"), "{error}");
    }

    #[test]
    fn sqlite_callers_follow_the_rules_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        the_caller_rules(&SqliteCallers::open(dir.path()).unwrap());
        assert_eq!(SqliteCallers::open(dir.path()).unwrap().list().unwrap().len(), 1, "bob is still there after reopening");
    }
}
