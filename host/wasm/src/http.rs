//! The outbound HTTP gate: the only way a wasm skill reaches the network.
//!
//! `wasi:http/outgoing-handler` is linked only for skills whose grant has network rules,
//! and every request goes through [`HttpGate`], a thin adapter over
//! [`skillhost_egress::SkillEgress::send`], which applies the skill's rules, resolves once
//! and pins the address, sets `Host`, adds bound secrets, applies timeouts, the response
//! cap and the per-skill concurrency limit, and writes the audit row. This module only
//! turns the outcome into what `wasi:http` speaks.
//!
//! A refusal is `ErrorCode::HttpRequestDenied` for the guest (never a trap), a log line,
//! and a note the host adds to the call's error.

use parking_lot::Mutex;
use std::sync::Arc;

use http_body_util::BodyExt;
use skillhost_core::{Grant, SecretBinding};
use skillhost_egress::{EgressError, NetConfig, SkillEgress};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::state::CallLog;

/// What a skill brings to every call's gate.
#[derive(Clone)]
pub(crate) struct SkillNet {
    pub(crate) egress: SkillEgress,
    pub(crate) secrets: Arc<[SecretBinding]>,
}

impl SkillNet {
    /// The network of `grant`: its rules and the secrets bound to them.
    pub(crate) fn new(grant: &Grant, net: Arc<NetConfig>) -> Self {
        Self { egress: SkillEgress::new(grant.skill.clone(), Arc::new(grant.network.clone()), net), secrets: grant.secrets.clone().into() }
    }

    /// A network that refuses every request and holds no secret, whatever the skill's own
    /// grant says: for code that runs under a probe grant.
    pub(crate) fn offline(grant: &Grant, net: Arc<NetConfig>) -> Self {
        debug_assert!(grant.is_offline());
        Self { egress: SkillEgress::new(grant.skill.clone(), Arc::new(Default::default()), net), secrets: Arc::new([]) }
    }
}

/// One call's view of the gate: its skill's egress and the call's log. Cloned (cheaply)
/// into each request's future.
#[derive(Clone)]
pub(crate) struct HttpGate {
    tool: String,
    net: SkillNet,
    log: Arc<CallLog>,
    /// Refusals during this call, added to the call's error message.
    denials: Arc<Mutex<Vec<String>>>,
}

impl HttpGate {
    /// The gate of one call of `tool`; `_skill` is the skill `net` already belongs to.
    pub(crate) fn new(_skill: &str, tool: &str, net: &SkillNet, log: Arc<CallLog>) -> Self {
        Self { tool: tool.to_owned(), net: net.clone(), log, denials: Arc::default() }
    }

    /// The refusals of this call so far.
    pub(crate) fn denials(&self) -> Vec<String> {
        self.denials.lock().clone()
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
        // ignored for now and the host's apply. The request may be sent from a task of its
        // own: its span is a child of the call's, current now.
        Box::new(tracing::Instrument::instrument(self.clone().send(request), tracing::Span::current()))
    }
}

impl HttpGate {
    async fn send(self, request: http::Request<WasiBody>) -> SendResult {
        match self.net.egress.send(&self.tool, request, &self.net.secrets).await {
            Ok(response) => {
                let response = response.map(|body| body.map_err(body_error).boxed_unsync());
                Ok((response, Box::new(async { Ok(()) })))
            }
            Err(EgressError::Denied { reason }) => {
                // Audited by the egress; the call's log and error say it too.
                self.log.write_line("warn", format!("outbound request refused: {reason}").as_bytes());
                self.denials.lock().push(reason);
                Err(Error::HttpRequestDenied)
            }
            Err(e) => Err(request_error(e)),
        }
    }
}

/// The `wasi:http` error code for a request that got no response.
fn request_error(error: EgressError) -> Error {
    match error {
        EgressError::Denied { .. } => Error::HttpRequestDenied,
        EgressError::Resolve { .. } => Error::DnsError { rcode: None, info_code: None },
        EgressError::ResolveTimeout { .. } => Error::DnsTimeout,
        EgressError::ConnectionRefused { .. } => Error::ConnectionRefused,
        EgressError::Connect { source, .. } => Error::Connect(source),
        EgressError::ConnectTimeout { .. } => Error::ConnectionTimeout,
        EgressError::ServerName { source, .. } => Error::InvalidDnsNameError(source),
        EgressError::Tls { source, .. } => Error::Tls(source),
        EgressError::Http(e) => Error::Hyper(e),
        EgressError::FirstByteTimeout(_) => Error::HttpResponseTimeout,
        EgressError::TotalTimeout(_) | EgressError::IdleTimeout(_) => Error::ConnectionReadTimeout,
        EgressError::RequestBodyTooLarge { .. } | EgressError::RequestBody { .. } => Error::HttpRequestBodySize(None),
        EgressError::ResponseBodyTooLarge { limit } => Error::HttpResponseBodySize(Some(limit)),
        EgressError::InvalidRequest { .. } => Error::HttpRequestUriInvalid,
        other => Error::InternalError(Some(other.to_string())),
    }
}

/// The `wasi:http` error code for a response body that failed.
fn body_error(error: EgressError) -> Error {
    match error {
        EgressError::TotalTimeout(_) => Error::HttpResponseTimeout,
        other => request_error(other),
    }
}
