//! TLS termination in the sandbox proxy, for hosts a secret is bound to, so that a
//! sandboxed skill's HTTPS requests get the secret added while the sandbox never holds it.
//!
//! A `CONNECT host:port` whose `https://host:port` a bound secret names (and the rules
//! allow) is not tunnelled when the host has an [`EgressCa`](crate::EgressCa)
//! ([`NetConfig::ca`](crate::NetConfig::ca)); instead ([`accept`]):
//!
//! 1. the proxy answers `200` and reads the client's TLS `ClientHello` within the head
//!    timeout: its SNI must be the `CONNECT` host (no SNI, or another name, is refused and
//!    audited, and the connection closed);
//! 2. it completes the handshake with a leaf the CA minted for that name, offering `h2`
//!    and `http/1.1` by ALPN;
//! 3. it reads each decrypted request (HTTP/1.1, or the streams of an HTTP/2 connection)
//!    under the proxy's head and body bounds, at most [`MAX_REQUESTS`] per connection, the
//!    whole connection within the tunnel's total time: the request target must be
//!    origin-form, or name the same `https` origin (absolute form in HTTP/1.1, the
//!    `:authority` of HTTP/2); the `Host` header, when sent, must name the `CONNECT`
//!    authority. A request naming another host (an HTTP/2 client *coalescing* a request
//!    for another name onto this connection, a forged `Host`) is refused with 403 and
//!    audited, never sent;
//! 4. the request is sent as the proxy sends a plain one ([`Shared::forward`]): checked
//!    against the skill's rules again, the secret added, resolved once and pinned, its own
//!    TLS upstream verified against [`NetConfig::tls`](crate::NetConfig::tls)'s roots, the
//!    response capped and audited (request line and status; never a header value);
//! 5. the response is redacted ([`Redactor`]) before the sandbox reads a byte of it.
//!
//! Hosts with no secret bound keep the plain tunnel: the proxy never sees their bytes.
//! Redirects are never followed by the proxy; the client's next request to another host is
//! a new `CONNECT`, checked for that host (and given no secret unless one is bound to it).
//!
//! **Redaction** ([`Redactor`]): every value of a secret bound in the proxy's policy is
//! replaced in the response's status line (its reason phrase), header names and values,
//! and the whole body by as many `*`, so lengths (and `Content-Length`) stay right;
//! trailers and 1xx answers are never passed on. So is the text of an error the proxy
//! answers with (it may quote what the server sent: a header, its certificate's names),
//! and the audit row of a failed exchange. The values are read from the host's store once per
//! request ([`SecretValues`]), for the header and the redaction alike, so a secret set
//! again while a request passes cannot be sent as one value and redacted as another. The body is scanned as it streams, with the last
//! `longest secret - 1` bytes held back until the next chunk shows whether they start a
//! value (a body that ends in the first [`MIN_CUT`] or more bytes of a value has them
//! redacted too: a server cutting what it shows where the skill asks would hand it out
//! piece by piece), so there is no size bound beyond the response cap. A body the proxy cannot read
//! (a `Content-Encoding` other than `identity`, which it asks for, in any of its
//! headers; a `Transfer-Encoding` other than `chunked`) is refused with 502 rather than
//! passed on unread, the refusal quoting the value redacted: fail closed. So is a part of
//! a body (206): the proxy drops `Range` and `If-Range` from requests to these hosts, since
//! two ranges could each carry a piece of a value the redactor cannot match. A value the server sends transformed
//! (base64, URL-encoded, split by chunk framing is handled; compressed is refused) other
//! than compression is not recognised.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use skillhost_core::egress::{Scheme, Target, TargetHost};
use skillhost_core::{EgressOutcome, SecretBinding, SecretSource};
use tokio::sync::OwnedSemaphorePermit;

use crate::proxy::{MIN_HEAD_BYTES, ProxyBody, Shared, TimedBody, text};
use crate::{EgressCa, EgressError, SkillEgress};

/// Requests one terminated connection may carry; the last is answered with
/// `Connection: close`.
pub const MAX_REQUESTS: usize = 100;

/// Requests an HTTP/2 connection may have open at once.
pub const MAX_STREAMS: u32 = 16;

/// Answer a `CONNECT` to a secret-bound `target` by terminating its TLS (see the module
/// docs): `200` now, the rest once hyper hands over the connection.
pub(crate) fn accept(
    shared: Arc<Shared>,
    request: Request<Incoming>,
    slot: Arc<OwnedSemaphorePermit>,
    ca: &EgressCa,
    target: Target,
    authority: String,
) -> Response<ProxyBody> {
    let tools = shared.calls.tools();
    let origin = format!("https://{authority}");
    let refuse = |reason: String| {
        let audit = shared.egress.audit(&tools, "CONNECT");
        shared.error(SkillEgress::deny(&audit, origin.clone(), reason))
    };
    let TargetHost::Name(name) = &target.host else {
        return refuse(format!(
            "`CONNECT {authority}`: a secret is bound to this address, and the proxy adds secrets only for a host name (it cannot prove an address); bind the secret to the host's name and connect to the name"
        ));
    };
    let leaf = match ca.authority().and_then(|ca| ca.leaf(name)) {
        Ok(leaf) => leaf,
        Err(e) => {
            return refuse(format!("`CONNECT {authority}`: a secret is bound to this host and the host's egress CA cannot be used: {e}"));
        }
    };
    let name = name.clone();
    tokio::spawn(async move {
        // The connection counts among the proxy's until it ends.
        let _slot = slot;
        let Some(client) = shared.upgraded(request, &authority).await else { return };
        let stop = shared.stop.clone();
        let total = shared.config.tunnel.total_timeout;
        tokio::select! {
            () = stop.cancelled() => {}
            _ = tokio::time::timeout(total, serve(&shared, client, leaf, &name, &target, &authority, &tools)) => {}
        }
    });
    Response::new(http_body_util::Empty::new().map_err(|never| match never {}).boxed_unsync())
}

/// The handshake with the client, then its requests.
async fn serve(
    shared: &Arc<Shared>,
    client: TokioIo<hyper::upgrade::Upgraded>,
    leaf: Arc<rustls::sign::CertifiedKey>,
    name: &str,
    target: &Target,
    authority: &str,
    tools: &str,
) {
    let skill = shared.egress.skill().clone();
    let timeout = shared.config.header_timeout;
    let origin = format!("https://{authority}");
    let deny = |reason: String| {
        let audit = shared.egress.audit(tools, "CONNECT");
        let error = SkillEgress::deny(&audit, origin.clone(), reason.clone());
        tracing::warn!(%skill, "outbound request refused: {error}");
        shared.calls.refused(&reason);
    };
    // The client would not take the proxy's certificate (it pins the server's, or trusts
    // other roots than the sandbox's bundle): audited as a failed `CONNECT` and told to the
    // calls running, since the client's own error cannot say why.
    let not_trusted = |what: String| {
        let reason = format!(
            "skill `{skill}`: {what}; a secret is bound to `{name}`, so the host's proxy answers for it with a certificate of the host's egress CA and adds the secret: the client must trust the sandbox's CA bundle (SSL_CERT_FILE, /etc/ssl/certs/ca-certificates.crt) and must not pin the server's certificate or key (a client that pins cannot be given a secret by the host; remove the secret from its policy to tunnel this host instead)"
        );
        tracing::warn!(%skill, "CONNECT {authority}: {reason}");
        shared.egress.audit(tools, "CONNECT").record(origin.clone(), None, EgressOutcome::Failed(reason.clone()), 0);
        shared.calls.refused(&reason);
    };
    let acceptor = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), client);
    let start = match tokio::time::timeout(timeout, acceptor).await {
        Ok(Ok(start)) => start,
        Ok(Err(e)) => return tracing::debug!(%skill, "CONNECT {authority}: no TLS from the client: {e}"),
        Err(_) => return tracing::debug!(%skill, "CONNECT {authority}: no TLS hello within {timeout:?}"),
    };
    let sni = start.client_hello().server_name().map(|s| s.trim_end_matches('.').to_ascii_lowercase());
    if sni.as_deref() != Some(name) {
        let sent = sni.map_or_else(|| "no server name".to_owned(), |s| format!("server name `{s}`"));
        return deny(format!(
            "`CONNECT {authority}`: the TLS handshake asked for {sent}, not `{name}`; a secret is bound to `{name}` and the proxy answers only for that name (connect to the host you name)"
        ));
    }
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Leaf(leaf)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tls = match tokio::time::timeout(timeout, start.into_stream(Arc::new(config))).await {
        Ok(Ok(tls)) => tls,
        // A client that pins a certificate authority, or trusts other roots, ends here.
        Ok(Err(e)) => {
            return not_trusted(format!("the client refused the certificate the proxy presented for `{name}` in the TLS handshake ({e})"));
        }
        Err(_) => return tracing::debug!(%skill, "CONNECT {authority}: TLS handshake not done within {timeout:?}"),
    };
    let head_bytes = shared.config.max_head_bytes.max(MIN_HEAD_BYTES);
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let served = Arc::new(AtomicUsize::new(0));
    // Set once the connection has carried its last request: HTTP/2 is then told to go away
    // (streams already open finish); HTTP/1.1 closes after the answer that says so.
    let last = Arc::new(tokio::sync::Notify::new());
    let service = hyper::service::service_fn(|request: Request<Incoming>| {
        let (shared, served, last) = (shared.clone(), served.clone(), last.clone());
        // Owned: HTTP/2 runs each stream as a task of its own.
        let (target, authority, tools) = (target.clone(), authority.to_owned(), tools.to_owned());
        async move {
            if served.fetch_add(1, Ordering::Relaxed) >= MAX_REQUESTS {
                return Ok(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("skillhost egress proxy: this connection carried its {MAX_REQUESTS} requests; open another"),
                ));
            }
            let mut response = inner(&shared, request, &target, &authority, &tools).await;
            if served.load(Ordering::Relaxed) >= MAX_REQUESTS {
                if !h2 {
                    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                last.notify_one();
            }
            Ok::<_, Infallible>(response)
        }
    });
    let io = TokioIo::new(tls);
    let result = if h2 {
        let connection = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(head_bytes).unwrap_or(u32::MAX))
            .max_concurrent_streams(MAX_STREAMS)
            .serve_connection(io, service);
        tokio::pin!(connection);
        tokio::select! {
            ended = connection.as_mut() => ended,
            () = last.notified() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        }
    } else {
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeout)
            .max_buf_size(head_bytes)
            .max_header_size(head_bytes)
            .serve_connection(io, service)
            .await
    };
    if let Err(e) = &result {
        tracing::debug!(%skill, "terminated connection to {authority} ended: {e}");
    }
    // A client that pins the server's certificate or key checks it after the handshake and
    // leaves without a word (with or without TLS's close_notify).
    if served.load(Ordering::Relaxed) == 0 {
        not_trusted(format!(
            "the client closed its TLS connection to `{name}` after the handshake without sending a request (a client that pins the server's certificate or public key does this)"
        ));
    }
}

/// One decrypted request: checked to name the `CONNECT` host, then sent as a plain one.
async fn inner(shared: &Arc<Shared>, request: Request<Incoming>, target: &Target, authority: &str, tools: &str) -> Response<ProxyBody> {
    let method = request.method().clone();
    // What the skill sent, as it appears in a refusal: one line, capped.
    let shown = |sent: &str| skillhost_core::text::one_line(sent, 200);
    let refuse = |url: String, reason: String| {
        let audit = shared.egress.audit(tools, method.as_str());
        shared.error(SkillEgress::deny(&audit, crate::skill::redact(&url), reason))
    };
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let url = format!("https://{authority}{path}");
    if method == Method::CONNECT {
        return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: `CONNECT` inside the tunnel to {authority} is not served"));
    }
    let same = |other: &Target| other.scheme == Scheme::Https && other.host == target.host && other.port == target.port;
    if request.uri().authority().is_some() {
        let uri = request.uri().to_string();
        if !shared.egress.policy().check_url(&uri).is_ok_and(|t| same(&t)) {
            return refuse(
                uri.clone(),
                format!(
                    "`{} {}` inside the TLS connection to {authority} names another origin; the proxy sends what it decrypts for {authority} only there",
                    shown(method.as_str()),
                    shown(&crate::skill::redact(&uri))
                ),
            );
        }
    }
    // HTTP/2 names the host in `:authority` (checked above) and usually sends no `Host`.
    let host = match request.headers().get(header::HOST) {
        Some(host) => host.to_str().unwrap_or("").to_owned(),
        None => request.uri().authority().map_or_else(String::new, |a| a.to_string()),
    };
    if !shared.egress.policy().check_url(&format!("https://{host}/")).is_ok_and(|t| same(&t)) {
        return refuse(
            url,
            format!(
                "`{}` inside the TLS connection to {authority} carries `Host: {}`; a secret is bound to {authority} and the proxy sends a request only to the host it was opened for (send `Host: {authority}`)",
                shown(method.as_str()),
                shown(&host)
            ),
        );
    }
    let timeout = shared.config.body_timeout;
    let (mut parts, body) = request.into_parts();
    // Upstream, the proxy speaks HTTP/1.1 whatever the client spoke.
    parts.version = http::Version::HTTP_11;
    parts.uri = match http::Uri::try_from(url.as_str()) {
        Ok(uri) => uri,
        Err(_) => return text(StatusCode::BAD_REQUEST, format!("skillhost egress proxy: `{path}` is not a valid path")),
    };
    shared.forward(Request::from_parts(parts, TimedBody { body, timeout, deadline: None })).await
}

/// The leaf of the `CONNECT` host, whatever the hello says (the SNI was checked before).
#[derive(Debug)]
struct Leaf(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Leaf {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The values of a proxy's bound secrets, read from the host's store once for one request
/// ([`Shared::forward`](crate::proxy)): the header the request gets and the redaction of
/// its response use the same value, even when the secret is set again in between, and the
/// store is read once per secret, not once for each.
pub(crate) struct SecretValues(Vec<(String, Option<String>)>);

impl SecretValues {
    /// Each of `secrets`' values, as the host has them now.
    pub(crate) fn read(egress: &SkillEgress, secrets: &[SecretBinding]) -> Self {
        let mut values: Vec<(String, Option<String>)> = Vec::with_capacity(secrets.len());
        for binding in secrets {
            if !values.iter().any(|(name, _)| *name == binding.name) {
                values.push((binding.name.clone(), egress.net().secrets.secret(&binding.name)));
            }
        }
        Self(values)
    }
}

impl SecretSource for SecretValues {
    fn secret(&self, name: &str) -> Option<String> {
        self.0.iter().find(|(n, _)| n == name).and_then(|(_, value)| value.clone())
    }
}

/// The secret values a proxy's responses must not carry back (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Redactor {
    values: Arc<Vec<Vec<u8>>>,
}

impl Redactor {
    /// The values the host has (one missing is refused when it is needed).
    pub(crate) fn of(secrets: &SecretValues) -> Self {
        Self::values(secrets.0.iter().filter_map(|(_, value)| value.clone()))
    }

    /// The redactor of `values` (empty ones left out).
    pub(crate) fn values(values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<Vec<u8>> = values.into_iter().map(String::into_bytes).filter(|value| !value.is_empty()).collect();
        values.sort();
        values.dedup();
        Self { values: Arc::new(values) }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Replace each value in `bytes` by as many `*`.
    fn redact(&self, bytes: &mut [u8]) -> bool {
        redact_values(&self.values, bytes)
    }

    /// Replace the end of `tail`, the last bytes of a body, by as many `*` when it is the
    /// start of a value at least [`MIN_CUT`] bytes long (or the whole value, when shorter):
    /// a server that cuts what it shows short, where the skill asks, would otherwise hand
    /// it the value piece by piece.
    fn redact_cut(&self, tail: &mut [u8]) {
        for value in self.values.iter() {
            let min = MIN_CUT.min(value.len());
            let longest = (value.len() - 1).min(tail.len());
            if let Some(n) = (min..=longest).rev().find(|&n| tail.ends_with(&value[..n])) {
                let at = tail.len() - n;
                tail[at..].fill(b'*');
            }
        }
    }

    /// `text` with each value replaced by as many `*`.
    pub(crate) fn text(&self, text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        if !self.redact(&mut bytes) {
            return text.to_owned();
        }
        // A whole value (UTF-8) starts and ends on a character's boundary: still UTF-8.
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// `response` with its status line and headers (names and values) redacted and its
    /// body redacted as it streams; a body it cannot read is refused
    /// ([`EgressError::InvalidResponse`]): a `Content-Encoding` other than `identity` in any
    /// of its headers, a `Transfer-Encoding` other than `chunked` (so call this before
    /// hop-by-hop headers are stripped), or a part of one (206; the proxy sends no `Range`).
    pub(crate) fn response(&self, response: Response<ProxyBody>) -> Result<Response<ProxyBody>, EgressError> {
        let (mut parts, body) = response.into_parts();
        if parts.status == StatusCode::PARTIAL_CONTENT {
            return Err(EgressError::InvalidResponse {
                reason: "the server sent part of a body (206) although the proxy asked for the whole (a part may hold a piece of a secret's value, which the redactor cannot match); a secret is bound to this host and the proxy passes on only whole bodies".into(),
            });
        }
        for (name, readable) in [(header::CONTENT_ENCODING, "identity"), (header::TRANSFER_ENCODING, "chunked")] {
            let unreadable = parts.headers.get_all(&name).iter().find(|value| {
                value.as_bytes().split(|&b| b == b',').any(|coding| !coding.trim_ascii().eq_ignore_ascii_case(readable.as_bytes()))
            });
            if let Some(value) = unreadable {
                // The refusal quotes the value: redacted, as it reaches the sandbox.
                let mut shown = value.as_bytes().to_vec();
                self.redact(&mut shown);
                return Err(EgressError::InvalidResponse {
                    reason: format!(
                        "the server sent a body with `{name}: {}` although the proxy asked for `identity`; a secret is bound to this host and the proxy passes on only a body it can check for the secret's value",
                        String::from_utf8_lossy(&shown)
                    ),
                });
            }
        }
        let mut redacted = false;
        if let Some(reason) = parts.extensions.get::<hyper::ext::ReasonPhrase>() {
            let mut bytes = reason.as_bytes().to_vec();
            if self.redact(&mut bytes) {
                redacted = true;
                let reason = hyper::ext::ReasonPhrase::try_from(bytes).expect("`*` keeps a reason phrase valid");
                parts.extensions.insert(reason);
            }
        }
        // Header names are lowercase: compared with the values lowercased.
        let lowered: Vec<Vec<u8>> = self.values.iter().map(|v| v.to_ascii_lowercase()).collect();
        if parts.headers.keys().any(|name| redact_values(&lowered, &mut name.as_str().as_bytes().to_vec())) {
            redacted = true;
            let mut headers = header::HeaderMap::with_capacity(parts.headers.len());
            let mut current = None;
            for (name, value) in std::mem::take(&mut parts.headers) {
                if let Some(name) = name {
                    let mut bytes = name.as_str().as_bytes().to_vec();
                    redact_values(&lowered, &mut bytes);
                    current = Some(header::HeaderName::from_bytes(&bytes).expect("`*` keeps a header name valid"));
                }
                headers.append(current.clone().expect("the first header has a name"), value);
            }
            parts.headers = headers;
        }
        for value in parts.headers.values_mut() {
            let mut bytes = value.as_bytes().to_vec();
            if self.redact(&mut bytes) {
                redacted = true;
                *value = HeaderValue::from_bytes(&bytes).expect("`*` keeps a header value valid");
            }
        }
        if redacted {
            tracing::warn!("a response's status line or headers echoed a secret's value; redacted");
        }
        let body = Redacting { inner: body, redactor: self.clone(), held: Vec::new(), ended: false };
        Ok(Response::from_parts(parts, body.boxed_unsync()))
    }
}

/// Replace each of `values` in `bytes` by as many `*`.
fn redact_values(values: &[Vec<u8>], bytes: &mut [u8]) -> bool {
    let mut found = false;
    for value in values {
        let (Some(&first), mut at) = (value.first(), 0) else { continue };
        while at + value.len() <= bytes.len() {
            // Compared only where the value's first byte is.
            match bytes[at..=bytes.len() - value.len()].iter().position(|&b| b == first) {
                Some(skip) => at += skip,
                None => break,
            }
            if bytes[at..].starts_with(value) {
                bytes[at..at + value.len()].fill(b'*');
                found = true;
                at += value.len();
            } else {
                at += 1;
            }
        }
    }
    found
}

/// The shortest start of a value redacted at a body's end ([`Redactor::redact_cut`]):
/// shorter, a body ending in it is more likely chance than a cut value, and the skill
/// learns at most this many bytes less one.
const MIN_CUT: usize = 4;

/// A response body with every secret value replaced, across chunk boundaries.
struct Redacting {
    inner: ProxyBody,
    redactor: Redactor,
    /// The tail of what was read, not passed on yet: it may begin a value.
    held: Vec<u8>,
    ended: bool,
}

impl Body for Redacting {
    type Data = Bytes;
    type Error = EgressError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, EgressError>>> {
        let this = &mut *self;
        let keep = this.redactor.values.iter().map(Vec::len).max().unwrap_or(1) - 1;
        loop {
            if this.ended {
                if this.held.is_empty() {
                    return Poll::Ready(None);
                }
                let mut rest = std::mem::take(&mut this.held);
                this.redactor.redact_cut(&mut rest);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.ended = true,
                Poll::Ready(Some(Err(e))) => {
                    this.held.clear();
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are not passed on (they could carry the value unchecked).
                    let Ok(data) = frame.into_data() else { continue };
                    this.held.extend_from_slice(&data);
                    if this.redactor.redact(&mut this.held) {
                        tracing::warn!("a response body echoed a secret's value; redacted");
                    }
                    if this.held.len() > keep {
                        let tail = this.held.split_off(this.held.len() - keep);
                        let out = std::mem::replace(&mut this.held, tail);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redactor(values: &[&str]) -> Redactor {
        Redactor { values: Arc::new(values.iter().map(|v| v.as_bytes().to_vec()).collect()) }
    }

    /// Chunks, one frame each.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = EgressError;

        fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, EgressError>>> {
            Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
        }
    }

    async fn through(redactor: &Redactor, chunks: &[&str]) -> String {
        let inner = Chunks(chunks.iter().map(|c| Bytes::copy_from_slice(c.as_bytes())).collect()).boxed_unsync();
        let body = Redacting { inner, redactor: redactor.clone(), held: Vec::new(), ended: false };
        String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_value_is_redacted_within_and_across_chunks_keeping_the_length() {
        let r = redactor(&["s3cr3t-value"]);
        assert_eq!(through(&r, &["token=s3cr3t-value;"]).await, "token=************;");
        assert_eq!(through(&r, &["a s3cr", "3t-va", "lue b"]).await, "a ************ b");
        assert_eq!(through(&r, &["s3cr3t-valu", "e", "s3cr3t-value"]).await, "************************");
        assert_eq!(through(&r, &["nothing", " here"]).await, "nothing here");
        assert_eq!(through(&r, &["a s3cr3t-valu"]).await, "a ***********", "a body cut in a value ends redacted");
        assert_eq!(through(&r, &["a s3c"]).await, "a s3c", "a shorter start of a value is passed on");
    }
}
