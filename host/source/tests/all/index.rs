//! The well-known index against a loopback HTTP server started by each test: good archives
//! install byte for byte; a wrong digest, links, absolute paths, `..`, oversized archives
//! and zip bombs are refused, and so are hostile indexes.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use skillhost_core::SkillName;
use skillhost_source::address::IndexAddr;
use skillhost_source::index::{self, PublishedSkill, SCHEMA, WELL_KNOWN};
use skillhost_source::{Artifact, Caps, FetchOptions, Quiet, SignatureStatus, SourceAddr, SourceError};

use crate::loopback::serve;

fn options(caps: Caps) -> FetchOptions {
    FetchOptions { caps, progress: Arc::new(Quiet), verify_keys: Vec::new(), auth: Default::default(), staging: std::env::temp_dir() }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An index entry of an archive at `url` with the digest of `bytes`.
fn entry(name: &str, kind: &str, url: &str, bytes: &[u8]) -> serde_json::Value {
    serde_json::json!({"name": name, "type": kind, "description": format!("The {name} skill."), "url": url, "digest": sha256(bytes)})
}

fn index_json(entries: Vec<serde_json::Value>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"$schema": SCHEMA, "skills": entries})).unwrap()
}

fn addr(base: &str, skill: Option<&str>) -> IndexAddr {
    let text = match skill {
        Some(skill) => format!("{base}/#skill={skill}"),
        None => format!("{base}/"),
    };
    match text.parse::<SourceAddr>().unwrap() {
        SourceAddr::Index(index) => index,
        other => panic!("{other:?}"),
    }
}

const INDEX: &str = "/.well-known/agent-skills/index.json";

/// A site serving `index` and the artifacts `files` (path → bytes).
async fn site(index: Vec<u8>, files: Vec<(&str, Vec<u8>)>) -> String {
    let mut routes: BTreeMap<String, Vec<u8>> = files.into_iter().map(|(p, b)| (p.to_owned(), b)).collect();
    routes.insert(INDEX.to_owned(), index);
    serve(routes).await
}

/// A tar.gz of raw entries: (name bytes, type, link target, contents), the names written
/// into the header as they are (no checks of the tar crate's own).
fn raw_tar_gz(entries: &[(&[u8], tar::EntryType, &str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (name, kind, link, data) in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        if !link.is_empty() {
            header.set_link_name(link).unwrap();
        }
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        zip.start_file(*name, zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated)).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn folder(fetched: &skillhost_source::Fetched) -> &BTreeMap<String, Vec<u8>> {
    match &fetched.artifact {
        Artifact::Folder(files) => files,
        other => panic!("{other:?}"),
    }
}

const SCRIPT: &[u8] = b"#!/bin/sh\r\necho hi\n\x00\xff\xfe";

#[tokio::test]
async fn archives_and_skill_md_install_byte_for_byte() {
    let tgz = raw_tar_gz(&[
        (b"SKILL.md", tar::EntryType::Regular, "", b"---\nname: wrangler\n---\n"),
        (b"scripts/run.sh", tar::EntryType::Regular, "", SCRIPT),
    ]);
    let zipped = zip(&[("SKILL.md", b"zipped"), ("data/x.bin", SCRIPT)]);
    let skill_md = b"---\nname: code-review\n---\nReview.\n".to_vec();
    let index = index_json(vec![
        entry("wrangler", "archive", "/.well-known/agent-skills/wrangler.tar.gz", &tgz),
        entry("zipped", "archive", "zipped.zip", &zipped),
        entry("code-review", "skill-md", "/.well-known/agent-skills/code-review/SKILL.md", &skill_md),
    ]);
    let base = site(
        index,
        vec![
            ("/.well-known/agent-skills/wrangler.tar.gz", tgz.clone()),
            ("/.well-known/agent-skills/zipped.zip", zipped),
            ("/.well-known/agent-skills/code-review/SKILL.md", skill_md.clone()),
        ],
    )
    .await;
    let opts = options(Caps::default());

    let read = index::read(&addr(&base, None), &opts).await.unwrap();
    let names: Vec<&str> = read.skills.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["wrangler", "zipped", "code-review"]);

    let wrangler = addr(&base, Some("wrangler"));
    let fetched = index::fetch(&wrangler, &opts).await.unwrap();
    let expected: BTreeMap<String, Vec<u8>> =
        [("SKILL.md".to_owned(), b"---\nname: wrangler\n---\n".to_vec()), ("scripts/run.sh".to_owned(), SCRIPT.to_vec())].into();
    assert_eq!(folder(&fetched), &expected);
    assert_eq!(fetched.provenance.digest, sha256(&tgz));
    assert_eq!(fetched.provenance.source, wrangler.to_string());
    assert_eq!(fetched.provenance.pinned, wrangler.to_string());
    assert_eq!(fetched.provenance.signature, SignatureStatus::NotChecked);
    assert_eq!(index::resolve(&wrangler, &opts).await.unwrap(), sha256(&tgz));

    let zipped = index::fetch(&addr(&base, Some("zipped")), &opts).await.unwrap();
    assert_eq!(folder(&zipped)["data/x.bin"], SCRIPT);

    let review = index::fetch(&addr(&base, Some("code-review")), &opts).await.unwrap();
    assert_eq!(folder(&review), &BTreeMap::from([("SKILL.md".to_owned(), skill_md)]));

    let err = index::fetch(&addr(&base, Some("absent")), &opts).await.unwrap_err();
    assert!(err.to_string().contains("wrangler, zipped, code-review"), "{err}");
    let err = index::fetch(&addr(&base, None), &opts).await.unwrap_err();
    assert!(err.to_string().contains("#skill=NAME"), "{err}");
}

/// Serve `bytes` as the archive of skill `bad`, with its true digest unless `digest` is
/// given, and fetch it under `caps`.
async fn fetch_hostile(bytes: Vec<u8>, digest: Option<&[u8]>, caps: Caps) -> SourceError {
    let index = index_json(vec![entry("bad", "archive", "bad.tar.gz", digest.unwrap_or(&bytes))]);
    let base = site(index, vec![("/.well-known/agent-skills/bad.tar.gz", bytes)]).await;
    match index::fetch(&addr(&base, Some("bad")), &options(caps)).await {
        Ok(fetched) => panic!("a hostile archive was returned: {:?}", fetched.artifact),
        Err(err) => err,
    }
}

#[tokio::test]
async fn a_wrong_digest_is_refused_before_unpacking() {
    let good = raw_tar_gz(&[(b"SKILL.md", tar::EntryType::Regular, "", b"good")]);
    let swapped = raw_tar_gz(&[(b"SKILL.md", tar::EntryType::Regular, "", b"evil")]);
    let err = fetch_hostile(swapped.clone(), Some(&good), Caps::default()).await;
    match &err {
        SourceError::Digest { expected, actual, .. } => {
            assert_eq!(expected, &sha256(&good));
            assert_eq!(actual, &sha256(&swapped));
        }
        other => panic!("{other}"),
    }
    // Not even a damaged archive is looked at when its digest is wrong.
    let err = fetch_hostile(b"not an archive".to_vec(), Some(&good), Caps::default()).await;
    assert!(matches!(err, SourceError::Digest { .. }), "{err}");
}

#[tokio::test]
async fn hostile_archives_are_refused() {
    let skill = (&b"SKILL.md"[..], tar::EntryType::Regular, "", &b"s"[..]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a symlink", raw_tar_gz(&[skill, (b"passwd", tar::EntryType::Symlink, "/etc/passwd", b"")]), "symbolic link"),
        ("a hard link", raw_tar_gz(&[skill, (b"passwd", tar::EntryType::Link, "/etc/passwd", b"")]), "hard link"),
        ("an absolute path", raw_tar_gz(&[skill, (b"/etc/cron.d/x", tar::EntryType::Regular, "", b"x")]), "absolute path"),
        ("a `..` entry", raw_tar_gz(&[skill, (b"../../.bashrc", tar::EntryType::Regular, "", b"x")]), "`..`"),
        ("a `..` inside", raw_tar_gz(&[skill, (b"a/../../x", tar::EntryType::Regular, "", b"x")]), "`..`"),
        ("a zip `..`", zip(&[("SKILL.md", b"s"), ("../x", b"x")]), "`..`"),
    ];
    for (case, bytes, said) in cases {
        let err = fetch_hostile(bytes, None, Caps::default()).await;
        assert!(matches!(err, SourceError::Archive { .. }), "{case}: {err}");
        assert!(err.to_string().contains(said), "{case}: {err}");
    }
}

#[tokio::test]
async fn oversized_archives_and_bombs_are_refused() {
    let big = raw_tar_gz(&[(b"SKILL.md", tar::EntryType::Regular, "", &[b'x'; 5000])]);
    let download = big.len() as u64 - 1;
    let err = fetch_hostile(big, None, Caps { download, ..Caps::default() }).await;
    assert!(matches!(err, SourceError::TooLarge { limit, .. } if limit == download), "{err}");

    // 20 MiB of zeros deflate to some kilobytes: the unpacking stops at the cap.
    let bomb = zip(&[("SKILL.md", b"s"), ("zeros", &vec![0u8; 20 << 20])]);
    assert!(bomb.len() < 100_000, "{}", bomb.len());
    let err = fetch_hostile(bomb, None, Caps { unpacked: 1 << 20, ..Caps::default() }).await;
    assert!(matches!(err, SourceError::TooLarge { limit, .. } if limit == 1 << 20), "{err}");

    let many: Vec<(String, Vec<u8>)> = (0..20).map(|i| (format!("f{i}"), vec![b'x'])).collect();
    let many: Vec<(&[u8], tar::EntryType, &str, &[u8])> =
        many.iter().map(|(n, d)| (n.as_bytes(), tar::EntryType::Regular, "", d.as_slice())).collect();
    let err = fetch_hostile(raw_tar_gz(&many), None, Caps { files: 10, ..Caps::default() }).await;
    assert!(err.to_string().contains("more than 10 entries"), "{err}");
}

#[tokio::test]
async fn hostile_indexes_are_refused() {
    let legacy = serde_json::to_vec(&serde_json::json!({"skills": [{"name": "a1", "description": "d", "files": ["SKILL.md"]}]})).unwrap();
    let base = site(legacy, vec![]).await;
    let err = index::read(&addr(&base, None), &options(Caps::default())).await.unwrap_err();
    assert!(matches!(err, SourceError::Index { .. }) && err.to_string().contains("0.2.0"), "{err}");

    let unknown = serde_json::to_vec(&serde_json::json!({"$schema": "https://example.com/mine.json", "skills": []})).unwrap();
    let base = site(unknown, vec![]).await;
    let err = index::fetch(&addr(&base, Some("a1")), &options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("is not one this host reads"), "{err}");

    let escape = index_json(vec![entry("../escape", "archive", "x.tar.gz", b"x")]);
    let base = site(escape, vec![]).await;
    let err = index::fetch(&addr(&base, Some("a1")), &options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("\"../escape\" is not a plain skill name"), "{err}");

    let large = [b"{\"$schema\":\"", SCHEMA.as_bytes(), b"\",\"skills\":[]", &vec![b' '; 1 << 20], b"}"].concat();
    let base = site(large, vec![]).await;
    let err = index::read(&addr(&base, None), &options(Caps::default())).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { limit, .. } if limit == 1 << 20), "{err}");

    let base = serve(BTreeMap::new()).await;
    let err = index::read(&addr(&base, None), &options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");

    // A remote index naming a file on the reader's own disk, with its true digest.
    let local = tempfile::tempdir().unwrap();
    let secret = local.path().join("SKILL.md");
    std::fs::write(&secret, b"---\nname: a1\ndescription: mine.\n---\nprivate\n").unwrap();
    let url = format!("file://{}", secret.display());
    let reach = index_json(vec![entry("a1", "skill-md", &url, &std::fs::read(&secret).unwrap())]);
    let base = site(reach, vec![]).await;
    let err = index::fetch(&addr(&base, Some("a1")), &options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("is not an https:// download"), "a remote index reads no local file: {err}");
}

#[tokio::test]
async fn a_published_index_is_fetched_back() {
    let skill = |name: &str, files: &[(&str, &[u8])]| PublishedSkill {
        name: SkillName::new(name).unwrap(),
        description: format!("The {name} skill."),
        files: files.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect(),
    };
    let skills = [skill("wrangler", &[("SKILL.md", b"w"), ("scripts/run.sh", SCRIPT)]), skill("code-review", &[("SKILL.md", b"r")])];
    let published = index::publish(&skills).unwrap();
    let mut routes: BTreeMap<String, Vec<u8>> =
        published.artifacts.iter().map(|(file, bytes)| (format!("{WELL_KNOWN}{file}"), bytes.clone())).collect();
    routes.insert(INDEX.to_owned(), published.index_json.clone());
    let base = serve(routes).await;
    for skill in &skills {
        let fetched = index::fetch(&addr(&base, Some(skill.name.as_str())), &options(Caps::default())).await.unwrap();
        assert_eq!(folder(&fetched), &skill.files, "{}", skill.name);
    }
}

#[tokio::test]
async fn a_local_index_reads_its_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let tgz = raw_tar_gz(&[(b"SKILL.md", tar::EntryType::Regular, "", b"local")]);
    std::fs::write(dir.path().join("local.tar.gz"), &tgz).unwrap();
    std::fs::write(dir.path().join("index.json"), index_json(vec![entry("local", "archive", "local.tar.gz", &tgz)])).unwrap();
    let text = format!("file://{}/index.json#skill=local", dir.path().display());
    let SourceAddr::Index(local) = text.parse().unwrap() else { panic!("{text}") };
    let fetched = index::fetch(&local, &options(Caps::default())).await.unwrap();
    assert_eq!(folder(&fetched)["SKILL.md"], b"local");
}

/// An index on `site` listing skill `a1`, an archive at `url`, with the digest of `bytes`.
fn one_entry(url: &str, bytes: &[u8]) -> Vec<u8> {
    index_json(vec![entry("a1", "archive", url, bytes)])
}

fn archive() -> Vec<u8> {
    raw_tar_gz(&[(b"SKILL.md", tar::EntryType::Regular, "", b"---\nname: a1\n---\n")])
}

#[tokio::test]
async fn an_endless_index_is_cut_at_its_cap() {
    let prefix = [b"{\"$schema\":\"", SCHEMA.as_bytes(), b"\",\"skills\":["].concat();
    let site = crate::hostile::serve(move |seen| match seen.path.as_str() {
        INDEX => crate::hostile::Answer::Endless { prefix: prefix.clone(), stop: 128 << 20 },
        _ => crate::hostile::Answer::not_found(),
    })
    .await;
    let err = index::read(&addr(&site.base, None), &options(Caps::default())).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { limit, .. } if limit == index::MAX_INDEX_BYTES), "{err}");
    assert!(site.hung_up().await, "the client closed the connection before the server was done");
    assert!(site.sent() < 32 << 20, "the server wrote {} bytes of the index", site.sent());

    // An index that says it is 2 GiB is refused before a byte of it is read.
    let site = crate::hostile::serve(|_| crate::hostile::Answer::Claims { claimed: 2 << 30, prefix: Vec::new(), stop: 64 << 20 }).await;
    let err = index::read(&addr(&site.base, None), &options(Caps::default())).await.unwrap_err();
    assert!(err.to_string().contains("2147483648"), "{err}");
    assert!(site.hung_up().await);
    assert!(site.sent() < 32 << 20, "the server wrote {} bytes of the index", site.sent());
}

/// A second loopback service serving the archive of `a1` at `/a1.tar.gz`, on `ip`.
async fn elsewhere(ip: &str) -> crate::hostile::Hostile {
    let bytes = archive();
    crate::hostile::serve_on(ip, move |seen| match seen.path.as_str() {
        "/a1.tar.gz" => crate::hostile::Answer::ok(bytes.clone()),
        _ => crate::hostile::Answer::not_found(),
    })
    .await
}

/// An index site whose archive path answers with a redirect to `location(own base)`.
async fn redirecting(location: impl Fn(&str) -> String + Send + Sync + 'static) -> crate::hostile::Hostile {
    let bytes = archive();
    let index = one_entry("/.well-known/agent-skills/a1.tar.gz", &bytes);
    let base = Arc::new(std::sync::OnceLock::<String>::new());
    let own = base.clone();
    let site = crate::hostile::serve(move |seen| match seen.path.as_str() {
        INDEX => crate::hostile::Answer::ok(index.clone()),
        "/.well-known/agent-skills/a1.tar.gz" => crate::hostile::Answer::redirect(302, &location(own.get().unwrap())),
        "/moved/a1.tar.gz" => crate::hostile::Answer::ok(bytes.clone()),
        _ => crate::hostile::Answer::not_found(),
    })
    .await;
    base.set(site.base.clone()).unwrap();
    site
}

#[tokio::test]
async fn a_redirect_to_another_host_is_refused() {
    // Same host (scheme, host and port): followed.
    let site = redirecting(|base| format!("{base}/moved/a1.tar.gz")).await;
    let fetched = index::fetch(&addr(&site.base, Some("a1")), &options(Caps::default())).await.unwrap();
    assert!(folder(&fetched).contains_key("SKILL.md"));

    // Another port, another loopback address, another name for the same address.
    let other = elsewhere("127.0.0.1").await;
    let second = elsewhere("127.0.0.2").await;
    let cases = [format!("{}/a1.tar.gz", other.base), format!("{}/a1.tar.gz", second.base)];
    for target in cases {
        let to = target.clone();
        let site = redirecting(move |_| to.clone()).await;
        let err = index::fetch(&addr(&site.base, Some("a1")), &options(Caps::default())).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, SourceError::Refused { .. }), "{text}");
        assert!(text.contains(&target) && text.contains("redirect") && text.contains("allow_hosts"), "{text}");
    }
    let site = redirecting(|base| format!("{}/moved/a1.tar.gz", base.replace("127.0.0.1", "localhost"))).await;
    let err = index::fetch(&addr(&site.base, Some("a1")), &options(Caps::default())).await.unwrap_err();
    assert!(matches!(err, SourceError::Refused { .. }), "{err}");
    assert!(other.seen().is_empty() && second.seen().is_empty(), "another service was asked");

    // Allowed by the config: followed.
    let to = format!("{}/a1.tar.gz", other.base);
    let site = redirecting(move |_| to.clone()).await;
    let caps = Caps { allow_hosts: vec![skillhost_core::egress::Rule::parse(&other.base).unwrap()], ..Caps::default() };
    let fetched = index::fetch(&addr(&site.base, Some("a1")), &options(caps)).await.unwrap();
    assert!(folder(&fetched).contains_key("SKILL.md"));
}

#[tokio::test]
async fn an_entry_on_another_loopback_service_is_refused() {
    let other = elsewhere("127.0.0.1").await;
    let url = format!("{}/a1.tar.gz", other.base);
    let base = site(one_entry(&url, &archive()), vec![]).await;
    let err = index::fetch(&addr(&base, Some("a1")), &options(Caps::default())).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SourceError::Refused { .. }), "{text}");
    assert!(text.contains(&url) && text.contains("allow_hosts"), "{text}");
    assert!(other.seen().is_empty(), "the other service was asked: {:?}", other.seen());

    let caps = Caps { allow_hosts: vec![skillhost_core::egress::Rule::parse(&other.base).unwrap()], ..Caps::default() };
    let fetched = index::fetch(&addr(&base, Some("a1")), &options(caps)).await.unwrap();
    assert!(folder(&fetched).contains_key("SKILL.md"));
}
