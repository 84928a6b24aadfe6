//! The registry's metrics and spans: each call and run counted once, where its outcome is
//! decided, and traced as a `registry.call` or `registry.run` span (child of the MCP
//! request's span; the runtime's and the egress's spans are its children).
//!
//! Recorded through the `metrics` facade: nothing is kept unless the embedder installed a
//! recorder (`skillhost serve --http --ops` installs a Prometheus one). Labels are skill
//! and tool names of the catalog only, never arguments: a name the catalog does not know
//! (a caller's typo) is counted as `(unknown)`, so callers cannot grow the label set.

use skillhost_core::{CallError, CallFailure, ToolOutput};

use crate::catalog::Entry;
use crate::error::RegistryError;

/// The label of a skill or tool the catalog does not know.
const UNKNOWN: &str = "(unknown)";

/// The calls of tools, by skill, tool and outcome.
pub(crate) const CALLS: &str = "skillhost_calls_total";
/// How long calls took, in seconds, by skill and tool.
pub(crate) const CALL_SECONDS: &str = "skillhost_call_duration_seconds";
/// The calls running now.
pub(crate) const CALLS_IN_FLIGHT: &str = "skillhost_calls_in_flight";
/// The runs of scripts, by skill and outcome.
pub(crate) const RUNS: &str = "skillhost_script_runs_total";

/// One call in flight, counted in [`CALLS_IN_FLIGHT`] until dropped.
pub(crate) struct InFlight;

impl InFlight {
    pub(crate) fn start() -> Self {
        metrics::gauge!(CALLS_IN_FLIGHT).increment(1.0);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(CALLS_IN_FLIGHT).decrement(1.0);
    }
}

/// The skill and tool labels of a call of `tool` to `entry` (`None` when the name is not
/// in the catalog).
fn labels(entry: Option<&Entry>, tool: &str) -> (String, String) {
    let Some(entry) = entry else { return (UNKNOWN.to_owned(), UNKNOWN.to_owned()) };
    let known = entry.loaded.as_ref().is_some_and(|l| l.tools.iter().any(|t| t.name == tool));
    (entry.name.to_string(), if known { tool.to_owned() } else { UNKNOWN.to_owned() })
}

/// A call refused before any of the skill's code ran (unknown, not loaded, not approved).
pub(crate) fn call_refused(entry: Option<&Entry>, tool: &str) {
    let (skill, tool) = labels(entry, tool);
    metrics::counter!(CALLS, "skill" => skill, "tool" => tool, "outcome" => "refused").increment(1);
}

/// A call that reached the skill's envelope, with its result and duration.
pub(crate) fn call_done(entry: &Entry, tool: &str, result: &Result<ToolOutput, CallError>, elapsed: std::time::Duration) {
    let outcome = match result {
        Ok(_) => "ok",
        // Refused by the envelope before the tool ran.
        Err(e) if matches!(e.failure, CallFailure::UnknownTool { .. } | CallFailure::InvalidInput { .. }) => "refused",
        Err(_) => "failed",
    };
    let (skill, tool) = labels(Some(entry), tool);
    metrics::histogram!(CALL_SECONDS, "skill" => skill.clone(), "tool" => tool.clone()).record(elapsed.as_secs_f64());
    metrics::counter!(CALLS, "skill" => skill, "tool" => tool, "outcome" => outcome).increment(1);
}

/// A run asked of a name the catalog does not know.
pub(crate) fn run_unknown() {
    metrics::counter!(RUNS, "skill" => UNKNOWN, "outcome" => "refused").increment(1);
}

/// A run of `entry`'s scripts, with its result: refused when nothing ran (not approved, a
/// command its approval does not cover), failed when it ran and did not finish well.
pub(crate) fn run_done<T>(entry: &Entry, result: &Result<T, RegistryError>) {
    let skill = entry.name.to_string();
    let outcome = match result {
        Ok(_) => "ok",
        Err(RegistryError::Run(skillhost_core::RunError::Refused { .. })) => "refused",
        Err(RegistryError::Run(_)) => "failed",
        Err(_) => "refused",
    };
    metrics::counter!(RUNS, "skill" => skill, "outcome" => outcome).increment(1);
}

/// The span of a call of `tool` of `skill` (names as the caller gave them).
pub(crate) fn call_span(skill: &str, tool: &str) -> tracing::Span {
    tracing::info_span!(
        "registry.call",
        otel.name = format!("call {skill}"),
        skillhost.skill = skill,
        gen_ai.tool.name = tool,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The span of a run of `skill`'s scripts.
pub(crate) fn run_span(skill: &str) -> tracing::Span {
    tracing::info_span!(
        "registry.run",
        otel.name = format!("run {skill}"),
        skillhost.skill = skill,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Mark `span` failed, with what kind of failure, when `result` is an error.
pub(crate) fn span_outcome<T>(span: &tracing::Span, result: &Result<T, RegistryError>) {
    let Err(error) = result else { return };
    let kind = match error {
        RegistryError::Call(call) if call.is_tool_error() => "tool_error",
        RegistryError::Call(call) if call.is_limit() => "limit",
        RegistryError::Run(skillhost_core::RunError::Limit { .. }) => "limit",
        RegistryError::Run(skillhost_core::RunError::Cancelled { .. }) => "cancelled",
        RegistryError::Call(_)
        | RegistryError::Run(skillhost_core::RunError::Jail { .. } | skillhost_core::RunError::Unavailable { .. }) => "failed",
        _ => "refused",
    };
    span.record("otel.status_code", "ERROR");
    span.record("error.type", kind);
}
