//! [`SearchIndex`]: one tantivy document per tool and one per skill, in a RAM directory,
//! plus what ranking needs beside tantivy (descriptions, side effects, each document's
//! terms for the match-quality check, and its vector when an embedder is set).
//!
//! Updates are per skill: delete every document of the skill, add the new ones, commit,
//! reload the reader. A skill's metadata is dropped before its deletion is committed, so
//! a search racing an update can miss a changed skill for a moment but never shows a
//! removed one.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use skillhost_registry::{Entry, Registry, RegistryEvent};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, FuzzyTermQuery, Occur, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value as _,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};
use tokio::sync::broadcast::error::RecvError;

use crate::doc::SkillDoc;
use crate::embed::{Embedder, cosine};
use crate::rank::{Candidate, Hit, Ranker, SearchResults, finish, fuse};
use crate::text::{ANALYZER, analyzer, terms, within_one_edit};

/// The writer's memory budget: tantivy's per-thread minimum is 15 MB.
const WRITER_BUDGET: usize = 32 << 20;
/// Most results one query returns.
pub const MAX_LIMIT: usize = 100;
/// How deep each ranking goes before fusion and tie-breaks.
const DEPTH: usize = 50;
/// Query terms at least this long also match one-edit typos of indexed words.
const FUZZY_MIN_CHARS: usize = 5;

/// Why the index failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// tantivy failed (creating, writing or reading the index).
    #[error("search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
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
}

#[derive(Clone, Copy)]
struct Fields {
    key: Field,
    kind: Field,
    skill: Field,
    approved: Field,
    name: Field,
    description: Field,
    keywords: Field,
    examples: Field,
    context: Field,
    body: Field,
}

/// Field boosts: (tool documents, skill documents).
const BOOSTS: [(f32, f32); 6] = [(3.0, 3.0), (2.0, 2.0), (1.5, 1.5), (1.5, 1.5), (0.8, 1.0), (0.3, 0.5)];

impl Fields {
    fn text(&self) -> [Field; 6] {
        [self.name, self.description, self.keywords, self.examples, self.context, self.body]
    }
}

/// What ranking needs about one document besides tantivy.
struct Meta {
    hit: Hit,
    approved: bool,
    terms: HashSet<String>,
    vector: Option<Vec<f32>>,
}

struct Writer {
    writer: IndexWriter,
    /// Skill name -> fingerprint of what is indexed for it.
    indexed: HashMap<String, String>,
    analyzer: TextAnalyzer,
}

/// The search index over skills and tools.
pub struct SearchIndex {
    fields: Fields,
    reader: IndexReader,
    writer: Mutex<Writer>,
    meta: RwLock<HashMap<String, Meta>>,
    embedder: Option<Arc<dyn Embedder>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("ranker", &self.ranker())
            .field("documents", &self.meta.read().map(|m| m.len()).unwrap_or_default())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn key(skill: &str, tool: Option<&str>) -> String {
    match tool {
        Some(tool) => format!("t:{skill}/{tool}"),
        None => format!("s:{skill}"),
    }
}

/// What the index remembers about a registry entry: a change means re-index.
fn fingerprint(entry: &Entry) -> Option<String> {
    let loaded = entry.loaded.as_ref()?;
    SkillDoc::from_entry(entry)?;
    Some(format!("{}:{}:{}", loaded.content_hash, entry.state, loaded.origin.display()))
}

impl SearchIndex {
    /// An empty in-memory index ranking with BM25 alone.
    pub fn new() -> Result<Self, IndexError> {
        Self::build(None)
    }

    /// An empty in-memory index ranking with BM25 and `embedder` (hybrid).
    pub fn with_embedder(embedder: Arc<dyn Embedder>) -> Result<Self, IndexError> {
        Self::build(Some(embedder))
    }

    fn build(embedder: Option<Arc<dyn Embedder>>) -> Result<Self, IndexError> {
        let mut schema = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs),
        );
        let fields = Fields {
            key: schema.add_text_field("key", STRING | STORED),
            kind: schema.add_text_field("kind", STRING),
            skill: schema.add_text_field("skill", STRING),
            approved: schema.add_text_field("approved", STRING),
            name: schema.add_text_field("name", text.clone()),
            description: schema.add_text_field("description", text.clone()),
            keywords: schema.add_text_field("keywords", text.clone()),
            examples: schema.add_text_field("examples", text.clone()),
            context: schema.add_text_field("context", text.clone()),
            body: schema.add_text_field("body", text),
        };
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());
        let writer = index.writer_with_num_threads(1, WRITER_BUDGET)?;
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(Self {
            fields,
            reader,
            writer: Mutex::new(Writer { writer, indexed: HashMap::new(), analyzer: analyzer() }),
            meta: RwLock::new(HashMap::new()),
            embedder,
        })
    }

    /// The ranker queries get: hybrid with an embedder, BM25 without.
    pub fn ranker(&self) -> Ranker {
        if self.embedder.is_some() { Ranker::Hybrid } else { Ranker::Bm25 }
    }

    /// The embedding model, when ranking is hybrid.
    pub fn model(&self) -> Option<&str> {
        self.embedder.as_deref().map(Embedder::model)
    }

    /// Add or replace skills given directly (tests, benchmarks, embedders that index
    /// other catalogues). One commit for all of them.
    pub fn upsert(&self, skills: impl IntoIterator<Item = SkillDoc>) -> Result<(), IndexError> {
        let mut writer = lock(&self.writer);
        for skill in skills {
            let name = skill.name.clone();
            self.delete_skill(&mut writer, &name);
            self.add_skill(&mut writer, &skill);
            writer.indexed.insert(name, String::new());
        }
        self.commit(&mut writer)
    }

    /// Remove a skill and its tools.
    pub fn remove(&self, skill: &str) -> Result<(), IndexError> {
        let mut writer = lock(&self.writer);
        self.delete_skill(&mut writer, skill);
        writer.indexed.remove(skill);
        self.commit(&mut writer)
    }

    /// Bring the index in line with the registry's catalog: re-index the skills whose
    /// content, state or origin changed, drop those gone (or disabled, or no longer
    /// loaded). Unchanged skills cost one string comparison.
    pub fn sync(&self, registry: &Registry) -> Result<SyncStats, IndexError> {
        let catalog = registry.catalog();
        let wanted: HashMap<String, (String, &Arc<Entry>)> = catalog
            .iter()
            .filter_map(|e| fingerprint(e).map(|f| (e.name.to_string(), (f, e))))
            .collect();
        let mut writer = lock(&self.writer);
        let mut stats = SyncStats::default();
        let gone: Vec<String> = writer.indexed.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for name in gone {
            self.delete_skill(&mut writer, &name);
            writer.indexed.remove(&name);
            stats.removed += 1;
        }
        for (name, (print, entry)) in &wanted {
            if writer.indexed.get(name) == Some(print) {
                continue;
            }
            self.delete_skill(&mut writer, name);
            if let Some(doc) = SkillDoc::from_entry(entry) {
                self.add_skill(&mut writer, &doc);
            }
            writer.indexed.insert(name.clone(), print.clone());
            stats.indexed += 1;
        }
        if stats != SyncStats::default() {
            self.commit(&mut writer)?;
            tracing::debug!(indexed = stats.indexed, removed = stats.removed, "search index synced");
        }
        Ok(stats)
    }

    /// Apply one registry event: re-read that skill's entry and re-index or drop it.
    pub fn apply(&self, registry: &Registry, event: &RegistryEvent) -> Result<(), IndexError> {
        let name = event.name().as_str();
        let entry = registry.entry(name).ok();
        let print = entry.as_deref().and_then(fingerprint);
        let mut writer = lock(&self.writer);
        if print.is_some() && writer.indexed.get(name) == print.as_ref() {
            return Ok(());
        }
        self.delete_skill(&mut writer, name);
        match (print, entry.as_deref().and_then(SkillDoc::from_entry)) {
            (Some(print), Some(doc)) => {
                self.add_skill(&mut writer, &doc);
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

    fn delete_skill(&self, writer: &mut Writer, skill: &str) {
        let mut meta = self.meta.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        meta.retain(|_, m| m.hit.skill != skill);
        writer.writer.delete_term(Term::from_field_text(self.fields.skill, skill));
    }

    fn add_skill(&self, writer: &mut Writer, skill: &SkillDoc) {
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
        let vectors = self.embedder.as_ref().and_then(|e| {
            let texts: Vec<&str> = entries.iter().map(|(_, _, _, t)| t.as_str()).collect();
            e.embed(&texts)
                .inspect_err(|err| tracing::warn!(skill = %skill.name, error = %err, "not embedded: BM25 only for this skill"))
                .ok()
                .filter(|v| v.len() == texts.len())
        });
        let mut meta = self.meta.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (i, (k, mut doc, hit, _)) in entries.into_iter().enumerate() {
            let mut words = HashSet::new();
            for field in f.text() {
                for value in doc.get_all(field) {
                    if let Some(text) = value.as_str() {
                        words.extend(terms(&mut writer.analyzer, text));
                    }
                }
            }
            doc.add_text(f.key, &k);
            doc.add_text(f.kind, if hit.tool.is_some() { "tool" } else { "skill" });
            doc.add_text(f.skill, &skill.name);
            doc.add_text(f.approved, approved);
            if let Err(e) = writer.writer.add_document(doc) {
                tracing::warn!(skill = %skill.name, error = %e, "not indexed");
                continue;
            }
            let vector = vectors.as_ref().and_then(|v| v.get(i).cloned());
            meta.insert(k, Meta { hit, approved: skill.approved, terms: words, vector });
        }
    }

    fn commit(&self, writer: &mut Writer) -> Result<(), IndexError> {
        writer.writer.commit()?;
        self.reader.reload()?;
        Ok(())
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
        let bm25 = if words.is_empty() { Vec::new() } else { self.bm25(query, &words, depth)? };
        let meta = self.meta.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let wanted = |m: &Meta| {
            (m.hit.tool.is_some() == (query.target == Target::Tools)) && (!query.approved_only || approved(m))
        };
        let bm25: Vec<(String, f64)> = bm25.into_iter().filter(|(k, _)| meta.get(k).is_some_and(wanted)).collect();
        let query_vector = match &self.embedder {
            Some(e) if !query.text.trim().is_empty() => match e.embed(&[query.text]) {
                Ok(mut v) if v.len() == 1 => v.pop(),
                Ok(_) => None,
                Err(err) => {
                    tracing::warn!(error = %err, "query not embedded: BM25 only");
                    None
                }
            },
            _ => None,
        };
        // Documents embedded: none (every embedding failed) means BM25 alone.
        let query_vector = query_vector.filter(|_| meta.values().any(|m| m.vector.is_some()));
        let (candidates, best_cosine, ranker) = match &query_vector {
            Some(qv) => {
                let mut dense: Vec<(&String, f32)> = meta
                    .iter()
                    .filter(|(_, m)| wanted(m))
                    .filter_map(|(k, m)| m.vector.as_ref().map(|v| (k, cosine(qv, v))))
                    .collect();
                dense.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
                dense.truncate(depth);
                let cosines: HashMap<&String, f32> = dense.iter().copied().collect();
                let fused = fuse(&[
                    bm25.iter().map(|(k, _)| k.clone()).collect(),
                    dense.iter().map(|(k, _)| (*k).clone()).collect(),
                ]);
                let candidates: Vec<Candidate> = fused
                    .into_iter()
                    .filter_map(|(k, raw)| {
                        let hit = meta.get(&k)?.hit.clone();
                        Some(Candidate { key: k, raw, hit })
                    })
                    .collect();
                let best = |c: &[Candidate]| {
                    c.iter().max_by(|a, b| a.raw.total_cmp(&b.raw)).and_then(|c| cosines.get(&c.key).copied())
                };
                let best_cosine = best(&candidates);
                (candidates, best_cosine, Ranker::Hybrid)
            }
            None => {
                let candidates = bm25
                    .into_iter()
                    .filter_map(|(k, raw)| {
                        let hit = meta.get(&k)?.hit.clone();
                        Some(Candidate { key: k, raw, hit })
                    })
                    .collect();
                (candidates, None, Ranker::Bm25)
            }
        };
        if candidates.is_empty() {
            return Ok(empty);
        }
        let top_key = candidates
            .iter()
            .max_by(|a, b| a.raw.total_cmp(&b.raw).then(b.key.cmp(&a.key)))
            .map(|c| c.key.clone())
            .unwrap_or_default();
        let coverage = meta.get(&top_key).map_or(0.0, |m| coverage(&words, &m.terms));
        let dense_quality = best_cosine.map_or(0.0, |c| f64::from((c - 0.15) / 0.35).clamp(0.0, 1.0));
        let hits = finish(candidates, limit);
        Ok(SearchResults { hits, ranker, match_quality: coverage.max(dense_quality) })
    }

    /// BM25 candidates as (key, raw score), best first.
    fn bm25(&self, query: &Query<'_>, words: &[String], depth: usize) -> Result<Vec<(String, f64)>, IndexError> {
        let f = self.fields;
        let tools = query.target == Target::Tools;
        let mut should: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
        for word in words {
            for (field, (tool_boost, skill_boost)) in f.text().into_iter().zip(BOOSTS) {
                let boost = if tools { tool_boost } else { skill_boost };
                let term = Term::from_field_text(field, word);
                let q = TermQuery::new(term.clone(), IndexRecordOption::WithFreqs);
                should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
                if word.chars().count() >= FUZZY_MIN_CHARS && boost >= 1.5 {
                    let fuzzy = FuzzyTermQuery::new(term, 1, true);
                    should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(fuzzy), boost * 0.4))));
                }
            }
        }
        let filter = |field: Field, value: &str| -> (Occur, Box<dyn tantivy::query::Query>) {
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
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            if let Some(k) = doc.get_first(f.key).and_then(|v| v.as_str()) {
                out.push((k.to_owned(), f64::from(score)));
            }
        }
        Ok(out)
    }
}

fn approved(meta: &Meta) -> bool {
    meta.approved
}

/// The share of the query's words found in a document's words (a one-edit typo of a
/// word of five or more characters counts).
fn coverage(words: &[String], doc: &HashSet<String>) -> f64 {
    if words.is_empty() {
        return 0.0;
    }
    let found = words
        .iter()
        .filter(|w| {
            doc.contains(*w)
                || (w.chars().count() >= FUZZY_MIN_CHARS && doc.iter().any(|d| within_one_edit(w, d)))
        })
        .count();
    found as f64 / words.len() as f64
}
