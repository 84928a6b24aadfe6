//! The span of a `tools/call`: the root of skillhost's part of a trace (registry,
//! runtime and outbound requests are its children), whose parent is the client's W3C
//! trace context: the `traceparent` and `tracestate` HTTP headers, or for a client
//! without headers (stdio) the same keys in the request's `_meta`. Named and attributed
//! as OpenTelemetry's MCP conventions say (`tools/call NAME`, `mcp.method.name`,
//! `gen_ai.tool.name`, `mcp.session.id`).
//!
//! Nothing here exports anything: without a subscriber layer that sends spans on (`serve`
//! with `[telemetry]`) and the propagator it installs, the context read is empty and the
//! span costs what any `tracing` span costs.

use opentelemetry::propagation::Extractor;
use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The span of `params`'s call, its parent the trace context the client sent.
pub(super) fn call_span(params: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> tracing::Span {
    // What the agent sent is capped before it is kept: spans wait in the exporter's queue.
    let name = capped(&params.name);
    let span = tracing::info_span!(
        "tools/call",
        otel.name = format!("tools/call {name}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        mcp.session.id = tracing::field::Empty,
        jsonrpc.request.id = capped(&context.id.to_string()),
        error.type = tracing::field::Empty,
    );
    let parts = context.extensions.get::<http::request::Parts>();
    if let Some(session) = parts.and_then(|p| p.headers.get("mcp-session-id")).and_then(|v| v.to_str().ok()) {
        span.record("mcp.session.id", capped(session));
    }
    let parent = match parts.filter(|p| p.headers.contains_key("traceparent")) {
        Some(parts) => opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(&parts.headers))),
        None => opentelemetry::global::get_text_map_propagator(|p| p.extract(&Meta(&context.meta))),
    };
    // A span no layer records has nothing to set; an invalid context leaves a root span.
    let _ = span.set_parent(parent);
    span
}

/// Longest agent-given value a span keeps, in bytes (a tool name is at most 128).
const MAX_VALUE: usize = 128;

/// `value` cut to [`MAX_VALUE`] bytes, at a character boundary.
fn capped(value: &str) -> &str {
    let mut end = value.len().min(MAX_VALUE);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// Mark `span` failed when the call did: a JSON-RPC error, or a result the tool marked as
/// an error (a refusal or a limit included).
pub(super) fn record_outcome(span: &tracing::Span, outcome: &Result<CallToolResponse, rmcp::ErrorData>) {
    let failed = match outcome {
        Err(e) => Some(format!("{:?}", e.code)),
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => Some("tool_error".to_owned()),
        Ok(_) => None,
    };
    if let Some(kind) = failed {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", kind);
    }
}

/// W3C trace context in HTTP headers.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// W3C trace context in a request's `_meta` (SEP-414; string values only).
struct Meta<'a>(&'a rmcp::model::RequestMetaObject);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn agent_given_values_are_capped_at_a_character_boundary() {
        assert_eq!(super::capped("notes__read"), "notes__read");
        let long = "é".repeat(1000);
        let cut = super::capped(&long);
        assert!(cut.len() <= super::MAX_VALUE && cut.len() >= super::MAX_VALUE - 1 && cut.chars().all(|c| c == 'é'));
    }
}
