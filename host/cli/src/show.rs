//! `skillhost show NAME`: one skill, where it comes from, its state, what it asks for and
//! its tools (the grant: what it may touch), and with `[org] policies` the policies that
//! decide who may use it; with `--code` also its files, what an approval covers.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;
use crate::output;

/// The options of `show`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  skillhost show csv-summary
  skillhost show github --code         review its manifest, SKILL.md and sources
  skillhost show github --json")]
pub struct ShowArgs {
    /// Skill name.
    name: String,
    /// Also print the skill's files: what an approval covers.
    #[arg(long)]
    code: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Print the skill once its first load is done, with the approval it would need.
pub async fn run(app: &App, args: ShowArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.name, true).await?;
    let entry = registry.entry(&args.name)?;
    let request = registry.approval_request(&args.name).ok();
    let org = host.config().org.policies.as_ref().map(|dir| output::OrgLayer {
        dir: dir.clone(),
        policies: skillhost::access::OrgPolicy::load(dir).map(|policy| policy.about_skill(&args.name)).map_err(|e| e.to_string()),
    });
    output::show(&entry, request.as_ref(), org.as_ref(), args.json)?;
    if args.code && !args.json {
        output::code(&entry.origin)?;
    }
    Ok(ExitCode::SUCCESS)
}
