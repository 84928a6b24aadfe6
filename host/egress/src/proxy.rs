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
//!   audited.
//!
//! **Secrets differ from the wasm gate.** The gate adds a bound secret's header to
//! requests for its hosts, so a wasm skill never holds the value. Through `CONNECT` the
//! proxy only sees TLS bytes and cannot add a header, and injecting into plain-HTTP
//! requests alone would be a half measure, so the proxy never injects secrets. A
//! sandboxed skill that declares a secret receives its value from the sandbox runtime
//! (an environment variable); its rules still decide where the skill can send it.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use skillhost_core::EgressOutcome;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use crate::{EgressError, SkillEgress, TunnelLimits};

/// The tool named in the audit rows of a sandboxed skill's requests: empty, because the
/// proxy serves the skill's process, not one call.
const TOOL: &str = "";

/// How the proxy serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Limits of each `CONNECT` tunnel. Default: [`TunnelLimits::default`].
    pub tunnel: TunnelLimits,
    /// Time a client has to send a request head. Default: 30 s.
    pub header_timeout: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self { tunnel: TunnelLimits::default(), header_timeout: Duration::from_secs(30) }
    }
}

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
}

/// What every connection's handler shares.
struct Shared {
    egress: SkillEgress,
    config: ProxyConfig,
    stop: CancellationToken,
}

type ProxyBody = UnsyncBoxBody<Bytes, EgressError>;

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
        let shared = Arc::new(Shared { egress, config, stop: stop.clone() });
        tracing::debug!(skill = %shared.egress.skill(), socket = %path.display(), "egress proxy listening");
        tokio::spawn(accept(listener, shared));
        Ok(Self { path, stop })
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
                let shared = shared.clone();
                tokio::spawn(async move {
                    let stop = shared.stop.clone();
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = serve(stream, shared) => {}
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

/// Serve one client connection (keep-alive: several requests, or one `CONNECT`).
async fn serve(stream: UnixStream, shared: Arc<Shared>) {
    let header_timeout = shared.config.header_timeout;
    let service = hyper::service::service_fn(move |request| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(shared.handle(request).await) }
    });
    let result = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = result {
        tracing::debug!("egress proxy connection ended: {e}");
    }
}

impl Shared {
    async fn handle(self: Arc<Self>, mut request: Request<Incoming>) -> Response<ProxyBody> {
        if request.method() == Method::CONNECT {
            return self.connect(request).await;
        }
        let uri = request.uri();
        if uri.scheme().is_none() || uri.authority().is_none() {
            let reason = format!(
                "`{} {uri}` is not a proxy request; send the absolute URL (`GET http://host/path`) or `CONNECT host:port`",
                request.method()
            );
            let audit = self.egress.audit(TOOL, request.method().as_str());
            audit.record(crate::skill::redact(&uri.to_string()), None, EgressOutcome::Refused(reason.clone()), 0);
            return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: {reason}"));
        }
        strip_hop_by_hop(request.headers_mut());
        match self.egress.send(TOOL, request, &[]).await {
            Ok(response) => {
                let mut response = response.map(|body| body.boxed_unsync());
                strip_hop_by_hop(response.headers_mut());
                response
            }
            Err(e) => self.error(e),
        }
    }

    /// `CONNECT host:port`: open the tunnel, answer 200, then relay once hyper hands over
    /// the connection.
    async fn connect(self: Arc<Self>, request: Request<Incoming>) -> Response<ProxyBody> {
        let Some(authority) = request.uri().authority().map(|a| a.to_string()) else {
            let reason = format!("`CONNECT {}` names no `host:port`", request.uri());
            return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: {reason}"));
        };
        let tunnel = match self.egress.open_tunnel(TOOL, &authority).await {
            Ok(tunnel) => tunnel,
            Err(e) => return self.error(e),
        };
        let (shared, limits) = (self.clone(), self.config.tunnel);
        tokio::spawn(async move {
            let client = match hyper::upgrade::on(request).await {
                Ok(upgraded) => TokioIo::new(upgraded),
                Err(e) => {
                    tracing::debug!(skill = %shared.egress.skill(), "CONNECT {authority}: the client left before the tunnel opened: {e}");
                    return;
                }
            };
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
    fn error(&self, error: EgressError) -> Response<ProxyBody> {
        let skill = self.egress.skill();
        if let EgressError::Denied { reason } = &error {
            tracing::warn!(%skill, "outbound request refused: {reason}");
            return text(StatusCode::FORBIDDEN, format!("skillhost refused a request of skill `{skill}`: {reason}"));
        }
        let status = match &error {
            EgressError::ResolveTimeout { .. }
            | EgressError::ConnectTimeout { .. }
            | EgressError::FirstByteTimeout(_)
            | EgressError::TotalTimeout(_)
            | EgressError::IdleTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            EgressError::RequestBodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            EgressError::RequestBody { .. } | EgressError::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        tracing::debug!(%skill, "outbound request failed: {error}");
        text(status, format!("skillhost could not complete a request of skill `{skill}`: {error}"))
    }
}

/// A one-line plain-text answer.
fn text(status: StatusCode, line: String) -> Response<ProxyBody> {
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
