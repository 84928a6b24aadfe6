//! The MCP Skills extension of the MCP front (`skills/list`, `skills/get`, files by
//! `resources/read`), driven by rmcp's client over an in-memory pipe and by the official
//! Python SDK (`mcp_skills.py`) over streamable HTTP: only approved skills with SKILL.md
//! are served, every manifest entry matches the bytes a read returns and the file on
//! disk, and a pending skill, an unknown file or a `..` path is refused naming the skill.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fixtures::{LIMITS, TEXT_TOOLS};
use rmcp::ServiceExt;
use rmcp::model::{
    GetSkillRequestParams, PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams, ResourceContents, Skill,
    SkillResources,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;
use skillhost::mcp::{HttpConfig, McpConfig, SkillhostMcp, serve_http};
use skillhost::{ApprovalChannel, Registry, RegistryConfig, TrustState};

use crate::{HANG_GUARD, test_host};

const SKILL_MD: &str = "---\nname: limits\ndescription: Echo values back, spin, sleep and fail on request.\nlicense: MIT\nallowed-tools: Read Grep\nmetadata:\n  author: tests\n---\n# Limits\n\nRead references/notes.md first.\n";
/// Not UTF-8: served as a blob.
const LOGO: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe";
/// Over the front's 256 KiB limit for one resource.
const BIG: usize = 300 * 1024;

/// A workspace with `limits` (approved: it asks for nothing) as a folder with SKILL.md,
/// a reference, a script, a binary asset and a file over the resource limit; and
/// `text-tools` with SKILL.md, asking for the network (pending review).
struct Skills {
    t: fixtures::TestHost,
    workspace: tempfile::TempDir,
}

impl Skills {
    fn new() -> Self {
        let (t, workspace) = (test_host(), tempfile::tempdir().unwrap());
        let dir = LIMITS.folder(workspace.path());
        std::fs::write(dir.join("SKILL.md"), SKILL_MD).unwrap();
        for folder in ["references", "scripts", "assets"] {
            std::fs::create_dir(dir.join(folder)).unwrap();
        }
        std::fs::write(dir.join("references/notes.md"), "Notes: é and ✓.\n").unwrap();
        std::fs::write(dir.join("scripts/run.py"), "print('never run by the front')\n").unwrap();
        std::fs::write(dir.join("assets/logo.png"), LOGO).unwrap();
        std::fs::write(dir.join("references/big.txt"), "x".repeat(BIG)).unwrap();
        let pending = TEXT_TOOLS.folder_with(workspace.path(), "[network]\nallow = [\"http://127.0.0.1:9\"]\n");
        assert!(pending.join("SKILL.md").exists(), "text-tools has a SKILL.md");
        Self { t, workspace }
    }

    fn dir(&self) -> PathBuf {
        self.workspace.path().join("limits")
    }

    async fn registry(&self) -> Arc<Registry> {
        let mut config = RegistryConfig::new(self.t.data.path());
        config.workspace = Some(self.workspace.path().to_owned());
        config.watch = false;
        let registry = tokio::time::timeout(HANG_GUARD, self.t.host.open_registry(config)).await.expect("open hung").expect("opens");
        assert_eq!(registry.entry("limits").unwrap().state, TrustState::Approved);
        let pending = registry.entry("text-tools").unwrap();
        assert!(pending.has_instructions(), "{:?}", pending.error);
        assert_eq!(pending.state, TrustState::PendingReview);
        registry
    }
}

async fn front(registry: Arc<Registry>) -> RunningService<RoleClient, ()> {
    let (client_side, host_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(skillhost::mcp::serve(SkillhostMcp::new(registry, McpConfig::default()).unwrap(), host_side));
    tokio::time::timeout(HANG_GUARD, ().serve(client_side)).await.expect("handshake hung").expect("the front answers the handshake")
}

/// Every skill of `skills/list`, page by page; the page sizes.
async fn list_all(client: &RunningService<RoleClient, ()>) -> (Vec<Skill>, Vec<usize>) {
    let (mut skills, mut pages, mut cursor) = (Vec::new(), Vec::new(), None);
    loop {
        let params = cursor.take().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = tokio::time::timeout(HANG_GUARD, client.list_skills(params)).await.expect("skills/list hung").expect("skills/list");
        pages.push(page.skills.len());
        skills.extend(page.skills);
        assert!(pages.len() < 100, "skills/list never ends");
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return (skills, pages),
        }
    }
}

/// `resources/read` of `uri`: its bytes (text or blob), or the error's text.
async fn read(client: &RunningService<RoleClient, ()>, uri: &str) -> Result<Vec<u8>, String> {
    let read = tokio::time::timeout(HANG_GUARD, client.read_resource(ReadResourceRequestParams::new(uri))).await.expect("read hung");
    let result = read.map_err(|e| e.to_string())?;
    assert_eq!(result.contents.len(), 1, "{uri}");
    Ok(match &result.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone().into_bytes(),
        ResourceContents::BlobResourceContents { blob, .. } => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(blob).expect("a blob is base64")
        }
        other => panic!("{uri}: {other:?}"),
    })
}

/// Each file of `skill`'s manifest read back: it has the manifest's size and digest, and
/// (when `dir` is given) the bytes of the file on disk. The paths.
async fn verify(client: &RunningService<RoleClient, ()>, skill: &Skill, dir: Option<&Path>) -> BTreeSet<String> {
    let SkillResources::Files(files) = &skill.resources else { panic!("{} has no manifest", skill.uri) };
    let prefix = format!("skill://{}/", skill.frontmatter.name);
    assert_eq!(files[0].uri, skill.uri, "SKILL.md first");
    let mut paths = BTreeSet::new();
    for file in files {
        let bytes = read(client, &file.uri).await.unwrap_or_else(|e| panic!("{} does not read: {e}", file.uri));
        file.verify(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let path = file.uri.strip_prefix(&prefix).expect("inside the skill").to_owned();
        if let Some(dir) = dir {
            assert_eq!(bytes, std::fs::read(dir.join(&path)).unwrap(), "{}: not the file's bytes", file.uri);
        }
        paths.insert(path);
    }
    paths
}

/// Extension: an approved skill with SKILL.md is listed with its frontmatter and a
/// manifest whose every entry reads back with its size and digest; a pending one is
/// absent, `skills/get` refuses it and `resources/read` withholds its files, naming the
/// command that approves it; once approved it is served like the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_skills_are_served_with_manifests_of_the_bytes_read() {
    let skills = Skills::new();
    let registry = skills.registry().await;
    let client = front(registry.clone()).await;
    let info = client.peer_info().expect("initialized");
    assert!(info.capabilities.supports_skills() && info.capabilities.resources.is_some(), "{:?}", info.capabilities);
    assert!(info.capabilities.supports_directory_read(), "{:?}", info.capabilities);

    let (listed, _) = list_all(&client).await;
    let names: Vec<&str> = listed.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["limits"], "only the approved skill");
    let limits = &listed[0];
    assert_eq!(limits.uri, "skill://limits/SKILL.md");
    let frontmatter = serde_json::to_value(&limits.frontmatter).unwrap();
    assert_eq!(frontmatter["description"], "Echo values back, spin, sleep and fail on request.", "SKILL.md's, not skill.toml's");
    assert_eq!(frontmatter["license"], "MIT");
    assert_eq!(frontmatter["allowed-tools"], "Read Grep");
    assert_eq!(frontmatter["metadata"]["author"], "tests");

    let paths = verify(&client, limits, Some(&skills.dir())).await;
    let expected = ["SKILL.md", "assets/logo.png", "references/notes.md", "scripts/run.py", "skill.toml"];
    assert_eq!(paths, expected.iter().map(|p| p.to_string()).collect(), "every file but the component and the one over the limit");
    let withheld = &limits.meta.as_ref().expect("the file left out is named").0["skillhost/withheld"];
    assert_eq!(withheld[0]["path"], "references/big.txt", "{withheld}");
    assert!(withheld[0]["reason"].as_str().unwrap().contains("limit"), "{withheld}");
    let big = read(&client, "skill://limits/references/big.txt").await.expect_err("over the limit");
    assert!(big.contains("`limits`") && big.contains("limit"), "{big}");

    let got = client.get_skill(GetSkillRequestParams::new("skill://limits/SKILL.md")).await.expect("skills/get");
    assert_eq!(&got.skill, limits, "skills/get answers what skills/list listed");

    let refused = client.get_skill(GetSkillRequestParams::new("skill://text-tools/SKILL.md")).await.expect_err("pending").to_string();
    assert!(refused.contains("`text-tools`") && refused.contains("skillhost approve text-tools"), "{refused}");
    let unknown = client.get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md")).await.expect_err("unknown").to_string();
    assert!(unknown.contains("`nope`"), "{unknown}");
    for (uri, says) in [
        ("skill://text-tools/SKILL.md", "skillhost approve text-tools"),
        ("skill://limits/references/nope.md", "no such file"),
        ("skill://limits/../text-tools/SKILL.md", "only plain relative paths"),
        ("skill://limits/references/../SKILL.md", "only plain relative paths"),
    ] {
        let error = read(&client, uri).await.expect_err(uri);
        assert!(error.contains(says), "{uri}: {error}");
        assert!(error.contains("`limits`") || error.contains("`text-tools`"), "{uri}: names the skill: {error}");
    }

    // Folders, among the files served.
    let children = |uri: &'static str| {
        let client = &client;
        async move {
            let read = client.read_resource_directory(ReadResourceDirectoryRequestParams::new(uri)).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(read.resources.iter().map(|r| (r.name.clone(), r.is_directory())).collect::<Vec<_>>())
        }
    };
    let top = children("skill://limits").await.expect("the top folder");
    let expected = [("SKILL.md", false), ("assets", true), ("references", true), ("scripts", true), ("skill.toml", false)];
    assert_eq!(top, expected.map(|(n, d)| (n.to_owned(), d)), "no component, folders marked");
    let references = children("skill://limits/references").await.expect("a folder");
    assert_eq!(references, [("notes.md".to_owned(), false)], "the file over the limit is not served");
    let pending = children("skill://text-tools").await.expect_err("pending");
    assert!(pending.contains("skillhost approve text-tools"), "{pending}");
    let file = children("skill://limits/SKILL.md").await.expect_err("a file is not a folder");
    assert!(file.contains("`limits`") && file.contains("not a folder"), "{file}");

    // Clients without the extension keep the built-in tools.
    let tools = client.list_all_tools().await.unwrap();
    for name in ["skill_list", "skill_get", "read_skill_resource"] {
        assert!(tools.iter().any(|t| t.name == name), "{name} not listed");
    }

    let request = registry.approval_request("text-tools").unwrap();
    registry.approve("text-tools", &request.content_hash, &request.capability_digest, ApprovalChannel::Cli).await.unwrap();
    let (listed, _) = list_all(&client).await;
    assert_eq!(listed.iter().map(|s| s.name()).collect::<Vec<_>>(), ["limits", "text-tools"], "approved: now served");
    let paths = verify(&client, &listed[1], Some(&skills.workspace.path().join("text-tools"))).await;
    assert!(paths.contains("SKILL.md") && paths.contains("skill.toml"), "{paths:?}");
}

/// Bound: `skills/list` answers at most 20 skills a page, in name order, and the pages
/// together hold every served skill once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_pages_are_bounded_and_complete() {
    let (t, workspace) = (test_host(), tempfile::tempdir().unwrap());
    let names: Vec<String> = (0..45).map(|i| format!("guide-{i:02}")).collect();
    for name in &names {
        let dir = workspace.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: Guide number {name}.\n---\n# {name}\n")).unwrap();
    }
    let mut config = RegistryConfig::new(t.data.path());
    config.workspace = Some(workspace.path().to_owned());
    config.watch = false;
    let registry = t.host.open_registry(config).await.unwrap();
    let client = front(registry).await;
    let (listed, pages) = list_all(&client).await;
    assert_eq!(pages, [20, 20, 5]);
    assert_eq!(listed.iter().map(|s| s.name().to_owned()).collect::<Vec<_>>(), names);
    for skill in &listed[..3] {
        verify(&client, skill, Some(&workspace.path().join(skill.name()))).await;
    }
}

/// The same through the official Python SDK over streamable HTTP, in both protocol eras:
/// the capability in the handshake, `skills/list` (paged) and `skills/get` through the
/// session's generic request, every manifest file read and checked with hashlib, and the
/// refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_lists_gets_and_verifies_skills() {
    let skills = Skills::new();
    let registry = skills.registry().await;
    let token = "skills-2640-token";
    let config = HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), token: Some(token.into()), ..HttpConfig::default() };
    let (ready, bound) = tokio::sync::oneshot::channel();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let server = SkillhostMcp::new(registry, McpConfig::default()).unwrap();
    let serving = tokio::spawn(serve_http(server, config, shutdown.clone(), Some(ready)));
    let addr = tokio::time::timeout(HANG_GUARD, bound).await.expect("the front did not start").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("all/mcp_skills.py");
    let python = fixtures::python::venv().join("bin/python");
    for mode in ["auto", "legacy"] {
        let mut command = std::process::Command::new(&python);
        command.arg(&script).args([mode, &format!("http://{addr}/mcp"), token]).arg(skills.dir()).args(["limits", "text-tools"]);
        let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("python runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        let facts: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap_or_else(|e| panic!("{mode}: {e}: {stderr}"));
        eprintln!("{mode}: {facts}");
        assert_eq!(facts["skills"], serde_json::json!(["limits"]), "{mode}");
        assert_eq!(
            facts["manifest"],
            serde_json::json!(["SKILL.md", "assets/logo.png", "references/notes.md", "scripts/run.py", "skill.toml"]),
            "{mode}"
        );
        assert_eq!(facts["files"], 5, "{mode}");
        assert_eq!(facts["withheld"], serde_json::json!(["references/big.txt"]), "{mode}");
        let reads = &facts["refused_reads"];
        assert!(reads["pending"].as_str().unwrap().contains("skillhost approve text-tools"), "{mode}: {reads}");
        assert!(reads["unknown"].as_str().unwrap().contains("no such file"), "{mode}: {reads}");
        assert!(reads["dotdot"].as_str().unwrap().contains("`limits`"), "{mode}: {reads}");
        let protocol = facts["protocol"].as_str().unwrap();
        assert_eq!(protocol == "2026-07-28", mode == "auto", "{mode}: {protocol}");
    }
    shutdown.cancel();
    tokio::time::timeout(HANG_GUARD, serving).await.expect("the front did not stop").unwrap().unwrap();
}
