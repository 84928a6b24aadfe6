//! Other agents' Agent Skills folders, served read-only: `--skills-from claude` (or
//! `skills_from = ["claude"]` in the host config) adds `~/.claude/skills` and the
//! project's `./.claude/skills`, those that exist, to the registry as external layers.
//!
//! The registry reads them as it reads any instruction-only skill (a folder's SKILL.md)
//! and nothing else: a skill.toml, a component or a script in such a folder is a
//! resource an agent may read, never code that runs, and skillhost writes nothing there
//! (install, remove, rollback and the forge work on the user layer only). Every other
//! layer shadows them; between the two, the personal folder comes first, as in Claude
//! Code.

use std::path::{Path, PathBuf};

use anyhow::Result;

/// An agent whose skill folders skillhost can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    /// Claude Code: `~/.claude/skills`, then `./.claude/skills`.
    Claude,
}

impl Agent {
    /// The name on the command line and in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
        }
    }

    /// The agent's skill folders, in precedence order, whether or not they exist.
    fn folders(self, home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
        match self {
            Agent::Claude => home.map(|h| h.join(".claude/skills")).into_iter().chain([cwd.join(".claude/skills")]).collect(),
        }
    }
}

/// The folders of the agents given on the command line and in the host config under
/// `data_dir`, those that exist, each once (as a canonical path) and none that is the
/// workspace layer itself.
pub fn folders(given: &[Agent], data_dir: &Path, workspace: Option<&Path>) -> Result<Vec<PathBuf>> {
    let mut agents = given.to_vec();
    agents.extend(crate::forge::skills_from(data_dir));
    if agents.is_empty() {
        return Ok(Vec::new());
    }
    let home = directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_owned());
    let cwd = std::env::current_dir()?;
    let workspace = workspace.and_then(|dir| std::fs::canonicalize(dir).ok());
    let mut found: Vec<PathBuf> = Vec::new();
    for agent in agents {
        for folder in agent.folders(home.as_deref(), &cwd) {
            let Ok(folder) = std::fs::canonicalize(&folder) else { continue };
            if folder.is_dir() && !found.contains(&folder) && workspace.as_ref() != Some(&folder) {
                found.push(folder);
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_folder_before_the_project_one() {
        let folders = Agent::Claude.folders(Some(Path::new("/home/ada")), Path::new("/work/p"));
        assert_eq!(folders, [PathBuf::from("/home/ada/.claude/skills"), PathBuf::from("/work/p/.claude/skills")]);
    }
}
