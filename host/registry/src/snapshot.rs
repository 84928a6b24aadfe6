//! Which paths in the layers are skills ([`candidates`], [`names_in`]), and a
//! [`Snapshot`] of one: a `.wasm` or a folder as the package reader reads it (no symlinks,
//! even one swapped in mid-read; size caps; the content hash over exactly those bytes:
//! see `skillhost_package::Snapshot`), or one file of a skill pack. [`Snapshot::parse`]
//! builds the [`Parsed`] skill from the same bytes the hash covers, so an approval can
//! never bind to one version while another runs. A folder without code (only SKILL.md)
//! is an instruction-only skill.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost_core::{SkillName, SkillSource};
use skillhost_package::{self as package, SizeLimits, excluded};

use crate::config::Layer;
use crate::error::RegistryError;
use crate::pack::{self, PackRef};
use crate::skillmd::{self, Frontmatter};

/// One place a skill was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub layer: Layer,
    pub path: PathBuf,
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
    /// A `NAME.wasm` file or a folder.
    Package(package::Snapshot),
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
        Ok(Snapshot::Package(package::Snapshot::read(path, limits)?))
    }

    /// The content hash (see `skillhost_package::Snapshot`), lowercase hex; a pack file
    /// hashes as a folder of itself and its `pack.toml`.
    pub fn content_hash(&self) -> String {
        match self {
            Snapshot::Package(snapshot) => snapshot.content_hash(),
            Snapshot::Pack { path, manifest, bytes } => {
                let file = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                package::folder_hash([(pack::PACK_MANIFEST, manifest.as_slice()), (file, bytes.as_slice())])
            }
        }
    }

    /// Build the skill these bytes describe.
    pub fn parse(&self) -> Result<Parsed, RegistryError> {
        match self {
            Snapshot::Package(snapshot) => match snapshot.source()? {
                Some(source) => Ok(Parsed::Code(source)),
                None => instructions_only(snapshot.path(), snapshot.skill_md()?),
            },
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

    /// The content hash of these bytes, parsed as `parsed`: a skill with code carries it
    /// (computed once, as it was read), an instruction-only one is hashed now.
    pub fn hash_of(&self, parsed: &Parsed) -> String {
        match parsed {
            Parsed::Code(source) => source.content_hash.clone(),
            Parsed::Instructions(_) => self.content_hash(),
        }
    }

    /// A folder's files as read, except its component (`skill.wasm`, which its code holds):
    /// what [`Loaded::files`](crate::Loaded::files) serves. None for a single `.wasm` or
    /// a pack file.
    pub fn into_files(self) -> Arc<BTreeMap<String, Vec<u8>>> {
        match self {
            Snapshot::Package(package::Snapshot::Folder { mut files, .. }) => {
                files.remove("skill.wasm");
                Arc::new(files)
            }
            Snapshot::Package(package::Snapshot::Wasm { .. }) | Snapshot::Pack { .. } => Arc::default(),
        }
    }

    /// Build the instruction-only skill these bytes describe, whatever else they hold:
    /// how a skill of an external layer (an Agent Skills folder) is read. Only a folder's
    /// SKILL.md counts; its other files (a skill.toml, a component, scripts) are
    /// resources, never code.
    pub fn parse_instructions(&self) -> Result<Parsed, RegistryError> {
        match self {
            Snapshot::Package(snapshot @ package::Snapshot::Folder { path, .. }) => instructions_only(path, snapshot.skill_md()?),
            Snapshot::Package(package::Snapshot::Wasm { path, .. }) | Snapshot::Pack { path, .. } => {
                Err(RegistryError::NotASkill { path: path.clone() })
            }
        }
    }

    /// Write the snapshot to `target` (a `.wasm` path or a folder that does not exist).
    pub fn write_to(&self, target: &Path) -> Result<(), RegistryError> {
        match self {
            Snapshot::Package(snapshot) => snapshot.write_to(target).map_err(RegistryError::io(target, "cannot write")),
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
