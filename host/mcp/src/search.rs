//! `regex` and `exact` matching for `tool_search` and `skill_search`, with the search
//! score contract (ARCHITECTURE.md, "Contracts"): scores in `[0, 1]`, absolute (a
//! function of the query and the document alone, so the same whatever the limit or the
//! other results), and a deterministic order (score, then side effects, then shorter
//! name, then name).
//!
//! `exact` is the name (score 1); `regex` is case-insensitive (0.95 whole name, 0.90
//! prefix, 0.85 inside the name, 0.75 only in the description). `fts` is not here: the
//! search index (`skillhost-index`, tantivy BM25, hybrid with an embedder) answers it,
//! the one full-text engine.

use serde::{Deserialize, Serialize};

use crate::tools::SideEffects;

/// Longest regex accepted, compiled size included: search must stay cheap.
const REGEX_SIZE_LIMIT: usize = 1 << 16;

/// How a query is matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchType {
    /// Ranked full-text search (the search index).
    #[default]
    Fts,
    /// A case-insensitive regular expression.
    Regex,
    /// The exact name.
    Exact,
}

/// How [`matching`] matches a query: the modes of [`SearchType`] answered here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
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

/// Match `docs` against `query`; at most `limit` hits, best first, in the contract's order.
pub fn matching(docs: &[Document<'_>], query: &str, mode: Match, limit: usize) -> Result<Vec<Hit>, SearchError> {
    let mut hits: Vec<Hit> = match mode {
        Match::Exact => docs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.name == query || d.alias == Some(query))
            .map(|(index, _)| Hit { index, score: 1.0 })
            .collect(),
        Match::Regex => regex_hits(docs, query)?,
    };
    hits.sort_by(|a, b| {
        let (da, db) = (&docs[a.index], &docs[b.index]);
        b.score
            .total_cmp(&a.score)
            .then(da.side_effects.cmp(&db.side_effects))
            .then(da.name.len().cmp(&db.name.len()))
            .then(da.name.cmp(db.name))
    });
    hits.truncate(limit);
    Ok(hits)
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
    fn regex_scores_follow_the_contract() {
        let docs = [
            doc("alpha", "first", SideEffects::Pure),
            doc("alphabet", "second", SideEffects::Pure),
            doc("the-alpha", "third", SideEffects::Pure),
            doc("omega", "mentions alpha", SideEffects::Pure),
        ];
        let hits = matching(&docs, "ALPHA", Match::Regex, 8).unwrap();
        let scored: Vec<_> = hits.iter().map(|h| (docs[h.index].name, h.score)).collect();
        assert_eq!(scored, [("alpha", 0.95), ("alphabet", 0.90), ("the-alpha", 0.85), ("omega", 0.75)]);
        assert!(matches!(matching(&docs, "(", Match::Regex, 8), Err(SearchError::Regex { .. })));
    }

    #[test]
    fn ties_break_on_side_effects_then_length_then_name() {
        let docs = [
            doc("b", "x", SideEffects::Write),
            doc("zz", "x", SideEffects::Pure),
            doc("aa", "x", SideEffects::Pure),
            doc("a", "x", SideEffects::Read),
        ];
        let hits = matching(&docs, "x", Match::Regex, 8).unwrap();
        assert_eq!(names(&docs, &hits), ["aa", "zz", "a", "b"]);
        assert_eq!(matching(&docs, "x", Match::Regex, 2).unwrap().len(), 2);
    }

    #[test]
    fn exact_matches_name_or_alias_only() {
        let docs = [Document { name: "t__count", alias: Some("count"), text: "count".into(), side_effects: SideEffects::Pure }];
        assert_eq!(matching(&docs, "count", Match::Exact, 8).unwrap(), [Hit { index: 0, score: 1.0 }]);
        assert!(matching(&docs, "coun", Match::Exact, 8).unwrap().is_empty());
    }
}
