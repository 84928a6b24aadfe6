//! The audit log: every outbound request of every skill, and every run of a skill's
//! scripts, in SQLite (`<data_dir>/audit.db`, WAL mode). The egress gate hands request
//! rows to [`AuditSink::record`], the registry hands run rows to [`AuditLog::record_run`];
//! both only queue them, and one writer thread inserts them in batches, so auditing never
//! slows a request or a run down.
//!
//! [`AuditLog`] is the audit sink the host plugs into the egress gate and into the
//! registry ([`RunAudit`]), read back by `skillhost audit`; [`SqliteAuditLog`] keeps it in
//! SQLite: requests in table `egress`, runs in table `runs` (a run is no HTTP request:
//! its own row type, [`RunRecord`], with its command, exit code or refusal, and the bytes
//! that went in and came out; the outbound requests a run's scripts make are `egress`
//! rows of their own, tool `run`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};
use serde::Serialize;
use skillhost_core::text::SecretRedactor;
use skillhost_core::{AuditSink, EgressOutcome, EgressRecord};

use crate::secrets::SecretStore;

use crate::sqlite::{self, Writer};

/// `time` as RFC 3339 in UTC, to the millisecond (`2026-11-24T10:11:55.440Z`), as the
/// audit log is shown to people; a time before 1970 shows as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (days, secs) = ((since.as_secs() / 86_400) as i64, since.as_secs() % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", secs / 3600, secs / 60 % 60, secs % 60, since.subsec_millis())
}

/// Why the audit log could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[error("audit log {place}: {message}; {fix}")]
pub struct AuditError {
    /// The database: a file, or a PostgreSQL URL without its password.
    place: String,
    message: String,
    fix: &'static str,
}

impl AuditError {
    /// A failure of the SQLite file at `path`.
    fn file(path: &Path, message: impl std::fmt::Display) -> Self {
        Self { place: path.display().to_string(), message: message.to_string(), fix: "check that the data directory is writable" }
    }

    /// A failure of the PostgreSQL database `shown` (its URL without the password).
    pub(crate) fn postgres(shown: &str, message: impl std::fmt::Display) -> Self {
        Self {
            place: shown.to_owned(),
            message: message.to_string(),
            fix: "check that PostgreSQL answers at [state] url and that its role may write the skillhost tables",
        }
    }
}

/// Which rows to read.
#[derive(Clone, Debug, Default)]
pub struct AuditQuery {
    /// Only this skill's requests.
    pub skill: Option<String>,
    /// Only this caller's decisions (for [`AuditLog::decisions`]).
    pub caller: Option<String>,
    /// Only requests at or after this time.
    pub since: Option<SystemTime>,
    /// At most this many rows, newest last. Default: all.
    pub limit: Option<usize>,
}

/// How a run of a skill's scripts ended, as the audit log keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum RunOutcome {
    /// The command exited with this code.
    Exit(i32),
    /// A signal ended the command.
    Signal(i32),
    /// The host refused the run or stopped it at a limit (its sandbox killed), for this
    /// reason: a rule of the request, a skill not approved, a limit reached.
    Refused(String),
    /// The run did not happen or did not finish for another reason: no jail on this host,
    /// the jail failed, the caller cancelled.
    Failed(String),
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunOutcome::Exit(code) => write!(f, "exit {code}"),
            RunOutcome::Signal(signal) => write!(f, "signal {signal}"),
            RunOutcome::Refused(reason) => write!(f, "refused: {reason}"),
            RunOutcome::Failed(reason) => write!(f, "failed: {reason}"),
        }
    }
}

/// One row of the audit log for a run of a skill's scripts (`skillhost run`, `skill_run`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// When the run was asked for.
    pub time: SystemTime,
    /// The skill whose scripts ran.
    pub skill: String,
    /// The command as the caller gave it, each word quoted and capped ([`command_text`]).
    pub command: String,
    /// Exit code, signal, refusal or failure.
    pub outcome: RunOutcome,
    /// Bytes that went into the run: its input files.
    pub bytes_in: u64,
    /// Bytes that came out of it: what it printed on stdout and stderr, and the files its
    /// workspace held at the end.
    pub bytes_out: u64,
    /// From the request to the answer (the jail's start, the command, the read-back).
    pub duration: Duration,
}

/// One row of the audit log for a decision of the org policy: who asked to do what to
/// what, whether it was allowed, and by which policies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionRecord {
    /// When.
    pub time: SystemTime,
    /// The caller's name.
    pub caller: String,
    /// The action (`call`, `run`, `create`, ...).
    pub action: String,
    /// What it was about (`Tool::"notes__read"`, `Skill::"notes"`).
    pub resource: String,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The policies that decided it (none: the default deny).
    pub policies: Vec<String>,
}

/// Words of a command the audit log shows; the rest are counted.
const COMMAND_WORDS: usize = 32;
/// Characters of one word of a command the audit log shows; the rest are counted.
const COMMAND_WORD_CHARS: usize = 200;

/// A command as the audit log keeps it, on one line: each word between double quotes,
/// its line breaks shown as spaces and other control characters escaped
/// ([`skillhost_core::text::quote`]), cut past 200 characters, and past 32 words the rest
/// counted. Only the words: never the run's environment, its input
/// files' contents or the secrets its proxy adds (which no script sees either).
pub fn command_text(command: &[String]) -> String {
    let mut words: Vec<String> =
        command.iter().take(COMMAND_WORDS).map(|word| skillhost_core::text::quote(word, COMMAND_WORD_CHARS)).collect();
    if command.len() > COMMAND_WORDS {
        words.push(format!("… ({} more words)", command.len() - COMMAND_WORDS));
    }
    words.join(" ")
}

/// The audit log: an [`AuditSink`] whose rows can be read back, and which keeps the runs
/// of skills' scripts beside their outbound requests.
pub trait AuditLog: AuditSink {
    /// Record one run of a skill's scripts.
    fn record_run(&self, record: RunRecord);

    /// Wait until every row recorded so far is written.
    fn flush(&self);

    /// Read outbound requests, oldest first (after flushing what is queued).
    fn query(&self, query: &AuditQuery) -> Result<Vec<EgressRecord>, AuditError>;

    /// Read runs of skills' scripts, oldest first (after flushing what is queued).
    fn runs(&self, query: &AuditQuery) -> Result<Vec<RunRecord>, AuditError>;

    /// Record one decision of the org policy.
    fn record_decision(&self, record: DecisionRecord);

    /// Read decisions of the org policy, oldest first (after flushing what is queued);
    /// `query.skill` is not used, `query.caller` is.
    fn decisions(&self, query: &AuditQuery) -> Result<Vec<DecisionRecord>, AuditError>;
}

/// Where a registry records the runs of skills' scripts: the host's audit log, and the
/// host's secrets, whose values never reach it.
#[derive(Clone)]
pub struct RunAudit {
    /// The audit log.
    pub log: Arc<dyn AuditLog>,
    /// The host's secrets: a command holding one's value is recorded with
    /// [`REDACTED`](skillhost_core::text::REDACTED) in its place.
    pub secrets: Option<Arc<dyn SecretStore>>,
}

impl std::fmt::Debug for RunAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunAudit").finish_non_exhaustive()
    }
}

impl RunAudit {
    /// `command` as the log keeps it ([`command_text`]), each word's secret values
    /// replaced before it is quoted and cut (so no cut leaves part of one).
    pub fn command(&self, command: &[String]) -> String {
        let values: Option<Vec<String>> =
            self.secrets.as_ref().map(|store| store.list().unwrap_or_default().iter().filter_map(|n| store.secret(n)).collect());
        let redactor = SecretRedactor::new(values.unwrap_or_default());
        if redactor.is_empty() {
            return command_text(command);
        }
        let words: Vec<String> = command
            .iter()
            .map(|word| {
                let mut word = word.clone();
                redactor.text(&mut word);
                word
            })
            .collect();
        command_text(&words)
    }
}

/// A row the writer inserts.
pub(crate) enum Row {
    Request(EgressRecord),
    Run(RunRecord),
    Decision(DecisionRecord),
}

/// The audit log in SQLite.
pub struct SqliteAuditLog {
    path: PathBuf,
    writer: Writer<Row>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS egress (
    id INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    skill TEXT NOT NULL,
    tool TEXT NOT NULL,
    method TEXT NOT NULL,
    url TEXT NOT NULL,
    ip TEXT,
    outcome TEXT NOT NULL,
    status INTEGER,
    reason TEXT,
    bytes_out INTEGER NOT NULL,
    bytes_in INTEGER NOT NULL,
    duration_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS egress_skill_time ON egress (skill, time_ms);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    skill TEXT NOT NULL,
    command TEXT NOT NULL,
    outcome TEXT NOT NULL,
    code INTEGER,
    reason TEXT,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    duration_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_skill_time ON runs (skill, time_ms);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    caller TEXT NOT NULL,
    action TEXT NOT NULL,
    resource TEXT NOT NULL,
    allowed INTEGER NOT NULL,
    policies TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_caller_time ON decisions (caller, time_ms);
PRAGMA user_version = 3;
";

/// The `user_version` [`SCHEMA`] sets.
const SCHEMA_VERSION: i64 = 3;

fn open(path: &Path) -> Result<Connection, AuditError> {
    let err = |e: rusqlite::Error| AuditError::file(path, e);
    let conn = sqlite::connect(path).map_err(err)?;
    // Made (or brought up to date) once: opening a log already at this schema writes
    // nothing, so it commits (and syncs) nothing.
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(err)?;
    if version != SCHEMA_VERSION {
        conn.execute_batch(SCHEMA).map_err(err)?;
    }
    Ok(conn)
}

impl SqliteAuditLog {
    /// Open (creating) the log at `path` and start its writer thread.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        let path = path.into();
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let conn = open(&path)?;
        let writer = Writer::start("skillhost-audit", &path, conn, insert)
            .map_err(|e| AuditError::file(&path, format!("cannot start its writer thread: {e}")))?;
        Ok(Self { path, writer })
    }
}

impl AuditLog for SqliteAuditLog {
    fn record_run(&self, record: RunRecord) {
        self.writer.send(Row::Run(record));
    }

    fn record_decision(&self, record: DecisionRecord) {
        self.writer.send(Row::Decision(record));
    }

    fn decisions(&self, query: &AuditQuery) -> Result<Vec<DecisionRecord>, AuditError> {
        self.flush();
        let err = |e: rusqlite::Error| AuditError::file(&self.path, e);
        let conn = open(&self.path)?;
        let mut statement = conn
            .prepare(
                "SELECT time_ms, caller, action, resource, allowed, policies
                 FROM decisions WHERE (?1 IS NULL OR caller = ?1) AND time_ms >= ?2 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(err)?;
        let limit = query.limit.map_or(i64::MAX, |l| l as i64);
        let rows = statement
            .query_map(params![query.caller, query.since.map_or(0, millis), limit], |row| {
                Ok(DecisionRecord {
                    time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0)? as u64),
                    caller: row.get(1)?,
                    action: row.get(2)?,
                    resource: row.get(3)?,
                    allowed: row.get(4)?,
                    policies: policies_of(&row.get::<_, String>(5)?),
                })
            })
            .map_err(err)?;
        let mut records = rows.collect::<Result<Vec<_>, _>>().map_err(err)?;
        records.reverse();
        Ok(records)
    }

    fn flush(&self) {
        self.writer.flush();
    }

    fn runs(&self, query: &AuditQuery) -> Result<Vec<RunRecord>, AuditError> {
        self.flush();
        let err = |e: rusqlite::Error| AuditError::file(&self.path, e);
        let conn = open(&self.path)?;
        let mut statement = conn
            .prepare(
                "SELECT time_ms, skill, command, outcome, code, reason, bytes_in, bytes_out, duration_us
                 FROM runs WHERE (?1 IS NULL OR skill = ?1) AND time_ms >= ?2 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(err)?;
        let limit = query.limit.map_or(i64::MAX, |l| l as i64);
        let rows = statement
            .query_map(params![query.skill, query.since.map_or(0, millis), limit], |row| {
                let outcome: String = row.get(3)?;
                let code: Option<i64> = row.get(4)?;
                let reason: Option<String> = row.get(5)?;
                Ok(RunRecord {
                    time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0)? as u64),
                    skill: row.get(1)?,
                    command: row.get(2)?,
                    outcome: run_outcome(&outcome, code, reason),
                    bytes_in: row.get::<_, i64>(6)? as u64,
                    bytes_out: row.get::<_, i64>(7)? as u64,
                    duration: Duration::from_micros(row.get::<_, i64>(8)? as u64),
                })
            })
            .map_err(err)?;
        let mut records = rows.collect::<Result<Vec<_>, _>>().map_err(err)?;
        records.reverse();
        Ok(records)
    }

    fn query(&self, query: &AuditQuery) -> Result<Vec<EgressRecord>, AuditError> {
        self.flush();
        let err = |e: rusqlite::Error| AuditError::file(&self.path, e);
        let conn = open(&self.path)?;
        let since_ms = query.since.map_or(0, millis);
        let mut statement = conn
            .prepare(
                "SELECT time_ms, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration_us
                 FROM egress WHERE (?1 IS NULL OR skill = ?1) AND time_ms >= ?2 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(err)?;
        let limit = query.limit.map_or(i64::MAX, |l| l as i64);
        let rows = statement
            .query_map(params![query.skill, since_ms, limit], |row| {
                let outcome: String = row.get(6)?;
                let status: Option<i64> = row.get(7)?;
                let reason: Option<String> = row.get(8)?;
                let ip: Option<String> = row.get(5)?;
                Ok(EgressRecord {
                    time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0)? as u64),
                    skill: row.get(1)?,
                    tool: row.get(2)?,
                    method: row.get(3)?,
                    url: row.get(4)?,
                    ip: ip.and_then(|ip| ip.parse::<IpAddr>().ok()),
                    outcome: egress_outcome(&outcome, status, reason),
                    bytes_out: row.get::<_, i64>(9)? as u64,
                    bytes_in: row.get::<_, i64>(10)? as u64,
                    duration: Duration::from_micros(row.get::<_, i64>(11)? as u64),
                })
            })
            .map_err(err)?;
        let mut records = rows.collect::<Result<Vec<_>, _>>().map_err(err)?;
        records.reverse();
        Ok(records)
    }
}

impl AuditSink for SqliteAuditLog {
    fn record(&self, record: EgressRecord) {
        self.writer.send(Row::Request(record));
    }
}

/// A request's outcome as both backends store it: kind, status, reason.
pub(crate) fn egress_columns(outcome: &EgressOutcome) -> (&'static str, Option<i64>, Option<&str>) {
    match outcome {
        EgressOutcome::Status(s) => ("status", Some(i64::from(*s)), None),
        EgressOutcome::Refused(why) => ("refused", None, Some(why.as_str())),
        EgressOutcome::Failed(why) => ("failed", None, Some(why.as_str())),
    }
}

/// [`egress_columns`] read back.
pub(crate) fn egress_outcome(kind: &str, status: Option<i64>, reason: Option<String>) -> EgressOutcome {
    match kind {
        "status" => EgressOutcome::Status(status.unwrap_or(0) as u16),
        "refused" => EgressOutcome::Refused(reason.unwrap_or_default()),
        _ => EgressOutcome::Failed(reason.unwrap_or_default()),
    }
}

/// A run's outcome as both backends store it: kind, code, reason.
pub(crate) fn run_columns(outcome: &RunOutcome) -> (&'static str, Option<i64>, Option<&str>) {
    match outcome {
        RunOutcome::Exit(code) => ("exit", Some(i64::from(*code)), None),
        RunOutcome::Signal(signal) => ("signal", Some(i64::from(*signal)), None),
        RunOutcome::Refused(why) => ("refused", None, Some(why.as_str())),
        RunOutcome::Failed(why) => ("failed", None, Some(why.as_str())),
    }
}

/// [`run_columns`] read back.
pub(crate) fn run_outcome(kind: &str, code: Option<i64>, reason: Option<String>) -> RunOutcome {
    match kind {
        "exit" => RunOutcome::Exit(code.unwrap_or(0) as i32),
        "signal" => RunOutcome::Signal(code.unwrap_or(0) as i32),
        "refused" => RunOutcome::Refused(reason.unwrap_or_default()),
        _ => RunOutcome::Failed(reason.unwrap_or_default()),
    }
}

pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A decision's policy ids in one column (an id holds no newline: Cedar ids are one line).
pub(crate) fn policies_text(policies: &[String]) -> String {
    policies.join("\n")
}

pub(crate) fn policies_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

/// Write one row (inside the writer's transaction).
fn insert(tx: &rusqlite::Transaction<'_>, row: &Row) -> rusqlite::Result<()> {
    let r = match row {
        Row::Request(r) => r,
        Row::Run(r) => return insert_run(tx, r),
        Row::Decision(d) => {
            return tx
                .prepare_cached(
                    "INSERT INTO decisions (time_ms, caller, action, resource, allowed, policies) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![millis(d.time), d.caller, d.action, d.resource, d.allowed, policies_text(&d.policies)])
                .map(drop);
        }
    };
    let (outcome, status, reason) = egress_columns(&r.outcome);
    tx.prepare_cached(
        "INSERT INTO egress (time_ms, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        millis(r.time),
        r.skill,
        r.tool,
        r.method,
        r.url,
        r.ip.map(|ip| ip.to_string()),
        outcome,
        status,
        reason,
        r.bytes_out as i64,
        r.bytes_in as i64,
        r.duration.as_micros() as i64,
    ])
    .map(drop)
}

fn insert_run(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> rusqlite::Result<()> {
    let (outcome, code, reason) = run_columns(&r.outcome);
    tx.prepare_cached(
        "INSERT INTO runs (time_ms, skill, command, outcome, code, reason, bytes_in, bytes_out, duration_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        millis(r.time),
        r.skill,
        r.command,
        outcome,
        code,
        reason,
        r.bytes_in as i64,
        r.bytes_out as i64,
        r.duration.as_micros() as i64,
    ])
    .map(drop)
}

#[cfg(test)]
pub(crate) mod tests {
    /// What every backend keeps of the org policy's decisions.
    pub(crate) fn decisions_are_kept_and_read_by_caller(log: &dyn AuditLog) {
        let decision = |caller: &str, allowed, policies: &[&str]| DecisionRecord {
            time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000),
            caller: caller.to_owned(),
            action: "call".to_owned(),
            resource: "Tool::\"notes__write\"".to_owned(),
            allowed,
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        };
        log.record_decision(decision("bob", false, &[]));
        log.record_decision(decision("ann", true, &["writers", "team:2"]));
        log.record_decision(decision("bob", false, &["no-writes"]));
        let bob = log.decisions(&AuditQuery { caller: Some("bob".into()), ..AuditQuery::default() }).unwrap();
        assert_eq!(bob, [decision("bob", false, &[]), decision("bob", false, &["no-writes"])]);
        let all = log.decisions(&AuditQuery { limit: Some(2), ..AuditQuery::default() }).unwrap();
        assert_eq!(
            all,
            [decision("ann", true, &["writers", "team:2"]), decision("bob", false, &["no-writes"])],
            "the newest, oldest first"
        );
    }

    #[test]
    fn sqlite_keeps_decisions() {
        let dir = tempfile::tempdir().unwrap();
        decisions_are_kept_and_read_by_caller(&SqliteAuditLog::open(dir.path().join("audit.db")).unwrap());
    }

    use super::*;

    fn record(skill: &str, outcome: EgressOutcome) -> EgressRecord {
        EgressRecord {
            time: SystemTime::now(),
            skill: skill.into(),
            tool: "t".into(),
            method: "GET".into(),
            url: "https://a.org:443/x".into(),
            ip: Some("1.2.3.4".parse().unwrap()),
            outcome,
            bytes_out: 1,
            bytes_in: 2,
            duration: Duration::from_millis(3),
        }
    }

    #[test]
    fn times_read_as_rfc_3339() {
        let at = |ms: u64| rfc3339(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z", "a leap day");
        assert_eq!(at(1_795_518_715_440), "2026-11-24T11:11:55.440Z");
        assert_eq!(at(4_107_542_399_999), "2100-02-28T23:59:59.999Z", "2100 is no leap year");
        assert_eq!(rfc3339(UNIX_EPOCH - Duration::from_secs(1)), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn records_survive_reopening_and_filter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let log = SqliteAuditLog::open(&path).unwrap();
        log.record(record("a", EgressOutcome::Status(200)));
        log.record(record("b", EgressOutcome::Refused("not allowed".into())));
        log.flush();
        drop(log);
        let log = SqliteAuditLog::open(&path).unwrap();
        let all = log.query(&AuditQuery::default()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].outcome, EgressOutcome::Status(200));
        let b = log.query(&AuditQuery { skill: Some("b".into()), ..AuditQuery::default() }).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].outcome, EgressOutcome::Refused("not allowed".into()));
        let future = log.query(&AuditQuery { since: Some(SystemTime::now() + Duration::from_secs(60)), ..AuditQuery::default() }).unwrap();
        assert!(future.is_empty());
    }

    #[test]
    fn runs_are_kept_apart_from_requests_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let log = SqliteAuditLog::open(&path).unwrap();
        let run = |skill: &str, outcome: RunOutcome| RunRecord {
            time: SystemTime::now(),
            skill: skill.into(),
            command: command_text(&["python".into(), "scripts/x.py".into()]),
            outcome,
            bytes_in: 5,
            bytes_out: 70,
            duration: Duration::from_millis(30),
        };
        log.record(record("a", EgressOutcome::Status(200)));
        log.record_run(run("a", RunOutcome::Exit(3)));
        log.record_run(run("b", RunOutcome::Refused("stopped at its timeout".into())));
        log.record_run(run("b", RunOutcome::Signal(9)));
        drop(log);
        let log = SqliteAuditLog::open(&path).unwrap();
        assert_eq!(log.query(&AuditQuery::default()).unwrap().len(), 1, "runs are no requests");
        let runs = log.runs(&AuditQuery::default()).unwrap();
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[0], RunRecord { time: runs[0].time, ..run("a", RunOutcome::Exit(3)) });
        assert_eq!(runs[0].command, r#""python" "scripts/x.py""#);
        let b = log.runs(&AuditQuery { skill: Some("b".into()), limit: Some(1), ..AuditQuery::default() }).unwrap();
        assert_eq!(b.iter().map(|r| &r.outcome).collect::<Vec<_>>(), [&RunOutcome::Signal(9)], "the newest of b's");
        let all = log.runs(&AuditQuery { skill: Some("b".into()), ..AuditQuery::default() }).unwrap();
        assert_eq!(all[0].outcome.to_string(), "refused: stopped at its timeout");
    }

    #[test]
    fn a_command_is_quoted_word_by_word_and_capped() {
        let words: Vec<String> = ["sh", "-c", "echo \"a\"\nrm x\u{1b}[2J"].map(str::to_owned).into();
        assert_eq!(command_text(&words), r#""sh" "-c" "echo \"a\" rm x\x1b[2J""#, "one line, nothing a terminal obeys");
        let long: Vec<String> = (0..40).map(|n| n.to_string()).collect();
        let text = command_text(&long);
        assert!(text.ends_with(r#""31" … (8 more words)"#), "{text}");
        let text = command_text(&["x".repeat(500)]);
        assert!(text.len() < 260 && text.contains("(300 more characters)"), "{text}");
    }
}
