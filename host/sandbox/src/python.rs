//! The managed Python runtime: one venv the host creates and reuses (in its data dir by
//! default), with the packages of `python-requirements.txt` (MCP, FastMCP and what the
//! bundled skills import), stamped with a hash of what was asked so a second setup is a no-op.
//!
//! The sandbox binds the venv and the Python prefix it was made from (`home` in
//! `pyvenv.cfg`) read-only at their own paths.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The requirements every managed venv holds.
pub const REQUIREMENTS: &str = include_str!("../python-requirements.txt");

/// The stamp file inside a venv: the hash of what it was set up with.
const STAMP: &str = ".skillhost-requirements";

/// A Python virtual environment the sandbox can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Venv {
    /// The venv's directory.
    pub dir: PathBuf,
    /// The prefix of the Python it was made from (bound read-only beside it).
    pub prefix: PathBuf,
}

/// Why the Python runtime is not usable or could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PythonError {
    /// The venv does not exist or is broken.
    #[error("{}: not a usable Python venv ({reason}); run `skillhost setup python`", dir.display())]
    NoVenv {
        /// The venv's directory.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A setup step failed.
    #[error("python setup failed: {step}: {reason}")]
    Setup {
        /// What was being done.
        step: String,
        /// What went wrong, with the tail of its output.
        reason: String,
    },
}

/// How `python -m pip install` failed (see [`pip_install`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipError {
    /// It did not start.
    #[error("cannot run {} -m pip: {source}", python.display())]
    Start {
        /// The Python.
        python: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    #[error("pip did not finish: {0}")]
    Wait(#[source] std::io::Error),
    /// It failed: the tail of its output.
    #[error("{0}")]
    Failed(String),
}

impl Venv {
    /// Open the venv at `dir`: read its `pyvenv.cfg` and find the Python prefix.
    pub fn open(dir: &Path) -> Result<Self, PythonError> {
        let bad = |reason: String| PythonError::NoVenv { dir: dir.to_owned(), reason };
        let dir = std::fs::canonicalize(dir).map_err(|e| bad(e.to_string()))?;
        let cfg = std::fs::read_to_string(dir.join("pyvenv.cfg")).map_err(|e| bad(format!("pyvenv.cfg: {e}")))?;
        let home = cfg
            .lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == "home")
            .map(|(_, v)| PathBuf::from(v.trim()))
            .ok_or_else(|| bad("pyvenv.cfg has no `home`".into()))?;
        if let Some(made_at) = made_at(&dir).filter(|made| std::fs::canonicalize(made).ok().as_ref() != Some(&dir)) {
            return Err(bad(format!(
                "it was made at {} and copied or moved here, and its scripts still name that path; remove it and run `skillhost setup python` again",
                made_at.display()
            )));
        }
        let python = dir.join("bin/python");
        let exe = std::fs::canonicalize(&python).map_err(|e| bad(format!("{}: {e}", python.display())))?;
        // `home` is the prefix's bin/; the interpreter must live under the same prefix.
        let prefix = home.parent().map(Path::to_owned).ok_or_else(|| bad("`home` has no parent".into()))?;
        let prefix = std::fs::canonicalize(&prefix).unwrap_or(prefix);
        let prefix = if exe.starts_with(&prefix) {
            prefix
        } else {
            exe.parent().and_then(Path::parent).map(Path::to_owned).ok_or_else(|| bad("odd interpreter path".into()))?
        };
        Ok(Self { dir, prefix })
    }

    /// The venv's interpreter.
    pub fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }

    /// What the venv holds, as a line that changes when its packages do: its setup stamp
    /// and the modification time of each `lib/*/site-packages` (installing, upgrading or
    /// removing a package adds or removes an entry there).
    pub fn contents_stamp(&self) -> String {
        let mut stamp = std::fs::read_to_string(self.dir.join(STAMP)).unwrap_or_default().trim().to_owned();
        let mut libs: Vec<PathBuf> = std::fs::read_dir(self.dir.join("lib"))
            .map(|entries| entries.filter_map(Result::ok).map(|e| e.path().join("site-packages")).collect())
            .unwrap_or_default();
        libs.sort();
        for lib in libs {
            if let Ok(modified) = std::fs::metadata(&lib).and_then(|m| m.modified()) {
                stamp.push_str(&format!(" {}@{:?}", lib.display(), modified));
            }
        }
        stamp
    }
}

/// Where the venv at `dir` was made, as its `bin/activate` records it
/// (`VIRTUAL_ENV=...`): the `#!` lines of its scripts name that path, so a venv copied or
/// moved elsewhere cannot run them.
fn made_at(dir: &Path) -> Option<PathBuf> {
    let activate = std::fs::read_to_string(dir.join("bin/activate")).ok()?;
    activate.lines().find_map(|l| l.trim().strip_prefix("VIRTUAL_ENV=")).map(|v| PathBuf::from(v.trim().trim_matches(['"', '\''])))
}

/// What [`setup`] is doing, for a progress bar.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetupEvent {
    /// The venv is up to date; nothing to do.
    UpToDate,
    /// Creating the venv.
    Creating,
    /// pip is working through the requirements: `done` of `total` top-level packages
    /// seen, and its latest line.
    Installing {
        /// Top-level requirements handled so far.
        done: u64,
        /// Top-level requirements in all.
        total: u64,
        /// pip's latest output line.
        line: String,
    },
    /// Finished.
    Done,
}

/// What to set up.
#[derive(Clone, Debug)]
pub struct SetupOptions {
    /// The venv's directory.
    pub venv: PathBuf,
    /// Packages beyond [`REQUIREMENTS`] (e.g. `mcp-server-time`).
    pub extra: Vec<String>,
    /// The Python that creates the venv. Default: `python3` on `PATH`.
    pub python: PathBuf,
    /// Reinstall even when the stamp matches.
    pub force: bool,
}

impl SetupOptions {
    /// Set up `venv` with the standard requirements.
    pub fn new(venv: impl Into<PathBuf>) -> Self {
        Self { venv: venv.into(), extra: Vec::new(), python: "python3".into(), force: false }
    }

    /// Every requirement line: the standard ones, then the extras.
    fn requirements(&self) -> Vec<String> {
        let mut reqs: Vec<String> =
            REQUIREMENTS.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect();
        let mut extra = self.extra.clone();
        extra.sort();
        extra.dedup();
        reqs.extend(extra.into_iter().filter(|e| !reqs.contains(e)).collect::<Vec<_>>());
        reqs
    }

    /// The hash stamped into the venv.
    pub fn stamp(&self) -> String {
        hex::encode(Sha256::digest(self.requirements().join("\n")))
    }
}

/// Whether the venv at `options.venv` is set up with exactly these requirements.
pub fn up_to_date(options: &SetupOptions) -> bool {
    Venv::open(&options.venv).is_ok() && std::fs::read_to_string(options.venv.join(STAMP)).is_ok_and(|s| s.trim() == options.stamp())
}

/// Create (or reuse) the venv and install the requirements, reporting progress. A venv
/// whose stamp matches is left alone; an existing venv without a matching stamp (made by
/// hand, or by an older requirements file) is reused and topped up by pip, which skips
/// what is already installed.
pub async fn setup(options: &SetupOptions, progress: impl Fn(SetupEvent)) -> Result<Venv, PythonError> {
    if !options.force && up_to_date(options) {
        progress(SetupEvent::UpToDate);
        return Venv::open(&options.venv);
    }
    let fail = |step: &str, reason: String| PythonError::Setup { step: step.to_owned(), reason };
    // A venv this setup made (it holds our stamp) that was since copied or moved is made
    // again: its scripts name the old path. One made by hand is the user's to remove.
    let stamped = options.venv.join(STAMP).is_file();
    if stamped && made_at(&options.venv).is_some() && Venv::open(&options.venv).is_err() {
        progress(SetupEvent::Creating);
        std::fs::remove_dir_all(&options.venv).map_err(|e| fail("removing a venv moved from elsewhere", e.to_string()))?;
    }
    if Venv::open(&options.venv).is_err() {
        progress(SetupEvent::Creating);
        let out = tokio::process::Command::new(&options.python).args(["-m", "venv"]).arg(&options.venv).output().await.map_err(|e| {
            fail(&format!("running `{} -m venv`", options.python.display()), format!("{e}; install Python 3.10 or newer, or pass its path"))
        })?;
        if !out.status.success() {
            return Err(fail("creating the venv", tail(&String::from_utf8_lossy(&out.stderr))));
        }
    }
    let venv = Venv::open(&options.venv)?;
    let reqs = options.requirements();
    let total = reqs.len() as u64;
    let args: Vec<std::ffi::OsString> = reqs.iter().map(Into::into).collect();
    pip_install(&venv.python(), &args, &reqs, |done, line| progress(SetupEvent::Installing { done, total, line: line.to_owned() }))
        .await
        .map_err(|e| fail("pip install", e.to_string()))?;
    std::fs::write(options.venv.join(STAMP), options.stamp()).map_err(|e| fail("writing the stamp", e.to_string()))?;
    progress(SetupEvent::Done);
    Ok(venv)
}

/// Run `python -m pip install ARGS` with its output streamed: `progress(done, line)` for
/// every line, `done` counting how many of `packages` pip has named so far (collected or
/// already satisfied). On failure, the tail of pip's output.
pub async fn pip_install(
    python: &Path,
    args: &[std::ffi::OsString],
    packages: &[String],
    progress: impl Fn(u64, &str),
) -> Result<(), PipError> {
    let names: Vec<String> = packages.iter().map(|r| normalise(r)).collect();
    let mut child = tokio::process::Command::new(python)
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| PipError::Start { python: python.to_owned(), source })?;
    let stderr = child.stderr.take().expect("piped");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let mut seen = std::collections::BTreeSet::new();
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut output = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        output.push_str(&line);
        output.push('\n');
        let mentioned = ["Collecting ", "Requirement already satisfied: "].iter().find_map(|p| line.trim().strip_prefix(p)).map(normalise);
        if let Some(name) = mentioned
            && names.contains(&name)
        {
            seen.insert(name);
        }
        progress(seen.len() as u64, line.trim());
    }
    let status = child.wait().await.map_err(PipError::Wait)?;
    let errors = errors.await.unwrap_or_default();
    if status.success() { Ok(()) } else { Err(PipError::Failed(tail(&format!("{output}{errors}")))) }
}

/// A package name as pip prints it, normalised (`Pillow>=10` → `pillow`).
fn normalise(requirement: &str) -> String {
    requirement
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
        .replace('_', "-")
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_copied_from_elsewhere_is_refused() {
        let made = tempfile::tempdir().unwrap();
        let dir = made.path().join("venv");
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", dir.join("bin/python")).unwrap();
        let activate = |at: &Path| {
            std::fs::write(dir.join("bin/activate"), format!("# comment\nVIRTUAL_ENV=\"{}\"\nexport VIRTUAL_ENV\n", at.display())).unwrap()
        };
        activate(&dir);
        assert_eq!(made_at(&dir), Some(dir.clone()));
        if Path::new("/usr/bin/python3").exists() {
            Venv::open(&dir).expect("a venv where it was made opens");
        }
        activate(Path::new("/work/elsewhere/venv"));
        let err = Venv::open(&dir).unwrap_err().to_string();
        assert!(err.contains("made at /work/elsewhere/venv and copied or moved here"), "{err}");
        assert!(err.contains("skillhost setup python"), "{err}");
    }

    #[test]
    fn the_contents_stamp_changes_when_a_package_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("lib/python3.11/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        let venv = Venv { dir: dir.path().to_owned(), prefix: "/usr".into() };
        let before = venv.contents_stamp();
        assert_eq!(before, venv.contents_stamp(), "the same venv, the same stamp");
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(site.join("newpkg-1.0.dist-info")).unwrap();
        assert_ne!(before, venv.contents_stamp(), "installing a package left the stamp alone");
    }

    #[test]
    fn stamp_follows_requirements() {
        let a = SetupOptions::new("/v");
        let mut b = SetupOptions::new("/v");
        b.extra = vec!["mcp-server-time".into()];
        assert_ne!(a.stamp(), b.stamp());
        let mut c = b.clone();
        c.extra.push("mcp-server-time".into());
        assert_eq!(b.stamp(), c.stamp(), "duplicates do not change it");
        assert!(a.requirements().contains(&"fastmcp".to_owned()));
        assert_eq!(normalise("Pillow>=10"), "pillow");
        assert_eq!(normalise("beautifulsoup4 in ./x (4.15)"), "beautifulsoup4");
    }
}
