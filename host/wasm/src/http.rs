//! The outbound HTTP gate: the only way a wasm skill reaches the network.
//!
//! `wasi:http/outgoing-handler` is linked only for skills whose grant has network rules,
//! and every request goes through [`HttpGate::send`]:
//!
//! 1. the URL is normalised and checked against the skill's [`EgressPolicy`] (deny wins,
//!    userinfo refused, IDN/IP forms normalised);
//! 2. a name is resolved once, by the host; loopback/private results are refused unless
//!    allowed; the connection goes to the address that was checked (no second lookup, so
//!    no DNS rebinding);
//! 3. `Host` is set to the checked authority, whatever the guest sent; bound secrets are
//!    added to requests for their hosts only;
//! 4. connect, first-byte and total timeouts apply, the response body is capped, and
//!    concurrent requests per skill are limited;
//! 5. redirects are not followed: the guest sees the 3xx, and its next request is checked
//!    again;
//! 6. every request, refused or not, is written to the audit log.
//!
//! A refusal is `ErrorCode::HttpRequestDenied` for the guest (never a trap), a log line,
//! and a note the host adds to the call's error.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{HOST, HeaderName, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use skillhost_core::egress::{Scheme, Target, TargetHost};
use skillhost_core::{AuditSink, EgressOutcome, EgressPolicy, EgressRecord, NoAudit, NoSecrets, Resolver, SecretBinding, SecretSource};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::state::CallLog;

/// Largest request body a skill may send.
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// How the host reaches the network on skills' behalf.
#[derive(Clone)]
pub struct NetConfig {
    /// Resolves host names. Default: the system resolver.
    pub resolver: Arc<dyn Resolver>,
    /// Secret values for `[[secrets]]` bindings. Default: none.
    pub secrets: Arc<dyn SecretSource>,
    /// Where every request is recorded. Default: nowhere.
    pub audit: Arc<dyn AuditSink>,
    /// Time to resolve and connect. Default: 5 s.
    pub connect_timeout: Duration,
    /// Time from sending the request to the response head. Default: 15 s.
    pub first_byte_timeout: Duration,
    /// Time for a whole request, response body included. Default: 30 s (the call's own
    /// deadline still applies).
    pub total_timeout: Duration,
    /// Largest response body a skill may read. Default: 16 MiB.
    pub max_response_bytes: u64,
    /// Requests one skill may have open at once; more wait. Default: 8.
    pub max_concurrent_per_skill: usize,
    /// Root certificates for HTTPS. Default: the Mozilla roots (webpki-roots).
    pub tls: Arc<rustls::ClientConfig>,
}

impl Default for NetConfig {
    fn default() -> Self {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            resolver: Arc::new(SystemResolver),
            secrets: Arc::new(NoSecrets),
            audit: Arc::new(NoAudit),
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(15),
            total_timeout: Duration::from_secs(30),
            max_response_bytes: 16 << 20,
            max_concurrent_per_skill: 8,
            tls: Arc::new(tls),
        }
    }
}

impl std::fmt::Debug for NetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetConfig")
            .field("connect_timeout", &self.connect_timeout)
            .field("first_byte_timeout", &self.first_byte_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_concurrent_per_skill", &self.max_concurrent_per_skill)
            .finish_non_exhaustive()
    }
}

/// The operating system's resolver (through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.map(|a| a.ip()).collect())
    }
}

/// One call's view of the gate: its skill's rules and the call's log. Cloned (cheaply)
/// into each request's future.
#[derive(Clone)]
pub(crate) struct HttpGate {
    skill: String,
    tool: String,
    policy: Arc<EgressPolicy>,
    secrets: Arc<[SecretBinding]>,
    net: Arc<NetConfig>,
    permits: Arc<Semaphore>,
    log: Arc<CallLog>,
    /// Refusals during this call, added to the call's error message.
    denials: Arc<Mutex<Vec<String>>>,
}

/// What a skill brings to every call's gate.
#[derive(Clone)]
pub(crate) struct SkillNet {
    pub(crate) policy: Arc<EgressPolicy>,
    pub(crate) secrets: Arc<[SecretBinding]>,
    pub(crate) net: Arc<NetConfig>,
    pub(crate) permits: Arc<Semaphore>,
}

impl HttpGate {
    pub(crate) fn new(skill: &str, tool: &str, net: &SkillNet, log: Arc<CallLog>) -> Self {
        Self {
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            policy: net.policy.clone(),
            secrets: net.secrets.clone(),
            net: net.net.clone(),
            permits: net.permits.clone(),
            log,
            denials: Arc::default(),
        }
    }

    /// The refusals of this call so far.
    pub(crate) fn denials(&self) -> Vec<String> {
        self.denials.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type SendResult = Result<(http::Response<WasiBody>, IoFuture), Error>;

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        // The guest's per-request options may only shorten the host's timeouts; they are
        // ignored for now and the host's apply.
        Box::new(self.clone().send(request))
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static> Stream for T {}

impl HttpGate {
    fn record(&self, method: &str, url: String, ip: Option<IpAddr>, outcome: EgressOutcome, time: SystemTime, started: Instant) {
        self.net.audit.record(EgressRecord {
            time,
            skill: self.skill.clone(),
            tool: self.tool.clone(),
            method: method.to_owned(),
            url,
            ip,
            outcome,
            bytes_out: 0,
            bytes_in: 0,
            duration: started.elapsed(),
        });
    }

    /// Refuse: log, remember for the call's error, audit, and tell the guest.
    fn deny(&self, method: &str, url: String, reason: String, time: SystemTime, started: Instant) -> Error {
        self.log.write_line("warn", format!("outbound request refused: {reason}").as_bytes());
        self.denials.lock().unwrap_or_else(|e| e.into_inner()).push(reason.clone());
        self.record(method, url, None, EgressOutcome::Refused(reason), time, started);
        Error::HttpRequestDenied
    }

    async fn send(self, mut request: http::Request<WasiBody>) -> SendResult {
        let (time, started) = (SystemTime::now(), Instant::now());
        let method = request.method().to_string();
        let uri = request.uri().to_string();
        let target = match self.policy.check_url(&uri) {
            Ok(target) => target,
            Err(denial) => return Err(self.deny(&method, redact(&uri), denial.to_string(), time, started)),
        };
        let url = format!("{}{}", target.origin(), target.path);

        // Bound secrets, looked up before anything leaves the host: a missing one refuses.
        let mut secret_headers = Vec::new();
        for binding in self.secrets.iter() {
            if !binding.hosts.iter().any(|rule| rule.matches(&target)) {
                continue;
            }
            let Ok(name) = HeaderName::try_from(binding.header.as_str()) else { continue };
            let Some(secret) = self.net.secrets.secret(&binding.name) else {
                let reason = format!("secret `{}` is not set; set it with `skillhost secret set {}`", binding.name, binding.name);
                return Err(self.deny(&method, url, reason, time, started));
            };
            let mut value = HeaderValue::from_str(&binding.header_value(&secret)).map_err(|_| {
                Error::InternalError(Some(format!("secret `{}` is not a valid header value", binding.name)))
            })?;
            value.set_sensitive(true);
            secret_headers.push((name, value));
        }

        let ip = match &target.host {
            TargetHost::Ip(ip) => *ip,
            TargetHost::Name(name) => {
                let addrs = match tokio::time::timeout(self.net.connect_timeout, self.net.resolver.resolve(name, target.port)).await {
                    Ok(Ok(addrs)) => addrs,
                    Ok(Err(e)) => {
                        self.record(&method, url, None, EgressOutcome::Failed(format!("{name} did not resolve: {e}")), time, started);
                        return Err(Error::DnsError { rcode: None, info_code: None });
                    }
                    Err(_) => {
                        self.record(&method, url, None, EgressOutcome::Failed(format!("resolving {name} timed out")), time, started);
                        return Err(Error::DnsTimeout);
                    }
                };
                match self.policy.check_addrs(&target, &addrs) {
                    Ok(ip) => ip,
                    Err(denial) => return Err(self.deny(&method, url, denial.to_string(), time, started)),
                }
            }
        };

        // The Host header is the authority that was checked, whatever the guest asked for.
        let headers = request.headers_mut();
        headers.remove(HOST);
        headers.insert(HOST, HeaderValue::from_str(&target.authority()).map_err(|_| Error::HttpRequestUriInvalid)?);
        for (name, value) in secret_headers {
            headers.insert(name, value);
        }
        *request.uri_mut() = http::Uri::try_from(target.path_and_query.as_str()).map_err(|_| Error::HttpRequestUriInvalid)?;

        // Take the whole request body before connecting: the server then gets a
        // Content-Length instead of a chunked stream fed across the guest boundary, and the
        // audit log an exact size.
        let (parts, body) = request.into_parts();
        let limited = http_body_util::Limited::new(body, MAX_REQUEST_BYTES);
        let body = match tokio::time::timeout(self.net.total_timeout, limited.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                let reason = format!("request body over {MAX_REQUEST_BYTES} bytes");
                self.record(&method, url, None, EgressOutcome::Failed(reason), time, started);
                return Err(Error::HttpRequestBodySize(None));
            }
            Ok(Err(_)) | Err(_) => return Err(Error::HttpRequestBodySize(None)),
        };
        let bytes_out = body.len() as u64;
        let request = http::Request::from_parts(
            parts,
            http_body_util::Full::new(body).map_err(|never| match never {}).boxed_unsync(),
        );

        let permit = self.permits.clone().acquire_owned().await.map_err(|_| Error::ConnectionLimitReached)?;
        let deadline = started + self.net.total_timeout;
        let fail = |e: Error, url: String| {
            self.record(&method, url, Some(ip), EgressOutcome::Failed(e.to_string()), time, started);
            e
        };
        let response = tokio::time::timeout_at(deadline.into(), self.exchange(&target, ip, request)).await;
        let response = match response {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(fail(e, url)),
            Err(_) => return Err(fail(Error::ConnectionReadTimeout, url)),
        };
        let (parts, incoming) = response.into_parts();
        let body = GatedBody {
            incoming,
            limit: self.net.max_response_bytes,
            deadline: Box::pin(tokio::time::sleep_until(deadline.into())),
            audit: Some(PendingRecord {
                sink: self.net.audit.clone(),
                record: EgressRecord {
                    time,
                    skill: self.skill.clone(),
                    tool: self.tool.clone(),
                    method,
                    url,
                    ip: Some(ip),
                    outcome: EgressOutcome::Status(parts.status.as_u16()),
                    bytes_out,
                    bytes_in: 0,
                    duration: Duration::ZERO,
                },
                started,
                _permit: permit,
            }),
        };
        Ok((http::Response::from_parts(parts, body.boxed_unsync()), Box::new(async { Ok(()) })))
    }

    /// Connect to the checked address, speak TLS when asked, send, and wait for the head.
    async fn exchange(
        &self,
        target: &Target,
        ip: IpAddr,
        request: http::Request<WasiBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, Error> {
        let addr = SocketAddr::new(ip, target.port);
        let tcp = match tokio::time::timeout(self.net.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(Error::ConnectionRefused),
            Ok(Err(e)) => return Err(Error::Connect(e)),
            Err(_) => return Err(Error::ConnectionTimeout),
        };
        let stream: Box<dyn Stream> = match target.scheme {
            Scheme::Http => Box::new(tcp),
            Scheme::Https => {
                let name = match &target.host {
                    TargetHost::Name(name) => rustls::pki_types::ServerName::try_from(name.clone()).map_err(Error::InvalidDnsNameError)?,
                    TargetHost::Ip(ip) => rustls::pki_types::ServerName::from(*ip),
                };
                let connector = tokio_rustls::TlsConnector::from(self.net.tls.clone());
                let tls = tokio::time::timeout(self.net.connect_timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| Error::ConnectionTimeout)?
                    .map_err(Error::Tls)?;
                Box::new(tls)
            }
        };
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)).await?;
        // The connection is driven by its own task; it ends when the response body is
        // dropped or the total deadline passes.
        let total = self.net.total_timeout;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(total, conn).await;
        });
        match tokio::time::timeout(self.net.first_byte_timeout, sender.send_request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(Error::from(e)),
            Err(_) => Err(Error::HttpResponseTimeout),
        }
    }
}

/// A URL for the audit log: no userinfo, no query.
fn redact(uri: &str) -> String {
    let without_query = uri.split(['?', '#']).next().unwrap_or("");
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            format!("{scheme}://{rest}")
        }
        None => without_query.to_owned(),
    }
}

/// The audit row of a request whose body is still being read.
struct PendingRecord {
    sink: Arc<dyn AuditSink>,
    record: EgressRecord,
    started: Instant,
    /// Holds the skill's concurrency slot until the body is done.
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for PendingRecord {
    fn drop(&mut self) {
        self.record.duration = self.started.elapsed();
        self.sink.record(self.record.clone());
    }
}

/// A response body with a size cap and the request's total deadline.
struct GatedBody {
    incoming: hyper::body::Incoming,
    limit: u64,
    deadline: Pin<Box<tokio::time::Sleep>>,
    audit: Option<PendingRecord>,
}

impl GatedBody {
    fn fail(&mut self, error: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(pending) = &mut self.audit {
            pending.record.outcome = EgressOutcome::Failed(error.to_string());
        }
        self.audit = None;
        Poll::Ready(Some(Err(error)))
    }
}

impl Body for GatedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.audit.is_none() {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return self.fail(Error::HttpResponseTimeout);
        }
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.audit = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => self.fail(Error::from(e)),
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                let limit = self.limit;
                let Some(pending) = &mut self.audit else { return Poll::Ready(None) };
                pending.record.bytes_in += len;
                if pending.record.bytes_in > limit {
                    let size = pending.record.bytes_in;
                    self.log_over_cap(size);
                    return self.fail(Error::HttpResponseBodySize(Some(limit)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }
}

impl GatedBody {
    fn log_over_cap(&self, size: u64) {
        tracing::warn!("response body passed {size} bytes, over the cap of {} bytes; the skill's read fails", self.limit);
    }
}
