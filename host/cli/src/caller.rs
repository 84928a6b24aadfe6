//! `skillhost caller add|list|remove`: the agents and people that reach `serve --http`
//! with a token of their own, each a principal of the org policy (`Caller::"NAME"`, in
//! its groups). A token is shown once, when it is made; the host keeps only its SHA-256.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Result, bail};
use serde_json::json;
use skillhost::access::{CallerRecord, caller, token};

use crate::app::{self, App};

/// The help after `skillhost caller --help`.
pub const HELP: &str = "A caller sends its token as `Authorization: Bearer TOKEN` to `serve --http`;
the org policy (`[org] policies`) decides what it may do as Caller::\"NAME\", in Group::\"G\"
for each --group. Callers live in the state store: added on one replica, known to all.

Examples:
  skillhost caller add ci-bot --group agents --expires 90d     prints the token, once
  skillhost caller list
  skillhost caller remove ci-bot                               its token stops working at once";

/// `skillhost caller ...`
#[derive(clap::Subcommand)]
pub enum CallerCommand {
    /// Add a caller and print its token (shown once: the host keeps only its hash)
    Add {
        /// Its name (letters, digits, `-`, `_`, `.`, `@`; at most 64).
        name: String,
        /// A group it is in (repeatable).
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// Its token stops working after this long (e.g. 30d, 12h). Default: never.
        #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
        expires: Option<Duration>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// List the callers (never their tokens)
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove a caller: its token stops working at once, on every replica
    Remove {
        /// Its name.
        name: String,
    },
}

/// Add, list or remove callers in the host's state store.
pub fn run(app: &App, command: CallerCommand) -> Result<ExitCode> {
    let host = app.host()?;
    let store = &host.state().callers;
    match command {
        CallerCommand::Add { name, groups, expires, json } => {
            for given in std::iter::once(&name).chain(&groups) {
                if !caller::valid_name(given) {
                    bail!(
                        "`{given}` cannot name a caller or a group: use 1 to 64 letters, digits, `-`, `_`, `.` or `@`, starting with a letter or digit"
                    );
                }
            }
            let secret = token::generate()?;
            let now = SystemTime::now();
            let record =
                CallerRecord { name, token_sha256: token::sha256(&secret), groups, created: now, expires: expires.map(|d| now + d) };
            store.add(&record)?;
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"name": record.name, "token": secret, "groups": record.groups, "expires": record.expires.map(skillhost::audit::rfc3339)})
                    )?
                );
            } else {
                outln!("{secret}");
                errln!("caller `{}` added; its token is above, shown this once: send it as `Authorization: Bearer TOKEN`", record.name);
            }
        }
        CallerCommand::List { json } => {
            let callers = store.list()?;
            let now = SystemTime::now();
            if json {
                let rows: Vec<_> = callers
                    .iter()
                    .map(|c| json!({"name": c.name, "groups": c.groups, "created": skillhost::audit::rfc3339(c.created), "expires": c.expires.map(skillhost::audit::rfc3339), "expired": c.expired(now)}))
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&rows)?);
            } else if callers.is_empty() {
                outln!("no callers; add one with `skillhost caller add NAME`");
            } else {
                for c in &callers {
                    let expires = match c.expires {
                        Some(_) if c.expired(now) => "expired".to_owned(),
                        Some(at) => format!("expires {}", skillhost::audit::rfc3339(at)),
                        None => "never expires".to_owned(),
                    };
                    let groups = if c.groups.is_empty() { "-".to_owned() } else { c.groups.join(",") };
                    outln!("{:<24} {groups:<24} {expires}", c.name);
                }
            }
        }
        CallerCommand::Remove { name } => {
            if !store.remove(&name)? {
                bail!("no caller named `{name}`; `skillhost caller list` shows them");
            }
            errln!("caller `{name}` removed; its token no longer works");
        }
    }
    Ok(ExitCode::SUCCESS)
}
