//! Usage statistics recorded by `Registry::call`: a caller's mistakes (an unknown tool,
//! invalid input, a refusal, a deadline shorter than the skill's own) are counted apart
//! and never flag a skill as failing; the skill's own failures (its errors, its own
//! limits) do.

use std::time::Duration;

use serde_json::json;
use skillhost_core::CallContext;

use crate::{Env, call, limits_folder};

#[tokio::test]
async fn caller_mistakes_never_flag_a_skill_its_own_failures_do() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "500ms", "");
    let registry = env.open().await;
    for _ in 0..6 {
        call(&registry, "limits", "no_such_tool", json!({})).await.unwrap_err();
        call(&registry, "limits", "echo", json!({"not_value": 1})).await.unwrap_err();
        call(&registry, "limits", "fail", json!({"kind": "invalid"})).await.unwrap_err();
        call(&registry, "limits", "fail", json!({"kind": "denied"})).await.unwrap_err();
    }
    call(&registry, "limits", "echo", json!({"value": 1})).await.unwrap();
    // A deadline the caller set, shorter than the skill's own 500ms, ran out: the caller's.
    let cx = CallContext { timeout: Some(Duration::from_millis(50)), ..CallContext::default() };
    registry.call("limits", "spin", json!({}), cx).await.unwrap_err();
    let stats = registry.stats().expect("the stats store opens");
    assert_eq!(stats.failing().unwrap(), vec![], "24 caller mistakes and no failure of its own flag nothing");
    let tools = stats.tools().unwrap();
    let echo = tools.iter().find(|t| t.tool == "echo").unwrap();
    assert_eq!((echo.calls, echo.failures), (7, 0), "{echo:?}");
    let echo = serde_json::to_value(echo).unwrap();
    assert_eq!(echo["caller_errors"], 6, "{echo}");
    let unknown = tools.iter().find(|t| t.tool == "no_such_tool").unwrap();
    assert_eq!(unknown.failures, 0, "{unknown:?}");
    let spin = tools.iter().find(|t| t.tool == "spin").unwrap();
    assert_eq!((spin.calls, spin.failures, spin.caller_errors), (1, 0, 1), "{spin:?}");

    // The skill's own limit is the skill's failure.
    call(&registry, "limits", "spin", json!({})).await.unwrap_err();
    let spin = stats.tools().unwrap().into_iter().find(|t| t.tool == "spin").unwrap();
    assert_eq!((spin.calls, spin.failures, spin.caller_errors), (2, 1, 1), "{spin:?}");

    for _ in 0..6 {
        call(&registry, "limits", "fail", json!({"kind": "failed"})).await.unwrap_err();
    }
    let failing = stats.failing().unwrap();
    assert_eq!(failing.len(), 1, "its own failures flag it: {failing:?}");
    assert_eq!((failing[0].skill.as_str(), failing[0].failures, failing[0].calls), ("limits", 7, 8), "{failing:?}");
}
