//! `skillhost search`: the search an agent's `tool_search` and `skill_search` run,
//! from the command line, saying which ranker answered.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use skillhost::index::{Query, Target};

use crate::app::App;

/// What to search for.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum What {
    /// Tools, as `SKILL__TOOL` (what `tool_search` returns).
    Tools,
    /// Skills (what `skill_search` returns).
    Skills,
}

/// `skillhost search` arguments.
#[derive(clap::Args)]
#[command(after_help = "Scores are in [0, 1] and depend only on the query and the tool (or skill),
not on --limit or the other results; under 0.45 is not a good match. Only approved
skills are searched unless --include-unapproved is given (agents never see those).
When nothing matches well the answer says so: creating a skill is then an option.

Examples:
  skillhost search \"is my site down?\"
  skillhost search csv --in skills
  skillhost search \"convert units\" --limit 3 --json")]
pub struct SearchArgs {
    /// What you are looking for, in your own words.
    query: String,
    /// Most results shown.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=100))]
    limit: u16,
    /// Search tools or skills.
    #[arg(long = "in", value_enum, default_value = "tools", value_name = "WHAT")]
    what: What,
    /// Also search skills that are not approved: by their names, shown with their state
    /// and skillhost's text (nothing they wrote is indexed before approval).
    #[arg(long)]
    include_unapproved: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Run the search over the registry's catalog, with the host's on-disk index (hybrid
/// when the embedding model is installed, else BM25), synced first.
pub async fn run(app: &App, args: SearchArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    let (host, registry) = (&host, &*registry);
    let index = crate::index::synced(host, registry)?;
    let target = match args.what {
        What::Tools => Target::Tools,
        What::Skills => Target::Skills,
    };
    let mut query = Query::new(&args.query, target).limit(usize::from(args.limit));
    if args.include_unapproved {
        query = query.include_unapproved();
    }
    let found = index.search(&query).context("search failed")?;
    let state = |skill: &str| registry.entry(skill).map(|e| e.state.as_str()).unwrap_or("unknown");
    if args.json {
        let results: Vec<_> = found
            .hits
            .iter()
            .map(|h| {
                json!({
                    "name": h.public_name(),
                    "skill": h.skill,
                    "score": h.score,
                    "description": h.description,
                    "state": state(&h.skill),
                })
            })
            .collect();
        let value = json!({
            "query": args.query,
            "ranker": found.ranker,
            "match_quality": found.match_quality,
            "no_good_match": found.weak(),
            "results": results,
        });
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("ranker: {}", found.ranker);
    let width = found.hits.iter().map(|h| h.public_name().len()).max().unwrap_or(0);
    for hit in &found.hits {
        let state = state(&hit.skill);
        let note = if state == "approved" { String::new() } else { format!(" [{state}]") };
        outln!("{:.2}  {:<width$}  {}{note}", hit.score, hit.public_name(), hit.description);
    }
    if found.weak() {
        outln!("no skill matched this well: `skillhost new NAME` creates one");
    }
    Ok(ExitCode::SUCCESS)
}
