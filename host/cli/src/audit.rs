//! `skillhost audit`: the log of skills' outbound requests, newest first.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Result;

use crate::app::{self, App};
use crate::output;

/// The options of `audit`.
#[derive(clap::Args)]
pub struct AuditArgs {
    /// Only this skill's requests.
    #[arg(long)]
    skill: Option<String>,
    /// Only requests newer than this (e.g. 30m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
    since: Option<Duration>,
    /// At most this many rows (the newest).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Query the audit log and print the rows.
pub fn run(app: &App, args: AuditArgs) -> Result<ExitCode> {
    let AuditArgs { skill, since, limit, json } = args;
    let host = app.host()?;
    let query = skillhost::audit::AuditQuery { skill, since: since.map(|ago| SystemTime::now() - ago), limit: Some(limit) };
    output::audit(&host.audit().query(&query)?, json)?;
    Ok(ExitCode::SUCCESS)
}
