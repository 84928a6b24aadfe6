//! `skillhost ca show|rotate`: the egress CA. For a host a secret is bound to, the sandbox
//! proxy terminates TLS with a leaf this CA signs, so that it can add the secret; every
//! sandbox that reaches such a host trusts the CA through its CA bundle. The key stays in
//! the data dir (0600) and never enters a sandbox.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;

use crate::app::App;

/// The help after `skillhost ca --help`.
pub const HELP: &str = "The CA is made on first need (a sandbox reaching an HTTPS host a secret is
bound to) in DATA_DIR/egress-ca: ca.key (0600, the host's alone) and ca.pem.
A rotation replaces both: sandboxes started from then on trust the new CA only;
a running `skillhost serve` keeps the CA it loaded until it is restarted.

Examples:
  skillhost ca show
  skillhost ca rotate --json
  skillhost ca show --pem > skillhost-egress-ca.pem";

/// `skillhost ca ...`
#[derive(clap::Subcommand)]
pub enum CaCommand {
    /// Show the egress CA: its file, name and SHA-256 fingerprint (nothing is made)
    Show {
        /// Print the CA certificate as PEM instead.
        #[arg(long, conflicts_with = "json")]
        pem: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Make a new CA key and certificate, replacing the old ones
    Rotate {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// Show or rotate the host's egress CA.
pub fn run(app: &App, command: CaCommand) -> Result<ExitCode> {
    let host = app.host()?;
    let ca = host.egress_ca();
    let (authority, json, rotated) = match command {
        CaCommand::Show { pem, json } => {
            let authority = ca.existing().context("cannot read the egress CA")?;
            if pem {
                let Some(authority) = authority else {
                    anyhow::bail!(
                        "this host has no egress CA yet (it is made when a sandbox first reaches a host a secret is bound to); make one now with `skillhost ca rotate`"
                    );
                };
                outln!("{}", authority.cert_pem().trim_end());
                return Ok(ExitCode::SUCCESS);
            }
            (authority, json, false)
        }
        CaCommand::Rotate { json } => (Some(ca.rotate().context("cannot make a new egress CA")?), json, true),
    };
    let cert = ca.cert_path();
    if json {
        let value = match &authority {
            Some(a) => json!({"made": true, "rotated": rotated, "name": a.name(), "sha256": a.fingerprint(), "cert": cert}),
            None => json!({"made": false, "rotated": false, "cert": cert}),
        };
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    match authority {
        Some(a) => {
            if rotated {
                errln!("made a new egress CA; sandboxes started from now on trust it only (restart a running `skillhost serve` to use it)");
            }
            outln!("{}\n  sha256 {}\n  certificate {}", a.name(), a.fingerprint(), cert.display());
        }
        None => outln!(
            "no egress CA yet: it is made in {} when a sandbox first reaches a host a secret is bound to (or now, with `skillhost ca rotate`)",
            ca.dir().display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
