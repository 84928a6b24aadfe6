//! Node's `fetch` through the egress proxy. A networked sandbox reaches nothing but the
//! host's proxy, and node 20's built-in `fetch` ignores `HTTPS_PROXY`, so a Node script's
//! fetch would reach nothing at all. `skillhost setup` installs the `undici` npm package,
//! pinned by version and integrity (`node-fetch/package-lock.json`, `npm ci`), beside a
//! preload (`node-fetch/preload.cjs`) that makes undici's `EnvHttpProxyAgent` the global
//! dispatcher node's fetch uses; the jail binds that directory read-only at
//! [`NODE_DIR`](skillhost_jail::profile::NODE_DIR) of a networked sandbox and starts node
//! with it ([`NetSetup::node_fetch`](skillhost_jail::profile::NetSetup::node_fetch)).
//!
//! This file knows the directory's layout; the CLI's toolchains install it (into
//! `DATA_DIR/toolchains/node-fetch`, or under `SKILLHOST_TOOLCHAINS`). Nothing is
//! downloaded when a skill runs: without the directory a Node script's fetch fails as it
//! would without skillhost's help, and `skillhost doctor` says to run `skillhost setup`.

use std::path::{Path, PathBuf};

use skillhost_jail::profile::NODE_PRELOAD_FILE;

/// The directory's name under the host's toolchains.
pub const DIR_NAME: &str = "node-fetch";

/// The pinned package, as npm takes it.
pub const UNDICI: &str = "undici@7.30.2";

/// The `package.json` naming [`UNDICI`].
pub const PACKAGE_JSON: &str = include_str!("../node-fetch/package.json");

/// Its lockfile: the exact version and the integrity `npm ci` checks the tarball against.
pub const PACKAGE_LOCK: &str = include_str!("../node-fetch/package-lock.json");

/// The preload node is started with (see the file for what it does).
pub const PRELOAD: &str = include_str!("../node-fetch/preload.cjs");

/// The files written into the directory before `npm ci` runs there, by name.
pub const FILES: [(&str, &str); 3] = [("package.json", PACKAGE_JSON), ("package-lock.json", PACKAGE_LOCK), (NODE_PRELOAD_FILE, PRELOAD)];

/// Whether `dir` holds this binary's preload and the pinned undici (as `npm ci` of
/// [`FILES`] leaves it): only then does a sandbox use it.
pub fn installed(dir: &Path) -> bool {
    let version = UNDICI.rsplit_once('@').map_or(UNDICI, |(_, v)| v);
    let undici = std::fs::read(dir.join("node_modules/undici/package.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|package| package["version"] == version);
    undici && FILES.iter().all(|(name, text)| std::fs::read(dir.join(name)).is_ok_and(|bytes| bytes == text.as_bytes()))
}

/// Why networked sandboxes start node without the preload (their fetch reaches nothing).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeFetchUnavailable {
    /// The host's configuration names no directory.
    #[error("this host names no node-fetch directory; run `skillhost setup`")]
    NotNamed,
    /// The directory does not hold this binary's preload and the pinned undici.
    #[error("not installed in {}; run `skillhost setup` (or `skillhost setup toolchains node-fetch`)", dir.display())]
    NotInstalled {
        /// The directory.
        dir: PathBuf,
    },
    /// The uid a root host drops sandboxes to cannot reach it.
    #[error(
        "{} is out of reach of the sandbox's uid {uid} ({} is not searchable by it); install it where that uid reaches, with SKILLHOST_TOOLCHAINS",
        dir.display(),
        parent.display()
    )]
    Unreachable {
        /// The directory.
        dir: PathBuf,
        /// The first of its parents the uid cannot search.
        parent: PathBuf,
        /// The sandbox's uid.
        uid: u32,
    },
}

/// `dir` when a sandbox can use it: installed, and reached by the uid `drop_to` names
/// (a root host's sandboxes). A directory out of that uid's reach costs node's fetch,
/// not every sandbox's uid drop, so it is not among the paths the jail checks.
pub(crate) fn usable(dir: Option<&Path>, drop_to: Option<(u32, u32)>) -> Result<PathBuf, NodeFetchUnavailable> {
    let dir = dir.ok_or(NodeFetchUnavailable::NotNamed)?;
    if !installed(dir) {
        return Err(NodeFetchUnavailable::NotInstalled { dir: dir.to_owned() });
    }
    if let Some((uid, gid)) = drop_to
        && let Some(parent) = skillhost_jail::isolation::unreachable_parent(dir, uid, gid)
    {
        return Err(NodeFetchUnavailable::Unreachable { dir: dir.to_owned(), parent, uid });
    }
    Ok(dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pin is one: the package, its lockfile and [`UNDICI`] name the same version,
    /// and the lockfile holds its integrity.
    #[test]
    fn the_lockfile_pins_the_version_named() {
        let (name, version) = UNDICI.rsplit_once('@').unwrap();
        let package: serde_json::Value = serde_json::from_str(PACKAGE_JSON).unwrap();
        assert_eq!(package["dependencies"][name], version);
        let lock: serde_json::Value = serde_json::from_str(PACKAGE_LOCK).unwrap();
        let locked = &lock["packages"][format!("node_modules/{name}")];
        assert_eq!(locked["version"], version);
        assert!(locked["integrity"].as_str().is_some_and(|i| i.starts_with("sha512-")), "{locked}");
        assert_eq!(lock["packages"].as_object().unwrap().len(), 2, "undici has no dependencies: {lock}");
    }

    #[test]
    fn a_directory_is_installed_only_with_this_preload_and_version() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!installed(dir.path()));
        for (name, text) in FILES {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("node_modules/undici")).unwrap();
        let version = UNDICI.rsplit_once('@').unwrap().1;
        std::fs::write(dir.path().join("node_modules/undici/package.json"), format!(r#"{{"version": "{version}"}}"#)).unwrap();
        assert!(installed(dir.path()));
        std::fs::write(dir.path().join(NODE_PRELOAD_FILE), "// an older preload").unwrap();
        assert!(!installed(dir.path()), "a preload of another binary is installed again");
    }
}
