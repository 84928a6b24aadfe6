//! [`WasmSkill`]: a loaded component and the call path. Every call gets a fresh
//! [`Store`] and instance (nothing survives between calls), built from the skill's
//! grant, and runs under its deadline, memory cap, output cap and concurrency cap.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillhost_core::{
    CallContext, CallError, CallFailure, Grant, LoadError, OutputSchemas, ProgressSink, Skill, SkillName, ToolOutput, ToolSpec,
};
use skillhost_package::{Reflection, RefusedFunction};
use tokio::sync::Semaphore;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::Inner;
use crate::bindings::{SkillPre, types};
use crate::cache::CacheOutcome;
use crate::generic::GenericPre;
use crate::http::SkillNet;
use crate::state::CallState;

/// A WebAssembly skill, ready to call.
pub struct WasmSkill {
    pub(crate) grant: Grant,
    pub(crate) net: SkillNet,
    pub(crate) tools: Vec<ToolSpec>,
    /// The tools' output schemas, compiled: every output is checked against them.
    pub(crate) outputs: OutputSchemas,
    /// Where the component was read from, for messages.
    pub(crate) path: PathBuf,
    /// Whether it has a skill.toml, for the message of a `wasi:http` import it may not use.
    pub(crate) manifest: skillhost_core::ManifestHint,
    /// The component's bytes, compiled when first needed ([`code`](Self::code)).
    pub(crate) bytes: Arc<[u8]>,
    /// For a component not of our world, what its WIT says: its tools and how to call
    /// them. `None` for our own skills.
    pub(crate) reflection: Option<Reflection>,
    /// The compiled and linked component; set by the first call (or by the load, when it
    /// had to ask the component for its tools).
    pub(crate) code: tokio::sync::OnceCell<Prepared>,
    /// Cranelift's code, when `code` is the baseline compiler's: set by the background
    /// compile, and used from then on.
    pub(crate) optimized: Arc<std::sync::OnceLock<Prepared>>,
    pub(crate) runtime: Arc<Inner>,
    pub(crate) concurrency: Semaphore,
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
    /// by the first caller, shared by every later one.
    pub(crate) async fn code(&self) -> Result<&Prepared, LoadError> {
        if let Some(optimized) = self.optimized.get() {
            return Ok(optimized);
        }
        self.code.get_or_try_init(|| crate::WasmRuntime::prepare(&self.runtime, self)).await
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
        let skill = &self.grant.skill;
        let host = |message: String| CallError::new(skill.clone(), tool.to_owned(), CallFailure::Host { message });
        let _slot = self.runtime.pool.acquire().await.map_err(|e| host(e.to_string()))?;
        let state = CallState::new(grant, net, tool, progress).map_err(|e| host(e.to_string()))?;
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
        let skill = self.grant.skill.clone();
        let tool = tool.to_owned();
        if store.data().limiter.hit {
            return CallError::new(skill, tool, CallFailure::MemoryLimit { limit: self.grant.limits.memory });
        }
        if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return CallError::timeout(skill, tool, limit, self.grant.limits.timeout);
        }
        let mut message = match error.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => format!("{error}"),
        };
        if let Some(tail) = store.data().stderr_tail() {
            message.push_str(&format!(" (stderr: {tail})"));
        }
        CallError::new(skill, tool, CallFailure::Crashed { message })
    }
}

#[async_trait::async_trait]
impl Skill for WasmSkill {
    fn name(&self) -> &SkillName {
        &self.grant.skill
    }

    fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Whether its component was compiled, taken from the compiled cache, or is not
    /// compiled yet ([`CacheOutcome::Deferred`]): always `Some`.
    fn cache_outcome(&self) -> Option<CacheOutcome> {
        Some(self.optimized.get().or(self.code.get()).map_or(CacheOutcome::Deferred, |prepared| prepared.outcome))
    }

    /// Its tools, as our own skill listed them or as a generic component's WIT says. A
    /// generic component's tools are read from its WIT again at every load (reading runs
    /// none of its code); its kept listing tells the registry that loading it runs
    /// nothing, so a restart lists its tools with the rest, at once.
    fn listing(&self) -> Option<Value> {
        let listed: Vec<crate::ListedTool> = self.tools.iter().map(crate::ListedTool::from).collect();
        serde_json::to_value(listed).ok()
    }

    async fn call(&self, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, CallError> {
        let started = Instant::now();
        let skill = &self.grant.skill;
        if !self.tools.iter().any(|t| t.name == tool) {
            return Err(CallError::new(
                skill.clone(),
                tool.to_owned(),
                CallFailure::UnknownTool { available: self.tools.iter().map(|t| t.name.clone()).collect() },
            ));
        }
        let limit = cx.timeout.map_or(self.grant.limits.timeout, |t| t.min(self.grant.limits.timeout));
        if self.code.get().is_none()
            && let Some(progress) = &cx.progress
        {
            let message =
                format!("preparing skill `{skill}` for its first call (compiling its component, or reading it from the compiled cache)");
            progress(skillhost_core::Progress { done: 0, total: None, message: Some(message) });
        }
        let code = self.code().await.map_err(|e| {
            CallError::new(
                skill.clone(),
                tool.to_owned(),
                CallFailure::Host { message: format!("its component could not be prepared: {e}") },
            )
        })?;
        // A generic component's input is checked against its WIT before anything runs.
        let index = self.tools.iter().position(|t| t.name == tool).expect("checked above");
        let args = match &code.code {
            Code::Skill(_) => Vec::new(),
            Code::Generic(generic) => generic
                .args(index, &input)
                .map_err(|e| CallError::new(skill.clone(), tool.to_owned(), CallFailure::InvalidInput { message: e.to_string() }))?,
        };
        let input = input.to_string();
        let work = async {
            let _permit = self
                .concurrency
                .acquire()
                .await
                .map_err(|e| CallError::new(skill.clone(), tool.to_owned(), CallFailure::Host { message: e.to_string() }))?;
            self.with_store(&code.engine, (&self.grant, &self.net), tool, limit, cx.progress.clone(), async |store| match &code.code {
                Code::Skill(pre) => pre.instantiate_async(&mut *store).await?.skillhost_skill_guest().call_call(store, tool, &input).await,
                Code::Generic(generic) => generic.call(store, index, args).await,
            })
            .await
        };
        let (result, denials) = tokio::select! {
            result = tokio::time::timeout(limit, work) => match result {
                Ok(result) => result?,
                Err(_) => return Err(CallError::timeout(skill.clone(), tool, limit, self.grant.limits.timeout)),
            },
            () = cx.cancel.cancelled() => {
                return Err(CallError::new(skill.clone(), tool.to_owned(), CallFailure::Cancelled));
            }
        };
        let fail = |message: String| (skill.clone(), tool.to_owned(), message);
        match result {
            Ok(text) => {
                if text.len() as u64 > self.grant.limits.output {
                    return Err(CallError::new(
                        skill.clone(),
                        tool.to_owned(),
                        CallFailure::OutputLimit { size: text.len() as u64, limit: self.grant.limits.output },
                    ));
                }
                let bad_output = |message: String| {
                    let (skill, tool, message) = fail(message);
                    CallError::new(skill, tool, CallFailure::BadOutput { message })
                };
                let value = serde_json::from_str(&text).map_err(|e| bad_output(format!("the output is not JSON: {e}")))?;
                self.outputs.check(tool, &value).map_err(bad_output)?;
                Ok(ToolOutput { value, content: None, bytes: text.len(), elapsed: started.elapsed() })
            }
            Err(error) => {
                let (skill, tool, _) = fail(String::new());
                // What the host refused during the call explains the tool's error best.
                let with_denials = |message: String| {
                    if denials.is_empty() { message } else { format!("{message} (host refused: {})", denials.join("; ")) }
                };
                let error = match error {
                    types::CallError::Denied(m) => types::CallError::Denied(with_denials(m)),
                    types::CallError::Failed(m) => types::CallError::Failed(with_denials(m)),
                    other => other,
                };
                Err(match error {
                    types::CallError::InvalidInput(message) => CallError::new(skill, tool, CallFailure::InvalidInput { message }),
                    types::CallError::Failed(message) => CallError::new(skill, tool, CallFailure::Failed { message }),
                    types::CallError::Denied(message) => CallError::new(skill, tool, CallFailure::Denied { message }),
                    types::CallError::UnknownTool(_) => CallError::new(
                        skill,
                        tool,
                        CallFailure::UnknownTool { available: self.tools.iter().map(|t| t.name.clone()).collect() },
                    ),
                })
            }
        }
    }
}
