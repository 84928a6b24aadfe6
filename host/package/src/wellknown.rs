//! The format of the Agent Skills well-known index (`/.well-known/agent-skills/index.json`,
//! discovery schema 0.2.0): its JSON, its limits and the checks of its entries ([`parse`]),
//! and writing one with its artifacts from skills already read ([`publish`]).
//!
//! ```json
//! {"$schema": "https://schemas.agentskills.io/discovery/0.2.0/schema.json",
//!  "skills": [{"name": "code-review", "type": "skill-md", "description": "…",
//!              "url": "/.well-known/agent-skills/code-review/SKILL.md", "digest": "sha256:…"},
//!             {"name": "wrangler", "type": "archive", "description": "…",
//!              "url": "/.well-known/agent-skills/wrangler.tar.gz", "digest": "sha256:…"}]}
//! ```
//!
//! An index is refused whole when it is larger than [`MAX_INDEX_BYTES`], lists more than
//! [`MAX_ENTRIES`] skills, names another schema, or holds an entry that is not plain (a
//! name that is not a skill name, a name twice, a description with control characters, an
//! unknown type, a URL that is not a download, a digest that is not `sha256:HEX`). An
//! entry's `url` is resolved against the index's own URL; a `file:` URL only in a local
//! index.
//!
//! The format lives here, beside the reader of a skill's files, and not in
//! skillhost-source, because two crates need it that must not share the rest: the source
//! reads and fetches an index (HTTP, with its own reach rules), the MCP front serves one
//! (`serve --http --publish-skills`) from skills the registry already read. This crate links
//! no HTTP or OCI client, so the MCP front serves the index without linking a fetcher
//! (`scripts/seams.py` checks it); nothing here reads the network or the disk.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skillhost_core::SkillName;
use skillhost_core::text::{self, TextKind};
use url::Url;

/// The discovery schema this host reads and writes.
pub const SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

/// Largest index document read, in bytes.
pub const MAX_INDEX_BYTES: u64 = 1 << 20;

/// Most skills one index may list.
pub const MAX_ENTRIES: usize = 1000;

/// Where an index and its artifacts are served from, under a site's root.
pub const WELL_KNOWN: &str = "/.well-known/agent-skills/";

/// The file name of a `skill-md` artifact's one file.
pub const SKILL_MD: &str = "SKILL.md";

/// Characters of a description or name shown in a message.
const SHOWN: usize = 80;

/// Names listed when a skill asked for is not in the index.
const NAMES_LISTED: usize = 20;

/// A well-known index, read and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// Where it was read from.
    pub url: Url,
    /// Its skills, in its order.
    pub skills: Vec<IndexEntry>,
}

/// One skill an index lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The skill's name.
    pub name: SkillName,
    /// Its description (prose: no control characters but line breaks and tabs).
    pub description: String,
    /// What its artifact is.
    pub kind: EntryKind,
    /// The artifact, resolved against the index's URL.
    pub url: Url,
    /// `sha256:HEX` of the artifact's bytes, lower case.
    pub digest: String,
}

/// What an index entry's artifact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// A single `SKILL.md`: the skill is a folder of that one file.
    #[serde(rename = "skill-md")]
    SkillMd,
    /// A `.tar.gz` or `.zip` of the skill's folder.
    #[serde(rename = "archive")]
    Archive,
}

impl EntryKind {
    /// The `type` string of the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::SkillMd => "skill-md",
            EntryKind::Archive => "archive",
        }
    }
}

/// An index document as written, before it is checked.
#[derive(Deserialize, Serialize)]
struct RawIndex {
    #[serde(rename = "$schema")]
    schema: String,
    skills: Vec<RawEntry>,
}

/// One entry as written.
#[derive(Deserialize, Serialize)]
struct RawEntry {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    description: String,
    url: String,
    digest: String,
}

/// What to do about an index over [`MAX_INDEX_BYTES`].
pub const INDEX_FIX: &str = "an index of 1000 skills fits in far less, so this is not an Agent Skills index; check the address";

/// An index refused, or skills that cannot be published as one.
///
/// Not `#[non_exhaustive]`: skillhost-source maps each kind onto its own errors, and a new
/// kind should stop that map compiling.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// An index that is not a plain discovery 0.2.0 index, one that does not offer the
    /// skill asked for, or skills that cannot be published as one.
    #[error("index {url}: {reason}")]
    Refused {
        /// The index.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// An index document larger than [`MAX_INDEX_BYTES`].
    #[error("the index {url} is larger than the cap of {limit} bytes; nothing was written; {}", INDEX_FIX)]
    TooLarge {
        /// The index.
        url: String,
        /// The cap.
        limit: u64,
    },
}

impl Index {
    /// The entry of the skill `name`; when none is given or it is not listed, an error
    /// listing the skills that are.
    pub fn entry(&self, name: Option<&str>) -> Result<&IndexEntry, IndexError> {
        if let Some(entry) = name.and_then(|name| self.skills.iter().find(|e| e.name.as_str() == name)) {
            return Ok(entry);
        }
        let mut offered: Vec<&str> = self.skills.iter().take(NAMES_LISTED).map(|e| e.name.as_str()).collect();
        let more = self.skills.len().saturating_sub(NAMES_LISTED);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        if offered.is_empty() {
            offered.push("(none)");
        }
        let head = match name {
            Some(name) => format!("it lists no skill {}", text::quote(name, SHOWN)),
            None => "no skill chosen; add #skill=NAME to the address".to_owned(),
        };
        Err(self.refuse(format!("{head}; it offers {}{more}", offered.join(", "))))
    }

    fn refuse(&self, reason: String) -> IndexError {
        IndexError::Refused { url: self.url.to_string(), reason }
    }
}

/// `bytes` as the index read from `url`, checked.
pub fn parse(url: &Url, bytes: &[u8]) -> Result<Index, IndexError> {
    let refuse = |reason: String| IndexError::Refused { url: url.to_string(), reason };
    if bytes.len() as u64 > MAX_INDEX_BYTES {
        return Err(IndexError::TooLarge { url: url.to_string(), limit: MAX_INDEX_BYTES });
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| refuse(format!("not JSON: {e}")))?;
    let Some(object) = value.as_object() else { return Err(refuse("not a JSON object".into())) };
    match object.get("$schema") {
        None => {
            return Err(refuse(format!(
                "it names no $schema: a legacy (0.1.0, `files` lists) index, which this host does not read; it reads discovery schema 0.2.0 ({SCHEMA}): ask its publisher to serve that"
            )));
        }
        Some(serde_json::Value::String(schema)) if schema == SCHEMA => {}
        Some(other) => {
            return Err(refuse(format!(
                "its $schema {} is not one this host reads; it reads discovery schema 0.2.0 ({SCHEMA})",
                text::quote(&other.to_string(), SHOWN)
            )));
        }
    }
    let count = object.get("skills").and_then(|s| s.as_array()).map_or(0, Vec::len);
    if count > MAX_ENTRIES {
        return Err(refuse(format!("it lists {count} skills, more than the {MAX_ENTRIES} an index may")));
    }
    let raw: RawIndex = serde_json::from_value(value).map_err(|e| refuse(format!("not a discovery 0.2.0 index: {e}")))?;
    let mut seen = BTreeSet::new();
    let mut skills = Vec::with_capacity(raw.skills.len());
    for (i, raw) in raw.skills.into_iter().enumerate() {
        let entry = check_entry(url, raw).map_err(|reason| refuse(format!("entry {i}: {reason}")))?;
        if !seen.insert(entry.name.clone()) {
            return Err(refuse(format!("the skill {} is listed twice", entry.name)));
        }
        skills.push(entry);
    }
    Ok(Index { url: url.clone(), skills })
}

/// Why an index entry is refused (each names the skill, or quotes the name).
#[derive(Debug, thiserror::Error)]
enum EntryError {
    #[error("the name {name} is not a plain skill name: {reason}")]
    Name { name: String, reason: String },
    #[error("the description of {name} holds {forbidden}: {description}")]
    Description { name: SkillName, forbidden: text::Forbidden, description: String },
    #[error("{name} has type {kind}; a skill is `skill-md` or `archive`")]
    Kind { name: SkillName, kind: String },
    #[error("the url of {name}, {url}: {source}")]
    Url { name: SkillName, url: String, source: url::ParseError },
    #[error("the url of {name}, {url}, is not an https:// download")]
    Scheme { name: SkillName, url: String },
    #[error("the digest of {name}, {digest}, is not sha256: and 64 hex digits")]
    Digest { name: SkillName, digest: String },
}

/// One entry checked, or why it is refused.
fn check_entry(index: &Url, raw: RawEntry) -> Result<IndexEntry, EntryError> {
    let name = SkillName::new(raw.name.as_str())
        .map_err(|e| EntryError::Name { name: text::quote(&raw.name, SHOWN), reason: e.reason.to_owned() })?;
    if let Err(forbidden) = text::check(&raw.description, TextKind::Prose) {
        return Err(EntryError::Description { name, forbidden, description: text::quote(&raw.description, SHOWN) });
    }
    let kind = match raw.kind.as_str() {
        "skill-md" => EntryKind::SkillMd,
        "archive" => EntryKind::Archive,
        other => return Err(EntryError::Kind { name, kind: text::quote(other, SHOWN) }),
    };
    let url = match index.join(&raw.url) {
        Ok(url) => url,
        Err(source) => return Err(EntryError::Url { name, url: text::quote(&raw.url, SHOWN), source }),
    };
    // A local file is read only for a local index: a remote index may not point into the
    // disk of whoever reads it.
    let scheme_ok = match url.scheme() {
        "https" | "http" => true,
        "file" => index.scheme() == "file",
        _ => false,
    };
    if !scheme_ok {
        return Err(EntryError::Scheme { name, url: text::quote(url.as_str(), SHOWN) });
    }
    let digest = raw.digest.to_ascii_lowercase();
    let hex_ok = digest.strip_prefix("sha256:").is_some_and(|hex| hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()));
    if !hex_ok {
        return Err(EntryError::Digest { name, digest: text::quote(&raw.digest, SHOWN) });
    }
    Ok(IndexEntry { name, description: raw.description, kind, url, digest })
}

/// `sha256:HEX` of `bytes`: an entry's digest.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A skill to publish in an index.
#[derive(Clone, Debug)]
pub struct PublishedSkill {
    /// Its name.
    pub name: SkillName,
    /// Its description.
    pub description: String,
    /// Its files: relative `/`-separated path to contents.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// An index and its artifacts, to serve under [`WELL_KNOWN`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// `index.json`.
    pub index_json: Vec<u8>,
    /// Each artifact by its path under [`WELL_KNOWN`] (`NAME.tar.gz`, `NAME/SKILL.md`).
    pub artifacts: BTreeMap<String, Vec<u8>>,
}

/// The index of `skills` and their artifacts, the same bytes for the same skills: a skill
/// that is only a `SKILL.md` as `skill-md`, any other as an `archive` (`NAME.tar.gz`),
/// sorted by name. A name given twice, or a description an index reader would refuse, is
/// refused.
pub fn publish(skills: &[PublishedSkill]) -> Result<Published, IndexError> {
    let refuse = |reason: String| IndexError::Refused { url: format!("{WELL_KNOWN}index.json"), reason };
    let mut sorted: Vec<&PublishedSkill> = skills.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0].name == pair[1].name) {
        return Err(refuse(format!("the skill {} is published twice", pair[0].name)));
    }
    if sorted.len() > MAX_ENTRIES {
        return Err(refuse(format!("{} skills, more than the {MAX_ENTRIES} an index may list", sorted.len())));
    }
    let mut artifacts = BTreeMap::new();
    let mut entries = Vec::with_capacity(sorted.len());
    for skill in sorted {
        if let Err(forbidden) = text::check(&skill.description, TextKind::Prose) {
            return Err(refuse(format!("the description of {} holds {forbidden}", skill.name)));
        }
        let only_skill_md = skill.files.len() == 1 && skill.files.contains_key(SKILL_MD);
        let (kind, file, bytes) = match skill.files.get(SKILL_MD) {
            Some(bytes) if only_skill_md => (EntryKind::SkillMd, format!("{}/{SKILL_MD}", skill.name), bytes.clone()),
            _ => (EntryKind::Archive, format!("{}.tar.gz", skill.name), crate::archive::pack_tar_gz(&skill.files)),
        };
        entries.push(RawEntry {
            name: skill.name.to_string(),
            kind: kind.as_str().to_owned(),
            description: skill.description.clone(),
            url: format!("{WELL_KNOWN}{file}"),
            digest: sha256(&bytes),
        });
        artifacts.insert(file, bytes);
    }
    let index = RawIndex { schema: SCHEMA.to_owned(), skills: entries };
    let mut index_json = serde_json::to_vec_pretty(&index).expect("an index of strings serialises");
    index_json.push(b'\n');
    Ok(Published { index_json, artifacts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://skills.example.com/team/.well-known/agent-skills/index.json").unwrap()
    }

    fn index(skills: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"$schema": SCHEMA, "skills": skills})).unwrap()
    }

    fn entry(name: &str, kind: &str, description: &str, url: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "type": kind, "description": description, "url": url, "digest": format!("sha256:{}", "A".repeat(64))})
    }

    #[test]
    fn urls_resolve_against_the_index() {
        let bytes = index(serde_json::json!([
            entry("code-review", "skill-md", "Reviews code.\nCarefully.", "/.well-known/agent-skills/code-review/SKILL.md"),
            entry("wrangler", "archive", "Wrangles.", "wrangler.tar.gz"),
            entry("cdn", "archive", "Elsewhere.", "https://cdn.example.net/cdn.zip"),
        ]));
        let index = parse(&url(), &bytes).unwrap();
        let urls: Vec<&str> = index.skills.iter().map(|e| e.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://skills.example.com/.well-known/agent-skills/code-review/SKILL.md",
                "https://skills.example.com/team/.well-known/agent-skills/wrangler.tar.gz",
                "https://cdn.example.net/cdn.zip",
            ]
        );
        assert_eq!(index.skills[0].kind, EntryKind::SkillMd);
        assert_eq!(index.skills[0].digest, format!("sha256:{}", "a".repeat(64)));
        let err = index.entry(Some("nope")).unwrap_err().to_string();
        assert!(err.contains("code-review, wrangler, cdn"), "{err}");
        let err = index.entry(None).unwrap_err().to_string();
        assert!(err.contains("#skill=NAME") && err.contains("wrangler"), "{err}");
    }

    #[test]
    fn hostile_indexes_are_refused() {
        let legacy = serde_json::to_vec(&serde_json::json!({"skills": [{"name": "a1", "files": ["SKILL.md"]}]})).unwrap();
        let err = parse(&url(), &legacy).unwrap_err().to_string();
        assert!(err.contains("0.2.0") && err.contains("legacy"), "{err}");
        let other = serde_json::to_vec(&serde_json::json!({"$schema": "https://x/9.0.0/schema.json", "skills": []})).unwrap();
        assert!(parse(&url(), &other).unwrap_err().to_string().contains("0.2.0"));
        let cases = [
            (serde_json::json!([entry("../x", "archive", "d", "x.tar.gz")]), "not a plain skill name"),
            (serde_json::json!([entry("a1", "archive", "d", "x.tar.gz"), entry("a1", "archive", "d", "y.tar.gz")]), "twice"),
            (serde_json::json!([entry("a1", "archive", "evil\u{1b}[2J", "x.tar.gz")]), "\\x1b[2J"),
            (serde_json::json!([entry("a1", "exe", "d", "x")]), "skill-md` or `archive"),
            (serde_json::json!([entry("a1", "archive", "d", "file:///etc/passwd")]), "not an https"),
            (serde_json::json!([{"name": "a1", "type": "archive", "description": "d", "url": "x", "digest": "md5:00"}]), "sha256"),
        ];
        for (skills, said) in cases {
            let err = parse(&url(), &index(skills)).unwrap_err().to_string();
            assert!(err.contains(said), "{err} (expected {said})");
            assert!(!err.contains('\u{1b}'), "{err}");
        }
        let many: Vec<_> = (0..=MAX_ENTRIES).map(|i| entry(&format!("s{i}"), "archive", "d", "x")).collect();
        assert!(parse(&url(), &index(serde_json::Value::Array(many))).unwrap_err().to_string().contains("more than"));
        let huge = vec![b' '; MAX_INDEX_BYTES as usize + 1];
        assert!(matches!(parse(&url(), &huge), Err(IndexError::TooLarge { .. })));
    }

    #[test]
    fn publishing_is_deterministic_and_reads_back() {
        let skill = |name: &str, files: &[(&str, &str)]| PublishedSkill {
            name: SkillName::new(name).unwrap(),
            description: format!("The {name} skill."),
            files: files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec())).collect(),
        };
        let skills = [skill("wrangler", &[("SKILL.md", "w"), ("scripts/a.sh", "echo")]), skill("code-review", &[("SKILL.md", "r")])];
        let published = publish(&skills).unwrap();
        let reversed = [skills[1].clone(), skills[0].clone()];
        assert_eq!(published, publish(&reversed).unwrap());
        let root = Url::parse("https://h.example/.well-known/agent-skills/index.json").unwrap();
        let index = parse(&root, &published.index_json).unwrap();
        let names: Vec<(&str, EntryKind, &str)> = index.skills.iter().map(|e| (e.name.as_str(), e.kind, e.url.path())).collect();
        assert_eq!(
            names,
            [
                ("code-review", EntryKind::SkillMd, "/.well-known/agent-skills/code-review/SKILL.md"),
                ("wrangler", EntryKind::Archive, "/.well-known/agent-skills/wrangler.tar.gz"),
            ]
        );
        for entry in &index.skills {
            let file = entry.url.path().strip_prefix(WELL_KNOWN).unwrap();
            assert_eq!(sha256(&published.artifacts[file]), entry.digest);
        }
        assert!(publish(&[skills[0].clone(), skills[0].clone()]).is_err());
        let mut bad = skills[0].clone();
        bad.description = "x\u{202E}y".into();
        assert!(publish(&[bad]).is_err());
    }
}
