//! The skill package format: a component carries its `skill.toml` (and SKILL.md) in
//! top-level custom sections, so one `.wasm` file is a complete, self-describing skill;
//! and [`read_source`], which turns a `.wasm` file or a skill folder into a
//! [`SkillSource`].
//!
//! Custom sections are ignored by every runtime, so an embedded skill still runs
//! anywhere a component runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillhost_core::{LoadError, SkillCode, SkillManifest, SkillSource};

/// Custom section holding the skill's `skill.toml`.
pub const MANIFEST_SECTION: &str = "skillhost:manifest";
/// Custom section holding the skill's `SKILL.md`.
pub const INSTRUCTIONS_SECTION: &str = "skillhost:instructions";

/// Largest SKILL.md the host reads.
const MAX_INSTRUCTIONS: usize = 1 << 20;

const WASM_MAGIC: [u8; 4] = *b"\0asm";
/// Version and layer fields of a component (layer 1); core modules have layer 0.
const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];

pub use crate::generic::{DOCS_SECTION, Reflection, RefusedFunction, docs_section, reflect};

/// Why a binary could not be read as a component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(String);

impl FormatError {
    pub(crate) fn new(message: String) -> Self {
        Self(message)
    }
}

/// What kind of WebAssembly binary `bytes` is.
pub fn check_component(bytes: &[u8]) -> Result<(), FormatError> {
    if bytes.len() < 8 || bytes[..4] != WASM_MAGIC {
        return Err(FormatError("the file does not start with the WebAssembly magic number".into()));
    }
    if bytes[4..8] == COMPONENT_VERSION {
        Ok(())
    } else if bytes[4..8] == [1, 0, 0, 0] {
        Err(FormatError("it is a core module, not a component; build for wasm32-wasip2 or wrap it with `wasm-tools component new`".into()))
    } else {
        Err(FormatError(format!("unknown WebAssembly version {:02x?}", &bytes[4..8])))
    }
}

/// The names a component imports and exports at its top level
/// (`wasi:http/outgoing-handler@0.2.0`, `skillhost:skill/guest@0.1.0`), read from its
/// import and export sections alone: milliseconds, where compiling takes seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    /// Top-level imports, in order.
    pub imports: Vec<String>,
    /// Top-level exports, in order.
    pub exports: Vec<String>,
}

impl Interface {
    /// Read the top-level imports and exports of the component `bytes`.
    pub fn read(bytes: &[u8]) -> Result<Self, FormatError> {
        const IMPORT: u8 = 10;
        const EXPORT: u8 = 11;
        let bad = |e: wasmparser::BinaryReaderError| FormatError(format!("cannot read its imports and exports: {e}"));
        let mut interface = Self::default();
        for section in sections(bytes)? {
            let reader = wasmparser::BinaryReader::new(&bytes[section.content.clone()], section.content.start);
            match section.id {
                IMPORT => {
                    for import in wasmparser::ComponentImportSectionReader::new(reader).map_err(bad)? {
                        interface.imports.push(import.map_err(bad)?.name.name.to_owned());
                    }
                }
                EXPORT => {
                    for export in wasmparser::ComponentExportSectionReader::new(reader).map_err(bad)? {
                        interface.exports.push(export.map_err(bad)?.name.name.to_owned());
                    }
                }
                _ => {}
            }
        }
        Ok(interface)
    }

    /// Whether it imports `wasi:http` (it needs `[network]` to link).
    pub fn imports_http(&self) -> bool {
        self.imports.iter().any(|name| name.starts_with("wasi:http/"))
    }

    /// Whether it exports `name`.
    pub fn exports(&self, name: &str) -> bool {
        self.exports.iter().any(|export| export == name)
    }
}

/// A top-level section: its id and the byte range of its contents.
struct Section {
    id: u8,
    start: usize,
    content: std::ops::Range<usize>,
}

/// Walk the top-level sections of a component without descending into nested ones.
fn sections(bytes: &[u8]) -> Result<Vec<Section>, FormatError> {
    check_component(bytes)?;
    let mut out = Vec::new();
    let mut pos = 8;
    while pos < bytes.len() {
        let start = pos;
        let id = bytes[pos];
        pos += 1;
        let (size, used) = read_leb_u32(&bytes[pos..]).ok_or_else(|| FormatError(format!("truncated section header at byte {start}")))?;
        pos += used;
        let end = pos
            .checked_add(size as usize)
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| FormatError(format!("section at byte {start} runs past the end of the file (truncated?)")))?;
        out.push(Section { id, start, content: pos..end });
        pos = end;
    }
    Ok(out)
}

/// The name and data of a custom section's contents.
fn custom_section(content: &[u8]) -> Option<(&str, &[u8])> {
    let (len, used) = read_leb_u32(content)?;
    let name_end = used.checked_add(len as usize).filter(|e| *e <= content.len())?;
    let name = std::str::from_utf8(&content[used..name_end]).ok()?;
    Some((name, &content[name_end..]))
}

/// Read the custom section `name` of a component, if present.
pub fn read_section<'a>(bytes: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, FormatError> {
    for section in sections(bytes)? {
        if section.id == 0
            && let Some((n, data)) = custom_section(&bytes[section.content.clone()])
            && n == name
        {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// Return `component` with the given custom sections set (replacing earlier ones of the
/// same names, so embedding twice is idempotent).
pub fn embed(component: &[u8], entries: &[(&str, &[u8])]) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::with_capacity(component.len() + entries.iter().map(|(_, d)| d.len() + 32).sum::<usize>());
    out.extend_from_slice(&component[..8]);
    for section in sections(component)? {
        let replaced = section.id == 0
            && custom_section(&component[section.content.clone()]).is_some_and(|(n, _)| entries.iter().any(|(name, _)| *name == n));
        if !replaced {
            out.extend_from_slice(&component[section.start..section.content.end]);
        }
    }
    for (name, data) in entries {
        let mut content = Vec::with_capacity(name.len() + data.len() + 5);
        write_leb_u32(&mut content, name.len() as u32);
        content.extend_from_slice(name.as_bytes());
        content.extend_from_slice(data);
        out.push(0);
        write_leb_u32(&mut out, u32::try_from(content.len()).map_err(|_| FormatError("section too large".into()))?);
        out.extend_from_slice(&content);
    }
    Ok(out)
}

/// Return `component` without its top-level custom sections called `name`.
pub(crate) fn strip_section(component: &[u8], name: &str) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::with_capacity(component.len());
    out.extend_from_slice(&component[..8]);
    for section in sections(component)? {
        let named = section.id == 0 && custom_section(&component[section.content.clone()]).is_some_and(|(n, _)| n == name);
        if !named {
            out.extend_from_slice(&component[section.start..section.content.end]);
        }
    }
    Ok(out)
}

fn read_leb_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut result: u32 = 0;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        result |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

fn write_leb_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Read a skill from disk: a `.wasm` file with an embedded manifest, or a folder with
/// `skill.toml` and `skill.wasm` (and optionally `SKILL.md`). In a folder, the folder's
/// files win over anything embedded in its `skill.wasm`.
pub fn read_source(path: &Path) -> Result<SkillSource, LoadError> {
    let read = |p: &Path| std::fs::read(p).map_err(|source| LoadError::Read { path: p.to_owned(), source });
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Read { path: path.to_owned(), source })?;
    if meta.is_dir() {
        let manifest_path = path.join("skill.toml");
        let wasm_path = path.join("skill.wasm");
        let md_path = path.join("SKILL.md");
        let sidecar = || -> Result<Option<String>, LoadError> {
            if !md_path.exists() {
                return Ok(None);
            }
            Ok(Some(read_instructions(&read(&md_path)?, &md_path)?))
        };
        if !manifest_path.exists() && wasm_path.exists() {
            return folder_component(path, &read(&wasm_path)?, sidecar()?);
        }
        let manifest = SkillManifest::from_file(&manifest_path)?;
        if !wasm_path.exists() {
            return Err(LoadError::NotBuilt { dir: path.to_owned() });
        }
        let bytes = read(&wasm_path)?;
        let instructions = match sidecar()? {
            Some(text) => Some(text),
            None => embedded_instructions(&bytes, &wasm_path)?,
        };
        Ok(SkillSource { manifest, origin: path.to_owned(), code: SkillCode::Wasm { path: wasm_path, bytes: bytes.into() }, instructions })
    } else {
        let bytes = read(path)?;
        // A folder's `skill.wasm` named directly, without a manifest of its own: the
        // folder's skill.toml is its manifest, as when the folder is named.
        let embedded =
            read_section(&bytes, MANIFEST_SECTION).map_err(|e| LoadError::NotAComponent { path: path.to_owned(), reason: e.0 })?;
        let folder = path.parent().filter(|dir| dir.join("skill.toml").is_file());
        if let Some(folder) = folder.filter(|_| embedded.is_none() && path.file_name() == Some(std::ffi::OsStr::new("skill.wasm"))) {
            return read_source(folder);
        }
        let manifest = component_manifest(&bytes, path)?;
        let instructions = embedded_instructions(&bytes, path)?;
        Ok(SkillSource {
            manifest,
            origin: path.to_owned(),
            code: SkillCode::Wasm { path: path.to_owned(), bytes: Arc::from(bytes) },
            instructions,
        })
    }
}

/// A folder holding a skill.wasm and no skill.toml, read as a bare `NAME.wasm` is: the
/// manifest `skillhost build` embedded, or for a generic component one that asks for
/// nothing, named after the folder. A component of the skill world without an embedded
/// manifest is refused with [`LoadError::NoManifest`], which names the skill.toml to add.
/// `instructions` is the folder's SKILL.md, if it has one; else the embedded one is used.
pub fn folder_component(dir: &Path, bytes: &[u8], instructions: Option<String>) -> Result<SkillSource, LoadError> {
    let wasm_path = dir.join("skill.wasm");
    let not_component = |e: FormatError| LoadError::NotAComponent { path: wasm_path.clone(), reason: e.0 };
    check_component(bytes).map_err(not_component)?;
    let embedded = read_section(bytes, MANIFEST_SECTION).map_err(not_component)?.is_some();
    let mut manifest = component_manifest(bytes, &wasm_path)?;
    if !embedded && let Some(name) = dir.file_name().and_then(|n| n.to_str()).and_then(|n| skillhost_core::SkillName::new(n).ok()) {
        manifest.name = name;
    }
    let instructions = match instructions {
        Some(text) => Some(text),
        None => embedded_instructions(bytes, &wasm_path)?,
    };
    let code = SkillCode::Wasm { path: wasm_path, bytes: Arc::from(bytes) };
    Ok(SkillSource { manifest, origin: dir.to_owned(), code, instructions })
}

/// The manifest of a `.wasm` file: the embedded `skill.toml`, or for a generic component
/// (one that does not export our world) without one, a manifest that asks for nothing:
/// the name is the file's stem, the description lists its exports. Capabilities come
/// only from a sidecar skill.toml (a folder) and the human's approval.
pub fn component_manifest(bytes: &[u8], path: &Path) -> Result<SkillManifest, LoadError> {
    let not_component = |e: FormatError| LoadError::NotAComponent { path: path.to_owned(), reason: e.0 };
    if let Some(manifest) = read_section(bytes, MANIFEST_SECTION).map_err(not_component)? {
        return Ok(SkillManifest::parse_bytes(manifest, &PathBuf::from(format!("{}#skill.toml", path.display())))?);
    }
    let reflection = reflect(bytes).map_err(not_component)?;
    if reflection.is_skill {
        return Err(LoadError::NoManifest { path: path.to_owned() });
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = skillhost_core::SkillName::new(stem).map_err(|e| {
        LoadError::Manifest(skillhost_core::ManifestError {
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

fn embedded_instructions(bytes: &[u8], path: &Path) -> Result<Option<String>, LoadError> {
    match read_section(bytes, INSTRUCTIONS_SECTION) {
        Ok(Some(data)) => read_instructions(data, &PathBuf::from(format!("{}#SKILL.md", path.display()))).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(LoadError::NotAComponent { path: path.to_owned(), reason: e.0 }),
    }
}

fn read_instructions(bytes: &[u8], path: &Path) -> Result<String, LoadError> {
    let bad = |reason: String| {
        LoadError::Manifest(skillhost_core::ManifestError {
            file: path.to_owned(),
            position: None,
            message: reason,
            fix: "keep SKILL.md under 1 MiB of UTF-8 text".into(),
        })
    };
    if bytes.len() > MAX_INSTRUCTIONS {
        return Err(bad(format!("SKILL.md is {} bytes, more than 1 MiB", bytes.len())));
    }
    String::from_utf8(bytes.to_vec()).map_err(|e| bad(format!("SKILL.md is not UTF-8 (at byte {})", e.utf8_error().valid_up_to())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: header only, plus one custom section.
    fn tiny() -> Vec<u8> {
        let mut c = b"\0asm".to_vec();
        c.extend_from_slice(&COMPONENT_VERSION);
        c
    }

    #[test]
    fn embed_then_read_is_idempotent() {
        let once = embed(&tiny(), &[(MANIFEST_SECTION, b"name = 1"), ("other", b"x")]).unwrap();
        assert_eq!(read_section(&once, MANIFEST_SECTION).unwrap(), Some(&b"name = 1"[..]));
        let twice = embed(&once, &[(MANIFEST_SECTION, b"name = 2")]).unwrap();
        assert_eq!(read_section(&twice, MANIFEST_SECTION).unwrap(), Some(&b"name = 2"[..]));
        assert_eq!(read_section(&twice, "other").unwrap(), Some(&b"x"[..]));
        assert_eq!(twice.len(), once.len(), "the old section was replaced, not duplicated");
    }

    #[test]
    fn refuses_truncated_and_core_modules() {
        let full = embed(&tiny(), &[(MANIFEST_SECTION, &[b'a'; 300])]).unwrap();
        let err = read_section(&full[..full.len() - 10], MANIFEST_SECTION).unwrap_err();
        assert!(err.0.contains("runs past the end"), "{err}");
        assert!(check_component(b"\0asm\x01\0\0\0").unwrap_err().0.contains("core module"));
        assert!(check_component(b"MZ").unwrap_err().0.contains("magic"));
    }

    #[test]
    fn leb_round_trip() {
        for value in [0, 1, 127, 128, 300, 1 << 20, u32::MAX] {
            let mut buf = Vec::new();
            write_leb_u32(&mut buf, value);
            assert_eq!(read_leb_u32(&buf), Some((value, buf.len())));
        }
    }
}
