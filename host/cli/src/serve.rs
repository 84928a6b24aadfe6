//! `skillhost serve`: every skill over MCP, on stdio or streamable HTTP, with the
//! registry watching the skills directories so dropped-in skills appear at once.
//!
//! Stopping: on stdio when the client closes stdin, or on SIGINT/SIGTERM (either
//! transport). Before it exits, `serve` waits (up to [`FINISH_COMPILES`], saying so on
//! stderr) for the optimised compiles still running in the background to reach the
//! compiled cache, so the next short session does not pay for the same compile again;
//! nothing is served by then, so no call waits for it. The first SIGINT/SIGTERM stops
//! serving (or, after stdin closed, is what a client sends next and changes nothing); a
//! second one ends the wait.
//!
//! Over HTTP, the first SIGINT/SIGTERM drains: new requests get 503 with `Retry-After`,
//! `/readyz` of `--ops` turns 503, and the calls in flight finish, for at most
//! `--drain-timeout`; then the process stops as above.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use skillhost::mcp::{Drain, HttpConfig, McpConfig, OpsConfig, ReadinessCheck, SkillhostMcp};
use skillhost::{Host, Registry};

use crate::app::App;

/// The options of `serve`.
#[derive(clap::Args)]
#[command(after_help = "Tools are named SKILL__TOOL. Above --deferred-threshold tools, agents find them with
tool_search. A call to a skill awaiting approval asks the user through the client
(MCP elicitation) when the client supports it. Skills dropped into the skills
directory appear at once (notifications/tools/list_changed).

Client configuration (stdio), with absolute paths: `skillhost mcp-config CLIENT` prints the
entry for claude, cursor, vscode or zed (and `claude mcp add ...`); --write merges it in.

Operations (--http): --ops ADDR serves GET /healthz, /readyz (503 with the reasons while
the skills first load or while draining) and /metrics (Prometheus) without the token: bind
it to loopback or a cluster-internal address, never a public one. On SIGTERM or SIGINT the
replica drains: new requests get 503 with Retry-After: 1, calls in flight finish (at most
--drain-timeout), then it exits 0. Logs as JSON lines: --log-format json.

Examples:
  skillhost serve                                  stdio, for a local agent
  skillhost serve --http                           on 127.0.0.1:8787, token in DATA_DIR/http-token
  skillhost serve --http 0.0.0.0:8787 --token-file ~/.config/skillhost/token
  SKILLHOST_MCP_TOKEN=... skillhost serve --http
  skillhost --log-format json serve --http 0.0.0.0:8787 --token-file /run/secrets/token \\
      --ops 127.0.0.1:9090 --drain-timeout 20s      behind a balancer, probed and scraped")]
pub struct ServeArgs {
    /// Do not offer skill_create and skill_update (agents cannot submit skills).
    #[arg(long)]
    no_forge: bool,

    /// In tool_search answers that matched nothing well, suggest creating a skill for
    /// requests that keep missing (3 or more similar ones). Off by default.
    #[arg(long)]
    pub suggest_missing: bool,

    /// The forge behind skill_create and skill_update (set by [`run`], not a flag).
    #[arg(skip)]
    pub forge: Option<Arc<skillhost::forge::Forge>>,

    /// The data directory, where the generated HTTP token is kept (set by [`run`]).
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

    /// With --http: also publish the approved instruction-only skills as an Agent Skills
    /// well-known index at /.well-known/agent-skills/index.json (read without the token),
    /// for `skillhost install http://HOST:PORT/ --skill NAME`.
    #[arg(long, requires = "http")]
    publish_skills: bool,

    /// With --http: serve GET /healthz, /readyz and /metrics (Prometheus) at ADDR, e.g.
    /// 127.0.0.1:9090. No token is asked there: never bind it to a public address.
    #[arg(long, value_name = "ADDR", requires = "http")]
    ops: Option<SocketAddr>,

    /// With --http: on SIGTERM or SIGINT, how long the calls in flight may take to finish
    /// (new requests get 503 meanwhile); past it the process exits all the same.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::app::parse_duration)]
    drain_timeout: Duration,

    /// Above this many skill tools, list only built-ins, pinned and activated tools;
    /// agents find the rest with tool_search.
    #[arg(long, default_value_t = McpConfig::default().deferred_threshold, value_name = "N")]
    deferred_threshold: usize,

    /// Always list this tool (`skill__tool`), even when tools are deferred. Repeatable.
    #[arg(long = "pin", value_name = "TOOL")]
    pinned: Vec<String>,

    /// At most N skill_run calls held at once by one MCP session; one more is refused at
    /// once with this setting's name.
    #[arg(long, default_value_t = McpConfig::default().max_session_runs, value_name = "N")]
    max_session_runs: usize,

    /// At most N skill_run calls held at once by all MCP sessions together.
    #[arg(long, default_value_t = McpConfig::default().max_runs, value_name = "N")]
    max_runs: usize,

    /// Never ask the user to approve a skill through the MCP client; calls to unapproved
    /// skills fail with the `skillhost approve` command to run instead.
    #[arg(long)]
    no_elicitation: bool,
}

/// The longest `serve` waits, as it stops, for background compiles to reach the cache.
pub const FINISH_COMPILES: Duration = Duration::from_secs(60);

/// Open the registry watching the skills directories, with the forge behind skill_create
/// (configured from the data dir), and serve it.
pub async fn run(app: &App, mut args: ServeArgs) -> Result<ExitCode> {
    let host = Arc::new(app.host()?);
    let mut config = app.registry_config(&host, true)?;
    config.first_load = skillhost::registry::FirstLoad::Background;
    let registry = host.open_registry(config).await?;
    let mut forge_config = crate::forge::config(app)?;
    forge_config.suggest_missing = args.suggest_missing;
    args.forge = Some(Arc::new(host.forge(registry.clone(), forge_config)));
    args.data_dir = app.data_dir.clone();
    // Team mode: the locked skills, installed now and whenever the lock changes, for as
    // long as it serves.
    let follow = async {
        match app.config()?.team.lock.clone() {
            Some(lock) => crate::sync::follow_lock(app, &host, registry.clone(), lock).await,
            None => std::future::pending().await,
        }
        Ok::<(), anyhow::Error>(())
    };
    tokio::select! {
        served = serve(host.clone(), registry.clone(), args) => served?,
        followed = follow => followed?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Serve `registry` (opened by `host`) until the client leaves (stdio) or the process is
/// signalled. Nothing slow comes before the first answer: the registry loads its skills in
/// the background, and the host's search index (with the embedding model when it is
/// installed) opens off the request path; a search that cannot wait for it ranks with
/// BM25 in memory, an index made by the first such search (`SkillhostMcp::without_index`);
/// each session keeps the ranker its first search got (see `SkillhostMcp::index_loading`).
async fn serve(host: Arc<Host>, registry: Arc<Registry>, args: ServeArgs) -> Result<()> {
    let mut signals = Signals::new()?;
    let served = serve_until_stopped(host.clone(), registry, args, &mut signals).await;
    finish_compiles(&host, &mut signals).await;
    served
}

/// Wait, up to [`FINISH_COMPILES`] or until another signal, for the background compiles.
async fn finish_compiles(host: &Host, signals: &mut Signals) {
    let pending = host.optimizing();
    if pending.is_empty() {
        return;
    }
    let names: Vec<String> = pending.iter().map(ToString::to_string).collect();
    errln!(
        "skillhost: waiting up to {} s for the optimised compile of {} to reach the compiled cache (so the next start does not compile it again); a second SIGINT/SIGTERM stops waiting",
        FINISH_COMPILES.as_secs(),
        names.join(", ")
    );
    tokio::select! {
        finished = host.finish_optimizing(FINISH_COMPILES) => {
            if !finished {
                errln!("skillhost: still compiling after {} s; stopping without it", FINISH_COMPILES.as_secs());
            }
        }
        () = signals.second() => errln!("skillhost: signalled again; stopping without waiting for the compile"),
    }
}

/// SIGINT and SIGTERM, caught for the whole run: a client stopping its server with SIGTERM
/// (after closing stdin) lets it finish as it would on stdin's end.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    /// How many arrived so far.
    received: u32,
}

impl Signals {
    fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind: SignalKind| signal(kind).context("cannot catch SIGINT and SIGTERM");
        Ok(Self { interrupt: catch(SignalKind::interrupt())?, terminate: catch(SignalKind::terminate())?, received: 0 })
    }

    /// The next SIGINT or SIGTERM.
    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        self.received += 1;
    }

    /// The second SIGINT or SIGTERM of the run (at once if it came already).
    async fn second(&mut self) {
        while self.received < 2 {
            self.recv().await;
        }
    }
}

async fn serve_until_stopped(host: Arc<Host>, registry: Arc<Registry>, args: ServeArgs, signals: &mut Signals) -> Result<()> {
    let org_policy = match &host.config().org.policies {
        Some(dir) => {
            let policies = Arc::new(skillhost::access::Policies::open(dir)?);
            errln!("skillhost: the org policy in {} holds every caller over HTTP ({} policies)", dir.display(), policies.current().len());
            tokio::spawn(follow_policies(policies.clone()));
            Some(policies)
        }
        None => None,
    };
    let callers = host.state().callers.clone();
    // Over HTTP only; a front that cannot check access tokens does not start.
    let oauth = if args.http.is_some() { skillhost::oauth::front(host.config()).await? } else { None };
    let quotas = host.config().quotas()?;
    if let Some(oauth) = &oauth {
        let settings = oauth.server.settings();
        errln!(
            "skillhost: taking OAuth access tokens from {} for {} (metadata at {})",
            settings.issuer,
            settings.resource,
            oauth.server.metadata_url()
        );
    }
    let config = McpConfig {
        org_policy,
        deferred_threshold: args.deferred_threshold,
        pinned: args.pinned,
        elicit_approvals: !args.no_elicitation,
        max_session_runs: args.max_session_runs,
        max_runs: args.max_runs,
        approval_keys: skillhost::mcp::ApprovalKeys(host.config().state_keys()?),
        ..McpConfig::default()
    };
    let server = SkillhostMcp::without_index(registry.clone(), config);
    // An approval answered over MCP installs the skill's packages as the terminal's does.
    let server = server.with_packages(Arc::new(skillhost::packages::McpPackages::new(host.clone(), registry.clone())));
    let server = match args.forge.filter(|_| !args.no_forge) {
        Some(forge) => server.with_forge(forge),
        None => server,
    };
    // Once every skill found at start has loaded, what loading read and let go of (the
    // components' files, their hashing copies) goes back to the kernel.
    let ops_registry = registry.clone();
    let checks = readiness_checks(&host, &registry);
    let settled = registry.clone();
    tokio::spawn(async move {
        settled.ready().await;
        skillhost::runtime::give_back_freed_memory();
    });
    // Sessions that search before it opened wait for it, a bounded while. It opens at a
    // lower priority: beside the first answers, which wait for none of it.
    let loading = server.index_loading();
    let _follow = tokio::spawn(async move {
        match skillhost::runtime::in_the_background("skillhost-index", move || host.search_index()).await {
            Ok(Ok(index)) => {
                let follow = index.follow(registry);
                loading.ready(index);
                tracing::debug!("search index ready");
                let _ = follow.await;
            }
            Ok(Err(error)) => {
                loading.failed(&error.to_string());
                tracing::warn!(%error, "the search index did not open; searches rank with BM25 in memory");
            }
            Err(error) => {
                loading.failed(&error.to_string());
                tracing::warn!(%error, "opening the search index failed");
            }
        }
    });
    let Some(addr) = args.http else {
        tracing::info!("serving MCP on stdio");
        return tokio::select! {
            served = skillhost::mcp::serve_stdio(server) => Ok(served?),
            () = signals.recv() => Ok(()),
        };
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
    let drain = Drain::default();
    let config = HttpConfig {
        addr,
        token,
        callers: Some(callers),
        oauth,
        quotas,
        allowed_hosts: args.allowed_hosts,
        allowed_origins: args.allowed_origins,
        publish_skills: args.publish_skills,
        drain: drain.clone(),
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    if let Some(addr) = args.ops {
        let ops = OpsConfig { addr, checks, metrics: Some(install_metrics()?) };
        let (ready, bound) = tokio::sync::oneshot::channel();
        let serving = skillhost::mcp::serve_ops(ops_registry, ops, drain.clone(), shutdown.clone(), Some(ready));
        tokio::spawn(async move {
            if let Err(error) = serving.await {
                errln!("skillhost: the operations listener stopped: {error}");
            }
        });
        match bound.await {
            Ok(addr) => errln!("skillhost: serving /healthz, /readyz and /metrics at http://{addr}/ (no token: keep it private)"),
            Err(_) => anyhow::bail!("the operations listener at {addr} did not start (see the line above); pick another --ops address"),
        }
    }
    let (ready, bound) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Ok(addr) = bound.await {
            errln!("skillhost: serving MCP at http://{addr}/mcp (Ctrl-C stops)");
        }
    });
    let serving = skillhost::mcp::serve_http(server, config, shutdown.clone(), Some(ready));
    tokio::pin!(serving);
    tokio::select! {
        served = &mut serving => return Ok(served?),
        () = signals.recv() => drain.start(),
    }
    // Draining: new requests get 503 while the ones taken finish, at most --drain-timeout.
    let in_flight = drain.in_flight();
    tracing::info!(in_flight, timeout = ?args.drain_timeout, "draining: refusing new requests, finishing the ones in flight");
    errln!(
        "skillhost: draining: new requests get 503; waiting up to {} for {in_flight} in flight (a second SIGINT/SIGTERM stops at once)",
        format!("{:?}", args.drain_timeout)
    );
    tokio::select! {
        served = &mut serving => return Ok(served?),
        finished = tokio::time::timeout(args.drain_timeout, drain.idle()) => if finished.is_err() {
            let cut = drain.in_flight();
            tracing::warn!(cut, timeout = ?args.drain_timeout, "drain timeout passed; stopping with requests still in flight");
            errln!("skillhost: the drain timeout of {} passed with {cut} request(s) still in flight; they are cut", format!("{:?}", args.drain_timeout));
        },
        () = signals.second() => {
            let cut = drain.in_flight();
            tracing::warn!(cut, "signalled again while draining; stopping with requests still in flight");
            errln!("skillhost: signalled again; stopping with {cut} request(s) still in flight");
        }
    }
    shutdown.cancel();
    Ok(serving.await?)
}

/// Load the org policy again whenever one of its files changes (checked every 2 s): a set
/// that validates replaces the one in force; one that does not is refused, said in the
/// log, and the one in force keeps serving.
async fn follow_policies(policies: Arc<skillhost::access::Policies>) {
    let fingerprint = |dir: &std::path::Path| -> Vec<(std::path::PathBuf, u64, Option<std::time::SystemTime>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cedar"))
            .map(|e| {
                let meta = e.metadata().ok();
                (e.path(), meta.as_ref().map_or(0, std::fs::Metadata::len), meta.and_then(|m| m.modified().ok()))
            })
            .collect();
        files.sort();
        files
    };
    let mut seen = fingerprint(policies.dir());
    let mut ticks = tokio::time::interval(std::time::Duration::from_secs(2));
    loop {
        ticks.tick().await;
        let now = fingerprint(policies.dir());
        if now == seen {
            continue;
        }
        seen = now;
        let reloading = policies.clone();
        match tokio::task::spawn_blocking(move || reloading.reload()).await {
            Ok(Ok(count)) => tracing::warn!(count, dir = %policies.dir().display(), "org policy reloaded"),
            Ok(Err(error)) => {
                tracing::error!(%error, "org policy change refused; the policies in force keep serving");
                errln!("skillhost: the org policy change is refused, the policies in force keep serving: {error}");
            }
            Err(error) => tracing::error!(%error, "org policy reload failed"),
        }
    }
}

/// What `/readyz` checks besides the registry's first load and the drain: the state store
/// answers, and (team mode) every locked skill serves its locked bytes.
fn readiness_checks(host: &Arc<Host>, registry: &Arc<Registry>) -> Vec<Arc<dyn ReadinessCheck>> {
    vec![Arc::new(StateAnswers(host.clone())), Arc::new(AsLocked(registry.clone()))]
}

/// Ready while the state store (SQLite files, or the shared PostgreSQL) answers.
struct StateAnswers(Arc<Host>);

impl ReadinessCheck for StateAnswers {
    fn check(&self) -> Vec<String> {
        let state = self.0.state();
        match state.trust.ping() {
            Ok(_) => Vec::new(),
            Err(error) => vec![format!("the state store ({}) does not answer: {error}", state.shown)],
        }
    }
}

/// Team mode: ready once every skill the lock pins serves its locked bytes, and nothing
/// else is refused against the lock ([`Registry::not_as_locked`]).
struct AsLocked(Arc<Registry>);

impl ReadinessCheck for AsLocked {
    fn check(&self) -> Vec<String> {
        self.0.not_as_locked()
    }
}

/// Install the Prometheus recorder every `metrics::counter!` of the host records into, and
/// how `/metrics` renders it. Durations are histograms (buckets from 0.5 ms to 5 min).
fn install_metrics() -> Result<skillhost::mcp::MetricsRender> {
    const SECONDS: &[f64] =
        &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Suffix("_seconds".to_owned()), SECONDS)
        .context("cannot set the histogram buckets of the metrics")?
        .install_recorder()
        .context("cannot install the metrics recorder (another one is installed)")?;
    Ok(Arc::new(move || {
        handle.run_upkeep();
        handle.render()
    }))
}
