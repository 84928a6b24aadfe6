//! `skillhost install PATH`: a skill folder or `.wasm` into the user layer, where it waits
//! for approval unless it asks for nothing risky.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;

/// The options of `install`.
#[derive(clap::Args)]
pub struct InstallArgs {
    /// A skill folder or .wasm file.
    path: PathBuf,
}

/// Install the skill and say what is left to do.
pub async fn run(app: &App, args: InstallArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let entry = app.registry(&host).await?.install(&args.path).await?;
    errln!("installed `{}` into {} ({})", entry.name, entry.origin.display(), entry.state);
    if entry.state != skillhost::TrustState::Approved {
        errln!("review and approve it with `skillhost approve {}`", entry.name);
    }
    Ok(ExitCode::SUCCESS)
}
