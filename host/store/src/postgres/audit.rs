//! [`PgAuditLog`]: the audit log in PostgreSQL: every replica's outbound requests and
//! runs in one table each, each row naming the replica that wrote it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use skillhost_core::{AuditSink, EgressRecord};

use super::Pg;
use crate::audit::{
    AuditError, AuditLog, AuditQuery, DecisionRecord, Row, RunRecord, egress_columns, egress_outcome, millis, policies_of, policies_text,
    run_columns, run_outcome,
};
use crate::writer::{GATHER, Writer};

/// The audit log in PostgreSQL.
pub struct PgAuditLog {
    pg: Arc<Pg>,
    writer: Writer<Row>,
}

impl PgAuditLog {
    /// The audit log of `pg`, written by a thread of its own.
    pub fn open(pg: Arc<Pg>) -> Result<Self, AuditError> {
        let db = pg.clone();
        let writer = Writer::with_batches("skillhost-audit", pg.shown().to_owned(), GATHER, move |rows: &[Row]| {
            let replica = db.replica().to_owned();
            let rows: Vec<Columns> = rows.iter().map(Columns::of).collect();
            db.block(move |mut client| async move {
                let tx = client.transaction().await?;
                let request = tx
                    .prepare(
                        "INSERT INTO egress (replica, time_ms, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration_us)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                    )
                    .await?;
                let run = tx
                    .prepare(
                        "INSERT INTO runs (replica, time_ms, skill, command, outcome, code, reason, bytes_in, bytes_out, duration_us)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    )
                    .await?;
                let decision = tx
                    .prepare(
                        "INSERT INTO decisions (replica, time_ms, caller, action, resource, allowed, policies)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .await?;
                for row in &rows {
                    match row {
                        Columns::Decision { time, caller, action, resource, allowed, policies } => {
                            tx.execute(&decision, &[&replica, time, caller, action, resource, allowed, policies]).await?
                        }
                        Columns::Request { time, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration } => {
                            tx.execute(
                                &request,
                                &[&replica, time, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration],
                            )
                            .await?
                        }
                        Columns::Run { time, skill, command, outcome, code, reason, bytes_in, bytes_out, duration } => {
                            tx.execute(&run, &[&replica, time, skill, command, outcome, code, reason, bytes_in, bytes_out, duration]).await?
                        }
                    };
                }
                tx.commit().await?;
                Ok(())
            })
        })
        .map_err(|e| AuditError::postgres(pg.shown(), format!("cannot start its writer thread: {e}")))?;
        Ok(Self { pg, writer })
    }
}

/// A row's columns, owned, to move to the runtime thread.
enum Columns {
    Decision {
        time: i64,
        caller: String,
        action: String,
        resource: String,
        allowed: bool,
        policies: String,
    },
    Request {
        time: i64,
        skill: String,
        tool: String,
        method: String,
        url: String,
        ip: Option<String>,
        outcome: &'static str,
        status: Option<i32>,
        reason: Option<String>,
        bytes_out: i64,
        bytes_in: i64,
        duration: i64,
    },
    Run {
        time: i64,
        skill: String,
        command: String,
        outcome: &'static str,
        code: Option<i32>,
        reason: Option<String>,
        bytes_in: i64,
        bytes_out: i64,
        duration: i64,
    },
}

impl Columns {
    fn of(row: &Row) -> Self {
        match row {
            Row::Decision(d) => Columns::Decision {
                time: millis(d.time),
                caller: d.caller.clone(),
                action: d.action.clone(),
                resource: d.resource.clone(),
                allowed: d.allowed,
                policies: policies_text(&d.policies),
            },
            Row::Request(r) => {
                let (outcome, status, reason) = egress_columns(&r.outcome);
                let (status, reason) = (status.map(|s| s as i32), reason.map(str::to_owned));
                Columns::Request {
                    time: millis(r.time),
                    skill: r.skill.clone(),
                    tool: r.tool.clone(),
                    method: r.method.clone(),
                    url: r.url.clone(),
                    ip: r.ip.map(|ip| ip.to_string()),
                    outcome,
                    status,
                    reason,
                    bytes_out: r.bytes_out as i64,
                    bytes_in: r.bytes_in as i64,
                    duration: r.duration.as_micros() as i64,
                }
            }
            Row::Run(r) => {
                let (outcome, code, reason) = run_columns(&r.outcome);
                let (code, reason) = (code.map(|c| c as i32), reason.map(str::to_owned));
                Columns::Run {
                    time: millis(r.time),
                    skill: r.skill.clone(),
                    command: r.command.clone(),
                    outcome,
                    code,
                    reason,
                    bytes_in: r.bytes_in as i64,
                    bytes_out: r.bytes_out as i64,
                    duration: r.duration.as_micros() as i64,
                }
            }
        }
    }
}

impl AuditLog for PgAuditLog {
    fn record_run(&self, record: RunRecord) {
        self.writer.send(Row::Run(record));
    }

    fn record_decision(&self, record: DecisionRecord) {
        self.writer.send(Row::Decision(record));
    }

    fn decisions(&self, query: &AuditQuery) -> Result<Vec<DecisionRecord>, AuditError> {
        self.flush();
        let (_, since, limit) = bounds(query);
        let caller = query.caller.clone();
        let rows = self
            .pg
            .block(move |client| async move {
                Ok(client
                    .query(
                        "SELECT time_ms, caller, action, resource, allowed, policies
                         FROM decisions WHERE ($1::TEXT IS NULL OR caller = $1) AND time_ms >= $2 ORDER BY id DESC LIMIT $3",
                        &[&caller, &since, &limit],
                    )
                    .await?)
            })
            .map_err(|e| AuditError::postgres(self.pg.shown(), e))?;
        let mut records: Vec<DecisionRecord> = rows
            .into_iter()
            .map(|row| DecisionRecord {
                time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0) as u64),
                caller: row.get(1),
                action: row.get(2),
                resource: row.get(3),
                allowed: row.get(4),
                policies: policies_of(row.get(5)),
            })
            .collect();
        records.reverse();
        Ok(records)
    }

    fn flush(&self) {
        self.writer.flush();
    }

    fn runs(&self, query: &AuditQuery) -> Result<Vec<RunRecord>, AuditError> {
        self.flush();
        let (skill, since, limit) = bounds(query);
        let rows = self
            .pg
            .block(move |client| async move {
                Ok(client
                    .query(
                        "SELECT time_ms, skill, command, outcome, code, reason, bytes_in, bytes_out, duration_us
                         FROM runs WHERE ($1::TEXT IS NULL OR skill = $1) AND time_ms >= $2 ORDER BY id DESC LIMIT $3",
                        &[&skill, &since, &limit],
                    )
                    .await?)
            })
            .map_err(|e| AuditError::postgres(self.pg.shown(), e))?;
        let mut records: Vec<RunRecord> = rows
            .into_iter()
            .map(|row| {
                let code: Option<i32> = row.get(4);
                let reason: Option<String> = row.get(5);
                RunRecord {
                    time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0) as u64),
                    skill: row.get(1),
                    command: row.get(2),
                    outcome: run_outcome(row.get::<_, &str>(3), code.map(i64::from), reason),
                    bytes_in: row.get::<_, i64>(6) as u64,
                    bytes_out: row.get::<_, i64>(7) as u64,
                    duration: Duration::from_micros(row.get::<_, i64>(8) as u64),
                }
            })
            .collect();
        records.reverse();
        Ok(records)
    }

    fn query(&self, query: &AuditQuery) -> Result<Vec<EgressRecord>, AuditError> {
        self.flush();
        let (skill, since, limit) = bounds(query);
        let rows = self
            .pg
            .block(move |client| async move {
                Ok(client
                    .query(
                        "SELECT time_ms, skill, tool, method, url, ip, outcome, status, reason, bytes_out, bytes_in, duration_us
                         FROM egress WHERE ($1::TEXT IS NULL OR skill = $1) AND time_ms >= $2 ORDER BY id DESC LIMIT $3",
                        &[&skill, &since, &limit],
                    )
                    .await?)
            })
            .map_err(|e| AuditError::postgres(self.pg.shown(), e))?;
        let mut records: Vec<EgressRecord> = rows
            .into_iter()
            .map(|row| {
                let status: Option<i32> = row.get(7);
                let reason: Option<String> = row.get(8);
                let ip: Option<&str> = row.get(5);
                EgressRecord {
                    time: UNIX_EPOCH + Duration::from_millis(row.get::<_, i64>(0) as u64),
                    skill: row.get(1),
                    tool: row.get(2),
                    method: row.get(3),
                    url: row.get(4),
                    ip: ip.and_then(|ip| ip.parse::<IpAddr>().ok()),
                    outcome: egress_outcome(row.get::<_, &str>(6), status.map(i64::from), reason),
                    bytes_out: row.get::<_, i64>(9) as u64,
                    bytes_in: row.get::<_, i64>(10) as u64,
                    duration: Duration::from_micros(row.get::<_, i64>(11) as u64),
                }
            })
            .collect();
        records.reverse();
        Ok(records)
    }
}

impl AuditSink for PgAuditLog {
    fn record(&self, record: EgressRecord) {
        self.writer.send(Row::Request(record));
    }
}

/// A query's skill, first time (ms) and row limit, as parameters.
fn bounds(query: &AuditQuery) -> (Option<String>, i64, i64) {
    (query.skill.clone(), query.since.map_or(0, millis), query.limit.map_or(i64::MAX, |l| l as i64))
}
