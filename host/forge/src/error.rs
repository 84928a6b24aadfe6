//! [`ForgeError`]: a submission the agent can fix ([`Failure`], counted as an attempt),
//! attempts used up, or the host failing (not the agent's doing, not counted).

use serde::Serialize;
use skillhost_registry::RegistryError;

use crate::rust::BuildFailure;
use crate::stage::Refusal;

/// Why the forge did not produce a skill.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// The submission failed a stage; the agent can fix it and submit again.
    #[error("skill `{skill}`: {failure} (attempt {attempt} of {max}{})", if attempt >= max { format!("; that was the last attempt: `skillhost forge --reset {skill}` lets it try again") } else { String::new() })]
    Failed {
        /// The skill.
        skill: String,
        /// This attempt, counting from 1.
        attempt: u32,
        /// The attempts allowed.
        max: u32,
        /// What failed.
        failure: Failure,
    },
    /// Every attempt failed; a human must reset the count.
    #[error("skill `{skill}`: all {max} attempts failed; a human can allow more with `skillhost forge --reset {skill}`")]
    Exhausted {
        /// The skill.
        skill: String,
        /// The attempts allowed.
        max: u32,
    },
    /// `skill_create` of a name that exists, or `skill_update` of one that does not (or
    /// has no stored source).
    #[error("{0}")]
    Conflict(String),
    /// A cap of the forge refused the submission for now: builds at once, or submissions
    /// across names in a time window. Not counted as an attempt.
    #[error("{0}")]
    Limited(String),
    /// The host cannot build: a tool or the toolchain cache is missing.
    #[error("the forge cannot run: {0}")]
    Setup(String),
    /// The host failed writing or reading its own files.
    #[error("the forge failed: {what}: {source}")]
    Io {
        /// What it was doing.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// Installing the built skill failed.
    #[error("installing the built skill failed: {0}")]
    Install(#[from] RegistryError),
}

/// What went wrong with a submission, for the agent to act on.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Failure {
    /// Refused before anything was written or built.
    Stage {
        /// Every refused file, with its rule.
        refused: Vec<Refusal>,
    },
    /// skill.toml does not parse or validate.
    Manifest {
        /// `file:line:col: what; fix`.
        error: String,
    },
    /// The Rust build failed.
    Build(BuildFailure),
    /// It built, but does not load (wrong world, bad tool schemas, a server that does not
    /// start).
    Load {
        /// The load error.
        error: String,
    },
    /// Declared test cases (`[[tests]]`) failed.
    Tests {
        /// Each failing case.
        failures: Vec<TestFailure>,
    },
    /// A Python skill's pytest run or handshake failed.
    Python {
        /// The pytest command, exit code and output tail, when tests ran.
        tests: Option<skillhost_core::TestRun>,
        /// What failed, one line.
        error: String,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Stage { refused } => {
                write!(f, "refused before any build: ")?;
                let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
                write!(f, "{}", lines.join("; "))
            }
            Failure::Manifest { error } => write!(f, "skill.toml: {error}"),
            Failure::Build(build) => {
                let errors: Vec<String> = build
                    .diagnostics
                    .iter()
                    .filter(|d| d.level == "error")
                    .take(5)
                    .map(|d| match (&d.file, d.line, d.column) {
                        (Some(file), Some(line), Some(col)) => format!("{file}:{line}:{col}: {}", d.message),
                        _ => d.message.clone(),
                    })
                    .collect();
                match (&build.reason, errors.is_empty()) {
                    (Some(reason), _) => write!(f, "the build failed: {reason}"),
                    (None, false) => write!(f, "the build failed: {}", errors.join("; ")),
                    (None, true) => write!(f, "the build failed (see output_tail)"),
                }
            }
            Failure::Load { error } => write!(f, "it built but does not load: {error}"),
            Failure::Tests { failures } => {
                let first = failures.first().map(|t| format!(": {}", t.summary())).unwrap_or_default();
                write!(f, "{} declared test(s) failed{first}", failures.len())
            }
            Failure::Python { error, .. } => write!(f, "its Python check failed: {error}"),
        }
    }
}

/// One failing `[[tests]]` case.
#[derive(Clone, Debug, Serialize)]
pub struct TestFailure {
    /// The tool called.
    pub tool: String,
    /// The input sent.
    pub input: serde_json::Value,
    /// What was expected: the output, or `{"error": "substring"}`.
    pub expected: serde_json::Value,
    /// What came back: the output, or `{"error": "message"}`.
    pub actual: serde_json::Value,
}

impl TestFailure {
    fn summary(&self) -> String {
        format!("{}({}) returned {}, expected {}", self.tool, self.input, self.actual, self.expected)
    }
}

impl ForgeError {
    /// The failure the agent can act on, if this is one.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            ForgeError::Failed { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// A JSON form for agents and `--json`: `kind`, `message`, and the failure's details
    /// and attempt count when there is one.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({"message": self.to_string()});
        match self {
            ForgeError::Failed { skill, attempt, max, failure } => {
                value["kind"] = "failed".into();
                value["skill"] = skill.as_str().into();
                value["attempt"] = (*attempt).into();
                value["max_attempts"] = (*max).into();
                value["last_attempt"] = (attempt >= max).into();
                value["failure"] = serde_json::to_value(failure).unwrap_or_default();
            }
            ForgeError::Exhausted { skill, max } => {
                value["kind"] = "exhausted".into();
                value["skill"] = skill.as_str().into();
                value["max_attempts"] = (*max).into();
            }
            ForgeError::Conflict(_) => value["kind"] = "conflict".into(),
            ForgeError::Limited(_) => value["kind"] = "limit".into(),
            _ => value["kind"] = "host".into(),
        }
        value
    }
}
