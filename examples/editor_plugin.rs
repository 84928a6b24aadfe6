//! An editor plugin embedding skillhost in-process: it opens the registry over a skills
//! folder (hot-reloaded), keeps a tool palette up to date from the registry's events, and
//! gives the editor's agent panel an MCP connection to the same host over an in-memory
//! pipe: no child process, no port.
//!
//! ```sh
//! ./scripts/run.sh list        # builds the bundled skills once
//! cargo run -p skillhost-examples --example editor_plugin -- skills
//! ```
//! While it runs, drop a `.wasm` skill into the folder (or edit one) and watch the palette
//! change; Ctrl-C stops it. `--data DIR` chooses the data dir (its `config.toml` is the
//! host config), `--call TOOL JSON` has the agent panel call a tool (repeatable, e.g.
//! `skill_run` of a skill's scripts), and `--once` exits after the calls.
//!
//! The program is also the host's helper: a sandbox starts it again as the egress shim
//! of a networked server skill or the init of a script's run
//! ([`skillhost::helpers::run_if_helper`], first thing in `main`), so it needs no
//! `skillhost` executable on the machine.

#![allow(clippy::print_stdout, reason = "an example prints what it does")]

use std::future::Future;
use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use skillhost::config::{CONFIG_FILE, HostConfig};
use skillhost::mcp::{McpConfig, SkillhostMcp};
use skillhost::{Host, Registry, RegistryEvent};

/// What the editor shows: one line per callable tool.
fn palette(registry: &Registry) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in registry.catalog() {
        let Some(loaded) = &entry.loaded else { continue };
        for tool in &loaded.tools {
            lines.push(format!("{}__{}  [{}]", entry.name, tool.name, entry.state));
        }
    }
    lines
}

/// The plugin: opens the registry over `skills` (data under `data`, the host config its
/// `config.toml`), prints the palette and follows the registry's events, gives the agent
/// panel an MCP connection over an in-memory pipe and has it make `calls` (tool, arguments),
/// or call `text-tools__text_stats` once when there are none; then runs until `stop`.
/// Returns what the calls answered (none when `skills` has no text-tools to call).
pub async fn run(
    skills: PathBuf,
    data: &Path,
    calls: Vec<(String, serde_json::Value)>,
    stop: impl Future<Output = ()>,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let config = HostConfig::read(&data.join(CONFIG_FILE))?;
    let host = Host::builder().data_dir(data).config(config).build()?;
    let mut config = host.registry_config();
    config.workspace = Some(skills.clone());
    let registry = host.open_registry(config).await?;
    println!("palette: {:#?}", palette(&registry));

    // React to the registry: a skill added, changed, approved or removed.
    let mut events = registry.subscribe();
    let watched = registry.clone();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match &event {
                RegistryEvent::LoadFailed { name, error } => println!("skill `{name}` failed to load: {error}"),
                other => println!("{other:?} -> palette now has {} tools", palette(&watched).len()),
            }
        }
    });

    // The agent panel speaks MCP to the host over an in-memory pipe.
    let (panel_side, host_side) = tokio::io::duplex(64 * 1024);
    let server = SkillhostMcp::new(registry.clone(), McpConfig::default())?;
    tokio::spawn(skillhost::mcp::serve(server, host_side));
    let panel = ().serve(panel_side).await?;
    let tools = panel.list_all_tools().await?;
    println!("the agent panel sees {} tools over MCP", tools.len());
    let calls = if calls.is_empty() && tools.iter().any(|t| t.name == DEMO_TOOL) {
        vec![(DEMO_TOOL.to_owned(), json!({"text": "one two three"}))]
    } else {
        calls
    };
    if calls.is_empty() {
        println!("no {DEMO_TOOL} in {}: `./scripts/run.sh list` builds the bundled skills", skills.display());
    }
    let mut answers = Vec::new();
    for (tool, args) in calls {
        let args = args.as_object().cloned().unwrap_or_default();
        let result = panel.call_tool(CallToolRequestParams::new(tool.clone()).with_arguments(args)).await?;
        let text: String = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
        if result.is_error == Some(true) {
            return Err(format!("{tool} failed: {text}").into());
        }
        println!("{tool} -> {text}");
        answers.push(text);
    }

    stop.await;
    panel.cancel().await?;
    Ok(answers)
}

/// The tool the agent panel calls once.
const DEMO_TOOL: &str = "text-tools__text_stats";

fn main() -> std::process::ExitCode {
    // Started by a sandbox as its egress shim or a run's init: be that, and nothing else.
    if let Some(code) = skillhost::helpers::run_if_helper() {
        return code;
    }
    match tokio::runtime::Runtime::new()
        .map_err(Into::into)
        .and_then(|runtime| runtime.block_on(plugin(std::env::args().skip(1).collect())))
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("editor_plugin: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `editor_plugin [SKILLS] [--data DIR] [--call TOOL JSON]... [--once]`.
async fn plugin(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let (mut skills, mut data, mut calls, mut once) =
        (PathBuf::from("skills"), std::env::temp_dir().join("skillhost-editor-example"), Vec::new(), false);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next().ok_or("--data needs a directory")?.into(),
            "--call" => {
                let tool = args.next().ok_or("--call needs a tool and its JSON arguments")?;
                let input = args.next().ok_or("--call needs a tool and its JSON arguments")?;
                calls.push((tool, serde_json::from_str(&input)?));
            }
            "--once" => once = true,
            _ => skills = arg.into(),
        }
    }
    let stop = async move {
        if !once {
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    run(skills, &data, calls, stop).await?;
    Ok(())
}
