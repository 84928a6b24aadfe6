//! The `wasi:http` 0.2 client behind [`request`](super::request), over the
//! `wasi` crate's raw bindings (0.14.2: `wasi:http@0.2.4`, see Cargo.toml).
//!
//! Rules the code follows (the host traps otherwise): a child resource
//! (stream, pollable, fields) is dropped before its parent (body, future,
//! response), and the request's body stream is dropped before
//! `outgoing-body.finish`. Every host error is a value: nothing here panics.
//!
//! The error-code mapping is compiled on every target (and unit-tested
//! natively); the calls into the host only on wasm.

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use ::wasi::http::types::ErrorCode;

use super::{HttpError, Method};

/// What the error messages need to know about the request.
pub(super) struct Context<'a> {
    pub(super) method: &'a Method,
    pub(super) url: &'a str,
}

/// Turns a `wasi:http` error code into an [`HttpError`]; `status` is the
/// response's, when the error came while reading its body.
pub(super) fn from_code(code: ErrorCode, cx: &Context<'_>, status: Option<u16>) -> HttpError {
    let url = cx.url.to_owned();
    let method = cx.method;
    let other = |what: String| HttpError::Connection(format!("{method} {url}: {what}"));
    let invalid = |what: &str| HttpError::Invalid(format!("{method} {url}: {what}"));
    match code {
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => HttpError::denied(method, cx.url),
        ErrorCode::DnsTimeout
        | ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => HttpError::Timeout { url },
        ErrorCode::HttpResponseBodySize(limit) => HttpError::TooLarge { url, status, limit },
        ErrorCode::HttpResponseHeaderSectionSize(limit) => HttpError::TooLarge { url, status, limit: limit.map(u64::from) },
        ErrorCode::HttpResponseHeaderSize(_) | ErrorCode::HttpResponseTrailerSectionSize(_) | ErrorCode::HttpResponseTrailerSize(_) => {
            HttpError::TooLarge { url, status, limit: None }
        }
        ErrorCode::HttpRequestMethodInvalid => invalid("the method is not valid"),
        ErrorCode::HttpRequestUriInvalid => invalid("the URL is not valid"),
        ErrorCode::HttpRequestUriTooLong => invalid("the URL is too long"),
        ErrorCode::HttpRequestLengthRequired => invalid("the server requires a Content-Length"),
        ErrorCode::HttpRequestBodySize(_) => invalid("the request body is too large"),
        ErrorCode::HttpRequestHeaderSectionSize(_) | ErrorCode::HttpRequestHeaderSize(_) => invalid("the request headers are too large"),
        ErrorCode::HttpRequestTrailerSectionSize(_) | ErrorCode::HttpRequestTrailerSize(_) => invalid("the request trailers are too large"),
        ErrorCode::DnsError(payload) => {
            other(format!("DNS lookup failed{}", payload.rcode.map(|rcode| format!(" ({rcode})")).unwrap_or_default()))
        }
        ErrorCode::DestinationNotFound => other("the host name was not found".into()),
        ErrorCode::DestinationUnavailable => other("the server is unavailable".into()),
        ErrorCode::DestinationIpUnroutable => other("the address is unroutable".into()),
        ErrorCode::ConnectionRefused => other("connection refused".into()),
        ErrorCode::ConnectionTerminated => other("the connection was closed".into()),
        ErrorCode::ConnectionLimitReached => other("too many connections".into()),
        ErrorCode::TlsProtocolError => other("TLS protocol error".into()),
        ErrorCode::TlsCertificateError => other("the server's TLS certificate is not valid".into()),
        ErrorCode::TlsAlertReceived(alert) => {
            other(format!("TLS alert from the server{}", alert.alert_message.map(|m| format!(": {m}")).unwrap_or_default()))
        }
        ErrorCode::HttpResponseIncomplete => other("the response was cut short".into()),
        ErrorCode::HttpResponseTransferCoding(coding) => {
            other(format!("unsupported transfer coding{}", coding.map(|c| format!(" {c}")).unwrap_or_default()))
        }
        ErrorCode::HttpResponseContentCoding(coding) => {
            other(format!("unsupported content coding{}", coding.map(|c| format!(" {c}")).unwrap_or_default()))
        }
        ErrorCode::HttpUpgradeFailed => other("the protocol upgrade failed".into()),
        ErrorCode::HttpProtocolError => other("HTTP protocol error".into()),
        ErrorCode::LoopDetected => other("a request loop was detected".into()),
        ErrorCode::ConfigurationError => other("the host's HTTP client is misconfigured".into()),
        ErrorCode::InternalError(message) => other(format!("host error{}", message.map(|m| format!(": {m}")).unwrap_or_default())),
    }
}

#[cfg(target_arch = "wasm32")]
pub(super) use client::send;

#[cfg(target_arch = "wasm32")]
mod client {
    use std::time::Duration;

    use ::wasi::clocks::monotonic_clock::{self, Instant};
    use ::wasi::http::outgoing_handler;
    use ::wasi::http::types::{self as wt, FutureIncomingResponse, HeaderError, IncomingResponse, OutgoingBody};
    use ::wasi::io::poll::{self, Pollable};
    use ::wasi::io::streams::{self, StreamError};

    use super::{Context, from_code};
    use crate::http::{HttpError, Method, Request, Response, Target};

    /// Bytes asked for per read of the response body.
    const READ_CHUNK: u64 = 64 * 1024;

    pub(in crate::http) fn send(request: &Request, target: &Target) -> Result<Response, HttpError> {
        let cx = Context { method: &request.method, url: &request.url };
        let deadline = request.timeout.map(|t| monotonic_clock::now().saturating_add(nanos(t)));

        let outgoing = build(request, target, &cx)?;
        let options = request.timeout.map(|t| {
            let options = wt::RequestOptions::new();
            // A host that does not support one of these says so; the
            // deadline below still applies.
            let _ = options.set_connect_timeout(Some(nanos(t)));
            let _ = options.set_first_byte_timeout(Some(nanos(t)));
            let _ = options.set_between_bytes_timeout(Some(nanos(t)));
            options
        });
        let body =
            outgoing.body().map_err(|()| HttpError::Connection(format!("{} {}: the host gave no request body", cx.method, cx.url)))?;
        let future = outgoing_handler::handle(outgoing, options).map_err(|c| from_code(c, &cx, None))?;
        // A write fails when the host refused the request or the server
        // answered before reading the whole body: either way the response
        // (or its error) is what the caller needs to see.
        let _ = write_body(body, &request.body, deadline, &cx);
        let response = wait_response(&future, deadline, &cx)?;
        drop(future);
        let result = read_response(&response, request.max_body, deadline, &cx);
        drop(response);
        result
    }

    /// The request with its method, URL and headers.
    fn build(request: &Request, target: &Target, cx: &Context<'_>) -> Result<wt::OutgoingRequest, HttpError> {
        let invalid = |what: String| HttpError::Invalid(format!("{} {}: {what}", cx.method, cx.url));
        let headers = wt::Fields::new();
        // Many servers refuse a chunked request body: say how long it is.
        let sized = !request.body.is_empty() || matches!(request.method, Method::Post | Method::Put | Method::Patch);
        let length = (sized && request.header_value("content-length").is_none())
            .then(|| ("content-length".to_owned(), request.body.len().to_string()));
        for (name, value) in request.headers.iter().chain(&length) {
            if let Err(error) = headers.append(name, value.as_bytes()) {
                let why = match error {
                    HeaderError::Forbidden => {
                        "the host sets or forbids this header (Host comes from the URL; \
                         hop-by-hop headers are not allowed)"
                    }
                    HeaderError::InvalidSyntax => "the name or value is not valid",
                    HeaderError::Immutable => "the headers are immutable",
                };
                return Err(invalid(format!("header `{name}` refused: {why}")));
            }
        }
        let outgoing = wt::OutgoingRequest::new(headers);
        let method = match &request.method {
            Method::Get => wt::Method::Get,
            Method::Head => wt::Method::Head,
            Method::Post => wt::Method::Post,
            Method::Put => wt::Method::Put,
            Method::Patch => wt::Method::Patch,
            Method::Delete => wt::Method::Delete,
            Method::Options => wt::Method::Options,
            Method::Other(name) => wt::Method::Other(name.clone()),
        };
        outgoing.set_method(&method).map_err(|()| invalid("the method is not valid".into()))?;
        let scheme = if target.https { wt::Scheme::Https } else { wt::Scheme::Http };
        outgoing.set_scheme(Some(&scheme)).map_err(|()| invalid("the scheme is not valid".into()))?;
        outgoing.set_authority(Some(&target.authority)).map_err(|()| invalid(format!("the host `{}` is not valid", target.authority)))?;
        outgoing
            .set_path_with_query(Some(&target.path_with_query))
            .map_err(|()| invalid(format!("the path `{}` is not valid", target.path_with_query)))?;
        Ok(outgoing)
    }

    /// Writes `bytes` as the request body and finishes it.
    fn write_body(body: OutgoingBody, bytes: &[u8], deadline: Option<Instant>, cx: &Context<'_>) -> Result<(), HttpError> {
        if !bytes.is_empty() {
            let stream =
                body.write().map_err(|()| HttpError::Connection(format!("{} {}: the request body is not writable", cx.method, cx.url)))?;
            let written = write_all(&stream, bytes, deadline, cx);
            drop(stream);
            written?;
        }
        OutgoingBody::finish(body, None).map_err(|c| from_code(c, cx, None))
    }

    fn write_all(stream: &streams::OutputStream, mut bytes: &[u8], deadline: Option<Instant>, cx: &Context<'_>) -> Result<(), HttpError> {
        let failed = |error: StreamError| stream_error(error, cx, None, "sending the request body");
        while !bytes.is_empty() {
            let ready = stream.check_write().map_err(failed)?;
            if ready == 0 {
                wait(&stream.subscribe(), deadline, cx)?;
                continue;
            }
            let n = bytes.len().min(usize::try_from(ready).unwrap_or(usize::MAX));
            stream.write(&bytes[..n]).map_err(failed)?;
            bytes = &bytes[n..];
        }
        // Wait until the host took everything: `check-write` is 0 while a
        // flush is under way and fails if it failed.
        stream.flush().map_err(failed)?;
        while stream.check_write().map_err(failed)? == 0 {
            wait(&stream.subscribe(), deadline, cx)?;
        }
        Ok(())
    }

    /// Waits for the response's status and headers.
    fn wait_response(future: &FutureIncomingResponse, deadline: Option<Instant>, cx: &Context<'_>) -> Result<IncomingResponse, HttpError> {
        loop {
            match future.get() {
                Some(Ok(Ok(response))) => return Ok(response),
                Some(Ok(Err(code))) => return Err(from_code(code, cx, None)),
                Some(Err(())) => {
                    return Err(HttpError::Connection(format!("{} {}: the response was already taken", cx.method, cx.url)));
                }
                None => wait(&future.subscribe(), deadline, cx)?,
            }
        }
    }

    /// Reads the status, the headers and the whole body.
    fn read_response(
        response: &IncomingResponse,
        max_body: Option<u64>,
        deadline: Option<Instant>,
        cx: &Context<'_>,
    ) -> Result<Response, HttpError> {
        let status = response.status();
        let headers = {
            let fields = response.headers();
            let entries = fields.entries();
            drop(fields);
            entries.into_iter().map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned())).collect()
        };
        let incoming = response
            .consume()
            .map_err(|()| HttpError::Connection(format!("{} {}: the response body was already taken", cx.method, cx.url)))?;
        let body = match incoming.stream() {
            Ok(stream) => {
                let body = read_all(&stream, max_body, deadline, cx, status);
                drop(stream);
                body
            }
            Err(()) => Err(HttpError::Connection(format!("{} {}: the response body is not readable", cx.method, cx.url))),
        };
        let body = body?;
        // An error after the last byte (a cut or oversized body) shows up
        // when the trailers are read.
        let trailers = wt::IncomingBody::finish(incoming);
        loop {
            match trailers.get() {
                Some(Ok(Err(code))) => return Err(from_code(code, cx, Some(status))),
                Some(_) => break,
                None => wait(&trailers.subscribe(), deadline, cx)?,
            }
        }
        Ok(Response { url: cx.url.to_owned(), status, headers, body })
    }

    fn read_all(
        stream: &streams::InputStream,
        max_body: Option<u64>,
        deadline: Option<Instant>,
        cx: &Context<'_>,
        status: u16,
    ) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        loop {
            match stream.read(READ_CHUNK) {
                Ok(chunk) if chunk.is_empty() => wait(&stream.subscribe(), deadline, cx)?,
                Ok(chunk) => {
                    body.extend_from_slice(&chunk);
                    if let Some(limit) = max_body
                        && body.len() as u64 > limit
                    {
                        return Err(HttpError::TooLarge { url: cx.url.to_owned(), status: Some(status), limit: Some(limit) });
                    }
                }
                Err(StreamError::Closed) => return Ok(body),
                Err(error) => {
                    return Err(stream_error(error, cx, Some(status), "reading the response body"));
                }
            }
            if let Some(deadline) = deadline
                && monotonic_clock::now() >= deadline
            {
                return Err(HttpError::Timeout { url: cx.url.to_owned() });
            }
        }
    }

    fn stream_error(error: StreamError, cx: &Context<'_>, status: Option<u16>, doing: &str) -> HttpError {
        match error {
            StreamError::LastOperationFailed(error) => match wt::http_error_code(&error) {
                Some(code) => from_code(code, cx, status),
                None => HttpError::Connection(format!("{} {}: {doing} failed: {}", cx.method, cx.url, error.to_debug_string())),
            },
            StreamError::Closed => HttpError::Connection(format!("{} {}: {doing} failed: the connection was closed", cx.method, cx.url)),
        }
    }

    /// Blocks until `pollable` is ready, or fails with a timeout at `deadline`.
    fn wait(pollable: &Pollable, deadline: Option<Instant>, cx: &Context<'_>) -> Result<(), HttpError> {
        let Some(deadline) = deadline else {
            pollable.block();
            return Ok(());
        };
        let timer = monotonic_clock::subscribe_instant(deadline);
        let ready = poll::poll(&[pollable, &timer]);
        drop(timer);
        if ready.contains(&0) { Ok(()) } else { Err(HttpError::Timeout { url: cx.url.to_owned() }) }
    }

    fn nanos(duration: Duration) -> u64 {
        u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use ::wasi::http::types::{DnsErrorPayload, ErrorCode};

    use super::*;

    #[test]
    fn codes_map_to_the_error_kinds() {
        let method = Method::Get;
        let cx = Context { method: &method, url: "https://x.test/a" };
        let kind = |code| from_code(code, &cx, Some(200)).code();
        assert_eq!(kind(ErrorCode::HttpRequestDenied), "denied");
        assert_eq!(kind(ErrorCode::DestinationIpProhibited), "denied");
        assert_eq!(kind(ErrorCode::ConnectionTimeout), "timeout");
        assert_eq!(kind(ErrorCode::HttpResponseTimeout), "timeout");
        assert_eq!(kind(ErrorCode::ConnectionRefused), "connection");
        assert_eq!(kind(ErrorCode::TlsCertificateError), "connection");
        assert_eq!(kind(ErrorCode::HttpRequestUriInvalid), "invalid");
        assert_eq!(
            from_code(ErrorCode::HttpResponseBodySize(Some(1024)), &cx, Some(200)),
            HttpError::TooLarge { url: "https://x.test/a".into(), status: Some(200), limit: Some(1024) }
        );
        let dns = from_code(ErrorCode::DnsError(DnsErrorPayload { rcode: Some("NXDOMAIN".into()), info_code: None }), &cx, None);
        assert_eq!(dns.to_string(), "GET https://x.test/a: DNS lookup failed (NXDOMAIN)");
        let denied = from_code(ErrorCode::HttpRequestDenied, &cx, None).to_string();
        assert!(denied.contains("`https://x.test` is not allowed") && denied.contains("[network] allow"), "{denied}");
        let internal = from_code(ErrorCode::InternalError(Some("boom".into())), &cx, None);
        assert_eq!(internal.to_string(), "GET https://x.test/a: host error: boom");
    }
}
