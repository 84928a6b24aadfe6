//! The host config as a command reads it: once, when the global options are resolved
//! (`App::new`), from the file `SKILLHOST_CONFIG` names or else
//! `DATA_DIR/config.toml` ([`skillhost::HostConfig`] is the schema and the checks).
//! Flags and environment variables override it: `--skills-from` adds to `skills_from`,
//! `SKILLHOST_VENV` replaces `[sandbox] venv`.

use std::path::{Path, PathBuf};

use skillhost::config::{Agent, CONFIG_FILE, ConfigError, HostConfig};

/// Where the host config is: `SKILLHOST_CONFIG`, else `DATA_DIR/config.toml`.
pub fn path(data_dir: &Path) -> PathBuf {
    std::env::var_os("SKILLHOST_CONFIG").map(PathBuf::from).unwrap_or_else(|| data_dir.join(CONFIG_FILE))
}

/// The host config of `data_dir`, with `SKILLHOST_VENV` applied.
pub fn read(data_dir: &Path) -> Result<HostConfig, ConfigError> {
    let mut config = HostConfig::read(&path(data_dir))?;
    if let Some(venv) = std::env::var_os("SKILLHOST_VENV") {
        config.sandbox.venv = Some(PathBuf::from(venv));
    }
    Ok(config)
}

/// The venv Python skills run with: `SKILLHOST_VENV`, else `[sandbox] venv`, else
/// `DATA_DIR/python`.
pub fn venv_dir(config: &HostConfig, data_dir: &Path) -> PathBuf {
    config.sandbox.venv.clone().unwrap_or_else(|| data_dir.join("python"))
}

/// `--skills-from AGENT`, for clap.
pub fn parse_agent(text: &str) -> Result<Agent, skillhost::config::UnknownAgent> {
    text.parse()
}
