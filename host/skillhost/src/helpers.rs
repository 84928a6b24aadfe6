//! The host's helper programs, in the program that links the host: a sandbox starts the
//! host's own executable again as its first process, as the egress shim (a networked
//! server skill or script: `EXE __shim ...`) or as a run's init (a skill's scripts:
//! `EXE __run -- ...`), and the WebAssembly runtime starts it as a compile worker
//! (`EXE __compile ...`: Cranelift's compiles for the compiled cache, whose memory then
//! goes with the worker). One call at the top of `main` makes any program one:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     if let Some(code) = skillhost::helpers::run_if_helper() {
//!         return code; // this process was started by a sandbox as a helper
//!     }
//!     // ... the editor, the agent, the server: build a `Host` as usual.
//!     # std::process::ExitCode::SUCCESS
//! }
//! ```
//!
//! Why the process's own executable rather than a helper binary found on `PATH` or
//! beside it: the helper is then exactly the code of the host that spawned it (no
//! version skew, nothing to install, nothing a `PATH` entry could substitute), and an
//! embedder ships one binary. The cost is one `argv` check at start.
//!
//! Once `run_if_helper` has returned `None` in this process, a [`Host`](crate::Host)
//! built without an explicit [`BwrapConfig::init`](crate::BwrapConfig::init),
//! [`shim`](crate::BwrapConfig::shim) or
//! [`WasmConfig::compile_worker`](crate::WasmConfig::compile_worker) uses this executable
//! for all three. Without that call the host has none: scripts and networked server
//! skills are refused with an error saying to add it (starting a program that does not
//! know it is a helper inside a jail would run the whole application there), and
//! Cranelift compiles in the host's own process.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use skillhost_sandbox::{run::init, shim};
use skillhost_wasm::worker as compile;

/// Set once [`run_if_helper`] has run in this process and found it is not a helper.
static DISPATCHES: AtomicBool = AtomicBool::new(false);

/// If this process was started as one of the host's helpers (`argv[1]` is `__shim`,
/// `__run` or `__compile`), run it to the end and return its exit code; otherwise `None`, and this
/// executable becomes the helper of every host built in this process. Call it first in
/// `main`, before starting threads or a runtime.
pub fn run_if_helper() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    let Some(first) = args.next() else {
        DISPATCHES.store(true, Ordering::Release);
        return None;
    };
    let rest: Vec<OsString> = args.collect();
    if first == shim::SUBCOMMAND {
        return Some(match shim::ShimArgs::parse_from(rest) {
            Ok(args) => shim::run(args),
            Err(e) => {
                eprintln!("skillhost-shim: {e}");
                ExitCode::from(shim::EXIT_SHIM_FAILED)
            }
        });
    }
    if first == init::SUBCOMMAND {
        return Some(init::main(rest));
    }
    if first == compile::SUBCOMMAND {
        return Some(compile::main(rest));
    }
    DISPATCHES.store(true, Ordering::Release);
    None
}

/// This executable's helper commands, when [`run_if_helper`] has made it one and its path
/// is known.
pub(crate) struct Commands {
    /// The egress shim: `[EXE, "__shim"]`.
    pub(crate) shim: Vec<OsString>,
    /// A run's init: `[EXE, "__run"]`.
    pub(crate) init: Vec<OsString>,
    /// A compile worker: `[EXE, "__compile"]`.
    pub(crate) compile: Vec<OsString>,
}

/// See [`Commands`].
pub(crate) fn commands() -> Option<Commands> {
    if !DISPATCHES.load(Ordering::Acquire) {
        return None;
    }
    let exe = std::env::current_exe().ok()?.into_os_string();
    let command = |sub: &str| vec![exe.clone(), sub.into()];
    Some(Commands { shim: command(shim::SUBCOMMAND), init: command(init::SUBCOMMAND), compile: command(compile::SUBCOMMAND) })
}
