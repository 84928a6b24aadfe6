//! `skillhost reject NAME`: the skill stays listed but cannot be called until approved.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;

/// The options of `reject`.
#[derive(clap::Args)]
pub struct RejectArgs {
    /// Skill name.
    name: String,
}

/// Reject the skill without waiting for any skill's load.
pub async fn run(app: &App, args: RejectArgs) -> Result<ExitCode> {
    let RejectArgs { name } = args;
    let host = app.host()?;
    app.registry_for(&host, &name, false).await?.reject(&name).await?;
    errln!("rejected `{name}`: it stays listed and cannot be called until approved");
    Ok(ExitCode::SUCCESS)
}
