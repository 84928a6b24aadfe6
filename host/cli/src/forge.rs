//! `skillhost forge DIR` (build, test and install a skill from its sources through the
//! forge, as `skill_create` does for agents), `skillhost forge --generate TEXT --name
//! NAME` (the model of `[forge.llm]` writes the sources, round after round, then a human
//! approves) and `skillhost forge --reset NAME` (a human allows a skill's attempts again);
//! the forge's configuration from the host config's `[forge]`, which `test` and `serve`
//! use too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use skillhost::forge::llm;
use skillhost::{Host, Registry, forge::Forge, forge::ForgeConfig, forge::ForgeError, forge::Forged, forge::Language, forge::Submission};

use crate::app::{self, App};
use crate::exit;

/// The options of `forge`.
#[derive(clap::Args)]
#[command(after_help = "Checks the files (relative paths, allow and deny lists, no symlinks, 1 MiB per
file, 10 MiB in all) before anything is built; builds a Rust crate for wasm32-wasip2 in
a bubblewrap sandbox with no network against the vendored SDK (the first build of a
skill compiles its dependencies; later ones reuse the skill's own target dir); runs the
[[tests]] of skill.toml on the real runtime (and pytest for Python); installs it into
the user layer, where it waits for approval unless it asks for nothing risky. The
version it replaces is kept for `skillhost rollback`. Each skill gets 3 attempts until
one succeeds; `--reset NAME` gives them back.

A Rust skill depends on the SDK as `skillhost-sdk = { path = \"/sdk/guest-sdk\" }`
(without a Cargo.toml the forge writes one).

Without an agent, --generate has a model write the sources: the model of `[forge.llm]`
in DATA_DIR/config.toml (any OpenAI-compatible endpoint; its key is a host secret) gets
the requirements, its files go through the same pipeline, and every failure (compiler
errors with file:line, failing tests) goes back to it, for up to 3 rounds. The result is
installed for review like any forged skill; a human approves it (asked on a terminal,
or `skillhost approve NAME` later).
  [forge.llm]
  endpoint = \"https://api.openai.com/v1\"
  model = \"gpt-4.1-mini\"
  secret = \"openai\"       # skillhost secret set openai

Examples:
  skillhost new greeter && skillhost forge ./greeter
  skillhost forge skills/site-check --lang python --json
  skillhost forge --generate \"convert roman numerals to numbers and back\" --name roman
  skillhost forge --reset greeter")]
pub struct ForgeArgs {
    /// The skill's sources: skill.toml plus src/**.rs (Rust) or server.py (Python).
    #[arg(required_unless_present_any = ["reset", "generate"])]
    dir: Option<PathBuf>,

    /// Have the model of `[forge.llm]` (DATA_DIR/config.toml) write a skill doing TEXT;
    /// needs --name.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["dir", "reset"], requires = "name")]
    generate: Option<String>,

    /// The name of the skill --generate makes.
    #[arg(long, value_name = "NAME", requires = "generate")]
    name: Option<String>,

    /// With --generate: approve the result without asking (the requests are still shown).
    #[arg(long, requires = "generate")]
    yes: bool,

    /// The language [default: rust when DIR has Cargo.toml or src/, or with --generate; python when skill.toml has [server]].
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
    /// An Agent Skills folder: SKILL.md and its scripts.
    Scripts,
}

/// The forge's configuration for this host: `[forge]` of the host config over the
/// defaults ([`skillhost::HostConfig::forge_config`]). Rust skills build against the SDK
/// embedded in this binary (written out under the data dir), or the checkout
/// `SKILLHOST_SDK_WORKSPACE` names.
pub fn config(app: &App) -> Result<ForgeConfig> {
    let mut config = app.config()?.forge_config(app.data_dir.join("forge"));
    config.sdk_workspace = Some(match std::env::var_os("SKILLHOST_SDK_WORKSPACE") {
        Some(checkout) => PathBuf::from(checkout),
        None => crate::sdk::workspace(&app.data_dir)?,
    });
    Ok(config)
}

/// The forge over `registry` on `host`'s runtimes.
pub fn forge(host: &Host, registry: Arc<Registry>, app: &App) -> Result<Arc<Forge>> {
    Ok(Arc::new(host.forge(registry, config(app)?)))
}

/// Whether the installed skill `name` declares `[[tests]]` in its skill.toml.
pub fn declares_tests(registry: &Registry, name: &str) -> bool {
    let Ok(entry) = registry.entry(name) else { return false };
    let file = entry.origin.join("skill.toml");
    std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| skillhost::skill::SkillManifest::test_cases(&text, &file).ok())
            .is_some_and(|tests| !tests.is_empty())
}

/// `skillhost test NAME` for an installed skill: its declared `[[tests]]` through the
/// registry with its real grant (refused until a human approved it). Returns whether all
/// passed.
pub async fn test_approved(forge: &Forge, name: &str, json: bool) -> Result<bool> {
    let report = forge.test_approved(name).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for failure in &report.failures {
            outln!("FAIL {}({}): returned {}, expected {}", failure.tool, failure.input, failure.actual, failure.expected);
        }
        outln!("{}: {} declared test(s) passed, {} failed (run with its real grant)", report.skill, report.passed, report.failures.len());
    }
    Ok(report.failures.is_empty())
}

/// Run `skillhost forge` over the registry; exit code 1 when the forge refused the skill.
pub async fn run(app: &App, args: ForgeArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    let ok = execute(&host, registry, app, args).await?;
    Ok(exit::passed(ok))
}

/// Reset, generate or forge, as `args` say. Returns whether it succeeded.
async fn execute(host: &Host, registry: Arc<Registry>, app: &App, args: ForgeArgs) -> Result<bool> {
    let forge = forge(host, registry, app)?;
    if let Some(name) = args.reset {
        forge.reset(&name)?;
        errln!("`{name}` may be submitted again ({} attempts)", forge.config().max_attempts);
        return Ok(true);
    }
    if let Some(requirements) = &args.generate {
        return generate(&forge, host, app, requirements, &args).await;
    }
    let dir = args.dir.expect("clap requires DIR without --reset or --generate");
    let files = skillhost::forge::stage::read_dir(&dir, &forge.config().limits).map_err(|refused| {
        let lines: Vec<String> = refused.iter().map(|r| format!("  {r}")).collect();
        anyhow::anyhow!("{}: refused before any build:\n{}", dir.display(), lines.join("\n"))
    })?;
    let scripts = matches!(args.lang, Some(Lang::Scripts))
        || (args.lang.is_none() && !files.contains_key("skill.toml") && files.contains_key("SKILL.md"));
    let (name, language) = if scripts {
        // An Agent Skills folder is named by its folder (and its SKILL.md says the same).
        let name = std::path::absolute(&dir)?.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        (name, Language::Scripts)
    } else {
        let manifest =
            files.get("skill.toml").with_context(|| format!("{}: no skill.toml; a skill starts with its manifest", dir.display()))?;
        let parsed = skillhost::skill::SkillManifest::parse(manifest, &dir.join("skill.toml"))?;
        let language = match args.lang {
            Some(Lang::Rust) => Language::Rust,
            Some(Lang::Python) => Language::Python,
            None if parsed.server.is_some() => Language::Python,
            None if files.contains_key("Cargo.toml") || files.keys().any(|p| p.starts_with("src/")) => Language::Rust,
            _ => bail!("{}: cannot tell the language; pass --lang rust, python or scripts", dir.display()),
        };
        (parsed.name.to_string(), language)
    };
    let name = name.as_str();
    let bar = app::progress_spinner("forge: starting");
    let reporter = bar.clone();
    let progress: skillhost::forge::Progress = Arc::new(move |stage: &str| reporter.set_message(stage.to_owned()));
    let submission = Submission { name: name.to_owned(), language, files };
    let outcome = forge.submit(submission, progress).await;
    bar.finish_and_clear();
    match outcome {
        Ok(forged) => {
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&forged)?);
            } else {
                print_forged(&forged);
                if forged.state != skillhost::TrustState::Approved {
                    errln!("review it with `skillhost show {0} --code` and approve it with `skillhost approve {0}`", forged.skill);
                }
            }
            Ok(true)
        }
        Err(error) => {
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&error.to_json())?);
            } else {
                print_failure(&error);
            }
            Ok(false)
        }
    }
}

fn print_forged(forged: &Forged) {
    let total = Duration::from_millis(forged.timings_ms.get("total").copied().unwrap_or(0));
    errln!(
        "forged `{}` {} ({}, tools: {}) in {total:.1?}: {}",
        forged.skill,
        forged.version,
        forged.language.as_str(),
        forged.tools.join(", "),
        forged.state
    );
    if let Some(note) = &forged.after_approval {
        errln!("{note}");
    }
    for warning in &forged.warnings {
        errln!("warning: {}", warning.rendered.as_deref().unwrap_or(&warning.message).trim_end());
    }
}

/// `skillhost forge --generate TEXT --name NAME`: the model writes, the forge builds and
/// tests, failures go back to the model, and a human approves what it made.
async fn generate(forge: &Arc<Forge>, host: &Host, app: &App, requirements: &str, args: &ForgeArgs) -> Result<bool> {
    let path = crate::config::path(&app.data_dir);
    let Some(llm) = app.config()?.forge.llm.clone() else {
        bail!(
            "--generate needs a model: add to {}\n  [forge.llm]\n  endpoint = \"https://api.openai.com/v1\"\n  model = \"gpt-4.1-mini\"\n  secret = \"openai\"   # then: skillhost secret set openai",
            path.display()
        );
    };
    let api_key = match &llm.secret {
        Some(name) => Some(
            host.secrets()
                .secret(name)
                .with_context(|| format!("`[forge.llm] secret = \"{name}\"` is not set; set it with `skillhost secret set {name}`"))?,
        ),
        None => None,
    };
    let name = args.name.clone().expect("clap requires --name with --generate");
    let language = match args.lang {
        Some(Lang::Python) => Language::Python,
        Some(Lang::Scripts) => Language::Scripts,
        Some(Lang::Rust) | None => Language::Rust,
    };
    let generator = llm::Generator::new(llm, api_key);
    let request = llm::Request { name: name.clone(), language, requirements: requirements.to_owned() };
    let bar = app::progress_spinner("generate: starting");
    let reporter = bar.clone();
    let json = args.json;
    let progress: Arc<dyn Fn(llm::Step) + Send + Sync> = Arc::new(move |step| match step {
        llm::Step::Asking { round } => reporter.set_message(format!("round {round}: asking the model")),
        llm::Step::Forging { round, stage } => reporter.set_message(format!("round {round}: {stage}")),
        llm::Step::Rejected { round, reason } if !json => reporter.println(format!("round {round} failed: {reason}")),
        llm::Step::Rejected { .. } => {}
    });
    let outcome = generator.generate(forge, &request, progress).await;
    bar.finish_and_clear();
    let generated = match outcome {
        Ok(generated) => generated,
        Err(error) => {
            if json {
                let failure = match &error {
                    llm::GenerateError::Forge(forge) => forge.to_json(),
                    other => serde_json::json!({ "error": other.to_string() }),
                };
                outln!("{}", serde_json::to_string_pretty(&failure)?);
            } else {
                errln!("error: {error}");
            }
            return Ok(false);
        }
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&generated)?);
    } else {
        print_forged(&generated.forged);
        errln!("written by the model in {} round(s); its source: `skillhost show {name} --code`", generated.rounds);
    }
    if generated.forged.state != skillhost::TrustState::Approved {
        use std::io::IsTerminal;
        if args.yes || std::io::stdin().is_terminal() {
            crate::approve::approve(forge.registry(), &name, args.yes).await?;
        } else {
            errln!("`{name}` waits for a human: review it with `skillhost show {name} --code`, then `skillhost approve {name}`");
        }
    }
    Ok(true)
}

fn print_failure(error: &ForgeError) {
    if let Some(skillhost::forge::Failure::Build(build)) = error.failure() {
        for d in &build.diagnostics {
            errln!("{}", d.rendered.as_deref().unwrap_or(&d.message).trim_end());
        }
        if build.diagnostics.is_empty() && !build.output_tail.is_empty() {
            errln!("{}", build.output_tail.trim_end());
        }
    }
    errln!("error: {error}");
}
