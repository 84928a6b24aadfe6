//! skillhost's egress: the one path by which any skill reaches the network, whatever
//! runtime runs it.
//!
//! - [`SkillEgress`] applies a skill's [`EgressPolicy`](skillhost_core::EgressPolicy) to
//!   each request: rules checked before any DNS, the name resolved once by the host and the
//!   address checked and pinned, TLS to the checked name, `Host` rewritten, timeouts, a
//!   response cap ([`CappedBody`]), a per-skill concurrency limit taken before a request
//!   body is read, the host-wide [`BodyBudget`] for buffered request bodies and an audit
//!   row for every request. The wasm runtime's `wasi:http` gate is a thin adapter over it.
//! - [`proxy::EgressProxy`] serves a sandboxed skill the same egress as an HTTP proxy on a
//!   Unix socket (plain requests and `CONNECT` tunnels, [`Tunnel`]); for a host a secret
//!   is bound to, it terminates the client's TLS with a leaf of the host's [`EgressCa`]
//!   and sends each decrypted request the way it sends a plain one (`terminate`).
//! - [`shim`] runs inside the sandbox: it bridges `127.0.0.1:<port>` to that socket,
//!   starts the skill's command and reaps every process.
//! - [`NetConfig`] is the host's side: resolver, secrets, audit sink, timeouts, caps, TLS
//!   roots.

mod audit;
mod budget;
pub mod ca;
mod config;
mod error;
pub mod proxy;
pub mod shim;
mod skill;
mod terminate;
mod tunnel;

pub use budget::BodyBudget;
pub use ca::{Authority, CaError, EgressCa};
pub use config::{NetConfig, SystemResolver};
pub use error::EgressError;
pub use proxy::{EgressProxy, ProxyCall, ProxyCalls, ProxyConfig, ProxyError};
pub use shim::ShimArgs;
pub use skill::{CappedBody, MAX_REQUEST_BYTES, SkillEgress};
pub use tunnel::{Tunnel, TunnelLimits};
