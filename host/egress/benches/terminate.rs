//! The sandbox proxy's cost when it terminates TLS for a secret-bound host, against the
//! same HTTPS request made directly, both to one local server (127.0.0.1, a certificate
//! of a test CA, the name `secure.test` from a table resolver) answering 1 KiB:
//!
//! - `egress_tls/terminated_kept`: a GET through the proxy the way a sandboxed client
//!   sends it (the shim's TCP bridge aside): one `CONNECT secure.test:PORT` on the proxy's
//!   Unix socket, TLS trusting the host's egress CA, then every request on that kept
//!   connection (a new one when the proxy closes it, after its 100 requests). The proxy
//!   checks each request, adds the secret, sends it over its own TLS connection to the
//!   server (kept in the skill's pool between requests) and redacts the secret from the
//!   response. `egress_tls/direct_kept` is the same GET from the host
//!   itself over one kept TLS connection to the server.
//! - `egress_tls/terminated_new`: a new connection per request: socket connect, `CONNECT`,
//!   a full TLS handshake with the proxy (its leaf is cached after the first), the request
//!   (the proxy's upstream connection is taken from the skill's pool when one is idle, as
//!   it is in the host), the connection closed. `egress_tls/direct_new` is a new TCP
//!   connection and a full handshake with the server per request. Neither client resumes
//!   TLS sessions (Python's `requests` and `urllib` do not).
//!
//! The proxy reads the secret from the host's file store and writes audit rows to its
//! SQLite log, as the host's does.
//!
//! `cargo bench -p skillhost-egress --bench terminate` (then `bench-report` for the rows).

#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use skillhost_core::egress::{NetworkSection, SecretSection};
use skillhost_core::{EgressPolicy, Resolver, SecretBinding, SkillName};
use skillhost_egress::{EgressCa, EgressProxy, NetConfig, ProxyConfig, SkillEgress};
use skillhost_store::{FileSecretStore, SecretStore, SqliteAuditLog};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

const NAME: &str = "secure.test";
const SECRET: &str = "bench-secret-value-0042";
const BODY: usize = 1024;

/// Names from a table.
struct Table(HashMap<String, IpAddr>);

#[async_trait::async_trait]
impl Resolver for Table {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        self.0.get(host).map(|ip| vec![*ip]).ok_or_else(|| std::io::Error::other(format!("{host}: no such name")))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client trusting `root` only, resuming sessions only when `resume`.
fn client_trusting(root: CertificateDer<'static>, resume: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Arc::new(config)
}

/// A test CA's certificate and a server identity for [`NAME`] it issued.
fn test_ca() -> (CertificateDer<'static>, (CertificateDer<'static>, PrivateKeyDer<'static>)) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![NAME.to_owned()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, NAME);
    let cert = params.signed_by(&key, &rcgen::Issuer::from_params(&ca_params, &ca_key)).unwrap();
    (ca_cert.der().clone(), (cert.der().clone(), PrivateKeyDer::Pkcs8(key.serialize_der().into())))
}

/// What the server counts: its TLS handshakes, and the requests that carried the secret.
#[derive(Default)]
struct Counts {
    handshakes: AtomicUsize,
    with_secret: AtomicUsize,
}

/// An HTTPS/1.1 server on 127.0.0.1 answering every request with [`BODY`] bytes, keeping
/// connections.
async fn upstream(identity: (CertificateDer<'static>, PrivateKeyDer<'static>)) -> (SocketAddr, Arc<Counts>) {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![identity.0], identity.1)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let counted = counts.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, counted) = (acceptor.clone(), counted.clone());
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                counted.handshakes.fetch_add(1, Ordering::Relaxed);
                let service = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| {
                    let secret =
                        request.headers().get("authorization").is_some_and(|v| v.as_bytes() == format!("Bearer {SECRET}").as_bytes());
                    if secret {
                        counted.with_secret.fetch_add(1, Ordering::Relaxed);
                    }
                    async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(vec![b'x'; BODY])))) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    (addr, counts)
}

/// The proxy of skill `bench`, allowed `https://secure.test:PORT` (a private address) with
/// a secret bound to it, terminating with an egress CA made in `dir`; and that CA's
/// certificate.
fn proxy(dir: &Path, port: u16, upstream_roots: Arc<rustls::ClientConfig>) -> (EgressProxy, CertificateDer<'static>) {
    let origin = format!("https://{NAME}:{port}");
    let section = NetworkSection { allow: vec![origin.clone()], private: vec![origin.clone()], ..Default::default() };
    let policy = EgressPolicy::from_section(&section).unwrap();
    let secret =
        SecretSection { name: "api-token".into(), header: "Authorization".into(), format: "Bearer {}".into(), hosts: vec![origin] };
    let binding = SecretBinding::from_section(&secret, &policy).unwrap();
    let ca = Arc::new(EgressCa::new(dir.join("egress-ca")));
    let ca_cert = ca.authority().unwrap().cert().clone();
    let secrets = FileSecretStore::new(dir.join("secrets"));
    secrets.set("api-token", SECRET).unwrap();
    let net = NetConfig {
        resolver: Arc::new(Table(HashMap::from([(NAME.to_owned(), IpAddr::from([127, 0, 0, 1]))]))),
        secrets: Arc::new(secrets),
        audit: Arc::new(SqliteAuditLog::open(dir.join("audit.db")).unwrap()),
        tls: upstream_roots,
        ca: Some(ca),
        ..NetConfig::default()
    };
    let egress = SkillEgress::new(SkillName::new("bench").unwrap(), Arc::new(policy), Arc::new(net));
    let config = ProxyConfig { secrets: vec![binding], ..ProxyConfig::default() };
    (EgressProxy::bind(dir.join("egress.sock"), egress, config).unwrap(), ca_cert)
}

/// TLS to [`NAME`] over `stream`, then an HTTP/1.1 connection on it.
async fn https<S>(stream: S, tls: &Arc<rustls::ClientConfig>) -> SendRequest<Empty<Bytes>>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let name = ServerName::try_from(NAME).unwrap();
    let tls = tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    sender
}

/// A direct connection to the server.
async fn direct(addr: SocketAddr, tls: &Arc<rustls::ClientConfig>) -> SendRequest<Empty<Bytes>> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    https(tcp, tls).await
}

/// A connection through the proxy at `socket`: `CONNECT`, its `200`, then TLS with the
/// proxy as the server.
async fn through(socket: &Path, port: u16, tls: &Arc<rustls::ClientConfig>) -> SendRequest<Empty<Bytes>> {
    let mut unix = UnixStream::connect(socket).await.unwrap();
    unix.write_all(format!("CONNECT {NAME}:{port} HTTP/1.1\r\nHost: {NAME}:{port}\r\n\r\n").as_bytes()).await.unwrap();
    // Byte by byte, so that nothing of the TLS that follows is read here.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        assert_eq!(unix.read(&mut byte).await.unwrap(), 1, "the proxy closed the CONNECT: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "the proxy refused the CONNECT: {}", String::from_utf8_lossy(&head));
    https(unix, tls).await
}

/// One GET of [`BODY`] bytes on `sender`, read to its end.
async fn get(sender: &mut SendRequest<Empty<Bytes>>, authority: &str) {
    sender.ready().await.unwrap();
    let request = hyper::Request::get("/data").header("host", authority).body(Empty::new()).unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), BODY);
}

fn terminate(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _guard = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let (test_root, identity) = test_ca();
    let (addr, counts) = rt.block_on(upstream(identity));
    let authority = format!("{NAME}:{}", addr.port());
    let (proxy, egress_root) = proxy(dir.path(), addr.port(), client_trusting(test_root.clone(), true));
    let socket = proxy.path().to_owned();
    let to_server = client_trusting(test_root, false);
    let to_proxy = client_trusting(egress_root, false);
    let mut group = c.benchmark_group("egress_tls");

    let mut kept = rt.block_on(direct(addr, &to_server));
    group.bench_function("direct_kept", |b| b.iter(|| rt.block_on(get(&mut kept, &authority))));

    // The proxy closes a terminated connection after `MAX_REQUESTS`; the client then
    // opens another, as a pooling client does, and that is counted in.
    let mut kept = rt.block_on(through(&socket, addr.port(), &to_proxy));
    group.bench_function("terminated_kept", |b| {
        b.iter(|| {
            rt.block_on(async {
                if kept.ready().await.is_err() {
                    kept = through(&socket, addr.port(), &to_proxy).await;
                }
                get(&mut kept, &authority).await;
            })
        })
    });
    drop(kept);
    assert!(counts.with_secret.load(Ordering::Relaxed) > 0, "the proxy added the secret");

    group.bench_function("direct_new", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut sender = direct(addr, &to_server).await;
                get(&mut sender, &authority).await;
            })
        })
    });

    let before = counts.handshakes.load(Ordering::Relaxed);
    let mut requests = 0usize;
    group.bench_function("terminated_new", |b| {
        b.iter(|| {
            requests += 1;
            rt.block_on(async {
                let mut sender = through(&socket, addr.port(), &to_proxy).await;
                get(&mut sender, &authority).await;
            })
        })
    });
    group.finish();
    eprintln!(
        "egress_tls/terminated_new: {requests} requests on new client connections took {} new upstream TLS connections",
        counts.handshakes.load(Ordering::Relaxed) - before
    );
}

criterion_group!(benches, terminate);
criterion_main!(benches);
