//! The whole pipeline: a compile error comes back as file:line diagnostics, the fix is
//! built, tested and installed pending review, an update changes behaviour and a
//! rollback restores it with its approval; the same for a Python skill; attempts.

use serde_json::json;
use skillhost_forge::{Failure, ForgeError};
use skillhost_registry::{RegistryError, TrustState};

use crate::{Env, python, rust};

/// Writable files make the skill tier explicit: it waits for a human.
pub const GREETER_TOML: &str = r#"name = "greeter"
version = "0.1.0"
description = "Greets people by name"

[[capabilities.files]]
path = "."
mode = "rw"

[[tests]]
tool = "greet"
input = { name = "Ada" }
expect = "Hello, Ada!"
"#;

pub const GREETER_BROKEN: &str = r#"use skillhost_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Input { name: String }

/// Greet someone by name.
#[tool]
fn greet(input: Input) -> Result<String, ToolError> {
    Ok(format!("Hello, {}!", input.nam))
}

skillhost_sdk::skill!(greet);
"#;

pub fn greeter_lib(greeting: &str) -> String {
    GREETER_BROKEN.replace("input.nam)", "input.name)").replace("Hello", greeting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_skill_from_compile_error_to_rollback() {
    let env = Env::new(3).await;
    // 1. A compile error: file:line diagnostics relative to the submission.
    let err = env.create(rust("greeter", &[("skill.toml", GREETER_TOML), ("src/lib.rs", GREETER_BROKEN)])).await.unwrap_err();
    let ForgeError::Failed { attempt: 1, max: 3, failure: Failure::Build(build), .. } = &err else { panic!("{err}") };
    let error = build.diagnostics.iter().find(|d| d.level == "error").unwrap_or_else(|| panic!("{build:?}"));
    assert_eq!((error.file.as_deref(), error.line), (Some("src/lib.rs"), Some(9)), "{error:?}");
    assert!(error.message.contains("nam"), "{error:?}");
    assert!(err.to_string().contains("src/lib.rs:9:"), "{err}");
    assert!(err.to_string().contains("attempt 1 of 3"), "{err}");
    assert!(env.registry.entry("greeter").is_err(), "nothing installed");

    // 2. The fix: built, tested, installed, waiting for review.
    let lib = greeter_lib("Hello");
    let forged = env.create(rust("greeter", &[("skill.toml", GREETER_TOML), ("src/lib.rs", &lib)])).await.unwrap();
    assert_eq!((forged.state, forged.tools.as_slice(), forged.tests_passed), (TrustState::PendingReview, &["greet".to_owned()][..], 1));
    assert_eq!(env.forge.failed_attempts("greeter"), 0, "a success clears the count");
    let installed = env.registry.entry("greeter").unwrap().origin.clone();
    assert_eq!(std::fs::read_to_string(installed.join("source/src/lib.rs")).unwrap(), lib, "the source is stored with the skill");
    let refused = env.registry.call("greeter", "greet", json!({"name": "Ada"}), Default::default()).await.unwrap_err();
    assert!(matches!(refused, RegistryError::NotCallable { state: TrustState::PendingReview, .. }), "{refused}");
    env.approve("greeter").await;
    assert_eq!(env.call("greeter", "greet", json!({"name": "Ada"})).await, json!("Hello, Ada!"));

    // 3. A create of the same name is refused; an update changes behaviour.
    let err = env.create(rust("greeter", &[("skill.toml", GREETER_TOML), ("src/lib.rs", &lib)])).await.unwrap_err();
    assert!(matches!(err, ForgeError::Conflict(_)), "{err}");
    let howdy_toml = GREETER_TOML.replace("Hello, Ada!", "Howdy, Ada!");
    let forged = env.update("greeter", &[("src/lib.rs", &greeter_lib("Howdy")), ("skill.toml", &howdy_toml)]).await.unwrap();
    assert!(forged.replaced);
    assert_eq!(forged.state, TrustState::NeedsReapproval, "new content, new review");
    env.approve("greeter").await;
    assert_eq!(env.call("greeter", "greet", json!({"name": "Ada"})).await, json!("Howdy, Ada!"));

    // 4. A failing declared test comes back with expected and actual; nothing changes.
    let err = env.update("greeter", &[("src/lib.rs", &greeter_lib("Hi"))]).await.unwrap_err();
    let ForgeError::Failed { failure: Failure::Tests { failures }, .. } = &err else { panic!("{err}") };
    assert_eq!((failures[0].expected.clone(), failures[0].actual.clone()), (json!("Howdy, Ada!"), json!("Hi, Ada!")));
    assert_eq!(env.call("greeter", "greet", json!({"name": "Ada"})).await, json!("Howdy, Ada!"));

    // 5. Rollback restores the previous version in the trust state bound to its hash: a
    // human approved it before, so it is approved again without asking.
    let entry = env.registry.rollback("greeter").await.unwrap();
    assert_eq!(entry.state, TrustState::Approved, "the approval of that version");
    assert_eq!(env.call("greeter", "greet", json!({"name": "Ada"})).await, json!("Hello, Ada!"));
    // And again: rolls forward, to the version approved after the update.
    let entry = env.registry.rollback("greeter").await.unwrap();
    assert_eq!(entry.state, TrustState::Approved);
    assert_eq!(env.call("greeter", "greet", json!({"name": "Ada"})).await, json!("Howdy, Ada!"));
}

/// A build script runs code no human approved: this one writes wherever it can reach.
const PLANTING_BUILD_RS: &str = r#"fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let out = std::env::var("OUT_DIR").unwrap();
    for path in [format!("{dir}/planted.txt"), format!("{dir}/src/planted.rs"), format!("{dir}/../planted.txt"), format!("{out}/planted.txt")] {
        let _ = std::fs::write(&path, "planted by build.rs");
    }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_bytes_are_the_bytes_the_forge_tested() {
    let env = Env::new(3).await;
    let lib = greeter_lib("Hello");
    let files = [("skill.toml", GREETER_TOML), ("src/lib.rs", lib.as_str()), ("build.rs", PLANTING_BUILD_RS)];
    let forged = env.create(rust("greeter", &files)).await.unwrap();
    assert_eq!(forged.tests_passed, 1, "its declared test ran on what was built");
    let entry = env.registry.entry("greeter").unwrap();
    let installed = entry.loaded.as_ref().expect("it loaded").content_hash.clone();
    assert_eq!(forged.content_hash, installed, "the hash of the snapshot the forge tested is the installed content hash");
    // Exactly the submission and what it built: nothing the build wrote beside its
    // sources was read back into the skill.
    let snapshot = skillhost_package::Snapshot::read(&entry.origin, &Default::default()).unwrap();
    assert_eq!(snapshot.content_hash(), installed);
    let skillhost_package::Snapshot::Folder { files: on_disk, .. } = snapshot else { panic!("a Rust skill is installed as a folder") };
    let names: Vec<&str> = on_disk.keys().map(String::as_str).collect();
    assert_eq!(names, ["skill.toml", "skill.wasm", "source/build.rs", "source/skill.toml", "source/src/lib.rs"]);
    // The forge keeps no staged copy of what it installs.
    assert!(!env.forge_dir().join("stage").exists(), "a staging dir was made");
}

pub const ECHO_TOML: &str = r#"name = "shouter"
version = "0.1.0"
description = "Repeats text loudly"

[server]
command = "python"
args = ["server.py"]

[[capabilities.files]]
path = "."
mode = "rw"

[[tests]]
tool = "shout"
input = { text = "hi" }
expect = { text = "HI" }
"#;

pub fn echo_server(suffix: &str) -> String {
    format!(
        "from fastmcp import FastMCP\n\nmcp = FastMCP(\"shouter\")\n\n\n@mcp.tool()\ndef shout(text: str) -> dict:\n    \"\"\"Repeat text in capitals.\"\"\"\n    return {{\"text\": text.upper() + \"{suffix}\"}}\n\n\nif __name__ == \"__main__\":\n    mcp.run()\n"
    )
}

pub const ECHO_PYTEST: &str = "from server import shout\n\n\ndef test_shout():\n    assert shout.fn(\"a\")[\"text\"].startswith(\"A\") if hasattr(shout, \"fn\") else shout(\"a\")[\"text\"].startswith(\"A\")\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_skill_create_update_rollback() {
    let env = Env::new(3).await;
    // A syntax error: the sandboxed check fails with the Python error.
    let broken = "from fastmcp import FastMCP\nmcp = FastMCP(\"shouter\"\n";
    let err = env.create(python("shouter", &[("skill.toml", ECHO_TOML), ("server.py", broken)])).await.unwrap_err();
    let ForgeError::Failed { failure: Failure::Load { error }, .. } = &err else { panic!("{err}") };
    assert!(error.contains("did not start") || error.contains("SyntaxError"), "{error}");

    let server = echo_server("");
    let forged =
        env.create(python("shouter", &[("skill.toml", ECHO_TOML), ("server.py", &server), ("test_server.py", ECHO_PYTEST)])).await.unwrap();
    assert_eq!((forged.state, forged.tools.as_slice()), (TrustState::PendingReview, &["shout".to_owned()][..]));
    env.approve("shouter").await;
    assert_eq!(env.call("shouter", "shout", json!({"text": "hi"})).await["text"], "HI");

    let toml = ECHO_TOML.replace("\"HI\"", "\"HI!\"");
    env.update("shouter", &[("server.py", &echo_server("!")), ("skill.toml", &toml)]).await.unwrap();
    env.approve("shouter").await;
    assert_eq!(env.call("shouter", "shout", json!({"text": "hi"})).await["text"], "HI!");

    let entry = env.registry.rollback("shouter").await.unwrap();
    assert_eq!(entry.state, TrustState::Approved, "the approval of the version rolled back to");
    assert_eq!(env.call("shouter", "shout", json!({"text": "hi"})).await["text"], "HI");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_run_out_until_a_human_resets() {
    let env = Env::new(2).await;
    let bad = [("skill.toml", "name = \"counted\"\nversion = \"1\"\n"), ("src/lib.rs", "")];
    let err = env.create(rust("counted", &bad)).await.unwrap_err();
    assert!(matches!(err, ForgeError::Failed { attempt: 1, max: 2, failure: Failure::Manifest { .. }, .. }), "{err}");
    assert!(err.to_string().contains("missing field `description`"), "{err}");
    let err = env.create(rust("counted", &bad)).await.unwrap_err();
    assert!(err.to_string().contains("attempt 2 of 2; that was the last attempt: `skillhost forge --reset counted`"), "{err}");
    assert_eq!(err.to_json()["last_attempt"], true);
    let err = env.create(rust("counted", &bad)).await.unwrap_err();
    assert!(matches!(err, ForgeError::Exhausted { .. }), "{err}");
    env.forge.reset("counted").unwrap();
    let err = env.create(rust("counted", &bad)).await.unwrap_err();
    assert!(matches!(err, ForgeError::Failed { attempt: 1, .. }), "{err}");
}

/// An agent creates an Agent Skills folder (SKILL.md and a script), then fixes its script
/// through skill_update: each version waits for a human, nothing of it runs in the forge,
/// and the request for the fix says which file changed, from which hash to which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_of_scripts_is_created_and_fixed_through_the_forge_and_waits_for_a_human() {
    let env = Env::new(3).await;
    let md =
        "---\nname: counter\ndescription: Counts words of a file. Use when asked to count.\n---\nRun `python scripts/count.py FILE`.\n";
    let v1 = "import sys\nprint(len(open(sys.argv[1]).read().split()))\n";
    let submission = skillhost_forge::Submission {
        name: "counter".into(),
        language: skillhost_forge::Language::Scripts,
        files: crate::files_of(&[("SKILL.md", md), ("scripts/count.py", v1)]),
    };
    let forged = env.create(submission).await.unwrap();
    assert_eq!(forged.state, skillhost_registry::TrustState::PendingReview, "scripts are code: {forged:?}");
    let request = env.registry.approval_request("counter").unwrap();
    assert!(request.requests.iter().any(|l| l.contains("scripts/count.py") && l.contains("sha256")), "{:?}", request.requests);
    assert!(request.files.is_empty(), "never approved: no file diff");
    env.approve("counter").await;

    let v2 = "import sys\nprint(len(open(sys.argv[1], encoding='utf-8').read().split()))\n";
    let forged = env.update("counter", &[("scripts/count.py", v2), ("references/usage.md", "# usage\n")]).await.unwrap();
    assert_eq!(forged.state, skillhost_registry::TrustState::NeedsReapproval, "{forged:?}");
    let request = env.registry.approval_request("counter").unwrap();
    let hash = |text: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()));
    assert_eq!(
        request.files,
        [
            format!("+ \"references/usage.md\" (sha256 {})", hash("# usage\n")),
            format!("~ \"scripts/count.py\" (sha256 {} → {})", hash(v1), hash(v2))
        ],
    );
    assert!(request.question().contains("~ \"scripts/count.py\""), "{}", request.question());

    // A host the agent's fix asks for is an escalation the human sees before it runs.
    env.approve("counter").await;
    let asks =
        "name = \"counter\"\nversion = \"0.1.0\"\ndescription = \"Counts words\"\n[network]\nallow = [\"https://api.example.com\"]\n";
    let forged = env.update("counter", &[("skill.toml", asks)]).await.unwrap();
    assert_eq!(forged.state, skillhost_registry::TrustState::NeedsReapproval, "{forged:?}");
    let request = env.registry.approval_request("counter").unwrap();
    assert!(request.diff.contains(&"+ network allow: https://api.example.com".to_owned()), "{:?}", request.diff);

    // The folder may hold only what a human can review: no binaries, no other files.
    let refused = env.update("counter", &[("scripts/helper.so", "\u{7f}ELF")]).await.unwrap_err();
    assert!(refused.to_string().contains("binaries"), "{refused}");
    let refused = env.update("counter", &[("Makefile", "all:\n")]).await.unwrap_err();
    assert!(refused.to_string().contains("not on the scripts allow list"), "{refused}");
}
