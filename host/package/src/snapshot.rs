//! Reading a skill from disk, once, the one way every caller does (the registry, a direct
//! load, `inspect`, `build`, the forge): a [`Snapshot`] of all its files, the content hash
//! over exactly those bytes, and the [`SkillSource`] built from them. Hash and load see the
//! same bytes, so an approval can never bind to one version while another runs.
//!
//! **Reading.** No symlink is followed, even one swapped in mid-read (see `nofollow`);
//! special files are refused; every file and the whole skill are under [`SizeLimits`].
//!
//! **Forms.** A `NAME.wasm` is a component carrying its `skill.toml` (and SKILL.md) in
//! custom sections, or a generic component. A folder with a skill.toml whose `[server]`
//! section names a command is a stdio MCP server skill: its code is the folder's files
//! exactly as hashed. A folder with skill.toml and skill.wasm is a component whose
//! manifest is the folder's; with a skill.wasm and no skill.toml, the component is read as
//! a bare `NAME.wasm` is, named after the folder. A folder with only SKILL.md holds no code
//! ([`Snapshot::source`] is `None`): an instruction-only skill, which the registry serves.
//!
//! **Content hash.** For a `NAME.wasm`, SHA-256 of its bytes. For a folder, SHA-256 over
//! its files sorted by relative path (`/`-separated), each as `path NUL length(u64 LE)
//! contents`. Excluded, as host-, tool- or editor-managed state: every path with a
//! component starting with `.` (`.git/`, `.DS_Store`, editor swap files, staging dirs)
//! and a top-level `target/` (cargo's build output; the component that runs is
//! `skill.wasm`). Empty directories do not count.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use skillhost_core::{LoadError, ManifestError, SkillCode, SkillManifest, SkillSource};

use crate::ReadError;
use crate::component::{component_manifest, embedded_instructions, folder_component, text};
use crate::nofollow::{self, Kind};
use crate::sections::{FormatError, check_component};

/// Size caps applied to every skill read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeLimits {
    /// Largest non-component file (SKILL.md, skill.toml, references, scripts...).
    /// Default: 1 MiB.
    pub text_file: u64,
    /// Largest sum of a skill's non-component files. Default: 10 MiB.
    pub text_total: u64,
    /// Largest `.wasm` component. Default: 64 MiB.
    pub component: u64,
}

impl Default for SizeLimits {
    fn default() -> Self {
        Self { text_file: 1 << 20, text_total: 10 << 20, component: 64 << 20 }
    }
}

/// Whether a directory entry is excluded from skills and hashes.
pub fn excluded(name: &str) -> bool {
    name.starts_with('.')
}

/// All the bytes of one skill, read once.
#[derive(Clone, Debug)]
pub enum Snapshot {
    /// A `NAME.wasm` file.
    Wasm {
        /// The file.
        path: PathBuf,
        /// Its bytes.
        bytes: Vec<u8>,
    },
    /// A folder.
    Folder {
        /// The folder.
        path: PathBuf,
        /// Relative path (`/`-separated) to contents.
        files: BTreeMap<String, Vec<u8>>,
    },
}

impl Snapshot {
    /// Read the skill at `path` (a `.wasm` file or a folder), refusing symlinks and special
    /// files and enforcing `limits`.
    pub fn read(path: &Path, limits: &SizeLimits) -> Result<Self, ReadError> {
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

    /// A folder snapshot of `files` made in memory (relative `/`-separated path to
    /// contents), at `path` for messages: what the forge builds and tests, then installs
    /// as it is, so the bytes installed are the bytes tested. The reader's rules hold: each
    /// path is plain (no empty, `.` or `..` component, nothing absolute), nothing the
    /// content hash excludes (hidden names, a top-level `target/`), every size under
    /// `limits`. Written out and read back, it hashes the same.
    pub fn from_files(path: PathBuf, files: BTreeMap<String, Vec<u8>>, limits: &SizeLimits) -> Result<Self, ReadError> {
        let mut text_total = 0;
        for (relative, bytes) in &files {
            let file = path.join(relative);
            let mut parts = relative.split('/');
            let plain = !relative.is_empty()
                && parts.clone().all(|part| !part.is_empty() && part != ".." && !excluded(part))
                && parts.next() != Some("target")
                && !relative.contains('\0');
            if !plain {
                return Err(ReadError::BadPath {
                    path: file,
                    reason: "a skill's files have plain relative paths, none hidden and none under a top-level target/",
                });
            }
            let component = relative.ends_with(".wasm");
            let (cap, what) = if component { (limits.component, "the component") } else { (limits.text_file, "this file") };
            check_size(&file, what, bytes.len() as u64, cap)?;
            if !component {
                text_total += bytes.len() as u64;
                check_size(&path, "the skill's text", text_total, limits.text_total)?;
            }
        }
        Ok(Snapshot::Folder { path, files })
    }

    /// Where it was read from.
    pub fn path(&self) -> &Path {
        match self {
            Snapshot::Wasm { path, .. } | Snapshot::Folder { path, .. } => path,
        }
    }

    /// The content hash (see the module docs), lowercase hex.
    pub fn content_hash(&self) -> String {
        match self {
            Snapshot::Wasm { bytes, .. } => hex::encode(Sha256::digest(bytes)),
            Snapshot::Folder { files, .. } => folder_hash(files.iter().map(|(p, b)| (p.as_str(), b.as_slice()))),
        }
    }

    /// A folder's SKILL.md, as text.
    pub fn skill_md(&self) -> Result<Option<String>, LoadError> {
        match self {
            Snapshot::Folder { path, files } => files.get("SKILL.md").map(|md| text(md, &path.join("SKILL.md"))).transpose(),
            Snapshot::Wasm { .. } => Ok(None),
        }
    }

    /// The code these bytes describe, ready for a runtime; `None` for a folder without
    /// code (SKILL.md and resources, or SKILL.md with `scripts/` and a skill.toml asking
    /// for what they need: a skill of scripts, run in the jail, not by a runtime).
    pub fn source(&self) -> Result<Option<SkillSource>, LoadError> {
        let instructions = self.skill_md()?;
        match self {
            Snapshot::Wasm { path, bytes } => {
                check_component(bytes).map_err(|e| not_component(path, e))?;
                // The embedded manifest, or for a generic component none (it asks for nothing).
                let manifest = component_manifest(bytes, path)?;
                let instructions = embedded_instructions(bytes, path)?;
                let code = SkillCode::Wasm { path: path.clone(), bytes: Arc::from(bytes.as_slice()) };
                Ok(Some(SkillSource { manifest, origin: path.clone(), code, instructions, content_hash: self.content_hash() }))
            }
            Snapshot::Folder { path, files } => {
                let Some(toml) = files.get("skill.toml") else {
                    // No skill.toml: a component is read as a bare `NAME.wasm` is, named
                    // after the folder.
                    return files
                        .get("skill.wasm")
                        .map(|bytes| folder_component(path, bytes, instructions, self.content_hash()))
                        .transpose();
                };
                let manifest = SkillManifest::parse_bytes(toml, &path.join("skill.toml"))?;
                if manifest.server.is_some() {
                    // A stdio MCP server: the runtime runs exactly these (hashed) files.
                    if files.contains_key("skill.wasm") {
                        return Err(LoadError::from(ManifestError {
                            file: path.join("skill.toml"),
                            position: None,
                            message: "the folder has both a `[server]` section and a skill.wasm".into(),
                            fix: "remove `[server]` to run the component, or remove skill.wasm to run the server".into(),
                        }));
                    }
                    let code = SkillCode::Server { dir: path.clone(), files: Arc::new(files.clone()) };
                    return Ok(Some(SkillSource { manifest, origin: path.clone(), code, instructions, content_hash: self.content_hash() }));
                }
                // SKILL.md with scripts/ and a skill.toml but no component: an Agent
                // Skills folder whose skill.toml says what its scripts ask for. No code
                // here: the registry reads it as a skill of scripts.
                if !files.contains_key("skill.wasm") && instructions.is_some() && files.keys().any(|p| p.starts_with("scripts/")) {
                    return Ok(None);
                }
                let wasm_path = path.join("skill.wasm");
                let bytes = files.get("skill.wasm").ok_or_else(|| LoadError::NotBuilt { dir: path.clone() })?;
                check_component(bytes).map_err(|e| not_component(&wasm_path, e))?;
                let instructions = match instructions {
                    Some(text) => Some(text),
                    None => embedded_instructions(bytes, &wasm_path)?,
                };
                let code = SkillCode::Wasm { path: wasm_path, bytes: Arc::from(bytes.as_slice()) };
                Ok(Some(SkillSource { manifest, origin: path.clone(), code, instructions, content_hash: self.content_hash() }))
            }
        }
    }

    /// Write the snapshot to `target` (a `.wasm` path or a folder that does not exist).
    pub fn write_to(&self, target: &Path) -> std::io::Result<()> {
        match self {
            Snapshot::Wasm { bytes, .. } => std::fs::write(target, bytes),
            Snapshot::Folder { files, .. } => {
                std::fs::create_dir(target)?;
                for (relative, bytes) in files {
                    let file = target.join(relative);
                    if let Some(parent) = file.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&file, bytes)?;
                }
                Ok(())
            }
        }
    }
}

/// Read the skill at `path` and build its code: how a skill is loaded directly (by its
/// path, for development, `inspect` or `build`), through the same hardened reader as the
/// registry. A folder's `skill.wasm` named directly, without a manifest of its own, is
/// read as its folder, whose skill.toml is its manifest.
pub fn read_source(path: &Path, limits: &SizeLimits) -> Result<SkillSource, ReadError> {
    let snapshot = Snapshot::read(path, limits)?;
    if let Snapshot::Wasm { bytes, .. } = &snapshot
        && path.file_name() == Some(OsStr::new("skill.wasm"))
        && let Some(folder) = path.parent().filter(|dir| dir.join("skill.toml").is_file())
        && crate::read_section(bytes, crate::MANIFEST_SECTION).map_err(|e| not_component(path, e))?.is_none()
    {
        return read_source(folder, limits);
    }
    snapshot.source()?.ok_or_else(|| ReadError::NoCode { path: path.to_owned() })
}

/// The content hash of a folder of `files` (see the module docs): the order given does not
/// matter.
pub fn folder_hash<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut files: Vec<_> = files.into_iter().collect();
    files.sort();
    let mut hasher = Sha256::new();
    for (path, bytes) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex::encode(hasher.finalize())
}

fn not_component(path: &Path, e: FormatError) -> LoadError {
    LoadError::NotAComponent { path: path.to_owned(), reason: e.to_string() }
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
) -> Result<(), ReadError> {
    for c_name in nofollow::names(dir_fd, dir)? {
        let path = dir.join(OsStr::from_bytes(c_name.as_bytes()));
        let Ok(name) = c_name.to_str() else {
            return Err(ReadError::BadPath { path, reason: "the file name is not UTF-8" });
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

/// Refuse `size` over `limit`, saying how to get under it.
pub fn check_size(path: &Path, what: &'static str, size: u64, limit: u64) -> Result<(), ReadError> {
    if size <= limit {
        return Ok(());
    }
    let fix = match what {
        "the component" => "build it smaller (release profile, strip debug info) or raise the component size cap",
        "this file" => "keep text files under the cap; split it or move it out of the skill",
        _ => "move large files out of the skill",
    };
    Err(ReadError::TooLarge { path: path.to_owned(), what, size, limit, fix })
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

    #[test]
    fn a_snapshot_made_in_memory_hashes_as_its_files_read_back() {
        let files: BTreeMap<String, Vec<u8>> = [("skill.toml", "name = \"m\""), ("source/src/lib.rs", "fn f() {}"), ("SKILL.md", "# m")]
            .into_iter()
            .map(|(p, c)| (p.to_owned(), c.as_bytes().to_vec()))
            .collect();
        let made = Snapshot::from_files(PathBuf::from("m"), files, &SizeLimits::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        made.write_to(&dir.path().join("m")).unwrap();
        let read = Snapshot::read(&dir.path().join("m"), &SizeLimits::default()).unwrap();
        assert_eq!(made.content_hash(), read.content_hash());
        for bad in ["../x", "/etc/passwd", "a//b", ".git/config", "src/.hidden", "target/x", "a/./b", ""] {
            let files = BTreeMap::from([(bad.to_owned(), b"x".to_vec())]);
            let err = Snapshot::from_files(PathBuf::from("m"), files, &SizeLimits::default()).unwrap_err();
            assert!(matches!(err, ReadError::BadPath { .. }), "{bad}: {err}");
        }
        let limits = SizeLimits { text_file: 4, ..SizeLimits::default() };
        let files = BTreeMap::from([("big.txt".to_owned(), b"12345".to_vec())]);
        assert!(matches!(Snapshot::from_files(PathBuf::from("m"), files, &limits), Err(ReadError::TooLarge { .. })));
    }

    #[test]
    fn a_direct_read_never_follows_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let skill = dir.path().join("linker");
        std::fs::create_dir(&skill).unwrap();
        std::fs::write(
            skill.join("skill.toml"),
            "name = \"linker\"\nversion = \"0.1.0\"\ndescription = \"d\"\n[server]\ncommand = \"python\"\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), skill.join("data.txt")).unwrap();
        let err = read_source(&skill, &SizeLimits::default()).unwrap_err();
        assert!(matches!(err, ReadError::Symlink { .. }), "{err}");
        std::fs::remove_file(skill.join("data.txt")).unwrap();
        let source = read_source(&skill, &SizeLimits::default()).unwrap();
        assert_eq!(source.manifest.name.as_str(), "linker");
    }
}
