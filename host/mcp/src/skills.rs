//! The MCP Skills extension (`io.modelcontextprotocol/skills`): `skills/list` and
//! `skills/get` describe each skill as the URI of its `SKILL.md`
//! (`skill://NAME/SKILL.md`), its frontmatter, and a manifest of its files with the
//! SHA-256 digest and size of each; clients read the files with `resources/read` of
//! `skill://NAME/PATH`, which serves the same bytes.
//!
//! Only skills a human approved, and that have SKILL.md instructions, are served: a
//! skill pending review, rejected or disabled is absent from `skills/list`, and
//! `skills/get` refuses it naming the command that approves it.
//! `resources/directory/read` of `skill://NAME` or `skill://NAME/FOLDER` lists a
//! folder's files and subfolders among those the manifest serves. What a file is, and
//! whether it is served, is decided in one place ([`knowledge::served`]), for reads and
//! manifests alike, so a manifest hashes exactly the bytes a read returns: the snapshot
//! the registry read and hashed when it loaded the skill, never the live folder.
//!
//! The frontmatter is the one the registry parsed and checked with the text rules when
//! the skill loaded (no control or bidirectional characters): `name`, `description`,
//! `license`, `compatibility`, `metadata` and `allowed-tools` (keys the Agent Skills
//! specification does not define are kept out, as everywhere in skillhost).
//!
//! Bounded: a page holds at most [`PAGE_SIZE`] skills, a manifest at most
//! [`knowledge::MAX_MANIFEST_FILES`] files, each at most
//! [`knowledge::MAX_RESOURCE_BYTES`] (files left out are named in the entry's `_meta`,
//! with why), and digests are computed once per skill version.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, GetSkillResult, ListResourcesResult, ListSkillsResult, MetaObject, Resource, Skill, SkillFrontmatter,
    SkillResource, SkillResources,
};
use serde_json::{Value, json};
use skillhost_access::Action;
use skillhost_registry::{Entry, Registry, TrustState};

use crate::access::Scope;
use crate::knowledge::{self, KnowledgeError, SKILL_MD};

/// Most skills in one `skills/list` page.
pub const PAGE_SIZE: usize = 20;
/// The `_meta` key of an entry listing the files left out of its manifest.
pub const WITHHELD_META: &str = "skillhost/withheld";
/// Most skill versions whose digests are kept.
const MAX_CACHED: usize = 1024;

/// The resource URI of `path` in skill `skill`.
pub fn uri(skill: &str, path: &str) -> String {
    format!("skill://{skill}/{path}")
}

/// A skill's manifest: its files' digests and sizes, and the files left out with why.
struct Manifest {
    files: Vec<SkillResource>,
    withheld: Vec<(String, String)>,
}

/// Manifests by skill, for the version (content hash) they were computed for.
#[derive(Default)]
pub struct Manifests {
    cache: Mutex<HashMap<String, (String, Arc<Manifest>)>>,
}

impl Manifests {
    /// The manifest of `entry`, hashed once per version.
    fn of(&self, entry: &Entry) -> Result<Arc<Manifest>, KnowledgeError> {
        let served = knowledge::served_files(entry)?;
        let version = entry.loaded.as_ref().map(|l| l.content_hash.clone()).unwrap_or_default();
        if let Some((hash, manifest)) = self.cache.lock().get(entry.name.as_str())
            && *hash == version
        {
            return Ok(manifest.clone());
        }
        let name = entry.name.as_str();
        let manifest = Arc::new(Manifest {
            files: served.files.iter().map(|(path, bytes)| SkillResource::from_bytes(uri(name, path), bytes)).collect(),
            withheld: served.withheld.into_iter().map(|(path, why)| (path.to_owned(), why)).collect(),
        });
        let mut cache = self.cache.lock();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(name.to_owned(), (version, manifest.clone()));
        Ok(manifest)
    }
}

/// The `skills/list` entry of `entry`, or why it is not served.
fn skill(entry: &Entry, manifests: &Manifests) -> Result<Skill, KnowledgeError> {
    let manifest = manifests.of(entry)?;
    let name = entry.name.as_str();
    let loaded = entry.loaded.as_ref().ok_or_else(|| KnowledgeError::UnknownSkill(name.to_owned()))?;
    let mut frontmatter = SkillFrontmatter::new(name, knowledge::description(entry));
    if let Some(parsed) = &loaded.frontmatter {
        frontmatter.description = parsed.description.clone();
        if let Some(license) = &parsed.license {
            frontmatter = frontmatter.with_field("license", license.clone());
        }
        if let Some(compatibility) = &parsed.compatibility {
            frontmatter = frontmatter.with_field("compatibility", compatibility.clone());
        }
        if !parsed.metadata.is_empty() {
            frontmatter = frontmatter.with_field("metadata", json!(parsed.metadata));
        }
        if !parsed.allowed_tools.is_empty() {
            // A space-delimited string, as the Agent Skills specification writes it.
            frontmatter = frontmatter.with_field("allowed-tools", parsed.allowed_tools.join(" "));
        }
    }
    let mut skill = Skill::new(uri(name, SKILL_MD), frontmatter, SkillResources::Files(manifest.files.clone()));
    if !manifest.withheld.is_empty() {
        let withheld: Vec<Value> = manifest.withheld.iter().map(|(path, why)| json!({"path": path, "reason": why})).collect();
        let mut meta = MetaObject::new();
        meta.0.insert(WITHHELD_META.to_owned(), Value::Array(withheld));
        skill = skill.with_meta(meta);
    }
    Ok(skill)
}

/// `skills/list`: the approved skills with SKILL.md instructions, by name,
/// [`PAGE_SIZE`] at a time; the cursor is the last name of the previous page.
pub(crate) fn list(registry: &Registry, scope: &Scope, manifests: &Manifests, cursor: Option<&str>) -> Result<ListSkillsResult, ErrorData> {
    if cursor.is_some_and(|c| c.is_empty()) {
        return Err(ErrorData::invalid_params("an empty skills/list cursor: pass the nextCursor of the previous page, or none", None));
    }
    let mut served = knowledge::skills(registry, scope)
        .into_iter()
        .filter(|e| e.state == TrustState::Approved && e.has_instructions())
        .filter(|e| cursor.is_none_or(|after| e.name.as_str() > after))
        .filter_map(|e| skill(&e, manifests).map_err(|why| tracing::warn!(skill = %e.name, %why, "left out of skills/list")).ok());
    let page: Vec<Skill> = served.by_ref().take(PAGE_SIZE).collect();
    let more = served.next().is_some();
    let mut result = ListSkillsResult::with_all_items(page);
    if more {
        result.next_cursor = result.skills.last().map(|s| s.frontmatter.name.clone());
    }
    // The list changes with approvals and reloads.
    Ok(result.with_ttl_ms(0))
}

/// `skills/get` of `uri`: the entry, or an invalid-params error naming the skill and
/// what to do.
pub(crate) fn get(registry: &Registry, scope: &Scope, manifests: &Manifests, uri: &str) -> Result<GetSkillResult, ErrorData> {
    let refuse = |why: String| ErrorData::invalid_params(why, None);
    let name = uri
        .strip_prefix("skill://")
        .and_then(|rest| rest.strip_suffix(&format!("/{SKILL_MD}")))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| refuse(format!("no skill at `{uri}`: skills are at skill://NAME/SKILL.md (see skills/list)")))?;
    let entry = knowledge::known(registry, name).map_err(|e| refuse(e.to_string()))?;
    scope.check_skill(Action::Read, name, Some(&entry)).map_err(|e| refuse(e.to_string()))?;
    let skill = skill(&entry, manifests).map_err(|e| refuse(e.to_string()))?;
    Ok(GetSkillResult::new(skill).with_ttl_ms(0))
}

/// `resources/directory/read` of `uri` (`skill://NAME` for the skill's folder, or
/// `skill://NAME/FOLDER`): the files and folders directly inside, among the files its
/// manifest serves (at most [`knowledge::MAX_MANIFEST_FILES`]), by name.
pub(crate) fn read_directory(registry: &Registry, scope: &Scope, uri: &str) -> Result<ListResourcesResult, ErrorData> {
    let refuse = |why: String| ErrorData::invalid_params(why, None);
    let rest = uri
        .strip_prefix("skill://")
        .ok_or_else(|| refuse(format!("`{uri}` is not a skill folder: folders are skill://NAME or skill://NAME/FOLDER")))?;
    let (name, folder) = rest.trim_end_matches('/').split_once('/').unwrap_or((rest.trim_end_matches('/'), ""));
    let entry = knowledge::known(registry, name).map_err(|e| refuse(e.to_string()))?;
    scope.check_skill(Action::Read, name, Some(&entry)).map_err(|e| refuse(e.to_string()))?;
    let served = knowledge::served_files(&entry).map_err(|e| refuse(e.to_string()))?;
    let prefix = if folder.is_empty() { String::new() } else { format!("{folder}/") };
    let mut children: Vec<Resource> = Vec::new();
    let mut folders = std::collections::BTreeSet::new();
    for (path, bytes) in &served.files {
        let Some(inside) = path.strip_prefix(prefix.as_str()) else { continue };
        match inside.split_once('/') {
            None => children.push(
                Resource::new(self::uri(name, path), inside).with_mime_type(knowledge::mime_type(path)).with_size(bytes.len() as u64),
            ),
            Some((sub, _)) => {
                folders.insert(sub.to_owned());
            }
        }
    }
    if children.is_empty() && folders.is_empty() {
        return Err(refuse(format!(
            "skill `{name}`: `{folder}` is not a folder of the skill; read skills/get's manifest for its files, or skill://{name} for its top folder"
        )));
    }
    children.extend(
        folders.into_iter().map(|sub| Resource::new(self::uri(name, &format!("{prefix}{sub}")), sub).with_mime_type(DIRECTORY_MIME_TYPE)),
    );
    children.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ListResourcesResult::with_all_items(children).with_ttl_ms(0))
}
