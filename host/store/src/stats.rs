//! Usage statistics (`<data_dir>/stats.db`, SQLite in WAL mode): one row per tool call
//! made through the registry's `Registry::call` (skill, tool, [`Outcome`],
//! latency), and the `tool_search` queries nothing matched well. Rows are written by a writer
//! thread, so recording never blocks a call; a failure to record is logged, never
//! returned.
//!
//! What it answers:
//! - per tool: calls, the skill's own failures, the caller's errors, p50 and p95
//!   latency ([`Stats::tools`]);
//! - which skills fail: more than 30 % of their last 20 calls, once they have at least
//!   5 (fewer calls say too little) ([`Stats::failing`]). Only the skill's
//!   own failures count, and calls the caller got wrong (invalid input, an unknown tool,
//!   a request the policy refused, a cancellation) are left out of those 20: a skill is
//!   never flagged for an agent's mistakes;
//! - what agents looked for and did not find: groups of at least 3 similar missed
//!   queries (same words, ignoring case, order and stop words, Jaccard ≥ 0.5)
//!   ([`Stats::missing`]), to offer "consider creating a skill for …" when the host opts
//!   in (disabled by default).
//!
//! [`Stats`] is what the registry and its front ends ask of it; [`SqliteStats`] keeps it in
//! SQLite.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};

use skillhost_core::{CallError, CallFailure, ToolOutput};

use crate::error::StoreError;
use crate::sqlite::{self, Writer};

/// Calls looked at to decide whether a skill is failing.
pub const WINDOW: usize = 20;
/// Failure ratio above which a skill is flagged.
pub const FAILING_RATIO: f64 = 0.3;
/// Fewest calls in the window before a skill can be flagged.
pub const MIN_CALLS: usize = 5;
/// Similar misses needed before suggesting a skill.
pub const MISSES_TO_SUGGEST: usize = 3;

/// How a recorded call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It returned an output.
    Ok,
    /// The caller got it wrong: invalid input, an unknown tool, a request the skill's
    /// policy refused, a deadline the caller set shorter than the skill's own, a
    /// cancellation. Not held against the skill.
    CallerError,
    /// The skill failed: it reported a failure, crashed, hit one of its own limits or
    /// broke its output contract, or the host could not run it.
    Failed,
}

impl Outcome {
    /// The outcome of a call's result.
    pub fn of(result: &Result<ToolOutput, CallError>) -> Self {
        let Err(error) = result else { return Self::Ok };
        match error.failure {
            CallFailure::InvalidInput { .. } | CallFailure::UnknownTool { .. } | CallFailure::Denied { .. } | CallFailure::Cancelled => {
                Self::CallerError
            }
            CallFailure::Timeout { skill_limit: Some(_), .. } => Self::CallerError,
            _ => Self::Failed,
        }
    }

    /// The `outcome` column: 0 ok, 1 the skill failed, 2 the caller's error. (The
    /// `ok` column, 1 for ok, is kept for databases written before it.)
    pub(crate) fn code(self) -> i64 {
        match self {
            Self::Ok => 0,
            Self::Failed => 1,
            Self::CallerError => 2,
        }
    }
}

/// Calls, failures and latency of one tool.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolStats {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// Calls recorded.
    pub calls: u64,
    /// Of which the skill failed.
    pub failures: u64,
    /// Of which the caller got wrong (invalid input, unknown tool, refused, cancelled).
    pub caller_errors: u64,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile latency, milliseconds.
    pub p95_ms: f64,
}

/// A skill failing too often.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failing {
    /// The skill.
    pub skill: String,
    /// Failures of its own among its last calls.
    pub failures: usize,
    /// Its last calls that the caller got right (at most [`WINDOW`]).
    pub calls: usize,
}

/// Similar searches that found nothing good.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Missing {
    /// The most recent query of the group.
    pub query: String,
    /// How many similar queries missed.
    pub count: usize,
}

impl ToolStats {
    /// The figures of one tool: `[calls, failures, caller_errors]`, and the latencies of
    /// its last calls in milliseconds.
    pub(crate) fn of(skill: String, tool: String, [calls, failures, caller_errors]: [i64; 3], mut latencies: Vec<f64>) -> Self {
        latencies.sort_by(f64::total_cmp);
        ToolStats {
            p50_ms: percentile(&latencies, 0.5),
            p95_ms: percentile(&latencies, 0.95),
            skill,
            tool,
            calls: calls as u64,
            failures: failures as u64,
            caller_errors: caller_errors as u64,
        }
    }
}

impl Failing {
    /// `skill`, when its last calls the caller got right (`oks`, newest first, at most
    /// [`WINDOW`]) fail too often.
    pub(crate) fn of(skill: String, oks: &[bool]) -> Option<Self> {
        let failures = oks.iter().filter(|ok| !**ok).count();
        (oks.len() >= MIN_CALLS && failures as f64 > FAILING_RATIO * oks.len() as f64).then_some(Failing {
            skill,
            failures,
            calls: oks.len(),
        })
    }
}

impl Missing {
    /// Missed `queries` (newest first) grouped by similar words: groups of at least
    /// [`MISSES_TO_SUGGEST`], largest first.
    pub(crate) fn group(queries: Vec<String>) -> Vec<Self> {
        let mut groups: Vec<(BTreeSet<String>, String, usize)> = Vec::new();
        for query in queries {
            let words = words(&query);
            if words.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(w, _, _)| jaccard(w, &words) >= 0.5) {
                Some(group) => group.2 += 1,
                None => groups.push((words, query, 1)),
            }
        }
        let mut out: Vec<Missing> =
            groups.into_iter().filter(|g| g.2 >= MISSES_TO_SUGGEST).map(|(_, query, count)| Missing { query, count }).collect();
        out.sort_by_key(|m| std::cmp::Reverse(m.count));
        out
    }
}

enum Row {
    Call { skill: String, tool: String, outcome: Outcome, ms: f64 },
    Miss { query: String },
}

/// The usage statistics: calls and missed searches recorded without blocking the caller
/// (a failure to record is logged, never returned), and what they add up to.
pub trait Stats: Send + Sync {
    /// Record one call.
    fn record_call(&self, skill: &str, tool: &str, outcome: Outcome, elapsed: Duration);

    /// Record a search that matched nothing well.
    fn record_miss(&self, query: &str);

    /// Wait until everything recorded so far is written.
    fn flush(&self);

    /// Per tool: calls, the skill's failures, the caller's errors, p50/p95 latency (over
    /// each tool's last 1000 calls).
    fn tools(&self) -> Result<Vec<ToolStats>, StoreError>;

    /// Skills failing more than 30 % of their last 20 calls (with at least 5 calls),
    /// counting only the skill's own failures and leaving out the caller's errors.
    fn failing(&self) -> Result<Vec<Failing>, StoreError>;

    /// Groups of at least 3 similar missed searches, largest first.
    fn missing(&self) -> Result<Vec<Missing>, StoreError>;

    /// Failing skills by name, for listings.
    fn failing_map(&self) -> BTreeMap<String, Failing> {
        self.failing().unwrap_or_default().into_iter().map(|f| (f.skill.clone(), f)).collect()
    }
}

/// Characters of a missed query kept: an agent's search text is kept as a hint, not whole.
pub const MISS_CHARS: usize = 256;
/// Missed queries kept, the newest (a listing reads the newest 500).
pub const KEPT_MISSES: i64 = 1000;

/// What of `query` a miss keeps: its first [`MISS_CHARS`] characters.
pub(crate) fn kept_query(query: &str) -> String {
    query.chars().take(MISS_CHARS).collect()
}

/// The usage statistics in SQLite, `<data_dir>/stats.db`.
pub struct SqliteStats {
    path: PathBuf,
    writer: Writer<Row>,
    /// Whether its schema was brought up to date (by the writer or a reader): later opens
    /// only connect.
    made: Arc<AtomicBool>,
}

impl SqliteStats {
    /// `<data_dir>/stats.db`, with its writer thread started. The database is opened (made,
    /// its schema brought up to date) by the writer at its first batch of rows, or by the
    /// first reader: a host's start opens nothing for it, and a host that cannot keep
    /// statistics (a read-only data dir) says so in a warning at each batch it drops.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let path = data_dir.join("stats.db");
        let (at, made) = (path.clone(), Arc::new(AtomicBool::new(false)));
        let writer_made = made.clone();
        let mut db: Option<Connection> = None;
        let writer = Writer::with_batches("skillhost-stats", path.display().to_string(), crate::writer::GATHER, move |rows: &[Row]| {
            let db = match &mut db {
                Some(db) => db,
                None => db.insert(opened(&at, &writer_made)?),
            };
            let tx = db.transaction().map_err(fail(&at))?;
            for row in rows {
                write(&tx, row).map_err(fail(&at))?;
            }
            tx.commit().map_err(fail(&at))
        })
        .map_err(|e| StoreError::Stats { path: path.clone(), message: format!("cannot start its writer thread: {e}") })?;
        Ok(Self { path, writer, made })
    }

    /// A connection for reading, after everything recorded so far is written: a reader
    /// never misses a call that finished before it asked (the writer thread batches).
    fn read(&self) -> Result<Connection, StoreError> {
        self.flush();
        opened(&self.path, &self.made)
    }
}

impl Stats for SqliteStats {
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
        let db = self.read()?;
        let mut stmt = db
            .prepare(
                "SELECT skill, tool, count(*), sum(outcome = 1), sum(outcome = 2) FROM calls \
                 GROUP BY skill, tool ORDER BY skill, tool",
            )
            .map_err(fail(&self.path))?;
        let rows: Vec<(String, String, i64, i64, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .map_err(fail(&self.path))?
            .collect::<Result<_, _>>()
            .map_err(fail(&self.path))?;
        let mut out = Vec::with_capacity(rows.len());
        for (skill, tool, calls, failures, caller_errors) in rows {
            let latencies: Vec<f64> = db
                .prepare("SELECT ms FROM calls WHERE skill = ?1 AND tool = ?2 ORDER BY rowid DESC LIMIT 1000")
                .and_then(|mut s| s.query_map(params![skill, tool], |r| r.get(0))?.collect())
                .map_err(fail(&self.path))?;
            out.push(ToolStats::of(skill, tool, [calls, failures, caller_errors], latencies));
        }
        Ok(out)
    }

    fn failing(&self) -> Result<Vec<Failing>, StoreError> {
        let db = self.read()?;
        let skills: Vec<String> = db
            .prepare("SELECT DISTINCT skill FROM calls ORDER BY skill")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(fail(&self.path))?;
        let mut out = Vec::new();
        for skill in skills {
            let oks: Vec<bool> = db
                .prepare("SELECT outcome = 0 FROM calls WHERE skill = ?1 AND outcome != 2 ORDER BY rowid DESC LIMIT ?2")
                .and_then(|mut s| s.query_map(params![skill, WINDOW as i64], |r| r.get(0))?.collect())
                .map_err(fail(&self.path))?;
            out.extend(Failing::of(skill, &oks));
        }
        Ok(out)
    }

    fn missing(&self) -> Result<Vec<Missing>, StoreError> {
        let db = self.read()?;
        let queries: Vec<String> = db
            .prepare("SELECT query FROM misses WHERE query != '' ORDER BY rowid DESC LIMIT 500")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(fail(&self.path))?;
        Ok(Missing::group(queries))
    }
}

/// `stats.db` at `path`, made if missing and its schema brought up to date unless `made`
/// says that was done (then set).
fn opened(path: &Path, made: &AtomicBool) -> Result<Connection, StoreError> {
    // Statistics: losing the last ones to a machine crash is no loss worth a sync per commit.
    let db = sqlite::connect_as(path, sqlite::Commit::Written).map_err(fail(path))?;
    if made.load(Ordering::Acquire) {
        return Ok(db);
    }
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS calls (skill TEXT NOT NULL, tool TEXT NOT NULL, ok INTEGER NOT NULL, ms REAL NOT NULL, at INTEGER NOT NULL);
         CREATE INDEX IF NOT EXISTS calls_skill ON calls (skill);
         CREATE TABLE IF NOT EXISTS misses (query TEXT NOT NULL, at INTEGER NOT NULL);",
    )
    .map_err(fail(path))?;
    // Databases written before caller errors were told apart: their rows keep what
    // `ok` said (a failure stays one).
    let has_outcome =
        |db: &Connection| db.prepare("SELECT 1 FROM pragma_table_info('calls') WHERE name = 'outcome'").and_then(|mut s| s.exists([]));
    if !has_outcome(&db).map_err(fail(path))? {
        let added = db.execute_batch(
            "BEGIN IMMEDIATE; ALTER TABLE calls ADD COLUMN outcome INTEGER NOT NULL DEFAULT 1; \
             UPDATE calls SET outcome = 1 - ok; COMMIT;",
        );
        // Another process may have added it first.
        if let Err(error) = added {
            let _ = db.execute_batch("ROLLBACK;");
            if !has_outcome(&db).map_err(fail(path))? {
                return Err(fail(path)(error));
            }
        }
    }
    made.store(true, Ordering::Release);
    Ok(db)
}

/// Write one recorded row.
fn write(tx: &rusqlite::Transaction<'_>, row: &Row) -> rusqlite::Result<()> {
    match row {
        Row::Call { skill, tool, outcome, ms } => tx.execute(
            "INSERT INTO calls (skill, tool, ok, outcome, ms, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![skill, tool, *outcome == Outcome::Ok, outcome.code(), ms, now()],
        ),
        Row::Miss { query } => tx
            .execute("INSERT INTO misses (query, at) VALUES (?1, ?2)", params![query, now()])
            .and_then(|_| tx.execute("DELETE FROM misses WHERE rowid <= (SELECT max(rowid) FROM misses) - ?1", params![KEPT_MISSES])),
    }
    .map(drop)
}

fn fail(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Stats { path: path.to_owned(), message: e.to_string() }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    (sorted[rank.min(sorted.len() - 1)] * 10.0).round() / 10.0
}

const STOP_WORDS: [&str; 16] = ["a", "an", "the", "to", "of", "for", "in", "on", "my", "me", "i", "is", "and", "or", "with", "how"];

fn words(query: &str) -> BTreeSet<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_queries_are_kept_short_and_only_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let stats = SqliteStats::open(dir.path()).unwrap();
        for i in 0..KEPT_MISSES + 50 {
            stats.record_miss(&format!("{i} {}", "x".repeat(10_000)));
        }
        stats.flush();
        let db = stats.read().unwrap();
        let (count, longest, oldest): (i64, i64, String) = db
            .query_row("SELECT count(*), max(length(query)), (SELECT query FROM misses ORDER BY rowid LIMIT 1) FROM misses", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!((count, longest), (KEPT_MISSES, MISS_CHARS as i64));
        assert!(oldest.starts_with("50 "), "the oldest went first: {}", &oldest[..8]);
    }

    #[test]
    fn counts_latency_failing_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let stats = SqliteStats::open(dir.path()).unwrap();
        for i in 0..10 {
            let flaky = if i % 2 == 0 { Outcome::Ok } else { Outcome::Failed };
            stats.record_call("flaky", "get", flaky, Duration::from_millis(10 * (i + 1)));
            let solid = if i != 0 { Outcome::Ok } else { Outcome::Failed };
            stats.record_call("solid", "get", solid, Duration::from_millis(5));
        }
        stats.record_call("new", "get", Outcome::Failed, Duration::from_millis(1));
        for query in ["convert currency to euros", "Currency convert euros", "convert the currency rates to euros", "weather in Paris"] {
            stats.record_miss(query);
        }
        stats.flush();
        let tools = stats.tools().unwrap();
        let flaky = tools.iter().find(|t| t.skill == "flaky").unwrap();
        assert_eq!((flaky.calls, flaky.failures, flaky.caller_errors), (10, 5, 0));
        assert_eq!((flaky.p50_ms, flaky.p95_ms), (60.0, 100.0));
        let failing = stats.failing().unwrap();
        assert_eq!(failing, vec![Failing { skill: "flaky".into(), failures: 5, calls: 10 }], "1 in 10 is fine; 1 call is too few");
        let missing = stats.missing().unwrap();
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(missing[0].count, 3);
    }

    #[test]
    fn caller_errors_are_counted_apart_and_never_flag_a_skill() {
        let dir = tempfile::tempdir().unwrap();
        let stats = SqliteStats::open(dir.path()).unwrap();
        for _ in 0..10 {
            stats.record_call("picky", "get", Outcome::CallerError, Duration::from_millis(1));
        }
        for _ in 0..5 {
            stats.record_call("picky", "get", Outcome::Ok, Duration::from_millis(1));
        }
        let tools = stats.tools().unwrap();
        assert_eq!((tools[0].calls, tools[0].failures, tools[0].caller_errors), (15, 0, 10));
        assert_eq!(stats.failing().unwrap(), vec![], "bad inputs are the caller's, not the skill's");
        // Caller errors between the skill's own failures neither hide nor dilute them.
        for i in 0..10 {
            let outcome = if i % 2 == 0 { Outcome::Failed } else { Outcome::CallerError };
            stats.record_call("picky", "get", outcome, Duration::from_millis(1));
        }
        assert_eq!(stats.failing().unwrap(), vec![Failing { skill: "picky".into(), failures: 5, calls: 10 }]);
    }

    #[test]
    fn a_database_from_before_outcomes_keeps_its_failures() {
        let dir = tempfile::tempdir().unwrap();
        let db = sqlite::connect(&dir.path().join("stats.db")).unwrap();
        db.execute_batch(
            "CREATE TABLE calls (skill TEXT NOT NULL, tool TEXT NOT NULL, ok INTEGER NOT NULL, ms REAL NOT NULL, at INTEGER NOT NULL);
             INSERT INTO calls VALUES ('old', 'get', 0, 1.0, 0), ('old', 'get', 1, 1.0, 0);",
        )
        .unwrap();
        drop(db);
        let stats = SqliteStats::open(dir.path()).unwrap();
        stats.record_call("old", "get", Outcome::CallerError, Duration::from_millis(1));
        let tools = stats.tools().unwrap();
        assert_eq!((tools[0].calls, tools[0].failures, tools[0].caller_errors), (3, 1, 1));
    }
}
