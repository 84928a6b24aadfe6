//! [`SkillhostMcp`], the rmcp [`ServerHandler`] that serves a [`Registry`] to agents.
//!
//! One value is one MCP session: the tools activated by `tool_search` live in it, so a
//! transport creates one per connection ([`SkillhostMcp::session`]). The registry, the
//! configuration and pending approvals are shared by all sessions.
//!
//! Both protocol eras are served. Handshake-era clients (`initialize`, up to
//! 2025-11-25) get `notifications/tools/list_changed` pushed on the connection and
//! approvals asked with an `elicitation/create` request. 2026-07-28 clients (opened with
//! `server/discover`) get list changes on their `subscriptions/listen` stream and
//! approvals as an `input_required` result whose answer comes back with the retried
//! call; the `requestState` echoed back is a signed, single-use, expiring token bound to
//! the session, the skill and the exact version asked about (`approval.rs`), so no
//! other session, and no guess, can answer a question.
//!
//! Approvals through elicitation trust the MCP client to put the question in front of
//! the human (that is what elicitation is for), and are recorded with their channel
//! (`mcp-elicitation`), so a human can tell them apart later (`skillhost show`) and
//! revoke them (`skillhost reject`). Where the client cannot be trusted with that, turn
//! it off with [`McpConfig::elicit_approvals`]; a call then fails with the
//! `skillhost approve` command to run. No tool of this server approves anything.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetSkillRequestParams,
    GetSkillResult, Implementation, InputRequest, InputRequiredResult, JsonObject, ListPromptsResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, Role, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use skillhost_core::{CallContext, CallError, CallFailure, Progress};
use skillhost_index::SearchIndex;
use skillhost_registry::{ApprovalChannel, Registry, RegistryError, RegistryEvent, TrustState};
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};

use crate::McpError;
use crate::approval::{Approvals, Asked};
use crate::builtin::{self, Builtin};
use crate::failure::AgentFailure;
use crate::forge::ForgeTool;
use crate::knowledge;
use crate::skills;
use crate::tools::{SEPARATOR, ToolEntry, public_name, table, tool_count};

/// How the MCP front behaves.
#[derive(Clone, Debug)]
pub struct McpConfig {
    /// Above this many skill tools, `tools/list` shows only the built-in tools, the
    /// pinned ones and those activated in the session; the rest are found with
    /// `tool_search` (deferred loading). Default: 40.
    pub deferred_threshold: usize,
    /// Public names (`skill__tool`) always listed, even in deferred mode.
    pub pinned: Vec<String>,
    /// Ask the human through MCP elicitation when a tool of an unapproved skill is
    /// called. Default: `true`.
    pub elicit_approvals: bool,
    /// How long a 2026-07-28 client has to come back with the human's answer to an
    /// approval question. Default: 10 minutes.
    pub approval_timeout: std::time::Duration,
    /// How long a session's first `tools/list` waits for the skills found at start that
    /// are still loading ([`Registry::ready`]), so that a client that lists once (a
    /// script, an inspector) sees them: below the 10-60 s clients give a request. What
    /// loads later is announced with `list_changed`. `initialize` never waits.
    /// Default: 8 s.
    pub first_list_wait: std::time::Duration,
    /// How long a session's first full-text search waits for a search index that is
    /// still opening ([`SkillhostMcp::index_loading`]), and for the skills found at start,
    /// before it settles for the index in place. Default: 10 s.
    pub first_search_wait: std::time::Duration,
    /// `skill_run`s one session may hold at once; one more is refused at once, naming
    /// this (`skillhost serve --max-session-runs N`). Default: 4.
    pub max_session_runs: usize,
    /// `skill_run`s all sessions together may hold at once (`skillhost serve --max-runs
    /// N`). Default: 8.
    pub max_runs: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            deferred_threshold: 40,
            pinned: Vec::new(),
            elicit_approvals: true,
            approval_timeout: std::time::Duration::from_secs(600),
            first_list_wait: std::time::Duration::from_secs(8),
            first_search_wait: std::time::Duration::from_secs(10),
            max_session_runs: 4,
            max_runs: 8,
        }
    }
}

/// The MCP server of one session over a shared registry.
#[derive(Clone)]
pub struct SkillhostMcp {
    shared: Arc<Shared>,
    session: Arc<Session>,
}

struct Shared {
    registry: Arc<Registry>,
    config: McpConfig,
    /// Ranks `fts` searches (synced with the registry before each search), and whether
    /// a better one is still opening.
    index: tokio::sync::watch::Sender<IndexSlot>,
    /// The `requestState` tokens of approvals asked of 2026-07-28 clients.
    approvals: Approvals,
    sessions: AtomicU64,
    /// Serves `skill_create` and `skill_update` when set.
    forge: Option<Arc<skillhost_forge::Forge>>,
    /// The Skills extension's manifests, hashed once per skill version.
    manifests: skills::Manifests,
    /// The files of `skill_run`s, readable until collected.
    runs: crate::run::RunFiles,
    /// The runs held at once, all sessions together ([`McpConfig::max_runs`]).
    running: Semaphore,
}

struct Session {
    id: u64,
    activated: Mutex<BTreeSet<String>>,
    /// Fires when this session's visible tools changed (activation).
    changed: broadcast::Sender<()>,
    /// Whether this session listed its tools already (the first list may wait).
    listed: std::sync::atomic::AtomicBool,
    /// The index this session's full-text searches rank with, fixed at its first one.
    ranker: tokio::sync::OnceCell<builtin::SessionIndex>,
    /// The runs this session holds at once ([`McpConfig::max_session_runs`]).
    running: Semaphore,
}

/// The search index in place, and whether a better one is on its way.
#[derive(Clone)]
struct IndexSlot {
    index: Arc<SearchIndex>,
    /// Whether [`SkillhostMcp::index_loading`]'s index is still opening.
    loading: bool,
    /// Why the index that was opening did not come.
    failed: Option<String>,
}

/// A search index on its way ([`SkillhostMcp::index_loading`]): hand it over with
/// [`ready`](Self::ready), or say it will not come with [`failed`](Self::failed) (dropping
/// it says so too).
pub struct IndexLoading {
    slot: tokio::sync::watch::Sender<IndexSlot>,
    settled: bool,
}

impl IndexLoading {
    /// The index opened: sessions that have not searched yet rank with it.
    pub fn ready(mut self, index: Arc<SearchIndex>) {
        self.settled = true;
        self.slot.send_modify(|slot| {
            slot.index = index;
            slot.loading = false;
            slot.failed = None;
        });
    }

    /// The index did not open (`why`): sessions keep the one in place.
    pub fn failed(mut self, why: &str) {
        self.settled = true;
        let why = why.to_owned();
        self.slot.send_modify(|slot| {
            slot.loading = false;
            slot.failed = Some(why);
        });
    }
}

impl Drop for IndexLoading {
    fn drop(&mut self) {
        if !self.settled {
            self.slot.send_modify(|slot| {
                slot.loading = false;
                slot.failed = Some("opening it was abandoned".to_owned());
            });
        }
    }
}

/// The prompt with the skill directory.
const DIRECTORY_PROMPT: &str = "skills_directory";
/// Its budget argument.
const DIRECTORY_BUDGET_ARG: &str = "budget";

/// The key of the approval question inside `inputRequests`.
const APPROVAL_KEY: &str = "approve";

impl SkillhostMcp {
    /// A server over `registry` with `config`; this value is the first session.
    /// Its search index is in memory: hybrid when the embedding model is installed
    /// (`$SKILLHOST_MODEL_DIR`), else BM25.
    pub fn new(registry: Arc<Registry>, config: McpConfig) -> Result<Self, McpError> {
        let index = match skillhost_index::embedder_from_env() {
            Some(model) => SearchIndex::with_embedder(Arc::new(model)),
            None => SearchIndex::new(),
        }?;
        Ok(Self::with_index(registry, config, Arc::new(index)))
    }

    /// A server over `registry` whose `tool_search` and `skill_search` rank with
    /// `index` (e.g. one with an embedder, for hybrid ranking). The index is synced with
    /// the registry before each search.
    pub fn with_index(registry: Arc<Registry>, config: McpConfig, index: Arc<SearchIndex>) -> Self {
        let approvals = Approvals::new(config.approval_timeout);
        let running = Semaphore::new(config.max_runs.min(Semaphore::MAX_PERMITS));
        let index = tokio::sync::watch::Sender::new(IndexSlot { index, loading: false, failed: None });
        let shared = Arc::new(Shared {
            registry,
            config,
            index,
            approvals,
            sessions: AtomicU64::new(0),
            forge: None,
            manifests: skills::Manifests::default(),
            runs: crate::run::RunFiles::default(),
            running,
        });
        Self { session: Session::new(&shared), shared }
    }

    /// Rank searches with `index` from now on, in every session that has not searched
    /// yet: a session keeps the ranker of its first full-text search, so that the same
    /// query keeps its order within it.
    pub fn set_index(&self, index: Arc<SearchIndex>) {
        self.shared.index.send_modify(|slot| slot.index = index);
    }

    /// Say that a better search index (hybrid, on disk, with the embedding model) is
    /// opening while the one in place (BM25 in memory) answers: a session's first
    /// full-text search waits for it up to [`McpConfig::first_search_wait`], then keeps
    /// whichever index it got for the rest of the session, and its answers say which
    /// ranker answered and why.
    pub fn index_loading(&self) -> IndexLoading {
        self.shared.index.send_modify(|slot| {
            slot.loading = true;
            slot.failed = None;
        });
        IndexLoading { slot: self.shared.index.clone(), settled: false }
    }

    /// The index this session's full-text searches rank with: fixed at its first search,
    /// after waiting (bounded) for an index still opening and the skills still loading.
    async fn session_index(&self) -> builtin::SessionIndex {
        self.session
            .ranker
            .get_or_init(|| async {
                let mut slot = self.shared.index.subscribe();
                let wait = self.shared.config.first_search_wait;
                // The skills found at start are searched for too. Still loading after the
                // wait: the slot says so below.
                let settled = async {
                    let _ = slot.wait_for(|s| !s.loading).await;
                    self.shared.registry.ready().await;
                };
                let _ = tokio::time::timeout(wait, settled).await;
                let slot = slot.borrow().clone();
                builtin::SessionIndex::pin(slot.index, slot.loading.then_some(wait), slot.failed)
            })
            .await
            .clone()
    }

    /// Offer `skill_create` and `skill_update`, run by `forge` (over the same registry).
    /// Call before the first [`session`](Self::session).
    pub fn with_forge(mut self, forge: Arc<skillhost_forge::Forge>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.forge = Some(forge);
        } else {
            tracing::warn!("with_forge after sessions were made: the forge tools are not offered");
        }
        self
    }

    /// A new session sharing this server's registry, configuration and pending approvals.
    pub fn session(&self) -> Self {
        Self { shared: self.shared.clone(), session: Session::new(&self.shared) }
    }

    /// The registry served.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.shared.registry
    }

    /// Whether this session is in deferred mode (too many tools to list them all).
    fn deferred(&self, tools: &[ToolEntry]) -> bool {
        tools.len() > self.shared.config.deferred_threshold
    }

    /// The tools `tools/list` shows this session.
    fn visible(&self) -> Vec<Tool> {
        let tools = table(&self.shared.registry);
        let mut listed: Vec<Tool> = builtin::all().iter().map(|b| b.to_mcp()).collect();
        if self.shared.forge.is_some() {
            listed.extend(ForgeTool::all());
        }
        if self.deferred(&tools) {
            let activated = self.session.activated.lock();
            let pinned = &self.shared.config.pinned;
            listed.extend(tools.iter().filter(|t| pinned.contains(&t.name) || activated.contains(&t.name)).map(ToolEntry::to_mcp));
        } else {
            listed.extend(tools.iter().map(ToolEntry::to_mcp));
        }
        listed
    }

    /// Make `names` visible in this session; tells the client when that changed its list.
    fn activate(&self, names: impl IntoIterator<Item = String>) {
        let mut activated = self.session.activated.lock();
        let before = activated.len();
        activated.extend(names);
        if activated.len() != before {
            let _ = self.session.changed.send(());
        }
    }

    /// Look up `name` as `skill__tool` among loaded, not disabled skills.
    fn resolve(&self, name: &str) -> Option<ToolEntry> {
        let (skill, tool) = name.split_once(SEPARATOR)?;
        let entry = self.shared.registry.entry(skill).ok()?;
        let loaded = entry.loaded.as_ref()?;
        let spec = loaded.tools.iter().find(|t| t.name == tool)?;
        if entry.state == TrustState::Disabled {
            return None;
        }
        Some(ToolEntry { name: public_name(&entry.name, tool)?, skill: entry.name.clone(), spec: spec.clone(), state: entry.state })
    }

    /// A call to a tool of a skill that is still loading waits for it (with a progress
    /// notification every second, when the client asked for progress), then resolves the
    /// name again; `None` when the skill is not loading, or loaded without that tool.
    async fn wait_for_skill(&self, name: &str, context: &RequestContext<RoleServer>) -> Result<Option<ToolEntry>, ErrorData> {
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

    async fn call_skill_tool(
        &self,
        tool: ToolEntry,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !tool.approved() {
            match self.approval(&tool, &params, &context).await? {
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
            caller: format!("mcp:{}", self.session.id),
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

    /// Who is asking, as far as approval questions go: the HTTP session or bearer token of
    /// a request over HTTP (where a 2026-07-28 client may get a fresh handler per
    /// request), else this connection's session.
    fn session_key(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<crate::http::Principal>())
            .map_or_else(|| format!("session:{}", self.session.id), |p| p.0.clone())
    }

    /// Decide whether an unapproved skill may run now, asking the human if we can.
    async fn approval(
        &self,
        tool: &ToolEntry,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Approval, ErrorData> {
        let registry = &self.shared.registry;
        let name = tool.skill.as_str();
        let command = format!("run `skillhost approve {name}` in a terminal, then call again");
        let request = registry.approval_request(name).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let supports = context.client_capabilities().is_some_and(|c| c.elicitation.is_some());
        if !self.shared.config.elicit_approvals || !supports {
            return Ok(Approval::Refused(format!(
                "skill `{name}` is {} and this client cannot ask the user to approve it; {command}",
                request.state.as_str()
            )));
        }
        let message = match request.dialog_question() {
            Ok(message) => message,
            Err(too_long) => return Ok(Approval::Refused(too_long.to_string())),
        };
        let session = self.session_key(context);
        let asked = Asked {
            session: session.clone(),
            skill: name.to_owned(),
            content_hash: request.content_hash.clone(),
            capability_digest: request.capability_digest.clone(),
        };
        let modern = context.protocol_version().is_some_and(|v| !v.has_initialize());
        let (answer, asked) = if modern {
            // 2026-07-28: the answer comes back with the retried call, along with the
            // token of what was asked. A token that does not check out is refused
            // before the answer is read, and records nothing.
            let redeemed = match params.request_state.as_deref() {
                Some(token) => Some(
                    self.shared
                        .approvals
                        .redeem(token, &session, name)
                        .map_err(|e| ErrorData::invalid_params(format!("skill `{name}`: {e}"), None))?,
                ),
                None => None,
            };
            let response = params.input_responses.as_ref().and_then(|r| r.get(APPROVAL_KEY));
            let (Some(redeemed), Some(response)) = (redeemed, response) else {
                let token = self.shared.approvals.issue(asked).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                let ask = InputRequest::Elicitation(ElicitRequest::new(elicit_params(message)));
                let requests = [(APPROVAL_KEY.to_owned(), ask)].into_iter().collect();
                return Ok(Approval::Ask(InputRequiredResult::new(Some(requests), Some(token))));
            };
            let answer: ElicitResult = serde_json::from_value(response.clone())
                .map_err(|e| ErrorData::invalid_params(format!("bad elicitation response: {e}"), None))?;
            (answer, redeemed)
        } else {
            let answer = context
                .peer
                .create_elicitation(elicit_params(message))
                .await
                .map_err(|e| ErrorData::internal_error(format!("asking the user to approve `{name}` failed: {e}"), None))?;
            (answer, asked)
        };
        let accepted = answer.action == ElicitationAction::Accept
            && answer.content.as_ref().and_then(|c| c.get("approve")).and_then(Value::as_bool) == Some(true);
        if !accepted {
            return Ok(Approval::Refused(format!("the user did not approve skill `{name}`; nothing ran. To approve it later, {command}")));
        }
        // Bound to what the human was shown: if the skill changed since, this fails.
        match registry.approve(name, &asked.content_hash, &asked.capability_digest, ApprovalChannel::McpElicitation).await {
            Ok(()) => {}
            Err(error @ RegistryError::ChangedSinceReview { .. }) => {
                return Ok(Approval::Refused(format!(
                    "{error}; nothing was approved or ran: call the tool again to be asked about this version"
                )));
            }
            Err(error) => return Err(ErrorData::internal_error(error.to_string(), None)),
        }
        tracing::info!(skill = name, session = %session, "approved by the user through MCP elicitation");
        Ok(Approval::Granted)
    }

    /// A built-in tool; `cancel` is the request's (a run of `skill_run` stops with it).
    async fn call_builtin(&self, builtin: Builtin, args: &JsonObject, cancel: tokio_util::sync::CancellationToken) -> CallToolResult {
        let registry = &self.shared.registry;
        let full_text = matches!(builtin, Builtin::ToolSearch | Builtin::SkillSearch) && builtin::is_full_text(args);
        let index = if full_text {
            self.session_index().await
        } else {
            builtin::SessionIndex::pin(self.shared.index.borrow().index.clone(), None, None)
        };
        let result = match builtin {
            Builtin::ToolSearch => {
                let deferred = self.deferred(&table(registry));
                builtin::tool_search(registry, &index, args, deferred).map(|(value, found)| {
                    if deferred {
                        self.activate(found);
                    }
                    value
                })
            }
            Builtin::SkillList => Ok(builtin::skill_list(registry)),
            Builtin::SkillSearch => builtin::skill_search(registry, &index, args),
            Builtin::SkillGet => builtin::skill_get(registry, args),
            Builtin::ReadSkillResource => builtin::read_skill_resource(registry, args),
            Builtin::SkillRun => {
                // Held until the call's future ends, however it ends (answered, failed,
                // cancelled, the session gone).
                let _held = match self.hold_run(args.get("skill").and_then(Value::as_str).unwrap_or_default()) {
                    Ok(held) => held,
                    Err(refused) => return refused.to_result(),
                };
                let cx = CallContext { cancel, caller: format!("mcp:{}", self.session.id), ..CallContext::default() };
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
    fn hold_run(&self, skill: &str) -> Result<(SemaphorePermit<'_>, SemaphorePermit<'_>), RunsBusy> {
        let config = &self.shared.config;
        let skill = skillhost_core::text::quote(skill, 80);
        let host = self.shared.running.try_acquire().map_err(|_| RunsBusy::Host { skill: skill.clone(), max: config.max_runs })?;
        let session = self.session.running.try_acquire().map_err(|_| RunsBusy::Session { skill, max: config.max_session_runs })?;
        Ok((host, session))
    }

    /// Forward list changes until `send` fails (the peer is gone) or `stop` fires.
    async fn forward_changes<F, Fut>(&self, send: F, stop: impl std::future::Future<Output = ()>)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let mut events = self.shared.registry.subscribe();
        let mut changed = self.session.changed.subscribe();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                event = events.recv() => match event {
                    Ok(RegistryEvent::LoadFailed { .. }) => continue,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                change = changed.recv() => if let Err(broadcast::error::RecvError::Closed) = change { return },
            }
            // One notification for a burst (skills loading one after another at start).
            while matches!(events.try_recv(), Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_))) {}
            if !send().await {
                return;
            }
        }
    }
}

impl Session {
    fn new(shared: &Shared) -> Arc<Self> {
        Arc::new(Session {
            id: shared.sessions.fetch_add(1, Ordering::Relaxed) + 1,
            activated: Mutex::default(),
            changed: broadcast::channel(16).0,
            listed: std::sync::atomic::AtomicBool::new(false),
            ranker: tokio::sync::OnceCell::new(),
            running: Semaphore::new(shared.config.max_session_runs.min(Semaphore::MAX_PERMITS)),
        })
    }
}

enum Approval {
    Granted,
    Ask(InputRequiredResult),
    Refused(String),
}

impl ServerHandler for SkillhostMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_prompts()
            // The Skills extension: skills/list, skills/get, files by resources/read,
            // folders by resources/directory/read.
            .enable_skills_with_directory_read()
            .build();
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("skillhost", env!("CARGO_PKG_VERSION"));
        let mut instructions = "skillhost runs sandboxed skills. Tools are named SKILL__TOOL. When a tool you need is not listed, \
             find it with tool_search; read a skill's instructions with skill_get before using it."
            .to_owned();
        // The L1 directory: the approved skills' names within a bounded budget.
        let directory = knowledge::directory(&self.shared.registry, knowledge::DIRECTORY_BUDGET);
        if !directory.text.is_empty() {
            instructions.push_str("\n\n");
            instructions.push_str(&directory.text);
        }
        // Skills found at start whose first listing is still running (nothing waits for
        // them): say so, since the instructions are read once.
        let loading: Vec<String> = self.shared.registry.loading().iter().map(ToString::to_string).collect();
        if !loading.is_empty() {
            instructions
                .push_str(&format!("\n\nStill loading: {} (each joins tools/list when ready; skill_list shows them).", loading.join(", ")));
        }
        info.instructions = Some(instructions);
        info
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Handshake-era session: push list changes on the connection.
        let this = self.clone();
        let peer = context.peer.clone();
        tokio::spawn(async move {
            let closed = peer.clone();
            let send = || {
                let peer = peer.clone();
                async move { peer.notify_tool_list_changed().await.is_ok() && peer.notify_resource_list_changed().await.is_ok() }
            };
            // rmcp has no "closed" future on a peer: poll, so the task ends with the session.
            let stop = async move {
                while !closed.is_transport_closed() {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            };
            this.forward_changes(send, stop).await;
        });
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let tools = context.accepted().tools_list_changed == Some(true);
        let resources = context.accepted().resources_list_changed == Some(true);
        let send = || {
            let sink = sink.clone();
            async move {
                (!tools || sink.notify_tool_list_changed().await.is_ok())
                    && (!resources || sink.notify_resource_list_changed().await.is_ok())
            }
        };
        self.forward_changes(send, context.cancelled()).await;
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: `{}` is not an MCP method skillhost serves", request.method),
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A session's first list waits (bounded) for the skills found at start, so that a
        // client that lists once sees them; later lists answer at once.
        if !self.session.listed.swap(true, Ordering::Relaxed) {
            let ready = tokio::time::timeout(self.shared.config.first_list_wait, self.shared.registry.ready()).await;
            if ready.is_err() {
                let loading: Vec<String> = self.shared.registry.loading().iter().map(ToString::to_string).collect();
                tracing::info!(still_loading = %loading.join(", "), "first tools/list answered without the skills still loading; list_changed announces them");
            }
        }
        // ttl 0: the list changes with the registry and with activation.
        Ok(ListToolsResult::with_all_items(self.visible()).with_ttl_ms(0))
    }

    async fn call_tool(&self, params: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        if let Some(builtin) = Builtin::named(&params.name) {
            return Ok(self.call_builtin(builtin, &params.arguments.clone().unwrap_or_default(), context.ct.clone()).await.into());
        }
        if let (Some(tool), Some(forge)) = (ForgeTool::named(&params.name), &self.shared.forge) {
            let forwarder = context.meta.get_progress_token().map(|token| ProgressForwarder::start(context.peer.clone(), token));
            let args = params.arguments.clone().unwrap_or_default();
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
        match resolved {
            Some(tool) => self.call_skill_tool(tool, params, context).await,
            None => Err(ErrorData::invalid_params(
                format!("unknown tool `{}`; tools are named SKILL__TOOL: call tool_search to find one", params.name),
                None,
            )),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Each skill's SKILL.md and the files of its references/, scripts/ and assets/.
        let mut resources = Vec::new();
        for entry in knowledge::skills(&self.shared.registry) {
            for path in knowledge::listed_resources(&entry) {
                let resource = Resource::new(format!("skill://{}/{path}", entry.name), format!("{} {path}", entry.name))
                    .with_mime_type(knowledge::mime_type(&path));
                resources.push(if path == "SKILL.md" { resource.with_description(knowledge::description(&entry)) } else { resource });
            }
        }
        Ok(ListResourcesResult::with_all_items(resources).with_ttl_ms(0))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let not_found = |why: String| ErrorData::resource_not_found(why, None);
        if request.uri.starts_with(crate::run::SCHEME) {
            let bytes = self.shared.runs.read(&request.uri).map_err(|e| not_found(e.to_string()))?;
            return Ok(ReadResourceResult::new(vec![contents_of(bytes, &request.uri)]).into());
        }
        let rest = request
            .uri
            .strip_prefix("skill://")
            .ok_or_else(|| not_found(format!("`{}` is not a skill:// resource (skill://NAME/PATH)", request.uri)))?;
        let (skill, path) = rest.split_once('/').unwrap_or((rest, "SKILL.md"));
        // Read, never run: a script is served as text like any other file.
        let bytes = knowledge::read_resource_bytes(&self.shared.registry, skill, path).map_err(|e| not_found(e.to_string()))?;
        let mime = knowledge::mime_type(path);
        Ok(ReadResourceResult::new(vec![contents_of(bytes, &request.uri).with_mime_type(mime)]).into())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        skills::list(&self.shared.registry, &self.shared.manifests, cursor)
    }

    async fn get_skill(&self, request: GetSkillRequestParams, _context: RequestContext<RoleServer>) -> Result<GetSkillResult, ErrorData> {
        skills::get(&self.shared.registry, &self.shared.manifests, &request.uri)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        skills::read_directory(&self.shared.registry, &request.uri)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let budget = PromptArgument::new(DIRECTORY_BUDGET_ARG).with_description(format!(
            "Most tokens the directory may take (4 bytes each), {}-{}; default {}.",
            knowledge::MIN_DIRECTORY_BUDGET,
            knowledge::MAX_DIRECTORY_BUDGET,
            knowledge::DIRECTORY_BUDGET
        ));
        let prompt = Prompt::new(
            DIRECTORY_PROMPT,
            Some("The approved skills, one line each (name: description), within a token budget: put it in a system prompt."),
            Some(vec![budget.with_required(false)]),
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != DIRECTORY_PROMPT {
            return Err(ErrorData::invalid_params(format!("unknown prompt `{}`; the prompts are: {DIRECTORY_PROMPT}", request.name), None));
        }
        let budget = match request.arguments.as_ref().and_then(|a| a.get(DIRECTORY_BUDGET_ARG)) {
            None => knowledge::DIRECTORY_BUDGET,
            // Prompt arguments are strings on the wire; accept a number too.
            Some(value) => value
                .as_u64()
                .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("`{DIRECTORY_BUDGET_ARG}` must be a whole number of tokens, not {value}"), None)
                })?,
        };
        let directory = knowledge::directory(&self.shared.registry, budget);
        let text = if directory.text.is_empty() { "No skills are approved yet.".to_owned() } else { directory.text };
        let result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("{} of {} approved skills", directory.listed, directory.total));
        Ok(result.into())
    }
}

/// Forwards a call's progress as MCP notifications, in order.
struct ProgressForwarder {
    tx: tokio::sync::mpsc::UnboundedSender<Forward>,
}

enum Forward {
    Progress(Progress),
    /// Everything before this was sent: answer on the channel.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl ProgressForwarder {
    fn start(peer: Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Self {
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

    fn sink(&self) -> skillhost_core::ProgressSink {
        let tx = self.tx.clone();
        Arc::new(move |progress| {
            let _ = tx.send(Forward::Progress(progress));
        })
    }

    /// Wait until every report so far is on the wire: clients drop progress that
    /// arrives after the result.
    async fn flush(self) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.tx.send(Forward::Flush(done)).is_ok() {
            let _ = sent.await;
        }
    }
}

/// A failed call: the tool's own failures and limits go back as `isError` results the
/// agent can read; a host failure is a JSON-RPC error.
fn call_error(error: CallError) -> Result<CallToolResponse, ErrorData> {
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
fn content_blocks(content: Option<Vec<Value>>, value: &Value) -> Vec<ContentBlock> {
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

/// A resource's bytes as text when they are UTF-8, else as base64.
fn contents_of(bytes: Vec<u8>, uri: &str) -> ResourceContents {
    match String::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, uri),
        Err(binary) => {
            use base64::Engine as _;
            ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(binary.into_bytes()), uri)
        }
    }
}

/// Why `skill_run` was refused at once: the runs held at once are at a bound.
#[derive(Debug, thiserror::Error)]
enum RunsBusy {
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

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn elicit_params(message: String) -> ElicitRequestParams {
    let schema: ElicitationSchema = ElicitationSchema::builder().required_bool("approve").build_unchecked();
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema }
}
