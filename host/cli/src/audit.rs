//! `skillhost audit`: the log of skills' outbound requests and runs of their scripts, and
//! of the org policy's decisions (`--caller`, `--decisions`).

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Result;

use crate::app::{self, App};
use crate::output;

/// The options of `audit`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  skillhost audit
  skillhost audit --skill uptime --since 1h
  skillhost audit --caller ci-bot --since 1d      what the org policy allowed and refused ci-bot
  skillhost audit --json | jq '.[] | select(.outcome.kind == \"refused\")'")]
pub struct AuditArgs {
    /// Only this skill's requests and runs.
    #[arg(long)]
    skill: Option<String>,
    /// Only requests and runs newer than this (e.g. 30m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
    since: Option<Duration>,
    /// The org policy's decisions about this caller instead: what it asked, allowed or
    /// refused, by which policies.
    #[arg(long, value_name = "NAME", conflicts_with = "skill")]
    caller: Option<String>,
    /// The org policy's decisions about every caller instead.
    #[arg(long, conflicts_with_all = ["skill", "caller"])]
    decisions: bool,
    /// At most this many rows (the newest), requests and runs together.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Query the audit log and print its rows, requests and runs together, oldest first.
pub fn run(app: &App, args: AuditArgs) -> Result<ExitCode> {
    let AuditArgs { skill, caller, decisions, since, limit, json } = args;
    let host = app.host()?;
    let since = since.map(|ago| SystemTime::now() - ago);
    if decisions || caller.is_some() {
        let query = skillhost::audit::AuditQuery { caller, since, limit: Some(limit), ..Default::default() };
        output::decisions(&host.audit().decisions(&query)?, json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let query = skillhost::audit::AuditQuery { skill, since, limit: Some(limit), ..Default::default() };
    let (mut requests, mut runs) = (host.audit().query(&query)?, host.audit().runs(&query)?);
    // The newest `limit` rows of both together: drop the oldest of the two lists' tails.
    while requests.len() + runs.len() > limit {
        match (requests.first(), runs.first()) {
            (Some(request), Some(run)) if run.time < request.time => drop(runs.remove(0)),
            (Some(_), _) => drop(requests.remove(0)),
            (None, _) => drop(runs.remove(0)),
        }
    }
    output::audit(&requests, &runs, json)?;
    Ok(ExitCode::SUCCESS)
}
