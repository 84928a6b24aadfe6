//! Compiles in a process of their own: Cranelift's for the compiled cache and Winch's of
//! the code a listing or a first call runs (never cached). The host's own executable is
//! started again as `EXE __compile <settings>` ([`SUBCOMMAND`]), the component's bytes on
//! its stdin, the compiled code (wasmtime's serialized form) on its stdout. What a compile
//! touches (the compiler's code, its heap, its peak: hundreds of MB for an interpreter's
//! component) then belongs to a process that exits, not to the host that lives on, and
//! code no human approved is compiled under the worker's limits, not the host's. The host
//! maps Cranelift's result from the cache as it maps any entry and takes Winch's from
//! memory; wasmtime checks either was compiled for the host's engine of that tier.
//!
//! The worker gets no environment and `/` for its directory, only the settings that decide the engine
//! ([`WasmConfig`]'s compile settings, as arguments), runs at the priority of the thread
//! that started it (nice 10 for a background compile), is stopped after
//! [`COMPILE_LIMIT`], may hand back at most [`MAX_COMPILED`] bytes, and may allocate at
//! most [`MAX_COMPILE_MEMORY`] (its `RLIMIT_DATA`, which it sets itself before it reads
//! anything; it dumps no core). It dies with the thread that started it (its parent-death
//! signal is SIGKILL): a host killed mid-compile leaves no worker behind. A host whose executable is not a helper (an embedder that did not
//! call `skillhost::helpers::run_if_helper`) compiles in its own process.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::WasmConfig;

/// `argv[1]` of a compile worker.
pub const SUBCOMMAND: &str = "__compile";

/// The longest a worker may compile one component (the 18 MB Python interpreter's takes
/// about 3 s on two cores); it is killed after that and the compile fails.
pub const COMPILE_LIMIT: Duration = Duration::from_secs(300);

/// The most compiled code a worker may hand back (the 18 MB Python interpreter's is about
/// 40 MB); more is refused, read no further than one byte past it.
pub const MAX_COMPILED: u64 = 1 << 30;

/// The most memory (heap and other private writable mappings: `RLIMIT_DATA`) a worker may
/// allocate. What Cranelift needs grows with the code: the 18 MB Python interpreter's
/// compile stays under 1 GB, but one 7.5 MB function of values left on the stack takes
/// 2.4 GB, and a skill may be 64 MiB. A compile that needs more is stopped.
pub const MAX_COMPILE_MEMORY: u64 = 2 << 30;

/// Why a worker did not hand back compiled code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    #[error("cannot start the compile worker {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("the compile worker failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the compile worker ran longer than {COMPILE_LIMIT:?} and was stopped")]
    TimedOut,
    #[error("the compile worker wrote more than {MAX_COMPILED} bytes of code")]
    TooLarge,
    #[error(
        "the compile worker was stopped at its memory limit ({} MiB, MAX_COMPILE_MEMORY): the component costs more than that to compile, and is refused",
        MAX_COMPILE_MEMORY >> 20
    )]
    OutOfMemory,
    #[error("the compile worker failed ({status}): {message}")]
    Failed { status: std::process::ExitStatus, message: String },
}

/// Which compiler a worker runs: that of the optimised tier (the cache's) or of the
/// baseline tier ([`WasmConfig::baseline_compile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compiler {
    Cranelift,
    Winch,
}

impl Compiler {
    fn setting(self) -> &'static str {
        match self {
            Compiler::Cranelift => "compiler=cranelift",
            Compiler::Winch => "compiler=winch",
        }
    }
}

/// The settings of `config` that decide how its engine compiles, as a worker's arguments.
fn settings(config: &WasmConfig) -> Vec<String> {
    vec![
        format!("max-instances={}", config.max_instances),
        format!("max-memory={}", config.max_memory),
        format!("optimize={}", config.optimize),
        format!("baseline-compile={}", config.baseline_compile),
    ]
}

/// A worker's argument it cannot take.
#[derive(Debug, thiserror::Error)]
enum BadSetting {
    #[error("{0:?} is not UTF-8")]
    NotUtf8(OsString),
    #[error("{0}: not key=value")]
    NotKeyValue(String),
    #[error("{key}: {reason}")]
    Value { key: String, reason: String },
    #[error("unknown setting {0}")]
    Unknown(String),
}

/// The [`WasmConfig`] a worker's arguments describe (the rest left at its defaults), and
/// its compiler (Cranelift unless `compiler=winch`).
fn parse(args: &[OsString]) -> Result<(WasmConfig, Compiler), BadSetting> {
    let mut config = WasmConfig::default();
    let mut compiler = Compiler::Cranelift;
    for arg in args {
        let arg = arg.to_str().ok_or_else(|| BadSetting::NotUtf8(arg.clone()))?;
        let (key, value) = arg.split_once('=').ok_or_else(|| BadSetting::NotKeyValue(arg.to_owned()))?;
        let bad = |e: &dyn std::fmt::Display| BadSetting::Value { key: key.to_owned(), reason: e.to_string() };
        match key {
            "max-instances" => config.max_instances = value.parse().map_err(|e| bad(&e))?,
            "max-memory" => config.max_memory = value.parse().map_err(|e| bad(&e))?,
            "optimize" => config.optimize = value.parse().map_err(|e| bad(&e))?,
            "baseline-compile" => config.baseline_compile = value.parse().map_err(|e| bad(&e))?,
            "compiler" => {
                compiler = [Compiler::Cranelift, Compiler::Winch]
                    .into_iter()
                    .find(|c| c.setting() == arg)
                    .ok_or_else(|| bad(&"not cranelift or winch"))?;
            }
            _ => return Err(BadSetting::Unknown(key.to_owned())),
        }
    }
    Ok((config, compiler))
}

/// The worker's side: compile the component on stdin with the compiler and for the engine
/// the arguments describe and write wasmtime's serialized form of it to stdout.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let compiled = die_with_the_host()
        .map_err(|e| format!("cannot tie its life to the host's: {e}"))
        .and_then(|()| limit_memory().map_err(|(what, e)| format!("cannot {what}: {e}")))
        .and_then(|()| parse(&args).map_err(|e| format!("bad settings: {e}")))
        .and_then(|(config, compiler)| {
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("cannot read the component: {e}"))?;
            let engine = crate::engine::compiler(&config, compiler == Compiler::Winch).map_err(|e| format!("{e:#}"))?;
            let component = wasmtime::component::Component::new(&engine, &bytes).map_err(|e| format!("{e:#}"))?;
            component.serialize().map_err(|e| format!("{e:#}"))
        });
    let written = compiled.and_then(|code| {
        let mut out = std::io::stdout().lock();
        out.write_all(&code).and_then(|()| out.flush()).map_err(|e| format!("cannot write the compiled code: {e}"))
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Be killed when the thread that started this process ends (it waits for the worker,
/// so with the host). A host that died before this point left at most a pipe's worth
/// (64 KiB) of the component behind it: the worker reads a truncated component and fails.
fn die_with_the_host() -> rustix::io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
}

/// Hold this process to [`MAX_COMPILE_MEMORY`] (an allocation past it fails, and the
/// process aborts: [`ABORTED`]) and to no core dump (its directory is `/`, and an abort
/// must not leave gigabytes there). A limit that cannot be set is a refusal to compile.
/// On failure, what could not be done and why.
fn limit_memory() -> Result<(), (&'static str, rustix::io::Errno)> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let set = |resource, bytes| setrlimit(resource, Rlimit { current: Some(bytes), maximum: Some(bytes) });
    set(Resource::Core, 0).map_err(|e| ("turn off core dumps", e))?;
    set(Resource::Data, MAX_COMPILE_MEMORY).map_err(|e| ("limit its memory to MAX_COMPILE_MEMORY", e))
}

/// What the Rust runtime writes before it aborts on an allocation that failed.
const ABORTED: &str = "memory allocation of ";

/// How to start a worker for one engine: the command (`[EXE, "__compile"]`) and the
/// engine's settings.
pub(crate) struct Worker {
    command: Vec<OsString>,
    settings: Vec<String>,
}

impl Worker {
    /// Workers started as `command` compile for `config`'s engines; `None` for an empty
    /// command.
    pub(crate) fn new(command: &[OsString], config: &WasmConfig) -> Option<Self> {
        (!command.is_empty()).then(|| Self { command: command.to_vec(), settings: settings(config) })
    }

    /// Compile `bytes` with `compiler` in a worker: wasmtime's serialized form of the code.
    pub(crate) fn compile(&self, compiler: Compiler, bytes: &[u8]) -> Result<Vec<u8>, WorkerError> {
        let mut settings = self.settings.clone();
        settings.push(compiler.setting().to_owned());
        compile(&self.command, &settings, bytes)
    }
}

fn compile(command: &[OsString], settings: &[String], bytes: &[u8]) -> Result<Vec<u8>, WorkerError> {
    let (program, fixed) = command.split_first().ok_or_else(|| WorkerError::Spawn {
        program: String::new(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
    })?;
    let mut child = Command::new(program)
        .args(fixed)
        .args(settings)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| WorkerError::Spawn { program: program.to_string_lossy().into_owned(), source })?;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(WorkerError::Io(std::io::Error::other("no pipes to the worker")));
    };
    // The worker reads all of its input before it writes: the bytes go in, then the
    // output is read on threads of its own while this one watches the clock.
    let written = stdin.write_all(bytes);
    drop(stdin);
    let out = std::thread::spawn(move || {
        let mut code = Vec::new();
        stdout.by_ref().take(MAX_COMPILED + 1).read_to_end(&mut code).map(|_| code)
    });
    let err = std::thread::spawn(move || {
        let mut message = Vec::new();
        let _ = stderr.by_ref().take(64 * 1024).read_to_end(&mut message);
        // What reaches a log or an error is text, never terminal control.
        String::from_utf8_lossy(&message).chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_owned()
    });
    let deadline = Instant::now() + COMPILE_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = out.join().map_err(|_| std::io::Error::other("the worker's reader panicked"))?;
    let message = err.join().unwrap_or_default();
    match status {
        None => Err(WorkerError::TimedOut),
        Some(status) if status.signal() == Some(rustix::process::Signal::ABORT.as_raw()) && message.starts_with(ABORTED) => {
            Err(WorkerError::OutOfMemory)
        }
        Some(status) if !status.success() => Err(WorkerError::Failed { status, message }),
        Some(_) => {
            written?;
            let code = code?;
            if code.len() as u64 > MAX_COMPILED {
                return Err(WorkerError::TooLarge);
            }
            Ok(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_a_worker_gets_describe_the_engine_it_builds() {
        let config = WasmConfig { max_instances: 8, max_memory: 1 << 30, optimize: false, baseline_compile: true, ..WasmConfig::default() };
        let args: Vec<OsString> = settings(&config).into_iter().map(OsString::from).collect();
        let (parsed, compiler) = parse(&args).unwrap();
        assert_eq!((parsed.max_instances, parsed.max_memory, parsed.optimize, parsed.baseline_compile), (8, 1 << 30, false, true));
        assert_eq!(compiler, Compiler::Cranelift);
        for compiler in [Compiler::Cranelift, Compiler::Winch] {
            assert_eq!(parse(&[OsString::from(compiler.setting())]).unwrap().1, compiler);
        }
        assert!(parse(&[OsString::from("compiler=llvm")]).is_err());
        assert!(parse(&[OsString::from("cache-dir=/tmp")]).unwrap_err().to_string().contains("unknown setting"));
    }

    /// A worker's engines have no pools (they would count against its memory limit), and
    /// compile code the host's engine of the same tier takes.
    #[test]
    fn a_workers_engine_compiles_for_the_hosts() {
        for (baseline_compile, winch) in [(false, false), (true, false), (true, true)] {
            let config = WasmConfig { baseline_compile, ..WasmConfig::default() };
            let host = crate::engine::build(&config, winch).unwrap().0;
            let worker = crate::engine::compiler(&config, winch).unwrap();
            assert_eq!(crate::engine::fingerprint(&worker), crate::engine::fingerprint(&host));
        }
        let cranelift = crate::engine::compiler(&WasmConfig::default(), false).unwrap();
        let winch = crate::engine::compiler(&WasmConfig::default(), true).unwrap();
        assert_ne!(crate::engine::fingerprint(&cranelift), crate::engine::fingerprint(&winch));
    }
}
