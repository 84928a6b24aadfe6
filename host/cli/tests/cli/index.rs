//! `skillhost index status|rebuild` and `search` over the on-disk index in
//! DATA_DIR/index: it persists across runs, follows removed skills, reports where it
//! lives and which ranker answers, and a damaged index is rebuilt, not fatal.

use serde_json::Value;

use crate::Env;

fn write_skill(env: &Env, name: &str, description: &str) {
    let folder = env.skills.path().join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("SKILL.md"), format!("---\nname: {name}\ndescription: {description}\n---\nSteps.\n")).unwrap();
}

fn json(env: &Env, args: &[&str]) -> (Value, String) {
    let out = env.run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    (serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout))), stderr)
}

#[test]
fn the_index_lives_in_the_data_dir_and_follows_the_skills_across_runs() {
    let env = Env::new();
    write_skill(&env, "release-notes", "How we write release notes");
    write_skill(&env, "uptime-runbook", "What to do when the site is down");

    let (status, _) = json(&env, &["index", "status", "--json"]);
    assert_eq!(status["storage"], "disk", "{status}");
    assert_eq!(status["dir"].as_str().unwrap(), env.data.path().join("index").to_str().unwrap());
    assert_eq!((status["skills"].as_u64(), status["documents"].as_u64()), (Some(2), Some(2)), "{status}");
    assert!(status["disk_bytes"].as_u64().unwrap() > 0, "{status}");
    let hybrid = status["ranker"] == "hybrid";
    assert_eq!(status["model"].is_string(), hybrid, "a model exactly when hybrid: {status}");
    assert!(env.data.path().join("index/meta.json").is_file());

    let (found, _) = json(&env, &["search", "the site is down", "--in", "skills", "--json"]);
    assert_eq!(found["ranker"], status["ranker"]);
    assert_eq!(found["results"][0]["name"], "uptime-runbook", "{found}");

    // A removed skill is gone at the next run, though the index on disk had it.
    std::fs::remove_dir_all(env.skills.path().join("uptime-runbook")).unwrap();
    let (found, _) = json(&env, &["search", "site down", "--in", "skills", "--json"]);
    assert!(found["results"].as_array().unwrap().iter().all(|r| r["name"] != "uptime-runbook"), "{found}");

    let (rebuilt, _) = json(&env, &["index", "rebuild", "--json"]);
    assert_eq!((rebuilt["skills"].as_u64(), rebuilt["documents"].as_u64()), (Some(1), Some(1)), "{rebuilt}");
    assert_eq!(rebuilt["embedded"].as_u64(), Some(if hybrid { 1 } else { 0 }), "{rebuilt}");

    let human = env.run(&["index", "status"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("documents: 1 (1 skills") && text.contains("storage:"), "{text}");
}

#[test]
fn a_damaged_index_is_rebuilt_with_a_warning() {
    let env = Env::new();
    write_skill(&env, "release-notes", "How we write release notes");
    json(&env, &["index", "status", "--json"]);
    std::fs::write(env.data.path().join("index/meta.json"), b"{ not json").unwrap();

    let (status, stderr) = json(&env, &["index", "status", "--json"]);
    assert!(stderr.contains("rebuilding the search index"), "{stderr}");
    assert_eq!((status["storage"].as_str(), status["documents"].as_u64()), (Some("disk"), Some(1)), "{status}");
    let (found, _) = json(&env, &["search", "release notes", "--in", "skills", "--json"]);
    assert_eq!(found["results"][0]["name"], "release-notes", "{found}");
}
