//! Embedding skillhost in an application (an editor plugin, an agent loop): start a host,
//! load a skill, list its tools, call one and watch its progress.
//!
//! ```sh
//! ./scripts/run.sh list        # builds the bundled skills once
//! cargo run -p skillhost-examples --example embed_host -- skills/text-tools
//! ```

#![allow(clippy::print_stdout, reason = "an example prints what it does")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use skillhost::{CallContext, Host};

/// Load the skill at `skill_path` on a host whose data lives under `data`, list its tools
/// and call the first one with its first example. Returns the call's output.
pub async fn run(skill_path: &Path, data: &Path) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    // A host keeps each skill's data under its data dir and caches compiled components
    // there, so the next start does not compile again.
    let host = Host::builder().data_dir(data).build()?;

    let loaded = host.load_path(skill_path).await?;
    println!("loaded `{}` {} ({:?})", loaded.source.manifest.name, loaded.source.manifest.version, loaded.cache_outcome());
    for tool in loaded.skill.tools() {
        println!("  {:<16} {}", tool.name, tool.description.lines().next().unwrap_or(""));
    }

    // Every call runs in a fresh sandbox under the skill's limits; a caller may shorten the
    // deadline, cancel the call, and receive progress.
    let cx = CallContext {
        timeout: Some(Duration::from_secs(5)),
        progress: Some(Arc::new(|p| eprintln!("progress: {}/{:?}", p.done, p.total))),
        caller: "embed-example".into(),
        ..CallContext::default()
    };
    let first = &loaded.skill.tools()[0];
    let input = first.examples.first().cloned().unwrap_or_else(|| json!({}));
    let out = loaded.call(&first.name, input.clone(), cx).await?;
    println!("{}({input}) -> {} in {:?}", first.name, out.value, out.elapsed);
    Ok(out.value)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let skill_path: PathBuf = std::env::args().nth(1).unwrap_or_else(|| "skills/text-tools".into()).into();
    run(&skill_path, &std::env::temp_dir().join("skillhost-embed-example")).await?;
    Ok(())
}
