//! Scoring for `tool_search` and `skill_search` with the search score contract
//! (ARCHITECTURE.md, "Contracts"): scores in `[0, 1]`, absolute (a function of the query and the document alone,
//! so the same whatever the limit or the other results), and a deterministic order
//! (score, then side effects, then shorter name, then name).
//!
//! Three modes: `exact` (the name, score 1), `regex` (case-insensitive; 0.95 whole
//! name, 0.90 prefix, 0.85 inside the name, 0.75 only in the description), and `fts`
//! (the share of the query's terms the document has, a term in the name worth 1 and one
//! only in the description [`TEXT_TERM`]; equal scores are ordered by BM25 before the
//! contract's tie-breaks). `fts` is normally answered by the search index
//! (`skillhost-index`: tantivy BM25, hybrid with an embedder); this term matcher is its
//! fallback when the index cannot be used, reported as the `term-match` ranker.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::tools::SideEffects;

/// What an `fts` query term found only in a document's text (not its name) is worth.
pub const TEXT_TERM: f64 = 0.7;

/// Longest regex accepted, compiled size included: search must stay cheap.
const REGEX_SIZE_LIMIT: usize = 1 << 16;

/// How a query is matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchType {
    /// Ranked term matching.
    #[default]
    Fts,
    /// A case-insensitive regular expression.
    Regex,
    /// The exact name.
    Exact,
}

/// Something searchable.
#[derive(Clone, Debug)]
pub struct Document<'a> {
    /// Its name, matched by every mode.
    pub name: &'a str,
    /// Another name it answers to exactly (a tool's bare name).
    pub alias: Option<&'a str>,
    /// Text matched by `regex` and `fts`.
    pub text: String,
    /// Ordering tie-break.
    pub side_effects: SideEffects,
}

/// One ranked result: the index of the document and its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Index into the documents searched.
    pub index: usize,
    /// In `[0, 1]`, higher is better.
    pub score: f64,
}

/// Why a query cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The regex does not compile or is too large.
    #[error("invalid regex `{pattern}`: {reason}; use search_type \"fts\" for plain words")]
    Regex {
        /// The pattern.
        pattern: String,
        /// What the regex engine said.
        reason: String,
    },
}

/// Rank `docs` for `query`; at most `limit` hits, best first, in the contract's order.
pub fn search(docs: &[Document<'_>], query: &str, mode: SearchType, limit: usize) -> Result<Vec<Hit>, SearchError> {
    // Each hit with a tie-break for equal scores (BM25 for `fts`).
    let mut hits: Vec<(Hit, f64)> = match mode {
        SearchType::Exact => docs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.name == query || d.alias == Some(query))
            .map(|(index, _)| (Hit { index, score: 1.0 }, 0.0))
            .collect(),
        SearchType::Regex => regex_hits(docs, query)?.into_iter().map(|h| (h, 0.0)).collect(),
        SearchType::Fts => fts_hits(docs, query),
    };
    hits.sort_by(|(a, ra), (b, rb)| {
        let (da, db) = (&docs[a.index], &docs[b.index]);
        b.score
            .total_cmp(&a.score)
            .then(rb.total_cmp(ra))
            .then(da.side_effects.cmp(&db.side_effects))
            .then(da.name.len().cmp(&db.name.len()))
            .then(da.name.cmp(db.name))
    });
    hits.truncate(limit);
    Ok(hits.into_iter().map(|(hit, _)| hit).collect())
}

fn regex_hits(docs: &[Document<'_>], pattern: &str) -> Result<Vec<Hit>, SearchError> {
    let fail = |reason: String| SearchError::Regex { pattern: pattern.to_owned(), reason };
    let re =
        regex::RegexBuilder::new(pattern).case_insensitive(true).size_limit(REGEX_SIZE_LIMIT).build().map_err(|e| fail(e.to_string()))?;
    let whole = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut hits = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        let names = std::iter::once(doc.name).chain(doc.alias);
        let mut score: Option<f64> = None;
        for name in names {
            let this = if whole.is_match(name) { Some(0.95) } else { re.find(name).map(|m| if m.start() == 0 { 0.90 } else { 0.85 }) };
            score = match (score, this) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        if score.is_none() && re.is_match(&doc.text) {
            score = Some(0.75);
        }
        if let Some(score) = score {
            hits.push(Hit { index, score });
        }
    }
    Ok(hits)
}

/// Lowercase alphanumeric terms; `_`, `-` and punctuation split words.
fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

/// Hits with their absolute score and their BM25 score (the tie-break).
fn fts_hits(docs: &[Document<'_>], query: &str) -> Vec<(Hit, f64)> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let query: BTreeSet<String> = terms(query).into_iter().collect();
    if query.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    // Name terms count twice: a tool named for the query beats one that mentions it.
    let doc_terms: Vec<Vec<String>> = docs
        .iter()
        .map(|d| {
            let name = terms(d.name);
            name.iter().cloned().chain(name.iter().cloned()).chain(terms(&d.text)).collect()
        })
        .collect();
    let n = docs.len() as f64;
    let avg_len = doc_terms.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, f64> = HashMap::new();
    for terms in &doc_terms {
        let unique: BTreeSet<&str> = terms.iter().map(String::as_str).collect();
        for term in unique {
            *df.entry(term).or_default() += 1.0;
        }
    }
    let mut hits = Vec::new();
    for (index, terms) in doc_terms.iter().enumerate() {
        let len = terms.len() as f64;
        let name = self::terms(docs[index].name);
        let (mut bm25, mut found) = (0.0, 0.0);
        for q in &query {
            let tf = terms.iter().filter(|t| *t == q).count() as f64;
            if tf == 0.0 {
                continue;
            }
            found += if name.contains(q) { 1.0 } else { TEXT_TERM };
            let df = df.get(q.as_str()).copied().unwrap_or(0.0);
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            bm25 += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)));
        }
        if found > 0.0 {
            let score = (found / query.len() as f64).clamp(0.0, 1.0);
            hits.push((Hit { index, score }, bm25));
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc<'a>(name: &'a str, text: &str, side_effects: SideEffects) -> Document<'a> {
        Document { name, alias: None, text: text.to_owned(), side_effects }
    }

    fn names<'a>(docs: &'a [Document<'a>], hits: &[Hit]) -> Vec<&'a str> {
        hits.iter().map(|h| docs[h.index].name).collect()
    }

    #[test]
    fn fts_ranks_name_matches_first_and_scores_are_absolute() {
        let docs = [
            doc("text__word_count", "Count the words in a text.", SideEffects::Pure),
            doc("csv__summarize", "Summarize a CSV file: count rows and columns.", SideEffects::Pure),
            doc("units__convert", "Convert between units.", SideEffects::Pure),
        ];
        let hits = search(&docs, "word count", SearchType::Fts, 8).unwrap();
        assert_eq!(names(&docs, &hits), ["text__word_count", "csv__summarize"]);
        assert_eq!(hits[0].score, 1.0);
        assert_eq!(hits[1].score, TEXT_TERM / 2.0);
        // A shorter limit, or fewer documents, changes no score (min-max gave a lone hit 0.5).
        assert_eq!(search(&docs, "word count", SearchType::Fts, 1).unwrap(), hits[..1]);
        assert_eq!(search(&docs[1..], "word count", SearchType::Fts, 8).unwrap(), [Hit { index: 0, score: TEXT_TERM / 2.0 }]);
        assert!(search(&docs, "weather", SearchType::Fts, 8).unwrap().is_empty());
        let single = search(&docs, "convert", SearchType::Fts, 8).unwrap();
        assert_eq!(single, [Hit { index: 2, score: 1.0 }]);
    }

    #[test]
    fn regex_scores_follow_the_contract() {
        let docs = [
            doc("alpha", "first", SideEffects::Pure),
            doc("alphabet", "second", SideEffects::Pure),
            doc("the-alpha", "third", SideEffects::Pure),
            doc("omega", "mentions alpha", SideEffects::Pure),
        ];
        let hits = search(&docs, "ALPHA", SearchType::Regex, 8).unwrap();
        let scored: Vec<_> = hits.iter().map(|h| (docs[h.index].name, h.score)).collect();
        assert_eq!(scored, [("alpha", 0.95), ("alphabet", 0.90), ("the-alpha", 0.85), ("omega", 0.75)]);
        assert!(matches!(search(&docs, "(", SearchType::Regex, 8), Err(SearchError::Regex { .. })));
    }

    #[test]
    fn ties_break_on_side_effects_then_length_then_name() {
        let docs = [
            doc("b", "x", SideEffects::Write),
            doc("zz", "x", SideEffects::Pure),
            doc("aa", "x", SideEffects::Pure),
            doc("a", "x", SideEffects::Read),
        ];
        let hits = search(&docs, "x", SearchType::Regex, 8).unwrap();
        assert_eq!(names(&docs, &hits), ["aa", "zz", "a", "b"]);
        assert_eq!(search(&docs, "x", SearchType::Regex, 2).unwrap().len(), 2);
    }

    #[test]
    fn exact_matches_name_or_alias_only() {
        let docs = [Document { name: "t__count", alias: Some("count"), text: "count".into(), side_effects: SideEffects::Pure }];
        assert_eq!(search(&docs, "count", SearchType::Exact, 8).unwrap(), [Hit { index: 0, score: 1.0 }]);
        assert!(search(&docs, "coun", SearchType::Exact, 8).unwrap().is_empty());
    }
}
