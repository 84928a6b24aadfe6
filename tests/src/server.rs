//! A small HTTP/1.1 server on 127.0.0.1 for egress tests: it records every request it
//! receives (so a test can prove a request never arrived) and answers by path:
//!
//! - `/ok` — 200 with a 1 KiB body;
//! - `/big?n=BYTES` — 200 with that many bytes;
//! - `/redirect?to=URL` — 302 to URL;
//! - `/hang` — reads the request and never answers (until the client goes away);
//! - `/v1/traces` — 200 with an empty protobuf body: what an OpenTelemetry collector
//!   answers an OTLP/HTTP export it took whole (the test decodes [`Received::body`]).
//!
//! Threads, bounded: it serves until dropped, each connection at most 30 s.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Received {
    /// Method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl Received {
    /// The value of header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The server. Dropping it stops accepting.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    /// Start a server on 127.0.0.1 and an ephemeral port; it closes each connection after
    /// one answer.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// [`start`](Self::start), but answering any number of requests per connection
    /// (HTTP/1.1 keep-alive), for clients that keep their connections.
    pub fn start_keep_alive() -> Self {
        Self::start_with(true)
    }

    fn start_with(keep_alive: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (received.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if halt.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &log, keep_alive));
            }
        });
        Self { addr, received, stop }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Received>>, keep_alive: bool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    while serve_one(&stream, &mut reader, log, keep_alive) && keep_alive {}
}

/// Read one request and answer it; whether the connection may carry another.
fn serve_one(stream: &TcpStream, reader: &mut BufReader<TcpStream>, log: &Mutex<Vec<Received>>, keep_alive: bool) -> bool {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return false;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse::<usize>().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    log.lock().unwrap().push(Received { method, target: target.clone(), headers, body });

    let mut stream = stream;
    let respond = |status, headers: &[(&str, &str)], body: &[u8]| respond(status, headers, body, keep_alive);
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let param = |key: &str| query.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')).unwrap_or("");
    let response = match path {
        "/ok" => respond(200, &[], &vec![b'x'; 1024]),
        "/big" => respond(200, &[], &vec![b'y'; param("n").parse().unwrap_or(0)]),
        "/redirect" => respond(302, &[("Location", param("to"))], b""),
        "/v1/traces" => respond(200, &[("Content-Type", "application/x-protobuf")], b""),
        "/hang" => {
            let mut sink = [0; 1];
            let _ = stream.read(&mut sink);
            return false;
        }
        _ => respond(404, &[], b"not found"),
    };
    stream.write_all(&response).is_ok()
}

fn respond(status: u16, headers: &[(&str, &str)], body: &[u8], keep_alive: bool) -> Vec<u8> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: {connection}\r\n", body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
