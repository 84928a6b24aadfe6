//! `skillhost build`: turn a skill's sources into a component of our world (a Rust crate
//! with cargo for wasm32-wasip2, a Python `app.py` with componentize-py, a JavaScript
//! `skill.js` with componentize-js), embed its skill.toml and SKILL.md, write one
//! self-describing `.wasm`, and load it once to check it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use skillhost::{Host, skill::ByteSize, skill::SkillManifest};

use crate::app::App;
use crate::toolchain::{self, Toolchain};

const TARGET: &str = "wasm32-wasip2";

/// The language a skill is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// A Rust crate on the skillhost-sdk (`Cargo.toml`).
    Rust,
    /// A Python module `app.py` with a `Guest` class (componentize-py).
    Python,
    /// A JavaScript module `skill.js` exporting `guest` (componentize-js).
    Js,
}

impl Lang {
    /// The language of the skill in `dir`, from the file that holds its code.
    pub fn detect(dir: &Path) -> Result<Self> {
        let found = [(Self::Rust, "Cargo.toml"), (Self::Python, "app.py"), (Self::Js, "skill.js")]
            .into_iter()
            .filter(|(_, file)| dir.join(file).is_file())
            .map(|(lang, _)| lang)
            .collect::<Vec<_>>();
        match found[..] {
            [lang] => Ok(lang),
            [] => bail!(
                "{}: no Cargo.toml, app.py or skill.js; `skillhost build` builds a Rust crate, a Python app.py or a JavaScript skill.js beside a skill.toml (create one with `skillhost new NAME --lang rust|python|js`)",
                dir.display()
            ),
            _ => bail!("{}: more than one of Cargo.toml, app.py and skill.js; keep the one the skill is written with", dir.display()),
        }
    }
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
    let bar = crate::app::progress_spinner("adding the wasm32-wasip2 target with rustup");
    let out = Command::new("rustup").args(["target", "add", TARGET]).output().context("cannot run `rustup target add`")?;
    bar.finish_and_clear();
    if !out.status.success() {
        bail!("`rustup target add {TARGET}` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    errln!("added the {TARGET} target");
    Ok(())
}

/// The options of `build`.
#[derive(clap::Args)]
#[command(after_help = "The language comes from what DIR holds beside skill.toml:
  Cargo.toml  cargo build --release --target wasm32-wasip2 (adding the target with rustup)
  app.py      componentize-py against the skillhost:skill world (class Guest)
  skill.js    componentize-js against the world (export const guest); without a
              [network] section in skill.toml it is built without wasi:http
componentize-py (PyPI) and componentize-js (npm) are installed into
DATA_DIR/toolchains on first use (see `skillhost setup toolchains`). Then skill.toml
and SKILL.md are embedded into the component, DIR/skill.wasm is written and loaded once
to check it (a Python or JavaScript component takes several seconds to compile the
first time; later loads come from the compiled cache).

Environment:
  SKILLHOST_TOOLCHAINS        where toolchains are installed [default: DATA_DIR/toolchains]
  SKILLHOST_COMPONENTIZE_PY   a componentize-py executable to use instead
  SKILLHOST_COMPONENTIZE_JS   a componentize-js executable to use instead

Examples:
  cd word-tools && skillhost build     build the skill in the current directory
  skillhost build word-tools --out ~/word-tools.wasm
  skillhost new words-py --lang python && skillhost build words-py")]
pub struct BuildArgs {
    /// The skill's folder (skill.toml beside Cargo.toml, app.py or skill.js).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Where to write the skill [default: DIR/skill.wasm].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Build the skill with the toolchains and the SDK of the data dir.
pub async fn run(app: &App, args: BuildArgs) -> Result<ExitCode> {
    let host = app.host()?;
    build(&host, &app.data_dir, &args.dir, args.out.as_deref()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Build the skill in `dir` and write the packaged skill; toolchains for Python and
/// JavaScript are installed under `data_dir` on first use, and a Rust skill that asks for
/// the SDK by version gets the one this binary carries, written out there.
async fn build(host: &Host, data_dir: &Path, dir: &Path, out: Option<&Path>) -> Result<()> {
    let toolchains = &toolchain::root(data_dir);
    let lang = Lang::detect(dir)?;
    // Read the manifest and SKILL.md once (no links, size caps): checked before spending
    // a compile, and the same bytes packaged after it.
    let manifest_path = dir.join("skill.toml");
    let toml = skillhost_package::read_file(&manifest_path, skillhost::skill::MAX_MANIFEST_BYTES as u64)?;
    let manifest = SkillManifest::parse_bytes(&toml, &manifest_path)?;
    let md = match skillhost_package::read_file(&dir.join("SKILL.md"), skillhost_package::SizeLimits::default().text_file) {
        Ok(md) => Some(md),
        Err(skillhost_package::ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| dir.join("skill.wasm"));
    let built = match lang {
        Lang::Rust => {
            ensure_target()?;
            let cargo_toml = dir.join("Cargo.toml");
            let patch = if sdk_by_version(&cargo_toml)? { crate::sdk::patch_args(data_dir)?.to_vec() } else { Vec::new() };
            cargo_build(&cargo_toml, &patch)?
        }
        Lang::Python | Lang::Js => componentize(lang, toolchains, dir, &manifest, &out)?,
    };
    let component = std::fs::read(&built).with_context(|| format!("cannot read the built component {}", built.display()));
    if lang != Lang::Rust {
        let _ = std::fs::remove_file(&built);
    }
    let component = component?;

    // The same packaging the forge does for agents' skills.
    let packaged = skillhost_package::pack(&component, &toml, md.as_deref())
        .with_context(|| format!("{}: the {lang:?} toolchain produced something that is not a component", built.display()))?;

    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, &packaged).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;

    // Load the result once: catches a wrong world or bad tool schemas now, not at first use,
    // and fills the compiled cache.
    let bar = crate::app::progress_spinner(match lang {
        Lang::Rust => "compiling the component to check it",
        // Their components carry an interpreter: 12-18 MB of code to compile once.
        Lang::Python | Lang::Js => "compiling the component to check it (the interpreter inside takes a while, once)",
    });
    let loaded = host.load_path(&out).await;
    bar.finish_and_clear();
    let loaded = loaded.with_context(|| format!("built {}, but it does not load", out.display()))?;
    errln!(
        "built {} ({}, skill `{}` {}, tools: {})",
        out.display(),
        ByteSize(packaged.len() as u64),
        manifest.name,
        manifest.version,
        loaded.skill.tools().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// Run componentize-py or componentize-js on the skill in `dir` against our world and
/// return the component it wrote (beside `out`, for the caller to remove).
fn componentize(lang: Lang, toolchains: &Path, dir: &Path, manifest: &SkillManifest, out: &Path) -> Result<PathBuf> {
    let toolchain = if lang == Lang::Python { Toolchain::Python } else { Toolchain::Js };
    let exe = toolchain::ensure(toolchain, toolchains, false)?;
    let wit = toolchain::wit_dir(toolchains)?;
    let built = std::path::absolute(out.with_extension("component.tmp"))?;
    let mut command = std::process::Command::new(&exe);
    command.current_dir(dir);
    match lang {
        Lang::Python => {
            // A skill that asks for hosts gets the world with wasi:http (the SDK's `http`);
            // the host refuses that import from any other.
            let (wit, world) =
                if manifest.network.is_empty() { (wit, "skill") } else { (toolchain::wit_http_dir(toolchains)?, toolchain::HTTP_WORLD) };
            // The skill's folder first (a skill may ship its own packages), then the SDK.
            let sdk = crate::sdk::python_sdk(toolchains)?;
            command.arg("-d").arg(&wit).args(["-w", world, "componentize", "app", "-p", "."]).arg("-p").arg(&sdk).arg("-o").arg(&built);
            // Keep __pycache__ out of the skill's folder.
            command.env("PYTHONDONTWRITEBYTECODE", "1");
        }
        Lang::Js => {
            crate::sdk::write_js_sdk(dir, !manifest.network.is_empty())?;
            command.arg("skill.js").arg("--wit").arg(&wit).args(["--world-name", "skill", "-o"]).arg(&built);
            // StarlingMonkey links wasi:http for fetch(); only a skill granted network may
            // import it (behind the egress gate), so the others are built without it.
            if manifest.network.is_empty() {
                command.args(["--disable", "http", "fetch-event"]);
            }
        }
        Lang::Rust => unreachable!("cargo builds Rust skills"),
    }
    let source = if lang == Lang::Python { "app.py" } else { "skill.js" };
    toolchain::run_step(command, &format!("{} {source}", toolchain.tool())).with_context(|| {
        format!("{} could not build {} (fix what it reports and run `skillhost build` again)", toolchain.tool(), dir.join(source).display())
    })?;
    Ok(built)
}

/// Whether the crate at `cargo_toml` asks for the SDK by version from crates.io
/// (`skillhost-sdk = "0.1"`, as `skillhost new` writes), not by a path, a git repository,
/// another registry or its workspace. Only then is the SDK patched in: a patch cargo does
/// not use would be recorded in the skill's (or its workspace's) Cargo.lock.
fn sdk_by_version(cargo_toml: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(cargo_toml).with_context(|| format!("cannot read {}", cargo_toml.display()))?;
    // A manifest that does not parse is cargo's to report.
    let Ok(manifest) = text.parse::<toml::Table>() else { return Ok(false) };
    Ok(match manifest.get("dependencies").and_then(|d| d.get("skillhost-sdk")) {
        Some(toml::Value::String(_)) => true,
        Some(toml::Value::Table(dependency)) => {
            dependency.contains_key("version") && !["path", "git", "workspace", "registry"].iter().any(|key| dependency.contains_key(*key))
        }
        _ => false,
    })
}

/// Run cargo (with `extra` arguments) and return the path of the cdylib `.wasm` it produced
/// for this package.
fn cargo_build(cargo_toml: &Path, extra: &[String]) -> Result<PathBuf> {
    let bar = crate::app::progress_spinner("cargo build --release --target wasm32-wasip2");
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics"])
        .args(extra)
        .arg("--manifest-path")
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
        err!("{diagnostics}");
        bail!("cargo build failed for {}; fix the errors above and run `skillhost build` again", cargo_toml.display());
    }
    artifact.with_context(|| {
        format!("{} built no cdylib; a skill crate needs `[lib] crate-type = [\"cdylib\"]` in Cargo.toml", cargo_toml.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a crates.io requirement is patched: a path, git, workspace or other registry
    /// dependency is left to cargo as written.
    #[test]
    fn only_a_version_requirement_gets_the_embedded_sdk() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("Cargo.toml");
        for (dependency, patched) in [
            ("skillhost-sdk = \"0.1\"", true),
            ("skillhost-sdk = { version = \"0.1\", default-features = false }", true),
            ("skillhost-sdk = { path = \"/home/ada/sdk\" }", false),
            ("skillhost-sdk = { version = \"0.1\", path = \"../sdk\" }", false),
            ("skillhost-sdk = { git = \"https://example.com/sdk\" }", false),
            ("skillhost-sdk = { version = \"0.1\", registry = \"mine\" }", false),
            ("skillhost-sdk.workspace = true", false),
            ("serde = \"1\"", false),
        ] {
            std::fs::write(&manifest, format!("[package]\nname = \"x\"\n\n[dependencies]\n{dependency}\n")).unwrap();
            assert_eq!(sdk_by_version(&manifest).unwrap(), patched, "{dependency}");
        }
        std::fs::write(&manifest, "not toml [").unwrap();
        assert!(!sdk_by_version(&manifest).unwrap());
    }
}
