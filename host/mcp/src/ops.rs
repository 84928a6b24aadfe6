//! The operations listener of `skillhost serve --http --ops ADDR`: health, readiness and
//! metrics for a load balancer, an orchestrator's probes and a Prometheus scraper, and
//! [`Drain`], the graceful stop shared with the MCP front ([`crate::serve_http`]).
//!
//! - `GET /healthz`: `200 ok` while the process serves, draining included (a liveness
//!   probe that failed during a drain would have the replica killed before its calls end).
//! - `GET /readyz`: `200 ready` when the registry's first load has finished, the replica is
//!   not draining and every [`ReadinessCheck`] the embedder plugged in passes; else `503`
//!   with `{"ready":false,"reasons":[…]}`, each reason a sentence naming what and the fix.
//! - `GET /metrics`: the Prometheus text the embedder's [`MetricsRender`] gives (the CLI
//!   installs the `metrics` crate's Prometheus recorder), after setting the gauges
//!   computed at scrape time (`skillhost_approvals_pending`).
//!
//! **No bearer token is asked**, as probes and scrapers expect: bind it to loopback or a
//! cluster-internal address, never a public one. It reveals skill and tool names and
//! counts, nothing of any call's arguments or results, and it changes nothing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use skillhost_registry::{Registry, TrustState};
use tokio_util::sync::CancellationToken;

use crate::McpError;

/// One condition a replica must meet to take traffic, checked at each `GET /readyz`.
///
/// An embedder adds its own (the state store answers, the skills match the lock) to
/// [`OpsConfig::checks`]; the registry's first load and the drain are always checked.
pub trait ReadinessCheck: Send + Sync {
    /// Why the replica is not ready: each reason a sentence naming what is wrong and how to
    /// fix it; empty when this check passes. Called on every probe: keep it quick.
    fn check(&self) -> Vec<String>;
}

/// Renders the metrics as Prometheus text exposition (the embedder's recorder).
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// How the operations listener listens, and what it checks.
#[derive(Clone)]
pub struct OpsConfig {
    /// Where to listen (e.g. 127.0.0.1:9090). Never a public address: nothing is asked of
    /// its clients.
    pub addr: SocketAddr,
    /// The embedder's readiness checks, besides the registry's first load and the drain.
    pub checks: Vec<Arc<dyn ReadinessCheck>>,
    /// The Prometheus text of `GET /metrics`; `None` answers it 404.
    pub metrics: Option<MetricsRender>,
}

impl std::fmt::Debug for OpsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpsConfig")
            .field("addr", &self.addr)
            .field("checks", &self.checks.len())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// A replica's graceful stop: once [`start`](Self::start)ed, the MCP front answers every
/// new request 503 with `Retry-After` (nothing of it runs), `/readyz` turns 503, and
/// [`idle`](Self::idle) tells when the requests already taken have been answered.
#[derive(Clone, Debug, Default)]
pub struct Drain(Arc<DrainState>);

#[derive(Debug, Default)]
struct DrainState {
    draining: AtomicBool,
    /// The MCP requests taken and not yet answered (their response bodies included).
    in_flight: tokio::sync::watch::Sender<usize>,
}

impl Drain {
    /// Take no new requests from now on.
    pub fn start(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    /// Whether [`start`](Self::start) was called.
    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// The requests taken and not yet answered.
    pub fn in_flight(&self) -> usize {
        *self.0.in_flight.borrow()
    }

    /// Wait until no request taken is still unanswered (at once when none is).
    pub async fn idle(&self) {
        let mut in_flight = self.0.in_flight.subscribe();
        let _ = in_flight.wait_for(|&n| n == 0).await;
    }

    /// Count one request in, unless draining: then `None`, and it must be refused.
    pub(crate) fn enter(&self) -> Option<InFlight> {
        // Counted before the flag is read: a drain that started meanwhile waits for it,
        // or it sees the flag and leaves.
        self.0.in_flight.send_modify(|n| *n += 1);
        let guard = InFlight(self.clone());
        (!self.is_draining()).then_some(guard)
    }
}

/// One request in flight, counted in its [`Drain`] until dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Drain);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Serve the operations endpoints until `shutdown` is cancelled. `ready` receives the
/// bound address (useful with port 0).
pub async fn serve_ops(
    registry: Arc<Registry>,
    config: OpsConfig,
    drain: Drain,
    shutdown: CancellationToken,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), McpError> {
    let listener = tokio::net::TcpListener::bind(config.addr).await.map_err(|source| McpError::Listen { addr: config.addr, source })?;
    let bound = listener.local_addr().map_err(|source| McpError::Listen { addr: config.addr, source })?;
    tracing::info!(addr = %bound, "serving /healthz, /readyz and /metrics (no token: keep this address private)");
    if let Some(ready) = ready {
        let _ = ready.send(bound);
    }
    let ops = Arc::new(Ops { registry, config, drain });
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Some((stream, peer, slot)) = crate::http::accept(&listener, &shutdown, "an operations", &slots).await else { return Ok(()) };
        let ops = ops.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let ops = ops.clone();
                async move { Ok::<_, Infallible>(ops.respond(&request).await) }
            });
            let connection = crate::http::connection_builder().serve_connection(TokioIo::new(stream), handler);
            tokio::select! {
                result = connection => if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "operations connection ended with an error");
                },
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

struct Ops {
    registry: Arc<Registry>,
    config: OpsConfig,
    drain: Drain,
}

/// Connections the operations listener serves at once (probes and scrapes are few).
const MAX_CONNECTIONS: usize = 32;

/// How long `/readyz` waits for the embedder's checks (a state store that does not
/// answer) before answering not ready for that reason.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Ops {
    async fn respond<B>(self: &Arc<Self>, request: &hyper::Request<B>) -> hyper::Response<BoxBody<Bytes, Infallible>> {
        if request.method() != hyper::Method::GET && request.method() != hyper::Method::HEAD {
            return text(405, "text/plain; charset=utf-8", "only GET is served here: /healthz, /readyz, /metrics\n".to_owned());
        }
        match request.uri().path() {
            "/healthz" => text(200, "text/plain; charset=utf-8", "ok\n".to_owned()),
            "/readyz" => {
                let reasons = self.reasons().await;
                if reasons.is_empty() {
                    text(200, "text/plain; charset=utf-8", "ready\n".to_owned())
                } else {
                    let body = serde_json::json!({"ready": false, "reasons": reasons});
                    text(503, "application/json", format!("{body}\n"))
                }
            }
            "/metrics" => match &self.config.metrics {
                Some(render) => {
                    metrics::gauge!(APPROVALS_PENDING).set(pending_approvals(&self.registry) as f64);
                    text(200, "text/plain; version=0.0.4; charset=utf-8", render())
                }
                None => text(404, "text/plain; charset=utf-8", "metrics are off in this host\n".to_owned()),
            },
            _ => text(404, "text/plain; charset=utf-8", "not found: this listener serves /healthz, /readyz and /metrics\n".to_owned()),
        }
    }

    /// Why the replica is not ready, built-in checks first; the embedder's on a blocking
    /// thread, bounded by [`CHECK_TIMEOUT`].
    async fn reasons(self: &Arc<Self>) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.drain.is_draining() {
            reasons
                .push("this replica is draining (it was told to stop) and takes no new requests; send them to another replica".to_owned());
        }
        let loading = self.registry.loading();
        if !loading.is_empty() {
            const NAMED: usize = 5;
            let mut names: Vec<String> = loading.iter().take(NAMED).map(ToString::to_string).collect();
            if loading.len() > NAMED {
                names.push(format!("and {} more", loading.len() - NAMED));
            }
            reasons.push(format!(
                "the first load of the skills is not finished ({} still loading: {}); wait for it, and run `skillhost list` to see a skill that fails to load",
                loading.len(),
                names.join(", ")
            ));
        }
        let ops = self.clone();
        let checked = tokio::task::spawn_blocking(move || ops.config.checks.iter().flat_map(|check| check.check()).collect::<Vec<_>>());
        match tokio::time::timeout(CHECK_TIMEOUT, checked).await {
            Ok(Ok(found)) => reasons.extend(found),
            Ok(Err(e)) => reasons.push(format!("the readiness checks failed: {e}")),
            Err(_) => reasons.push(format!(
                "the readiness checks (the state store among them) did not answer within {CHECK_TIMEOUT:?}; see the log and `skillhost doctor`"
            )),
        }
        reasons
    }
}

/// The gauge of the skills waiting for a human's approval, set at each scrape.
const APPROVALS_PENDING: &str = "skillhost_approvals_pending";

/// The catalog's skills waiting for a human: never approved, or changed since.
fn pending_approvals(registry: &Registry) -> usize {
    registry.catalog().iter().filter(|e| matches!(e.state, TrustState::PendingReview | TrustState::NeedsReapproval)).count()
}

fn text(status: u16, content_type: &'static str, body: String) -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_waits_for_what_it_took_and_refuses_the_rest() {
        let drain = Drain::default();
        let taken = drain.enter().expect("not draining yet");
        assert_eq!(drain.in_flight(), 1);
        drain.start();
        assert!(drain.enter().is_none(), "a new request is refused while draining");
        assert_eq!(drain.in_flight(), 1, "the refused one is not counted");
        let idle = drain.clone();
        let waiting = tokio::spawn(async move { idle.idle().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a request taken is still in flight");
        drop(taken);
        waiting.await.unwrap();
        assert_eq!(drain.in_flight(), 0);
    }
}
