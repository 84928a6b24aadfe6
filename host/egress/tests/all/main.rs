//! skillhost-egress integration tests, one binary: the proxy against real servers on
//! 127.0.0.1 and a Unix socket in a temporary directory, and the shim as a real process.

mod proxy;
mod reuse;
mod shim;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use skillhost_core::egress::NetworkSection;
use skillhost_core::{AuditSink, EgressPolicy, EgressRecord, Resolver, SkillName};
use skillhost_egress::{EgressProxy, NetConfig, ProxyConfig, SkillEgress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

/// Keeps every audit row.
#[derive(Default)]
pub(crate) struct MemoryAudit(Mutex<Vec<EgressRecord>>);

impl AuditSink for MemoryAudit {
    fn record(&self, record: EgressRecord) {
        self.0.lock().unwrap().push(record);
    }
}

impl MemoryAudit {
    /// The rows once there are `n` (rows of streamed bodies are written when they end).
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<EgressRecord> {
        for _ in 0..200 {
            let rows = self.0.lock().unwrap().clone();
            if rows.len() >= n {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("expected {n} audit rows, have {:#?}", self.0.lock().unwrap());
    }
}

/// Resolves names from a fixed table.
#[derive(Default)]
pub(crate) struct TableResolver(HashMap<String, Vec<IpAddr>>);

impl TableResolver {
    pub(crate) fn with(entries: &[(&str, &str)]) -> Arc<Self> {
        Arc::new(Self(entries.iter().map(|(n, a)| (n.to_string(), vec![a.parse().unwrap()])).collect()))
    }
}

#[async_trait::async_trait]
impl Resolver for TableResolver {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        self.0.get(host).cloned().ok_or_else(|| std::io::Error::other(format!("{host}: no such name")))
    }
}

/// A proxy for skill `net-test` on a socket in its own temporary directory.
pub(crate) struct TestProxy {
    pub(crate) proxy: EgressProxy,
    pub(crate) audit: Arc<MemoryAudit>,
    _dir: tempfile::TempDir,
}

impl TestProxy {
    pub(crate) fn start(
        allow: &[String],
        private: &[String],
        resolver: Arc<TableResolver>,
        tune: impl FnOnce(&mut NetConfig, &mut ProxyConfig),
    ) -> Self {
        let section = NetworkSection { allow: allow.to_vec(), private: private.to_vec(), ..Default::default() };
        let policy = EgressPolicy::from_section(&section).expect("valid test rules");
        let audit = Arc::new(MemoryAudit::default());
        let mut net = NetConfig { resolver, audit: audit.clone(), ..NetConfig::default() };
        let mut config = ProxyConfig::default();
        tune(&mut net, &mut config);
        let egress = SkillEgress::new(SkillName::new("net-test").unwrap(), Arc::new(policy), Arc::new(net));
        let dir = tempfile::tempdir().unwrap();
        let proxy = EgressProxy::bind(dir.path().join("egress.sock"), egress, config).expect("proxy binds");
        Self { proxy, audit, _dir: dir }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.proxy.path().to_owned()
    }
}

/// An HTTP/1.1 server on 127.0.0.1: `/hello` says hello (and which Host it saw), `/big`
/// sends 1 MiB.
pub(crate) async fn http_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let host = request.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or("").to_owned();
                    let body = match request.uri().path() {
                        "/big" => Bytes::from(vec![b'x'; 1 << 20]),
                        _ => Bytes::from(format!("hello from upstream; host={host}")),
                    };
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(body)))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}

/// A TCP server on 127.0.0.1 that echoes what it receives.
pub(crate) async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// A port nothing listens on.
pub(crate) async fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port()
}

/// A response from the proxy: status and body as text.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

/// Send `method url` through the proxy at `socket` with hyper, as a client with
/// `HTTP_PROXY` would.
pub(crate) async fn via_proxy(socket: &Path, method: &str, url: &str) -> Answer {
    let stream = UnixStream::connect(socket).await.expect("proxy socket accepts");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::builder().method(method).uri(url).body(Full::new(Bytes::new())).unwrap();
    let response = sender.send_request(request).await.expect("proxy answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("whole body").to_bytes();
    Answer { status, body: String::from_utf8_lossy(&body).into_owned() }
}

/// Write raw bytes to the proxy and read its whole answer (the proxy closes after it).
pub(crate) async fn raw(socket: &Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}
