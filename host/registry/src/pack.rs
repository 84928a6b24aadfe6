//! Skill packs: curated, instruction-only skills shipped
//! as files.
//!
//! **What a pack is.** A folder in a layer (workspace, user or bundled) holding a
//! [`PACK_MANIFEST`] (`pack.toml`: `name`, equal to the folder's name, `version`, and
//! an optional `description`) and no skill.toml or SKILL.md. Each `*.skill.md` (YAML
//! frontmatter and a Markdown body), `*.skill.yaml` or `*.skill.yml` file directly in
//! it is one skill. Other files are ignored.
//!
//! **Names.** Pack formats elsewhere name pack skills `pack.<pack>.<slug>`; skill names here have no
//! `.` or `_`, so a pack skill is `<pack>--<slug>`: the slug is the file name without
//! its suffix, lowercased, each run of other characters one hyphen (`login_basic.skill.md`
//! in pack `core` is `core--login-basic`). The double hyphen cannot occur in a pack name
//! nor in an Agent Skills name, so a pack skill never collides with a SKILL.md skill. A
//! file may say its `name:` (`pack.core.login_basic`, `core--login-basic` or just the
//! slug); it must then give the same name as its file name, so a skill is found from
//! its name without reading every file.
//!
//! **Fields.** Required: `trigger` (a non-empty string) and `steps` (a non-empty list of
//! strings). Optional: `title`, `description`, `task_type`, `tags`, `preconditions`,
//! `failure_modes`. Other fields (`cluster`, `tools`...) are kept in
//! [`PackRef::extra`] and shown to humans, but not rendered into what an agent reads
//! (a tool named in a prompt must go through the host's gates, not around them).
//!
//! Each file is its own catalog entry: an invalid file is listed with its [`RuleError`]
//! and the others load. The content hash is the folder hash (see `snapshot`) over
//! `pack.toml` and the file, so a new pack version reloads its skills.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};
use skillhost_core::SkillName;
use skillhost_package::{ReadError, SizeLimits, nofollow};

use crate::config::Layer;
use crate::error::RegistryError;
use crate::skillmd::{self, Rule, RuleError, slug};

/// The file that makes a folder a skill pack.
pub const PACK_MANIFEST: &str = "pack.toml";
/// Between a pack's name and a skill's slug.
const SEPARATOR: &str = "--";
/// The file suffixes of pack skills.
const SUFFIXES: [&str; 3] = [".skill.md", ".skill.yaml", ".skill.yml"];

/// Where a pack skill comes from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PackRef {
    /// The pack's name.
    pub name: String,
    /// The pack's version (`pack.toml`).
    pub version: String,
    /// The skill's file in the pack folder.
    pub file: String,
    /// Its name in the `pack.<pack>.<slug>` form other pack formats use.
    pub seed_name: String,
    /// `title`, `task_type` and `tags` as written, and fields this host does not use
    /// (rendered as JSON when they are not strings), for humans.
    pub extra: BTreeMap<String, String>,
}

/// `pack.toml`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PackManifest {
    name: String,
    version: String,
    #[serde(default)]
    #[expect(dead_code, reason = "documented and accepted; a pack's skills carry their own descriptions")]
    description: Option<String>,
}

/// Whether `dir` is a skill pack: it has `pack.toml` and is not itself a skill.
pub(crate) fn is_pack(dir: &Path) -> bool {
    let is_file = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) && is_file(PACK_MANIFEST) && !is_file("skill.toml") && !is_file("SKILL.md")
}

/// Whether `path` is a pack skill file: a known suffix, in a pack folder.
pub(crate) fn is_pack_file(path: &Path) -> bool {
    let named = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| stem(n).is_some());
    named && path.parent().is_some_and(is_pack)
}

/// The file name without its pack-skill suffix.
fn stem(file: &str) -> Option<&str> {
    SUFFIXES.iter().find_map(|s| file.strip_suffix(s)).filter(|s| !s.is_empty() && !s.starts_with('.'))
}

/// The skill name of file `file` in pack `pack`, when they make a valid one.
pub(crate) fn member_name(pack: &str, file: &str) -> Option<SkillName> {
    let slug = slug(stem(file)?);
    if slug.is_empty() || pack.contains(SEPARATOR) {
        return None;
    }
    SkillName::new(format!("{pack}{SEPARATOR}{slug}")).ok()
}

/// The skill names of the pack at `dir` (sorted). Files that give no valid name are
/// skipped with a warning saying how to rename them.
pub(crate) fn names_in(dir: &Path) -> BTreeSet<SkillName> {
    let mut names = BTreeSet::new();
    let Some(pack) = dir.file_name().and_then(|n| n.to_str()) else { return names };
    if let Err(e) = skillmd::check_name_rules(pack, &dir.join(PACK_MANIFEST)) {
        tracing::warn!(error = %e, "skipping a skill pack whose folder name is not a valid pack name");
        return names;
    }
    for file in files(dir) {
        match member_name(pack, &file) {
            Some(name) => {
                names.insert(name);
            }
            None => tracing::warn!(
                path = %dir.join(&file).display(),
                "skipping a pack file whose name gives no valid skill name (`<pack>--<slug>`, at most 64 characters); rename it, e.g. `my-skill.skill.md`"
            ),
        }
    }
    names
}

/// The pack-skill files directly in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<String> =
        entries.filter_map(Result::ok).filter_map(|e| e.file_name().into_string().ok()).filter(|n| stem(n).is_some()).collect();
    files.sort();
    files
}

/// The files in the layer directory `layer` that could be skill `name`, sorted.
pub(crate) fn candidates(layer: &Path, name: &SkillName) -> Vec<PathBuf> {
    let Some((pack, _)) = name.as_str().split_once(SEPARATOR) else { return Vec::new() };
    let dir = layer.join(pack);
    if !is_pack(&dir) {
        return Vec::new();
    }
    files(&dir).into_iter().filter(|f| member_name(pack, f).as_ref() == Some(name)).map(|f| dir.join(f)).collect()
}

/// Every skill of pack `pack` on disk in any layer (an external layer holds no packs).
pub(crate) fn members(layers: &[(Layer, PathBuf)], pack: &str) -> BTreeSet<SkillName> {
    layers
        .iter()
        .filter(|(layer, _)| *layer != Layer::External)
        .map(|(_, dir)| dir.join(pack))
        .filter(|dir| is_pack(dir))
        .flat_map(|dir| names_in(&dir))
        .collect()
}

/// The pack name of skill `name`, if it is a pack skill's.
pub(crate) fn pack_of(name: &SkillName) -> Option<&str> {
    name.as_str().split_once(SEPARATOR).map(|(pack, _)| pack)
}

/// Read one pack file and its `pack.toml`: no symlinks, size caps, and no other file of
/// the pack giving the same name. Returns `(pack.toml, file)` bytes.
pub(crate) fn read(path: &Path, limits: &SizeLimits) -> Result<(Vec<u8>, Vec<u8>), RegistryError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let read_one = |file: &Path| -> Result<Vec<u8>, RegistryError> {
        let (seen, fd) = nofollow::open_path(file)?;
        if seen.kind != nofollow::Kind::File {
            return Err(ReadError::SpecialFile { path: file.to_owned() }.into());
        }
        skillhost_package::check_size(file, "this file", seen.len, limits.text_file)?;
        let bytes = nofollow::read_capped(fd, limits.text_file, file)?;
        skillhost_package::check_size(file, "this file", bytes.len() as u64, limits.text_file)?;
        Ok(bytes)
    };
    let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let pack = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if let Some(name) = member_name(pack, file) {
        let twins: Vec<String> = files(dir).into_iter().filter(|f| f != file && member_name(pack, f).as_ref() == Some(&name)).collect();
        if !twins.is_empty() {
            return Err(RuleError::new(
                path,
                Rule::PackUnique,
                format!("the file (skill `{name}`, also given by {})", twins.join(", ")),
                "rename or remove all but one of them",
            )
            .into());
        }
    }
    Ok((read_one(&dir.join(PACK_MANIFEST))?, read_one(path)?))
}

/// Why a pack file cannot be installed or written on its own.
pub(crate) fn not_installable(path: &Path) -> RegistryError {
    RegistryError::Read(ReadError::BadPath {
        path: path.to_owned(),
        reason: "a skill-pack file cannot be installed on its own (copy the whole pack folder into a skills directory)",
    })
}

/// A parsed pack skill: its name, catalog description, rendered instructions and origin.
pub(crate) struct PackSkill {
    pub name: SkillName,
    pub description: String,
    pub instructions: String,
    pub pack: PackRef,
}

/// Parse the pack file at `path` (contents `bytes`) of the pack whose `pack.toml` is
/// `manifest`.
pub(crate) fn parse(path: &Path, manifest: &[u8], bytes: &[u8]) -> Result<PackSkill, RegistryError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let manifest_path = dir.join(PACK_MANIFEST);
    let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let manifest = parse_manifest(manifest, &manifest_path, folder)?;
    let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let name = member_name(folder, &file).ok_or_else(|| {
        RuleError::new(
            path,
            Rule::PackName,
            format!("the file name {file:?}"),
            "rename it to `<slug>.skill.md` with a slug of lowercase letters, digits and hyphens",
        )
    })?;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        RuleError::new(path, Rule::FrontmatterYaml, format!("the file (not UTF-8 at byte {})", e.valid_up_to()), "save it as UTF-8")
    })?;
    let (mut fields, body) = if file.ends_with(".skill.md") {
        let (yaml, body) = skillmd::split(text).ok_or_else(|| {
            RuleError::new(
                path,
                Rule::Frontmatter,
                "the file (no frontmatter)",
                "start it with `---`, the skill's YAML fields (trigger, steps...), and `---`",
            )
        })?;
        (skillmd::yaml_mapping(yaml, path)?, body.trim())
    } else {
        (skillmd::yaml_mapping(text, path)?, "")
    };
    let file_slug = name.as_str()[folder.len() + SEPARATOR.len()..].to_owned();
    let seed_name = format!("pack.{folder}.{}", file_slug.replace('-', "_"));
    check_declared_name(&mut fields, path, folder, &file_slug, &name)?;

    let trigger = match fields.remove("trigger") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_owned(),
        other => {
            let subject = other.map_or_else(|| "the file (no `trigger`)".to_owned(), |v| format!("trigger {}", skillmd::show(&v)));
            return Err(
                RuleError::new(path, Rule::PackTrigger, subject, "add `trigger:` saying when to use the skill, in one sentence").into()
            );
        }
    };
    let steps = match fields.remove("steps") {
        Some(value) => strings(value, "steps", path, Rule::PackSteps)?,
        None => Vec::new(),
    };
    if steps.is_empty() {
        return Err(RuleError::new(path, Rule::PackSteps, "the file (no steps)", "add `steps:` with one `- step` line per step").into());
    }
    let text_field = |fields: &mut Mapping, key: &str| -> Result<Option<String>, RuleError> {
        match fields.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(other) => {
                Err(RuleError::new(path, Rule::PackFields, format!("{key} {}", skillmd::show(&other)), format!("write `{key}:` as text")))
            }
        }
    };
    let title = text_field(&mut fields, "title")?;
    let description = text_field(&mut fields, "description")?;
    let task_type = text_field(&mut fields, "task_type")?;
    let mut list = |key: &str| -> Result<Vec<String>, RuleError> {
        fields.remove(key).map_or(Ok(Vec::new()), |v| strings(v, key, path, Rule::PackFields))
    };
    let tags = list("tags")?;
    let preconditions = list("preconditions")?;
    let failure_modes = list("failure_modes")?;

    let summary = description.clone().or_else(|| title.clone()).unwrap_or_else(|| trigger.clone());
    let length = summary.chars().count();
    if length > 1024 {
        return Err(RuleError::new(
            path,
            Rule::DescriptionLength,
            format!("description ({length} characters)"),
            "shorten it to 1024 characters and move details into the steps or the body",
        )
        .into());
    }

    let mut md = format!("# {}\n\n", title.as_deref().unwrap_or(name.as_str()));
    if let Some(description) = &description {
        md.push_str(&format!("{description}\n\n"));
    }
    md.push_str(&format!("**Use when:** {trigger}\n\n"));
    if task_type.is_some() || !tags.is_empty() {
        let mut line = Vec::new();
        if let Some(task_type) = &task_type {
            line.push(format!("Task type: {task_type}."));
        }
        if !tags.is_empty() {
            line.push(format!("Tags: {}.", tags.join(", ")));
        }
        md.push_str(&format!("{}\n\n", line.join(" ")));
    }
    let section = |md: &mut String, heading: &str, items: &[String], numbered: bool| {
        if items.is_empty() {
            return;
        }
        md.push_str(&format!("## {heading}\n\n"));
        for (i, item) in items.iter().enumerate() {
            let marker = if numbered { format!("{}.", i + 1) } else { "-".to_owned() };
            md.push_str(&format!("{marker} {}\n", item.trim()));
        }
        md.push('\n');
    };
    section(&mut md, "Preconditions", &preconditions, false);
    section(&mut md, "Steps", &steps, true);
    section(&mut md, "Failure modes", &failure_modes, false);
    if !body.is_empty() {
        md.push_str(body);
        md.push('\n');
    }

    let mut extra = BTreeMap::new();
    for (key, value) in [("title", &title), ("task_type", &task_type)] {
        if let Some(value) = value {
            extra.insert(key.to_owned(), value.clone());
        }
    }
    if !tags.is_empty() {
        extra.insert("tags".to_owned(), tags.join(", "));
    }
    for (key, value) in fields {
        let key = key.as_str().unwrap_or_default().to_owned();
        let value = match value {
            Value::String(s) => s,
            other => serde_json::to_string(&other).unwrap_or_default(),
        };
        extra.insert(key, value);
    }
    Ok(PackSkill {
        name,
        description: summary.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" "),
        instructions: md.trim_end().to_owned() + "\n",
        pack: PackRef { name: manifest.name, version: manifest.version, file, seed_name, extra },
    })
}

fn parse_manifest(bytes: &[u8], path: &Path, folder: &str) -> Result<PackManifest, RuleError> {
    let bad = |subject: String, fix: &str| RuleError::new(path, Rule::PackToml, subject, fix);
    let text = std::str::from_utf8(bytes).map_err(|_| bad("the file (not UTF-8)".to_owned(), "save it as UTF-8"))?;
    let manifest: PackManifest = toml::from_str(text).map_err(|e| {
        bad(
            format!("the file ({})", e.message()),
            "write `name = \"<folder name>\"` and `version = \"1.0.0\"` (and optionally `description`), nothing else",
        )
    })?;
    if manifest.name != folder {
        return Err(bad(
            format!("name {:?} (the folder is {folder:?})", manifest.name),
            &format!("set `name = \"{folder}\"` or rename the folder"),
        ));
    }
    if manifest.version.trim().is_empty() {
        return Err(bad("version \"\"".to_owned(), "set `version`, e.g. `version = \"1.0.0\"`"));
    }
    if let Err(found) = skillhost_core::text::check(&manifest.version, skillhost_core::text::TextKind::Line) {
        return Err(RuleError::new(path, Rule::Text, format!("`version` ({found})"), skillmd::TEXT_FIX));
    }
    Ok(manifest)
}

/// A declared `name:` must give the same skill name as the file name.
fn check_declared_name(fields: &mut Mapping, path: &Path, pack: &str, file_slug: &str, name: &SkillName) -> Result<(), RuleError> {
    let declared = match fields.remove("name") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::PackName,
                format!("name {}", skillmd::show(&other)),
                "write the name as text, or leave it out",
            ));
        }
    };
    let (declared_pack, declared_slug) = if let Some(rest) = declared.strip_prefix("pack.") {
        rest.split_once('.').unwrap_or(("", rest))
    } else if let Some((p, s)) = declared.split_once(SEPARATOR) {
        (p, s)
    } else {
        (pack, declared.as_str())
    };
    if declared_pack == pack && slug(declared_slug) == file_slug {
        return Ok(());
    }
    let wanted = slug(declared_slug);
    let fix = if declared_pack == pack && !wanted.is_empty() {
        let suffix = SUFFIXES.iter().find(|s| path.to_string_lossy().ends_with(*s)).copied().unwrap_or(".skill.md");
        format!("rename the file to `{wanted}{suffix}`, or set `name: pack.{pack}.{}` (or leave `name` out)", file_slug.replace('-', "_"))
    } else {
        format!(
            "a file in pack `{pack}` names a skill of that pack: set `name: pack.{pack}.{}` (or leave it out)",
            file_slug.replace('-', "_")
        )
    };
    Err(RuleError::new(path, Rule::PackName, format!("name {declared:?} (the file gives `{name}`)"), fix))
}

/// A YAML list of strings (numbers and booleans are taken as their text).
fn strings(value: Value, key: &str, path: &Path, rule: Rule) -> Result<Vec<String>, RuleError> {
    let bad = |v: &Value| {
        RuleError::new(path, rule, format!("{key} {}", skillmd::show(v)), format!("write `{key}:` followed by `- item` lines of text"))
    };
    let Value::Sequence(items) = &value else { return Err(bad(&value)) };
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => Err(bad(other)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_file() {
        assert_eq!(member_name("core", "login_basic.skill.md").unwrap().as_str(), "core--login-basic");
        assert_eq!(member_name("core", "API.Pagination.Cursor_Loop.skill.yaml").unwrap().as_str(), "core--api-pagination-cursor-loop");
        assert_eq!(member_name("core", "2fa.skill.yml").unwrap().as_str(), "core--2fa");
        assert!(member_name("core", "notes.md").is_none());
        assert!(member_name("core", ".skill.md").is_none());
        assert!(member_name("core", "___.skill.md").is_none());
        assert!(member_name("core", &format!("{}.skill.md", "a".repeat(60))).is_none(), "over 64 characters");
    }

    #[test]
    fn a_pack_version_holds_no_terminal_controls() {
        let path = Path::new("core/pack.toml");
        assert!(parse_manifest(b"name = \"core\"\nversion = \"1.0.0\"\n", path, "core").is_ok());
        let Err(err) = parse_manifest(b"name = \"core\"\nversion = \"1.0\\u001b[2K\"\n", path, "core") else {
            panic!("a version with an escape sequence was accepted");
        };
        assert_eq!(err.rule, Rule::Text, "{err}");
        assert!(err.to_string().contains("`version` (a control character (U+001B at byte 3))"), "{err}");
    }
}
