//! Git sources against bare repositories the tests make with the git CLI, fetched over
//! `file://`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fixtures::git::GitRepo;
use skillhost_source::address::GitAddr;
use skillhost_source::{Artifact, Caps, FetchOptions, Quiet, SignatureStatus, SourceAddr, SourceError, git};

/// A repository of the tests (work tree and bare remote) and the staging folder fetches use.
struct Repo {
    repo: GitRepo,
    work: PathBuf,
    bare: PathBuf,
    staging: PathBuf,
}

fn run(dir: &Path, args: &[&str]) -> String {
    fixtures::git::git(dir, args)
}

impl Repo {
    fn new() -> Self {
        let repo = GitRepo::new();
        let staging = repo.dir().join("staging");
        Self { work: repo.work.clone(), bare: repo.bare.clone(), staging, repo }
    }

    /// Write `files` into the work tree, commit them all and push; the commit id.
    fn commit(&self, files: &[(&str, &[u8])]) -> String {
        self.repo.commit(files)
    }

    fn addr(&self, path: &str, rev: &str) -> GitAddr {
        let mut text = format!("git+file://{}#rev={rev}", self.bare.display());
        if !path.is_empty() {
            text.push_str(&format!("&path={path}"));
        }
        match text.parse::<SourceAddr>().unwrap() {
            SourceAddr::Git(git) => git,
            other => panic!("{other:?}"),
        }
    }

    fn options(&self, caps: Caps) -> FetchOptions {
        FetchOptions { caps, progress: Arc::new(Quiet), verify_keys: Vec::new(), auth: Default::default(), staging: self.staging.clone() }
    }

    /// Nothing is left in the staging directory.
    fn assert_staging_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(&self.staging).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
        assert!(left.is_empty(), "left in staging: {left:?}");
    }
}

fn folder(fetched: &skillhost_source::Fetched) -> &BTreeMap<String, Vec<u8>> {
    match &fetched.artifact {
        Artifact::Folder(files) => files,
        other => panic!("{other:?}"),
    }
}

fn files(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect()
}

#[tokio::test]
async fn installs_the_files_of_a_commit_exactly() {
    let repo = Repo::new();
    let script: &[u8] = b"#!/bin/sh\r\necho $Format:%H$\r\n\x00\xff";
    // In-tree attributes that would change what `git archive` writes (drop a file, rewrite
    // placeholders, convert line ends) are overridden: the bytes are the commit's blobs.
    let attributes: &[u8] = b"*.sh export-subst eol=crlf\nnotes.txt export-ignore\n";
    let commit = repo.commit(&[
        ("SKILL.md", b"---\nname: hello\n---\n"),
        ("scripts/run.sh", script),
        ("notes.txt", b"n"),
        (".gitattributes", attributes),
    ]);
    let blob = |path: &str| {
        std::process::Command::new("git")
            .current_dir(&repo.work)
            .args(["cat-file", "blob", &format!("{commit}:{path}")])
            .output()
            .unwrap()
            .stdout
    };
    let stored = blob("scripts/run.sh");
    // Stored with plain line ends, which `eol=crlf` would turn into CRLF on the way out.
    assert!(!stored.windows(2).any(|w| w == b"\r\n") && stored.windows(8).any(|w| w == b"$Format:"), "{stored:?}");
    let addr = repo.addr("", "main");
    let fetched = git::fetch(&addr, &repo.options(Caps::default())).await.unwrap();
    let expected: BTreeMap<String, Vec<u8>> =
        [("SKILL.md".to_owned(), blob("SKILL.md")), ("notes.txt".to_owned(), blob("notes.txt")), ("scripts/run.sh".to_owned(), stored)]
            .into();
    assert_eq!(folder(&fetched), &expected);
    assert_eq!(fetched.provenance.digest, commit);
    assert_eq!(fetched.provenance.source, addr.to_string());
    assert_eq!(fetched.provenance.pinned, format!("git+file://{}#rev={commit}", repo.bare.display()));
    assert_eq!(fetched.provenance.signature, SignatureStatus::NotChecked);
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_pinned_commit_keeps_its_bytes_when_the_branch_moves() {
    let repo = Repo::new();
    let old = repo.commit(&[("SKILL.md", b"old")]);
    let options = repo.options(Caps::default());
    assert_eq!(git::resolve(&repo.addr("", "main"), &options).await.unwrap(), old);
    let new = repo.commit(&[("SKILL.md", b"new")]);
    assert_ne!(old, new);

    let pinned = git::fetch(&repo.addr("", &old), &options).await.unwrap();
    assert_eq!(folder(&pinned), &files(&[("SKILL.md", b"old")]));
    assert_eq!(pinned.provenance.digest, old);
    assert_eq!(git::resolve(&repo.addr("", "main"), &options).await.unwrap(), new);
    assert_eq!(git::resolve(&repo.addr("", "HEAD"), &options).await.unwrap(), new);
    // A full commit id is itself, without asking the remote.
    let gone = repo.addr("", &old);
    let gone = GitAddr { url: "file:///nonexistent/repo.git".into(), ..gone };
    assert_eq!(git::resolve(&gone, &options).await.unwrap(), old);

    let moved = git::fetch(&repo.addr("", "main"), &options).await.unwrap();
    assert_eq!(folder(&moved), &files(&[("SKILL.md", b"new")]));
    assert_eq!(moved.provenance.digest, new);
    // An annotated tag resolves to its commit, as the fetch sees it; an abbreviated commit
    // to the full one.
    run(&repo.work, &["tag", "-a", "v1", "-m", "v1", &old]);
    run(&repo.work, &["push", "-q", repo.bare.to_str().unwrap(), "v1"]);
    assert_eq!(git::resolve(&repo.addr("", "v1"), &options).await.unwrap(), old);
    assert_eq!(git::fetch(&repo.addr("", "v1"), &options).await.unwrap().provenance.digest, old);
    assert_eq!(git::resolve(&repo.addr("", &old[..12]), &options).await.unwrap(), old);
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_subfolder_is_the_skill() {
    let repo = Repo::new();
    repo.commit(&[("README.md", b"top"), ("skills/a/SKILL.md", b"a"), ("skills/a/lib/x.py", b"x"), ("skills/b/SKILL.md", b"b")]);
    let options = repo.options(Caps::default());
    let fetched = git::fetch(&repo.addr("skills/a", "main"), &options).await.unwrap();
    assert_eq!(folder(&fetched), &files(&[("SKILL.md", b"a"), ("lib/x.py", b"x")]));
    assert!(fetched.provenance.pinned.contains("path=skills/a&rev="), "{}", fetched.provenance.pinned);

    let err = git::fetch(&repo.addr("skills/nope", "main"), &options).await.unwrap_err();
    assert!(err.to_string().contains("path=skills/nope is not a folder"), "{err}");
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_symlink_in_the_tree_is_refused() {
    let repo = Repo::new();
    std::os::unix::fs::symlink("/etc/passwd", repo.work.join("passwd")).unwrap();
    repo.commit(&[("SKILL.md", b"s")]);
    let err = git::fetch(&repo.addr("", "main"), &repo.options(Caps::default())).await.unwrap_err();
    assert!(matches!(&err, SourceError::Archive { entry, .. } if entry == "passwd"), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_missing_rev_is_refused_clearly() {
    let repo = Repo::new();
    repo.commit(&[("SKILL.md", b"s")]);
    let options = repo.options(Caps::default());
    let err = git::fetch(&repo.addr("", "no-such-branch"), &options).await.unwrap_err();
    assert!(matches!(err, SourceError::Git { .. }), "{err}");
    assert!(err.to_string().contains("rev `no-such-branch` names no commit"), "{err}");
    let err = git::resolve(&repo.addr("", "no-such-branch"), &options).await.unwrap_err();
    assert!(err.to_string().contains("names no commit"), "{err}");
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_missing_repository_and_caps_are_refused() {
    let repo = Repo::new();
    repo.commit(&[("SKILL.md", b"s"), ("big.bin", &vec![7u8; 300_000])]);
    let missing = GitAddr { url: format!("file://{}/nope.git", repo.work.display()), ..repo.addr("", "main") };
    let err = git::fetch(&missing, &repo.options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("git clone failed"), "{err}");
    repo.assert_staging_empty();

    let small = Caps { download: 1000, ..Caps::default() };
    let err = git::fetch(&repo.addr("", "main"), &repo.options(small)).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { limit: 1000, .. }), "{err}");
    repo.assert_staging_empty();

    let unpacked = Caps { unpacked: 1000, ..Caps::default() };
    let err = git::fetch(&repo.addr("", "main"), &repo.options(unpacked)).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { limit: 1000, .. }), "{err}");
    repo.assert_staging_empty();
}

#[tokio::test]
async fn a_silent_server_is_stopped_at_the_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and never answers.
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let repo = Repo::new();
    let addr = match format!("git+http://127.0.0.1:{port}/r.git#rev=main").parse::<SourceAddr>().unwrap() {
        SourceAddr::Git(git) => git,
        other => panic!("{other:?}"),
    };
    let options = repo.options(Caps { timeout: std::time::Duration::from_secs(2), ..Caps::default() });
    let started = std::time::Instant::now();
    let err = git::fetch(&addr, &options).await.unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let err = git::resolve(&addr, &options).await.unwrap_err();
    assert!(err.to_string().contains("git ls-remote timed out"), "{err}");
    repo.assert_staging_empty();
    hold.abort();
}

#[tokio::test]
async fn a_clone_past_the_cap_is_stopped_while_it_is_written() {
    // 8 MiB that do not compress, served over git's plain ("dumb") HTTP protocol by a slow
    // loopback server: the clone writes the object into the staging folder as it arrives.
    let repo = Repo::new();
    let mut noise = vec![0u8; 8 << 20];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for byte in noise.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    repo.commit(&[("SKILL.md", b"---\nname: big\ndescription: Big.\n---\n"), ("noise.bin", &noise)]);
    run(&repo.bare, &["update-server-info"]);
    let mut routes = BTreeMap::new();
    let mut pending = vec![repo.bare.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(&repo.bare).unwrap().display().to_string();
                routes.insert(format!("/r.git/{relative}"), std::fs::read(&path).unwrap());
            }
        }
    }
    let total: u64 = routes.values().map(|b| b.len() as u64).sum();
    let site = crate::loopback::serve_with(routes, Some(std::time::Duration::from_millis(20))).await;
    let addr = match format!("git+{}/r.git#rev=main", site.base).parse::<SourceAddr>().unwrap() {
        SourceAddr::Git(git) => git,
        other => panic!("{other:?}"),
    };
    let cap = 1 << 20;
    let err = git::fetch(&addr, &repo.options(Caps { download: cap, ..Caps::default() })).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { limit, .. } if limit == cap), "{err}");
    let sent = site.sent.load(std::sync::atomic::Ordering::Relaxed);
    // Stopped near the cap: the server never had to send the rest of the repository.
    assert!(sent < total / 2, "the clone ran to {sent} of {total} bytes before it was stopped");
    repo.assert_staging_empty();
}
