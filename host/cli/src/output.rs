//! What `list`, `inspect` and `call` print: aligned text for people, JSON for scripts.

use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use skillhost::{DirectSkill, Entry, registry::ApprovalRequest, runtime::CacheOutcome, skill::ByteSize, skill::FileMode, skill::SkillCode};
use skillhost_package as package;

/// One skill as `list --json` and `inspect --json` print it.
fn skill_json(loaded: &DirectSkill, full: bool) -> Value {
    let (grant, manifest) = (&loaded.asked, &loaded.source.manifest);
    let tools: Vec<Value> = loaded
        .skill
        .tools()
        .iter()
        .map(|t| if full { serde_json::to_value(t).unwrap_or(Value::Null) } else { json!({"name": t.name, "description": t.description}) })
        .collect();
    json!({
        "name": manifest.name,
        "version": manifest.version,
        "description": manifest.description,
        "runtime": loaded.runtime(),
        "origin": loaded.source.origin,
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
        "search": manifest.search,
        "instructions": if full { json!(loaded.source.instructions) } else { json!(loaded.source.instructions.is_some()) },
    })
}

/// One catalog entry as `list --json` and `show --json` print it.
fn entry_json(entry: &Entry, full: bool) -> Value {
    let loaded = entry.loaded.as_ref();
    let tools: Vec<Value> = loaded
        .map(|l| {
            l.tools
                .iter()
                .map(|t| {
                    if full {
                        serde_json::to_value(t).unwrap_or(Value::Null)
                    } else {
                        json!({"name": t.name, "description": t.description})
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "name": entry.name,
        "layer": entry.layer.as_str(),
        "origin": entry.origin,
        "state": entry.state.as_str(),
        "runtime": loaded.map(|l| l.runtime),
        "version": loaded.map(|l| l.version.clone()),
        "description": loaded.map(|l| l.description.clone()),
        "tier": loaded.map(|l| l.tier),
        "tools": tools,
        "requests": loaded.map(|l| l.requests.clone()).unwrap_or_default(),
        "sandbox_without": loaded.map(|l| l.sandbox_without.clone()).unwrap_or_default(),
        "instructions": entry.has_instructions(),
        "frontmatter": loaded.and_then(|l| l.frontmatter.as_ref()),
        "pack": loaded.and_then(|l| l.pack.as_ref()),
        "shadows": entry.shadows,
        "identity": entry.identity.as_str(),
        "data_dir": loaded.and_then(|l| l.data_dir.as_ref()),
        "error": entry.error.as_ref().map(|e| e.to_string()),
    })
}

/// Print the catalog.
pub fn catalog(entries: &[Arc<Entry>], json: bool) -> Result<()> {
    if json {
        let items: Vec<Value> = entries.iter().map(|e| entry_json(e, false)).collect();
        outln!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if entries.is_empty() {
        outln!("no skills found; build one with `skillhost new NAME && skillhost build NAME`, then `skillhost install NAME`");
        return Ok(());
    }
    // As wide as the longest name (up to 64 bytes), so every row's columns line up.
    let width = entries.iter().map(|e| e.name.as_str().len()).max().unwrap_or(0).max(20);
    outln!("{:<width$} {:<9} {:<7} {:<9} {:<17} TOOLS", "NAME", "LAYER", "RUNTIME", "VERSION", "STATE");
    for entry in entries {
        let loaded = entry.loaded.as_ref();
        let tools = loaded.map(|l| l.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default();
        outln!(
            "{:<width$} {:<9} {:<7} {:<9} {:<17} {tools}",
            entry.name.as_str(),
            entry.layer.as_str(),
            loaded.map_or("-", |l| l.runtime),
            loaded.map_or("-", |l| l.version.as_str()),
            entry.state.as_str(),
        );
        if let Some(error) = &entry.error {
            outln!("{:<width$} error: {error}", "");
        }
    }
    Ok(())
}

/// Print the agent's skill directory (`list --directory`).
pub fn directory(directory: &skillhost::mcp::Directory, budget: usize, json: bool) -> Result<()> {
    if json {
        let value = json!({ "budget": budget, "listed": directory.listed, "total": directory.total, "text": directory.text });
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else if directory.text.is_empty() {
        errln!("no approved skills; see them all with `skillhost list`");
    } else {
        out!("{}", directory.text);
    }
    Ok(())
}

/// Print one entry and what approving it would grant.
pub fn show(entry: &Entry, request: Option<&ApprovalRequest>, org: Option<&OrgLayer>, json: bool) -> Result<()> {
    if json {
        let mut value = entry_json(entry, true);
        value["approval"] = serde_json::to_value(request)?;
        if let Some(org) = org {
            value["org_policy"] = org.json();
        }
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    outln!("{} ({} layer, {})", entry.name, entry.layer.as_str(), entry.origin.display());
    if entry.layer == skillhost::registry::Layer::External {
        outln!(
            "read-only: another agent's skill folder (--skills-from); skillhost writes nothing there and loads no component or skill.toml from it; its SKILL.md is served as instructions, and its scripts, if any, run only in the jail once approved, like any skill's"
        );
    }
    outln!("state: {}", entry.state);
    if let Some(line) = request.and_then(|r| approved_by(&entry.name, r)) {
        outln!("approved by: {line}");
    }
    for shadowed in &entry.shadows {
        outln!("shadows: {} ({} layer)", shadowed.origin.display(), shadowed.layer.as_str());
    }
    if let Some(data_dir) = entry.loaded.as_ref().and_then(|l| l.data_dir.as_ref()) {
        let apart = if entry.shadows.is_empty() { "" } else { "; separate from the skills it shadows, as is its approval" };
        outln!("data: {}{apart}", data_dir.display());
    }
    if let Some(error) = &entry.error {
        outln!("error: {error}");
    }
    if let Some(loaded) = &entry.loaded {
        outln!("{} {}: {}", loaded.runtime, loaded.version, loaded.description);
        outln!("tier: {:?}", loaded.tier);
        outln!("content hash: {}", loaded.content_hash);
        for line in request.and_then(|r| r.provenance.as_ref()).map(skillhost::skill::Provenance::lines).unwrap_or_default() {
            outln!("{line}");
        }
        for line in &loaded.requests {
            outln!("asks: {line}");
        }
        for layer in &loaded.sandbox_without {
            outln!("sandbox without: {layer}");
        }
        for tool in &loaded.tools {
            outln!("tool {}: {}", tool.name, tool.description.lines().next().unwrap_or(""));
        }
        if loaded.instructions.is_some() {
            outln!("instructions: SKILL.md");
        }
        if let Some(fm) = &loaded.frontmatter {
            let optional = [("license", fm.license.clone()), ("compatibility", fm.compatibility.clone())];
            for (key, value) in optional.into_iter().filter_map(|(k, v)| Some((k, v?))) {
                outln!("{key}: {value}");
            }
            for (key, value) in &fm.metadata {
                outln!("metadata {key}: {value}");
            }
            if !fm.allowed_tools.is_empty() {
                outln!("allowed-tools (as SKILL.md says; skillhost grants nothing for it): {}", fm.allowed_tools.join(" "));
            }
            if !fm.unknown_keys.is_empty() {
                outln!("ignored frontmatter keys (not in the Agent Skills specification): {}", fm.unknown_keys.join(", "));
            }
        }
        if let Some(pack) = &loaded.pack {
            outln!("pack: {} {} ({}, also known as {})", pack.name, pack.version, pack.file, pack.seed_name);
            for (key, value) in &pack.extra {
                outln!("pack field {key}: {value}");
            }
        }
    }
    if let Some(request) = request.filter(|r| !r.diff.is_empty()) {
        outln!("since the last approval:");
        request.diff.iter().for_each(|line| outln!("  {line}"));
    }
    if let Some(request) = request.filter(|r| !r.files.is_empty()) {
        outln!("files since the last approval (+ added, ~ changed, - removed):");
        request.files.iter().for_each(|line| outln!("  {line}"));
    }
    if let Some(org) = org {
        org.print();
    }
    Ok(())
}

/// The org policy's layer of `show`: who may use the skill, beside what it may touch.
pub struct OrgLayer {
    /// The policy directory (`[org] policies`).
    pub dir: std::path::PathBuf,
    /// The policies about the skill, or why the set does not load.
    pub policies: Result<Vec<skillhost::access::PolicyLine>, String>,
}

impl OrgLayer {
    fn print(&self) {
        let dir = self.dir.display();
        match &self.policies {
            Err(error) => outln!("org policy ({dir}): does not load, so `serve` would refuse to start: {error}"),
            Ok(lines) if lines.is_empty() => {
                outln!("org policy ({dir}): no policy names this skill or its tools: no caller over HTTP may use it (default deny)")
            }
            Ok(lines) => {
                outln!("org policy ({dir}): who may use it over HTTP (a forbid beats every permit):");
                for line in lines {
                    let asks = if line.require_approval { " [each call asks a human]" } else { "" };
                    outln!("  {} {}{asks}: {}", line.effect, line.id, line.text);
                }
            }
        }
    }

    fn json(&self) -> Value {
        match &self.policies {
            Err(error) => json!({"dir": self.dir, "error": error}),
            Ok(lines) => json!({
                "dir": self.dir,
                "policies": lines.iter().map(|l| json!({"id": l.id, "effect": l.effect, "require_approval": l.require_approval, "text": l.text})).collect::<Vec<_>>(),
            }),
        }
    }
}

/// Who gave the last approval and through which channel, for `show`; `None` when the
/// skill was never approved.
fn approved_by(name: &skillhost::skill::SkillName, request: &ApprovalRequest) -> Option<String> {
    use skillhost::{ApprovalChannel, registry::ApprovedBy};
    let current = if request.state == skillhost::TrustState::Approved { "" } else { " (of an earlier version)" };
    let line = match (request.last_approved_by?, request.last_approved_via) {
        (_, Some(ApprovalChannel::Auto)) | (ApprovedBy::Auto, None) => "the host, automatically (auto: its tier needs no human)".to_owned(),
        (_, Some(ApprovalChannel::Cli)) => "a human at a terminal (cli: `skillhost approve`)".to_owned(),
        (_, Some(ApprovalChannel::McpElicitation)) => format!(
            "a human's answer relayed by an MCP client (mcp-elicitation); if nobody should have approved it, revoke it with `skillhost reject {name}`"
        ),
        (ApprovedBy::Human, None) => "a human (channel not recorded: approved before skillhost recorded channels)".to_owned(),
    };
    Some(format!("{line}{current}"))
}

/// Largest file `show --code` prints.
const MAX_SHOWN_FILE: u64 = 256 << 10;

/// Print the files of a skill as the registry reads them (no link followed, the size
/// caps): every text file of a folder (others as their size), or the manifest and
/// SKILL.md embedded in a `.wasm`.
pub fn code(origin: &std::path::Path) -> Result<()> {
    let snapshot = package::Snapshot::read(origin, &package::SizeLimits::default())?;
    let files = match snapshot {
        package::Snapshot::Wasm { bytes, .. } => {
            for (name, section) in [("skill.toml", package::MANIFEST_SECTION), ("SKILL.md", package::INSTRUCTIONS_SECTION)] {
                if let Some(text) = package::read_section(&bytes, section)? {
                    file_text(&format!("{}#{name}", origin.display()), &String::from_utf8_lossy(text));
                }
            }
            outln!("\n==> {} <== WebAssembly component, {}", origin.display(), ByteSize(bytes.len() as u64));
            return Ok(());
        }
        package::Snapshot::Folder { files, .. } => files,
    };
    for (path, bytes) in files {
        if path.split('/').any(|part| part.starts_with('.')) || path.starts_with("target/") {
            continue;
        }
        let path = origin.join(path);
        match std::str::from_utf8(&bytes).ok().filter(|_| bytes.len() as u64 <= MAX_SHOWN_FILE) {
            Some(text) => file_text(&path.display().to_string(), text),
            None => outln!("\n==> {} <== binary or large, {}", path.display(), ByteSize(bytes.len() as u64)),
        }
    }
    Ok(())
}

/// Marks a line of `show --code` that holds characters a terminal would act on.
const MARK: &str = "!! ";

/// Print one text file for `show --code` so that what the human reads is what the file
/// holds: each control or bidirectional character is written out (`\x1b`, `\r`,
/// `\u202E`) and its line marked with [`MARK`], and the header says how many lines are
/// marked. A carriage return that ends a line (`\r\n`) is a line ending, not marked.
fn file_text(name: &str, text: &str) {
    let lines: Vec<(&str, bool)> = text
        .split_inclusive('\n')
        .map(|line| {
            let line = line.strip_suffix('\n').map_or(line, |l| l.strip_suffix('\r').unwrap_or(l));
            (line, skillhost::text::check(line, skillhost::text::TextKind::Prose).is_err())
        })
        .collect();
    let marked = lines.iter().filter(|(_, marked)| *marked).count();
    match marked {
        0 => outln!("\n==> {name} <=="),
        n => outln!(
            "\n==> {name} <== {n} line{} hold{} control or bidirectional characters, written out and marked `{}`",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
            MARK.trim_end()
        ),
    }
    for (line, marked) in lines {
        let shown = skillhost::text::visible(line);
        if marked {
            outln!("{MARK}{shown}");
        } else {
            outln!("{shown}");
        }
    }
}

/// Print what a human approves, whole: the question, capability lines first
/// ([`ApprovalRequest::question`]). When a human answers at a terminal and the question
/// is longer than a screen (`LINES`, else 24 rows), it is shown a screen at a time, each
/// page waiting for Enter; `q` stops, and then nothing is approved: `false`.
pub fn approval_request(request: &ApprovalRequest, interactive: bool) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    let question = request.question();
    let rows = std::env::var("LINES").ok().and_then(|l| l.parse::<usize>().ok()).filter(|r| *r > 4).unwrap_or(24);
    let lines: Vec<&str> = question.lines().collect();
    let paged = interactive && std::io::stdin().is_terminal() && lines.len() > rows - 1;
    if !paged {
        errln!("{question}");
        return Ok(true);
    }
    let pages: Vec<&[&str]> = lines.chunks(rows - 2).collect();
    for (i, page) in pages.iter().enumerate() {
        for line in page.iter() {
            errln!("{line}");
        }
        if i + 1 == pages.len() {
            break;
        }
        err!("-- {} of {} lines shown: Enter for more, q to stop (nothing is approved) -- ", (i + 1) * (rows - 2), lines.len());
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim().eq_ignore_ascii_case("q") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The WIT reflection of a loaded component skill, from the bytes it was loaded from;
/// `None` for a server skill.
fn reflection(loaded: &DirectSkill) -> Result<Option<package::Reflection>> {
    let SkillCode::Wasm { path, bytes } = &loaded.source.code else { return Ok(None) };
    Ok(Some(package::reflect(bytes).with_context(|| format!("{}: cannot read the component's WIT", path.display()))?))
}

/// For a component that could not be loaded (`error`): its WIT, the tools it would offer
/// and the functions that are not tools, so the reason can be read against the WIT. Prints
/// nothing when `path` is not a component the package reader accepts.
pub fn inspect_unloadable(path: &std::path::Path, error: &str, json: bool) -> Result<()> {
    let bytes = match package::Snapshot::read(path, &package::SizeLimits::default()) {
        Ok(package::Snapshot::Wasm { bytes, .. }) => bytes,
        Ok(package::Snapshot::Folder { mut files, .. }) => files.remove("skill.wasm").unwrap_or_default(),
        Err(_) => return Ok(()),
    };
    let Ok(r) = package::reflect(&bytes) else { return Ok(()) };
    if json {
        let value = json!({
            "origin": path,
            "state": "not loadable",
            "error": error,
            "tools": r.tools,
            "component": {"world": if r.is_skill { "skillhost:skill" } else { "generic" }, "wit": r.wit, "refused": r.refused},
        });
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    outln!("{} (cannot be loaded; see the error below)", path.display());
    for tool in &r.tools {
        outln!("would-be tool {}: {}", tool.name, tool.description);
    }
    for refused in &r.refused {
        outln!("not a tool: {} {}", refused.function, refused.reason);
    }
    outln!("\nWIT:\n{}", r.wit.trim_end());
    Ok(())
}

/// Print everything about one skill: for a component, also its WIT, and for a generic
/// component (one that does not export our world) the functions that are not tools.
pub fn inspect(loaded: &DirectSkill, json: bool) -> Result<()> {
    let reflection = reflection(loaded)?;
    if json {
        let mut value = skill_json(loaded, true);
        if let Some(r) = &reflection {
            value["component"] = json!({
                "world": if r.is_skill { "skillhost:skill" } else { "generic" },
                "wit": r.wit,
                "refused": r.refused,
            });
        }
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let m = &loaded.source.manifest;
    let grant = &loaded.asked;
    outln!("{} {} ({})", m.name, m.version, loaded.source.origin.display());
    outln!("  {}", m.description);
    match loaded.cache_outcome() {
        Some(CacheOutcome::Hit) => outln!("runtime: {} (taken from the compiled cache)", loaded.runtime()),
        Some(CacheOutcome::Compiled) => outln!("runtime: {} (compiled now)", loaded.runtime()),
        Some(_) => outln!("runtime: {} (not compiled: its tools are read from its WIT, its first call compiles it)", loaded.runtime()),
        None => outln!("runtime: {}", loaded.runtime()),
    }
    outln!(
        "limits: timeout {}ms, memory {}, output {}, {} concurrent calls",
        grant.limits.timeout.as_millis(),
        ByteSize(grant.limits.memory),
        ByteSize(grant.limits.output),
        grant.limits.concurrency
    );
    if grant.dirs.is_empty() {
        outln!("files: none");
    }
    for dir in &grant.dirs {
        let mode = if dir.mode == FileMode::ReadWrite { "read-write" } else { "read-only" };
        outln!("files: {} -> {} ({mode})", dir.host.display(), dir.guest);
    }
    if !m.search.keywords.is_empty() {
        outln!("keywords: {}", m.search.keywords.join(", "));
    }
    outln!("instructions: {}", if loaded.source.instructions.is_some() { "SKILL.md" } else { "none" });
    for tool in loaded.skill.tools() {
        let a = tool.annotations;
        let hints: Vec<&str> =
            [(a.read_only, "read-only"), (a.destructive, "destructive"), (a.idempotent, "idempotent"), (a.open_world, "open-world")]
                .into_iter()
                .filter_map(|(on, name)| on.then_some(name))
                .collect();
        outln!("\ntool {}{}", tool.name, if hints.is_empty() { String::new() } else { format!(" [{}]", hints.join(", ")) });
        outln!("  {}", tool.description.replace('\n', "\n  "));
        outln!("  input schema: {}", serde_json::to_string_pretty(&tool.input_schema)?.replace('\n', "\n  "));
        if let Some(schema) = &tool.output_schema {
            outln!("  output schema: {}", serde_json::to_string_pretty(schema)?.replace('\n', "\n  "));
        }
        for example in &tool.examples {
            outln!("  example: {example}");
        }
    }
    if let Some(r) = &reflection {
        if !r.is_skill {
            outln!("\ngeneric component: its exported functions are its tools (`INTERFACE-FUNCTION`)");
        }
        for refused in &r.refused {
            outln!("not a tool: {} {}", refused.function, refused.reason);
        }
        outln!("\nWIT:\n{}", r.wit.trim_end());
    }
    Ok(())
}

/// The org policy's decisions, oldest first: one line each, or a JSON array.
pub fn decisions(rows: &[skillhost::audit::DecisionRecord], json: bool) -> Result<()> {
    if json {
        let millis = |time: std::time::SystemTime| time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let rows: Vec<Value> = rows
            .iter()
            .map(|d| {
                let mut value = serde_json::to_value(d).unwrap_or(Value::Null);
                value["time"] = json!(millis(d.time));
                value
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        outln!("no decisions of the org policy recorded");
    }
    for d in rows {
        let verdict = if d.allowed { "allowed" } else { "refused" };
        let by = if d.policies.is_empty() { "(no policy permits it)".to_owned() } else { d.policies.join(", ") };
        outln!("{} {:<16} {:<8} {:<40} {verdict:<7} {by}", skillhost::audit::rfc3339(d.time), d.caller, d.action, d.resource);
    }
    Ok(())
}

/// The audit log's rows, outbound requests and runs of scripts together, oldest first
/// (by the time each started: a run comes before the requests its scripts made).
pub fn audit(requests: &[skillhost::net::EgressRecord], runs: &[skillhost::audit::RunRecord], json: bool) -> Result<()> {
    enum Row<'a> {
        Request(&'a skillhost::net::EgressRecord),
        Run(&'a skillhost::audit::RunRecord),
    }
    let mut rows: Vec<(std::time::SystemTime, Row<'_>)> =
        requests.iter().map(|r| (r.time, Row::Request(r))).chain(runs.iter().map(|r| (r.time, Row::Run(r)))).collect();
    rows.sort_by_key(|(time, _)| *time);
    let millis = |time: std::time::SystemTime| time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    if json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|(time, row)| {
                let (kind, mut value, duration) = match row {
                    Row::Request(r) => ("request", serde_json::to_value(r).unwrap_or(Value::Null), r.duration),
                    Row::Run(r) => ("run", serde_json::to_value(r).unwrap_or(Value::Null), r.duration),
                };
                value["record"] = json!(kind);
                value["time"] = json!(millis(*time));
                value["duration_ms"] = json!(duration.as_secs_f64() * 1000.0);
                value
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        outln!("no outbound requests or runs recorded");
    }
    for (time, row) in rows {
        let secs = skillhost::audit::rfc3339(time);
        match row {
            Row::Request(r) => {
                let ip = r.ip.map(|ip| ip.to_string()).unwrap_or_else(|| "-".into());
                outln!(
                    "{secs} {:<16} {:<12} {:<6} {} [{ip}] {} out={} in={} {:.1}ms",
                    r.skill,
                    r.tool,
                    r.method,
                    r.url,
                    r.outcome,
                    r.bytes_out,
                    r.bytes_in,
                    r.duration.as_secs_f64() * 1000.0
                );
            }
            Row::Run(r) => outln!(
                "{secs} {:<16} {:<12} {} {} in={} out={} {:.1}ms",
                r.skill,
                "run",
                r.command,
                r.outcome,
                r.bytes_in,
                r.bytes_out,
                r.duration.as_secs_f64() * 1000.0
            ),
        }
    }
    Ok(())
}

/// What a skill loaded by its `path` goes without under the probe grant, and how to give
/// it that; `None` when it asks for nothing the probe withholds.
pub fn probe_note(manifest: &skillhost::skill::SkillManifest, path: &str) -> Option<String> {
    let mut asks: Vec<String> = manifest.probe_withholds().into_iter().collect();
    if !manifest.files.is_empty() {
        let files: Vec<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
        asks.push(format!("files of its data dir ({}; it gets an empty scratch /data instead)", files.join(", ")));
    }
    (!asks.is_empty()).then(|| {
        format!(
            "note: skill `{}` ({path}) is not approved, so it runs under the probe grant without what it asks for: {}; \
             pass --grant to give it what its skill.toml asks for, or install it (`skillhost install {path}`) and approve it",
            manifest.name,
            asks.join(", ")
        )
    })
}
