//! Attempts per skill name (three by default), kept in
//! `<forge>/attempts/NAME` so a restart does not reset them. A success clears the count;
//! once every attempt failed, the forge refuses the name until a human resets it
//! (`skillhost forge --reset NAME`): an agent cannot, since no MCP tool does.
//!
//! [`Window`] caps submissions across all names in a time window.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skillhost_core::SkillName;

use crate::error::ForgeError;

pub(crate) struct Attempts {
    dir: PathBuf,
}

impl Attempts {
    pub fn new(forge_dir: &Path) -> Self {
        Self { dir: forge_dir.join("attempts") }
    }

    fn file(&self, name: &SkillName) -> PathBuf {
        self.dir.join(name.as_str())
    }

    /// Failed attempts so far.
    pub fn failed(&self, name: &SkillName) -> u32 {
        std::fs::read_to_string(self.file(name)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    /// Record a failure; returns the attempt it was (1-based).
    pub fn record_failure(&self, name: &SkillName) -> Result<u32, ForgeError> {
        let n = self.failed(name) + 1;
        std::fs::create_dir_all(&self.dir).map_err(|source| ForgeError::Io { what: "cannot record the attempt", source })?;
        std::fs::write(self.file(name), n.to_string()).map_err(|source| ForgeError::Io { what: "cannot record the attempt", source })?;
        Ok(n)
    }

    /// Clear the count (a success, or a human's reset).
    pub fn reset(&self, name: &SkillName) -> Result<(), ForgeError> {
        match std::fs::remove_file(self.file(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ForgeError::Io { what: "cannot reset the attempts", source }),
        }
    }
}

/// Submissions across all names within a sliding window, kept in `<forge>/window` (one
/// Unix time in seconds per line) so a restart does not reset them: the per-name count
/// alone lets an agent that rotates names build without end.
pub(crate) struct Window {
    file: PathBuf,
    lock: parking_lot::Mutex<()>,
}

impl Window {
    pub fn new(forge_dir: &Path) -> Self {
        Self { file: forge_dir.join("window"), lock: parking_lot::Mutex::new(()) }
    }

    /// Count one submission of `name`, or refuse it when `max` were counted in the last
    /// `window`.
    pub fn admit(&self, name: &SkillName, max: u32, window: Duration) -> Result<(), ForgeError> {
        let _held = self.lock.lock();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let since = now.saturating_sub(window.as_secs());
        let mut times: Vec<u64> = std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .filter(|t| *t > since && *t <= now)
            .collect();
        if times.len() >= max as usize {
            let oldest = times.iter().min().copied().unwrap_or(now);
            let wait = (oldest + window.as_secs()).saturating_sub(now).max(1);
            return Err(ForgeError::Limited(format!(
                "skill `{name}`: refused: the forge takes at most {max} submissions per {:?} across all skill names \
                 (ForgeConfig::max_attempts_per_window and attempt_window; defaults 60 per hour), and that many came in; \
                 the next one is taken in {wait} s, or a human raises the cap (`max_attempts_per_window`, `attempt_window` under `[forge]` in DATA_DIR/config.toml)",
                window,
            )));
        }
        times.push(now);
        let text: String = times.iter().map(|t| format!("{t}\n")).collect();
        std::fs::create_dir_all(self.file.parent().unwrap_or(Path::new(".")))
            .and_then(|()| std::fs::write(&self.file, text))
            .map_err(|source| ForgeError::Io { what: "cannot record the submission", source })
    }
}
