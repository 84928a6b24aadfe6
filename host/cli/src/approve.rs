//! `skillhost approve NAME`: a human reviews what a skill asks for and approves exactly
//! that (the forge's `--generate` asks the same way).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use skillhost::Registry;

use crate::app::{self, App};
use crate::output;

/// The options of `approve`.
#[derive(clap::Args)]
#[command(after_help = "Prints the skill's requests (files, network, secrets, limits, destructive tools)
and how they differ from the last approval, then asks y/N. The approval is bound to
exactly what was shown: if the skill changes before you answer, nothing is approved.

Examples:
  skillhost approve github
  skillhost approve github --yes       for scripts that already reviewed it")]
pub struct ApproveArgs {
    /// Skill name.
    name: String,
    /// Approve without asking.
    #[arg(long)]
    yes: bool,
}

/// Approve the skill once its first load is done: its packages resolved before the
/// question, installed only after a yes.
pub async fn run(app: &App, args: ApproveArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.name, true).await?;
    let packages = resolve_packages(&host, &registry, &args.name).await?;
    approve_then_install(&registry, &args.name, args.yes, packages).await?;
    Ok(ExitCode::SUCCESS)
}

/// A skill's packages, resolved and recorded, to install once the human said yes.
struct Resolved<'a> {
    sandbox: &'a skillhost::runtime::BwrapRuntime,
    lock: skillhost::run::PackageLock,
    files: std::sync::Arc<std::collections::BTreeMap<String, Vec<u8>>>,
}

/// For a skill whose scripts declare packages: resolve them to exact versions and
/// artifact hashes from the host's index (metadata only: nothing is downloaded to be
/// installed, nothing installed) and record the lock, so that the request shows exactly
/// what will be installed and from where.
async fn resolve_packages<'a>(host: &'a skillhost::Host, registry: &Registry, name: &str) -> Result<Option<Resolved<'a>>> {
    let entry = registry.entry(name)?;
    let Some(loaded) = entry.loaded.as_ref() else { return Ok(None) };
    let Some(scripts) = loaded.scripts.as_ref() else { return Ok(None) };
    if !scripts.declares_packages() {
        return Ok(None);
    }
    // The sources a human named in `[packages]`: the host is not built from a config that
    // cannot be read, so never the defaults in its place.
    let sandbox = host.sandbox().map_err(|e| anyhow::anyhow!("cannot resolve the packages of `{name}`: {e}"))?;
    let node = scripts.node.as_ref().map(|n| n.packages.clone()).unwrap_or_default();
    let all: Vec<&String> = scripts.packages.iter().chain(&node).collect();
    let sources = sandbox.package_sources();
    errln!(
        "resolving {} package(s) of `{name}` (Python from {}, node from {}; nothing is installed before it is approved): {}",
        all.len(),
        sources.python.describe(),
        sources.npm.describe(),
        all.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
    );
    let lock = sandbox.resolve_packages(&scripts.packages, &loaded.files).await.with_context(|| format!("`{name}` was not approved"))?;
    if scripts.lock.as_ref() != Some(&lock) {
        registry.set_lock(name, &lock).await?;
    }
    Ok(Some(Resolved { sandbox, lock, files: loaded.files.clone() }))
}

/// Show what approving `name` grants, ask, and approve exactly what was shown.
pub async fn approve(registry: &Registry, name: &str, yes: bool) -> Result<()> {
    approve_then_install(registry, name, yes, None).await
}

/// [`approve`], installing `packages` after the human said yes and before the approval
/// is recorded: a declined approval installs nothing, a failed install approves nothing.
async fn approve_then_install(registry: &Registry, name: &str, yes: bool, packages: Option<Resolved<'_>>) -> Result<()> {
    let request = registry.approval_request(name)?;
    if !output::approval_request(&request, !yes)? {
        bail!("`{name}` was not approved: its request was not read to the end");
    }
    if !yes && !app::confirm(&format!("approve `{name}` with the requests above?"))? {
        bail!("`{name}` was not approved");
    }
    if let Some(Resolved { sandbox, lock, files }) = packages {
        // What the request showed: the lock the registry holds now.
        let shown = registry.entry(name)?.loaded.as_ref().and_then(|l| l.scripts.as_ref()).and_then(|s| s.lock.clone());
        if shown.as_ref() != Some(&lock) {
            bail!("`{name}` was not approved: its packages were resolved again while it was asked; run `skillhost approve {name}` again");
        }
        errln!("installing the packages of `{name}` as approved");
        sandbox
            .install_packages(&lock, &files)
            .await
            .with_context(|| format!("`{name}` was not approved: its packages could not be installed"))?;
    }
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await?;
    errln!("approved `{name}` {}", skillhost::text::quote(&request.version, 64));
    Ok(())
}
