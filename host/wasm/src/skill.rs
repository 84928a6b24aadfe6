//! [`WasmSkill`]: a loaded component and the call path. Every call gets a fresh
//! [`Store`] and instance (nothing survives between calls), built from the skill's
//! grant, and runs under its memory cap and an epoch deadline; the call's envelope
//! (`skillhost_core::Envelope`: deadline, permits, output cap and schema) is core's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillhost_core::{
    CallContext, CallError, CallFailure, Envelope, Grant, Invocation, InvokeError, Invoked, LoadError, Output, ProgressSink, Skill,
};
use skillhost_package::{Reflection, RefusedFunction};
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::Inner;
use crate::bindings::{SkillPre, types};
use crate::cache::CacheOutcome;
use crate::cache::ComponentBytes;
use crate::generic::GenericPre;
use crate::http::SkillNet;
use crate::state::CallState;

/// A WebAssembly skill, ready to call.
pub struct WasmSkill {
    /// Its grant, tools, output schemas and concurrency permits.
    pub(crate) envelope: Envelope,
    pub(crate) net: SkillNet,
    /// Where the component was read from, for messages.
    pub(crate) path: PathBuf,
    /// Whether it has a skill.toml, for the message of a `wasi:http` import it may not use.
    pub(crate) manifest: skillhost_core::ManifestHint,
    /// The component's bytes, compiled when first needed ([`code`](Self::code)); let go
    /// once the compiled cache holds its code.
    pub(crate) bytes: Arc<ComponentBytes>,
    /// For a component not of our world, what its WIT says: its tools and how to call
    /// them. `None` for our own skills.
    pub(crate) reflection: Option<Reflection>,
    /// The compiled and linked component calls run, and the background compile that
    /// makes Cranelift's code of it.
    pub(crate) compiled: Arc<crate::Compiled>,
    pub(crate) runtime: Arc<Inner>,
}

/// A skill's component compiled for one engine, linked and ready to instantiate.
pub(crate) struct Prepared {
    pub(crate) code: Code,
    /// The engine it was compiled for: its stores are made from it.
    pub(crate) engine: wasmtime::Engine,
    pub(crate) outcome: CacheOutcome,
}

/// What a skill's component is.
pub(crate) enum Code {
    /// It exports our world: tools come from its `tools()`, calls go to its `call`.
    Skill(SkillPre<CallState>),
    /// Any other component: its exported functions are the tools (`generic.rs`).
    Generic(GenericPre),
}

impl WasmSkill {
    /// For a generic component (one that does not export our world), the exported
    /// functions that are not tools and why; empty for our own skills.
    pub fn refused_functions(&self) -> &[RefusedFunction] {
        self.reflection.as_ref().map_or(&[], |r| &r.refused)
    }

    /// The compiled and linked component: compiled (or taken from the compiled cache)
    /// by the first caller (or by the load, when it had to ask the component for its
    /// tools), shared by every later one, until Cranelift's code replaces a baseline
    /// compiler's.
    pub(crate) async fn code(&self) -> Result<Arc<Prepared>, LoadError> {
        self.code_for(crate::Purpose::Call).await
    }

    /// [`code`](Self::code), prepared for `purpose` if it is not yet.
    pub(crate) async fn code_for(&self, purpose: crate::Purpose) -> Result<Arc<Prepared>, LoadError> {
        if purpose == crate::Purpose::Call {
            self.compiled.called.store(true, std::sync::atomic::Ordering::Release);
        }
        if let Some(code) = self.ready_code(purpose) {
            return Ok(code);
        }
        let _turn = self.compiled.preparing.lock().await;
        if let Some(code) = self.ready_code(purpose) {
            return Ok(code);
        }
        let prepared = crate::WasmRuntime::prepare(&self.runtime, self, purpose).await?;
        Ok(self.compiled.first(prepared))
    }

    /// The code prepared already, if any; a call of Winch's code (the listing's) queues
    /// Cranelift's compile, once.
    fn ready_code(&self, purpose: crate::Purpose) -> Option<Arc<Prepared>> {
        let code = self.compiled.get()?;
        if purpose == crate::Purpose::Call && code.outcome == CacheOutcome::Baseline {
            crate::WasmRuntime::optimize_once(&self.runtime, self);
        }
        Some(code)
    }

    /// [`code`](Self::code), for a call.
    async fn code_for_call(&self) -> Result<Arc<Prepared>, CallFailure> {
        self.code().await.map_err(|e| CallFailure::Host { message: format!("its component could not be prepared: {e}") })
    }

    /// Whether its component's bytes are held in memory: until the compiled cache holds
    /// its code (a skill nobody calls then costs its hash, not its size).
    pub fn holds_component_bytes(&self) -> bool {
        self.bytes.is_held()
    }

    /// What it holds.
    pub(crate) fn grant(&self) -> &Grant {
        self.envelope.grant()
    }

    /// Run `f` in a fresh store of `engine` (the one its code was compiled for) holding
    /// `grant` (the skill's own, or a probe for code no human approved) under `limit`; `f`
    /// instantiates the component in it.
    pub(crate) async fn with_store<R>(
        &self,
        engine: &wasmtime::Engine,
        (grant, net): (&Grant, &SkillNet),
        tool: &str,
        limit: Duration,
        progress: Option<ProgressSink>,
        f: impl AsyncFnOnce(&mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<(R, Vec<String>), CallError> {
        let skill = &self.grant().skill;
        let host = |message: String| CallError::new(skill.clone(), tool.to_owned(), CallFailure::Host { message });
        let _slot = self.runtime.pool.acquire().await.map_err(|e| host(e.to_string()))?;
        let state = CallState::new(grant, &self.runtime.roots, net, tool, progress).map_err(|e| host(e.to_string()))?;
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every epoch tick the guest yields to the executor (fairness under load); past the
        // deadline it traps. A guest blocked in a host call is stopped by the caller's timer.
        let deadline = Instant::now() + limit;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(
            move |_| {
                if Instant::now() >= deadline { Err(Trap::Interrupt.into()) } else { Ok(UpdateDeadline::Yield(1)) }
            },
        );
        let result = f(&mut store).await;
        let denials = store.data().gate.denials();
        result.map(|r| (r, denials)).map_err(|e| self.trap_error(tool, limit, e, &store))
    }

    fn trap_error(&self, tool: &str, limit: Duration, error: wasmtime::Error, store: &Store<CallState>) -> CallError {
        let skill = self.grant().skill.clone();
        let tool = tool.to_owned();
        if store.data().limiter.hit {
            return CallError::new(skill, tool, CallFailure::MemoryLimit { limit: self.grant().limits.memory });
        }
        if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return CallError::timeout(skill, tool, limit, self.grant().limits.timeout);
        }
        if CallState::resources_full(&error) {
            let message = format!(
                "it held {} host resources at once (open files, streams, pollables, HTTP requests and responses), \
                 the most a call may hold; the tool must drop the handles it no longer needs",
                crate::state::MAX_RESOURCES
            );
            return CallError::new(skill, tool, CallFailure::Crashed { message });
        }
        let mut message = match error.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            // The cause, not the context wasmtime wraps it in ("error while executing at
            // wasm backtrace: ..."), which says only where.
            None => error.root_cause().to_string(),
        };
        if let Some(tail) = store.data().stderr_tail() {
            message.push_str(&format!(" (stderr: {tail})"));
        }
        CallError::new(skill, tool, CallFailure::Crashed { message })
    }
}

#[async_trait::async_trait]
impl Skill for WasmSkill {
    fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Cranelift's compile in the background, queued behind the others, unless its code is
    /// compiled or cached already: the compiled cache then holds it for its first call
    /// (in this process or the next).
    fn compile_ahead(&self) {
        self.compiled.cancelled.store(false, std::sync::atomic::Ordering::Release);
        if self.compiled.get().is_some_and(|code| code.outcome != CacheOutcome::Baseline) || self.runtime.cache.contains(&self.bytes) {
            return;
        }
        crate::WasmRuntime::optimize_once(&self.runtime, self);
    }

    /// A compile queued ahead that has not started yet is dropped at its turn (one
    /// already running finishes: Cranelift cannot be stopped halfway).
    fn cancel_compile_ahead(&self) {
        self.compiled.cancelled.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The listing's code goes (a call running on it keeps it until it ends), and so do
    /// the component's bytes: a compile at approval reads the file again and takes it only
    /// if it hashes the same.
    fn release_code(&self) {
        self.compiled.release();
        self.bytes.release();
    }

    /// Whether its component was compiled, taken from the compiled cache, or is not
    /// compiled yet ([`CacheOutcome::Deferred`]): always `Some`.
    fn cache_outcome(&self) -> Option<CacheOutcome> {
        Some(self.compiled.get().map_or(CacheOutcome::Deferred, |prepared| prepared.outcome))
    }

    /// Its tools, as our own skill listed them or as a generic component's WIT says. A
    /// generic component's tools are read from its WIT again at every load (reading runs
    /// none of its code); its kept listing tells the registry that loading it runs
    /// nothing, so a restart lists its tools with the rest, at once.
    fn listing(&self) -> Option<Value> {
        let listed: Vec<crate::ListedTool> = self.envelope.tools().iter().map(crate::ListedTool::from).collect();
        serde_json::to_value(listed).ok()
    }

    /// Its first call compiles the component (or reads it from the compiled cache), and
    /// says so to a caller that follows progress; the call's clock starts after.
    async fn ready(&self, _tool: &str, _limit: Duration, cx: &CallContext) -> Result<(), CallFailure> {
        if self.compiled.get().is_none()
            && let Some(progress) = &cx.progress
        {
            let message = format!(
                "preparing skill `{}` for its first call (compiling its component, or reading it from the compiled cache)",
                self.grant().skill
            );
            progress(skillhost_core::Progress { done: 0, total: None, message: Some(message) });
        }
        self.code_for_call().await.map(|_| ())
    }

    /// A fresh store and instance run the tool under the skill's memory cap and an epoch
    /// deadline; a generic component's input is checked against its WIT before anything
    /// runs.
    #[tracing::instrument(name = "wasm.invoke", skip_all, fields(skillhost.skill = %self.grant().skill, gen_ai.tool.name = invocation.tool))]
    async fn invoke(&self, invocation: Invocation<'_>) -> Result<Invoked, InvokeError> {
        let Invocation { tool, input, limit, progress, .. } = invocation;
        let code = self.code_for_call().await?;
        let index = self.envelope.tool_index(tool).ok_or_else(|| self.envelope.unknown_tool())?;
        let args = match &code.code {
            Code::Skill(_) => Vec::new(),
            Code::Generic(generic) => generic.args(index, &input).map_err(|e| CallFailure::InvalidInput { message: e.to_string() })?,
        };
        let input = input.to_string();
        let (result, denials) = self
            .with_store(&code.engine, (self.grant(), &self.net), tool, limit, progress, async |store| match &code.code {
                Code::Skill(pre) => pre.instantiate_async(&mut *store).await?.skillhost_skill_guest().call_call(store, tool, &input).await,
                Code::Generic(generic) => generic.call(store, index, args).await,
            })
            .await
            .map_err(|e| InvokeError::from(e.failure))?;
        let failure = match result {
            Ok(text) => return Ok(Invoked { output: Output::Json(text), denials }),
            Err(types::CallError::InvalidInput(message)) => CallFailure::InvalidInput { message },
            Err(types::CallError::Failed(message)) => CallFailure::Failed { message },
            Err(types::CallError::Denied(message)) => CallFailure::Denied { message },
            Err(types::CallError::UnknownTool(_)) => self.envelope.unknown_tool(),
        };
        Err(InvokeError { failure, denials })
    }
}
