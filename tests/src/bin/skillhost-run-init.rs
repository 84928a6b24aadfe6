//! A run's init for the integration tests (`skillhost __run` in production): the same
//! library function, as a small binary the run tests bind into their jails.

use std::process::ExitCode;

fn main() -> ExitCode {
    skillhost_sandbox::run::init::main(std::env::args_os().skip(1).collect())
}
