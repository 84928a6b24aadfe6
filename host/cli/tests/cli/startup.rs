//! `skillhost serve` started cold by the official MCP Python SDK client, as an agent
//! starts it the first time: the bundled skills (five wasm skills and the FastMCP
//! `site-check`), the Python and JavaScript example components, and a data dir nothing
//! ran in yet (no compiled code, no tool listings). The client keeps its own 30 s read
//! timeout on the handshake, which it never retries, and on each request after it; a
//! call to a skill still loading may be made again after a list change, as a client
//! would (`startup_client.py`). Both the `initialize` handshake and the SDK's default
//! (`server/discover` first) must get through, and a wasm tool and the Python
//! component's tool must answer.

use std::path::Path;
use std::process::Command;

use fixtures::{CSV_SUMMARY, GITHUB, TEXT_TOOLS, UNIT_CONVERT, UPTIME};
use serde_json::Value;

use crate::languages::{js_skill, python_skill};

/// Copy the files of `from` (not its subfolders, not dotfiles) into `skills/name`.
pub(crate) fn copy_folder(from: &Path, skills: &Path, name: &str) {
    let dir = skills.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && !path.file_name().unwrap().to_string_lossy().starts_with('.') {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// Run `startup_client.py` in `mode` against `skills` and a fresh data dir; its facts.
fn connect(mode: &str, skills: &Path) -> Value {
    let data = tempfile::tempdir().unwrap();
    let python = fixtures::python::venv().join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/startup_client.py");
    let out = Command::new(&python)
        .env("SKILLHOST_VENV", fixtures::python::venv())
        .arg(&script)
        .args([mode, env!("CARGO_BIN_EXE_skillhost")])
        .arg(skills)
        .arg(data.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; run scripts/setup.sh", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK client ({mode}) against a cold `skillhost serve` failed:\n{stderr}\n{stdout}");
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{mode}: bad output {line:?}: {e}\n{stderr}"))
}

#[test]
fn the_official_sdk_gets_through_to_a_cold_server_and_calls_wasm_and_python_tools() {
    let (Some(python), Some(js)) = (python_skill(), js_skill()) else { return };
    let skills = tempfile::tempdir().unwrap();
    for guest in [TEXT_TOOLS, CSV_SUMMARY, UNIT_CONVERT, UPTIME, GITHUB] {
        guest.folder(skills.path());
    }
    copy_folder(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills/site-check"), skills.path(), "site-check");
    copy_folder(python.parent().unwrap(), skills.path(), "py-words");
    // Without its read-only data dir py-words is pure computation, approved without a
    // human: approving it here would compile it, and the server must start cold.
    let manifest = skills.path().join("py-words/skill.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let pure = text.split("[[capabilities.files]]").next().unwrap().to_owned();
    assert_ne!(pure, text, "the example asks for its data dir");
    std::fs::write(&manifest, pure).unwrap();
    copy_folder(js.parent().unwrap(), skills.path(), "js-text");

    for mode in ["legacy", "auto"] {
        let facts = connect(mode, skills.path());
        eprintln!("{mode}: {facts}");
        assert_eq!(facts["mode"], mode);
    }
}
