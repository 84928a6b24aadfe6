//! The Rust guest SDK this binary was built with (`guest-sdk/`, `wit/` and the workspace
//! manifest they inherit from), embedded in the binary and written out, once per SDK
//! version, to `DATA_DIR/sdk/<hash>/` when `new` or the forge need its sources. So an
//! installed binary works from any directory with nothing of the checkout it was built
//! from; `--sdk`/`SKILLHOST_SDK` (for `new`) and `SKILLHOST_SDK_WORKSPACE` (for the forge)
//! still point at a checkout of your own.
//!
//! A Rust skill `new` writes asks for the SDK by version ([`requirement`]:
//! `skillhost-sdk = "0.1"`), not by a path on the machine that made it, so a clone of the
//! skill builds wherever skillhost is installed: `skillhost build` hands cargo this SDK in
//! place of crates.io's ([`patch_args`]), and the forge points the build's copy of the
//! manifest at the SDK in its sandbox.
//!
//! The Python and JavaScript guest SDKs are embedded too. `skillhost build` hands the
//! Python package `skillhost` (`guest-sdk/python/skillhost/`) to componentize-py as a
//! search path ([`python_sdk`], written once per version under the toolchains folder),
//! and writes the JavaScript module (`guest-sdk/js/`) beside a skill's `skill.js`
//! ([`write_js_sdk`]), where componentize-js resolves the import `./skillhost.js` itself.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Every file of the SDK, by its path in the checkout. A unit test checks this list
/// against the checkout, so a file added to the SDK cannot be left out.
const FILES: &[(&str, &str)] = &[
    ("guest-sdk/Cargo.toml", include_str!("../../../guest-sdk/Cargo.toml")),
    ("guest-sdk/macros/Cargo.toml", include_str!("../../../guest-sdk/macros/Cargo.toml")),
    ("guest-sdk/macros/src/lib.rs", include_str!("../../../guest-sdk/macros/src/lib.rs")),
    ("guest-sdk/macros/src/shadow.rs", include_str!("../../../guest-sdk/macros/src/shadow.rs")),
    ("guest-sdk/src/bindings.rs", include_str!("../../../guest-sdk/src/bindings.rs")),
    ("guest-sdk/src/error.rs", include_str!("../../../guest-sdk/src/error.rs")),
    ("guest-sdk/src/files.rs", include_str!("../../../guest-sdk/src/files.rs")),
    ("guest-sdk/src/http.rs", include_str!("../../../guest-sdk/src/http.rs")),
    ("guest-sdk/src/http/backend.rs", include_str!("../../../guest-sdk/src/http/backend.rs")),
    ("guest-sdk/src/lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
    ("guest-sdk/src/log.rs", include_str!("../../../guest-sdk/src/log.rs")),
    ("guest-sdk/src/private.rs", include_str!("../../../guest-sdk/src/private.rs")),
    ("wit/skill.wit", include_str!("../../../wit/skill.wit")),
];

/// The checkout's root manifest: the SDK's crates inherit their edition, lints and
/// dependency versions from its `[workspace]`.
const ROOT_MANIFEST: &str = include_str!("../../../Cargo.toml");

/// The directory holding the embedded SDK's workspace (`Cargo.toml`, `guest-sdk/`,
/// `wit/`) under `data_dir`, written out first if this SDK version is not there yet.
/// The directory is named by the hash of its contents and made complete in a scratch
/// directory beside it before it takes that name, so it is either whole or absent.
pub fn workspace(data_dir: &Path) -> Result<PathBuf> {
    let manifest = skillhost::forge::sdk_workspace_manifest(ROOT_MANIFEST)?;
    let files: Vec<(&str, &str)> = std::iter::once(("Cargo.toml", manifest.as_str())).chain(FILES.iter().copied()).collect();
    write_once(&data_dir.join("sdk"), "Cargo.toml", &files)
}

/// The version requirement a skill's Cargo.toml names the SDK by: `MAJOR.MINOR` of the SDK
/// this binary carries (the version of the WIT package it implements), e.g. `0.1`.
pub fn requirement() -> Result<String> {
    let manifest =
        FILES.iter().find(|(path, _)| *path == "guest-sdk/Cargo.toml").map(|(_, text)| *text).context("no SDK manifest embedded")?;
    let manifest: toml::Table = manifest.parse().context("the embedded SDK's Cargo.toml does not parse")?;
    let version = manifest.get("package").and_then(|p| p.get("version")).and_then(toml::Value::as_str);
    let parts: Vec<&str> = version.unwrap_or_default().split('.').collect();
    match parts[..] {
        [major, minor, _] => Ok(format!("{major}.{minor}")),
        _ => anyhow::bail!("the embedded SDK's Cargo.toml has no `version = \"MAJOR.MINOR.PATCH\"` (found {version:?})"),
    }
}

/// The arguments that make cargo take `skillhost-sdk` from the SDK this binary carries
/// (written out under `data_dir`) instead of crates.io: `--config` with a
/// `[patch.crates-io]` entry, so nothing is written into the skill's folder and nothing is
/// fetched for it.
pub fn patch_args(data_dir: &Path) -> Result<[String; 2]> {
    let sdk = std::path::absolute(workspace(data_dir)?.join("guest-sdk"))?;
    let path = sdk.to_str().with_context(|| format!("the SDK's path {} is not UTF-8; choose a data dir whose path is", sdk.display()))?;
    Ok(["--config".to_owned(), format!("patch.crates-io.skillhost-sdk.path = {}", toml::Value::from(path))])
}

/// `files` (path, text) written under `root` in a folder named by their version and hash,
/// unless a complete one is there (its `marker` file exists); written into a scratch
/// folder and renamed, so a reader never sees half of it. Returns the folder.
pub fn write_once(root: &Path, marker: &str, files: &[(&str, &str)]) -> Result<PathBuf> {
    let mut hasher = Sha256::new();
    for (path, text) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(text.len().to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let dir = root.join(format!("{}-{}", env!("CARGO_PKG_VERSION"), &format!("{:x}", hasher.finalize())[..16]));
    if dir.join(marker).is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix(".writing-")
        .tempdir_in(root)
        .with_context(|| format!("cannot write the SDK's sources into {}", root.display()))?;
    for (path, text) in files {
        let file = scratch.path().join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    match std::fs::rename(scratch.path(), &dir) {
        Ok(()) => {
            // The directory has its name now: nothing left for the guard to remove.
            let _ = scratch.keep();
            Ok(dir)
        }
        // Another process wrote the same version first: its copy is as good as ours.
        Err(_) if dir.join(marker).is_file() => Ok(dir),
        Err(e) => Err(e).with_context(|| format!("cannot move the SDK's sources into {}", dir.display())),
    }
}

/// The JavaScript guest SDK: the module a skill imports, and the one its Node tests import
/// first (it stands in for the host interface, which exists only inside a component).
const JS_SDK: [(&str, &str); 2] = [
    ("skillhost.js", include_str!("../../../guest-sdk/js/skillhost.js")),
    ("skillhost-native.js", include_str!("../../../guest-sdk/js/skillhost-native.js")),
];

/// The Python guest SDK, the package `skillhost` (pure Python), by its path in the package.
const PY_SDK: [(&str, &str); 8] = [
    ("skillhost/__init__.py", include_str!("../../../guest-sdk/python/skillhost/__init__.py")),
    ("skillhost/_runtime.py", include_str!("../../../guest-sdk/python/skillhost/_runtime.py")),
    ("skillhost/_schema.py", include_str!("../../../guest-sdk/python/skillhost/_schema.py")),
    ("skillhost/_tool.py", include_str!("../../../guest-sdk/python/skillhost/_tool.py")),
    ("skillhost/errors.py", include_str!("../../../guest-sdk/python/skillhost/errors.py")),
    ("skillhost/files.py", include_str!("../../../guest-sdk/python/skillhost/files.py")),
    ("skillhost/http.py", include_str!("../../../guest-sdk/python/skillhost/http.py")),
    ("skillhost/log.py", include_str!("../../../guest-sdk/python/skillhost/log.py")),
];

/// The folder holding the Python SDK's package `skillhost`, for componentize-py's `-p`:
/// written once per SDK version under `root` (`TOOLCHAINS/python-sdk/VERSION-HASH`),
/// whole or not at all.
pub fn python_sdk(root: &Path) -> Result<PathBuf> {
    write_once(&root.join("python-sdk"), "skillhost/__init__.py", &PY_SDK)
}

/// What the first line of every file of the JavaScript SDK says: a file of that name
/// without it is the author's own, never overwritten.
const JS_SDK_MARK: &str = "skillhost JavaScript guest SDK";

/// The line of `skillhost.js` that says whether `fetch()` is linked: a skill built without
/// network has a `fetch` that traps, so the SDK must know not to call it.
const JS_NETWORK_LINE: &str = "const NETWORK_LINKED = true;";

/// Write the JavaScript SDK beside the skill in `dir` for componentize-js (`network`: the
/// skill's manifest asks for hosts, so `fetch()` is linked). A file of the same name that
/// is not the SDK's is the author's, and refused rather than overwritten.
pub fn write_js_sdk(dir: &Path, network: bool) -> Result<()> {
    for (name, text) in JS_SDK {
        let path = dir.join(name);
        if let Ok(existing) = std::fs::read_to_string(&path)
            && !first_line_marks(&existing)
        {
            anyhow::bail!(
                "{} is not the skillhost SDK (its first line does not say `{JS_SDK_MARK}`); rename your file: `skillhost build` writes the SDK there",
                path.display()
            );
        }
        let text = if name == "skillhost.js" && !network {
            anyhow::ensure!(text.contains(JS_NETWORK_LINE), "the embedded JavaScript SDK lacks `{JS_NETWORK_LINE}`");
            text.replace(JS_NETWORK_LINE, "const NETWORK_LINKED = false;")
        } else {
            text.to_owned()
        };
        std::fs::write(&path, text).with_context(|| format!("cannot write the JavaScript SDK to {}", path.display()))?;
    }
    Ok(())
}

/// Whether `text`'s first line names the JavaScript SDK.
fn first_line_marks(text: &str) -> bool {
    text.lines().next().is_some_and(|line| line.starts_with("//") && line.contains(JS_SDK_MARK))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded list is the SDK as it is in the checkout: every file, and each the
    /// same.
    #[test]
    fn every_file_of_the_sdk_is_embedded() {
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut on_disk = Vec::new();
        for top in ["guest-sdk", "wit"] {
            let mut stack = vec![checkout.join(top)];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let entry = entry.unwrap();
                    let name = entry.file_name();
                    // The Python and JavaScript SDKs are embedded apart (below).
                    if name.to_string_lossy().starts_with('.')
                        || name == "target"
                        || entry.path() == checkout.join("guest-sdk/js")
                        || entry.path() == checkout.join("guest-sdk/python")
                    {
                        continue;
                    }
                    if entry.file_type().unwrap().is_dir() {
                        stack.push(entry.path());
                    } else {
                        on_disk.push(entry.path().strip_prefix(&checkout).unwrap().to_string_lossy().into_owned());
                    }
                }
            }
        }
        on_disk.sort();
        let embedded: Vec<String> = FILES.iter().map(|(path, _)| (*path).to_owned()).collect();
        assert_eq!(embedded, on_disk, "FILES in sdk.rs must list every file of guest-sdk/ and wit/");
        for (path, text) in FILES {
            assert_eq!(std::fs::read_to_string(checkout.join(path)).unwrap(), *text, "{path}");
        }
    }

    /// The embedded JavaScript SDK is the checkout's, each file starting with the mark that
    /// tells it from an author's file.
    #[test]
    fn the_js_sdk_is_embedded_as_in_the_checkout() {
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk/js");
        for (name, text) in JS_SDK {
            assert_eq!(std::fs::read_to_string(checkout.join(name)).unwrap(), text, "{name}");
            assert!(first_line_marks(text), "{name}");
        }
        let dir = tempfile::tempdir().unwrap();
        write_js_sdk(dir.path(), false).unwrap();
        let written = std::fs::read_to_string(dir.path().join("skillhost.js")).unwrap();
        assert!(written.contains("const NETWORK_LINKED = false;") && !written.contains(JS_NETWORK_LINE));
        std::fs::write(dir.path().join("skillhost.js"), "export const mine = 1;\n").unwrap();
        assert!(write_js_sdk(dir.path(), true).unwrap_err().to_string().contains("is not the skillhost SDK"));
    }

    /// The embedded Python SDK is every module of the package in the checkout, and is
    /// written out once.
    #[test]
    fn the_python_sdk_is_embedded_as_in_the_checkout() {
        let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk/python/skillhost");
        let mut on_disk: Vec<String> = std::fs::read_dir(&package)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".py"))
            .map(|name| format!("skillhost/{name}"))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = PY_SDK.iter().map(|(path, _)| *path).collect();
        assert_eq!(embedded, on_disk, "PY_SDK in sdk.rs must list every module of guest-sdk/python/skillhost");
        for (path, text) in PY_SDK {
            assert_eq!(std::fs::read_to_string(package.join("..").join(path)).unwrap(), text, "{path}");
        }
        let root = tempfile::tempdir().unwrap();
        let dir = python_sdk(root.path()).unwrap();
        assert_eq!(python_sdk(root.path()).unwrap(), dir);
        for (path, text) in PY_SDK {
            assert_eq!(std::fs::read_to_string(dir.join(path)).unwrap(), text, "{path}");
        }
    }

    /// A skill asks for the SDK this binary carries: the requirement matches its version,
    /// and the patch names its crate in the data dir, quoted for TOML.
    #[test]
    fn the_requirement_and_the_patch_name_the_embedded_sdk() {
        let requirement = requirement().unwrap();
        let manifest: toml::Table = FILES[0].1.parse().unwrap();
        let version = manifest["package"]["version"].as_str().unwrap();
        assert!(version.starts_with(&format!("{requirement}.")) && requirement.split('.').count() == 2, "{requirement} for {version}");
        let data = tempfile::tempdir().unwrap();
        let quoted = data.path().join("a \"b\"");
        let [flag, value] = patch_args(&quoted).unwrap();
        assert_eq!(flag, "--config");
        let value: toml::Table = value.parse().unwrap();
        let path = Path::new(value["patch"]["crates-io"]["skillhost-sdk"]["path"].as_str().unwrap());
        assert_eq!(path, workspace(&quoted).unwrap().join("guest-sdk"));
        assert!(path.join("Cargo.toml").is_file());
    }

    /// Written out once per version, whole, and found again.
    #[test]
    fn the_sdk_is_written_out_once_and_reused() {
        let data = tempfile::tempdir().unwrap();
        let dir = workspace(data.path()).unwrap();
        for (path, text) in FILES {
            assert_eq!(std::fs::read_to_string(dir.join(path)).unwrap(), *text, "{path}");
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let manifest: toml::Table = manifest.parse().unwrap();
        assert_eq!(manifest["workspace"]["members"], toml::Value::from(vec!["guest-sdk", "guest-sdk/macros"]));
        assert_eq!(workspace(data.path()).unwrap(), dir);
        let entries: Vec<_> = std::fs::read_dir(data.path().join("sdk")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries.len(), 1, "no scratch directory is left behind: {entries:?}");
    }
}
