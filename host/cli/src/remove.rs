//! `skillhost remove NAME`: a skill out of the user layer, once a human confirms, and out
//! of the lockfile (`DATA_DIR/skills.lock`, or `SKILLHOST_LOCK`) when it pins it.

use std::process::ExitCode;

use anyhow::{Result, bail};

use skillhost::source::lock;

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
    let lock_path = crate::sources::default_lock(app);
    if lock_path.exists() {
        let mut lock = lock::Lockfile::read(&lock_path)?;
        if lock.remove(&name) {
            lock.write(&lock_path)?;
            errln!("unpinned `{name}` from {}", lock_path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
