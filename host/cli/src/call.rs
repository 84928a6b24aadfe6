//! `skillhost call SKILL TOOL`: one tool of an approved skill through the registry, or of
//! a `.wasm` or skill folder loaded by its path (under the probe grant unless `--grant`);
//! its JSON output goes to stdout.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use skillhost::{CallContext, CallError, RegistryError, skill::CallFailure};

use crate::app::{self, App};
use crate::{exit, output};

/// The options of `call`.
#[derive(clap::Args)]
#[command(after_help = "SKILL is the name of an approved skill (see `skillhost list`), or a path to a .wasm
file or skill folder, loaded directly for development without the trust store. Code
loaded by its path is not approved: it runs under the probe grant (a fresh scratch
/data, no network, no secrets, at most 10 s) unless you pass --grant, which gives it
what its skill.toml asks for (files in DATA_DIR/skills/.dev/NAME) for this one call.
Exit codes: 0 ok, 1 tool error, 2 usage (a bad --input) or refused (not approved: approve it first), 3 limit
hit, 4 load or host error.

Examples:
  skillhost call text-tools text_stats --input '{\"text\": \"one two three\"}'
  echo '{\"path\": \"sales.csv\"}' | skillhost call csv-summary summarize --input -
  skillhost call ./word-tools/skill.wasm hello --input '{\"name\": \"Ada\"}' --timeout 2s
  skillhost call skills/csv-summary summarize --input '{\"path\": \"sales.csv\"}' --grant")]
pub struct CallArgs {
    /// Skill name, or path to a .wasm file or skill folder.
    skill: String,
    /// Tool name.
    tool: String,
    /// Input as JSON text, or `-` to read it from stdin.
    #[arg(long, short, default_value = "{}", value_name = "JSON|-")]
    input: String,
    /// Stop the call after this long, if shorter than the skill's own limit (e.g. 500ms, 2s).
    #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
    timeout: Option<Duration>,
    /// Give a skill loaded by its path what its skill.toml asks for (network, secrets,
    /// its own data dir), approving it for this call; without it, the probe grant.
    #[arg(long)]
    grant: bool,
}

/// Call the tool and print its output.
pub async fn run(app: &App, args: CallArgs) -> Result<ExitCode> {
    let CallArgs { skill, tool, input, timeout, grant } = args;
    let host = app.host()?;
    let input = read_input(&input)?;
    let cx = CallContext { timeout, caller: "cli".into(), ..CallContext::default() };
    let out = if app::is_path(&skill) {
        let loaded = if grant {
            host.load_path_granted(Path::new(&skill)).await?
        } else {
            let loaded = host.load_path(Path::new(&skill)).await?;
            if let Some(note) = output::probe_note(&loaded.source.manifest, &skill) {
                errln!("{note}");
            }
            loaded
        };
        loaded.call(&tool, input, cx).await.map_err(RegistryError::from)
    } else {
        let registry = app.registry_for(&host, &skill, false).await?;
        registry.call(&skill, &tool, input, cx).await
    };
    let out = out.map_err(|e| match e {
        RegistryError::Call(call @ CallError { failure: CallFailure::Timeout { skill_limit: Some(_), .. }, .. }) => {
            anyhow::Error::new(exit::CommandLineTimeout(call))
        }
        other => other.into(),
    })?;
    outln!("{}", serde_json::to_string_pretty(&out.value)?);
    Ok(ExitCode::SUCCESS)
}

/// The input JSON: the argument itself, or stdin for `-`.
fn read_input(input: &str) -> Result<serde_json::Value> {
    let text = if input == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the input from stdin")?;
        text
    } else {
        input.to_owned()
    };
    serde_json::from_str(&text).map_err(|e| {
        exit::usage(format!(
            "--input is not valid JSON ({e}); pass an object such as '{{\"text\": \"hi\"}}' (got {:?})",
            truncate(&text, 80)
        ))
    })
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}
