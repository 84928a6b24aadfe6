//! The envelope around every tool call, written once for all runtimes.
//!
//! A runtime's [`Skill`] holds an [`Envelope`] (its grant, its checked tools, their
//! compiled output schemas and its concurrency permits) and implements one required
//! method, [`Skill::invoke`]: run one tool call in its runtime and return the raw outcome
//! ([`Invoked`]: the output as JSON text or as a value with MCP content blocks, and what
//! the host's egress gate refused). A runtime that must get ready before its clock starts
//! (compile a component, start a server) also implements [`Skill::ready`]. Everything
//! else a call is, [`Skill::call`] does here, the same way for every runtime, in order:
//!
//! 1. an unknown tool is refused ([`CallFailure::UnknownTool`]);
//! 2. the deadline is the skill's `[limits] timeout`, or the caller's
//!    [`CallContext::timeout`] when shorter;
//! 3. [`Skill::ready`] runs, bounded by the runtime itself (a server's start has its own
//!    bound, since starting one can take longer than a tool may run);
//! 4. on the clock: a permit of the skill's `[limits] concurrency` (waiting for one counts
//!    against the deadline), then [`Skill::invoke`]. At the deadline the invocation is
//!    dropped ([`CallError::timeout`]): a runtime with something to clean up (a server
//!    that overran) does it when its invocation is dropped;
//! 5. the output is held to `[limits] output` ([`CallFailure::OutputLimit`]), parsed when
//!    it is JSON text, and checked against the tool's output schema
//!    ([`CallFailure::BadOutput`]);
//! 6. what the egress gate refused during the call, the likeliest reason a tool failed,
//!    is added as `(host refused: …)`: to the message of a `Failed` or `Denied` error,
//!    and as a last text block of an output that has content blocks.
//!
//! The caller's [`CallContext::cancel`] stops the call at any step: the invocation is
//! dropped and the call is [`CallFailure::Cancelled`].

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::grant::Grant;
use crate::runtime::{CallContext, CallError, CallFailure, LoadError, ProgressSink, Skill, ToolOutput};
use crate::tool::{MAX_TOOLS, OutputSchemas, ToolSpec};

/// What every call of one skill is held to: its grant, its tools and their compiled
/// output schemas, and the permits of its `[limits] concurrency`.
pub struct Envelope {
    grant: Grant,
    tools: Vec<ToolSpec>,
    outputs: OutputSchemas,
    concurrency: Semaphore,
}

impl std::fmt::Debug for Envelope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envelope").field("skill", &self.grant.skill).field("tools", &self.tools.len()).finish()
    }
}

impl Envelope {
    /// The envelope of a skill holding `grant`, with no tools yet
    /// ([`set_tools`](Self::set_tools)).
    pub fn new(grant: Grant) -> Self {
        let concurrency = Semaphore::new(grant.limits.concurrency as usize);
        Self { grant, tools: Vec::new(), outputs: OutputSchemas::default(), concurrency }
    }

    /// The envelope of a skill holding `grant` and offering `tools`
    /// ([`set_tools`](Self::set_tools)).
    pub fn with_tools(grant: Grant, tools: Vec<ToolSpec>) -> Result<Self, LoadError> {
        let mut envelope = Self::new(grant);
        envelope.set_tools(tools)?;
        Ok(envelope)
    }

    /// Make `tools` the skill's tools, as its runtime read them: at most
    /// [`MAX_TOOLS`], each name once, within the caps over a whole skill, and every
    /// output schema a usable JSON Schema (compiled here, once per load). An error names
    /// the skill and what is wrong.
    pub fn set_tools(&mut self, tools: Vec<ToolSpec>) -> Result<(), LoadError> {
        let bad = |reason: String| LoadError::Tools { skill: self.grant.skill.clone(), reason };
        if tools.len() > MAX_TOOLS {
            return Err(bad(format!("it offers {} tools, more than {MAX_TOOLS}", tools.len())));
        }
        let mut seen = HashSet::new();
        if let Some(twice) = tools.iter().find(|t| !seen.insert(t.name.as_str())) {
            return Err(bad(format!("tool `{}` is defined twice", twice.name)));
        }
        self.outputs = OutputSchemas::new(&tools).map_err(|e| bad(e.to_string()))?;
        self.tools = tools;
        Ok(())
    }

    /// What the skill holds.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The tools it offers.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The position of `tool` among [`tools`](Self::tools).
    pub fn tool_index(&self, tool: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.name == tool)
    }

    /// [`CallFailure::UnknownTool`], listing the tools it has.
    pub fn unknown_tool(&self) -> CallFailure {
        CallFailure::UnknownTool { available: self.tools.iter().map(|t| t.name.clone()).collect() }
    }

    /// Run `tool` of `skill` with `input` under `cx`: the steps of the module doc.
    pub(crate) async fn call<S: Skill + ?Sized>(
        &self,
        skill: &S,
        tool: &str,
        input: Value,
        cx: CallContext,
    ) -> Result<ToolOutput, CallError> {
        let started = Instant::now();
        let error = |failure| CallError::new(self.grant.skill.clone(), tool, failure);
        if self.tool_index(tool).is_none() {
            return Err(error(self.unknown_tool()));
        }
        let own = self.grant.limits.timeout;
        let limit = cx.timeout.map_or(own, |t| t.min(own));
        let run = async {
            skill.ready(tool, limit, &cx).await?;
            let deadline = tokio::time::Instant::now() + limit;
            let on_clock = async {
                let _permit = self.concurrency.acquire().await.map_err(|e| CallFailure::Host { message: e.to_string() })?;
                let invocation = Invocation { tool, input, limit, deadline: deadline.into_std(), progress: cx.progress.clone() };
                skill.invoke(invocation).await
            };
            tokio::time::timeout_at(deadline, on_clock)
                .await
                .unwrap_or_else(|_| Err(CallError::timeout(self.grant.skill.clone(), tool, limit, own).failure.into()))
        };
        let invoked = tokio::select! {
            invoked = run => invoked,
            () = cx.cancel.cancelled() => return Err(error(CallFailure::Cancelled)),
        };
        let Invoked { output, denials } = invoked.map_err(|InvokeError { failure, denials }| error(with_note(failure, &denials)))?;
        let cap = self.grant.limits.output;
        let (value, content, bytes) = match output {
            Output::Json(text) => {
                if text.len() as u64 > cap {
                    return Err(error(CallFailure::OutputLimit { size: text.len() as u64, limit: cap }));
                }
                let value = serde_json::from_str(&text)
                    .map_err(|e| error(CallFailure::BadOutput { message: format!("the output is not JSON: {e}") }))?;
                (value, None, text.len())
            }
            Output::Value { value, content } => {
                // Both forms leave the host (the value as structured content, the blocks
                // as they came), so the cap holds for each.
                let bytes = json_len(&value).max(json_len(&content));
                if bytes as u64 > cap {
                    return Err(error(CallFailure::OutputLimit { size: bytes as u64, limit: cap }));
                }
                (value, Some(content), bytes)
            }
        };
        self.outputs.check(tool, &value).map_err(|e| error(CallFailure::BadOutput { message: e.to_string() }))?;
        let content = content.map(|mut content| {
            if let Some(note) = note(&denials) {
                content.push(serde_json::json!({"type": "text", "text": note}));
            }
            content
        });
        Ok(ToolOutput { value, content, bytes, elapsed: started.elapsed() })
    }
}

/// One tool call, as the envelope hands it to [`Skill::invoke`]: the tool is one of the
/// skill's and a permit of its concurrency is held.
pub struct Invocation<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its input, unchecked (the runtime or the tool checks it).
    pub input: Value,
    /// The deadline it runs under, as a duration (for messages and for a runtime's own
    /// timer, such as wasm's epoch deadline).
    pub limit: Duration,
    /// When the envelope drops the invocation if it has not returned.
    pub deadline: Instant,
    /// Where its progress goes.
    pub progress: Option<ProgressSink>,
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// JSON text (a wasm skill's answer): parsed by the envelope, within the output cap.
    Json(String),
    /// A value and the MCP content blocks it came with (a server skill's answer).
    Value {
        /// The structured output.
        value: Value,
        /// The content blocks, as the server sent them.
        content: Vec<Value>,
    },
}

/// The raw outcome of an invocation that produced an output.
#[derive(Debug, Clone, PartialEq)]
pub struct Invoked {
    /// What the tool produced.
    pub output: Output,
    /// What the host's egress gate refused during the call, one line each.
    pub denials: Vec<String>,
}

/// Why an invocation produced no output, with what the egress gate refused meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct InvokeError {
    /// What went wrong.
    pub failure: CallFailure,
    /// What the host's egress gate refused during the call, one line each.
    pub denials: Vec<String>,
}

impl From<CallFailure> for InvokeError {
    fn from(failure: CallFailure) -> Self {
        Self { failure, denials: Vec::new() }
    }
}

/// `(host refused: …)` for `denials`, when there are any.
fn note(denials: &[String]) -> Option<String> {
    (!denials.is_empty()).then(|| format!("(host refused: {})", denials.join("; ")))
}

/// `failure` with the denial note added to its message, when it is one the tool reported
/// (`Failed`, `Denied`): what the host refused explains the tool's error best.
fn with_note(mut failure: CallFailure, denials: &[String]) -> CallFailure {
    if let (CallFailure::Failed { message } | CallFailure::Denied { message }, Some(note)) = (&mut failure, note(denials)) {
        message.push(' ');
        message.push_str(&note);
    }
    failure
}

/// Size of `value` as JSON text, in bytes.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_string(value).map_or(0, |t| t.len())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::{Annotations, Limits, SkillName};

    /// A skill whose tools do what their names say, in no runtime at all; it counts its
    /// invocations, how many run at once, and those dropped before they returned.
    struct Fake {
        envelope: Envelope,
        invoked: AtomicUsize,
        running: AtomicUsize,
        most_at_once: AtomicUsize,
        dropped: Arc<AtomicUsize>,
        /// How long [`Skill::ready`] takes.
        ready: Duration,
    }

    /// Counts an invocation dropped before it returned.
    struct DropMark(Option<Arc<AtomicUsize>>);

    impl Drop for DropMark {
        fn drop(&mut self) {
            if let Some(dropped) = self.0.take() {
                dropped.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    const DENIALS: [&str; 2] = ["GET https://a.example/: not in [network] allow", "GET https://b.example/: not in [network] allow"];

    #[async_trait::async_trait]
    impl Skill for Fake {
        fn envelope(&self) -> &Envelope {
            &self.envelope
        }

        async fn ready(&self, _tool: &str, _limit: Duration, _cx: &CallContext) -> Result<(), CallFailure> {
            tokio::time::sleep(self.ready).await;
            Ok(())
        }

        async fn invoke(&self, invocation: Invocation<'_>) -> Result<Invoked, InvokeError> {
            self.invoked.fetch_add(1, Ordering::SeqCst);
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            let mut mark = DropMark(Some(self.dropped.clone()));
            let denials: Vec<String> = DENIALS.iter().map(ToString::to_string).collect();
            let input = invocation.input;
            let outcome = match invocation.tool {
                "echo" => Ok(Invoked { output: Output::Json(input.to_string()), denials: Vec::new() }),
                "text" => Ok(Invoked { output: Output::Json(input["text"].as_str().unwrap_or_default().to_owned()), denials: Vec::new() }),
                "sleep" => {
                    tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap_or(0))).await;
                    Ok(Invoked { output: Output::Json("{}".into()), denials: Vec::new() })
                }
                "blocks" => Ok(Invoked {
                    output: Output::Value { value: input.clone(), content: vec![json!({"type": "text", "text": input.to_string()})] },
                    denials,
                }),
                "fail" => Err(InvokeError { failure: CallFailure::Failed { message: "boom".into() }, denials }),
                "deny" => Err(InvokeError { failure: CallFailure::Denied { message: "no".into() }, denials }),
                "crash" => Err(InvokeError { failure: CallFailure::Crashed { message: "trap".into() }, denials }),
                other => panic!("the fake has no tool `{other}`"),
            };
            mark.0 = None;
            self.running.fetch_sub(1, Ordering::SeqCst);
            outcome
        }
    }

    fn tool(name: &str, output: Option<&str>) -> ToolSpec {
        ToolSpec::from_parts(name.into(), format!("{name} tool"), r#"{"type": "object"}"#, output, Annotations::default(), &[]).unwrap()
    }

    fn fake(limits: Limits) -> Fake {
        let grant = Grant::pure(SkillName::new("fake").unwrap(), limits);
        let output = r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#;
        let mut tools: Vec<ToolSpec> = ["echo", "sleep", "blocks", "fail", "deny", "crash"].iter().map(|t| tool(t, None)).collect();
        tools.push(tool("text", Some(output)));
        Fake {
            envelope: Envelope::with_tools(grant, tools).unwrap(),
            invoked: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            most_at_once: AtomicUsize::new(0),
            dropped: Arc::default(),
            ready: Duration::ZERO,
        }
    }

    fn limits(timeout: Duration, concurrency: u32, output: u64) -> Limits {
        Limits { timeout, concurrency, output, ..Limits::DEFAULT }
    }

    async fn call(skill: &Fake, tool: &str, input: Value) -> Result<ToolOutput, CallError> {
        skill.call(tool, input, CallContext::default()).await
    }

    #[tokio::test]
    async fn an_unknown_tool_is_refused_before_the_runtime_runs() {
        let skill = fake(Limits::DEFAULT);
        let err = call(&skill, "nope", json!({})).await.unwrap_err();
        match &err.failure {
            CallFailure::UnknownTool { available } => assert!(available.iter().any(|t| t == "echo") && available.len() == 7, "{err}"),
            other => panic!("expected an unknown tool, got {other:?}"),
        }
        assert_eq!((err.skill.as_str(), err.tool.as_str()), ("fake", "nope"));
        assert_eq!(skill.invoked.load(Ordering::SeqCst), 0, "the runtime ran an unknown tool");
    }

    #[tokio::test]
    async fn the_deadline_is_the_skills_own_limit() {
        let skill = fake(limits(Duration::from_millis(100), 4, 1 << 20));
        let started = Instant::now();
        let err = call(&skill, "sleep", json!({"ms": 10_000})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Timeout { limit: Duration::from_millis(100), skill_limit: None });
        assert!(started.elapsed() < Duration::from_secs(5), "the call ran past its deadline: {:?}", started.elapsed());
        assert_eq!(skill.dropped.load(Ordering::SeqCst), 1, "the invocation was not dropped at the deadline");
        // A call within the deadline returns.
        assert_eq!(call(&skill, "sleep", json!({"ms": 1})).await.unwrap().value, json!({}));
    }

    #[tokio::test]
    async fn a_shorter_caller_deadline_wins_and_a_longer_one_never_lengthens_the_skills() {
        let skill = fake(limits(Duration::from_secs(10), 4, 1 << 20));
        let cx = CallContext { timeout: Some(Duration::from_millis(50)), ..CallContext::default() };
        let err = skill.call("sleep", json!({"ms": 10_000}), cx).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Timeout { limit: Duration::from_millis(50), skill_limit: Some(Duration::from_secs(10)) });

        let skill = fake(limits(Duration::from_millis(50), 4, 1 << 20));
        let cx = CallContext { timeout: Some(Duration::from_secs(10)), ..CallContext::default() };
        let err = skill.call("sleep", json!({"ms": 10_000}), cx).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Timeout { limit: Duration::from_millis(50), skill_limit: None });
    }

    #[tokio::test]
    async fn readiness_is_not_on_the_clock() {
        let mut skill = fake(limits(Duration::from_millis(100), 4, 1 << 20));
        skill.ready = Duration::from_millis(300);
        assert_eq!(call(&skill, "sleep", json!({"ms": 10})).await.unwrap().value, json!({}));
    }

    #[tokio::test]
    async fn cancelling_stops_the_call() {
        let skill = fake(limits(Duration::from_secs(10), 4, 1 << 20));
        let cx = CallContext::default();
        let cancel = cx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let err = skill.call("sleep", json!({"ms": 10_000}), cx).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert_eq!(skill.dropped.load(Ordering::SeqCst), 1, "the cancelled invocation was not dropped");
    }

    #[tokio::test]
    async fn the_concurrency_limit_serialises_calls_and_waiting_counts_against_the_deadline() {
        for (concurrency, expected) in [(1, 1), (2, 2)] {
            let skill = fake(limits(Duration::from_secs(10), concurrency, 1 << 20));
            let (a, b) = tokio::join!(call(&skill, "sleep", json!({"ms": 200})), call(&skill, "sleep", json!({"ms": 200})));
            a.unwrap();
            b.unwrap();
            assert_eq!(skill.most_at_once.load(Ordering::SeqCst), expected, "concurrency {concurrency}");
        }
        // With one permit, a call waiting behind a long one runs out of its own deadline.
        let skill = fake(limits(Duration::from_secs(10), 1, 1 << 20));
        let short = CallContext { timeout: Some(Duration::from_millis(100)), ..CallContext::default() };
        let (long, waiting) = tokio::join!(call(&skill, "sleep", json!({"ms": 400})), async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            skill.call("sleep", json!({"ms": 1}), short).await
        });
        long.unwrap();
        assert!(matches!(waiting.unwrap_err().failure, CallFailure::Timeout { .. }));
        assert_eq!(skill.invoked.load(Ordering::SeqCst), 1, "the waiting call ran");
    }

    #[tokio::test]
    async fn the_output_cap_holds_for_text_and_for_content_blocks() {
        let skill = fake(limits(Duration::from_secs(10), 4, 64));
        assert!(call(&skill, "echo", json!({"a": "short"})).await.is_ok());
        let big = "x".repeat(100);
        let err = call(&skill, "echo", json!({"a": big})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::OutputLimit { size: json!({"a": big}).to_string().len() as u64, limit: 64 });
        // Over the cap is reported as such even when the text is not JSON either.
        let err = call(&skill, "text", json!({"text": big})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::OutputLimit { size: 100, limit: 64 });
        // A value with content blocks: both forms are held to the cap.
        let err = call(&skill, "blocks", json!({"a": "y".repeat(60)})).await.unwrap_err();
        assert!(matches!(err.failure, CallFailure::OutputLimit { limit: 64, .. }), "{err}");
    }

    #[tokio::test]
    async fn outputs_are_parsed_and_checked_against_the_tools_schema() {
        let skill = fake(Limits::DEFAULT);
        let out = call(&skill, "text", json!({"text": r#"{"n": 3}"#})).await.unwrap();
        assert_eq!((out.value, out.content, out.bytes), (json!({"n": 3}), None, 8));
        for (text, expected) in
            [(r#"{"n": "three"}"#, "output/n does not match"), (r#"{}"#, "the output does not match"), ("n=3", "not JSON")]
        {
            let err = call(&skill, "text", json!({"text": text})).await.unwrap_err();
            match &err.failure {
                CallFailure::BadOutput { message } => assert!(message.contains(expected), "{text}: {message}"),
                other => panic!("{text}: expected a bad output, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn what_the_host_refused_is_noted_on_failures_and_content() {
        let skill = fake(Limits::DEFAULT);
        let note = format!("(host refused: {})", DENIALS.join("; "));
        let err = call(&skill, "fail", json!({})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Failed { message: format!("boom {note}") });
        let err = call(&skill, "deny", json!({})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Denied { message: format!("no {note}") });
        // A crash is not the tool's answer: no note.
        let err = call(&skill, "crash", json!({})).await.unwrap_err();
        assert_eq!(err.failure, CallFailure::Crashed { message: "trap".into() });
        // An output with content blocks ends with the note as a text block of its own.
        let out = call(&skill, "blocks", json!({"a": 1})).await.unwrap();
        let content = out.content.unwrap();
        assert_eq!(content.len(), 2, "{content:?}");
        assert_eq!(content[1], json!({"type": "text", "text": note}));
        assert_eq!(out.value, json!({"a": 1}));
    }

    #[test]
    fn tools_are_checked_once_for_every_runtime() {
        let grant = || Grant::pure(SkillName::new("fake").unwrap(), Limits::DEFAULT);
        let err = Envelope::with_tools(grant(), vec![tool("echo", None), tool("echo", None)]).unwrap_err();
        assert!(err.to_string().contains("tool `echo` is defined twice"), "{err}");
        let many = (0..=MAX_TOOLS).map(|i| tool(&format!("t{i}"), None)).collect();
        let err = Envelope::with_tools(grant(), many).unwrap_err();
        assert!(err.to_string().contains(&format!("more than {MAX_TOOLS}")), "{err}");
        let err = Envelope::with_tools(grant(), vec![tool("echo", Some(r#"{"type": 7}"#))]).unwrap_err();
        assert!(err.to_string().contains("output schema is not a usable JSON Schema"), "{err}");
    }
}
