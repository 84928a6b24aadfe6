//! The examples run: each one's demo against the bundled text-tools skill (built from
//! source by the `skillhost-tests` fixtures), as `cargo run --example` runs it; their
//! `main` only adds the command line and Ctrl-C.

#[path = "../editor_plugin.rs"]
#[allow(dead_code, reason = "the example's own main is not called here")]
mod editor_plugin;
#[path = "../embed_host.rs"]
#[allow(dead_code, reason = "the example's own main is not called here")]
mod embed_host;

use fixtures::TEXT_TOOLS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_plugin_calls_a_tool_over_its_in_memory_mcp_connection() {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    TEXT_TOOLS.folder(skills.path());
    let answer = editor_plugin::run(skills.path().to_owned(), data.path(), async {}).await.unwrap();
    let answer = answer.expect("the demo call ran");
    let stats: serde_json::Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(stats["words"], 3, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_the_host_loads_a_skill_and_calls_its_first_tool() {
    let (skills, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let folder = TEXT_TOOLS.folder(skills.path());
    let out = embed_host::run(&folder, data.path()).await.unwrap();
    assert!(out.is_object(), "the first tool's example answered: {out}");
}
