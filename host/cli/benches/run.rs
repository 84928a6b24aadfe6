//! `skillhost run SKILL -- COMMAND` as a person at a terminal meets it, against what it
//! stands on, side by side in one run (issue 45, "a quick CLI run"):
//!
//! - `bare_{sh,python}`: `sh -c true` and `python3 -c pass` spawned bare with
//!   `std::process::Command`, output captured;
//! - `in_process_{sh,python}`: the same command of the SKILL.md skill `bench` run in the
//!   jail by `Registry::run` in this process, the host and registry already open (what
//!   `skill_run` of a running `serve` costs);
//! - `cli_{sh,python}`: `skillhost run bench -- COMMAND` as a process of the release
//!   binary, its output captured: start, open the host and the registry, run, record,
//!   exit;
//! - `cli_among_others_sh`: the same, with 20 other skills beside it in the workspace
//!   (WebAssembly components whose tool listings an earlier `skillhost list` kept, and a
//!   SKILL.md that fails to load): what a run pays for the skills it does not run.
//! - `cli_other_{sh,python}`: when `SKILLHOST_BENCH_OTHER` names another `skillhost`
//!   binary (a release build of an earlier commit), `skillhost run` of that one, on a data
//!   dir of its own made by it: a before and after in one run.
//!
//! Each side has a data dir of its own (the in-process host keeps its SQLite files open,
//! which would spare the processes the work of closing them last), the same host config
//! (the test venv, `any_command` policy approved through the CLI) and the same binary as
//! the run's init. The figure is what `cli` adds to `in_process` at the median (goal: at
//! most 30 ms; `bench-report` judges it from criterion's estimates), printed at the end
//! from the medians of every run timed.

#![allow(missing_docs, reason = "criterion's macros generate undocumented items")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use skillhost::{CallContext, Host, HostConfig, Registry};

/// The goal: what the CLI may add to the in-process run, at the median.
const GOAL_MS: f64 = 30.0;

/// The commands, by case name.
const COMMANDS: [(&str, [&str; 3]); 2] = [("sh", ["sh", "-c", "true"]), ("python", ["python3", "-c", "pass"])];

fn skillhost() -> PathBuf {
    env!("CARGO_BIN_EXE_skillhost").into()
}

/// The binary `SKILLHOST_BENCH_OTHER` names, measured beside this build's.
fn other() -> Option<PathBuf> {
    std::env::var_os("SKILLHOST_BENCH_OTHER").map(PathBuf::from)
}

/// The host config both sides use: the test venv, and (a host that may not make
/// cgroups) the cgroup layer accepted as missing, as the tests do.
fn config_toml() -> String {
    let venv = fixtures::python::venv();
    let weaker = if fixtures::python::cgroups_usable() { "" } else { "allow_weaker = [\"cgroup\"]\n" };
    format!("[sandbox]\nvenv = {:?}\n{weaker}", venv.display().to_string())
}

/// A data dir with the host config, and a workspace with the SKILL.md skill `bench`
/// (one script; its policy lets it run any command, approved through the CLI).
fn setup(bin: &Path, root: &Path, others: bool) -> (PathBuf, PathBuf) {
    let (data, skills) = (root.join("data"), root.join("skills"));
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("config.toml"), config_toml()).unwrap();
    let dir = skills.join("bench");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: bench\ndescription: Runs nothing, to time a run.\n---\nRun it.\n").unwrap();
    std::fs::write(dir.join("scripts/noop.sh"), "#!/bin/sh\n").unwrap();
    if others {
        other_skills(&skills);
    }
    for args in [&["policy", "bench", "--any-command"][..], &["approve", "bench", "--yes"], &["list"]] {
        let out = cli(bin, &data, &skills, args).output().unwrap();
        assert!(out.status.success(), "skillhost {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    (data, skills)
}

/// 19 copies of the limits component (each a distinct component) and a broken SKILL.md.
fn other_skills(skills: &Path) {
    let bytes = std::fs::read(fixtures::LIMITS.wasm).unwrap();
    for i in 0..19 {
        let name = format!("wasm-{i:02}");
        let dir = skills.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let nonce = format!("{name} of the run bench");
        let wasm = skillhost_package::embed(&bytes, &[("skillhost-bench-nonce", nonce.as_bytes())]).unwrap();
        std::fs::write(dir.join("skill.wasm"), wasm).unwrap();
        std::fs::write(dir.join("skill.toml"), fixtures::LIMITS.manifest().replace("name = \"limits\"", &format!("name = \"{name}\"")))
            .unwrap();
    }
    let broken = skills.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("SKILL.md"), "No frontmatter.\n").unwrap();
}

/// `BIN --skills SKILLS --data-dir DATA ARGS`, with nothing of this process's
/// environment that would change it.
fn cli(bin: &Path, data: &Path, skills: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--skills").arg(skills).arg("--data-dir").arg(data).args(args);
    cmd.env_remove("SKILLHOST_LOG").env_remove("SKILLHOST_VENV").env_remove("SKILLHOST_CONFIG").stdin(Stdio::null());
    cmd
}

/// The in-process side: the host as the CLI builds it (its config, no background
/// compile), the binary as the run's init, the registry open.
fn in_process(rt: &tokio::runtime::Runtime, data: &Path, skills: &Path) -> (Host, Arc<Registry>) {
    let config = HostConfig::parse(&config_toml(), &data.join("config.toml")).unwrap();
    let mut sandbox = skillhost::runtime::BwrapConfig::new(data.join("sandbox"));
    sandbox.venv = config.sandbox.venv.clone();
    sandbox.allow_weaker = config.sandbox.allow_weaker.clone();
    sandbox.init = Some(vec![skillhost().into(), "__run".into()]);
    sandbox.shim = Some(vec![skillhost().into(), "__shim".into()]);
    let host = Host::builder().data_dir(data).config(config).sandbox_config(sandbox).baseline_compile(false).build().unwrap();
    let mut registry = host.registry_config();
    registry.workspace = Some(skills.to_owned());
    registry.watch = false;
    let registry = rt.block_on(host.open_registry(registry)).unwrap();
    (host, registry)
}

/// Every sample of every case, in milliseconds.
#[derive(Default)]
struct Samples(Mutex<BTreeMap<String, Vec<f64>>>);

impl Samples {
    /// Time `iters` runs of `once` as one criterion sample, keeping each.
    fn time(&self, case: &str, iters: u64, mut once: impl FnMut()) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let start = Instant::now();
            once();
            let took = start.elapsed();
            total += took;
            self.0.lock().unwrap().entry(case.to_owned()).or_default().push(took.as_secs_f64() * 1e3);
        }
        total
    }

    fn median(&self, case: &str) -> Option<f64> {
        let mut values = self.0.lock().unwrap().get(case)?.clone();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (alone, among, own, earlier) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let this = skillhost();
    let (data, skills) = setup(&this, alone.path(), false);
    let (among_data, among_skills) = setup(&this, among.path(), true);
    let (own_data, own_skills) = setup(&this, own.path(), false);
    let other = other().map(|bin| {
        let (data, skills) = setup(&bin, earlier.path(), false);
        (bin, data, skills)
    });
    let (_host, registry) = in_process(&rt, &own_data, &own_skills);
    let bare_dir = tempfile::tempdir().unwrap();
    let samples = Samples::default();

    let mut group = c.benchmark_group("cli_run");
    group.sample_size(20).measurement_time(Duration::from_secs(8)).warm_up_time(Duration::from_secs(1));
    for (name, command) in COMMANDS {
        group.bench_function(format!("bare_{name}"), |b| {
            b.iter_custom(|iters| {
                samples.time(&format!("bare_{name}"), iters, || {
                    let out = Command::new(command[0])
                        .args(&command[1..])
                        .current_dir(bare_dir.path())
                        .env_clear()
                        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                        .stdin(Stdio::null())
                        .output()
                        .unwrap();
                    assert!(out.status.success());
                })
            })
        });
        let words: Vec<String> = command.map(str::to_owned).into();
        group.bench_function(format!("in_process_{name}"), |b| {
            b.iter_custom(|iters| {
                samples.time(&format!("in_process_{name}"), iters, || {
                    let out = rt.block_on(registry.run("bench", words.clone(), Vec::new(), CallContext::default())).unwrap();
                    assert_eq!(out.exit_code, Some(0), "{out:?}");
                })
            })
        });
        let mut cases = vec![(format!("cli_{name}"), &this, &data, &skills)];
        if name == "sh" {
            cases.push((format!("cli_among_others_{name}"), &this, &among_data, &among_skills));
        }
        if let Some((bin, data, skills)) = &other {
            cases.push((format!("cli_other_{name}"), bin, data, skills));
        }
        for (case, bin, data, skills) in cases {
            group.bench_function(&case, |b| {
                b.iter_custom(|iters| {
                    samples.time(&case, iters, || {
                        let out = cli(bin, data, skills, &[&["run", "bench", "--"][..], &command[..]].concat()).output().unwrap();
                        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                    })
                })
            });
        }
    }
    group.finish();
    report(&samples);
}

/// The medians of every run timed, and what the CLI adds to the in-process run.
fn report(samples: &Samples) {
    eprintln!("\ncli_run, medians of every run timed (warm-up included):");
    for (name, _) in COMMANDS {
        let median = |case: &str| samples.median(&format!("{case}_{name}"));
        let (Some(bare), Some(inside), Some(cli)) = (median("bare"), median("in_process"), median("cli")) else { continue };
        let over = cli - inside;
        eprintln!(
            "  {name}: bare {bare:.2} ms, in process {inside:.2} ms, skillhost run {cli:.2} ms{}: the CLI adds {over:.2} ms (goal ≤ {GOAL_MS} ms: {})",
            median("cli_among_others").map(|a| format!(" ({a:.2} ms among 20 other skills)")).unwrap_or_default(),
            if over <= GOAL_MS { "met" } else { "missed" }
        );
        if let Some(other) = median("cli_other") {
            eprintln!("  {name}: the other binary's skillhost run {other:.2} ms: it added {:.2} ms", other - inside);
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
