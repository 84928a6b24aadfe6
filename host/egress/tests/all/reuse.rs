//! Connection reuse: a skill's requests to the same checked address, name, port and
//! scheme share a kept connection once a response was read to its end; a body left
//! unread, a server's `Connection: close`, another name or another skill each get a new
//! one.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use skillhost_core::egress::NetworkSection;
use skillhost_core::{EgressPolicy, SkillName};
use skillhost_egress::{NetConfig, SkillEgress};
use tokio::net::TcpListener;

use crate::{MemoryAudit, TableResolver};

/// An HTTP/1.1 server on 127.0.0.1 that counts the connections it accepts: `/close`
/// answers with `Connection: close`, `/big` sends 1 MiB, anything else a few bytes.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let mut response = match request.uri().path() {
                        "/big" => hyper::Response::new(Full::new(Bytes::from(vec![b'x'; 1 << 20]))),
                        _ => hyper::Response::new(Full::new(Bytes::from_static(b"hello"))),
                    };
                    if request.uri().path() == "/close" {
                        response.headers_mut().insert("connection", "close".parse().unwrap());
                    }
                    Ok::<_, Infallible>(response)
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    (addr, accepted)
}

/// The egress of `skill`, allowed `a.test` and `b.test` (both 127.0.0.1) on `port`.
fn egress(skill: &str, port: u16) -> (SkillEgress, Arc<MemoryAudit>) {
    let rules = vec![format!("http://a.test:{port}"), format!("http://b.test:{port}")];
    let section = NetworkSection { private: rules, ..Default::default() };
    let policy = EgressPolicy::from_section(&section).unwrap();
    let audit = Arc::new(MemoryAudit::default());
    let resolver = TableResolver::with(&[("a.test", "127.0.0.1"), ("b.test", "127.0.0.1")]);
    let net = NetConfig { resolver, audit: audit.clone(), ..NetConfig::default() };
    (SkillEgress::new(SkillName::new(skill).unwrap(), Arc::new(policy), Arc::new(net)), audit)
}

/// GET `url` through `egress` and read the body to its end.
async fn get(egress: &SkillEgress, url: &str) -> Bytes {
    let request = hyper::Request::get(url).body(Empty::<Bytes>::new()).unwrap();
    let response = egress.send("fetch", request, &[]).await.expect("the request is sent");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("the whole body").to_bytes()
}

#[tokio::test]
async fn a_skills_requests_to_one_address_share_a_kept_connection() {
    let (server, accepted) = counting_server().await;
    let (egress, audit) = egress("reuse", server.port());
    let url = format!("http://a.test:{}/hello", server.port());
    for _ in 0..3 {
        assert_eq!(&get(&egress, &url).await[..], b"hello");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "three requests, one connection");
    let rows = audit.wait_for(3).await;
    assert!(rows.iter().all(|r| r.outcome == skillhost_core::EgressOutcome::Status(200)), "every request is audited: {rows:#?}");
}

#[tokio::test]
async fn a_body_left_unread_or_a_closing_server_costs_a_new_connection() {
    let (server, accepted) = counting_server().await;
    let (egress, _) = egress("reuse", server.port());
    let base = format!("http://a.test:{}", server.port());
    // A body dropped after its first frame: its connection is closed, never reused with
    // the rest of that body still in it.
    let request = hyper::Request::get(format!("{base}/big")).body(Empty::<Bytes>::new()).unwrap();
    let mut body = egress.send("fetch", request, &[]).await.unwrap().into_body();
    body.frame().await.unwrap().unwrap();
    drop(body);
    assert_eq!(&get(&egress, &format!("{base}/hello")).await[..], b"hello");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    // `Connection: close`: the next request opens another.
    get(&egress, &format!("{base}/close")).await;
    assert_eq!(&get(&egress, &format!("{base}/hello")).await[..], b"hello");
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn another_name_or_another_skill_never_gets_the_connection() {
    let (server, accepted) = counting_server().await;
    let (first, _) = egress("reuse-a", server.port());
    let (second, _) = egress("reuse-b", server.port());
    let port = server.port();
    get(&first, &format!("http://a.test:{port}/hello")).await;
    get(&first, &format!("http://b.test:{port}/hello")).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "same address, another name: another connection");
    get(&second, &format!("http://a.test:{port}/hello")).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "another skill: another connection");
    get(&first, &format!("http://a.test:{port}/hello")).await;
    get(&first, &format!("http://b.test:{port}/hello")).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "each kept connection serves its own name again");
}
