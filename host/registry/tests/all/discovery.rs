//! Discovery: the skill forms, layer precedence and reveal, content hashes, and skills
//! that are listed with an error instead of crashing anything.

use fixtures::{LIMITS, TEXT_TOOLS, UNIT_CONVERT};
use serde_json::json;
use skillhost_core::LoadError;
use skillhost_registry::{INSTRUCTIONS_RUNTIME, Layer, RegistryError, TrustState};

use crate::{Env, call, limits_folder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_is_listed() {
    let env = Env::new();
    LIMITS.packaged(env.ws());
    TEXT_TOOLS.folder(env.ws());
    let notes = env.ws().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("SKILL.md"), "---\nname: notes\ndescription: >\n  How we write\n  release notes\n---\n# Notes\n").unwrap();
    let unbuilt = UNIT_CONVERT.folder(env.ws());
    std::fs::remove_file(unbuilt.join("skill.wasm")).unwrap();
    std::fs::write(env.ws().join("README.md"), "not a skill").unwrap();
    std::fs::create_dir(env.ws().join("empty")).unwrap();

    let registry = env.open().await;
    let names: Vec<String> = registry.catalog().iter().map(|e| e.name.to_string()).collect();
    assert_eq!(names, ["limits", "notes", "text-tools", "unit-convert"]);

    let limits = registry.entry("limits").unwrap();
    let loaded = limits.loaded.as_ref().unwrap();
    assert_eq!((limits.layer, loaded.runtime, loaded.version.as_str()), (Layer::Workspace, "wasm", "0.1.0"));
    assert!(loaded.tools.iter().any(|t| t.name == "echo"));
    assert_eq!(limits.state, TrustState::Approved, "pure computation is auto-approved");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 7})).await.unwrap().value, json!(7));

    let text = registry.entry("text-tools").unwrap();
    assert!(text.has_instructions(), "the folder's SKILL.md is read");

    let notes = registry.entry("notes").unwrap();
    let loaded = notes.loaded.as_ref().unwrap();
    assert_eq!((loaded.runtime, loaded.description.as_str()), (INSTRUCTIONS_RUNTIME, "How we write release notes"));
    assert!(loaded.tools.is_empty());
    let err = call(&registry, "notes", "anything", json!({})).await.unwrap_err();
    assert!(matches!(err, RegistryError::InstructionsOnly { .. }), "{err}");

    let unbuilt = registry.entry("unit-convert").unwrap();
    assert!(unbuilt.loaded.is_none());
    let error = unbuilt.error.as_deref().expect("listed with its error");
    assert!(matches!(error, RegistryError::Load(LoadError::NotBuilt { .. })), "{error}");
    let err = call(&registry, "unit-convert", "convert", json!({})).await.unwrap_err().to_string();
    assert!(err.contains("no skill.wasm; build it with `skillhost build"), "{err}");
}

/// A folder holding only a skill.wasm is read as a bare `NAME.wasm` is: with the
/// manifest `skillhost build` embedded it loads; a component of the skill world without
/// one is listed with an error naming the file and the fix, never silently ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_with_only_skill_wasm_is_a_skill() {
    let env = Env::new();
    let built = env.ws().join("limits");
    std::fs::create_dir(&built).unwrap();
    std::fs::write(built.join("skill.wasm"), crate::limits_packaged("0.1.0", "2s")).unwrap();
    let bare = env.ws().join("bare");
    std::fs::create_dir(&bare).unwrap();
    std::fs::copy(LIMITS.wasm, bare.join("skill.wasm")).unwrap();

    let registry = env.open().await;
    let limits = registry.entry("limits").expect("a folder with the built skill.wasm is a skill");
    assert!(limits.loaded.as_ref().is_some_and(|l| l.tools.iter().any(|t| t.name == "echo")), "{:?}", limits.error);
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 3})).await.unwrap().value, json!(3));
    let bare = registry.entry("bare").expect("a folder with skill.wasm is listed");
    let error = bare.error.as_deref().expect("listed with its error").to_string();
    assert!(error.contains("bare/skill.wasm") && error.contains("no embedded skill.toml") && error.contains("skill.toml"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_layers_shadow_and_removal_reveals() {
    let env = Env::new();
    limits_folder(env.bundled.path(), "1.0.0-bundled", "2s", "");
    std::fs::create_dir_all(env.user()).unwrap();
    limits_folder(&env.user(), "1.0.0-user", "2s", "");
    let workspace = limits_folder(env.ws(), "1.0.0-workspace", "2s", "");

    let version = |registry: &skillhost_registry::Registry| {
        let entry = registry.entry("limits").unwrap();
        (entry.layer, entry.loaded.as_ref().unwrap().version.clone(), entry.shadows.iter().map(|s| s.layer).collect::<Vec<_>>())
    };
    let registry = env.open().await;
    assert_eq!(version(&registry), (Layer::Workspace, "1.0.0-workspace".into(), vec![Layer::User, Layer::Bundled]));
    drop(registry);

    std::fs::remove_dir_all(&workspace).unwrap();
    let registry = env.open().await;
    assert_eq!(version(&registry), (Layer::User, "1.0.0-user".into(), vec![Layer::Bundled]));
    drop(registry);

    std::fs::remove_dir_all(env.user().join("limits")).unwrap();
    let registry = env.open().await;
    assert_eq!(version(&registry), (Layer::Bundled, "1.0.0-bundled".into(), vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_hash_covers_every_file_but_hidden_ones() {
    let env = Env::new();
    let dir = TEXT_TOOLS.folder(env.ws());
    let first = content_hash(&env).await;
    assert_eq!(first.len(), 64);

    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/HEAD"), "ref").unwrap();
    std::fs::write(dir.join(".DS_Store"), "x").unwrap();
    assert_eq!(content_hash(&env).await, first, "hidden files are excluded");

    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(dir.join("references/api.md"), "v1").unwrap();
    let with_reference = content_hash(&env).await;
    assert_ne!(with_reference, first, "an added reference changes the hash");
    std::fs::write(dir.join("references/api.md"), "v2").unwrap();
    assert_ne!(content_hash(&env).await, with_reference, "an edited reference changes the hash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_skills_are_listed_with_their_error() {
    let env = Env::new();
    let linked = TEXT_TOOLS.folder(env.ws());
    std::os::unix::fs::symlink("/etc/passwd", linked.join("passwd")).unwrap();
    let renamed = LIMITS.folder(env.ws());
    std::fs::rename(&renamed, env.ws().join("other-name")).unwrap();
    std::fs::write(env.ws().join("torn.wasm"), b"\0asm\x0d\0\x01\0\x00\x7f").unwrap();

    let registry = env.open().await;
    let error = |name: &str| registry.entry(name).unwrap().error.as_ref().map(|e| e.to_string()).unwrap_or_default();
    assert!(error("text-tools").contains("passwd: symbolic links are not allowed"), "{}", error("text-tools"));
    assert!(
        error("other-name").contains("the skill is named `limits` but its file or folder is named `other-name`"),
        "{}",
        error("other-name")
    );
    assert!(error("torn").contains("torn.wasm"), "{}", error("torn"));
    for entry in registry.catalog() {
        assert!(entry.loaded.is_none() && entry.error.is_some(), "{entry:?}");
        assert!(!entry.error.as_ref().unwrap().to_string().contains('\n'), "one line");
    }
}

async fn content_hash(env: &Env) -> String {
    let registry = env.open().await;
    registry.entry("text-tools").unwrap().loaded.as_ref().unwrap().content_hash.clone()
}

/// A runtime that records the order loads start in and holds each until released.
struct Gated {
    inner: std::sync::Arc<dyn skillhost_core::SkillRuntime>,
    started: parking_lot::Mutex<Vec<String>>,
    gate: tokio::sync::Semaphore,
}

#[async_trait::async_trait]
impl skillhost_core::SkillRuntime for Gated {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn load(
        &self,
        source: &skillhost_core::SkillSource,
        grant: skillhost_core::Grant,
    ) -> Result<std::sync::Arc<dyn skillhost_core::Skill>, LoadError> {
        self.started.lock().push(grant.skill.to_string());
        self.gate.acquire().await.expect("the gate stays open").forget();
        self.inner.load(source, grant).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_a_call_waits_for_loads_ahead_of_the_background_queue_and_alone() {
    let env = Env::new();
    let names: Vec<String> = (0..12).map(|i| format!("queued-{i:02}")).collect();
    for name in &names {
        let dir = LIMITS.folder(env.ws());
        let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap().replace("name = \"limits\"", &format!("name = \"{name}\""));
        assert!(manifest.contains(name.as_str()), "the fixture manifest names itself `limits`");
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        std::fs::rename(&dir, env.ws().join(name)).unwrap();
    }
    let gated = std::sync::Arc::new(Gated {
        inner: crate::runtime(),
        started: parking_lot::Mutex::default(),
        gate: tokio::sync::Semaphore::new(0),
    });
    let mut config = env.config(false);
    config.first_load = skillhost_registry::FirstLoad::Background;
    let policy = skillhost_core::Policy::new(env.data.path().join("skill-data"));
    let registry = skillhost_registry::Registry::open(config, gated.clone(), policy).await.unwrap();
    // Every load slot (one per core, 2 to 8) holds a skill, held at the gate; the rest
    // queue (all the same size: in name order).
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    let mut slots = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let started = gated.started.lock().len();
        if started > 0 && started == slots {
            break;
        }
        slots = started;
        assert!(std::time::Instant::now() < deadline, "the background load did not start");
    }
    assert!((2..=8).contains(&slots), "{slots} loads at once");
    let last = names.last().unwrap().as_str();
    let mut waiting = std::pin::pin!(registry.wait_loaded(last));
    assert!(futures::poll!(&mut waiting).is_pending(), "{last} is still loading");
    // The loads under way finish; the waited-for skill starts in a slot they free, and no
    // slot starts a skill nobody waits for while it loads.
    gated.gate.add_permits(slots);
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    while gated.started.lock().len() <= slots {
        assert!(std::time::Instant::now() < deadline, "the waited-for skill did not start");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let started = gated.started.lock().clone();
    assert_eq!(started[..slots], names[..slots], "the first slots take the queue in order");
    assert_eq!(started[slots..], [last], "the skill a call waits for starts next, and alone");
    assert!(futures::poll!(&mut waiting).is_pending(), "{last} is held at the gate");
    gated.gate.add_permits(1);
    tokio::time::timeout(crate::HANG_GUARD, waiting).await.expect("the waited-for skill loads");
    assert!(registry.entry(last).unwrap().loaded.is_some());
    gated.gate.add_permits(names.len());
    tokio::time::timeout(crate::HANG_GUARD, registry.ready()).await.expect("the rest loads");
}
