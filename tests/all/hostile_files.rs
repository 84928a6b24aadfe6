//! Hostile skill files through the registry: a folder whose files are swapped for
//! symlinks while it is installed (TOCTOU), manifests built to hurt the parser, SKILL.md
//! frontmatter past its cap, a `.wasm` torn by a half-finished write during hot reload,
//! and installs of folders that are unsafe. Each test states the attack, the refusal
//! expected, and what is checked on the host afterwards.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fixtures::{LIMITS, TEXT_TOOLS, TestHost};
use serde_json::{Value, json};
use skillhost::{Entry, Registry, RegistryConfig, RegistryError, RegistryEvent, ToolOutput};
use skillhost_package as package;

use crate::{HANG_GUARD, Swapper, test_host};

const CANARY: &str = "SECRET-CANARY-7f3a";

/// A host, a workspace layer to drop skills into, and the registry's configuration.
struct Layers {
    t: TestHost,
    workspace: tempfile::TempDir,
}

impl Layers {
    fn new() -> Self {
        Self { t: test_host(), workspace: tempfile::tempdir().unwrap() }
    }

    fn ws(&self) -> &Path {
        self.workspace.path()
    }

    fn config(&self, watch: bool) -> RegistryConfig {
        let mut config = RegistryConfig::new(self.t.data.path());
        config.workspace = Some(self.ws().to_owned());
        config.watch = watch;
        config
    }

    /// The user layer, where installs land.
    fn user(&self) -> PathBuf {
        self.config(false).user
    }

    async fn open_with(&self, config: RegistryConfig) -> Arc<Registry> {
        tokio::time::timeout(HANG_GUARD, self.t.host.open_registry(config)).await.expect("open hung").expect("registry opens")
    }

    async fn open(&self, watch: bool) -> Arc<Registry> {
        self.open_with(self.config(watch)).await
    }
}

async fn call(registry: &Registry, skill: &str, tool: &str, input: Value) -> Result<ToolOutput, RegistryError> {
    tokio::time::timeout(HANG_GUARD, registry.call(skill, tool, input, Default::default()))
        .await
        .unwrap_or_else(|_| panic!("{skill}.{tool} did not return within {HANG_GUARD:?}"))
}

/// LIMITS as one `.wasm` of the given version, its manifest embedded.
fn limits_packaged(version: &str) -> Vec<u8> {
    let manifest = LIMITS.manifest().replace("version = \"0.1.0\"", &format!("version = \"{version}\""));
    assert!(manifest.contains(version), "the fixture manifest changed: {manifest}");
    package::embed(&std::fs::read(LIMITS.wasm).unwrap(), &[(package::MANIFEST_SECTION, manifest.as_bytes())]).unwrap()
}

fn version(registry: &Registry, name: &str) -> String {
    registry.entry(name).unwrap().loaded.as_ref().unwrap().version.clone()
}

/// Wait for the first event about `name` that `pred` accepts; fails after [`HANG_GUARD`].
async fn wait_for(
    events: &mut tokio::sync::broadcast::Receiver<RegistryEvent>,
    name: &str,
    pred: impl Fn(&RegistryEvent) -> bool,
) -> RegistryEvent {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(event) if event.name().as_str() == name && pred(&event) => return event,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream closed: {e}"),
            }
        }
    };
    tokio::time::timeout(HANG_GUARD, wait).await.unwrap_or_else(|_| panic!("no awaited event for {name} within {HANG_GUARD:?}"))
}

/// Whether any file under `dir` holds the canary, or any entry is a symlink.
fn contains_canary(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.filter_map(Result::ok).any(|e| {
        let path = e.path();
        if path.is_symlink() {
            return true; // a link in the user layer is a failure in itself
        }
        if path.is_dir() {
            contains_canary(&path)
        } else {
            std::fs::read(&path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(CANARY))
        }
    })
}

/// Attack: while `skillhost install` reads a skill folder, another thread keeps
/// swapping one of its files for a symlink to a secret outside the folder, and one of
/// its directories for a symlink to a secret directory (a check-then-open race).
/// Expected: each install either copies the regular file or is refused as a symlink.
/// Checked: no installed copy ever holds the secret or a link, over three seconds of
/// back-to-back installs racing the swaps (a reader that follows links fails this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_swapped_in_during_install_are_never_followed() {
    let layers = Layers::new();
    let source = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("id_rsa"), CANARY).unwrap();
    std::fs::create_dir(secrets.path().join("ssh")).unwrap();
    std::fs::write(secrets.path().join("ssh/notes.md"), CANARY).unwrap();
    let skill = LIMITS.folder(source.path());
    std::fs::create_dir(skill.join("references")).unwrap();
    std::fs::write(skill.join("references/notes.md"), "harmless").unwrap();
    std::fs::write(skill.join("notes.md"), "harmless").unwrap();

    // The links wait beside their targets; each swap is one atomic exchange
    // (renameat2 RENAME_EXCHANGE), so the folder always holds one or the other.
    std::os::unix::fs::symlink(secrets.path().join("id_rsa"), skill.join(".notes-link")).unwrap();
    std::os::unix::fs::symlink(secrets.path().join("ssh"), skill.join(".refs-link")).unwrap();
    let swapper = Swapper::start(&skill, &[("notes.md", ".notes-link"), ("references", ".refs-link")]);

    let registry = layers.open(false).await;
    let (mut installed, mut refused) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        match registry.install(&skill).await {
            Ok(_) => installed += 1,
            Err(RegistryError::Read(skillhost_package::ReadError::Symlink { .. })) => refused += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(!contains_canary(&layers.user()), "an install copied the secret or a link into the user layer");
    }
    let swaps = swapper.stop();
    eprintln!("{installed} installs, {refused} refused as symlinks, {swaps} swap rounds");
    assert!(installed > 0 && refused > 0 && swaps > 0, "both outcomes were raced");
    assert!(!contains_canary(&layers.user()));
}

/// Attack: skill.toml files built to hurt the parser: far over the size cap, nested
/// arrays and tables thousands deep (a stack overflow would take the host down), and
/// invalid UTF-8; a SKILL.md whose frontmatter runs past its 64 KiB cap, and one whose
/// YAML aliases expand to a billion strings.
/// Expected: each is listed as broken with a message naming the file and the problem.
/// Checked: a good skill in the same layer still loads and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_manifests_are_refused_and_the_rest_serves() {
    let layers = Layers::new();
    LIMITS.folder(layers.ws());
    let hostile = |name: &str, bytes: Vec<u8>| {
        let dir = layers.ws().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(LIMITS.wasm, dir.join("skill.wasm")).unwrap();
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
    let instructions = layers.ws().join("huge-md");
    std::fs::create_dir(&instructions).unwrap();
    let padding = format!("# {}\n", "x".repeat(100)).repeat(700);
    std::fs::write(instructions.join("SKILL.md"), format!("---\nname: huge-md\ndescription: d\n{padding}---\n# Body\n")).unwrap();
    // A billion laughs in 700 bytes: nine levels of nine aliases each.
    let mut laughs = String::from("l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for level in 1..10 {
        let prev = format!("*l{}", level - 1);
        laughs.push_str(&format!("l{level}: &l{level} [{}]\n", vec![prev; 9].join(",")));
    }
    let bomb = layers.ws().join("alias-bomb");
    std::fs::create_dir(&bomb).unwrap();
    std::fs::write(
        bomb.join("SKILL.md"),
        format!(
            "---\nname: alias-bomb\ndescription: d\nmetadata:\n{}---\n# Body\n",
            laughs.lines().map(|l| format!("  {l}\n")).collect::<String>()
        ),
    )
    .unwrap();

    let registry = layers.open(false).await;
    let out = call(&registry, "limits", "echo", json!({"value": 7})).await.expect("the good skill serves");
    assert_eq!(out.value, json!(7));
    for (name, words) in [
        ("huge", &["bytes", "allowed"][..]),
        ("deep-arrays", &["skill.toml"][..]),
        ("deep-tables", &["skill.toml"][..]),
        ("bad-utf8", &["UTF-8"][..]),
        ("huge-md", &["SKILL.md", "frontmatter-size"][..]),
        ("alias-bomb", &["SKILL.md", "repetition limit", "instead of repeating YAML aliases"][..]),
    ] {
        let error = registry
            .entry(name)
            .unwrap_or_else(|e| panic!("{name} is listed: {e}"))
            .error
            .as_ref()
            .map(|e| e.to_string())
            .unwrap_or_default();
        eprintln!("{name}: {error}");
        for word in words {
            assert!(error.contains(word), "{name}: the error should say {word:?}: {error:?}");
        }
    }
}

/// Attack: a `.wasm` in a watched layer is overwritten in place, in two halves with a
/// pause between (a slow copy, an editor crashing mid-save).
/// Expected: the half-written file fails to load and is reported; it never replaces the
/// version that was serving.
/// Checked: calls keep answering from the good version until the whole new file lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_written_in_two_halves_never_replaces_the_good_version() {
    let layers = Layers::new();
    let path = layers.ws().join("limits.wasm");
    std::fs::write(&path, limits_packaged("1.0.0")).unwrap();
    let registry = layers.open(true).await;
    let mut events = registry.subscribe();
    assert_eq!(version(&registry, "limits"), "1.0.0");

    let next = limits_packaged("2.0.0");
    let (first, second) = next.split_at(next.len() / 2);
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(first).unwrap();
    file.flush().unwrap();
    let failed = wait_for(&mut events, "limits", |e| matches!(e, RegistryEvent::LoadFailed { .. })).await;
    assert!(matches!(&failed, RegistryEvent::LoadFailed { error, .. } if error.contains("limits.wasm")), "{failed:?}");
    assert!(registry.entry("limits").unwrap().error.is_some());
    assert_eq!(version(&registry, "limits"), "1.0.0");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": "still here"})).await.unwrap().value, json!("still here"));

    file.write_all(second).unwrap();
    drop(file);
    wait_for(&mut events, "limits", |e| matches!(e, RegistryEvent::Updated(_))).await;
    let entry = registry.entry("limits").unwrap();
    assert!(entry.error.is_none(), "{:?}", entry.error);
    assert_eq!(version(&registry, "limits"), "2.0.0");
    assert_eq!(call(&registry, "limits", "echo", json!({"value": 2})).await.unwrap().value, json!(2));
}

/// Attack: install folders that are unsafe: a manifest name that traverses (`../x`), a
/// SKILL.md name breaking the standard, a symlink to `/etc/passwd` inside, a file over
/// 1 MiB, 11 MiB of text, a broken component, a component over the configured cap.
/// Expected: each is refused with the file and the rule, before anything is written.
/// Checked: the user layer is still empty and nothing is in the catalogue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_of_unsafe_folders_are_refused_before_anything_is_written() {
    let layers = Layers::new();
    let source = tempfile::tempdir().unwrap();
    let registry = layers.open(false).await;
    let refused = |result: Result<Arc<Entry>, RegistryError>| match result {
        Ok(entry) => panic!("installed `{}`", entry.name),
        Err(e) => e.to_string(),
    };

    let traversal = LIMITS.folder(&source.path().join("a"));
    std::fs::write(traversal.join("skill.toml"), LIMITS.manifest().replace("name = \"limits\"", "name = \"../x\"")).unwrap();
    let err = refused(registry.install(&traversal).await);
    assert!(err.contains("invalid skill name `../x`"), "{err}");

    let instructions = source.path().join("b");
    std::fs::create_dir(&instructions).unwrap();
    std::fs::write(instructions.join("SKILL.md"), "---\nname: Bad_Name\ndescription: d\n---\n").unwrap();
    let err = refused(registry.install(&instructions).await);
    assert!(err.contains("b/SKILL.md: name \"Bad_Name\" breaks agent-skills rule name-charset"), "{err}");

    let linked = TEXT_TOOLS.folder(&source.path().join("c"));
    std::fs::create_dir(linked.join("references")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", linked.join("references/passwd")).unwrap();
    let err = refused(registry.install(&linked).await);
    assert!(err.contains("references/passwd: symbolic links are not allowed"), "{err}");

    let big = TEXT_TOOLS.folder(&source.path().join("d"));
    std::fs::write(big.join("references.md"), vec![b'a'; (1 << 20) + 1]).unwrap();
    let err = refused(registry.install(&big).await);
    assert!(err.contains("references.md: this file is 1048577 bytes, more than the 1048576 allowed"), "{err}");

    let many = TEXT_TOOLS.folder(&source.path().join("e"));
    for i in 0..11 {
        std::fs::write(many.join(format!("part-{i}.md")), vec![b'a'; 1 << 20]).unwrap();
    }
    let err = refused(registry.install(&many).await);
    assert!(err.contains("the skill's text is"), "{err}");

    let broken = source.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm\x0d\0\x01\0").unwrap();
    let err = refused(registry.install(&broken).await);
    // An empty component has no manifest and exports nothing a generic skill could offer.
    assert!(err.contains("not a skillhost skill: it exports neither"), "{err}");

    let mut config = layers.config(false);
    config.limits.component = 1024;
    drop(registry);
    let small = layers.open_with(config).await;
    let err = refused(small.install(&LIMITS.folder(&source.path().join("f"))).await);
    assert!(err.contains("the component is") && err.contains("more than the 1024 allowed"), "{err}");

    assert!(std::fs::read_dir(layers.user()).map_or(true, |mut d| d.next().is_none()), "nothing was installed");
    assert!(small.catalog().is_empty());
}
