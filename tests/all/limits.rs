//! Hard limits: deadlines for a spinning guest and for one blocked in a host sleep,
//! the memory cap, the output cap, the log cap; tool errors and crashes mapped to typed
//! errors; and after each, the host still serves the next call.

use std::time::Duration;

use fixtures::LIMITS;
use serde_json::json;
use skillhost::{CallContext, CallError, DirectSkill, skill::CallFailure, skill::Progress};

use crate::{call, call_with, ok, recording_progress, test_host};

async fn limits_skill(t: &fixtures::TestHost) -> DirectSkill {
    t.host.load_path_granted(&LIMITS.folder(t.skills.path())).await.expect("limits guest loads")
}

/// The host still answers after a limit was hit.
async fn still_serving(skill: &DirectSkill) {
    let out = ok(skill, "echo", json!({"value": {"after": "limit"}})).await;
    assert_eq!(out, json!({"after": "limit"}));
}

#[tokio::test]
async fn spin_loop_stops_at_the_deadline() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let cx = CallContext { timeout: Some(Duration::from_millis(300)), ..CallContext::default() };
    let err = call_with(&skill, "spin", json!({}), cx).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Timeout { .. }, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "skill `limits` tool `spin`: timeout after 300ms; the deadline its caller set ran out, not the skill's own limit of 2s; a longer deadline (up to 2s) gives the tool more time"
    );
    // The manifest's own limit (2s) applies without a caller deadline, and is named.
    let err = call(&skill, "spin", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "skill `limits` tool `spin`: timeout after 2s; raise `[limits] timeout` in its skill.toml if the tool needs longer"
    );
    still_serving(&skill).await;
}

#[tokio::test]
async fn guest_blocked_in_a_host_sleep_stops_at_the_deadline() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let cx = CallContext { timeout: Some(Duration::from_millis(300)), ..CallContext::default() };
    let err = call_with(&skill, "sleep", json!({"ms": 3_600_000}), cx).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::Timeout { .. }, .. }), "{err:?}");
    let out = ok(&skill, "sleep", json!({"ms": 1})).await;
    assert_eq!(out, json!(1));
}

#[tokio::test]
async fn memory_bomb_hits_the_cap() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let err = call(&skill, "alloc", json!({"mib": 1024})).await.unwrap_err();
    assert!(matches!(err, CallError { failure: CallFailure::MemoryLimit { limit, .. }, .. } if limit == 512 << 20), "{err:?}");
    assert_eq!(
        err.to_string(),
        "skill `limits` tool `alloc`: memory limit 512 MiB exceeded; raise `[limits] memory` in its skill.toml if the tool needs more"
    );
    assert_eq!(ok(&skill, "alloc", json!({"mib": 16})).await, json!(16), "within the cap works");
    still_serving(&skill).await;
}

#[tokio::test]
async fn huge_output_hits_the_output_cap() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let err = call(&skill, "big_output", json!({"mib": 64})).await.unwrap_err();
    match &err {
        CallError { failure: CallFailure::OutputLimit { size, limit, .. }, .. } => {
            assert!(*size > 64 << 20, "{size}");
            assert_eq!(*limit, 1 << 20);
        }
        other => panic!("expected an output limit, got {other:?}"),
    }
    assert!(err.to_string().contains("exceeds the output limit of 1 MiB"), "{err}");
    still_serving(&skill).await;
}

#[tokio::test]
async fn every_skill_still_serves_after_limits() {
    let t = test_host();
    let limits = limits_skill(&t).await;
    let escape = t.host.load_path_granted(&fixtures::ESCAPE.folder(t.skills.path())).await.unwrap();
    let cx = CallContext { timeout: Some(Duration::from_millis(200)), ..CallContext::default() };
    let (a, b) = tokio::join!(call_with(&limits, "spin", json!({}), cx.clone()), call(&limits, "alloc", json!({"mib": 1024})),);
    assert!(a.is_err() && b.is_err());
    let report = ok(&escape, "list_dir", json!({"path": "/data"})).await;
    assert_eq!(report["ok"], true);
    still_serving(&limits).await;
}

#[tokio::test]
async fn tool_errors_are_typed() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let table = [("invalid", "invalid_input"), ("failed", "failed"), ("denied", "denied")];
    for (kind, code) in table {
        let err = call(&skill, "fail", json!({ "kind": kind })).await.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.is_tool_error());
    }
    let err = call(&skill, "fail", json!({"kind": "bogus"})).await.unwrap_err();
    assert_eq!(err.code(), "invalid_input", "input not matching the schema: {err}");
    let err = call(&skill, "no_such_tool", json!({})).await.unwrap_err();
    assert!(err.to_string().starts_with("skill `limits` has no tool `no_such_tool`; its tools are: "), "{err}");
    assert!(err.to_string().contains("echo"));
}

#[tokio::test]
async fn a_panicking_guest_is_a_crash_not_a_host_failure() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let err = call(&skill, "panic", json!({})).await.unwrap_err();
    assert_eq!(err.code(), "crashed", "{err}");
    assert!(err.to_string().contains("panicked"), "the panic message is reported: {err}");
    still_serving(&skill).await;
}

#[tokio::test]
async fn log_flood_is_capped_and_the_call_succeeds() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let out = ok(&skill, "log_flood", json!({"lines": 20_000})).await;
    assert_eq!(out, json!(20_000));
}

#[tokio::test]
async fn progress_reaches_the_caller() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let (seen, cx) = recording_progress();
    call_with(&skill, "progress", json!({"steps": 5}), cx).await.unwrap();
    let seen = seen.lock().unwrap();
    let last = seen.last().expect("at least one progress report");
    assert_eq!((last.done, last.total), (5, Some(5)), "{seen:?}");
}

/// Attack: a guest reports progress in a tight loop to flood its caller (and, over MCP,
/// the client) with notifications. Expected: the host passes on at most one report per
/// `Progress::INTERVAL` plus the final one, in increasing order; the call succeeds.
#[tokio::test]
async fn a_progress_flood_reaches_the_caller_throttled() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let (seen, cx) = recording_progress();
    let steps = 200_000u64;
    let started = std::time::Instant::now();
    assert_eq!(call_with(&skill, "progress", json!({"steps": steps}), cx).await.unwrap().value, json!(steps));
    let elapsed = started.elapsed();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    // One report per interval at most, plus the first and the final one.
    let bound = (elapsed.as_millis() / Progress::INTERVAL.as_millis()) as usize + 2;
    assert!(seen.len() <= bound, "{} reports in {elapsed:?} (at most {bound})", seen.len());
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done), "reports only move forward");
    let last = seen.last().expect("the final report always goes");
    assert_eq!((last.done, last.total), (steps, Some(steps)));
    still_serving(&skill).await;
}

#[tokio::test]
async fn no_state_survives_between_calls() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    for _ in 0..3 {
        assert_eq!(ok(&skill, "counter", json!({})).await, json!(1), "each call sees a fresh instance");
    }
}

#[tokio::test]
async fn cancellation_stops_a_running_call() {
    let t = test_host();
    let skill = limits_skill(&t).await;
    let cx = CallContext::default();
    let cancel = cx.cancel.clone();
    let call = tokio::spawn({
        let skill = skill.clone();
        async move { skill.skill.call("sleep", json!({"ms": 600_000}), cx).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel.cancel();
    let err = tokio::time::timeout(crate::HANG_GUARD, call).await.unwrap().unwrap().unwrap_err();
    assert_eq!(err.code(), "cancelled", "{err}");
    still_serving(&skill).await;
}
