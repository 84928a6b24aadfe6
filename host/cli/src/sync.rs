//! `skillhost sync` and `skillhost outdated`: a data dir made to hold exactly the remote
//! skills `skills.lock` pins, and what moved upstream since, without changing anything;
//! and [`follow_lock`], how `serve` in team mode (`[team] lock`) keeps to its lock.

use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::source::lock::Lockfile;
use skillhost::source::{Installer, Synced};

use crate::app::App;
use crate::sources::SourceArgs;

/// The options of `sync`.
#[derive(clap::Args)]
#[command(after_help = "Each locked skill whose installed files are not the locked ones is fetched at
its pinned digest (an OCI digest, a git commit, an index sha256); bytes that do not
give the locked digest and content hash are refused, never installed. Each skill is
installed atomically or not at all; skills the lock does not name are left alone. A
new skill waits for approval as after `install`. --update asks each source what it
names now (a tag, a branch, an index entry), installs that and rewrites the lock.

Examples:
  skillhost sync --lock team/skills.lock --data-dir /srv/agent-data
  skillhost sync --lock team/skills.lock --update --verify team.pub")]
pub struct SyncArgs {
    /// Move each pin to what its source names now (a tag, a branch, an index entry),
    /// install that, and rewrite the lockfile.
    #[arg(long)]
    update: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

/// The options of `outdated`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  skillhost outdated --lock team/skills.lock
  skillhost outdated --lock team/skills.lock --json | jq '.[] | select(.status == \"moved\")'")]
pub struct OutdatedArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

/// The lockfile `args` names, which must exist and pin something.
fn read_lock(app: &App, sources: &SourceArgs) -> Result<(std::path::PathBuf, Lockfile)> {
    let path = sources.lock_path(app);
    if !path.exists() {
        bail!("no lockfile at {}; `skillhost install SOURCE` writes one (or pass --lock FILE)", path.display());
    }
    let lock = Lockfile::read(&path)?;
    Ok((path, lock))
}

/// Install what the lock pins; with `--update`, move the pins first.
pub async fn sync(app: &App, args: SyncArgs) -> Result<ExitCode> {
    let (path, mut lock) = read_lock(app, &args.sources)?;
    let host = app.host()?;
    let options = args.sources.options(app, &host)?;
    let registry = app.registry(&host).await?;
    let installer = Installer::new(&registry, options, args.sources.keys(app)?);
    let outcomes = installer.sync(&mut lock, args.update).await;
    if args.update {
        lock.write(&path)?;
    }
    let mut failed = 0;
    let mut rows = Vec::new();
    for (name, outcome) in &outcomes {
        let (status, detail) = match outcome {
            Ok(Synced::UpToDate) => ("up-to-date", String::new()),
            Ok(Synced::Installed(entry)) => ("installed", entry.state.to_string()),
            Ok(Synced::Updated { entry, from }) => ("updated", format!("from {from}, {}", entry.state)),
            Err(e) => {
                failed += 1;
                ("failed", e.to_string())
            }
        };
        if !args.json {
            errln!("{name}: {status}{}{detail}", if detail.is_empty() { "" } else { ": " });
        }
        rows.push(serde_json::json!({"name": name, "status": status, "detail": detail}));
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    }
    let pending: Vec<&str> = outcomes
        .iter()
        .filter_map(|(name, o)| match o {
            Ok(Synced::Installed(e) | Synced::Updated { entry: e, .. }) if e.state != skillhost::TrustState::Approved => {
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    if !pending.is_empty() {
        errln!("waiting for approval: {}; review each with `skillhost approve NAME`", pending.join(", "));
    }
    if failed > 0 {
        bail!("{failed} of {} locked skills did not sync; nothing of a skill that failed was written", outcomes.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// List, for each locked skill, whether its source moved; change nothing.
pub async fn outdated(app: &App, args: OutdatedArgs) -> Result<ExitCode> {
    let (_, lock) = read_lock(app, &args.sources)?;
    let host = app.host()?;
    let options = args.sources.options(app, &host)?;
    let registry = app.registry(&host).await?;
    let installer = Installer::new(&registry, options, args.sources.keys(app)?);
    let rows = installer.outdated(&lock).await;
    let mut failed = 0;
    let mut json = Vec::new();
    for (name, row) in &rows {
        match row {
            Ok(row) => {
                let status = if row.moved() { "moved" } else { "current" };
                if !args.json {
                    let upstream = if row.moved() { format!(" -> {}", row.upstream) } else { String::new() };
                    outln!("{name}: {status} ({}{upstream}) {}", row.locked, row.source);
                }
                json.push(serde_json::json!({"name": name, "status": status, "source": row.source, "locked": row.locked, "upstream": row.upstream}));
            }
            Err(e) => {
                failed += 1;
                if !args.json {
                    outln!("{name}: unknown ({e})");
                }
                json.push(serde_json::json!({"name": name, "status": "unknown", "error": e.to_string()}));
            }
        }
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&json)?);
    }
    if failed > 0 {
        bail!("{failed} of {} sources could not be asked", rows.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// How often `serve` in team mode looks at its lockfile for a change.
const LOCK_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Team mode (`[team] lock`): install what `lock` pins now (as `skillhost sync`), and
/// again each time the file changes, the registry's pins following it; runs until the
/// process ends. A skill that cannot be fetched stays refused (its files are not the
/// locked ones), which `/readyz` and `doctor` say.
pub async fn follow_lock(app: &App, host: &skillhost::Host, registry: std::sync::Arc<skillhost::Registry>, lock: std::path::PathBuf) {
    let sources = SourceArgs::for_lock(lock.clone());
    let mut seen: Option<Vec<u8>> = None;
    // What is installed is known once the skills found at start have loaded.
    registry.ready().await;
    loop {
        // Read under the lockfile's cap: a file grown past it is not read whole every poll.
        let now = skillhost::source::http::read_file_capped(&lock, "the lockfile", skillhost::source::lock::MAX_LOCK_BYTES).ok();
        if now != seen {
            if seen.is_some() {
                tracing::info!(lock = %lock.display(), "the lockfile changed: serving what it pins now");
                match app.config().and_then(|c| Ok(c.pins()?)) {
                    Ok(pins) => {
                        if let Err(error) = registry.set_pins(pins).await {
                            tracing::warn!(%error, "cannot apply the changed lockfile");
                        }
                    }
                    Err(error) => tracing::warn!(%error, "cannot read the changed lockfile; the skills it pinned before stay"),
                }
            }
            seen = now;
            if let Err(error) = sync_locked(app, host, &registry, &sources).await {
                tracing::warn!(%error, lock = %lock.display(), "cannot sync the locked skills");
            }
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

/// One sync of the locked skills into the registry's user layer, each outcome logged.
async fn sync_locked(app: &App, host: &skillhost::Host, registry: &skillhost::Registry, sources: &SourceArgs) -> Result<()> {
    let mut lock = Lockfile::read(&sources.lock_path(app))?;
    let installer = Installer::new(registry, sources.options(app, host)?, sources.keys(app)?);
    for (name, outcome) in installer.sync(&mut lock, false).await {
        match outcome {
            Ok(Synced::UpToDate) => tracing::debug!(skill = %name, "as locked"),
            Ok(_) => tracing::info!(skill = %name, "installed as locked"),
            Err(error) => tracing::warn!(skill = %name, %error, "cannot install as locked; not served until it can"),
        }
    }
    Ok(())
}
