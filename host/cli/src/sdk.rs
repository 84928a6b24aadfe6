//! The Rust guest SDK this binary was built with (`guest-sdk/`, `wit/` and the workspace
//! manifest they inherit from), embedded in the binary and written out, once per SDK
//! version, to `DATA_DIR/sdk/<hash>/` when `new` or the forge need its sources. So an
//! installed binary works from any directory with nothing of the checkout it was built
//! from; `--sdk`/`SKILLHOST_SDK` (for `new`) and `SKILLHOST_SDK_WORKSPACE` (for the forge)
//! still point at a checkout of your own.

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
    let mut hasher = Sha256::new();
    for (path, text) in std::iter::once(&("Cargo.toml", manifest.as_str())).chain(FILES) {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(text.len().to_le_bytes());
        hasher.update(text.as_bytes());
    }
    let root = data_dir.join("sdk");
    let dir = root.join(format!("{}-{}", env!("CARGO_PKG_VERSION"), &format!("{:x}", hasher.finalize())[..16]));
    if dir.join("Cargo.toml").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix(".writing-")
        .tempdir_in(&root)
        .with_context(|| format!("cannot write the SDK's sources into {}", root.display()))?;
    for (path, text) in std::iter::once(&("Cargo.toml", manifest.as_str())).chain(FILES) {
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
        Err(_) if dir.join("Cargo.toml").is_file() => Ok(dir),
        Err(e) => Err(e).with_context(|| format!("cannot move the SDK's sources into {}", dir.display())),
    }
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
                    if name.to_string_lossy().starts_with('.') || name == "target" {
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
