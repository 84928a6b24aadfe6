//! How long wasmtime takes to compile a large component (the ~18 MB componentize-py
//! build of `examples/python-skill`) with each compiler setting a host could choose:
//! Cranelift at opt-level `speed` (what the host uses), Cranelift at `none`, and Winch,
//! wasmtime's baseline compiler (the host's first tier for uncached components), each with
//! wasmtime's parallel compilation on (the default) and off; and how long loading the
//! compiled artifact back takes (`Component::deserialize_file`, the host's cache hit).
//!
//! Not criterion: one compile takes seconds to tens of seconds, so each setting is
//! timed `SKILLHOST_COMPILE_RUNS` times (default 3) and the median, minimum and maximum
//! are printed and recorded for `bench-report` (`target/figures/compile.jsonl`). The
//! engine is set up as the host's (`host/wasm/src/engine.rs`): epoch interruption and
//! the pooling allocator with the host's 1 GiB memory reservation, which decides the
//! bounds checks compiled in.
//!
//! The component is `SKILLHOST_COMPILE_COMPONENT`, else
//! `target/languages/python-skill/skill.wasm` (left there by the CLI's language tests,
//! or by the startup bench's own `skillhost build`).
//!
//! ```sh
//! cargo bench --workspace --bench compile
//! ```

#![allow(missing_docs, reason = "a bench binary")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fixtures::figures::Figure;
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Strategy};

/// A compiler setting.
#[derive(Clone, Copy)]
struct Setting {
    name: &'static str,
    strategy: Strategy,
    opt: OptLevel,
    parallel: bool,
}

fn engine(setting: Setting) -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::new();
    pool.max_memory_size(1 << 30);
    let mut config = Config::new();
    config
        .strategy(setting.strategy)
        .cranelift_opt_level(setting.opt)
        .parallel_compilation(setting.parallel)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
}

fn component_path() -> PathBuf {
    std::env::var_os("SKILLHOST_COMPILE_COMPONENT")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/languages/python-skill/skill.wasm"), PathBuf::from)
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, file: &Path) -> Component {
    // SAFETY: `deserialize_file` trusts its input to be code wasmtime compiled: this
    // bench serialized it into its own temporary directory a moment ago.
    unsafe { Component::deserialize_file(engine, file) }.unwrap()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported here.
    let path = component_path();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!("cannot read {}: {e}; run `cargo test --workspace --test cli -- languages` (or the startup bench) to build it, or set SKILLHOST_COMPILE_COMPONENT", path.display())
    });
    let runs: usize = std::env::var("SKILLHOST_COMPILE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    eprintln!("compile: {} ({:.1} MB), {runs} runs per setting, {cores} cores", path.display(), bytes.len() as f64 / 1e6);

    let mut settings = Vec::new();
    for parallel in [true, false] {
        settings.push(Setting { name: "cranelift speed", strategy: Strategy::Cranelift, opt: OptLevel::Speed, parallel });
        settings.push(Setting { name: "cranelift none", strategy: Strategy::Cranelift, opt: OptLevel::None, parallel });
        settings.push(Setting { name: "winch", strategy: Strategy::Winch, opt: OptLevel::None, parallel });
    }

    let scratch = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();
    let mut baseline = None;
    for setting in settings {
        let label = format!("{}, parallel compilation {}", setting.name, if setting.parallel { "on" } else { "off" });
        let engine = match engine(setting) {
            Ok(engine) => engine,
            Err(e) => {
                eprintln!("compile: {label}: no engine: {e:#}");
                continue;
            }
        };
        let mut times = Vec::new();
        let mut compiled = None;
        for _ in 0..runs {
            let start = Instant::now();
            match Component::new(&engine, &bytes) {
                Ok(component) => {
                    times.push(start.elapsed());
                    compiled = Some(component);
                }
                Err(e) => {
                    eprintln!("compile: {label}: cannot compile: {e:#}");
                    break;
                }
            }
        }
        let Some(component) = compiled else { continue };
        let m = median(&times);
        eprintln!(
            "compile: {label}: median {:.0} ms (min {:.0}, max {:.0}; runs {:?})",
            ms(m),
            ms(*times.iter().min().unwrap()),
            ms(*times.iter().max().unwrap()),
            times.iter().map(|t| format!("{:.0} ms", ms(*t))).collect::<Vec<_>>()
        );
        let what = format!("compile the {:.0} MB Python component: {label}", bytes.len() as f64 / 1e6);
        let mut figure = Figure::new(&what, ms(m), "ms");
        match &baseline {
            None => baseline = Some((what.clone(), ms(m))),
            Some((base, value)) => figure = figure.against(base.clone(), *value),
        }
        figures.push(figure);

        // The cache hit: the artifact written to disk and loaded back.
        if setting.parallel {
            let file = scratch.path().join(format!("{}.cwasm", setting.name.replace(' ', "-")));
            std::fs::write(&file, component.serialize().unwrap()).unwrap();
            let size = std::fs::metadata(&file).unwrap().len();
            let mut loads = Vec::new();
            for _ in 0..10 {
                let start = Instant::now();
                let loaded = deserialize(&engine, &file);
                loads.push(start.elapsed());
                drop(loaded);
            }
            let load = median(&loads);
            eprintln!("compile: {}: artifact {:.1} MB, deserialize_file median {:.2} ms of 10", setting.name, size as f64 / 1e6, ms(load));
            figures.push(Figure::new(
                format!("load the compiled Python component back (deserialize_file): {}", setting.name),
                ms(load),
                "ms",
            ));
            figures.push(Figure::new(format!("compiled Python component size: {}", setting.name), size as f64 / 1e6, "MB"));
        }
    }
    if let Err(e) = fixtures::figures::record(env!("CARGO_TARGET_TMPDIR"), "compile", &figures) {
        eprintln!("compile: cannot record figures: {e}");
    }
}
