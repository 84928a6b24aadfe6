//! The state of one call's [`Store`](wasmtime::Store): the WASI context built from the
//! grant, the memory limiter, the capped log and the progress sink, plus the host side of
//! the `skillhost:skill/host` interface, the guard on `symlink-at`, and `get-directories`
//! handing the guest the granted directories as the descriptors the host opened.

use std::path::{Component, Path};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use skillhost_core::{FileMode, Grant, HeldRoots, Progress, ProgressSink};
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime::{ResourceLimiter, StoreContextMut};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::filesystem::Dir;
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::filesystem::types::{Descriptor, ErrorCode, HostDescriptor};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{FsPerms, OpenMode, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::bindings::host;
use crate::http::{HttpGate, SkillNet};

/// Lines of stderr kept for crash reports.
const STDERR_TAIL: usize = 8;

/// The most host resources (open files and directories, streams, pollables, HTTP requests
/// and responses) a call may hold at once. Each is an entry in the store's resource table,
/// host memory outside the guest's memory limit: under wasmtime's default (1,000,000) a
/// guest that never dropped a handle held 100,000 pollables, ~25 MB of the host's, in one
/// call, and every concurrent call could do the same. Past it, the call traps
/// ([`CallState::resources_full`] tells the error apart).
pub(crate) const MAX_RESOURCES: usize = 10_000;

/// Everything a call's store holds.
pub(crate) struct CallState {
    wasi: WasiCtx,
    /// The granted directories, as opened for this call, and their guest paths: what
    /// `wasi:filesystem/preopens` gives the guest (see [`add_to_linker`]).
    preopens: Vec<(Dir, String)>,
    table: ResourceTable,
    http: WasiHttpCtx,
    pub(crate) gate: HttpGate,
    pub(crate) limiter: MemoryLimiter,
    log: Arc<CallLog>,
    /// The caller's sink behind [`Progress::guard`].
    progress: Option<ProgressSink>,
}

impl CallState {
    /// A fresh state for one call of `tool` under `grant`.
    pub(crate) fn new(
        grant: &Grant,
        roots: &HeldRoots,
        net: &SkillNet,
        tool: &str,
        progress: Option<ProgressSink>,
    ) -> std::io::Result<Self> {
        let log = Arc::new(CallLog::new(grant.skill.as_str(), tool, grant.limits.log));
        let gate = HttpGate::new(grant.skill.as_str(), tool, net, log.clone());
        let mut builder = WasiCtxBuilder::new();
        // No args, no env, no stdin. Sockets: no TCP, no UDP, no name lookup, and the
        // address check (deny all) stays the default as a second wall.
        builder
            .stdout(LogStream { log: log.clone(), stream: "stdout" })
            .stderr(LogStream { log: log.clone(), stream: "stderr" })
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let mut preopens = Vec::with_capacity(grant.dirs.len());
        for dir in &grant.dirs {
            let (perms, mode) = match dir.mode {
                FileMode::ReadOnly => (FsPerms::ReadOnly, OpenMode::READ),
                FileMode::ReadWrite => (FsPerms::ReadWrite, OpenMode::READ | OpenMode::WRITE),
            };
            // Opened without following a link below the data root (held open), and that
            // descriptor is the guest's directory: no path is resolved again.
            let fd = dir.open_held(&grant.skill, false, roots).map_err(std::io::Error::other)?;
            preopens.push((Dir::new(std::fs::File::from(fd), perms, mode, false), dir.guest.clone()));
        }
        Ok(Self {
            wasi: builder.build(),
            preopens,
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(MAX_RESOURCES);
                table
            },
            http: WasiHttpCtx::new(),
            gate,
            limiter: MemoryLimiter::new(grant.limits.memory),
            log,
            progress: progress.map(Progress::guard),
        })
    }
}

impl CallState {
    /// Whether `error` stopped the call at [`MAX_RESOURCES`]: its resource table is full.
    pub(crate) fn resources_full(error: &wasmtime::Error) -> bool {
        matches!(error.downcast_ref(), Some(wasmtime::component::ResourceTableError::Full))
    }

    /// What the guest last wrote to stderr, on one line: the panic message, when it
    /// panicked (Rust's hint about `RUST_BACKTRACE` left out).
    pub(crate) fn stderr_tail(&self) -> Option<String> {
        let tail = self.log.stderr_tail.lock();
        let start = tail.iter().rposition(|l| l.contains("panicked at")).unwrap_or(tail.len().saturating_sub(1));
        let lines: Vec<&str> =
            tail.iter().skip(start).map(String::as_str).filter(|l| !l.starts_with("note: run with `RUST_BACKTRACE")).collect();
        (!lines.is_empty()).then(|| lines.join(" "))
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { hooks: &mut self.gate, table: &mut self.table, ctx: &mut self.http }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        let level = match level {
            host::Level::Trace => "trace",
            host::Level::Debug => "debug",
            host::Level::Info => "info",
            host::Level::Warn => "warn",
            host::Level::Error => "error",
        };
        self.log.write_line(level, message.as_bytes());
    }

    fn progress(&mut self, done: u64, total: Option<u64>, message: Option<String>) {
        if let Some(sink) = &self.progress {
            sink(Progress { done, total, message });
        }
    }
}

impl crate::bindings::types::Host for CallState {}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Caps the linear memory of one call, summed over every memory of the instance.
pub(crate) struct MemoryLimiter {
    limit: u64,
    used: u64,
    /// Set when a grow was refused, so the trap that follows reads as a memory limit.
    pub(crate) hit: bool,
}

/// The error a refused memory grow traps with.
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {limit} bytes exceeded (asked for {desired} bytes)")]
pub(crate) struct MemoryLimitHit {
    limit: u64,
    desired: u64,
}

impl MemoryLimiter {
    fn new(limit: u64) -> Self {
        Self { limit, used: 0, hit: false }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let next = self.used - current as u64 + desired as u64;
        if next > self.limit {
            self.hit = true;
            // Trapping (rather than returning `false`) stops the guest at once with a clear
            // cause instead of letting its allocator abort with `unreachable`.
            return Err(MemoryLimitHit { limit: self.limit, desired: next }.into());
        }
        self.used = next;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// A call's log: guest stdout, stderr and `log` lines go to `tracing`, tagged with the
/// skill and tool, until the call's byte budget is spent; the rest is counted and dropped.
pub(crate) struct CallLog {
    skill: String,
    tool: String,
    budget: u64,
    written: AtomicU64,
    dropped: AtomicU64,
    warned: AtomicBool,
    /// The last lines of stderr, for crash reports (a panic message, usually).
    stderr_tail: parking_lot::Mutex<std::collections::VecDeque<String>>,
}

impl CallLog {
    fn new(skill: &str, tool: &str, budget: u64) -> Self {
        Self {
            skill: skill.to_owned(),
            tool: tool.to_owned(),
            budget,
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            stderr_tail: parking_lot::Mutex::default(),
        }
    }

    pub(crate) fn write_line(&self, level: &str, line: &[u8]) {
        if level == "stderr" && !line.is_empty() {
            let text = truncate(String::from_utf8_lossy(line).into_owned(), 512);
            let mut tail = self.stderr_tail.lock();
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(text);
        }
        let len = line.len() as u64;
        let before = self.written.fetch_add(len, Ordering::Relaxed);
        if before + len > self.budget {
            self.dropped.fetch_add(len, Ordering::Relaxed);
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(skill = %self.skill, tool = %self.tool, "log budget of {} bytes spent; dropping the rest of this call's log", self.budget);
            }
            return;
        }
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        let (skill, tool) = (&self.skill, &self.tool);
        match level {
            "error" => tracing::error!(target: "guest", skill, tool, "{text}"),
            "warn" | "stderr" => tracing::warn!(target: "guest", skill, tool, "{text}"),
            "debug" => tracing::debug!(target: "guest", skill, tool, "{text}"),
            "trace" => tracing::trace!(target: "guest", skill, tool, "{text}"),
            _ => tracing::info!(target: "guest", skill, tool, "{text}"),
        }
    }

    /// Bytes of log dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for CallLog {
    fn drop(&mut self) {
        let dropped = self.dropped();
        if dropped > 0 {
            tracing::warn!(skill = %self.skill, tool = %self.tool, "dropped {dropped} bytes of log over the call's budget");
        }
    }
}

/// Guest stdout or stderr, written line by line into the call's log.
struct LogStream {
    log: Arc<CallLog>,
    stream: &'static str,
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.writer())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.writer())
    }
}

impl LogStream {
    fn writer(&self) -> LineWriter {
        LineWriter { log: self.log.clone(), stream: self.stream, line: Vec::new() }
    }
}

/// Splits a byte stream into log lines. Writes are synchronous and always accepted: a
/// chatty guest must neither block nor fail on its log, and needs no task per stream.
struct LineWriter {
    log: Arc<CallLog>,
    stream: &'static str,
    line: Vec<u8>,
}

/// Longest line kept whole; longer ones are split.
const MAX_LINE: usize = 4096;

impl LineWriter {
    fn push(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' || self.line.len() >= MAX_LINE {
                self.flush_line();
            }
            if byte != b'\n' {
                self.line.push(byte);
            }
        }
    }

    fn flush_line(&mut self) {
        if !self.line.is_empty() {
            self.log.write_line(self.stream, &self.line);
            self.line.clear();
        }
    }
}

impl OutputStream for LineWriter {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

#[async_trait::async_trait]
impl Pollable for LineWriter {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(mut self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.flush_line();
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.flush_line();
    }
}

/// Whether a symlink whose target is `target` stays inside the directory it is made in:
/// relative, and no `..` anywhere. (A link is resolved relative to its own directory, which
/// the guest may place deep in a tree, so any `..` could climb out of a preopen.)
fn symlink_target_allowed(target: &str) -> bool {
    Path::new(target).components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Link the host interface and WASI p2, with `symlink-at` guarded so that a guest cannot
/// plant a link pointing outside its directories (following such a link is refused by
/// WASI anyway, but the link would stay on disk for other programs to follow), and
/// `get-directories` answering with the descriptors [`CallState::new`] opened
/// (wasmtime's own takes paths, which it opens again).
///
/// With `http`, `wasi:http` is linked too (for skills granted network access).
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>, http: bool) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    if http {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    }
    crate::bindings::Skill::add_to_linker::<_, wasmtime::component::HasSelf<_>>(linker, |s| s)?;
    linker.allow_shadowing(true);
    linker.instance("wasi:filesystem/types@0.2.12")?.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: StoreContextMut<'_, CallState>,
         (fd, target, link): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                if !symlink_target_allowed(&target) {
                    store.data().log.write_line(
                        "warn",
                        format!("refused to create symlink `{link}` -> `{target}`: a skill may only link inside its directories (relative, no `..`)").as_bytes(),
                    );
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let mut view = store.data_mut().filesystem();
                match HostDescriptor::symlink_at(&mut view, fd, target, link).await {
                    Ok(()) => Ok((Ok(()),)),
                    Err(e) => Ok((Err(e.downcast()?),)),
                }
            })
        },
    )?;
    linker.instance("wasi:filesystem/preopens@0.2.12")?.func_wrap(
        "get-directories",
        |mut store: StoreContextMut<'_, CallState>, (): ()| {
            let CallState { preopens, table, .. } = store.data_mut();
            let directories = preopens
                .iter()
                .map(|(dir, guest)| Ok((table.push(Descriptor::Dir(dir.clone()))?, guest.clone())))
                .collect::<wasmtime::Result<Vec<_>>>()?;
            Ok((directories,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets() {
        for (target, ok) in
            [("a", true), ("a/b", true), ("./a", true), ("../a", false), ("a/../../b", false), ("/etc/passwd", false), ("a/..", false)]
        {
            assert_eq!(symlink_target_allowed(target), ok, "{target}");
        }
    }
}
