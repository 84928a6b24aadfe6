//! Skill knowledge for agents: the SKILL.md instructions
//! of each skill, disclosed progressively. The [`directory`] (the "L1" level: names and
//! one-line descriptions within a token budget) goes into the MCP `instructions` and the
//! `skills_directory` prompt; `skill_list` and `skill_search` give names and
//! descriptions, `skill_get` the instructions within a token budget with what the skill
//! requires and its frontmatter, and `read_skill_resource` (or `resources/read` of
//! `skill://NAME/PATH`) one file of the skill's folder. `resources/list` lists each
//! skill's SKILL.md and the files of its `references/`, `scripts/` and `assets/`
//! folders ([`listed_resources`]); scripts are listed and readable, never run from here.
//!
//! A skill that is not approved is known by name, state and tools' names only: its
//! description is host text saying how it gets approved, and its instructions, files and
//! frontmatter are withheld (`read_skill_resource` and `resources/read` refuse, naming
//! the command that approves it) until a human approved that version. A skill's own
//! text is what a prompt injection would be written in.
//!
//! Token budgets are estimated at 4 bytes per token (a common approximation for English
//! text), so a budget of N tokens is N × 4 bytes of UTF-8.
//!
//! Resources are served from the files the registry read and hashed when it loaded the
//! skill ([`Loaded::files`](skillhost_registry::Loaded::files)), never from the live
//! folder: an agent reads the bytes a human approved, and nothing on disk (a `..`, a link
//! planted in the folder, a file rewritten since) is consulted. The path must be a plain
//! relative one all the same, so a refusal says why.

use std::path::{Component, Path};

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use skillhost_registry::{Entry, INSTRUCTIONS_RUNTIME, Registry, TrustState, withheld_description};

use crate::tools::public_name;

/// Bytes per token when estimating a budget (a common approximation for English text).
const BYTES_PER_TOKEN: usize = 4;
/// Largest resource file returned.
pub const MAX_RESOURCE_BYTES: u64 = 256 * 1024;
/// Most resource paths listed per skill in `skill_get` and `resources/list`.
const MAX_LISTED_RESOURCES: usize = 64;
/// Most files in a skill's Skills extension manifest ([`served_files`]), SKILL.md
/// included: what one `skills/list` entry makes the host hash and send is bounded.
pub const MAX_MANIFEST_FILES: usize = 256;
/// The file holding a skill's instructions.
pub const SKILL_MD: &str = "SKILL.md";
/// The folders of the Agent Skills layout whose files `resources/list` shows.
const RESOURCE_FOLDERS: [&str; 3] = ["references/", "scripts/", "assets/"];
/// The directory's default budget, in tokens (used for the MCP `instructions`).
pub const DIRECTORY_BUDGET: usize = 600;
/// The smallest directory budget accepted, in tokens: room for the header and the
/// "more skills" line.
pub const MIN_DIRECTORY_BUDGET: usize = 40;
/// The largest directory budget accepted, in tokens.
pub const MAX_DIRECTORY_BUDGET: usize = 20_000;
/// Longest description in the directory, in bytes.
const DIRECTORY_DESCRIPTION_MAX: usize = 200;
/// Shortest description worth showing, in bytes: below it, names only.
const DIRECTORY_DESCRIPTION_MIN: usize = 20;
/// Description length when not every skill fits, in bytes.
const DIRECTORY_DESCRIPTION_CUT: usize = 60;
/// The directory's first line.
const DIRECTORY_HEADER: &str = "Skills (read one with skill_get; find others with skill_search):\n";

/// Why a knowledge request failed. Shown to the agent as a tool error.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// No such skill (or it is disabled).
    #[error("no skill named `{0}`; call skill_list or skill_search to see the skills")]
    UnknownSkill(String),
    /// The path is not a plain relative path inside the folder.
    #[error(
        "skill `{skill}`: refused `{path}`: {reason}; give a path relative to the skill folder, as listed by skill_get (or the manifest of skills/get)"
    )]
    Refused {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// The skill is not approved: its files are withheld.
    #[error("{}", withheld_description(skill, *state))]
    NotApproved {
        /// The skill.
        skill: String,
        /// Its state.
        state: TrustState,
    },
    /// The skill has no SKILL.md, so the Skills extension does not serve it.
    #[error(
        "skill `{0}` has no SKILL.md instructions, so it is not served as an Agent Skill; call its tools (tool_search) or read it with skill_get"
    )]
    NoInstructions(String),
    /// The file could not be read.
    #[error("skill `{skill}`: cannot read `{path}`: {reason}")]
    Read {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// What failed.
        reason: String,
    },
}

impl KnowledgeError {
    /// What went wrong, as a stable word (see [`crate::failure`]).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            KnowledgeError::UnknownSkill(_) => "unknown_skill",
            KnowledgeError::Refused { .. } => "refused_path",
            KnowledgeError::NotApproved { .. } => "not_approved",
            KnowledgeError::NoInstructions(_) => "no_instructions",
            KnowledgeError::Read { .. } => "read_failed",
        }
    }

    /// What to do next.
    pub(crate) fn fix(&self) -> Option<String> {
        match self {
            KnowledgeError::UnknownSkill(_) => Some("call skill_list or skill_search to see the skills".into()),
            KnowledgeError::Refused { .. } => Some("give a path relative to the skill folder, as listed by skill_get".into()),
            KnowledgeError::NotApproved { skill, state } => Some(state.fix(skill)),
            KnowledgeError::NoInstructions(_) => Some("call its tools (tool_search) or read it with skill_get".into()),
            KnowledgeError::Read { .. } => None,
        }
    }
}

/// One line of `skill_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SkillSummary {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// `approved`, `pending_review`, ...
    #[schemars(with = "String")]
    pub state: TrustState,
    /// `wasm`, `bwrap`, or `instructions`.
    pub runtime: &'static str,
    /// How many tools it has.
    pub tools: usize,
    /// Whether it carries SKILL.md instructions (read them with skill_get).
    pub has_instructions: bool,
    /// How often its calls failed lately, when often: fix it with skill_update if it is
    /// yours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
}

/// What `skill_get` tells of one skill.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SkillKnowledge {
    /// Its name.
    pub name: String,
    /// What it is for (host text until a human approved it).
    pub description: String,
    /// Its SKILL.md without the frontmatter, cut to the budget; `null` when it has none or
    /// is not approved.
    pub instructions: Option<String>,
    /// Whether `instructions` was cut.
    pub truncated: bool,
    /// What using it requires.
    pub requires: Requirements,
    /// The files `read_skill_resource` can open (none until it is approved).
    pub resources: Vec<String>,
    /// Its Agent Skills frontmatter's other fields, when it has a SKILL.md frontmatter.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub frontmatter: Option<FrontmatterFields>,
    /// The skill pack it comes from, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack: Option<PackInfo>,
    /// How to read the rest, when `instructions` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<String>,
}

/// What using a skill requires ([`SkillKnowledge::requires`]).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Requirements {
    /// Its tools' MCP names (names only until it is approved).
    pub tools: Vec<String>,
    /// Its approval state and what it means for a call.
    pub approval: String,
    /// The capabilities it holds, one line each; shown once it is approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
}

/// An Agent Skills frontmatter's fields besides name and description.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FrontmatterFields {
    /// `license`.
    pub license: Option<String>,
    /// `compatibility`.
    pub compatibility: Option<String>,
    /// `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`.
    pub allowed_tools: Vec<String>,
}

/// The skill pack a skill comes from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PackInfo {
    /// The pack's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The skill's name in the pack.
    pub seed_name: String,
}

/// The skills an agent may learn about: loaded and not disabled, by name.
pub(crate) fn skills(registry: &Registry, scope: &crate::access::Scope) -> Vec<std::sync::Arc<Entry>> {
    let mut entries: Vec<_> =
        registry.catalog().into_iter().filter(|e| e.loaded.is_some() && e.state != TrustState::Disabled && scope.sees_skill(e)).collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The skill's description as agents see it: its own once approved, host text before.
pub fn description(entry: &Entry) -> String {
    match (&entry.loaded, entry.state) {
        (Some(loaded), TrustState::Approved) => loaded.description.clone(),
        (_, state) => withheld_description(entry.name.as_str(), state),
    }
}

/// The `skill_list` line of `entry` (which must be loaded).
pub fn summary(entry: &Entry) -> Option<SkillSummary> {
    let loaded = entry.loaded.as_ref()?;
    Some(SkillSummary {
        name: entry.name.to_string(),
        description: description(entry),
        state: entry.state,
        runtime: loaded.runtime,
        tools: loaded.tools.len(),
        has_instructions: loaded.instructions.is_some(),
        failing: None,
    })
}

/// The text `skill_search` matches: description, keywords, example queries, and the
/// start of SKILL.md.
pub fn search_text(entry: &Entry) -> String {
    let Some(loaded) = entry.loaded.as_ref().filter(|_| entry.state == TrustState::Approved) else {
        return description(entry);
    };
    let mut text = loaded.description.clone();
    if let Some(manifest) = &loaded.manifest {
        for word in manifest.search.keywords.iter().chain(&manifest.search.example_queries) {
            text.push(' ');
            text.push_str(word);
        }
    }
    for tool in &loaded.tools {
        text.push(' ');
        text.push_str(&tool.name);
    }
    if let Some(md) = &loaded.instructions {
        text.push(' ');
        text.push_str(truncate(body(md), 4096).0);
    }
    text
}

/// `skill_get` for one skill: its instructions cut to `budget_tokens`, and what using it
/// requires.
pub fn get(registry: &Registry, name: &str, budget_tokens: usize) -> Result<SkillKnowledge, KnowledgeError> {
    let entry = known(registry, name)?;
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(name.to_owned()))?;
    let tools: Vec<String> = if loaded.runtime == INSTRUCTIONS_RUNTIME {
        Vec::new()
    } else {
        loaded.tools.iter().filter_map(|t| public_name(&entry.name, &t.name)).collect()
    };
    if entry.state != TrustState::Approved {
        // Names and host text only: what it wrote waits for a human's approval.
        let (state, name) = (entry.state.as_str(), &entry.name);
        let approval = if tools.is_empty() {
            format!("{state}: its instructions are shown once the user approves it (`skillhost show {name}`, `skillhost approve {name}`)")
        } else {
            format!(
                "{state}: the first call asks the user to approve it (or the user runs `skillhost show {name}` and `skillhost approve {name}`)"
            )
        };
        return Ok(SkillKnowledge {
            name: entry.name.to_string(),
            description: description(&entry),
            instructions: None,
            truncated: false,
            requires: Requirements { tools, approval, capabilities: None },
            resources: Vec::new(),
            frontmatter: None,
            pack: None,
            more: None,
        });
    }
    let (instructions, truncated) = match &loaded.instructions {
        Some(md) => {
            let (text, cut) = truncate(body(md), budget_tokens * BYTES_PER_TOKEN);
            (Some(text.to_owned()), cut)
        }
        None => (None, false),
    };
    Ok(SkillKnowledge {
        name: entry.name.to_string(),
        description: loaded.description.clone(),
        instructions,
        truncated,
        requires: Requirements {
            tools,
            approval: "approved: its tools can be called".to_owned(),
            capabilities: Some(loaded.requests.clone()),
        },
        resources: resources(&entry),
        frontmatter: loaded.frontmatter.as_ref().map(|f| FrontmatterFields {
            license: f.license.clone(),
            compatibility: f.compatibility.clone(),
            metadata: f.metadata.clone(),
            allowed_tools: f.allowed_tools.clone(),
        }),
        pack: loaded.pack.as_ref().map(|p| PackInfo { name: p.name.clone(), version: p.version.clone(), seed_name: p.seed_name.clone() }),
        more: truncated.then(|| {
            format!(
                "the instructions were cut to about {budget_tokens} tokens; call skill_get with a larger max_tokens, or read_skill_resource {{\"skill\": \"{}\", \"path\": \"SKILL.md\"}}",
                entry.name
            )
        }),
    })
}

/// One file of a skill as text: `SKILL.md` (also when embedded in a `.wasm`), or any
/// UTF-8 file in the skill's folder.
pub fn read_resource(registry: &Registry, skill: &str, path: &str) -> Result<String, KnowledgeError> {
    let bytes = read_resource_bytes(registry, skill, path)?;
    String::from_utf8(bytes).map_err(|_| KnowledgeError::Read {
        skill: skill.to_owned(),
        path: path.to_owned(),
        reason: "not UTF-8 text (binary files are served as resources: read skill://SKILL/PATH)".to_owned(),
    })
}

/// One file of a skill, as bytes: the same checks as [`read_resource`].
pub fn read_resource_bytes(registry: &Registry, skill: &str, path: &str) -> Result<Vec<u8>, KnowledgeError> {
    let entry = known(registry, skill)?;
    Ok(served(&entry, path)?.to_vec())
}

/// The bytes `resources/read` and `read_skill_resource` serve for `path` of `entry`: only
/// once a human approved it, only a plain relative path, only a file the registry read
/// and hashed when it loaded the skill (`SKILL.md` also from a single `.wasm` or a
/// pack), within [`MAX_RESOURCE_BYTES`] (but `SKILL.md`). The one place that decides
/// what a skill's files are to an agent: reads and the Skills extension's manifests
/// ([`served_files`]) both go through it.
pub fn served<'a>(entry: &'a Entry, path: &str) -> Result<&'a [u8], KnowledgeError> {
    let skill = entry.name.as_str();
    if entry.state != TrustState::Approved {
        return Err(KnowledgeError::NotApproved { skill: skill.to_owned(), state: entry.state });
    }
    let refuse = |reason| KnowledgeError::Refused { skill: skill.to_owned(), path: path.to_owned(), reason };
    let relative = Path::new(path);
    if path.is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(refuse("only plain relative paths inside the skill folder are allowed (no `/`, `..` or `.`)"));
    }
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(skill.to_owned()))?;
    if path == SKILL_MD {
        // The folder's own bytes, as hashed; else a single `.wasm`'s embedded SKILL.md
        // or a pack skill's rendered one. Never over a limit: the registry capped it.
        if let Some(md) = loaded.files.get(SKILL_MD).map(Vec::as_slice).or(loaded.instructions.as_ref().map(String::as_bytes)) {
            return Ok(md);
        }
    }
    if loaded.files.is_empty() && !loaded.origin.is_dir() {
        return Err(refuse("this skill is a single .wasm file; only SKILL.md can be read"));
    }
    let Some(bytes) = loaded.files.get(path) else {
        let is_folder = loaded.files.keys().any(|file| file.strip_prefix(path).is_some_and(|rest| rest.starts_with('/')));
        return Err(refuse(if is_folder { "not a regular file" } else { "no such file in the skill folder" }));
    };
    if bytes.len() as u64 > MAX_RESOURCE_BYTES {
        return Err(KnowledgeError::Read {
            skill: skill.to_owned(),
            path: path.to_owned(),
            reason: format!("{} bytes is over the {MAX_RESOURCE_BYTES}-byte limit for resources", bytes.len()),
        });
    }
    Ok(bytes)
}

/// Every file of `entry` as [`served`] serves it, for a Skills extension manifest:
/// `SKILL.md` first, then the others in path order, at most [`MAX_MANIFEST_FILES`]; the
/// files left out (over a limit), each with why. Refused as [`served`] refuses a skill
/// not approved, and for a skill without SKILL.md.
pub fn served_files(entry: &Entry) -> Result<ServedFiles<'_>, KnowledgeError> {
    let skill = entry.name.as_str();
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(skill.to_owned()))?;
    if entry.state != TrustState::Approved {
        return Err(KnowledgeError::NotApproved { skill: skill.to_owned(), state: entry.state });
    }
    if loaded.instructions.is_none() {
        return Err(KnowledgeError::NoInstructions(skill.to_owned()));
    }
    let mut files = vec![(SKILL_MD, served(entry, SKILL_MD)?)];
    let mut withheld = Vec::new();
    for path in loaded.files.keys().map(String::as_str).filter(|p| *p != SKILL_MD) {
        if files.len() >= MAX_MANIFEST_FILES {
            withheld.push((path, format!("more than {MAX_MANIFEST_FILES} files in the skill")));
            continue;
        }
        match served(entry, path) {
            Ok(bytes) => files.push((path, bytes)),
            Err(e) => withheld.push((path, e.to_string())),
        }
    }
    Ok(ServedFiles { files, withheld })
}

/// What [`served_files`] found: the files served, and those left out with why.
#[derive(Debug)]
pub struct ServedFiles<'a> {
    /// Path relative to the skill folder, and the bytes served.
    pub files: Vec<(&'a str, &'a [u8])>,
    /// Path, and why it is not served.
    pub withheld: Vec<(&'a str, String)>,
}

/// What `resources/list` shows of a skill: `SKILL.md`, then the files under
/// `references/`, `scripts/` and `assets/` (sorted, at most 64); nothing until it is
/// approved.
pub fn listed_resources(entry: &Entry) -> Vec<String> {
    if entry.state != TrustState::Approved {
        return Vec::new();
    }
    let mut listed: Vec<String> = entry.has_instructions().then(|| "SKILL.md".to_owned()).into_iter().collect();
    listed.extend(resources(entry).into_iter().filter(|p| RESOURCE_FOLDERS.iter().any(|f| p.starts_with(f))));
    listed.truncate(MAX_LISTED_RESOURCES);
    listed
}

/// The MIME type a resource is served with, by its extension (`application/octet-stream`
/// when unknown).
pub fn mime_type(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "text" => "text/plain",
        "py" => "text/x-python",
        "sh" | "bash" => "text/x-shellscript",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "rs" => "text/x-rust",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

/// The L1 skill directory: one line per approved skill, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directory {
    /// The text, at most the budget (× 4 bytes) long.
    pub text: String,
    /// Skills listed.
    pub listed: usize,
    /// Approved skills in all.
    pub total: usize,
}

/// The directory of the approved skills within `budget_tokens` (clamped to
/// [`MIN_DIRECTORY_BUDGET`]..=[`MAX_DIRECTORY_BUDGET`]): `- name: description` lines in
/// name order, each description on one line, cut at a word to an equal share of the
/// budget left after the names (at most 200 bytes; under 20, names only). When even
/// the names do not all fit: as many lines as fit, with descriptions cut to 60 bytes,
/// and `(N more skills: call skill_search)`.
pub fn directory(registry: &Registry, budget_tokens: usize) -> Directory {
    directory_for(registry, &crate::access::Scope::local(), budget_tokens)
}

/// [`directory`] of the skills `scope`'s caller may see.
pub(crate) fn directory_for(registry: &Registry, scope: &crate::access::Scope, budget_tokens: usize) -> Directory {
    let skills: Vec<(String, String)> = skills(registry, scope)
        .into_iter()
        .filter(|e| e.state == TrustState::Approved)
        .filter_map(|e| Some((e.name.to_string(), e.loaded.as_ref()?.description.clone())))
        .collect();
    render_directory(&skills, budget_tokens)
}

fn render_directory(skills: &[(String, String)], budget_tokens: usize) -> Directory {
    let budget = budget_tokens.clamp(MIN_DIRECTORY_BUDGET, MAX_DIRECTORY_BUDGET) * BYTES_PER_TOKEN;
    let total = skills.len();
    if total == 0 {
        return Directory { text: String::new(), listed: 0, total };
    }
    let line = |name: &str, description: &str, cap: usize| {
        let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
        let cut = cut_at_word(&one_line, cap);
        if cut.is_empty() { format!("- {name}\n") } else { format!("- {name}: {cut}\n") }
    };
    let names: usize = DIRECTORY_HEADER.len() + skills.iter().map(|(n, _)| line(n, "", 0).len()).sum::<usize>();
    if names <= budget {
        // Each line grows by at most `": "` and its cap.
        let share = ((budget - names) / total).min(DIRECTORY_DESCRIPTION_MAX + 2);
        let cap = if share >= DIRECTORY_DESCRIPTION_MIN + 2 { share - 2 } else { 0 };
        let lines: String = skills.iter().map(|(n, d)| line(n, d, cap)).collect();
        return Directory { text: format!("{DIRECTORY_HEADER}{lines}"), listed: total, total };
    }
    // Not all fit: as many as do, then the count of the others.
    let more = |n: usize| format!("({n} more skills: call skill_search)\n");
    let mut text = DIRECTORY_HEADER.to_owned();
    let mut listed = 0;
    for (name, description) in skills {
        let next = line(name, description, DIRECTORY_DESCRIPTION_CUT);
        if text.len() + next.len() + more(total - listed - 1).len() > budget {
            break;
        }
        text.push_str(&next);
        listed += 1;
    }
    if text.len() + more(total - listed).len() > budget {
        text.clear();
    }
    text.push_str(&more(total - listed));
    Directory { text, listed, total }
}

/// `text` cut to at most `max` bytes at a word boundary, with `...` when cut.
fn cut_at_word(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    if max < 4 {
        return String::new();
    }
    let mut end = max - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind(' ').filter(|&i| i > 0).unwrap_or(end);
    format!("{}...", text[..end].trim_end_matches([',', ';', ':', '.', ' ']))
}

/// The loaded, not disabled skill `name`.
pub fn known(registry: &Registry, name: &str) -> Result<std::sync::Arc<Entry>, KnowledgeError> {
    registry
        .entry(name)
        .ok()
        .filter(|e| e.loaded.is_some() && e.state != TrustState::Disabled)
        .ok_or_else(|| KnowledgeError::UnknownSkill(name.to_owned()))
}

/// Readable files of a skill, relative, sorted: a folder's files as they were hashed
/// (hidden files and build output were never read), or a single `.wasm`'s SKILL.md.
fn resources(entry: &Entry) -> Vec<String> {
    let Some(loaded) = &entry.loaded else { return Vec::new() };
    if loaded.files.is_empty() {
        return loaded.instructions.iter().map(|_| "SKILL.md".to_owned()).collect();
    }
    loaded.files.keys().take(MAX_LISTED_RESOURCES).cloned().collect()
}

/// SKILL.md without its YAML frontmatter.
fn body(md: &str) -> &str {
    let Some(rest) = md.strip_prefix("---\n") else { return md };
    match rest.find("\n---\n") {
        Some(end) => rest[end + 5..].trim_start_matches('\n'),
        None => md,
    }
}

/// `text` cut to at most `max` bytes at a line (or char) boundary; whether it was cut.
fn truncate(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end].rfind('\n').filter(|&i| i > end / 2).unwrap_or(end);
    (&text[..cut], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_is_stripped_and_text_cut_at_lines() {
        assert_eq!(body("---\nname: x\n---\n\n# Title\nbody"), "# Title\nbody");
        assert_eq!(body("# No frontmatter"), "# No frontmatter");
        let text = "line one\nline two\nline three";
        assert_eq!(truncate(text, 100), (text, false));
        assert_eq!(truncate(text, 20), ("line one\nline two", true));
        assert_eq!(truncate("ééé", 3), ("é", true));
    }

    fn synthetic(n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| {
                let description = format!("Skill number {i} does a useful, specific thing with files, URLs and data; use it when asked to do that thing, or related things, again and again.");
                (format!("skill-{i:03}"), description)
            })
            .collect()
    }

    #[test]
    fn the_directory_holds_its_budget_with_200_skills() {
        let skills = synthetic(200);
        for budget in [MIN_DIRECTORY_BUDGET, 100, 500, 1000, 2500, 5000, 8000, MAX_DIRECTORY_BUDGET] {
            let directory = render_directory(&skills, budget);
            assert!(directory.text.len() <= budget * BYTES_PER_TOKEN, "budget {budget}: {} bytes", directory.text.len());
            assert_eq!(directory, render_directory(&skills, budget), "deterministic");
            assert_eq!(directory.total, 200);
            let lines: Vec<&str> = directory.text.lines().filter(|l| l.starts_with("- ")).collect();
            assert_eq!(lines.len(), directory.listed, "budget {budget}");
            if directory.listed < 200 {
                let more = format!("({} more skills: call skill_search)", 200 - directory.listed);
                assert!(directory.text.ends_with(&format!("{more}\n")), "budget {budget}: {}", directory.text);
            }
            // Names in order, from the first.
            for (i, line) in lines.iter().enumerate() {
                assert!(line.starts_with(&format!("- skill-{i:03}")), "{line}");
            }
        }
        assert_eq!(render_directory(&skills, 1000).listed, 200, "1000 tokens hold 200 names with short descriptions");
        assert!(render_directory(&skills, 500).listed < 200);
        let all = render_directory(&skills, MAX_DIRECTORY_BUDGET);
        assert!(all.text.contains("- skill-000: Skill number 0 does a useful, specific thing with files, URLs and data; use it when asked to do that thing, or related things, again and again.\n"), "full descriptions when they fit");
        let tight = render_directory(&skills, 3000);
        assert_eq!(tight.listed, 200);
        assert!(tight.text.contains("- skill-000: Skill number 0 does a useful, specific...\n"), "cut at a word: {}", &tight.text[..300]);
        let cut = render_directory(&skills, 500);
        assert!(cut.text.contains("- skill-000: Skill number 0 does a useful, specific thing with files...\n"), "{}", cut.text);
        assert_eq!(render_directory(&[], 500).text, "", "no skills, no directory");
    }

    #[test]
    fn descriptions_are_cut_at_words() {
        assert_eq!(cut_at_word("short", 10), "short");
        assert_eq!(cut_at_word("one two three four", 12), "one two...");
        assert_eq!(cut_at_word("abcdefghijklmnop", 8), "abcde...");
        assert_eq!(cut_at_word("éééééé", 6), "é...");
        assert_eq!(cut_at_word("anything", 0), "");
    }
}
