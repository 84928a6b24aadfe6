//! The egress proxy of a sandboxed skill: an HTTP/1.1 forward proxy on a Unix socket,
//! one per skill, applying the same [`SkillEgress`] as the wasm runtime's `wasi:http` gate.
//!
//! A skill run under bubblewrap has its own network namespace with only `lo`; the shim
//! ([`crate::shim`]) inside it listens on `127.0.0.1:<port>` and forwards each connection to
//! this proxy's socket, bound into the sandbox. The skill finds it through `HTTP_PROXY` /
//! `HTTPS_PROXY`.
//!
//! - `GET http://host:port/path` (absolute form, any method): checked, resolved once and
//!   pinned, sent with `Host` set to the checked authority, the response streamed back
//!   under the response cap and the deadlines. An `https://` URL works the same way (the
//!   proxy speaks TLS to the server).
//! - `CONNECT host:port`: checked as `https://host:port` (so only https rules open a
//!   tunnel), resolved once, the address checked, then bytes relayed both ways under
//!   [`TunnelLimits`].
//! - A refusal is `403 Forbidden` with a one-line body naming the skill, what was refused
//!   and how to allow it, plus a warning in the host log; a failure is 502 (504 for a
//!   timeout); a request that is not a proxy request is 400. Every request and tunnel is
//!   audited, naming the tools of the calls running at the time ([`ProxyCalls`]); each of
//!   those calls is told of a refusal, so that its result can say which rule to add.
//!
//! **Bounds.** The skill on the other side of the socket is not trusted to be polite, so
//! what the proxy holds for it is bounded ([`ProxyConfig`], [`NetConfig`](crate::NetConfig)):
//!
//! - connections: at most [`ProxyConfig::max_connections`] (64) open at once, requests,
//!   idle keep-alive connections and `CONNECT` tunnels together; one more is answered
//!   `503` naming the skill and the limit, and closed, without being read;
//! - heads: at most [`ProxyConfig::max_head_bytes`] (64 KiB, `431` beyond), sent within
//!   [`ProxyConfig::header_timeout`] (10 s, also the longest a keep-alive connection may
//!   sit idle); a slow or silent head is answered `408` and closed;
//! - bodies: a request takes one of the skill's request slots
//!   ([`NetConfig::max_concurrent_per_skill`](crate::NetConfig::max_concurrent_per_skill),
//!   8) and then room in the host-wide
//!   [`BodyBudget`](crate::BodyBudget) (64 MiB for all skills together) *before* its body
//!   is read, so a request waiting for either holds its socket and head, no body (the
//!   client's writes block). A body is at most 16 MiB (`413`), must arrive within
//!   [`ProxyConfig::body_timeout`] (10 s from its first read; `408` and closed beyond), and
//!   a body that finds no room in the budget within its wait (5 s) is answered `503`;
//! - tunnels: each counts as a connection and lives under [`TunnelLimits`] (idle, total
//!   time, bytes); they relay through a fixed buffer and hold no request body.
//!
//! So one skill's proxy holds at most 64 connections with a head each, plus its share of
//! the 64 MiB budget, whatever it sends.
//!
//! **Secrets.** The wasm gate adds a bound secret's header to requests for its hosts, so a
//! wasm skill never holds the value; the proxy does the same for the secrets its policy
//! binds ([`ProxyConfig::secrets`]): to a plain-HTTP request for their hosts, and to each
//! request of a `CONNECT` to one of their hosts, whose TLS it terminates with a leaf of
//! the host's egress CA ([`NetConfig::ca`](crate::NetConfig::ca); the sandbox trusts it
//! through its CA bundle) and checks as a plain request (`terminate`). A response echoing
//! a secret's value has it redacted before the skill reads it. Without a CA, a `CONNECT`
//! to a secret-bound host is refused, saying so, rather than sent without the secret. A
//! host with no secret bound is tunnelled: the proxy never sees its bytes.

use std::convert::Infallible;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use skillhost_core::{EgressOutcome, SecretBinding};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::{EgressError, SkillEgress, TunnelLimits};

/// The calls a sandboxed server is serving, shared by its proxy and the runtime that
/// sends them: the proxy names their tools in its audit rows (several, comma-separated,
/// when calls of different tools overlap; empty when the server sends a request between
/// calls) and hands each call the refusals made while it ran, for its result.
#[derive(Clone, Debug, Default)]
pub struct ProxyCalls {
    inner: Arc<parking_lot::Mutex<CallsInner>>,
}

#[derive(Debug, Default)]
struct CallsInner {
    next: u64,
    running: std::collections::BTreeMap<u64, RunningCall>,
}

#[derive(Debug)]
struct RunningCall {
    tool: String,
    refusals: Vec<String>,
    /// The span current when it began (the call's), parent of its requests' spans.
    span: tracing::Span,
}

/// One call in [`ProxyCalls`], from [`ProxyCalls::begin`] until dropped.
#[derive(Debug)]
pub struct ProxyCall {
    calls: ProxyCalls,
    id: u64,
}

impl ProxyCalls {
    /// A call of `tool` starts.
    pub fn begin(&self, tool: &str) -> ProxyCall {
        let mut inner = self.inner.lock();
        inner.next += 1;
        let id = inner.next;
        inner.running.insert(id, RunningCall { tool: tool.to_owned(), refusals: Vec::new(), span: tracing::Span::current() });
        ProxyCall { calls: self.clone(), id }
    }

    /// The tools of the calls running now, for an audit row.
    pub(crate) fn tools(&self) -> String {
        let inner = self.inner.lock();
        let mut tools: Vec<&str> = inner.running.values().map(|c| c.tool.as_str()).collect();
        tools.sort_unstable();
        tools.dedup();
        tools.join(",")
    }

    /// The span a request sent now belongs under: the running call's when exactly one
    /// runs; none between calls or when calls overlap (the server's requests carry no
    /// sign of which call sent them).
    fn span(&self) -> tracing::Span {
        let inner = self.inner.lock();
        match inner.running.values().collect::<Vec<_>>()[..] {
            [call] => call.span.clone(),
            _ => tracing::Span::none(),
        }
    }

    /// The egress refused a request while the calls running now ran.
    pub(crate) fn refused(&self, reason: &str) {
        for call in self.inner.lock().running.values_mut() {
            call.refusals.push(reason.to_owned());
        }
    }
}

impl ProxyCall {
    /// Why the proxy refused requests while this call ran (each reason names the rule that
    /// would allow it), oldest first.
    pub fn refusals(&self) -> Vec<String> {
        self.calls.inner.lock().running.get(&self.id).map(|c| c.refusals.clone()).unwrap_or_default()
    }
}

impl Drop for ProxyCall {
    fn drop(&mut self) {
        self.calls.inner.lock().running.remove(&self.id);
    }
}

/// How the proxy serves, and the bounds it holds a skill to (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Limits of each `CONNECT` tunnel. Default: [`TunnelLimits::default`].
    pub tunnel: TunnelLimits,
    /// Time a client has to send a request head, counted from when the proxy starts
    /// waiting for it (so a keep-alive connection idle this long is closed too); then it is
    /// answered `408` and closed. Default: 10 s.
    pub header_timeout: Duration,
    /// Time a client has to send a request body, counted from when the proxy starts
    /// reading it (once the request has the skill's slot and room in the host's body
    /// budget); then it is answered `408` and closed. Default: 10 s.
    pub body_timeout: Duration,
    /// Largest request head (request line and headers) in bytes; a larger one is answered
    /// `431` and closed. Default: 64 KiB (at least 8 KiB is used).
    pub max_head_bytes: usize,
    /// Connections one proxy (one skill) may have open at once: requests, idle keep-alive
    /// connections and `CONNECT` tunnels together. One more is answered `503` and closed.
    /// Default: 64.
    pub max_connections: usize,
    /// Secrets the proxy adds to requests for their hosts: plain-HTTP ones, and those of a
    /// `CONNECT` it terminates with the host's egress CA (refused without one). Default:
    /// none.
    pub secrets: Vec<SecretBinding>,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            tunnel: TunnelLimits::default(),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_head_bytes: 64 << 10,
            max_connections: 64,
            secrets: Vec::new(),
        }
    }
}

/// The smallest read buffer hyper accepts, so the least head cap.
pub(crate) const MIN_HEAD_BYTES: usize = 8192;

/// The proxy could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the egress proxy on {}: {source}", path.display())]
pub struct ProxyError {
    /// The socket path.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// A running egress proxy for one skill. Dropping it stops the proxy (open connections
/// and tunnels included) and removes its socket file.
#[derive(Debug)]
pub struct EgressProxy {
    path: PathBuf,
    stop: CancellationToken,
    calls: ProxyCalls,
}

/// What every connection's handler shares.
pub(crate) struct Shared {
    pub(crate) egress: SkillEgress,
    pub(crate) config: ProxyConfig,
    pub(crate) stop: CancellationToken,
    /// One permit per open connection (a `CONNECT` tunnel keeps its connection's).
    connections: Arc<Semaphore>,
    /// Whether a refused connection was logged as a warning yet (later ones are debug).
    warned_full: AtomicBool,
    pub(crate) calls: ProxyCalls,
}

pub(crate) type ProxyBody = UnsyncBoxBody<Bytes, EgressError>;

impl EgressProxy {
    /// Listen on the Unix socket `path` (which must not exist yet) and serve `egress`'s
    /// skill from a task of the current tokio runtime. The socket file gets the process's
    /// umask; put it in a directory only the host and the sandbox can reach.
    pub fn bind(path: impl AsRef<Path>, egress: SkillEgress, config: ProxyConfig) -> Result<Self, ProxyError> {
        let path = path.as_ref().to_owned();
        let fail = |source| ProxyError { path: path.clone(), source };
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(fail(std::io::Error::other("no tokio runtime; bind the proxy from inside one")));
        }
        let listener = UnixListener::bind(&path).map_err(fail)?;
        let stop = CancellationToken::new();
        let connections = Arc::new(Semaphore::new(config.max_connections.clamp(1, Semaphore::MAX_PERMITS)));
        let calls = ProxyCalls::default();
        let shared =
            Arc::new(Shared { egress, config, stop: stop.clone(), connections, warned_full: AtomicBool::new(false), calls: calls.clone() });
        tracing::debug!(skill = %shared.egress.skill(), socket = %path.display(), "egress proxy listening");
        tokio::spawn(accept(listener, shared));
        Ok(Self { path, stop, calls })
    }

    /// The calls its server is serving: register each with [`ProxyCalls::begin`] so that
    /// audit rows name its tool and it learns what was refused while it ran.
    pub fn calls(&self) -> ProxyCalls {
        self.calls.clone()
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept(listener: UnixListener, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            () = shared.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let Ok(slot) = shared.connections.clone().try_acquire_owned() else {
                    shared.refuse_connection(&stream);
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let stop = shared.stop.clone();
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(stream, shared, Arc::new(slot)) => {}
                    }
                });
            }
            Err(e) => {
                // Out of file descriptors, most likely: wait instead of spinning.
                tracing::warn!(skill = %shared.egress.skill(), "egress proxy cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serve one client connection (keep-alive: several requests, or one `CONNECT`), holding
/// its `slot` among the proxy's connections.
async fn serve(stream: UnixStream, shared: Arc<Shared>, slot: Arc<OwnedSemaphorePermit>) {
    let (header_timeout, max_head_bytes) = (shared.config.header_timeout, shared.config.max_head_bytes);
    // A second handle on the socket, to answer 408 when hyper gives up waiting for a head
    // (it closes the connection without a word).
    let spare = stream.as_fd().try_clone_to_owned().ok().map(std::os::unix::net::UnixStream::from);
    let skill = shared.egress.skill().clone();
    let service = hyper::service::service_fn(move |request| {
        let (shared, slot) = (shared.clone(), slot.clone());
        async move { Ok::<_, Infallible>(shared.handle(request, slot).await) }
    });
    let head_bytes = max_head_bytes.max(MIN_HEAD_BYTES);
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(head_bytes)
        .max_header_size(head_bytes)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    match result {
        Err(e) if e.is_timeout() => {
            tracing::debug!(%skill, "egress proxy connection sent no request head within {header_timeout:?}; closed");
            let line = format!(
                "skillhost egress proxy: skill `{skill}` sent no complete request head within {header_timeout:?}; the connection is closed (send the head at once, and open a connection only when there is a request to send)"
            );
            if let Some(spare) = &spare {
                // Non-blocking, like the socket: a client not reading loses the answer, not the proxy a task.
                let _ = (&*spare).write(&raw_answer("408 Request Timeout", &line));
            }
        }
        Err(e) => tracing::debug!(%skill, "egress proxy connection ended: {e}"),
        Ok(()) => {}
    }
}

/// A whole HTTP/1.1 answer with a one-line text body, closing the connection.
pub(crate) fn raw_answer(status: &str, line: &str) -> Vec<u8> {
    let body = format!("{line}\n");
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The skill's request body with [`ProxyConfig::body_timeout`], counted from its first
/// read (after the request has its slot and budget), so a slow sender is cut off.
pub(crate) struct TimedBody {
    pub(crate) body: Incoming,
    pub(crate) timeout: Duration,
    pub(crate) deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// A request body outlived [`ProxyConfig::body_timeout`].
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimeout(pub(crate) Duration);

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let timeout = this.timeout;
        let deadline = this.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout(timeout)))));
        }
        Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Shared {
    /// Answer a connection over [`ProxyConfig::max_connections`] with 503 and close it,
    /// without reading from it.
    fn refuse_connection(&self, stream: &UnixStream) {
        let (skill, max) = (self.egress.skill(), self.config.max_connections);
        let line = format!(
            "skillhost refused a connection of skill `{skill}` to its egress proxy: it already has {max} open (requests, idle keep-alive connections and CONNECT tunnels together), the most one skill may; reuse or close connections, or raise `ProxyConfig::max_connections`"
        );
        if self.warned_full.swap(true, Ordering::Relaxed) {
            tracing::debug!(%skill, "{line}");
        } else {
            tracing::warn!(%skill, "{line} (further refusals are logged at debug level)");
        }
        // Non-blocking: a fresh socket's buffer takes the answer, or the client loses it.
        let _ = stream.try_write(&raw_answer("503 Service Unavailable", &line));
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>, slot: Arc<OwnedSemaphorePermit>) -> Response<ProxyBody> {
        if request.method() == Method::CONNECT {
            return self.connect(request, slot).await;
        }
        let timeout = self.config.body_timeout;
        let request = request.map(|body| TimedBody { body, timeout, deadline: None });
        let uri = request.uri();
        if uri.scheme().is_none() || uri.authority().is_none() {
            let reason = format!(
                "`{} {uri}` is not a proxy request; send the absolute URL (`GET http://host/path`) or `CONNECT host:port`",
                request.method()
            );
            let audit = self.egress.audit(&self.calls.tools(), request.method().as_str());
            audit.record(crate::skill::redact(&uri.to_string()), None, EgressOutcome::Refused(reason.clone()), 0);
            return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: {reason}"));
        }
        self.forward(request).await
    }

    /// Send a checked-form request (absolute URI) through the skill's egress with the
    /// proxy's secrets, and answer with the response, hop-by-hop headers stripped and any
    /// echo of a secret's value redacted ([`crate::terminate::Redactor`]). Plain requests
    /// and the decrypted requests of a terminated `CONNECT` both come here.
    pub(crate) async fn forward(&self, mut request: Request<TimedBody>) -> Response<ProxyBody> {
        strip_hop_by_hop(request.headers_mut());
        let values = crate::terminate::SecretValues::read(&self.egress, &self.config.secrets);
        let redactor = crate::terminate::Redactor::of(&values);
        if !redactor.is_empty() {
            // A compressed body could carry the secret past the redactor, and so could a
            // part of one (two ranges, each with a piece of the value): the whole, plain.
            request.headers_mut().insert(header::ACCEPT_ENCODING, header::HeaderValue::from_static("identity"));
            request.headers_mut().remove(header::RANGE);
            request.headers_mut().remove(header::IF_RANGE);
        }
        let tools = self.calls.tools();
        let sent = self.egress.send_with(&tools, request, &self.config.secrets, &values);
        match tracing::Instrument::instrument(sent, self.calls.span()).await {
            Ok(response) => {
                let response = response.map(|body| body.boxed_unsync());
                // Redacted before the hop-by-hop headers go: the redactor refuses a
                // `Transfer-Encoding` it cannot read.
                let mut response = if redactor.is_empty() {
                    response
                } else {
                    match redactor.response(response) {
                        Ok(response) => response,
                        Err(e) => return self.error_redacted(e, &redactor),
                    }
                };
                strip_hop_by_hop(response.headers_mut());
                response
            }
            Err(e) => self.error_redacted(e, &redactor),
        }
    }

    /// The client's connection once hyper hands it over after a `CONNECT`'s 200, or `None`
    /// when the client left before.
    pub(crate) async fn upgraded(&self, request: Request<Incoming>, authority: &str) -> Option<TokioIo<hyper::upgrade::Upgraded>> {
        match hyper::upgrade::on(request).await {
            Ok(upgraded) => Some(TokioIo::new(upgraded)),
            Err(e) => {
                tracing::debug!(skill = %self.egress.skill(), "CONNECT {authority}: the client left before the tunnel opened: {e}");
                None
            }
        }
    }

    /// `CONNECT host:port`: open the tunnel, answer 200, then relay once hyper hands over
    /// the connection.
    async fn connect(self: Arc<Self>, request: Request<Incoming>, slot: Arc<OwnedSemaphorePermit>) -> Response<ProxyBody> {
        let Some(authority) = request.uri().authority().map(|a| a.to_string()) else {
            let reason = format!("`CONNECT {}` names no `host:port`", request.uri());
            return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: {reason}"));
        };
        let target = self.egress.policy().check_url(&format!("https://{authority}")).ok();
        let bound = |s: &&SecretBinding| target.as_ref().is_some_and(|t| s.hosts.iter().any(|rule| rule.matches(t)));
        if let Some(secret) = self.config.secrets.iter().find(bound) {
            if let (Some(ca), Some(target)) = (&self.egress.net().ca, &target) {
                return crate::terminate::accept(self.clone(), request, slot, ca, target.clone(), authority);
            }
            let reason = format!(
                "`CONNECT {authority}`: secret `{}` is bound to this host and the proxy cannot add its header inside TLS; reach it over plain http:// (the proxy adds the secret), or remove the secret from the skill's policy",
                secret.name
            );
            let audit = self.egress.audit(&self.calls.tools(), "CONNECT");
            return self.error(crate::SkillEgress::deny(&audit, format!("https://{authority}"), reason));
        }
        let tools = self.calls.tools();
        let opened = self.egress.open_tunnel(&tools, &authority);
        let tunnel = match tracing::Instrument::instrument(opened, self.calls.span()).await {
            Ok(tunnel) => tunnel,
            Err(e) => return self.error(e),
        };
        let (shared, limits) = (self.clone(), self.config.tunnel);
        tokio::spawn(async move {
            // The tunnel counts among the proxy's connections until it ends.
            let _slot = slot;
            let Some(client) = shared.upgraded(request, &authority).await else { return };
            tokio::select! {
                () = shared.stop.cancelled() => {}
                result = tunnel.relay(client, limits) => if let Err(e) = result {
                    tracing::warn!(skill = %shared.egress.skill(), "tunnel to {authority} closed: {e}");
                }
            }
        });
        Response::new(empty())
    }

    /// The answer to a request the egress refused or could not complete.
    pub(crate) fn error(&self, error: EgressError) -> Response<ProxyBody> {
        self.error_redacted(error, &crate::terminate::Redactor::default())
    }

    /// [`error`](Self::error) with `redactor`'s values replaced in what it says and logs:
    /// an error may quote what a secret-bound server sent (a header, the names of its
    /// certificate), so it may hold a secret's value.
    pub(crate) fn error_redacted(&self, error: EgressError, redactor: &crate::terminate::Redactor) -> Response<ProxyBody> {
        let skill = self.egress.skill();
        if let EgressError::Denied { reason } = &error {
            let reason = redactor.text(reason);
            tracing::warn!(%skill, "outbound request refused: {reason}");
            self.calls.refused(&reason);
            return text(StatusCode::FORBIDDEN, format!("skillhost refused a request of skill `{skill}`: {reason}"));
        }
        let (status, close) = match &error {
            // The skill's body was not read whole: the connection cannot carry another request.
            EgressError::RequestBodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, true),
            EgressError::RequestBodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, true),
            EgressError::BodyBudget { .. } => (StatusCode::SERVICE_UNAVAILABLE, true),
            EgressError::RequestBody { .. } => (StatusCode::BAD_REQUEST, true),
            EgressError::ResolveTimeout { .. }
            | EgressError::ConnectTimeout { .. }
            | EgressError::FirstByteTimeout(_)
            | EgressError::TotalTimeout(_)
            | EgressError::IdleTimeout(_) => (StatusCode::GATEWAY_TIMEOUT, false),
            EgressError::InvalidRequest { .. } => (StatusCode::BAD_REQUEST, false),
            _ => (StatusCode::BAD_GATEWAY, false),
        };
        let error = redactor.text(&error.to_string());
        if close {
            tracing::warn!(%skill, "outbound request refused: {error}");
        } else {
            tracing::debug!(%skill, "outbound request failed: {error}");
        }
        let mut response = text(status, format!("skillhost could not complete a request of skill `{skill}`: {error}"));
        if close {
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
        }
        response
    }
}

/// A one-line plain-text answer.
pub(crate) fn text(status: StatusCode, line: String) -> Response<ProxyBody> {
    let mut response = Response::new(Full::new(Bytes::from(line + "\n")).map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn empty() -> ProxyBody {
    http_body_util::Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// Remove the headers that describe one hop, not the message: those a proxy must not
/// forward (RFC 9110 section 7.6.1), including any named by `Connection`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}
