//! [`Cluster`]: a throwaway PostgreSQL server for tests and for trying the team gateway
//! on one machine: `initdb` into a temporary directory, `postgres` listening on
//! 127.0.0.1 at a free port, stopped and removed when dropped. As root it runs as the
//! `postgres` user (or uid 65534 when there is none): PostgreSQL refuses to run as root.
//!
//! The binaries come from `SKILLHOST_PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package), else `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const START: Duration = Duration::from_secs(30);

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start a PostgreSQL server for the test: {0}; install PostgreSQL (apt-get install postgresql) or set SKILLHOST_PG_BIN")]
pub struct ClusterError(String);

/// A running throwaway PostgreSQL server.
pub struct Cluster {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Start one (an empty database `postgres`, role `skillhost`, trusted on 127.0.0.1).
    pub fn start() -> Result<Self, ClusterError> {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("skillhost-pg-").tempdir().map_err(|e| ClusterError(e.to_string()))?;
        let data = dir.path().join("data");
        let owner = owner();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).map_err(|e| ClusterError(format!("chown: {e}")))?;
        }
        let initdb = as_owner(owner, &bin.join("initdb"))
            .args(["-D"])
            .arg(&data)
            .args(["-U", "skillhost", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
            .output()
            .map_err(|e| ClusterError(format!("{}: {e}", bin.join("initdb").display())))?;
        if !initdb.status.success() {
            return Err(ClusterError(format!("initdb failed: {}", String::from_utf8_lossy(&initdb.stderr).trim())));
        }
        let port = free_port().map_err(|e| ClusterError(format!("no free port: {e}")))?;
        let child = as_owner(owner, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.path())
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ClusterError(format!("{}: {e}", bin.join("postgres").display())))?;
        let mut cluster = Self { child, port, _dir: dir };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = cluster.child.try_wait() {
                return Err(ClusterError(format!("postgres exited with {status}")));
            }
            if started.elapsed() > START {
                return Err(ClusterError(format!("postgres did not listen on 127.0.0.1:{port} within {} s", START.as_secs())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Accepting TCP comes a moment before accepting logins.
        std::thread::sleep(Duration::from_millis(200));
        Ok(cluster)
    }

    /// The URL of its database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://skillhost@127.0.0.1:{}/postgres", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of its binaries (`psql` among them).
    pub fn bin_dir() -> PathBuf {
        bin_dir()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGINT: PostgreSQL's fast shutdown.
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SKILLHOST_PG_BIN") {
        return dir.into();
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin): &(u32, PathBuf)| bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop().map_or_else(PathBuf::new, |(_, bin)| bin)
}

/// Who runs the server: nobody else unless this is root, then `postgres` (or 65534).
fn owner() -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let postgres = passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&"postgres")).then(|| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))).flatten()
    });
    Some(postgres.unwrap_or((65534, 65534)))
}

fn as_owner(owner: Option<(u32, u32)>, program: &Path) -> Command {
    match owner {
        None => Command::new(program),
        Some((uid, gid)) => {
            let mut command = Command::new("setpriv");
            command.args([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".to_owned(), "--".to_owned()]);
            command.arg(program);
            command.env("HOME", "/tmp");
            command
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
