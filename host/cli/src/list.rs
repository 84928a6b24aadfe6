//! `skillhost list`: every skill with its layer, runtime, version, trust state and tools,
//! or with `--directory` what an agent is given up front.

use std::process::ExitCode;

use anyhow::Result;

use crate::app::App;
use crate::{output, stats};

/// The options of `list`.
#[derive(clap::Args)]
#[command(after_help = "Skills come from layers, highest precedence first: the workspace (--skills,
default ./skills), the user layer (DATA_DIR/user-skills, where `install` puts skills)
and, with --skills-from, other agents' skill folders (the external layer: instructions
only, read-only). A skill that is not approved is listed but cannot be called.

With --directory, print instead what an agent is given up front (the MCP `instructions`
and the `skills_directory` prompt): one `name: description` line per approved skill, in
name order, within a token budget (estimated at 4 bytes per token). Descriptions are
cut at a word to fit; when even the names do not fit, the last line says how many more
skills skill_search can find.

Examples:
  skillhost list
  skillhost list --json | jq '.[] | select(.state != \"approved\") | .name'
  skillhost list --directory --budget 300
  skillhost --skills ~/my-skills list")]
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
