//! Bad skills are refused at load with one line naming the file and the fix: a
//! truncated component, a core module, a component of another world, a manifest with an
//! unknown field or a bad name, a `.wasm` without a manifest, limits above the host's.

use fixtures::{LIMITS, NOT_A_SKILL};

use crate::{load_error, test_host};

#[tokio::test]
async fn truncated_wasm() {
    let t = test_host();
    let file = LIMITS.packaged(t.skills.path());
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_error(t.host.load_path_granted(&file).await);
    assert!(err.starts_with(&format!("{}: not a valid WebAssembly component", file.display())), "{err}");
    assert!(err.ends_with("rebuild it with `skillhost build`"), "{err}");

    // Truncated inside a folder: the manifest is fine, the component is not.
    let dir = LIMITS.folder(t.skills.path());
    let wasm = dir.join("skill.wasm");
    let bytes = std::fs::read(&wasm).unwrap();
    std::fs::write(&wasm, &bytes[..bytes.len() - 100]).unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert!(err.starts_with(&format!("{}: not a valid WebAssembly component", wasm.display())), "{err}");
}

#[tokio::test]
async fn core_module_and_garbage() {
    let t = test_host();
    let dir = LIMITS.folder(t.skills.path());
    std::fs::write(dir.join("skill.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert!(err.contains("it is a core module, not a component"), "{err}");
    std::fs::write(dir.join("skill.wasm"), b"#!/bin/sh\necho hi\n").unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert!(err.contains("does not start with the WebAssembly magic number"), "{err}");
}

#[tokio::test]
async fn component_of_another_world() {
    let t = test_host();
    let dir = t.skills.path().join("cli-tool");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(NOT_A_SKILL.wasm, dir.join("skill.wasm")).unwrap();
    std::fs::write(dir.join("skill.toml"), "name = \"cli-tool\"\nversion = \"1.0.0\"\ndescription = \"a command, not a skill\"\n").unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    let wasm = dir.join("skill.wasm");
    assert!(err.starts_with(&format!("{}: not a skillhost skill: ", wasm.display())), "{err}");
    assert!(err.contains("skillhost:skill/guest@0.1.0"), "names the missing export: {err}");
    assert!(err.ends_with("build it against skillhost-sdk (world `skillhost:skill/skill@0.1.0`)"), "{err}");
}

#[tokio::test]
async fn manifest_with_unknown_field_or_bad_name() {
    let t = test_host();
    let dir = LIMITS.folder(t.skills.path());
    let manifest = dir.join("skill.toml");
    let good = std::fs::read_to_string(&manifest).unwrap();

    std::fs::write(&manifest, format!("{good}\nfavourite_colour = \"blue\"\n")).unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert!(err.starts_with(&format!("{}:", manifest.display())), "names the file: {err}");
    assert!(err.contains("unknown field `favourite_colour`"), "{err}");
    assert!(err.contains("remove it or correct its spelling"), "says the fix: {err}");

    std::fs::write(&manifest, good.replace("name = \"limits\"", "name = \"Limits_Fixture\"")).unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert!(err.starts_with(&format!("{}:2:8: invalid skill name `Limits_Fixture`", manifest.display())), "names file and line: {err}");
    assert!(err.contains("use lowercase letters, digits and inner hyphens"), "{err}");

    // The same manifest error embedded in a .wasm names the .wasm.
    let file = t.skills.path().join("embedded.wasm");
    let bytes = std::fs::read(LIMITS.wasm).unwrap();
    let bad = skillhost_package::embed(&bytes, &[(skillhost_package::MANIFEST_SECTION, b"name = \"x\"\n")]).unwrap();
    std::fs::write(&file, bad).unwrap();
    let err = load_error(t.host.load_path_granted(&file).await);
    assert!(err.starts_with(&format!("{}#skill.toml:", file.display())), "{err}");
}

#[tokio::test]
async fn wasm_without_a_manifest_and_folder_without_a_build() {
    let t = test_host();
    let file = t.skills.path().join("bare.wasm");
    std::fs::copy(LIMITS.wasm, &file).unwrap();
    let err = load_error(t.host.load_path_granted(&file).await);
    assert!(err.contains("no embedded skill.toml; build it with `skillhost build`"), "{err}");

    let dir = LIMITS.folder(t.skills.path());
    std::fs::remove_file(dir.join("skill.wasm")).unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert_eq!(err, format!("{}: no skill.wasm; build it with `skillhost build {}`", dir.display(), dir.display()));
}

#[tokio::test]
async fn limits_above_the_host_maximum() {
    let t = test_host();
    let dir = LIMITS.folder(t.skills.path());
    let manifest = dir.join("skill.toml");
    let text = std::fs::read_to_string(&manifest).unwrap().replace("memory = \"512MiB\"", "memory = \"8GiB\"");
    std::fs::write(&manifest, text).unwrap();
    let err = load_error(t.host.load_path_granted(&dir).await);
    assert_eq!(
        err,
        "skill `limits` asks for memory = 8 GiB, above the host maximum of 1 GiB; lower `[limits] memory` in its skill.toml or raise the host maximum"
    );
}

/// Log lines written while it is the current subscriber (this thread only).
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A broken skill fails again at every rescan and each time a registry opens: the host
/// log warns about it once per process, and again only when its error changes.
#[tokio::test]
async fn a_broken_skill_is_warned_about_once_per_process() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber =
        tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).with_max_level(tracing::Level::WARN).finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let t = test_host();
    let dir = LIMITS.folder(t.skills.path());
    let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
    std::fs::write(dir.join("skill.toml"), format!("{manifest}\ncolour = \"blue\"\n")).unwrap();
    let open = || {
        let mut config = skillhost::RegistryConfig::new(t.data.path());
        config.workspace = Some(t.skills.path().to_owned());
        config.watch = false;
        t.host.open_registry(config)
    };
    let warnings =
        || String::from_utf8_lossy(&log.0.lock().unwrap()).lines().filter(|l| l.contains("load failed") && l.contains("limits")).count();
    for _ in 0..3 {
        let registry = open().await.expect("the registry opens beside a broken skill");
        assert!(registry.entry("limits").unwrap().error.is_some());
    }
    assert_eq!(warnings(), 1, "{}", String::from_utf8_lossy(&log.0.lock().unwrap()));
    std::fs::write(dir.join("skill.toml"), format!("{manifest}\nshade = \"blue\"\n")).unwrap();
    open().await.unwrap();
    assert_eq!(warnings(), 2, "a new error is a new warning");
}
