//! The egress shim for the integration tests (`skillhost __shim` in production): the
//! same library function, as a small binary the sandbox tests bind into their sandboxes.

use std::process::ExitCode;

use skillhost_egress::shim::{self, ShimArgs};

fn main() -> ExitCode {
    match ShimArgs::parse_from(std::env::args_os().skip(1)) {
        Ok(args) => shim::run(args),
        Err(e) => {
            eprintln!("skillhost-shim: {e}");
            ExitCode::from(shim::EXIT_SHIM_FAILED)
        }
    }
}
