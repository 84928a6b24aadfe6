//! Code no human approved attacking the run that lists its tools (`hostile-lister`, a
//! stdio MCP server whose argument picks the attack): the run is bounded as a whole by
//! the probe's deadline, its pages are read one at a time and stopped at the caps, what
//! it writes never lands on the host's disk, no tree it makes is removed by recursion,
//! and no human's command waits for it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fixtures::python;
use skillhost::{Host, Registry, RegistryConfig, TrustState};

use crate::{HANG_GUARD, sandbox_host, wait_gone};

/// A workspace holding `hostile-lister` run with `args`, and a host over `data`.
fn hostile(data: &Path, workspace: &Path, args: &str) -> (Host, RegistryConfig) {
    python::install("hostile-lister", workspace, &format!("args = {args}"));
    let mut config = RegistryConfig::new(data);
    config.workspace = Some(workspace.to_owned());
    config.watch = false;
    (sandbox_host(data), config)
}

async fn open(host: &Host, config: RegistryConfig) -> Arc<Registry> {
    tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.expect("opening the registry hung").expect("registry opens")
}

fn load_error_of(registry: &Registry, name: &str) -> String {
    let entry = registry.entry(name).unwrap();
    assert!(entry.loaded.is_none(), "`{name}` loaded");
    entry.error.as_ref().expect("a load error").to_string()
}

/// A pending server that answers `initialize` and never `tools/list`: its listing is cut
/// off at the probe's deadline with its sandbox killed, and a human's `disable`, made while
/// it hangs, answers at once and holds when the load ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_never_answers_ends_at_the_probe_deadline_and_never_holds_up_a_human() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host, mut config) = hostile(data.path(), workspace.path(), r#"["server.py", "silent"]"#);
    config.first_load = skillhost::registry::FirstLoad::Background;
    let registry = open(&host, config).await;
    assert!(registry.loading().iter().any(|n| n.as_str() == "hostile-lister"), "its first listing runs in the background");

    let asked = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), registry.disable("hostile-lister"))
        .await
        .expect("`disable` waited behind the skill's listing")
        .expect("a skill still loading can be disabled");
    let waited = asked.elapsed();

    tokio::time::timeout(HANG_GUARD, registry.ready()).await.expect("the listing has no deadline: the load never ended");
    let error = load_error_of(&registry, "hostile-lister");
    assert!(error.contains("did not list its tools within 10s") && error.contains("its sandbox was killed"), "{error}");
    assert_eq!(registry.entry("hostile-lister").unwrap().state, TrustState::Disabled, "the disabling made during the load holds");
    assert_eq!(wait_gone("server.py silent").await, Vec::<u32>::new(), "the probe's server outlived its deadline");
    eprintln!("disable answered in {waited:?} while the listing hung");
}

/// A server that answers every `tools/list` page with 100 tools and a cursor, forever:
/// the listing stops at the tool cap, page by page, instead of gathering every page first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_listing_pages_stop_at_the_tool_cap() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host, config) = hostile(data.path(), workspace.path(), r#"["server.py", "endless"]"#);
    let registry = open(&host, config).await;
    let error = load_error_of(&registry, "hostile-lister");
    assert!(error.contains("tools/list refused: it lists more than 256 tools"), "{error}");
    assert_eq!(wait_gone("server.py endless").await, Vec::<u32>::new());
}

/// A server that writes 16 MiB to its scratch `/data`, then takes 3 s to list its tools:
/// the bytes stay in the sandbox's memory (a tmpfs that dies with it), so a host killed
/// mid-listing leaves nothing of it on disk. Watched while the server runs; its tool's
/// description says the write happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_probe_writes_never_reaches_the_host_disk() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let marker = format!("PROBE-FILL-{}", std::process::id());
    let (host, mut config) = hostile(data.path(), workspace.path(), &format!(r#"["server.py", "fill", "{marker}"]"#));
    config.first_load = skillhost::registry::FirstLoad::Background;
    let registry = open(&host, config).await;
    // Until its load ends: wherever the scratch is, the file would be there.
    let started = Instant::now();
    let mut found = Vec::new();
    while found.is_empty() && !registry.loading().is_empty() && started.elapsed() < HANG_GUARD {
        found = files_starting_with(data.path(), marker.as_bytes());
        found.extend(files_starting_with(&std::env::temp_dir(), marker.as_bytes()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(found.is_empty(), "what the probe wrote is on the host's disk: {found:?}");
    tokio::time::timeout(HANG_GUARD, registry.ready()).await.unwrap();
    let entry = registry.entry("hostile-lister").unwrap();
    let loaded = entry.loaded.as_ref().unwrap_or_else(|| panic!("did not load: {:?}", entry.error));
    let wrote = (16 << 20) + marker.len();
    assert_eq!(loaded.tools[0].description, format!("/data/fill holds {wrote} bytes"), "the probe did write");
}

/// A server that makes 15,000 nested directories in its scratch before it lists its
/// tools: the host neither recurses over the tree (a stack overflow killed it) nor keeps
/// it, and the skill loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_tree_made_by_a_probe_does_not_crash_the_host() {
    let (data, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host, config) = hostile(data.path(), workspace.path(), r#"["server.py", "deep"]"#);
    let registry = open(&host, config).await;
    let entry = registry.entry("hostile-lister").unwrap();
    let loaded = entry.loaded.as_ref().unwrap_or_else(|| panic!("did not load: {:?}", entry.error));
    assert_eq!(loaded.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["noop"]);
    assert!(deepest(data.path()) < 64, "a tree the probe made is on the host's disk");
}

/// Regular files under `dir` (not following links) whose first bytes are `prefix`.
fn files_starting_with(dir: &Path, prefix: &[u8]) -> Vec<std::path::PathBuf> {
    use std::io::Read;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let mut head = vec![0; prefix.len()];
                if std::fs::File::open(entry.path()).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head == prefix {
                    found.push(entry.path());
                }
            }
        }
    }
    found
}

/// The depth of the deepest directory under `dir` (not following links).
fn deepest(dir: &Path) -> usize {
    let mut max = 0;
    let mut stack = vec![(dir.to_owned(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        max = max.max(depth);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|k| k.is_dir()) {
                stack.push((entry.path(), depth + 1));
            }
        }
    }
    max
}
