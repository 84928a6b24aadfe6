//! Every line the CLI prints goes through here, so that a closed pipe never panics
//! (`skillhost inspect x.wasm | head -1`): once stdout is closed the rest of the
//! output is dropped quietly and the command finishes as it would have (its calls
//! recorded, its files written); a closed stderr is ignored. `outln!`/`out!` and
//! `errln!`/`err!` (defined here) replace `println!`/`print!` and
//! `eprintln!`/`eprint!`, which panic when the write fails.
//!
//! And every line is escaped on the way out ([`skillhost::text::visible`]): much of what
//! the CLI prints was written by a skill (its version, descriptions, files, a tool's
//! output, a server's error text), and a terminal takes control characters in it as
//! instructions (move the cursor, erase a line, reorder text). They are written out
//! visibly (`\x1b`, `\r`, `\u202E`) instead; line breaks and tabs are kept. JSON output
//! is unchanged in meaning: serde_json already escapes C0 controls, and the `\uXXXX`
//! form of the others reads back as the same string.

use parking_lot::Mutex;
use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// `println!` that stops quietly once stdout is closed.
macro_rules! outln {
    () => { $crate::stdio::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that stops quietly once stdout is closed.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdio::out(format_args!($($arg)*)) };
}

/// `eprintln!` that ignores a closed stderr .
macro_rules! errln {
    () => { $crate::stdio::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::err(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that ignores a closed stderr .
macro_rules! err {
    ($($arg:tt)*) => { $crate::stdio::err(format_args!($($arg)*)) };
}

/// Set once a write to stdout failed: nothing more is written.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// A write error other than a closed pipe (a full disk behind `> file`): reported at exit.
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// `args` as text a terminal shows as written.
fn visible(args: fmt::Arguments<'_>) -> String {
    let text = args.as_str().map_or_else(|| args.to_string(), str::to_owned);
    match skillhost::text::visible(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// Write to stdout, unless an earlier write found it closed.
pub fn out(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let text = visible(args);
    let mut stdout = io::stdout().lock();
    if let Err(error) = stdout.write_all(text.as_bytes()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != io::ErrorKind::BrokenPipe {
            *STDOUT_ERROR.lock() = Some(error.to_string());
        }
    }
}

/// Write to stderr; a closed stderr is ignored.
pub fn err(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_all(visible(args).as_bytes());
}

/// Flush stdout at the end of a command; `Some(why)` when the output could not be
/// written for another reason than a reader that went away.
pub fn finish() -> Option<String> {
    if !STDOUT_CLOSED.load(Ordering::Relaxed)
        && let Err(error) = io::stdout().lock().flush()
        && error.kind() != io::ErrorKind::BrokenPipe
    {
        return Some(error.to_string());
    }
    STDOUT_ERROR.lock().take()
}
