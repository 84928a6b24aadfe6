//! `skillhost approve NAME`: a human reviews what a skill asks for and approves exactly
//! that (the forge's `--generate` asks the same way).

use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::Registry;
use skillhost::packages::Resolved;

use crate::app::{self, App};
use crate::output;

/// The options of `approve`.
#[derive(clap::Args)]
#[command(after_help = "Prints the skill's requests (files, network, secrets, limits, destructive tools)
and how they differ from the last approval, then asks y/N. The approval is bound to
exactly what was shown: if the skill changes before you answer, nothing is approved.

A SKILL.md skill's run policy can be given here with the flags of `skillhost policy`:
it is written first, so the request shown (and approved) is the one with it.

Examples:
  skillhost approve github
  skillhost approve github --yes       for scripts that already reviewed it
  skillhost approve csv-report --package 'pandas>=2,<3' --allow https://api.example.com")]
pub struct ApproveArgs {
    /// Skill name.
    name: String,
    /// Approve without asking.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    policy: crate::policy::PolicyFlags,
}

/// Approve the skill once its first load is done: its packages resolved before the
/// question, installed only after a yes.
pub async fn run(app: &App, args: ApproveArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.name, true).await?;
    if args.policy.changes() {
        args.policy.write(&registry, &args.name).await?;
        errln!("wrote the run policy of `{}`; its request below is the one with it", args.name);
    }
    let packages = resolve_packages(&host, &registry, &args.name).await?;
    ask_and_approve(&registry, &args.name, args.yes, packages.map(|p| (&host, p))).await?;
    // The approval started compiling its code: finished here, it reaches the compiled
    // cache, so that its first call (here or in a running `serve`) does not compile it.
    if !host.optimizing().is_empty() {
        errln!("compiling `{}` so that its first call need not (Ctrl-C stops waiting; its first call then compiles it)", args.name);
        if !host.finish_optimizing(crate::serve::FINISH_COMPILES).await {
            errln!("still compiling after {} s; stopped waiting", crate::serve::FINISH_COMPILES.as_secs());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The skill's packages resolved and recorded (said on stderr first, with where they come
/// from), or `None` when its scripts declare none.
async fn resolve_packages(host: &skillhost::Host, registry: &Registry, name: &str) -> Result<Option<Resolved>> {
    let entry = registry.entry(name)?;
    let Some(scripts) = entry.loaded.as_ref().and_then(|l| l.scripts.as_ref()).filter(|s| s.declares_packages()) else {
        return Ok(None);
    };
    let node = scripts.node.as_ref().map(|n| n.packages.clone()).unwrap_or_default();
    let all: Vec<&String> = scripts.packages.iter().chain(&node).collect();
    if let Ok(sandbox) = host.sandbox() {
        let sources = sandbox.package_sources();
        errln!(
            "resolving {} package(s) of `{name}` (Python from {}, node from {}; nothing is installed before it is approved): {}",
            all.len(),
            sources.python.describe(),
            sources.npm.describe(),
            all.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(host.resolve_packages(registry, name).await?)
}

/// Show what approving `name` grants, ask, and approve exactly what was shown (a skill
/// without packages: the forge's `--generate` asks this way).
pub async fn approve(registry: &Registry, name: &str, yes: bool) -> Result<()> {
    ask_and_approve(registry, name, yes, None).await
}

/// [`approve`], installing `packages` (with `host`'s sandbox) after the human said yes
/// and before the approval is recorded: a declined approval installs nothing, a failed
/// install approves nothing.
async fn ask_and_approve(registry: &Registry, name: &str, yes: bool, packages: Option<(&skillhost::Host, Resolved)>) -> Result<()> {
    let request = registry.approval_request(name)?;
    if !output::approval_request(&request, !yes)? {
        bail!("`{name}` was not approved: its request was not read to the end");
    }
    if !yes && !app::confirm(&format!("approve `{name}` with the requests above?"))? {
        bail!("`{name}` was not approved");
    }
    if let Some((host, resolved)) = packages {
        errln!("installing the packages of `{name}` as approved");
        host.install_resolved(registry, &resolved).await?;
    }
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await?;
    errln!("approved `{name}` {}", skillhost::text::quote(&request.version, 64));
    Ok(())
}
