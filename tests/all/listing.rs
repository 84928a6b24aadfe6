//! Nothing runs or compiles before it must: a restart loads skills from the tool
//! listings kept at their last load (no server starts, no component compiles), a change
//! to a skill's bytes lists it again, components whose tools are read from their WIT or
//! that cannot link are never compiled at load, and a registry loading in the background
//! answers at once and makes a call to a skill still loading wait for it.

use std::path::Path;
use std::sync::Arc;

use fixtures::{GENERIC, LIMITS, NET, python};
use serde_json::json;
use skillhost::{Host, Registry, RegistryConfig, Skill as _, TrustState, runtime::CacheOutcome};

use crate::{HANG_GUARD, load_error, ok, sandbox_host, test_host};

fn config(data: &Path, workspace: &Path) -> RegistryConfig {
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(workspace.to_owned());
    config.watch = false;
    config
}

async fn open(host: &Host, config: RegistryConfig) -> Arc<Registry> {
    tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("open hung").expect("registry opens")
}

fn tool_names(registry: &Registry, skill: &str) -> Vec<String> {
    let entry = registry.entry(skill).unwrap();
    let loaded = entry.loaded.as_ref().unwrap_or_else(|| panic!("`{skill}` did not load: {:?}", entry.error));
    loaded.tools.iter().map(|t| t.name.clone()).collect()
}

/// A server skill's tools are listed once: a restarted host loads it from the kept listing
/// without starting its server, the first call starts one, and new bytes are listed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_starts_no_server_before_the_first_call() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let dir = python::install("sandbox-probe", workspace.path(), "");

    let host = sandbox_host(data.path());
    let registry = open(&host, config(data.path(), workspace.path())).await;
    let tools = tool_names(&registry, "sandbox-probe");
    assert!(tools.contains(&"echo".to_owned()), "{tools:?}");
    assert_eq!(host.sandbox().unwrap().servers_started(), 1, "the first load lists its tools in a probe run");
    drop(registry);
    drop(host);

    let host = sandbox_host(data.path());
    let registry = open(&host, config(data.path(), workspace.path())).await;
    assert_eq!(tool_names(&registry, "sandbox-probe"), tools, "the kept listing names the same tools");
    assert_eq!(host.sandbox().unwrap().servers_started(), 0, "a restart started a server before any call");
    let request = registry.approval_request("sandbox-probe").unwrap();
    registry.approve("sandbox-probe", &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
    let out = tokio::time::timeout(HANG_GUARD, registry.call("sandbox-probe", "echo", json!({"text": "hi"}), Default::default()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.value["text"], "hi", "{}", out.value);
    assert_eq!(host.sandbox().unwrap().servers_started(), 1, "the first call starts the one server");
    drop(registry);

    // New bytes: another listing, with the new tool, from a probe run.
    let server = std::fs::read_to_string(dir.join("server.py")).unwrap();
    let added = "@mcp.tool()\ndef added() -> dict:\n    \"\"\"A tool added since.\"\"\"\n    return {}\n\n\n";
    std::fs::write(dir.join("server.py"), server.replacen("@mcp.tool()", &format!("{added}@mcp.tool()"), 1)).unwrap();
    let registry = open(&host, config(data.path(), workspace.path())).await;
    assert!(tool_names(&registry, "sandbox-probe").contains(&"added".to_owned()), "the changed server was not listed again");
    assert_eq!(host.sandbox().unwrap().servers_started(), 2);
}

/// A component of our world is compiled once, to ask it for its tools; a restarted host
/// neither compiles it nor reads the compiled cache until its first call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_compiles_no_component_before_the_first_call() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    LIMITS.folder(workspace.path());
    // Cranelift alone: what is counted here is the compiled cache's own work.
    let wasm = skillhost::runtime::WasmConfig { cache_dir: Some(data.path().join("cache")), ..skillhost::runtime::WasmConfig::default() };
    let host = || Host::builder().data_dir(data.path()).wasm_config(wasm.clone()).build().unwrap();

    let first = host();
    let registry = open(&first, config(data.path(), workspace.path())).await;
    let tools = tool_names(&registry, "limits");
    assert_eq!((first.cache_stats().compiled, first.cache_stats().hits), (1, 0), "the first load compiles it to list its tools");
    drop(registry);

    let second = host();
    let registry = open(&second, config(data.path(), workspace.path())).await;
    assert_eq!(tool_names(&registry, "limits"), tools);
    assert_eq!((second.cache_stats().compiled, second.cache_stats().hits), (0, 0), "a restart touched the compiled code before any call");
    assert_eq!(registry.entry("limits").unwrap().state, TrustState::Approved, "pure computation is approved automatically");
    let out =
        tokio::time::timeout(HANG_GUARD, registry.call("limits", "echo", json!({"value": 3}), Default::default())).await.unwrap().unwrap();
    assert_eq!(out.value, json!(3));
    assert_eq!((second.cache_stats().compiled, second.cache_stats().hits), (0, 1), "the first call takes it from the compiled cache");
}

/// A component no cache holds runs its first calls on Winch's code (compiled in a
/// fraction of Cranelift's time), under the same limits; Cranelift's code takes over once
/// compiled, and is what a restarted host loads from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncached_component_runs_on_the_baseline_compiler_until_cranelift_is_done() {
    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let dir = LIMITS.folder(skills.path());
    let runtime = || {
        let config =
            skillhost::runtime::WasmConfig { cache_dir: Some(data.path().join("cache")), baseline_compile: true, ..Default::default() };
        skillhost_wasm::WasmRuntime::new(config).unwrap()
    };
    let source = skillhost_package::read_source(&dir, &Default::default()).unwrap();
    let policy = skillhost::skill::Policy::new(data.path().join("skills"));
    let grant =
        || skillhost::skill::Grant::new(&source.manifest, &policy, &skillhost::skill::DataKey::named(&source.manifest.name)).unwrap();

    let first = runtime();
    let skill = first.load_wasm(&source, grant()).await.unwrap();
    assert_eq!(skill.cache_outcome(), Some(CacheOutcome::Baseline), "listing its tools ran Winch's code");
    let call = async |tool: &str, input: serde_json::Value, timeout: Option<std::time::Duration>| {
        let cx = skillhost::CallContext { timeout, ..Default::default() };
        tokio::time::timeout(HANG_GUARD, skillhost::Skill::call(&*skill, tool, input, cx)).await.expect("the call hung")
    };
    assert_eq!(call("echo", json!({"value": 1}), None).await.unwrap().value, json!(1));
    // Its deadline and its memory limit bind on Winch's code too.
    let spun = call("spin", json!({}), Some(std::time::Duration::from_millis(300))).await.unwrap_err();
    assert!(matches!(spun, skillhost::CallError { failure: skillhost::skill::CallFailure::Timeout { .. }, .. }), "{spun}");
    let memory = call("alloc", json!({"mib": 600}), None).await.unwrap_err();
    assert!(matches!(memory, skillhost::CallError { failure: skillhost::skill::CallFailure::MemoryLimit { .. }, .. }), "{memory}");
    let optimised = async {
        while skill.cache_outcome() == Some(CacheOutcome::Baseline) {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, optimised).await.expect("Cranelift's code never took over");
    assert_eq!(skill.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!(first.cache_stats().compiled, 1, "Cranelift compiled it in the background");
    assert_eq!(call("echo", json!({"value": 2}), None).await.unwrap().value, json!(2));
    let spun = call("spin", json!({}), Some(std::time::Duration::from_millis(300))).await.unwrap_err();
    assert!(matches!(spun, skillhost::CallError { failure: skillhost::skill::CallFailure::Timeout { .. }, .. }), "{spun}");

    let restarted = runtime();
    let again = restarted.load_wasm(&source, grant()).await.unwrap();
    assert_eq!(again.cache_outcome(), Some(CacheOutcome::Hit), "a restart loads Cranelift's code from the cache");
}

/// A generic component's tools come from its WIT: loading it (as `inspect` does) compiles
/// nothing; its first call does.
#[tokio::test]
async fn a_component_whose_tools_are_in_its_wit_compiles_at_its_first_call() {
    let env = fixtures::TestHost::with_config(skillhost::runtime::WasmConfig::default());
    let file = env.skills.path().join("calc.wasm");
    std::fs::copy(GENERIC.wasm, &file).unwrap();
    let loaded = env.host.load_path_granted(&file).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Deferred));
    assert!(loaded.source.manifest.name.as_str() == "calc" && !loaded.skill.tools().is_empty());
    assert_eq!(env.host.cache_stats().compiled, 0, "loading a component whose tools are in its WIT compiled it");
    assert_eq!(ok(&loaded, "add", json!({"a": 1, "b": 2})).await, json!(3));
    assert_eq!(env.host.cache_stats().compiled, 1);
}

/// A component importing `wasi:http` without `[network]` is refused from its import
/// section, before any compile.
#[tokio::test]
async fn a_component_that_cannot_link_is_refused_without_compiling() {
    let env = test_host();
    let dir = env.skills.path().join("net");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(NET.wasm, dir.join("skill.wasm")).unwrap();
    std::fs::write(dir.join("skill.toml"), "name = \"net\"\nversion = \"0.1.0\"\ndescription = \"fetches (test fixture)\"\n").unwrap();
    let before = env.host.cache_stats();
    let message = load_error(env.host.load_path_granted(&dir).await);
    assert!(message.contains("[network]"), "{message}");
    let after = env.host.cache_stats();
    assert_eq!((after.compiled, after.hits), (before.compiled, before.hits), "refusing it compiled or read it");
}

/// A registry loading in the background returns before its skills load; a call to one
/// still loading waits for it and succeeds, and `ready` sees every skill loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_skill_still_loading_waits_for_it() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    LIMITS.folder(workspace.path());
    python::install("sandbox-probe", workspace.path(), "");
    let host = sandbox_host(data.path());
    let mut background = config(data.path(), workspace.path());
    background.first_load = skillhost::registry::FirstLoad::Background;
    let registry = open(&host, background).await;
    let out = tokio::time::timeout(HANG_GUARD, registry.call("limits", "echo", json!({"value": "early"}), Default::default()))
        .await
        .expect("a call to a loading skill hung")
        .expect("a call to a loading skill waits for it");
    assert_eq!(out.value, json!("early"));
    tokio::time::timeout(HANG_GUARD, registry.ready()).await.expect("loading never finished");
    assert!(registry.loading().is_empty());
    assert!(tool_names(&registry, "sandbox-probe").contains(&"echo".to_owned()));
    let unknown = registry.call("no-such-skill", "x", json!({}), Default::default()).await.unwrap_err();
    assert!(unknown.to_string().contains("no-such-skill"), "{unknown}");
}

/// An MCP client that approves what it is asked about and keeps the progress messages it
/// receives.
#[derive(Clone, Default)]
struct Watcher {
    progress: Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Watcher {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities = rmcp::model::ClientCapabilities::builder().enable_elicitation().build();
        rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("listing-test", "1.0"))
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"approve": true})))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.progress.lock().unwrap().extend(params.message);
    }
}

/// Over MCP, the handshake answers while a server skill's first listing runs (its import
/// takes 3 s); a call to one of its tools waits for it, reporting progress, and then runs.
/// (A session's first `tools/list` waits for it too, a bounded while: `session.rs` of the
/// CLI's tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mcp_a_call_to_a_loading_skill_waits_with_progress() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};

    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let dir = python::install("sandbox-probe", workspace.path(), "");
    let server = std::fs::read_to_string(dir.join("server.py")).unwrap();
    std::fs::write(dir.join("server.py"), server.replacen("mcp = FastMCP(", "import time\ntime.sleep(3)\nmcp = FastMCP(", 1)).unwrap();
    let host = sandbox_host(data.path());
    let mut background = config(data.path(), workspace.path());
    background.first_load = skillhost::registry::FirstLoad::Background;
    let registry = open(&host, background).await;
    assert!(registry.loading().iter().any(|n| n.as_str() == "sandbox-probe"), "its first listing takes 3 s: it is loading");

    let front = skillhost::mcp::SkillhostMcp::new(registry.clone(), skillhost::mcp::McpConfig::default()).unwrap();
    let (client_side, host_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(skillhost::mcp::serve(front, host_side));
    let watcher = Watcher::default();
    let client = tokio::time::timeout(HANG_GUARD, watcher.clone().serve(client_side)).await.expect("handshake hung").unwrap();
    assert!(registry.loading().iter().any(|n| n.as_str() == "sandbox-probe"), "the handshake waited for it");

    let mut params =
        CallToolRequestParams::new("sandbox-probe__echo").with_arguments(json!({"text": "waited"}).as_object().cloned().unwrap());
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(NumberOrString::Number(1))));
    let result = tokio::time::timeout(HANG_GUARD, client.call_tool(params)).await.expect("the call hung").unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(format!("{result:?}").contains("waited"), "{result:?}");
    let progress = watcher.progress.lock().unwrap().clone();
    assert!(
        progress.iter().any(|m| m.contains("sandbox-probe") && m.contains("still loading")),
        "no progress while it loaded: {progress:?}"
    );
    let listed = client.list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "sandbox-probe__echo"), "{listed:?}");
}
