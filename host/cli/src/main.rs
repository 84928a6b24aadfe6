//! The `skillhost` command: create, build, inspect, list and call skills.
//!
//! Exit codes: 0 success; 1 the tool reported an error (invalid input, failure, denial,
//! unknown tool), or `test`/`forge` found failures; 2 bad command line or input (a usage
//! error: what clap refuses, `--input` that is not JSON, a bad name or folder for `new`),
//! or a refusal (kind `refused`: the skill is not approved, disabled or changed since its
//! approval, or a run's command is not one its approval covers); 3 a hard limit stopped
//! the call (time, memory, output); 4 the skill could not be loaded or the host failed.
//!
//! With `--json`, a failing command prints its error to stderr as one JSON object
//! (`{"error": {"message", "kind", "code", "exit_code"}}`); stdout holds only results.
//! All output goes through [`stdio`], so a closed pipe ends the output quietly.

#![warn(clippy::print_stderr, reason = "stderr goes through `stdio`, which never panics on a closed pipe")]

#[macro_use]
mod stdio;

mod app;
mod approve;
mod audit;
mod build;
mod call;
mod clients;
mod config;
mod disable;
mod doctor;
mod enable;
mod exit;
mod forge;
mod index;
mod inspect;
mod install;
mod list;
mod model;
mod new;
mod output;
mod policy;
mod publish;
mod reject;
mod remove;
mod rollback;
mod run;
mod sandbox;
mod sdk;
mod search;
mod secret;
mod serve;
mod setup;
mod show;
mod sources;
mod stats;
mod sync;
mod test;
mod toolchain;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::app::App;

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
  skillhost call text-tools text_stats --input '{\"text\": \"hello world\"}'

Exit codes: 0 ok; 1 a tool reported an error (or `test`/`forge` found failures); 2 bad
command line or input (`--input` that is not JSON, a bad name for `new`), or refused
(not approved, disabled, changed since approval); 3 a limit stopped a call (time, memory,
output); 4 a skill did not load or the host failed.
With --json, a failing command prints its error as one JSON object on stderr.")]
struct Cli {
    /// Directory of installed skills; one given here or in SKILLHOST_SKILLS must exist
    /// [default: ./skills, when it exists].
    #[arg(long, global = true, env = "SKILLHOST_SKILLS", value_name = "DIR")]
    skills: Option<PathBuf>,

    /// Where skills' data dirs and the compiled cache live [default: the platform data
    /// dir, e.g. ~/.local/share/skillhost; for root /var/lib/skillhost, which the
    /// sandbox's unprivileged uid can reach, unless XDG_DATA_HOME is set].
    #[arg(long, global = true, env = "SKILLHOST_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Also serve another agent's Agent Skills folders, read-only: `claude` adds
    /// ~/.claude/skills and ./.claude/skills (their SKILL.md as instructions; nothing in
    /// them runs or is written). Also `skills_from = ["claude"]` in DATA_DIR/config.toml.
    #[arg(long, global = true, value_name = "AGENT", env = "SKILLHOST_SKILLS_FROM", value_delimiter = ',', value_parser = config::parse_agent)]
    skills_from: Vec<skillhost::config::Agent>,

    /// Log more (-v: debug, -vv: trace). Skill log lines are shown at info and above.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every skill with its layer, runtime, version, trust state and tools
    #[command(after_help = "Skills come from layers, highest precedence first: the workspace (--skills,
default ./skills), the user layer (DATA_DIR/user-skills, where `install` puts skills)
and, with --skills-from, other agents' skill folders (the external layer: instructions
only, read-only). A skill that is not approved is listed but cannot be called.

With --directory, print instead what an agent is given up front (the MCP `instructions`
and the `skills_directory` prompt): one `name: description` line per approved skill, in
name order, within a token budget (estimated at 4 bytes per token). Descriptions are
cut at a word to fit; when even the names do not fit, the last line says how many more
skills skill_search can find.

Examples:
  skillhost list
  skillhost list --json | jq '.[] | select(.state != \"approved\") | .name'
  skillhost list --directory --budget 300
  skillhost --skills ~/my-skills list")]
    List(list::ListArgs),

    /// Show one skill: where it comes from, its state, what it asks for, its tools
    #[command(after_help = "Examples:
  skillhost show csv-summary
  skillhost show github --code         review its manifest, SKILL.md and sources
  skillhost show github --json")]
    Show(show::ShowArgs),

    /// Approve a skill after reviewing what it asks for (humans only)
    #[command(after_help = "Prints the skill's requests (files, network, secrets, limits, destructive tools)
and how they differ from the last approval, then asks y/N. The approval is bound to
exactly what was shown: if the skill changes before you answer, nothing is approved.

Examples:
  skillhost approve github
  skillhost approve github --yes       for scripts that already reviewed it")]
    Approve(approve::ApproveArgs),

    /// Reject a skill: it stays listed but cannot be called until approved
    Reject(reject::RejectArgs),

    /// Disable a skill, whatever its approval, until `enable`
    Disable(disable::DisableArgs),

    /// Enable a disabled skill (it returns to its earlier trust state)
    Enable(enable::EnableArgs),

    /// Install a skill into the user layer, from a folder, a .wasm, an OCI registry, git
    /// or a well-known index (it waits for approval unless it asks for nothing risky)
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
    Install(install::InstallArgs),

    /// Publish a skill folder or component to an OCI registry, signed with --sign KEY
    #[command(after_help = "A folder (SKILL.md, skill.toml, scripts, server code) is one tar+gzip layer of
media type application/vnd.skillhost.skill.folder.v1.tar+gzip; a .wasm component uses
the layout wasm-pkg-tools (wkg) use, so wkg can pull it and skillhost installs what wkg
published. --sign stores a cosign-format signature beside it (cosign verify --key reads
it). Prints the pinned address (oci://…@sha256:…).

Examples:
  skillhost key generate --out team              team.key (secret) and team.pub
  skillhost publish skills/csv-report oci://registry.example.com/team/csv-report:1.0 --sign team.key")]
    Publish(publish::PublishArgs),

    /// Make a key pair for signing published skills
    #[command(subcommand)]
    Key(publish::KeyCommand),

    /// Install exactly the remote skills skills.lock pins (--update moves the pins)
    #[command(after_help = "Each locked skill whose installed files are not the locked ones is fetched at
its pinned digest (an OCI digest, a git commit, an index sha256); bytes that do not
give the locked digest and content hash are refused, never installed. Each skill is
installed atomically or not at all; skills the lock does not name are left alone. A
new skill waits for approval as after `install`. --update asks each source what it
names now (a tag, a branch, an index entry), installs that and rewrites the lock.

Examples:
  skillhost sync --lock team/skills.lock --data-dir /srv/agent-data
  skillhost sync --lock team/skills.lock --update --verify team.pub")]
    Sync(sync::SyncArgs),

    /// List the locked skills whose source moved upstream, changing nothing
    #[command(after_help = "Examples:
  skillhost outdated --lock team/skills.lock
  skillhost outdated --lock team/skills.lock --json | jq '.[] | select(.status == \"moved\")'")]
    Outdated(sync::OutdatedArgs),

    /// Remove a skill from the user layer
    Remove(remove::RemoveArgs),

    /// Call one tool of a skill; its JSON output goes to stdout
    #[command(after_help = "SKILL is the name of an approved skill (see `skillhost list`), or a path to a .wasm
file or skill folder, loaded directly for development without the trust store. Code
loaded by its path is not approved: it runs under the probe grant (a fresh scratch
/data, no network, no secrets, at most 10 s) unless you pass --grant, which gives it
what its skill.toml asks for (files in DATA_DIR/skills/.dev/NAME) for this one call.
Exit codes: 0 ok, 1 tool error, 2 usage (a bad --input) or refused (not approved: approve it first), 3 limit
hit, 4 load or host error.

Examples:
  skillhost call text-tools text_stats --input '{\"text\": \"one two three\"}'
  echo '{\"path\": \"sales.csv\"}' | skillhost call csv-summary summarize --input -
  skillhost call ./word-tools/skill.wasm hello --input '{\"name\": \"Ada\"}' --timeout 2s
  skillhost call skills/csv-summary summarize --input '{\"path\": \"sales.csv\"}' --grant")]
    Call(call::CallArgs),

    /// Run a command of a SKILL.md skill's scripts in the sandbox, as its instructions write it
    #[command(after_help = "The skill must be approved (`skillhost show SKILL`, `skillhost approve SKILL`): its
scripts are code. The command runs in a jail as an unprivileged user: the skill's approved
files read-only at /skill (a word naming one of them, like scripts/fill.py, points there),
a fresh workspace as the working directory (--input files are put there; what the run
writes there is returned, and saved with --out), no network, secrets, data or host paths
unless the skill's policy grants them (`skillhost policy SKILL`), its limits on time,
memory, processes, output and workspace size.
Exit codes: the command's own, or 2 refused (not approved, not a command its approval covers,
no scripts), 3 limit hit, 4 host error.

Examples:
  skillhost approve csv-report --yes
  skillhost run csv-report -i examples/sales.csv -- python scripts/report.py sales.csv r.md
  skillhost run csv-report -i examples/sales.csv --out report -- sh scripts/check.sh sales.csv
  skillhost run csv-report -i examples/sales.csv --json -- sh scripts/check.sh sales.csv")]
    Run(run::RunArgs),

    /// Show or change what a skill's scripts may have (network, secrets, data, host paths, limits)
    #[command(after_help = "Without flags it shows the policy. Flags add to it (--reset starts from nothing).
The policy lives in DATA_DIR/policies, never in the skill's folder; a changed policy
changes what the skill asks for, so it waits for `skillhost approve` again.

Examples:
  skillhost policy csv-report
  skillhost policy csv-report --allow https://api.example.com --timeout 2m
  skillhost policy csv-report --allow http://127.0.0.1:8080
  skillhost policy csv-report --secret token=Authorization@http://127.0.0.1:8080
  skillhost policy csv-report --path ./report=reports --data rw
  skillhost policy csv-report --reset")]
    Policy(policy::PolicyArgs),

    /// Show a skill's manifest, grant and tools with their schemas, and a component's WIT
    #[command(after_help = "Any component works: one that does not export skillhost's world is a generic
skill whose exported functions are its tools (`INTERFACE-FUNCTION`, input schema from
the WIT types); inspect lists the functions that cannot be tools (resources, streams…)
and why. A bare .wasm without skill.toml asks for nothing; put it in a folder as
skill.wasm beside a skill.toml to ask for files or network.

Examples:
  skillhost inspect skills/text-tools/skill.wasm
  skillhost inspect word-tools                   a skill folder, built or not
  skillhost inspect skills/csv-summary --json")]
    Inspect(inspect::InspectArgs),

    /// Compile a skill (Rust, Python or JavaScript) to one self-describing .wasm
    #[command(after_help = "The language comes from what DIR holds beside skill.toml:
  Cargo.toml  cargo build --release --target wasm32-wasip2 (adding the target with rustup)
  app.py      componentize-py against the skillhost:skill world (class Guest)
  skill.js    componentize-js against the world (export const guest); without a
              [network] section in skill.toml it is built without wasi:http
componentize-py (PyPI) and componentize-js (npm) are installed into
DATA_DIR/toolchains on first use (see `skillhost setup toolchains`). Then skill.toml
and SKILL.md are embedded into the component, DIR/skill.wasm is written and loaded once
to check it (a Python or JavaScript component takes several seconds to compile the
first time; later loads come from the compiled cache).

Environment:
  SKILLHOST_TOOLCHAINS        where toolchains are installed [default: DATA_DIR/toolchains]
  SKILLHOST_COMPONENTIZE_PY   a componentize-py executable to use instead
  SKILLHOST_COMPONENTIZE_JS   a componentize-js executable to use instead

Examples:
  cd word-tools && skillhost build     build the skill in the current directory
  skillhost build word-tools --out ~/word-tools.wasm
  skillhost new words-py --lang python && skillhost build words-py")]
    Build(build::BuildArgs),

    /// Manage the secrets the host adds to skills' requests (skills never see them)
    #[command(
        subcommand,
        after_help = "A skill's skill.toml binds a secret to hosts:
  [[secrets]]
  name = \"github\"
  header = \"Authorization\"
  format = \"Bearer {}\"
  hosts = [\"https://api.github.com\"]

Examples:
  skillhost secret set github            prompts for the value (input hidden)
  printf %s \"$TOKEN\" | skillhost secret set github
  skillhost secret list
  skillhost secret rm github"
    )]
    Secret(secret::SecretCommand),

    /// Show the audit log of skills' outbound requests and runs of their scripts
    #[command(after_help = "Examples:
  skillhost audit
  skillhost audit --skill uptime --since 1h
  skillhost audit --json | jq '.[] | select(.outcome.kind == \"refused\")'")]
    Audit(audit::AuditArgs),

    /// Serve every skill to agents over MCP (stdio by default, or streamable HTTP)
    #[command(after_help = "Tools are named SKILL__TOOL. Above --deferred-threshold tools, agents find them with
tool_search. A call to a skill awaiting approval asks the user through the client
(MCP elicitation) when the client supports it. Skills dropped into the skills
directory appear at once (notifications/tools/list_changed).

Client configuration (stdio), with absolute paths: `skillhost mcp-config CLIENT` prints the
entry for claude, cursor, vscode or zed (and `claude mcp add ...`); --write merges it in.

Examples:
  skillhost serve                                  stdio, for a local agent
  skillhost serve --http                           on 127.0.0.1:8787, token in DATA_DIR/http-token
  skillhost serve --http 0.0.0.0:8787 --token-file ~/.config/skillhost/token
  SKILLHOST_MCP_TOKEN=... skillhost serve --http")]
    Serve(serve::ServeArgs),

    /// Print (or --write) the MCP config entry that starts `skillhost serve` for Claude Code,
    /// Cursor, VS Code or Zed
    #[command(after_help = clients::HELP)]
    McpConfig(clients::McpConfigArgs),

    /// Find tools (or skills) by what they do, as an agent's tool_search does
    Search(search::SearchArgs),

    /// Inspect or rebuild the search index (DATA_DIR/index)
    #[command(subcommand)]
    Index(index::IndexCommand),

    /// Set up what skills need beyond the host: with no argument everything (the managed
    /// Python for Python server skills, the search model, the toolchains `build` uses for
    /// Python and JavaScript skills), or one of them
    #[command(after_help = "Everything goes into DATA_DIR (python/, model/, toolchains/), where `serve` and every
other command look for it; SKILLHOST_VENV, SKILLHOST_MODEL_DIR and SKILLHOST_TOOLCHAINS
override each location. Running it again is quick: each part is stamped and skipped
while up to date. `skillhost doctor` says what is missing.

Examples:
  skillhost setup                 everything, with progress
  skillhost setup python          the venv only
  skillhost setup model           the search model only")]
    Setup(setup::SetupArgs),

    /// Run a skill's tests: an approved skill's declared [[tests]] with its real grant; a server skill's pytest in a throwaway sandbox, then its MCP handshake
    #[command(after_help = "For an installed skill whose skill.toml declares [[tests]], first runs each case
through the registry with the skill's real grant (network, secrets, data dir): only once
a human approved it. The forge reports such cases as `runs_after_approval` when the skill
asks for network or secrets, which no unapproved code gets.

For a server skill folder, runs `python -m pytest test_server.py` inside a sandbox with
the skill's own profile (no network, no secrets), kills everything after the hard
timeout, then starts the server, completes the MCP handshake and lists its tools. Exit
code 0 when all passed.

Examples:
  skillhost test site-check
  skillhost test skills/site-check --json")]
    Test(test::TestArgs),

    /// Build, test and install a skill from its sources, as an agent's skill_create does
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
    Forge(forge::ForgeArgs),

    /// Check what this machine gives skills: sandbox isolation layers, Python, search model, toolchains
    #[command(after_help = "Lists every isolation layer of the sandbox (bwrap and its version, user
namespaces, the drop from root to an unprivileged uid, a cgroup per server with its
controllers, the seccomp filter), the managed Python venv, the embedding model and the
guest toolchains; for each one that is missing, what to do. A missing layer is not an
error: the host warns once at start and runs with what it has.

Examples:
  skillhost doctor
  skillhost doctor --json | jq '.[] | select(.available | not)'")]
    Doctor(doctor::DoctorArgs),

    /// Show usage statistics: calls, failures and latency per tool, failing skills, missed searches
    #[command(after_help = "Every call through the registry (MCP, `skillhost call NAME`) is counted in
DATA_DIR/stats.db. FAILED counts the skill's own failures (its errors, crashes, its
limits); CALLER ERR the calls the caller got wrong (invalid input, unknown tool, a
request its policy refused, a shorter --timeout, a cancellation). A skill is flagged
when its own failures are more than 30% of its last 20 calls that the caller got right
(with at least 5 calls); agents see the flag in skill_list. Searches that matched no
tool well are listed when 3 or more similar ones missed.

Examples:
  skillhost stats
  skillhost stats --json | jq '.failing'")]
    Stats(stats::StatsArgs),

    /// Put back the version of a skill that the last install or forge replaced
    #[command(after_help = "Swaps the installed version with the kept one (a second rollback rolls forward).
The restored version is approved only if that exact content was approved before.

Examples:
  skillhost rollback word-tools         after a second `skillhost install ./word-tools`")]
    Rollback(rollback::RollbackArgs),

    /// Create a new skill (Rust, Python, JavaScript, or a Python MCP server) that works out
    /// of the box
    #[command(after_help = "Examples:
  skillhost new weather                creates ./weather, a Rust crate with one example tool
  skillhost new weather-py --lang python   app.py with a Guest class (componentize-py)
  skillhost new weather-js --lang js   skill.js exporting guest (componentize-js)
  skillhost new weather-2 --dir skills/weather-2
  skillhost build weather && skillhost call ./weather hello --input '{\"name\": \"Ada\"}'
  skillhost new hello-server --lang python-server && skillhost test ./hello-server")]
    New(new::NewArgs),
}

fn main() -> ExitCode {
    // A sandbox starts this binary again as its egress shim or a run's init.
    if let Some(code) = skillhost::helpers::run_if_helper() {
        return code;
    }
    let json = exit::wants_json();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if json && error.use_stderr() => {
            let message = error.render().to_string();
            let message = message.trim().trim_start_matches("error: ");
            exit::report(message, "usage", None, exit::USAGE, true);
            return ExitCode::from(exit::USAGE);
        }
        // Help and version on stdout (exit 0), usage errors on stderr (exit 2); clap
        // ignores a closed pipe.
        Err(error) => error.exit(),
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            exit::report(&format!("cannot start the async runtime: {e}"), "host", None, exit::HOST, json);
            return ExitCode::from(exit::HOST);
        }
    };
    let result = runtime.block_on(run(cli));
    // Work left on the blocking pool is work nobody waits for (`serve` gave up on a
    // background compile): leave it, rather than wait for it without bound.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    let unwritten = stdio::finish();
    match result {
        Ok(_) if unwritten.is_some() => {
            let why = unwritten.unwrap_or_default();
            exit::report(&format!("cannot write the output: {why}"), "host", None, exit::HOST, json);
            ExitCode::from(exit::HOST)
        }
        Ok(code) => code,
        Err(e) => exit::failed(&e, json),
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn,guest=info",
        1 => "debug",
        _ => "trace",
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("SKILLHOST_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal: an MCP client or a log file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
}

/// Resolve the global options and run the command.
async fn run(cli: Cli) -> Result<ExitCode> {
    let serving = matches!(cli.command, Command::Serve(_));
    let app = &App::new(cli.skills, cli.data_dir, cli.skills_from, serving)?;
    match cli.command {
        Command::List(args) => list::run(app, args).await,
        Command::Show(args) => show::run(app, args).await,
        Command::Approve(args) => approve::run(app, args).await,
        Command::Reject(args) => reject::run(app, args).await,
        Command::Disable(args) => disable::run(app, args).await,
        Command::Enable(args) => enable::run(app, args).await,
        Command::Install(args) => install::run(app, args).await,
        Command::Remove(args) => remove::run(app, args).await,
        Command::Publish(args) => publish::run(app, args).await,
        Command::Key(command) => publish::key(command),
        Command::Sync(args) => sync::sync(app, args).await,
        Command::Outdated(args) => sync::outdated(app, args).await,
        Command::Call(args) => call::run(app, args).await,
        Command::Inspect(args) => inspect::run(app, args).await,
        Command::Build(args) => build::run(app, args).await,
        Command::Secret(command) => secret::run(app, command),
        Command::Audit(args) => audit::run(app, args),
        Command::Serve(args) => serve::run(app, args).await,
        Command::McpConfig(args) => clients::run(app, &args),
        Command::Search(args) => search::run(app, args).await,
        Command::Index(command) => index::run(app, command).await,
        Command::Setup(args) => setup::run(app, args).await,
        Command::Test(args) => test::run(app, args).await,
        Command::Run(args) => run::run(app, args).await,
        Command::Policy(args) => policy::run(app, args).await,
        Command::Forge(args) => forge::run(app, args).await,
        Command::Doctor(args) => doctor::run(app, args),
        Command::Stats(args) => stats::run(app, args).await,
        Command::Rollback(args) => rollback::run(app, args).await,
        Command::New(args) => new::run(app, args),
    }
}
