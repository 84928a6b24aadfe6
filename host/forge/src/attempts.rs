//! Attempts per skill name (seed 000: three by default), kept in
//! `<forge>/attempts/NAME` so a restart does not reset them. A success clears the count;
//! once every attempt failed, the forge refuses the name until a human resets it
//! (`skillhost forge --reset NAME`): an agent cannot, since no MCP tool does.

use std::path::{Path, PathBuf};

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
