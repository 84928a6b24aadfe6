//! A loopback HTTP/1.1 server answering GETs of fixed paths with fixed bytes (404 for
//! any other), one request per connection; optionally slowly, counting the body bytes it
//! sent, so a test can show a client stopped reading early.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes of a body written between two pauses of a slow server.
const SLOW_CHUNK: usize = 64 << 10;

/// A server started by [`serve_with`].
pub struct Site {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Body bytes written so far, over all requests.
    pub sent: Arc<AtomicU64>,
}

/// Serve `routes` at once; the base URL.
pub async fn serve(routes: BTreeMap<String, Vec<u8>>) -> String {
    serve_with(routes, None).await.base
}

/// Serve `routes`, pausing `pause` after every [`SLOW_CHUNK`] bytes of a body when given.
pub async fn serve_with(routes: BTreeMap<String, Vec<u8>>, pause: Option<Duration>) -> Site {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes = Arc::new(routes);
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let routes = routes.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 << 10 {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&request).lines().next().unwrap_or_default().to_owned();
                // The query (git asks `info/refs?service=…`) is not part of the route.
                let path = line.split(' ').nth(1).unwrap_or_default().split('?').next().unwrap_or_default();
                let (status, body) = match routes.get(path) {
                    Some(body) => ("200 OK", body.as_slice()),
                    None => ("404 Not Found", &b"not found"[..]),
                };
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for part in body.chunks(if pause.is_some() { SLOW_CHUNK } else { body.len().max(1) }) {
                    if stream.write_all(part).await.is_err() {
                        return;
                    }
                    counter.fetch_add(part.len() as u64, Ordering::Relaxed);
                    if let Some(pause) = pause {
                        tokio::time::sleep(pause).await;
                    }
                }
                let _ = stream.shutdown().await;
            });
        }
    });
    Site { base, sent }
}
