//! Tunnels: a TCP connection to a checked, pinned address that bytes are relayed through
//! unchanged (the `CONNECT` of the sandbox proxy), under [`TunnelLimits`] so a tunnel
//! cannot run forever or carry without bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use skillhost_core::EgressOutcome;
use skillhost_core::egress::Target;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::audit::PendingRecord;
use crate::{EgressError, SkillEgress};

/// How long and how much one tunnel may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelLimits {
    /// Closed when no byte moved either way for this long. Default: 30 s.
    pub idle_timeout: Duration,
    /// Closed this long after it opened, whatever is flowing. Default: 120 s, the longest
    /// a tool call may run.
    pub total_timeout: Duration,
    /// Closed when this many bytes moved, both directions together. Default: 64 MiB.
    pub max_bytes: u64,
}

impl Default for TunnelLimits {
    fn default() -> Self {
        Self { idle_timeout: Duration::from_secs(30), total_timeout: Duration::from_secs(120), max_bytes: 64 << 20 }
    }
}

/// An open connection to a checked address, holding one of the skill's request slots and
/// its audit row (written when the tunnel is dropped).
pub struct Tunnel {
    upstream: TcpStream,
    target: Target,
    audit: PendingRecord,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel").field("target", &self.target.origin()).finish_non_exhaustive()
    }
}

impl SkillEgress {
    /// Open a tunnel to `authority` (`host:port`) for `tool`: checked against the rules as
    /// `https://host:port` (a tunnel carries TLS the host cannot see into, so only https
    /// rules open one), resolved once, the address checked, then connected. A refusal or
    /// failure is audited; an open tunnel is audited when it ends. Traced as an
    /// `egress.tunnel` span until connected (a child of the span current when polled).
    pub async fn open_tunnel(&self, tool: &str, authority: &str) -> Result<Tunnel, EgressError> {
        let span = tracing::info_span!(
            "egress.tunnel",
            otel.name = "CONNECT",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            server.address = authority,
            skillhost.skill = %self.skill(),
            error.type = tracing::field::Empty,
        );
        let opened = tracing::Instrument::instrument(self.connect_tunnel(tool, authority), span.clone()).await;
        if let Err(e) = &opened {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", if matches!(e, EgressError::Denied { .. }) { "denied" } else { "failed" });
        }
        opened
    }

    /// [`open_tunnel`](Self::open_tunnel) inside its span.
    async fn connect_tunnel(&self, tool: &str, authority: &str) -> Result<Tunnel, EgressError> {
        let audit = self.audit(tool, "CONNECT");
        let target = self.check(&audit, &format!("https://{authority}"))?;
        let url = target.origin();
        let ip = self.resolve(&audit, &target, &url).await?;
        let permit = self.permit().await?;
        let upstream = self.connect_tcp(&target, ip).await.map_err(|e| Self::failed(&audit, url.clone(), Some(ip), 0, e))?;
        let audit = audit.pending(url, ip, EgressOutcome::Status(200), 0, permit);
        Ok(Tunnel { upstream, target, audit })
    }
}

impl Tunnel {
    /// Where it goes.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Relay bytes between `client` and the server until both sides close, or a limit
    /// ends it (an error naming the limit). Bytes each way go to the audit row.
    pub async fn relay<C>(mut self, client: C, limits: TunnelLimits) -> Result<(), EgressError>
    where
        C: AsyncRead + AsyncWrite + Send + Unpin,
    {
        let meter = Meter { started: Instant::now(), out: AtomicU64::new(0), into: AtomicU64::new(0), last: AtomicU64::new(0), limits };
        let (client_read, client_write) = tokio::io::split(client);
        let (upstream_read, upstream_write) = self.upstream.split();
        let both = async {
            tokio::try_join!(pump(client_read, upstream_write, &meter, &meter.out), pump(upstream_read, client_write, &meter, &meter.into),)
        };
        let result = tokio::select! {
            result = both => result.map(|_| ()),
            error = meter.idle() => Err(error),
            () = tokio::time::sleep_until(meter.started + limits.total_timeout) => Err(EgressError::TotalTimeout(limits.total_timeout)),
        };
        self.audit.record.bytes_out = meter.out.load(Ordering::Relaxed);
        self.audit.record.bytes_in = meter.into.load(Ordering::Relaxed);
        if let Err(e) = &result {
            self.audit.fail(e.to_string());
        }
        result
    }
}

/// What a tunnel has carried, and when it last did.
struct Meter {
    started: Instant,
    /// Bytes from the skill to the server.
    out: AtomicU64,
    /// Bytes from the server to the skill.
    into: AtomicU64,
    /// Milliseconds since `started` when a byte last moved, either way.
    last: AtomicU64,
    limits: TunnelLimits,
}

impl Meter {
    /// Resolves when no byte moved for the idle timeout.
    async fn idle(&self) -> EgressError {
        loop {
            let since = Duration::from_millis(self.last.load(Ordering::Relaxed));
            let wake = self.started + since + self.limits.idle_timeout;
            if Instant::now() >= wake {
                return EgressError::IdleTimeout(self.limits.idle_timeout);
            }
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// Copy `from` to `to` until `from` ends (then half-close `to`), counting into `counter`.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    meter: &Meter,
    counter: &AtomicU64,
) -> Result<(), EgressError> {
    let mut buf = vec![0; 16 << 10];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            // Half-close: the other direction may still be talking.
            let _ = to.shutdown().await;
            return Ok(());
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
        if meter.out.load(Ordering::Relaxed) + meter.into.load(Ordering::Relaxed) > meter.limits.max_bytes {
            return Err(EgressError::TunnelTooLarge { limit: meter.limits.max_bytes });
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
        meter.last.store(meter.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}
