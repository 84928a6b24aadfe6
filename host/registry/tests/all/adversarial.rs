//! Hostile skill folders. Each test states the attack, the refusal expected, and what is
//! checked on the host afterwards.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use skillhost_registry::RegistryError;

use crate::{Env, call, limits_folder};

const CANARY: &str = "SECRET-CANARY-7f3a";

/// Every file under `dir`, read as text where it is text.
fn contains_canary(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.filter_map(Result::ok).any(|e| {
        let path = e.path();
        if path.is_symlink() {
            return true; // a link in the user layer is a failure in itself
        }
        if path.is_dir() { contains_canary(&path) } else { std::fs::read(&path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(CANARY)) }
    })
}

/// Attack: while `skillhost install` reads a skill folder, another process keeps
/// swapping one of its files for a symlink to a secret outside the folder, and one of
/// its directories for a symlink to a secret directory (a check-then-open race).
/// Expected: each install either copies the regular file or is refused as a symlink.
/// Checked: no installed copy ever holds the secret or a link, over three seconds of
/// back-to-back installs racing the swaps (a test about a race: it can only fail, never
/// flake into passing a broken reader, when the reader follows links).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_swapped_in_during_install_are_never_followed() {
    let env = Env::new();
    let source = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("id_rsa"), CANARY).unwrap();
    std::fs::create_dir(secrets.path().join("ssh")).unwrap();
    std::fs::write(secrets.path().join("ssh/notes.md"), CANARY).unwrap();
    let skill = limits_folder(source.path(), "0.1.0", "2s", "");
    std::fs::create_dir(skill.join("references")).unwrap();
    std::fs::write(skill.join("references/notes.md"), "harmless").unwrap();
    std::fs::write(skill.join("notes.md"), "harmless").unwrap();

    // The links wait beside their targets; each swap is one atomic exchange
    // (renameat2 RENAME_EXCHANGE), so the folder always holds one or the other.
    std::os::unix::fs::symlink(secrets.path().join("id_rsa"), skill.join(".notes-link")).unwrap();
    std::os::unix::fs::symlink(secrets.path().join("ssh"), skill.join(".refs-link")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (skill, stop) = (skill.clone(), stop.clone());
        std::thread::spawn(move || {
            let exchange = |a: &str, b: &str| {
                rustix::fs::renameat_with(rustix::fs::CWD, skill.join(a), rustix::fs::CWD, skill.join(b), rustix::fs::RenameFlags::EXCHANGE).unwrap();
            };
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange("notes.md", ".notes-link");
                exchange("references", ".refs-link");
                swaps += 1;
            }
            swaps
        })
    };

    let registry = env.open().await;
    let (mut installed, mut refused) = (0, 0);
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(3) {
        match registry.install(&skill).await {
            Ok(_) => installed += 1,
            Err(RegistryError::Symlink { .. }) => refused += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(!contains_canary(&env.user()), "an install copied the secret or a link into the user layer");
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("{installed} installs, {refused} refused as symlinks, {swaps} swap rounds");
    assert!(installed > 0 && refused > 0 && swaps > 0, "both outcomes were raced");
    assert!(!contains_canary(&env.user()));
}

/// Attack: skill.toml files built to hurt the parser: far over the size cap, nested
/// arrays and tables thousands deep (a stack overflow would take the host down), and
/// invalid UTF-8.
/// Expected: each is listed as broken with a message naming the file and the problem.
/// Checked: a good skill in the same layer still loads and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_manifests_are_refused_and_the_rest_serves() {
    let env = Env::new();
    limits_folder(env.ws(), "0.1.0", "2s", "");
    let hostile = |name: &str, bytes: Vec<u8>| {
        let dir = env.ws().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixtures::LIMITS.wasm, dir.join("skill.wasm")).unwrap();
        std::fs::write(dir.join("skill.toml"), bytes).unwrap();
    };
    let header = |name: &str| format!("name = \"{name}\"\nversion = \"1\"\ndescription = \"d\"\n");
    hostile("huge", format!("{}[search]\nkeywords = [\"{}\"]\n", header("huge"), "k".repeat(300 << 10)).into_bytes());
    let depth = 20_000;
    hostile("deep-arrays", format!("{}x = {}{}\n", header("deep-arrays"), "[".repeat(depth), "]".repeat(depth)).into_bytes());
    hostile("deep-tables", format!("{}x = {}{}\n", header("deep-tables"), "{ a = ".repeat(depth), "}".repeat(depth)).into_bytes());
    let mut invalid = header("bad-utf8").into_bytes();
    invalid.extend_from_slice(b"[search]\nkeywords = [\"\xff\xfe\"]\n");
    hostile("bad-utf8", invalid);

    let registry = env.open().await;
    let out = call(&registry, "limits", "echo", json!({"value": 7})).await.expect("the good skill serves");
    assert_eq!(out.value, json!(7));
    for (name, words) in [
        ("huge", &["bytes", "allowed"][..]),
        ("deep-arrays", &["skill.toml"][..]),
        ("deep-tables", &["skill.toml"][..]),
        ("bad-utf8", &["UTF-8"][..]),
    ] {
        let error = registry.entry(name).unwrap_or_else(|e| panic!("{name} is listed: {e}")).error.as_ref().map(|e| e.to_string()).unwrap_or_default();
        for word in words {
            assert!(error.contains(word), "{name}: the error should say {word:?}: {error:?}");
        }
    }
}
