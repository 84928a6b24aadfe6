//! A skill that breaks the contract of the skill world on its way out: output that is
//! not JSON, JSON that breaks the output schema its tool declared, text that is not
//! UTF-8. Each is the `liar` guest (built on raw wit-bindgen, since the SDK cannot lie);
//! each must come back as a typed error naming the skill, the tool and what was wrong,
//! never as an answer a caller would trust, and the host must serve the next call.

use fixtures::LIAR;
use serde_json::json;
use skillhost::{CallError, DirectSkill, skill::CallFailure};

use crate::{call, ok, test_host};

async fn liar(t: &fixtures::TestHost) -> DirectSkill {
    t.host.load_path_granted(&LIAR.folder(t.skills.path())).await.expect("the liar guest loads: its lies are in its outputs")
}

/// The control: the same schema, kept, passes untouched.
async fn honest_still_answers(skill: &DirectSkill) {
    assert_eq!(ok(skill, "honest", json!({})).await, json!({"count": 3}));
}

fn bad_output(err: CallError) -> String {
    assert!(matches!(err, CallError { failure: CallFailure::BadOutput { .. }, .. }), "{err:?}");
    err.to_string()
}

/// Attack: the guest returns text that is not JSON. Expected: `BadOutput` naming the
/// skill, the tool and the parser's complaint.
#[tokio::test]
async fn output_that_is_not_json_is_an_error() {
    let t = test_host();
    let skill = liar(&t).await;
    let err = bad_output(call(&skill, "invalid_json", json!({})).await.unwrap_err());
    assert!(err.starts_with("skill `liar` tool `invalid_json` returned output that breaks its contract: the output is not JSON"), "{err}");
    assert!(err.ends_with("this is a bug in the skill, report it to its author"), "{err}");
    honest_still_answers(&skill).await;
}

/// Attack: the guest declares `{"count": integer}` and returns `{"count": "many"}`, or
/// leaves `count` out. Expected: `BadOutput` with the place in the output and the rule
/// broken; nothing of the lie reaches the caller.
#[tokio::test]
async fn output_that_breaks_its_declared_schema_is_an_error() {
    let t = test_host();
    let skill = liar(&t).await;
    let err = bad_output(call(&skill, "wrong_schema", json!({})).await.unwrap_err());
    assert!(err.contains("output/count does not match the declared output schema: \"many\" is not of type \"integer\""), "{err}");
    let err = bad_output(call(&skill, "missing_field", json!({})).await.unwrap_err());
    assert!(err.contains("the output does not match the declared output schema: \"count\" is a required property"), "{err}");
    honest_still_answers(&skill).await;
}

/// Attack: the guest hands the host a string whose bytes are not UTF-8, which the
/// canonical ABI forbids. Expected: the call fails as the guest's fault (wasmtime
/// refuses to lift the string), the host does not crash, the next call works.
#[tokio::test]
async fn output_that_is_not_utf8_is_refused_when_lifted() {
    let t = test_host();
    let skill = liar(&t).await;
    let err = call(&skill, "not_utf8", json!({})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Crashed { .. }, .. }), "{err:?}");
    assert!(err.to_string().starts_with("skill `liar` tool `not_utf8` crashed"), "{err}");
    honest_still_answers(&skill).await;
}
