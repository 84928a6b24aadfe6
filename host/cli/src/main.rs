//! The `skillhost` command: create, build, inspect, list and call skills.
//!
//! Exit codes: 0 success; 1 the tool reported an error (invalid input, failure, denial,
//! unknown tool); 2 bad command line; 3 a hard limit stopped the call (time, memory,
//! output); 4 the skill could not be loaded or the host failed.

#![allow(clippy::print_stdout, reason = "a command-line tool prints its results")]

mod build;
mod new;
mod output;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use skillhost::{CallContext, Host, HostError, LoadedSkill};

/// Run agent skills as sandboxed WebAssembly components.
///
/// A skill is a WebAssembly component that holds only what it was granted: the
/// directories its skill.toml asks for inside its own data dir, and hard limits on
/// time, memory and output. Skills live in a skills directory (./skills by default),
/// as `NAME.wasm` files or as folders with skill.toml and skill.wasm.
#[derive(Parser)]
#[command(name = "skillhost", version, propagate_version = true, max_term_width = 100)]
#[command(after_help = "Examples:
  skillhost new word-tools            create a skill crate that builds out of the box
  skillhost build word-tools          compile it into word-tools/skill.wasm
  skillhost list                      list the skills in ./skills and their tools
  skillhost call text-tools word_count --input '{\"text\": \"hello world\"}'")]
struct Cli {
    /// Directory of installed skills.
    #[arg(long, global = true, env = "SKILLHOST_SKILLS", default_value = "skills", value_name = "DIR")]
    skills: PathBuf,

    /// Where skills' data dirs and the compiled cache live
    /// [default: the platform data dir, e.g. ~/.local/share/skillhost].
    #[arg(long, global = true, env = "SKILLHOST_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Log more (-v: debug, -vv: trace). Skill log lines are shown at info and above.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the skills in the skills directory with their tools
    #[command(after_help = "Examples:
  skillhost list
  skillhost list --json | jq '.[].tools[].name'
  skillhost --skills ~/my-skills list")]
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// Call one tool of a skill; its JSON output goes to stdout
    #[command(after_help = "SKILL is a skill name from the skills directory, or a path to a .wasm file or
skill folder. Exit codes: 0 ok, 1 tool error, 3 limit hit, 4 load or host error.

Examples:
  skillhost call text-tools word_count --input '{\"text\": \"one two three\"}'
  echo '{\"file\": \"sales.csv\"}' | skillhost call csv-summary summarize --input -
  skillhost call ./my-skill/skill.wasm hello")]
    Call {
        /// Skill name, or path to a .wasm file or skill folder.
        skill: String,
        /// Tool name.
        tool: String,
        /// Input as JSON text, or `-` to read it from stdin.
        #[arg(long, short, default_value = "{}", value_name = "JSON|-")]
        input: String,
        /// Stop the call after this long, if shorter than the skill's own limit (e.g. 500ms, 2s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<std::time::Duration>,
    },

    /// Show a skill's manifest, grant and tools with their schemas
    #[command(after_help = "Examples:
  skillhost inspect skills/text-tools/skill.wasm
  skillhost inspect skills/csv-summary --json")]
    Inspect {
        /// A .wasm file or a skill folder.
        path: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// Compile a skill crate to one self-describing .wasm (manifest embedded)
    #[command(after_help = "Runs `cargo build --release --target wasm32-wasip2` in DIR (adding the target with
rustup when missing), embeds skill.toml and SKILL.md into the component, writes
DIR/skill.wasm and loads it once to check it.

Examples:
  skillhost build                      build the skill in the current directory
  skillhost build skills/csv-summary
  skillhost build my-skill --out ~/skills/my-skill.wasm")]
    Build {
        /// The skill crate (holding Cargo.toml and skill.toml).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write the skill [default: DIR/skill.wasm].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },

    /// Manage the secrets the host adds to skills' requests (skills never see them)
    #[command(subcommand, after_help = "A skill's skill.toml binds a secret to hosts:
  [[secrets]]
  name = \"github\"
  header = \"Authorization\"
  format = \"Bearer {}\"
  hosts = [\"https://api.github.com\"]

Examples:
  skillhost secret set github            prompts for the value (input hidden)
  printf %s \"$TOKEN\" | skillhost secret set github
  skillhost secret list
  skillhost secret rm github")]
    Secret(SecretCommand),

    /// Show the audit log of skills' outbound requests
    #[command(after_help = "Examples:
  skillhost audit
  skillhost audit --skill uptime --since 1h
  skillhost audit --json | jq '.[] | select(.outcome.kind == \"refused\")'")]
    Audit {
        /// Only this skill's requests.
        #[arg(long)]
        skill: Option<String>,
        /// Only requests newer than this (e.g. 30m, 2h, 7d).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        since: Option<std::time::Duration>,
        /// At most this many rows (the newest).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// Create a new skill crate that builds out of the box
    #[command(after_help = "Examples:
  skillhost new weather            creates ./weather with one example tool
  skillhost new weather --dir skills/weather
  skillhost build weather && skillhost call ./weather hello --input '{\"name\": \"Ada\"}'")]
    New {
        /// Skill name: lowercase letters, digits and inner hyphens.
        name: String,
        /// Directory to create [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Path of the skillhost-sdk crate [default: the one this binary was built from].
        #[arg(long, env = "SKILLHOST_SDK", value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SecretCommand {
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

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    skillhost::parse_duration(text)
}

/// Exit codes, as documented on the crate.
mod exit {
    pub const TOOL_ERROR: u8 = 1;
    pub const LIMIT: u8 = 3;
    pub const HOST: u8 = 4;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::HOST);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            let code = match e.downcast_ref::<HostError>() {
                Some(HostError::Call(call)) if call.is_tool_error() => exit::TOOL_ERROR,
                Some(HostError::Call(call)) if call.is_limit() => exit::LIMIT,
                _ => exit::HOST,
            };
            ExitCode::from(code)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn,skill=info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SKILLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let data_dir = match cli.data_dir.clone() {
        Some(dir) => dir,
        None => directories::ProjectDirs::from("dev", "skillhost", "skillhost")
            .context("cannot find a home directory for the data dir; pass --data-dir or set SKILLHOST_DATA_DIR")?
            .data_dir()
            .to_owned(),
    };
    let host = || Host::builder().data_dir(&data_dir).build();
    match cli.command {
        Command::List { json } => {
            let host = host()?;
            let results = load_all(&host, &cli.skills).await?;
            output::list(&results, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { skill, tool, input, timeout } => {
            let host = host()?;
            let input = read_input(&input)?;
            let loaded = find_skill(&host, &cli.skills, &skill).await?;
            let cx = CallContext { timeout, caller: "cli".into(), ..CallContext::default() };
            let out = host.call(loaded.manifest.name.as_str(), &tool, input, cx).await?;
            println!("{}", serde_json::to_string_pretty(&out.value)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { path, json } => {
            let host = host()?;
            let loaded = host.load_path(&path).await?;
            output::inspect(&loaded, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Build { dir, out } => {
            let host = host()?;
            build::build(&host, &dir, out.as_deref()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Secret(command) => {
            let host = host()?;
            secret(host.secrets(), command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { skill, since, limit, json } => {
            let host = host()?;
            let query = skillhost::audit::AuditQuery {
                skill,
                since: since.map(|ago| std::time::SystemTime::now() - ago),
                limit: Some(limit),
            };
            output::audit(&host.audit().query(&query)?, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::New { name, dir, sdk } => {
            new::create(&name, dir, sdk)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn secret(store: &skillhost::secrets::SecretStore, command: SecretCommand) -> Result<()> {
    use std::io::IsTerminal;
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
            eprintln!("secret `{name}` set");
        }
        SecretCommand::List { json } => {
            let names = store.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&names)?);
            } else if names.is_empty() {
                println!("no secrets set; add one with `skillhost secret set NAME`");
            } else {
                names.iter().for_each(|n| println!("{n}"));
            }
        }
        SecretCommand::Rm { name } => {
            store.remove(&name)?;
            eprintln!("secret `{name}` removed");
        }
    }
    Ok(())
}

/// The input JSON: the argument itself, or stdin for `-`.
fn read_input(input: &str) -> Result<serde_json::Value> {
    let text = if input == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the input from stdin")?;
        text
    } else {
        input.to_owned()
    };
    serde_json::from_str(&text).with_context(|| {
        format!("--input is not valid JSON; pass an object such as '{{\"text\": \"hi\"}}' (got {:?})", truncate(&text, 80))
    })
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// Load every skill in `dir`, with a progress bar (a first load compiles each component).
async fn load_all(host: &Host, dir: &Path) -> Result<Vec<(PathBuf, Result<LoadedSkill, HostError>)>> {
    let paths = skillhost::skill_paths(dir)?;
    let bar = indicatif::ProgressBar::new(paths.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} loading {msg}").expect("valid template"));
    let mut results = Vec::with_capacity(paths.len());
    for path in paths {
        bar.set_message(path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        let result = host.load_path(&path).await;
        results.push((path, result));
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(results)
}

/// Load the skill `skill` names: a path, or a name in the skills directory.
async fn find_skill(host: &Host, skills_dir: &Path, skill: &str) -> Result<LoadedSkill> {
    let as_path = Path::new(skill);
    if skill.contains('/') || skill.ends_with(".wasm") || (as_path.exists() && !skills_dir.join(skill).exists()) {
        return Ok(host.load_path(as_path).await?);
    }
    let mut names = Vec::new();
    for path in skillhost::skill_paths(skills_dir)? {
        match skillhost::package::read_source(&path) {
            Ok(source) if source.manifest.name.as_str() == skill => return Ok(host.load_source(source).await?),
            Ok(source) => names.push(source.manifest.name.to_string()),
            Err(e) => tracing::debug!("skipping {}: {e}", path.display()),
        }
    }
    bail!(HostError::UnknownSkill { name: skill.to_owned(), available: names })
}
