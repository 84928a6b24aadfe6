//! `skill_run` over MCP, driven by the official Python SDK (`mcp_run.py`) over streamable
//! HTTP against a host with the real jail: a SKILL.md skill whose Python script turns an
//! input given as text and one given as base64 into a text report and a PNG it builds
//! itself, approved through the registry as a human would; the client checks the tool's
//! listed schemas, the structured answer, the report inlined with its SHA-256, the PNG as
//! image content whose bytes and pixels are right, a binary output as a linked resource,
//! an executable output marked so, the inputs left as they came listed apart, and the
//! refusal of a skill still waiting for approval. Both runs are then in
//! the host's audit log.

use std::path::Path;

use serde_json::{Value, json};
use sha2::Digest;
use skillhost::audit::{AuditQuery, RunOutcome};
use skillhost::mcp::{HttpConfig, McpConfig, SkillhostMcp, serve_http};
use skillhost::{ApprovalChannel, RegistryConfig, TrustState};

use crate::HANG_GUARD;

const PLOT: &str = r##"import hashlib, struct, sys, zlib
notes, pixels = sys.argv[1], sys.argv[2]
text = open(notes, encoding="utf-8").read()
data = open(pixels, "rb").read()
open("report.txt", "w", encoding="utf-8").write(f"{text.upper()}pixels {hashlib.sha256(data).hexdigest()}\n")
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
width, height = 2, 2
rows = b"".join(b"\x00" + data[r * 3 * width:(r + 1) * 3 * width] for r in range(height))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open("chart.png", "wb").write(png)
__import__("os").makedirs("data", exist_ok=True)
open("data/pixels.out", "wb").write(data)
open("again.sh", "w").write("#!/bin/sh\nexec python3 scripts/plot.py notes.txt data/pixels.bin\n")
__import__("os").chmod("again.sh", 0o755)
print("wrote report.txt and chart.png")
"##;

fn skill(root: &Path, name: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let md = format!(
        "---\nname: {name}\ndescription: Plots a tiny chart from pixels. Use it in tests.\n---\nRun `python scripts/plot.py NOTES PIXELS`.\n"
    );
    std::fs::write(dir.join("SKILL.md"), md).unwrap();
    std::fs::write(dir.join("scripts/plot.py"), PLOT).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_runs_a_skills_script_and_gets_its_files_and_image() {
    let data = tempfile::tempdir().unwrap();
    let host = crate::sandbox_host(data.path());
    let workspace = tempfile::tempdir().unwrap();
    skill(workspace.path(), "plotter");
    skill(workspace.path(), "waiting");
    let mut config = RegistryConfig::new(data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = false;
    let registry = tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("open hung").expect("opens");
    let request = registry.approval_request("plotter").unwrap();
    registry.approve("plotter", &request.content_hash, &request.capability_digest, ApprovalChannel::Cli).await.unwrap();
    assert_eq!(registry.entry("waiting").unwrap().state, TrustState::PendingReview);

    let token = "run-2700-token";
    let config = HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), token: Some(token.into()), ..HttpConfig::default() };
    let (ready, bound) = tokio::sync::oneshot::channel();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving =
        tokio::spawn(serve_http(SkillhostMcp::new(registry, McpConfig::default()).unwrap(), config, shutdown.clone(), Some(ready)));
    let addr = tokio::time::timeout(HANG_GUARD, bound).await.expect("the front did not start").unwrap();
    for mode in ["auto", "legacy"] {
        let facts = mcp_run_py(&[mode, &format!("http://{addr}/mcp"), token, "plotter", "waiting"], HANG_GUARD).await;
        assert_eq!(facts["input_properties"], json!(["command", "inputs", "skill"]), "{mode}");
        assert_eq!(facts["input_required"], json!(["command", "skill"]), "{mode}");
        assert_eq!(
            facts["output_properties"],
            json!([
                "duration_ms",
                "exit_code",
                "files",
                "output_cap",
                "signal",
                "skipped",
                "stderr",
                "stderr_bytes",
                "stdout",
                "stdout_bytes",
                "unchanged_inputs"
            ]),
            "{mode}"
        );
        assert_eq!(facts["file_properties"], json!(["executable", "path", "returned", "sha256", "size", "text", "uri"]), "{mode}");
        assert_eq!(facts["stdout"], "wrote report.txt and chart.png\n", "{mode}");
        let png = hex::decode(facts["png"].as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{mode}");
        assert_eq!(facts["files"]["chart.png"]["sha256"], hex::encode(sha2::Sha256::digest(&png)), "{mode}");
        assert_eq!(facts["files"]["chart.png"]["returned"], "image", "{mode}");
        assert_eq!(facts["files"]["report.txt"]["returned"], "inline", "{mode}");
        let refusal = facts["refusal"].as_str().unwrap();
        assert!(refusal.contains("`waiting`") && refusal.contains("skillhost approve waiting"), "{mode}: {refusal}");
    }
    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, serving).await.expect("the front did not stop").unwrap().unwrap();

    // Both clients' runs and refusals are in the audit log, with the bytes that went in.
    let runs = host.audit().runs(&AuditQuery::default()).unwrap();
    let ran: Vec<&RunOutcome> = runs.iter().filter(|r| r.skill == "plotter").map(|r| &r.outcome).collect();
    assert_eq!(ran, [&RunOutcome::Exit(0), &RunOutcome::Exit(0)], "{runs:?}");
    let notes = "Quarterly notes: é, ✓ and 3 rows.\n".len() as u64;
    assert!(runs.iter().filter(|r| r.skill == "plotter").all(|r| r.bytes_in == notes + 12 && r.bytes_out > notes + 12), "{runs:?}");
    let refused = runs.iter().filter(|r| r.skill == "waiting").count();
    assert_eq!(refused, 2, "{runs:?}");
}

/// Attack (issue 40, item 4) over MCP: an approved skill's policy grants a read-write host
/// directory; an agent's `skill_run` sends inline code and a program of its own instead
/// of one of the skill's scripts.
/// Expected: refused before anything runs, as an `isError` answer naming the skill, the
/// command and `skillhost policy NAME --any-command`; the skill's script runs, in module
/// form too (`python3 -m scripts.plot`, as public skills write it).
/// Checked: the file in the granted directory survives every refused command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_run_refuses_inline_code_and_other_programs_with_the_skills_grants() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let data = tempfile::tempdir().unwrap();
    let host = crate::sandbox_host(data.path());
    let workspace = tempfile::tempdir().unwrap();
    skill(workspace.path(), "plotter");
    let granted = tempfile::tempdir().unwrap();
    let victim = granted.path().join("victim.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(granted.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut config = RegistryConfig::new(data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = false;
    let registry = tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("open hung").expect("opens");
    let policy = format!("[[paths]]\nhost = \"{}\"\nas = \"data\"\nmode = \"rw\"\n", granted.path().display());
    registry.set_policy("plotter", &skillhost::run::RunPolicy::parse(&policy, Path::new("policy")).unwrap()).await.unwrap();
    let request = registry.approval_request("plotter").unwrap();
    registry.approve("plotter", &request.content_hash, &request.capability_digest, ApprovalChannel::Cli).await.unwrap();

    let (client_side, host_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(skillhost::mcp::serve(SkillhostMcp::new(registry, McpConfig::default()).unwrap(), host_side));
    let client = tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("handshake");
    let run = async |command: &[&str], inputs: Value| {
        let args = json!({"skill": "plotter", "command": command, "inputs": inputs});
        let params = CallToolRequestParams::new("skill_run").with_arguments(args.as_object().cloned().unwrap());
        let result = tokio::time::timeout(HANG_GUARD, client.call_tool(params)).await.expect("skill_run hung").expect("a result");
        serde_json::to_value(result).unwrap()
    };
    let remove = "import os; os.remove('/host/data/victim.txt')";
    for (command, inputs) in [
        (&["python3", "-c", remove][..], json!([])),
        (&["sh", "-c", "rm -f /host/data/victim.txt"], json!([])),
        (&["node", "-e", "require('fs').unlinkSync('/host/data/victim.txt')"], json!([])),
        (&["/bin/rm", "-f", "/host/data/victim.txt"], json!([])),
        (&["python3", "-m", "evil"], json!([{"path": "evil.py", "text": remove}])),
    ] {
        let answer = run(command, inputs).await;
        assert!(victim.exists(), "{command:?} deleted the file in the granted directory: {answer}");
        assert_eq!(answer["isError"], true, "{command:?}: {answer}");
        let text = answer.to_string();
        assert!(text.contains("`plotter`") && text.contains("skillhost policy plotter --any-command"), "{command:?}: {text}");
    }
    let inputs = json!([{"path": "notes.txt", "text": "n\n"}, {"path": "pixels.bin", "base64": "AAAAAAAAAAAAAAAA"}]);
    for command in
        [&["python", "scripts/plot.py", "notes.txt", "pixels.bin"][..], &["python3", "-m", "scripts.plot", "notes.txt", "pixels.bin"]]
    {
        let answer = run(command, inputs.clone()).await;
        assert_eq!(answer["structuredContent"]["exit_code"], 0, "{command:?}: {answer}");
        assert_eq!(answer["structuredContent"]["stdout"], "wrote report.txt and chart.png\n", "{command:?}: {answer}");
    }
}

/// `mcp_run.py ARGS` (the official Python SDK) run to its end within `limit`: the one
/// JSON line of facts it printed; fails with its stderr when it failed.
pub(crate) async fn mcp_run_py(args: &[&str], limit: std::time::Duration) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("all/mcp_run.py");
    let mut command = std::process::Command::new(fixtures::python::venv().join("bin/python"));
    command.arg(&script).args(args);
    let out = tokio::time::timeout(limit, tokio::task::spawn_blocking(move || command.output()))
        .await
        .expect("the client hung")
        .unwrap()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap_or_else(|e| panic!("{args:?}: {e}: {stderr}"))
}
