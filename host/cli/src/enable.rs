//! `skillhost enable NAME`: a disabled skill returns to its earlier trust state.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;

/// The options of `enable`.
#[derive(clap::Args)]
pub struct EnableArgs {
    /// Skill name.
    name: String,
}

/// Enable the skill and say which state it is back in, once it loaded.
pub async fn run(app: &App, args: EnableArgs) -> Result<ExitCode> {
    let EnableArgs { name } = args;
    let host = app.host()?;
    let registry = app.registry_for(&host, &name, false).await?;
    registry.enable(&name).await?;
    registry.wait_loaded(&name).await;
    errln!("enabled `{name}`: it is {}", registry.entry(&name)?.state);
    Ok(ExitCode::SUCCESS)
}
