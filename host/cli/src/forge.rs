//! `skillhost forge DIR` (build, test and install a skill from its sources through the
//! forge, as `skill_create` does for agents), `skillhost forge --reset NAME` (a human
//! allows a skill's attempts again) and `skillhost rollback NAME`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use skillhost::{Forge, ForgeConfig, ForgeError, Host, Language, Registry, Submission};

/// The checkout this binary was built from: its guest-sdk/, wit/ and Cargo.toml are what
/// Rust skills build against, unless `SKILLHOST_SDK_WORKSPACE` names another.
const BUILT_CHECKOUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The options of `forge`.
#[derive(clap::Args)]
pub struct ForgeArgs {
    /// The skill's sources: skill.toml plus src/**.rs (Rust) or server.py (Python).
    #[arg(required_unless_present = "reset")]
    dir: Option<PathBuf>,

    /// The language [default: rust when DIR has Cargo.toml or src/, python when skill.toml has [server]].
    #[arg(long, value_enum)]
    lang: Option<Lang>,

    /// Allow skill NAME its attempts again after they all failed (humans only).
    #[arg(long, value_name = "NAME", conflicts_with = "dir")]
    reset: Option<String>,

    /// Print JSON for scripts (the success, or the failure with its diagnostics).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Lang {
    Rust,
    Python,
}

/// The forge's configuration for this host.
pub fn config(data_dir: &Path) -> ForgeConfig {
    let mut config = ForgeConfig::new(data_dir.join("forge"));
    let checkout = std::env::var_os("SKILLHOST_SDK_WORKSPACE").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(BUILT_CHECKOUT));
    config.sdk_workspace = checkout.join("guest-sdk").is_dir().then_some(checkout);
    config
}

/// The forge over `registry` on `host`'s runtimes.
pub fn forge(host: &Host, registry: Arc<Registry>, data_dir: &Path) -> Arc<Forge> {
    Arc::new(host.forge(registry, config(data_dir)))
}

/// Run `skillhost forge`. Returns whether it succeeded.
pub async fn run(host: &Host, registry: Arc<Registry>, data_dir: &Path, args: ForgeArgs) -> Result<bool> {
    let forge = forge(host, registry, data_dir);
    if let Some(name) = args.reset {
        forge.reset(&name)?;
        eprintln!("`{name}` may be submitted again ({} attempts)", forge.config().max_attempts);
        return Ok(true);
    }
    let dir = args.dir.expect("clap requires DIR without --reset");
    let files = skillhost::forge::stage::read_dir(&dir, &forge.config().limits).map_err(|refused| {
        let lines: Vec<String> = refused.iter().map(|r| format!("  {r}")).collect();
        anyhow::anyhow!("{}: refused before any build:\n{}", dir.display(), lines.join("\n"))
    })?;
    let manifest = files.get("skill.toml").with_context(|| format!("{}: no skill.toml; a skill starts with its manifest", dir.display()))?;
    let parsed = skillhost::SkillManifest::parse(manifest, &dir.join("skill.toml"))?;
    let name = parsed.name.as_str();
    let language = match args.lang {
        Some(Lang::Rust) => Language::Rust,
        Some(Lang::Python) => Language::Python,
        None if parsed.server.is_some() => Language::Python,
        None if files.contains_key("Cargo.toml") || files.keys().any(|p| p.starts_with("src/")) => Language::Rust,
        None => bail!("{}: cannot tell the language; pass --lang rust or --lang python", dir.display()),
    };
    let bar = crate::progress_spinner("forge: starting");
    let reporter = bar.clone();
    let progress: skillhost::forge::Progress = Arc::new(move |stage: &str| reporter.set_message(stage.to_owned()));
    let submission = Submission { name: name.to_owned(), language, files };
    let outcome = forge.submit(submission, progress).await;
    bar.finish_and_clear();
    match outcome {
        Ok(forged) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&forged)?);
            } else {
                let total = Duration::from_millis(forged.timings_ms.get("total").copied().unwrap_or(0));
                eprintln!(
                    "forged `{}` {} ({}, tools: {}) in {total:.1?}: {}",
                    forged.skill,
                    forged.version,
                    forged.language.as_str(),
                    forged.tools.join(", "),
                    forged.state
                );
                for warning in &forged.warnings {
                    eprintln!("warning: {}", warning.rendered.as_deref().unwrap_or(&warning.message).trim_end());
                }
                if forged.state != skillhost::TrustState::Approved {
                    eprintln!("review it with `skillhost show {0} --code` and approve it with `skillhost approve {0}`", forged.skill);
                }
            }
            Ok(true)
        }
        Err(error) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&error.to_json())?);
            } else {
                print_failure(&error);
            }
            Ok(false)
        }
    }
}

fn print_failure(error: &ForgeError) {
    if let Some(skillhost::forge::Failure::Build(build)) = error.failure() {
        for d in &build.diagnostics {
            eprintln!("{}", d.rendered.as_deref().unwrap_or(&d.message).trim_end());
        }
        if build.diagnostics.is_empty() && !build.output_tail.is_empty() {
            eprintln!("{}", build.output_tail.trim_end());
        }
    }
    eprintln!("error: {error}");
}

/// `skillhost rollback NAME`.
pub async fn rollback(registry: &Registry, name: &str) -> Result<()> {
    let entry = registry.rollback(name).await?;
    let version = entry.loaded.as_ref().map(|l| l.version.clone()).unwrap_or_default();
    eprintln!("rolled `{name}` back to {version} ({}); `skillhost rollback {name}` again rolls forward", entry.state);
    if entry.state != skillhost::TrustState::Approved {
        eprintln!("approve it with `skillhost approve {name}`");
    }
    Ok(())
}

/// `skillhost stats`.
pub fn stats(registry: &Registry, json: bool) -> Result<()> {
    let Some(stats) = registry.stats() else { bail!("no usage statistics: the stats database could not be opened (see the log)") };
    stats.flush();
    let (tools, failing, missing) = (stats.tools()?, stats.failing()?, stats.missing()?);
    if json {
        let value = serde_json::json!({ "tools": tools, "failing": failing, "missing": missing });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    if tools.is_empty() {
        println!("no calls recorded yet");
    } else {
        println!("{:<36} {:>7} {:>8} {:>9} {:>9}", "TOOL", "CALLS", "FAILED", "P50 ms", "P95 ms");
        for t in &tools {
            println!("{:<36} {:>7} {:>8} {:>9.1} {:>9.1}", format!("{}__{}", t.skill, t.tool), t.calls, t.failures, t.p50_ms, t.p95_ms);
        }
    }
    for f in &failing {
        println!("failing: `{}` failed {} of its last {} calls", f.skill, f.failures, f.calls);
    }
    for m in &missing {
        println!("missing: {} searches like \"{}\" found no good tool", m.count, m.query);
    }
    Ok(())
}

/// After `list`: one line per skill failing more than 30 % of its last 20 calls.
pub fn warn_failing(registry: &Registry) {
    let Some(stats) = registry.stats() else { return };
    for f in stats.failing().unwrap_or_default() {
        eprintln!("warning: skill `{}` failed {} of its last {} calls; see `skillhost stats`", f.skill, f.failures, f.calls);
    }
}
