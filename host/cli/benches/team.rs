//! A team gateway's throughput on this machine: `serve --http` replicas of the release
//! binary, a wasm echo tool called by 8 clients at once, each on a kept-alive HTTP/1.1
//! connection, stateless (2026-07-28) `tools/call` requests. Cases, measured in one run:
//!
//! - one replica on SQLite, called directly: the baseline;
//! - one replica on PostgreSQL, called directly (the store's cost per call: the
//!   statistics row, written in the background);
//! - the same with each call named by `skillhost/call-key` (claimed and its answer kept
//!   in PostgreSQL: two round trips per call);
//! - one replica, then two, behind HAProxy (round robin), calls keyed.
//!
//! Each criterion iteration is a batch of [`BATCH`] calls spread over the clients;
//! criterion reports the time per batch. Calls per second and each call's p50 and p99
//! latency are written as figures (`target/figures/team.jsonl`), each case against the
//! SQLite baseline. PostgreSQL (a throwaway cluster) and HAProxy come from the system
//! (scripts/system.sh installs both).

#![allow(missing_docs, reason = "criterion's macros generate undocumented items")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fixtures::LIMITS;
use fixtures::balancer::Balancer;
use fixtures::figures::Figure;
use serde_json::json;
use skillhost::state::cluster::Cluster;

const CLIENTS: usize = 8;
const BATCH: usize = 400;
const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A `serve --http` child, killed on drop.
struct Replica {
    child: Child,
    addr: String,
    _data: tempfile::TempDir,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replica(skills: &Path, token: &Path, config: &str) -> Replica {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("config.toml"), config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(skills)
        .arg("--data-dir")
        .arg(data.path())
        .args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(token)
        .env("SKILLHOST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited before listening");
        if let Some(rest) = line.trim().strip_prefix("skillhost: serving MCP at http://") {
            break rest.split('/').next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Replica { child, addr, _data: data }
}

fn balancer(backends: &[&Replica]) -> Balancer {
    let named: Vec<(String, &str)> = backends.iter().enumerate().map(|(i, r)| (format!("r{i}"), r.addr.as_str())).collect();
    let named: Vec<(&str, &str)> = named.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    Balancer::start(&named, "", "")
}

/// One kept-alive HTTP/1.1 connection making stateless `tools/call`s.
struct Client {
    stream: BufReader<TcpStream>,
    addr: String,
}

impl Client {
    fn new(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Self { stream: BufReader::new(stream), addr: addr.to_owned() }
    }

    /// Call `limits__echo` with `value`, keyed with `key` when given; check the answer.
    fn echo(&mut self, value: usize, key: Option<&str>) {
        let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
        if let Some(key) = key {
            meta["skillhost/call-key"] = json!(key);
        }
        let body = json!({"jsonrpc": "2.0", "id": value, "method": "tools/call",
            "params": {"name": "limits__echo", "arguments": {"value": value}, "_meta": meta}})
        .to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: limits__echo\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).unwrap();
        let body = self.response();
        assert!(body.contains(&format!("\"text\":\"{value}\"")) && !body.contains("isError\":true"), "{body}");
    }

    /// The body of the next response (`Content-Length` or chunked).
    fn response(&mut self) -> String {
        let mut line = String::new();
        let (mut length, mut chunked) = (None, false);
        self.stream.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        loop {
            line.clear();
            self.stream.read_line(&mut line).unwrap();
            let header = line.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if let Some(n) = header.strip_prefix("content-length:") {
                length = n.trim().parse::<usize>().ok();
            }
            chunked |= header == "transfer-encoding: chunked";
        }
        let mut body = Vec::new();
        if let (Some(n), false) = (length, chunked) {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).unwrap();
        } else {
            loop {
                line.clear();
                self.stream.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        String::from_utf8(body).unwrap()
    }
}

/// `BATCH` calls over [`CLIENTS`] connections to `addr`; each call's latency.
fn batch(addr: &str, keyed: bool, counter: &AtomicUsize) -> (Duration, Vec<Duration>) {
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(BATCH));
    std::thread::scope(|scope| {
        for _ in 0..CLIENTS {
            scope.spawn(|| {
                let mut client = Client::new(addr);
                while next.fetch_add(1, Ordering::Relaxed) < BATCH {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let key = keyed.then(|| format!("bench-{n}"));
                    let began = Instant::now();
                    client.echo(n, key.as_deref());
                    latencies.lock().unwrap().push(began.elapsed());
                }
            });
        }
    });
    (started.elapsed(), latencies.into_inner().unwrap())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
}

fn bench(c: &mut Criterion) {
    let skills = tempfile::tempdir().unwrap();
    let dir = skills.path().join("limits");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
    std::fs::write(dir.join("skill.toml"), LIMITS.manifest().replace("[limits]\n", "[limits]\nconcurrency = 64\n")).unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let token = secrets.path().join("token");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&token).unwrap();
        file.write_all(TOKEN.as_bytes()).unwrap();
    }
    let cluster = Cluster::start().expect("PostgreSQL starts");
    let postgres = |name: &str| format!("[state]\nurl = \"{}\"\nreplica = \"{name}\"\n", cluster.url());
    let sqlite = replica(skills.path(), &token, "");
    let a = replica(skills.path(), &token, &postgres("a"));
    let b = replica(skills.path(), &token, &postgres("b"));
    let one = balancer(&[&a]);
    let two = balancer(&[&a, &b]);
    let counter = AtomicUsize::new(0);
    // Warm every path once: compiled component, pooled connections, HAProxy.
    for (addr, keyed) in [(&sqlite.addr, false), (&a.addr, true), (&b.addr, true), (&two.addr, true)] {
        batch(addr, keyed, &counter);
    }

    let cases: [(&str, &str, bool); 5] = [
        ("one replica, SQLite, direct", &sqlite.addr, false),
        ("one replica, PostgreSQL, direct", &a.addr, false),
        ("one replica, PostgreSQL, direct, keyed calls", &a.addr, true),
        ("one replica behind HAProxy, PostgreSQL, keyed calls", &one.addr, true),
        ("two replicas behind HAProxy, PostgreSQL, keyed calls", &two.addr, true),
    ];
    let mut group = c.benchmark_group("team");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(10);
    let mut measured: Vec<(String, f64, f64, f64)> = Vec::new();
    for (name, addr, keyed) in cases {
        let all = Mutex::new((Duration::ZERO, Vec::new()));
        group.bench_function(name, |bencher| {
            bencher.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (took, latencies) = batch(addr, keyed, &counter);
                    total += took;
                    let mut all = all.lock().unwrap();
                    all.0 += took;
                    all.1.extend(latencies);
                }
                total
            });
        });
        let (took, mut latencies) = all.into_inner().unwrap();
        latencies.sort();
        let rate = latencies.len() as f64 / took.as_secs_f64();
        measured.push((name.to_owned(), rate, percentile(&latencies, 0.5), percentile(&latencies, 0.99)));
    }
    group.finish();

    let (base_name, base_rate, base_p50, base_p99) = measured[0].clone();
    let mut figures = Vec::new();
    eprintln!("{:55} {:>10} {:>9} {:>9}", "case", "calls/s", "p50 ms", "p99 ms");
    for (name, rate, p50, p99) in &measured {
        eprintln!("{name:55} {rate:>10.0} {p50:>9.2} {p99:>9.2}");
        figures.push(
            Figure::new(format!("{name}: calls/s, {CLIENTS} clients"), *rate, "calls/s")
                .against(format!("{base_name}: calls/s"), base_rate),
        );
        figures.push(Figure::new(format!("{name}: call p50"), *p50, "ms").against(format!("{base_name}: call p50"), base_p50));
        figures.push(Figure::new(format!("{name}: call p99"), *p99, "ms").against(format!("{base_name}: call p99"), base_p99));
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "team", &figures) {
        eprintln!("cannot write the figures: {e}");
    }
    drop((two, one, a, b, sqlite, cluster));
}

criterion_group!(benches, bench);
criterion_main!(benches);
