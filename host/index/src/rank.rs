//! The score contract of seed 002 §1.5 and rank fusion.
//!
//! - Scores are in `[0, 1]`, higher is better, comparable only within one response: the
//!   ranker's raw scores (BM25, or fused reciprocal ranks) are min-max normalised over
//!   the hits returned; one hit, or hits that all score the same, get 0.5.
//! - Order: score, then side effects (`pure < read < write < external < stateful`),
//!   then the shorter name, then the name. (The contract's namespace preference has no
//!   configuration yet, so it never separates two hits.)
//! - Hybrid ranking is reciprocal rank fusion (k = 60) of the BM25 ranking and the
//!   cosine ranking.
//! - Min-max hides how good the best hit is, so results also carry `match_quality`:
//!   the share of the query's words the best hit contains (a one-edit typo counts),
//!   and, with an embedder, at least its cosine similarity. Under [`WEAK_MATCH`] no tool
//!   matched well: the caller should say so (and that creating a skill is an option).

use std::collections::HashMap;

use serde::Serialize;

use crate::doc::SideEffects;

/// Below this `match_quality`, no result matched the query well.
///
/// Tuned on tests/search-eval (`cargo test -p skillhost-index --test all eval --
/// --nocapture` prints the sweep): 189 labelled queries that have a right tool and 20
/// off-topic requests no skill serves ("book me a flight to Lisbon", "order a large
/// pepperoni pizza", ...). Share flagged as weak, labelled / off-topic:
///
/// | threshold | hybrid          | BM25 alone      |
/// | --------- | --------------- | --------------- |
/// | 0.35      | 8.5 % / 85 %    | 31.7 % / 85 %   |
/// | 0.45      | 12.7 % / 95 %   | 33.3 % / 90 %   |
/// | 0.50      | 14.3 % / 95 %   | 33.3 % / 90 %   |
/// | 0.55      | 24.9 % / 100 %  | 59.3 % / 100 %  |
///
/// 0.45 catches as many off-topic requests as 0.5 with fewer false alarms (hybrid), and
/// 0.55 would flag a quarter (hybrid) to three fifths (BM25) of answerable queries to
/// catch the last one ("book me a flight" still meets the flight-status skill). The
/// signal only adds a hint ("creating a skill is an option") and never hides results,
/// so a false alarm costs little; BM25's false alarms are colloquial queries that share
/// one word of two with the right tool, which the model fixes.
pub const WEAK_MATCH: f64 = 0.45;

/// Reciprocal rank fusion's constant: damps the head of each ranking.
const RRF_K: f64 = 60.0;

/// Which ranker answered a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ranker {
    /// tantivy BM25 alone.
    Bm25,
    /// BM25 fused with embedding similarity.
    Hybrid,
}

impl Ranker {
    /// `bm25` or `hybrid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ranker::Bm25 => "bm25",
            Ranker::Hybrid => "hybrid",
        }
    }
}

impl std::fmt::Display for Ranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// The skill.
    pub skill: String,
    /// The tool, for tool searches.
    pub tool: Option<String>,
    /// The tool's (or skill's) description.
    pub description: String,
    /// In `[0, 1]`, higher is better; comparable within one response only.
    pub score: f64,
    /// Ordering tie-break.
    #[serde(skip)]
    pub side_effects: SideEffects,
}

impl Hit {
    /// `SKILL__TOOL` for a tool, the skill's name for a skill.
    pub fn public_name(&self) -> String {
        match &self.tool {
            Some(tool) => format!("{}__{tool}", self.skill),
            None => self.skill.clone(),
        }
    }
}

/// The answer to one query.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchResults {
    /// Best first, in the contract's order.
    pub hits: Vec<Hit>,
    /// Which ranker produced the order.
    pub ranker: Ranker,
    /// How well the best hit matches, in `[0, 1]` (0 without hits).
    pub match_quality: f64,
}

impl SearchResults {
    /// Whether nothing matched well (no hit, or `match_quality` under [`WEAK_MATCH`]).
    pub fn weak(&self) -> bool {
        self.hits.is_empty() || self.match_quality < WEAK_MATCH
    }
}

/// A candidate before normalisation: its raw score, for ordering.
pub(crate) struct Candidate {
    pub key: String,
    pub raw: f64,
    pub hit: Hit,
}

/// Reciprocal rank fusion of rankings given best first: key -> fused score.
pub(crate) fn fuse(rankings: &[Vec<String>]) -> HashMap<String, f64> {
    let mut fused: HashMap<String, f64> = HashMap::new();
    for ranking in rankings {
        for (rank, key) in ranking.iter().enumerate() {
            *fused.entry(key.clone()).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    fused
}

/// Order by raw score and the contract's tie-break, keep `limit`, normalise the scores.
pub(crate) fn finish(mut candidates: Vec<Candidate>, limit: usize) -> Vec<Hit> {
    candidates.sort_by(|a, b| {
        let (na, nb) = (a.hit.public_name(), b.hit.public_name());
        b.raw
            .total_cmp(&a.raw)
            .then(a.hit.side_effects.cmp(&b.hit.side_effects))
            .then(na.len().cmp(&nb.len()))
            .then(na.cmp(&nb))
    });
    candidates.truncate(limit);
    let max = candidates.iter().map(|c| c.raw).fold(f64::MIN, f64::max);
    let min = candidates.iter().map(|c| c.raw).fold(f64::MAX, f64::min);
    candidates
        .into_iter()
        .map(|c| {
            let score = if max > min { (c.raw - min) / (max - min) } else { 0.5 };
            Hit { score: score.clamp(0.0, 1.0), ..c.hit }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(skill: &str, tool: &str, raw: f64, side_effects: SideEffects) -> Candidate {
        let hit = Hit { skill: skill.into(), tool: Some(tool.into()), description: String::new(), score: 0.0, side_effects };
        Candidate { key: format!("{skill}/{tool}"), raw, hit }
    }

    #[test]
    fn scores_are_min_max_over_returned_hits_and_ties_break_deterministically() {
        let hits = finish(
            vec![
                cand("b", "x", 1.0, SideEffects::Write),
                cand("zz", "x", 1.0, SideEffects::Pure),
                cand("aa", "x", 1.0, SideEffects::Pure),
                cand("a", "x", 1.0, SideEffects::Read),
                cand("top", "x", 3.0, SideEffects::Stateful),
                cand("low", "x", 0.5, SideEffects::Pure),
            ],
            5,
        );
        let names: Vec<_> = hits.iter().map(Hit::public_name).collect();
        assert_eq!(names, ["top__x", "aa__x", "zz__x", "a__x", "b__x"]);
        assert_eq!(hits[0].score, 1.0);
        assert_eq!(hits[4].score, 0.0);
        assert!(hits.iter().all(|h| (0.0..=1.0).contains(&h.score)));
        let single = finish(vec![cand("a", "x", 7.0, SideEffects::Pure)], 5);
        assert_eq!(single[0].score, 0.5);
    }

    #[test]
    fn fusion_rewards_agreement_between_rankings() {
        let a = vec!["x".to_owned(), "y".to_owned(), "z".to_owned()];
        let b = vec!["y".to_owned(), "w".to_owned()];
        let fused = fuse(&[a, b]);
        assert!(fused["y"] > fused["x"]);
        assert!(fused["x"] > fused["w"]);
        assert!(fused["w"] > fused["z"]);
    }
}
