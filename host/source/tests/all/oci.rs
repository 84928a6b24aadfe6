//! OCI pull, push and signatures against a real registry: Debian's `docker-registry`
//! (the CNCF distribution registry), started per test on 127.0.0.1 with its storage in a
//! temporary folder, so a test can also tamper with what it stores.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};
use skillhost_source::address::{OciAddr, OciRef};
use skillhost_source::oci::{self, COMPONENT_CONFIG_MEDIA_TYPE, COMPONENT_LAYER_MEDIA_TYPE, PushMeta};
use skillhost_source::sign::{self, PrivateKey};
use skillhost_source::{Artifact, Caps, FetchOptions, Quiet, SignatureStatus, SourceAddr, SourceError};

/// The registry of these tests, and what they ask of it.
use fixtures::registry::OciRegistry as Registry;

trait RegistryExt {
    fn addr(&self, repository: &str, tag: &str) -> OciAddr;
    fn client(&self) -> Client;
}

impl RegistryExt for Registry {
    fn addr(&self, repository: &str, tag: &str) -> OciAddr {
        OciAddr { registry: self.host.clone(), repository: repository.to_owned(), reference: OciRef::Tag(tag.to_owned()) }
    }

    /// A client of the library the registry speaks with, to lay out artifacts as other
    /// tools do.
    fn client(&self) -> Client {
        skillhost_source::http::install_crypto_provider();
        Client::new(ClientConfig { protocol: ClientProtocol::HttpsExcept(vec![self.host.clone()]), ..ClientConfig::default() })
    }
}

fn options(keys: Vec<sign::PublicKey>) -> FetchOptions {
    FetchOptions {
        caps: Caps::default(),
        progress: Arc::new(Quiet),
        verify_keys: keys,
        auth: oci::Auth::default(),
        staging: std::env::temp_dir(),
    }
}

fn meta() -> PushMeta {
    PushMeta { name: "hello".into(), version: "1.0.0".into(), description: "Says hello.".into() }
}

fn folder() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        ("SKILL.md".to_owned(), b"---\nname: hello\ndescription: Says hello.\n---\nSay hello.\n".to_vec()),
        ("scripts/hello.sh".to_owned(), b"#!/bin/sh\necho hello\n".to_vec()),
    ])
}

fn at_digest(addr: &OciAddr, digest: &str) -> OciAddr {
    OciAddr { reference: OciRef::Digest(digest.to_owned()), ..addr.clone() }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[tokio::test]
async fn a_published_folder_installs_by_tag_and_by_digest() {
    let registry = Registry::start();
    let addr = registry.addr("skills/hello", "1.0");
    let options = options(Vec::new());
    let digest = oci::push(&Artifact::Folder(folder()), &meta(), &addr, &options, None).await.unwrap();
    assert_eq!(oci::resolve(&addr, &options).await.unwrap(), digest);
    // Publishing the same files again (a second later) names the same manifest.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = oci::push(&Artifact::Folder(folder()), &meta(), &addr, &options, None).await.unwrap();
    assert_eq!(again, digest, "the same files publish to the same digest");

    let fetched = oci::pull(&addr, &options).await.unwrap();
    assert_eq!(fetched.artifact, Artifact::Folder(folder()));
    assert_eq!(fetched.provenance.digest, digest);
    assert_eq!(fetched.provenance.source, addr.to_string());
    assert_eq!(fetched.provenance.pinned, format!("oci://{}/skills/hello@{digest}", registry.host));
    assert_eq!(fetched.provenance.signature, SignatureStatus::NotChecked);

    let pinned: SourceAddr = fetched.provenance.pinned.parse().unwrap();
    let SourceAddr::Oci(pinned) = pinned else { panic!("{pinned:?}") };
    let again = oci::pull(&pinned, &options).await.unwrap();
    assert_eq!(again.artifact, Artifact::Folder(folder()));
    assert_eq!(again.provenance.digest, digest);

    // The config carries the skill's name, version and description.
    let (manifest, _) = registry
        .client()
        .pull_image_manifest(&Reference::try_from(format!("{}/skills/hello:1.0", registry.host)).unwrap(), &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(manifest.artifact_type.as_deref(), Some(oci::SKILL_ARTIFACT_TYPE));
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(registry.blob_file(&manifest.config.digest)).unwrap()).unwrap();
    assert_eq!(config["name"], "hello");
    assert_eq!(config["version"], "1.0.0");
}

/// The smallest component: the preamble of a component binary, no sections.
const COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

#[tokio::test]
async fn a_component_in_the_wkg_layout_pulls_as_a_component() {
    let registry = Registry::start();
    let client = registry.client();
    let reference: Reference = format!("{}/wasm/hello:0.1.0", registry.host).parse().unwrap();
    // Laid out as wasm-pkg-tools lay out a component: its config type and fields, one
    // `application/wasm` layer.
    let config = serde_json::json!({
        "created": "2026-01-01T00:00:00Z",
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [sha256(COMPONENT)],
        "component": {"exports": ["wasi:cli/run@0.2.0"], "imports": [], "target": null},
    });
    let layers = [ImageLayer::new(COMPONENT.to_vec(), COMPONENT_LAYER_MEDIA_TYPE.to_owned(), None)];
    let config = Config::new(serde_json::to_vec(&config).unwrap(), COMPONENT_CONFIG_MEDIA_TYPE.to_owned(), None);
    client.push(&reference, &layers, config, &RegistryAuth::Anonymous, None).await.unwrap();

    let addr = registry.addr("wasm/hello", "0.1.0");
    let fetched = oci::pull(&addr, &options(Vec::new())).await.unwrap();
    assert_eq!(fetched.artifact, Artifact::Component(COMPONENT.to_vec()));

    // Ours pushes the same layout, which pulls back the same.
    let ours = registry.addr("wasm/ours", "1");
    let digest = oci::push(&Artifact::Component(COMPONENT.to_vec()), &meta(), &ours, &options(Vec::new()), None).await.unwrap();
    let manifest: oci_client::manifest::OciImageManifest =
        serde_json::from_slice(&std::fs::read(registry.blob_file(&digest)).unwrap()).unwrap();
    assert_eq!(manifest.config.media_type, COMPONENT_CONFIG_MEDIA_TYPE);
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(registry.blob_file(&manifest.config.digest)).unwrap()).unwrap();
    assert_eq!((config["architecture"].as_str(), config["os"].as_str()), (Some("wasm"), Some("wasip2")));
    assert_eq!(config["layerDigests"], serde_json::json!([sha256(COMPONENT)]));
    assert_eq!(oci::pull(&ours, &options(Vec::new())).await.unwrap().artifact, Artifact::Component(COMPONENT.to_vec()));
}

#[tokio::test]
async fn another_layout_is_refused_naming_its_media_types() {
    let registry = Registry::start();
    let reference: Reference = format!("{}/images/app:1", registry.host).parse().unwrap();
    let layers = [ImageLayer::oci_v1(b"not a skill".to_vec(), None)];
    let config = Config::oci_v1(b"{}".to_vec(), None);
    registry.client().push(&reference, &layers, config, &RegistryAuth::Anonymous, None).await.unwrap();
    let error = oci::pull(&registry.addr("images/app", "1"), &options(Vec::new())).await.unwrap_err();
    assert!(matches!(error, SourceError::Oci { .. }), "{error}");
    assert!(error.to_string().contains("application/vnd.oci.image.layer.v1.tar"), "{error}");
}

#[tokio::test]
async fn a_tampered_blob_is_refused() {
    let registry = Registry::start();
    let addr = registry.addr("skills/hello", "1.0");
    let options = options(Vec::new());
    oci::push(&Artifact::Folder(folder()), &meta(), &addr, &options, None).await.unwrap();
    let layer = skillhost_source::archive::pack_tar_gz(&folder());
    let file = registry.blob_file(&sha256(&layer));
    assert_eq!(std::fs::read(&file).unwrap(), layer, "the registry stores the layer where expected");
    let mut tampered = layer.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&file, &tampered).unwrap();

    let error = oci::pull(&addr, &options).await.unwrap_err();
    match &error {
        SourceError::Digest { expected, actual, .. } => {
            assert_eq!(expected, &sha256(&layer));
            assert_eq!(actual, &sha256(&tampered));
        }
        other => panic!("not a digest refusal: {other}"),
    }
}

#[tokio::test]
async fn a_pull_by_a_digest_that_is_not_the_manifests_is_refused() {
    let registry = Registry::start();
    let options = options(Vec::new());
    let first = registry.addr("skills/a", "1");
    let second = registry.addr("skills/b", "1");
    let first_digest = oci::push(&Artifact::Folder(folder()), &meta(), &first, &options, None).await.unwrap();
    let mut other = folder();
    other.insert("extra.txt".into(), b"more".to_vec());
    let second_digest = oci::push(&Artifact::Folder(other), &meta(), &second, &options, None).await.unwrap();

    // A digest the registry does not hold.
    let unknown = at_digest(&first, &format!("sha256:{}", "0".repeat(64)));
    let error = oci::pull(&unknown, &options).await.unwrap_err();
    assert!(matches!(error, SourceError::Oci { .. }), "{error}");

    // The registry answers the first digest with the second manifest's bytes.
    let second_manifest = std::fs::read(registry.blob_file(&second_digest)).unwrap();
    std::fs::write(registry.blob_file(&first_digest), &second_manifest).unwrap();
    let error = oci::pull(&at_digest(&first, &first_digest), &options).await.unwrap_err();
    match &error {
        SourceError::Digest { expected, actual, .. } => {
            assert_eq!(expected, &first_digest);
            assert_eq!(actual, &second_digest);
        }
        other => panic!("not a digest refusal: {other}"),
    }
}

#[tokio::test]
async fn a_layer_larger_than_the_cap_is_refused_before_it_is_downloaded() {
    let registry = Registry::start();
    let addr = registry.addr("skills/big", "1");
    let mut files = folder();
    // Bytes that do not compress: a linear congruential sequence.
    let mut state = 0x2545_f491_u32;
    let noise = (0..64 * 1024)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    files.insert("data.bin".into(), noise);
    oci::push(&Artifact::Folder(files.clone()), &meta(), &addr, &options(Vec::new()), None).await.unwrap();

    let mut small = options(Vec::new());
    small.caps.download = 16 * 1024;
    let error = oci::pull(&addr, &small).await.unwrap_err();
    assert!(matches!(error, SourceError::TooLarge { limit: 16384, .. }), "{error}");
    assert!(error.to_string().contains("says the manifest"), "{error}");
    // Under the default cap it pulls.
    assert_eq!(oci::pull(&addr, &options(Vec::new())).await.unwrap().artifact, Artifact::Folder(files));
}

#[tokio::test]
async fn signatures_are_verified_and_refused() {
    let registry = Registry::start();
    let alice = PrivateKey::generate();
    let bob = PrivateKey::generate();
    let signed = registry.addr("skills/signed", "1");
    let digest = oci::push(&Artifact::Folder(folder()), &meta(), &signed, &options(Vec::new()), Some(&alice)).await.unwrap();

    let fetched = oci::pull(&signed, &options(vec![bob.public(), alice.public()])).await.unwrap();
    assert_eq!(fetched.provenance.signature, SignatureStatus::Verified { key: alice.public().fingerprint().to_owned() });
    assert_eq!(fetched.artifact, Artifact::Folder(folder()));

    // The wrong key.
    let error = oci::pull(&signed, &options(vec![bob.public()])).await.unwrap_err();
    assert!(matches!(error, SourceError::Signature { .. }), "{error}");
    let text = error.to_string();
    assert!(text.contains("not by any of the keys") && text.contains(bob.public().fingerprint()), "{text}");

    // A second signature is appended; both verify.
    oci::push(&Artifact::Folder(folder()), &meta(), &signed, &options(Vec::new()), Some(&bob)).await.unwrap();
    for key in [&alice, &bob] {
        let fetched = oci::pull(&at_digest(&signed, &digest), &options(vec![key.public()])).await.unwrap();
        assert_eq!(fetched.provenance.signature, SignatureStatus::Verified { key: key.public().fingerprint().to_owned() });
    }
    let sig_tag: Reference = format!("{}/skills/signed:{}", registry.host, sign::signature_tag(&digest)).parse().unwrap();
    let (manifest, _) = registry.client().pull_image_manifest(&sig_tag, &RegistryAuth::Anonymous).await.unwrap();
    assert_eq!(manifest.layers.len(), 2);
    assert!(manifest.layers.iter().all(|l| l.media_type == sign::SIMPLE_SIGNING_MEDIA_TYPE));
    let payload = std::fs::read(registry.blob_file(&manifest.layers[0].digest)).unwrap();
    assert_eq!(payload, sign::payload(&format!("{}/skills/signed", registry.host), &digest));

    // An unsigned artifact (other bytes, so another digest), a key asked for.
    let unsigned = registry.addr("skills/unsigned", "1");
    let mut other = folder();
    other.insert("extra.txt".into(), b"unsigned".to_vec());
    let unsigned_digest = oci::push(&Artifact::Folder(other), &meta(), &unsigned, &options(Vec::new()), None).await.unwrap();
    assert_ne!(unsigned_digest, digest);
    let error = oci::pull(&unsigned, &options(vec![alice.public()])).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, SourceError::Signature { .. }) && text.contains("no signature is stored") && text.contains("--sign"), "{text}");

    // A signature of another artifact copied to this one's signature tag does not verify it.
    let copied: Reference = format!("{}/skills/unsigned:{}", registry.host, sign::signature_tag(&unsigned_digest)).parse().unwrap();
    let signature_manifest = std::fs::read(
        registry
            .blob_file(&oci::resolve(&registry.addr("skills/signed", &sign::signature_tag(&digest)), &options(Vec::new())).await.unwrap()),
    )
    .unwrap();
    let client = registry.client();
    for layer in &manifest.layers {
        client
            .mount_blob(&copied, &Reference::try_from(format!("{}/skills/signed:1", registry.host)).unwrap(), &layer.digest)
            .await
            .unwrap();
    }
    client
        .mount_blob(&copied, &Reference::try_from(format!("{}/skills/signed:1", registry.host)).unwrap(), &manifest.config.digest)
        .await
        .unwrap();
    client.push_manifest_raw(&copied, signature_manifest, oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.parse().unwrap()).await.unwrap();
    let error = oci::pull(&unsigned, &options(vec![alice.public()])).await.unwrap_err();
    assert!(error.to_string().contains("not for this artifact"), "{error}");
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    // Accepts connections and holds them, answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let addr = OciAddr { registry: host, repository: "skills/slow".into(), reference: OciRef::Tag("1".into()) };
    let mut slow = options(Vec::new());
    slow.caps.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = oci::pull(&addr, &slow).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(matches!(error, SourceError::Oci { .. }) && error.to_string().contains("timed out"), "{error}");
}
