//! `skillhost run SKILL -- COMMAND ARGS...`: a command of an approved SKILL.md skill's
//! scripts, in the jail, under the policy its approval showed; what it printed, how it
//! ended and the files it wrote (saved with `--out`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use skillhost::{CallContext, run::RunInput, run::RunOutput};
use skillhost_package::OutDir;

use crate::app::{self, App};
use crate::exit;

/// The options of `run`.
#[derive(clap::Args)]
#[command(after_help = "The skill must be approved (`skillhost show SKILL`, `skillhost approve SKILL`): its
scripts are code. The command runs in a jail as an unprivileged user: the skill's approved
files read-only at /skill (a word naming one of them, like scripts/fill.py, points there),
a fresh workspace as the working directory (--input files and folders are put there,
executable bits kept; what the run writes or changes there is returned, and saved with
--out, its executable bits kept; inputs it leaves as they came are only named), no
network, secrets, data or host paths
unless the skill's policy grants them (`skillhost policy SKILL`), its limits on time,
memory, processes, output and workspace size.
Exit codes: the command's own, or 2 refused (not approved, not a command its approval covers,
no scripts), 3 limit hit, 4 host error.

Examples:
  skillhost approve csv-report --yes
  skillhost run csv-report -i examples/sales.csv -- python scripts/report.py sales.csv r.md
  skillhost run csv-report -i examples/sales.csv --out report -- sh scripts/check.sh sales.csv
  skillhost run csv-report -i examples/sales.csv --json -- sh scripts/check.sh sales.csv")]
pub struct RunArgs {
    /// The skill (see `skillhost list`: runtime `scripts`).
    skill: String,
    /// A file or a folder (with every file below it) put into the run's workspace before
    /// it starts: `PATH` (under its own name) or `PATH=NAME`; executable bits kept.
    /// Repeatable.
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
    let mut files = Vec::new();
    for spec in &inputs {
        read_inputs(spec, &mut files)?;
    }
    let inputs = files;
    let host = app.host()?;
    let registry = app.registry_for(&host, &skill, false).await?;
    // Opened once, before the run: the run may plant a link at that path or below it
    // (in a writable host directory it was granted), and its files are written through
    // this descriptor only, never by the path again.
    let out = match &out {
        Some(dir) => Some(OutDir::create(dir).map_err(|e| exit::usage(format!("--out: {e}")))?),
        None => None,
    };
    let cx = CallContext { timeout, caller: "cli".into(), ..CallContext::default() };
    let result = match registry.run(&skill, command, inputs, cx).await {
        Ok(result) => result,
        Err(e) => {
            if let Some(out) = out {
                out.discard_if_unused();
            }
            return Err(e.into());
        }
    };
    let unsaved = out.as_ref().map(|out| save(&result, out)).unwrap_or_default();
    if json {
        outln!("{}", serde_json::to_string_pretty(&json_of(&result))?);
    } else {
        print(&result, out.as_ref());
    }
    if let (Some(out), false) = (&out, unsaved.is_empty()) {
        return Err(anyhow::anyhow!(
            "--out {}: {} of the run's {} files were not saved: {}",
            out.path().display(),
            unsaved.len(),
            result.files.len(),
            unsaved.join("; ")
        ));
    }
    let code = result.exit_code.unwrap_or_else(|| 128 + result.signal.unwrap_or(0));
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// `PATH` or `PATH=NAME`, read now: a file, or a folder and every file below it (under
/// `NAME/`), each keeping its executable bit. A link inside a folder is refused, never
/// followed; so is anything but files and folders. The caps of a run's inputs hold as
/// the files are read, not after.
fn read_inputs(spec: &str, inputs: &mut Vec<RunInput>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (path, name) = match spec.split_once('=') {
        Some((path, name)) => (PathBuf::from(path), name.trim_end_matches('/').to_owned()),
        None => {
            let path = PathBuf::from(spec);
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (path, name)
        }
    };
    let refuse = |what: String| exit::usage(format!("--input {}: {what}", path.display()));
    let meta = std::fs::metadata(&path).map_err(|e| refuse(format!("cannot be read ({e})")))?;
    let mut stack = vec![(path.clone(), name.clone(), meta)];
    let (max_files, max_bytes) = (skillhost::run::MAX_INPUT_FILES, skillhost::run::MAX_INPUT_BYTES);
    while let Some((at, as_name, meta)) = stack.pop() {
        if meta.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(&at)
                .and_then(|entries| entries.collect::<std::io::Result<Vec<_>>>())
                .map_err(|e| refuse(format!("{} cannot be listed ({e})", at.display())))?;
            entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
            for entry in entries {
                let below = entry.path();
                let meta = std::fs::symlink_metadata(&below).map_err(|e| refuse(format!("{} cannot be read ({e})", below.display())))?;
                if meta.file_type().is_symlink() {
                    return Err(refuse(format!("{} is a link, never followed into a run: pass what it points to", below.display())));
                }
                stack.push((below, format!("{as_name}/{}", entry.file_name().to_string_lossy()), meta));
            }
            continue;
        }
        if !meta.is_file() {
            return Err(refuse(format!("{} is neither a file nor a folder", at.display())));
        }
        if inputs.len() >= max_files {
            return Err(refuse(format!("more than the {max_files} input files a run takes")));
        }
        let held: u64 = inputs.iter().map(|i| i.bytes.len() as u64).sum();
        let room = max_bytes.saturating_sub(held);
        let bytes = skillhost_package::read_file(&at, room)
            .map_err(|e| refuse(format!("{e} (a run takes {} of input files in all)", skillhost::skill::ByteSize(max_bytes))))?;
        inputs.push(RunInput { path: as_name, bytes, executable: meta.permissions().mode() & 0o111 != 0 });
    }
    Ok(())
}

/// Write the run's files below `dir`: every file is tried, and the ones that could not
/// be written (a link planted in their way) are named, never written through.
fn save(result: &RunOutput, dir: &OutDir) -> Vec<String> {
    result.files.iter().filter_map(|file| dir.write(&file.path, &file.bytes, file.executable).err()).map(|e| e.to_string()).collect()
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
fn print(result: &RunOutput, out: Option<&OutDir>) {
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
        let saved = out.map(|d| format!(" -> {}", d.path().join(&file.path).display())).unwrap_or_default();
        let executable = if file.executable { ", executable" } else { "" };
        errln!("file {} ({} bytes{executable}, sha256 {}){saved}", file.path, file.size, file.sha256);
    }
    if !result.unchanged_inputs.is_empty() {
        errln!("inputs left as they came (not saved): {}", result.unchanged_inputs.join(", "));
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
