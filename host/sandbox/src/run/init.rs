//! A run's init: the program that runs inside the jail (`skillhost __run -- COMMAND
//! ARGS...`, bound at `/run/skillhost/init`), with the workspace as its working
//! directory. It
//!
//! 1. makes itself not dumpable, so the command (same uid, no capabilities) cannot open
//!    its descriptors through `/proc`;
//! 2. writes the input files the host sends on stdin into the workspace (0644, or 0755
//!    for one the host marks executable);
//! 3. starts the command (stdin empty, stdout and stderr piped to it) and forwards what it
//!    prints as frames on its own stdout;
//! 4. when the command exits, kills every other process of the jail but its own
//!    ancestors (the egress shim), so nothing the command left behind writes on;
//! 5. walks the workspace without following a link, sends each regular file (marked
//!    executable when it has an `x` bit), names each entry it left out, and ends with the
//!    exit status and the workspace's usage.
//!
//! Its diagnostics go to stderr; the host reads frames only ([`super::frames`]).

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};

use skillhost_core::run::{MAX_RUN_DEPTH, MAX_RUN_FILES, check_relative};

use super::frames::{self, Exit, Kind};

/// The hidden CLI subcommand that runs the init: `skillhost __run -- COMMAND ARGS...`.
pub const SUBCOMMAND: &str = "__run";

/// Run the init with `args` (after the subcommand: `-- COMMAND ARGS...`).
pub fn main(args: Vec<OsString>) -> ExitCode {
    // A parser in front may have taken the `--` already.
    let command: Vec<OsString> = match args.split_first() {
        Some((dashes, rest)) if dashes == "--" && !rest.is_empty() => rest.to_vec(),
        Some((first, _)) if first != "--" => args,
        _ => {
            eprintln!("skillhost-run: usage: {SUBCOMMAND} -- COMMAND [ARG...]");
            return ExitCode::from(125);
        }
    };
    let out = Arc::new(Mutex::new(io::stdout()));
    match run(&command, &out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skillhost-run: {e}");
            ExitCode::from(125)
        }
    }
}

type Out = Arc<Mutex<io::Stdout>>;

fn send(out: &Out, kind: Kind, payload: &[u8]) -> io::Result<()> {
    let mut out = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match payload.is_empty() {
        // A mark (`Executable`) is a frame of its own; chunks of nothing would be none.
        true => frames::write(&mut *out, kind, payload)?,
        false => frames::write_chunked(&mut *out, kind, payload)?,
    }
    out.flush()
}

fn run(command: &[OsString], out: &Out) -> io::Result<()> {
    // Not dumpable: the command runs as the same uid, and must not reach our stdout
    // through /proc/PID/fd to forge frames.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    if let Err(e) = write_inputs(&mut io::stdin().lock()) {
        send(out, Kind::Error, format!("cannot write the input files into the workspace: {e}").as_bytes())?;
        return finish(out, Exit { code: None, signal: None, ..Exit::default() });
    }
    let mut child =
        match Command::new(&command[0]).args(&command[1..]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
            Ok(child) => child,
            Err(e) => {
                let what = if e.kind() == io::ErrorKind::NotFound {
                    "was not found inside the jail (on PATH, or as a path)"
                } else {
                    "could not start"
                };
                let line = format!("`{}` {what}: {e}", command[0].to_string_lossy());
                send(out, Kind::Error, line.as_bytes())?;
                let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
                return finish(out, Exit { code: Some(code), ..Exit::default() });
            }
        };
    let forward = |pipe: Option<Box<dyn Read + Send>>, kind: Kind| {
        let out = out.clone();
        std::thread::spawn(move || {
            let Some(mut pipe) = pipe else { return };
            let mut buf = vec![0u8; frames::MAX_FRAME];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if send(&out, kind, &buf[..n]).is_err() {
                            return;
                        }
                    }
                }
            }
        })
    };
    let stdout = forward(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>), Kind::Stdout);
    let stderr = forward(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>), Kind::Stderr);
    let status = child.wait()?;
    // Whatever the command started dies with it: nothing writes to the workspace (or
    // holds the pipes open) while it is read.
    kill_others();
    let _ = stdout.join();
    let _ = stderr.join();
    let (_, size) = usage(Path::new("."));
    walk(out, size)?;
    let (used, size) = usage(Path::new("."));
    finish(out, Exit { code: status.code(), signal: status.signal(), used, size })
}

fn finish(out: &Out, exit: Exit) -> io::Result<()> {
    let json = serde_json::to_vec(&exit).map_err(io::Error::other)?;
    send(out, Kind::Exit, &json)
}

/// Write the input files the host sends (`File`, then its `Data`) until stdin ends.
fn write_inputs(input: &mut impl Read) -> io::Result<()> {
    let mut current: Option<std::fs::File> = None;
    while let Some((kind, payload)) = frames::read(input)? {
        match kind {
            Kind::File => {
                let path = String::from_utf8(payload).map_err(|_| io::Error::other("an input path is not UTF-8"))?;
                check_relative(&path).map_err(|reason| io::Error::other(format!("input `{path}` {reason}")))?;
                if let Some(parent) = Path::new(&path).parent() {
                    std::fs::create_dir_all(parent)?;
                }
                current = Some(std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc_nofollow()).open(&path)?);
            }
            Kind::Data => match &mut current {
                Some(file) => file.write_all(&payload)?,
                None => return Err(io::Error::other("input data before its file")),
            },
            Kind::Executable => match &current {
                Some(file) => {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(std::fs::Permissions::from_mode(0o755))?;
                }
                None => return Err(io::Error::other("an executable mark before its file")),
            },
            _ => return Err(io::Error::other("unexpected frame on stdin")),
        }
    }
    Ok(())
}

fn libc_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// SIGKILL every process of this pid namespace but this one and its ancestors, until
/// none is left (a fork racing the first round is caught by the next).
fn kill_others() {
    let me = std::process::id() as i32;
    let mut keep = vec![me, 1];
    let mut pid = me;
    while let Some(parent) = parent_of(pid).filter(|p| *p > 1 && !keep.contains(p)) {
        keep.push(parent);
        pid = parent;
    }
    for _ in 0..64 {
        let others: Vec<i32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| !keep.contains(pid))
            .collect();
        if others.is_empty() {
            return;
        }
        for pid in others {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `PID (COMM) STATE PPID ...`; COMM may hold spaces and parentheses.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Send every regular file of the workspace, depth first, sorted, up to `budget` bytes in
/// all (the workspace's size: only a sparse file can be larger; 0 for no budget); name
/// what is left out, with its name escaped when it is not a plain path (a newline, an
/// escape character).
fn walk(out: &Out, budget: u64) -> io::Result<()> {
    let mut sent = 0usize;
    let mut sent_bytes = 0u64;
    let mut stack = vec![(String::new(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let path = if dir.is_empty() { ".".to_owned() } else { dir.clone() };
        let mut entries: Vec<_> = match std::fs::read_dir(&path) {
            Ok(entries) => entries.flatten().collect(),
            Err(e) => {
                send(out, Kind::Skipped, format!("{dir}/: cannot be listed ({e})").as_bytes())?;
                continue;
            }
        };
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in entries {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                send(out, Kind::Skipped, format!("{dir}/{:?}: its name is not UTF-8", entry.file_name()).as_bytes())?;
                continue;
            };
            let relative = if dir.is_empty() { name } else { format!("{dir}/{name}") };
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            let kind = meta.file_type();
            if let Err(reason) = check_relative(&relative) {
                let what = if kind.is_dir() { "a folder, with all it holds" } else { "the file" };
                let line = format!("{}: its path {reason}; {what} left out", relative.escape_debug());
                send(out, Kind::Skipped, line.as_bytes())?;
            } else if kind.is_symlink() {
                send(out, Kind::Skipped, format!("{relative}: a link, never followed or returned").as_bytes())?;
            } else if kind.is_dir() {
                if depth + 1 >= MAX_RUN_DEPTH {
                    send(out, Kind::Skipped, format!("{relative}/: deeper than {MAX_RUN_DEPTH} levels").as_bytes())?;
                } else {
                    stack.push((relative, depth + 1));
                }
            } else if !kind.is_file() {
                send(out, Kind::Skipped, format!("{relative}: not a regular file").as_bytes())?;
            } else if sent >= MAX_RUN_FILES {
                send(out, Kind::Skipped, format!("{relative}: more than {MAX_RUN_FILES} files").as_bytes())?;
            } else if budget > 0 && sent_bytes.saturating_add(meta.len()) > budget {
                let line = format!(
                    "{relative}: {} bytes, more than its workspace of {budget} bytes holds with the files before it (a sparse file: its holes are counted as written)",
                    meta.len()
                );
                send(out, Kind::Skipped, line.as_bytes())?;
            } else {
                match open_file(&relative) {
                    Ok(mut file) => {
                        send(out, Kind::File, relative.as_bytes())?;
                        if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0 {
                            send(out, Kind::Executable, &[])?;
                        }
                        let mut buf = vec![0u8; frames::MAX_FRAME];
                        loop {
                            let n = file.read(&mut buf)?;
                            if n == 0 {
                                break;
                            }
                            sent_bytes += n as u64;
                            send(out, Kind::Data, &buf[..n])?;
                        }
                        sent += 1;
                    }
                    Err(e) => send(out, Kind::Skipped, format!("{relative}: cannot be read ({e})").as_bytes())?,
                }
            }
        }
    }
    Ok(())
}

/// Open a file the command wrote (it may have taken its own read permission away: it
/// is ours, the same uid), never through a link.
fn open_file(path: &str) -> io::Result<std::fs::File> {
    let open = || std::fs::OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(path);
    match open() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            open()
        }
        other => other,
    }
}

/// Bytes used and size of the file system at `dir`.
fn usage(dir: &Path) -> (u64, u64) {
    match rustix::fs::statvfs(dir) {
        Ok(s) => ((s.f_blocks - s.f_bfree) * s.f_frsize, s.f_blocks * s.f_frsize),
        Err(_) => (0, 0),
    }
}
