//! Staging: the checks a submission passes before anything is written or built (names,
//! paths, allow and deny lists, sizes), and writing a Rust crate into a fresh build
//! directory.
//!
//! Checked in memory, in this order, every refusal naming the file and the rule:
//!
//! 1. the skill name is a valid [`SkillName`] and equals skill.toml's `name`;
//! 2. each path is relative, `/`-separated, without `..`, `.`, empty components,
//!    backslashes or NUL, at most 255 bytes and 8 levels deep;
//! 3. the deny list: hidden paths (`.cargo/config.toml`, `.git/`...), `target/`,
//!    `__pycache__/`, `node_modules/`, `Cargo.lock`, and binaries (`*.wasm`, `*.so`,
//!    `*.pyc`, `*.exe`...);
//! 4. the allow list of the language:
//!    - Rust: `skill.toml`, `SKILL.md`, `Cargo.toml` (optional: the forge writes one),
//!      `build.rs`, `src/**.rs`, `tests/**.rs`, `references/**.md|.txt`;
//!    - Python: `skill.toml`, `SKILL.md`, `**.py`, `references/**.md|.txt`. No
//!      `requirements.txt`: Python skills run with the host's managed venv, whose packages
//!      the host chooses (`skillhost setup python --with`);
//!    - Scripts (an Agent Skills folder: SKILL.md and the scripts it runs): `SKILL.md`,
//!      `scripts/**` (text), `references/**`, `assets/**` (text), `requirements.txt`, and
//!      an optional `skill.toml` saying what the scripts ask for (hosts, secrets, its data
//!      dir, limits): an ask a human sees, with what changed, before anything runs;
//! 5. sizes: 1 MiB per file, 10 MiB in all, 200 files.
//!
//! Files arrive as path → text, so a submission cannot hold a symlink; a directory given
//! to `skillhost forge DIR` is read refusing symlinks and special files. Files are written
//! with `create_new` under a directory made for this attempt, so nothing is followed or
//! overwritten.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use skillhost_core::SkillName;

/// The languages the forge builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// A crate against `skillhost-sdk`, built to a WebAssembly component.
    Rust,
    /// A FastMCP server run in bubblewrap.
    Python,
    /// An Agent Skills folder: SKILL.md and its scripts, run in the jail once approved.
    Scripts,
}

impl Language {
    /// `rust` or `python`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::Scripts => "scripts",
        }
    }
}

/// Size caps of a submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageLimits {
    /// Largest file, bytes. Default: 1 MiB.
    pub file: u64,
    /// Largest sum of files, bytes. Default: 10 MiB.
    pub total: u64,
    /// Most files. Default: 200.
    pub files: usize,
}

impl Default for StageLimits {
    fn default() -> Self {
        Self { file: 1 << 20, total: 10 << 20, files: 200 }
    }
}

/// One refused file (or the submission as a whole, when `file` is empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The path as submitted.
    pub file: String,
    /// The rule it breaks.
    pub rule: String,
    /// How to fix it.
    pub fix: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.file.is_empty() {
            write!(f, "{}; {}", self.rule, self.fix)
        } else {
            write!(f, "`{}`: {}; {}", self.file, self.rule, self.fix)
        }
    }
}

fn refusal(file: &str, rule: impl Into<String>, fix: impl Into<String>) -> Refusal {
    Refusal { file: file.to_owned(), rule: rule.into(), fix: fix.into() }
}

const MAX_PATH: usize = 255;
const MAX_DEPTH: usize = 8;

/// Check a submission: every refusal, or nothing when it may be staged.
pub fn validate(name: &str, language: Language, files: &BTreeMap<String, String>, limits: &StageLimits) -> Vec<Refusal> {
    let mut refused = Vec::new();
    if let Err(e) = SkillName::new(name) {
        refused.push(refusal("", e.to_string(), "choose another name"));
    }
    if files.len() > limits.files {
        refused.push(refusal("", format!("{} files, more than the {} allowed", files.len(), limits.files), "submit only the sources"));
    }
    let mut total = 0u64;
    for (path, content) in files {
        if let Some(r) = check_path(path, language) {
            refused.push(r);
            continue;
        }
        let size = content.len() as u64;
        total += size;
        if size > limits.file {
            refused.push(refusal(
                path,
                format!("{size} bytes, more than the {} allowed per file", limits.file),
                "split the file or leave the data out of the skill",
            ));
        }
    }
    if total > limits.total {
        refused.push(refusal(
            "",
            format!("{total} bytes in all, more than the {} allowed per skill", limits.total),
            "leave large data out of the skill",
        ));
    }
    // Directories and files must not collide (`src` and `src/lib.rs`).
    for path in files.keys() {
        let mut prefix = String::new();
        for part in path.split('/') {
            if !prefix.is_empty() && files.contains_key(&prefix) {
                refused.push(refusal(path, format!("`{prefix}` is both a file and a directory"), "rename one of them"));
                break;
            }
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
        }
    }
    if language == Language::Scripts {
        if !files.contains_key("SKILL.md") {
            refused.push(refusal(
                "SKILL.md",
                "missing: a skill of scripts is an Agent Skills folder",
                "add SKILL.md with name and description",
            ));
        }
        return refused;
    }
    match files.get("skill.toml") {
        None => {
            refused.push(refusal("skill.toml", "missing: every skill has a manifest", "add skill.toml with name, version and description"))
        }
        Some(text) => {
            if let Ok(table) = text.parse::<toml::Table>()
                && let Some(declared) = table.get("name").and_then(|v| v.as_str())
                && declared != name
            {
                refused.push(refusal(
                    "skill.toml",
                    format!("declares name `{declared}` but the submission is named `{name}`"),
                    format!("write `name = \"{name}\"`"),
                ));
            }
        }
    }
    refused
}

/// Why `path` may not be staged for `language`, if it may not.
fn check_path(path: &str, language: Language) -> Option<Refusal> {
    let bad = |rule: &str| Some(refusal(path, rule, "use a relative path such as `src/lib.rs`, without `..`"));
    if path.is_empty() {
        return bad("the path is empty");
    }
    if path.len() > MAX_PATH {
        return bad("the path is longer than 255 bytes");
    }
    if path.contains('\0') || path.contains('\\') {
        return bad("the path contains a NUL or a backslash");
    }
    if path.starts_with('/') {
        return bad("the path is absolute");
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.contains(&"..") {
        return bad("the path leaves the skill with `..`");
    }
    if parts.iter().any(|p| p.is_empty() || *p == ".") {
        return bad("the path has an empty or `.` component");
    }
    if parts.len() > MAX_DEPTH {
        return bad("the path is more than 8 levels deep");
    }
    let file = parts[parts.len() - 1];
    let deny = |rule: &str| Some(refusal(path, format!("denied: {rule}"), "leave it out: the forge builds from sources only"));
    if parts.iter().any(|p| p.starts_with('.')) {
        return deny("hidden files and directories (e.g. `.cargo/config.toml`) could change how the build runs");
    }
    if matches!(parts[0], "target" | "node_modules") || parts.contains(&"__pycache__") {
        return deny("build output and caches");
    }
    if file == "Cargo.lock" {
        return deny("the lock file is made by the forge from its own vendored dependencies");
    }
    const BINARIES: [&str; 10] = [".wasm", ".so", ".dylib", ".dll", ".exe", ".pyc", ".pyo", ".a", ".o", ".rlib"];
    if BINARIES.iter().any(|ext| file.ends_with(ext)) {
        return deny("binaries: a human must be able to review everything that runs");
    }
    let text_doc = |p: &[&str]| p[0] == "references" && (file.ends_with(".md") || file.ends_with(".txt"));
    let allowed = match language {
        Language::Rust => {
            matches!(path, "skill.toml" | "SKILL.md" | "Cargo.toml" | "build.rs")
                || (matches!(parts[0], "src" | "tests") && parts.len() > 1 && file.ends_with(".rs"))
                || text_doc(&parts)
        }
        Language::Python => matches!(path, "skill.toml" | "SKILL.md") || file.ends_with(".py") || text_doc(&parts),
        Language::Scripts => {
            const TEXT: [&str; 14] =
                [".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".md", ".txt", ".json", ".csv", ".toml", ".yaml", ".svg"];
            matches!(path, "SKILL.md" | "skill.toml" | "requirements.txt")
                || (matches!(parts[0], "scripts" | "references" | "assets")
                    && parts.len() > 1
                    && TEXT.iter().any(|ext| file.ends_with(ext)))
        }
    };
    if allowed {
        return None;
    }
    let list = match language {
        Language::Rust => "skill.toml, SKILL.md, Cargo.toml, build.rs, src/**.rs, tests/**.rs, references/**.md|.txt",
        Language::Python => "skill.toml, SKILL.md, **.py, references/**.md|.txt (packages come from the host's managed venv)",
        Language::Scripts => {
            "SKILL.md, skill.toml (what the scripts ask for), requirements.txt, and text files (.py .sh .js .mjs .ts .md .txt .json .csv .toml .yaml .svg) under scripts/, references/, assets/"
        }
    };
    Some(refusal(path, format!("not on the {} allow list", language.as_str()), format!("a {} skill holds only: {list}", language.as_str())))
}

/// Write validated `files` under `dir`, which must not exist. Never follows a link or
/// overwrites a file.
pub fn write(dir: &Path, files: &BTreeMap<String, String>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
    std::fs::create_dir(dir)?;
    for (path, content) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&target)?;
        file.write_all(content.as_bytes())?;
    }
    Ok(())
}

/// Read a directory into path → text, as `skillhost forge DIR` submits it. Hidden
/// entries and a top-level `target/` are skipped (they are the author's tooling); a
/// symlink or special file is a refusal; a file that is not UTF-8 is a refusal.
pub fn read_dir(dir: &Path, limits: &StageLimits) -> Result<BTreeMap<String, String>, Vec<Refusal>> {
    let mut files = BTreeMap::new();
    let mut refused = Vec::new();
    let mut stack: Vec<(PathBuf, String)> = vec![(dir.to_owned(), String::new())];
    while let Some((path, prefix)) = stack.pop() {
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) => {
                refused.push(refusal(&prefix, format!("cannot read the directory: {e}"), "check the path"));
                continue;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || (prefix.is_empty() && name == "target") {
                continue;
            }
            let relative = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
            if meta.is_symlink() {
                refused.push(refusal(
                    &relative,
                    "denied: a symlink could point anywhere on the host",
                    "replace the link with the file itself",
                ));
            } else if meta.is_dir() {
                stack.push((entry.path(), relative));
            } else if !meta.is_file() {
                refused.push(refusal(&relative, "denied: not a regular file", "remove it"));
            } else if meta.len() > limits.file {
                refused.push(refusal(
                    &relative,
                    format!("{} bytes, more than the {} allowed per file", meta.len(), limits.file),
                    "split the file or leave the data out of the skill",
                ));
            } else {
                match std::fs::read(entry.path()).map(String::from_utf8) {
                    Ok(Ok(text)) => {
                        files.insert(relative, text);
                    }
                    Ok(Err(_)) => refused.push(refusal(&relative, "not UTF-8 text", "the forge builds from text sources only")),
                    Err(e) => refused.push(refusal(&relative, format!("cannot read: {e}"), "check its permissions")),
                }
            }
        }
    }
    if refused.is_empty() { Ok(files) } else { Err(refused) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> BTreeMap<String, String> {
        let mut map: BTreeMap<String, String> = paths.iter().map(|p| (p.to_string(), String::new())).collect();
        map.insert("skill.toml".into(), "name = \"demo\"\n".into());
        map
    }

    #[test]
    fn rules_name_the_file() {
        let table = [
            ("../evil.rs", "leaves the skill"),
            ("/etc/passwd", "absolute"),
            ("src/./lib.rs", "empty or `.`"),
            ("src//lib.rs", "empty or `.`"),
            (".cargo/config.toml", "hidden"),
            ("src/.hidden.rs", "hidden"),
            ("target/x.rs", "build output"),
            ("Cargo.lock", "lock file"),
            ("src/blob.wasm", "binaries"),
            ("run.sh", "not on the rust allow list"),
            ("src/lib.py", "not on the rust allow list"),
        ];
        for (path, rule) in table {
            let refused = validate("demo", Language::Rust, &files(&[path]), &StageLimits::default());
            assert_eq!(refused.len(), 1, "{path}: {refused:?}");
            assert_eq!(refused[0].file, path);
            assert!(refused[0].rule.contains(rule), "{path}: {}", refused[0]);
        }
        for path in ["src/lib.rs", "src/a/b.rs", "build.rs", "Cargo.toml", "SKILL.md", "references/api.md"] {
            assert!(validate("demo", Language::Rust, &files(&[path]), &StageLimits::default()).is_empty(), "{path}");
        }
        for path in ["server.py", "test_server.py", "lib/util.py"] {
            assert!(validate("demo", Language::Python, &files(&[path]), &StageLimits::default()).is_empty(), "{path}");
        }
        let refused = validate("demo", Language::Python, &files(&["requirements.txt"]), &StageLimits::default());
        assert!(refused[0].rule.contains("python allow list"), "{refused:?}");
    }

    #[test]
    fn names_sizes_and_collisions() {
        let refused = validate("Bad_Name", Language::Rust, &files(&[]), &StageLimits::default());
        assert!(refused.iter().any(|r| r.rule.contains("invalid skill name")), "{refused:?}");
        let refused = validate("other", Language::Rust, &files(&[]), &StageLimits::default());
        assert!(refused.iter().any(|r| r.rule.contains("declares name `demo`")), "{refused:?}");
        let mut big = files(&[]);
        big.insert("src/lib.rs".into(), "x".repeat(11));
        let limits = StageLimits { file: 10, total: 100, files: 3 };
        assert!(validate("demo", Language::Rust, &big, &limits)[0].rule.contains("allowed per file"));
        let mut many = files(&["src/a.rs", "src/b.rs", "src/c.rs"]);
        many.insert("src/a.rs/x.rs".into(), String::new());
        let refused = validate("demo", Language::Rust, &many, &limits);
        assert!(refused.iter().any(|r| r.rule.contains("allowed")), "{refused:?}");
        assert!(refused.iter().any(|r| r.rule.contains("both a file and a directory")), "{refused:?}");
        let mut none = files(&[]);
        none.remove("skill.toml");
        assert!(validate("demo", Language::Rust, &none, &StageLimits::default())[0].rule.contains("missing"));
    }
}
