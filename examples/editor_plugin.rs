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
//! change; Ctrl-C stops it.

#![allow(clippy::print_stdout, reason = "an example prints what it does")]

use std::future::Future;
use std::path::{Path, PathBuf};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
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

/// The plugin: opens the registry over `skills` (data under `data`), prints the palette
/// and follows the registry's events, gives the agent panel an MCP connection over an
/// in-memory pipe and has it call `text-tools__text_stats` once; then runs until `stop`.
/// Returns what that call answered, or `None` when `skills` has no text-tools.
pub async fn run(skills: PathBuf, data: &Path, stop: impl Future<Output = ()>) -> Result<Option<String>, Box<dyn std::error::Error>> {
    let host = Host::builder().data_dir(data).build()?;
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
    let answer = if tools.iter().any(|t| t.name == DEMO_TOOL) {
        let args = json!({"text": "one two three"}).as_object().cloned().unwrap_or_default();
        let result = panel.call_tool(CallToolRequestParams::new(DEMO_TOOL).with_arguments(args)).await?;
        let text: String = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
        if result.is_error == Some(true) {
            return Err(format!("{DEMO_TOOL} failed: {text}").into());
        }
        println!("{DEMO_TOOL} -> {text}");
        Some(text)
    } else {
        println!("no {DEMO_TOOL} in {}: `./scripts/run.sh list` builds the bundled skills", skills.display());
        None
    };

    stop.await;
    panel.cancel().await?;
    Ok(answer)
}

/// The tool the agent panel calls once.
const DEMO_TOOL: &str = "text-tools__text_stats";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let skills: PathBuf = std::env::args().nth(1).unwrap_or_else(|| "skills".into()).into();
    let data = std::env::temp_dir().join("skillhost-editor-example");
    run(skills, &data, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
