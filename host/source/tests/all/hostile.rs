//! A loopback HTTP/1.1 server whose answers each test scripts per request (a manifest
//! claiming 2 GiB, an endless chunked body, a redirect, a token challenge), counting the
//! body bytes it wrote and whether the client hung up before it was done: the stand-in for
//! a hostile registry, index or token service.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes of one write (and one chunk) of a long body.
const CHUNK: usize = 64 << 10;

/// What the server answers one request with.
pub enum Answer {
    /// A status, headers and a whole body (no body written for a HEAD).
    Fixed { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// 200 with `Content-Length: claimed`, then `prefix` and zeros until the client hangs up
    /// or `stop` body bytes are written (then the connection is closed).
    Claims { claimed: u64, prefix: Vec<u8>, stop: u64 },
    /// 200, chunked: `prefix`, then chunks of spaces until the client hangs up or `stop`
    /// body bytes are written (then the body ends properly).
    Endless { prefix: Vec<u8>, stop: u64 },
}

impl Answer {
    /// 200 with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Self {
        Answer::Fixed { status: 200, headers: Vec::new(), body: body.into() }
    }

    /// 200 with `body` and one header.
    pub fn ok_with(body: impl Into<Vec<u8>>, name: &str, value: &str) -> Self {
        Answer::Fixed { status: 200, headers: vec![(name.to_owned(), value.to_owned())], body: body.into() }
    }

    /// `status` with a short body and the given headers.
    pub fn status(status: u16, headers: &[(&str, &str)]) -> Self {
        let headers = headers.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        Answer::Fixed { status, headers, body: format!("status {status}").into_bytes() }
    }

    /// 404.
    pub fn not_found() -> Self {
        Answer::status(404, &[])
    }

    /// A redirect (`status` 301, 302, 307 or 308) to `location`.
    pub fn redirect(status: u16, location: &str) -> Self {
        Answer::status(status, &[("Location", location)])
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET`, `HEAD`, ….
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A server started by [`serve`].
pub struct Hostile {
    /// `http://HOST:PORT`.
    pub base: String,
    /// `HOST:PORT`.
    pub host: String,
    /// Body bytes written so far, over all requests.
    sent: Arc<AtomicU64>,
    /// Whether a write failed because the client had closed the connection.
    hung_up: Arc<AtomicBool>,
    /// Every request, in order.
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Hostile {
    /// Body bytes written so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Wait (a few seconds at most) for the server to notice the client hung up; whether it did.
    pub async fn hung_up(&self) -> bool {
        for _ in 0..100 {
            if self.hung_up.load(Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        false
    }
}

type Script = dyn Fn(&Seen) -> Answer + Send + Sync;

/// Serve on `127.0.0.1`, answering each request as `script` says.
pub async fn serve(script: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Hostile {
    serve_on("127.0.0.1", script).await
}

/// Serve on `ip` (a loopback address), answering each request as `script` says.
pub async fn serve_on(ip: &str, script: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Hostile {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let script: Arc<Script> = Arc::new(script);
    let (sent, hung_up, seen) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let server = Hostile { base: format!("http://{host}"), host, sent: sent.clone(), hung_up: hung_up.clone(), seen: seen.clone() };
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (script, sent, hung_up, seen) = (script.clone(), sent.clone(), hung_up.clone(), seen.clone());
            tokio::spawn(async move {
                if answer(stream, &*script, &sent, &seen).await.is_err() {
                    hung_up.store(true, Ordering::SeqCst);
                }
            });
        }
    });
    server
}

/// Read one request, answer it, close. `Err` when a write failed (the client hung up).
async fn answer(mut stream: tokio::net::TcpStream, script: &Script, sent: &AtomicU64, seen: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        if request.len() > 64 << 10 {
            return Ok(());
        }
    }
    let head_end = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let text = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    // A body the client sent (an upload) is read and dropped.
    let length: usize = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut have = request.len() - head_end - 4;
    while have < length {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => have += n,
        }
    }
    let request = Seen { method, path, headers };
    seen.lock().unwrap().push(request.clone());
    let head = request.method == "HEAD";
    match script(&request) {
        Answer::Fixed { status, headers, body } => {
            let mut text = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
            for (name, value) in headers {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str("\r\n");
            stream.write_all(text.as_bytes()).await?;
            if !head {
                stream.write_all(&body).await?;
                sent.fetch_add(body.len() as u64, Ordering::SeqCst);
            }
        }
        Answer::Claims { claimed, prefix, stop } => {
            let text = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(text.as_bytes()).await?;
            if !head {
                stream.write_all(&prefix).await?;
                sent.fetch_add(prefix.len() as u64, Ordering::SeqCst);
                let zeros = vec![0u8; CHUNK];
                let mut written = prefix.len() as u64;
                while written < stop {
                    stream.write_all(&zeros).await?;
                    written += zeros.len() as u64;
                    sent.fetch_add(zeros.len() as u64, Ordering::SeqCst);
                }
            }
        }
        Answer::Endless { prefix, stop } => {
            let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            stream.write_all(text.as_bytes()).await?;
            if !head {
                let spaces = vec![b' '; CHUNK];
                let mut written = 0u64;
                let parts = std::iter::once(prefix.as_slice()).chain(std::iter::repeat(spaces.as_slice()));
                for part in parts.filter(|p| !p.is_empty()) {
                    if written >= stop {
                        break;
                    }
                    stream.write_all(format!("{:x}\r\n", part.len()).as_bytes()).await?;
                    stream.write_all(part).await?;
                    stream.write_all(b"\r\n").await?;
                    written += part.len() as u64;
                    sent.fetch_add(part.len() as u64, Ordering::SeqCst);
                }
                stream.write_all(b"0\r\n\r\n").await?;
            }
        }
    }
    let _ = stream.shutdown().await;
    Ok(())
}
