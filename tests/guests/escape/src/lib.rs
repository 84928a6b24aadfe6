//! Test fixture `escape`: each tool attempts something the sandbox must
//! refuse (or allow, within the grant) and reports what happened instead of
//! panicking.
//!
//! Every tool returns `{"ok": bool, "value": ..., "error": string | null}`.
//! Paths are used exactly as given (absolute or relative), deliberately
//! without the SDK's path checks, so the host's sandbox is what is tested.
//! The grant (skill.toml) is `/data` read-write and `/data/ro` read-only.

use std::io;

use serde_json::{Value, json};
use skillhost_sdk::prelude::*;

/// What an attempt did.
#[derive(Serialize, JsonSchema)]
struct Report {
    /// Whether the operation succeeded.
    ok: bool,
    /// What it produced, when it succeeded.
    value: Option<Value>,
    /// The error's message, when it failed.
    error: Option<String>,
}

impl Report {
    fn from<T: Into<Value>>(result: io::Result<T>) -> Result<Self, ToolError> {
        Ok(match result {
            Ok(value) => Report { ok: true, value: Some(value.into()), error: None },
            Err(error) => Report { ok: false, value: None, error: Some(format!("{error} ({:?})", error.kind())) },
        })
    }
}

/// A path.
#[derive(Deserialize, JsonSchema)]
struct PathInput {
    /// The path, used as given.
    path: String,
}

/// Read a file with `std::fs::read_to_string`; `value` is its text.
#[tool(read_only, example = r#"{"path": "/data/hello.txt"}"#)]
fn read_file(input: PathInput) -> Result<Report, ToolError> {
    Report::from(std::fs::read_to_string(&input.path))
}

/// Read a file through the SDK's `files::read_to_string` (a path relative to the data
/// directory); its errors are the SDK's.
#[tool(read_only, example = r#"{"path": "hello.txt"}"#)]
fn read_data(input: PathInput) -> Result<String, ToolError> {
    skillhost_sdk::files::read_to_string(&input.path)
}

/// A path and what to write there.
#[derive(Deserialize, JsonSchema)]
struct WriteInput {
    /// The path, used as given.
    path: String,
    /// The text to write.
    content: String,
}

/// Write a file with `std::fs::write`; `value` is the number of bytes written.
#[tool(destructive, example = r#"{"path": "/data/out.txt", "content": "hi"}"#)]
fn write_file(input: WriteInput) -> Result<Report, ToolError> {
    Report::from(std::fs::write(&input.path, &input.content).map(|()| input.content.len()))
}

/// A symbolic link to create.
#[derive(Deserialize, JsonSchema)]
struct SymlinkInput {
    /// What the link points to, used as given.
    target: String,
    /// Where to create the link.
    link: String,
}

/// Create a symbolic link `link` -> `target`; `value` is null.
#[tool(destructive, example = r#"{"target": "/etc/passwd", "link": "/data/passwd"}"#)]
fn symlink(input: SymlinkInput) -> Result<Report, ToolError> {
    Report::from(make_symlink(&input.target, &input.link).map(|()| Value::Null))
}

/// `symlink_at` on the pre-opened directory holding `link` (std's
/// `symlink_path` is unstable). Relative links are relative to `/`.
#[cfg(target_os = "wasi")]
fn make_symlink(target: &str, link: &str) -> io::Result<()> {
    use std::path::Path;
    use wasi::filesystem::types::ErrorCode;

    let link = if link.starts_with('/') { link.to_owned() } else { format!("/{link}") };
    let directories = wasi::filesystem::preopens::get_directories();
    let (directory, relative) = directories
        .iter()
        .filter_map(|(dir, guest_path)| {
            let relative = Path::new(&link).strip_prefix(guest_path).ok()?;
            Some((guest_path.len(), dir, relative.to_string_lossy().into_owned()))
        })
        .max_by_key(|(len, ..)| *len)
        .map(|(_, dir, relative)| (dir, relative))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no pre-opened directory holds {link}")))?;
    directory.symlink_at(target, &relative).map_err(|code| {
        let kind = match code {
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::ReadOnly => io::ErrorKind::ReadOnlyFilesystem,
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::Exist => io::ErrorKind::AlreadyExists,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("symlink_at: {code:?}"))
    })
}

#[cfg(not(target_os = "wasi"))]
fn make_symlink(_target: &str, _link: &str) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "only built for wasi"))
}

/// List a directory with `std::fs::read_dir`; `value` is the sorted entry
/// names joined by newlines.
#[tool(read_only, example = r#"{"path": "/"}"#)]
fn list_dir(input: PathInput) -> Result<Report, ToolError> {
    let names = std::fs::read_dir(&input.path).and_then(|entries| {
        let mut names = entries.map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned())).collect::<io::Result<Vec<_>>>()?;
        names.sort();
        Ok(names.join("\n"))
    });
    Report::from(names)
}

/// Report the environment: `value` is an object of every environment
/// variable, and `args` lists `std::env::args`.
#[tool(read_only)]
fn env() -> Result<Value, ToolError> {
    let vars: serde_json::Map<String, Value> = std::env::vars().map(|(k, v)| (k, Value::from(v))).collect();
    let args: Vec<String> = std::env::args().collect();
    Ok(json!({ "ok": true, "value": vars, "error": null, "args": args }))
}

/// An address to connect to.
#[derive(Deserialize, JsonSchema)]
struct ConnectInput {
    /// `host:port`, e.g. `127.0.0.1:8080`.
    addr: String,
}

/// Open a TCP connection with `std::net::TcpStream`; `value` is the peer address.
#[tool(open_world, example = r#"{"addr": "127.0.0.1:80"}"#)]
fn connect(input: ConnectInput) -> Result<Report, ToolError> {
    let stream = match input.addr.parse::<std::net::SocketAddr>() {
        Ok(addr) => std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)),
        Err(_) => std::net::TcpStream::connect(input.addr.as_str()),
    };
    Report::from(stream.and_then(|s| s.peer_addr()).map(|a| a.to_string()))
}

/// A host name to resolve.
#[derive(Deserialize, JsonSchema)]
struct ResolveInput {
    /// The name, e.g. `example.com`.
    host: String,
}

/// Resolve a host name with `std::net::ToSocketAddrs`; `value` is the
/// addresses joined by `, `.
#[tool(open_world, example = r#"{"host": "localhost"}"#)]
fn resolve(input: ResolveInput) -> Result<Report, ToolError> {
    use std::net::ToSocketAddrs;
    let addrs = (input.host.as_str(), 0u16).to_socket_addrs().map(|addrs| addrs.map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", "));
    Report::from(addrs)
}

/// How many host handles to hold.
#[derive(Deserialize, JsonSchema)]
struct HoardInput {
    /// Handles to create, all kept until the call returns.
    n: u32,
}

/// Hold `n` host resources at once (clock pollables, none dropped before the call
/// returns); `value` is how many it held. Each costs the guest 4 bytes and the host an
/// entry in its resource table: host memory, outside the guest's memory limit.
#[tool(read_only, example = r#"{"n": 10}"#)]
fn hoard_handles(input: HoardInput) -> Result<Report, ToolError> {
    Report::from(hoard(input.n))
}

#[cfg(target_os = "wasi")]
fn hoard(n: u32) -> io::Result<u32> {
    let held: Vec<_> = (0..n).map(|_| wasi::clocks::monotonic_clock::subscribe_duration(3_600_000_000_000)).collect();
    u32::try_from(held.len()).map_err(io::Error::other)
}

#[cfg(not(target_os = "wasi"))]
fn hoard(_n: u32) -> io::Result<u32> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "only built for wasi"))
}

skillhost_sdk::skill!(read_file, read_data, write_file, symlink, list_dir, env, connect, resolve, hoard_handles);
