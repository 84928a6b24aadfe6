//! Where an index keeps its documents: the tantivy schema shared by the in-memory and
//! the on-disk index, and opening a directory as an index (checked: a corrupt, outdated
//! or half-written one is reported so the caller can rebuild it).
//!
//! Everything a search needs is stored in tantivy itself (every field is stored, the
//! vector as little-endian `f32` bytes, the skill's fingerprint on each of its
//! documents), so one tantivy commit is the unit of persistence: there is no side file
//! to fall out of step with it. The commit payload carries the schema version.

use std::path::{Path, PathBuf};

use tantivy::Index;
use tantivy::directory::MmapDirectory;
use tantivy::schema::{FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions};

use crate::index::IndexError;
use crate::text::ANALYZER;

/// Bumped whenever what is stored changes meaning (fields, analyzer, embedding text):
/// an index written under another version is rebuilt.
/// 2: skills that are not approved are indexed by name with host text only (an index
/// of version 1 may hold their own text).
pub(crate) const SCHEMA_VERSION: u32 = 2;

/// The commit payload of every commit: the schema version.
pub(crate) fn payload() -> String {
    format!("skillhost-index schema {SCHEMA_VERSION}")
}

/// Where an index keeps its documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// In memory only: rebuilt (and re-embedded) at each start.
    Memory,
    /// On disk in this directory, written by this process.
    Disk(PathBuf),
    /// Another process writes the on-disk index in this directory: this one searches an
    /// in-memory copy of it, seeded from disk, and keeps its own changes in memory.
    Copy(PathBuf),
}

impl Storage {
    /// `memory`, `disk` or `copy`.
    pub fn kind(&self) -> &'static str {
        match self {
            Storage::Memory => "memory",
            Storage::Disk(_) => "disk",
            Storage::Copy(_) => "copy",
        }
    }

    /// The on-disk directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Storage::Memory => None,
            Storage::Disk(dir) | Storage::Copy(dir) => Some(dir),
        }
    }
}

/// The fields of every document.
#[derive(Clone, Copy)]
pub(crate) struct Fields {
    /// A 64-bit id derived from `key` (fast field: BM25 hits map to keys without
    /// reading the document store).
    pub id: Field,
    /// `t:SKILL/TOOL` or `s:SKILL`.
    pub key: Field,
    /// `tool` or `skill`.
    pub kind: Field,
    pub skill: Field,
    /// `yes` or `no`.
    pub approved: Field,
    /// What the skill's documents were built from (see `SearchIndex::sync`).
    pub fingerprint: Field,
    /// [`SideEffects`](crate::SideEffects) as a number.
    pub effects: Field,
    /// The unit-length embedding, little-endian `f32`s; absent when not embedded.
    pub vector: Field,
    pub name: Field,
    pub description: Field,
    pub keywords: Field,
    pub examples: Field,
    pub context: Field,
    pub body: Field,
}

impl Fields {
    /// The searched text fields, in the order of the boosts.
    pub fn text(&self) -> [Field; 6] {
        [self.name, self.description, self.keywords, self.examples, self.context, self.body]
    }
}

/// The schema and its fields.
pub(crate) fn schema() -> (Schema, Fields) {
    let mut schema = Schema::builder();
    let text = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs))
        .set_stored();
    let fields = Fields {
        id: schema.add_u64_field("id", FAST | STORED),
        key: schema.add_text_field("key", STRING | STORED),
        kind: schema.add_text_field("kind", STRING | STORED),
        skill: schema.add_text_field("skill", STRING | STORED),
        approved: schema.add_text_field("approved", STRING | STORED),
        fingerprint: schema.add_text_field("fingerprint", STORED),
        effects: schema.add_u64_field("effects", STORED),
        vector: schema.add_bytes_field("vector", STORED),
        name: schema.add_text_field("name", text.clone()),
        description: schema.add_text_field("description", text.clone()),
        keywords: schema.add_text_field("keywords", text.clone()),
        examples: schema.add_text_field("examples", text.clone()),
        context: schema.add_text_field("context", text.clone()),
        body: schema.add_text_field("body", text),
    };
    (schema.build(), fields)
}

/// Files tantivy always writes: a directory holding one of them (or nothing) is an
/// index we may rebuild; any other non-empty directory is left alone.
const MARKERS: [&str; 2] = ["meta.json", ".managed.json"];

fn io(dir: &Path, source: std::io::Error) -> IndexError {
    IndexError::Io { dir: dir.to_owned(), source }
}

/// Open (or create) the index in `dir`, checked: the schema and its version match and
/// every file's checksum is right. Any error means "rebuild it" (see [`wipe`]) unless
/// it is [`IndexError::NotAnIndex`] or [`IndexError::Io`].
pub(crate) fn open(dir: &Path, schema: &Schema) -> Result<Index, IndexError> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?.filter_map(Result::ok).peekable();
    let empty = entries.peek().is_none();
    if !empty && !MARKERS.iter().any(|m| dir.join(m).exists()) {
        return Err(IndexError::NotAnIndex(dir.to_owned()));
    }
    let directory = MmapDirectory::open(dir).map_err(|e| IndexError::Corrupt(e.to_string()))?;
    let index = Index::open_or_create(directory, schema.clone())?;
    let metas = index.load_metas()?;
    if !metas.segments.is_empty() && metas.payload.as_deref() != Some(payload().as_str()) {
        return Err(IndexError::Corrupt(format!(
            "written by another version ({}), this one is {:?}",
            metas.payload.as_deref().unwrap_or("no version"),
            payload()
        )));
    }
    let damaged = index.validate_checksum()?;
    if !damaged.is_empty() {
        let files: Vec<String> = damaged.iter().map(|p| p.display().to_string()).collect();
        return Err(IndexError::Corrupt(format!("bad checksum in {}", files.join(", "))));
    }
    Ok(index)
}

/// Delete the index files in `dir` (only a directory [`open`] accepted as an index, or
/// one holding a tantivy marker file: never a directory of other files).
pub(crate) fn wipe(dir: &Path) -> Result<(), IndexError> {
    if !MARKERS.iter().any(|m| dir.join(m).exists()) && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(IndexError::NotAnIndex(dir.to_owned()));
    }
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let path = entry.map_err(|e| io(dir, e))?.path();
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        removed.map_err(|e| io(&path, e))?;
    }
    Ok(())
}

/// Bytes used by the files in `dir`.
pub(crate) fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// A vector as stored: little-endian `f32`s.
pub(crate) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back; `None` when the byte count is not a multiple of four.
pub(crate) fn vector_from(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_odd_bytes_are_refused() {
        let v = [0.5f32, -1.25, 3.0e-7];
        assert_eq!(vector_from(&vector_bytes(&v)).unwrap(), v);
        assert_eq!(vector_from(&[1, 2, 3]), None);
    }

    #[test]
    fn a_directory_of_other_files_is_never_taken_or_wiped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let (schema, _) = schema();
        assert!(matches!(open(dir.path(), &schema), Err(IndexError::NotAnIndex(_))));
        assert!(matches!(wipe(dir.path()), Err(IndexError::NotAnIndex(_))));
        assert!(dir.path().join("notes.txt").exists());
    }
}
