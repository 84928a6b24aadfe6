//! MCP over streamable HTTP: rmcp's `StreamableHttpService` behind hyper, with a bearer
//! token in front.
//!
//! Every request must carry `Authorization: Bearer TOKEN`, the operator's token, a
//! caller's own or (with [`HttpConfig::oauth`]) an OAuth access token
//! ([`crate::access::Authenticator`]), or gets 401, on loopback too: any local process (another user's, a browser extension's
//! helper, a compromised tool) can reach 127.0.0.1, and the front offers `skill_create`
//! and the approval questions. [`load_or_create_token`] keeps a generated token in a
//! file only its owner can read (`skillhost serve --http` uses `DATA_DIR/http-token`).
//! With OAuth, the protected-resource metadata (RFC 9728) is served without a token at
//! `/.well-known/oauth-protected-resource` (and under the resource's path), and every 401
//! names it (`WWW-Authenticate: Bearer resource_metadata="…"`), as the MCP authorization
//! specification asks.
//! Defaults are for a local agent: listen on 127.0.0.1, accept only loopback `Host`
//! headers and loopback browser `Origin`s (against DNS rebinding).
//!
//! A request body is at most [`MAX_MESSAGE_BYTES`], as on stdio: a longer one gets a 413
//! whose body is a JSON-RPC error naming the limit, refused by its `Content-Length` before
//! a byte is read, or (chunked) as soon as what was read passes the limit.
//!
//! Draining ([`HttpConfig::drain`], [`Drain::start`]): every new request is answered 503
//! with `Retry-After: 1` and a JSON-RPC error saying the replica is draining, before any
//! of it runs; the requests already taken (counted until their response body ends, an
//! SSE stream of a call included) finish. The notification stream a client keeps open
//! (`GET /mcp`) is not counted: it ends when the server stops.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use serde_json::Value;
use skillhost_registry::CallerStore;

use crate::access::{Authenticator, OAuthFront, Unauthenticated};
use crate::ops::{Drain, InFlight};
use crate::quota::{Held, OverQuota, QuotaConfig, Quotas};
use crate::{MAX_MESSAGE_BYTES, McpError, SkillhostMcp};

/// Connections the MCP listener serves at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 1024;

/// How the HTTP transport listens.
#[derive(Clone)]
pub struct HttpConfig {
    /// Where to listen. Default: 127.0.0.1:8787.
    pub addr: SocketAddr,
    /// The operator's bearer token (its holder is the caller `operator`). Required:
    /// [`serve_http`] refuses to start without one ([`load_or_create_token`] makes one).
    pub token: Option<String>,
    /// The callers with tokens of their own (`skillhost caller add`), looked up by
    /// their tokens' hashes at every request. Default: none (only the operator's token).
    pub callers: Option<Arc<dyn CallerStore>>,
    /// OAuth access tokens accepted as well, checked against the issuer's keys. Default:
    /// none.
    pub oauth: Option<OAuthFront>,
    /// Each caller's limits on tool calls (`[quotas]`). Default: none.
    pub quotas: QuotaConfig,
    /// `Host` values accepted besides loopback names (for a public name or address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides loopback ones (`https://app.example.com:443`).
    pub allowed_origins: Vec<String>,
    /// Also publish the approved instruction-only skills as an Agent Skills well-known
    /// index (`GET /.well-known/agent-skills/…`, no token asked for those reads).
    pub publish_skills: bool,
    /// The graceful stop: once started, new requests are refused 503 and those taken are
    /// counted until answered (see the module's doc). Default: a drain never started.
    pub drain: Drain,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("callers", &self.callers.is_some())
            .field("oauth", &self.oauth.as_ref().map(|o| o.server.settings()))
            .field("quotas", &self.quotas)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("publish_skills", &self.publish_skills)
            .finish_non_exhaustive()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8787)),
            token: None,
            callers: None,
            oauth: None,
            quotas: QuotaConfig::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            publish_skills: false,
            drain: Drain::default(),
        }
    }
}

/// Characters an operator's token must have, at least, to guard a listener off loopback.
pub const MIN_REMOTE_TOKEN_CHARS: usize = 32;

/// Whether `token` may guard a listener on `addr`: there must be one; off loopback it must
/// be at least [`MIN_REMOTE_TOKEN_CHARS`] long; and never a template's placeholder left in.
fn check_token(addr: SocketAddr, token: Option<&str>) -> Result<(), McpError> {
    let loopback = addr.ip().is_loopback();
    let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) else {
        let why = if loopback { "(loopback included: any local process can connect)" } else { "(not loopback)" };
        return Err(McpError::Config(format!(
            "listening on {addr} {why} needs a bearer token: pass --token-file FILE or set SKILLHOST_MCP_TOKEN (on loopback, `skillhost serve --http` makes one in DATA_DIR/http-token)"
        )));
    };
    let make = "make one with `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`";
    if token.to_ascii_uppercase().contains("CHANGE-ME") {
        return Err(McpError::Config(format!("the bearer token is still the template's placeholder (CHANGE-ME): {make}")));
    }
    if !loopback && token.chars().count() < MIN_REMOTE_TOKEN_CHARS {
        return Err(McpError::Config(format!(
            "listening on {addr} (not loopback) needs a bearer token of at least {MIN_REMOTE_TOKEN_CHARS} characters, this one has {}: {make}",
            token.chars().count()
        )));
    }
    Ok(())
}

/// Serve MCP over streamable HTTP until `shutdown` is cancelled. Each MCP session gets
/// its own [`SkillhostMcp::session`]. `ready` receives the bound address (useful with
/// port 0).
pub async fn serve_http(
    server: SkillhostMcp,
    config: HttpConfig,
    shutdown: CancellationToken,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), McpError> {
    check_token(config.addr, config.token.as_deref())?;
    if let Some(callers) = &config.callers {
        callers.ready().map_err(McpError::Callers)?;
    }
    let listener = tokio::net::TcpListener::bind(config.addr).await.map_err(|source| McpError::Listen { addr: config.addr, source })?;
    let bound = listener.local_addr().map_err(|source| McpError::Listen { addr: config.addr, source })?;
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned(), "[::1]".to_owned()];
    hosts.push(bound.ip().to_string());
    hosts.extend(config.allowed_hosts.iter().cloned());
    let mut origins = vec!["http://localhost:*".to_owned(), "http://127.0.0.1:*".to_owned(), "http://[::1]:*".to_owned()];
    origins.extend(config.allowed_origins.iter().cloned());
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        // Bodies are bounded before rmcp reads them (`bounded`); its own limit must not be lower.
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
        .with_cancellation_token(shutdown.child_token());
    let published = config.publish_skills.then(|| server.registry().clone());
    let service =
        StreamableHttpService::new(move || Ok(server.session()), std::sync::Arc::new(LocalSessionManager::default()), rmcp_config);
    let front = Arc::new(Front {
        service,
        authenticator: Authenticator::new(config.token.as_deref().unwrap_or_default(), config.callers.clone(), config.oauth.clone()),
        drain: config.drain.clone(),
        quotas: Quotas::new(config.quotas.clone()),
    });
    tracing::info!(
        addr = %bound,
        callers = config.callers.is_some(),
        oauth = config.oauth.is_some(),
        quotas = !config.quotas.is_empty(),
        "serving MCP over streamable HTTP at /mcp"
    );
    if let Some(ready) = ready {
        let _ = ready.send(bound);
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Some((stream, peer, slot)) = accept(&listener, &shutdown, "an MCP", &slots).await else { return Ok(()) };
        let front = front.clone();
        let stop = shutdown.clone();
        let published = published.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let front = front.clone();
                let published = published.clone();
                async move {
                    if let Some(registry) = published.as_deref().filter(|_| well_known(&request)) {
                        return Ok::<_, Infallible>(well_known_response(registry, request.uri().path()));
                    }
                    Ok::<_, Infallible>(front.handle(request).await)
                }
            });
            let connection = connection_builder().serve_connection(TokioIo::new(stream), handler);
            tokio::select! {
                result = connection => if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "MCP HTTP connection ended with an error");
                },
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// Time a client has to send a request's head, from when the server starts waiting for it
/// (on a kept-alive connection too); then the connection is closed.
pub(crate) const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How every listener serves a connection: HTTP/1.1 whose request heads must arrive within
/// [`HEADER_TIMEOUT`] (a client that opens connections and sends nothing, or a byte at a
/// time, holds none of them longer).
pub(crate) fn connection_builder() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    builder
}

/// The next connection of `listener` (`what` names it in a warning), with `TCP_NODELAY`
/// set, once one of `slots` is free (it is the connection's until dropped: past the cap,
/// new connections wait in the kernel's backlog); `None` once `shutdown` is cancelled. An
/// answer leaves in more than one write (headers, then body or events): without
/// `TCP_NODELAY`, Nagle's algorithm holds the last one back until the client's delayed
/// ACK (40 ms) on a kept-alive connection.
pub(crate) async fn accept(
    listener: &tokio::net::TcpListener,
    shutdown: &CancellationToken,
    what: &str,
    slots: &Arc<tokio::sync::Semaphore>,
) -> Option<(tokio::net::TcpStream, SocketAddr, tokio::sync::OwnedSemaphorePermit)> {
    let slot = tokio::select! {
        () = shutdown.cancelled() => return None,
        slot = slots.clone().acquire_owned() => slot.ok()?,
    };
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting {what} connection failed");
                    continue;
                }
            },
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
        }
        return Some((stream, peer, slot));
    }
}

type Service = StreamableHttpService<SkillhostMcp, LocalSessionManager>;

/// Whether `request` reads the well-known skills index (a `GET` under its path).
fn well_known<B>(request: &hyper::Request<B>) -> bool {
    request.method() == hyper::Method::GET && request.uri().path().starts_with(skillhost_package::wellknown::WELL_KNOWN)
}

fn well_known_response(registry: &skillhost_registry::Registry, path: &str) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let (status, content_type, body) = crate::wellknown::respond(registry, path);
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    response
}

/// Who sent an HTTP request, for binding approval questions to the asker: its MCP
/// session when it has one (`Mcp-Session-Id`), else its caller (a 2026-07-28 client has
/// no session; every holder of the caller's token is then one asker).
#[derive(Clone, Debug)]
pub(crate) struct Principal(pub String);

/// What every request of the listener goes through: who sent it, whether the replica
/// still takes requests, the caller's quotas, then rmcp.
struct Front {
    service: Service,
    authenticator: Authenticator,
    drain: Drain,
    quotas: Arc<Quotas>,
}

impl Front {
    async fn handle(&self, request: hyper::Request<Incoming>) -> hyper::Response<BoxBody<Bytes, Infallible>> {
        if let Some(metadata) = protected_resource_metadata(&self.authenticator, &request) {
            return metadata;
        }
        let authorization = request.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes());
        let caller = match self.authenticator.authenticate(authorization).await {
            Ok(caller) => caller,
            Err(refused) => return unauthorized(&self.authenticator, &refused),
        };
        // The notification stream (GET) stays open as long as the client: not counted, and
        // refused like the rest once draining.
        let counted = request.method() != hyper::Method::GET;
        let in_flight = match self.drain.enter() {
            Some(in_flight) => in_flight,
            None => return draining(request).await,
        };
        let (mut request, body) = match bounded(request).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        let quota = match self.quotas.admit(&caller.name, &body) {
            Ok(held) => held,
            Err(over) => return over_quota(&caller.name, &over, &body),
        };
        // Bound to its caller too: a session id another caller learned asks nothing of it.
        let principal = match request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            Some(session) => format!("http-session:{}:{}:{session}", caller.via.as_str(), caller.name),
            None => format!("http-caller:{}:{}", caller.via.as_str(), caller.name),
        };
        request.extensions_mut().insert(Principal(principal));
        request.extensions_mut().insert(caller);
        let response = self.service.handle(request).await;
        if !counted {
            return response;
        }
        // Counted until the response body ends: a call answered over SSE is in flight
        // until then, for the drain and for the caller's quota.
        response.map(|body| Counted { body, _in_flight: in_flight, _quota: quota }.boxed())
    }
}

/// The JSON-RPC error code of a call refused by the caller's quota (implementation-defined
/// server error range).
pub(crate) const QUOTA_CODE: i32 = -32029;

/// The 429 answering a request over `caller`'s quota: `Retry-After`, and a JSON-RPC error
/// for the request's id saying what was refused, when to come back and who can raise it.
fn over_quota(caller: &str, over: &OverQuota, body: &[u8]) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut scan = crate::transport::IdScan::default();
    scan.feed(body);
    let retry = over.retry_after_seconds();
    tracing::warn!(caller, ?over, "refused a tool call over the caller's quota");
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": scan.id(),
        "error": {
            "code": QUOTA_CODE,
            "message": over.describe(caller),
            "data": {"retriable": true, "retry_after_seconds": retry},
        },
    });
    let mut response = hyper::Response::new(Full::new(Bytes::from(answer.to_string())).boxed());
    *response.status_mut() = hyper::StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    headers.insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from(retry));
    response
}

/// The protected-resource metadata, when `request` asks for it (a `GET` of its path, or of
/// the bare well-known path a client tries next).
fn protected_resource_metadata<B>(
    authenticator: &Authenticator,
    request: &hyper::Request<B>,
) -> Option<hyper::Response<BoxBody<Bytes, Infallible>>> {
    let server = authenticator.oauth()?;
    let path = request.uri().path();
    if request.method() != hyper::Method::GET || (path != server.metadata_path() && path != skillhost_access::oauth::METADATA_PATH) {
        return None;
    }
    let mut response = hyper::Response::new(Full::new(Bytes::from(server.metadata().to_string())).boxed());
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Some(response)
}

/// The 401 for `refused`: `WWW-Authenticate: Bearer`, with `error="invalid_token"` when a
/// token was sent, and the metadata's URL when the front takes OAuth access tokens.
fn unauthorized(authenticator: &Authenticator, refused: &Unauthenticated) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let description = refused.description();
    let mut response = hyper::Response::new(Full::new(Bytes::from(format!("{description}\n"))).boxed());
    *response.status_mut() = hyper::StatusCode::UNAUTHORIZED;
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(hyper::header::X_CONTENT_TYPE_OPTIONS, hyper::header::HeaderValue::from_static("nosniff"));
    let mut params = Vec::new();
    if let Some(server) = authenticator.oauth() {
        params.push(format!("resource_metadata=\"{}\"", server.metadata_url()));
    }
    if !matches!(refused, Unauthenticated::Missing) {
        // RFC 6750 3: printable ASCII without `"` and `\\`.
        let shown: String =
            description.chars().map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '\'' }).collect();
        params.push("error=\"invalid_token\"".to_owned());
        params.push(format!("error_description=\"{shown}\""));
    }
    let challenge = if params.is_empty() { "Bearer".to_owned() } else { format!("Bearer {}", params.join(", ")) };
    if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A response body holding its request's place in the [`Drain`] count, and its calls'
/// places in the caller's quota, until it ends or is dropped.
struct Counted {
    body: BoxBody<Bytes, Infallible>,
    _in_flight: InFlight,
    _quota: Option<Held>,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The 503 answering `request` while the replica drains: `Retry-After: 1` and a JSON-RPC
/// error (with the request's id when its first bytes hold it) saying that nothing of it
/// ran and that it may be sent again.
async fn draining(request: hyper::Request<Incoming>) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut scan = crate::transport::IdScan::default();
    let mut body = request.into_body();
    let mut read = 0usize;
    while read < MAX_MESSAGE_BYTES {
        let Some(Ok(frame)) = body.frame().await else { break };
        let Ok(data) = frame.into_data() else { continue };
        let take = data.len().min(MAX_MESSAGE_BYTES - read);
        scan.feed(&data[..take]);
        read += take;
    }
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": scan.id(),
        "error": {
            "code": DRAINING_CODE,
            "message": "this skillhost replica is draining (shutting down) and took none of this request; nothing of it ran: send it again (a load balancer sends it to another replica)",
            "data": {"retriable": true, "retry_after_seconds": 1},
        },
    });
    let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    headers.insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
    headers.insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    response
}

/// The JSON-RPC error code of a request refused while draining (implementation-defined
/// server error range).
const DRAINING_CODE: i64 = -32001;

/// `request` with its body read whole, when it is no longer than [`MAX_MESSAGE_BYTES`];
/// else a 413 whose body is the JSON-RPC error saying so: at once for a `Content-Length`
/// over it (nothing of the body is read), and as soon as what was read passes it, with
/// the request's id when that part holds it.
async fn bounded(
    request: hyper::Request<Incoming>,
) -> Result<(hyper::Request<Full<Bytes>>, Bytes), hyper::Response<BoxBody<Bytes, Infallible>>> {
    let declared = request.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if let Some(declared) = declared.filter(|&n| n > MAX_MESSAGE_BYTES as u64) {
        return Err(too_large(Value::Null, declared.try_into().unwrap_or(usize::MAX), true));
    }
    let (parts, mut body) = request.into_parts();
    let mut read = bytes::BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            let mut response = hyper::Response::new(Full::new(Bytes::from(format!("cannot read the request body: {e}\n"))).boxed());
            *response.status_mut() = hyper::StatusCode::BAD_REQUEST;
            response
        })?;
        let Ok(data) = frame.into_data() else { continue };
        if read.len() + data.len() > MAX_MESSAGE_BYTES {
            let mut scan = crate::transport::IdScan::default();
            scan.feed(&read);
            scan.feed(&data[..MAX_MESSAGE_BYTES - read.len()]);
            return Err(too_large(scan.id(), read.len() + data.len(), false));
        }
        read.extend_from_slice(&data);
    }
    let read = read.freeze();
    Ok((hyper::Request::from_parts(parts, Full::new(read.clone())), read))
}

/// The 413 answering a body of `size` bytes (`exact`, or at least that many), `id` its
/// request's id.
fn too_large(id: Value, size: usize, exact: bool) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    tracing::warn!(bytes = size, limit = MAX_MESSAGE_BYTES, %id, "refused an MCP request body over the size limit");
    let body = crate::transport::too_long_error(id, Some((size, exact))).to_string();
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = hyper::StatusCode::PAYLOAD_TOO_LARGE;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// The bearer token kept in `path`: read when the file exists, else made (32 random
/// bytes from the OS, as 64 hex digits) and written with mode 0600, never replacing a
/// file another process wrote first. A symlink, anything but a regular file, a file of
/// another user, or one its group or others can read is refused with how to fix it: a
/// token others can read lets them in.
pub fn load_or_create_token(path: &Path) -> Result<String, McpError> {
    token_file(path, true)
}

/// The bearer token in `path`, a file someone else made (`--token-file`): the same checks
/// as [`load_or_create_token`], and a missing file is an error.
pub fn read_token_file(path: &Path) -> Result<String, McpError> {
    token_file(path, false)
}

fn token_file(path: &Path, create: bool) -> Result<String, McpError> {
    use rustix::fs::{Mode, OFlags};
    let fail = |what: String| McpError::Config(format!("token file {}: {what}", path.display()));
    for _ in 0..3 {
        match rustix::fs::open(path, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY, Mode::empty()) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd).map_err(|e| fail(format!("cannot read it: {e}")))?;
                let mode = stat.st_mode;
                if rustix::fs::FileType::from_raw_mode(mode) != rustix::fs::FileType::RegularFile {
                    return Err(fail("not a regular file; remove it and start again to make a new token".to_owned()));
                }
                if stat.st_uid != rustix::process::geteuid().as_raw() {
                    return Err(fail(format!(
                        "owned by uid {}, not by this user; remove it and start again to make a new token",
                        stat.st_uid
                    )));
                }
                if mode & 0o077 != 0 {
                    return Err(fail(format!(
                        "readable by others (mode {:o}); run `chmod 600 {}`, and consider the token leaked: remove the file to make a new one",
                        mode & 0o777,
                        path.display()
                    )));
                }
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).map_err(|e| fail(format!("cannot read it: {e}")))?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(fail("it is empty; remove it and start again to make a new token".to_owned()));
                }
                return Ok(token.to_owned());
            }
            Err(rustix::io::Errno::LOOP) => {
                return Err(fail("it is a symlink, which is never followed; remove it and start again to make a new token".to_owned()));
            }
            Err(rustix::io::Errno::NOENT) if create => {}
            Err(e) => return Err(fail(format!("cannot open it: {e}"))),
        }
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .map_err(|_| fail("the OS random source failed; pass --token-file FILE instead".to_owned()))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => {
                let mut file = std::fs::File::from(fd);
                std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| fail(format!("cannot write it: {e}")))?;
                return Ok(token);
            }
            // Another process made it first: read theirs.
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(fail(format!("cannot create it: {e}"))),
        }
    }
    Err(fail("it keeps appearing and disappearing; check what else writes to it".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::load_or_create_token;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_token_file_is_made_private_and_refused_when_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("http-token");
        let token = load_or_create_token(&path).unwrap();
        assert_eq!(token.len(), 64, "32 bytes as hex");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load_or_create_token(&path).unwrap(), token, "reused after");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create_token(&path).unwrap_err().to_string();
        assert!(err.contains("readable by others") && err.contains("chmod 600"), "{err}");

        let link = dir.path().join("linked-token");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = load_or_create_token(&link).unwrap_err().to_string();
        assert!(err.contains("symlink"), "{err}");
        std::fs::write(dir.path().join("empty"), "").unwrap();
        std::fs::set_permissions(dir.path().join("empty"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load_or_create_token(&dir.path().join("empty")).unwrap_err().to_string().contains("empty"));
    }
}
