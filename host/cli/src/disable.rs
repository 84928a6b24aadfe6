//! `skillhost disable NAME`: the skill cannot be called, whatever its approval, until
//! `skillhost enable`.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;

/// The options of `disable`.
#[derive(clap::Args)]
pub struct DisableArgs {
    /// Skill name.
    name: String,
}

/// Disable the skill without waiting for any skill's load.
pub async fn run(app: &App, args: DisableArgs) -> Result<ExitCode> {
    let DisableArgs { name } = args;
    let host = app.host()?;
    app.registry_for(&host, &name, false).await?.disable(&name).await?;
    errln!("disabled `{name}`; `skillhost enable {name}` undoes it");
    Ok(ExitCode::SUCCESS)
}
