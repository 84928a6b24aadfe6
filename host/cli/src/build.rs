//! `skillhost build`: compile a skill crate for wasm32-wasip2 with cargo, embed its
//! skill.toml and SKILL.md, write one self-describing `.wasm`, and load it once to check it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use skillhost::{ByteSize, Host, SkillManifest, package};

const TARGET: &str = "wasm32-wasip2";

fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    bar.enable_steady_tick(Duration::from_millis(100));
    bar.set_message(message.to_owned());
    bar
}

/// Make sure rustup has the wasm32-wasip2 target, adding it when missing.
pub fn ensure_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("cannot run `rustup`; install Rust with rustup, or add the wasm32-wasip2 target to your toolchain")?;
    if String::from_utf8_lossy(&installed.stdout).lines().any(|l| l.trim() == TARGET) {
        return Ok(());
    }
    let bar = spinner("adding the wasm32-wasip2 target with rustup");
    let out = Command::new("rustup").args(["target", "add", TARGET]).output().context("cannot run `rustup target add`")?;
    bar.finish_and_clear();
    if !out.status.success() {
        bail!("`rustup target add {TARGET}` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    eprintln!("added the {TARGET} target");
    Ok(())
}

/// Build the skill crate in `dir` and write the packaged skill.
pub async fn build(host: &Host, dir: &Path, out: Option<&Path>) -> Result<()> {
    let manifest_path = dir.join("skill.toml");
    let cargo_toml = dir.join("Cargo.toml");
    if !cargo_toml.is_file() {
        bail!("{}: no Cargo.toml; `skillhost build` builds a Rust skill crate (create one with `skillhost new NAME`)", dir.display());
    }
    // Check the manifest before spending a compile on it.
    let manifest = SkillManifest::from_file(&manifest_path)?;
    ensure_target()?;
    let wasm = cargo_build(&cargo_toml)?;

    let component = std::fs::read(&wasm).with_context(|| format!("cannot read the built component {}", wasm.display()))?;
    let toml = std::fs::read(&manifest_path)?;
    let md_path = dir.join("SKILL.md");
    let md = if md_path.is_file() { Some(std::fs::read(&md_path)?) } else { None };
    let mut sections: Vec<(&str, &[u8])> = vec![(package::MANIFEST_SECTION, &toml)];
    if let Some(md) = &md {
        sections.push((package::INSTRUCTIONS_SECTION, md));
    }
    let packaged = package::embed(&component, &sections)
        .with_context(|| format!("{}: cargo produced something that is not a component", wasm.display()))?;

    let out = out.map(Path::to_path_buf).unwrap_or_else(|| dir.join("skill.wasm"));
    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, &packaged).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;

    // Load the result once: catches a wrong world or bad tool schemas now, not at first use,
    // and fills the compiled cache.
    let bar = spinner("compiling the component to check it");
    let loaded = host.load_path(&out).await;
    bar.finish_and_clear();
    let loaded = loaded.with_context(|| format!("built {}, but it does not load", out.display()))?;
    eprintln!(
        "built {} ({}, skill `{}` {}, tools: {})",
        out.display(),
        ByteSize(packaged.len() as u64),
        manifest.name,
        manifest.version,
        loaded.skill.tools().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// Run cargo and return the path of the cdylib `.wasm` it produced for this package.
fn cargo_build(cargo_toml: &Path) -> Result<PathBuf> {
    let bar = spinner("cargo build --release --target wasm32-wasip2");
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics", "--manifest-path"])
        .arg(cargo_toml)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run cargo; is the Rust toolchain installed?")?;

    let stderr = child.stderr.take().expect("piped");
    let stderr_bar = bar.clone();
    let stderr_thread = std::thread::spawn(move || {
        let mut diagnostics = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix("Compiling ") {
                stderr_bar.set_message(format!("compiling {rest}"));
            } else if !trimmed.starts_with("Finished") && !trimmed.starts_with("Downloaded") && !trimmed.starts_with("Downloading") {
                diagnostics.push_str(&line);
                diagnostics.push('\n');
            }
        }
        diagnostics
    });

    let manifest_path = std::fs::canonicalize(cargo_toml)?;
    let mut artifact = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines().map_while(Result::ok) {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let ours = message["manifest_path"].as_str().is_some_and(|p| Path::new(p) == manifest_path);
        let cdylib = message["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib"));
        if ours && cdylib {
            artifact = message["filenames"]
                .as_array()
                .and_then(|f| f.iter().filter_map(|f| f.as_str()).find(|f| f.ends_with(".wasm")))
                .map(PathBuf::from);
        }
    }
    let status = child.wait()?;
    bar.finish_and_clear();
    let diagnostics = stderr_thread.join().unwrap_or_default();
    if !status.success() {
        eprint!("{diagnostics}");
        bail!("cargo build failed for {}; fix the errors above and run `skillhost build` again", cargo_toml.display());
    }
    artifact.with_context(|| {
        format!(
            "{} built no cdylib; a skill crate needs `[lib] crate-type = [\"cdylib\"]` in Cargo.toml",
            cargo_toml.display()
        )
    })
}
