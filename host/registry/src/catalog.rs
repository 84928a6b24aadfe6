//! What the registry knows about each skill: an [`Entry`] per name (where it was found,
//! what it shadows, its trust state, its last error) and, once it loaded, the [`Loaded`]
//! version that serves calls. Entries are immutable and shared as `Arc`s; a reload or a
//! state change replaces the `Arc`, so a caller holding an entry keeps a consistent view
//! (and a running call keeps its version).

use std::path::PathBuf;
use std::sync::Arc;

use skillhost_core::{DataKey, RiskTier, Skill, SkillManifest, SkillName, ToolSpec};

use crate::config::Layer;
use crate::error::RegistryError;
use crate::pack::PackRef;
use crate::skillmd::Frontmatter;
use crate::trust::{ApprovalChannel, ApprovedBy, TrustState};

/// The `runtime` of an instruction-only skill.
pub const INSTRUCTIONS_RUNTIME: &str = "instructions";

/// One skill name in the catalog.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The skill's name.
    pub name: SkillName,
    /// Whose data and approval it has: the user layer's skill owns its name's; a skill of
    /// the same name in another layer or workspace has its own (see
    /// the registry's identity rule).
    pub identity: DataKey,
    /// The layer of the highest-precedence candidate on disk.
    pub layer: Layer,
    /// Its file or folder.
    pub origin: PathBuf,
    /// Where it stands with the human who approves skills.
    pub state: TrustState,
    /// Lower-precedence candidates of the same name it hides (revealed when it goes).
    pub shadows: Vec<Shadowed>,
    /// The last load error, if the candidate on disk failed to load. When `loaded` is
    /// also set, the last good version keeps serving (possibly from another origin,
    /// until the host restarts).
    pub error: Option<Arc<RegistryError>>,
    /// The version that serves, once one loaded.
    pub loaded: Option<Loaded>,
}

/// A candidate hidden by a higher-precedence one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shadowed {
    /// Its layer.
    pub layer: Layer,
    /// Its file or folder.
    pub origin: PathBuf,
}

/// A successfully loaded version of a skill.
#[derive(Clone)]
pub struct Loaded {
    /// The file or folder it was loaded from.
    pub origin: PathBuf,
    /// The runtime that runs it (`wasm`, `bwrap`), or [`INSTRUCTIONS_RUNTIME`].
    pub runtime: &'static str,
    /// The manifest's version (empty for instruction-only skills).
    pub version: String,
    /// The manifest's (or SKILL.md frontmatter's) description.
    pub description: String,
    /// How much approval it needs.
    pub tier: RiskTier,
    /// Its tools (none for instruction-only skills).
    pub tools: Vec<ToolSpec>,
    /// SHA-256 over its files (see the crate docs for what is excluded).
    pub content_hash: String,
    /// What an approval binds to besides the content hash.
    pub capability_digest: String,
    /// What it asks for, one line each: what an approval request shows.
    pub requests: Vec<String>,
    /// Written by the host, not the skill: the isolation layers its sandbox runs without
    /// because the host's configuration accepted it (e.g. `uid drop (opted out in
    /// config)`); empty when it has every layer the host expects.
    pub sandbox_without: Vec<String>,
    /// Its SKILL.md, when present (for a skill-pack skill, its file rendered as Markdown).
    pub instructions: Option<String>,
    /// Its SKILL.md's frontmatter, checked against the Agent Skills specification.
    pub frontmatter: Option<Frontmatter>,
    /// The skill pack it comes from, for a pack skill.
    pub pack: Option<PackRef>,
    /// Its manifest (none for instruction-only skills).
    pub manifest: Option<SkillManifest>,
    /// Its data dir on the host, which its grant's directories lie in (none for
    /// instruction-only skills).
    pub data_dir: Option<PathBuf>,
    pub(crate) skill: Option<Arc<dyn Skill>>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("origin", &self.origin)
            .field("runtime", &self.runtime)
            .field("version", &self.version)
            .field("tier", &self.tier)
            .field("tools", &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>())
            .field("content_hash", &self.content_hash)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The skill to call, if its state allows it.
    pub(crate) fn callable(&self) -> Result<Arc<dyn Skill>, RegistryError> {
        let name = self.name.to_string();
        let Some(loaded) = &self.loaded else {
            let reason = self.error.as_ref().map_or_else(|| "it has not loaded".to_owned(), |e| e.to_string());
            return Err(RegistryError::NotLoaded { name, reason });
        };
        if self.state != TrustState::Approved {
            return Err(RegistryError::NotCallable { name, state: self.state });
        }
        loaded.skill.clone().ok_or(RegistryError::InstructionsOnly { name })
    }

    /// Whether the skill has SKILL.md instructions.
    pub fn has_instructions(&self) -> bool {
        self.loaded.as_ref().is_some_and(|l| l.instructions.is_some())
    }
}

/// What a human reviews before `approve`: the skill, what it asks for, and how that
/// differs from what was approved last.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ApprovalRequest {
    /// The skill.
    pub name: SkillName,
    /// Its version.
    pub version: String,
    /// Its tier.
    pub tier: RiskTier,
    /// Its state now.
    pub state: TrustState,
    /// Pass back to `approve`: the content the human reviewed.
    pub content_hash: String,
    /// Pass back to `approve`: the requests the human reviewed.
    pub capability_digest: String,
    /// What it asks for, one line each (files with modes, network rules, secrets, limits,
    /// destructive tools).
    pub requests: Vec<String>,
    /// Written by the host: the isolation layers the skill's sandbox runs without, by the
    /// host's configuration ([`Loaded::sandbox_without`]).
    pub sandbox_without: Vec<String>,
    /// Against the last approval: `+ line` asked now but not then, `- line` no longer
    /// asked. Every request is `+` when it was never approved.
    pub diff: Vec<String>,
    /// Whether its files changed since the last approval (false when never approved).
    pub content_changed: bool,
    /// Who gave the last approval, if any.
    pub last_approved_by: Option<ApprovedBy>,
    /// Through which channel (`None` when never approved, or approved before channels
    /// were recorded).
    pub last_approved_via: Option<ApprovalChannel>,
}

/// What agents are told about skill `name` while it is in `state` (not approved), in
/// place of anything the skill wrote (its description, SKILL.md, files, tool
/// descriptions and schemas): its state and the command that changes it. Text written
/// by a skill reaches an agent only once a human approved that exact version.
pub fn withheld_description(name: &str, state: TrustState) -> String {
    format!("skill `{name}` {}: {}; until then skillhost shows nothing the skill wrote", state.describe(), state.fix(name))
}

/// [`withheld_description`] for tool `tool` of skill `name`.
pub fn withheld_tool_description(name: &str, tool: &str, state: TrustState) -> String {
    format!(
        "Tool `{tool}` of {}. Calling it asks the user to approve the skill, where the client can ask.",
        withheld_description(name, state)
    )
}

/// Lines in `new` not in `old` as `+ line`, then lines in `old` not in `new` as `- line`.
pub(crate) fn diff_lines(old: &[String], new: &[String]) -> Vec<String> {
    let added = new.iter().filter(|l| !old.contains(l)).map(|l| format!("+ {l}"));
    let removed = old.iter().filter(|l| !new.contains(l)).map(|l| format!("- {l}"));
    added.chain(removed).collect()
}

/// A change in the catalog, for the MCP front and the search index.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// A name appeared.
    Added(SkillName),
    /// A new version replaced the one serving (or a shadowing candidate changed).
    Updated(SkillName),
    /// A name disappeared from every layer.
    Removed(SkillName),
    /// Its trust state changed.
    StateChanged {
        /// The skill.
        name: SkillName,
        /// The new state.
        state: TrustState,
    },
    /// A candidate failed to load; any last good version keeps serving.
    LoadFailed {
        /// The skill.
        name: SkillName,
        /// The error, one line.
        error: String,
    },
}

impl RegistryEvent {
    /// The skill the event is about.
    pub fn name(&self) -> &SkillName {
        match self {
            RegistryEvent::Added(name) | RegistryEvent::Updated(name) | RegistryEvent::Removed(name) => name,
            RegistryEvent::StateChanged { name, .. } | RegistryEvent::LoadFailed { name, .. } => name,
        }
    }
}
