//! Logging to the host: one line per call, tagged by the host with the skill
//! and the tool.
//!
//! ```no_run
//! use skillhost_sdk::log;
//!
//! log::info("reading the file");
//! log::warn!("skipped {} malformed rows", 3);
//! ```
//!
//! The host caps how much one call may log; past the cap lines are dropped
//! and one notice says how many. Off wasm (native unit tests) lines go to
//! stderr.

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Fine-grained detail.
    Trace,
    /// Detail useful when debugging a skill.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the skill handled.
    Warn,
    /// Something failed.
    Error,
}

/// Writes one line at `level`.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::__bindings::skillhost::skill::host;
        let level = match level {
            Level::Trace => host::Level::Trace,
            Level::Debug => host::Level::Debug,
            Level::Info => host::Level::Info,
            Level::Warn => host::Level::Warn,
            Level::Error => host::Level::Error,
        };
        host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("[{level:?}] {message}");
        }
    }
}

/// Writes a [`Level::Trace`] line.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Writes a [`Level::Debug`] line.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes a [`Level::Info`] line.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes a [`Level::Warn`] line.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes a [`Level::Error`] line.
pub fn error(message: &str) {
    log(Level::Error, message);
}

#[doc(hidden)]
#[macro_export]
macro_rules! __log_trace {
    ($($arg:tt)+) => { $crate::log::trace(&::std::format!($($arg)+)) };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __log_debug {
    ($($arg:tt)+) => { $crate::log::debug(&::std::format!($($arg)+)) };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __log_info {
    ($($arg:tt)+) => { $crate::log::info(&::std::format!($($arg)+)) };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __log_warn {
    ($($arg:tt)+) => { $crate::log::warn(&::std::format!($($arg)+)) };
}
#[doc(hidden)]
#[macro_export]
macro_rules! __log_error {
    ($($arg:tt)+) => { $crate::log::error(&::std::format!($($arg)+)) };
}

/// Writes a [`Level::Trace`] line, formatted like [`format!`].
#[doc(inline)]
pub use crate::__log_trace as trace;

/// Writes a [`Level::Debug`] line, formatted like [`format!`].
#[doc(inline)]
pub use crate::__log_debug as debug;

/// Writes a [`Level::Info`] line, formatted like [`format!`].
#[doc(inline)]
pub use crate::__log_info as info;

/// Writes a [`Level::Warn`] line, formatted like [`format!`].
#[doc(inline)]
pub use crate::__log_warn as warn;

/// Writes a [`Level::Error`] line, formatted like [`format!`].
#[doc(inline)]
pub use crate::__log_error as error;
