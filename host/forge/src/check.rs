//! `[[tests]]` cases, run against the built skill through the [`Skill`] trait (the real
//! runtime, the skill's declared grant over a throwaway data dir). Python skills' own
//! pytest run and handshake are `skillhost-sandbox`'s `check`.

use serde_json::{Value, json};
use skillhost_core::{CallContext, Skill, TestCase};

use crate::error::TestFailure;

/// Run every case; return the failures.
pub(crate) async fn run_cases(skill: &dyn Skill, cases: &[TestCase]) -> Vec<TestFailure> {
    let mut failures = Vec::new();
    for case in cases {
        let cx = CallContext { caller: "forge".into(), ..CallContext::default() };
        let result = skill.call(&case.tool, case.input.clone(), cx).await;
        let failure = |expected: Value, actual: Value| TestFailure { tool: case.tool.clone(), input: case.input.clone(), expected, actual };
        match (result, &case.expect_error) {
            (Ok(out), None) => {
                if let Some(expected) = &case.expect
                    && *expected != out.value
                {
                    failures.push(failure(expected.clone(), out.value));
                }
            }
            (Ok(out), Some(needle)) => failures.push(failure(json!({"error": needle}), out.value)),
            (Err(error), Some(needle)) if error.to_string().contains(needle.as_str()) => {}
            (Err(error), expected) => {
                let expected = match expected {
                    Some(needle) => json!({"error": needle}),
                    None => case.expect.clone().unwrap_or_else(|| json!("success")),
                };
                failures.push(failure(expected, json!({"error": error.to_string()})));
            }
        }
    }
    failures
}
