//! The `csv-summary` skill: lists, summarises and previews CSV files in the
//! skill's data directory (granted read-only in `skill.toml`).
//!
//! Every path goes through `skillhost_sdk::files::path`, so a path with `..`
//! or an absolute path is refused before the sandbox sees it.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;

use serde_json::Value;
use skillhost_sdk::files::{self, Access};
use skillhost_sdk::prelude::*;

/// Distinct values tracked per column; past it counts are approximate.
const DISTINCT_CAP: usize = 1_000;
/// Longest value kept verbatim in distinct counts and top values.
const VALUE_CAP: usize = 200;
/// Rows between two progress reports.
const PROGRESS_EVERY: u64 = 20_000;
/// Files listed at most by `list_files`.
const LIST_CAP: usize = 1_000;
/// Directory depth `list_files` descends to.
const DEPTH_CAP: usize = 8;

// ---------------------------------------------------------------- list_files

/// Where to look for CSV files.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListInput {
    /// Directory relative to the data directory (default `.`, the data directory itself).
    #[serde(default = "dot")]
    dir: String,
    /// Also look in subdirectories (default true, up to 8 levels deep).
    #[serde(default = "yes")]
    recursive: bool,
}

fn dot() -> String {
    ".".into()
}

fn yes() -> bool {
    true
}

/// The CSV files found.
#[derive(Serialize, JsonSchema)]
struct ListOutput {
    /// CSV and TSV files (`.csv`, `.tsv`, `.tab`, `.txt` is not included), sorted by path.
    files: Vec<FileEntry>,
    /// Other files seen (not listed).
    other_files: usize,
    /// Whether the listing stopped at 1000 files.
    truncated: bool,
}

/// One CSV file.
#[derive(Serialize, JsonSchema)]
struct FileEntry {
    /// Path relative to the data directory: pass it to `summarize` or `head`.
    path: String,
    /// Size in bytes.
    size_bytes: u64,
    /// Size for humans, e.g. `1.4 MiB`.
    size: String,
}

/// List the CSV/TSV files in the data directory (or a subdirectory) with their
/// sizes. Start here to find the `path` to pass to `summarize` or `head`.
#[tool(read_only, idempotent, example = r#"{}"#, example = r#"{"dir": "exports", "recursive": false}"#)]
fn list_files(input: ListInput) -> Result<ListOutput, ToolError> {
    let mut out = ListOutput { files: Vec::new(), other_files: 0, truncated: false };
    let start = normalize(&input.dir);
    walk(&start, 0, input.recursive, &mut out)?;
    out.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk(dir: &str, depth: usize, recursive: bool, out: &mut ListOutput) -> Result<(), ToolError> {
    for name in files::list(dir)? {
        if out.files.len() >= LIST_CAP {
            out.truncated = true;
            return Ok(());
        }
        let path = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
        if let Some(sub) = path.strip_suffix('/') {
            if recursive && depth < DEPTH_CAP {
                walk(sub, depth + 1, recursive, out)?;
            }
        } else if is_csv(&path) {
            let size_bytes = std::fs::metadata(files::path(&path)?).map_err(|e| files::io_error(&path, Access::Read, e))?.len();
            out.files.push(FileEntry { path, size_bytes, size: human_size(size_bytes) });
        } else {
            out.other_files += 1;
        }
    }
    Ok(())
}

/// `./a/b/` is `a/b`; `.` is the empty string.
fn normalize(dir: &str) -> String {
    dir.split('/').filter(|p| !p.is_empty() && *p != ".").collect::<Vec<_>>().join("/")
}

fn is_csv(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".csv", ".tsv", ".tab"].iter().any(|ext| lower.ends_with(ext))
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit < UNITS.len() - 1 {
        size /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{size:.1} {}", UNITS[unit]) }
}

// ---------------------------------------------------------------- reading

/// How to read a CSV file; shared by `summarize` and `head`.
struct CsvOptions {
    delimiter: Option<String>,
    has_headers: bool,
}

/// An open CSV reader and what was decided about the file.
struct Opened {
    reader: csv::Reader<File>,
    columns: Vec<String>,
    delimiter: char,
    size: u64,
}

fn open(path: &str, options: &CsvOptions) -> Result<Opened, ToolError> {
    let full = files::path(path)?;
    let mut file = File::open(&full).map_err(|e| not_found_hint(path, files::io_error(path, Access::Read, e)))?;
    let metadata = file.metadata().map_err(|e| files::io_error(path, Access::Read, e))?;
    if metadata.is_dir() {
        return Err(ToolError::invalid_input(format!("path: `{path}` is a directory; use list_files to find the CSV files in it")));
    }
    let delimiter = match options.delimiter.as_deref() {
        Some("\\t") | Some("tab") => b'\t',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => {
            return Err(ToolError::invalid_input(format!("delimiter: `{d}` is not a single ASCII character (use `\\t` for tab)")));
        }
        None => {
            let mut head = vec![0; 8192];
            let n = file.read(&mut head).map_err(|e| files::io_error(path, Access::Read, e))?;
            head.truncate(n);
            drop(file);
            file = File::open(&full).map_err(|e| files::io_error(path, Access::Read, e))?;
            detect_delimiter(path, &head)
        }
    };
    let mut reader = csv::ReaderBuilder::new().delimiter(delimiter).has_headers(options.has_headers).flexible(true).from_reader(file);
    let columns = if options.has_headers {
        let headers = reader.byte_headers().map_err(|e| csv_error(path, e))?.clone();
        unique_names(headers.iter().map(|h| String::from_utf8_lossy(h).trim().to_owned()))
    } else {
        Vec::new()
    };
    Ok(Opened { reader, columns, delimiter: delimiter as char, size: metadata.len() })
}

/// Adds the CSV files next to a missing one to its error.
fn not_found_hint(path: &str, error: ToolError) -> ToolError {
    let ToolError::Failed(message) = &error else {
        return error;
    };
    let parent = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let Ok(names) = files::list(parent) else {
        return error;
    };
    let csvs: Vec<String> = names.into_iter().filter(|n| is_csv(n)).take(20).collect();
    if csvs.is_empty() {
        return ToolError::failed(format!("{message}; there are no CSV files next to it (try list_files)"));
    }
    ToolError::failed(format!("{message}; CSV files there: {}", csvs.join(", ")))
}

fn detect_delimiter(path: &str, head: &[u8]) -> u8 {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".tsv") || lower.ends_with(".tab") {
        return b'\t';
    }
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut best = (b',', 0);
    for candidate in [b',', b';', b'\t', b'|'] {
        let mut count = 0;
        let mut quoted = false;
        for &b in first_line {
            if b == b'"' {
                quoted = !quoted;
            } else if b == candidate && !quoted {
                count += 1;
            }
        }
        if count > best.1 {
            best = (candidate, count);
        }
    }
    best.0
}

/// Names blank headers `column_N` and suffixes repeated ones `_2`, `_3`.
fn unique_names(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = HashMap::<String, usize>::new();
    let mut out = Vec::new();
    for (i, name) in names.enumerate() {
        let base = if name.is_empty() { format!("column_{}", i + 1) } else { name };
        let n = seen.entry(base.clone()).or_default();
        *n += 1;
        out.push(if *n == 1 { base } else { format!("{base}_{n}") });
    }
    out
}

fn csv_error(path: &str, error: csv::Error) -> ToolError {
    if !matches!(error.kind(), csv::ErrorKind::Io(_)) {
        return ToolError::failed(format!("`{path}` is not readable as CSV: {error}"));
    }
    match error.into_kind() {
        csv::ErrorKind::Io(e) => files::io_error(path, Access::Read, e),
        _ => ToolError::failed(format!("`{path}` is not readable as CSV")),
    }
}

/// Column names for a record, growing `columns` when a row is wider.
fn ensure_columns(columns: &mut Vec<String>, width: usize) {
    while columns.len() < width {
        columns.push(format!("column_{}", columns.len() + 1));
    }
}

fn truncate(value: &str) -> String {
    if value.len() <= VALUE_CAP {
        return value.to_owned();
    }
    let mut end = VALUE_CAP;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &value[..end])
}

// ----------------------------------------------------------------- summarize

/// Which file to summarise.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SummarizeInput {
    /// Path of the CSV file, relative to the data directory (see `list_files`).
    path: String,
    /// Field delimiter, one character: `,` `;` `\t` (tab) `|` ... Default:
    /// detected from the first line (tab for `.tsv`).
    #[serde(default)]
    delimiter: Option<String>,
    /// Whether the first row holds column names (default true). When false,
    /// columns are named `column_1`, `column_2`, ...
    #[serde(default = "yes")]
    has_headers: bool,
    /// Most frequent values to list per text or bool column (0 to 50, default 5).
    #[serde(default = "five")]
    top_values: usize,
    /// Stop after this many data rows (default: read the whole file).
    #[serde(default)]
    max_rows: Option<u64>,
}

fn five() -> usize {
    5
}

/// A summary of a CSV file.
#[derive(Serialize, JsonSchema)]
struct Summary {
    /// The file summarised.
    path: String,
    /// File size in bytes.
    size_bytes: u64,
    /// The delimiter used.
    delimiter: String,
    /// Data rows read (the header row not included).
    rows: u64,
    /// Whether `max_rows` stopped the reading before the end of the file.
    stopped_early: bool,
    /// Rows whose number of fields differs from the header's.
    ragged_rows: u64,
    /// One entry per column, in file order.
    columns: Vec<ColumnSummary>,
}

/// What a column holds.
#[derive(Serialize, JsonSchema)]
struct ColumnSummary {
    /// Column name (from the header row, or `column_N`).
    name: String,
    /// Inferred type of the non-empty values: `integer`, `number`, `bool`,
    /// `text`, or `empty` when every value is empty.
    r#type: &'static str,
    /// Values that are not empty or whitespace.
    non_empty: u64,
    /// Empty values (including rows too short to have this column).
    empty: u64,
    /// Distinct non-empty values (a lower bound when `distinct_capped`).
    distinct: u64,
    /// Whether more than 1000 distinct values were seen: `distinct` and
    /// `top_values` then only count the first 1000.
    distinct_capped: bool,
    /// Smallest value (integer and number columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<Value>,
    /// Largest value (integer and number columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<Value>,
    /// Mean (integer and number columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    mean: Option<f64>,
    /// Shortest value in characters (text columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    min_length: Option<usize>,
    /// Longest value in characters (text columns).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_length: Option<usize>,
    /// Most frequent values, most frequent first (text and bool columns).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    top_values: Vec<ValueCount>,
}

/// A value and how often it occurs.
#[derive(Serialize, JsonSchema)]
struct ValueCount {
    /// The value (cut at 200 bytes).
    value: String,
    /// Occurrences.
    count: u64,
}

/// Running statistics of one column.
#[derive(Default)]
struct Column {
    non_empty: u64,
    integers: u64,
    numbers: u64,
    bools: u64,
    sum: f64,
    min: f64,
    max: f64,
    min_length: usize,
    max_length: usize,
    counts: HashMap<String, u64>,
    capped: bool,
}

impl Column {
    fn add(&mut self, raw: &str) {
        let value = raw.trim();
        if value.is_empty() {
            return;
        }
        let length = value.chars().count();
        if self.non_empty == 0 {
            (self.min, self.max, self.min_length, self.max_length) = (f64::INFINITY, f64::NEG_INFINITY, length, length);
        }
        self.non_empty += 1;
        self.min_length = self.min_length.min(length);
        self.max_length = self.max_length.max(length);
        if value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false") {
            self.bools += 1;
        } else if let Some(number) = parse_number(value) {
            if value.parse::<i64>().is_ok() {
                self.integers += 1;
            }
            self.numbers += 1;
            self.sum += number;
            self.min = self.min.min(number);
            self.max = self.max.max(number);
        }
        if let Some(count) = self.counts.get_mut(value) {
            *count += 1;
        } else if self.counts.len() < DISTINCT_CAP {
            self.counts.insert(truncate(value), 1);
        } else {
            self.capped = true;
        }
    }

    fn kind(&self) -> &'static str {
        match self.non_empty {
            0 => "empty",
            n if self.integers == n => "integer",
            n if self.numbers == n => "number",
            n if self.bools == n => "bool",
            _ => "text",
        }
    }

    fn summary(self, name: String, rows: u64, top: usize) -> ColumnSummary {
        let kind = self.kind();
        let numeric = matches!(kind, "integer" | "number");
        let bound = |v: f64| {
            if kind == "integer" { Value::from(v as i64) } else { Value::from(v) }
        };
        let top_values = if matches!(kind, "text" | "bool") {
            let mut counts: Vec<(String, u64)> = self.counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
            counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            counts.into_iter().take(top).map(|(value, count)| ValueCount { value, count }).collect()
        } else {
            Vec::new()
        };
        ColumnSummary {
            name,
            r#type: kind,
            non_empty: self.non_empty,
            empty: rows - self.non_empty,
            distinct: self.counts.len() as u64,
            distinct_capped: self.capped,
            min: numeric.then(|| bound(self.min)),
            max: numeric.then(|| bound(self.max)),
            mean: numeric.then(|| self.sum / self.non_empty as f64),
            min_length: (kind == "text").then_some(self.min_length),
            max_length: (kind == "text").then_some(self.max_length),
            top_values,
        }
    }
}

/// A finite decimal number (`1`, `-2.5`, `3e8`), not `inf`, `NaN` or `1,000`.
fn parse_number(value: &str) -> Option<f64> {
    if !value.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E')) {
        return None;
    }
    value.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// Summarise a CSV file: row count and, per column, the inferred type
/// (integer, number, bool, text, empty), empty and distinct counts, min/max/mean
/// of numeric columns and the most frequent values of text columns. Reads the
/// whole file (reporting progress); use `max_rows` to sample a huge one.
#[tool(
    read_only,
    idempotent,
    example = r#"{"path": "sales.csv"}"#,
    example = r#"{"path": "exports/data.tsv", "top_values": 10, "max_rows": 100000}"#
)]
fn summarize(input: SummarizeInput) -> Result<Summary, ToolError> {
    if input.top_values > 50 {
        return Err(ToolError::invalid_input("top_values: at most 50"));
    }
    let path = &input.path;
    let Opened { mut reader, mut columns, delimiter, size } =
        open(path, &CsvOptions { delimiter: input.delimiter.clone(), has_headers: input.has_headers })?;
    let header_width = columns.len();
    let mut stats: Vec<Column> = columns.iter().map(|_| Column::default()).collect();
    let (mut rows, mut ragged, mut stopped_early) = (0u64, 0u64, false);
    let mut record = csv::ByteRecord::new();
    loop {
        if input.max_rows.is_some_and(|max| rows >= max) {
            stopped_early = reader.read_byte_record(&mut record).map_err(|e| csv_error(path, e))?;
            break;
        }
        if !reader.read_byte_record(&mut record).map_err(|e| csv_error(path, e))? {
            break;
        }
        rows += 1;
        if header_width > 0 && record.len() != header_width {
            ragged += 1;
        }
        if record.len() > stats.len() {
            ensure_columns(&mut columns, record.len());
            // A new column was empty in every earlier row.
            stats.resize_with(record.len(), Column::default);
        }
        for (field, column) in record.iter().zip(stats.iter_mut()) {
            column.add(&String::from_utf8_lossy(field));
        }
        if rows.is_multiple_of(PROGRESS_EVERY) {
            let message = format!("{rows} rows read");
            progress(reader.position().byte(), Some(size), Some(&message));
        }
    }
    progress(size, Some(size), Some(&format!("{rows} rows read")));
    let top = input.top_values;
    let columns = columns.into_iter().zip(stats).map(|(name, column)| column.summary(name, rows, top)).collect();
    Ok(Summary {
        path: path.clone(),
        size_bytes: size,
        delimiter: if delimiter == '\t' { "\\t".into() } else { delimiter.to_string() },
        rows,
        stopped_early,
        ragged_rows: ragged,
        columns,
    })
}

// ---------------------------------------------------------------------- head

/// Which rows to show.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HeadInput {
    /// Path of the CSV file, relative to the data directory (see `list_files`).
    path: String,
    /// Field delimiter, one character: `,` `;` `\t` (tab) `|` ... Default:
    /// detected from the first line (tab for `.tsv`).
    #[serde(default)]
    delimiter: Option<String>,
    /// Whether the first row holds column names (default true). When false,
    /// columns are named `column_1`, `column_2`, ...
    #[serde(default = "yes")]
    has_headers: bool,
    /// Number of data rows to return (1 to 500, default 10).
    #[serde(default = "ten")]
    rows: usize,
    /// Data rows to skip first (default 0), to page through a file.
    #[serde(default)]
    offset: u64,
}

fn ten() -> usize {
    10
}

/// Rows of a CSV file.
#[derive(Serialize, JsonSchema)]
struct HeadOutput {
    /// Column names, in file order (the keys of each row).
    columns: Vec<String>,
    /// The rows, each an object from column name to the value as text, in column order.
    rows: Vec<Row>,
    /// Whether the file has more rows after these.
    more: bool,
}

/// One CSV row: column names and values, serialised as a JSON object whose
/// keys keep the file's column order.
struct Row(Vec<(String, String)>);

impl Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl JsonSchema for Row {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Row".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Column name to value, as text.",
            "type": "object",
            "additionalProperties": { "type": "string" },
        })
    }
}

/// Show the first rows of a CSV file (or rows from `offset` on) as objects
/// keyed by column name, values as text exactly as in the file.
#[tool(read_only, idempotent, example = r#"{"path": "sales.csv"}"#, example = r#"{"path": "sales.csv", "rows": 5, "offset": 100}"#)]
fn head(input: HeadInput) -> Result<HeadOutput, ToolError> {
    if !(1..=500).contains(&input.rows) {
        return Err(ToolError::invalid_input("rows: between 1 and 500"));
    }
    let path = &input.path;
    let Opened { mut reader, mut columns, .. } =
        open(path, &CsvOptions { delimiter: input.delimiter.clone(), has_headers: input.has_headers })?;
    let mut record = csv::ByteRecord::new();
    let mut skipped = 0;
    while skipped < input.offset {
        if !reader.read_byte_record(&mut record).map_err(|e| csv_error(path, e))? {
            return Ok(HeadOutput { columns, rows: Vec::new(), more: false });
        }
        skipped += 1;
    }
    let mut rows = Vec::new();
    let mut more = false;
    while reader.read_byte_record(&mut record).map_err(|e| csv_error(path, e))? {
        if rows.len() == input.rows {
            more = true;
            break;
        }
        ensure_columns(&mut columns, record.len());
        let row =
            columns.iter().zip(record.iter()).map(|(name, field)| (name.clone(), String::from_utf8_lossy(field).into_owned())).collect();
        rows.push(Row(row));
    }
    Ok(HeadOutput { columns, rows, more })
}

skillhost_sdk::skill!(list_files, summarize, head);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_inferred() {
        let kind = |values: &[&str]| {
            let mut column = Column::default();
            values.iter().for_each(|v| column.add(v));
            column.kind()
        };
        assert_eq!(kind(&["1", "2", ""]), "integer");
        assert_eq!(kind(&["1", "2.5"]), "number");
        assert_eq!(kind(&["true", "FALSE"]), "bool");
        assert_eq!(kind(&["1", "x"]), "text");
        assert_eq!(kind(&["inf", "NaN"]), "text");
        assert_eq!(kind(&["", " "]), "empty");
    }

    #[test]
    fn delimiters_and_names() {
        assert_eq!(detect_delimiter("a.csv", b"a;b;c\n1;2;3"), b';');
        assert_eq!(detect_delimiter("a.csv", b"\"x,y\";b\n"), b';');
        assert_eq!(detect_delimiter("a.tsv", b"a,b"), b'\t');
        let names = unique_names(["a", "", "a"].iter().map(|s| s.to_string()));
        assert_eq!(names, ["a", "column_2", "a_2"]);
        assert_eq!(normalize("./a/b/"), "a/b");
        assert_eq!(human_size(1536), "1.5 KiB");
    }

    #[test]
    fn summarize_and_head_a_file() {
        let dir = std::env::temp_dir().join(format!("csv-summary-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/t.csv"), "name,qty,ok\nab,1,true\ncd,2.5,false\nab,,true\n").unwrap();
        files::with_data_dir(&dir, check_tools);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn check_tools() {
        let summary =
            summarize(SummarizeInput { path: "sub/t.csv".into(), delimiter: None, has_headers: true, top_values: 5, max_rows: None })
                .unwrap();
        assert_eq!(summary.rows, 3);
        let kinds: Vec<&str> = summary.columns.iter().map(|c| c.r#type).collect();
        assert_eq!(kinds, ["text", "number", "bool"]);
        assert_eq!(summary.columns[1].empty, 1);
        assert_eq!(summary.columns[0].top_values[0].value, "ab");

        let head =
            head(HeadInput { path: "sub/t.csv".into(), delimiter: Some(",".into()), has_headers: true, rows: 2, offset: 0 }).unwrap();
        assert_eq!(head.rows.len(), 2);
        assert!(head.more);
        assert_eq!(head.rows[1].0[1], ("qty".to_string(), "2.5".to_string()));
        let json = serde_json::to_string(&head.rows[0]).unwrap();
        assert_eq!(json, r#"{"name":"ab","qty":"1","ok":"true"}"#);

        let listed = list_files(ListInput { dir: ".".into(), recursive: true }).unwrap();
        assert_eq!(listed.files[0].path, "sub/t.csv");

        let missing =
            summarize(SummarizeInput { path: "sub/nope.csv".into(), delimiter: None, has_headers: true, top_values: 5, max_rows: None })
                .map(|_| ())
                .unwrap_err();
        assert!(missing.message().contains("t.csv"), "{missing}");
        assert!(matches!(head_of("../etc/passwd"), Err(ToolError::Denied(_))));
    }

    fn head_of(path: &str) -> Result<HeadOutput, ToolError> {
        head(HeadInput { path: path.into(), delimiter: None, has_headers: true, rows: 1, offset: 0 })
    }
}
