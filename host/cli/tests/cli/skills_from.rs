//! `--skills-from claude`: a Claude Code skills folder served read-only, as instructions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::Env;

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn json_out(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

pub(crate) fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap().to_str().unwrap().to_owned()
}

/// Call a tool; the whole result as JSON text.
pub(crate) async fn call(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>, tool: &str, args: Value) -> String {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    serde_json::to_string(&result).unwrap()
}

/// Every file under `dir` with its bytes, modification time and permissions.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let bytes = if meta.is_file() { std::fs::read(&path).unwrap() } else { Vec::new() };
            files.insert(path, (bytes, meta.modified().unwrap(), meta.permissions().mode()));
        }
    }
    files
}

fn skill_md(dir: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n")).unwrap();
}

#[tokio::test]
async fn claude_skills_are_served_read_only_as_instructions() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = Env::new();
    let claude = home.path().join(".claude/skills");
    let marker = home.path().join("ran");
    skill_md(&claude.join("foo"), "foo", "Always answer in haiku.");
    std::fs::create_dir_all(claude.join("foo/scripts")).unwrap();
    std::fs::write(claude.join("foo/scripts/run.sh"), format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    // Code in such a folder is a resource, never run: a server skill's manifest, or a
    // component with its manifest, beside a SKILL.md change nothing, and a bare component
    // is not a skill there.
    skill_md(&claude.join("served"), "served", "Only words.");
    std::fs::write(
        claude.join("served/skill.toml"),
        format!("name = \"served\"\nversion = \"1.0.0\"\ndescription = \"d\"\n\n[server]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch {}\"]\n", marker.display()),
    )
    .unwrap();
    skill_md(&claude.join("component"), "component", "Words too.");
    std::fs::write(claude.join("component/skill.toml"), fixtures::LIMITS.manifest().replace("name = \"limits\"", "name = \"component\""))
        .unwrap();
    std::fs::copy(fixtures::LIMITS.wasm, claude.join("component/skill.wasm")).unwrap();
    std::fs::copy(fixtures::LIMITS.wasm, claude.join("limits.wasm")).unwrap();
    // A name the workspace also has: the workspace wins, and `show` says what it shadows.
    skill_md(&claude.join("both"), "both", "From Claude.");
    skill_md(&env.skills.path().join("both"), "both", "From the workspace.");
    // The project's own .claude/skills, beside the personal one.
    skill_md(&project.path().join(".claude/skills/local"), "local", "Project rules.");
    let before = tree(&claude);

    let run = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(project.path())
            .env("HOME", home.path())
            .env_remove("SKILLHOST_SKILLS_FROM")
            .env_remove("SKILLHOST_CONFIG")
            .arg("--skills")
            .arg(env.skills.path())
            .arg("--data-dir")
            .arg(env.data.path())
            .args(args)
            .output()
            .unwrap()
    };
    let names = |list: &Value| -> Vec<String> { list.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect() };
    assert_eq!(names(&json_out(&run(&["list", "--json"]))), ["both"], "nothing from Claude without --skills-from");

    let list = json_out(&run(&["--skills-from", "claude", "list", "--json"]));
    assert_eq!(names(&list), ["both", "component", "foo", "local", "served"], "{list}");
    for entry in list.as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        let (layer, origin) = if name == "both" {
            ("workspace", env.skills.path().join("both"))
        } else if name == "local" {
            ("external", project.path().join(".claude/skills/local"))
        } else {
            ("external", claude.join(name))
        };
        assert_eq!(entry["layer"], layer, "{entry}");
        assert_eq!(entry["origin"], canonical(&origin), "{entry}");
        assert_eq!(entry["tools"], json!([]), "{entry}");
        if name == "foo" {
            // Its scripts are code: runnable in the jail once a human approves them,
            // never run by the host on its own.
            assert_eq!((entry["runtime"].as_str(), entry["state"].as_str()), (Some("scripts"), Some("pending_review")), "{entry}");
            assert!(entry["requests"].to_string().contains("scripts/run.sh"), "its script is shown: {entry}");
            continue;
        }
        assert_eq!((entry["runtime"].as_str(), entry["state"].as_str()), (Some("instructions"), Some("approved")), "{entry}");
        assert_eq!(entry["requests"], json!([]), "nothing is granted: {entry}");
    }
    // The standard's own folders (Codex, Amp) and Cursor's, beside Claude's: each after it.
    skill_md(&home.path().join(".agents/skills/codexed"), "codexed", "From ~/.agents/skills.");
    skill_md(&project.path().join(".cursor/skills/cursored"), "cursored", "From ./.cursor/skills.");
    let more = json_out(&run(&["--skills-from", "claude,agents,cursor", "list", "--json"]));
    assert_eq!(names(&more), ["both", "codexed", "component", "cursored", "foo", "local", "served"], "{more}");
    let codexed = more.as_array().unwrap().iter().find(|e| e["name"] == "codexed").unwrap();
    assert_eq!(codexed["layer"], "external", "{codexed}");
    assert_eq!(codexed["origin"], canonical(&home.path().join(".agents/skills/codexed")), "{codexed}");
    let show = run(&["--skills-from", "claude", "show", "foo"]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains(&format!("foo (external layer, {})", canonical(&claude.join("foo")))), "{text}");
    assert!(text.contains("read-only"), "{text}");
    let both = json_out(&run(&["--skills-from", "claude", "show", "both", "--json"]));
    assert_eq!(both["shadows"][0]["layer"], "external", "{both}");
    // The same from the host config.
    std::fs::write(env.data.path().join("config.toml"), "skills_from = [\"claude\"]\n").unwrap();
    assert_eq!(names(&json_out(&run(&["list", "--json"]))), ["both", "component", "foo", "local", "served"]);
    // Nothing writes there: remove refuses; install reads from it into the user layer.
    let out = run(&["remove", "foo", "--yes"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("not installed in the user layer"), "{}", stderr(&out));

    // Its script runs only once a human approves it, and then in the jail: it cannot
    // touch the marker in the host's home (checked at the end).
    let out = run(&["--skills-from", "claude", "run", "foo", "--", "sh", "scripts/run.sh"]);
    assert!(stderr(&out).contains("skillhost approve foo"), "{}", stderr(&out));
    let out = run(&["--skills-from", "claude", "approve", "foo", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["--skills-from", "claude", "run", "foo", "--", "sh", "scripts/run.sh"]);
    assert_eq!(out.status.code(), Some(1), "touch fails inside the jail: {}", stderr(&out));

    // Over MCP: the instructions and the script as text, no tools of its own.
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.current_dir(project.path()).env("HOME", home.path()).env_remove("SKILLHOST_SKILLS_FROM").env_remove("SKILLHOST_CONFIG");
    cmd.arg("--skills").arg(env.skills.path()).arg("--data-dir").arg(env.data.path()).args(["--skills-from", "claude", "serve"]);
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = crate::ready_tools(&client).await;
    assert!(!tools.iter().any(|t| ["served__", "component__", "limits__"].iter().any(|p| t.name.starts_with(p))), "{tools:?}");
    let got = call(&client, "skill_get", json!({"names": ["foo", "local"]})).await;
    assert!(got.contains("Always answer in haiku.") && got.contains("Project rules."), "{got}");
    let script = call(&client, "read_skill_resource", json!({"skill": "foo", "path": "scripts/run.sh"})).await;
    assert!(script.contains("#!/bin/sh"), "{script}");
    let manifest = call(&client, "read_skill_resource", json!({"skill": "served", "path": "skill.toml"})).await;
    assert!(manifest.contains("[server]"), "{manifest}");
    client.cancel().await.unwrap();

    assert!(!marker.exists(), "nothing in a Claude skills folder runs");
    assert_eq!(tree(&claude), before, "skillhost wrote nothing into ~/.claude/skills");
}
