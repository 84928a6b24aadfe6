//! The `text-tools` skill: text statistics, case conversion, slugs, JSON
//! formatting and JSON Pointer queries, base64.
//!
//! Pure computation: no files, no network, nothing kept between calls.

use base64::Engine as _;
use serde_json::Value;
use skillhost_sdk::prelude::*;
use unicode_normalization::UnicodeNormalization;

// ---------------------------------------------------------------- text_stats

/// A text to measure.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatsInput {
    /// The text to measure.
    text: String,
    /// How many of the most frequent words to list (0 to 50, default 0).
    #[serde(default)]
    top_words: usize,
}

/// Counts over a text.
#[derive(Serialize, JsonSchema)]
struct StatsOutput {
    /// Unicode scalar values (what most people call characters).
    characters: usize,
    /// Characters that are not whitespace.
    characters_no_spaces: usize,
    /// UTF-8 bytes.
    bytes: usize,
    /// Whitespace-separated words.
    words: usize,
    /// Lines (a trailing newline does not start a new line).
    lines: usize,
    /// Lines with something other than whitespace.
    non_empty_lines: usize,
    /// Blocks of text separated by blank lines.
    paragraphs: usize,
    /// Sentences, counted by `.`, `!` and `?` followed by a space or the end.
    sentences: usize,
    /// Mean letters and digits per word.
    average_word_length: f64,
    /// The longest line, in characters.
    longest_line: usize,
    /// Estimated reading time at 238 words per minute, in seconds.
    reading_time_seconds: u64,
    /// The most frequent words (lowercased, punctuation trimmed), most frequent first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    top_words: Vec<WordCount>,
}

/// One word and how often it occurs.
#[derive(Serialize, JsonSchema)]
struct WordCount {
    /// The word, lowercased.
    word: String,
    /// Occurrences.
    count: usize,
}

/// Count characters, bytes, words, lines, paragraphs and sentences in a text,
/// with average word length, reading time and optionally the most frequent words.
#[tool(
    read_only,
    idempotent,
    example = r#"{"text": "Hello world.\nSecond line!"}"#,
    example = r#"{"text": "the cat and the hat", "top_words": 3}"#
)]
fn text_stats(input: StatsInput) -> Result<StatsOutput, ToolError> {
    if input.top_words > 50 {
        return Err(ToolError::invalid_input("top_words: at most 50"));
    }
    let text = &input.text;
    let words: Vec<&str> = text.split_whitespace().collect();
    let word_chars: usize = words.iter().map(|w| w.chars().filter(|c| c.is_alphanumeric()).count()).sum();
    let lines: Vec<&str> = text.lines().collect();
    let mut paragraphs = 0;
    let mut in_paragraph = false;
    for line in &lines {
        let blank = line.trim().is_empty();
        if !blank && !in_paragraph {
            paragraphs += 1;
        }
        in_paragraph = !blank;
    }
    let chars: Vec<char> = text.chars().collect();
    let sentences = chars
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_none_or(|n| n.is_whitespace())
                && i > 0
                && !matches!(chars[i - 1], '.' | '!' | '?')
        })
        .count();
    let sentences = if sentences == 0 && !words.is_empty() { 1 } else { sentences };

    let mut top_words = Vec::new();
    if input.top_words > 0 {
        let mut counts = std::collections::HashMap::<String, usize>::new();
        for word in &words {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            if !word.is_empty() {
                *counts.entry(word).or_default() += 1;
            }
        }
        let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top_words = counts.into_iter().take(input.top_words).map(|(word, count)| WordCount { word, count }).collect();
    }

    Ok(StatsOutput {
        characters: chars.len(),
        characters_no_spaces: chars.iter().filter(|c| !c.is_whitespace()).count(),
        bytes: text.len(),
        words: words.len(),
        lines: lines.len(),
        non_empty_lines: lines.iter().filter(|l| !l.trim().is_empty()).count(),
        paragraphs,
        sentences,
        average_word_length: if words.is_empty() { 0.0 } else { (word_chars as f64 / words.len() as f64 * 100.0).round() / 100.0 },
        longest_line: lines.iter().map(|l| l.chars().count()).max().unwrap_or(0),
        reading_time_seconds: (words.len() as f64 / 238.0 * 60.0).ceil() as u64,
        top_words,
    })
}

// -------------------------------------------------------------- convert_case

/// The case to convert to.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Case {
    /// `snake_case`
    Snake,
    /// `kebab-case`
    Kebab,
    /// `camelCase`
    Camel,
    /// `PascalCase`
    Pascal,
    /// `CONSTANT_CASE`
    Constant,
    /// `Title Case`
    Title,
    /// `Sentence case`
    Sentence,
    /// `UPPER CASE` (the text upper-cased, spacing kept)
    Upper,
    /// `lower case` (the text lower-cased, spacing kept)
    Lower,
}

/// A text and the case to convert it to.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CaseInput {
    /// The text to convert, in any case: `userId`, `HTTPServer`, `my-var`, `Some words`.
    text: String,
    /// The target case.
    to: Case,
}

/// A converted text.
#[derive(Serialize, JsonSchema)]
struct TextOutput {
    /// The converted text.
    text: String,
}

/// Convert identifiers or phrases between snake_case, kebab-case, camelCase,
/// PascalCase, CONSTANT_CASE, Title Case, Sentence case, upper and lower case.
/// Word boundaries are found at spaces, punctuation and case changes
/// (`HTTPServerError` is `http`, `server`, `error`).
#[tool(
    read_only,
    idempotent,
    example = r#"{"text": "userAccountId", "to": "snake"}"#,
    example = r#"{"text": "max_retry_count", "to": "camel"}"#
)]
fn convert_case(input: CaseInput) -> Result<TextOutput, ToolError> {
    let text = &input.text;
    let words = split_words(text);
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let result = match input.to {
        Case::Upper => text.to_uppercase(),
        Case::Lower => text.to_lowercase(),
        Case::Snake => lower.join("_"),
        Case::Kebab => lower.join("-"),
        Case::Constant => lower.join("_").to_uppercase(),
        Case::Camel => lower.iter().enumerate().map(|(i, w)| if i == 0 { w.clone() } else { capitalize(w) }).collect(),
        Case::Pascal => lower.iter().map(|w| capitalize(w)).collect(),
        Case::Title => lower.iter().map(|w| capitalize(w)).collect::<Vec<_>>().join(" "),
        Case::Sentence => capitalize(&lower.join(" ")),
    };
    Ok(TextOutput { text: result })
}

/// Splits at non-alphanumerics and case changes: `HTTPServer2Go` is `HTTP`, `Server2`, `Go`.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric()).filter(|c| !c.is_empty()) {
        let chars: Vec<char> = chunk.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            if i > 0 && c.is_uppercase() {
                let prev = chars[i - 1];
                let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_is_lower) {
                    words.push(std::mem::take(&mut current));
                }
            }
            current.push(c);
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

// ------------------------------------------------------------------- slugify

/// A text to turn into a URL slug.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SlugInput {
    /// The text, e.g. a title. Accented letters are transliterated to ASCII.
    text: String,
    /// Separator between words (default `-`).
    #[serde(default = "default_separator")]
    separator: String,
    /// Cut the slug to at most this many characters, at a word boundary when possible.
    #[serde(default)]
    max_length: Option<usize>,
}

fn default_separator() -> String {
    "-".into()
}

/// Turn a title or phrase into a lowercase ASCII URL slug
/// (`Crème Brûlée: A Guide!` becomes `creme-brulee-a-guide`).
#[tool(
    read_only,
    idempotent,
    example = r#"{"text": "Crème Brûlée: A Guide!"}"#,
    example = r#"{"text": "Quarterly report 2024 Q3", "separator": "_", "max_length": 20}"#
)]
fn slugify(input: SlugInput) -> Result<TextOutput, ToolError> {
    if input.separator.chars().count() > 3 {
        return Err(ToolError::invalid_input("separator: at most 3 characters"));
    }
    let mut ascii = String::new();
    for c in input.text.nfkd() {
        match c {
            'ß' => ascii.push_str("ss"),
            'æ' | 'Æ' => ascii.push_str("ae"),
            'œ' | 'Œ' => ascii.push_str("oe"),
            'ø' | 'Ø' => ascii.push('o'),
            'đ' | 'Đ' => ascii.push('d'),
            'ł' | 'Ł' => ascii.push('l'),
            'þ' | 'Þ' => ascii.push_str("th"),
            '&' => ascii.push_str(" and "),
            c if c.is_ascii_alphanumeric() => ascii.push(c.to_ascii_lowercase()),
            c if unicode_normalization::char::is_combining_mark(c) => {}
            _ => ascii.push(' '),
        }
    }
    let words: Vec<&str> = ascii.split_whitespace().collect();
    let mut result = words.join(&input.separator);
    if let Some(max) = input.max_length
        && result.len() > max
    {
        let mut cut = String::new();
        for word in &words {
            let extra = if cut.is_empty() { word.len() } else { input.separator.len() + word.len() };
            if cut.len() + extra > max {
                break;
            }
            if !cut.is_empty() {
                cut.push_str(&input.separator);
            }
            cut.push_str(word);
        }
        if cut.is_empty() {
            cut = result.chars().take(max).collect();
        }
        result = cut;
    }
    Ok(TextOutput { text: result })
}

// --------------------------------------------------------------- json_format

/// How to lay out a JSON document.
#[derive(Deserialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "snake_case")]
enum JsonLayout {
    /// Indented, one value per line.
    #[default]
    Pretty,
    /// No whitespace at all.
    Minify,
}

/// A JSON document to reformat.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FormatInput {
    /// The JSON document, as text.
    json: String,
    /// `pretty` (default) or `minify`.
    #[serde(default)]
    layout: JsonLayout,
    /// Spaces per indentation level when pretty (0 to 8, default 2).
    #[serde(default = "default_indent")]
    indent: usize,
    /// Sort object keys alphabetically, recursively (default false: keep the document's order).
    #[serde(default)]
    sort_keys: bool,
}

fn default_indent() -> usize {
    2
}

/// A reformatted JSON document.
#[derive(Serialize, JsonSchema)]
struct FormatOutput {
    /// The document, reformatted.
    json: String,
    /// Bytes before reformatting.
    input_bytes: usize,
    /// Bytes after reformatting.
    output_bytes: usize,
}

/// Validate a JSON document and pretty-print or minify it, optionally sorting
/// object keys. Invalid JSON is reported with its line and column.
#[tool(
    read_only,
    idempotent,
    example = r#"{"json": "{\"b\":1,\"a\":[1,2]}", "layout": "pretty"}"#,
    example = r#"{"json": "{ \"a\": 1 }", "layout": "minify"}"#
)]
fn json_format(input: FormatInput) -> Result<FormatOutput, ToolError> {
    if input.indent > 8 {
        return Err(ToolError::invalid_input("indent: at most 8"));
    }
    // Parsing first validates the whole document and reports errors with
    // their position; without sort_keys the text is then transcoded token by
    // token so objects keep their order.
    let mut value = parse_json(&input.json)?;
    let mut out = Vec::new();
    match input.layout {
        JsonLayout::Minify => {
            let mut serializer = serde_json::Serializer::new(&mut out);
            emit(&mut serializer, &mut value, &input)?;
        }
        JsonLayout::Pretty => {
            let indent = vec![b' '; input.indent];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&indent);
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            emit(&mut serializer, &mut value, &input)?;
        }
    }
    let result = String::from_utf8(out).map_err(|e| ToolError::failed(e.to_string()))?;
    Ok(FormatOutput { input_bytes: input.json.len(), output_bytes: result.len(), json: result })
}

fn emit<F: serde_json::ser::Formatter>(
    serializer: &mut serde_json::Serializer<&mut Vec<u8>, F>,
    value: &mut Value,
    input: &FormatInput,
) -> Result<(), ToolError> {
    if input.sort_keys {
        sort_keys(value);
        value.serialize(serializer)?;
    } else {
        let mut deserializer = serde_json::Deserializer::from_str(&input.json);
        serde_transcode::transcode(&mut deserializer, serializer)?;
    }
    Ok(())
}

fn parse_json(text: &str) -> Result<Value, ToolError> {
    serde_json::from_str(text).map_err(|e| ToolError::invalid_input(format!("json: not valid JSON: {e}")))
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, mut child) in entries {
                sort_keys(&mut child);
                map.insert(key, child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

// ---------------------------------------------------------------- json_query

/// A JSON document and a JSON Pointer into it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryInput {
    /// The JSON document, as text.
    json: String,
    /// An RFC 6901 JSON Pointer: `""` is the whole document, `/items/0/name`
    /// the `name` of the first element of `items`; escape `~` as `~0` and `/` as `~1`.
    pointer: String,
}

/// What a JSON Pointer points at.
#[derive(Serialize, JsonSchema)]
struct QueryOutput {
    /// Whether the pointer resolves.
    found: bool,
    /// The value found (null when not found).
    value: Value,
    /// JSON type of the value: object, array, string, number, boolean or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    value_type: Option<&'static str>,
    /// The keys of the value, sorted, when it is an object (to explore further).
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<Vec<String>>,
    /// The number of elements, when the value is an array.
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<usize>,
    /// When not found: the longest prefix of the pointer that does resolve.
    #[serde(skip_serializing_if = "Option::is_none")]
    deepest_match: Option<String>,
}

/// Look up a value in a JSON document with an RFC 6901 JSON Pointer
/// (`/items/0/name`). Reports the value, its type, an object's keys or an
/// array's length, and when the pointer does not resolve, how far it got.
#[tool(
    read_only,
    idempotent,
    example = r#"{"json": "{\"items\": [{\"name\": \"a\"}]}", "pointer": "/items/0/name"}"#,
    example = r#"{"json": "{\"a\": {\"b/c\": 1}}", "pointer": "/a/b~1c"}"#
)]
fn json_query(input: QueryInput) -> Result<QueryOutput, ToolError> {
    let pointer = &input.pointer;
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(ToolError::invalid_input(format!("pointer: `{pointer}` must be empty or start with `/` (did you mean `/{pointer}`?)")));
    }
    let document = parse_json(&input.json)?;
    match document.pointer(pointer) {
        Some(value) => Ok(QueryOutput {
            found: true,
            value_type: Some(type_name(value)),
            keys: value.as_object().map(|m| m.keys().cloned().collect()),
            length: value.as_array().map(Vec::len),
            value: value.clone(),
            deepest_match: None,
        }),
        None => {
            let mut deepest = String::new();
            for token in pointer.split('/').skip(1) {
                let next = format!("{deepest}/{token}");
                if document.pointer(&next).is_none() {
                    break;
                }
                deepest = next;
            }
            Ok(QueryOutput { found: false, value: Value::Null, value_type: None, keys: None, length: None, deepest_match: Some(deepest) })
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// -------------------------------------------------------------------- base64

/// Which way to convert.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Direction {
    /// Text to base64.
    Encode,
    /// Base64 to text.
    Decode,
}

/// A text to encode or decode.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Base64Input {
    /// The text to encode, or the base64 to decode (whitespace is ignored when decoding).
    text: String,
    /// `encode` or `decode`.
    direction: Direction,
    /// Use the URL-safe alphabet (`-` and `_` instead of `+` and `/`). Default false.
    #[serde(default)]
    url_safe: bool,
    /// Pad with `=` when encoding (default true). Decoding accepts both.
    #[serde(default = "yes")]
    pad: bool,
}

fn yes() -> bool {
    true
}

/// Encode UTF-8 text as base64 or decode base64 back to text (standard or
/// URL-safe alphabet). Decoding fails when the bytes are not UTF-8 text.
#[tool(
    name = "base64",
    read_only,
    idempotent,
    example = r#"{"text": "hello", "direction": "encode"}"#,
    example = r#"{"text": "aGVsbG8=", "direction": "decode"}"#
)]
fn base64_codec(input: Base64Input) -> Result<TextOutput, ToolError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let result = match input.direction {
        Direction::Encode => match (input.url_safe, input.pad) {
            (false, true) => STANDARD.encode(&input.text),
            (false, false) => STANDARD_NO_PAD.encode(&input.text),
            (true, true) => URL_SAFE.encode(&input.text),
            (true, false) => URL_SAFE_NO_PAD.encode(&input.text),
        },
        Direction::Decode => {
            let config = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
            let alphabet = if input.url_safe { &base64::alphabet::URL_SAFE } else { &base64::alphabet::STANDARD };
            let engine = GeneralPurpose::new(alphabet, config);
            let compact: String = input.text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = engine.decode(&compact).map_err(|e| {
                let hint =
                    if !input.url_safe && compact.contains(['-', '_']) { " (it contains `-` or `_`: try url_safe = true)" } else { "" };
                ToolError::invalid_input(format!("text: not valid base64: {e}{hint}"))
            })?;
            String::from_utf8(bytes).map_err(|e| {
                ToolError::failed(format!(
                    "decoded {} bytes, but they are not UTF-8 text (invalid byte at offset {})",
                    e.as_bytes().len(),
                    e.utf8_error().valid_up_to()
                ))
            })?
        }
    };
    Ok(TextOutput { text: result })
}

skillhost_sdk::skill!(text_stats, convert_case, slugify, json_format, json_query, base64_codec);

#[cfg(test)]
mod tests {
    use super::*;

    fn case(text: &str, to: Case) -> String {
        convert_case(CaseInput { text: text.into(), to }).unwrap().text
    }

    #[test]
    fn cases() {
        assert_eq!(case("HTTPServerError", Case::Snake), "http_server_error");
        assert_eq!(case("userAccountId", Case::Kebab), "user-account-id");
        assert_eq!(case("max_retry_count", Case::Camel), "maxRetryCount");
        assert_eq!(case("some words here", Case::Pascal), "SomeWordsHere");
        assert_eq!(case("some-words", Case::Constant), "SOME_WORDS");
        assert_eq!(case("the_quick fox", Case::Title), "The Quick Fox");
        assert_eq!(case("TheQuickFox", Case::Sentence), "The quick fox");
        assert_eq!(case("version2Update", Case::Snake), "version2_update");
    }

    #[test]
    fn slugs() {
        let slug = |text: &str, max| slugify(SlugInput { text: text.into(), separator: "-".into(), max_length: max }).unwrap().text;
        assert_eq!(slug("Crème Brûlée: A Guide!", None), "creme-brulee-a-guide");
        assert_eq!(slug("Straße & Co.", None), "strasse-and-co");
        assert_eq!(slug("one two three four", Some(9)), "one-two");
    }

    #[test]
    fn stats() {
        let out = text_stats(StatsInput { text: "Hello world. Bye!\n\nNext para\n".into(), top_words: 2 }).unwrap();
        assert_eq!((out.words, out.lines, out.paragraphs, out.sentences), (5, 3, 2, 2));
        assert_eq!(out.top_words.len(), 2);
    }

    #[test]
    fn json() {
        let out = json_format(FormatInput { json: r#"{"b":1,"a":[1,2]}"#.into(), layout: JsonLayout::Minify, indent: 2, sort_keys: true })
            .unwrap();
        assert_eq!(out.json, r#"{"a":[1,2],"b":1}"#);
        let kept = json_format(FormatInput {
            json: r#"{"b":1,"a":{"d":[],"c":2}}"#.into(),
            layout: JsonLayout::Pretty,
            indent: 1,
            sort_keys: false,
        })
        .unwrap();
        assert_eq!(kept.json, "{\n \"b\": 1,\n \"a\": {\n  \"d\": [],\n  \"c\": 2\n }\n}");
        let q = |p: &str| json_query(QueryInput { json: r#"{"a": {"b/c": [1, 2]}}"#.into(), pointer: p.into() });
        assert_eq!(q("/a/b~1c/1").unwrap().value, 2);
        assert_eq!(q("/a/x/y").unwrap().deepest_match.as_deref(), Some("/a"));
        assert_eq!(q("").unwrap().keys, Some(vec!["a".to_string()]));
        assert!(q("a").is_err());
    }

    #[test]
    fn base64_round_trip() {
        let run = |text: &str, direction| base64_codec(Base64Input { text: text.into(), direction, url_safe: false, pad: true });
        assert_eq!(run("hello", Direction::Encode).unwrap().text, "aGVsbG8=");
        assert_eq!(run("aGVsbG8", Direction::Decode).unwrap().text, "hello");
        assert!(matches!(run("!!", Direction::Decode), Err(ToolError::InvalidInput(_))));
    }
}
