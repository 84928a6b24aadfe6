//! The command line: the global options and one `Command` per subcommand, each with its
//! one-line help here and its arguments, long help and examples on its `Args` in the
//! command's own module.

use std::path::PathBuf;

use clap::builder::{Resettable, StyledStr};
use clap::{Parser, Subcommand};

use crate::{
    approve, audit, build, ca, call, caller, clients, config, disable, doctor, enable, forge, index, inspect, install, list, new, policy,
    publish, reject, remove, rollback, run, search, secret, serve, setup, show, stats, sync, test,
};

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
pub struct Cli {
    /// Directory of installed skills; one given here or in SKILLHOST_SKILLS must exist
    /// [default: ./skills, when it exists].
    #[arg(long, global = true, env = "SKILLHOST_SKILLS", value_name = "DIR")]
    pub skills: Option<PathBuf>,

    /// Where skills' data dirs and the compiled cache live [default: the platform data
    /// dir, e.g. ~/.local/share/skillhost; for root /var/lib/skillhost, which the
    /// sandbox's unprivileged uid can reach, unless XDG_DATA_HOME is set].
    #[arg(long, global = true, env = "SKILLHOST_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Also serve other agents' Agent Skills folders, read-only: `claude` adds
    /// ~/.claude/skills and ./.claude/skills, `agents` ~/.agents/skills and
    /// ./.agents/skills (Codex, Amp), `cursor` ~/.cursor/skills and ./.cursor/skills
    /// (their SKILL.md as instructions, their scripts runnable in the jail once approved;
    /// nothing in them is written, no component or skill.toml there is loaded). Also
    /// `skills_from = ["claude", "agents"]` in DATA_DIR/config.toml.
    #[arg(long, global = true, value_name = "AGENT", env = "SKILLHOST_SKILLS_FROM", value_delimiter = ',', value_parser = config::parse_agent)]
    pub skills_from: Vec<skillhost::config::Agent>,

    /// Where trust, the audit log and the statistics live: `sqlite` (files in the data
    /// dir) or `postgres://USER@HOST:PORT/DATABASE`, shared by the replicas of a team
    /// gateway and the CLI a human approves with. Overrides `[state] url` of the config.
    #[arg(long, global = true, env = "SKILLHOST_STATE", hide_env_values = true, value_name = "URL")]
    pub state: Option<skillhost::state::StateUrl>,

    /// Log more (-v: debug, -vv: trace). Skill log lines are shown at info and above.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// How log lines are written to stderr: `text` for a person, `json` (one object a
    /// line) for a log collector.
    #[arg(long, global = true, value_enum, env = "SKILLHOST_LOG_FORMAT", default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List every skill with its layer, runtime, version, trust state and tools
    List(Deferred<list::ListArgs>),

    /// Show one skill: where it comes from, its state, what it asks for, its tools
    Show(Deferred<show::ShowArgs>),

    /// Approve a skill after reviewing what it asks for (humans only)
    Approve(Deferred<approve::ApproveArgs>),

    /// Reject a skill: it stays listed but cannot be called until approved
    Reject(Deferred<reject::RejectArgs>),

    /// Disable a skill, whatever its approval, until `enable`
    Disable(Deferred<disable::DisableArgs>),

    /// Enable a disabled skill (it returns to its earlier trust state)
    Enable(Deferred<enable::EnableArgs>),

    /// Install a skill into the user layer, from a folder, a .wasm, an OCI registry, git
    /// or a well-known index (it waits for approval unless it asks for nothing risky)
    Install(Deferred<install::InstallArgs>),

    /// Publish a skill folder or component to an OCI registry, signed with --sign KEY
    Publish(Deferred<publish::PublishArgs>),

    /// Make a key pair for signing published skills
    #[command(subcommand)]
    Key(Deferred<publish::KeyCommand>),

    /// Install exactly the remote skills skills.lock pins (--update moves the pins)
    Sync(Deferred<sync::SyncArgs>),

    /// List the locked skills whose source moved upstream, changing nothing
    Outdated(Deferred<sync::OutdatedArgs>),

    /// Remove a skill from the user layer
    Remove(Deferred<remove::RemoveArgs>),

    /// Call one tool of a skill; its JSON output goes to stdout
    Call(Deferred<call::CallArgs>),

    /// Run a command of a SKILL.md skill's scripts in the sandbox, as its instructions write it
    Run(Deferred<run::RunArgs>),

    /// Show or change what a skill's scripts may have (network, secrets, data, host paths, limits)
    Policy(Deferred<policy::PolicyArgs>),

    /// Show a skill's manifest, grant and tools with their schemas, and a component's WIT
    Inspect(Deferred<inspect::InspectArgs>),

    /// Compile a skill (Rust, Python or JavaScript) to one self-describing .wasm
    Build(Deferred<build::BuildArgs>),

    /// Manage the secrets the host adds to skills' requests (skills never see them)
    #[command(subcommand, after_help = secret::HELP)]
    Secret(Deferred<secret::SecretCommand>),

    /// Show or rotate the CA sandboxes trust for hosts a secret is bound to
    #[command(subcommand, after_help = ca::HELP)]
    Ca(Deferred<ca::CaCommand>),

    /// Manage the callers that reach `serve --http` with tokens of their own
    #[command(subcommand, after_help = caller::HELP)]
    Caller(Deferred<caller::CallerCommand>),

    /// Show the audit log of skills' outbound requests and runs of their scripts
    Audit(Deferred<audit::AuditArgs>),

    /// Serve every skill to agents over MCP (stdio by default, or streamable HTTP)
    Serve(Deferred<serve::ServeArgs>),

    /// Print (or --write) the MCP config entry that starts `skillhost serve` for Claude Code,
    /// Cursor, VS Code or Zed
    #[command(after_help = clients::HELP)]
    McpConfig(Deferred<clients::McpConfigArgs>),

    /// Find tools (or skills) by what they do, as an agent's tool_search does
    Search(Deferred<search::SearchArgs>),

    /// Inspect or rebuild the search index (DATA_DIR/index)
    #[command(subcommand)]
    Index(Deferred<index::IndexCommand>),

    /// Set up what skills need beyond the host: with no argument everything (the managed
    /// Python for Python server skills, the search model, the toolchains `build` uses for
    /// Python and JavaScript skills), or one of them
    Setup(Deferred<setup::SetupArgs>),

    /// Run a skill's tests: an approved skill's declared [[tests]] with its real grant; a server skill's pytest in a throwaway sandbox, then its MCP handshake
    Test(Deferred<test::TestArgs>),

    /// Build, test and install a skill from its sources, as an agent's skill_create does
    Forge(Deferred<forge::ForgeArgs>),

    /// Check what this machine gives skills: sandbox isolation layers, Python, search model, toolchains
    Doctor(Deferred<doctor::DoctorArgs>),

    /// Show usage statistics: calls, failures and latency per tool, failing skills, missed searches
    Stats(Deferred<stats::StatsArgs>),

    /// Put back the version of a skill that the last install or forge replaced
    Rollback(Deferred<rollback::RollbackArgs>),

    /// Create a new skill (Rust, Python, JavaScript, or a Python MCP server) that works out
    /// of the box
    New(Deferred<new::NewArgs>),
}

/// A subcommand's arguments (or its own subcommands), which clap builds only when that
/// subcommand is the one given ([`clap::Command::defer`]): the arguments, long help and
/// examples of every subcommand were built at each start, most of what parsing took.
/// `skillhost --help` lists the subcommands all the same (their one-line help is here).
pub struct Deferred<T>(pub T);

/// `augment` (what the derive of a subcommand's arguments adds) applied to `cmd`, with
/// the help the subcommand's declaration in [`Command`] gave kept over what `augment`
/// sets: built eagerly, the declaration's came after (the options struct's doc comment is
/// not the subcommand's help).
fn declared_over(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    let (about, long_about) = (cmd.get_about().cloned(), cmd.get_long_about().cloned());
    let (after, after_long) = (cmd.get_after_help().cloned(), cmd.get_after_long_help().cloned());
    let given = |text: Option<StyledStr>| text.map_or(Resettable::Reset, Resettable::Value);
    let mut cmd = augment(cmd).about(given(about)).long_about(given(long_about));
    if after.is_some() {
        cmd = cmd.after_help(given(after));
    }
    if after_long.is_some() {
        cmd = cmd.after_long_help(given(after_long));
    }
    cmd
}

impl<T: clap::Args> clap::Args for Deferred<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| declared_over(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| declared_over(cmd, T::augment_args_for_update))
    }
}

impl<T: Subcommand> Subcommand for Deferred<T> {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| declared_over(cmd, T::augment_subcommands))
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| declared_over(cmd, T::augment_subcommands_for_update))
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Self)
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

/// The format of log lines (`--log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured at a terminal).
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields` (the message and
    /// the event's fields), `span`/`spans` when inside one.
    Json,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Built as a parse builds them, deferred subcommands have their arguments and keep the
    /// one-line help their declaration here gives (not their options struct's doc comment);
    /// and the whole command line passes clap's own checks.
    #[test]
    fn deferred_subcommands_build_whole_with_their_declared_help() {
        let declared: Vec<(String, Option<String>)> =
            Cli::command().get_subcommands().map(|sub| (sub.get_name().to_owned(), sub.get_about().map(ToString::to_string))).collect();
        assert!(declared.len() > 20 && declared.iter().all(|(_, about)| about.is_some()));
        let mut built = Cli::command();
        built.build();
        for (name, about) in &declared {
            let sub = built.find_subcommand(name).unwrap();
            assert_eq!(sub.get_about().map(ToString::to_string), *about, "`{name}`'s help");
        }
        let serve = built.find_subcommand("serve").unwrap();
        assert!(serve.get_arguments().any(|arg| arg.get_id() == "http"), "serve's arguments were not built");
        Cli::command().debug_assert();
    }
}
