//! `skillhost stats`: what the registry counted of every call (MCP and `skillhost call
//! NAME`) in DATA_DIR/stats.db: calls, failures and latency per tool, failing skills,
//! missed searches; and the warning `list` prints about failing skills.

use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::Registry;

use crate::app::App;

/// The options of `stats`.
#[derive(clap::Args)]
#[command(after_help = "Every call through the registry (MCP, `skillhost call NAME`) is counted in
DATA_DIR/stats.db. FAILED counts the skill's own failures (its errors, crashes, its
limits); CALLER ERR the calls the caller got wrong (invalid input, unknown tool, a
request its policy refused, a shorter --timeout, a cancellation). A skill is flagged
when its own failures are more than 30% of its last 20 calls that the caller got right
(with at least 5 calls); agents see the flag in skill_list. Searches that matched no
tool well are listed when 3 or more similar ones missed.

Examples:
  skillhost stats
  skillhost stats --json | jq '.failing'")]
pub struct StatsArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Print the statistics from the registry's stats database.
pub async fn run(app: &App, args: StatsArgs) -> Result<ExitCode> {
    let json = args.json;
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    let Some(stats) = registry.stats() else { bail!("no usage statistics: the stats database could not be opened (see the log)") };
    let (tools, failing, missing) = (stats.tools()?, stats.failing()?, stats.missing()?);
    if json {
        let value = serde_json::json!({ "tools": tools, "failing": failing, "missing": missing });
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    if tools.is_empty() {
        outln!("no calls recorded yet");
    } else {
        outln!("{:<36} {:>7} {:>8} {:>11} {:>9} {:>9}", "TOOL", "CALLS", "FAILED", "CALLER ERR", "P50 ms", "P95 ms");
        for t in &tools {
            let name = format!("{}__{}", t.skill, t.tool);
            outln!("{name:<36} {:>7} {:>8} {:>11} {:>9.1} {:>9.1}", t.calls, t.failures, t.caller_errors, t.p50_ms, t.p95_ms);
        }
    }
    for f in &failing {
        outln!("failing: `{}` failed {} of its last {} calls (not counting the callers' errors)", f.skill, f.failures, f.calls);
    }
    for m in &missing {
        outln!("missing: {} searches like \"{}\" found no good tool", m.count, m.query);
    }
    Ok(ExitCode::SUCCESS)
}

/// After `list`: one line per skill failing more than 30 % of its last 20 calls.
pub fn warn_failing(registry: &Registry) {
    let Some(stats) = registry.stats() else { return };
    for f in stats.failing().unwrap_or_default() {
        errln!("warning: skill `{}` failed {} of its last {} calls; see `skillhost stats`", f.skill, f.failures, f.calls);
    }
}
