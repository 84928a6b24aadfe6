//! Install and remove in the user layer: what is accepted and in which trust state, and
//! removal that reveals a lower layer. (What an install refuses — traversal, symlinks,
//! oversize files — is in the adversarial suite, `tests/all/hostile_files.rs`.)

use fixtures::TEXT_TOOLS;
use serde_json::json;
use skillhost_registry::{Layer, TrustState};

use crate::{Env, WRITABLE, call, limits_folder, limits_packaged};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_folders_and_wasm_files() {
    let env = Env::new();
    let source = tempfile::tempdir().unwrap();
    let registry = env.open().await;

    let folder = TEXT_TOOLS.folder(source.path());
    std::fs::create_dir_all(folder.join(".git")).unwrap();
    std::fs::write(folder.join(".git/HEAD"), "x").unwrap();
    let entry = registry.install(&folder).await.unwrap();
    assert_eq!((entry.layer, entry.state), (Layer::User, TrustState::Approved), "auto tier is approved on install");
    assert!(env.user().join("text-tools/skill.wasm").is_file());
    assert!(!env.user().join("text-tools/.git").exists(), "hidden files are not copied");
    assert!(call(&registry, "text-tools", "slugify", json!({"text": "A b"})).await.is_ok());

    // Writable files make it explicit: never approved on install.
    let explicit = limits_folder(&source.path().join("v1"), "0.1.0", "2s", WRITABLE);
    let entry = registry.install(&explicit).await.unwrap();
    assert_eq!(entry.state, TrustState::PendingReview, "never approved on install above tier auto");
    assert!(env.user().join("limits").is_dir());

    // Reinstalling as a `.wasm` (auto tier) replaces the folder.
    let packaged = source.path().join("anything.wasm");
    std::fs::write(&packaged, limits_packaged("0.2.0", "2s")).unwrap();
    let entry = registry.install(&packaged).await.unwrap();
    assert_eq!((entry.name.as_str(), entry.state), ("limits", TrustState::Approved), "named by its manifest, not its file name");
    assert!(env.user().join("limits.wasm").is_file() && !env.user().join("limits").exists());
    let leftovers: Vec<_> = std::fs::read_dir(env.user().parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".skillhost-staging"))
        .collect();
    assert!(leftovers.is_empty(), "staging directories are cleaned up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_only_touches_the_user_layer_and_reveals() {
    let env = Env::new();
    let source = tempfile::tempdir().unwrap();
    limits_folder(env.bundled.path(), "1.0.0-bundled", "2s", "");
    TEXT_TOOLS.folder(env.ws());
    let registry = env.open().await;
    registry.install(&limits_folder(source.path(), "2.0.0-user", "2s", "")).await.unwrap();
    let entry = registry.entry("limits").unwrap();
    assert_eq!((entry.layer, entry.loaded.as_ref().unwrap().version.as_str()), (Layer::User, "2.0.0-user"));

    registry.remove("limits").await.unwrap();
    let entry = registry.entry("limits").unwrap();
    assert_eq!((entry.layer, entry.loaded.as_ref().unwrap().version.as_str()), (Layer::Bundled, "1.0.0-bundled"));

    let err = registry.remove("limits").await.unwrap_err().to_string();
    assert!(err.contains("skill `limits` is not installed in the user layer"), "{err}");
    let err = registry.remove("text-tools").await.unwrap_err().to_string();
    assert!(err.contains("not installed in the user layer"), "{err}");
    assert!(env.ws().join("text-tools").is_dir());
    let err = registry.remove("../x").await.unwrap_err().to_string();
    assert!(err.contains("invalid skill name"), "{err}");
}
