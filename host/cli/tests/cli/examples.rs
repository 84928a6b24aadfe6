//! Every example a user is shown runs: each line under `Examples:` in the `--help` of
//! every command (read from the binary itself, so a new example is run without a change
//! here), and every command of the README's tour. They run in one scratch world, in the
//! order a reader meets them: a working directory holding `skills/` with the bundled
//! skills (and `examples/sales.csv` for the tour), a HOME and a data dir of their own,
//! the binary on PATH as `skillhost`, and the test venv, toolchains and model through
//! their variables. An example that asks y/N runs under a pseudo-terminal that answers
//! `y`; one that serves until stopped (`serve --http`) passes if it is still serving
//! after a few seconds. The examples that need the network are skipped, each with its
//! reason printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fixtures::{CSV_SUMMARY, GITHUB, TEXT_TOOLS, UNIT_CONVERT, UPTIME};

/// Examples that are not run, and why: each needs the network.
const NEEDS_NETWORK: &[(&str, &str)] = &[
    ("forge --generate", "asks the model server of [forge.llm] over HTTP"),
    ("https://example.com", "fetches https://example.com"),
    (".example.com/", "fetches from a remote OCI registry, git repository or skills index"),
    ("team/skills.lock", "the team's lockfile pins skills of a remote registry"),
    ("serve --http 0.0.0.0", "listens on every interface (tests listen on 127.0.0.1 only)"),
    ("skillhost setup", "installs from PyPI and npm (scripts/setup.sh runs setup python, model and toolchains for real)"),
];

/// The scratch world the examples run in.
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let world = Self { root: tempfile::tempdir().unwrap() };
        for dir in ["work/skills", "home/skills", "bin", "data"] {
            std::fs::create_dir_all(world.root.path().join(dir)).unwrap();
        }
        std::fs::copy(env!("CARGO_BIN_EXE_skillhost"), world.root.path().join("bin/skillhost")).unwrap();
        let skills = world.work().join("skills");
        for guest in [TEXT_TOOLS, CSV_SUMMARY, UNIT_CONVERT, UPTIME, GITHUB] {
            guest.folder(&skills);
        }
        copy_dir(&checkout().join("skills/site-check"), &skills.join("site-check"));
        copy_dir(&checkout().join("skills/csv-report"), &skills.join("csv-report"));
        std::fs::create_dir_all(world.work().join("examples")).unwrap();
        std::fs::copy(checkout().join("examples/sales.csv"), world.work().join("examples/sales.csv")).unwrap();
        std::fs::create_dir_all(world.root.path().join("home/my-skills")).unwrap();
        world
    }

    fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// Run `script` (one example, or the tour's lines) with bash in the world; `Err`
    /// says what went wrong.
    fn run(&self, script: &str) -> Result<(), String> {
        let serves = script.contains("serve --http");
        let limit = if serves { 4 } else { 900 };
        let path = format!("{}:{}", self.root.path().join("bin").display(), std::env::var("PATH").unwrap_or_default());
        let mut command = Command::new("timeout");
        command
            .arg(limit.to_string())
            .args(["bash", "-e", "-x", "-o", "pipefail", "-c", script])
            .current_dir(self.work())
            .env("PATH", path)
            .env("HOME", self.root.path().join("home"))
            .env("SKILLHOST_DATA_DIR", self.root.path().join("data"))
            .env("SKILLHOST_VENV", fixtures::python::venv())
            .env("TOKEN", "example-token")
            .env_remove("SKILLHOST_SKILLS")
            .env_remove("SKILLHOST_LOG")
            .stdin(Stdio::null());
        // Rust skills build into a shared target dir, so the SDK's dependencies are
        // compiled once for every test.
        command.env("CARGO_TARGET_DIR", checkout().join("target/guests-new"));
        let out = command.output().map_err(|e| format!("cannot run bash: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let failed = stderr.contains("panicked")
            || match out.status.code() {
                Some(0) => false,
                // Killed by `timeout` while serving, as it should be.
                Some(124) if serves => false,
                _ => true,
            };
        if failed {
            return Err(format!("exit {:?}\nstdout: {}\nstderr: {}", out.status.code(), tail(&stdout), tail(&stderr)));
        }
        Ok(())
    }
}

/// `line` as it runs here: one that asks y/N (or for a secret) on a terminal runs under
/// a pseudo-terminal that answers `y`.
fn answered(line: &str) -> String {
    let asks = (line.contains("skillhost approve") || line.contains("skillhost remove")) && !line.contains("--yes")
        || line.starts_with("skillhost secret set");
    if asks { format!("printf 'y\\n' | script -qec {} /dev/null", shell_quote(line)) } else { line.to_owned() }
}

/// The reason `line` is not run, when it needs the network.
fn needs_network(line: &str) -> Option<&'static str> {
    NEEDS_NETWORK.iter().find(|(pattern, _)| line.contains(pattern)).map(|(_, why)| *why)
}

/// Run every line of `examples` in order; return the failures.
fn run_all(world: &World, examples: &[(String, String)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (source, line) in examples {
        if let Some(why) = needs_network(line) {
            eprintln!("SKIPPED ({source}) {line}: needs the network: {why}");
            continue;
        }
        eprintln!("run ({source}) {line}");
        if let Err(error) = world.run(&answered(line)) {
            failures.push(format!("({source}) {line}\n{error}"));
        }
    }
    failures
}

#[test]
fn every_help_example_runs() {
    let world = World::new();
    // What the examples take for granted: csv-summary's data dir holds sales.csv and a
    // human approved it, as the README tour does; loaded by its path (`call --grant`), its
    // data dir is `DATA_DIR/skills/.dev/csv-summary`, which holds sales.csv too.
    let data = "data=$(skillhost show csv-summary --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"data_dir\"])')";
    let dev = "dev=\"$SKILLHOST_DATA_DIR/skills/.dev/csv-summary\"";
    world
        .run(&format!(
            "{data}\n{dev}\nmkdir -p \"$data\" \"$dev\" && cp examples/sales.csv \"$data/\" && cp examples/sales.csv \"$dev/\"\n\
             skillhost approve csv-summary --yes"
        ))
        .expect("sales.csv in csv-summary's data dirs, csv-summary approved");
    let mut examples = Vec::new();
    collect_help_examples(&[], &mut examples);
    assert!(examples.len() > 40, "the help pages have examples: {examples:?}");
    let failures = run_all(&world, &examples);
    assert!(failures.is_empty(), "{} of {} help examples failed:\n\n{}", failures.len(), examples.len(), failures.join("\n\n"));
}

#[test]
fn every_readme_tour_command_runs() {
    let world = World::new();
    let readme = std::fs::read_to_string(checkout().join("README.md")).unwrap();
    let tour = readme.split("## A tour").nth(1).expect("the README has a tour");
    let block = tour.split("```sh").nth(1).and_then(|b| b.split("```").next()).expect("the tour starts with a sh block");
    let mut examples = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        let line = line.trim_end();
        let code = line.split(" # ").next().unwrap_or("").trim_end();
        if line.trim_start().starts_with('#') || code.is_empty() {
            continue;
        }
        if let Some(continued) = code.strip_suffix('\\') {
            pending.push_str(continued);
            continue;
        }
        pending.push_str(code);
        // The tour runs the host through scripts/run.sh in a checkout; here the installed
        // binary stands in for it, over the same skills.
        examples.push(("README tour".to_owned(), std::mem::take(&mut pending).replace("./scripts/run.sh", "skillhost")));
    }
    assert!(examples.len() > 10, "the tour has commands: {examples:?}");
    // One script, as a reader types it: later lines use what earlier ones set.
    let mut script = Vec::new();
    for (_, line) in &examples {
        match needs_network(line) {
            Some(why) => eprintln!("SKIPPED (README tour) {line}: needs the network: {why}"),
            None => script.push(answered(line)),
        }
    }
    if let Err(error) = world.run(&script.join("\n")) {
        panic!("the README tour failed (bash -x shows the command):\n{error}");
    }
}

/// The examples of `skillhost [path] --help` and of every subcommand below it, in the
/// order `--help` lists them.
fn collect_help_examples(path: &[String], into: &mut Vec<(String, String)>) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost")).args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "skillhost {} --help: {}", path.join(" "), String::from_utf8_lossy(&out.stderr));
    let help = String::from_utf8(out.stdout).unwrap();
    let page = if path.is_empty() { "skillhost --help".to_owned() } else { format!("skillhost {} --help", path.join(" ")) };
    let mut in_examples = false;
    for line in help.lines() {
        if line.trim_end() == "Examples:" {
            in_examples = true;
            continue;
        }
        if in_examples {
            let Some(example) = line.strip_prefix("  ").filter(|l| !l.starts_with(' ') && !l.is_empty()) else {
                in_examples = false;
                continue;
            };
            // What follows two spaces is a comment on the example.
            let command = example.split("  ").next().unwrap().trim_end().to_owned();
            into.push((page.clone(), command));
        }
    }
    let commands = help.split("Commands:\n").nth(1).map(|rest| rest.split("\n\n").next().unwrap_or("")).unwrap_or("");
    for line in commands.lines() {
        // `  name  description`; a wrapped description is indented further.
        let Some(name) = line.strip_prefix("  ").filter(|l| !l.starts_with(' ')).and_then(|l| l.split_whitespace().next()) else {
            continue;
        };
        if name == "help" || name.starts_with("__") {
            continue;
        }
        let mut sub = path.to_vec();
        sub.push(name.to_owned());
        collect_help_examples(&sub, into);
    }
}

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        } else if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        }
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}
