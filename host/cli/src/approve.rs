//! `skillhost approve NAME`: a human reviews what a skill asks for and approves exactly
//! that (the forge's `--generate` asks the same way).

use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::Registry;

use crate::app::{self, App};
use crate::output;

/// The options of `approve`.
#[derive(clap::Args)]
pub struct ApproveArgs {
    /// Skill name.
    name: String,
    /// Approve without asking.
    #[arg(long)]
    yes: bool,
}

/// Approve the skill once its first load is done.
pub async fn run(app: &App, args: ApproveArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.name, true).await?;
    approve(&registry, &args.name, args.yes).await?;
    Ok(ExitCode::SUCCESS)
}

/// Show what approving `name` grants, ask, and approve exactly what was shown.
pub async fn approve(registry: &Registry, name: &str, yes: bool) -> Result<()> {
    let request = registry.approval_request(name)?;
    output::approval_request(&request);
    if !yes && !app::confirm(&format!("approve `{name}` with the requests above?"))? {
        bail!("`{name}` was not approved");
    }
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await?;
    errln!("approved `{name}` {}", skillhost::text::quote(&request.version, 64));
    Ok(())
}
