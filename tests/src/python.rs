//! Python fixtures for the sandbox runtime: the venv the tests run servers with and the
//! fixture server folders in `tests/python/`.

use std::path::{Path, PathBuf};

/// The venv the tests use: `$SKILLHOST_TEST_VENV`, or `<workspace>/target/python` (made
/// by `scripts/setup.sh`).
pub fn venv() -> PathBuf {
    std::env::var_os("SKILLHOST_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/python"))
}

/// The fixture folder `tests/python/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(name)
}

/// Copy fixture `name` into `parent` (as `parent/<name>`), appending `extra` to its
/// skill.toml. Returns the copy.
pub fn install(name: &str, parent: &Path, extra: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
    std::fs::write(dir.join("skill.toml"), format!("{manifest}\n{extra}")).unwrap();
    dir
}

/// A sandbox configuration for tests: the test venv, a work dir inside `data`, and
/// short idle times so that tests see the lifecycle.
pub fn sandbox_config(data: &Path) -> skillhost::BwrapConfig {
    let mut config = skillhost::BwrapConfig::new(data.join("sandbox"));
    config.venv = Some(venv());
    config
}
