//! Skills in OCI registries: [`pull`] by tag or digest, [`resolve`] a tag to the digest it
//! names now, [`push`] on publish, with [`sign`]'s cosign-format signatures
//! stored beside them.
//!
//! Two artifact layouts, one layer each:
//! - a component, in the layout wasm-pkg-tools (`wkg`) write: config
//!   [`COMPONENT_CONFIG_MEDIA_TYPE`] (JSON: `created`, `architecture: "wasm"`,
//!   `os: "wasip2"`, `layerDigests`, optionally `component`), layer
//!   [`COMPONENT_LAYER_MEDIA_TYPE`], the component's bytes → [`Artifact::Component`];
//! - a skill folder: artifact type and config [`SKILL_ARTIFACT_TYPE`] (JSON: name, version,
//!   description, informative only), layer [`SKILL_LAYER_MEDIA_TYPE`], the folder as a
//!   tar+gzip archive unpacked under [`archive`](crate::archive)'s rules →
//!   [`Artifact::Folder`].
//!
//! Any other layout is refused, naming its media types.
//!
//! What a pull holds to: HTTPS, unless the registry is loopback or the caps allow plain
//! HTTP; the registry API spoken by `wire` through one [`Fetcher`](crate::http::Fetcher),
//! so every answer is capped before and while it is read: a manifest (and a signature
//! manifest) at [`MAX_MANIFEST_BYTES`] (a larger `Content-Length` refused before a byte is
//! read), a token service's answer at [`MAX_TOKEN_BYTES`], a signature payload at 64 KiB,
//! a blob at what its descriptor says and `caps.download` (a layer declaring more is
//! refused before it is downloaded); every URL the registry names (its token service, a
//! blob's redirect, an upload location) only on the registry's own host or one the config
//! allows, and never a loopback or private address unless the registry is on one; every
//! blob's SHA-256 checked against its descriptor; a manifest pulled by digest hashing to
//! that digest; the whole fetch under `caps.timeout`. oci-client is used for its manifest
//! types only: its client reads manifests and token answers whole.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::address::{OciAddr, OciRef};
use crate::error::SourceError;
use crate::sign::{self, PayloadRefusal, PrivateKey};
use crate::{Artifact, FetchOptions, Fetched, Provenance, SignatureStatus, SourceAddr};

mod wire;

pub use wire::{MAX_MANIFEST_BYTES, MAX_TOKEN_BYTES};

/// Config media type of a component artifact, as wasm-pkg-tools write it.
pub const COMPONENT_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Media type of a component artifact's one layer: the component's bytes.
pub const COMPONENT_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Artifact type (and config media type) of a skill folder artifact.
pub const SKILL_ARTIFACT_TYPE: &str = "application/vnd.skillhost.skill.v1+json";
/// Media type of a skill folder artifact's one layer: the folder as tar+gzip.
pub const SKILL_LAYER_MEDIA_TYPE: &str = "application/vnd.skillhost.skill.folder.v1.tar+gzip";
/// Config media type of a signature manifest, as cosign writes it.
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Signature layers tried before a verification gives up: a registry cannot make a pull
/// download signatures without end.
const MAX_SIGNATURES: usize = 256;
/// Largest signature payload read, in bytes: cosign's is a few hundred.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// The manifest media types asked for.
const MANIFEST_MEDIA_TYPES: [&str; 2] = [OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];

/// Credentials for registries, by host (`HOST[:PORT]`); anonymous for any other.
#[derive(Clone, Default)]
pub struct Auth {
    hosts: BTreeMap<String, (String, String)>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth").field("hosts", &self.hosts.keys().collect::<Vec<_>>()).finish()
    }
}

/// A docker `config.json`, the part read: `auths`.
#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// Docker Hub's names for one registry, stored under the name docker's config uses.
fn auth_host(host: &str) -> String {
    let host = host.trim_start_matches("https://").trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    match host {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".to_owned(),
        other => other.to_owned(),
    }
}

impl Auth {
    /// Credentials from a docker config file: `{"auths":{"HOST":{"auth":"BASE64(user:pass)"}}}`
    /// or `username`/`password` fields. Credential helpers and identity tokens are not read
    /// (those registries are anonymous here).
    pub fn from_docker_config(path: &Path) -> Result<Self, SourceError> {
        let text = std::fs::read(path).map_err(|e| SourceError::io(path, e))?;
        let bad = |reason: String| SourceError::Oci { reference: path.display().to_string(), reason };
        let config: DockerConfig = serde_json::from_slice(&text).map_err(|e| bad(format!("not a docker config file: {e}")))?;
        let mut auth = Self::default();
        for (host, entry) in config.auths {
            let (user, password) = match (entry.auth, entry.username, entry.password) {
                (Some(encoded), _, _) if !encoded.is_empty() => {
                    let decoded = BASE64.decode(encoded.trim()).map_err(|e| bad(format!("`auths.{host}.auth` is not base64: {e}")))?;
                    let decoded = String::from_utf8(decoded).map_err(|_| bad(format!("`auths.{host}.auth` is not text")))?;
                    let (user, password) =
                        decoded.split_once(':').ok_or_else(|| bad(format!("`auths.{host}.auth` is not USER:PASSWORD")))?;
                    (user.to_owned(), password.to_owned())
                }
                (_, Some(user), Some(password)) => (user, password),
                _ => continue,
            };
            auth.insert(&host, &user, &password);
        }
        Ok(auth)
    }

    /// Credentials from `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`; none
    /// (anonymous everywhere) when that file does not exist.
    pub fn docker_default() -> Result<Self, SourceError> {
        let path = match (std::env::var_os("DOCKER_CONFIG"), std::env::var_os("HOME")) {
            (Some(dir), _) => Path::new(&dir).join("config.json"),
            (None, Some(home)) => Path::new(&home).join(".docker/config.json"),
            (None, None) => return Ok(Self::default()),
        };
        if !path.exists() {
            return Ok(Self::default());
        }
        Self::from_docker_config(&path)
    }

    /// Use `user` and `password` for the registry `host` (`HOST[:PORT]`).
    pub fn insert(&mut self, host: &str, user: &str, password: &str) {
        self.hosts.insert(auth_host(host), (user.to_owned(), password.to_owned()));
    }

    /// The `USER`, `PASSWORD` presented to `registry`, if any (else anonymous).
    fn for_registry(&self, registry: &str) -> Option<(String, String)> {
        self.hosts.get(&auth_host(registry)).cloned()
    }
}

/// Name, version and description of a published skill, written to its artifact's config
/// and annotations.
#[derive(Clone, Debug)]
pub struct PushMeta {
    /// The skill's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// One line of what it does.
    pub description: String,
}

/// One registry repository talked to: the wire, the address, the options.
struct Session<'a> {
    wire: wire::Wire,
    addr: &'a OciAddr,
    /// The address as a person reads it, for errors.
    name: String,
    options: &'a FetchOptions,
}

impl<'a> Session<'a> {
    async fn new(addr: &'a OciAddr, options: &'a FetchOptions, push: bool) -> Result<Self, SourceError> {
        let name = addr.to_string();
        let wire = wire::Wire::new(&addr.registry, &addr.repository, &name, options, push).await?;
        Ok(Self { wire, addr, name, options })
    }

    /// The reference (tag or digest) of the address.
    fn reference(&self) -> &str {
        match &self.addr.reference {
            OciRef::Tag(tag) => tag,
            OciRef::Digest(digest) => digest,
        }
    }

    /// The manifest `reference` (a tag or `sha256:` digest) names, its bytes (at most
    /// [`MAX_MANIFEST_BYTES`]) and their digest; `None` when the registry has no such
    /// manifest. By digest, the bytes must hash to it; by tag, to the digest the registry
    /// says they have, if it says one.
    async fn manifest(&self, reference: &str) -> Result<Option<(Vec<u8>, String)>, SourceError> {
        let Some((body, said)) = self.wire.manifest(reference, self.options.caps.download).await? else {
            return Ok(None);
        };
        let digest = sha256(&body);
        let expected = match said {
            _ if reference.starts_with("sha256:") => Some(reference.to_owned()),
            Some(said) if said.starts_with("sha256:") => Some(said),
            _ => None,
        };
        if let Some(expected) = expected
            && expected != digest
        {
            return Err(SourceError::Digest { what: format!("{}: the manifest {reference}", self.name), expected, actual: digest });
        }
        Ok(Some((body, digest)))
    }

    /// The blob `descriptor` names, at most `cap` bytes and what it declares (refused before
    /// the download when it declares more), its SHA-256 checked against the descriptor.
    async fn blob(&self, descriptor: &OciDescriptor, what: &str, cap: u64) -> Result<Vec<u8>, SourceError> {
        let what = format!("{}: {what}", self.name);
        if descriptor.size < 0 || descriptor.size as u64 > cap {
            return Err(SourceError::TooLarge {
                what: format!("{what} ({} bytes, says the manifest)", descriptor.size),
                limit: cap,
                fix: None,
            });
        }
        if !is_sha256(&descriptor.digest) {
            return Err(SourceError::Oci {
                reference: self.name.clone(),
                reason: format!("{what} is named by `{}`, not a sha256: digest", descriptor.digest),
            });
        }
        let body = self.wire.blob(&descriptor.digest, descriptor.size as u64, &what, &*self.options.progress).await?;
        // Checked here: a wrong digest is a refusal, whatever the registry said.
        let actual = sha256(&body);
        if actual != descriptor.digest {
            return Err(SourceError::Digest { what, expected: descriptor.digest.clone(), actual });
        }
        Ok(body)
    }

    /// Push `data` as a blob; its descriptor.
    async fn push_blob(&self, media_type: &str, data: Vec<u8>, what: &str) -> Result<OciDescriptor, SourceError> {
        let digest = sha256(&data);
        let size = data.len() as i64;
        self.wire.push_blob(&digest, data, what).await?;
        Ok(OciDescriptor { media_type: media_type.to_owned(), digest, size, ..OciDescriptor::default() })
    }

    /// Push `manifest` under `reference`; its digest.
    async fn push_manifest(&self, reference: &str, manifest: &OciImageManifest) -> Result<String, SourceError> {
        let body = serde_json::to_vec(manifest).expect("a manifest serializes");
        let digest = sha256(&body);
        self.wire.push_manifest(reference, body, OCI_IMAGE_MEDIA_TYPE).await?;
        Ok(digest)
    }

    /// `REGISTRY/REPO`, the identity a signature payload names.
    fn docker_reference(&self) -> String {
        format!("{}/{}", self.addr.registry, self.addr.repository)
    }

    /// The fingerprint of the key, of `options.verify_keys`, that signed the manifest
    /// `digest`.
    async fn verify_signature(&self, digest: &str) -> Result<String, SourceError> {
        let keys = &self.options.verify_keys;
        let tag = sign::signature_tag(digest);
        let tried = keys.iter().map(|k| k.fingerprint()).collect::<Vec<_>>().join(", ");
        let refuse = |reason: String| SourceError::Signature { reference: self.name.clone(), reason };
        let Some((body, _)) = self.manifest(&tag).await? else {
            return Err(refuse(format!(
                "no signature is stored at {}:{tag}; the publisher signs with `skillhost publish --sign KEY` (or `cosign sign --key KEY`)",
                self.docker_reference()
            )));
        };
        let manifest: OciImageManifest = serde_json::from_slice(&body)
            .map_err(|e| refuse(format!("the signature manifest at {tag} is not an OCI image manifest: {e}")))?;
        let mut mismatches = Vec::new();
        let mut signatures = 0;
        let layers = manifest.layers.iter().filter(|l| l.media_type == sign::SIMPLE_SIGNING_MEDIA_TYPE);
        for layer in layers.take(MAX_SIGNATURES) {
            let Some(signature) = layer.annotations.as_ref().and_then(|a| a.get(sign::SIGNATURE_ANNOTATION)) else {
                continue;
            };
            signatures += 1;
            let payload = self.blob(layer, "a signature payload", MAX_PAYLOAD_BYTES.min(self.options.caps.download)).await?;
            match sign::verify_payload(&payload, signature, digest, keys) {
                Ok(fingerprint) => return Ok(fingerprint),
                Err(PayloadRefusal::NotByKeys) => {}
                Err(mismatch) => mismatches.push(mismatch.to_string()),
            }
        }
        Err(refuse(match (signatures, mismatches.is_empty()) {
            (0, _) => format!(
                "no signature: the manifest at {tag} holds no cosign signature layer; the publisher signs with `skillhost publish --sign KEY`"
            ),
            (_, true) => format!("signed, but not by any of the keys {tried}; ask the publisher which key signed it, or pass that key"),
            (_, false) => format!("signed, but not for this artifact: {}", mismatches.join("; ")),
        }))
    }

    /// Sign the manifest `digest` with `key`, appending to the signatures already stored.
    async fn attach_signature(&self, digest: &str, key: &PrivateKey) -> Result<(), SourceError> {
        let tag = sign::signature_tag(digest);
        let mut layers = match self.manifest(&tag).await? {
            Some((body, _)) => serde_json::from_slice::<OciImageManifest>(&body)
                .map_err(|e| SourceError::Signature {
                    reference: self.name.clone(),
                    reason: format!(
                        "the signature manifest at {tag} is not an OCI image manifest ({e}); delete that tag before signing again"
                    ),
                })?
                .layers
                .into_iter()
                .filter(|l| l.media_type == sign::SIMPLE_SIGNING_MEDIA_TYPE)
                .collect(),
            None => Vec::new(),
        };
        let payload = sign::payload(&self.docker_reference(), digest);
        let signature = key.sign(&payload);
        let mut layer = self.push_blob(sign::SIMPLE_SIGNING_MEDIA_TYPE, payload, "a signature payload").await?;
        layer.annotations = Some(BTreeMap::from([(sign::SIGNATURE_ANNOTATION.to_owned(), signature)]));
        layers.push(layer);
        let config = serde_json::json!({
            "architecture": "",
            "config": {},
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>()},
        });
        let config = self
            .push_blob(SIGNATURE_CONFIG_MEDIA_TYPE, serde_json::to_vec(&config).expect("JSON serializes"), "the signature config")
            .await?;
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
            config,
            layers,
            subject: None,
            artifact_type: None,
            annotations: None,
        };
        self.push_manifest(&tag, &manifest).await?;
        Ok(())
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
}

/// `future` under `caps.timeout`, its lapse an error naming `addr`.
async fn timed<T>(addr: &OciAddr, options: &FetchOptions, future: impl Future<Output = Result<T, SourceError>>) -> Result<T, SourceError> {
    let limit = options.caps.timeout;
    tokio::time::timeout(limit, future).await.unwrap_or_else(|_| {
        Err(SourceError::Oci {
            reference: addr.to_string(),
            reason: format!("timed out after {limit:?}; raise the fetch timeout if the registry is slow"),
        })
    })
}

/// The one layer of `manifest`, and whether it is a component (else a skill folder); any
/// other layout refused, naming its media types.
fn layout<'m>(manifest: &'m OciImageManifest, name: &str) -> Result<(&'m OciDescriptor, bool), SourceError> {
    let config = manifest.config.media_type.as_str();
    let layers = manifest.layers.iter().map(|l| format!("`{}`", l.media_type)).collect::<Vec<_>>();
    let skill = config == SKILL_ARTIFACT_TYPE || manifest.artifact_type.as_deref() == Some(SKILL_ARTIFACT_TYPE);
    match manifest.layers.as_slice() {
        [layer] if config == COMPONENT_CONFIG_MEDIA_TYPE && layer.media_type == COMPONENT_LAYER_MEDIA_TYPE => return Ok((layer, true)),
        [layer] if skill && layer.media_type == SKILL_LAYER_MEDIA_TYPE => return Ok((layer, false)),
        _ => {}
    }
    let artifact_type = manifest.artifact_type.as_deref().map(|t| format!(", artifact type `{t}`")).unwrap_or_default();
    Err(SourceError::Oci {
        reference: name.to_owned(),
        reason: format!(
            "config `{config}`{artifact_type} with layers [{}] is not a skill: skillhost pulls a component (config `{COMPONENT_CONFIG_MEDIA_TYPE}`, one `{COMPONENT_LAYER_MEDIA_TYPE}` layer) or a skill folder (`{SKILL_ARTIFACT_TYPE}`, one `{SKILL_LAYER_MEDIA_TYPE}` layer)",
            layers.join(", ")
        ),
    })
}

/// Pull the skill `addr` names: resolve a tag to its manifest digest, check a signature
/// when `options.verify_keys` asks for one, download and verify the one layer. Nothing is
/// written anywhere.
pub async fn pull(addr: &OciAddr, options: &FetchOptions) -> Result<Fetched, SourceError> {
    timed(addr, options, pull_untimed(addr, options)).await
}

async fn pull_untimed(addr: &OciAddr, options: &FetchOptions) -> Result<Fetched, SourceError> {
    let session = Session::new(addr, options, false).await?;
    let (body, digest) = session.manifest(session.reference()).await?.ok_or_else(|| SourceError::Oci {
        reference: session.name.clone(),
        reason: "no such manifest in the registry; check the repository and tag (or digest)".into(),
    })?;
    let manifest: OciImageManifest = serde_json::from_slice(&body).map_err(|e| SourceError::Oci {
        reference: session.name.clone(),
        reason: format!("the manifest is not an OCI image manifest: {e}"),
    })?;
    let (layer, component) = layout(&manifest, &session.name)?;
    let signature = match options.verify_keys.is_empty() {
        true => SignatureStatus::NotChecked,
        false => SignatureStatus::Verified { key: session.verify_signature(&digest).await? },
    };
    let artifact = if component {
        Artifact::Component(session.blob(layer, "the component", options.caps.download).await?)
    } else {
        let bytes = session.blob(layer, "the skill folder archive", options.caps.download).await?;
        Artifact::Folder(crate::archive::unpack(&bytes, &session.name, &options.caps)?)
    };
    let provenance =
        Provenance { source: session.name.clone(), pinned: SourceAddr::Oci(addr.clone()).pinned(&digest).to_string(), digest, signature };
    Ok(Fetched { artifact, provenance })
}

/// The manifest digest (`sha256:…`) `addr` names now, downloading nothing else: for a tag,
/// what it points at; for a digest, that digest if the registry has it.
pub async fn resolve(addr: &OciAddr, options: &FetchOptions) -> Result<String, SourceError> {
    timed(addr, options, async {
        let session = Session::new(addr, options, false).await?;
        let digest = match session.wire.head_manifest(session.reference()).await? {
            Some(digest) => digest,
            // The registry names no digest: the manifest is read (capped) and hashed.
            None => session.manifest(session.reference()).await?.map(|(_, digest)| digest).ok_or_else(|| SourceError::Oci {
                reference: session.name.clone(),
                reason: "no such manifest in the registry; check the repository and tag (or digest)".into(),
            })?,
        };
        if !is_sha256(&digest) {
            return Err(SourceError::Oci {
                reference: session.name.clone(),
                reason: format!("the registry named the manifest `{digest}`, not a sha256: digest"),
            });
        }
        Ok(digest)
    })
    .await
}

/// The config of a component artifact, as wasm-pkg-tools write it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComponentConfig<'a> {
    created: String,
    architecture: &'static str,
    os: &'static str,
    layer_digests: [&'a str; 1],
}

/// The config of a skill folder artifact.
#[derive(Serialize)]
struct SkillConfig<'a> {
    name: &'a str,
    version: &'a str,
    description: &'a str,
}

/// The `created` time a published artifact records: `SOURCE_DATE_EPOCH` when set (the
/// reproducible-builds convention), else the Unix epoch, so publishing the same files
/// twice gives the same manifest, and the same digest (a signature made for one still
/// verifies the other).
fn created_time() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(0);
    let time = chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default();
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Publish `artifact` at `addr` (a tag), its config and annotations from `meta`; with
/// `sign_with`, also store a cosign-format signature beside it (appended to any already
/// there). Returns the manifest digest, the same for the same artifact and `meta`.
pub async fn push(
    artifact: &Artifact,
    meta: &PushMeta,
    addr: &OciAddr,
    options: &FetchOptions,
    sign_with: Option<&PrivateKey>,
) -> Result<String, SourceError> {
    if let OciRef::Digest(_) = addr.reference {
        return Err(SourceError::Oci {
            reference: addr.to_string(),
            reason: "publish to a tag (oci://REGISTRY/REPO:TAG), not a digest".into(),
        });
    }
    timed(addr, options, async {
        let session = Session::new(addr, options, true).await?;
        let created = created_time();
        let (layer, config, artifact_type) = match artifact {
            Artifact::Component(bytes) => {
                let layer = session.push_blob(COMPONENT_LAYER_MEDIA_TYPE, bytes.clone(), "the component").await?;
                let config =
                    ComponentConfig { created: created.clone(), architecture: "wasm", os: "wasip2", layer_digests: [&layer.digest] };
                let config = serde_json::to_vec(&config).expect("a config serializes");
                (layer.clone(), session.push_blob(COMPONENT_CONFIG_MEDIA_TYPE, config, "the config").await?, None)
            }
            Artifact::Folder(files) => {
                let archive = crate::archive::pack_tar_gz(files);
                let layer = session.push_blob(SKILL_LAYER_MEDIA_TYPE, archive, "the skill folder archive").await?;
                let config = SkillConfig { name: &meta.name, version: &meta.version, description: &meta.description };
                let config = serde_json::to_vec(&config).expect("a config serializes");
                (layer, session.push_blob(SKILL_ARTIFACT_TYPE, config, "the config").await?, Some(SKILL_ARTIFACT_TYPE.to_owned()))
            }
        };
        let annotations = BTreeMap::from([
            ("org.opencontainers.image.created".to_owned(), created),
            ("org.opencontainers.image.title".to_owned(), meta.name.clone()),
            ("org.opencontainers.image.version".to_owned(), meta.version.clone()),
            ("org.opencontainers.image.description".to_owned(), meta.description.clone()),
        ]);
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
            config,
            layers: vec![layer],
            subject: None,
            artifact_type,
            annotations: Some(annotations),
        };
        let digest = session.push_manifest(session.reference(), &manifest).await?;
        if let Some(key) = sign_with {
            session.attach_signature(&digest, key).await?;
        }
        Ok(digest)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let encoded = BASE64.encode("alice:s3cr:et");
        let text = format!(
            r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{encoded}"}},"ghcr.io":{{"username":"bob","password":"pw"}},"empty.io":{{}}}},"credsStore":"desktop"}}"#
        );
        std::fs::write(&path, text).unwrap();
        let auth = Auth::from_docker_config(&path).unwrap();
        let basic = |user: &str, password: &str| Some((user.to_owned(), password.to_owned()));
        assert_eq!(auth.for_registry("docker.io"), basic("alice", "s3cr:et"));
        assert_eq!(auth.for_registry("ghcr.io"), basic("bob", "pw"));
        assert_eq!(auth.for_registry("empty.io"), None);
        assert_eq!(auth.for_registry("quay.io"), None);
        assert!(!format!("{auth:?}").contains("pw"));
        std::fs::write(&path, r#"{"auths":{"x.io":{"auth":"bm9jb2xvbg=="}}}"#).unwrap();
        let error = Auth::from_docker_config(&path).unwrap_err();
        assert!(error.to_string().contains("USER:PASSWORD"), "{error}");
    }

    fn descriptor(media_type: &str) -> OciDescriptor {
        OciDescriptor { media_type: media_type.to_owned(), digest: sha256(b""), size: 0, ..OciDescriptor::default() }
    }

    fn manifest(config: &str, layers: &[&str], artifact_type: Option<&str>) -> OciImageManifest {
        OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
            config: descriptor(config),
            layers: layers.iter().map(|l| descriptor(l)).collect(),
            subject: None,
            artifact_type: artifact_type.map(str::to_owned),
            annotations: None,
        }
    }

    #[test]
    fn layouts_accepted_and_refused() {
        let component = manifest(COMPONENT_CONFIG_MEDIA_TYPE, &[COMPONENT_LAYER_MEDIA_TYPE], None);
        assert!(layout(&component, "x").unwrap().1);
        let folder = manifest("application/vnd.oci.empty.v1+json", &[SKILL_LAYER_MEDIA_TYPE], Some(SKILL_ARTIFACT_TYPE));
        assert!(!layout(&folder, "x").unwrap().1);
        for refused in [
            manifest("application/vnd.oci.image.config.v1+json", &["application/vnd.oci.image.layer.v1.tar+gzip"], None),
            manifest(COMPONENT_CONFIG_MEDIA_TYPE, &[COMPONENT_LAYER_MEDIA_TYPE, COMPONENT_LAYER_MEDIA_TYPE], None),
            manifest(SKILL_ARTIFACT_TYPE, &[COMPONENT_LAYER_MEDIA_TYPE], None),
        ] {
            let error = layout(&refused, "oci://r/x:1").unwrap_err().to_string();
            assert!(error.contains(&refused.layers[0].media_type) && error.contains("is not a skill"), "{error}");
        }
    }
}
