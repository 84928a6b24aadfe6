//! What `list` and `inspect` print: aligned text for people, JSON for scripts.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Value, json};
use skillhost::{ByteSize, FileMode, HostError, LoadedSkill};

/// One skill as `list --json` and `inspect --json` print it.
fn skill_json(loaded: &LoadedSkill, full: bool) -> Value {
    let grant = loaded.skill.grant();
    let tools: Vec<Value> = loaded
        .skill
        .tools()
        .iter()
        .map(|t| if full { serde_json::to_value(t).unwrap_or(Value::Null) } else { json!({"name": t.name, "description": t.description}) })
        .collect();
    json!({
        "name": loaded.manifest.name,
        "version": loaded.manifest.version,
        "description": loaded.manifest.description,
        "runtime": loaded.runtime,
        "origin": loaded.origin,
        "state": "loaded",
        "tools": tools,
        "grant": {
            "dirs": grant.dirs,
            "limits": {
                "timeout_ms": grant.limits.timeout.as_millis() as u64,
                "memory": grant.limits.memory,
                "output": grant.limits.output,
                "concurrency": grant.limits.concurrency,
            }
        },
        "search": loaded.manifest.search,
        "instructions": if full { json!(loaded.instructions) } else { json!(loaded.instructions.is_some()) },
    })
}

/// Print the outcome of loading a skills directory.
pub fn list(results: &[(PathBuf, Result<LoadedSkill, HostError>)], json: bool) -> Result<()> {
    if json {
        let items: Vec<Value> = results
            .iter()
            .map(|(path, result)| match result {
                Ok(loaded) => skill_json(loaded, false),
                Err(e) => json!({"origin": path, "state": "error", "error": e.to_string()}),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if results.is_empty() {
        println!("no skills found; build one with `skillhost new NAME && skillhost build NAME` and put it in the skills directory");
        return Ok(());
    }
    for (path, result) in results {
        match result {
            Ok(loaded) => {
                let tools: Vec<&str> = loaded.skill.tools().iter().map(|t| t.name.as_str()).collect();
                println!(
                    "{:<20} {:<8} {:<5} {}",
                    loaded.manifest.name.as_str(),
                    loaded.manifest.version,
                    loaded.runtime,
                    loaded.manifest.description
                );
                println!("{:<20} tools: {}", "", tools.join(", "));
            }
            Err(e) => println!("{:<20} error: {e}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()),
        }
    }
    Ok(())
}

/// Print everything about one skill.
pub fn inspect(loaded: &LoadedSkill, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&skill_json(loaded, true))?);
        return Ok(());
    }
    let m = &loaded.manifest;
    let grant = loaded.skill.grant();
    println!("{} {} ({})", m.name, m.version, loaded.origin.display());
    println!("  {}", m.description);
    println!("runtime: {} (compiled: {:?})", loaded.runtime, loaded.cache);
    println!("limits: timeout {}ms, memory {}, output {}, {} concurrent calls",
        grant.limits.timeout.as_millis(), ByteSize(grant.limits.memory), ByteSize(grant.limits.output), grant.limits.concurrency);
    if grant.dirs.is_empty() {
        println!("files: none");
    }
    for dir in &grant.dirs {
        let mode = if dir.mode == FileMode::ReadWrite { "read-write" } else { "read-only" };
        println!("files: {} -> {} ({mode})", dir.host.display(), dir.guest);
    }
    if !m.search.keywords.is_empty() {
        println!("keywords: {}", m.search.keywords.join(", "));
    }
    println!("instructions: {}", if loaded.instructions.is_some() { "SKILL.md" } else { "none" });
    for tool in loaded.skill.tools() {
        let a = tool.annotations;
        let hints: Vec<&str> = [(a.read_only, "read-only"), (a.destructive, "destructive"), (a.idempotent, "idempotent"), (a.open_world, "open-world")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        println!("\ntool {}{}", tool.name, if hints.is_empty() { String::new() } else { format!(" [{}]", hints.join(", ")) });
        println!("  {}", tool.description.replace('\n', "\n  "));
        println!("  input schema: {}", serde_json::to_string_pretty(&tool.input_schema)?.replace('\n', "\n  "));
        if let Some(schema) = &tool.output_schema {
            println!("  output schema: {}", serde_json::to_string_pretty(schema)?.replace('\n', "\n  "));
        }
        for example in &tool.examples {
            println!("  example: {example}");
        }
    }
    Ok(())
}

/// Print audit rows.
pub fn audit(records: &[skillhost::EgressRecord], json: bool) -> Result<()> {
    if json {
        let rows: Vec<Value> = records
            .iter()
            .map(|r| {
                let mut row = serde_json::to_value(r).unwrap_or(Value::Null);
                row["time"] = json!(r.time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64));
                row["duration_ms"] = json!(r.duration.as_secs_f64() * 1000.0);
                row
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if records.is_empty() {
        println!("no outbound requests recorded");
    }
    for r in records {
        let secs = r.time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let ip = r.ip.map(|ip| ip.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{secs} {:<16} {:<12} {:<6} {} [{ip}] {} out={} in={} {:.1}ms",
            r.skill, r.tool, r.method, r.url, r.outcome, r.bytes_out, r.bytes_in, r.duration.as_secs_f64() * 1000.0
        );
    }
    Ok(())
}
