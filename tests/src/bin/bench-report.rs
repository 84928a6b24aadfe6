//! `bench-report`: writes BENCHMARKS.md from the last `cargo bench` run: criterion's
//! estimates under `target/criterion`, the extra figures under `target/figures`
//! (see `fixtures::figures`), and the machine it ran on. `scripts/bench.sh` runs the
//! benches and then this.
//!
//! The file opens with the current figures, one table of ratios against baselines
//! measured in the same run, then the other figures and the machine; then the history
//! (earlier runs, written by hand between `<!-- history -->` and `<!-- /history -->`),
//! carried over from the file being replaced as it is; then every criterion benchmark.
//!
//! Usage: `bench-report [TARGET_DIR] [OUT]` (defaults: `target`, `BENCHMARKS.md`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use serde_json::Value;

/// A measurement set beside the baseline it is judged against, both from the same run.
struct Pair {
    what: &'static str,
    measured: &'static str,
    baseline: &'static str,
    goal: Option<Goal>,
}

/// A goal from the issues: a ratio to the baseline, an absolute median, a most added to
/// the baseline's median, or several.
struct Goal {
    text: &'static str,
    max_ratio: Option<f64>,
    max_ns: Option<f64>,
    max_added_ns: Option<f64>,
}

const fn ratio(text: &'static str, max: f64) -> Option<Goal> {
    Some(Goal { text, max_ratio: Some(max), max_ns: None, max_added_ns: None })
}

const fn at_most(text: &'static str, max_ns: f64) -> Option<Goal> {
    Some(Goal { text, max_ratio: None, max_ns: Some(max_ns), max_added_ns: None })
}

const fn adds_at_most(text: &'static str, max_added_ns: f64) -> Option<Goal> {
    Some(Goal { text, max_ratio: None, max_ns: None, max_added_ns: Some(max_added_ns) })
}

const PAIRS: &[Pair] = &[
    Pair {
        what: "wasm call, warm (pre-instantiated) vs compiling per call",
        measured: "call/warm",
        baseline: "call/compile_per_call",
        goal: at_most("≤ 8 µs", 8e3),
    },
    Pair {
        what: "wasm call, warm, with a granted data dir vs without one",
        measured: "call/warm_with_granted_dir",
        baseline: "call/warm",
        goal: at_most("≤ 12 µs", 12e3),
    },
    Pair { what: "wasm load from the compiled cache vs cold compile", measured: "load/cached", baseline: "load/cold", goal: None },
    Pair {
        what: "HTTP GET from a wasm skill through the egress gate vs the host's direct request on a new connection",
        measured: "egress/gated",
        baseline: "egress/direct",
        goal: ratio("≤ 1.1×", 1.1),
    },
    Pair {
        what: "HTTP GET from a wasm skill through the egress gate vs the host's direct request on a kept connection",
        measured: "egress/gated",
        baseline: "egress/direct_kept",
        goal: None,
    },
    Pair {
        what: "HTTP GET through the egress gate alone (from the host, no wasm) vs the host's direct request on a new connection",
        measured: "egress/gate",
        baseline: "egress/direct",
        goal: ratio("≤ 1.1×", 1.1),
    },
    Pair {
        what: "HTTP GET through the egress gate alone vs the host's direct request on a kept connection",
        measured: "egress/gate",
        baseline: "egress/direct_kept",
        goal: None,
    },
    Pair {
        what: "HTTP GET from a wasm skill through the gate vs the gate alone (the tool call and wasi:http)",
        measured: "egress/gated",
        baseline: "egress/gate",
        goal: None,
    },
    Pair {
        what: "HTTPS GET through the sandbox proxy terminating TLS for a secret-bound host (secret added, response redacted) vs the host's direct HTTPS request, on a kept connection",
        measured: "egress_tls/terminated_kept",
        baseline: "egress_tls/direct_kept",
        goal: ratio("≤ 1.3×", 1.3),
    },
    Pair {
        what: "the same on a new connection per request: CONNECT and a TLS handshake with the proxy (its upstream connection kept) vs a TLS handshake with the server",
        measured: "egress_tls/terminated_new",
        baseline: "egress_tls/direct_new",
        goal: None,
    },
    Pair {
        what: "Python MCP server spawn to first answer, sandboxed vs unsandboxed",
        measured: "sandbox_spawn/sandboxed",
        baseline: "sandbox_spawn/direct",
        goal: ratio("≤ 1.2×", 1.2),
    },
    Pair {
        what: "warm call to a Python MCP server, sandboxed vs unsandboxed",
        measured: "sandbox_call/sandboxed",
        baseline: "sandbox_call/direct",
        goal: Some(Goal { text: "≤ 1.2× and ≤ 2 ms", max_ratio: Some(1.2), max_ns: Some(2e6), max_added_ns: None }),
    },
    Pair {
        what: "a SKILL.md skill's `sh -c true` run in the jail (`Registry::run`) vs the same shell spawned bare",
        measured: "run/jail_sh",
        baseline: "run/bare_sh",
        goal: adds_at_most("the jail adds ≤ 25 ms", 25e6),
    },
    Pair {
        what: "a SKILL.md skill's `python3 -c pass` run in the jail (`Registry::run`) vs the same interpreter spawned bare",
        measured: "run/jail_python",
        baseline: "run/bare_python",
        goal: adds_at_most("the jail adds ≤ 25 ms", 25e6),
    },
    Pair {
        what: "`skillhost run` of a SKILL.md skill's `sh -c true` as a process vs the same run in process (`Registry::run`)",
        measured: "cli_run/cli_sh",
        baseline: "cli_run/in_process_sh",
        goal: adds_at_most("the CLI adds ≤ 30 ms", 30e6),
    },
    Pair {
        what: "`skillhost run` of a SKILL.md skill's `python3 -c pass` as a process vs the same run in process (`Registry::run`)",
        measured: "cli_run/cli_python",
        baseline: "cli_run/in_process_python",
        goal: adds_at_most("the CLI adds ≤ 30 ms", 30e6),
    },
    Pair {
        what: "`skillhost run` of `sh -c true` with 20 other skills in the workspace vs alone",
        measured: "cli_run/cli_among_others_sh",
        baseline: "cli_run/cli_sh",
        goal: None,
    },
    Pair {
        what: "trivial tool over stdio MCP (raw client) vs in process",
        measured: "mcp/stdio_round_trip_raw",
        baseline: "mcp/in_process",
        goal: at_most("≤ 300 µs", 300e3),
    },
    Pair {
        what: "tool search at 10,000 tools: hybrid (with the query embedding) vs BM25",
        measured: "hybrid tool search (with query embedding), 10k tools",
        baseline: "bm25 tool search, 10k tools",
        goal: at_most("hybrid ≤ 5 ms", 5e6),
    },
    Pair {
        what: "trivial tool over stdio MCP (rmcp client) vs in process",
        measured: "mcp/stdio_round_trip_rmcp",
        baseline: "mcp/in_process",
        goal: at_most("≤ 300 µs", 300e3),
    },
];

/// One criterion benchmark: its id and the estimates of its last run, in nanoseconds.
struct Estimate {
    median: f64,
    mean: f64,
    mean_low: f64,
    mean_high: f64,
    /// When it was measured (the estimates file's modification time), UTC.
    when: String,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let target = PathBuf::from(args.next().unwrap_or_else(|| "target".into()));
    let out = PathBuf::from(args.next().unwrap_or_else(|| "BENCHMARKS.md".into()));
    let estimates = match criterion_estimates(&target.join("criterion")) {
        Ok(e) if !e.is_empty() => e,
        Ok(_) => {
            eprintln!(
                "bench-report: no criterion results under {}; run `cargo bench` first (scripts/bench.sh does both)",
                target.display()
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("bench-report: cannot read {}: {e}", target.join("criterion").display());
            return ExitCode::FAILURE;
        }
    };
    let figures = extra_figures(&target.join("figures"));
    let history = match std::fs::read_to_string(&out) {
        Ok(existing) => history(&existing),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            eprintln!("bench-report: cannot read {} for its history: {e}; nothing was written", out.display());
            return ExitCode::FAILURE;
        }
    };
    let report = render(&estimates, &figures, history.as_deref());
    if let Err(e) = std::fs::write(&out, report) {
        eprintln!("bench-report: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("wrote {} ({} criterion benchmarks, {} other figures)", out.display(), estimates.len(), figures.len());
    ExitCode::SUCCESS
}

/// Every `*/new/benchmark.json` under `dir`, keyed by criterion's full id.
fn criterion_estimates(dir: &Path) -> std::io::Result<BTreeMap<String, Estimate>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n == "new") {
                if let Some((id, estimate)) = read_estimate(&path) {
                    found.insert(id, estimate);
                }
            } else if path.is_dir() && path.file_name().is_some_and(|n| n != "report" && n != "base" && n != "change") {
                stack.push(path);
            }
        }
    }
    Ok(found)
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn read_estimate(new: &Path) -> Option<(String, Estimate)> {
    let id = read_json(&new.join("benchmark.json"))?["full_id"].as_str()?.to_owned();
    let e = read_json(&new.join("estimates.json"))?;
    let point = |k: &str| e[k]["point_estimate"].as_f64();
    let bound = |k: &str| e["mean"]["confidence_interval"][k].as_f64();
    let when = command("date", &["-u", "+%Y-%m-%d %H:%M", "-r", &new.join("estimates.json").to_string_lossy()]).unwrap_or_default();
    Some((
        id,
        Estimate {
            median: point("median")?,
            mean: point("mean")?,
            mean_low: bound("lower_bound")?,
            mean_high: bound("upper_bound")?,
            when,
        },
    ))
}

/// Every line of every `*.jsonl` under `dir`, by file name.
fn extra_figures(dir: &Path) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "jsonl")).collect();
    files.sort();
    let mut figures = Vec::new();
    for file in files {
        let source = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for line in std::fs::read_to_string(&file).unwrap_or_default().lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Value>(line) {
                Ok(value) => figures.push((source.clone(), value)),
                Err(e) => eprintln!("bench-report: skipping a bad line in {}: {e}", file.display()),
            }
        }
    }
    figures
}

/// Nanoseconds in the unit a reader expects.
fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A ratio, written as a fraction when the measured side is far faster.
fn times(ratio: f64) -> String {
    if ratio < 0.1 { format!("{ratio:.4}× (1/{:.0})", 1.0 / ratio) } else { format!("{ratio:.2}×") }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

/// Where the history begins and ends in the report.
const HISTORY_START: &str = "<!-- history -->";
const HISTORY_END: &str = "<!-- /history -->";

/// The first table's heading: the current figures against their baselines.
const CURRENT: &str = "## Current figures: against baselines measured in the same run";

/// The headings of the sections this tool writes after the first table.
const GENERATED: [&str; 4] = ["## Other figures", "## Machine", "## Every criterion benchmark", "## Reproduce"];

/// The history of the report `existing`: what stands between its history marks, or, in a
/// report written before there were marks (its first table headed `## Against
/// baselines`), every section between that table and the generated "Other figures". None
/// when it has none.
fn history(existing: &str) -> Option<String> {
    let text = match (existing.find(HISTORY_START), existing.find(HISTORY_END)) {
        (Some(start), Some(end)) if start < end => &existing[start + HISTORY_START.len()..end],
        _ => {
            let table = existing.find("\n## Against baselines\n")? + 1;
            let start = table + existing[table..].find("\n## ")? + 1;
            if GENERATED.iter().any(|heading| existing[start..].starts_with(&format!("{heading}\n"))) {
                return None;
            }
            let end = ["\n## Other figures\n", "\n## Every criterion benchmark\n"]
                .iter()
                .filter_map(|heading| existing[start..].find(heading))
                .min()
                .map_or(existing.len(), |at| start + at + 1);
            &existing[start..end]
        }
    };
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn render(estimates: &BTreeMap<String, Estimate>, figures: &[(String, Value)], history: Option<&str>) -> String {
    let mut md = String::new();
    let commit = command("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = command("git", &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let _ = writeln!(md, "# skillhost benchmarks\n");
    let _ = writeln!(
        md,
        "Generated by `scripts/bench.sh` (criterion benches, then `bench-report`) at commit `{commit}`{} on {}. \
         Every ratio compares two figures measured in the same run on the same machine; medians unless stated.\n",
        if dirty { " with local changes" } else { "" },
        command("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default(),
    );
    let _ = writeln!(md, "{CURRENT}\n\n| What | Measured | Baseline | Ratio | Goal |\n|---|---|---|---|---|");
    for pair in PAIRS {
        let (Some(m), Some(b)) = (estimates.get(pair.measured), estimates.get(pair.baseline)) else {
            let _ = writeln!(md, "| {} | not run (`{}`) | | | |", pair.what, pair.measured);
            continue;
        };
        let ratio = m.median / b.median;
        let goal = match &pair.goal {
            None => String::new(),
            Some(goal) => {
                let met = goal.max_ratio.is_none_or(|max| ratio <= max)
                    && goal.max_ns.is_none_or(|max| m.median <= max)
                    && goal.max_added_ns.is_none_or(|max| m.median - b.median <= max);
                format!("{}: {}", goal.text, verdict(met))
            }
        };
        let _ = writeln!(md, "| {} | {} | {} | {} | {goal} |", pair.what, duration(m.median), duration(b.median), times(ratio));
    }
    for (_, f) in figures.iter().filter(|(_, f)| f.get("baseline").is_some()) {
        let unit = f["unit"].as_str().unwrap_or("");
        let (value, base) = (f["value"].as_f64().unwrap_or(f64::NAN), f["baseline"]["value"].as_f64().unwrap_or(f64::NAN));
        let _ = writeln!(
            md,
            "| {} | {value:.3} {unit} | {base:.3} {unit} ({}) | {} | {} |",
            f["figure"].as_str().unwrap_or("?"),
            f["baseline"]["figure"].as_str().unwrap_or("?"),
            times(value / base),
            f["goal"].as_str().unwrap_or(""),
        );
    }

    let others: Vec<_> = figures.iter().filter(|(_, f)| f.get("baseline").is_none()).collect();
    if !others.is_empty() {
        let _ = writeln!(md, "\n## Other figures\n\n| Source | Figure | Value | Goal |\n|---|---|---|---|");
        for (source, f) in others {
            let _ = writeln!(
                md,
                "| {source} | {} | {:.3} {} | {} |",
                f["figure"].as_str().unwrap_or("?"),
                f["value"].as_f64().unwrap_or(f64::NAN),
                f["unit"].as_str().unwrap_or(""),
                f["goal"].as_str().unwrap_or(""),
            );
        }
    }
    md.push('\n');
    machine(&mut md);
    if let Some(history) = history {
        let _ = writeln!(md, "{HISTORY_START}\n\n{history}\n\n{HISTORY_END}");
    }

    let _ = writeln!(
        md,
        "\n## Every criterion benchmark\n\n| Benchmark | Median | Mean | 95 % CI of the mean | Measured (UTC) |\n|---|---|---|---|---|"
    );
    for (id, e) in estimates {
        let _ = writeln!(
            md,
            "| `{id}` | {} | {} | {} – {} | {} |",
            duration(e.median),
            duration(e.mean),
            duration(e.mean_low),
            duration(e.mean_high),
            e.when
        );
    }
    let _ = writeln!(
        md,
        "\n## Reproduce\n\n```sh\n./scripts/bench.sh            # every bench, then this report\n./scripts/bench.sh -p skillhost-index   # one crate's benches, then the report over all results on disk\n```\n\n\
         Results of benches not rerun stay on disk from their last run (criterion keeps them under `target/criterion`), \
         so compare figures of one run: the machine section above is read when the report is written."
    );
    md
}

/// CPU, cores, memory, load, kernel and toolchain.
fn machine(md: &mut String) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: Option<u64> =
        meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:").and_then(|v| v.split_whitespace().next()?.parse().ok()));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(
        md,
        "- CPU: {} × {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu.unwrap_or_else(|| "unknown".into())
    );
    let _ = writeln!(md, "- Memory: {:.1} GiB", mem_kb.unwrap_or(0) as f64 / (1024.0 * 1024.0));
    let _ = writeln!(
        md,
        "- Load average when the report was written (1/5/15 min): {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let _ = writeln!(md, "- Kernel: {}", command("uname", &["-srm"]).unwrap_or_default());
    let _ = writeln!(md, "- Toolchain: {}", command("rustc", &["--version"]).unwrap_or_default());
    let _ = writeln!(md, "- Profile: `cargo bench` (release, see `[profile.bench]` in Cargo.toml)\n");
}

fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
