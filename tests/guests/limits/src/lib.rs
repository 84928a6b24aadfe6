//! Test fixture `limits`: tools that run into the host's limits (time,
//! memory, output size, log volume) or fail in each way a tool can, plus the
//! trivial `echo` used by benchmarks.
//!
//! skill.toml sets `timeout = "2s"` and `memory = "256MiB"`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use skillhost_sdk::prelude::*;

/// Any JSON value.
#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    /// Returned as the output.
    value: Value,
}

/// Return `value` unchanged.
#[tool(read_only, idempotent, example = r#"{"value": {"a": 1}}"#)]
fn echo(input: EchoInput) -> Result<Value, ToolError> {
    Ok(input.value)
}

/// Loop forever (until the host's deadline stops the call).
#[tool(read_only)]
fn spin() -> Result<u64, ToolError> {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// How long to sleep.
#[derive(Deserialize, JsonSchema)]
struct SleepInput {
    /// Milliseconds.
    ms: u64,
}

/// Sleep with `std::thread::sleep`; returns the milliseconds slept.
#[tool(read_only, example = r#"{"ms": 10}"#)]
fn sleep(input: SleepInput) -> Result<u64, ToolError> {
    std::thread::sleep(std::time::Duration::from_millis(input.ms));
    Ok(input.ms)
}

/// How much memory to take.
#[derive(Deserialize, JsonSchema)]
struct AllocInput {
    /// Mebibytes to allocate and touch.
    mib: u64,
}

/// Allocate and touch `mib` MiB in 1 MiB chunks, all kept alive until the
/// call returns; returns the number of MiB. Past the host's memory limit the
/// allocation fails and the guest aborts (a trap the host reports).
#[tool(read_only, example = r#"{"mib": 1}"#)]
fn alloc(input: AllocInput) -> Result<u64, ToolError> {
    const MIB: usize = 1 << 20;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for _ in 0..input.mib {
        chunks.push(black_box(vec![0xA5; MIB]));
    }
    Ok(black_box(chunks).len() as u64)
}

/// Incremented by each `counter` call.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Count calls in a static and return the count: always 1, since every call
/// runs in a fresh instance.
#[tool(read_only)]
fn counter() -> Result<u64, ToolError> {
    Ok(CALLS.fetch_add(1, Ordering::SeqCst) + 1)
}

/// How much output to produce.
#[derive(Deserialize, JsonSchema)]
struct SizeInput {
    /// Mebibytes.
    mib: u64,
}

/// Return a string of `mib` MiB.
#[tool(read_only, example = r#"{"mib": 1}"#)]
fn big_output(input: SizeInput) -> Result<String, ToolError> {
    Ok("x".repeat(usize::try_from(input.mib << 20).map_err(|e| ToolError::invalid_input(e.to_string()))?))
}

/// How many lines to log.
#[derive(Deserialize, JsonSchema)]
struct LinesInput {
    /// Lines, each written with `log::info`, `println!` and `eprintln!`.
    lines: u64,
}

/// Write `lines` lines each to the host log, stdout and stderr; returns `lines`.
#[tool(read_only, example = r#"{"lines": 3}"#)]
fn log_flood(input: LinesInput) -> Result<u64, ToolError> {
    for i in 0..input.lines {
        log::info!("log line {i}");
        println!("stdout line {i}");
        eprintln!("stderr line {i}");
    }
    Ok(input.lines)
}

/// How many progress steps to report.
#[derive(Deserialize, JsonSchema)]
struct StepsInput {
    /// Steps: progress is reported as 1..=steps out of steps.
    steps: u64,
}

/// Report progress `steps` times; returns `steps`.
#[tool(read_only, example = r#"{"steps": 3}"#)]
fn progress(input: StepsInput) -> Result<u64, ToolError> {
    for step in 1..=input.steps {
        skillhost_sdk::progress(step, Some(input.steps), Some(&format!("step {step}")));
    }
    Ok(input.steps)
}

/// Which error to return.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum FailKind {
    /// `ToolError::InvalidInput`.
    Invalid,
    /// `ToolError::Failed`.
    Failed,
    /// `ToolError::Denied`.
    Denied,
}

/// The error to return.
#[derive(Deserialize, JsonSchema)]
struct FailInput {
    /// `invalid`, `failed` or `denied`.
    kind: FailKind,
}

/// Return the error named by `kind`.
#[tool(read_only, idempotent, example = r#"{"kind": "denied"}"#)]
fn fail(input: FailInput) -> Result<u64, ToolError> {
    Err(match input.kind {
        FailKind::Invalid => ToolError::invalid_input("invalid on purpose"),
        FailKind::Failed => ToolError::failed("failed on purpose"),
        FailKind::Denied => ToolError::denied("denied on purpose"),
    })
}

/// Panic.
#[tool(read_only)]
fn panic() -> Result<u64, ToolError> {
    panic!("the limits guest panicked on purpose")
}

skillhost_sdk::skill!(echo, counter, spin, sleep, alloc, big_output, log_flood, progress, fail, panic);
