//! Guest fixtures for the integration tests and benchmarks, built from source by
//! `build.rs`, and the helpers that turn them into installed skills.

pub mod balancer;
pub mod figures;
pub mod git;
pub mod issuer;
pub mod python;
pub mod registry;
mod server;

use std::path::{Path, PathBuf};

pub use server::{Received, TestServer};

use skillhost::{Host, runtime::WasmConfig};
use skillhost_package as package;

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Where scripts/setup.sh installs the toolchains (node's fetch preload among them):
/// `SKILLHOST_TOOLCHAINS`, else the workspace's `target/toolchains`.
pub fn toolchains() -> PathBuf {
    std::env::var_os("SKILLHOST_TOOLCHAINS")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/toolchains"), PathBuf::from)
}

/// A guest crate and the component built from it.
#[derive(Clone, Copy, Debug)]
pub struct Guest {
    /// The crate's folder (holding skill.toml).
    pub dir: &'static str,
    /// The built component, without an embedded manifest.
    pub wasm: &'static str,
}

impl Guest {
    /// The guest's skill.toml text.
    pub fn manifest(&self) -> String {
        std::fs::read_to_string(Path::new(self.dir).join("skill.toml")).expect("guest has a skill.toml")
    }

    /// Install the guest as a skill folder inside `parent`: its skill.toml (and SKILL.md)
    /// beside the component as skill.wasm. Returns the folder.
    pub fn folder(&self, parent: &Path) -> PathBuf {
        let name = Path::new(self.dir).file_name().expect("guest dir has a name");
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(self.wasm, dir.join("skill.wasm")).unwrap();
        std::fs::write(dir.join("skill.toml"), self.manifest()).unwrap();
        let md = Path::new(self.dir).join("SKILL.md");
        if md.exists() {
            std::fs::copy(md, dir.join("SKILL.md")).unwrap();
        }
        dir
    }

    /// Install the guest as a skill folder whose skill.toml is the guest's plus `extra`
    /// (e.g. a `[network]` section naming a test server's port). Returns the folder.
    pub fn folder_with(&self, parent: &Path, extra: &str) -> PathBuf {
        let dir = self.folder(parent);
        std::fs::write(dir.join("skill.toml"), format!("{}\n{extra}", self.manifest())).unwrap();
        dir
    }

    /// Install the guest as one `.wasm` with its manifest embedded, inside `parent`.
    pub fn packaged(&self, parent: &Path) -> PathBuf {
        let name = Path::new(self.dir).file_name().expect("guest dir has a name");
        let file = parent.join(name).with_extension("wasm");
        let manifest = self.manifest();
        let bytes = std::fs::read(self.wasm).unwrap();
        let packaged = package::embed(&bytes, &[(package::MANIFEST_SECTION, manifest.as_bytes())]).unwrap();
        std::fs::write(&file, packaged).unwrap();
        file
    }
}

/// A host over fresh temporary directories, and those directories.
pub struct TestHost {
    /// The host.
    pub host: Host,
    /// Its data dir (skills' data under `skills/<name>/`).
    pub data: tempfile::TempDir,
    /// A skills directory to install guests into.
    pub skills: tempfile::TempDir,
}

impl TestHost {
    /// A host whose compiled cache is `cache` (shared between tests to save compiles).
    pub fn new(cache: &Path) -> Self {
        Self::with_config(WasmConfig { cache_dir: Some(cache.to_owned()), ..WasmConfig::default() })
    }

    /// A host with the given runtime settings.
    pub fn with_config(config: WasmConfig) -> Self {
        let data = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        let host = Host::builder().data_dir(data.path()).wasm_config(config).build().unwrap();
        Self { host, data, skills }
    }

    /// The data dir of skill `name` loaded directly (not through the registry), as the
    /// host grants it.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        let name = skillhost::skill::SkillName::new(name).unwrap();
        self.host.policy().data_dir(&skillhost::DirectSkill::data_key(&name))
    }
}
