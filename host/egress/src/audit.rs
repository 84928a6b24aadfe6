//! Audit rows for outbound requests and tunnels: [`Audit`] starts a row when a request
//! starts and records it at once (refusals, failures) or hands it to a [`PendingRecord`]
//! that is written when the response body or the tunnel ends.
//!
//! Every row is also counted ([`observe`]): through the `metrics` facade, refusals
//! (`skillhost_egress_denied_total`) and bytes (`skillhost_egress_bytes_total`, by
//! `direction`), by skill; nothing is kept unless the embedder installed a recorder.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use skillhost_core::{AuditSink, EgressOutcome, EgressRecord};
use tokio::sync::OwnedSemaphorePermit;

/// A request's audit row in the making: who, what and when.
pub(crate) struct Audit {
    sink: Arc<dyn AuditSink>,
    time: SystemTime,
    pub(crate) started: Instant,
    skill: String,
    tool: String,
    method: String,
}

impl Audit {
    pub(crate) fn start(sink: Arc<dyn AuditSink>, skill: &str, tool: &str, method: &str) -> Self {
        Self {
            sink,
            time: SystemTime::now(),
            started: Instant::now(),
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            method: method.to_owned(),
        }
    }

    fn row(&self, url: String, ip: Option<IpAddr>, outcome: EgressOutcome, bytes_out: u64) -> EgressRecord {
        EgressRecord {
            time: self.time,
            skill: self.skill.clone(),
            tool: self.tool.clone(),
            method: self.method.clone(),
            url,
            ip,
            outcome,
            bytes_out,
            bytes_in: 0,
            duration: Duration::ZERO,
        }
    }

    /// Write the row now: the request ended before any response body.
    pub(crate) fn record(&self, url: String, ip: Option<IpAddr>, outcome: EgressOutcome, bytes_out: u64) {
        let mut row = self.row(url, ip, outcome, bytes_out);
        row.duration = self.started.elapsed();
        observe(&row);
        self.sink.record(row);
    }

    /// A row written when the returned record is dropped, holding `permit` until then.
    pub(crate) fn pending(
        &self,
        url: String,
        ip: IpAddr,
        outcome: EgressOutcome,
        bytes_out: u64,
        permit: OwnedSemaphorePermit,
    ) -> PendingRecord {
        PendingRecord {
            sink: self.sink.clone(),
            record: self.row(url, Some(ip), outcome, bytes_out),
            started: self.started,
            _permit: permit,
        }
    }
}

/// The audit row of a request whose response body (or tunnel) is still flowing; written
/// on drop, with the bytes counted so far.
pub(crate) struct PendingRecord {
    sink: Arc<dyn AuditSink>,
    pub(crate) record: EgressRecord,
    started: Instant,
    /// Holds the skill's concurrency slot until the body or tunnel is done.
    _permit: OwnedSemaphorePermit,
}

impl PendingRecord {
    /// Mark the request failed (the row is still written on drop).
    pub(crate) fn fail(&mut self, reason: String) {
        self.record.outcome = EgressOutcome::Failed(reason);
    }
}

impl Drop for PendingRecord {
    fn drop(&mut self) {
        self.record.duration = self.started.elapsed();
        observe(&self.record);
        self.sink.record(self.record.clone());
    }
}

/// Count `row` in the egress metrics: a refusal, and the bytes sent and received.
fn observe(row: &EgressRecord) {
    if matches!(row.outcome, EgressOutcome::Refused(_)) {
        metrics::counter!("skillhost_egress_denied_total", "skill" => row.skill.clone()).increment(1);
    }
    for (direction, bytes) in [("sent", row.bytes_out), ("received", row.bytes_in)] {
        if bytes > 0 {
            metrics::counter!("skillhost_egress_bytes_total", "skill" => row.skill.clone(), "direction" => direction).increment(bytes);
        }
    }
}
