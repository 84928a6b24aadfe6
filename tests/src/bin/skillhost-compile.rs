//! A compile worker for the integration tests (`skillhost __compile` in production),
//! dispatched as the production binary dispatches it.

use std::process::ExitCode;

fn main() -> ExitCode {
    skillhost::helpers::run_if_helper().unwrap_or_else(|| {
        eprintln!("skillhost-compile: start it as `skillhost-compile __compile SETTINGS...`");
        ExitCode::FAILURE
    })
}
