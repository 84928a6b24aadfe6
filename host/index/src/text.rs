//! The one analyzer used for documents and queries: split on anything not alphanumeric
//! (so `check_uptime` and `uptime-checker` give words), drop very long tokens, lowercase,
//! drop English stop words (Lucene's list plus question words agents type), stem.

use tantivy::tokenizer::{Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer};

/// The analyzer's name in the index's tokenizer manager.
pub(crate) const ANALYZER: &str = "skill_en";

/// Words that say nothing about a tool: Lucene's English list plus what people put
/// around a request ("can you", "please", "my", "I need to").
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such",
    "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with", "i", "me", "my", "mine", "we", "our",
    "you", "your", "can", "could", "would", "should", "please", "need", "want", "do", "does", "did", "what", "whats", "which", "who",
    "how", "when", "where", "why", "some", "any", "get", "let", "s", "am", "has", "have", "had", "been", "from", "up", "so", "just",
    "about", "all", "its",
];

/// Build the analyzer.
pub(crate) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| (*w).to_owned())))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The analyzed terms of `text`, in order, duplicates kept.
pub(crate) fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    stream.process(&mut |token| out.push(token.text.clone()));
    out
}

/// Whether `a` and `b` are at most one edit apart (insert, delete, substitute, or swap
/// of neighbours): the typo tolerance of the match-quality check.
pub(crate) fn within_one_edit(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        // Bytes are characters here: no allocation (this runs for every candidate).
        return one_edit(a.as_bytes(), b.as_bytes());
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    one_edit(&a, &b)
}

fn one_edit<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    if a == b {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if long.len() - short.len() > 1 {
        return false;
    }
    let prefix = short.iter().zip(long.iter()).take_while(|(x, y)| x == y).count();
    if short.len() == long.len() {
        let rest = prefix + 1;
        // substitution, or transposition of two neighbours
        short[rest..] == long[rest..]
            || (rest < short.len() && short[prefix] == long[rest] && short[rest] == long[prefix] && short[rest + 1..] == long[rest + 1..])
    } else {
        short[prefix..] == long[prefix + 1..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_stop_words_go_and_words_stem() {
        let mut a = analyzer();
        assert_eq!(terms(&mut a, "check_uptime"), ["check", "uptim"]);
        assert_eq!(terms(&mut a, "Is my site down?"), ["site", "down"]);
        assert_eq!(terms(&mut a, "converting units-converter"), ["convert", "unit", "convert"]);
    }

    #[test]
    fn one_edit_covers_typos_and_nothing_more() {
        assert!(within_one_edit("weather", "wether"));
        assert!(within_one_edit("uptime", "uptmie"));
        assert!(within_one_edit("csv", "csvs"));
        assert!(within_one_edit("same", "same"));
        assert!(within_one_edit("cat", "bat"));
        assert!(!within_one_edit("weather", "whether_"));
        assert!(!within_one_edit("abc", "cba"));
        assert!(!within_one_edit("uptime", "downtime"));
        assert!(within_one_edit("café", "cafe"));
        assert!(!within_one_edit("café", "cfe"));
    }
}
