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
mod ca;
mod call;
mod caller;
mod cli;
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
mod telemetry;
mod test;
mod toolchain;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::app::App;
use crate::cli::{Cli, Command, Deferred};

fn main() -> ExitCode {
    // What compiles and loads free goes back to the kernel as it is freed, on every thread.
    skillhost::runtime::trim_as_freed();
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
    let serving = matches!(cli.command, Command::Serve(_));
    let app = App::new(cli.skills, cli.data_dir, cli.skills_from, cli.state, serving);
    // Only `serve` exports traces; a config it cannot use fails `serve` itself, below.
    let traces = match app.as_ref().ok().filter(|_| serving).and_then(|app| app.config().ok()) {
        Some(config) => match telemetry::Traces::from_config(&config.telemetry) {
            Ok(traces) => traces,
            Err(e) => return exit::failed(&e, json),
        },
        None => None,
    };
    telemetry::init(cli.verbose, cli.log_format, traces.as_ref());
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            exit::report(&format!("cannot start the async runtime: {e}"), "host", None, exit::HOST, json);
            return ExitCode::from(exit::HOST);
        }
    };
    let result = match app {
        Ok(app) => runtime.block_on(run(&app, cli.command)),
        Err(e) => Err(e),
    };
    // Work left on the blocking pool is work nobody waits for (`serve` gave up on a
    // background compile): leave it, rather than wait for it without bound.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    if let Some(traces) = traces {
        traces.shutdown();
    }
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

/// Run the command.
async fn run(app: &App, command: Command) -> Result<ExitCode> {
    match command {
        Command::List(Deferred(args)) => list::run(app, args).await,
        Command::Show(Deferred(args)) => show::run(app, args).await,
        Command::Approve(Deferred(args)) => approve::run(app, args).await,
        Command::Reject(Deferred(args)) => reject::run(app, args).await,
        Command::Disable(Deferred(args)) => disable::run(app, args).await,
        Command::Enable(Deferred(args)) => enable::run(app, args).await,
        Command::Install(Deferred(args)) => install::run(app, args).await,
        Command::Remove(Deferred(args)) => remove::run(app, args).await,
        Command::Publish(Deferred(args)) => publish::run(app, args).await,
        Command::Key(Deferred(command)) => publish::key(command),
        Command::Sync(Deferred(args)) => sync::sync(app, args).await,
        Command::Outdated(Deferred(args)) => sync::outdated(app, args).await,
        Command::Call(Deferred(args)) => call::run(app, args).await,
        Command::Inspect(Deferred(args)) => inspect::run(app, args).await,
        Command::Build(Deferred(args)) => build::run(app, args).await,
        Command::Secret(Deferred(command)) => secret::run(app, command),
        Command::Ca(Deferred(command)) => ca::run(app, command),
        Command::Caller(Deferred(command)) => caller::run(app, command),
        Command::Audit(Deferred(args)) => audit::run(app, args),
        Command::Serve(Deferred(args)) => serve::run(app, args).await,
        Command::McpConfig(Deferred(args)) => clients::run(app, &args),
        Command::Search(Deferred(args)) => search::run(app, args).await,
        Command::Index(Deferred(command)) => index::run(app, command).await,
        Command::Setup(Deferred(args)) => setup::run(app, args).await,
        Command::Test(Deferred(args)) => test::run(app, args).await,
        Command::Run(Deferred(args)) => run::run(app, args).await,
        Command::Policy(Deferred(args)) => policy::run(app, args).await,
        Command::Forge(Deferred(args)) => forge::run(app, args).await,
        Command::Doctor(Deferred(args)) => doctor::run(app, args).await,
        Command::Stats(Deferred(args)) => stats::run(app, args).await,
        Command::Rollback(Deferred(args)) => rollback::run(app, args).await,
        Command::New(Deferred(args)) => new::run(args),
    }
}
