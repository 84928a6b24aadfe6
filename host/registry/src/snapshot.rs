//! Reading a skill from disk, once: which paths in the layers are skills
//! ([`candidates`], [`names_in`]), a [`Snapshot`] of all its files (no symlinks, even
//! one swapped in mid-read: see `nofollow`; size caps), the content hash over exactly
//! those bytes, and the [`Parsed`] skill built from them. Hash and load see the same bytes, so an approval can never bind to one version
//! while another runs.
//!
//! A folder whose skill.toml has a `[server]` section is a stdio MCP server skill: no
//! skill.wasm, and its code is the folder's files exactly as hashed.
//! A folder with a skill.wasm and no skill.toml is read as a bare `NAME.wasm` is (its
//! embedded manifest, or a generic component named after the folder).
//!
//! **Content hash.** For a `NAME.wasm`, SHA-256 of its bytes. For a folder, SHA-256 over
//! its files sorted by relative path (`/`-separated), each as `path NUL length(u64 LE)
//! contents`. Excluded, as host-, tool- or editor-managed state: every path with a
//! component starting with `.` (`.git/`, `.DS_Store`, editor swap files, staging dirs)
//! and a top-level `target/` (cargo's build output; the component that runs is
//! `skill.wasm`). Empty directories do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use skillhost_core::{LoadError, ManifestError, SkillCode, SkillManifest, SkillName, SkillSource};
use skillhost_wasm::package;

use crate::config::{Layer, SizeLimits};
use crate::error::RegistryError;
use crate::nofollow::{self, Kind};
use crate::pack::{self, PackRef};
use crate::skillmd::{self, Frontmatter};

/// One place a skill was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub layer: Layer,
    pub path: PathBuf,
}

/// Whether a directory entry is excluded from skills and hashes.
fn excluded(name: &str) -> bool {
    name.starts_with('.')
}

/// The skill name a layer entry stands for: `NAME.wasm` or `NAME/`.
pub(crate) fn entry_name(path: &Path) -> Option<SkillName> {
    let file = path.file_name()?.to_str()?;
    if excluded(file) {
        return None;
    }
    SkillName::new(file.strip_suffix(".wasm").unwrap_or(file)).ok()
}

/// Every skill name present in `dir`, a directory of `layer` (sorted). Entries that are
/// not skills, are hidden or have an invalid name are skipped (the latter with a
/// warning).
pub(crate) fn names_in(layer: Layer, dir: &Path) -> BTreeSet<SkillName> {
    let Ok(entries) = std::fs::read_dir(dir) else { return BTreeSet::new() };
    let mut names = BTreeSet::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else { continue };
        if excluded(file) {
            continue;
        }
        if !is_candidate(layer, &path) {
            if layer != Layer::External && pack::is_pack(&path) {
                names.extend(pack::names_in(&path));
            }
            continue;
        }
        match entry_name(&path) {
            Some(name) => {
                names.insert(name);
            }
            None => {
                tracing::warn!(path = %path.display(), "skipping a skill with an invalid name; use lowercase letters, digits and inner hyphens")
            }
        }
    }
    names
}

/// Whether `path` is a skill form in `layer`: a `.wasm` file, or a folder with
/// skill.toml, skill.wasm or SKILL.md; in an external layer (an Agent Skills folder) only
/// a folder with SKILL.md. A symlink in either place counts (and fails to read, with its
/// error).
fn is_candidate(layer: Layer, path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
    let wasm = path.extension().is_some_and(|e| e == "wasm");
    if meta.is_symlink() {
        return layer != Layer::External || !wasm;
    }
    if layer == Layer::External {
        return meta.is_dir() && !wasm && path.join("SKILL.md").exists();
    }
    if meta.is_dir() {
        return !wasm && ["skill.toml", "skill.wasm", "SKILL.md"].iter().any(|file| path.join(file).exists());
    }
    meta.is_file() && wasm
}

/// Where `name` is found, in precedence order. Within one layer a folder comes before
/// a `.wasm` of the same name (which it shadows), and both before skill-pack files. An
/// external layer holds only folders.
pub(crate) fn candidates(layers: &[(Layer, PathBuf)], name: &SkillName) -> Vec<Candidate> {
    let mut found = Vec::new();
    for (layer, dir) in layers {
        for path in [dir.join(name.as_str()), dir.join(format!("{name}.wasm"))] {
            if is_candidate(*layer, &path) {
                found.push(Candidate { layer: *layer, path });
            }
        }
        if *layer != Layer::External {
            found.extend(pack::candidates(dir, name).into_iter().map(|path| Candidate { layer: *layer, path }));
        }
    }
    found
}

/// How many bytes of code the skill `name` would load from its highest-precedence
/// candidate (a `.wasm` file, a folder's `skill.wasm`; 0 for anything else), from file
/// sizes alone: the cost to order loads by.
pub(crate) fn code_size(layers: &[(Layer, PathBuf)], name: &SkillName) -> u64 {
    let Some(winner) = candidates(layers, name).into_iter().next() else { return 0 };
    let file = if winner.path.is_dir() { winner.path.join("skill.wasm") } else { winner.path };
    std::fs::symlink_metadata(file).map_or(0, |m| if m.is_file() { m.len() } else { 0 })
}

/// All the bytes of one skill, read once.
#[derive(Clone, Debug)]
pub(crate) enum Snapshot {
    /// A `NAME.wasm` file.
    Wasm { path: PathBuf, bytes: Vec<u8> },
    /// A folder: relative path (`/`-separated) to contents.
    Folder { path: PathBuf, files: BTreeMap<String, Vec<u8>> },
    /// One file of a skill pack, with its pack's `pack.toml`.
    Pack { path: PathBuf, manifest: Vec<u8>, bytes: Vec<u8> },
}

impl Snapshot {
    /// Read the skill at `path`, refusing symlinks and special files and enforcing
    /// `limits`.
    pub fn read(path: &Path, limits: &SizeLimits) -> Result<Self, RegistryError> {
        if pack::is_pack_file(path) {
            let (manifest, bytes) = pack::read(path, limits)?;
            return Ok(Snapshot::Pack { path: path.to_owned(), manifest, bytes });
        }
        let (seen, fd) = nofollow::open_path(path)?;
        if seen.kind == Kind::File {
            check_size(path, "the component", seen.len, limits.component)?;
            let bytes = nofollow::read_capped(fd, limits.component, path)?;
            check_size(path, "the component", bytes.len() as u64, limits.component)?;
            return Ok(Snapshot::Wasm { path: path.to_owned(), bytes });
        }
        let mut files = BTreeMap::new();
        let mut text_total = 0;
        read_dir_into(&fd, path, "", limits, &mut files, &mut text_total)?;
        Ok(Snapshot::Folder { path: path.to_owned(), files })
    }

    /// The content hash (see the module docs), lowercase hex.
    pub fn content_hash(&self) -> String {
        let mut hasher = Sha256::new();
        match self {
            Snapshot::Wasm { bytes, .. } => hasher.update(bytes),
            Snapshot::Folder { files, .. } => {
                for (path, bytes) in files {
                    hash_file(&mut hasher, path, bytes);
                }
            }
            Snapshot::Pack { path, manifest, bytes } => {
                // As a folder of these two files, sorted by name.
                let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let mut files = [(pack::PACK_MANIFEST, manifest), (file, bytes)];
                files.sort();
                for (path, bytes) in files {
                    hash_file(&mut hasher, path, bytes);
                }
            }
        }
        hex::encode(hasher.finalize())
    }

    /// Build the skill these bytes describe.
    pub fn parse(&self) -> Result<Parsed, RegistryError> {
        match self {
            Snapshot::Wasm { path, bytes } => {
                let not_component = |e: package::FormatError| LoadError::NotAComponent { path: path.clone(), reason: e.to_string() };
                package::check_component(bytes).map_err(not_component)?;
                // The embedded manifest, or for a generic component none (it asks for nothing).
                let manifest = package::component_manifest(bytes, path)?;
                let instructions = embedded_instructions(bytes, path)?;
                let code = SkillCode::Wasm { path: path.clone(), bytes: Arc::from(bytes.as_slice()) };
                Ok(Parsed::Code(SkillSource { manifest, origin: path.clone(), code, instructions }))
            }
            Snapshot::Folder { path, files } => {
                let instructions = files.get("SKILL.md").map(|md| utf8(md, &path.join("SKILL.md"))).transpose()?;
                let Some(toml) = files.get("skill.toml") else {
                    if let Some(bytes) = files.get("skill.wasm") {
                        // No skill.toml: the component is read as a bare `NAME.wasm` is,
                        // named after the folder.
                        return Ok(Parsed::Code(package::folder_component(path, bytes, instructions)?));
                    }
                    return instructions_only(path, instructions);
                };
                let manifest = SkillManifest::parse_bytes(toml, &path.join("skill.toml")).map_err(LoadError::from)?;
                if manifest.server.is_some() {
                    // A stdio MCP server: the runtime runs exactly these (hashed) files.
                    if files.contains_key("skill.wasm") {
                        return Err(LoadError::from(ManifestError {
                            file: path.join("skill.toml"),
                            position: None,
                            message: "the folder has both a `[server]` section and a skill.wasm".into(),
                            fix: "remove `[server]` to run the component, or remove skill.wasm to run the server".into(),
                        })
                        .into());
                    }
                    let code = SkillCode::Server { dir: path.clone(), files: Arc::new(files.clone()) };
                    return Ok(Parsed::Code(SkillSource { manifest, origin: path.clone(), code, instructions }));
                }
                let wasm_path = path.join("skill.wasm");
                let bytes = files.get("skill.wasm").ok_or_else(|| LoadError::NotBuilt { dir: path.clone() })?;
                let instructions = match instructions {
                    Some(text) => Some(text),
                    None => embedded_instructions(bytes, &wasm_path)?,
                };
                let code = SkillCode::Wasm { path: wasm_path, bytes: Arc::from(bytes.as_slice()) };
                Ok(Parsed::Code(SkillSource { manifest, origin: path.clone(), code, instructions }))
            }
            Snapshot::Pack { path, manifest, bytes } => {
                let skill = pack::parse(path, manifest, bytes)?;
                Ok(Parsed::Instructions(Instructions {
                    name: skill.name,
                    description: skill.description,
                    text: skill.instructions,
                    frontmatter: None,
                    pack: Some(skill.pack),
                }))
            }
        }
    }

    /// Build the instruction-only skill these bytes describe, whatever else they hold:
    /// how a skill of an external layer (an Agent Skills folder) is read. Only a folder's
    /// SKILL.md counts; its other files (a skill.toml, a component, scripts) are
    /// resources, never code.
    pub fn parse_instructions(&self) -> Result<Parsed, RegistryError> {
        match self {
            Snapshot::Folder { path, files } => {
                let text = files.get("SKILL.md").map(|md| utf8(md, &path.join("SKILL.md"))).transpose()?;
                instructions_only(path, text)
            }
            Snapshot::Wasm { path, .. } | Snapshot::Pack { path, .. } => Err(RegistryError::NotASkill { path: path.clone() }),
        }
    }

    /// Write the snapshot to `target` (a `.wasm` path or a folder that does not exist).
    pub fn write_to(&self, target: &Path) -> Result<(), RegistryError> {
        match self {
            Snapshot::Wasm { bytes, .. } => std::fs::write(target, bytes).map_err(RegistryError::io(target, "cannot write")),
            Snapshot::Folder { files, .. } => {
                std::fs::create_dir(target).map_err(RegistryError::io(target, "cannot create"))?;
                for (relative, bytes) in files {
                    let file = target.join(relative);
                    if let Some(parent) = file.parent() {
                        std::fs::create_dir_all(parent).map_err(RegistryError::io(parent, "cannot create"))?;
                    }
                    std::fs::write(&file, bytes).map_err(RegistryError::io(&file, "cannot write"))?;
                }
                Ok(())
            }
            Snapshot::Pack { path, .. } => Err(pack::not_installable(path)),
        }
    }
}

/// The instruction-only skill of the folder at `path` whose SKILL.md is `text`.
fn instructions_only(path: &Path, text: Option<String>) -> Result<Parsed, RegistryError> {
    let md_path = path.join("SKILL.md");
    let text = text.ok_or_else(|| RegistryError::NotASkill { path: path.to_owned() })?;
    let frontmatter = skillmd::parse(&text, &md_path)?;
    let name = skillmd::check_name_rules(&frontmatter.name, &md_path)?;
    Ok(Parsed::Instructions(Instructions {
        name,
        description: frontmatter.description.clone(),
        text,
        frontmatter: Some(frontmatter),
        pack: None,
    }))
}

/// One file of a folder hash: `path NUL length(u64 LE) contents`.
fn hash_file(hasher: &mut Sha256, path: &str, bytes: &[u8]) {
    hasher.update(path.as_bytes());
    hasher.update([0]);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

/// Read every file under the open directory `dir_fd` (at `dir`), never following a
/// symlink (see `nofollow`).
fn read_dir_into(
    dir_fd: &OwnedFd,
    dir: &Path,
    prefix: &str,
    limits: &SizeLimits,
    files: &mut BTreeMap<String, Vec<u8>>,
    text_total: &mut u64,
) -> Result<(), RegistryError> {
    for c_name in nofollow::names(dir_fd, dir)? {
        let path = dir.join(OsStr::from_bytes(c_name.as_bytes()));
        let Ok(name) = c_name.to_str() else {
            return Err(RegistryError::BadPath { path, reason: "the file name is not UTF-8" });
        };
        if excluded(name) || (prefix.is_empty() && name == "target") {
            continue;
        }
        let relative = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") };
        let seen = nofollow::classify(dir_fd, &c_name, &path)?;
        if seen.kind == Kind::Dir {
            let fd = nofollow::open(dir_fd, &c_name, &path, &seen)?;
            read_dir_into(&fd, &path, &relative, limits, files, text_total)?;
            continue;
        }
        let component = name.ends_with(".wasm");
        let cap = if component { limits.component } else { limits.text_file };
        let what = if component { "the component" } else { "this file" };
        check_size(&path, what, seen.len, cap)?;
        let fd = nofollow::open(dir_fd, &c_name, &path, &seen)?;
        let bytes = nofollow::read_capped(fd, cap, &path)?;
        check_size(&path, what, bytes.len() as u64, cap)?;
        if !component {
            *text_total += bytes.len() as u64;
            check_size(dir, "the skill's text", *text_total, limits.text_total)?;
        }
        files.insert(relative, bytes);
    }
    Ok(())
}

fn check_size(path: &Path, what: &'static str, size: u64, limit: u64) -> Result<(), RegistryError> {
    if size <= limit {
        return Ok(());
    }
    let fix = match what {
        "the component" => "build it smaller (release profile, strip debug info) or raise the component size cap",
        "this file" => "keep text files under the cap; split it or move it out of the skill",
        _ => "move large files out of the skill",
    };
    Err(RegistryError::TooLarge { path: path.to_owned(), what, size, limit, fix })
}

/// What a snapshot holds.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant, reason = "one per scan, moved once")]
pub(crate) enum Parsed {
    /// Code to load: a manifest and a component.
    Code(SkillSource),
    /// A folder with only SKILL.md, or a skill-pack file.
    Instructions(Instructions),
}

/// An instruction-only skill.
#[derive(Clone, Debug)]
pub(crate) struct Instructions {
    pub name: SkillName,
    pub description: String,
    /// What an agent reads: the SKILL.md, or the pack file rendered as Markdown.
    pub text: String,
    /// The SKILL.md's frontmatter.
    pub frontmatter: Option<Frontmatter>,
    /// The pack it comes from.
    pub pack: Option<PackRef>,
}

impl Parsed {
    /// The name the skill declares.
    pub fn name(&self) -> &SkillName {
        match self {
            Parsed::Code(source) => &source.manifest.name,
            Parsed::Instructions(instructions) => &instructions.name,
        }
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn utf8(bytes: &[u8], path: &Path) -> Result<String, RegistryError> {
    String::from_utf8(bytes.to_vec()).map_err(|e| {
        LoadError::Manifest(ManifestError {
            file: path.to_owned(),
            position: None,
            message: format!("not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to()),
            fix: "save it as UTF-8".into(),
        })
        .into()
    })
}

fn embedded_instructions(bytes: &[u8], path: &Path) -> Result<Option<String>, RegistryError> {
    match package::read_section(bytes, package::INSTRUCTIONS_SECTION) {
        Ok(Some(data)) => utf8(data, &suffixed(path, "#SKILL.md")).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(LoadError::NotAComponent { path: path.to_owned(), reason: e.to_string() }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_covers_paths_and_contents() {
        let folder = |files: &[(&str, &str)]| Snapshot::Folder {
            path: PathBuf::from("x"),
            files: files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec())).collect(),
        };
        let base = folder(&[("a", "1"), ("b/c", "2")]).content_hash();
        assert_eq!(base, folder(&[("b/c", "2"), ("a", "1")]).content_hash(), "order of reading does not matter");
        assert_ne!(base, folder(&[("a", "1"), ("b/c", "3")]).content_hash());
        assert_ne!(base, folder(&[("a", "1"), ("b/d", "2")]).content_hash());
        assert_ne!(folder(&[("a", "12")]).content_hash(), folder(&[("a1", "2")]).content_hash(), "no ambiguity between path and contents");
    }
}
