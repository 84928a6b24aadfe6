//! Tool calls: a skill's tool (waiting for a skill still loading, progress forwarded,
//! the call's failure as the agent sees it) and the built-in tools (with the runs a
//! session and the host hold at once).

use super::elicit::Approval;
use super::*;

/// Forwards a call's progress as MCP notifications, in order.
pub(super) struct ProgressForwarder {
    tx: tokio::sync::mpsc::UnboundedSender<Forward>,
}

pub(super) enum Forward {
    Progress(Progress),
    /// Everything before this was sent: answer on the channel.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl ProgressForwarder {
    pub(super) fn start(peer: Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Forward>();
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                match message {
                    Forward::Progress(p) => {
                        let mut param = ProgressNotificationParam::new(token.clone(), p.done as f64);
                        param.total = p.total.map(|t| t as f64);
                        param.message = p.message;
                        // A client that left just misses the rest.
                        let _ = peer.notify_progress(param).await;
                    }
                    Forward::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Self { tx }
    }

    pub(super) fn sink(&self) -> skillhost_core::ProgressSink {
        let tx = self.tx.clone();
        Arc::new(move |progress| {
            let _ = tx.send(Forward::Progress(progress));
        })
    }

    /// Wait until every report so far is on the wire: clients drop progress that
    /// arrives after the result.
    pub(super) async fn flush(self) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.tx.send(Forward::Flush(done)).is_ok() {
            let _ = sent.await;
        }
    }
}

/// A failed call: the tool's own failures and limits go back as `isError` results the
/// agent can read; a host failure is a JSON-RPC error.
pub(super) fn call_error(error: CallError) -> Result<CallToolResponse, ErrorData> {
    match error.failure {
        CallFailure::Host { .. } | CallFailure::Cancelled => Err(ErrorData::internal_error(error.to_string(), None)),
        _ => {
            let mut result = error_result(error.to_string());
            result.structured_content = None;
            result.meta = None;
            Ok(result.into())
        }
    }
}

/// The content of a successful call as the agent gets it: a server skill's own blocks
/// as its server sent them; for a wasm skill, a string output as its text and any other
/// value as its JSON.
pub(super) fn content_blocks(content: Option<Vec<Value>>, value: &Value) -> Vec<ContentBlock> {
    match content {
        Some(blocks) => blocks
            .into_iter()
            // The sandbox's client parsed these as MCP content already; one that does not
            // read back passes as its JSON text rather than being dropped.
            .map(|block| serde_json::from_value(block.clone()).unwrap_or_else(|_| ContentBlock::text(block.to_string())))
            .collect(),
        None => vec![ContentBlock::text(value.as_str().map_or_else(|| value.to_string(), str::to_owned))],
    }
}

/// Why `skill_run` was refused at once: the runs held at once are at a bound.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunsBusy {
    #[error(
        "skill_run of `{skill}` refused: the host already runs {max} runs at once, the most it may for all sessions together; \
         wait for one to finish, or raise it with `skillhost serve --max-runs N`"
    )]
    Host { skill: String, max: usize },
    #[error(
        "skill_run of `{skill}` refused: this session already runs {max} runs at once, the most a session may; \
         wait for one to finish, or raise it with `skillhost serve --max-session-runs N`"
    )]
    Session { skill: String, max: usize },
}

impl AgentFailure for RunsBusy {
    fn kind(&self) -> &'static str {
        "busy"
    }

    fn fix(&self) -> Option<String> {
        Some(match self {
            RunsBusy::Host { .. } => "wait for a run to finish and call again, or have the user raise `skillhost serve --max-runs N`",
            RunsBusy::Session { .. } => {
                "wait for one of this session's runs to finish and call again, or have the user raise `skillhost serve --max-session-runs N`"
            }
        }
        .into())
    }
}

pub(super) fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl SkillhostMcp {
    /// A `tools/call`: a built-in tool, a forge tool, or a skill's tool (at most once
    /// across replicas when the client keyed it).
    pub(super) async fn call(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let scope = self.scope(&context);
        if let Some(builtin) = Builtin::named(&params.name) {
            let args = params.arguments.clone().unwrap_or_default();
            // A run of scripts no human approved yet asks, as a call of a tool does (its
            // packages installed after a yes); the org policy's `run` decides first.
            if builtin == Builtin::SkillRun
                && let Some(skill) = args.get("skill").and_then(Value::as_str)
                && let Ok(entry) = self.shared.registry.entry(skill)
                && matches!(entry.state, TrustState::PendingReview | TrustState::NeedsReapproval)
                && entry.loaded.as_ref().is_some_and(|l| l.scripts.is_some())
            {
                if let Err(refused) = scope.check_skill(Action::Run, skill, Some(&entry)) {
                    return Ok(error_result(refused.to_string()).into());
                }
                match self.approval(skill, &params, &context).await? {
                    Approval::Granted => {}
                    Approval::Ask(result) => return Ok(result.into()),
                    Approval::Refused(text) => {
                        // Audited as every refused run is.
                        let command: Vec<String> = args
                            .get("command")
                            .and_then(Value::as_array)
                            .map(|words| words.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                            .unwrap_or_default();
                        self.shared.registry.audit_refused_run(skill, &command, &[], &text);
                        return Ok(error_result(text).into());
                    }
                }
            }
            return Ok(self.call_builtin(builtin, &args, context.ct.clone(), &scope).await.into());
        }
        if let (Some(tool), Some(forge)) = (ForgeTool::named(&params.name), &self.shared.forge) {
            let args = params.arguments.clone().unwrap_or_default();
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            let action = if matches!(tool, ForgeTool::Create) { Action::Create } else { Action::Update };
            if let Err(refused) = scope.check_skill(action, name, self.shared.registry.entry(name).ok().as_deref()) {
                return Ok(error_result(refused.to_string()).into());
            }
            let forwarder = context.meta.get_progress_token().map(|token| ProgressForwarder::start(context.peer.clone(), token));
            let result = crate::forge::call(forge, tool, &args, forwarder.as_ref().map(ProgressForwarder::sink)).await;
            if let Some(forwarder) = forwarder {
                forwarder.flush().await;
            }
            return Ok(result.into());
        }
        let resolved = match self.resolve(&params.name) {
            None => self.wait_for_skill(&params.name, &context).await?,
            found => found,
        };
        // A tool the caller may not call is refused before anything else about it is told;
        // one the org policy permits only with a human's yes to the call asks for it.
        if let Some(tool) = &resolved {
            match scope.check_tool(tool) {
                Ok(Permit::Yes) => {}
                Ok(Permit::IfHumanApproves { policies }) => match self.call_approval(tool, &params, &context, &scope, &policies).await? {
                    Approval::Granted => {}
                    Approval::Ask(result) => return Ok(result.into()),
                    Approval::Refused(text) => return Ok(error_result(text).into()),
                },
                Err(refused) => return Ok(error_result(refused.to_string()).into()),
            }
        }
        match resolved {
            Some(tool) => match (self.call_key(&context)?, self.shared.registry.claims()) {
                (Some(key), Some(claims)) if tool.approved() => self.call_once(claims, key, tool, params, context).await,
                _ => self.call_skill_tool(tool, params, context).await,
            },
            None => Err(ErrorData::invalid_params(
                format!("unknown tool `{}`; tools are named SKILL__TOOL: call tool_search to find one", params.name),
                None,
            )),
        }
    }

    /// A call to a tool of a skill that is still loading waits for it (with a progress
    /// notification every second, when the client asked for progress), then resolves the
    /// name again; `None` when the skill is not loading, or loaded without that tool.
    pub(super) async fn wait_for_skill(&self, name: &str, context: &RequestContext<RoleServer>) -> Result<Option<ToolEntry>, ErrorData> {
        let Some((skill, _)) = name.split_once(SEPARATOR) else { return Ok(None) };
        let registry = &self.shared.registry;
        if !registry.loading().iter().any(|n| n.as_str() == skill) {
            return Ok(None);
        }
        let forwarder = context.meta.get_progress_token().map(|token| ProgressForwarder::start(context.peer.clone(), token));
        let loaded = registry.wait_loaded(skill);
        tokio::pin!(loaded);
        let mut waited = 0;
        loop {
            tokio::select! {
                () = &mut loaded => break,
                () = context.ct.cancelled() => return Err(ErrorData::internal_error(format!("cancelled while skill `{skill}` was loading"), None)),
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                    waited += 1;
                    if let Some(forwarder) = &forwarder {
                        let message = format!("skill `{skill}` is still loading ({waited} s)");
                        (forwarder.sink())(Progress { done: waited, total: None, message: Some(message) });
                    }
                }
            }
        }
        if let Some(forwarder) = forwarder {
            forwarder.flush().await;
        }
        Ok(self.resolve(name))
    }

    pub(super) async fn call_skill_tool(
        &self,
        tool: ToolEntry,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !tool.approved() {
            match self.approval(tool.skill.as_str(), &params, &context).await? {
                Approval::Granted => {}
                Approval::Ask(result) => return Ok(result.into()),
                Approval::Refused(text) => return Ok(error_result(text).into()),
            }
        }
        // Activation on first use: a call by exact name makes a deferred tool visible.
        if tool_count(&self.shared.registry) > self.shared.config.deferred_threshold {
            self.activate([tool.name.clone()]);
        }
        let input = Value::Object(params.arguments.unwrap_or_default());
        let forwarder = context.meta.get_progress_token().map(|token| ProgressForwarder::start(context.peer.clone(), token));
        let cx = CallContext {
            timeout: None,
            cancel: context.ct.clone(),
            progress: forwarder.as_ref().map(ProgressForwarder::sink),
            caller: self.scope(&context).caller().name.clone(),
        };
        let outcome = self.shared.registry.call(tool.skill.as_str(), &tool.spec.name, input, cx).await;
        if let Some(forwarder) = forwarder {
            forwarder.flush().await;
        }
        match outcome {
            Ok(out) => {
                let mut result = CallToolResult::success(content_blocks(out.content, &out.value));
                result.structured_content = tool.structured(out.value);
                Ok(result.into())
            }
            Err(RegistryError::Call(error)) => call_error(error),
            Err(error) => Ok(error_result(error.to_string()).into()),
        }
    }

    /// A built-in tool; `cancel` is the request's (a run of `skill_run` stops with it).
    pub(super) async fn call_builtin(
        &self,
        builtin: Builtin,
        args: &JsonObject,
        cancel: tokio_util::sync::CancellationToken,
        scope: &Scope,
    ) -> CallToolResult {
        let registry = &self.shared.registry;
        let result = match builtin {
            Builtin::ToolSearch => {
                let index = match self.search_index("tool_search", args).await {
                    Ok(index) => index,
                    Err(error) => return error.to_result(),
                };
                // The caller's tools, decided by the org policy once for both uses.
                let tools = table(registry, scope);
                let deferred = self.deferred(&tools);
                builtin::tool_search(registry, &index, args, deferred, tools).map(|(value, found)| {
                    if deferred {
                        self.activate(found);
                    }
                    value
                })
            }
            Builtin::SkillList => Ok(builtin::skill_list(registry, scope)),
            Builtin::SkillSearch => match self.search_index("skill_search", args).await {
                Ok(index) => builtin::skill_search(registry, &index, args, scope),
                Err(error) => return error.to_result(),
            },
            Builtin::SkillGet => builtin::skill_get(registry, args, scope),
            Builtin::ReadSkillResource => builtin::read_skill_resource(registry, args, scope),
            Builtin::SkillRun => {
                let skill = args.get("skill").and_then(Value::as_str).unwrap_or_default();
                if let Err(refused) = scope.check_skill(Action::Run, skill, registry.entry(skill).ok().as_deref()) {
                    return error_result(refused.to_string());
                }
                // Held until the call's future ends, however it ends (answered, failed,
                // cancelled, the session gone).
                let _held = match self.hold_run(args.get("skill").and_then(Value::as_str).unwrap_or_default()) {
                    Ok(held) => held,
                    Err(refused) => return refused.to_result(),
                };
                let cx = CallContext { cancel, caller: scope.caller().name.clone(), ..CallContext::default() };
                return match serde_json::from_value::<crate::run::RunArgs>(Value::Object(args.clone())) {
                    Ok(args) => crate::run::skill_run(registry, &self.shared.runs, args, cx).await.unwrap_or_else(|e| e.to_result()),
                    Err(source) => builtin::BuiltinError::Input { tool: "skill_run", source }.to_result(),
                };
            }
        };
        // Opt-in: repeated searches nothing matched become suggestions.
        let result = match (builtin, result, &self.shared.forge) {
            (Builtin::ToolSearch, Ok(mut value), Some(forge)) if value["no_good_match"] == true => {
                crate::forge::suggest(forge, &mut value);
                Ok(value)
            }
            (_, result, _) => result,
        };
        match result {
            Ok(value) => CallToolResult::structured(value),
            Err(error) => error.to_result(),
        }
    }

    /// A slot for one more run of this session: the host's first, then the session's;
    /// refused at once, never queued, when either is full.
    pub(super) fn hold_run(&self, skill: &str) -> Result<(SemaphorePermit<'_>, SemaphorePermit<'_>), RunsBusy> {
        let config = &self.shared.config;
        let skill = skillhost_core::text::quote(skill, 80);
        let host = self.shared.running.try_acquire().map_err(|_| RunsBusy::Host { skill: skill.clone(), max: config.max_runs })?;
        let session = self.session.running.try_acquire().map_err(|_| RunsBusy::Session { skill, max: config.max_session_runs })?;
        Ok((host, session))
    }
}
