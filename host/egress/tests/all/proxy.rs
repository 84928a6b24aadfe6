//! The egress proxy: plain requests and CONNECT tunnels to allowed 127.0.0.1 ports work and
//! are audited; other ports, schemes and names resolving to loopback get 403 with a body
//! that says how to allow them; responses are capped; tunnels end at their limits;
//! malformed requests get 400; dropping the proxy removes its socket; a bound secret is
//! read once per request, so the value sent is the value redacted.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use skillhost_core::egress::{NetworkSection, SecretSection};
use skillhost_core::{EgressOutcome, EgressPolicy, SecretBinding, SecretSource};
use skillhost_egress::TunnelLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::{TableResolver, TestProxy, closed_port, echo_server, http_server, raw, via_proxy};

fn no_names() -> std::sync::Arc<TableResolver> {
    TableResolver::with(&[])
}

/// `CONNECT authority` through the proxy: the tunnel, or the refusal's status and body.
async fn connect(socket: &Path, authority: &str) -> Result<TokioIo<Upgraded>, (u16, String)> {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn.with_upgrades());
    let request = hyper::Request::builder().method("CONNECT").uri(authority).body(Empty::<Bytes>::new()).unwrap();
    let response = sender.send_request(request).await.expect("proxy answers CONNECT");
    if response.status() != 200 {
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        return Err((status, String::from_utf8_lossy(&body).into_owned()));
    }
    Ok(TokioIo::new(hyper::upgrade::on(response).await.expect("tunnel opens")))
}

#[tokio::test]
async fn an_allowed_plain_request_is_forwarded_and_audited() {
    let server = http_server().await;
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], no_names(), |_, _| {});

    let answer = via_proxy(&t.path(), "GET", &format!("http://127.0.0.1:{}/hello?token=abc", server.port())).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body, format!("hello from upstream; host=127.0.0.1:{}", server.port()));

    let rows = t.audit.wait_for(1).await;
    let row = &rows[0];
    assert_eq!((row.skill.as_str(), row.method.as_str()), ("net-test", "GET"));
    assert_eq!(row.url, format!("http://127.0.0.1:{}/hello", server.port()), "no query in the audit log");
    assert_eq!(row.ip, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(row.outcome, EgressOutcome::Status(200));
    assert_eq!(row.bytes_in, answer.body.len() as u64);
}

#[tokio::test]
async fn a_refused_host_gets_403_saying_how_to_allow_it() {
    let (server, other) = (http_server().await, http_server().await);
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], no_names(), |_, _| {});

    let answer = via_proxy(&t.path(), "GET", &format!("http://127.0.0.1:{}/hello", other.port())).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(answer.body.lines().count(), 1, "one line: {}", answer.body);
    assert!(answer.body.contains("skill `net-test`"), "{}", answer.body);
    assert!(
        answer.body.contains(&format!(
            "is not in the skill's network allowlist; to allow it, add \"http://127.0.0.1:{}\" to `[network] allow`",
            other.port()
        )),
        "{}",
        answer.body
    );

    let rows = t.audit.wait_for(1).await;
    assert!(matches!(&rows[0].outcome, EgressOutcome::Refused(r) if r.contains("allowlist")), "{:?}", rows[0]);
    assert_eq!(rows[0].ip, None, "nothing was connected to");
}

#[tokio::test]
async fn connect_tunnels_bytes_to_an_allowed_port_and_is_audited() {
    let echo = echo_server().await;
    let t = TestProxy::start(&[format!("https://127.0.0.1:{}", echo.port())], &[], no_names(), |_, _| {});

    let mut tunnel = connect(&t.path(), &format!("127.0.0.1:{}", echo.port())).await.expect("tunnel to an allowed port");
    let message = b"bytes through the tunnel";
    tunnel.write_all(message).await.unwrap();
    let mut back = vec![0; message.len()];
    tunnel.read_exact(&mut back).await.unwrap();
    assert_eq!(back, message);
    tunnel.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tunnel.read_to_end(&mut rest)).await.expect("tunnel closes").unwrap();
    drop(tunnel);

    let rows = t.audit.wait_for(1).await;
    let row = &rows[0];
    assert_eq!((row.method.as_str(), row.url.as_str()), ("CONNECT", format!("https://127.0.0.1:{}", echo.port()).as_str()));
    assert_eq!(row.outcome, EgressOutcome::Status(200));
    assert_eq!((row.bytes_out, row.bytes_in), (message.len() as u64, message.len() as u64));
}

#[tokio::test]
async fn connect_to_a_port_or_scheme_not_allowed_is_refused() {
    let (echo, plain) = (echo_server().await, echo_server().await);
    let allow = [format!("https://127.0.0.1:{}", echo.port()), format!("http://127.0.0.1:{}", plain.port())];
    let t = TestProxy::start(&allow, &[], no_names(), |_, _| {});

    let other = closed_port().await;
    let (status, body) = connect(&t.path(), &format!("127.0.0.1:{other}")).await.expect_err("other port refused");
    assert_eq!(status, 403);
    assert!(body.contains(&format!("add \"https://127.0.0.1:{other}\"")), "{body}");

    // An http rule does not open a tunnel: a tunnel is checked as https.
    let (status, body) = connect(&t.path(), &format!("127.0.0.1:{}", plain.port())).await.expect_err("http-only port refused");
    assert_eq!(status, 403, "{body}");

    let rows = t.audit.wait_for(2).await;
    assert!(rows.iter().all(|r| r.method == "CONNECT" && matches!(r.outcome, EgressOutcome::Refused(_))), "{rows:#?}");
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_unless_listed_private() {
    let (server, echo) = (http_server().await, echo_server().await);
    let resolver = TableResolver::with(&[("svc.test", "127.0.0.1")]);
    let allow = [format!("http://svc.test:{}", server.port()), format!("https://svc.test:{}", echo.port())];
    let t = TestProxy::start(&allow, &[], resolver.clone(), |_, _| {});

    let answer = via_proxy(&t.path(), "GET", &format!("http://svc.test:{}/hello", server.port())).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(answer.body.contains("svc.test resolves to 127.0.0.1, a loopback address"), "{}", answer.body);
    assert!(answer.body.contains("[network] private"), "{}", answer.body);
    let (status, body) = connect(&t.path(), &format!("svc.test:{}", echo.port())).await.expect_err("tunnel refused too");
    assert_eq!(status, 403);
    assert!(body.contains("loopback"), "{body}");

    // Listed under `private`, the same name works, and Host is the checked name.
    let private = TestProxy::start(&[], &[format!("http://svc.test:{}", server.port())], resolver, |_, _| {});
    let answer = via_proxy(&private.path(), "GET", &format!("http://svc.test:{}/hello", server.port())).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body, format!("hello from upstream; host=svc.test:{}", server.port()));
}

#[tokio::test]
async fn an_oversize_response_is_cut_at_the_cap() {
    let server = http_server().await;
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], no_names(), |net, _| {
        net.max_response_bytes = 64 << 10;
    });

    let stream = UnixStream::connect(t.path()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::get(format!("http://127.0.0.1:{}/big", server.port())).body(Empty::<Bytes>::new()).unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200, "the head passes; the body is cut");
    let mut body = response.into_body();
    let mut received = 0;
    let cut = loop {
        match body.frame().await {
            Some(Ok(frame)) => received += frame.data_ref().map_or(0, |d| d.len()),
            Some(Err(_)) => break true,
            None => break false,
        }
    };
    assert!(cut, "the client sees a broken body, not a short complete one");
    assert!(received <= 64 << 10, "no more than the cap reaches the client: {received}");

    let rows = t.audit.wait_for(1).await;
    assert!(matches!(&rows[0].outcome, EgressOutcome::Failed(why) if why.contains("cap of 65536 bytes")), "{:?}", rows[0]);
    assert!(rows[0].bytes_in > 64 << 10 && rows[0].bytes_in < 1 << 20, "cut near the cap: {}", rows[0].bytes_in);
}

#[tokio::test]
async fn malformed_requests_get_400_and_the_proxy_keeps_serving() {
    let server = http_server().await;
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], no_names(), |_, _| {});

    let answer = raw(&t.path(), b"THIS IS NOT HTTP\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let answer = raw(&t.path(), b"GET http://[::1 HTTP/1.1\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // Origin form is what a server gets, not a proxy.
    let answer = raw(&t.path(), b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("not a proxy request"), "{answer}");

    let answer = via_proxy(&t.path(), "GET", &format!("http://127.0.0.1:{}/hello", server.port())).await;
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn tunnels_end_at_their_byte_cap_and_idle_timeout() {
    let echo = echo_server().await;
    let allow = [format!("https://127.0.0.1:{}", echo.port())];
    let authority = format!("127.0.0.1:{}", echo.port());
    let t = TestProxy::start(&allow, &[], no_names(), |_, proxy| {
        proxy.tunnel = TunnelLimits { max_bytes: 4096, idle_timeout: Duration::from_millis(300), ..TunnelLimits::default() };
    });

    let mut tunnel = connect(&t.path(), &authority).await.unwrap();
    let (mut read, mut write) = tokio::io::split(&mut tunnel);
    let writer = async {
        // Stops when the proxy closes the tunnel.
        for _ in 0..64 {
            if write.write_all(&[b'y'; 1024]).await.is_err() {
                break;
            }
        }
    };
    let reader = async {
        let mut back = Vec::new();
        let _ = read.read_to_end(&mut back).await;
        back.len()
    };
    let (_, echoed) = tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(writer, reader) }).await.expect("tunnel closed");
    assert!(echoed < 4096, "no more than the cap moved: {echoed}");
    drop(tunnel);

    let mut idle = connect(&t.path(), &authority).await.unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf)).await.expect("idle tunnel closed").unwrap_or(0);
    assert_eq!(n, 0);
    assert!(started.elapsed() >= Duration::from_millis(250), "closed by the idle timeout: {:?}", started.elapsed());

    let rows = t.audit.wait_for(2).await;
    assert!(matches!(&rows[0].outcome, EgressOutcome::Failed(why) if why.contains("cap of 4096 bytes")), "{rows:#?}");
    assert!(matches!(&rows[1].outcome, EgressOutcome::Failed(why) if why.contains("idle")), "{rows:#?}");
}

#[tokio::test]
async fn dropping_the_proxy_removes_its_socket_and_stops_serving() {
    let t = TestProxy::start(&[], &[], no_names(), |_, _| {});
    let path = t.path();
    assert!(path.exists());
    let open = UnixStream::connect(&path).await.unwrap();
    let TestProxy { proxy, _dir: dir, .. } = t;
    drop(proxy);
    assert!(!path.exists(), "socket file removed");
    assert!(UnixStream::connect(&path).await.is_err());
    // A connection that was open is closed too.
    let mut open = open;
    let mut buf = [0; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), open.read(&mut buf)).await.expect("closed").unwrap_or(0);
    assert_eq!(n, 0);
    drop(dir);
}

/// A secret set again at every read, as if a human rotated it while requests pass.
#[derive(Default)]
struct Rotating(AtomicUsize);

impl SecretSource for Rotating {
    fn secret(&self, _name: &str) -> Option<String> {
        Some(format!("rotated-{:04}", self.0.fetch_add(1, Ordering::SeqCst)))
    }
}

/// An HTTP server on 127.0.0.1 answering with the `Authorization` header it got.
async fn authorization_echo() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let auth = request.headers().get("authorization").map(|v| v.as_bytes().to_vec()).unwrap_or_default();
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(auth))))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}

/// The proxy reads a bound secret once per request, for the header it adds and for the
/// redaction of the response alike: a secret set again in between cannot make it send one
/// value and redact another (the echo would reach the skill). Fails when the proxy reads
/// the store once for the header and once for the redactor.
#[tokio::test]
async fn the_secret_sent_is_the_secret_redacted_even_when_it_is_set_again_meanwhile() {
    let server = authorization_echo().await;
    let origin = format!("http://127.0.0.1:{}", server.port());
    let policy = EgressPolicy::from_section(&NetworkSection { allow: vec![origin.clone()], ..Default::default() }).unwrap();
    let section =
        SecretSection { name: "api-token".into(), header: "Authorization".into(), format: "Bearer {}".into(), hosts: vec![origin.clone()] };
    let binding = SecretBinding::from_section(&section, &policy).unwrap();
    let store = Arc::new(Rotating::default());
    let t = TestProxy::start(std::slice::from_ref(&origin), &[], no_names(), |net, config| {
        net.secrets = store.clone();
        config.secrets = vec![binding];
    });

    for sent in 1..=2 {
        let answer = via_proxy(&t.path(), "GET", &format!("{origin}/echo")).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body, format!("Bearer {}", "*".repeat("rotated-0000".len())), "the echo of the value sent is redacted");
        assert_eq!(store.0.load(Ordering::SeqCst), sent, "one read of the store per request");
    }
}
