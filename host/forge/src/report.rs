//! What the forge reports: a skill it forged ([`Forged`]), each declared test case's fate,
//! and an approved skill's tests run with its real grant.

use super::*;

/// A skill the forge built, tested and installed.
#[derive(Clone, Debug, Serialize)]
pub struct Forged {
    /// The skill.
    pub skill: String,
    /// Its language.
    pub language: Language,
    /// Its manifest's version.
    pub version: String,
    /// Its trust state after install: waiting for a human (`pending_review`,
    /// `needs_reapproval`), or `approved` when a human approved this exact content before.
    pub state: TrustState,
    /// Its risk tier.
    pub tier: RiskTier,
    /// Its tools.
    pub tools: Vec<String>,
    /// Declared test cases that passed.
    pub tests_passed: usize,
    /// Each declared test case and what became of it: `passed`, or `runs_after_approval`
    /// when the skill asks for network or secrets, which no unapproved code gets.
    pub tests: Vec<TestResult>,
    /// When some tests wait for approval: why, and how they will run.
    pub after_approval: Option<String>,
    /// Compiler warnings (Rust).
    pub warnings: Vec<Diagnostic>,
    /// Where it was installed.
    pub installed: PathBuf,
    /// The content hash of what was tested and installed: the same bytes (see
    /// [`Registry::install_snapshot`]).
    pub content_hash: String,
    /// Whether it replaced a version (kept for `skillhost rollback`).
    pub replaced: bool,
    /// Milliseconds per stage (`stage`, `build`, `test`, `install`) and in all.
    pub timings_ms: BTreeMap<&'static str, u64>,
}

/// One declared test case in a forge report.
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// The tool it calls.
    pub tool: String,
    /// What became of it.
    pub status: TestStatus,
}

/// What became of a declared test case in the forge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TestStatus {
    /// It ran under the probe grant and passed.
    Passed,
    /// Not run: the skill asks for network or secrets, which only an approved skill
    /// gets; `skillhost test NAME` runs it once a human approved the skill.
    RunsAfterApproval,
}

/// The outcome of an approved skill's declared tests, run with its real grant.
#[derive(Clone, Debug, Serialize)]
pub struct ApprovedTests {
    /// The skill.
    pub skill: String,
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed (secret values replaced).
    pub failures: Vec<TestFailure>,
}
