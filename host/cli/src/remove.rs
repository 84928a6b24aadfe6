//! `skillhost remove NAME`: a skill out of the user layer, once a human confirms.

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::app::{self, App};

/// The options of `remove`.
#[derive(clap::Args)]
pub struct RemoveArgs {
    /// Skill name.
    name: String,
    /// Remove without asking.
    #[arg(long)]
    yes: bool,
}

/// Ask (unless `--yes`), then remove the skill.
pub async fn run(app: &App, args: RemoveArgs) -> Result<ExitCode> {
    let RemoveArgs { name, yes } = args;
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    if !yes && !app::confirm(&format!("remove skill `{name}` from the user layer?"))? {
        bail!("not removed");
    }
    registry.remove(&name).await?;
    errln!("removed `{name}`");
    Ok(ExitCode::SUCCESS)
}
