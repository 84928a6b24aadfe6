//! `skillhost secret set|list|rm`: the secrets the host adds to skills' requests (skills
//! never see them); a value is read from stdin or a hidden prompt, never from arguments.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::app::App;

/// The help after `skillhost secret --help`: how a skill binds a secret, and examples.
pub const HELP: &str = "A skill's skill.toml binds a secret to hosts:
  [[secrets]]
  name = \"github\"
  header = \"Authorization\"
  format = \"Bearer {}\"
  hosts = [\"https://api.github.com\"]

Examples:
  skillhost secret set github            prompts for the value (input hidden)
  printf %s \"$TOKEN\" | skillhost secret set github
  skillhost secret list
  skillhost secret rm github";

/// `skillhost secret ...`
#[derive(clap::Subcommand)]
pub enum SecretCommand {
    /// Set a secret; the value is read from stdin or a hidden prompt, never from arguments
    Set {
        /// Secret name (lowercase letters, digits, `_`, `-`).
        name: String,
    },
    /// List the names of the secrets that are set (never their values)
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret
    Rm {
        /// Secret name.
        name: String,
    },
}

/// Set, list or remove secrets in the host's store.
pub fn run(app: &App, command: SecretCommand) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let host = app.host()?;
    let store = host.secrets();
    match command {
        SecretCommand::Set { name } => {
            let value = if std::io::stdin().is_terminal() {
                rpassword::prompt_password(format!("value for secret `{name}` (input hidden): "))?
            } else {
                let mut value = String::new();
                std::io::stdin().read_to_string(&mut value).context("cannot read the secret from stdin")?;
                value
            };
            store.set(&name, &value)?;
            errln!("secret `{name}` set");
        }
        SecretCommand::List { json } => {
            let names = store.list()?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&names)?);
            } else if names.is_empty() {
                outln!("no secrets set; add one with `skillhost secret set NAME`");
            } else {
                names.iter().for_each(|n| outln!("{n}"));
            }
        }
        SecretCommand::Rm { name } => {
            store.remove(&name)?;
            errln!("secret `{name}` removed");
        }
    }
    Ok(ExitCode::SUCCESS)
}
