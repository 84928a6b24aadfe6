//! The sandbox's commands: `skillhost setup python` (the managed venv, with a progress
//! bar) and `skillhost test SKILL` (a server skill's tests in a throwaway sandbox).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use skillhost_sandbox::python::{SetupEvent, SetupOptions};

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
    /// The venv's directory [default: SKILLHOST_VENV, else `[sandbox] venv` of the host config, else DATA_DIR/python].
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

/// Run a setup command; `venv` is the host's ([`App::venv_dir`](crate::app::App::venv_dir)).
pub async fn setup(command: SetupCommand, venv: &Path) -> Result<()> {
    let SetupCommand::Python(args) = command;
    let mut options = SetupOptions::new(args.venv.unwrap_or_else(|| venv.to_owned()));
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
    let grant = skillhost::skill::Grant::new(&source.manifest, host.policy(), &key).map_err(skillhost::skill::LoadError::from)?;
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
