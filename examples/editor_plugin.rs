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

use std::path::PathBuf;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use skillhost::mcp::{McpConfig, SkillhostMcp};
use skillhost::{Host, Registry, RegistryConfig, RegistryEvent};

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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let skills: PathBuf = std::env::args().nth(1).unwrap_or_else(|| "skills".into()).into();
    let data = std::env::temp_dir().join("skillhost-editor-example");
    let host = Host::builder().data_dir(&data).build()?;
    let mut config = RegistryConfig::new(&data);
    config.workspace = Some(skills);
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
    let server = SkillhostMcp::new(registry.clone(), McpConfig::default());
    tokio::spawn(skillhost::mcp::serve(server, host_side));
    let panel = ().serve(panel_side).await?;
    let tools = panel.list_all_tools().await?;
    println!("the agent panel sees {} tools over MCP", tools.len());
    if tools.iter().any(|t| t.name == "text-tools__word_count") {
        let args = json!({"text": "one two three"}).as_object().cloned().unwrap_or_default();
        let result = panel.call_tool(CallToolRequestParams::new("text-tools__word_count").with_arguments(args)).await?;
        println!("text-tools__word_count -> {:?}", result.content);
    }

    tokio::signal::ctrl_c().await?;
    panel.cancel().await?;
    Ok(())
}
