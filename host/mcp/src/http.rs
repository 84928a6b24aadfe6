//! MCP over streamable HTTP: rmcp's `StreamableHttpService` behind hyper, with a bearer
//! token in front.
//!
//! Defaults are for a local agent: listen on 127.0.0.1, accept only loopback `Host`
//! headers and loopback browser `Origin`s (against DNS rebinding). Listening on any other
//! address needs a token; with a token set, every request must carry
//! `Authorization: Bearer TOKEN` (compared in constant time) or gets 401.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::{McpError, SkillhostMcp};

/// How the HTTP transport listens.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Where to listen. Default: 127.0.0.1:8787.
    pub addr: SocketAddr,
    /// The bearer token clients must send. Required unless `addr` is loopback.
    pub token: Option<String>,
    /// `Host` values accepted besides loopback names (for a public name or address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides loopback ones (`https://app.example.com:443`).
    pub allowed_origins: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8787)),
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
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
    if !config.addr.ip().is_loopback() && config.token.as_deref().is_none_or(str::is_empty) {
        return Err(McpError::Config(format!(
            "listening on {} (not loopback) needs a bearer token: pass --token-file FILE or set SKILLHOST_MCP_TOKEN",
            config.addr
        )));
    }
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| McpError::Listen { addr: config.addr, source })?;
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
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.session()),
        std::sync::Arc::new(LocalSessionManager::default()),
        rmcp_config,
    );
    let token = config.token.filter(|t| !t.is_empty()).map(|t| format!("Bearer {t}"));
    tracing::info!(addr = %bound, token = token.is_some(), "serving MCP over streamable HTTP at /mcp");
    if let Some(ready) = ready {
        let _ = ready.send(bound);
    }
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an MCP connection failed");
                    continue;
                }
            },
        };
        let service = service.clone();
        let token = token.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let service = service.clone();
                let token = token.clone();
                async move { Ok::<_, Infallible>(handle(&service, token.as_deref(), request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
            tokio::select! {
                result = connection => if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "MCP HTTP connection ended with an error");
                },
                () = stop.cancelled() => {}
            }
        });
    }
}

type Service = StreamableHttpService<SkillhostMcp, LocalSessionManager>;

async fn handle(
    service: &Service,
    expected: Option<&str>,
    request: hyper::Request<Incoming>,
) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    if let Some(expected) = expected {
        let given = request.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes()).unwrap_or_default();
        if !constant_time_eq(given, expected.as_bytes()) {
            let body = Full::new(Bytes::from_static(
                b"missing or wrong bearer token: send `Authorization: Bearer TOKEN` with the token skillhost serve was given\n",
            ));
            let mut response = hyper::Response::new(body.boxed());
            *response.status_mut() = hyper::StatusCode::UNAUTHORIZED;
            response
                .headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    service.handle(request).await
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"Bearer abc", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer abd", b"Bearer abc"));
        assert!(!constant_time_eq(b"Bearer ab", b"Bearer abc"));
        assert!(!constant_time_eq(b"", b"Bearer abc"));
    }
}
