//! Escapes a skill must not make: files outside its grant (absolute, `..`, planted and
//! created symlinks), writes through a read-only grant, environment variables, sockets
//! and name lookup. Each case checks the refusal and, on the host, that nothing happened.

use std::net::TcpListener;

use fixtures::{ESCAPE, TestHost};
use serde_json::{Value, json};
use skillhost::DirectSkill;

use crate::{ok, test_host};

async fn setup() -> (TestHost, DirectSkill) {
    let t = test_host();
    let dir = ESCAPE.folder(t.skills.path());
    let skill = t.host.load_path_granted(&dir).await.expect("escape guest loads");
    (t, skill)
}

/// Assert a report is a refusal and return its error text.
fn refused(report: &Value, what: &str) -> String {
    assert_eq!(report["ok"], false, "{what} should be refused, got {report}");
    report["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn in_tree_paths_work() {
    let (t, skill) = setup().await;
    let data = t.data_dir("escape");
    std::fs::write(data.join("hello.txt"), "hi from the host").unwrap();
    let report = ok(&skill, "read_file", json!({"path": "/data/hello.txt"})).await;
    assert_eq!(report["value"], "hi from the host");
    let report = ok(&skill, "write_file", json!({"path": "/data/new.txt", "content": "written"})).await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(std::fs::read_to_string(data.join("new.txt")).unwrap(), "written");
    let report = ok(&skill, "list_dir", json!({"path": "/data"})).await;
    let listing = report["value"].as_str().unwrap();
    assert!(listing.contains("hello.txt") && listing.contains("new.txt"), "{listing}");
}

#[tokio::test]
async fn files_outside_the_grant_are_refused() {
    let (t, skill) = setup().await;
    let outside = t.data.path().join("outside.txt");
    std::fs::write(&outside, "SECRET-OUTSIDE").unwrap();
    let host_path = outside.display().to_string();
    for path in [
        "/etc/passwd",
        "/data/../etc/passwd",
        "/data/../../outside.txt",
        "../outside.txt",
        "/data/ro/../../outside.txt",
        host_path.as_str(),
        "/proc/self/environ",
    ] {
        let report = ok(&skill, "read_file", json!({ "path": path })).await;
        refused(&report, &format!("reading {path}"));
        assert!(!report.to_string().contains("SECRET-OUTSIDE"));
        assert!(!report.to_string().contains("root:"), "no /etc/passwd content");
    }
    let report = ok(&skill, "list_dir", json!({"path": "/"})).await;
    if report["ok"] == true {
        assert_eq!(report["value"], "data", "only the grant is visible at the root: {report}");
    }
}

#[tokio::test]
async fn planted_symlinks_pointing_outside_are_not_followed() {
    let (t, skill) = setup().await;
    let data = t.data_dir("escape");
    let outside = t.data.path().join("outside.txt");
    std::fs::write(&outside, "SECRET-OUTSIDE").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("../../outside.txt", data.join("rel-link")).unwrap();
    std::os::unix::fs::symlink(&outside, data.join("host-link")).unwrap();
    std::os::unix::fs::symlink(t.data.path(), data.join("dir-link")).unwrap();
    for path in ["/data/abs-link", "/data/rel-link", "/data/host-link", "/data/dir-link/outside.txt"] {
        let report = ok(&skill, "read_file", json!({ "path": path })).await;
        refused(&report, &format!("following {path}"));
        assert!(!report.to_string().contains("SECRET-OUTSIDE") && !report.to_string().contains("root:"));
    }
    let report = ok(&skill, "write_file", json!({"path": "/data/rel-link", "content": "overwritten"})).await;
    refused(&report, "writing through a planted link");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "SECRET-OUTSIDE");
}

#[tokio::test]
async fn creating_symlinks_that_point_outside_is_refused() {
    let (t, skill) = setup().await;
    let data = t.data_dir("escape");
    for (target, link) in [("/etc/passwd", "/data/a"), ("../../outside.txt", "/data/b"), ("sub/../../x", "/data/c"), ("..", "/data/d")] {
        let report = ok(&skill, "symlink", json!({ "target": target, "link": link })).await;
        let error = refused(&report, &format!("creating {link} -> {target}"));
        assert!(error.contains("PermissionDenied") || error.contains("NotPermitted"), "{error}");
        let name = link.trim_start_matches("/data/");
        assert!(std::fs::symlink_metadata(data.join(name)).is_err(), "no link {name} was left on disk");
    }
    // A link that stays inside the directory is fine, and reading through it works.
    std::fs::write(data.join("inside.txt"), "inside").unwrap();
    let report = ok(&skill, "symlink", json!({"target": "inside.txt", "link": "/data/good"})).await;
    assert_eq!(report["ok"], true, "{report}");
    let report = ok(&skill, "read_file", json!({"path": "/data/good"})).await;
    assert_eq!(report["value"], "inside");
}

#[tokio::test]
async fn read_only_grant_cannot_be_written() {
    let (t, skill) = setup().await;
    let ro = t.data_dir("escape").join("ro");
    std::fs::write(ro.join("keep.txt"), "original").unwrap();
    for path in ["/data/ro/new.txt", "/data/ro/keep.txt"] {
        let report = ok(&skill, "write_file", json!({"path": path, "content": "changed"})).await;
        refused(&report, &format!("writing {path}"));
    }
    assert!(!ro.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(ro.join("keep.txt")).unwrap(), "original");
    let report = ok(&skill, "symlink", json!({"target": "keep.txt", "link": "/data/ro/link"})).await;
    refused(&report, "creating a link in a read-only dir");
    let report = ok(&skill, "read_file", json!({"path": "/data/ro/keep.txt"})).await;
    assert_eq!(report["value"], "original", "reading a read-only grant works");
}

#[tokio::test]
async fn no_environment_and_no_arguments() {
    let (_t, skill) = setup().await;
    assert!(std::env::var_os("PATH").is_some(), "the host itself has an environment");
    let report = ok(&skill, "env", json!({})).await;
    let text = report.to_string();
    assert!(!text.contains("PATH") && !text.contains("HOME") && !text.contains("CARGO"), "env leaked: {text}");
}

#[tokio::test]
async fn sockets_and_name_lookup_are_refused() {
    let (_t, skill) = setup().await;
    let canary = TcpListener::bind("127.0.0.1:0").unwrap();
    canary.set_nonblocking(true).unwrap();
    let addr = canary.local_addr().unwrap();
    let report = ok(&skill, "connect", json!({ "addr": addr.to_string() })).await;
    refused(&report, "connecting to a local listener");
    assert!(canary.accept().is_err(), "the canary listener received a connection");
    let report = ok(&skill, "resolve", json!({"host": "localhost"})).await;
    refused(&report, "resolving a name");
}

/// A file that exists but that no `[[capabilities.files]]` grant covers is reported as
/// a missing grant, with the entry to add and the re-approval; a file missing from a
/// granted directory is still reported as missing.
#[tokio::test]
async fn a_file_without_a_grant_names_the_missing_grant_not_a_missing_file() {
    let t = test_host();
    let dir = ESCAPE.folder(t.skills.path());
    let manifest = ESCAPE.manifest();
    let without_files = &manifest[..manifest.find("[[capabilities.files]]").expect("the fixture asks for files")];
    std::fs::write(dir.join("skill.toml"), without_files).unwrap();
    let skill = t.host.load_path_granted(&dir).await.expect("escape loads without files");
    let data = t.data_dir("escape");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("note.txt"), "here all along").unwrap();
    let err = crate::call(&skill, "read_data", json!({"path": "note.txt"})).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, skillhost::CallError { failure: skillhost::skill::CallFailure::Denied { .. }, .. }), "{err:?}");
    assert!(!message.contains("does not exist"), "the file exists; the grant is missing: {message}");
    assert!(message.contains("`note.txt` is outside the skill's granted files"), "{message}");
    assert!(message.contains("[[capabilities.files]] path = \".\" mode = \"ro\"") && message.contains("approve"), "{message}");

    let (t, skill) = setup().await;
    std::fs::create_dir_all(t.data_dir("escape")).unwrap();
    let err = crate::call(&skill, "read_data", json!({"path": "absent.txt"})).await.unwrap_err();
    assert!(
        matches!(&err, skillhost::CallError { failure: skillhost::skill::CallFailure::Failed { message, .. }, .. } if message.contains("`absent.txt` does not exist")),
        "{err:?}"
    );
}

/// Attack: a guest that never drops a handle makes the host hold an entry in the call's
/// resource table for each, host memory outside the guest's memory limit (wasmtime's
/// default allows a million). The call stops at the host's limit with an error that says
/// so, and the next call starts clean.
#[tokio::test]
async fn a_guest_hoarding_handles_stops_at_the_hosts_limit() {
    let (_t, skill) = setup().await;
    let report = ok(&skill, "hoard_handles", json!({"n": 1000})).await;
    assert_eq!(report["value"], 1000, "a thousand handles at once are within the limit: {report}");
    let err = crate::call(&skill, "hoard_handles", json!({"n": 200_000})).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err.failure, skillhost::skill::CallFailure::Crashed { .. }), "{err:?}");
    assert!(message.contains("held 10000 host resources at once") && message.contains("drop the handles"), "{message}");
    let report = ok(&skill, "hoard_handles", json!({"n": 1000})).await;
    assert_eq!(report["value"], 1000, "the next call starts with an empty table: {report}");
}
