//! [`BwrapSkill`]: a loaded server skill and its lifecycle. The process starts on the
//! first call (the run that listed its tools at load held only a probe grant), serves
//! calls concurrently up to the skill's concurrency limit, stops after the idle
//! timeout, is restarted with backoff after a crash, is killed when a call overruns its
//! deadline, and dies with the skill (unload, hot reload: the registry drops the old
//! version once its last call returns). The call's envelope (deadline, permits, output
//! cap and schema, the `(host refused: …)` note) is core's (`skillhost_core::Envelope`).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use skillhost_core::{CallContext, CallError, CallFailure, Envelope, Grant, Invocation, InvokeError, Invoked, Output, Skill};

use crate::Launch;
use crate::server::{RequestError, Server};

/// A sandboxed stdio MCP server skill, ready to call.
pub struct BwrapSkill {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Its grant, tools, output schemas and concurrency permits.
    pub(crate) envelope: Envelope,
    /// The tools as the server listed them (its [`Skill::listing`]).
    pub(crate) listed: Vec<Value>,
    /// Tools whose structured output FastMCP wrapped as `{"result": …}`.
    pub(crate) wrapped: Vec<String>,
    pub(crate) launch: Launch,
    pub(crate) state: tokio::sync::Mutex<State>,
    pub(crate) generation: AtomicU64,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) server: Option<Arc<Server>>,
    /// Crashes since the last successful call.
    failures: u32,
    last_failure: Option<Instant>,
}

/// Delay before restarting after `failures` crashes in a row: none after the first,
/// then 100 ms doubling up to 30 s.
fn backoff(failures: u32) -> Duration {
    if failures <= 1 {
        Duration::ZERO
    } else {
        Duration::from_millis(100u64.saturating_mul(1 << (failures - 1).min(9))).min(Duration::from_secs(30))
    }
}

impl BwrapSkill {
    /// Whether a server process runs now (for tests and diagnostics).
    pub async fn running(&self) -> bool {
        self.inner.state.lock().await.server.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Stop the server if it runs; the next call starts a new one.
    pub async fn stop(&self) {
        let server = self.inner.state.lock().await.server.take();
        if let Some(server) = server {
            server.kill().await;
        }
    }
}

impl Inner {
    /// What it holds.
    pub(crate) fn grant(&self) -> &Grant {
        self.envelope.grant()
    }

    /// The running server, started (or restarted after the backoff) when needed.
    async fn server(self: &Arc<Self>, tool: &str) -> Result<Arc<Server>, CallError> {
        let mut state = self.state.lock().await;
        if let Some(server) = &state.server {
            if !server.is_closed() {
                return Ok(server.clone());
            }
            tracing::warn!(skill = %self.grant().skill, "server exited between calls: {}", server.exit_reason().await);
            state.server = None;
            state.failures += 1;
            state.last_failure = Some(Instant::now());
        }
        if let Some(at) = state.last_failure {
            let wait = backoff(state.failures).saturating_sub(at.elapsed());
            if !wait.is_zero() {
                tracing::info!(skill = %self.grant().skill, failures = state.failures, "restarting after {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let server = self.launch.start(self.grant(), true, generation).await.map_err(|message| {
            CallError::new(
                self.grant().skill.clone(),
                tool.to_owned(),
                CallFailure::Crashed { message: format!("the server did not start: {message}") },
            )
        })?;
        state.server = Some(server.clone());
        self.watch_idle(&server);
        Ok(server)
    }

    /// Stop the server after the idle timeout without calls.
    pub(crate) fn watch_idle(self: &Arc<Self>, server: &Arc<Server>) {
        let idle = self.launch.idle_timeout;
        let weak: Weak<Inner> = Arc::downgrade(self);
        let generation = server.generation;
        tokio::spawn(async move {
            let mut wait = idle;
            loop {
                tokio::time::sleep(wait).await;
                let Some(inner) = weak.upgrade() else { return };
                let mut state = inner.state.lock().await;
                let Some(server) = state.server.clone().filter(|s| s.generation == generation) else { return };
                match server.idle_for() {
                    Some(for_) if for_ >= idle => {
                        state.server = None;
                        drop(state);
                        tracing::debug!(skill = %inner.grant().skill, "stopping idle server");
                        server.kill().await;
                        return;
                    }
                    Some(for_) => wait = idle - for_,
                    None => wait = idle,
                }
            }
        });
    }

    /// Forget and kill `server` if it is still the current one.
    async fn discard(&self, server: &Arc<Server>, crashed: bool) {
        let mut state = self.state.lock().await;
        if state.server.as_ref().is_some_and(|s| s.generation == server.generation) {
            state.server = None;
        }
        if crashed {
            state.failures += 1;
            state.last_failure = Some(Instant::now());
        }
        drop(state);
        server.kill().await;
    }

    async fn succeeded(&self) {
        let mut state = self.state.lock().await;
        state.failures = 0;
        state.last_failure = None;
    }

    /// Turn a `tools/call` result into the tool's output value and the server's own
    /// content blocks, or its error.
    fn output(&self, tool: &str, mut result: Value) -> Result<Output, CallFailure> {
        let texts = || -> String {
            result["content"]
                .as_array()
                .map(|items| items.iter().filter_map(|i| i["text"].as_str()).collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
        };
        if result["isError"].as_bool() == Some(true) {
            let message = texts();
            let message = if message.is_empty() { "the tool reported an error".to_owned() } else { message };
            return Err(CallFailure::Failed { message });
        }
        let value = if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            match structured.get("result") {
                Some(inner) if self.wrapped.iter().any(|t| t == tool) => inner.clone(),
                _ => structured.clone(),
            }
        } else {
            let content = result["content"].as_array().cloned().unwrap_or_default();
            if content.iter().all(|i| i["type"] == "text") {
                let text = texts();
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            } else {
                Value::Array(content)
            }
        };
        let content = match result["content"].take() {
            Value::Array(content) => content,
            _ => Vec::new(),
        };
        Ok(Output::Value { value, content })
    }
}

/// Marks a call in flight on a server for the idle timer, until dropped.
struct InFlight(Arc<Server>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A request on a server until it is answered. Dropped before (the caller cancelled, or
/// the envelope's deadline passed), it tells the server to stop the request and, past
/// the deadline, kills the server: one that overran once cannot be trusted to be idle.
/// The next call starts afresh.
struct Pending {
    inner: Arc<Inner>,
    /// `None` once answered.
    server: Option<Arc<Server>>,
    request: Mutex<Option<rmcp::model::RequestId>>,
    tool: String,
    limit: Duration,
    deadline: Instant,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(server) = self.server.take() else { return };
        let request = self.request.lock().take();
        let overran = Instant::now() >= self.deadline;
        if overran {
            tracing::warn!(skill = %self.inner.grant().skill, tool = self.tool, "call overran its deadline of {:?}; killing the server", self.limit);
            // Forgotten at once, so that no later call is sent to it.
            if let Ok(mut state) = self.inner.state.try_lock()
                && state.server.as_ref().is_some_and(|s| s.generation == server.generation)
            {
                state.server = None;
            }
        }
        if request.is_none() && !overran {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            if let Some(id) = request {
                server.cancel(id, if overran { "deadline exceeded" } else { "cancelled by the caller" }).await;
            }
            if overran {
                inner.discard(&server, false).await;
            }
        });
    }
}

#[async_trait::async_trait]
impl Skill for BwrapSkill {
    fn envelope(&self) -> &Envelope {
        &self.inner.envelope
    }

    fn listing(&self) -> Option<Value> {
        Some(Value::Array(self.inner.listed.clone()))
    }

    /// Start the server when none runs. The deadline covers the request; a server that
    /// must start first gets its own bound (the runtime's start timeout) on top, since
    /// starting Python with its libraries can take longer than a tool may run.
    async fn ready(&self, tool: &str, limit: Duration, _cx: &CallContext) -> Result<(), CallFailure> {
        let start_bound = limit + self.inner.launch.start_timeout;
        match tokio::time::timeout(start_bound, self.inner.server(tool)).await {
            Ok(server) => server.map(drop).map_err(|e| e.failure),
            // The server did not start in time: its own slowness, whatever the caller's
            // deadline.
            Err(_) => Err(CallFailure::Timeout { limit: start_bound, skill_limit: None }),
        }
    }

    /// One `tools/call` on the running server (restarted, after its backoff, if it died
    /// since [`ready`](Skill::ready)); a server the kernel killed at its memory limit or
    /// that crashed is discarded.
    #[tracing::instrument(name = "sandbox.invoke", skip_all, fields(skillhost.skill = %self.grant().skill, gen_ai.tool.name = invocation.tool))]
    async fn invoke(&self, invocation: Invocation<'_>) -> Result<Invoked, InvokeError> {
        let Invocation { tool, input, limit, deadline, progress } = invocation;
        let inner = &self.inner;
        let Value::Object(arguments) = input else {
            return Err(CallFailure::InvalidInput { message: "the input must be a JSON object".into() }.into());
        };
        let server = inner.server(tool).await.map_err(|e| e.failure)?;
        let oom_before = server.oom_kills();
        server.begin();
        let _in_flight = InFlight(server.clone());
        // Its egress proxy names this call's tool in the audit rows and keeps what it
        // refused while the call ran.
        let proxy_call = server.calls.as_ref().map(|calls| calls.begin(tool));
        let mut pending = Pending {
            inner: inner.clone(),
            server: Some(server.clone()),
            request: Mutex::default(),
            tool: tool.to_owned(),
            limit,
            deadline,
        };
        let result = server.call(tool, arguments, progress, &pending.request).await;
        pending.server = None;
        if server.oom_kills() > oom_before {
            // The kernel killed a process of the sandbox at its memory limit: whatever the
            // server answered, its state is unknown. The next call starts afresh.
            tracing::warn!(skill = %inner.grant().skill, tool, "the sandbox hit its memory limit; killing the server");
            inner.discard(&server, true).await;
            return Err(CallFailure::MemoryLimit { limit: inner.grant().limits.memory }.into());
        }
        // What the proxy refused explains the tool's answer best; the server's own text
        // rarely says which rule to add.
        let denials = proxy_call.map(|call| call.refusals()).unwrap_or_default();
        let failure = match result {
            Ok(result) => {
                inner.succeeded().await;
                match inner.output(tool, result) {
                    Ok(output) => return Ok(Invoked { output, denials }),
                    Err(failure) => failure,
                }
            }
            Err(RequestError::Closed(reason)) => {
                let message = format!("{} ({reason})", server.exit_reason().await);
                inner.discard(&server, true).await;
                CallFailure::Crashed { message }
            }
            Err(RequestError::Refused(message)) => CallFailure::Failed { message },
            Err(RequestError::Protocol { code: -32602, message }) => CallFailure::InvalidInput { message },
            Err(RequestError::Protocol { message, .. }) => CallFailure::Failed { message },
        };
        Err(InvokeError { failure, denials })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::ZERO, "the first crash restarts at once");
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert!(backoff(3) > backoff(2));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }
}
