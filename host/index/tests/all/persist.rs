//! The on-disk index: a restart over an unchanged catalogue embeds nothing, a changed
//! skill is re-embedded alone, a removed one stays gone, another model re-embeds
//! everything, damaged files are rebuilt, and a second process searches a copy.
//!
//! The embedder is the real all-MiniLM-L6-v2 when it is installed, else the letter
//! trigram embedder of `basics` (deterministic, real vectors), wrapped to count texts.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use skillhost_core::Policy;
use skillhost_index::{EmbedError, Embedder, Query, Ranker, SearchIndex, SideEffects, SkillDoc, Storage, Target, ToolDoc};
use skillhost_registry::{Registry, RegistryConfig};

use crate::{runtime, write_skill};

/// Counts the texts it embeds (documents and queries).
struct Counting {
    inner: Arc<dyn Embedder>,
    identity: String,
    texts: AtomicUsize,
}

impl Counting {
    fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        let identity = inner.identity();
        Arc::new(Self { inner, identity, texts: AtomicUsize::new(0) })
    }
    /// Claims another model's identity (same vectors): a model change.
    fn renamed(inner: Arc<dyn Embedder>, identity: &str) -> Arc<Self> {
        Arc::new(Self { inner, identity: identity.into(), texts: AtomicUsize::new(0) })
    }
    fn count(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

impl Embedder for Counting {
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn identity(&self) -> String {
        self.identity.clone()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

/// MiniLm when installed, else letter trigrams.
fn model() -> Arc<dyn Embedder> {
    static MODEL: std::sync::OnceLock<Arc<dyn Embedder>> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let files = crate::eval::site_packages().map(|dir| skillhost_index::ModelFiles::in_site_packages(&dir));
            match files.as_ref().map(skillhost_index::MiniLm::load) {
                Some(Ok(model)) => Arc::new(model),
                other => {
                    println!("persist tests: MiniLm not installed ({:?}): letter trigrams instead", other.map(|r| r.err()));
                    Arc::new(crate::basics::Trigrams)
                }
            }
        })
        .clone()
}

/// A host start: the registry over `workspace` (no watching) and its data dir.
async fn start(data: &Path, workspace: &Path) -> Arc<Registry> {
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(workspace.to_owned());
    config.watch = false;
    Registry::open(config, runtime(), Policy::new(data.join("skill-data"))).await.unwrap()
}

fn skills(index: &SearchIndex, text: &str) -> Vec<String> {
    index.search(&Query::new(text, Target::Skills)).unwrap().hits.into_iter().map(|h| h.skill).collect()
}

fn catalogue(workspace: &Path) {
    write_skill(workspace, "release-notes", "How we write release notes", "Group changes by crate.");
    write_skill(workspace, "uptime-runbook", "What to do when the site is down", "Check the status page first.");
    write_skill(workspace, "expense-report", "Filing expense reports and receipts", "Scan receipts, then submit.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_embeds_only_what_changed_and_removed_skills_stay_gone() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    catalogue(workspace.path());
    let dir = data.path().join("index");

    // First start: everything is embedded (one document per SKILL.md skill).
    let registry = start(data.path(), workspace.path()).await;
    let counter = Counting::new(model());
    let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    assert_eq!(index.storage(), &Storage::Disk(dir.clone()));
    let stats = index.sync(&registry).unwrap();
    assert_eq!((stats.indexed, stats.embedded, counter.count()), (3, 3, 3));
    drop(index);

    // Second start over the same catalogue: nothing embedded, same answers.
    let registry = start(data.path(), workspace.path()).await;
    let counter = Counting::new(model());
    let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    assert_eq!(index.status().documents, 3);
    assert_eq!(index.status().embedded, 3);
    let stats = index.sync(&registry).unwrap();
    assert_eq!((stats.indexed, stats.removed, stats.embedded), (0, 0, 0));
    assert_eq!(counter.count(), 0, "an unchanged catalogue is not embedded again");
    let found = index.search(&Query::new("the site is down", Target::Skills)).unwrap();
    assert_eq!(found.ranker, Ranker::Hybrid);
    assert_eq!(found.hits[0].skill, "uptime-runbook");
    drop(index);

    // One skill changed, one removed: exactly the changed one is embedded again.
    write_skill(workspace.path(), "expense-report", "Filing travel expenses and mileage", "Scan receipts, then submit.");
    std::fs::remove_dir_all(workspace.path().join("uptime-runbook")).unwrap();
    let registry = start(data.path(), workspace.path()).await;
    let counter = Counting::new(model());
    let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    let stats = index.sync(&registry).unwrap();
    assert_eq!((stats.indexed, stats.removed, stats.embedded, counter.count()), (1, 1, 1, 1));
    assert!(!skills(&index, "site down status page").contains(&"uptime-runbook".to_owned()));
    assert_eq!(skills(&index, "mileage")[0], "expense-report");
    drop(index);

    // A third start, before any sync: the removed skill is not on disk either.
    let index = SearchIndex::open(&dir, Some(Counting::new(model()))).unwrap();
    assert!(!skills(&index, "site down status page").contains(&"uptime-runbook".to_owned()));
    assert_eq!(index.status().skills, 2);
}

fn tool(name: &str, description: &str) -> ToolDoc {
    ToolDoc { name: name.into(), description: description.into(), side_effects: SideEffects::Read }
}

fn docs() -> Vec<SkillDoc> {
    let mut weather = SkillDoc::new("weather", "Weather forecasts.");
    weather.tools = vec![tool("forecast", "Daily weather forecast for a city."), tool("current", "Current temperature.")];
    let mut uptime = SkillDoc::new("uptime", "Check whether websites respond.");
    uptime.tools = vec![
        tool("check_uptime", "Check if an HTTP endpoint is up."),
        tool("check_ssl_expiry", "When a TLS certificate expires."),
        tool("ping", "Ping a host."),
    ];
    vec![weather, uptime]
}

#[test]
fn a_changed_skill_re_embeds_exactly_its_documents_and_a_model_change_everything() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("index");
    let counter = Counting::new(model());
    let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    assert_eq!(index.upsert(docs()).unwrap().embedded, 7);
    assert_eq!(index.upsert(docs()).unwrap().embedded, 0, "the same documents again");
    drop(index);

    let counter = Counting::new(model());
    let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    let mut changed = docs();
    changed[1].tools[2].description = "Send ICMP echo requests to a host.".into();
    let stats = index.upsert(changed.clone()).unwrap();
    assert_eq!((stats.indexed, stats.embedded, counter.count()), (1, 4, 4), "the uptime skill and its three tools");
    drop(index);

    // Another model: every document again. No model: nothing embedded, BM25.
    let other = Counting::renamed(model(), "another-model@0");
    let index = SearchIndex::open(&dir, Some(other.clone())).unwrap();
    assert_eq!(index.upsert(changed.clone()).unwrap().embedded, 7);
    assert_eq!(other.count(), 7);
    drop(index);
    let index = SearchIndex::open(&dir, None).unwrap();
    let stats = index.upsert(changed).unwrap();
    assert_eq!((stats.indexed, stats.embedded), (2, 0));
    assert_eq!(index.search(&Query::new("ping a host", Target::Tools)).unwrap().ranker, Ranker::Bm25);
    assert_eq!(index.status().embedded, 0, "no stale vectors of the other model");
}

/// Overwrite every file named by `pick` with garbage of the same length.
fn damage(dir: &Path, pick: impl Fn(&str) -> bool) -> usize {
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && pick(&name) {
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            std::fs::write(&path, vec![0xa5u8; len.max(8)]).unwrap();
            damaged += 1;
        }
    }
    damaged
}

#[test]
fn damaged_files_are_rebuilt_not_fatal() {
    for (what, pick) in [
        ("meta.json", (|n: &str| n == "meta.json") as fn(&str) -> bool),
        ("segment files", |n: &str| n.ends_with(".store") || n.ends_with(".idx") || n.ends_with(".term")),
        ("the managed-files list", |n: &str| n == ".managed.json"),
    ] {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("index");
        let index = SearchIndex::open(&dir, Some(Counting::new(model()))).unwrap();
        index.upsert(docs()).unwrap();
        drop(index);
        assert!(damage(&dir, pick) > 0, "{what}: nothing to damage");

        let counter = Counting::new(model());
        let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
        assert_eq!(index.storage(), &Storage::Disk(dir.clone()), "{what}");
        assert_eq!(index.status().documents, 0, "{what}: rebuilt empty");
        assert_eq!(index.upsert(docs()).unwrap().embedded, 7, "{what}");
        assert_eq!(index.search(&Query::new("weather forecast", Target::Tools)).unwrap().hits[0].public_name(), "weather__forecast");
        drop(index);
        // And the rebuilt index persists like any other.
        let counter = Counting::new(model());
        let index = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
        assert_eq!(index.upsert(docs()).unwrap().embedded, 0, "{what}");
    }
}

#[test]
fn a_second_writer_searches_an_in_memory_copy() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("index");
    let first = SearchIndex::open(&dir, Some(Counting::new(model()))).unwrap();
    first.upsert(docs()).unwrap();

    let counter = Counting::new(model());
    let second = SearchIndex::open(&dir, Some(counter.clone())).unwrap();
    assert_eq!(second.storage(), &Storage::Copy(dir.clone()));
    assert_eq!(second.upsert(docs()).unwrap().embedded, 0, "seeded from disk with its vectors");
    assert_eq!(second.search(&Query::new("tls certificate", Target::Tools)).unwrap().hits[0].public_name(), "uptime__check_ssl_expiry");
    // Its changes stay in memory; the first still owns the disk.
    second.remove("weather").unwrap();
    assert!(second.search(&Query::new("weather forecast", Target::Tools)).unwrap().hits.iter().all(|h| h.skill != "weather"));
    assert_eq!(first.search(&Query::new("weather forecast", Target::Tools)).unwrap().hits[0].skill, "weather");
    assert_eq!(counter.count(), 2, "only the two queries were embedded");
}

/// A writer at rest holds threads and tantivy's 4 MB term table: one is made for each
/// batch and let go at its commit, while the directory stays this process's.
#[test]
fn an_index_at_rest_holds_no_writer_and_still_owns_its_directory() {
    use tantivy::directory::{Directory as _, INDEX_WRITER_LOCK, MmapDirectory};
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("index");
    let first = SearchIndex::open(&dir, None).unwrap();
    let writer_free = || MmapDirectory::open(&dir).unwrap().acquire_lock(&INDEX_WRITER_LOCK).is_ok();
    assert!(writer_free(), "opened: no writer");
    assert_eq!(first.upsert(docs()).unwrap().indexed, 2);
    assert!(writer_free(), "a batch committed lets its writer go");
    let second = SearchIndex::open(&dir, None).unwrap();
    assert_eq!(second.storage(), &Storage::Copy(dir.clone()), "the first still owns the directory");
    first.remove("weather").unwrap();
    assert!(writer_free());
    drop((first, second));
    let reopened = SearchIndex::open(&dir, None).unwrap();
    assert_eq!(reopened.storage(), &Storage::Disk(dir.clone()));
    assert_eq!(reopened.status().skills, 1, "the removal was committed");
}

#[test]
fn a_directory_of_other_files_gives_an_in_memory_index() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("notes.txt"), "keep me").unwrap();
    let index = SearchIndex::open(data.path(), None).unwrap();
    assert_eq!(index.storage(), &Storage::Memory);
    index.upsert(docs()).unwrap();
    assert_eq!(index.search(&Query::new("ping", Target::Tools)).unwrap().hits[0].public_name(), "uptime__ping");
    assert_eq!(std::fs::read_to_string(data.path().join("notes.txt")).unwrap(), "keep me");
}
