//! [`SearchIndex`]: one tantivy document per tool and one per skill, in memory or in a
//! directory on disk (see `store`), plus what ranking needs beside tantivy's postings
//! (descriptions, side effects, each document's words and the fields they occur in for
//! the lexical part of the score, and its unit vector when an embedder is set).
//!
//! Updates are per skill: delete every document of the skill, add the new ones, commit,
//! reload the reader. tantivy's writer lives for one batch of updates; an on-disk index
//! is owned by the process holding its owner lock, which a second process finding taken
//! searches a copy. A skill's metadata is dropped before its deletion is committed, so
//! a search racing an update can miss a changed skill for a moment but never shows a
//! removed one.
//!
//! Each skill's documents carry a fingerprint: what they were built from (the registry's
//! content hash, trust state and origin, or a hash of a [`SkillDoc`]) and the embedder's
//! identity. An on-disk index opened again reads documents, vectors and fingerprints
//! back, so a sync over an unchanged catalogue embeds nothing; a changed skill is
//! re-embedded alone; another model re-embeds everything.

use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use skillhost_registry::{Entry, Registry, RegistryEvent};
use tantivy::collector::TopDocs;
use tantivy::directory::{Directory as _, DirectoryLock, Lock, error::LockError};
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, FuzzyTermQuery, Occur, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, Value as _};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};
use tokio::sync::broadcast::error::RecvError;

use crate::dense::{Dense, dot, normalise};
use crate::doc::{SideEffects, SkillDoc};
use crate::embed::Embedder;
use crate::rank::{Candidate, Hit, Ranker, SearchResults, TYPO_MIN_CHARS, blend, finish, fuse, lexical, semantic};
use crate::store::{self, Fields, Storage};
use crate::text::{ANALYZER, analyzer, terms};

/// The writer's memory budget: tantivy's per-thread minimum is 15 MB.
const WRITER_BUDGET: usize = 32 << 20;

/// `index`'s writer: one indexing thread and one merging thread (tantivy's default is four
/// of those, started with the writer, for a catalogue of skills that fits one segment).
/// Made for a batch of changes and let go at its commit: a writer at rest holds its
/// threads and a term table (4 MB, written through when it is made) for nothing.
fn writer(index: &Index) -> tantivy::Result<IndexWriter> {
    let options = tantivy::indexer::IndexWriterOptions::builder()
        .memory_budget_per_thread(WRITER_BUDGET)
        .num_worker_threads(1)
        .num_merge_threads(1)
        .build();
    index.writer_with_options(options)
}

/// The lock a process holds on an on-disk index for as long as it writes it
/// ([`Storage::Disk`]); another process finding it taken searches a copy. tantivy's own
/// writer lock is only held during a batch, so it cannot say who owns the directory.
fn owner_lock() -> Lock {
    Lock { filepath: ".skillhost-owner.lock".into(), is_blocking: false }
}
/// Most results one query returns.
pub const MAX_LIMIT: usize = 100;
/// How deep each ranking goes before fusion and tie-breaks.
const DEPTH: usize = 50;
/// The embedder identity of an index without one.
const NO_MODEL: &str = "bm25";

/// Why the index failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// tantivy failed (creating, writing or reading the index).
    #[error("search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index directory could not be created or read.
    #[error("search index directory {}: {source}", dir.display())]
    Io {
        /// The directory (or file).
        dir: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The directory holds files that are not an index: it is left alone.
    #[error("{} holds files that are not a search index; give the index its own directory", .0.display())]
    NotAnIndex(std::path::PathBuf),
    /// What is on disk cannot be used as it is (damaged, or written by another version).
    #[error("search index unreadable: {0}")]
    Corrupt(String),
}

/// What to search for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// One result per tool.
    Tools,
    /// One result per skill.
    Skills,
}

/// One query.
#[derive(Clone, Debug)]
pub struct Query<'a> {
    /// Free text.
    pub text: &'a str,
    /// Tools or skills.
    pub target: Target,
    /// Most hits returned (clamped to 1..=100). Default: 8.
    pub limit: usize,
    /// Only approved skills (and their tools). Default: `true`: an agent must never
    /// see unapproved tools in search results.
    pub approved_only: bool,
}

impl<'a> Query<'a> {
    /// A query with the defaults: 8 hits, approved skills only.
    pub fn new(text: &'a str, target: Target) -> Self {
        Self { text, target, limit: 8, approved_only: true }
    }

    /// Set the limit.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Include unapproved skills (for a human's CLI, never for an agent).
    pub fn include_unapproved(mut self) -> Self {
        self.approved_only = false;
        self
    }
}

/// What a [`SearchIndex::sync`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Skills (re)indexed.
    pub indexed: usize,
    /// Skills removed.
    pub removed: usize,
    /// Documents embedded (0 without an embedder, or when nothing changed).
    pub embedded: usize,
}

/// How far a sync or rebuild is, in documents (one per skill and one per tool).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncProgress {
    /// Documents indexed so far.
    pub done: usize,
    /// Documents to index in all.
    pub total: usize,
}

/// What an index holds and where ([`SearchIndex::status`]).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexStatus {
    /// Documents: one per skill and one per tool.
    pub documents: usize,
    /// Skills indexed.
    pub skills: usize,
    /// Documents with a vector.
    pub embedded: usize,
    /// The ranker queries get.
    pub ranker: Ranker,
    /// The embedder's identity, when there is one.
    pub model: Option<String>,
    /// Where the documents live.
    pub storage: Storage,
    /// Bytes on disk (`None` in memory).
    pub disk_bytes: Option<u64>,
    /// Bytes of vectors held in memory: each document's `f32` vector plus, once a
    /// query has built it, the quantised matrix dense search scans.
    pub vector_bytes: usize,
}

/// Field boosts: (tool documents, skill documents).
const BOOSTS: [(f32, f32); 6] = [(3.0, 3.0), (2.0, 2.0), (1.5, 1.5), (1.5, 1.5), (0.8, 1.0), (0.3, 0.5)];

/// What ranking needs about one document besides tantivy.
struct Meta {
    hit: Hit,
    approved: bool,
    /// Each word of the document -> the fields it occurs in (bit `i` for field `i` of
    /// `Fields::text`).
    terms: HashMap<String, u8>,
    /// Unit length.
    vector: Option<Vec<f32>>,
}

/// What searches read: the documents' metadata, BM25 ids back to keys, the vectors as
/// one matrix (built on demand after a change).
#[derive(Default)]
struct State {
    meta: HashMap<String, Meta>,
    ids: HashMap<u64, String>,
    dense: Option<Arc<Dense>>,
}

struct Writer {
    /// tantivy's writer during a batch, `None` at rest (see [`writer`]).
    tantivy: Option<IndexWriter>,
    index: Index,
    /// Skill name -> fingerprint of what is indexed for it.
    indexed: HashMap<String, String>,
    analyzer: TextAnalyzer,
}

/// The search index over skills and tools.
pub struct SearchIndex {
    fields: Fields,
    reader: IndexReader,
    writer: Mutex<Writer>,
    state: RwLock<State>,
    embedder: Option<Arc<dyn Embedder>>,
    /// The embedder's identity, or [`NO_MODEL`].
    identity: String,
    storage: Storage,
    /// Held for the life of a [`Storage::Disk`] index (see [`owner_lock`]).
    _owner: Option<DirectoryLock>,
}

impl Writer {
    /// tantivy's writer, made now if this is a batch's first change.
    fn tantivy(&mut self) -> Result<&mut IndexWriter, IndexError> {
        open_writer(&mut self.tantivy, &self.index)
    }
}

/// The writer in `slot`, made for `index` if there is none.
fn open_writer<'a>(slot: &'a mut Option<IndexWriter>, index: &Index) -> Result<&'a mut IndexWriter, IndexError> {
    let writer = match slot.take() {
        Some(held) => held,
        None => writer(index)?,
    };
    Ok(slot.insert(writer))
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("ranker", &self.ranker())
            .field("storage", &self.storage)
            .field("documents", &self.state.read().meta.len())
            .finish_non_exhaustive()
    }
}

fn key(skill: &str, tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("t:{skill}/{tool}"),
        None => format!("s:{skill}"),
    }
}

/// The numeric id of a key (the first 8 bytes of its SHA-256).
fn id(key: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// What the index remembers about a registry entry: a change means re-index.
fn fingerprint(entry: &Entry) -> Option<String> {
    let loaded = entry.loaded.as_ref()?;
    SkillDoc::from_entry(entry)?;
    Some(format!("{}:{}:{}", loaded.content_hash, entry.state, loaded.origin.display()))
}

/// A fresh tantivy index in memory.
fn in_ram(schema: Schema) -> Index {
    let index = Index::create_in_ram(schema);
    index.tokenizers().register(ANALYZER, analyzer());
    index
}

impl SearchIndex {
    /// An empty in-memory index ranking with BM25 alone.
    pub fn new() -> Result<Self, IndexError> {
        Self::in_memory(None)
    }

    /// An empty in-memory index ranking with BM25 and `embedder` (hybrid).
    pub fn with_embedder(embedder: Arc<dyn Embedder>) -> Result<Self, IndexError> {
        Self::in_memory(Some(embedder))
    }

    fn in_memory(embedder: Option<Arc<dyn Embedder>>) -> Result<Self, IndexError> {
        let (schema, fields) = store::schema();
        let index = in_ram(schema);
        Self::assemble(&index, fields, embedder, Storage::Memory, None)
    }

    /// The index persisted in `dir` (created if missing), ranking with BM25 and, given
    /// one, `embedder`. What an earlier run stored is read back: skills whose
    /// fingerprint still matches are neither re-indexed nor re-embedded by the next
    /// [`sync`](Self::sync).
    ///
    /// Never fails over what is on disk: a corrupt, unreadable or outdated index is
    /// rebuilt with one warning; when another process holds the index's writer lock,
    /// this one searches an in-memory copy seeded from disk ([`Storage::Copy`]) and says
    /// so; a directory that cannot be used at all (not writable, or holding other files)
    /// gives an in-memory index with a warning.
    pub fn open(dir: impl AsRef<Path>, embedder: Option<Arc<dyn Embedder>>) -> Result<Self, IndexError> {
        let dir = dir.as_ref();
        let (schema, fields) = store::schema();
        let opened = match store::open(dir, &schema) {
            Err(e @ (IndexError::NotAnIndex(_) | IndexError::Io { .. })) => {
                tracing::warn!("{e}: the search index stays in memory this time");
                return Self::in_memory(embedder);
            }
            Err(e) => Err(e),
            Ok(index) => Self::load_disk(index, dir, fields, embedder.clone()),
        };
        match opened {
            Ok(index) => Ok(index),
            Err(e) => {
                tracing::warn!("{e}; rebuilding the search index in {}", dir.display());
                let rebuilt = store::wipe(dir)
                    .and_then(|()| store::open(dir, &schema))
                    .and_then(|index| Self::load_disk(index, dir, fields, embedder.clone()));
                rebuilt.or_else(|e| {
                    tracing::warn!("{e}: the search index stays in memory this time");
                    Self::in_memory(embedder)
                })
            }
        }
    }

    /// Take an opened on-disk index (its [`owner_lock`]) and read its documents back;
    /// when another process holds it, copy the documents into memory instead.
    fn load_disk(index: Index, dir: &Path, fields: Fields, embedder: Option<Arc<dyn Embedder>>) -> Result<Self, IndexError> {
        index.tokenizers().register(ANALYZER, analyzer());
        match index.directory().acquire_lock(&owner_lock()) {
            Ok(owner) => {
                let this = Self::assemble(&index, fields, embedder, Storage::Disk(dir.to_owned()), Some(owner))?;
                let searcher = this.reader.searcher();
                this.load(&searcher, false)?;
                Ok(this)
            }
            Err(LockError::LockBusy) => {
                tracing::warn!(
                    "the search index in {} is in use by another skillhost process: this one searches an in-memory copy of it (changes made here are not saved)",
                    dir.display()
                );
                let disk = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
                let ram = in_ram(index.schema());
                let this = Self::assemble(&ram, fields, embedder, Storage::Copy(dir.to_owned()), None)?;
                this.load(&disk.searcher(), true)?;
                this.commit(&mut this.writer.lock())?;
                Ok(this)
            }
            Err(e) => Err(tantivy::TantivyError::from(e).into()),
        }
    }

    fn assemble(
        index: &Index,
        fields: Fields,
        embedder: Option<Arc<dyn Embedder>>,
        storage: Storage,
        owner: Option<DirectoryLock>,
    ) -> Result<Self, IndexError> {
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        let identity = embedder.as_ref().map_or_else(|| NO_MODEL.to_owned(), |e| e.identity());
        Ok(Self {
            fields,
            reader,
            writer: Mutex::new(Writer { tantivy: None, index: index.clone(), indexed: HashMap::new(), analyzer: analyzer() }),
            state: RwLock::new(State::default()),
            embedder,
            identity,
            storage,
            _owner: owner,
        })
    }

    /// Read every live document of `searcher` back into the metadata (and, for a copy,
    /// into this index's writer). A document that cannot be read back means the index
    /// is damaged; a panic inside tantivy on damaged data is caught as such.
    fn load(&self, searcher: &Searcher, copy: bool) -> Result<(), IndexError> {
        let run = || -> Result<(), IndexError> {
            let mut writer = self.writer.lock();
            let mut state = self.state.write();
            for (ord, segment) in searcher.segment_readers().iter().enumerate() {
                for doc_id in segment.doc_ids_alive() {
                    let doc: TantivyDocument = searcher.doc(DocAddress::new(ord as u32, doc_id))?;
                    let (key, skill, print, meta) = self.parse(&doc, &mut writer.analyzer)?;
                    writer.indexed.insert(skill, print);
                    state.ids.insert(id(&key), key.clone());
                    state.meta.insert(key, meta);
                    if copy {
                        writer.tantivy()?.add_document(doc)?;
                    }
                }
            }
            Ok(())
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
            Ok(done) => done,
            Err(_) => Err(IndexError::Corrupt("reading the stored documents failed".into())),
        }
    }

    /// A stored document back: key, skill, fingerprint and metadata.
    fn parse(&self, doc: &TantivyDocument, analyzer: &mut TextAnalyzer) -> Result<(String, String, String, Meta), IndexError> {
        let f = self.fields;
        let text = |field| doc.get_first(field).and_then(|v| v.as_str()).map(str::to_owned);
        let missing = |what: &str| IndexError::Corrupt(format!("a stored document has no {what}"));
        let key = text(f.key).ok_or_else(|| missing("key"))?;
        let skill = text(f.skill).ok_or_else(|| missing("skill"))?;
        let print = text(f.fingerprint).ok_or_else(|| missing("fingerprint"))?;
        let tool = match key.split_once(':') {
            Some(("t", rest)) => Some(rest.split_once('/').ok_or_else(|| missing("tool name"))?.1.to_owned()),
            Some(("s", _)) => None,
            _ => return Err(missing("valid key")),
        };
        let effects = doc.get_first(f.effects).and_then(|v| v.as_u64()).map_or(SideEffects::Stateful, SideEffects::from_rank);
        let vector = match doc.get_first(f.vector).and_then(|v| v.as_bytes()) {
            Some(bytes) => Some(store::vector_from(bytes).ok_or_else(|| missing("valid vector"))?),
            None => None,
        };
        let words = field_terms(doc, f, analyzer);
        let hit =
            Hit { skill: skill.clone(), tool, description: text(f.description).unwrap_or_default(), score: 0.0, side_effects: effects };
        let approved = text(f.approved).as_deref() == Some("yes");
        Ok((key, skill, print, Meta { hit, approved, terms: words, vector }))
    }

    /// The ranker queries get: hybrid with an embedder, BM25 without.
    pub fn ranker(&self) -> Ranker {
        if self.embedder.is_some() { Ranker::Hybrid } else { Ranker::Bm25 }
    }

    /// The embedding model, when ranking is hybrid.
    pub fn model(&self) -> Option<&str> {
        self.embedder.as_deref().map(Embedder::model)
    }

    /// Where the documents live.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// What the index holds and where.
    pub fn status(&self) -> IndexStatus {
        let skills = self.writer.lock().indexed.len();
        let state = self.state.read();
        IndexStatus {
            documents: state.meta.len(),
            skills,
            embedded: state.meta.values().filter(|m| m.vector.is_some()).count(),
            ranker: self.ranker(),
            model: self.embedder.as_ref().map(|_| self.identity.clone()),
            disk_bytes: self.storage.dir().filter(|_| self.storage.kind() == "disk").map(store::size),
            vector_bytes: state.meta.values().filter_map(|m| m.vector.as_ref()).map(|v| v.len() * 4).sum::<usize>()
                + state.dense.as_ref().map_or(0, |d| d.bytes()),
            storage: self.storage.clone(),
        }
    }

    /// Add or replace skills given directly (tests, benchmarks, embedders that index
    /// other catalogues). A skill given again unchanged is skipped. One commit for all.
    pub fn upsert(&self, skills: impl IntoIterator<Item = SkillDoc>) -> Result<SyncStats, IndexError> {
        let mut writer = self.writer.lock();
        let mut stats = SyncStats::default();
        for skill in skills {
            let print = self.stamp(&skill.content_hash());
            if writer.indexed.get(&skill.name) == Some(&print) {
                continue;
            }
            self.delete_skill(&mut writer, &skill.name)?;
            stats.embedded += self.add_skill(&mut writer, &skill, &print)?;
            writer.indexed.insert(skill.name.clone(), print);
            stats.indexed += 1;
        }
        if stats != SyncStats::default() {
            self.commit(&mut writer)?;
        }
        self.batch_done(&stats);
        Ok(stats)
    }

    /// The embedder lets go of what a batch that embedded more than one skill held
    /// ([`Embedder::release`]); one skill re-indexed keeps it for the searches around it.
    fn batch_done(&self, stats: &SyncStats) {
        if stats.indexed > 1
            && stats.embedded > 0
            && let Some(embedder) = &self.embedder
        {
            embedder.release();
        }
    }

    /// The stored fingerprint of content `base` under this index's embedder.
    fn stamp(&self, base: &str) -> String {
        format!("{base} {}", self.identity)
    }

    /// Remove a skill and its tools.
    pub fn remove(&self, skill: &str) -> Result<(), IndexError> {
        let mut writer = self.writer.lock();
        self.delete_skill(&mut writer, skill)?;
        writer.indexed.remove(skill);
        self.commit(&mut writer)
    }

    /// Bring the index in line with the registry's catalog: re-index the skills whose
    /// content, state or origin changed (or that were indexed under another embedder),
    /// drop those gone (or disabled, or no longer loaded). Unchanged skills cost one
    /// string comparison.
    pub fn sync(&self, registry: &Registry) -> Result<SyncStats, IndexError> {
        self.sync_with(registry, &mut |_| {})
    }

    /// [`sync`](Self::sync), reporting progress after each skill.
    pub fn sync_with(&self, registry: &Registry, progress: &mut dyn FnMut(SyncProgress)) -> Result<SyncStats, IndexError> {
        let mut writer = self.writer.lock();
        self.sync_locked(&mut writer, registry, progress)
    }

    /// Drop everything and index the registry's catalog again, embedding every
    /// document: the fix for an index that should not be trusted.
    pub fn rebuild(&self, registry: &Registry, progress: &mut dyn FnMut(SyncProgress)) -> Result<SyncStats, IndexError> {
        let mut writer = self.writer.lock();
        writer.tantivy()?.delete_all_documents()?;
        writer.indexed.clear();
        *self.state.write() = State::default();
        let stats = self.sync_locked(&mut writer, registry, progress)?;
        // Commit even an empty catalogue: the deletion must reach the disk.
        self.commit(&mut writer)?;
        Ok(stats)
    }

    fn sync_locked(
        &self,
        writer: &mut Writer,
        registry: &Registry,
        progress: &mut dyn FnMut(SyncProgress),
    ) -> Result<SyncStats, IndexError> {
        let catalog = registry.catalog();
        let wanted: HashMap<String, (String, &Arc<Entry>)> =
            catalog.iter().filter_map(|e| fingerprint(e).map(|f| (e.name.to_string(), (self.stamp(&f), e)))).collect();
        let mut stats = SyncStats::default();
        let gone: Vec<String> = writer.indexed.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for name in gone {
            self.delete_skill(writer, &name)?;
            writer.indexed.remove(&name);
            stats.removed += 1;
        }
        let mut todo: Vec<(&String, &String, SkillDoc)> = wanted
            .iter()
            .filter(|(name, (print, _))| writer.indexed.get(*name) != Some(print))
            .filter_map(|(name, (print, entry))| Some((name, print, SkillDoc::from_entry(entry)?)))
            .collect();
        todo.sort_by(|a, b| a.0.cmp(b.0));
        let total = todo.iter().map(|(_, _, doc)| 1 + doc.tools.len()).sum();
        let mut done = 0;
        for (name, print, doc) in todo {
            self.delete_skill(writer, name)?;
            stats.embedded += self.add_skill(writer, &doc, print)?;
            writer.indexed.insert(name.clone(), print.clone());
            stats.indexed += 1;
            done += 1 + doc.tools.len();
            progress(SyncProgress { done, total });
        }
        if stats != SyncStats::default() {
            self.commit(writer)?;
            tracing::debug!(indexed = stats.indexed, removed = stats.removed, embedded = stats.embedded, "search index synced");
        }
        self.batch_done(&stats);
        Ok(stats)
    }

    /// Apply one registry event: re-read that skill's entry and re-index or drop it.
    pub fn apply(&self, registry: &Registry, event: &RegistryEvent) -> Result<(), IndexError> {
        let name = event.name().as_str();
        let entry = registry.entry(name).ok();
        let print = entry.as_deref().and_then(fingerprint).map(|f| self.stamp(&f));
        let mut writer = self.writer.lock();
        if print.is_some() && writer.indexed.get(name) == print.as_ref() {
            return Ok(());
        }
        self.delete_skill(&mut writer, name)?;
        match (print, entry.as_deref().and_then(SkillDoc::from_entry)) {
            (Some(print), Some(doc)) => {
                self.add_skill(&mut writer, &doc, &print)?;
                writer.indexed.insert(name.to_owned(), print);
            }
            _ => {
                writer.indexed.remove(name);
            }
        }
        self.commit(&mut writer)
    }

    /// Sync now, then follow the registry's events until it closes: a skill dropped
    /// in is searchable right after the registry reloads it, a removed one is gone.
    /// Needs a tokio runtime.
    pub fn follow(self: &Arc<Self>, registry: Arc<Registry>) -> tokio::task::JoinHandle<()> {
        let index = self.clone();
        let mut events = registry.subscribe();
        tokio::spawn(async move {
            let resync = |index: Arc<Self>, registry: Arc<Registry>| async move {
                let done = tokio::task::spawn_blocking(move || index.sync(&registry)).await;
                if let Ok(Err(e)) = done {
                    tracing::warn!(error = %e, "search index sync failed");
                }
            };
            resync(index.clone(), registry.clone()).await;
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let (index, registry) = (index.clone(), registry.clone());
                        let done = tokio::task::spawn_blocking(move || index.apply(&registry, &event)).await;
                        if let Ok(Err(e)) = done {
                            tracing::warn!(error = %e, "search index update failed");
                        }
                    }
                    Err(RecvError::Lagged(_)) => resync(index.clone(), registry.clone()).await,
                    Err(RecvError::Closed) => break,
                }
            }
        })
    }

    fn delete_skill(&self, writer: &mut Writer, skill: &str) -> Result<(), IndexError> {
        let tantivy = writer.tantivy()?;
        let mut state = self.state.write();
        let State { meta, ids, dense } = &mut *state;
        meta.retain(|k, m| {
            let keep = m.hit.skill != skill;
            if !keep {
                ids.remove(&id(k));
            }
            keep
        });
        *dense = None;
        tantivy.delete_term(Term::from_field_text(self.fields.skill, skill));
        Ok(())
    }

    /// Add a skill's documents (embedding them with the embedder, if any); returns how
    /// many were embedded.
    fn add_skill(&self, writer: &mut Writer, skill: &SkillDoc, print: &str) -> Result<usize, IndexError> {
        let Writer { tantivy, index, analyzer, .. } = writer;
        let tantivy = open_writer(tantivy, index)?;
        let f = self.fields;
        let keywords = skill.keywords.join(", ");
        let examples = skill.example_queries.join(". ");
        let body = skill.body();
        let approved = if skill.approved { "yes" } else { "no" };
        let mut entries: Vec<(String, TantivyDocument, Hit, String)> = Vec::new();
        let mut tool_text = String::new();
        for tool in &skill.tools {
            tool_text.push_str(&format!("{} {}. ", tool.name, tool.description));
        }
        // Skill document.
        {
            let mut doc = TantivyDocument::default();
            doc.add_text(f.name, &skill.name);
            doc.add_text(f.description, &skill.description);
            doc.add_text(f.keywords, &keywords);
            doc.add_text(f.examples, &examples);
            doc.add_text(f.context, &tool_text);
            doc.add_text(f.body, body);
            let hit = Hit {
                skill: skill.name.clone(),
                tool: None,
                description: skill.description.clone(),
                score: 0.0,
                side_effects: skill.tools.iter().map(|t| t.side_effects).min().unwrap_or_default(),
            };
            let embed_text = format!("{}: {}. {keywords}. {examples}. {tool_text}", skill.name, skill.description);
            entries.push((key(&skill.name, None), doc, hit, embed_text));
        }
        for tool in &skill.tools {
            let mut doc = TantivyDocument::default();
            doc.add_text(f.name, &tool.name);
            doc.add_text(f.description, &tool.description);
            doc.add_text(f.keywords, &keywords);
            doc.add_text(f.examples, &examples);
            doc.add_text(f.context, format!("{} {}", skill.name, skill.description));
            doc.add_text(f.body, body);
            let hit = Hit {
                skill: skill.name.clone(),
                tool: Some(tool.name.clone()),
                description: tool.description.clone(),
                score: 0.0,
                side_effects: tool.side_effects,
            };
            let embed_text = format!(
                "{}: {} ({}: {}). {keywords}. {examples}",
                tool.name.replace(['_', '-'], " "),
                tool.description,
                skill.name,
                skill.description
            );
            entries.push((key(&skill.name, Some(&tool.name)), doc, hit, embed_text));
        }
        // A failed embedding is not retried until the skill changes (or `rebuild`): a
        // sync over an unchanged catalogue must stay free.
        let vectors = self.embedder.as_ref().and_then(|e| {
            let texts: Vec<&str> = entries.iter().map(|(_, _, _, t)| t.as_str()).collect();
            e.embed(&texts)
                .inspect_err(|err| {
                    tracing::warn!(skill = %skill.name, error = %err, "not embedded: BM25 only for this skill until it changes or `skillhost index rebuild`")
                })
                .ok()
                .filter(|v| v.len() == texts.len())
        });
        let embedded = vectors.as_ref().map_or(0, Vec::len);
        let mut state = self.state.write();
        for (i, (k, mut doc, hit, _)) in entries.into_iter().enumerate() {
            let words = field_terms(&doc, f, analyzer);
            let vector = vectors.as_ref().and_then(|v| v.get(i).cloned()).map(|mut v| {
                normalise(&mut v);
                v
            });
            doc.add_u64(f.id, id(&k));
            doc.add_text(f.key, &k);
            doc.add_text(f.kind, if hit.tool.is_some() { "tool" } else { "skill" });
            doc.add_text(f.skill, &skill.name);
            doc.add_text(f.approved, approved);
            doc.add_text(f.fingerprint, print);
            doc.add_u64(f.effects, hit.side_effects.rank());
            if let Some(v) = &vector {
                doc.add_bytes(f.vector, &store::vector_bytes(v));
            }
            if let Err(e) = tantivy.add_document(doc) {
                tracing::warn!(skill = %skill.name, error = %e, "not indexed");
                continue;
            }
            state.ids.insert(id(&k), k.clone());
            state.meta.insert(k, Meta { hit, approved: skill.approved, terms: words, vector });
        }
        state.dense = None;
        Ok(embedded)
    }

    /// Commit the batch and let its writer go (after any merge the commit started).
    fn commit(&self, writer: &mut Writer) -> Result<(), IndexError> {
        let mut commit = writer.tantivy()?.prepare_commit()?;
        commit.set_payload(&store::payload());
        commit.commit()?;
        if let Some(done) = writer.tantivy.take() {
            done.wait_merging_threads()?;
        }
        self.reader.reload()?;
        Ok(())
    }

    /// The vectors as one matrix, built now if a change dropped it.
    fn dense(&self) -> Arc<Dense> {
        if let Some(dense) = self.state.read().dense.clone() {
            return dense;
        }
        let mut state = self.state.write();
        if let Some(dense) = &state.dense {
            return dense.clone();
        }
        let vectors = state.meta.iter().filter_map(|(k, m)| m.vector.as_deref().map(|v| (k, v, m.hit.tool.is_some(), m.approved)));
        let dense = Arc::new(Dense::build(vectors));
        state.dense = Some(dense.clone());
        dense
    }

    /// Run a query.
    pub fn search(&self, query: &Query<'_>) -> Result<SearchResults, IndexError> {
        let limit = query.limit.clamp(1, MAX_LIMIT);
        let words = {
            let mut analyzer = analyzer();
            let mut seen = HashSet::new();
            terms(&mut analyzer, query.text).into_iter().filter(|t| seen.insert(t.clone())).collect::<Vec<_>>()
        };
        let ranker = self.ranker();
        let empty = SearchResults { hits: Vec::new(), ranker, match_quality: 0.0 };
        let depth = DEPTH.max(limit);
        let tools = query.target == Target::Tools;
        let wanted = |tool: bool, approved: bool| tool == tools && (!query.approved_only || approved);
        let query_vector = match &self.embedder {
            Some(e) if !query.text.trim().is_empty() => match e.embed(&[query.text]) {
                Ok(mut v) if v.len() == 1 => v.pop().map(|mut v| {
                    normalise(&mut v);
                    v
                }),
                Ok(_) => None,
                Err(err) => {
                    tracing::warn!(error = %err, "query not embedded: BM25 only");
                    None
                }
            },
            _ => None,
        };
        // No document embedded (every embedding failed) means BM25 alone.
        let dense = query_vector.as_ref().map(|_| self.dense()).filter(|d| d.bytes() > 0);
        let bm25 = if words.is_empty() { Vec::new() } else { self.bm25(query, &words, depth)? };
        let state = self.state.read();
        let meta = &state.meta;
        let bm25: Vec<(&String, f64)> = bm25
            .into_iter()
            .filter_map(|(id, score)| state.ids.get(&id).map(|k| (k, score)))
            .filter(|(k, _)| meta.get(*k).is_some_and(|m| wanted(m.hit.tool.is_some(), m.approved)))
            .collect();
        // Every candidate's score from the query and its own document alone: its words
        // and (hybrid) the exact cosine of its vector, never how it placed in a ranking.
        let score = |m: &Meta| {
            let lexical = lexical(&words, &m.terms);
            match (&query_vector, &dense) {
                (Some(qv), Some(_)) => blend(lexical, m.vector.as_deref().map(|v| semantic(f64::from(dot(qv, v))))),
                _ => lexical,
            }
        };
        let candidate = |k: &str, raw: f64| {
            let m = meta.get(k)?;
            Some(Candidate { raw, hit: Hit { score: score(m), ..m.hit.clone() } })
        };
        let (candidates, ranker) = match (&query_vector, &dense) {
            (Some(qv), Some(dense)) => {
                let nearest = dense.top(qv, depth, wanted);
                let fused =
                    fuse(&[bm25.iter().map(|(k, _)| (*k).clone()).collect(), nearest.iter().map(|(k, _)| (*k).to_owned()).collect()]);
                (fused.into_iter().filter_map(|(k, raw)| candidate(&k, raw)).collect::<Vec<_>>(), Ranker::Hybrid)
            }
            _ => (bm25.into_iter().filter_map(|(k, raw)| candidate(k, raw)).collect(), Ranker::Bm25),
        };
        if candidates.is_empty() {
            return Ok(empty);
        }
        let hits = finish(candidates, limit);
        let match_quality = hits.first().map_or(0.0, |h| h.score);
        Ok(SearchResults { hits, ranker, match_quality })
    }

    /// BM25 candidates as (document id, raw score), best first.
    fn bm25(&self, query: &Query<'_>, words: &[String], depth: usize) -> Result<Vec<(u64, f64)>, IndexError> {
        let f = self.fields;
        let tools = query.target == Target::Tools;
        let mut should: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
        for word in words {
            for (field, (tool_boost, skill_boost)) in f.text().into_iter().zip(BOOSTS) {
                let boost = if tools { tool_boost } else { skill_boost };
                let term = Term::from_field_text(field, word);
                let q = TermQuery::new(term.clone(), IndexRecordOption::WithFreqs);
                should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
                if word.chars().count() >= TYPO_MIN_CHARS && boost >= 1.5 {
                    let fuzzy = FuzzyTermQuery::new(term, 1, true);
                    should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(fuzzy), boost * 0.4))));
                }
            }
        }
        let filter = |field, value: &str| -> (Occur, Box<dyn tantivy::query::Query>) {
            let q = TermQuery::new(Term::from_field_text(field, value), IndexRecordOption::Basic);
            (Occur::Must, Box::new(ConstScoreQuery::new(Box::new(q), 0.0)))
        };
        let mut clauses = vec![
            (Occur::Must, Box::new(BooleanQuery::new(should)) as Box<dyn tantivy::query::Query>),
            filter(f.kind, if tools { "tool" } else { "skill" }),
        ];
        if query.approved_only {
            clauses.push(filter(f.approved, "yes"));
        }
        let searcher = self.reader.searcher();
        let top = searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(depth).order_by_score())?;
        // Ids from the fast field: no document store read per hit.
        let columns = searcher.segment_readers().iter().map(|s| s.fast_fields().u64("id")).collect::<Result<Vec<_>, _>>()?;
        Ok(top
            .into_iter()
            .filter_map(|(score, address)| {
                let id = columns.get(address.segment_ord as usize)?.first(address.doc_id)?;
                Some((id, f64::from(score)))
            })
            .collect())
    }
}

/// Each analysed word of `doc`'s text fields -> the fields it occurs in (bit `i` for
/// field `i` of [`Fields::text`]).
fn field_terms(doc: &TantivyDocument, fields: Fields, analyzer: &mut TextAnalyzer) -> HashMap<String, u8> {
    let mut words: HashMap<String, u8> = HashMap::new();
    for (i, field) in fields.text().into_iter().enumerate() {
        for value in doc.get_all(field) {
            if let Some(text) = value.as_str() {
                for word in terms(analyzer, text) {
                    *words.entry(word).or_default() |= 1 << i;
                }
            }
        }
    }
    words
}
