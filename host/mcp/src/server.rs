//! [`SkillhostMcp`], the rmcp [`ServerHandler`] that serves a [`Registry`] to agents.
//! Its child modules: `calls` (a skill's tool and the built-in tools called), `elicit` (a
//! human's approval asked), `index` (the search index a session waits for).
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
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationSchema, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetSkillRequestParams,
    GetSkillResult, Implementation, InitializeRequestParams, InitializeResult, InputRequest, InputRequiredResult, JsonObject,
    ListPromptsResult, ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    PromptArgument, PromptMessage, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use skillhost_access::{Action, Caller, Policies};
use skillhost_core::{CallContext, CallError, CallFailure, Progress};
use skillhost_index::SearchIndex;
use skillhost_registry::{ApprovalChannel, Registry, RegistryError, RegistryEvent, TrustState};
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};

use crate::McpError;
use crate::access::{Permit, Scope};
use crate::approval::{Approvals, Asked};
use crate::builtin::{self, Builtin};
use crate::failure::AgentFailure;
use crate::forge::ForgeTool;
use crate::knowledge;
use crate::skills;
use crate::tools::{SEPARATOR, ToolEntry, public_name, table, tool_count};

mod calls;
mod elicit;
mod index;
mod once;
mod trace;

pub use index::IndexLoading;
use index::IndexSlot;
pub use once::CALL_KEY;

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
    /// The shared secrets approval questions are signed with (`[state] keys`): the first
    /// signs, every one verifies, so a question one replica asked is answered on any.
    /// Default: empty, a random key per process.
    pub approval_keys: ApprovalKeys,
    /// `skill_run`s one session may hold at once; one more is refused at once, naming
    /// this (`skillhost serve --max-session-runs N`). Default: 4.
    pub max_session_runs: usize,
    /// `skill_run`s all sessions together may hold at once (`skillhost serve --max-runs
    /// N`). Default: 8.
    pub max_runs: usize,
    /// The org policy deciding what each caller over HTTP may see and do (`[org]
    /// policies`); stdio's local user is not subject to it. Default: none (every caller
    /// may do everything).
    pub org_policy: Option<Arc<Policies>>,
}

/// The shared secrets of [`McpConfig::approval_keys`], never shown (`Debug` counts them).
#[derive(Clone, Default)]
pub struct ApprovalKeys(pub Vec<Vec<u8>>);

impl std::fmt::Debug for ApprovalKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApprovalKeys({} keys)", self.0.len())
    }
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
            approval_keys: ApprovalKeys::default(),
            org_policy: None,
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
    /// The BM25 index in memory searches rank with while no index was given, once one
    /// needed it.
    stand_in: Mutex<Option<Arc<SearchIndex>>>,
    /// The `requestState` tokens of approvals asked of 2026-07-28 clients.
    approvals: Approvals,
    sessions: AtomicU64,
    /// Serves `skill_create` and `skill_update` when set.
    forge: Option<Arc<skillhost_forge::Forge>>,
    /// Resolves and installs a skill's packages around an approval answered here.
    packages: Option<Arc<dyn crate::ApprovalPackages>>,
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

/// The prompt with the skill directory.
const DIRECTORY_PROMPT: &str = "skills_directory";
/// Its budget argument.
const DIRECTORY_BUDGET_ARG: &str = "budget";

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
        Self::serving(registry, config, Some(index))
    }

    /// A server whose searches rank with the index handed over later through
    /// [`index_loading`](Self::index_loading); until it comes (or when it never does),
    /// with BM25 in memory, an index made at the first search that needs it, not before:
    /// a session that never searches, or searches once the index came, costs nothing for it.
    pub fn without_index(registry: Arc<Registry>, config: McpConfig) -> Self {
        Self::serving(registry, config, None)
    }

    fn serving(registry: Arc<Registry>, config: McpConfig, index: Option<Arc<SearchIndex>>) -> Self {
        let approvals = Approvals::shared(config.approval_timeout, &config.approval_keys.0, registry.claims());
        let running = Semaphore::new(config.max_runs.min(Semaphore::MAX_PERMITS));
        let index = tokio::sync::watch::Sender::new(IndexSlot { index, loading: false, failed: None });
        let runs = crate::run::RunFiles::new(registry.run_files());
        let shared = Arc::new(Shared {
            registry,
            config,
            index,
            stand_in: Mutex::default(),
            approvals,
            sessions: AtomicU64::new(0),
            forge: None,
            packages: None,
            manifests: skills::Manifests::default(),
            runs,
            running,
        });
        Self { session: Session::new(&shared), shared }
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

    /// Resolve and install skills' packages with `packages` around approvals answered over
    /// MCP (without, a skill that declares packages is approved at a terminal only).
    pub fn with_packages(mut self, packages: Arc<dyn crate::ApprovalPackages>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.packages = Some(packages);
        } else {
            tracing::warn!("with_packages after sessions were made: approvals over MCP install no packages");
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
    /// The caller of `context`'s request and what the org policy lets it see and do: the
    /// HTTP front's authenticated caller, or over stdio the local user. An HTTP request
    /// without one (never, from this crate's front) is nobody, allowed nothing the org
    /// policy does not permit everyone.
    pub(super) fn scope(&self, context: &RequestContext<RoleServer>) -> Scope {
        let caller = match context.extensions.get::<http::request::Parts>() {
            Some(parts) => {
                parts.extensions.get::<Caller>().cloned().unwrap_or_else(|| Caller { name: String::new(), ..Caller::operator() })
            }
            None => Caller::local(),
        };
        let audit = self.shared.registry.state().map(|state| state.audit.clone());
        Scope::new(caller, self.shared.config.org_policy.as_deref(), audit)
    }

    /// The server's description for `scope`'s caller: the instructions list only the
    /// skills it may see.
    fn info_for(&self, scope: &Scope) -> ServerConfig {
        let mut info = self.get_info();
        info.instructions = Some(self.instructions(scope));
        info
    }

    /// The instructions an agent reads once: how tools are named and found, the skills
    /// `scope`'s caller may see (within a budget), and which are still loading.
    fn instructions(&self, scope: &Scope) -> String {
        let mut instructions = "skillhost runs sandboxed skills. Tools are named SKILL__TOOL. When a tool you need is not listed, \
             find it with tool_search; read a skill's instructions with skill_get before using it."
            .to_owned();
        // The L1 directory: the approved skills' names within a bounded budget.
        let directory = knowledge::directory_for(&self.shared.registry, scope, knowledge::DIRECTORY_BUDGET);
        if !directory.text.is_empty() {
            instructions.push_str("\n\n");
            instructions.push_str(&directory.text);
        }
        // Skills found at start whose first listing is still running (nothing waits for
        // them): say so, since the instructions are read once.
        let loading: Vec<String> = self.shared.registry.loading().iter().map(ToString::to_string).collect();
        if !loading.is_empty() && !scope.restricted() {
            instructions
                .push_str(&format!("\n\nStill loading: {} (each joins tools/list when ready; skill_list shows them).", loading.join(", ")));
        }
        instructions
    }

    fn visible(&self, scope: &Scope) -> Vec<Tool> {
        let tools = table(&self.shared.registry, scope);
        let mut listed: Vec<Tool> = builtin::all().iter().map(|b| b.to_mcp()).collect();
        if self.shared.forge.is_some() && scope.sees_forge() {
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

impl ServerHandler for SkillhostMcp {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = Some(self.instructions(&self.scope(&context)));
        Ok(result)
    }

    async fn discover(&self, context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        Ok(DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), self.info_for(&self.scope(&context))))
    }

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
        // Without a request there is no caller: the skills listed are those everyone may see.
        let nobody = Caller { name: String::new(), ..Caller::operator() };
        info.instructions = Some(self.instructions(&Scope::new(nobody, self.shared.config.org_policy.as_deref(), None)));
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
        context: RequestContext<RoleServer>,
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
        Ok(ListToolsResult::with_all_items(self.visible(&self.scope(&context))).with_ttl_ms(0))
    }

    async fn call_tool(&self, params: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let span = trace::call_span(&params, &context);
        let outcome = tracing::Instrument::instrument(self.call(params, context), span.clone()).await;
        trace::record_outcome(&span, &outcome);
        outcome
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Each skill's SKILL.md and the files of its references/, scripts/ and assets/.
        let mut resources = Vec::new();
        for entry in knowledge::skills(&self.shared.registry, &self.scope(&context)) {
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
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let not_found = |why: String| ErrorData::resource_not_found(why, None);
        if request.uri.starts_with(crate::run::SCHEME) {
            let reader = self.scope(&context).caller().name.clone();
            let bytes = self.shared.runs.read(&reader, &request.uri).await.map_err(|e| not_found(e.to_string()))?;
            return Ok(ReadResourceResult::new(vec![contents_of(bytes, &request.uri)]).into());
        }
        let rest = request
            .uri
            .strip_prefix("skill://")
            .ok_or_else(|| not_found(format!("`{}` is not a skill:// resource (skill://NAME/PATH)", request.uri)))?;
        let (skill, path) = rest.split_once('/').unwrap_or((rest, "SKILL.md"));
        self.scope(&context)
            .check_skill(Action::Read, skill, self.shared.registry.entry(skill).ok().as_deref())
            .map_err(|e| not_found(e.to_string()))?;
        // Read, never run: a script is served as text like any other file.
        let bytes = knowledge::read_resource_bytes(&self.shared.registry, skill, path).map_err(|e| not_found(e.to_string()))?;
        let mime = knowledge::mime_type(path);
        Ok(ReadResourceResult::new(vec![contents_of(bytes, &request.uri).with_mime_type(mime)]).into())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        skills::list(&self.shared.registry, &self.scope(&context), &self.shared.manifests, cursor)
    }

    async fn get_skill(&self, request: GetSkillRequestParams, context: RequestContext<RoleServer>) -> Result<GetSkillResult, ErrorData> {
        skills::get(&self.shared.registry, &self.scope(&context), &self.shared.manifests, &request.uri)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        skills::read_directory(&self.shared.registry, &self.scope(&context), &request.uri)
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
        context: RequestContext<RoleServer>,
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
        let directory = knowledge::directory_for(&self.shared.registry, &self.scope(&context), budget);
        let text = if directory.text.is_empty() { "No skills are approved yet.".to_owned() } else { directory.text };
        let result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("{} of {} approved skills", directory.listed, directory.total));
        Ok(result.into())
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
