//! `[[tests]]` cases: before approval against the built skill through the [`Skill`] trait
//! (the forge's probe runtimes, under a probe grant: see [`crate::probe`]); after approval
//! through the registry, with the skill's real grant ([`Forge::test_approved`](crate::Forge::test_approved)).
//! Python skills' own pytest run and handshake are `skillhost-sandbox`'s `check`.

use std::future::Future;

use serde_json::{Value, json};
use skillhost_core::{CallContext, Skill, TestCase};

use crate::error::TestFailure;

/// Run every case on `skill`; return the failures.
pub(crate) async fn run_cases(skill: &dyn Skill, cases: &[TestCase]) -> Vec<TestFailure> {
    run_with(cases, |tool, input| async move {
        let cx = CallContext { caller: "forge".into(), ..CallContext::default() };
        skill.call(&tool, input, cx).await.map(|out| out.value)
    })
    .await
}

/// Run every case through `call` (tool, input → output or error message); return the
/// failures.
pub(crate) async fn run_with<F, Fut, E>(cases: &[TestCase], call: F) -> Vec<TestFailure>
where
    F: Fn(String, Value) -> Fut,
    Fut: Future<Output = Result<Value, E>>,
    E: std::fmt::Display,
{
    let mut failures = Vec::new();
    for case in cases {
        let result = call(case.tool.clone(), case.input.clone()).await.map_err(|e| e.to_string());
        let failure = |expected: Value, actual: Value| TestFailure { tool: case.tool.clone(), input: case.input.clone(), expected, actual };
        match (result, &case.expect_error) {
            (Ok(out), None) => {
                if let Some(expected) = &case.expect
                    && *expected != out
                {
                    failures.push(failure(expected.clone(), out));
                }
            }
            (Ok(out), Some(needle)) => failures.push(failure(json!({"error": needle}), out)),
            (Err(error), Some(needle)) if error.contains(needle.as_str()) => {}
            (Err(error), expected) => {
                let expected = match expected {
                    Some(needle) => json!({"error": needle}),
                    None => case.expect.clone().unwrap_or_else(|| json!("success")),
                };
                failures.push(failure(expected, json!({"error": error})));
            }
        }
    }
    failures
}
