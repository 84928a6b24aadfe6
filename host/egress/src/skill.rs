//! [`SkillEgress`]: one skill's way out, shared by every runtime (the wasm gate calls
//! [`SkillEgress::send`], the sandbox proxy `send` and [`SkillEgress::open_tunnel`]), and
//! the [`CappedBody`] of its responses.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HOST, HeaderName, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use skillhost_core::egress::{Scheme, Target, TargetHost};
use skillhost_core::{EgressOutcome, EgressPolicy, SecretBinding, SecretSource, SkillName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::audit::{Audit, PendingRecord};
use crate::budget::{Reservation, Shortfall};
use crate::{EgressError, NetConfig};

/// Largest request body the host sends for a skill.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// One skill's egress: its rules, the host's network services and its concurrency slots.
/// Cheap to clone; clones share the slots. A request goes:
///
/// 1. the URL is normalised and checked against the skill's [`EgressPolicy`] (deny wins,
///    userinfo refused, IDN/IP forms normalised);
/// 2. bound secrets are looked up before anything leaves the host (a missing one refuses);
/// 3. a name is resolved once, by the host; loopback/private results are refused unless
///    allowed; the connection goes to the address that was checked (no second lookup, so
///    no DNS rebinding), with TLS (SNI and certificate for the checked name) for https;
/// 4. `Host` is set to the checked authority, whatever the skill sent;
/// 5. connect, first-byte and total timeouts apply, the response body is capped
///    ([`CappedBody`]), and concurrent requests per skill are limited;
/// 6. redirects are not followed: the skill sees the 3xx, and its next request is checked
///    again;
/// 7. a connection whose response was read to its end is kept for a while ([`Pool`]) and
///    reused by the skill's next request that passed every step above to the same
///    address, name, port and scheme: never by another skill, never to an address not
///    checked for that request;
/// 8. every request, refused or not, is written to the audit log.
#[derive(Clone)]
pub struct SkillEgress {
    skill: SkillName,
    policy: Arc<EgressPolicy>,
    net: Arc<NetConfig>,
    permits: Arc<Semaphore>,
    /// Its idle connections, for its next requests to the same checked address.
    pool: Arc<Pool>,
}

impl std::fmt::Debug for SkillEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillEgress").field("skill", &self.skill).field("policy", &self.policy).finish_non_exhaustive()
    }
}

/// A stream to a server: TCP, or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static> Stream for T {}

impl SkillEgress {
    /// The egress of `skill`, under `policy`, through `net`. It may have
    /// [`NetConfig::max_concurrent_per_skill`] requests and tunnels open at once.
    pub fn new(skill: SkillName, policy: Arc<EgressPolicy>, net: Arc<NetConfig>) -> Self {
        let permits = Arc::new(Semaphore::new(net.max_concurrent_per_skill.max(1)));
        Self { skill, policy, net, permits, pool: Arc::default() }
    }

    /// The skill.
    pub fn skill(&self) -> &SkillName {
        &self.skill
    }

    /// Its rules.
    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// The host's network services and limits.
    pub fn net(&self) -> &NetConfig {
        &self.net
    }

    pub(crate) fn audit(&self, tool: &str, method: &str) -> Audit {
        Audit::start(self.net.audit.clone(), self.skill.as_str(), tool, method)
    }

    /// Refuse: audit and return the reason.
    pub(crate) fn deny(audit: &Audit, url: String, reason: String) -> EgressError {
        audit.record(url, None, EgressOutcome::Refused(reason.clone()), 0);
        EgressError::Denied { reason }
    }

    /// Audit a failure and return it.
    pub(crate) fn failed(audit: &Audit, url: String, ip: Option<IpAddr>, bytes_out: u64, error: EgressError) -> EgressError {
        audit.record(url, ip, EgressOutcome::Failed(error.to_string()), bytes_out);
        error
    }

    /// Check `url` against the rules (before any DNS); a refusal is audited.
    pub(crate) fn check(&self, audit: &Audit, url: &str) -> Result<Target, EgressError> {
        self.policy.check_url(url).map_err(|denial| Self::deny(audit, redact(url), denial.to_string()))
    }

    /// The address to connect to: an IP literal as it is (its rule named it), a name
    /// resolved once and checked; a refusal or failure is audited.
    pub(crate) async fn resolve(&self, audit: &Audit, target: &Target, url: &str) -> Result<IpAddr, EgressError> {
        let name = match &target.host {
            TargetHost::Ip(ip) => return Ok(*ip),
            TargetHost::Name(name) => name,
        };
        let addrs = match tokio::time::timeout(self.net.connect_timeout, self.net.resolver.resolve(name, target.port)).await {
            Ok(Ok(addrs)) => addrs,
            Ok(Err(source)) => {
                return Err(Self::failed(audit, url.to_owned(), None, 0, EgressError::Resolve { host: name.clone(), source }));
            }
            Err(_) => return Err(Self::failed(audit, url.to_owned(), None, 0, EgressError::ResolveTimeout { host: name.clone() })),
        };
        self.policy.check_addrs(target, &addrs).map_err(|denial| Self::deny(audit, url.to_owned(), denial.to_string()))
    }

    /// Wait for one of the skill's request slots.
    pub(crate) async fn permit(&self) -> Result<OwnedSemaphorePermit, EgressError> {
        // The semaphore is never closed; the error cannot happen.
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| EgressError::InvalidRequest { reason: "the skill's request slots are closed".into() })
    }

    /// A TCP connection to the checked address.
    pub(crate) async fn connect_tcp(&self, target: &Target, ip: IpAddr) -> Result<TcpStream, EgressError> {
        let addr = SocketAddr::new(ip, target.port);
        match tokio::time::timeout(self.net.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => Ok(tcp),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(EgressError::ConnectionRefused { addr }),
            Ok(Err(source)) => Err(EgressError::Connect { addr, source }),
            Err(_) => Err(EgressError::ConnectTimeout { addr }),
        }
    }

    /// The headers of the secrets bound to `target`, their values from `values`, looked up
    /// before anything leaves the host: a missing secret refuses the request.
    fn secret_headers(
        &self,
        audit: &Audit,
        target: &Target,
        url: &str,
        secrets: &[SecretBinding],
        values: &dyn SecretSource,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, EgressError> {
        let mut headers = Vec::new();
        for binding in secrets {
            if !binding.hosts.iter().any(|rule| rule.matches(target)) {
                continue;
            }
            let Ok(name) = HeaderName::try_from(binding.header.as_str()) else { continue };
            let Some(secret) = values.secret(&binding.name) else {
                let reason = format!("secret `{}` is not set; set it with `skillhost secret set {}`", binding.name, binding.name);
                return Err(Self::deny(audit, url.to_owned(), reason));
            };
            let mut value =
                HeaderValue::from_str(&binding.header_value(&secret)).map_err(|_| EgressError::BadSecret { name: binding.name.clone() })?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        Ok(headers)
    }

    /// Send `request` (whose URI must be absolute) for `tool`, adding the `secrets` bound
    /// to its host, through every step listed on [`SkillEgress`]. The response body is a
    /// [`CappedBody`]; the audit row is written when it ends (or at once on a refusal or
    /// failure). The request body is read whole first (at most [`MAX_REQUEST_BYTES`]), so
    /// the server gets a `Content-Length` and the audit log an exact size; it is read only
    /// once the request holds one of the skill's slots and room for it in the host's
    /// [`BodyBudget`](crate::BodyBudget), so a request waiting for either holds no body.
    ///
    /// Traced as an `egress.request` span (a child of the span current when it is polled:
    /// the call's), with the checked host and the response status.
    pub async fn send<B>(
        &self,
        tool: &str,
        request: http::Request<B>,
        secrets: &[SecretBinding],
    ) -> Result<http::Response<CappedBody>, EgressError>
    where
        B: Body<Data = Bytes> + Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.send_with(tool, request, secrets, &*self.net.secrets).await
    }

    /// [`send`](Self::send) with the secrets' values taken from `values` rather than the
    /// host's store: the proxy reads them once per request, for the header and for the
    /// redaction of the response alike.
    pub(crate) async fn send_with<B>(
        &self,
        tool: &str,
        request: http::Request<B>,
        secrets: &[SecretBinding],
        values: &dyn SecretSource,
    ) -> Result<http::Response<CappedBody>, EgressError>
    where
        B: Body<Data = Bytes> + Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let span = tracing::info_span!(
            "egress.request",
            otel.name = %request.method(),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            http.request.method = %request.method(),
            server.address = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            skillhost.skill = %self.skill,
            error.type = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.send_checked(tool, request, secrets, values), span.clone()).await;
        match &result {
            Ok(response) => {
                span.record("http.response.status_code", response.status().as_u16());
                if response.status().is_server_error() || response.status().is_client_error() {
                    span.record("otel.status_code", "ERROR");
                    span.record("error.type", response.status().as_str());
                }
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", if matches!(e, EgressError::Denied { .. }) { "denied" } else { "failed" });
            }
        }
        result
    }

    /// [`send`](Self::send) inside its span.
    async fn send_checked<B>(
        &self,
        tool: &str,
        mut request: http::Request<B>,
        secrets: &[SecretBinding],
        values: &dyn SecretSource,
    ) -> Result<http::Response<CappedBody>, EgressError>
    where
        B: Body<Data = Bytes> + Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let audit = self.audit(tool, request.method().as_str());
        let uri = request.uri().to_string();
        let target = self.check(&audit, &uri)?;
        tracing::Span::current().record("server.address", tracing::field::display(&target.host));
        let url = format!("{}{}", target.origin(), target.path);
        let secret_headers = self.secret_headers(&audit, &target, &url, secrets, values)?;
        let ip = self.resolve(&audit, &target, &url).await?;

        // The Host header is the authority that was checked, whatever the skill asked for.
        let invalid = |what: &str| EgressError::InvalidRequest { reason: format!("{what} is not valid: {uri}") };
        let headers = request.headers_mut();
        headers.remove(HOST);
        headers.insert(HOST, HeaderValue::from_str(&target.authority()).map_err(|_| invalid("the host"))?);
        for (name, value) in secret_headers {
            headers.insert(name, value);
        }
        *request.uri_mut() = http::Uri::try_from(target.path_and_query.as_str()).map_err(|_| invalid("the path"))?;

        // The skill's request slot first, then room in the host's body budget, and only
        // then is the body read: a request waiting for either holds nothing but its head.
        let permit = self.permit().await?;
        let deadline = tokio::time::Instant::from_std(audit.started + self.net.total_timeout);
        let (parts, body) = request.into_parts();
        let body = match self.buffer_body(body, deadline).await {
            Ok(body) => body,
            Err(e) => return Err(Self::failed(&audit, url, None, 0, e)),
        };
        let bytes_out = body.remaining;
        let request = http::Request::from_parts(parts, body);

        let (response, reuse) = match tokio::time::timeout_at(deadline, self.exchange(&target, ip, request)).await {
            Ok(Ok(exchanged)) => exchanged,
            Ok(Err(e)) => {
                // The failure may quote what the server sent (the names of its certificate):
                // the audit row holds none of the values of the secrets given to it.
                let redactor = crate::terminate::Redactor::values(secrets.iter().filter_map(|s| values.secret(&s.name)));
                audit.record(url, Some(ip), EgressOutcome::Failed(redactor.text(&e.to_string())), bytes_out);
                return Err(e);
            }
            Err(_) => return Err(Self::failed(&audit, url, Some(ip), bytes_out, EgressError::TotalTimeout(self.net.total_timeout))),
        };
        let outcome = EgressOutcome::Status(response.status().as_u16());
        let pending = audit.pending(url, ip, outcome, bytes_out, permit);
        Ok(response.map(|incoming| CappedBody {
            incoming,
            limit: self.net.max_response_bytes,
            total: self.net.total_timeout,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            audit: Some(pending),
            reuse: Some(reuse),
        }))
    }

    /// Read `body` whole (at most [`MAX_REQUEST_BYTES`]) by `deadline`, each byte reserved
    /// in the host's body budget before it is read: a known length whole before the first
    /// byte, an unknown one as it arrives.
    async fn buffer_body<B>(&self, body: B, deadline: tokio::time::Instant) -> Result<Buffered, EgressError>
    where
        B: Body<Data = Bytes> + Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let budget = &self.net.request_body_budget;
        let too_large = || EgressError::RequestBodyTooLarge { limit: MAX_REQUEST_BYTES };
        let reserve = async |bytes: usize| match budget.reserve(bytes).await {
            Ok(reservation) => Ok(reservation),
            Err(Shortfall::OverCapacity) => Err(EgressError::RequestBodyTooLarge { limit: budget.capacity() }),
            Err(Shortfall::Timeout) => Err(EgressError::BodyBudget { capacity: budget.capacity(), wait: budget.wait() }),
        };
        let hint = body.size_hint();
        if hint.lower() > MAX_REQUEST_BYTES as u64 {
            return Err(too_large());
        }
        let mut reservation = match hint.exact() {
            Some(exact) => reserve(exact as usize).await?,
            None => Reservation::default(),
        };
        let mut body = std::pin::pin!(body);
        let mut buffered = Buffered { chunks: VecDeque::new(), remaining: 0, reservation: Reservation::default() };
        let mut len = 0usize;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(EgressError::TotalTimeout(self.net.total_timeout)),
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    let e: Box<dyn std::error::Error + Send + Sync> = e.into();
                    return Err(match e.downcast_ref::<crate::proxy::BodyTimeout>() {
                        Some(timeout) => EgressError::RequestBodyTimeout(timeout.0),
                        None => EgressError::RequestBody { reason: e.to_string() },
                    });
                }
                Ok(Some(Ok(frame))) => frame,
            };
            // Trailers are not forwarded.
            let Ok(data) = frame.into_data() else { continue };
            if len + data.len() > MAX_REQUEST_BYTES {
                return Err(too_large());
            }
            len += data.len();
            if len > reservation.bytes() {
                reservation.merge(reserve(len - reservation.bytes()).await?);
            }
            if !data.is_empty() {
                buffered.chunks.push_back(data);
            }
        }
        reservation.release(reservation.bytes() - len);
        buffered.remaining = len as u64;
        buffered.reservation = reservation;
        Ok(buffered)
    }

    /// Send on an idle connection to the checked address when the skill has one (and it
    /// is still open), else on a new one; wait for the head. The connection comes back
    /// with the response, to be kept once its body is read to the end.
    async fn exchange(
        &self,
        target: &Target,
        ip: IpAddr,
        request: http::Request<Buffered>,
    ) -> Result<(http::Response<hyper::body::Incoming>, Reuse), EgressError> {
        let key = ConnKey { scheme: target.scheme, host: target.host.to_string(), port: target.port, ip };
        let mut request = request;
        if let Some((mut sender, opened)) = self.pool.take(&key).await {
            match tokio::time::timeout(self.net.first_byte_timeout, sender.try_send_request(request)).await {
                Ok(Ok(response)) => return Ok((response, Reuse { pool: self.pool.clone(), key, sender, opened })),
                // Closed by the server before the request left: sent again on a new connection.
                Ok(Err(mut failed)) => match failed.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(EgressError::Http(failed.into_error())),
                },
                Err(_) => return Err(EgressError::FirstByteTimeout(self.net.first_byte_timeout)),
            }
        }
        let (mut sender, opened) = (self.connect(target, ip).await?, std::time::Instant::now());
        match tokio::time::timeout(self.net.first_byte_timeout, sender.send_request(request)).await {
            Ok(Ok(response)) => Ok((response, Reuse { pool: self.pool.clone(), key, sender, opened })),
            Ok(Err(e)) => Err(EgressError::Http(e)),
            Err(_) => Err(EgressError::FirstByteTimeout(self.net.first_byte_timeout)),
        }
    }

    /// A new connection to the checked address, speaking TLS when asked.
    async fn connect(&self, target: &Target, ip: IpAddr) -> Result<SendRequest<Buffered>, EgressError> {
        let tcp = self.connect_tcp(target, ip).await?;
        let stream: Box<dyn Stream> = match target.scheme {
            Scheme::Http => Box::new(tcp),
            Scheme::Https => {
                let host = target.host.to_string();
                let name = match &target.host {
                    TargetHost::Name(name) => rustls::pki_types::ServerName::try_from(name.clone())
                        .map_err(|source| EgressError::ServerName { host: host.clone(), source })?,
                    TargetHost::Ip(ip) => rustls::pki_types::ServerName::from(*ip),
                };
                let connector = tokio_rustls::TlsConnector::from(self.net.tls.clone());
                let addr = SocketAddr::new(ip, target.port);
                let tls = tokio::time::timeout(self.net.connect_timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| EgressError::ConnectTimeout { addr })?
                    .map_err(|source| EgressError::Tls { host, source })?;
                Box::new(tls)
            }
        };
        let (sender, conn) = hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)).await?;
        // The connection is driven by its own task; it ends when its sender is dropped
        // (a body not read to its end, a pool entry evicted) or, at the latest, after
        // [`IDLE_KEPT`] and the total timeout: a connection is reused only within
        // `IDLE_KEPT` of opening, so every request on it has its whole total timeout.
        let lifetime = IDLE_KEPT + self.net.total_timeout;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(lifetime, conn).await;
        });
        Ok(sender)
    }
}

/// Idle connections kept per skill, at most.
const MAX_IDLE: usize = 8;

/// How long after it opened a connection may take another request.
const IDLE_KEPT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a kept connection may take to say it is ready for the next request.
const READY_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Where a connection goes: the address that was checked, and the name it was checked
/// for (its TLS certificate's, for https), port and scheme.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ConnKey {
    scheme: Scheme,
    host: String,
    port: u16,
    ip: IpAddr,
}

/// One skill's idle connections, each taken by one request at a time.
#[derive(Default)]
pub(crate) struct Pool {
    /// Each connection's key, sender and when it opened.
    idle: parking_lot::Mutex<VecDeque<(ConnKey, SendRequest<Buffered>, std::time::Instant)>>,
}

impl Pool {
    /// An open connection to `key` that is ready for a request, if one is kept.
    async fn take(&self, key: &ConnKey) -> Option<(SendRequest<Buffered>, std::time::Instant)> {
        loop {
            let (_, mut sender, opened) = {
                let mut idle = self.idle.lock();
                idle.retain(|(_, sender, opened)| !sender.is_closed() && opened.elapsed() < IDLE_KEPT);
                let at = idle.iter().rposition(|(k, _, _)| k == key)?;
                idle.remove(at)?
            };
            if let Ok(Ok(())) = tokio::time::timeout(READY_WAIT, sender.ready()).await {
                return Some((sender, opened));
            }
        }
    }

    /// Keep `sender` (opened at `opened`), the oldest kept connection making room.
    fn put(&self, key: ConnKey, sender: SendRequest<Buffered>, opened: std::time::Instant) {
        if sender.is_closed() || opened.elapsed() >= IDLE_KEPT {
            return;
        }
        let mut idle = self.idle.lock();
        idle.push_back((key, sender, opened));
        while idle.len() > MAX_IDLE {
            idle.pop_front();
        }
    }
}

/// The connection a response came on: kept by [`CappedBody`] once the body is read to its
/// end within the cap, closed (dropped) otherwise.
struct Reuse {
    pool: Arc<Pool>,
    key: ConnKey,
    sender: SendRequest<Buffered>,
    opened: std::time::Instant,
}

/// A request body read whole, sent chunk by chunk; its room in the host's body budget is
/// given back as each chunk is handed to the connection.
pub(crate) struct Buffered {
    chunks: VecDeque<Bytes>,
    remaining: u64,
    reservation: Reservation,
}

impl Body for Buffered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(chunk) = self.chunks.pop_front() else {
            self.reservation = Reservation::default();
            return Poll::Ready(None);
        };
        self.remaining -= chunk.len() as u64;
        self.reservation.release(chunk.len());
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

/// A URL for the audit log: no userinfo, no query.
pub(crate) fn redact(uri: &str) -> String {
    let without_query = uri.split(['?', '#']).next().unwrap_or("");
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{rest}")
        }
        None => without_query.to_owned(),
    }
}

/// A response body with the size cap and the request's total deadline. Its audit row
/// (status, bytes received) is written when it ends, fails or is dropped.
pub struct CappedBody {
    incoming: hyper::body::Incoming,
    limit: u64,
    total: std::time::Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    audit: Option<PendingRecord>,
    /// Its connection, kept for the skill's next request when the body ends cleanly.
    reuse: Option<Reuse>,
}

impl std::fmt::Debug for CappedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedBody").field("limit", &self.limit).finish_non_exhaustive()
    }
}

impl CappedBody {
    fn fail(&mut self, error: EgressError) -> Poll<Option<Result<Frame<Bytes>, EgressError>>> {
        if let Some(pending) = &mut self.audit {
            pending.fail(error.to_string());
        }
        self.audit = None;
        self.reuse = None;
        Poll::Ready(Some(Err(error)))
    }
}

impl Body for CappedBody {
    type Data = Bytes;
    type Error = EgressError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, EgressError>>> {
        if self.audit.is_none() {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            let total = self.total;
            return self.fail(EgressError::TotalTimeout(total));
        }
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.audit = None;
                if let Some(Reuse { pool, key, sender, opened }) = self.reuse.take() {
                    pool.put(key, sender, opened);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => self.fail(EgressError::Http(e)),
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                let limit = self.limit;
                let Some(pending) = &mut self.audit else { return Poll::Ready(None) };
                pending.record.bytes_in += len;
                if pending.record.bytes_in > limit {
                    let (skill, size) = (pending.record.skill.clone(), pending.record.bytes_in);
                    tracing::warn!(%skill, "response body passed {size} bytes, over the cap of {limit} bytes; the skill's read fails");
                    return self.fail(EgressError::ResponseBodyTooLarge { limit });
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.audit.is_none()
    }
}
