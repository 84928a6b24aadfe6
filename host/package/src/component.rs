//! A component as a skill: the manifest and instructions it carries in custom sections
//! ([`pack`] writes them, as `skillhost build` and the forge do), or for a generic
//! component without them, a manifest that asks for nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost_core::{LoadError, ManifestError, SkillCode, SkillManifest, SkillName, SkillSource};

use crate::reflect::reflect;
use crate::sections::{FormatError, INSTRUCTIONS_SECTION, MANIFEST_SECTION, check_component, embed, read_section};

/// Largest SKILL.md the host reads.
const MAX_INSTRUCTIONS: usize = 1 << 20;

/// Embed `manifest` (a skill.toml) and `instructions` (a SKILL.md) into `component`: one
/// self-describing skill, as `skillhost build` writes it.
pub fn pack(component: &[u8], manifest: &[u8], instructions: Option<&[u8]>) -> Result<Vec<u8>, FormatError> {
    let mut sections: Vec<(&str, &[u8])> = vec![(MANIFEST_SECTION, manifest)];
    if let Some(md) = instructions {
        sections.push((INSTRUCTIONS_SECTION, md));
    }
    embed(component, &sections)
}

/// A folder holding a skill.wasm and no skill.toml, read as a bare `NAME.wasm` is: the
/// manifest `skillhost build` embedded, or for a generic component one that asks for
/// nothing, named after the folder. A component of the skill world without an embedded
/// manifest is refused with [`LoadError::NoManifest`], which names the skill.toml to add.
/// `instructions` is the folder's SKILL.md, if it has one; else the embedded one is used.
pub fn folder_component(dir: &Path, bytes: &[u8], instructions: Option<String>, content_hash: String) -> Result<SkillSource, LoadError> {
    let wasm_path = dir.join("skill.wasm");
    let not_component = |e: FormatError| LoadError::NotAComponent { path: wasm_path.clone(), reason: e.to_string() };
    check_component(bytes).map_err(not_component)?;
    let embedded = read_section(bytes, MANIFEST_SECTION).map_err(not_component)?.is_some();
    let mut manifest = component_manifest(bytes, &wasm_path)?;
    if !embedded && let Some(name) = dir.file_name().and_then(|n| n.to_str()).and_then(|n| SkillName::new(n).ok()) {
        manifest.name = name;
    }
    let instructions = match instructions {
        Some(text) => Some(text),
        None => embedded_instructions(bytes, &wasm_path)?,
    };
    let code = SkillCode::Wasm { path: wasm_path, bytes: Arc::from(bytes) };
    Ok(SkillSource { manifest, origin: dir.to_owned(), code, instructions, content_hash })
}

/// The manifest of a `.wasm` file: the embedded `skill.toml`, or for a generic component
/// (one that does not export our world) without one, a manifest that asks for nothing:
/// the name is the file's stem, the description lists its exports. Capabilities come
/// only from a sidecar skill.toml (a folder) and the human's approval.
pub fn component_manifest(bytes: &[u8], path: &Path) -> Result<SkillManifest, LoadError> {
    let not_component = |e: FormatError| LoadError::NotAComponent { path: path.to_owned(), reason: e.to_string() };
    if let Some(manifest) = read_section(bytes, MANIFEST_SECTION).map_err(not_component)? {
        return Ok(SkillManifest::parse_bytes(manifest, &PathBuf::from(format!("{}#skill.toml", path.display())))?);
    }
    let reflection = reflect(bytes).map_err(not_component)?;
    if reflection.is_skill {
        return Err(LoadError::NoManifest { path: path.to_owned() });
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = SkillName::new(stem).map_err(|e| {
        LoadError::Manifest(ManifestError {
            file: path.to_owned(),
            position: None,
            message: format!("a component without a skill.toml is named after its file, and {e}"),
            fix: "rename the file, or put it in a folder as skill.wasm beside a skill.toml".into(),
        })
    })?;
    let mut description = format!("component exports {}", reflection.exports.join(", "));
    if description.len() > 1000 {
        let mut cut = 1000;
        while !description.is_char_boundary(cut) {
            cut -= 1;
        }
        description.truncate(cut);
        description.push_str("...");
    }
    Ok(SkillManifest {
        name,
        version: "0.0.0".into(),
        description,
        search: Default::default(),
        files: Vec::new(),
        limits: Default::default(),
        network: Default::default(),
        secrets: Vec::new(),
        server: None,
    })
}

/// The SKILL.md a component carries, if any.
pub fn embedded_instructions(bytes: &[u8], path: &Path) -> Result<Option<String>, LoadError> {
    match read_section(bytes, INSTRUCTIONS_SECTION) {
        Ok(Some(data)) => text(data, &PathBuf::from(format!("{}#SKILL.md", path.display()))).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(LoadError::NotAComponent { path: path.to_owned(), reason: e.to_string() }),
    }
}

/// A SKILL.md's bytes as text: UTF-8, at most 1 MiB.
pub(crate) fn text(bytes: &[u8], path: &Path) -> Result<String, LoadError> {
    let bad =
        |message: String, fix: &str| LoadError::Manifest(ManifestError { file: path.to_owned(), position: None, message, fix: fix.into() });
    if bytes.len() > MAX_INSTRUCTIONS {
        return Err(bad(format!("SKILL.md is {} bytes, more than 1 MiB", bytes.len()), "keep SKILL.md under 1 MiB"));
    }
    String::from_utf8(bytes.to_vec())
        .map_err(|e| bad(format!("not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to()), "save it as UTF-8"))
}
