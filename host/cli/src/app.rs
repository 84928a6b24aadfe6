//! What every command shares: the global options resolved once (the absolute data dir,
//! the skills directories, other agents' folders, the host config), how a command opens the host and the
//! registry (all of it, or in the background waiting only for the one skill it is about),
//! and the small terminal helpers (a spinner, a y/N question, a duration argument).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use skillhost::config::{Agent, ConfigError, HostConfig};
use skillhost::{Host, Registry, RegistryConfig};

/// The global options, resolved: what a command's `run` is handed (`--state` is applied
/// to the host config).
pub struct App {
    /// Where skills' data dirs and the compiled cache live; absolute.
    pub data_dir: PathBuf,
    /// The workspace layer ([`skills_dir`]), or why `--skills` is refused: only a command
    /// that opens the registry (or writes a client's config) fails on it.
    workspace: Result<Option<PathBuf>>,
    /// `--skills` as given, or `skills`: where `test` looks for a skill by name.
    pub skills: PathBuf,
    /// `--skills-from`.
    pub skills_from: Vec<Agent>,
    /// Whether the command is `serve` (see [`App::host`]).
    serving: bool,
    /// The host config, read once ([`crate::config`]); only a command that uses it
    /// fails on an error in it.
    config: Result<HostConfig, ConfigError>,
}

impl App {
    /// Resolve the global options; `serving` is whether the command is `serve`.
    pub fn new(
        skills: Option<PathBuf>,
        data_dir: Option<PathBuf>,
        skills_from: Vec<Agent>,
        state: Option<skillhost::state::StateUrl>,
        serving: bool,
    ) -> Result<Self> {
        // Absolute from here on: the sandbox and the forge are handed paths under it, and an
        // MCP client may start skillhost from any directory.
        let data_dir = match data_dir {
            Some(dir) => std::path::absolute(&dir).with_context(|| format!("--data-dir {}: cannot make it absolute", dir.display()))?,
            None => default_data_dir(rustix::process::geteuid().is_root(), std::env::var_os("XDG_DATA_HOME").is_some())?,
        };
        let workspace = skills_dir(skills.as_deref());
        let skills = skills.unwrap_or_else(|| PathBuf::from("skills"));
        let config = crate::config::read(&data_dir).map(|mut config| {
            if let Some(url) = state {
                config.state.url = Some(url);
            }
            config
        });
        Ok(Self { data_dir, workspace, skills, skills_from, serving, config })
    }

    /// The host config, or why it cannot be used.
    pub fn config(&self) -> Result<&HostConfig> {
        self.config.as_ref().map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// The venv Python skills run with ([`crate::config::venv_dir`]).
    pub fn venv_dir(&self) -> PathBuf {
        let config = self.config.as_ref().ok().cloned().unwrap_or_default();
        crate::config::venv_dir(&config, &self.data_dir)
    }

    /// The host over the data dir and the host config.
    pub fn host(&self) -> Result<Host> {
        // Only `serve` runs uncached components on Winch's code first (while Cranelift compiles
        // them in the background): a command that exits after its call would wait for that
        // compile at exit, and only Cranelift's code is kept in the compiled cache. And only
        // `serve` makes the wasm runtime ahead of its first load, beside its start.
        Ok(Host::builder()
            .data_dir(&self.data_dir)
            .config(self.config()?.clone())
            .toolchains(crate::toolchain::root(&self.data_dir))
            .baseline_compile(self.serving)
            .warm_up(self.serving)
            .build()?)
    }

    /// The workspace layer's directory, if there is one; an error when `--skills` (or
    /// SKILLHOST_SKILLS) names something that is not a directory.
    pub fn workspace(&self) -> Result<Option<&Path>> {
        Ok(self.workspace.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?.as_deref())
    }

    /// The registry's layers over `host`'s data dir; `watch` to follow changes in the
    /// skills directories.
    pub fn registry_config(&self, host: &Host, watch: bool) -> Result<RegistryConfig> {
        let mut config = host.registry_config();
        config.workspace = self.workspace()?.map(Path::to_owned);
        let agents: Vec<Agent> = self.skills_from.iter().chain(&self.config()?.skills_from).copied().collect();
        config.external = Agent::existing_folders(&agents, config.workspace.as_deref())?;
        config.watch = watch;
        Ok(config)
    }

    /// The registry with every skill loaded, behind a spinner.
    pub async fn registry(&self, host: &Host) -> Result<Arc<Registry>> {
        let config = self.registry_config(host, false)?;
        let bar = progress_spinner("loading skills (a skill seen for the first time runs once to list its tools)");
        let registry = host.open_registry(config).await;
        bar.finish_and_clear();
        Ok(registry?)
    }

    /// The registry for a command about one skill: only `name` loads (`wait` false: not
    /// even that until the command asks for it, as a call or a run does, or never, for
    /// reject and disable), so no other skill is read, and no other skill's code (a
    /// pending server that never answers, a slow compile) runs or holds up a human's
    /// command.
    pub async fn registry_for(&self, host: &Host, name: &str, wait: bool) -> Result<Arc<Registry>> {
        let registry = self.registry_on_demand(host).await?;
        if wait && registry.loading().iter().any(|n| n.as_str() == name) {
            let bar = progress_spinner(&format!("loading `{name}` (a skill seen for the first time runs once to list its tools)"));
            registry.wait_loaded(name).await;
            bar.finish_and_clear();
        }
        Ok(registry)
    }

    /// The registry with no skill loaded yet: each loads when the command asks for it
    /// ([`FirstLoad::OnDemand`](skillhost::registry::FirstLoad)): an install loads the
    /// skill it installs and no other.
    pub async fn registry_on_demand(&self, host: &Host) -> Result<Arc<Registry>> {
        let mut config = self.registry_config(host, false)?;
        config.first_load = skillhost::registry::FirstLoad::OnDemand;
        Ok(host.open_registry(config).await?)
    }
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

/// A duration argument (`500ms`, `2s`, `7d`), for clap.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    skillhost::skill::parse_duration(text).map_err(|e| e.to_string())
}

/// Whether a `call` or `test` argument names a file or folder rather than a skill.
pub fn is_path(skill: &str) -> bool {
    skill.contains('/') || skill.ends_with(".wasm")
}

/// A spinner on stderr showing `message` and the time spent.
pub fn progress_spinner(message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar.set_message(message.to_owned());
    bar
}

/// Ask a yes/no question on the terminal; no terminal means no.
pub fn confirm(question: &str) -> Result<bool> {
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
