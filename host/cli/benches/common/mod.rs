//! What the `skillhost-cli` benches share: building a skill folder with the binary under
//! bench, as a user would.

use std::path::Path;
use std::process::Command;

/// `skillhost build DIR` with the binary under bench, on a throwaway data dir; panics with
/// its stderr when the build fails.
pub fn build_skill(dir: &Path) {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--data-dir")
        .arg(data.path())
        .arg("build")
        .arg(dir)
        .output()
        .expect("the skillhost binary runs");
    assert!(
        out.status.success(),
        "skillhost build {} failed (toolchains from SKILLHOST_TOOLCHAINS; scripts/setup.sh installs them):\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
