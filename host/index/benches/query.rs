//! Query latency of the search index at 10,000 synthetic tools (2,500 skills of four
//! tools), BM25 only: criterion's estimate plus p50/p95/p99 over 2,000 varied queries,
//! the build throughput, and the resident memory the index added per 1,000 tools.
//!
//! `cargo bench -p skillhost-index --bench query`

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]
#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use skillhost_index::{Query, SearchIndex, SideEffects, SkillDoc, Target, ToolDoc};

const SKILLS: usize = 2_500;
const TOOLS_PER_SKILL: usize = 4;

const NOUNS: &[&str] = &[
    "invoice", "weather", "uptime", "csv", "image", "pdf", "email", "calendar", "stock", "crypto", "dns", "json",
    "regex", "password", "uuid", "timezone", "cron", "markdown", "sql", "news", "wiki", "route", "feed", "page",
    "screenshot", "grammar", "sentiment", "summary", "task", "note", "file", "disk", "container", "pod", "log",
    "commit", "package", "archive", "color", "address", "flight", "recipe", "ticket", "order", "customer",
    "report", "backup", "certificate", "queue", "metric",
];
const VERBS: &[&str] = &[
    "list", "create", "delete", "convert", "check", "search", "summarize", "export", "import", "validate",
    "render", "fetch", "count", "merge", "split", "translate", "monitor", "schedule", "compare", "archive",
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
                .map(|_| {
                    let verb = VERBS[next(&mut rng) % VERBS.len()];
                    ToolDoc {
                        name: format!("{verb}_{noun}"),
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

fn bench(c: &mut Criterion) {
    let catalogue = catalogue();
    let before = rss_kib();
    let index = SearchIndex::new().unwrap();
    let start = Instant::now();
    index.upsert(catalogue).unwrap();
    let build = start.elapsed();
    let tools = (SKILLS * TOOLS_PER_SKILL) as f64;
    let after = rss_kib();
    println!(
        "build: {tools} tools in {build:.2?} ({:.0} tools/s); resident memory added: {:.1} MiB per 1,000 tools",
        tools / build.as_secs_f64(),
        (after.saturating_sub(before)) as f64 / 1024.0 / (tools / 1000.0)
    );
    let queries = queries();
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
        "bm25 query at {tools} tools over {} queries: p50 {:.2?}, p95 {:.2?}, p99 {:.2?}",
        times.len(),
        percentile(&times, 0.50),
        percentile(&times, 0.95),
        percentile(&times, 0.99)
    );
    let mut i = 0;
    c.bench_function("bm25 tool search, 10k tools", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            index.search(&Query::new(&queries[i], Target::Tools)).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
