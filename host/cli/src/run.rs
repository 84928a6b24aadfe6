//! `skillhost run SKILL -- COMMAND ARGS...`: a command of an approved SKILL.md skill's
//! scripts, in the jail, under the policy its approval showed; what it printed, how it
//! ended and the files it wrote (saved with `--out`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use skillhost::{CallContext, RunInput, RunOutput};

use crate::app::{self, App};
use crate::exit;

/// The options of `run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The skill (see `skillhost list`: runtime `scripts`).
    skill: String,
    /// A file put into the run's workspace before it starts: `PATH` (under its own name)
    /// or `PATH=NAME`. Repeatable.
    #[arg(long = "input", short = 'i', value_name = "PATH[=NAME]")]
    inputs: Vec<String>,
    /// Write the files the run left in its workspace into this directory (which must not
    /// exist yet, or be empty).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Stop the run after this long, if shorter than its policy's limit.
    #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
    timeout: Option<Duration>,
    /// Print the outcome as one JSON object (exit code, stdout, stderr, files with
    /// sizes and SHA-256).
    #[arg(long)]
    json: bool,
    /// The command, as the skill's SKILL.md writes it (`python scripts/fill.py in.pdf out.pdf`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Run the command and report it; the exit code is the command's own (0-255), or this
/// tool's for a refusal or a limit.
pub async fn run(app: &App, args: RunArgs) -> Result<ExitCode> {
    let RunArgs { skill, inputs, out, timeout, json, command } = args;
    let inputs = inputs.iter().map(|spec| read_input(spec)).collect::<Result<Vec<_>>>()?;
    if let Some(dir) = &out
        && dir.exists()
        && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true)
    {
        return Err(exit::usage(format!("--out {}: the directory is not empty; give a new or empty one", dir.display())));
    }
    let host = app.host()?;
    let registry = app.registry_for(&host, &skill, false).await?;
    let cx = CallContext { timeout, caller: "cli".into(), ..CallContext::default() };
    let result = registry.run(&skill, command, inputs, cx).await?;
    if let Some(dir) = &out {
        save(&result, dir)?;
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&json_of(&result))?);
    } else {
        print(&result, out.as_deref());
    }
    let code = result.exit_code.unwrap_or_else(|| 128 + result.signal.unwrap_or(0));
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// `PATH` or `PATH=NAME`, read now.
fn read_input(spec: &str) -> Result<RunInput> {
    let (path, name) = match spec.split_once('=') {
        Some((path, name)) => (PathBuf::from(path), name.to_owned()),
        None => {
            let path = PathBuf::from(spec);
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (path, name)
        }
    };
    let cap = skillhost::run::MAX_INPUT_BYTES;
    let bytes = skillhost_package::read_file(&path, cap).with_context(|| format!("cannot read --input {}", path.display()))?;
    Ok(RunInput { path: name, bytes })
}

/// Write the run's files under `dir`.
fn save(result: &RunOutput, dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for file in &result.files {
        // Paths were checked as plain relative names when they were read back.
        let target = dir.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &file.bytes).with_context(|| format!("cannot write {}", target.display()))?;
    }
    Ok(())
}

/// The outcome as JSON: text streams as text (lossy), files with their sizes and hashes.
fn json_of(result: &RunOutput) -> serde_json::Value {
    let mut value = serde_json::to_value(result).unwrap_or_default();
    value["stdout"] = String::from_utf8_lossy(&result.stdout).into();
    value["stderr"] = String::from_utf8_lossy(&result.stderr).into();
    value
}

/// The outcome for a person: the command's output as it printed it (control characters
/// shown, never sent), then what it left.
fn print(result: &RunOutput, out: Option<&std::path::Path>) {
    out!("{}", String::from_utf8_lossy(&result.stdout));
    if !result.stderr.is_empty() {
        errln!("{}", String::from_utf8_lossy(&result.stderr).trim_end());
    }
    for (name, kept, total) in [("stdout", result.stdout.len(), result.stdout_bytes), ("stderr", result.stderr.len(), result.stderr_bytes)]
    {
        if (kept as u64) < total {
            errln!("({name} cut at {} of {total} bytes: the run's output cap)", kept);
        }
    }
    for file in &result.files {
        let saved = out.map(|d| format!(" -> {}", d.join(&file.path).display())).unwrap_or_default();
        errln!("file {} ({} bytes, sha256 {}){saved}", file.path, file.size, file.sha256);
    }
    for line in &result.skipped {
        errln!("left out: {line}");
    }
    match (result.exit_code, result.signal) {
        (Some(code), _) => errln!("exit {code} after {:?}", result.duration),
        (None, Some(signal)) => errln!("killed by signal {signal} after {:?}", result.duration),
        (None, None) => {}
    }
}
