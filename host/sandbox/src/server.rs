//! One running server: the sandboxed process, the rmcp client over its stdio, its
//! stderr (to the log, capped, with a tail kept for crash messages) and the routing of
//! progress notifications to the calls that asked for them. Its [`Confinement`] (the
//! cgroup) lives as long as it: stopping or dropping the server kills the whole tree.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam, ProgressToken, ServerResult};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use skillhost_core::{MAX_SKILL_DESCRIPTIONS, MAX_SKILL_SCHEMAS, MAX_TOOLS, Progress, ProgressSink, SkillName};
use skillhost_egress::ProxyCalls;

use skillhost_jail::Confinement;

use crate::error::StartError;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 2048;
/// The most bytes of tools (their JSON) one listing may hold: twice what the per-skill
/// caps on schemas and descriptions ([`MAX_SKILL_SCHEMAS`], [`MAX_SKILL_DESCRIPTIONS`])
/// let a skill load, so that a listing within it meets those caps, whose errors name the
/// tool, and a bound on what the host holds of one that never ends.
pub(crate) const MAX_LISTING_BYTES: usize = 2 * (MAX_SKILL_SCHEMAS + MAX_SKILL_DESCRIPTIONS);
/// The most `tools/list` pages one listing may take (one tool a page, for every tool).
pub(crate) const MAX_LISTING_PAGES: usize = MAX_TOOLS;

/// The client side of one server: routes progress notifications by token.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(Default::default(), rmcp::model::Implementation::new("skillhost", env!("CARGO_PKG_VERSION")))
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        let sink = self.progress.lock().get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            let whole = |v: f64| if v.is_finite() && v >= 0.0 { v.round() as u64 } else { 0 };
            sink(Progress { done: whole(params.progress), total: params.total.map(whole), message: params.message });
        }
    }
}

/// Shared stderr state of one process.
#[derive(Default)]
pub(crate) struct Stderr {
    tail: Mutex<String>,
}

impl Stderr {
    /// The last lines the server wrote to stderr, one line.
    pub(crate) fn tail(&self) -> Option<String> {
        let tail = self.tail.lock();
        let text = tail.split('\n').filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(" | ");
        (!text.is_empty()).then_some(text)
    }

    fn push(&self, line: &str) {
        let mut tail = self.tail.lock();
        tail.push_str(line);
        tail.push('\n');
        if tail.len() > STDERR_TAIL {
            let mut cut = tail.len() - STDERR_TAIL;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}

/// Why a request to the server got no answer.
pub(crate) enum RequestError {
    /// The process went away (crashed, was killed, closed stdout).
    Closed(String),
    /// The server answered with a JSON-RPC error.
    Protocol {
        /// Its JSON-RPC code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// The answer broke a cap of the host's (what was refused).
    Refused(String),
}

/// A running sandboxed server.
pub(crate) struct Server {
    pub(crate) generation: u64,
    client: RunningService<RoleClient, Handler>,
    child: tokio::sync::Mutex<tokio::process::Child>,
    handler: Handler,
    pub(crate) stderr: Arc<Stderr>,
    /// Calls running on this server.
    pub(crate) in_flight: AtomicUsize,
    /// Milliseconds since `started` of the last call's end.
    last_used: AtomicU64,
    started: Instant,
    /// Its cgroup and seccomp programs; dropping it kills every process of the sandbox.
    confinement: Confinement,
    /// The calls register of its egress proxy, when it is networked.
    pub(crate) calls: Option<ProxyCalls>,
    /// Held for the server's life: the private runtime dir, the egress proxy.
    _guards: Vec<Box<dyn std::any::Any + Send + Sync>>,
    /// Counts it in the sandboxes running.
    _running: Running,
}

/// One sandbox started (a server, a run), counted in the `skillhost_sandboxes_running`
/// gauge (through the `metrics` facade) until dropped.
pub(crate) struct Running(());

impl Running {
    pub(crate) fn start() -> Self {
        metrics::gauge!("skillhost_sandboxes_running").increment(1.0);
        Self(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        metrics::gauge!("skillhost_sandboxes_running").decrement(1.0);
    }
}

/// What a spawn needs.
pub(crate) struct Spawn {
    pub skill: SkillName,
    /// From [`Jail::command`](skillhost_jail::Jail::command); stdio is set here.
    pub command: tokio::process::Command,
    pub max_line: usize,
    pub log_cap: u64,
    pub start_timeout: Duration,
    pub generation: u64,
    pub confinement: Confinement,
    pub calls: Option<ProxyCalls>,
    pub guards: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl Server {
    /// Start the process and complete the MCP handshake.
    pub(crate) async fn start(spawn: Spawn) -> Result<Arc<Self>, StartError> {
        let Spawn { skill, mut command, max_line, log_cap, start_timeout, generation, confinement, calls, guards } = spawn;
        let program = command.as_std().get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| StartError::Spawn { program: program.clone(), source })?;
        let running = Running::start();
        let stdout = child.stdout.take().ok_or(StartError::NoPipe("stdout"))?;
        let stdin = child.stdin.take().ok_or(StartError::NoPipe("stdin"))?;
        let stderr = Arc::new(Stderr::default());
        if let Some(pipe) = child.stderr.take() {
            tokio::spawn(drain_stderr(skill.clone(), pipe, stderr.clone(), log_cap));
        }
        let handler = Handler::default();
        let transport = AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin).with_max_line_length(max_line);
        let client = match tokio::time::timeout(start_timeout, handler.clone().serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(source)) => {
                let status = exit_status(&mut child).await;
                return Err(StartError::Handshake { source: Box::new(source), status, stderr: stderr.tail() });
            }
            Err(_) => {
                let _ = child.start_kill();
                return Err(StartError::HandshakeTimeout { timeout: start_timeout, stderr: stderr.tail() });
            }
        };
        tracing::debug!(skill = %skill, generation, pid = child.id(), "server started");
        Ok(Arc::new(Self {
            generation,
            client,
            child: tokio::sync::Mutex::new(child),
            handler,
            stderr,
            in_flight: AtomicUsize::new(0),
            last_used: AtomicU64::new(0),
            started: Instant::now(),
            confinement,
            calls,
            _guards: guards,
            _running: running,
        }))
    }

    /// `tools/list`, page by page, as JSON values: each page is read and counted before
    /// the next is asked for, and the listing stops at [`MAX_TOOLS`] tools,
    /// [`MAX_LISTING_BYTES`] of tools or [`MAX_LISTING_PAGES`] pages, whichever comes
    /// first (a server answering every page with more tools and a cursor, forever, holds
    /// no more than that of the host's memory). The caller bounds the time.
    pub(crate) async fn list_tools(&self) -> Result<Vec<serde_json::Value>, RequestError> {
        let mut tools = Vec::new();
        let mut bytes = 0usize;
        let mut cursor = None;
        for _ in 0..MAX_LISTING_PAGES {
            let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
            let page = self.client.peer().list_tools(Some(params)).await.map_err(|e| self.request_error(e))?;
            for tool in &page.tools {
                let value = serde_json::to_value(tool).unwrap_or_default();
                bytes += value.to_string().len();
                tools.push(value);
                if tools.len() > MAX_TOOLS {
                    return Err(RequestError::Refused(format!("it lists more than {MAX_TOOLS} tools")));
                }
                if bytes > MAX_LISTING_BYTES {
                    return Err(RequestError::Refused(format!(
                        "its tool listing is larger than {} KiB (names, descriptions and schemas)",
                        MAX_LISTING_BYTES >> 10
                    )));
                }
            }
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(RequestError::Refused(format!("its tool listing did not end within {MAX_LISTING_PAGES} pages")))
    }

    /// Call a tool. `sent` receives the request id as soon as the request is out, so the
    /// caller can cancel it.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        progress: Option<ProgressSink>,
        sent: &Mutex<Option<rmcp::model::RequestId>>,
    ) -> Result<serde_json::Value, RequestError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .client
            .peer()
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.request_error(e))?;
        *sent.lock() = Some(handle.id.clone());
        let token = handle.progress_token.clone();
        if let Some(sink) = progress {
            self.handler.progress.lock().insert(token.clone(), Progress::guard(sink));
        }
        let result = handle.await_response().await;
        self.handler.progress.lock().remove(&token);
        match result.map_err(|e| self.request_error(e))? {
            ServerResult::CallToolResult(result) => Ok(serde_json::to_value(result).unwrap_or_default()),
            other => Ok(serde_json::to_value(other).unwrap_or_default()),
        }
    }

    /// Tell the server to stop working on request `id` (`notifications/cancelled`).
    pub(crate) async fn cancel(&self, id: rmcp::model::RequestId, reason: &str) {
        let params = rmcp::model::CancelledNotificationParam::new(Some(id), Some(reason.to_owned()));
        let _ = self.client.peer().notify_cancelled(params).await;
    }

    /// Kill the sandbox: bwrap (its PID namespace dies with it) and every process of its
    /// cgroup, which outlives nothing.
    pub(crate) async fn kill(&self) {
        let mut child = self.child.lock().await;
        let _ = child.start_kill();
        if let Some(cgroup) = &self.confinement.cgroup {
            cgroup.kill();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    }

    /// Processes of the sandbox the kernel killed for its memory limit so far.
    pub(crate) fn oom_kills(&self) -> u64 {
        self.confinement.cgroup.as_ref().map_or(0, |c| c.oom_kills())
    }

    /// Whether the process has exited (or the client stopped).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Why the process is gone, for a crash message: its exit status and stderr tail.
    pub(crate) async fn exit_reason(&self) -> String {
        let mut child = self.child.lock().await;
        with_stderr(format!("the server process exited{}", exit_status(&mut child).await), &self.stderr)
    }

    /// Mark the start and end of a call, for the idle timer.
    pub(crate) fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    /// See [`begin`](Self::begin).
    pub(crate) fn end(&self) {
        self.last_used.store(self.started.elapsed().as_millis() as u64, Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// How long since the last call ended (or the start), when no call runs.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_used.load(Ordering::SeqCst));
        Some(self.started.elapsed().saturating_sub(last))
    }

    fn request_error(&self, error: rmcp::ServiceError) -> RequestError {
        match error {
            rmcp::ServiceError::McpError(e) => RequestError::Protocol { code: e.code.0, message: e.message.to_string() },
            rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => RequestError::Closed(error.to_string()),
            other if self.is_closed() => RequestError::Closed(other.to_string()),
            other => RequestError::Protocol { code: 0, message: other.to_string() },
        }
    }
}

/// ` with status N` / ` killed by signal N`, once the process has exited (waits briefly).
async fn exit_status(child: &mut tokio::process::Child) -> String {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => format!(" with status {code}"),
                (None, Some(9)) => " killed by SIGKILL (a resource limit, or the host stopped it)".to_owned(),
                (None, Some(24)) => " killed by SIGXCPU (its CPU-time limit)".to_owned(),
                (None, Some(signal)) => format!(" killed by signal {signal}"),
                (None, None) => String::new(),
            }
        }
        _ => String::new(),
    }
}

fn with_stderr(message: String, stderr: &Stderr) -> String {
    match stderr.tail() {
        Some(tail) => format!("{message} (stderr: {tail})"),
        None => message,
    }
}

/// Log the server's stderr line by line at debug (servers print banners at every start;
/// `-v` or `SKILLHOST_LOG=guest=debug` shows them), up to `cap` bytes; keep reading (and
/// keep the tail, which crash messages quote) after that so the server never blocks on a
/// full pipe.
async fn drain_stderr(skill: SkillName, pipe: tokio::process::ChildStderr, state: Arc<Stderr>, cap: u64) {
    let mut reader = BufReader::new(pipe);
    let mut logged = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader).take(64 << 10).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end();
        state.push(line);
        if logged < cap {
            logged += line.len() as u64 + 1;
            tracing::debug!(target: "guest", skill = %skill, "{line}");
            if logged >= cap {
                tracing::warn!(target: "guest", skill = %skill, "stderr log cap of {cap} bytes reached; further lines are dropped");
            }
        }
    }
}

use tokio::io::AsyncReadExt as _;
