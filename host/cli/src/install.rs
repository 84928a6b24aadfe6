//! `skillhost install SOURCE`: a skill into the user layer, where it waits for approval
//! unless it asks for nothing risky. SOURCE is a local folder or `.wasm`, or a remote
//! address (`oci://`, `git+`, an `https://` well-known index); a remote skill is fetched,
//! checked (digest, and signature when a key is asked for), installed from memory with
//! its provenance, and pinned in `skills.lock`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use skillhost::source::address::{SourceAddr, is_remote};
use skillhost::source::lock::Lockfile;
use skillhost::source::{Installed, Installer, index};

use crate::app::App;
use crate::sources::SourceArgs;

/// The options of `install`.
#[derive(clap::Args)]
#[command(after_help = "Validates the name and the files (no symlinks, no paths out of the folder, size
caps), stages a copy and moves it into place atomically.

A remote SOURCE is downloaded into memory under size, count and time caps and checked
before anything is written: an OCI artifact against its manifest digest (and, with
--verify KEY.pub or a [[sources.verify]] rule of the host config, its cosign-format
signature), a git folder at the commit its rev names, an index archive against the
sha256 the index lists (no links, absolute paths or `..`; size and count caps). The
source, digest and signature status are recorded (`skillhost show` and the approval
request display them) and the skill is pinned in skills.lock. Plain HTTP only to a
loopback host, unless --allow-http.

Examples:
  skillhost install ./word-tools                 a folder: skill.toml beside skill.wasm
  skillhost install word-tools/skill.wasm && skillhost approve word-tools
  skillhost install oci://registry.example.com/team/csv-report:1.0 --verify team.pub
  skillhost install 'git+https://git.example.com/skills.git#path=skills/lint&rev=v1.2'
  skillhost install https://skills.example.com/                 list what the index offers
  skillhost install https://skills.example.com/ --skill code-review")]
pub struct InstallArgs {
    /// A skill folder or .wasm file, or a remote source: oci://REGISTRY/REPO:TAG (or
    /// @sha256:DIGEST), git+URL#path=DIR&rev=REV, https://HOST/ (a well-known index).
    source: String,
    /// Of a well-known index: the skill to install (repeatable); without it, the skills
    /// the index offers are listed.
    #[arg(long, value_name = "NAME")]
    skill: Vec<String>,
    /// Do not record a remote skill in the lockfile.
    #[arg(long)]
    no_lock: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

/// Install the skill and say what is left to do.
pub async fn run(app: &App, args: InstallArgs) -> Result<ExitCode> {
    if !is_remote(&args.source) {
        let host = app.host()?;
        let entry = app.registry_on_demand(&host).await?.install(&PathBuf::from(&args.source)).await?;
        errln!("installed `{}` into {} ({})", entry.name, entry.origin.display(), entry.state);
        after_install(&entry);
        return Ok(ExitCode::SUCCESS);
    }
    let addr: SourceAddr = args.source.parse()?;
    let host = app.host()?;
    let options = args.sources.options(app, &host)?;
    let addrs = match &addr {
        SourceAddr::Index(index) if index.skill.is_none() => {
            let listed = index::read(index, &options).await?;
            if args.skill.is_empty() {
                list_index(&listed, args.json)?;
                errln!("install one with `skillhost install {} --skill NAME`", args.source);
                return Ok(ExitCode::from(2));
            }
            args.skill
                .iter()
                .map(|name| SourceAddr::Index(skillhost::source::address::IndexAddr { skill: Some(name.clone()), ..index.clone() }))
                .collect()
        }
        _ if !args.skill.is_empty() => {
            bail!("--skill chooses skills of a well-known index (https://HOST/); {} names one skill", args.source)
        }
        _ => vec![addr],
    };
    let registry = app.registry_on_demand(&host).await?;
    let installer = Installer::new(&registry, options, args.sources.keys(app)?);
    let lock_path = args.sources.lock_path(app);
    let mut lock = if args.no_lock { Lockfile::new() } else { Lockfile::read(&lock_path)? };
    let mut done = Vec::new();
    for addr in &addrs {
        let installed = installer.install(addr).await?;
        if !args.no_lock {
            lock.upsert(installed.locked.clone());
            lock.write(&lock_path)?;
        }
        if !args.json {
            report(&installed);
        }
        done.push(installed);
    }
    if args.json {
        let rows: Vec<_> = done
            .iter()
            .map(|i| serde_json::json!({"name": i.entry.name, "state": i.entry.state.as_str(), "provenance": i.provenance, "locked": i.locked}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    }
    if !args.no_lock {
        errln!("pinned in {}", lock_path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn report(installed: &Installed) {
    let entry = &installed.entry;
    errln!("installed `{}` into {} ({})", entry.name, entry.origin.display(), entry.state);
    for line in installed.provenance.lines() {
        errln!("  {line}");
    }
    after_install(entry);
}

fn after_install(entry: &skillhost::Entry) {
    if entry.state != skillhost::TrustState::Approved {
        errln!("review and approve it with `skillhost approve {}`", entry.name);
    }
}

/// The skills a well-known index offers.
fn list_index(listed: &index::Index, json: bool) -> Result<()> {
    if json {
        let rows: Vec<_> = listed
            .skills
            .iter()
            .map(|e| serde_json::json!({"name": e.name, "type": e.kind.as_str(), "description": e.description, "url": e.url.as_str(), "digest": e.digest}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    outln!("{} offers {} skills:", listed.url, listed.skills.len());
    for entry in &listed.skills {
        outln!("  {} ({}): {}", entry.name, entry.kind.as_str(), skillhost::text::one_line(&entry.description, 100));
    }
    Ok(())
}
