//! `skillhost serve`: every skill over MCP, on stdio or streamable HTTP, with the
//! registry watching the skills directories so dropped-in skills appear at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use skillhost::Registry;
use skillhost::index::SearchIndex;
use skillhost::mcp::{HttpConfig, McpConfig, SkillhostMcp};

/// The options of `serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Do not offer skill_create and skill_update (agents cannot submit skills).
    #[arg(long)]
    no_forge: bool,

    /// In tool_search answers that matched nothing well, suggest creating a skill for
    /// requests that keep missing (3 or more similar ones). Off by default.
    #[arg(long)]
    pub suggest_missing: bool,

    /// The forge behind skill_create and skill_update (set by main, not a flag).
    #[arg(skip)]
    pub forge: Option<Arc<skillhost::Forge>>,

    /// The data directory, where the generated HTTP token is kept (set by main).
    #[arg(skip)]
    pub data_dir: PathBuf,

    /// Serve streamable HTTP at ADDR (path /mcp) instead of stdio [default ADDR: 127.0.0.1:8787].
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8787")]
    http: Option<SocketAddr>,

    /// File holding the bearer token HTTP clients must send (required off loopback; on
    /// loopback one is made in DATA_DIR/http-token). Must be readable by its owner only.
    #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
    token_file: Option<PathBuf>,

    /// The bearer token, from the environment (never pass secrets as arguments).
    #[arg(long = "token-from-env", env = "SKILLHOST_MCP_TOKEN", hide_env_values = true, value_name = "TOKEN", hide = true)]
    token_env: Option<String>,

    /// Also accept this `Host` header (a public name behind which the server is reached).
    #[arg(long = "allow-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,

    /// Also accept requests from this browser origin (e.g. https://app.example.com:443).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,

    /// Above this many skill tools, list only built-ins, pinned and activated tools;
    /// agents find the rest with tool_search.
    #[arg(long, default_value_t = McpConfig::default().deferred_threshold, value_name = "N")]
    deferred_threshold: usize,

    /// Always list this tool (`skill__tool`), even when tools are deferred. Repeatable.
    #[arg(long = "pin", value_name = "TOOL")]
    pinned: Vec<String>,

    /// Never ask the user to approve a skill through the MCP client; calls to unapproved
    /// skills fail with the `skillhost approve` command to run instead.
    #[arg(long)]
    no_elicitation: bool,
}

/// Serve `registry` until the client leaves (stdio) or the process is interrupted (HTTP).
/// Nothing slow comes before the first answer: the registry loads its skills in the
/// background, and `tool_search` and `skill_search` rank with BM25 in memory until
/// `index` (the host's search index, with the embedding model when it is installed) has
/// opened, off the request path; both follow the registry.
pub async fn serve(
    registry: Arc<Registry>,
    index: impl FnOnce() -> Result<Arc<SearchIndex>, skillhost::HostError> + Send + 'static,
    args: ServeArgs,
) -> Result<()> {
    let config = McpConfig {
        deferred_threshold: args.deferred_threshold,
        pinned: args.pinned,
        elicit_approvals: !args.no_elicitation,
        ..McpConfig::default()
    };
    let quick = Arc::new(SearchIndex::new().context("cannot create the in-memory search index")?);
    let mut following = quick.follow(registry.clone());
    let server = SkillhostMcp::with_index(registry.clone(), config, quick);
    let server = match args.forge.filter(|_| !args.no_forge) {
        Some(forge) => server.with_forge(forge),
        None => server,
    };
    let swap = server.clone();
    let _follow = tokio::spawn(async move {
        match tokio::task::spawn_blocking(index).await {
            Ok(Ok(index)) => {
                let follow = index.follow(registry);
                swap.set_index(index);
                following.abort();
                following = follow;
                tracing::debug!("search index ready");
            }
            Ok(Err(error)) => tracing::warn!(%error, "the search index did not open; searches rank with BM25 in memory"),
            Err(error) => tracing::warn!(%error, "opening the search index failed"),
        }
        let _ = following.await;
    });
    let Some(addr) = args.http else {
        tracing::info!("serving MCP on stdio");
        return Ok(skillhost::mcp::serve_stdio(server).await?);
    };
    // Always a token, loopback included: any local process can reach 127.0.0.1.
    let token = match (&args.token_file, args.token_env) {
        (Some(file), _) => Some(skillhost::mcp::read_token_file(file)?),
        (None, Some(token)) => Some(token),
        (None, None) if addr.ip().is_loopback() => {
            std::fs::create_dir_all(&args.data_dir)
                .with_context(|| format!("cannot create the data directory {}", args.data_dir.display()))?;
            let file = args.data_dir.join("http-token");
            let token = skillhost::mcp::load_or_create_token(&file)?;
            errln!("skillhost: clients send `Authorization: Bearer TOKEN` with the token in {} (readable by you only)", file.display());
            Some(token)
        }
        // Off loopback the token is the user's choice: serve_http says how to give one.
        (None, None) => None,
    };
    let config = HttpConfig { addr, token, allowed_hosts: args.allowed_hosts, allowed_origins: args.allowed_origins };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let (ready, bound) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Ok(addr) = bound.await {
            errln!("skillhost: serving MCP at http://{addr}/mcp (Ctrl-C stops)");
        }
    });
    skillhost::mcp::serve_http(server, config, shutdown, Some(ready)).await?;
    Ok(())
}
