//! `skillhost test SKILL`: an approved skill's declared `[[tests]]` with its real grant,
//! and a server skill's pytest in a throwaway sandbox followed by its MCP handshake.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use crate::app::{self, App};
use crate::{exit, forge, sandbox};

/// The options of `test`.
#[derive(clap::Args)]
#[command(after_help = "For an installed skill whose skill.toml declares [[tests]], first runs each case
through the registry with the skill's real grant (network, secrets, data dir): only once
a human approved it. The forge reports such cases as `runs_after_approval` when the skill
asks for network or secrets, which no unapproved code gets.

For a server skill folder, runs `python -m pytest test_server.py` inside a sandbox with
the skill's own profile (no network, no secrets), kills everything after the hard
timeout, then starts the server, completes the MCP handshake and lists its tools. Exit
code 0 when all passed.

Examples:
  skillhost test site-check
  skillhost test skills/site-check --json")]
pub struct TestArgs {
    /// Skill folder, or the name of one in the skills directory.
    skill: String,
    /// Hard timeout for tests and handshake together.
    #[arg(long, default_value = "30s", value_parser = app::parse_duration)]
    timeout: Duration,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Run the tests that apply; exit code 1 when any failed.
pub async fn run(app: &App, args: TestArgs) -> Result<ExitCode> {
    let TestArgs { skill, timeout, json } = args;
    let host = app.host()?;
    // An installed skill's declared [[tests]] run through the registry, with its
    // real grant: only once a human approved it.
    let mut declared = None;
    if !app::is_path(&skill) && !Path::new(&skill).is_dir() {
        let registry = app.registry(&host).await?;
        if forge::declares_tests(&registry, &skill) {
            let forge = forge::forge(&host, registry, app)?;
            declared = Some(forge::test_approved(&forge, &skill, json).await?);
        }
    }
    let skills = &app.skills;
    let server = Path::new(&skill).is_dir() || skills.join(&skill).join("skill.toml").is_file();
    let passed = match declared {
        Some(passed) if !server => passed,
        Some(passed) => sandbox::test(&host, &skill, skills, timeout, json).await? && passed,
        None => sandbox::test(&host, &skill, skills, timeout, json).await?,
    };
    Ok(exit::passed(passed))
}
