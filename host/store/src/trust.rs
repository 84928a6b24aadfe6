//! The trust store: one row per skill name in `<data_dir>/trust.db` (SQLite, WAL), holding
//! its [`TrustState`] and the approval it was given, bound to the skill's content hash and
//! capability digest.
//!
//! [`TrustStore`] is what the registry asks of it; [`SqliteTrustStore`] keeps it in SQLite.
//!
//! How a state is reached ([`TrustStore::observe`] runs on every load):
//!
//! | situation | state |
//! | --- | --- |
//! | `disabled` | stays `disabled` whatever changes, until a human enables it |
//! | hash and digest equal the approved ones | `approved` |
//! | hash and digest equal an earlier approval (a rollback, a reverted edit) | `approved` again, with that approval |
//! | tier auto, not rejected | `approved`, recorded as automatic (`approved_by = 'auto'`) |
//! | approved before, hash or digest differ | `needs_reapproval` |
//! | never approved | `pending_review` |
//!
//! **A narrowed capability needs reapproval too.** Any change of the capability digest,
//! wider or narrower, returns the skill to `needs_reapproval` (unless its new tier is auto).
//! Telling "narrower" from "different" needs a semantic comparison of every kind of
//! capability (files, limits, and network rules as they are added), and a mistake there
//! is a silent escalation; a human re-approving a narrowing costs one command, and the
//! approval request shows exactly what changed.
//!
//! **Every approval is kept** (table `approvals`, one row per name, hash and digest), so
//! going back to a version a human approved (`skillhost rollback`) finds its approval
//! again; a rejection drops all of a skill's approvals.
//!
//! **Every approval records its channel** ([`ApprovalChannel`], column `approved_via`,
//! schema 3): `cli` (a human ran `skillhost approve`), `mcp-elicitation` (a human's answer
//! to a question an MCP client showed: the host cannot see who answered, so a human can
//! tell these apart later with `skillhost show` and revoke them with `skillhost reject`),
//! or `auto` (the tier needs no human). Approvals given before schema 3 keep their rows
//! with no channel recorded.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use skillhost_core::RiskTier;

use crate::error::StoreError;

/// The schema version this code writes (SQLite `user_version`).
const SCHEMA_VERSION: i64 = 3;

/// Every approval ever given (schema 2), so an older approved version is approved again.
const APPROVALS: &str = "CREATE TABLE approvals (
                             name              TEXT NOT NULL,
                             content_hash      TEXT NOT NULL,
                             capability_digest TEXT NOT NULL,
                             requests          TEXT,
                             approved_by       TEXT NOT NULL,
                             approved_at       INTEGER NOT NULL,
                             PRIMARY KEY (name, content_hash, capability_digest)
                         );";

/// Where a skill stands with the human who decides what runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    /// New to the user: never approved (or rejected). Not callable.
    PendingReview,
    /// Approved, by a human or automatically (tier auto). Callable.
    Approved,
    /// Was approved, then its files or its requests changed. Not callable.
    NeedsReapproval,
    /// Turned off by a human; stays off across changes until enabled. Not callable.
    Disabled,
}

impl TrustState {
    /// The name stored in the database and shown to users (`pending_review`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TrustState::PendingReview => "pending_review",
            TrustState::Approved => "approved",
            TrustState::NeedsReapproval => "needs_reapproval",
            TrustState::Disabled => "disabled",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [TrustState::PendingReview, TrustState::Approved, TrustState::NeedsReapproval, TrustState::Disabled]
            .into_iter()
            .find(|s| s.as_str() == text)
    }

    /// What the state means, after "skill `x` ".
    pub fn describe(self) -> &'static str {
        match self {
            TrustState::PendingReview => "is pending review",
            TrustState::Approved => "is approved",
            TrustState::NeedsReapproval => "changed since it was approved and needs reapproval",
            TrustState::Disabled => "is disabled",
        }
    }

    /// The command that makes `name` callable.
    pub fn fix(self, name: &str) -> String {
        match self {
            TrustState::PendingReview => format!("approve it with `skillhost approve {name}`"),
            TrustState::NeedsReapproval => format!("review the changes and approve it with `skillhost approve {name}`"),
            TrustState::Disabled => format!("enable it with `skillhost enable {name}`"),
            TrustState::Approved => "it can be called".to_owned(),
        }
    }
}

impl std::fmt::Display for TrustState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who approved a skill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedBy {
    /// The host, because the skill's tier is auto.
    Auto,
    /// A human, through one of the [`ApprovalChannel`]s a human uses.
    Human,
}

/// Through which channel an approval came: what a human reviewing approvals later needs
/// to tell a terminal's `approve` from an answer relayed by an MCP client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalChannel {
    /// A human at a terminal: `skillhost approve` (or an embedder's own prompt).
    Cli,
    /// A human's answer to an MCP elicitation: the MCP client showed the question and
    /// relayed the answer, bound to the session that was asked and to exactly the content
    /// and requests shown.
    McpElicitation,
    /// The host itself: the skill's tier needs no human.
    Auto,
}

impl ApprovalChannel {
    /// The name stored in the database and shown to users (`cli`, `mcp-elicitation`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalChannel::Cli => "cli",
            ApprovalChannel::McpElicitation => "mcp-elicitation",
            ApprovalChannel::Auto => "auto",
        }
    }

    /// Who approves through this channel.
    pub fn approved_by(self) -> ApprovedBy {
        match self {
            ApprovalChannel::Auto => ApprovedBy::Auto,
            ApprovalChannel::Cli | ApprovalChannel::McpElicitation => ApprovedBy::Human,
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [ApprovalChannel::Cli, ApprovalChannel::McpElicitation, ApprovalChannel::Auto].into_iter().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for ApprovalChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one load of a skill looks like to the trust store.
#[derive(Clone, Debug)]
pub struct Observation<'a> {
    /// The skill's identity (its name, or its data key).
    pub name: &'a str,
    /// The content hash of what was loaded.
    pub content_hash: &'a str,
    /// The digest of the capabilities it asks for.
    pub capability_digest: &'a str,
    /// Its risk tier.
    pub tier: RiskTier,
}

/// A skill's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its state.
    pub state: TrustState,
    /// The content hash its current approval was given for.
    pub approved_hash: Option<String>,
    /// The capability digest its current approval was given for.
    pub approved_digest: Option<String>,
    /// The request lines the approval was given for (JSON array), for the next diff.
    pub approved_requests: Option<String>,
    /// Who gave that approval.
    pub approved_by: Option<ApprovedBy>,
    /// The channel of that approval; `None` for approvals given before channels were
    /// recorded (schema 3).
    pub approved_via: Option<ApprovalChannel>,
    /// A human declined it: it is not auto-approved again until a human approves it.
    pub rejected: bool,
}

/// A change of trust made elsewhere (another replica, or the CLI, through a shared
/// store): the registry reads the skill's state again ([`TrustStore::changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustChange {
    /// A human approved, rejected, disabled or enabled the skill of this identity.
    Skill(String),
    /// Changes may have been missed (the store's listener reconnected): read every
    /// skill's state again.
    All,
}

impl Record {
    /// A row as both backends store it: `state`, the approval's hash, digest and request
    /// lines, `by` (`auto` or `human`), `via` (an [`ApprovalChannel`]), `rejected`.
    pub(crate) fn from_columns(state: &str, approval: [Option<String>; 3], by: Option<&str>, via: Option<&str>, rejected: bool) -> Self {
        let [approved_hash, approved_digest, approved_requests] = approval;
        Record {
            state: TrustState::parse(state).unwrap_or(TrustState::PendingReview),
            approved_hash,
            approved_digest,
            approved_requests,
            approved_by: by.map(|b| if b == "auto" { ApprovedBy::Auto } else { ApprovedBy::Human }),
            approved_via: via.and_then(ApprovalChannel::parse),
            rejected,
        }
    }
}

/// The store of trust states and approvals, one row per skill identity. The rules of
/// [`observe`](Self::observe) (see the module docs) are written once, on the primitive
/// operations each backend implements.
pub trait TrustStore: Send + Sync {
    /// The row of `name`, if it has one.
    fn get(&self, name: &str) -> Result<Option<Record>, StoreError>;

    /// Record a load of a skill and return its state (see the module docs for the rules).
    /// `requests` are the lines an automatic approval is recorded with.
    fn observe(&self, seen: &Observation<'_>, requests: &[String]) -> Result<TrustState, StoreError> {
        let record = self.get(seen.name)?;
        let matches_approval = record.as_ref().is_some_and(|r| {
            r.approved_hash.as_deref() == Some(seen.content_hash) && r.approved_digest.as_deref() == Some(seen.capability_digest)
        });
        let state = match &record {
            Some(r) if r.state == TrustState::Disabled => TrustState::Disabled,
            _ if matches_approval => TrustState::Approved,
            Some(_) if self.restore_approval(seen)? => return Ok(TrustState::Approved),
            Some(r) if r.rejected => TrustState::PendingReview,
            _ if seen.tier == RiskTier::Auto => {
                self.write_approval(seen, requests, ApprovalChannel::Auto)?;
                return Ok(TrustState::Approved);
            }
            Some(r) if r.approved_hash.is_some() => TrustState::NeedsReapproval,
            _ => TrustState::PendingReview,
        };
        self.record_seen(seen, state)
    }

    /// Approve what was observed, through `channel`.
    fn write_approval(&self, seen: &Observation<'_>, requests: &[String], channel: ApprovalChannel) -> Result<(), StoreError>;

    /// A human declined the skill: its approval is dropped and it is not auto-approved
    /// again until a human approves it. A disabled skill stays disabled.
    fn reject(&self, name: &str) -> Result<(), StoreError>;

    /// Set `disabled` (keeping any approval for when it is enabled again).
    fn disable(&self, name: &str) -> Result<(), StoreError>;

    /// Lift `disabled`; the caller observes the skill again to find its new state.
    fn enable(&self, name: &str) -> Result<(), StoreError>;

    /// For [`observe`](Self::observe): make an earlier approval of exactly this hash and
    /// digest the current one, unless the skill was rejected or is disabled; whether one
    /// was.
    fn restore_approval(&self, seen: &Observation<'_>) -> Result<bool, StoreError>;

    /// For [`observe`](Self::observe): record what was seen with `state`, and return the
    /// state stored, which stays `disabled` when a human disabled the skill meanwhile (in
    /// another process, or on another replica).
    fn record_seen(&self, seen: &Observation<'_>, state: TrustState) -> Result<TrustState, StoreError>;

    /// Trust changes made elsewhere, for a store shared by several processes that tells
    /// them ([`PgTrustStore`](crate::postgres::PgTrustStore)); `None` for one that
    /// cannot.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TrustChange>> {
        None
    }

    /// Whether the store answers (for a readiness check), and how long it took.
    fn ping(&self) -> Result<std::time::Duration, StoreError> {
        let started = std::time::Instant::now();
        self.get("")?;
        Ok(started.elapsed())
    }
}

/// The trust store in SQLite, `<data_dir>/trust.db`.
pub struct SqliteTrustStore {
    path: PathBuf,
    db: Mutex<Connection>,
}

impl SqliteTrustStore {
    /// Open (or create) `<data_dir>/trust.db`.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::Io {
            path: data_dir.to_owned(),
            action: "cannot create the data directory",
            source,
        })?;
        let path = data_dir.join("trust.db");
        let fail = |fix: &'static str| {
            let path = path.clone();
            move |e: rusqlite::Error| StoreError::Trust { path, message: e.to_string(), fix }
        };
        let db = crate::sqlite::connect(&path).map_err(fail("check that the data directory is writable"))?;
        let version: i64 = db.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(fail("check the database file"))?;
        match version {
            0 => {
                db.execute_batch(
                    "BEGIN;
                     CREATE TABLE skills (
                         name              TEXT PRIMARY KEY,
                         state             TEXT NOT NULL,
                         seen_hash         TEXT,
                         seen_digest       TEXT,
                         approved_hash     TEXT,
                         approved_digest   TEXT,
                         approved_requests TEXT,
                         approved_by       TEXT,
                         approved_at       INTEGER,
                         rejected          INTEGER NOT NULL DEFAULT 0,
                         updated_at        INTEGER NOT NULL
                     );
                     PRAGMA user_version = 1;
                     COMMIT;",
                )
                .map_err(fail("check that the data directory is writable"))?;
                migrate_to_2(&db).map_err(fail("check that the data directory is writable"))?;
                migrate_to_3(&db).map_err(fail("check that the data directory is writable"))?;
            }
            1 => {
                migrate_to_2(&db).map_err(fail("check that the data directory is writable"))?;
                migrate_to_3(&db).map_err(fail("check that the data directory is writable"))?;
            }
            2 => migrate_to_3(&db).map_err(fail("check that the data directory is writable"))?,
            SCHEMA_VERSION => {}
            newer => {
                return Err(StoreError::Trust {
                    path,
                    message: format!("schema version {newer} is newer than this skillhost's ({SCHEMA_VERSION})"),
                    fix: "upgrade skillhost, or move the file away to start with no approvals",
                });
            }
        }
        Ok(Self { path, db: Mutex::new(db) })
    }

    fn err(&self, fix: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::Trust { path: self.path.clone(), message: e.to_string(), fix }
    }
}

impl TrustStore for SqliteTrustStore {
    fn get(&self, name: &str) -> Result<Option<Record>, StoreError> {
        self.db.lock()
            .query_row(
                "SELECT state, approved_hash, approved_digest, approved_requests, approved_by, rejected, approved_via FROM skills WHERE name = ?1",
                [name],
                |row| {
                    Ok(Record::from_columns(
                        &row.get::<_, String>(0)?,
                        [row.get(1)?, row.get(2)?, row.get(3)?],
                        row.get::<_, Option<String>>(4)?.as_deref(),
                        row.get::<_, Option<String>>(6)?.as_deref(),
                        row.get(5)?,
                    ))
                },
            )
            .optional()
            .map_err(self.err("check the database file"))
    }

    fn restore_approval(&self, seen: &Observation<'_>) -> Result<bool, StoreError> {
        let restored = self
            .db.lock()
            .execute(
                "UPDATE skills SET state = 'approved', seen_hash = ?2, seen_digest = ?3, approved_hash = ?2, approved_digest = ?3,
                     approved_requests = a.requests, approved_by = a.approved_by, approved_via = a.approved_via, approved_at = a.approved_at, updated_at = ?4
                 FROM (SELECT requests, approved_by, approved_via, approved_at FROM approvals WHERE name = ?1 AND content_hash = ?2 AND capability_digest = ?3) AS a
                 WHERE skills.name = ?1 AND skills.rejected = 0 AND skills.state != 'disabled'",
                params![seen.name, seen.content_hash, seen.capability_digest, now()],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        Ok(restored > 0)
    }

    fn record_seen(&self, seen: &Observation<'_>, state: TrustState) -> Result<TrustState, StoreError> {
        let db = self.db.lock();
        // A row that already says this is not written again: a load of an unchanged skill
        // (every `skillhost run`) commits nothing, and syncs nothing.
        let written: Option<String> = db
            .query_row(
                "INSERT INTO skills (name, state, seen_hash, seen_digest, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(name) DO UPDATE SET state = CASE skills.state WHEN 'disabled' THEN 'disabled' ELSE ?2 END,
                     seen_hash = ?3, seen_digest = ?4, updated_at = ?5
                 WHERE skills.state NOT IN ('disabled', ?2) OR skills.seen_hash IS NOT ?3 OR skills.seen_digest IS NOT ?4
                 RETURNING state",
                params![seen.name, state.as_str(), seen.content_hash, seen.capability_digest, now()],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.err("check that the data directory is writable"))?;
        let stored = match written {
            Some(stored) => stored,
            None => db
                .query_row("SELECT state FROM skills WHERE name = ?1", params![seen.name], |row| row.get(0))
                .map_err(self.err("check the database file"))?,
        };
        Ok(TrustState::parse(&stored).unwrap_or(state))
    }

    fn write_approval(&self, seen: &Observation<'_>, requests: &[String], channel: ApprovalChannel) -> Result<(), StoreError> {
        let requests = serde_json::to_string(requests).expect("strings serialise");
        let by = match channel.approved_by() {
            ApprovedBy::Auto => "auto",
            ApprovedBy::Human => "human",
        };
        let via = channel.as_str();
        self.db.lock()
            .execute(
                "INSERT INTO skills (name, state, seen_hash, seen_digest, approved_hash, approved_digest, approved_requests, approved_by, approved_via, approved_at, rejected, updated_at)
                 VALUES (?1, 'approved', ?2, ?3, ?2, ?3, ?4, ?5, ?7, ?6, 0, ?6)
                 ON CONFLICT(name) DO UPDATE SET state = 'approved', seen_hash = ?2, seen_digest = ?3, approved_hash = ?2,
                     approved_digest = ?3, approved_requests = ?4, approved_by = ?5, approved_via = ?7, approved_at = ?6, rejected = 0, updated_at = ?6",
                params![seen.name, seen.content_hash, seen.capability_digest, requests, by, now(), via],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        self.db
            .lock()
            .execute(
                "INSERT OR REPLACE INTO approvals (name, content_hash, capability_digest, requests, approved_by, approved_via, approved_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?7, ?6)",
                params![seen.name, seen.content_hash, seen.capability_digest, requests, by, now(), via],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        Ok(())
    }

    fn reject(&self, name: &str) -> Result<(), StoreError> {
        self.db.lock()
            .execute(
                "INSERT INTO skills (name, state, rejected, updated_at) VALUES (?1, 'pending_review', 1, ?2)
                 ON CONFLICT(name) DO UPDATE SET state = CASE state WHEN 'disabled' THEN 'disabled' ELSE 'pending_review' END, approved_hash = NULL, approved_digest = NULL,
                     approved_requests = NULL, approved_by = NULL, approved_via = NULL, approved_at = NULL, rejected = 1, updated_at = ?2",
                params![name, now()],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        self.db
            .lock()
            .execute("DELETE FROM approvals WHERE name = ?1", [name])
            .map_err(self.err("check that the data directory is writable"))?;
        Ok(())
    }

    fn disable(&self, name: &str) -> Result<(), StoreError> {
        self.db
            .lock()
            .execute(
                "INSERT INTO skills (name, state, updated_at) VALUES (?1, 'disabled', ?2)
                 ON CONFLICT(name) DO UPDATE SET state = 'disabled', updated_at = ?2",
                params![name, now()],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        Ok(())
    }

    fn enable(&self, name: &str) -> Result<(), StoreError> {
        self.db
            .lock()
            .execute(
                "UPDATE skills SET state = 'pending_review', updated_at = ?2 WHERE name = ?1 AND state = 'disabled'",
                params![name, now()],
            )
            .map_err(self.err("check that the data directory is writable"))?;
        Ok(())
    }
}

/// Schema 1 → 2: keep every approval, starting with the current ones.
fn migrate_to_2(db: &Connection) -> rusqlite::Result<()> {
    db.execute_batch(&format!(
        "BEGIN;
         {APPROVALS}
         INSERT INTO approvals (name, content_hash, capability_digest, requests, approved_by, approved_at)
             SELECT name, approved_hash, approved_digest, approved_requests, approved_by, COALESCE(approved_at, updated_at)
             FROM skills WHERE approved_hash IS NOT NULL AND approved_digest IS NOT NULL AND approved_by IS NOT NULL;
         PRAGMA user_version = 2;
         COMMIT;"
    ))
}

/// Schema 2 → 3: the channel of each approval. Every row is kept; automatic approvals
/// were always the host's (`auto`), a human's earlier ones keep no channel (it was not
/// recorded: `skillhost show` says so).
fn migrate_to_3(db: &Connection) -> rusqlite::Result<()> {
    // A column that is there already (a store rolled back by hand) is kept as it is.
    let mut add = String::new();
    for table in ["skills", "approvals"] {
        let has: i64 = db.query_row("SELECT count(*) FROM pragma_table_info(?1) WHERE name = 'approved_via'", [table], |row| row.get(0))?;
        if has == 0 {
            add.push_str(&format!("ALTER TABLE {table} ADD COLUMN approved_via TEXT;\n"));
        }
    }
    db.execute_batch(&format!(
        "BEGIN;
         {add}
         UPDATE skills SET approved_via = 'auto' WHERE approved_by = 'auto' AND approved_via IS NULL;
         UPDATE approvals SET approved_via = 'auto' WHERE approved_by = 'auto' AND approved_via IS NULL;
         PRAGMA user_version = 3;
         COMMIT;"
    ))
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let dir = std::env::temp_dir().join(format!("skillhost-trust-{tag}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn schema_2_rows_are_kept_and_get_a_channel_where_it_is_known() {
        let scratch = Scratch::new("migrate");
        {
            // A trust.db as schema 2 left it: one human and one automatic approval.
            let db = Connection::open(scratch.0.join("trust.db")).unwrap();
            db.execute_batch(
                "CREATE TABLE skills (name TEXT PRIMARY KEY, state TEXT NOT NULL, seen_hash TEXT, seen_digest TEXT,
                     approved_hash TEXT, approved_digest TEXT, approved_requests TEXT, approved_by TEXT, approved_at INTEGER,
                     rejected INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL);",
            )
            .unwrap();
            migrate_to_2(&db).unwrap();
            for (name, by) in [("reviewed", "human"), ("pure", "auto")] {
                db.execute(
                    "INSERT INTO skills (name, state, seen_hash, seen_digest, approved_hash, approved_digest, approved_requests, approved_by, approved_at, updated_at)
                     VALUES (?1, 'approved', 'h', 'd', 'h', 'd', '[]', ?2, 1, 1)",
                    params![name, by],
                )
                .unwrap();
                db.execute(
                    "INSERT INTO approvals (name, content_hash, capability_digest, requests, approved_by, approved_at) VALUES (?1, 'h', 'd', '[]', ?2, 1)",
                    params![name, by],
                )
                .unwrap();
            }
        }
        let store = SqliteTrustStore::open(&scratch.0).unwrap();
        let reviewed = store.get("reviewed").unwrap().unwrap();
        assert_eq!((reviewed.state, reviewed.approved_by, reviewed.approved_via), (TrustState::Approved, Some(ApprovedBy::Human), None));
        let pure = store.get("pure").unwrap().unwrap();
        assert_eq!((pure.approved_by, pure.approved_via), (Some(ApprovedBy::Auto), Some(ApprovalChannel::Auto)));
        let version: i64 = store.db.lock().pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);

        // A new approval records its channel, in the row and in the kept approvals.
        let seen = Observation { name: "reviewed", content_hash: "h2", capability_digest: "d2", tier: RiskTier::Confirm };
        store.write_approval(&seen, &[], ApprovalChannel::McpElicitation).unwrap();
        let row = store.get("reviewed").unwrap().unwrap();
        assert_eq!((row.approved_by, row.approved_via), (Some(ApprovedBy::Human), Some(ApprovalChannel::McpElicitation)));
        let kept: Option<String> = store
            .db
            .lock()
            .query_row("SELECT approved_via FROM approvals WHERE name = 'reviewed' AND content_hash = 'h2'", [], |row| row.get(0))
            .unwrap();
        assert_eq!(kept.as_deref(), Some("mcp-elicitation"));
        // Reopening finds schema 3 and changes nothing.
        drop(store);
        let again = SqliteTrustStore::open(&scratch.0).unwrap();
        assert_eq!(again.get("pure").unwrap().unwrap().approved_via, Some(ApprovalChannel::Auto));
    }
}
