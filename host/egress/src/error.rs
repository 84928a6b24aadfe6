//! [`EgressError`]: why an outbound request or tunnel did not complete. Each runtime
//! maps it to what its skills see (a `wasi:http` error code, an HTTP status from the
//! proxy).

use std::net::SocketAddr;
use std::time::Duration;

/// Why an outbound request or tunnel did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// The skill's rules refuse it, or a secret it needs is not set. The reason names
    /// what was refused and how to allow it.
    #[error("{reason}")]
    Denied {
        /// What was refused and how to allow it.
        reason: String,
    },
    /// The host name did not resolve.
    #[error("{host} did not resolve: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// What the resolver said.
        source: std::io::Error,
    },
    /// Resolving took longer than the connect timeout.
    #[error("resolving {host} timed out")]
    ResolveTimeout {
        /// The name.
        host: String,
    },
    /// The server refused the connection.
    #[error("connection to {addr} refused")]
    ConnectionRefused {
        /// The checked address.
        addr: SocketAddr,
    },
    /// The connection failed for another reason.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The checked address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Connecting (or the TLS handshake) took longer than the connect timeout.
    #[error("connecting to {addr} timed out")]
    ConnectTimeout {
        /// The checked address.
        addr: SocketAddr,
    },
    /// The host cannot be used as a TLS server name.
    #[error("`{host}` is not a valid TLS server name")]
    ServerName {
        /// The host.
        host: String,
        /// What rustls said.
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS handshake failed.
    #[error("TLS with {host} failed: {source}")]
    Tls {
        /// The host.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP exchange with the server failed.
    #[error("HTTP exchange failed: {0}")]
    Http(#[from] hyper::Error),
    /// No response head arrived within the first-byte timeout.
    #[error("no response within {0:?}")]
    FirstByteTimeout(Duration),
    /// The request (response body included) or the tunnel outlived its total timeout.
    #[error("not finished within {0:?}")]
    TotalTimeout(Duration),
    /// Nothing moved through a tunnel for its idle timeout.
    #[error("tunnel idle for {0:?}")]
    IdleTimeout(Duration),
    /// The request body is larger than the host sends.
    #[error("request body over {limit} bytes")]
    RequestBodyTooLarge {
        /// The cap.
        limit: usize,
    },
    /// The skill did not send its request body within the time it had (a slow sender is
    /// cut off rather than held).
    #[error("the request body did not arrive within {0:?}; send it at once, after the head")]
    RequestBodyTimeout(Duration),
    /// The host-wide budget of request-body bytes held in memory had no room for this body
    /// within its wait.
    #[error(
        "the host's budget for request bodies held in memory ({capacity} bytes, all skills together) had no room for this body within {wait:?}; retry later, send smaller bodies, or raise `NetConfig::request_body_budget`"
    )]
    BodyBudget {
        /// The budget in bytes.
        capacity: usize,
        /// How long the request waited for room.
        wait: Duration,
    },
    /// The request body could not be read from the skill.
    #[error("request body could not be read: {reason}")]
    RequestBody {
        /// Why.
        reason: String,
    },
    /// The response body passed the cap.
    #[error("response body passed the cap of {limit} bytes")]
    ResponseBodyTooLarge {
        /// The cap.
        limit: u64,
    },
    /// A tunnel carried more than its byte cap.
    #[error("tunnel passed the cap of {limit} bytes")]
    TunnelTooLarge {
        /// The cap (both directions together).
        limit: u64,
    },
    /// Reading or writing a tunnel failed.
    #[error("tunnel failed: {0}")]
    Io(#[from] std::io::Error),
    /// A secret bound to the request's host is not a valid header value.
    #[error("secret `{name}` is not a valid header value")]
    BadSecret {
        /// The secret's name.
        name: String,
    },
    /// The server's response cannot be handed to the skill (it could carry a secret's
    /// value past the redactor).
    #[error("the response cannot be passed on: {reason}")]
    InvalidResponse {
        /// Why.
        reason: String,
    },
    /// The request cannot be sent as it is (a bad URI or header value).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
}
