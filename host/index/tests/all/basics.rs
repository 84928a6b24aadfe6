//! Ranking, filtering, removal and the weak-match signal through the public API.

use std::sync::Arc;

use skillhost_index::{EmbedError, Embedder, Query, Ranker, SearchIndex, SideEffects, SkillDoc, Target, ToolDoc, WEAK_MATCH};

fn tool(name: &str, description: &str) -> ToolDoc {
    ToolDoc { name: name.into(), description: description.into(), side_effects: SideEffects::Pure }
}

fn catalogue() -> Vec<SkillDoc> {
    let mut uptime = SkillDoc::new("uptime-checker", "Check whether websites respond.");
    uptime.keywords = vec!["uptime".into(), "status".into(), "monitoring".into()];
    uptime.example_queries = vec!["is my server up?".into()];
    uptime.tools =
        vec![tool("check_uptime", "Check if an HTTP endpoint is up."), tool("check_ssl_expiry", "When a TLS certificate expires.")];
    let mut weather = SkillDoc::new("weather", "Weather forecasts.");
    weather.tools = vec![tool("forecast", "Daily weather forecast for a city.")];
    weather.instructions = Some("---\nname: weather\n---\nUse forecast for rain and temperature questions.".into());
    let mut secret = SkillDoc::new("shady", "Checks uptime of websites too, but nobody approved it.");
    secret.tools = vec![tool("check_uptime", "Check if a site is up.")];
    secret.approved = false;
    vec![uptime, weather, secret]
}

fn names(index: &SearchIndex, query: Query<'_>) -> Vec<String> {
    index.search(&query).unwrap().hits.iter().map(|h| h.public_name()).collect()
}

#[test]
fn colloquial_query_finds_the_tool_and_scores_follow_the_contract() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    let found = index.search(&Query::new("is my site down? check uptime", Target::Tools)).unwrap();
    assert_eq!(found.ranker, Ranker::Bm25);
    assert_eq!(found.hits[0].public_name(), "uptime-checker__check_uptime");
    assert_eq!(found.match_quality, found.hits[0].score);
    assert!(found.hits.iter().all(|h| (0.0..=1.0).contains(&h.score)));
    assert!(found.hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(!found.weak(), "{found:?}");
    // The SKILL.md body is searched too.
    assert_eq!(names(&index, Query::new("rain", Target::Tools)), ["weather__forecast"]);
    assert_eq!(names(&index, Query::new("rain", Target::Skills)), ["weather"]);
}

#[test]
fn unapproved_skills_are_hidden_unless_asked_for() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    let agent = names(&index, Query::new("uptime", Target::Tools).limit(20));
    assert!(!agent.iter().any(|n| n.starts_with("shady")), "{agent:?}");
    let human = names(&index, Query::new("uptime", Target::Tools).limit(20).include_unapproved());
    assert!(human.iter().any(|n| n == "shady__check_uptime"), "{human:?}");
    assert!(!names(&index, Query::new("nobody approved", Target::Skills)).contains(&"shady".to_owned()));
}

#[test]
fn a_removed_or_replaced_skill_never_comes_back() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    index.remove("weather").unwrap();
    assert!(names(&index, Query::new("forecast", Target::Tools)).is_empty());
    let mut renamed = catalogue().remove(0);
    renamed.tools = vec![tool("probe", "Probe a URL.")];
    index.upsert([renamed]).unwrap();
    let found = names(&index, Query::new("check uptime", Target::Tools).limit(20));
    assert!(!found.iter().any(|n| n == "uptime-checker__check_uptime"), "{found:?}");
    assert_eq!(names(&index, Query::new("probe", Target::Tools)), ["uptime-checker__probe"]);
}

/// Skills that have nothing to do with uptime or weather; one shares a word with a
/// pizza order.
fn unrelated() -> Vec<SkillDoc> {
    let mut shop = SkillDoc::new("shop", "Manage a web shop.");
    shop.tools = vec![tool("list_orders", "List the orders placed today.")];
    let mut notes = SkillDoc::new("notes", "Keep notes.");
    notes.keywords = vec!["memo".into(), "journal".into()];
    notes.tools = vec![tool("write_note", "Write a note."), tool("find_notes", "Find notes by their words.")];
    vec![shop, notes]
}

/// A (query, tool) pair scores the same whatever the limit and whatever else is in the
/// catalogue, BM25 alone and hybrid. (Min-max over the returned hits gave a lone hit
/// 0.5, the last of a short list 0, and the first 1.)
#[test]
fn scores_are_absolute_whatever_the_limit_and_the_catalogue() {
    let small = || catalogue();
    let large = || catalogue().into_iter().chain(unrelated()).collect::<Vec<_>>();
    let indexes = |skills: Vec<SkillDoc>| {
        let bm25 = SearchIndex::new().unwrap();
        bm25.upsert(skills.clone()).unwrap();
        let hybrid = SearchIndex::with_embedder(Arc::new(Trigrams)).unwrap();
        hybrid.upsert(skills).unwrap();
        [bm25, hybrid]
    };
    let text = "check uptime or the weather forecast";
    for (index, bigger) in indexes(small()).iter().zip(indexes(large())) {
        let eight = index.search(&Query::new(text, Target::Tools).limit(8)).unwrap();
        assert!(eight.hits.len() >= 3, "{eight:?}");
        for limit in [1, 2, 3] {
            let few = index.search(&Query::new(text, Target::Tools).limit(limit)).unwrap();
            assert_eq!(few.hits.as_slice(), &eight.hits[..limit], "{} limit {limit}", index.ranker());
            assert_eq!(few.match_quality, eight.match_quality);
        }
        let more = bigger.search(&Query::new(text, Target::Tools).limit(8)).unwrap();
        for hit in &eight.hits {
            let same = more.hits.iter().find(|h| h.public_name() == hit.public_name());
            assert_eq!(same.map(|h| h.score), Some(hit.score), "{} {}: {more:?}", index.ranker(), hit.public_name());
        }
    }
}

/// An off-topic request that shares one word with a tool: that tool is found, and its
/// score says it is no good match.
#[test]
fn an_off_topic_request_scores_under_the_weak_match_threshold() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue().into_iter().chain(unrelated())).unwrap();
    let pizza = index.search(&Query::new("order a large pepperoni pizza", Target::Tools)).unwrap();
    assert_eq!(pizza.hits.first().map(|h| h.public_name()).as_deref(), Some("shop__list_orders"), "{pizza:?}");
    assert!(pizza.hits.iter().all(|h| h.score < WEAK_MATCH), "{pizza:?}");
    assert!(pizza.weak());
    let orders = index.search(&Query::new("list today's orders", Target::Tools)).unwrap();
    assert_eq!(orders.hits[0].public_name(), "shop__list_orders");
    assert!(orders.hits[0].score >= WEAK_MATCH && !orders.weak(), "{orders:?}");
}

#[test]
fn typos_still_match_and_unrelated_requests_are_weak() {
    let index = SearchIndex::new().unwrap();
    index.upsert(catalogue()).unwrap();
    assert_eq!(names(&index, Query::new("wether forcast", Target::Tools))[0], "weather__forecast");
    let pizza = index.search(&Query::new("order a pizza for dinner", Target::Tools)).unwrap();
    assert!(pizza.weak(), "{pizza:?}");
    let nothing = index.search(&Query::new("is it?", Target::Tools)).unwrap();
    assert!(nothing.hits.is_empty() && nothing.weak());
}

/// Letter-trigram counts: a deterministic embedder (real vectors, no model files),
/// enough to test the fusion and persistence plumbing (not retrieval quality).
pub(crate) struct Trigrams;

impl Embedder for Trigrams {
    fn model(&self) -> &str {
        "trigrams"
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let chars: Vec<char> = t.to_lowercase().chars().collect();
                let mut v = vec![0.0f32; 257];
                for w in chars.windows(3) {
                    let h = w.iter().fold(7u32, |h, c| h.wrapping_mul(31).wrapping_add(*c as u32));
                    v[(h % 257) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

struct Broken;

impl Embedder for Broken {
    fn model(&self) -> &str {
        "broken"
    }
    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError { model: "broken".into(), reason: "no model".into() })
    }
}

#[test]
fn with_an_embedder_ranking_is_hybrid_and_still_filters() {
    let index = SearchIndex::with_embedder(Arc::new(Trigrams)).unwrap();
    index.upsert(catalogue()).unwrap();
    let found = index.search(&Query::new("check uptime", Target::Tools)).unwrap();
    assert_eq!(found.ranker, Ranker::Hybrid);
    assert_eq!(found.hits[0].public_name(), "uptime-checker__check_uptime");
    assert!(!found.hits.iter().any(|h| h.skill == "shady"));
    assert!(found.hits.iter().all(|h| (0.0..=1.0).contains(&h.score)));
}

#[test]
fn a_failing_embedder_falls_back_to_bm25() {
    let index = SearchIndex::with_embedder(Arc::new(Broken)).unwrap();
    index.upsert(catalogue()).unwrap();
    let found = index.search(&Query::new("check uptime", Target::Tools)).unwrap();
    assert_eq!(found.ranker, Ranker::Bm25);
    assert_eq!(found.hits[0].public_name(), "uptime-checker__check_uptime");
}
