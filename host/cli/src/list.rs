//! `skillhost list`: every skill with its layer, runtime, version, trust state and tools,
//! or with `--directory` what an agent is given up front.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;
use crate::{output, stats};

/// The options of `list`.
#[derive(clap::Args)]
pub struct ListArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Print the agent's skill directory (approved skills, one line each).
    #[arg(long)]
    directory: bool,
    /// Token budget of --directory (4 bytes per token), 40-20000.
    #[arg(long, requires = "directory", default_value_t = skillhost::mcp::DIRECTORY_BUDGET as u64,
          value_parser = clap::value_parser!(u64).range(skillhost::mcp::MIN_DIRECTORY_BUDGET as u64..=skillhost::mcp::MAX_DIRECTORY_BUDGET as u64))]
    budget: u64,
}

/// List the catalog (warning about failing skills after it), or print the directory.
pub async fn run(app: &App, args: ListArgs) -> Result<ExitCode> {
    let host = app.host()?;
    if args.directory {
        let budget = usize::try_from(args.budget).unwrap_or(usize::MAX);
        let registry = app.registry(&host).await?;
        output::directory(&skillhost::mcp::skills_directory(&registry, budget), budget, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let registry = app.registry(&host).await?;
    output::catalog(&registry.catalog(), args.json)?;
    stats::warn_failing(&registry);
    Ok(ExitCode::SUCCESS)
}
