//! Runs of a skill's scripts: the third user of the jail, beside server skills and
//! `skillhost test`.
//!
//! [`BwrapRuntime::run`] takes a [`ScriptJob`] (an approved skill's hashed files, the
//! grant of its policy, the command and input files) and runs the command in a jail of
//! its own, as the sandbox's uid, in its cgroup and seccomp filter:
//!
//! - the skill's files at `/skill`, read-only, written from the hashed bytes (never its
//!   live folder); a word of the command naming one of them (`scripts/fill.py`) is
//!   rewritten to its path there, so commands work as a SKILL.md writes them;
//! - a fresh tmpfs workspace at `/workspace` of the policy's size, the working
//!   directory, holding the input files; what the run writes there stays in the jail's
//!   memory and is read back by the run's [init](init) (no link followed) before the
//!   jail is gone, so nothing of the run touches the host's disk;
//! - `/usr` (interpreters, coreutils) and the managed venv read-only, an empty `/tmp`, no
//!   host home, no host environment; the network only through the egress proxy when the
//!   policy allows hosts, with its secrets added by the proxy;
//! - the policy's time, memory (of the whole tree), pids and output limits, and the
//!   workspace's size: a run that reaches one is killed and refused with an error naming
//!   the limit and how to raise it.

mod frames;
pub mod init;
mod packages;

pub use packages::{EnvError, PackagesError, ResolutionError, ToolError};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sha2::Digest;
use skillhost_core::run::{MAX_RUN_FILES, check_relative};
use skillhost_core::{ByteSize, CallContext, RunError, RunFile, RunOutput, ScriptJob, fmt_duration};
use skillhost_jail::profile::{INIT_PATH, SKILL_DIR, WORKSPACE_DIR};
use tokio::io::AsyncWriteExt;

use crate::{BwrapRuntime, Launch, materialise};
use frames::{Exit, Kind};

/// A run that prints more than this many times its output cap, kept or not, is printing
/// without end: it is killed.
const FLOOD_FACTOR: u64 = 8;

/// How a run's stdout or stderr is kept: the first `cap` bytes, and the count.
#[derive(Default)]
struct Capped {
    kept: Vec<u8>,
    total: u64,
}

impl Capped {
    fn push(&mut self, bytes: &[u8], cap: u64) {
        self.total += bytes.len() as u64;
        let room = (cap as usize).saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// What the init reported, read under the run's caps.
#[derive(Default)]
struct Report {
    stdout: Capped,
    stderr: Capped,
    files: Vec<RunFile>,
    skipped: Vec<String>,
    errors: Vec<String>,
    exit: Option<Exit>,
}

impl BwrapRuntime {
    /// Run `job` in a jail of its own (see the module docs). The caller (the registry)
    /// checked that the skill is approved for exactly `job.files` and made `job.grant`
    /// from its policy.
    #[tracing::instrument(name = "sandbox.run", skip_all, fields(skillhost.skill = %job.skill))]
    pub async fn run(&self, job: ScriptJob, cx: CallContext) -> Result<RunOutput, RunError> {
        job.check()?;
        let skill = job.skill.clone();
        let unavailable = |reason: String| RunError::Unavailable { skill: skill.clone(), reason };
        let jail_failed = |reason: String| RunError::Jail { skill: skill.clone(), reason };
        self.sandbox_without().map_err(|e| unavailable(e.to_string()))?;
        let config = &self.inner.config;
        let (init, init_args) = config.init.as_ref().and_then(|i| i.split_first()).ok_or_else(|| {
            unavailable("this host has no run init configured: call `skillhost::helpers::run_if_helper()` first in the program's `main` (or set BwrapConfig::init)".into())
        })?;
        let skill_dir = materialise(&config.work_dir.join("skills"), &skill, &job.files, &|path| is_script(path))
            .map_err(|e| jail_failed(format!("cannot write its files: {e}")))?;
        let launch = Launch {
            runtime: self.inner.clone(),
            skill_dir,
            command: INIT_PATH.into(),
            args: Vec::new(),
            idle_timeout: Duration::ZERO,
            start_timeout: config.start_timeout,
        };
        let grant = job.grant.clone();
        let (mut profile, guards, _calls) = launch.profile_with_calls(&grant, true).map_err(|e| jail_failed(e.to_string()))?;
        if let Some(env) = &job.env {
            let dir = self.package_env(env).ok_or_else(|| {
                unavailable(format!(
                    "the environment of its packages ({env}) is not on this host; `skillhost approve {skill}` installs it again"
                ))
            })?;
            let prefix = self.venv().map(|v| v.prefix.clone()).unwrap_or_else(|| PathBuf::from("/usr"));
            profile.python = Some((dir, prefix));
        }
        if let Some(env) = &job.node_env {
            let dir = self.package_env(env).ok_or_else(|| {
                unavailable(format!(
                    "the environment of its node packages ({env}) is not on this host; `skillhost approve {skill}` installs it again"
                ))
            })?;
            profile.node_modules = Some(dir.join("node_modules"));
        }
        profile.workspace = Some(job.workspace);
        if self.inner.jail.isolation().cgroups.is_some() {
            // The jail's own cgroup binds first (RLIMIT_NPROC counts every process of the
            // sandbox's uid, other jails' too), so that a run past it is told apart.
            profile.limits.processes = config.max_processes.saturating_mul(2);
        }
        profile.init = Some(PathBuf::from(init));
        profile.env.push(("SKILL_DIR".into(), SKILL_DIR.into()));
        // `python scripts/x.py` whose script imports `scripts.y`, as public skills write:
        // the skill's root (read-only, what was approved) is on the import path; the
        // workspace never is (`-m` runs under `-I`, see `rewrite`).
        profile.env.push(("PYTHONPATH".into(), SKILL_DIR.into()));
        let mut args: Vec<OsString> = init_args.to_vec();
        args.push("--".into());
        args.extend(rewrite(&job.skill, &job.command, &job.files).into_iter().map(OsString::from));
        let jailed = self.inner.command(&profile, &grant, INIT_PATH.as_ref(), &args).map_err(|e| jail_failed(e.to_string()))?;
        let (mut command, confinement) = (jailed.command, jailed.confinement);
        command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let started = Instant::now();
        let mut child = command.spawn().map_err(|e| jail_failed(format!("cannot start the jail: {e}")))?;
        let _running = crate::server::Running::start();
        drop(profile);
        self.inner.started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);

        let mut stdin = child.stdin.take().ok_or_else(|| jail_failed("no stdin".into()))?;
        let mut stdout = child.stdout.take().ok_or_else(|| jail_failed("no stdout".into()))?;
        let stderr = child.stderr.take().ok_or_else(|| jail_failed("no stderr".into()))?;
        let inputs = job.inputs.clone();
        let feed = async move {
            let mut buf = Vec::new();
            for input in &inputs {
                frames::write(&mut buf, Kind::File, input.path.as_bytes())?;
                if input.executable {
                    frames::write(&mut buf, Kind::Executable, &[])?;
                }
                frames::write_chunked(&mut buf, Kind::Data, &input.bytes)?;
            }
            stdin.write_all(&buf).await?;
            stdin.shutdown().await
        };
        let diagnostics = tokio::spawn(read_capped(stderr, 16 << 10));

        let timeout = cx.timeout.map_or(grant.limits.timeout, |t| t.min(grant.limits.timeout));
        let caps = Caps { output: grant.limits.output, files: job.workspace.saturating_add(1 << 20) };
        let read = async {
            let (fed, report) = tokio::join!(feed, read_report(&mut stdout, &caps));
            if let Err(e) = fed {
                tracing::debug!(skill = %skill, "the run's init stopped reading its inputs: {e}");
            }
            report
        };
        let outcome = tokio::select! {
            report = tokio::time::timeout(timeout, read) => report,
            () = cx.cancel.cancelled() => {
                kill(&mut child, &confinement).await;
                return Err(RunError::Cancelled { skill });
            }
        };
        let report = match outcome {
            Err(_) => {
                kill(&mut child, &confinement).await;
                return Err(RunError::Limit {
                    skill: skill.clone(),
                    what: format!("it ran longer than its timeout of {}", fmt_duration(timeout)),
                    fix: format!("raise it with `skillhost policy {skill} --timeout 5m` (then approve again), or make the script faster"),
                });
            }
            Ok(Err(limit)) => {
                kill(&mut child, &confinement).await;
                return Err(limit.into_error(&skill, &caps));
            }
            Ok(Ok(report)) => report,
        };
        let _ = child.wait().await;
        let duration = started.elapsed();
        let oom = confinement.cgroup.as_ref().map_or(0, |c| c.oom_kills());
        let pids = confinement.cgroup.as_ref().map_or(0, |c| c.pids_max_hits());
        drop(confinement);
        drop(guards);
        let diagnostics = diagnostics.await.unwrap_or_default();
        if oom > 0 {
            return Err(RunError::Limit {
                skill: skill.clone(),
                what: format!("it used more than its memory limit of {} (the whole process tree)", ByteSize(grant.limits.memory)),
                fix: format!("raise it with `skillhost policy {skill} --memory 1GiB` (then approve again)"),
            });
        }
        if pids > 0 {
            return Err(RunError::Limit {
                skill: skill.clone(),
                what: format!("it tried to start more than {} processes and threads", config.max_processes),
                fix: "a script should not fork without bound; the limit is the host's `[limits]` processes".into(),
            });
        }
        let Some(exit) = report.exit else {
            let why = if diagnostics.is_empty() {
                "it ended without a report".to_owned()
            } else {
                String::from_utf8_lossy(&diagnostics).trim().to_owned()
            };
            return Err(jail_failed(format!("the run's init failed: {why}")));
        };
        if let Some(error) = report.errors.first() {
            return Err(RunError::Refused { skill: skill.clone(), reason: skillhost_core::text::quote(error, 400) });
        }
        if exit.size > 0 && exit.used + WORKSPACE_SLACK >= exit.size {
            return Err(RunError::Limit {
                skill: skill.clone(),
                what: format!("it filled its workspace of {} (files written to {WORKSPACE_DIR})", ByteSize(exit.size)),
                fix: format!("raise it with `skillhost policy {skill} --workspace 256MiB` (then approve again), or write less"),
            });
        }
        let (files, unchanged_inputs) = apart_from_inputs(report.files, &job.inputs);
        Ok(RunOutput {
            exit_code: exit.code,
            signal: exit.signal,
            stdout_bytes: report.stdout.total,
            stderr_bytes: report.stderr.total,
            stdout: report.stdout.kept,
            stderr: report.stderr.kept,
            output_cap: grant.limits.output,
            files,
            unchanged_inputs,
            skipped: report.skipped,
            workspace: (exit.used, exit.size),
            duration,
        })
    }
}

/// The files a run wrote or changed, and the paths of the inputs it left as they came
/// (the same bytes and mode).
fn apart_from_inputs(files: Vec<RunFile>, inputs: &[skillhost_core::RunInput]) -> (Vec<RunFile>, Vec<String>) {
    let sent: std::collections::HashMap<&str, (&[u8], bool)> =
        inputs.iter().map(|i| (i.path.as_str(), (i.bytes.as_slice(), i.executable))).collect();
    let (unchanged, files): (Vec<RunFile>, Vec<RunFile>) = files
        .into_iter()
        .partition(|f| sent.get(f.path.as_str()).is_some_and(|(bytes, exec)| *bytes == f.bytes.as_slice() && *exec == f.executable));
    (files, unchanged.into_iter().map(|f| f.path).collect())
}

/// How close to its size a workspace counts as full (a tmpfs rounds to pages).
const WORKSPACE_SLACK: u64 = 64 << 10;

/// Whether a skill's file is made executable at `/skill` (under `scripts/`).
fn is_script(path: &str) -> bool {
    path.starts_with("scripts/") || !skillhost_core::run::scripts_of(&BTreeMap::from([(path.to_owned(), Vec::new())])).is_empty()
}

/// How `python -I -c` runs `python -m MODULE` in the jail, the module's word after it:
/// found from the skill's root (as public skills write `python -m scripts.x`, run from
/// there), never from the working directory, the workspace an agent fills with input
/// files of its own. `-I` keeps the workspace off `sys.path` from the start: the stub's
/// own imports (and what importlib imports for them, `warnings`) come from the
/// interpreter's library, not a `warnings.py` given as an input.
fn run_module() -> String {
    format!(
        "import runpy, sys\nmodule = sys.argv.pop(1)\nsys.path[:] = ['{SKILL_DIR}'] + [p for p in sys.path if p not in ('', '.')]\nrunpy.run_module(module, run_name='__main__', alter_sys=True)\n"
    )
}

/// The command as the jail runs it: each word naming one of the skill's files or
/// folders (`scripts/fill.py`, `./scripts/fill.py`, `references`) becomes its path under
/// `/skill`; every other word is left as written (relative paths are the workspace's).
/// `python -m MODULE` of a script of the skill becomes `python -I -c` [`run_module`] `MODULE`.
fn rewrite(skill: &skillhost_core::SkillName, command: &[String], files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    use skillhost_core::run::{StartForm, StartedScript, command_starts_script};
    let mut words = rewrite_paths(command, files);
    if let Ok(StartedScript { form: StartForm::Module { at }, .. }) = command_starts_script(skill, command, files) {
        words.splice(at - 1..at, ["-I".to_owned(), "-c".to_owned(), run_module()]);
    }
    words
}

fn rewrite_paths(command: &[String], files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    command
        .iter()
        .map(|word| {
            let relative = word.strip_prefix("./").unwrap_or(word).trim_end_matches('/');
            let is_file = files.contains_key(relative);
            let is_dir = !relative.is_empty()
                && files.range(format!("{relative}/")..).next().is_some_and(|(p, _)| p.starts_with(&format!("{relative}/")));
            if check_relative(relative).is_ok() && (is_file || is_dir) { format!("{SKILL_DIR}/{relative}") } else { word.clone() }
        })
        .collect()
}

/// The caps a report is read under.
struct Caps {
    output: u64,
    files: u64,
}

/// A report read past a cap.
enum Overrun {
    Flood(u64),
    Files(u64),
    Damaged(String),
}

impl Overrun {
    fn into_error(self, skill: &skillhost_core::SkillName, caps: &Caps) -> RunError {
        match self {
            Overrun::Flood(bytes) => RunError::Limit {
                skill: skill.clone(),
                what: format!(
                    "it printed {} without end, more than {FLOOD_FACTOR} times its output cap of {}",
                    ByteSize(bytes),
                    ByteSize(caps.output)
                ),
                fix: format!(
                    "write large results to files in the workspace, or raise the cap with `skillhost policy {skill} --output 8MiB`"
                ),
            },
            // The init leaves out what its workspace cannot hold (a sparse file): reaching
            // this means a report past what the workspace could hold, not a small one.
            Overrun::Files(bytes) => RunError::Limit {
                skill: skill.clone(),
                what: format!("its report carried more than {} of files, more than its workspace can hold", ByteSize(bytes)),
                fix: "none: a run returns at most its workspace's size in files".into(),
            },
            Overrun::Damaged(reason) => RunError::Jail { skill: skill.clone(), reason: format!("its report is damaged: {reason}") },
        }
    }
}

/// Read the init's frames until `Exit` or the end, under `caps`.
async fn read_report(stdout: &mut tokio::process::ChildStdout, caps: &Caps) -> Result<Report, Overrun> {
    let mut report = Report::default();
    let mut file_bytes = 0u64;
    let mut current: Option<(String, Vec<u8>, bool)> = None;
    let mut discarding = false;
    let finish = |current: &mut Option<(String, Vec<u8>, bool)>, report: &mut Report| {
        if let Some((path, bytes, executable)) = current.take() {
            let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
            report.files.push(RunFile { size: bytes.len() as u64, sha256, executable, path, bytes });
        }
    };
    loop {
        let frame = frames::read_async(stdout).await.map_err(|e| Overrun::Damaged(e.to_string()))?;
        let Some((kind, payload)) = frame else { break };
        match kind {
            Kind::Stdout | Kind::Stderr => {
                let stream = if kind == Kind::Stdout { &mut report.stdout } else { &mut report.stderr };
                stream.push(&payload, caps.output);
                let printed = report.stdout.total + report.stderr.total;
                if printed > caps.output.saturating_mul(FLOOD_FACTOR) {
                    return Err(Overrun::Flood(printed));
                }
            }
            Kind::File => {
                finish(&mut current, &mut report);
                discarding = false;
                // The init skips such a name itself; should one come, that file is left
                // out, not the run.
                let path = String::from_utf8(payload).map_err(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                if let Err(reason) = path.as_deref().map_err(|_| "is not UTF-8").and_then(check_relative) {
                    let shown = path.as_ref().unwrap_or_else(|lossy| lossy);
                    report
                        .skipped
                        .push(skillhost_core::text::quote(&format!("{}: its path {reason}; left out", shown.escape_debug()), 300));
                    discarding = true;
                    continue;
                }
                let path = path.unwrap_or_default();
                if report.files.len() >= MAX_RUN_FILES {
                    return Err(Overrun::Damaged(format!("more than {MAX_RUN_FILES} files")));
                }
                current = Some((path, Vec::new(), false));
            }
            Kind::Data => {
                file_bytes += payload.len() as u64;
                if file_bytes > caps.files {
                    return Err(Overrun::Files(caps.files));
                }
                match &mut current {
                    Some((_, bytes, _)) => bytes.extend_from_slice(&payload),
                    None if discarding => {}
                    None => return Err(Overrun::Damaged("data before a file".into())),
                }
            }
            Kind::Executable => match &mut current {
                Some((_, _, executable)) => *executable = true,
                None if discarding => {}
                None => return Err(Overrun::Damaged("an executable mark before a file".into())),
            },
            Kind::Skipped => {
                finish(&mut current, &mut report);
                discarding = false;
                if report.skipped.len() < 100 {
                    report.skipped.push(skillhost_core::text::quote(&String::from_utf8_lossy(&payload), 300));
                }
            }
            Kind::Error => report.errors.push(String::from_utf8_lossy(&payload).into_owned()),
            Kind::Exit => {
                finish(&mut current, &mut report);
                report.exit = Some(serde_json::from_slice(&payload).map_err(|e| Overrun::Damaged(e.to_string()))?);
                break;
            }
        }
    }
    report.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// Read at most `cap` bytes of `pipe`, draining the rest.
async fn read_capped(mut pipe: impl tokio::io::AsyncRead + Unpin, cap: usize) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// Kill the jail: its first process, then every process of its cgroup.
async fn kill(child: &mut tokio::process::Child, confinement: &skillhost_jail::Confinement) {
    let _ = child.start_kill();
    if let Some(cgroup) = &confinement.cgroup {
        cgroup.kill();
    }
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_naming_the_skills_files_point_into_the_skill() {
        let files: BTreeMap<String, Vec<u8>> =
            [("SKILL.md", ""), ("scripts/fill.py", ""), ("references/x.md", "")].map(|(p, b)| (p.to_owned(), b.as_bytes().to_vec())).into();
        let command: Vec<String> = [
            "python",
            "scripts/fill.py",
            "./references/x.md",
            "references/",
            "in.pdf",
            "out/fill.py",
            "../scripts/fill.py",
            "scripts/none.py",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(
            rewrite_paths(&command, &files),
            [
                "python",
                "/skill/scripts/fill.py",
                "/skill/references/x.md",
                "/skill/references",
                "in.pdf",
                "out/fill.py",
                "../scripts/fill.py",
                "scripts/none.py"
            ]
        );
    }

    #[test]
    fn a_module_of_the_skill_is_found_from_its_root() {
        let files: BTreeMap<String, Vec<u8>> = [("scripts/x.py", "")].map(|(p, b)| (p.to_owned(), b.as_bytes().to_vec())).into();
        let skill = skillhost_core::SkillName::new("tidy").unwrap();
        let words = |command: &[&str]| rewrite(&skill, &command.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>(), &files);
        let code = run_module();
        assert_eq!(
            words(&["python3", "-u", "-m", "scripts.x", "scripts/x.py"]),
            ["python3", "-u", "-I", "-c", &code, "scripts.x", "/skill/scripts/x.py"]
        );
        assert_eq!(words(&["python3", "-m", "evil"]), ["python3", "-m", "evil"], "not the skill's: left for the check to refuse");
    }

    #[test]
    fn output_is_kept_up_to_its_cap_and_counted() {
        let mut capped = Capped::default();
        capped.push(b"hello ", 8);
        capped.push(b"world", 8);
        assert_eq!(capped.kept, b"hello wo");
        assert_eq!(capped.total, 11);
    }
}
