//! Editing a submitted skill.toml without losing the author's text: `[[tests]]` appended
//! as TOML tables after what is there.

use super::*;

/// Append `tests` (JSON objects with `tool`, `input`, `expect` or `expect_error`) to
/// skill.toml text as `[[tests]]` entries, as `skill_create`'s `tests` argument asks.
pub fn append_tests(manifest: &str, tests: &[serde_json::Value]) -> Result<String, TestsError> {
    #[derive(Serialize)]
    struct Tests {
        tests: Vec<toml::Value>,
    }
    let tests = tests
        .iter()
        .map(|t| toml::Value::try_from(t).map_err(|source| TestsError::Case { case: t.to_string(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let text = toml::to_string(&Tests { tests }).map_err(TestsError::All)?;
    Ok(format!("{}\n\n{text}", manifest.trim_end()))
}

/// Why [`append_tests`] could not write the test cases into skill.toml.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestsError {
    /// One case has no TOML form (a `null`, a mixed array).
    #[error("test case {case} cannot be written to skill.toml: {source}")]
    Case {
        /// The case, as JSON.
        case: String,
        /// The serializer's error.
        source: toml::ser::Error,
    },
    /// The list as a whole.
    #[error("the test cases cannot be written to skill.toml: {0}")]
    All(#[source] toml::ser::Error),
}
