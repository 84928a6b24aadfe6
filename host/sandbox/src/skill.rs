//! [`BwrapSkill`]: a loaded server skill and its lifecycle. The process starts on the
//! first call (the run that listed its tools at load held only a probe grant), serves
//! calls concurrently up to the skill's concurrency limit, stops after the idle
//! timeout, is restarted with backoff after a crash, is killed when a call overruns its
//! deadline, and dies with the skill (unload, hot reload: the registry drops the old
//! version once its last call returns).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use skillhost_core::{CallContext, CallError, CallFailure, Grant, OutputSchemas, Skill, SkillName, ToolOutput, ToolSpec};
use tokio::sync::Semaphore;

use crate::Launch;
use crate::server::{RequestError, Server};

/// A sandboxed stdio MCP server skill, ready to call.
pub struct BwrapSkill {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) grant: Grant,
    pub(crate) tools: Vec<ToolSpec>,
    /// The tools as the server listed them (its [`Skill::listing`]).
    pub(crate) listed: Vec<Value>,
    /// Tools whose structured output FastMCP wrapped as `{"result": …}`.
    pub(crate) wrapped: Vec<String>,
    /// The tools' output schemas, compiled: every output is checked against them.
    pub(crate) outputs: OutputSchemas,
    pub(crate) launch: Launch,
    pub(crate) state: tokio::sync::Mutex<State>,
    pub(crate) concurrency: Semaphore,
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
    /// The running server, started (or restarted after the backoff) when needed.
    async fn server(self: &Arc<Self>, tool: &str) -> Result<Arc<Server>, CallError> {
        let mut state = self.state.lock().await;
        if let Some(server) = &state.server {
            if !server.is_closed() {
                return Ok(server.clone());
            }
            tracing::warn!(skill = %self.grant.skill, "server exited between calls: {}", server.exit_reason().await);
            state.server = None;
            state.failures += 1;
            state.last_failure = Some(Instant::now());
        }
        if let Some(at) = state.last_failure {
            let wait = backoff(state.failures).saturating_sub(at.elapsed());
            if !wait.is_zero() {
                tracing::info!(skill = %self.grant.skill, failures = state.failures, "restarting after {wait:?}");
                tokio::time::sleep(wait).await;
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let server = self.launch.start(&self.grant, true, generation).await.map_err(|message| {
            CallError::new(
                self.grant.skill.clone(),
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
                        tracing::debug!(skill = %inner.grant.skill, "stopping idle server");
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
    /// content blocks, or its error; an output that breaks the tool's declared output
    /// schema is an error, not an answer.
    fn output(&self, tool: &str, mut result: Value) -> Result<(Value, Vec<Value>), CallError> {
        let skill = self.grant.skill.clone();
        let texts = || -> String {
            result["content"]
                .as_array()
                .map(|items| items.iter().filter_map(|i| i["text"].as_str()).collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
        };
        if result["isError"].as_bool() == Some(true) {
            let message = texts();
            let message = if message.is_empty() { "the tool reported an error".to_owned() } else { message };
            return Err(CallError::new(skill, tool.to_owned(), CallFailure::Failed { message }));
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
        self.outputs.check(tool, &value).map_err(|message| CallError::new(skill, tool.to_owned(), CallFailure::BadOutput { message }))?;
        let content = match result["content"].take() {
            Value::Array(content) => content,
            _ => Vec::new(),
        };
        Ok((value, content))
    }
}

/// Size of `value` as JSON text, in bytes.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_string(value).map_or(0, |t| t.len())
}

/// Marks a call in flight on a server for the idle timer, until dropped.
struct InFlight(Arc<Server>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// What a call in progress got as far as, for its timeout or cancellation.
#[derive(Default)]
struct Progressed {
    server: Mutex<Option<Arc<Server>>>,
    request: Mutex<Option<rmcp::model::RequestId>>,
}

#[async_trait::async_trait]
impl Skill for BwrapSkill {
    fn name(&self) -> &SkillName {
        &self.inner.grant.skill
    }

    fn tools(&self) -> &[ToolSpec] {
        &self.inner.tools
    }

    fn grant(&self) -> &Grant {
        &self.inner.grant
    }

    fn listing(&self) -> Option<Value> {
        Some(Value::Array(self.inner.listed.clone()))
    }

    async fn call(&self, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, CallError> {
        let started = Instant::now();
        let inner = &self.inner;
        let skill = &inner.grant.skill;
        let fail = |failure| CallError::new(skill.clone(), tool, failure);
        if !inner.tools.iter().any(|t| t.name == tool) {
            return Err(fail(CallFailure::UnknownTool { available: inner.tools.iter().map(|t| t.name.clone()).collect() }));
        }
        let Value::Object(arguments) = input else {
            return Err(fail(CallFailure::InvalidInput { message: "the input must be a JSON object".into() }));
        };
        let limit = cx.timeout.map_or(inner.grant.limits.timeout, |t| t.min(inner.grant.limits.timeout));
        let progressed = Progressed::default();
        // The deadline covers the request; a server that must start first gets its own
        // bound (the runtime's start timeout) on top, since starting Python with its
        // libraries can take longer than a tool may run.
        let start_bound = limit + inner.launch.start_timeout;
        let ready = async {
            let permit = inner
                .concurrency
                .acquire()
                .await
                .map_err(|e| CallError::new(skill.clone(), tool.to_owned(), CallFailure::Host { message: e.to_string() }))?;
            Ok::<_, CallError>((permit, inner.server(tool).await?))
        };
        let (_permit, server) = tokio::select! {
            result = tokio::time::timeout(start_bound, ready) => match result {
                Ok(ready) => ready?,
                // The server did not start in time: its own slowness, whatever the
                // caller's deadline.
                Err(_) => return Err(fail(CallFailure::Timeout { limit: start_bound, skill_limit: None })),
            },
            () = cx.cancel.cancelled() => return Err(fail(CallFailure::Cancelled)),
        };
        *progressed.server.lock() = Some(server.clone());
        let oom_before = server.oom_kills();
        server.begin();
        let _in_flight = InFlight(server.clone());
        // Its egress proxy names this call's tool in the audit rows and keeps what it
        // refused while the call ran.
        let proxy_call = server.calls.as_ref().map(|calls| calls.begin(tool));
        let work = server.call(tool, arguments, cx.progress.clone(), &progressed.request);
        let outcome = tokio::select! {
            result = tokio::time::timeout(limit, work) => result,
            () = cx.cancel.cancelled() => {
                let request = progressed.request.lock().clone();
                if let Some(id) = request {
                    server.cancel(id, "cancelled by the caller").await;
                }
                return Err(fail(CallFailure::Cancelled));
            }
        };
        if server.oom_kills() > oom_before {
            // The kernel killed a process of the sandbox at its memory limit: whatever the
            // server answered, its state is unknown. The next call starts afresh.
            tracing::warn!(skill = %skill, tool, "the sandbox hit its memory limit; killing the server");
            inner.discard(&server, true).await;
            return Err(fail(CallFailure::MemoryLimit { limit: inner.grant.limits.memory }));
        }
        let result = match outcome {
            Ok(result) => result,
            Err(_) => {
                // Past the deadline: ask it to stop, then kill the sandbox: a server that
                // overran once cannot be trusted to be idle. The next call starts afresh.
                let request = progressed.request.lock().clone();
                if let Some(id) = request {
                    server.cancel(id, "deadline exceeded").await;
                }
                tracing::warn!(skill = %skill, tool, "call overran its deadline of {limit:?}; killing the server");
                inner.discard(&server, false).await;
                return Err(CallError::timeout(skill.clone(), tool, limit, inner.grant.limits.timeout));
            }
        };
        // What the proxy refused explains the tool's answer best; the server's own text
        // rarely says which rule to add. Worded as for a wasm skill.
        let refusals = proxy_call.map(|call| call.refusals()).unwrap_or_default();
        let note = (!refusals.is_empty()).then(|| format!("(host refused: {})", refusals.join("; ")));
        let explain = |mut error: CallError| {
            if let (CallFailure::Failed { message }, Some(note)) = (&mut error.failure, &note) {
                *message = format!("{message} {note}");
            }
            error
        };
        let value = match result {
            Ok(value) => value,
            Err(RequestError::Closed(reason)) => {
                let message = format!("{} ({reason})", server.exit_reason().await);
                inner.discard(&server, true).await;
                return Err(fail(CallFailure::Crashed { message }));
            }
            Err(RequestError::Refused(message)) => return Err(explain(fail(CallFailure::Failed { message }))),
            Err(RequestError::Protocol { code, message }) => {
                return Err(if code == -32602 {
                    fail(CallFailure::InvalidInput { message })
                } else {
                    explain(fail(CallFailure::Failed { message }))
                });
            }
        };
        inner.succeeded().await;
        let (value, mut content) = inner.output(tool, value).map_err(explain)?;
        // Both forms leave the host (the value as structured content, the blocks as they
        // came), so the cap holds for each.
        let bytes = json_len(&value).max(json_len(&content));
        if bytes as u64 > inner.grant.limits.output {
            return Err(fail(CallFailure::OutputLimit { size: bytes as u64, limit: inner.grant.limits.output }));
        }
        if let Some(note) = note {
            content.push(serde_json::json!({"type": "text", "text": note}));
        }
        Ok(ToolOutput { value, content: Some(content), bytes, elapsed: started.elapsed() })
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
