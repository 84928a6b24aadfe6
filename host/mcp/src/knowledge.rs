//! Skill knowledge for agents (seeds 002 §3.7 and 004): the SKILL.md instructions of
//! each skill, disclosed progressively. `skill_list` and `skill_search` give names and
//! one-line descriptions, `skill_get` the instructions within a token budget with what
//! the skill requires, and `read_skill_resource` one file of the skill's folder.
//!
//! Resource reads never leave the skill's folder: the path must be relative, made of
//! plain components, and no component on the way may be a symlink (checked with
//! `symlink_metadata` on every prefix), so neither `..` nor a link planted inside the
//! folder reaches another file.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use skillhost_registry::{Entry, INSTRUCTIONS_RUNTIME, Registry, TrustState};

use crate::tools::public_name;

/// Bytes per token when estimating a budget (a common approximation for English text).
const BYTES_PER_TOKEN: usize = 4;
/// Largest resource file returned.
pub const MAX_RESOURCE_BYTES: u64 = 256 * 1024;
/// Most resource paths listed per skill in `skill_get`.
const MAX_LISTED_RESOURCES: usize = 64;

/// Why a knowledge request failed. Shown to the agent as a tool error.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    /// No such skill (or it is disabled).
    #[error("no skill named `{0}`; call skill_list or skill_search to see the skills")]
    UnknownSkill(String),
    /// The path is not a plain relative path inside the folder.
    #[error("skill `{skill}`: refused `{path}`: {reason}; give a path relative to the skill folder, as listed by skill_get")]
    Refused {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// Why.
        reason: &'static str,
    },
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

/// One line of `skill_list`.
#[derive(Debug, Serialize)]
pub struct SkillSummary {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// `approved`, `pending_review`, ...
    pub state: TrustState,
    /// `wasm`, `bwrap`, or `instructions`.
    pub runtime: &'static str,
    /// How many tools it has.
    pub tools: usize,
    /// Whether it carries SKILL.md instructions (read them with skill_get).
    pub has_instructions: bool,
}

/// The skills an agent may learn about: loaded and not disabled, by name.
pub fn skills(registry: &Registry) -> Vec<std::sync::Arc<Entry>> {
    let mut entries: Vec<_> = registry
        .catalog()
        .into_iter()
        .filter(|e| e.loaded.is_some() && e.state != TrustState::Disabled)
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The `skill_list` line of `entry` (which must be loaded).
pub fn summary(entry: &Entry) -> Option<SkillSummary> {
    let loaded = entry.loaded.as_ref()?;
    Some(SkillSummary {
        name: entry.name.to_string(),
        description: loaded.description.clone(),
        state: entry.state,
        runtime: loaded.runtime,
        tools: loaded.tools.len(),
        has_instructions: loaded.instructions.is_some(),
    })
}

/// The text `skill_search` matches: description, keywords, example queries, and the
/// start of SKILL.md.
pub fn search_text(entry: &Entry) -> String {
    let Some(loaded) = &entry.loaded else { return String::new() };
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
pub fn get(registry: &Registry, name: &str, budget_tokens: usize) -> Result<Value, KnowledgeError> {
    let entry = known(registry, name)?;
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(name.to_owned()))?;
    let (instructions, truncated) = match &loaded.instructions {
        Some(md) => {
            let (text, cut) = truncate(body(md), budget_tokens * BYTES_PER_TOKEN);
            (Some(text.to_owned()), cut)
        }
        None => (None, false),
    };
    let tools: Vec<String> = loaded.tools.iter().filter_map(|t| public_name(&entry.name, &t.name)).collect();
    let approval = match entry.state {
        TrustState::Approved => "approved: its tools can be called".to_owned(),
        state => format!(
            "{}: the first call asks the user to approve it (or the user runs `skillhost approve {}`)",
            state.as_str(),
            entry.name
        ),
    };
    let mut result = json!({
        "name": entry.name.as_str(),
        "description": loaded.description,
        "instructions": instructions,
        "truncated": truncated,
        "requires": {
            "tools": tools,
            "approval": approval,
            "capabilities": loaded.requests,
        },
        "resources": resources(&entry),
    });
    if loaded.runtime == INSTRUCTIONS_RUNTIME {
        result["requires"]["tools"] = json!([]);
    }
    if truncated {
        result["more"] = json!(format!(
            "the instructions were cut to about {budget_tokens} tokens; call skill_get with a larger max_tokens, or read_skill_resource {{\"skill\": \"{}\", \"path\": \"SKILL.md\"}}",
            entry.name
        ));
    }
    Ok(result)
}

/// One file of a skill: `SKILL.md` (also when embedded in a `.wasm`), or any file in the
/// skill's folder.
pub fn read_resource(registry: &Registry, skill: &str, path: &str) -> Result<String, KnowledgeError> {
    let entry = known(registry, skill)?;
    let refuse = |reason| KnowledgeError::Refused { skill: skill.to_owned(), path: path.to_owned(), reason };
    let relative = Path::new(path);
    if path.is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(refuse("only plain relative paths inside the skill folder are allowed (no `/`, `..` or `.`)"));
    }
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(skill.to_owned()))?;
    if !loaded.origin.is_dir() {
        // A single `.wasm`: only its embedded SKILL.md exists.
        return match (path, &loaded.instructions) {
            ("SKILL.md", Some(md)) => Ok(md.clone()),
            _ => Err(refuse("this skill is a single .wasm file; only SKILL.md can be read")),
        };
    }
    let file = checked_path(&loaded.origin, relative).map_err(refuse)?;
    let read_error = |reason: String| KnowledgeError::Read { skill: skill.to_owned(), path: path.to_owned(), reason };
    let meta = std::fs::symlink_metadata(&file).map_err(|e| read_error(e.to_string()))?;
    if !meta.is_file() {
        return Err(refuse("not a regular file"));
    }
    if meta.len() > MAX_RESOURCE_BYTES {
        return Err(read_error(format!("{} bytes is over the {MAX_RESOURCE_BYTES}-byte limit for resources", meta.len())));
    }
    let bytes = std::fs::read(&file).map_err(|e| read_error(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| read_error("not UTF-8 text".to_owned()))
}

/// `root/relative`, provided no component on the way is a symlink.
fn checked_path(root: &Path, relative: &Path) -> Result<PathBuf, &'static str> {
    let mut path = root.to_owned();
    for component in relative.components() {
        path.push(component);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_symlink() => return Err("the path goes through a symlink"),
            Ok(_) => {}
            Err(_) => return Err("no such file in the skill folder"),
        }
    }
    Ok(path)
}

fn known(registry: &Registry, name: &str) -> Result<std::sync::Arc<Entry>, KnowledgeError> {
    registry
        .entry(name)
        .ok()
        .filter(|e| e.loaded.is_some() && e.state != TrustState::Disabled)
        .ok_or_else(|| KnowledgeError::UnknownSkill(name.to_owned()))
}

/// Readable files of a folder skill, relative, sorted; build output and hidden files left
/// out.
fn resources(entry: &Entry) -> Vec<String> {
    let Some(loaded) = &entry.loaded else { return Vec::new() };
    if !loaded.origin.is_dir() {
        return loaded.instructions.iter().map(|_| "SKILL.md".to_owned()).collect();
    }
    let mut found = Vec::new();
    let mut stack = vec![(loaded.origin.clone(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else { continue };
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || (prefix.is_empty() && (name == "target" || name == "skill.wasm")) {
                continue;
            }
            let Ok(kind) = item.file_type() else { continue };
            let relative = format!("{prefix}{name}");
            if kind.is_dir() {
                stack.push((item.path(), format!("{relative}/")));
            } else if kind.is_file() {
                found.push(relative);
            }
        }
    }
    found.sort();
    found.truncate(MAX_LISTED_RESOURCES);
    found
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

    #[test]
    fn paths_through_symlinks_or_outside_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("references")).unwrap();
        std::fs::write(dir.path().join("references/a.md"), "a").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        std::os::unix::fs::symlink("a.md", dir.path().join("references/link.md")).unwrap();
        assert!(checked_path(dir.path(), Path::new("references/a.md")).is_ok());
        assert_eq!(checked_path(dir.path(), Path::new("etc/passwd")), Err("the path goes through a symlink"));
        assert_eq!(checked_path(dir.path(), Path::new("references/link.md")), Err("the path goes through a symlink"));
        assert_eq!(checked_path(dir.path(), Path::new("missing.md")), Err("no such file in the skill folder"));
    }
}
