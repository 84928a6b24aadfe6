//! Integration tests of the search index: behaviour through the public API
//! (`basics`), the evaluation set in tests/search-eval (`eval`, prints recall and MRR),
//! keeping in step with a watching registry (`follow`), and the on-disk index across
//! restarts (`persist`).

#![allow(clippy::print_stdout, reason = "the evaluation prints its figures")]

mod basics;
mod eval;
mod follow;
mod model;
mod persist;

use std::path::Path;
use std::sync::Arc;

use skillhost_core::SkillRuntime;
use skillhost_wasm::{WasmConfig, WasmRuntime};

/// A WebAssembly runtime over a compiled cache shared by the tests.
fn runtime() -> Arc<dyn SkillRuntime> {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("index-compiled");
    Arc::new(WasmRuntime::new(WasmConfig { cache_dir: Some(cache), ..WasmConfig::default() }).unwrap())
}

/// An instructions-only skill `name` in `dir`, its SKILL.md written whole (renamed into
/// place) so a watching registry never reads half of it.
fn write_skill(dir: &Path, name: &str, description: &str, body: &str) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    let text = format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n");
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, folder.join("SKILL.md")).unwrap();
}
