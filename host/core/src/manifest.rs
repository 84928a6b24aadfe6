//! `skill.toml`: the manifest every skill carries, parsed strictly
//! (`deny_unknown_fields`) with errors that name the file, the line and the fix.
//!
//! ```toml
//! name = "csv-summary"
//! version = "0.1.0"
//! description = "Summarise CSV files in the skill's data directory"
//!
//! [search]
//! keywords = ["csv", "table"]
//! example_queries = ["what columns does sales.csv have"]
//!
//! [[capabilities.files]]   # relative to the skill's data dir; the guest sees it under /data
//! path = "."
//! mode = "ro"
//!
//! [limits]
//! timeout = "5s"
//! memory = "128MiB"
//! ```

use std::fmt;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::egress::{EgressPolicy, NetworkSection, SecretBinding, SecretSection};
use crate::grant::FileMode;
use crate::limits::LimitsRequest;
use crate::name::SkillName;
use crate::server::{ServerConfig, ServerSection};
use crate::text::{self, TextKind};

/// Longest description, in bytes.
const MAX_DESCRIPTION: usize = 1024;
/// Largest manifest file the host reads.
pub const MAX_MANIFEST_BYTES: usize = 256 << 10;

/// A parsed and validated `skill.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkillManifest {
    /// The skill's name and id.
    pub name: SkillName,
    /// The skill's version, as its author writes it (semver recommended).
    pub version: String,
    /// One line for an agent or a human choosing skills.
    pub description: String,
    /// Metadata that only helps search.
    pub search: SearchMeta,
    /// Directories inside the skill's data dir the skill asks for.
    pub files: Vec<FileCapability>,
    /// Limit overrides the skill asks for.
    pub limits: LimitsRequest,
    /// Hosts the skill asks to reach (`[network]`); empty when it asks for none.
    pub network: EgressPolicy,
    /// Secrets the host adds to its requests (`[[secrets]]`).
    pub secrets: Vec<SecretBinding>,
    /// `[server]`: the skill is a stdio MCP server run in the sandbox, not a component.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerConfig>,
}

/// `[[tests]]`: one call and what it must return.
///
/// ```toml
/// [[tests]]
/// tool = "word_count"
/// input = { text = "a b" }
/// expect = { words = 2 }          # the output must equal this JSON
///
/// [[tests]]
/// tool = "word_count"
/// input = {}
/// expect_error = "missing field"  # or: the call must fail with this in its message
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TestCase {
    /// The tool to call.
    pub tool: String,
    /// Its input (a TOML table, read as JSON).
    pub input: serde_json::Value,
    /// The exact output expected, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<serde_json::Value>,
    /// A substring of the error the call must fail with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect_error: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    tool: String,
    #[serde(default)]
    input: Option<toml::Table>,
    #[serde(default)]
    expect: Option<toml::Value>,
    #[serde(default)]
    expect_error: Option<String>,
}

/// `[search]`: words and example questions that should find this skill.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SearchMeta {
    /// Extra words that describe the skill.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Questions a user might ask that this skill answers.
    #[serde(default)]
    pub example_queries: Vec<String>,
}

/// `[[capabilities.files]]`: a directory inside the skill's own data dir.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileCapability {
    /// Path relative to the skill's data dir; `.` is the data dir itself. Normalised: no
    /// `..`, no absolute path, no empty or `.` components except a lone `.`.
    pub path: String,
    /// Read-only or read-write.
    pub mode: FileMode,
}

/// Why a manifest was rejected. Displays as one line: `file:line:col: what; fix`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest's file (or the `.wasm` it was embedded in).
    pub file: PathBuf,
    /// 1-based line and column of the offending item, when known.
    pub position: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": {}; {}", self.message, self.fix)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Spanned<String>,
    version: Spanned<String>,
    description: Spanned<String>,
    #[serde(default)]
    search: SearchMeta,
    #[serde(default)]
    capabilities: RawCapabilities,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    network: Option<Spanned<NetworkSection>>,
    #[serde(default)]
    secrets: Vec<Spanned<SecretSection>>,
    #[serde(default)]
    server: Option<Spanned<ServerSection>>,
    #[serde(default)]
    tests: Vec<Spanned<RawTest>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCapabilities {
    #[serde(default)]
    files: Vec<RawFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: Spanned<String>,
    mode: FileMode,
}

impl SkillManifest {
    /// Parse manifest bytes; `origin` names the file in errors.
    pub fn parse_bytes(bytes: &[u8], origin: &Path) -> Result<Self, ManifestError> {
        let text = std::str::from_utf8(bytes).map_err(|e| ManifestError {
            file: origin.to_owned(),
            position: None,
            message: format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
            fix: "save skill.toml as UTF-8".into(),
        })?;
        Self::parse(text, origin)
    }

    /// Parse manifest text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ManifestError> {
        let at = |span: Option<Range<usize>>, message: String, fix: String| ManifestError {
            file: origin.to_owned(),
            position: span.map(|s| line_col(text, s.start)),
            message,
            fix,
        };
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(at(
                None,
                format!("manifest is {} bytes, more than the {MAX_MANIFEST_BYTES} allowed", text.len()),
                "keep skill.toml small; long instructions belong in SKILL.md".into(),
            ));
        }
        let raw: RawManifest = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_owned();
            let fix = fix_for(&message);
            at(e.span(), message, fix)
        })?;
        let table: toml::Table = toml::from_str(text).map_err(|e| at(e.span(), e.message().trim().to_owned(), String::new()))?;
        check_text(&table).map_err(|(field, forbidden)| {
            at(
                None,
                format!("`{field}` holds {forbidden}"),
                "remove it: skill.toml holds text a human reads, never terminal controls".into(),
            )
        })?;

        let name = SkillName::new(raw.name.get_ref().clone()).map_err(|e| {
            at(
                Some(raw.name.span()),
                format!("invalid skill name `{}`: {}", e.name, e.reason),
                "use lowercase letters, digits and inner hyphens, at most 64 bytes, e.g. `name = \"my-skill\"`".into(),
            )
        })?;
        if raw.version.get_ref().trim().is_empty() {
            return Err(at(Some(raw.version.span()), "version is empty".into(), "write a version, e.g. `version = \"0.1.0\"`".into()));
        }
        let description = raw.description.get_ref().trim().to_owned();
        if description.is_empty() || description.len() > MAX_DESCRIPTION {
            return Err(at(
                Some(raw.description.span()),
                format!("description must be 1 to {MAX_DESCRIPTION} bytes, found {}", description.len()),
                "describe in one line what the skill does, for an agent choosing skills".into(),
            ));
        }
        let mut files = Vec::with_capacity(raw.capabilities.files.len());
        for file in raw.capabilities.files {
            let path = normalise_relative(file.path.get_ref()).map_err(|reason| {
                at(
                    Some(file.path.span()),
                    format!("file capability path `{}` {reason}", file.path.get_ref()),
                    "write a path relative to the skill's data dir, e.g. `path = \".\"` or `path = \"reports\"`".into(),
                )
            })?;
            if files.iter().any(|f: &FileCapability| f.path == path) {
                return Err(at(
                    Some(file.path.span()),
                    format!("file capability path `{path}` is listed twice"),
                    "list each directory once, with the widest mode it needs".into(),
                ));
            }
            files.push(FileCapability { path, mode: file.mode });
        }
        let network = match &raw.network {
            None => EgressPolicy::default(),
            Some(section) => EgressPolicy::from_section(section.get_ref())
                .map_err(|e| at(Some(section.span()), e.to_string(), "fix the rule in `[network]`".into()))?,
        };
        let mut secrets = Vec::with_capacity(raw.secrets.len());
        for section in &raw.secrets {
            let binding = SecretBinding::from_section(section.get_ref(), &network)
                .map_err(|e| at(Some(section.span()), e.to_string(), "fix this `[[secrets]]` entry".into()))?;
            if secrets.iter().any(|s: &SecretBinding| s.name == binding.name) {
                return Err(at(
                    Some(section.span()),
                    format!("secret `{}` is bound twice", binding.name),
                    "bind each secret once, listing all its hosts".into(),
                ));
            }
            secrets.push(binding);
        }
        let server = match raw.server {
            None => None,
            Some(section) => {
                let span = section.span();
                Some(section.into_inner().validate().map_err(|(message, fix)| at(Some(span), message, fix))?)
            }
        };
        // Checked here so a bad `[[tests]]` fails like any manifest error; read with
        // `SkillManifest::test_cases`.
        convert_tests(raw.tests, &at)?;
        Ok(SkillManifest {
            server,
            network,
            secrets,
            name,
            version: raw.version.into_inner(),
            description,
            search: raw.search,
            files,
            limits: raw.limits,
        })
    }
}

impl SkillManifest {
    /// The `[[tests]]` of manifest text (see [`TestCase`]); `origin` names the file in
    /// errors. They are not part of [`SkillManifest`]: they ask for nothing and only the
    /// forge runs them.
    pub fn test_cases(text: &str, origin: &Path) -> Result<Vec<TestCase>, ManifestError> {
        #[derive(Deserialize)]
        struct Tests {
            #[serde(default)]
            tests: Vec<Spanned<RawTest>>,
        }
        let at = |span: Option<Range<usize>>, message: String, fix: String| ManifestError {
            file: origin.to_owned(),
            position: span.map(|s| line_col(text, s.start)),
            message,
            fix,
        };
        let raw: Tests = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_owned();
            let fix = fix_for(&message);
            at(e.span(), message, fix)
        })?;
        convert_tests(raw.tests, &at)
    }
}

fn convert_tests(
    raw: Vec<Spanned<RawTest>>,
    at: &dyn Fn(Option<Range<usize>>, String, String) -> ManifestError,
) -> Result<Vec<TestCase>, ManifestError> {
    let mut tests = Vec::with_capacity(raw.len());
    for test in raw {
        let span = test.span();
        let test = test.into_inner();
        let json = |value: toml::Value| serde_json::to_value(value).map_err(|e| e.to_string());
        let case = (|| {
            if test.expect.is_some() && test.expect_error.is_some() {
                return Err("a test has both `expect` and `expect_error`".to_owned());
            }
            Ok(TestCase {
                tool: test.tool,
                input: json(toml::Value::Table(test.input.unwrap_or_default()))?,
                expect: test.expect.map(json).transpose()?,
                expect_error: test.expect_error,
            })
        })()
        .map_err(|message| {
            at(Some(span), message, "give each `[[tests]]` entry `tool`, `input` and one of `expect` or `expect_error`".into())
        })?;
        tests.push(case);
    }
    Ok(tests)
}

/// Check every string of a manifest, and every key, with the one text rule
/// ([`text::check`]): descriptions and the `[[tests]]` data may hold line breaks and
/// tabs, nothing else may. The error names the field (`server.args[1]`).
fn check_text(table: &toml::Table) -> Result<(), (String, text::Forbidden)> {
    type Found = (String, text::Forbidden);
    fn table_at(table: &toml::Table, field: &mut String) -> Result<(), Found> {
        for (key, item) in table {
            let len = field.len();
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(&text::visible(key));
            text::check(key, TextKind::Line).map_err(|f| (field.clone(), f))?;
            value_at(item, field)?;
            field.truncate(len);
        }
        Ok(())
    }
    fn value_at(value: &toml::Value, field: &mut String) -> Result<(), Found> {
        match value {
            toml::Value::String(s) => {
                let prose = field.starts_with("tests") || field.ends_with("description");
                text::check(s, if prose { TextKind::Prose } else { TextKind::Line }).map_err(|f| (field.clone(), f))
            }
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = field.len();
                    field.push_str(&format!("[{i}]"));
                    value_at(item, field)?;
                    field.truncate(len);
                }
                Ok(())
            }
            toml::Value::Table(table) => table_at(table, field),
            _ => Ok(()),
        }
    }
    table_at(table, &mut String::new())
}

/// Normalise a relative path: refuse absolute paths and `..`, drop `.` components.
fn normalise_relative(path: &str) -> Result<String, &'static str> {
    if path.contains('\0') || path.contains('\\') {
        return Err("contains a NUL or backslash");
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or("is not UTF-8")?),
            Component::CurDir => {}
            Component::ParentDir => return Err("leaves the data dir with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
        }
    }
    Ok(if parts.is_empty() { ".".to_owned() } else { parts.join("/") })
}

/// A manifest for tests: a valid header plus `extra` TOML.
#[cfg(test)]
pub(crate) fn test_manifest(extra: &str) -> SkillManifest {
    let text = format!("name = \"demo\"\nversion = \"1\"\ndescription = \"d\"\n{extra}");
    SkillManifest::parse(&text, Path::new("skill.toml")).unwrap()
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, col)
}

fn fix_for(message: &str) -> String {
    if message.starts_with("unknown field") {
        "remove it or correct its spelling; the keys skill.toml accepts are listed in docs/writing-skills.md".into()
    } else if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or("");
        format!("add `{field} = ...` (see docs/writing-skills.md for the skill.toml format)")
    } else if message.starts_with("unknown variant") {
        "use one of the values listed".into()
    } else {
        "fix the TOML at that position (see docs/writing-skills.md for the skill.toml format)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SkillManifest, String> {
        SkillManifest::parse(text, Path::new("skills/x/skill.toml")).map_err(|e| e.to_string())
    }

    const BASE: &str = "name = \"csv-summary\"\nversion = \"0.1.0\"\ndescription = \"Summarise CSV\"\n";

    #[test]
    fn full_manifest() {
        let m = parse(&format!(
            "{BASE}[search]\nkeywords = [\"csv\"]\n[[capabilities.files]]\npath = \"./reports/\"\nmode = \"rw\"\n[limits]\ntimeout = \"5s\"\nmemory = \"128MiB\"\n"
        ))
        .unwrap();
        assert_eq!(m.name.as_str(), "csv-summary");
        assert_eq!(m.files, vec![FileCapability { path: "reports".into(), mode: FileMode::ReadWrite }]);
        assert_eq!(m.limits.memory, Some(128 << 20));
        assert_eq!(m.search.keywords, vec!["csv"]);
    }

    #[test]
    fn errors_name_file_line_and_fix() {
        let table = [
            (format!("{BASE}colour = \"red\"\n"), "skills/x/skill.toml:4:1: unknown field `colour`"),
            (
                "name = \"Bad_Name\"\nversion = \"1\"\ndescription = \"d\"\n".into(),
                "skills/x/skill.toml:1:8: invalid skill name `Bad_Name`",
            ),
            ("version = \"1\"\ndescription = \"d\"\n".into(), "missing field `name`"),
            (
                format!("{BASE}[[capabilities.files]]\npath = \"../etc\"\nmode = \"ro\"\n"),
                "skills/x/skill.toml:5:8: file capability path `../etc` leaves the data dir",
            ),
            (format!("{BASE}[[capabilities.files]]\npath = \"/etc\"\nmode = \"ro\"\n"), "is absolute"),
            (format!("{BASE}[[capabilities.files]]\npath = \".\"\nmode = \"rwx\"\n"), "unknown variant `rwx`"),
            (format!("{BASE}[limits]\nmemory = \"64 mb\"\n"), "unknown size unit `mb`"),
            (format!("{BASE}[limits]\nfuel = 3\n"), "unknown field `fuel`"),
        ];
        for (text, expected) in table {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(expected), "{err:?} should contain {expected:?}");
            assert!(!err.contains('\n'), "one line: {err:?}");
            assert!(err.contains("; "), "has a fix: {err:?}");
        }
    }

    #[test]
    fn network_and_secrets() {
        let m = parse(&format!(
            "{BASE}[network]\nallow = [\"https://api.github.com\"]\n[[secrets]]\nname = \"github\"\nheader = \"Authorization\"\nformat = \"Bearer {{}}\"\nhosts = [\"https://api.github.com\"]\n"
        ))
        .unwrap();
        assert_eq!(m.network.allow.len(), 1);
        assert_eq!(m.secrets[0].header_value("t0k"), "Bearer t0k");
        let table = [
            (
                format!("{BASE}[network]\nallow = [\"ftp://x.org\"]\n"),
                "skills/x/skill.toml:4:1: network rule `ftp://x.org` must use http or https",
            ),
            (
                format!(
                    "{BASE}[network]\nallow = [\"https://a.org\"]\n[[secrets]]\nname = \"t\"\nheader = \"X-Key\"\nhosts = [\"https://b.org\"]\n"
                ),
                "which `[network] allow` does not list",
            ),
            (
                format!(
                    "{BASE}[network]\nallow = [\"https://a.org\"]\n[[secrets]]\nname = \"t\"\nheader = \"Host\"\nhosts = [\"https://a.org\"]\n"
                ),
                "managed by the host",
            ),
            (
                format!(
                    "{BASE}[network]\nallow = [\"https://a.org\"]\n[[secrets]]\nname = \"t\"\nheader = \"X\"\nformat = \"none\"\nhosts = [\"https://a.org\"]\n"
                ),
                "exactly once",
            ),
            (format!("{BASE}[network]\nallowed = []\n"), "unknown field `allowed`"),
        ];
        for (text, expected) in table {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(expected), "{err:?} should contain {expected:?}");
        }
    }

    #[test]
    fn test_cases() {
        let text = format!(
            "{BASE}[[tests]]\ntool = \"count\"\ninput = {{ text = \"a b\", n = 2 }}\nexpect = {{ words = 2 }}\n[[tests]]\ntool = \"count\"\nexpect_error = \"missing\"\n"
        );
        let m = parse(&text).unwrap();
        let tests = SkillManifest::test_cases(&text, Path::new("skill.toml")).unwrap();
        assert_eq!(tests.len(), 2);
        assert_eq!(tests[0].input, serde_json::json!({"text": "a b", "n": 2}));
        assert_eq!(tests[0].expect, Some(serde_json::json!({"words": 2})));
        assert_eq!(tests[1].input, serde_json::json!({}));
        assert_eq!(tests[1].expect_error.as_deref(), Some("missing"));
        let before = parse(BASE).unwrap().capability_digest();
        assert_eq!(m.capability_digest(), before, "tests ask for nothing");
        let err = parse(&format!("{BASE}[[tests]]\ntool = \"c\"\nexpect = 1\nexpect_error = \"x\"\n")).unwrap_err();
        assert!(err.contains("skills/x/skill.toml:4:1: a test has both"), "{err}");
        let err = parse(&format!("{BASE}[[tests]]\ntool = \"c\"\nexpected = 1\n")).unwrap_err();
        assert!(err.contains("unknown field `expected`"), "{err}");
    }

    #[test]
    fn terminal_controls_are_refused_in_every_field() {
        // (the manifest's text after `name`, the field the error names, the character)
        let table = [
            ("version = \"1.0\\u001b[2K\"\ndescription = \"d\"", "`version` holds a control character (U+001B at byte 3)"),
            ("version = \"1\"\ndescription = \"d\\r\"", "`description` holds a control character (U+000D at byte 1)"),
            ("version = \"1\"\ndescription = \"d\\u202E\"", "`description` holds a bidirectional text control (U+202E at byte 1)"),
            ("version = \"1\\n\"\ndescription = \"d\"", "`version` holds a control character (U+000A at byte 1)"),
            ("version = \"1\"\ndescription = \"d\\u009b\"", "`description` holds a control character (U+009B at byte 1)"),
            (
                "version = \"1\"\ndescription = \"d\"\n[search]\nkeywords = [\"ok\", \"k\\u2066\"]",
                "`search.keywords[1]` holds a bidirectional text control (U+2066 at byte 1)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[search]\nexample_queries = [\"q\\u007f\"]",
                "`search.example_queries[0]` holds a control character (U+007F at byte 1)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[server]\ncommand = \"python\"\nargs = [\"server.py\", \"\\u001b[1A\"]",
                "`server.args[1]` holds a control character (U+001B at byte 0)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[server]\ncommand = \"py\\u200Fthon\"",
                "`server.command` holds a bidirectional text control (U+200F at byte 2)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[network]\nallow = [\"https://api.example.com\\u202E\"]",
                "`network.allow[0]` holds a bidirectional text control (U+202E at byte 23)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[[capabilities.files]]\npath = \"a\\tb\"\nmode = \"ro\"",
                "`capabilities.files[0].path` holds a control character (U+0009 at byte 1)",
            ),
            (
                "version = \"1\"\ndescription = \"d\"\n[[tests]]\ntool = \"t\"\ninput = { text = \"\\u001b\" }",
                "`tests[0].input.text` holds a control character (U+001B at byte 0)",
            ),
        ];
        for (rest, expected) in table {
            let err = parse(&format!("name = \"demo\"\n{rest}\n")).unwrap_err();
            assert!(err.contains(expected), "{rest:?}: {err}");
            assert!(err.contains("remove it"), "{err}");
        }
        // Descriptions and test data are prose: line breaks and tabs are fine there.
        let m = parse("name = \"demo\"\nversion = \"1\"\ndescription = \"two\\nlines\\tand a tab\"\n").unwrap();
        assert_eq!(m.description, "two\nlines\tand a tab");
        assert!(
            parse("name = \"demo\"\nversion = \"1\"\ndescription = \"d\"\n[[tests]]\ntool = \"t\"\ninput = { text = \"a\\nb\" }\n").is_ok()
        );
    }

    #[test]
    fn normalises_paths() {
        assert_eq!(normalise_relative("."), Ok(".".into()));
        assert_eq!(normalise_relative("a/./b/"), Ok("a/b".into()));
        assert!(normalise_relative("a/../../b").is_err());
    }
}
