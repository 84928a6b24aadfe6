//! The guest toolchains `skillhost build` drives for skills written in Python and
//! JavaScript: componentize-py (PyPI) in a venv of its own and componentize-js with jco
//! (npm) under an npm prefix, both pinned, installed on first use with a progress line,
//! and stamped so that later builds find them in milliseconds. Also the WIT of our world,
//! embedded in the binary and written out for the toolchains to read.
//!
//! Toolchains live in `DATA_DIR/toolchains` (or `SKILLHOST_TOOLCHAINS`); a toolchain
//! installed some other way is used instead when `SKILLHOST_COMPONENTIZE_PY` or
//! `SKILLHOST_COMPONENTIZE_JS` names its executable.
//!
//! Beside them, installed the same way, `node-fetch`: the pinned undici and the preload
//! that make node's `fetch` use the egress proxy in a networked sandbox
//! (`skillhost_sandbox::node_fetch`, which the host binds from here), installed with
//! `npm ci` from its lockfile, so the bytes are the ones its integrity names.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use skillhost_jail::profile::NODE_PRELOAD_FILE;
use skillhost_sandbox::node_fetch;

use crate::app::progress_spinner as spinner;

/// The world every skill implements, as this binary was built with it.
pub const SKILL_WIT: &str = include_str!("../../../wit/skill.wit");

/// The stamp file inside a toolchain's directory: the packages it was installed with.
const STAMP: &str = ".skillhost-toolchain";

/// A toolchain that turns sources into a component of our world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Toolchain {
    /// componentize-py, for skills written in Python.
    Python,
    /// componentize-js (StarlingMonkey) with jco, for skills written in JavaScript.
    Js,
    /// undici and the preload that make node's fetch go through the egress proxy in a
    /// networked sandbox (not a build toolchain: node scripts of SKILL.md skills and
    /// node servers use it).
    NodeFetch,
}

impl Toolchain {
    /// Every toolchain, for `skillhost setup toolchains` without arguments.
    pub const ALL: [Self; 3] = [Self::Python, Self::Js, Self::NodeFetch];

    /// The pinned packages, as the registry's client takes them.
    pub fn packages(self) -> &'static [&'static str] {
        match self {
            Self::Python => &["componentize-py==0.25.0"],
            Self::Js => &["@bytecodealliance/componentize-js@0.23.0", "@bytecodealliance/jco@1.35.0"],
            Self::NodeFetch => &[node_fetch::UNDICI],
        }
    }

    /// The tool's name, as users know it.
    pub fn tool(self) -> &'static str {
        match self {
            Self::Python => "componentize-py",
            Self::Js => "componentize-js",
            Self::NodeFetch => node_fetch::DIR_NAME,
        }
    }

    /// The variable naming an executable installed some other way, if one may.
    pub fn override_var(self) -> Option<&'static str> {
        match self {
            Self::Python => Some("SKILLHOST_COMPONENTIZE_PY"),
            Self::Js => Some("SKILLHOST_COMPONENTIZE_JS"),
            Self::NodeFetch => None,
        }
    }

    /// The executable inside the toolchain's directory (node-fetch's preload).
    fn executable(self, dir: &Path) -> PathBuf {
        match self {
            Self::Python => dir.join("bin/componentize-py"),
            Self::Js => dir.join("node_modules/.bin/componentize-js"),
            Self::NodeFetch => dir.join(NODE_PRELOAD_FILE),
        }
    }

    /// The executable when it is installed (or named by the override variable).
    pub fn installed(self, root: &Path) -> Option<PathBuf> {
        if let Some(exe) = self.override_var().and_then(std::env::var_os) {
            return Some(PathBuf::from(exe)).filter(|p| p.is_file());
        }
        let dir = root.join(self.tool());
        let exe = self.executable(&dir);
        (exe.is_file() && std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == self.stamp())).then_some(exe)
    }

    /// What the stamp holds: the packages, and node-fetch's preload (a binary with
    /// another preload installs it again).
    fn stamp(self) -> String {
        let packages = self.packages().join("\n");
        match self {
            Self::NodeFetch => format!("{packages}\n{}", node_fetch::PRELOAD),
            _ => packages,
        }
    }
}

/// Where toolchains are installed: `SKILLHOST_TOOLCHAINS`, else `DATA_DIR/toolchains`.
/// Absolute, since the toolchains run in the skill's folder.
pub fn root(data_dir: &Path) -> PathBuf {
    let root = std::env::var_os("SKILLHOST_TOOLCHAINS").map_or_else(|| data_dir.join("toolchains"), PathBuf::from);
    std::path::absolute(&root).unwrap_or(root)
}

/// The executable of `toolchain`, installing it into `root` first when it is missing or
/// was installed with other versions (or always, with `force`).
pub fn ensure(toolchain: Toolchain, root: &Path, force: bool) -> Result<PathBuf> {
    if let Some((var, exe)) = toolchain.override_var().and_then(|var| Some((var, std::env::var_os(var)?))) {
        let exe = PathBuf::from(exe);
        let exe = std::path::absolute(&exe).unwrap_or(exe);
        if !exe.is_file() {
            bail!(
                "{var}={}: no such file; point it at a {} executable, or unset it to let skillhost install one",
                exe.display(),
                toolchain.tool()
            );
        }
        return Ok(exe);
    }
    let dir = root.join(toolchain.tool());
    let exe = toolchain.executable(&dir);
    let ready = || !force && exe.is_file() && std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == toolchain.stamp());
    if ready() {
        return Ok(exe);
    }

    // One installer at a time per toolchain, across processes: the others wait, then find
    // it ready.
    std::fs::create_dir_all(root).with_context(|| format!("cannot create the toolchains directory {}", root.display()))?;
    let lock_path = root.join(format!(".{}.lock", toolchain.tool()));
    let lock = File::create(&lock_path).with_context(|| format!("cannot create {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        let bar = spinner(&format!("waiting for another skillhost installing {}", toolchain.tool()));
        let locked = lock.lock();
        bar.finish_and_clear();
        locked.with_context(|| format!("cannot lock {}", lock_path.display()))?;
    }
    if ready() {
        return Ok(exe);
    }
    let _ = std::fs::remove_file(dir.join(STAMP));
    match toolchain {
        Toolchain::Python => install_python(&dir)?,
        Toolchain::Js => install_js(&dir)?,
        Toolchain::NodeFetch => install_node_fetch(&dir)?,
    }
    if !exe.is_file() {
        bail!(
            "installed {} into {}, but {} is missing; run `skillhost setup toolchains --force`",
            toolchain.packages().join(" "),
            dir.display(),
            exe.display()
        );
    }
    std::fs::write(dir.join(STAMP), toolchain.stamp()).with_context(|| format!("cannot write the stamp in {}", dir.display()))?;
    errln!("installed {} into {}", toolchain.packages().join(" "), dir.display());
    Ok(exe)
}

/// A venv of its own with componentize-py, from PyPI.
fn install_python(dir: &Path) -> Result<()> {
    let python = std::env::var_os("SKILLHOST_PYTHON").unwrap_or_else(|| "python3".into());
    let hint = "install Python 3.10 or newer with its venv module (Debian: apt-get install python3-venv), set SKILLHOST_PYTHON to one, or install componentize-py yourself and set SKILLHOST_COMPONENTIZE_PY to it";
    if !dir.join("bin/python").is_file() {
        let mut venv = Command::new(&python);
        venv.args(["-m", "venv"]).arg(dir);
        run_step(venv, &format!("creating a venv for componentize-py in {}", dir.display()))
            .with_context(|| format!("cannot create a venv with `{}`; {hint}", python.to_string_lossy()))?;
    }
    let mut pip = Command::new(dir.join("bin/python"));
    pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]).args(Toolchain::Python.packages());
    run_step(pip, "pip install componentize-py").context(
        "pip could not install componentize-py from PyPI; check that the registry is reachable (pip honours HTTPS_PROXY and PIP_INDEX_URL), or install componentize-py yourself and set SKILLHOST_COMPONENTIZE_PY to it",
    )
}

/// componentize-js and jco under an npm prefix, from a package.json that pins them.
fn install_js(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dependencies: serde_json::Map<String, serde_json::Value> = Toolchain::Js
        .packages()
        .iter()
        .filter_map(|p| p.rsplit_once('@'))
        .map(|(name, version)| (name.to_owned(), version.into()))
        .collect();
    let package = serde_json::json!({
        "name": "skillhost-componentize-js",
        "private": true,
        "description": "installed by skillhost for `skillhost build` of JavaScript skills",
        "dependencies": dependencies,
    });
    std::fs::write(dir.join("package.json"), serde_json::to_string_pretty(&package)?)
        .with_context(|| format!("cannot write {}", dir.join("package.json").display()))?;
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-fund", "--no-audit", "--no-update-notifier", "--prefix"]).arg(dir);
    run_step(npm, "npm install componentize-js and jco").context(
        "npm could not install componentize-js; install Node.js 18 or newer with npm (Debian: apt-get install nodejs npm), check that the npm registry is reachable (npm honours HTTPS_PROXY), or install @bytecodealliance/componentize-js yourself and set SKILLHOST_COMPONENTIZE_JS to its componentize-js executable",
    )
}

/// The pinned undici under an npm prefix with `npm ci` from the lockfile the binary
/// holds (its integrity checked), beside the preload; no install scripts run.
fn install_node_fetch(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in node_fetch::FILES {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {}", dir.join(name).display()))?;
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--omit=dev", "--ignore-scripts", "--no-fund", "--no-audit", "--no-update-notifier", "--prefix"]).arg(dir);
    run_step(npm, &format!("npm ci {}", node_fetch::UNDICI)).context(
        "npm could not install undici for node's fetch in the sandbox; install Node.js with npm (Debian: apt-get install nodejs npm) and check that the npm registry is reachable (npm honours HTTPS_PROXY); until then a Node script's fetch in a networked sandbox reaches nothing",
    )
}

/// Run `command` behind a spinner that shows `what` and the command's latest output
/// line. On failure the error holds the last lines of its output.
pub fn run_step(mut command: Command, what: &str) -> Result<()> {
    let program = command.get_program().to_string_lossy().into_owned();
    let bar = spinner(what);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{program}`"))?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let readers: Vec<_> =
        [Box::new(child.stdout.take().expect("piped")) as Box<dyn std::io::Read + Send>, Box::new(child.stderr.take().expect("piped"))]
            .into_iter()
            .map(|pipe| {
                let tx = tx.clone();
                std::thread::spawn(move || BufReader::new(pipe).lines().map_while(Result::ok).try_for_each(|l| tx.send(l)))
            })
            .collect();
    drop(tx);
    let mut tail = VecDeque::new();
    for line in rx {
        let line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        bar.set_message(format!("{what}: {}", line.chars().take(60).collect::<String>()));
        if tail.len() == 12 {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    readers.into_iter().for_each(|r| drop(r.join()));
    let status = child.wait().with_context(|| format!("waiting for `{program}`"))?;
    bar.finish_and_clear();
    if !status.success() {
        let tail: Vec<String> = tail.into();
        bail!("`{program}` failed ({status}):\n  {}", tail.join("\n  "));
    }
    Ok(())
}

/// Write [`SKILL_WIT`] to `root/wit/skill.wit` (when it is not there already) and return
/// the directory, for toolchains that read the world from files.
pub fn wit_dir(root: &Path) -> Result<PathBuf> {
    let dir = root.join("wit");
    let file = dir.join("skill.wit");
    if std::fs::read_to_string(&file).is_ok_and(|text| text == SKILL_WIT) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Another build may be reading it: replace it whole.
    let tmp = dir.join(format!(".skill.wit.{}", std::process::id()));
    std::fs::write(&tmp, SKILL_WIT).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(dir)
}

/// The WIT a Python skill with network is built against: [`SKILL_WIT`], the world
/// `skill-http` (it plus `wasi:http`'s outgoing handler) and the WASI 0.2.12 packages it
/// needs, the versions the host implements.
const HTTP_WIT: [(&str, &str); 9] = [
    ("skill.wit", SKILL_WIT),
    ("skill-http.wit", include_str!("../wit-http/skill-http.wit")),
    ("deps/cli.wit", include_str!("../wit-http/deps/cli.wit")),
    ("deps/clocks.wit", include_str!("../wit-http/deps/clocks.wit")),
    ("deps/filesystem.wit", include_str!("../wit-http/deps/filesystem.wit")),
    ("deps/http.wit", include_str!("../wit-http/deps/http.wit")),
    ("deps/io.wit", include_str!("../wit-http/deps/io.wit")),
    ("deps/random.wit", include_str!("../wit-http/deps/random.wit")),
    ("deps/sockets.wit", include_str!("../wit-http/deps/sockets.wit")),
];

/// The world name of [`HTTP_WIT`].
pub const HTTP_WORLD: &str = "skill-http";

/// Write [`HTTP_WIT`] under `root` (once per version, whole) and return its directory.
pub fn wit_http_dir(root: &Path) -> Result<PathBuf> {
    crate::sdk::write_once(&root.join("wit-http"), "skill-http.wit", &HTTP_WIT)
}

/// `skillhost setup toolchains` options.
#[derive(Args, Default)]
pub struct SetupArgs {
    /// Which toolchains [default: all].
    #[arg(value_enum)]
    which: Vec<Toolchain>,
    /// Reinstall even when the stamp says they are up to date.
    #[arg(long)]
    force: bool,
}

/// Run `skillhost setup toolchains`.
pub fn setup(args: SetupArgs, data_dir: &Path) -> Result<()> {
    let root = root(data_dir);
    let mut which = if args.which.is_empty() { Toolchain::ALL.to_vec() } else { args.which };
    which.sort();
    which.dedup();
    for toolchain in which {
        let exe = ensure(toolchain, &root, args.force)?;
        errln!("{} ready: {}", toolchain.tool(), exe.display());
    }
    Ok(())
}
