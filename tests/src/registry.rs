//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution
//! registry, installed by scripts/setup.sh), started on a free 127.0.0.1 port with its
//! storage in a temporary folder (so a test can tamper with what it stores), killed on
//! drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REGISTRY_BINARY: &str = "/usr/bin/docker-registry";

/// A `docker-registry` on a free loopback port, killed on drop.
pub struct OciRegistry {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
}

impl OciRegistry {
    /// Start one and wait until it answers.
    pub fn start() -> Self {
        assert!(
            Path::new(REGISTRY_BINARY).exists(),
            "{REGISTRY_BINARY} is missing: the OCI tests need a real registry; run `apt-get install docker-registry` (scripts/setup.sh installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n",
            dir.path().display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(REGISTRY_BINARY)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut registry = Self { child, dir, host };
        registry.wait_ready();
        registry
    }

    /// Until `GET /v2/` answers 200.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default();
                panic!("docker-registry exited ({status}) before answering: {log}");
            }
            if let Ok(mut stream) = TcpStream::connect(&self.host) {
                let request = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.host);
                let mut answer = String::new();
                if stream.write_all(request.as_bytes()).is_ok()
                    && stream.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.0 200")
                {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not answer GET /v2/ on {} within 30 s", self.host);
    }

    /// Where the registry stores the blob `digest` (manifests are blobs too).
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
