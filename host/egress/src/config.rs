//! How the host reaches the network on skills' behalf: [`NetConfig`] (resolver, secrets,
//! audit sink, timeouts, caps, the request-body budget, TLS roots, the egress CA) and the
//! [`SystemResolver`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use skillhost_core::{AuditSink, NoAudit, NoSecrets, Resolver, SecretSource};

use crate::BodyBudget;

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
    /// Requests one skill may have open at once; more wait, holding no body (a request's
    /// body is read only once it has its slot). Default: 8.
    pub max_concurrent_per_skill: usize,
    /// Request-body bytes the host holds in memory at once, all skills and runtimes
    /// together (shared by clones of this config); a body that finds no room within the
    /// budget's wait is refused. Default: 64 MiB, waiting at most 5 s.
    pub request_body_budget: BodyBudget,
    /// Root certificates for HTTPS. Default: the Mozilla roots (webpki-roots).
    pub tls: Arc<rustls::ClientConfig>,
    /// The CA the sandbox proxy terminates TLS with for hosts a secret is bound to, and
    /// that sandboxes with such secrets trust. Default: none, and a `CONNECT` to such a
    /// host is refused (the facade gives `<data_dir>/egress-ca`).
    pub ca: Option<Arc<crate::EgressCa>>,
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
            request_body_budget: BodyBudget::default(),
            tls: Arc::new(tls),
            ca: None,
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
            .field("request_body_budget", &self.request_body_budget)
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
