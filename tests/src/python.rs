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

/// A wheel of the pure-Python package `tinypkg` `version`, whose `VALUE` is `value`,
/// written into `dir` (made if missing): its path. A package index of files, so a test
/// needs no network.
pub fn tinypkg_wheel(dir: &Path, version: &str, value: &str) -> PathBuf {
    let script = r#"
import zipfile, hashlib, base64, sys
name, ver, value = "tinypkg", sys.argv[2], sys.argv[3]
files = {
    f"{name}/__init__.py": f"VALUE = '{value}'\n".encode(),
    f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
    f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
digest = lambda d: "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
record = "".join(f"{p},{digest(d)},{len(d)}\n" for p, d in files.items()) + f"{name}-{ver}.dist-info/RECORD,,\n"
with zipfile.ZipFile(f"{sys.argv[1]}/{name}-{ver}-py3-none-any.whl", "w") as z:
    for p, d in files.items():
        z.writestr(p, d)
    z.writestr(f"{name}-{ver}.dist-info/RECORD", record)
"#;
    std::fs::create_dir_all(dir).unwrap();
    let status =
        std::process::Command::new(venv().join("bin/python")).args(["-c", script]).arg(dir).args([version, value]).status().unwrap();
    assert!(status.success(), "the wheel of tinypkg {version} was not made");
    dir.join(format!("tinypkg-{version}-py3-none-any.whl"))
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

/// A sandbox configuration for tests: the test venv and a work dir inside `data`. The
/// host expects its isolation layers and refuses to start servers without one: an
/// unprivileged run without a delegated cgroup tree (scripts/test.sh runs the suites
/// again as uid 65534) opts out of the cgroup, and of nothing else; a root run never
/// opts out.
pub fn sandbox_config(data: &Path) -> skillhost::runtime::BwrapConfig {
    let mut config = skillhost::runtime::BwrapConfig::new(data.join("sandbox"));
    config.venv = Some(venv());
    if !rustix::process::geteuid().is_root() && !cgroups_usable() {
        config.allow_weaker = vec![skillhost_jail::isolation::CGROUP.to_owned()];
    }
    config
}

/// Whether this process may make a cgroup per sandbox with every controller.
pub fn cgroups_usable() -> bool {
    use skillhost_jail::isolation::{Cgroups, cgroup::CONTROLLERS};
    Cgroups::detect().0.is_some_and(|groups| CONTROLLERS.iter().all(|c| groups.has(c)))
}
