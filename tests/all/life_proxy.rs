//! The egress proxy under attack from its own skill: a sandboxed server that opens many
//! connections with 16 MiB bodies, sends huge heads on hundreds of connections, trickles a
//! head or a body byte by byte, or keeps writing while all its request slots are busy.
//! The proxy must hold no more than the bounds documented on `skillhost_egress::proxy`:
//! the skill's request slot and room in the host's body budget before any body byte is
//! read, deadlines for heads and bodies, caps on connections and head size.
//!
//! The proxy listens on a Unix socket in a temporary directory; upstreams listen on
//! 127.0.0.1. Memory is measured in a child process that runs only the proxy (this test
//! binary re-executed, see [`proxy_process`]), so tests running alongside in this process
//! do not count.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillhost_core::egress::NetworkSection;
use skillhost_core::{EgressPolicy, SkillName};
use skillhost_egress::{BodyBudget, EgressProxy, NetConfig, ProxyConfig, SkillEgress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

/// The environment variable that makes [`proxy_process`] serve: the socket path and the
/// allowed upstream port, separated by 0x1f.
const HELPER: &str = "SKILLHOST_LIFE_PROXY_HELPER";

/// The skill the proxies serve.
const SKILL: &str = "life-proxy";

/// A guard against a hung proxy or test: nothing here should take this long.
const GUARD: Duration = Duration::from_secs(60);

const MIB: usize = 1 << 20;

fn policy(ports: &[u16]) -> Arc<EgressPolicy> {
    let allow = ports.iter().map(|port| format!("http://127.0.0.1:{port}")).collect();
    let section = NetworkSection { allow, ..Default::default() };
    Arc::new(EgressPolicy::from_section(&section).expect("valid test rules"))
}

/// Not a test of its own: when [`HELPER`] is set, this process is the proxy of one of the
/// memory tests below. It serves with the default configuration (the one the host runs
/// sandboxed servers with), says `life-proxy ready` on stdout and exits when stdin closes.
#[test]
fn proxy_process() {
    let Some(args) = std::env::var_os(HELPER) else { return };
    let args = args.into_vec();
    let mut parts = args.split(|b| *b == 0x1f);
    let socket = PathBuf::from(OsString::from_vec(parts.next().unwrap().to_vec()));
    let port: u16 = String::from_utf8(parts.next().unwrap().to_vec()).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let egress = SkillEgress::new(SkillName::new(SKILL).unwrap(), policy(&[port]), Arc::new(NetConfig::default()));
    let _proxy = EgressProxy::bind(&socket, egress, ProxyConfig::default()).expect("proxy binds");
    // The parent waits for this line on the child's stdout.
    std::io::Write::write_all(&mut std::io::stdout(), b"life-proxy ready\n").unwrap();
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    std::process::exit(0);
}

/// A proxy in a child process, killed on drop.
struct ProxyProcess {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl ProxyProcess {
    fn start(port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        let mut arg = socket.clone().into_os_string().into_vec();
        arg.push(0x1f);
        arg.extend_from_slice(port.to_string().as_bytes());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["life_proxy::proxy_process", "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(HELPER, OsString::from_vec(arg))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("life-proxy ready") => break,
                Some(Ok(_)) => {}
                other => panic!("the proxy process did not start: {other:?}"),
            }
        }
        Self { child, socket, _dir: dir }
    }

    /// The child's peak resident memory so far (`VmHWM`), in bytes.
    fn peak_rss(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 1024
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A proxy in this process for skill [`SKILL`], allowed to reach `ports` on 127.0.0.1.
struct LocalProxy {
    proxy: EgressProxy,
    _dir: tempfile::TempDir,
}

impl LocalProxy {
    fn start(ports: &[u16], tune: impl FnOnce(&mut NetConfig, &mut ProxyConfig)) -> Self {
        let (mut net, mut config) = (NetConfig::default(), ProxyConfig::default());
        tune(&mut net, &mut config);
        let egress = SkillEgress::new(SkillName::new(SKILL).unwrap(), policy(ports), Arc::new(net));
        let dir = tempfile::tempdir().unwrap();
        let proxy = EgressProxy::bind(dir.path().join("egress.sock"), egress, config).expect("proxy binds");
        Self { proxy, _dir: dir }
    }

    fn path(&self) -> &Path {
        self.proxy.path()
    }
}

/// An upstream on 127.0.0.1 that reads each request's body whole and answers
/// `received N bytes`; the bytes it received in all.
struct Sink {
    port: u16,
    received: Arc<AtomicUsize>,
}

async fn sink() -> Sink {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(AtomicUsize::new(0));
    let total = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let total = total.clone();
            tokio::spawn(async move {
                let Some((_, length)) = read_head(&mut stream).await else { return };
                let mut buf = vec![0; 64 << 10];
                let mut left = length;
                while left > 0 {
                    match stream.read(&mut buf[..left.min(64 << 10)]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => left -= n,
                    }
                }
                total.fetch_add(length, Ordering::SeqCst);
                let body = format!("received {length} bytes");
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Sink { port, received }
}

/// Read a request head; the head and its `Content-Length` (0 when absent).
async fn read_head(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<(String, usize)> {
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    Some((head, length))
}

/// An upstream on 127.0.0.1 that accepts connections, reads what comes and never answers
/// until released, holding each request it gets (and so the skill's request slot).
struct Stall {
    port: u16,
    held: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Stall {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let list = held.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let task = tokio::spawn(async move {
                    let mut buf = vec![0; 16 << 10];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                    std::future::pending::<()>().await;
                });
                list.lock().unwrap().push(task);
            }
        });
        Self { port, held }
    }

    fn holding(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    /// Close every held connection: the proxy answers those requests 502.
    fn release(&self) {
        for task in self.held.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Write `bytes` to the proxy, then read its answer until it closes the connection
/// (within `guard`, else a panic naming `what`).
async fn exchange(socket: &Path, bytes: &[u8], guard: Duration, what: &str) -> String {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    match tokio::time::timeout(guard, stream.read_to_end(&mut answer)).await {
        Ok(_) => String::from_utf8_lossy(&answer).into_owned(),
        Err(_) => panic!("{what}: the proxy neither answered nor closed within {guard:?}; so far: {:?}", String::from_utf8_lossy(&answer)),
    }
}

/// The head of a `POST` through the proxy to `port` with a `length`-byte body.
fn post_head(port: u16, length: usize) -> String {
    format!(
        "POST http://127.0.0.1:{port}/upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

/// The status line of an answer.
fn status_line(answer: &str) -> &str {
    answer.lines().next().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_16_mib_bodies_at_once_stay_within_the_body_budget() {
    const CONNECTIONS: usize = 64;
    const BODY: usize = 16 * MIB;
    let sink = sink().await;
    let proxy = ProxyProcess::start(sink.port);
    let before = proxy.peak_rss();

    let chunk = bytes::Bytes::from(vec![b'x'; 64 << 10]);
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        let (socket, chunk, head) = (proxy.socket.clone(), chunk.clone(), post_head(sink.port, BODY));
        clients.push(tokio::spawn(async move {
            let mut stream = UnixStream::connect(&socket).await.unwrap();
            // The proxy may refuse early and close: then the writes fail and the answer says why.
            let _ = async {
                stream.write_all(head.as_bytes()).await?;
                for _ in 0..BODY / chunk.len() {
                    stream.write_all(&chunk).await?;
                }
                Ok::<_, std::io::Error>(())
            }
            .await;
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            String::from_utf8_lossy(&answer).into_owned()
        }));
    }
    let mut answers = Vec::new();
    for client in clients {
        answers.push(tokio::time::timeout(GUARD, client).await.expect("a client hung").unwrap());
    }
    let grown = proxy.peak_rss().saturating_sub(before);

    let mut statuses: Vec<&str> = answers.iter().map(|a| status_line(a)).collect();
    statuses.sort_unstable();
    statuses.dedup();
    // The old proxy read every body before taking a request slot: 64 x 16 MiB at once.
    assert!(
        grown < 256 * MIB,
        "{CONNECTIONS} connections with {} MiB bodies grew the proxy's peak memory by {} MiB (statuses: {statuses:?})",
        BODY / MIB,
        grown / MIB
    );
    let delivered = answers.iter().filter(|a| a.ends_with(&format!("received {BODY} bytes"))).count();
    assert!(delivered > 0, "the proxy still serves under the flood: {statuses:?}");
    for answer in answers.iter().filter(|a| !a.starts_with("HTTP/1.1 200")) {
        assert!(answer.contains(&format!("skill `{SKILL}`")), "a refusal names the skill: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_connections_with_huge_heads_stay_within_the_caps() {
    const CONNECTIONS: usize = 400;
    const HEAD: usize = 384 << 10;
    let sink = sink().await;
    let proxy = ProxyProcess::start(sink.port);
    let before = proxy.peak_rss();

    let padding = "a".repeat(HEAD);
    let mut streams = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut stream = UnixStream::connect(&proxy.socket).await.unwrap();
        // An unfinished head: no blank line yet. A proxy that caps heads cuts it short.
        let head = format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\nX-Pad: {padding}", sink.port);
        let _ = tokio::time::timeout(Duration::from_secs(2), stream.write_all(head.as_bytes())).await;
        streams.push(stream);
    }
    // Let the proxy read what it will.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown = proxy.peak_rss().saturating_sub(before);
    drop(streams);
    assert!(
        grown < 48 * MIB,
        "{CONNECTIONS} connections each sending a {} KiB head grew the proxy's peak memory by {} MiB",
        HEAD >> 10,
        grown / MIB
    );
}

#[tokio::test]
async fn a_trickled_head_is_cut_with_408() {
    let sink = sink().await;
    let proxy = LocalProxy::start(&[sink.port], |_, config| {
        config.header_timeout = Duration::from_millis(500);
    });
    let start = format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\nX-Slow: ", sink.port);
    let (closed, answer) = trickle(proxy.path(), start).await;
    assert!(closed, "a head trickled a byte per 50 ms was still being read after 5 s: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "the slow sender is told why: {answer:?}");
}

/// Send `start`, then one byte every 50 ms (up to 20 s), to the proxy at `socket`; return
/// whether the proxy closed the connection within 5 s, and what it answered.
async fn trickle(socket: &Path, start: String) -> (bool, String) {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let sender = tokio::spawn(async move {
        write.write_all(start.as_bytes()).await?;
        for _ in 0..400 {
            write.write_all(b"a").await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), read.read_to_end(&mut answer)).await;
    sender.abort();
    (closed.is_ok(), String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn a_trickled_body_is_cut_with_408_naming_the_skill() {
    let sink = sink().await;
    let proxy = LocalProxy::start(&[sink.port], |_, config| {
        config.header_timeout = Duration::from_millis(500);
        config.body_timeout = Duration::from_millis(500);
    });
    let (closed, answer) = trickle(proxy.path(), post_head(sink.port, MIB)).await;
    assert!(closed, "a body trickled a byte per 50 ms was still being read after 5 s: {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "the slow sender is told why: {answer:?}");
    assert!(answer.contains(&format!("skill `{SKILL}`")), "{answer}");
    assert_eq!(sink.received.load(Ordering::SeqCst), 0, "nothing of the cut body went upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_skills_request_slots_busy_a_body_is_not_read() {
    let (stall, sink) = (Stall::start().await, sink().await);
    let budget = BodyBudget::default();
    let held = budget.clone();
    let proxy = LocalProxy::start(&[stall.port, sink.port], |net, _| net.request_body_budget = budget);
    let socket = proxy.path().to_owned();

    // Fill the skill's 8 request slots with requests the upstream never answers.
    let slots = NetConfig::default().max_concurrent_per_skill;
    let mut stalled = Vec::new();
    for _ in 0..slots {
        let request = format!("GET http://127.0.0.1:{}/ HTTP/1.1\r\nConnection: close\r\n\r\n", stall.port);
        let socket = socket.clone();
        stalled.push(tokio::spawn(async move { exchange(&socket, request.as_bytes(), GUARD, "a stalled request").await }));
    }
    tokio::time::timeout(GUARD, async {
        while stall.holding() < slots {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the stalled requests reach the upstream");

    // A ninth request with a 16 MiB body: how much of it does the proxy take?
    let body = vec![b'x'; 16 * MIB];
    let mut stream = UnixStream::connect(&socket).await.unwrap();
    stream.write_all(post_head(sink.port, body.len()).as_bytes()).await.unwrap();
    let mut written = 0;
    while written < body.len() {
        match tokio::time::timeout(Duration::from_millis(500), stream.write(&body[written..])).await {
            Ok(Ok(n)) => written += n,
            Ok(Err(e)) => panic!("the proxy closed the waiting request: {e}"),
            Err(_) => break,
        }
    }
    assert!(
        written < 2 * MIB,
        "with the skill's {slots} request slots busy, the proxy took {} KiB of a waiting request's body",
        written >> 10
    );
    assert_eq!(held.held(), 0, "a request waiting for its slot holds no room in the body budget");

    // Free the slots: the ninth request goes through whole.
    stall.release();
    tokio::time::timeout(GUARD, stream.write_all(&body[written..])).await.expect("the body is read once a slot frees").unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut answer)).await.expect("an answer").unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(&format!("received {} bytes", body.len())), "{answer}");
    for task in stalled {
        let answer = tokio::time::timeout(GUARD, task).await.expect("a stalled request ends").unwrap();
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    }
    assert!(held.peak() <= body.len(), "one body at a time was held: {} bytes at most", held.peak());
    assert_eq!(held.held(), 0, "the body's room is given back once sent");
}

#[tokio::test]
async fn over_the_caps_requests_are_refused_naming_the_skill_and_the_limit() {
    let sink = sink().await;
    let budget = BodyBudget::new(MIB, Duration::from_millis(200));
    let held = budget.clone();
    let proxy = LocalProxy::start(&[sink.port], |net, config| {
        net.request_body_budget = budget;
        config.max_connections = 2;
    });

    // A body larger than the whole budget is refused from its head.
    let answer = exchange(proxy.path(), post_head(sink.port, 2 * MIB).as_bytes(), GUARD, "a body over the budget").await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains(&format!("skill `{SKILL}`")) && answer.contains(&MIB.to_string()), "{answer}");

    // A slow sender holds 768 KiB of the budget; a 512 KiB body finds no room.
    let mut slow = UnixStream::connect(proxy.path()).await.unwrap();
    slow.write_all(post_head(sink.port, 768 << 10).as_bytes()).await.unwrap();
    slow.write_all(b"x").await.unwrap();
    tokio::time::timeout(GUARD, async {
        while held.held() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the slow request reserves its body");
    assert_eq!(held.held(), 768 << 10, "a known length is reserved whole");
    let answer = exchange(proxy.path(), post_head(sink.port, 512 << 10).as_bytes(), GUARD, "a body finding the budget full").await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(&format!("skill `{SKILL}`")) && answer.contains("NetConfig::request_body_budget"), "{answer}");

    // Two connections open (the slow one and an idle one): a third is refused unread.
    let _idle = UnixStream::connect(proxy.path()).await.unwrap();
    let answer = exchange(proxy.path(), b"", GUARD, "a connection over the cap").await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(&format!("skill `{SKILL}`")) && answer.contains("ProxyConfig::max_connections"), "{answer}");

    drop(slow);
    tokio::time::timeout(GUARD, async {
        while held.held() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a closed connection gives its budget back");
    assert_eq!(held.peak(), 768 << 10, "nothing else was ever reserved");
}
