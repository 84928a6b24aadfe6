//! Skill packs: a folder with pack.toml whose `*.skill.md`,
//! `*.skill.yaml` and `*.skill.yml` files load as instruction-only skills named
//! `<pack>--<slug>`, each file on its own (a broken one is listed with its rule), hot
//! reloaded with the folder.

use std::path::{Path, PathBuf};

use serde_json::json;
use skillhost_registry::{INSTRUCTIONS_RUNTIME, RegistryError, RegistryEvent, Rule, TrustState};

use crate::{Env, call, replace_file, wait_for};

/// Two example pack skills plus two broken files, copied into `parent/core`.
fn core_pack(parent: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/packs/core");
    let dir = parent.join("core");
    std::fs::create_dir_all(&dir).unwrap();
    for file in std::fs::read_dir(source).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), dir.join(file.file_name())).unwrap();
    }
    dir
}

fn rule_of(error: Option<&RegistryError>) -> Option<Rule> {
    match error? {
        RegistryError::Rule(e) => Some(e.rule),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_files_load_as_instruction_skills() {
    let env = Env::new();
    core_pack(env.ws());
    let registry = env.open().await;
    let names: Vec<String> = registry.catalog().iter().map(|e| e.name.to_string()).collect();
    assert_eq!(
        names,
        ["core--api-pagination-cursor-loop", "core--login-basic", "core--no-steps", "core--wrong-name"],
        "README.md and pack.toml are not skills"
    );

    let login = registry.entry("core--login-basic").unwrap();
    assert_eq!(login.state, TrustState::Approved, "{:?}", login.error);
    let loaded = login.loaded.as_ref().unwrap();
    assert_eq!((loaded.runtime, loaded.description.as_str()), (INSTRUCTIONS_RUNTIME, "Standard website login without SSO."));
    assert_eq!(loaded.content_hash.len(), 64);
    let pack = loaded.pack.as_ref().expect("pack origin on the entry");
    assert_eq!((pack.name.as_str(), pack.version.as_str(), pack.file.as_str()), ("core", "1.0.0", "login_basic.skill.md"));
    assert_eq!(pack.seed_name, "pack.core.login_basic");
    assert_eq!(pack.extra.get("cluster").map(String::as_str), Some("Browser Authentication"));
    assert!(pack.extra.get("tools").is_some_and(|t| t.contains("tool_search")), "{:?}", pack.extra);
    let md = loaded.instructions.as_deref().unwrap();
    assert!(md.starts_with("# Basic login (username/password)\n"), "{md}");
    assert!(md.contains("**Use when:** Log into a website using username and password."), "{md}");
    assert!(md.contains("## Steps\n\n1. Navigate to the login page.\n2. Fill the username/email field."), "{md}");
    assert!(md.contains("## Failure modes\n\n- Login form is inside an iframe."), "{md}");
    assert!(md.contains("submit the username first"), "the Markdown body follows: {md}");
    assert!(!md.contains("tool_search"), "extra fields (tool references) are not rendered for the agent: {md}");
    let err = call(&registry, "core--login-basic", "x", json!({})).await.unwrap_err();
    assert!(matches!(err, RegistryError::InstructionsOnly { .. }), "{err}");

    let cursor = registry.entry("core--api-pagination-cursor-loop").unwrap();
    let loaded = cursor.loaded.as_ref().expect("the YAML form loads");
    assert_eq!(loaded.description, "Cursor pagination loop", "no description: the title");
    assert!(loaded.instructions.as_deref().unwrap().contains("4. Repeat until the cursor/token is empty or missing."));

    let no_steps = registry.entry("core--no-steps").unwrap();
    assert_eq!(rule_of(no_steps.error.as_deref()), Some(Rule::PackSteps), "{:?}", no_steps.error);
    let text = no_steps.error.as_ref().unwrap().to_string();
    assert!(text.contains("no_steps.skill.yml: the file (no steps) breaks skill-pack rule pack-steps"), "{text}");
    let wrong = registry.entry("core--wrong-name").unwrap();
    let text = wrong.error.as_ref().unwrap().to_string();
    assert_eq!(rule_of(wrong.error.as_deref()), Some(Rule::PackName), "{text}");
    assert!(text.contains("name \"pack.core.something_else\" (the file gives `core--wrong-name`)"), "{text}");
    assert!(text.contains("rename the file to `something-else.skill.md`"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_pack_toml_or_twin_files_are_reported_per_file() {
    let env = Env::new();
    let dir = env.ws().join("misc");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("pack.toml"), "name = \"other\"\nversion = \"1\"\n").unwrap();
    std::fs::write(dir.join("one.skill.yaml"), "trigger: t\nsteps: [s]\n").unwrap();
    let twins = core_pack(env.ws());
    std::fs::write(twins.join("a_b.skill.yaml"), "trigger: t\nsteps: [s]\n").unwrap();
    std::fs::write(twins.join("a-b.skill.yml"), "trigger: t\nsteps: [s]\n").unwrap();
    let registry = env.open().await;

    let one = registry.entry("misc--one").unwrap();
    let text = one.error.as_ref().map(ToString::to_string).unwrap_or_default();
    assert_eq!(rule_of(one.error.as_deref()), Some(Rule::PackToml), "{text}");
    assert!(text.contains("misc/pack.toml: name \"other\" (the folder is \"misc\")"), "{text}");
    let twin = registry.entry("core--a-b").unwrap();
    assert_eq!(rule_of(twin.error.as_deref()), Some(Rule::PackUnique), "{:?}", twin.error);
    assert!(registry.entry("core--login-basic").unwrap().loaded.is_some(), "the other files load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_files_reload_and_removed_ones_go() {
    let env = Env::new();
    let dir = core_pack(env.ws());
    let registry = env.open_watching().await;
    let mut events = registry.subscribe();
    let before = registry.entry("core--login-basic").unwrap().loaded.as_ref().unwrap().content_hash.clone();

    replace_file(
        &dir.join("retry.skill.yaml"),
        b"title: Retry with backoff\ntrigger: A call fails with 429 or 503.\nsteps: [Wait, Retry]\n",
    );
    wait_for(&mut events, "added", |e| *e == RegistryEvent::Added("core--retry".parse_name())).await;
    assert_eq!(registry.entry("core--retry").unwrap().loaded.as_ref().unwrap().description, "Retry with backoff");

    // A new pack version changes every skill's content hash.
    replace_file(&dir.join("pack.toml"), b"name = \"core\"\nversion = \"1.1.0\"\n");
    wait_for(&mut events, "updated", |e| *e == RegistryEvent::Updated("core--login-basic".parse_name())).await;
    let entry = registry.entry("core--login-basic").unwrap();
    let loaded = entry.loaded.as_ref().unwrap();
    assert_ne!(loaded.content_hash, before);
    assert_eq!(loaded.pack.as_ref().unwrap().version, "1.1.0");

    std::fs::remove_file(dir.join("retry.skill.yaml")).unwrap();
    wait_for(&mut events, "removed", |e| *e == RegistryEvent::Removed("core--retry".parse_name())).await;
    assert!(registry.entry("core--retry").is_err());

    // The whole pack goes: every skill of it goes.
    // (The watcher may see the deletions in more than one batch: wait for the last.)
    std::fs::remove_dir_all(&dir).unwrap();
    let gone = || registry.catalog().iter().all(|e| !e.name.as_str().starts_with("core--"));
    wait_for(&mut events, "removed", |e| matches!(e, RegistryEvent::Removed(_)) && gone()).await;
    assert!(registry.entry("core--login-basic").is_err());
}

trait ParseName {
    fn parse_name(&self) -> skillhost_core::SkillName;
}

impl ParseName for str {
    fn parse_name(&self) -> skillhost_core::SkillName {
        skillhost_core::SkillName::new(self).unwrap()
    }
}
