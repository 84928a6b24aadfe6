//! Exit codes, as documented on the crate, and how a failed command is reported: the
//! kind of failure decides the code, and the error goes to stderr as text or, with
//! `--json`, as one JSON object.

use std::process::ExitCode;

use skillhost::skill::CallFailure;
use skillhost::{CallError, RegistryError};

/// A tool reported an error, or `test`/`forge` found failures.
pub const TOOL_ERROR: u8 = 1;
/// A bad command line or input, or a refusal (kind `refused`: not approved, disabled,
/// changed since its approval, a command its approval does not cover).
pub const USAGE: u8 = 2;
/// A hard limit stopped the call.
pub const LIMIT: u8 = 3;
/// The skill could not be loaded, or the host failed.
pub const HOST: u8 = 4;

/// A mistake in the command line or its input (`--input` that is not JSON, an invalid
/// name for `new`): exit code 2, like the errors clap reports.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error (exit code 2) with `message`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

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
pub fn wants_json() -> bool {
    std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json")
}

/// Print a failed command's error: `error: ...` on stderr, or with `--json` one JSON
/// object on stderr. `kind` is `usage`, `refused`, `tool`, `limit` or `host`; `code` the call
/// error's code (`timeout`, `invalid_input`, ...) when there is one.
pub fn report(message: &str, kind: &str, code: Option<&str>, exit_code: u8, json: bool) {
    if json {
        let error = serde_json::json!({ "error": { "message": message, "kind": kind, "code": code, "exit_code": exit_code } });
        errln!("{error}");
    } else {
        errln!("error: {message}");
    }
}

/// Report a command's error and say which exit code it gets.
pub fn failed(error: &anyhow::Error, json: bool) -> ExitCode {
    let call = call_error(error);
    let run = match error.downcast_ref::<RegistryError>() {
        Some(RegistryError::Run(run)) => Some(run),
        _ => None,
    };
    let (kind, code) = match call {
        _ if error.downcast_ref::<Usage>().is_some() => ("usage", USAGE),
        _ if matches!(run, Some(skillhost::run::RunError::Limit { .. })) => ("limit", LIMIT),
        _ if refused(error) || matches!(run, Some(skillhost::run::RunError::Refused { .. })) => ("refused", USAGE),
        Some(call) if call.is_tool_error() => ("tool", TOOL_ERROR),
        Some(call) if call.is_limit() => ("limit", LIMIT),
        _ => ("host", HOST),
    };
    report(&format!("{error:#}"), kind, call.map(|c| c.code()), code, json);
    ExitCode::from(code)
}

/// Whether `error` is the registry refusing what was asked (a trust state, a skill with
/// nothing to run), not a failure: exit 2, kind `refused`, so a script can tell "approve
/// it first" from "the host broke".
fn refused(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<RegistryError>(), Some(RegistryError::NotCallable { .. } | RegistryError::NotRunnable { .. }))
}

/// Exit code 0 when `passed`, else [`TOOL_ERROR`] (`test` and `forge` found failures).
pub fn passed(passed: bool) -> ExitCode {
    if passed { ExitCode::SUCCESS } else { ExitCode::from(TOOL_ERROR) }
}

/// A call stopped by the `--timeout` given on the command line, shorter than the skill's
/// own limit: said in the command line's terms (exit code 3, like any timeout).
#[derive(Debug)]
pub struct CommandLineTimeout(pub CallError);

impl std::fmt::Display for CommandLineTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let CallError { skill, tool, failure: CallFailure::Timeout { limit, skill_limit: Some(own) } } = &self.0 else {
            return self.0.fmt(f);
        };
        let (limit, own) = (skillhost::skill::fmt_duration(*limit), skillhost::skill::fmt_duration(*own));
        write!(
            f,
            "skill `{skill}` tool `{tool}`: timeout after {limit}, the `--timeout {limit}` given on the command line \
             (the skill's own limit is {own}); pass a longer `--timeout`, up to {own}, if the tool needs longer"
        )
    }
}

impl std::error::Error for CommandLineTimeout {}
