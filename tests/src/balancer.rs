//! HAProxy for tests and benchmarks: Debian's `haproxy` (installed by scripts/system.sh)
//! in front of replicas on 127.0.0.1, from a generated configuration checked with
//! `haproxy -c` first, killed on drop.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running HAProxy, killed on drop.
pub struct Balancer {
    child: Child,
    /// `127.0.0.1:PORT`, where clients reach it.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Balancer {
    /// Round robin over `backends` (`(name, "127.0.0.1:PORT")`), each `server` line ending
    /// with `server_options` (such as `check inter 200ms`), and `backend_lines` (retries,
    /// redispatch) in the backend section.
    pub fn start(backends: &[(&str, &str)], server_options: &str, backend_lines: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let servers: String = backends.iter().map(|(name, addr)| format!("    server {name} {addr} {server_options}\n")).collect();
        let config = format!(
            "global\n    maxconn 512\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 60s\n    timeout server 60s\n    option http-keep-alive\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    balance roundrobin\n{backend_lines}{servers}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let check = Command::new(haproxy()).arg("-c").arg("-f").arg(&path).output().expect("haproxy is installed (scripts/system.sh)");
        assert!(check.status.success(), "haproxy -c: {}", String::from_utf8_lossy(&check.stderr));
        let child = Command::new(haproxy()).arg("-db").arg("-f").arg(&path).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let started = Instant::now();
        while TcpStream::connect(&addr).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "haproxy did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, addr, _dir: dir }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy: on `PATH`, else where Debian puts it (`/usr/sbin`, off a user's `PATH`).
fn haproxy() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("haproxy"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| "/usr/sbin/haproxy".into())
}
