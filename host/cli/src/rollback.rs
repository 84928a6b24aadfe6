//! `skillhost rollback NAME`: put back the version of a skill that the last install or
//! forge replaced (a second rollback rolls forward).

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;

/// The options of `rollback`.
#[derive(clap::Args)]
#[command(after_help = "Swaps the installed version with the kept one (a second rollback rolls forward).
The restored version is approved only if that exact content was approved before.

Examples:
  skillhost rollback word-tools         after a second `skillhost install ./word-tools`")]
pub struct RollbackArgs {
    /// Skill name.
    name: String,
}

/// Swap the installed and the kept version, and say whether it needs approving.
pub async fn run(app: &App, args: RollbackArgs) -> Result<ExitCode> {
    let RollbackArgs { name } = args;
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    let entry = registry.rollback(&name).await?;
    let version = entry.loaded.as_ref().map(|l| l.version.clone()).unwrap_or_default();
    errln!("rolled `{name}` back to {version} ({}); `skillhost rollback {name}` again rolls forward", entry.state);
    if entry.state != skillhost::TrustState::Approved {
        errln!("approve it with `skillhost approve {name}`");
    }
    Ok(ExitCode::SUCCESS)
}
