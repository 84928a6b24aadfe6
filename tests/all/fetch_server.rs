//! The PyPI `mcp-server-fetch` as a sandboxed `[server]` skill under a 512 MiB resident
//! memory limit, in its default (readability) mode: the server hands the page to
//! readabilipy, which runs Mozilla's Readability.js under `node` (bound read-only from
//! /usr) with the npm packages `scripts/setup.sh` installed into the venv. The page comes
//! from a local HTTP server through the host's egress proxy.
//!
//! Readability is what drops a page's sidebar and footer; readabilipy's pure-Python
//! fallback (taken when node or its packages cannot be used) keeps them. So the junk being
//! gone is the proof that node ran inside the sandbox, not the fallback.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fixtures::python;
use serde_json::{Value, json};
use skillhost::Host;

use crate::{HANG_GUARD, ok};

/// An article page with the furniture readability exists to strip.
const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>The Lighthouse Keepers of Skerryvore</title></head>
<body>
<header><nav class="site-nav"><ul><li><a href="/">Home</a></li><li><a href="/subscribe">NAVJUNK Subscribe now</a></li><li><a href="/login">Log in</a></li></ul></nav></header>
<div class="sidebar"><p>SIDEBARJUNK Trending: ten weird tricks for faster websites, shared ten thousand times.</p></div>
<main>
<article>
<h1>The Lighthouse Keepers of Skerryvore</h1>
<p class="byline">By Morag Stevenson</p>
<p>Skerryvore lighthouse stands on a reef eleven miles south-west of Tiree, and for more than a century three keepers lived in its tower at a time, rotating ashore every few weeks when the weather allowed a boat to land.</p>
<p>The tower was completed in 1844 by Alan Stevenson, who built it from granite quarried on Mull and dressed on Hynish, where a signal tower still stands that once let the keepers' families watch for a flag raised on the gallery.</p>
<p>Keepers kept the lamp lit from sunset to sunrise, wound the clockwork that turned the lens every half hour through the night, and recorded the weather in a log that meteorologists still consult for the nineteenth century's storms.</p>
<p>In 1954 a fire gutted the tower and the light went dark for five years; when it returned, it was electric, and in 1994 the last keepers left the rock for good, the light automated and watched from Edinburgh.</p>
</article>
</main>
<footer class="site-footer"><p>FOOTERJUNK Copyright 2026 Example Media. All rights reserved. Privacy policy. Cookie settings.</p></footer>
</body></html>
"#;

/// Serve `PAGE` as text/html to every request on 127.0.0.1; the port and a request count.
fn serve_page() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            count.fetch_add(1, Ordering::SeqCst);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                PAGE.len()
            );
            let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(PAGE.as_bytes()));
        }
    });
    (port, hits)
}

/// The text of a tool's output (a plain string result, or the JSON of anything else).
fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// The memory cgroup of the running server (skill `name`, this host's pid), if any.
fn memory_cgroup(name: &str) -> Option<PathBuf> {
    fn walk(dir: &Path, prefix: &str, depth: usize) -> Option<PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                if path.join("memory.max_usage_in_bytes").is_file() || path.join("memory.peak").is_file() {
                    return Some(path);
                }
                continue;
            }
            if depth > 0
                && let Some(found) = walk(&path, prefix, depth - 1)
            {
                return Some(found);
            }
        }
        None
    }
    walk(Path::new("/sys/fs/cgroup"), &format!("{name}-{}-", std::process::id()), 5)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_fetch_runs_readability_under_node_in_512_mib() {
    use std::os::unix::fs::PermissionsExt;
    let venv = python::venv();
    let jsdir = std::fs::read_dir(venv.join("lib"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|py| py.path().join("site-packages/readabilipy/javascript"));
    assert!(
        venv.join("bin/mcp-server-fetch").is_file(),
        "mcp-server-fetch is not in the test venv {}; run scripts/setup.sh",
        venv.display()
    );
    assert!(
        jsdir.as_ref().is_some_and(|d| d.join("node_modules/@mozilla/readability").is_dir()),
        "readabilipy's Readability.js packages are not installed in {jsdir:?} (scripts/setup.sh runs `npm install` there; it needs npm)"
    );

    let (port, hits) = serve_page();
    let data = tempfile::tempdir().unwrap();
    // The sandbox's uid (on a root host) passes through the data dir, as under /var/lib.
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let skills = tempfile::tempdir().unwrap();
    let mut config = python::sandbox_config(data.path());
    config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
    let host = Host::builder().data_dir(data.path()).cache_dir(data.path().join("compiled")).sandbox_config(config).build().unwrap();
    assert!(host.sandbox().is_ok(), "no sandbox runtime: {:?}; run scripts/setup.sh", host.sandbox().err());

    // The host's egress gate decides what it reaches; the server's own refusal of
    // loopback addresses is switched off so that the gate is what is tested.
    let load = |name: &'static str, server: &'static str| {
        let dir = skills.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("skill.toml"),
            format!(
                "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"Fetches web pages as markdown (mcp-server-fetch from PyPI)\"\n\n\
                 [server]\n{server}\n\n[limits]\nmemory = \"512MiB\"\ntimeout = \"60s\"\n\n\
                 [network]\nallow = [\"http://127.0.0.1:{port}\"]\n"
            ),
        )
        .unwrap();
        let host = &host;
        async move {
            tokio::time::timeout(HANG_GUARD, host.load_path_granted(&dir))
                .await
                .expect("load hung")
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    };
    let skill = load("fetch-server", "command = \"mcp-server-fetch\"\nargs = [\"--ignore-robots-txt\", \"--allow-private-ips\"]").await;
    assert_eq!(skill.runtime(), "bwrap");
    assert!(skill.skill.tools().iter().any(|t| t.name == "fetch"), "{:?}", skill.skill.tools());

    let url = format!("http://127.0.0.1:{port}/lighthouse");
    let started = Instant::now();
    let simplified = text(&ok(&skill, "fetch", json!({"url": url})).await);
    let took = started.elapsed();
    for paragraph in [
        "Skerryvore lighthouse stands on a reef",
        "completed in 1844 by Alan Stevenson",
        "recorded the weather in a log",
        "the last keepers left the rock",
    ] {
        assert!(simplified.contains(paragraph), "the article's paragraph {paragraph:?} is missing:\n{simplified}");
    }
    // Readability's work: the sidebar and footer are gone (readabilipy's fallback keeps both).
    for junk in ["NAVJUNK", "SIDEBARJUNK", "FOOTERJUNK"] {
        assert!(!simplified.contains(junk), "{junk} survived: the page was not simplified by Readability.js under node:\n{simplified}");
    }
    for tag in ["<p", "<article", "<div", "</"] {
        assert!(!simplified.contains(tag), "HTML ({tag}) in the markdown:\n{simplified}");
    }

    let raw = text(&ok(&skill, "fetch", json!({"url": url, "raw": true})).await);
    for tag in ["<article>", "<p>Skerryvore", "FOOTERJUNK", "<nav class=\"site-nav\">"] {
        assert!(raw.contains(tag), "`raw: true` lacks {tag:?}:\n{raw}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 2, "each call fetched the page once, through the proxy");

    // Where the host can make cgroups (root), the server ran under the declared limit.
    let read = |cg: &Path, v2: &str, v1: &str| {
        let file = if cg.join(v2).is_file() { v2 } else { v1 };
        std::fs::read_to_string(cg.join(file)).ok()?.trim().parse::<u64>().ok()
    };
    let cgroup = memory_cgroup("fetch-server");
    if let Some(cg) = &cgroup {
        assert_eq!(
            read(cg, "memory.max", "memory.limit_in_bytes"),
            Some(512 << 20),
            "the server's cgroup {} is not limited to 512 MiB",
            cg.display()
        );
    }
    let peak = cgroup.and_then(|cg| read(&cg, "memory.peak", "memory.max_usage_in_bytes"));

    // The control: the same server with node off its PATH takes readabilipy's pure-Python
    // fallback, which keeps the sidebar and footer. So their absence above was node's work.
    let fallback = load(
        "fetch-no-node",
        "command = \"python\"\nargs = [\"-c\", \"import os, sys; os.environ['PATH'] = os.path.dirname(sys.executable); from mcp_server_fetch import main; main()\", \"--ignore-robots-txt\", \"--allow-private-ips\"]",
    )
    .await;
    let kept = text(&ok(&fallback, "fetch", json!({"url": url})).await);
    assert!(kept.contains("Skerryvore lighthouse stands on a reef"), "{kept}");
    assert!(kept.contains("SIDEBARJUNK") && kept.contains("FOOTERJUNK"), "without node the fallback keeps the junk:\n{kept}");
    eprintln!(
        "mcp-server-fetch (readability under node): first call {} ms; server cgroup peak {}",
        took.as_millis(),
        peak.map_or("unavailable (no cgroup here)".to_owned(), |b| format!("{} MiB of 512 MiB", b >> 20))
    );
}
