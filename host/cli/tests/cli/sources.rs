//! Skills from remote sources through the `skillhost` binary, against real sources the
//! test starts: a `docker-registry` on loopback (publish signed, install by tag and by
//! digest, a component that installs and runs, a wrong or missing key refused, `sync` reproducing the set byte for byte in a
//! second data dir, `outdated` and `sync --update` when the tag moves), a bare git
//! repository over `file://` (a moved branch not followed without `sync --update`), and
//! `serve --http --publish-skills` as a well-known index another host installs from.

use std::path::{Path, PathBuf};

use fixtures::TEXT_TOOLS;
use fixtures::git::GitRepo;
use fixtures::registry::OciRegistry;
use serde_json::Value;

/// A host of its own: [`Env`]'s skills and data dirs, and what these tests ask of it.
use crate::Env as Host;

trait Remote {
    fn ok(&self, args: &[&str]) -> String;
    fn refused(&self, args: &[&str]) -> String;
    fn user_layer(&self) -> PathBuf;
    fn show(&self, skill: &str) -> Value;
}

impl Remote for Host {
    /// `args` must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "skillhost {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `args` must fail; its stderr.
    fn refused(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "skillhost {args:?} succeeded:\n{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn user_layer(&self) -> PathBuf {
        self.data.path().join("user-skills")
    }

    fn show(&self, skill: &str) -> Value {
        serde_json::from_str(&self.ok(&["show", skill, "--json"])).unwrap()
    }
}

/// Every file under `dir`, relative path to bytes.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push((path.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// A SKILL.md skill with a script, as a folder under `dir`.
fn skill_folder(dir: &Path, name: &str, body: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(folder.join("scripts")).unwrap();
    std::fs::write(folder.join("SKILL.md"), format!("---\nname: {name}\ndescription: Says {body}.\n---\nRun scripts/say.sh.\n")).unwrap();
    std::fs::write(folder.join("scripts/say.sh"), format!("#!/bin/sh\necho {body}\n")).unwrap();
    folder
}

fn lock_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn oci_publish_signed_install_verify_and_sync_byte_for_byte() {
    let registry = OciRegistry::start();
    let author = Host::new();
    let work = tempfile::tempdir().unwrap();
    let keys = work.path().join("team");
    author.ok(&["key", "generate", "--out", keys.to_str().unwrap()]);
    let (key, public) = (work.path().join("team.key"), work.path().join("team.pub"));
    let other = work.path().join("other");
    author.ok(&["key", "generate", "--out", other.to_str().unwrap()]);
    let folder = skill_folder(work.path(), "say-hello", "hello");
    let tag = format!("oci://{}/team/say-hello:1.0", registry.host);
    let pinned = author.ok(&["publish", folder.to_str().unwrap(), &tag, "--sign", key.to_str().unwrap()]);
    let pinned = pinned.trim().to_owned();
    assert!(pinned.starts_with(&format!("oci://{}/team/say-hello@sha256:", registry.host)), "{pinned}");

    // Install by tag, verified; the lock pins the digest and the key.
    let first = Host::new();
    let lock = work.path().join("skills.lock");
    let lock_arg = lock.to_str().unwrap();
    first.ok(&["install", &tag, "--verify", public.to_str().unwrap(), "--lock", lock_arg]);
    let shown = first.show("say-hello");
    assert_eq!(shown["state"], "pending_review", "remote code waits for a human: {shown}");
    let provenance = &shown["approval"]["provenance"];
    assert_eq!(provenance["source"], tag.as_str(), "{shown}");
    assert_eq!(provenance["pinned"], pinned.as_str(), "{shown}");
    assert_eq!(provenance["signature"]["status"], "verified", "{shown}");
    let text = first.ok(&["show", "say-hello"]);
    assert!(text.contains(&format!("pinned: {pinned}")) && text.contains("signature: verified with key sha256:"), "{text}");
    let locked = lock_of(&lock);
    assert!(locked.contains(&format!("source = \"{tag}\"")) && locked.contains("key = \"sha256:"), "{locked}");
    assert_eq!(tree(&first.user_layer().join("say-hello")), tree(&folder), "the installed files are the published ones");

    // By digest, too.
    let by_digest = Host::new();
    by_digest.ok(&["install", &pinned, "--no-lock"]);
    assert_eq!(tree(&by_digest.user_layer()), tree(&first.user_layer()));
    assert_eq!(by_digest.show("say-hello")["approval"]["provenance"]["signature"]["status"], "not_checked");

    // A key that did not sign it is refused; nothing is written.
    let refused = Host::new();
    let err = refused.refused(&["install", &tag, "--verify", work.path().join("other.pub").to_str().unwrap(), "--no-lock"]);
    assert!(err.contains("signature refused") && err.contains("not by any of the keys"), "{err}");
    assert!(tree(&refused.user_layer()).is_empty(), "nothing written on a refused signature");

    // A verification policy in the host config binds without --verify: under its prefix an
    // unsigned artifact is refused, a signed one installs verified.
    let unsigned_tag = format!("oci://{}/team/unsigned:1.0", registry.host);
    author.ok(&["publish", folder.to_str().unwrap(), &unsigned_tag]);
    let ruled = Host::new();
    let config = format!("[[sources.verify]]\nprefix = \"oci://{}/team/\"\nkey = \"{}\"\n", registry.host, public.display());
    std::fs::write(ruled.data.path().join("config.toml"), config).unwrap();
    let err = ruled.refused(&["install", &unsigned_tag, "--no-lock"]);
    assert!(err.contains("no signature is stored"), "{err}");
    assert!(tree(&ruled.user_layer()).is_empty());
    ruled.ok(&["install", &tag, "--no-lock"]);
    assert_eq!(ruled.show("say-hello")["approval"]["provenance"]["signature"]["status"], "verified");

    // sync into a second data dir: the same set, byte for byte; without the locked key it
    // is refused; a second sync has nothing to do.
    let second = Host::new();
    let err = second.refused(&["sync", "--lock", lock_arg]);
    assert!(err.contains("no key given has that fingerprint") && err.contains("--verify"), "{err}");
    assert!(tree(&second.user_layer()).is_empty());
    second.ok(&["sync", "--lock", lock_arg, "--verify", public.to_str().unwrap()]);
    assert_eq!(tree(&second.user_layer()), tree(&first.user_layer()), "sync reproduces the locked set byte for byte");
    let again = second.run(&["sync", "--lock", lock_arg, "--verify", public.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("say-hello: up-to-date"), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(second.show("say-hello")["approval"]["provenance"]["source"], tag.as_str(), "a synced skill's source is the lock's");

    // A human approves what was synced: the approval is bound to those bytes.
    second.ok(&["approve", "say-hello", "--yes"]);
    assert_eq!(second.show("say-hello")["state"], "approved");

    // The tag moves: `outdated` says so and changes nothing; `sync` keeps the pin (and the
    // approval); `sync --update` moves it, and the new digest needs a human again.
    let changed = skill_folder(&work.path().join("v2"), "say-hello", "hello again");
    author.ok(&["publish", changed.to_str().unwrap(), &tag, "--sign", key.to_str().unwrap()]);
    let rows: Value = serde_json::from_str(&second.ok(&["outdated", "--lock", lock_arg, "--json"])).unwrap();
    assert_eq!(rows[0]["status"], "moved", "{rows}");
    assert_eq!(lock_of(&lock), locked, "outdated changes nothing");
    second.ok(&["sync", "--lock", lock_arg, "--verify", public.to_str().unwrap()]);
    assert_eq!(tree(&second.user_layer()), tree(&first.user_layer()), "a moved tag is not followed without --update");
    assert_eq!(second.show("say-hello")["state"], "approved", "sync of the pinned bytes keeps their approval");
    second.ok(&["sync", "--lock", lock_arg, "--verify", public.to_str().unwrap(), "--update"]);
    assert_eq!(tree(&second.user_layer().join("say-hello")), tree(&changed));
    assert_ne!(lock_of(&lock), locked, "--update rewrote the pin");
    assert_eq!(second.show("say-hello")["state"], "needs_reapproval", "a new digest is a new version, back to review");

    // A lock whose content no longer matches its digest is an error, never an update.
    let tampered = lock_of(&lock).replace("content = \"", "content = \"0");
    std::fs::write(&lock, tampered).unwrap();
    let third = Host::new();
    let err = third.refused(&["sync", "--lock", lock_arg, "--verify", public.to_str().unwrap()]);
    assert!(err.contains("is not the expected"), "{err}");
    assert!(tree(&third.user_layer()).is_empty());
}

#[test]
fn a_published_component_installs_and_runs() {
    let registry = OciRegistry::start();
    let author = Host::new();
    let wasm = TEXT_TOOLS.packaged(author.skills.path());
    let tag = format!("oci://{}/components/text-tools:0.1.0", registry.host);
    let pinned = author.ok(&["publish", wasm.to_str().unwrap(), &tag, "--json"]);
    let pinned: Value = serde_json::from_str(&pinned).unwrap();
    let user = Host::new();
    user.ok(&["install", pinned["pinned"].as_str().unwrap(), "--no-lock"]);
    assert_eq!(std::fs::read(user.user_layer().join("text-tools.wasm")).unwrap(), std::fs::read(&wasm).unwrap());
    let out: Value = serde_json::from_str(&user.ok(&["call", "text-tools", "text_stats", "--input", r#"{"text": "one two"}"#])).unwrap();
    assert_eq!(out["words"], 2, "{out}");
}

#[test]
fn git_source_pins_a_commit_and_a_moved_branch_waits_for_update() {
    let repo = GitRepo::new();
    let first = repo.commit(&[
        ("skills/notes/SKILL.md", b"---\nname: notes\ndescription: Team notes.\n---\nWrite short notes.\n"),
        ("README.md", b"not part of the skill\n"),
    ]);
    let host = Host::new();
    let work = tempfile::tempdir().unwrap();
    let lock = work.path().join("skills.lock");
    let lock_arg = lock.to_str().unwrap();
    let source = format!("git+file://{}#path=skills/notes&rev=main", repo.bare.display());
    host.ok(&["install", &source, "--lock", lock_arg]);
    let provenance = host.show("notes")["approval"]["provenance"].clone();
    assert_eq!(provenance["digest"], first.as_str(), "{provenance}");
    assert!(lock_of(&lock).contains(&format!("digest = \"{first}\"")), "{}", lock_of(&lock));
    let installed = tree(&host.user_layer());
    assert_eq!(installed.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["notes/SKILL.md"]);

    let second = repo.commit(&[("skills/notes/SKILL.md", b"---\nname: notes\ndescription: Team notes.\n---\nWrite longer notes.\n")]);
    let out = host.ok(&["outdated", "--lock", lock_arg]);
    assert!(out.contains("moved") && out.contains(&second), "{out}");
    host.ok(&["sync", "--lock", lock_arg]);
    assert_eq!(tree(&host.user_layer()), installed, "the moved branch is not followed without --update");
    let fresh = Host::new();
    fresh.ok(&["sync", "--lock", lock_arg]);
    assert_eq!(tree(&fresh.user_layer()), installed, "a fresh data dir gets the pinned commit, not the branch");
    host.ok(&["sync", "--lock", lock_arg, "--update"]);
    assert!(std::fs::read_to_string(host.user_layer().join("notes/SKILL.md")).unwrap().contains("longer"));
    assert!(lock_of(&lock).contains(&format!("digest = \"{second}\"")));
}

#[test]
fn serve_publishes_approved_instruction_skills_as_a_well_known_index() {
    let publisher = Host::new();
    let work = tempfile::tempdir().unwrap();
    let notes = work.path().join("team-notes");
    std::fs::create_dir_all(notes.join("references")).unwrap();
    std::fs::write(notes.join("SKILL.md"), "---\nname: team-notes\ndescription: How the team writes notes.\n---\nBe brief.\n").unwrap();
    std::fs::write(notes.join("references/style.md"), "Short lines.\n").unwrap();
    publisher.ok(&["install", notes.to_str().unwrap()]);
    // A skill with scripts waits for a human, and is not published.
    publisher.ok(&["install", skill_folder(work.path(), "say-hi", "hi").to_str().unwrap()]);
    let (_server, url) = crate::serve_http(publisher.skills.path(), publisher.data.path(), &["--publish-skills"]);
    let base = url.trim_end_matches("/mcp").to_owned();

    let consumer = Host::new();
    let out = consumer.run(&["install", &format!("{base}/"), "--json"]);
    assert_eq!(out.status.code(), Some(2), "no skill chosen: the offer is listed and nothing installed");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let names: Vec<&str> = listed.as_array().map(|a| a.iter().filter_map(|s| s["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, ["team-notes"], "only approved instruction skills are published: {listed}");
    consumer.ok(&["install", &format!("{base}/"), "--skill", "team-notes", "--no-lock"]);
    assert_eq!(tree(&consumer.user_layer().join("team-notes")), tree(&notes));
    let err = consumer.refused(&["install", &format!("{base}/"), "--skill", "say-hi", "--no-lock"]);
    assert!(err.contains("lists no skill"), "{err}");
}

/// `install oci://…` opens only what it installs: in a data dir whose other skills hang
/// at load (servers that never answer the handshake, each holding one of the 8 load slots
/// for the 10 s an unapproved skill has to list its tools; forty of them: a full load
/// takes 50 s), the install finishes without waiting for them.
#[test]
fn a_remote_install_waits_for_no_other_skill() {
    use std::time::{Duration, Instant};
    let registry = OciRegistry::start();
    let author = Host::new();
    let work = tempfile::tempdir().unwrap();
    let tag = format!("oci://{}/team/say-hello:1.0", registry.host);
    author.ok(&["publish", skill_folder(work.path(), "say-hello", "hello").to_str().unwrap(), &tag]);

    let user = Host::new();
    for i in 0..40 {
        let dir = user.skills.path().join(format!("hangs-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = format!(
            "name = \"hangs-{i}\"\nversion = \"0.1.0\"\ndescription = \"Never answers\"\n\n[server]\ncommand = \"python\"\nargs = [\"server.py\"]\n"
        );
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        std::fs::write(dir.join("server.py"), "import time\ntime.sleep(600)\n").unwrap();
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(user.skills.path())
        .arg("--data-dir")
        .arg(user.data.path())
        .args(["install", &tag, "--no-lock"])
        .env("SKILLHOST_VENV", fixtures::python::venv())
        .env_remove("SKILLHOST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A hang guard well below the 50 s the other skills' first load takes.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(25) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("the install waited for the skills that hang at load:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(user.user_layer().join("say-hello/SKILL.md").is_file());
}

/// A relative `key` of a `[[sources.verify]]` rule is the config file's neighbour, never a
/// file of the directory skillhost was started in: a repository an MCP client starts
/// skillhost from cannot hold its own `team.pub` and make its author's signature pass
/// for the team's.
#[test]
fn a_relative_verification_key_is_read_beside_the_config_not_in_the_working_directory() {
    let registry = OciRegistry::start();
    let user = Host::new();
    let work = tempfile::tempdir().unwrap();
    // The team's key beside the host config; the attacker's in the repository.
    user.ok(&["key", "generate", "--out", user.data.path().join("team").to_str().unwrap()]);
    let attacker = work.path().join("attacker");
    user.ok(&["key", "generate", "--out", attacker.to_str().unwrap()]);
    let repo = tempfile::tempdir().unwrap();
    std::fs::copy(attacker.with_extension("pub"), repo.path().join("team.pub")).unwrap();
    let tag = format!("oci://{}/team/say-hello:1.0", registry.host);
    let folder = skill_folder(work.path(), "say-hello", "hello");
    user.ok(&["publish", folder.to_str().unwrap(), &tag, "--sign", attacker.with_extension("key").to_str().unwrap()]);
    let config = format!("[[sources.verify]]\nprefix = \"oci://{}/team/\"\nkey = \"team.pub\"\n", registry.host);
    std::fs::write(user.data.path().join("config.toml"), config).unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(repo.path())
        .arg("--skills")
        .arg(user.skills.path())
        .arg("--data-dir")
        .arg(user.data.path())
        .args(["install", &tag, "--no-lock"])
        .env_remove("SKILLHOST_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the repository's key passed for the team's:\n{stderr}");
    assert!(stderr.contains("signature refused") && stderr.contains("not by any of the keys"), "{stderr}");
    assert!(tree(&user.user_layer()).is_empty(), "nothing written on a refused signature");
}
