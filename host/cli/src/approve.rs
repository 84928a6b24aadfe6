//! `skillhost approve NAME`: a human reviews what a skill asks for and approves exactly
//! that (the forge's `--generate` asks the same way).

use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::Registry;

use crate::app::{self, App};
use crate::output;

/// The options of `approve`.
#[derive(clap::Args)]
pub struct ApproveArgs {
    /// Skill name.
    name: String,
    /// Approve without asking.
    #[arg(long)]
    yes: bool,
}

/// Approve the skill once its first load is done.
pub async fn run(app: &App, args: ApproveArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.name, true).await?;
    install_packages(&host, &registry, &args.name).await?;
    approve(&registry, &args.name, args.yes).await?;
    Ok(ExitCode::SUCCESS)
}

/// For a skill whose scripts declare packages: resolve them to exact versions and install
/// them (from the package index, before the human is asked), so that the request shows
/// what will run, and a run never installs anything.
async fn install_packages(host: &skillhost::Host, registry: &Registry, name: &str) -> Result<()> {
    let entry = registry.entry(name)?;
    let Some(scripts) = entry.loaded.as_ref().and_then(|l| l.scripts.as_ref()) else { return Ok(()) };
    if !scripts.declares_packages() {
        return Ok(());
    }
    let sandbox = host.sandbox().map_err(|e| anyhow::anyhow!("cannot install the packages of `{name}`: {e}"))?;
    let node = scripts.node.as_ref().map(|n| n.packages.clone()).unwrap_or_default();
    let all: Vec<&String> = scripts.packages.iter().chain(&node).collect();
    errln!(
        "resolving and installing {} package(s) of `{name}` (uv, npm): {}",
        all.len(),
        all.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
    );
    let files = entry.loaded.as_ref().map(|l| l.files.clone()).unwrap_or_default();
    let lock = sandbox.install_packages(&scripts.packages, &files).await?;
    if scripts.lock.as_ref() != Some(&lock) {
        registry.set_lock(name, &lock).await?;
    }
    Ok(())
}

/// Show what approving `name` grants, ask, and approve exactly what was shown.
pub async fn approve(registry: &Registry, name: &str, yes: bool) -> Result<()> {
    let request = registry.approval_request(name)?;
    if !output::approval_request(&request, !yes)? {
        bail!("`{name}` was not approved: its request was not read to the end");
    }
    if !yes && !app::confirm(&format!("approve `{name}` with the requests above?"))? {
        bail!("`{name}` was not approved");
    }
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await?;
    errln!("approved `{name}` {}", skillhost::text::quote(&request.version, 64));
    Ok(())
}
