//! The sandbox's commands: `skillhost setup python` (the managed venv, with a progress
//! bar), the hidden `skillhost __shim` (the first process of a networked sandbox), and
//! the sandbox configuration every command's host uses.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use skillhost::BwrapConfig;
use skillhost_sandbox::python::{SetupEvent, SetupOptions};
use skillhost_sandbox::shim;

/// `skillhost setup ...`
#[derive(Subcommand)]
pub enum SetupCommand {
    /// Create or update the managed Python venv that Python skills run with
    #[command(after_help = "Installs mcp, fastmcp and the packages Python skills may import
(httpx, beautifulsoup4, lxml, pyyaml, toml, pandas, Pillow, pytest) into one venv, and
stamps it with a hash of the requirements: running it again is a no-op until they change.
An existing venv (e.g. made by hand) is reused and topped up.

Examples:
  skillhost setup python
  skillhost setup python --with mcp-server-time
  skillhost setup python --venv target/python      the venv the tests use")]
    Python(PythonArgs),
}

/// `skillhost setup python` options.
#[derive(Args, Default)]
pub struct PythonArgs {
    /// The venv's directory [default: SKILLHOST_VENV, else DATA_DIR/python].
    #[arg(long, value_name = "DIR")]
    venv: Option<PathBuf>,
    /// Another package to install (repeatable), e.g. a third-party MCP server.
    #[arg(long = "with", value_name = "PACKAGE")]
    with: Vec<String>,
    /// The Python that creates the venv [default: python3; for a root host
    /// /usr/bin/python3, which the sandbox's unprivileged uid can reach, when it has venv].
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
    /// Reinstall even when the venv is up to date.
    #[arg(long)]
    force: bool,
}

/// The venv the host runs Python skills with: `SKILLHOST_VENV`, else `DATA_DIR/python`.
pub fn venv_dir(data_dir: &Path) -> PathBuf {
    std::env::var_os("SKILLHOST_VENV").map_or_else(|| data_dir.join("python"), PathBuf::from)
}

/// The sandbox configuration of every command: work dir and venv in the data dir, this
/// binary as the egress shim, the isolation layers the host config's `[sandbox]
/// allow_weaker` lets server skills run without.
pub fn config(data_dir: &Path) -> BwrapConfig {
    let mut config = BwrapConfig::new(data_dir.join("sandbox"));
    config.venv = Some(venv_dir(data_dir));
    config.allow_weaker = crate::forge::sandbox_allow_weaker(data_dir);
    // `approve` reads the section again and stops on an error rather than install from
    // the defaults instead of the sources a human named.
    config.packages = crate::forge::package_sources(data_dir)
        .inspect_err(|e| tracing::warn!("no `[packages]` from the host config: {e:#}"))
        .unwrap_or_default();
    if let Ok(exe) = std::env::current_exe() {
        config.init = Some(vec![exe.clone().into_os_string(), skillhost_sandbox::run::init::SUBCOMMAND.into()]);
        config.shim = Some(vec![exe.into_os_string(), shim::SUBCOMMAND.into()]);
    }
    config
}

/// Run a setup command.
pub async fn setup(command: SetupCommand, data_dir: &Path) -> Result<()> {
    let SetupCommand::Python(args) = command;
    let mut options = SetupOptions::new(args.venv.unwrap_or_else(|| venv_dir(data_dir)));
    options.extra = args.with;
    options.python = args.python.unwrap_or_else(default_python);
    options.force = args.force;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg:40!} [{bar:30}] {pos}/{len} [{elapsed}]")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let venv = skillhost_sandbox::python::setup(&options, |event| match event {
        SetupEvent::UpToDate => bar.set_message("up to date"),
        SetupEvent::Creating => bar.set_message("creating the venv"),
        SetupEvent::Installing { done, total, line } => {
            bar.set_length(total);
            bar.set_position(done);
            bar.set_message(line);
        }
        _ => {}
    })
    .await
    .context("setting up the managed Python")?;
    bar.finish_and_clear();
    errln!("python venv ready: {} (Python from {})", venv.dir.display(), venv.prefix.display());
    Ok(())
}

/// The Python a venv is made from by default. A root host runs sandboxes as an
/// unprivileged uid, which must reach the venv's base Python: the system's, not one under
/// root's home (pyenv's `/root/.pyenv` is not searchable by others).
fn default_python() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let system = Path::new("/usr/bin/python3");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let usable = || {
        std::process::Command::new(system)
            .args(["-c", "import ensurepip, venv"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if root && usable() { system.to_owned() } else { PathBuf::from("python3") }
}

/// The arguments of the hidden `__shim`, handed to the shim's own parser.
#[derive(Args)]
pub struct ShimArgs {
    /// `[--socket PATH [--port PORT]] -- COMMAND [ARG...]`
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// `skillhost __shim ARGS`: run the egress shim as this process's only work.
pub fn run_shim(args: ShimArgs) -> ExitCode {
    match shim::ShimArgs::parse_from(args.args) {
        Ok(args) => shim::run(args),
        Err(e) => {
            errln!("skillhost-shim: {e}");
            ExitCode::from(shim::EXIT_SHIM_FAILED)
        }
    }
}

/// The arguments of the hidden `__run`: `-- COMMAND [ARG...]`.
#[derive(Args)]
pub struct RunInitArgs {
    /// `-- COMMAND [ARG...]`
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// `skillhost __run -- COMMAND ARGS`: a run's init, inside its jail.
pub fn run_init(args: RunInitArgs) -> ExitCode {
    skillhost_sandbox::run::init::main(args.args)
}

/// `skillhost test SKILL`: the skill's tests in a throwaway sandbox, then its handshake.
pub async fn test(host: &skillhost::Host, skill: &str, skills_dir: &Path, limit: std::time::Duration, json: bool) -> Result<bool> {
    let dir = if Path::new(skill).is_dir() { PathBuf::from(skill) } else { skills_dir.join(skill) };
    let runtime = host.sandbox().map_err(|e| anyhow::anyhow!("no sandbox runtime: {e}"))?;
    let source =
        skillhost_package::read_source(&dir, &Default::default()).with_context(|| format!("cannot read the skill at {}", dir.display()))?;
    anyhow::ensure!(
        source.manifest.server.is_some(),
        "{} is not a `[server]` skill folder; `skillhost test` runs Python and other server skills",
        dir.display()
    );
    let key = skillhost::DirectSkill::data_key(&source.manifest.name);
    let grant = skillhost::Grant::new(&source.manifest, host.policy(), &key).map_err(skillhost::LoadError::from)?;
    let report = runtime.test_skill(&source, grant, limit).await;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(run) = &report.tests {
            outln!("$ {}", run.command);
            outln!("{}", run.output.trim_end());
        } else {
            outln!("no test_server.py: only the handshake is checked");
        }
        if !report.tools.is_empty() {
            outln!("tools: {}", report.tools.join(", "));
        }
        match &report.error {
            None => outln!("PASS {}", report.skill),
            Some(error) => outln!("FAIL {}: {error}", report.skill),
        }
    }
    Ok(report.passed)
}
