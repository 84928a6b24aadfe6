//! `skillhost mcp-config`: each client's entry, `--write` into real files, and the
//! printed entry starting a server an MCP client initializes with.

use std::path::Path;
use std::process::Command;

use rmcp::ServiceExt;
use serde_json::{Value, json};

use crate::Env;
use crate::skills_from::{call, canonical, json_out, stderr};

const CLIENTS: [(&str, &str); 4] = [("claude", "mcpServers"), ("cursor", "mcpServers"), ("vscode", "servers"), ("zed", "context_servers")];

#[test]
fn each_clients_entry_has_its_shape_and_absolute_paths() {
    let env = Env::new();
    let exe = canonical(Path::new(env!("CARGO_BIN_EXE_skillhost")));
    let skills = canonical(env.skills.path());
    let data = canonical(env.data.path());
    for (client, key) in CLIENTS {
        let out = env.run(&["mcp-config", client]);
        let config = json_out(&out);
        let entry = &config[key]["skillhost"];
        assert_eq!(config.as_object().unwrap().len(), 1, "{client}: {config}");
        assert_eq!(entry["command"], exe.as_str(), "{client}: {config}");
        assert_eq!(entry["args"], json!(["--skills", skills, "--data-dir", data, "serve"]), "{client}: {config}");
        assert!(entry["env"].is_object(), "{client}: {config}");
        assert_eq!(entry.get("type").and_then(Value::as_str), (client == "vscode").then_some("stdio"), "{client}: {config}");
        if client == "claude" {
            // The variables this test runs with (SKILLHOST_MODEL_DIR...) come along as -e.
            let vars: String = entry["env"].as_object().unwrap().iter().map(|(k, v)| format!(" -e {k}={}", v.as_str().unwrap())).collect();
            let line = format!("claude mcp add skillhost{vars} -- {exe} --skills {skills} --data-dir {data} serve");
            assert!(stderr(&out).contains(&line), "{}", stderr(&out));
            let report = json_out(&env.run(&["mcp-config", client, "--json"]));
            assert_eq!(report["command"], line.as_str(), "{report}");
            assert_eq!(report["config"], config, "{report}");
        }
    }
    // Relative directories, as typed in a project, become absolute; the variables that
    // change what serve does come along.
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join("skills")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(project.path())
        .args(["--skills", "skills", "--data-dir", "state", "--skills-from", "claude", "mcp-config", "cursor"])
        .env("SKILLHOST_MODEL_DIR", "models")
        .env("SKILLHOST_MCP_TOKEN", "never copied")
        .output()
        .unwrap();
    let entry = json_out(&out)["mcpServers"]["skillhost"].clone();
    let root = canonical(project.path());
    let args: Vec<&str> = entry["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args, ["--skills", &format!("{root}/skills"), "--data-dir", &format!("{root}/state"), "--skills-from", "claude", "serve"]);
    assert_eq!(entry["env"]["SKILLHOST_MODEL_DIR"], format!("{root}/models"), "{entry}");
    assert!(entry["env"].get("SKILLHOST_MCP_TOKEN").is_none(), "{entry}");
}

#[test]
fn write_keeps_every_other_key_and_a_second_write_changes_nothing() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    for (client, key) in CLIENTS {
        let file = dir.path().join(format!("{client}.json"));
        let before = format!(
            "{{\n  \"zeta\": {{\"b\": 1, \"a\": [true, null, 2.5]}},\n  \"{key}\": {{\"other\": {{\"command\": \"x\", \"args\": []}}}},\n  \"alpha\": \"kept\"\n}}\n"
        );
        std::fs::write(&file, &before).unwrap();
        let printed = json_out(&env.run(&["mcp-config", client]));
        let out = env.run(&["mcp-config", client, "--write", "--config", file.to_str().unwrap()]);
        assert!(out.status.success(), "{client}: {}", stderr(&out));
        assert!(stderr(&out).contains("added"), "{client}: {}", stderr(&out));
        let text = std::fs::read_to_string(&file).unwrap();
        let after: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(after["zeta"], json!({"b": 1, "a": [true, null, 2.5]}), "{text}");
        assert_eq!(after["alpha"], "kept", "{text}");
        assert_eq!(after[key]["other"], json!({"command": "x", "args": []}), "{text}");
        assert_eq!(after[key]["skillhost"], printed[key]["skillhost"], "{text}");
        let order: Vec<usize> = ["\"zeta\"", "\"b\"", "\"a\"", key, "\"other\"", "\"skillhost\"", "\"alpha\""]
            .iter()
            .map(|k| text.find(k).unwrap_or_else(|| panic!("{k} in {text}")))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "the file's order is kept: {text}");

        let written = std::fs::metadata(&file).unwrap();
        let out = env.run(&["mcp-config", client, "--write", "--config", file.to_str().unwrap(), "--json"]);
        assert_eq!(json_out(&out)["written"], "unchanged");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "{client}: a second --write is a no-op");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), written.ino(), "{client}: not even rewritten");
    }
    // A missing file (and its folder) is created, holding the entry alone.
    let file = dir.path().join("new/.vscode/mcp.json");
    let out = env.run(&["mcp-config", "vscode", "--write", "--config", file.to_str().unwrap()]);
    assert!(stderr(&out).contains("created"), "{}", stderr(&out));
    let created: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(created["servers"]["skillhost"]["type"], "stdio", "{created}");
    // A different skillhost entry is replaced, its neighbours kept.
    std::fs::write(&file, r#"{"servers": {"skillhost": {"command": "old"}, "b": {}}, "inputs": []}"#).unwrap();
    let out = env.run(&["mcp-config", "vscode", "--write", "--config", file.to_str().unwrap()]);
    assert!(stderr(&out).contains("replaced"), "{}", stderr(&out));
    let replaced: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!((replaced["servers"]["b"].clone(), replaced["inputs"].clone()), (json!({}), json!([])), "{replaced}");
    assert_ne!(replaced["servers"]["skillhost"]["command"], "old", "{replaced}");
}

#[test]
fn write_refuses_a_file_that_is_not_plain_json_and_leaves_it_alone() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    for (client, _) in CLIENTS {
        let file = dir.path().join(format!("{client}.json"));
        for (text, says) in [
            ("{\"mcpServers\": {\"a\": 1}", "is not valid JSON (line 1"),
            ("[1, 2]", "not an object"),
            ("{\n  // my fonts\n  \"buffer_font_size\": 15,\n}\n", "has comments or trailing commas"),
        ] {
            std::fs::write(&file, text).unwrap();
            let out = env.run(&["mcp-config", client, "--write", "--config", file.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(4), "{client} {text:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(says), "{client} {text:?}: {}", stderr(&out));
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "{client}: left unchanged");
        }
        // The JSONC refusal shows the entry to paste.
        assert!(stderr(&env.run(&["mcp-config", client, "--write", "--config", file.to_str().unwrap()])).contains("\"skillhost\": {"));
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), CLIENTS.len(), "no temporary files left: {leftovers:?}");
    let out = env.run(&["mcp-config", "claude", "--config", "x.json"]);
    assert_eq!(out.status.code(), Some(2), "--config needs --write: {}", stderr(&out));
}

/// Start exactly what the printed entry says, as a client would (its own PATH and HOME,
/// nothing else of this process's environment), and initialize over stdio.
async fn start(entry: &Value) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(entry["command"].as_str().unwrap());
    cmd.args(entry["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()));
    cmd.env_clear();
    for var in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    for (name, value) in entry["env"].as_object().unwrap() {
        cmd.env(name, value.as_str().unwrap());
    }
    // Somewhere that is not the project: the entry must not depend on the directory.
    cmd.current_dir(std::env::temp_dir());
    ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.expect("the server completes the MCP initialize handshake")
}

#[tokio::test]
async fn the_printed_claude_and_cursor_entries_start_a_working_server() {
    let env = Env::new();
    let notes = env.skills.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(
        notes.join("SKILL.md"),
        "---\nname: notes\ndescription: How we write release notes\n---\nLead with what changed for users.\n",
    )
    .unwrap();
    for client in ["claude", "cursor"] {
        let entry = json_out(&env.run(&["mcp-config", client]))["mcpServers"]["skillhost"].clone();
        let server = start(&entry).await;
        let info = server.peer_info().expect("the server answered initialize");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("skillhost"), "{client}: {info:?}");
        let got = call(&server, "skill_get", json!({"names": ["notes"]})).await;
        assert!(got.contains("Lead with what changed for users."), "{client}: {got}");
        server.cancel().await.unwrap();
    }
}
