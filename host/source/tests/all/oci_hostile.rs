//! Hostile registries: a loopback stand-in (tests/all/hostile.rs) that answers a manifest
//! with a 2 GiB Content-Length or an endless body, sends the token request or a blob to
//! another service, and one that does the token dance properly.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use skillhost_source::address::{OciAddr, OciRef};
use skillhost_source::oci::{self, SKILL_ARTIFACT_TYPE, SKILL_LAYER_MEDIA_TYPE};
use skillhost_source::{Artifact, Caps, FetchOptions, Quiet, SourceError};

use crate::hostile::{Answer, Hostile, Seen, serve, serve_on};

/// The manifest cap: OCI's recommended largest manifest.
const MANIFEST_CAP: u64 = 4 << 20;

/// Bytes a hostile server may have written into the loopback socket buffers (both sides)
/// before a client that stopped reading hangs up: far under what it would have sent.
const BUFFERED: u64 = 32 << 20;

fn options() -> FetchOptions {
    FetchOptions {
        caps: Caps::default(),
        progress: Arc::new(Quiet),
        verify_keys: Vec::new(),
        auth: Default::default(),
        staging: std::env::temp_dir(),
    }
}

fn addr(site: &Hostile, repository: &str) -> OciAddr {
    OciAddr { registry: site.host.clone(), repository: repository.to_owned(), reference: OciRef::Tag("1".into()) }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn files() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([("SKILL.md".to_owned(), b"---\nname: hello\ndescription: Says hello.\n---\n".to_vec())])
}

/// A skill folder artifact as a registry serves it: its manifest and its blobs by digest.
fn artifact() -> (Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let config = b"{}".to_vec();
    let layer = skillhost_source::archive::pack_tar_gz(&files());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": SKILL_ARTIFACT_TYPE,
        "config": {"mediaType": SKILL_ARTIFACT_TYPE, "digest": sha256(&config), "size": config.len()},
        "layers": [{"mediaType": SKILL_LAYER_MEDIA_TYPE, "digest": sha256(&layer), "size": layer.len()}],
    });
    let blobs = BTreeMap::from([(sha256(&config), config), (sha256(&layer), layer)]);
    (serde_json::to_vec(&manifest).unwrap(), blobs)
}

/// The blob a path of `/v2/REPO/blobs/DIGEST` asks for, if `blobs` has it.
fn blob<'a>(seen: &Seen, blobs: &'a BTreeMap<String, Vec<u8>>) -> Option<&'a Vec<u8>> {
    let digest = seen.path.rsplit_once("/blobs/")?.1;
    blobs.get(digest)
}

#[tokio::test]
async fn a_manifest_claiming_2_gib_is_refused_before_it_is_read() {
    let site = serve(|seen| match seen.path.as_str() {
        "/v2/" => Answer::ok("{}"),
        p if p.contains("/manifests/") => Answer::Claims { claimed: 2 << 30, prefix: Vec::new(), stop: 64 << 20 },
        _ => Answer::not_found(),
    })
    .await;
    let error = oci::pull(&addr(&site, "skills/huge"), &options()).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: MANIFEST_CAP, .. }), "{error}");
    let text = error.to_string();
    assert!(text.contains("2147483648") && text.contains("the manifest"), "{text}");
    assert!(site.hung_up().await, "the client closed the connection before the server was done");
    assert!(site.sent() < BUFFERED, "the server wrote {} bytes of the manifest", site.sent());
}

#[tokio::test]
async fn a_resolve_without_a_digest_header_reads_a_capped_manifest() {
    // The HEAD names no digest, so the manifest is read to hash it: under the same cap.
    let site = serve(|seen| match (seen.method.as_str(), seen.path.as_str()) {
        (_, "/v2/") => Answer::ok("{}"),
        ("HEAD", p) if p.contains("/manifests/") => Answer::ok(Vec::new()),
        (_, p) if p.contains("/manifests/") => Answer::Endless { prefix: b"{".to_vec(), stop: 128 << 20 },
        _ => Answer::not_found(),
    })
    .await;
    let error = oci::resolve(&addr(&site, "skills/endless"), &options()).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: MANIFEST_CAP, .. }), "{error}");
    assert!(site.hung_up().await);
    assert!(site.sent() < BUFFERED, "the server wrote {} bytes of the manifest", site.sent());
}

#[tokio::test]
async fn an_endless_manifest_is_cut_at_the_cap() {
    let site = serve(|seen| match seen.path.as_str() {
        "/v2/" => Answer::ok("{}"),
        p if p.contains("/manifests/") => Answer::Endless { prefix: b"{\"schemaVersion\":2,".to_vec(), stop: 128 << 20 },
        _ => Answer::not_found(),
    })
    .await;
    let error = oci::pull(&addr(&site, "skills/endless"), &options()).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: MANIFEST_CAP, .. }), "{error}");
    assert!(site.hung_up().await, "the client closed the connection before the server was done");
    assert!(site.sent() < BUFFERED, "the server wrote {} bytes of the manifest", site.sent());
}

#[tokio::test]
async fn a_token_service_on_another_host_is_not_asked() {
    let tokens = serve(|_| Answer::ok(r#"{"token":"t"}"#)).await;
    let realm = format!("Bearer realm=\"{}/token\",service=\"registry\"", tokens.base);
    let site = serve(move |seen| match seen.header("authorization") {
        Some("Bearer t") => Answer::not_found(),
        _ => Answer::status(401, &[("WWW-Authenticate", &realm)]),
    })
    .await;
    let mut options = options();
    options.auth.insert(&site.host, "alice", "secret");
    let error = oci::pull(&addr(&site, "skills/x"), &options).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, SourceError::Refused { .. }), "{text}");
    assert!(text.contains(&format!("{}/token", tokens.base)) && text.contains("allow_hosts"), "{text}");
    assert!(tokens.seen().is_empty(), "the token service on another port was asked: {:?}", tokens.seen());
}

#[tokio::test]
async fn a_blob_redirected_to_another_host_is_refused() {
    let (manifest, blobs) = artifact();
    let other_blobs = blobs.clone();
    let elsewhere = serve_on("127.0.0.2", move |seen| match blob(seen, &other_blobs) {
        Some(bytes) => Answer::ok(bytes.clone()),
        None => Answer::not_found(),
    })
    .await;
    let target = elsewhere.base.clone();
    let site = serve(move |seen| match seen.path.as_str() {
        "/v2/" => Answer::ok("{}"),
        p if p.contains("/manifests/") => Answer::ok(manifest.clone()),
        p if p.contains("/blobs/") => Answer::redirect(307, &format!("{target}{p}")),
        _ => Answer::not_found(),
    })
    .await;
    let error = oci::pull(&addr(&site, "skills/x"), &options()).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, SourceError::Refused { .. }), "{text}");
    assert!(text.contains(&elsewhere.base) && text.contains("allow_hosts"), "{text}");
    assert!(elsewhere.seen().is_empty(), "the other service was asked: {:?}", elsewhere.seen());

    // Allowed by the config, the same pull goes through.
    let mut allowed = options();
    allowed.caps.allow_hosts = vec![skillhost_core::egress::Rule::parse(&elsewhere.base).unwrap()];
    let fetched = oci::pull(&addr(&site, "skills/x"), &allowed).await.unwrap();
    assert_eq!(fetched.artifact, Artifact::Folder(files()));
    assert!(!elsewhere.seen().is_empty());
}

#[tokio::test]
async fn a_registry_with_a_token_service_pulls_with_the_credentials() {
    let (manifest, blobs) = artifact();
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("alice:secret"));
    let site = Arc::new(std::sync::OnceLock::<String>::new());
    let base = site.clone();
    let server = serve(move |seen| {
        let realm = format!("Bearer realm=\"{}/token\",service=\"registry\"", base.get().unwrap());
        match (seen.path.as_str(), seen.header("authorization")) {
            (p, auth) if p.starts_with("/token?") => match auth {
                Some(auth) if auth == basic && p.contains("scope=repository%3Askills%2Fx%3Apull") => Answer::ok(r#"{"token":"t0k"}"#),
                _ => Answer::status(401, &[]),
            },
            (_, Some("Bearer t0k")) => match seen.path.as_str() {
                p if p.contains("/manifests/") => {
                    Answer::ok_with(manifest.clone(), "Content-Type", "application/vnd.oci.image.manifest.v1+json")
                }
                _ => blob(seen, &blobs).map_or_else(Answer::not_found, |b| Answer::ok(b.clone())),
            },
            _ => Answer::status(401, &[("WWW-Authenticate", &realm)]),
        }
    })
    .await;
    site.set(server.base.clone()).unwrap();
    let mut options = options();
    options.auth.insert(&server.host, "alice", "secret");
    let fetched = oci::pull(&addr(&server, "skills/x"), &options).await.unwrap();
    assert_eq!(fetched.artifact, Artifact::Folder(files()));

    // Without the credentials the token service refuses, and the error says how to log in.
    let error = oci::pull(&addr(&server, "skills/x"), &self::options()).await.unwrap_err();
    assert!(error.to_string().contains("docker login"), "{error}");
}

#[tokio::test]
async fn an_endless_token_answer_is_cut_at_its_cap() {
    let site = Arc::new(std::sync::OnceLock::<String>::new());
    let base = site.clone();
    let server = serve(move |seen| match seen.path.as_str() {
        p if p.starts_with("/token") => Answer::Endless { prefix: b"{\"token\":\"".to_vec(), stop: 128 << 20 },
        _ => Answer::status(401, &[("WWW-Authenticate", &format!("Bearer realm=\"{}/token\"", base.get().unwrap()))]),
    })
    .await;
    site.set(server.base.clone()).unwrap();
    let error = oci::pull(&addr(&server, "skills/x"), &options()).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { .. }), "{error}");
    assert!(server.hung_up().await);
    assert!(server.sent() < BUFFERED, "the server wrote {} bytes of the token answer", server.sent());
}
