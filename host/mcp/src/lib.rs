//! skillhost's MCP front: serves every skill of a [`Registry`] to agents over MCP.
//!
//! ```no_run
//! # async fn demo(registry: std::sync::Arc<skillhost_registry::Registry>) -> Result<(), skillhost_mcp::McpError> {
//! use skillhost_mcp::{McpConfig, SkillhostMcp};
//!
//! let server = SkillhostMcp::new(registry, McpConfig::default())?;
//! skillhost_mcp::serve_stdio(server).await?;
//! # Ok(()) }
//! ```
//!
//! - `server`: [`SkillhostMcp`], the rmcp handler: tools as `SKILL__TOOL`, calls with
//!   progress and cancellation, deferred tools, list changes, approvals by elicitation,
//!   SKILL.md files as `skill://NAME/PATH` resources.
//! - `skills`: the MCP Skills extension (`skills/list`, `skills/get`): each approved
//!   skill with SKILL.md as its frontmatter and a manifest of its files (SHA-256 digest
//!   and size of the bytes `resources/read` serves), paged and bounded.
//! - `tools`: the tool table and its conversion to MCP tools (schemas, annotations,
//!   structured output).
//! - `builtin`: `tool_search`, `skill_list`, `skill_search`, `skill_get`,
//!   `read_skill_resource`.
//! - `search`: `regex` and `exact` matching with the search score contract and
//!   deterministic order; `fts` goes to the search index (`skillhost-index`), synced
//!   with the registry before each search, and responses say which `ranker` answered
//!   and `why` (a session keeps the ranker of its first full-text search) and, when
//!   nothing matched well, `no_good_match` with a hint that a skill can be created.
//! - `knowledge`: the L1 skill directory within a token budget ([`skills_directory`],
//!   also the `instructions` and the `skills_directory` prompt), SKILL.md bodies within
//!   a token budget, and resource reads that never leave a skill's folder.
//! - `forge`: `skill_create` and `skill_update` on `skillhost-forge`, offered when the
//!   server has a forge ([`SkillhostMcp::with_forge`]).
//! - `packages`: [`ApprovalPackages`], the embedder's resolving and installing of a
//!   skill's packages around an approval answered over MCP.
//! - `approval`: the signed, single-use, expiring `requestState` of an approval
//!   question asked of a 2026-07-28 client, bound to the session and the version asked
//!   about.
//! - `http`: streamable HTTP with a bearer token (always, loopback included; see
//!   [`load_or_create_token`]) and Host/Origin checks.
//! - `access`: who sent a request (the operator's token, a caller's token, an OAuth
//!   access token, [`OAuthFront`]) and what the org policy lets it see and do.
//! - `quota`: each caller's limits on tool calls over HTTP ([`QuotaConfig`]): a rate and
//!   a concurrency per caller, answered 429 with `Retry-After`.
//! - `transport`: [`MAX_MESSAGE_BYTES`], the longest message any transport reads (derived
//!   from `skill_run`'s input cap), answered with a JSON-RPC error past it, never dropped;
//!   and [`LineTransport`], the stdio transport that holds to it.
//!
//! Any rmcp transport works too: `SkillhostMcp::session()` gives a handler for one more
//! connection, to be served with `rmcp::ServiceExt::serve`. Over a byte stream, wrap it in
//! [`LineTransport`]: rmcp's own drops a line over its limit with only a log line.

mod access;
mod approval;
mod builtin;
mod failure;
mod forge;
mod http;
mod knowledge;
mod ops;
mod packages;
mod quota;
mod run;
mod search;
mod server;
mod skills;
mod tools;
mod transport;
mod wellknown;

pub use access::OAuthFront;
pub use http::{HttpConfig, load_or_create_token, read_token_file, serve_http};
pub use knowledge::{DIRECTORY_BUDGET, Directory, MAX_DIRECTORY_BUDGET, MIN_DIRECTORY_BUDGET, directory as skills_directory};
pub use ops::{Drain, MetricsRender, OpsConfig, ReadinessCheck, serve_ops};
pub use packages::{ApprovalPackages, PackagesFailure, PackagesFuture};
pub use quota::{Quota, QuotaConfig};
pub use search::SearchType;
pub use server::{ApprovalKeys, CALL_KEY, IndexLoading, McpConfig, SkillhostMcp};
pub use skillhost_index::SearchIndex;
pub use transport::{LineTransport, MAX_MESSAGE_BYTES};

/// Why the MCP server stopped or could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The MCP session could not start or ended with an error.
    #[error("MCP session failed: {0}")]
    Session(String),
    /// The HTTP listener could not be set up.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The configuration is unsafe or inconsistent.
    #[error("{0}")]
    Config(String),
    /// The search index that ranks `tool_search` and `skill_search` could not be created.
    #[error("cannot create the search index: {0}")]
    Index(#[from] skillhost_index::IndexError),
    /// The callers' store (`skillhost caller`) cannot be used: a front that looks their
    /// tokens up there does not start.
    #[error("cannot use the callers of the HTTP front: {0}")]
    Callers(#[source] skillhost_registry::StoreError),
}

/// Serve one MCP session on this process's stdin and stdout until the client closes it,
/// reading messages of up to [`MAX_MESSAGE_BYTES`] ([`LineTransport`]). Log to stderr
/// only: stdout carries the protocol.
pub async fn serve_stdio(server: SkillhostMcp) -> Result<(), McpError> {
    // Pipes on the IO reactor, not the blocking pool: one thread hand-off less per message.
    let (read, write) = rmcp::transport::stdio_pipes();
    serve(server, LineTransport::new(read, write)).await
}

/// Serve one MCP session over any rmcp transport (a pipe, a socket, an in-memory duplex
/// for an editor) until it closes.
pub async fn serve<T, E, A>(server: SkillhostMcp, transport: T) -> Result<(), McpError>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::ServiceExt;
    let running = match server.serve(transport).await {
        Ok(running) => running,
        // The client went away before its handshake (`serve` run by hand with stdin at its
        // end, a client that gave up): no session started, and none failed.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("the client closed the connection before initializing; nothing to serve");
            return Ok(());
        }
        Err(e) => return Err(McpError::Session(e.to_string())),
    };
    running.waiting().await.map_err(|e| McpError::Session(e.to_string()))?;
    Ok(())
}
