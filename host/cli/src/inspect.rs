//! `skillhost inspect PATH`: a `.wasm` or skill folder's manifest, grant and tools with
//! their schemas, and the component's WIT, even when it cannot load.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;
use crate::output;

/// The options of `inspect`.
#[derive(clap::Args)]
#[command(after_help = "Any component works: one that does not export skillhost's world is a generic
skill whose exported functions are its tools (`INTERFACE-FUNCTION`, input schema from
the WIT types); inspect lists the functions that cannot be tools (resources, streams…)
and why. A bare .wasm without skill.toml asks for nothing; put it in a folder as
skill.wasm beside a skill.toml to ask for files or network.

Examples:
  skillhost inspect skills/text-tools/skill.wasm
  skillhost inspect word-tools                   a skill folder, built or not
  skillhost inspect skills/csv-summary --json")]
pub struct InspectArgs {
    /// A .wasm file or a skill folder.
    path: PathBuf,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Load the component by its path and print what it offers.
pub async fn run(app: &App, args: InspectArgs) -> Result<ExitCode> {
    let InspectArgs { path, json } = args;
    let host = app.host()?;
    let loaded = match host.load_path(&path).await {
        Ok(loaded) => loaded,
        Err(error) => {
            // A component that cannot load still shows its WIT and what it would offer.
            output::inspect_unloadable(&path, &error.to_string(), json)?;
            return Err(error.into());
        }
    };
    output::inspect(&loaded, json)?;
    Ok(ExitCode::SUCCESS)
}
