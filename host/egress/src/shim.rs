//! The shim: the first process inside a skill's sandbox (`skillhost __shim ...`).
//!
//! Inside bubblewrap's network namespace only `lo` exists. The shim
//!
//! 1. listens on `127.0.0.1:<port>` and forwards each TCP connection to the host's
//!    [`EgressProxy`](crate::EgressProxy) socket, bound into the sandbox ([`bridge`]), and
//!    points the command at it with `HTTP_PROXY`/`HTTPS_PROXY` (and the lowercase forms);
//! 2. starts the skill's command with stdin, stdout and stderr inherited (stdout is the
//!    MCP protocol: the shim itself never writes to stdout; its diagnostics go to stderr,
//!    prefixed `skillhost-shim:`);
//! 3. reaps every process: it is PID 1 of the sandbox under `--unshare-pid`, and otherwise
//!    makes itself a child subreaper, so orphans are reparented to it;
//! 4. forwards SIGTERM and SIGINT to the command and exits with the command's status
//!    (128 + N when a signal N ended it; 125 when the shim itself failed, 126 when the
//!    command could not run, 127 when it was not found).
//!
//! Without a socket it only starts the command and reaps (a sandbox without network).
//!
//! The arguments, after the subcommand ([`SUBCOMMAND`]):
//!
//! ```text
//! [--socket PATH [--port PORT]] -- COMMAND [ARG...]
//! ```
//!
//! [`ShimArgs::to_args`] writes them and [`ShimArgs::parse_from`] reads them back.

use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use tokio::net::{TcpListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

/// The hidden CLI subcommand that runs the shim: `skillhost __shim ARGS`.
pub const SUBCOMMAND: &str = "__shim";

/// The loopback port the shim listens on when none is given.
pub const DEFAULT_PORT: u16 = 3128;

/// Exit status when the shim itself fails (bad arguments, no runtime, no listener).
pub const EXIT_SHIM_FAILED: u8 = 125;
/// Exit status when the command exists but could not be started.
pub const EXIT_CANNOT_RUN: u8 = 126;
/// Exit status when the command was not found.
pub const EXIT_NOT_FOUND: u8 = 127;

/// What the shim runs: the proxy bridge (optional) and the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimArgs {
    /// The egress proxy's Unix socket, as the path is seen inside the sandbox. `None`: no
    /// network, the shim only starts the command and reaps.
    pub socket: Option<PathBuf>,
    /// The port on `127.0.0.1` the shim listens on for the command. `0` picks a free one
    /// (the command learns it from `HTTP_PROXY`). Default: [`DEFAULT_PORT`].
    pub port: u16,
    /// The command and its arguments; not empty.
    pub command: Vec<OsString>,
}

/// The shim's arguments are not in the form [`ShimArgs::to_args`] writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad shim arguments: {reason}; expected `[--socket PATH [--port PORT]] -- COMMAND [ARG...]`")]
pub struct ShimArgsError {
    /// What is wrong.
    pub reason: String,
}

impl ShimArgs {
    /// Run `command` without network.
    pub fn new<I, T>(command: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Self { socket: None, port: DEFAULT_PORT, command: command.into_iter().map(Into::into).collect() }
    }

    /// Forward `127.0.0.1:port` to the proxy at `socket`.
    pub fn with_proxy(mut self, socket: impl Into<PathBuf>, port: u16) -> Self {
        self.socket = Some(socket.into());
        self.port = port;
        self
    }

    /// Read the arguments that follow the subcommand (not the program name).
    pub fn parse_from<I, T>(args: I) -> Result<Self, ShimArgsError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let bad = |reason: String| ShimArgsError { reason };
        let mut args = args.into_iter().map(Into::into);
        let (mut socket, mut port) = (None, None);
        loop {
            let Some(arg) = args.next() else { return Err(bad("no `--` before the command".into())) };
            let mut value = |name: &str| args.next().ok_or_else(|| bad(format!("`{name}` needs a value")));
            match arg.to_str() {
                Some("--") => break,
                Some("--socket") => socket = Some(PathBuf::from(value("--socket")?)),
                Some("--port") => {
                    let text = value("--port")?;
                    let parsed = text.to_str().and_then(|t| t.parse::<u16>().ok());
                    port = Some(parsed.ok_or_else(|| bad(format!("`--port {}` is not a port number", text.to_string_lossy())))?);
                }
                Some(flag) if flag.starts_with('-') => return Err(bad(format!("unknown argument `{flag}`"))),
                _ => return Err(bad(format!("no `--` before the command `{}`", arg.to_string_lossy()))),
            }
        }
        let command: Vec<OsString> = args.collect();
        if command.is_empty() {
            return Err(bad("no command after `--`".into()));
        }
        if port.is_some() && socket.is_none() {
            return Err(bad("`--port` without `--socket`".into()));
        }
        Ok(Self { socket, port: port.unwrap_or(DEFAULT_PORT), command })
    }

    /// The arguments to pass after the subcommand; [`ShimArgs::parse_from`] reads them back.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::with_capacity(self.command.len() + 5);
        if let Some(socket) = &self.socket {
            args.extend(["--socket".into(), socket.clone().into_os_string(), "--port".into(), self.port.to_string().into()]);
        }
        args.push("--".into());
        args.extend(self.command.iter().cloned());
        args
    }
}

/// Run the shim (see the module docs) until the command exits; the returned code is the
/// command's status. Call it as the process's main work: it starts its own
/// current-thread tokio runtime and makes the process a child subreaper.
pub fn run(args: ShimArgs) -> ExitCode {
    ExitCode::from(run_status(args))
}

/// [`run`], returning the exit status as a number (for a caller that exits itself).
pub fn run_status(args: ShimArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("skillhost-shim: cannot start: {e}");
            return EXIT_SHIM_FAILED;
        }
    };
    runtime.block_on(supervise(args))
}

async fn supervise(args: ShimArgs) -> u8 {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("skillhost-shim: no command to run");
        return EXIT_SHIM_FAILED;
    };
    if rustix::process::getpid() != Pid::INIT {
        // Orphans of the command are reparented to us instead of escaping the reaping.
        if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            eprintln!("skillhost-shim: cannot become a child subreaper ({e}); orphans go to the sandbox's init");
        }
    }
    let mut command = Command::new(program);
    command.args(rest);
    if let Some(socket) = args.socket {
        let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port))).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("skillhost-shim: cannot listen on 127.0.0.1:{}: {e}", args.port);
                return EXIT_SHIM_FAILED;
            }
        };
        let port = listener.local_addr().map_or(args.port, |a| a.port());
        let proxy = format!("http://127.0.0.1:{port}");
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            command.env(name, &proxy);
        }
        tokio::spawn(bridge(listener, socket));
    }
    // Handlers first, so a signal that arrives while the command starts is not lost.
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        eprintln!("skillhost-shim: cannot handle SIGTERM/SIGINT");
        return EXIT_SHIM_FAILED;
    };
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("skillhost-shim: cannot run {}: {e}", program.to_string_lossy());
            return if e.kind() == io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_CANNOT_RUN };
        }
    };
    let pid = Pid::from_child(&child);
    // The handle is never waited on: the reaper collects every child, this one included.
    drop(child);
    let (tx, mut exited) = oneshot::channel();
    if let Err(e) = std::thread::Builder::new().name("reaper".into()).spawn(move || reap(pid, tx)) {
        eprintln!("skillhost-shim: cannot start the reaper: {e}");
        return EXIT_SHIM_FAILED;
    }
    loop {
        let forward = tokio::select! {
            status = &mut exited => return status.map_or(EXIT_SHIM_FAILED, exit_code),
            _ = term.recv() => Signal::TERM,
            _ = int.recv() => Signal::INT,
        };
        if let Err(e) = rustix::process::kill_process(pid, forward)
            && e != Errno::SRCH
        {
            eprintln!("skillhost-shim: cannot forward signal {} to the command: {e}", forward.as_raw());
        }
    }
}

/// Wait for any child, forever; report the command's status when it ends.
fn reap(command: Pid, tx: oneshot::Sender<WaitStatus>) {
    let mut tx = Some(tx);
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == command => {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(status);
                }
            }
            Ok(_) | Err(Errno::INTR) => {}
            Err(Errno::CHILD) if tx.is_none() => return,
            Err(e) => {
                eprintln!("skillhost-shim: waiting for children failed: {e}");
                // Dropping `tx` ends the shim with a failure.
                return;
            }
        }
    }
}

/// The shim's exit status for the command's: its code, or 128 + the signal that ended it.
fn exit_code(status: WaitStatus) -> u8 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
        (None, None) => EXIT_SHIM_FAILED,
    }
}

/// Forward each connection accepted on `listener` to the Unix socket `socket`, both ways,
/// until the connection closes. Runs until the task is dropped; failures are reported on
/// stderr and end only the connection concerned.
pub async fn bridge(listener: TcpListener, socket: PathBuf) {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                let socket = socket.clone();
                tokio::spawn(async move {
                    match UnixStream::connect(&socket).await {
                        // A reset or a half-read request is the connection's business.
                        Ok(unix) => drop(copy_both(tcp, unix).await),
                        Err(e) => eprintln!("skillhost-shim: cannot reach the egress proxy at {}: {e}", socket.display()),
                    }
                });
            }
            Err(e) => {
                eprintln!("skillhost-shim: cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn copy_both(mut tcp: tokio::net::TcpStream, mut unix: UnixStream) -> io::Result<(u64, u64)> {
    tokio::io::copy_bidirectional(&mut tcp, &mut unix).await
}
