//! The services an outbound-request gate needs from the host, as traits so that core
//! stays free of I/O: name resolution ([`Resolver`]), secret values ([`SecretSource`])
//! and the audit log ([`AuditSink`], [`EgressRecord`]).

use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use serde::Serialize;

/// Resolves host names for the egress gate. The gate resolves each name once per request
/// and connects to the address it checked, so a second lookup can never redirect it.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync {
    /// The addresses of `host`.
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>>;
}

/// Gives the gate the value of a secret. Values never reach a skill.
pub trait SecretSource: Send + Sync {
    /// The value of secret `name`, if it is set.
    fn secret(&self, name: &str) -> Option<String>;
}

/// What became of one outbound request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum EgressOutcome {
    /// The server answered with this status.
    Status(u16),
    /// The gate refused the request, for this reason.
    Refused(String),
    /// The request failed (connection, timeout, body too large).
    Failed(String),
}

impl fmt::Display for EgressOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EgressOutcome::Status(status) => write!(f, "{status}"),
            EgressOutcome::Refused(reason) => write!(f, "refused: {reason}"),
            EgressOutcome::Failed(reason) => write!(f, "failed: {reason}"),
        }
    }
}

/// One row of the audit log: an outbound request and what became of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EgressRecord {
    /// When the request started.
    pub time: SystemTime,
    /// The skill that made it.
    pub skill: String,
    /// The tool that was running.
    pub tool: String,
    /// HTTP method.
    pub method: String,
    /// `scheme://host:port/path`, never the query (it may carry tokens).
    pub url: String,
    /// The address connected to, when one was.
    pub ip: Option<IpAddr>,
    /// Status, refusal or failure.
    pub outcome: EgressOutcome,
    /// Request body bytes sent.
    pub bytes_out: u64,
    /// Response body bytes received.
    pub bytes_in: u64,
    /// From the start of the request to the end of its response body.
    pub duration: Duration,
}

/// Receives audit rows. Must not block: implementations queue and write elsewhere.
pub trait AuditSink: Send + Sync {
    /// Record one request.
    fn record(&self, record: EgressRecord);
}

/// A sink that drops every record (for hosts that keep no audit log).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAudit;

impl AuditSink for NoAudit {
    fn record(&self, _record: EgressRecord) {}
}

/// A secret source with no secrets.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSecrets;

impl SecretSource for NoSecrets {
    fn secret(&self, _name: &str) -> Option<String> {
        None
    }
}
