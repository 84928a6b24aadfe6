//! SKILL.md to the Agent Skills specification (agentskills.io): the YAML frontmatter
//! parsed with a real YAML parser, bounded, and checked rule by rule. A file that breaks
//! a rule is refused with a [`RuleError`] naming the file, the rule, the value and the
//! fix; a top-level key the specification does not define is only warned about (a newer
//! revision may add keys).
//!
//! The rules ([`Rule`]): `name` is 1-64 characters of `a-z`, `0-9` and `-`, without a
//! leading, trailing or doubled hyphen, and equals the skill's folder name (and, for a
//! skill that also has skill.toml, its manifest name); `description` is non-empty and
//! at most 1024 characters; the optional `license` is a string, `compatibility` a string
//! of at most 500 characters, `metadata` a map of strings to strings and
//! `allowed-tools` a space-delimited string. skillhost adds its own name rule (starts
//! with a letter, at least two characters; see `skillhost_core::SkillName`).
//!
//! **Bounds.** Frontmatter over [`MAX_FRONTMATTER`] bytes is refused before it is
//! parsed. YAML aliases are expanded by the parser under a repetition limit (a
//! "billion laughs" document fails with an error, it does not expand), and nesting is
//! limited to 128 levels.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};
use skillhost_core::SkillName;

/// Largest frontmatter parsed, in bytes.
pub const MAX_FRONTMATTER: usize = 64 * 1024;
/// Longest `name`, in characters.
const MAX_NAME: usize = 64;
/// Longest `description`, in characters.
const MAX_DESCRIPTION: usize = 1024;
/// Longest `compatibility`, in characters.
const MAX_COMPATIBILITY: usize = 500;

/// The frontmatter of a valid SKILL.md.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Frontmatter {
    /// The skill's name.
    pub name: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// The license, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Environment requirements (products, packages, network), as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Extra properties.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Tools the skill is pre-approved to use (experimental in the specification).
    /// skillhost shows them; it grants nothing because of them.
    #[serde(rename = "allowed-tools", skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Top-level keys the specification does not define (warned about, kept out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_keys: Vec<String>,
}

/// A rule a SKILL.md or a skill-pack file can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// The file starts with a `---` line and the frontmatter closes with one.
    Frontmatter,
    /// The frontmatter is at most 64 KiB.
    FrontmatterSize,
    /// The frontmatter is a YAML mapping with string keys.
    FrontmatterYaml,
    /// `name` is present.
    NameRequired,
    /// `name` is 1-64 characters.
    NameLength,
    /// `name` has only `a-z`, `0-9` and `-`.
    NameCharset,
    /// `name` has no leading, trailing or consecutive hyphens.
    NameHyphens,
    /// `name` equals the folder name (and the skill's name).
    NameFolder,
    /// skillhost's own: a name starts with a letter and has at least two characters.
    SkillhostName,
    /// `description` is present and non-empty.
    DescriptionRequired,
    /// `description` is at most 1024 characters.
    DescriptionLength,
    /// `license` is a string.
    License,
    /// `compatibility` is a string of 1-500 characters.
    Compatibility,
    /// `metadata` maps strings to strings.
    Metadata,
    /// `allowed-tools` is a space-delimited string.
    AllowedTools,
    /// A skill pack has a valid `pack.toml`.
    PackToml,
    /// A pack file's `name`, when given, names the skill its file name gives.
    PackName,
    /// One file per skill name within a pack.
    PackUnique,
    /// `trigger` is a non-empty string.
    PackTrigger,
    /// `steps` is a non-empty list of strings.
    PackSteps,
    /// `title`, `description` and `task_type` are strings; `tags`, `preconditions` and
    /// `failure_modes` lists of strings.
    PackFields,
    /// skillhost's own: no text holds a control character (but line breaks and tabs) or
    /// a bidirectional control ([`skillhost_core::text`]).
    Text,
}

impl Rule {
    /// The rule's id, as shown in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Frontmatter => "frontmatter",
            Rule::FrontmatterSize => "frontmatter-size",
            Rule::FrontmatterYaml => "frontmatter-yaml",
            Rule::NameRequired => "name-required",
            Rule::NameLength => "name-length",
            Rule::NameCharset => "name-charset",
            Rule::NameHyphens => "name-hyphens",
            Rule::NameFolder => "name-folder",
            Rule::SkillhostName => "skillhost-name",
            Rule::DescriptionRequired => "description-required",
            Rule::DescriptionLength => "description-length",
            Rule::License => "license",
            Rule::Compatibility => "compatibility",
            Rule::Metadata => "metadata",
            Rule::AllowedTools => "allowed-tools",
            Rule::PackToml => "pack-toml",
            Rule::PackName => "pack-name",
            Rule::PackUnique => "pack-unique",
            Rule::PackTrigger => "pack-trigger",
            Rule::PackSteps => "pack-steps",
            Rule::PackFields => "pack-fields",
            Rule::Text => "text",
        }
    }

    /// Which standard the rule belongs to.
    pub fn standard(self) -> &'static str {
        match self {
            Rule::SkillhostName | Rule::Text => "skillhost",
            Rule::PackToml | Rule::PackName | Rule::PackUnique | Rule::PackTrigger | Rule::PackSteps | Rule::PackFields => "skill-pack",
            _ => "agent-skills",
        }
    }

    /// What the rule asks, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Frontmatter => "the file starts with a `---` line, then YAML, then a closing `---` line",
            Rule::FrontmatterSize => "the frontmatter is at most 64 KiB",
            Rule::FrontmatterYaml => "the frontmatter is a YAML mapping with string keys",
            Rule::NameRequired => "`name` is required",
            Rule::NameLength => "1-64 characters",
            Rule::NameCharset => "lowercase letters, digits and single hyphens",
            Rule::NameHyphens => "no leading, trailing or consecutive hyphens",
            Rule::NameFolder => "the name equals the skill's folder name and skill name",
            Rule::SkillhostName => "a skill name starts with a letter and has at least two characters",
            Rule::DescriptionRequired => "`description` is required and non-empty",
            Rule::DescriptionLength => "at most 1024 characters",
            Rule::License => "`license` is a string",
            Rule::Compatibility => "`compatibility` is a string of 1-500 characters",
            Rule::Metadata => "`metadata` maps string keys to string values",
            Rule::AllowedTools => "`allowed-tools` is one string of space-separated tool names",
            Rule::PackToml => "a pack folder has a pack.toml with `name` (the folder's name) and `version`",
            Rule::PackName => "`name`, when given, is `pack.<pack>.<slug>` or `<pack>--<slug>` matching the file name",
            Rule::PackUnique => "one file per skill name in a pack",
            Rule::PackTrigger => "`trigger` is a non-empty string",
            Rule::PackSteps => "`steps` is a non-empty list of strings",
            Rule::Text => "no control character but line breaks and tabs, and no bidirectional control",
            Rule::PackFields => {
                "`title`, `description`, `task_type` are strings; `tags`, `preconditions`, `failure_modes` lists of strings"
            }
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file that breaks a rule: which file, what in it, which rule, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {subject} breaks {} rule {} ({}); {fix}", path.display(), rule.standard(), rule.as_str(), rule.describe())]
pub struct RuleError {
    /// The file.
    pub path: PathBuf,
    /// The rule broken.
    pub rule: Rule,
    /// What breaks it, with its value (`name "Foo_Bar"`).
    pub subject: String,
    /// How to fix it.
    pub fix: String,
}

impl RuleError {
    pub(crate) fn new(path: &Path, rule: Rule, subject: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { path: path.to_owned(), rule, subject: subject.into(), fix: fix.into() }
    }
}

/// A SKILL.md split at its frontmatter: the YAML between the `---` lines and the body
/// after them. `None` when the text does not open with a `---` line or never closes it.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("---")?;
    let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Parse the YAML frontmatter of `text` (the contents of `path`) into a mapping,
/// enforcing the size bound and the mapping shape. Shared with skill-pack files.
pub(crate) fn yaml_mapping(yaml: &str, path: &Path) -> Result<Mapping, RuleError> {
    if yaml.len() > MAX_FRONTMATTER {
        return Err(RuleError::new(
            path,
            Rule::FrontmatterSize,
            format!("the frontmatter ({} bytes)", yaml.len()),
            "move long text into the body or into references/ files",
        ));
    }
    let value: Value = serde_norway::from_str(yaml).map_err(|e| {
        let fix = if e.to_string().contains("repetition limit") {
            "write the values out instead of repeating YAML aliases (`*name`): their expansion is capped"
        } else {
            "fix the YAML syntax (quote values that contain `: ` or start with a special character)"
        };
        RuleError::new(path, Rule::FrontmatterYaml, format!("the frontmatter ({e})"), fix)
    })?;
    match value {
        Value::Null => Ok(Mapping::new()),
        Value::Mapping(mapping) => {
            if let Some(key) = mapping.keys().find(|k| !k.is_string()) {
                return Err(RuleError::new(path, Rule::FrontmatterYaml, format!("the key {}", show(key)), "use plain text keys"));
            }
            check_text(&mapping, path)?;
            Ok(mapping)
        }
        other => Err(RuleError::new(
            path,
            Rule::FrontmatterYaml,
            format!("the frontmatter (a {})", kind(&other)),
            "write `key: value` lines, e.g. `name: my-skill` and `description: ...`",
        )),
    }
}

/// How to fix a break of [`Rule::Text`].
pub(crate) const TEXT_FIX: &str = "remove it: a skill's texts are read by humans and agents, never terminal controls";

/// Check every key and string of a frontmatter with the one text rule: keys are one
/// line, values prose (a YAML block may span lines). The error names the key.
fn check_text(mapping: &Mapping, path: &Path) -> Result<(), RuleError> {
    use skillhost_core::text::{self, TextKind};
    fn strings<'a>(value: &'a Value, out: &mut Vec<(&'a str, TextKind)>) {
        match value {
            Value::String(s) => out.push((s, TextKind::Prose)),
            Value::Sequence(items) => items.iter().for_each(|item| strings(item, out)),
            Value::Mapping(map) => map.iter().for_each(|(k, v)| {
                if let Value::String(k) = k {
                    out.push((k, TextKind::Line));
                }
                strings(v, out);
            }),
            Value::Tagged(tagged) => strings(&tagged.value, out),
            _ => {}
        }
    }
    for (key, value) in mapping {
        let key = key.as_str().unwrap_or_default();
        let mut found = vec![(key, TextKind::Line)];
        strings(value, &mut found);
        if let Some(bad) = found.into_iter().find_map(|(s, kind)| text::check(s, kind).err()) {
            return Err(RuleError::new(path, Rule::Text, format!("`{}` ({bad})", text::visible(key)), TEXT_FIX));
        }
    }
    Ok(())
}

/// Parse and check the frontmatter of the SKILL.md `text` read from `path`. The name is
/// not compared with anything here: see [`check_name`].
pub fn parse(text: &str, path: &Path) -> Result<Frontmatter, RuleError> {
    let Some((yaml, _)) = split(text) else {
        let subject = if text.starts_with("---") { "the frontmatter (no closing `---` line)" } else { "the file (no frontmatter)" };
        return Err(RuleError::new(
            path,
            Rule::Frontmatter,
            subject,
            "start SKILL.md with `---`, a `name:` and a `description:` line, and `---`",
        ));
    };
    let mut fields = yaml_mapping(yaml, path)?;
    let name = match fields.remove("name") {
        None | Some(Value::Null) => {
            return Err(RuleError::new(path, Rule::NameRequired, "the frontmatter", "add `name: <folder name>`"));
        }
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::NameCharset,
                format!("name {}", show(&other)),
                "write the name as plain text, e.g. `name: my-skill`",
            ));
        }
    };
    check_name_rules(&name, path)?;
    let description = match fields.remove("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => d.trim().to_owned(),
        None | Some(Value::Null) => {
            return Err(RuleError::new(
                path,
                Rule::DescriptionRequired,
                "the frontmatter",
                "add `description:` saying what the skill does and when to use it",
            ));
        }
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::DescriptionRequired,
                format!("description {}", show(&other)),
                "write what the skill does and when to use it, as text",
            ));
        }
    };
    let length = description.chars().count();
    if length > MAX_DESCRIPTION {
        return Err(RuleError::new(
            path,
            Rule::DescriptionLength,
            format!("description ({length} characters)"),
            "shorten it to 1024 characters and move details into the body",
        ));
    }
    let license = match fields.remove("license") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::License,
                format!("license {}", show(&other)),
                "write a license name or file, e.g. `license: Apache-2.0`",
            ));
        }
    };
    let compatibility = match fields.remove("compatibility") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if (1..=MAX_COMPATIBILITY).contains(&s.chars().count()) => Some(s),
        Some(Value::String(s)) => {
            return Err(RuleError::new(
                path,
                Rule::Compatibility,
                format!("compatibility ({} characters)", s.chars().count()),
                "say in at most 500 characters what the skill needs, or leave the key out",
            ));
        }
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::Compatibility,
                format!("compatibility {}", show(&other)),
                "write it as text, e.g. `compatibility: needs git and network access`",
            ));
        }
    };
    let metadata = match fields.remove("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Mapping(map)) => {
            let mut metadata = BTreeMap::new();
            for (key, value) in map {
                match (key, value) {
                    (Value::String(k), Value::String(v)) => {
                        metadata.insert(k, v);
                    }
                    (Value::String(k), other) => {
                        return Err(RuleError::new(
                            path,
                            Rule::Metadata,
                            format!("metadata.{k} {}", show(&other)),
                            format!("quote the value: `{k}: \"...\"`"),
                        ));
                    }
                    (other, _) => {
                        return Err(RuleError::new(path, Rule::Metadata, format!("the metadata key {}", show(&other)), "use text keys"));
                    }
                }
            }
            metadata
        }
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::Metadata,
                format!("metadata {}", show(&other)),
                "write `metadata:` followed by indented `key: \"value\"` lines",
            ));
        }
    };
    let allowed_tools = match fields.remove("allowed-tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(other) => {
            return Err(RuleError::new(
                path,
                Rule::AllowedTools,
                format!("allowed-tools {}", show(&other)),
                "write the tools on one line separated by spaces, e.g. `allowed-tools: Bash(git:*) Read`",
            ));
        }
    };
    let unknown_keys: Vec<String> = fields.keys().filter_map(|k| k.as_str().map(str::to_owned)).collect();
    if !unknown_keys.is_empty() {
        tracing::warn!(
            path = %path.display(),
            keys = %unknown_keys.join(", "),
            "SKILL.md frontmatter has keys the Agent Skills specification does not define; they are ignored (put custom data under `metadata:`)"
        );
    }
    Ok(Frontmatter { name, description, license, compatibility, metadata, allowed_tools, unknown_keys })
}

/// The `name` rules of the specification, then skillhost's own.
pub(crate) fn check_name_rules(name: &str, path: &Path) -> Result<SkillName, RuleError> {
    let subject = || format!("name {name:?}");
    let suggestion = suggest_name(name);
    let rename = || match &suggestion {
        Some(s) => format!("rename the folder and the name to {s:?}"),
        None => "choose a name of lowercase letters, digits and single hyphens, and name the folder the same".to_owned(),
    };
    let length = name.chars().count();
    if !(1..=MAX_NAME).contains(&length) {
        return Err(RuleError::new(path, Rule::NameLength, format!("{} ({length} characters)", subject()), rename()));
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Err(RuleError::new(path, Rule::NameCharset, subject(), rename()));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(RuleError::new(path, Rule::NameHyphens, subject(), rename()));
    }
    SkillName::new(name)
        .map_err(|e| RuleError::new(path, Rule::SkillhostName, subject(), format!("{}; e.g. {:?}", e.reason, format!("skill-{name}"))))
}

/// Check that the frontmatter names `expected` (the folder's name, or the name in
/// skill.toml).
pub fn check_name(frontmatter: &Frontmatter, expected: &str, path: &Path) -> Result<(), RuleError> {
    if frontmatter.name == expected {
        return Ok(());
    }
    Err(RuleError::new(
        path,
        Rule::NameFolder,
        format!("name {:?} (the skill is named {expected:?})", frontmatter.name),
        format!("set `name: {expected}`, or rename the skill to {:?}", frontmatter.name),
    ))
}

/// `text` lowercased, each run of characters other than `a-z0-9` one hyphen, with no
/// hyphen at either end.
pub(crate) fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// `text` turned into a valid name, when it can be: its [`slug`], at most 64 characters.
pub(crate) fn suggest_name(text: &str) -> Option<String> {
    let mut out = slug(text);
    if out.len() > MAX_NAME {
        out.truncate(MAX_NAME);
        out = out.trim_end_matches('-').to_owned();
    }
    SkillName::new(out.as_str()).ok().filter(|_| !out.contains("--")).map(|_| out)
}

/// A YAML value as it appears in an error: its kind and a short rendering.
pub(crate) fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("{s:?}"),
        other => serde_norway::to_string(other).map(|s| s.trim_end().to_owned()).unwrap_or_default(),
    };
    let text: String = if text.chars().count() > 80 { text.chars().take(77).chain("...".chars()).collect() } else { text };
    match value {
        Value::String(_) => text,
        other => format!("({} {text})", kind(other)),
    }
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Sequence(_) => "list",
        Value::Mapping(_) => "mapping",
        Value::Tagged(_) => "tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(front: &str) -> String {
        format!("---\n{front}---\n# Body\n")
    }

    #[test]
    fn split_finds_the_closing_line() {
        assert_eq!(split("---\na: 1\n---\nbody"), Some(("a: 1\n", "body")));
        assert_eq!(split("---\r\na: 1\r\n---\r\nbody"), Some(("a: 1\r\n", "body")));
        assert_eq!(split("---\n---\n"), Some(("", "")));
        assert_eq!(split("---\na: 1\n"), None);
        assert_eq!(split("# no\n---\n"), None);
    }

    #[test]
    fn suggestions_are_valid_names() {
        assert_eq!(suggest_name("Foo_Bar").as_deref(), Some("foo-bar"));
        assert_eq!(suggest_name("--a..b--").as_deref(), Some("a-b"));
        assert_eq!(suggest_name("9lives"), None, "a name starts with a letter");
        assert_eq!(suggest_name(&"a".repeat(80)).map(|s| s.len()), Some(64));
    }

    /// Every rule: a frontmatter that breaks it, and one close to it that passes.
    #[test]
    fn every_rule_fails_and_passes() {
        let ok = "description: d\n";
        let long = |n: usize| "x ".repeat(n / 2);
        let table: Vec<(Rule, String, String)> = vec![
            (Rule::NameRequired, ok.to_owned(), format!("name: a-b\n{ok}")),
            (Rule::NameLength, format!("name: {}\n{ok}", "a".repeat(65)), format!("name: {}\n{ok}", "a".repeat(64))),
            (Rule::NameLength, format!("name: \"\"\n{ok}"), format!("name: ab\n{ok}")),
            (Rule::NameCharset, format!("name: Foo_Bar\n{ok}"), format!("name: foo-bar\n{ok}")),
            (Rule::NameCharset, format!("name: 12\n{ok}"), format!("name: a12\n{ok}")),
            (Rule::NameCharset, format!("name: café\n{ok}"), format!("name: cafe\n{ok}")),
            (Rule::NameHyphens, format!("name: -ab\n{ok}"), format!("name: ab\n{ok}")),
            (Rule::NameHyphens, format!("name: ab-\n{ok}"), format!("name: a-b\n{ok}")),
            (Rule::NameHyphens, format!("name: a--b\n{ok}"), format!("name: a-b\n{ok}")),
            (Rule::SkillhostName, format!("name: 1ab\n{ok}"), format!("name: a1b\n{ok}")),
            (Rule::SkillhostName, format!("name: a\n{ok}"), format!("name: ab\n{ok}")),
            (Rule::DescriptionRequired, "name: ab\n".to_owned(), "name: ab\ndescription: d\n".to_owned()),
            (Rule::DescriptionRequired, "name: ab\ndescription: \"  \"\n".to_owned(), "name: ab\ndescription: \" d \"\n".to_owned()),
            (Rule::DescriptionRequired, "name: ab\ndescription: [a]\n".to_owned(), "name: ab\ndescription: \"[a]\"\n".to_owned()),
            (
                Rule::DescriptionLength,
                format!("name: ab\ndescription: {}y\n", long(1024)),
                format!("name: ab\ndescription: {}\n", long(1024)),
            ),
            (Rule::License, format!("name: ab\n{ok}license: [MIT]\n"), format!("name: ab\n{ok}license: MIT\n")),
            (
                Rule::Compatibility,
                format!("name: ab\n{ok}compatibility: {}y\n", long(500)),
                format!("name: ab\n{ok}compatibility: {}\n", long(500)),
            ),
            (Rule::Compatibility, format!("name: ab\n{ok}compatibility: \"\"\n"), format!("name: ab\n{ok}compatibility: git\n")),
            (Rule::Compatibility, format!("name: ab\n{ok}compatibility: 3\n"), format!("name: ab\n{ok}compatibility: \"3\"\n")),
            (Rule::Metadata, format!("name: ab\n{ok}metadata: [a]\n"), format!("name: ab\n{ok}metadata: {{}}\n")),
            (
                Rule::Metadata,
                format!("name: ab\n{ok}metadata:\n  version: 1.0\n"),
                format!("name: ab\n{ok}metadata:\n  version: \"1.0\"\n"),
            ),
            (
                Rule::AllowedTools,
                format!("name: ab\n{ok}allowed-tools: [Read, Bash]\n"),
                format!("name: ab\n{ok}allowed-tools: Read Bash\n"),
            ),
            (Rule::FrontmatterYaml, format!("name: ab\n{ok}: x: y\n"), format!("name: ab\n{ok}")),
            (Rule::FrontmatterYaml, "- name\n".to_owned(), format!("name: ab\n{ok}")),
            (Rule::Text, "name: ab\ndescription: \"1.0\\e[2K d\"\n".to_owned(), "name: ab\ndescription: \"1.0 d\"\n".to_owned()),
            (Rule::Text, "name: ab\ndescription: \"a\\rb\"\n".to_owned(), "name: ab\ndescription: \"a\\nb\\tc\"\n".to_owned()),
            (Rule::Text, "name: ab\ndescription: \"x\\u202Ey\"\n".to_owned(), "name: ab\ndescription: \"xy\"\n".to_owned()),
            (Rule::Text, format!("name: ab\n{ok}metadata:\n  k: \"\\u2066\"\n"), format!("name: ab\n{ok}metadata:\n  k: v\n")),
            (Rule::FrontmatterYaml, format!("name: ab\n{ok}1: x\n"), format!("name: ab\n{ok}x1: x\n")),
            (Rule::FrontmatterYaml, format!("name: ab\nname: ab\n{ok}"), format!("name: ab\n{ok}")),
            (
                Rule::FrontmatterSize,
                format!("name: ab\n{ok}x: {}\n", "y".repeat(MAX_FRONTMATTER)),
                format!("name: ab\n{ok}x: {}\n", "y".repeat(MAX_FRONTMATTER - 64)),
            ),
        ];
        let path = Path::new("skills/x/SKILL.md");
        for (rule, bad, good) in &table {
            let err = parse(&md(bad), path).expect_err(&format!("{rule} should refuse {bad:?}"));
            assert_eq!(err.rule, *rule, "{bad:?}: {err}");
            assert!(err.to_string().contains(&format!("rule {rule} (")), "{err}");
            if let Err(e) = parse(&md(good), path) {
                panic!("{rule} should accept {good:?}: {e}");
            }
        }
        assert_eq!(parse("# title\n", path).unwrap_err().rule, Rule::Frontmatter);
        assert_eq!(parse("---\nname: ab\n", path).unwrap_err().rule, Rule::Frontmatter);
        let fm = parse(&md("name: ab\ndescription: d\n"), path).unwrap();
        assert_eq!(check_name(&fm, "ab", path), Ok(()));
        assert_eq!(check_name(&fm, "other", path).unwrap_err().rule, Rule::NameFolder);
    }

    #[test]
    fn errors_name_the_file_value_rule_and_fix() {
        let err = parse(&md("name: Foo_Bar\ndescription: d\n"), Path::new("skills/Foo/SKILL.md")).unwrap_err().to_string();
        assert_eq!(
            err,
            "skills/Foo/SKILL.md: name \"Foo_Bar\" breaks agent-skills rule name-charset (lowercase letters, digits and single hyphens); rename the folder and the name to \"foo-bar\""
        );
    }

    #[test]
    fn a_billion_laughs_is_refused_without_expanding() {
        let mut yaml = String::from("name: ab\ndescription: d\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let refs = vec![format!("*l{}", i - 1); 10].join(", ");
            yaml.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
        }
        let err = parse(&md(&yaml), Path::new("x/SKILL.md")).unwrap_err();
        assert_eq!(err.rule, Rule::FrontmatterYaml, "{err}");
        assert!(err.to_string().contains("repetition limit"), "{err}");
    }

    #[test]
    fn full_frontmatter_is_exposed() {
        let fm = parse(
            &md("name: pdf-tools\ndescription: |\n  Extract text.\n  Use for PDFs.\nlicense: Apache-2.0\ncompatibility: needs poppler\nmetadata:\n  author: ada\n  version: \"1.0\"\nallowed-tools: Bash(git:*)  Read\nx-custom: 1\n"),
            Path::new("pdf-tools/SKILL.md"),
        )
        .unwrap();
        assert_eq!(fm.name, "pdf-tools");
        assert_eq!(fm.description, "Extract text.\nUse for PDFs.");
        assert_eq!(fm.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(fm.compatibility.as_deref(), Some("needs poppler"));
        assert_eq!(fm.metadata.get("version").map(String::as_str), Some("1.0"));
        assert_eq!(fm.allowed_tools, ["Bash(git:*)", "Read"]);
        assert_eq!(fm.unknown_keys, ["x-custom"], "unknown keys warn, they do not fail");
    }
}
