//! Signatures over OCI artifacts in cosign's key-based format, so `cosign sign --key` and
//! `cosign verify --key` interoperate with `skillhost publish --sign` and
//! `skillhost install --key`.
//!
//! A signature lives in the registry beside the artifact: the tag [`signature_tag`]
//! (`sha256-HEX.sig`) of the same repository names an OCI image manifest whose layers are
//! each a simple-signing payload ([`SIMPLE_SIGNING_MEDIA_TYPE`], made by [`payload`]) with
//! the annotation [`SIGNATURE_ANNOTATION`]: base64 of the ASN.1 DER ECDSA P-256 SHA-256
//! signature over the layer's bytes. A payload binds the signature to one manifest digest;
//! [`verify_payload`] checks the signature against the keys asked for, then that binding.
//!
//! Keys are P-256: a public key as SPKI PEM (`PUBLIC KEY`, what `cosign generate-key-pair`
//! writes as `cosign.pub`), a private key as PKCS#8 (`PRIVATE KEY`), SEC1
//! (`EC PRIVATE KEY`) or cosign's encrypted form (`ENCRYPTED SIGSTORE PRIVATE KEY`,
//! `ENCRYPTED COSIGN PRIVATE KEY`: scrypt, then NaCl secretbox, over PKCS#8).

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _, LineEnding};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::SourceError;

/// Media type of a signature manifest's layers: the simple-signing payload.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Annotation of a payload layer holding base64 of the DER signature over the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a cosign payload.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";

/// The tag the signatures of the manifest `digest` (`sha256:HEX`) are stored under:
/// `sha256-HEX.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// A P-256 public key signatures are checked against.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    fingerprint: String,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PublicKey").field(&self.fingerprint).finish()
    }
}

impl PublicKey {
    fn new(key: VerifyingKey) -> Self {
        let der = key.to_public_key_der().expect("a P-256 key encodes as SPKI");
        let fingerprint = format!("sha256:{}", hex::encode(Sha256::digest(der.as_bytes())));
        Self { key, fingerprint }
    }

    /// A key from SPKI PEM (`-----BEGIN PUBLIC KEY-----`, as `cosign.pub`); `path` names it
    /// in errors.
    pub fn from_pem(text: &str, path: &Path) -> Result<Self, SourceError> {
        let key = VerifyingKey::from_public_key_pem(text.trim()).map_err(|e| SourceError::Key {
            path: path.to_owned(),
            reason: format!("not a P-256 public key in PEM (`-----BEGIN PUBLIC KEY-----`, as cosign.pub): {e}"),
        })?;
        Ok(Self::new(key))
    }

    /// `sha256:` and the hex SHA-256 of the key's SPKI DER encoding: how provenance and
    /// errors name the key.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The key as SPKI PEM.
    pub fn to_pem(&self) -> String {
        self.key.to_public_key_pem(LineEnding::LF).expect("a P-256 key encodes as PEM")
    }

    /// Whether `signature` (base64 of DER, or of the 64-byte fixed form) is this key's over
    /// `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Ok(bytes) = BASE64.decode(signature.trim()) else {
            return false;
        };
        let parsed = Signature::from_der(&bytes).or_else(|_| Signature::from_slice(&bytes));
        parsed.is_ok_and(|sig| self.key.verify(message, &sig).is_ok())
    }
}

/// A P-256 private key that signs artifacts on publish.
#[derive(Clone)]
pub struct PrivateKey {
    key: SigningKey,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PrivateKey").field(&self.public().fingerprint).finish()
    }
}

/// The PEM labels of cosign's encrypted private keys.
const COSIGN_ENCRYPTED_LABELS: [&str; 2] = ["ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY"];

impl PrivateKey {
    /// A new key from the operating system's randomness.
    pub fn generate() -> Self {
        Self { key: SigningKey::random(&mut rand_core::OsRng) }
    }

    /// A key from PEM: PKCS#8 (`PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`), or cosign's
    /// encrypted form, opened with `password` (cosign's empty password when `None`).
    /// `path` names it in errors.
    pub fn from_pem(text: &str, password: Option<&str>, path: &Path) -> Result<Self, SourceError> {
        let refuse = |reason: String| SourceError::Key { path: path.to_owned(), reason };
        let (label, der) =
            p256::pkcs8::der::pem::decode_vec(text.trim().as_bytes()).map_err(|e| refuse(format!("not a PEM private key: {e}")))?;
        let key = match label {
            "PRIVATE KEY" => SigningKey::from_pkcs8_der(&der).map_err(|e| refuse(format!("not a P-256 PKCS#8 key: {e}")))?,
            "EC PRIVATE KEY" => {
                p256::SecretKey::from_sec1_der(&der).map(SigningKey::from).map_err(|e| refuse(format!("not a P-256 SEC1 key: {e}")))?
            }
            label if COSIGN_ENCRYPTED_LABELS.contains(&label) => {
                let plain = decrypt_cosign(&der, password.unwrap_or("")).map_err(|e| refuse(e.to_string()))?;
                SigningKey::from_pkcs8_der(&plain).map_err(|e| refuse(format!("the decrypted key is not a P-256 PKCS#8 key: {e}")))?
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err(refuse(
                    "an encrypted PKCS#8 key is not read; decrypt it with `openssl pkcs8 -in KEY -out plain.pem` (or use a cosign key)"
                        .into(),
                ));
            }
            other => {
                return Err(refuse(format!(
                    "`{other}` PEM is not a private key; use a P-256 key (`PRIVATE KEY`, `EC PRIVATE KEY`, or cosign's)"
                )));
            }
        };
        Ok(Self { key })
    }

    /// The key as unencrypted PKCS#8 PEM.
    pub fn to_pem(&self) -> String {
        self.key.to_pkcs8_pem(LineEnding::LF).expect("a P-256 key encodes as PKCS#8").to_string()
    }

    /// Its public key.
    pub fn public(&self) -> PublicKey {
        PublicKey::new(*self.key.verifying_key())
    }

    /// Base64 of the DER ECDSA P-256 SHA-256 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> String {
        let signature: Signature = self.key.sign(message);
        BASE64.encode(signature.to_der().as_bytes())
    }
}

/// Cosign's encrypted private key, its PEM body: JSON naming scrypt's parameters and salt,
/// the secretbox nonce, and the ciphertext, all base64.
#[derive(Deserialize)]
struct Encrypted {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize)]
struct Kdf {
    name: String,
    params: KdfParams,
    salt: String,
}

#[derive(Deserialize)]
struct KdfParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

/// The PKCS#8 DER inside a cosign encrypted key. Only the scrypt costs cosign has written
/// (N of 2^15 or 2^16, r 8, p 1) are accepted: a key file cannot make us spend more.
fn decrypt_cosign(body: &[u8], password: &str) -> Result<Vec<u8>, CosignKeyError> {
    use crypto_secretbox::aead::{Aead as _, KeyInit as _};
    let data: Encrypted = serde_json::from_slice(body).map_err(CosignKeyError::NotCosign)?;
    if data.kdf.name != "scrypt" || data.cipher.name != "nacl/secretbox" {
        return Err(CosignKeyError::Algorithms { kdf: data.kdf.name, cipher: data.cipher.name });
    }
    let log_n = match (data.kdf.params.n, data.kdf.params.r, data.kdf.params.p) {
        (32768, 8, 1) => 15,
        (65536, 8, 1) => 16,
        (n, r, p) => return Err(CosignKeyError::Costs { n, r, p }),
    };
    let decode = |what: &'static str, text: &str| BASE64.decode(text).map_err(|source| CosignKeyError::Base64 { what, source });
    let salt = decode("salt", &data.kdf.salt)?;
    let nonce = decode("nonce", &data.cipher.nonce)?;
    let ciphertext = decode("ciphertext", &data.ciphertext)?;
    if nonce.len() != 24 {
        return Err(CosignKeyError::Nonce);
    }
    let params = scrypt::Params::new(log_n, 8, 1, 32).map_err(CosignKeyError::Params)?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key).map_err(CosignKeyError::Length)?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&key.into());
    cipher.decrypt(crypto_secretbox::Nonce::from_slice(&nonce), ciphertext.as_slice()).map_err(|_| CosignKeyError::Password)
}

/// Why a cosign encrypted key does not open (see [`decrypt_cosign`]).
#[derive(Debug, thiserror::Error)]
enum CosignKeyError {
    #[error("not a cosign encrypted key: {0}")]
    NotCosign(#[source] serde_json::Error),
    #[error("key derivation `{kdf}` with cipher `{cipher}` is not cosign's (scrypt, nacl/secretbox)")]
    Algorithms { kdf: String, cipher: String },
    #[error("scrypt parameters N={n} r={r} p={p} are not cosign's; re-create the key with `cosign generate-key-pair`")]
    Costs { n: u64, r: u32, p: u32 },
    #[error("the {what} is not base64: {source}")]
    Base64 { what: &'static str, source: base64::DecodeError },
    #[error("the secretbox nonce is not 24 bytes")]
    Nonce,
    #[error("{0}")]
    Params(scrypt::errors::InvalidParams),
    #[error("{0}")]
    Length(scrypt::errors::InvalidOutputLen),
    #[error("the password does not open it (pass the one given to `cosign generate-key-pair`)")]
    Password,
}

/// The simple-signing payload a signature is made over.
#[derive(Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The payload cosign signs for the manifest `digest` of `reference` (`REGISTRY/REPO`):
/// `{"critical":{"identity":{"docker-reference":…},"image":{"docker-manifest-digest":…},"type":"cosign container image signature"},"optional":null}`.
pub fn payload(reference: &str, digest: &str) -> Vec<u8> {
    let payload = Payload {
        critical: Critical {
            identity: Identity { docker_reference: reference.to_owned() },
            image: Image { docker_manifest_digest: digest.to_owned() },
            kind: SIGNATURE_TYPE.to_owned(),
        },
        optional: None,
    };
    serde_json::to_vec(&payload).expect("a payload serializes")
}

/// Why one signed payload was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum PayloadRefusal {
    /// None of the keys made the signature.
    #[error("not signed by any of the keys")]
    NotByKeys,
    /// Signed by a key, but the payload is not a cosign payload for the digest pulled.
    #[error("signed by {key}, but {reason}")]
    Mismatch {
        /// The fingerprint of the key that made the signature.
        key: String,
        /// What the payload says instead.
        reason: String,
    },
}

/// The fingerprint of the first of `keys` whose signature `signature` (base64) is over
/// `payload`, when that payload is a cosign payload naming the manifest `digest`.
pub fn verify_payload(payload: &[u8], signature: &str, digest: &str, keys: &[PublicKey]) -> Result<String, PayloadRefusal> {
    let key = keys.iter().find(|key| key.verifies(payload, signature)).ok_or(PayloadRefusal::NotByKeys)?;
    let mismatch = |reason: String| PayloadRefusal::Mismatch { key: key.fingerprint.clone(), reason };
    let parsed: Payload =
        serde_json::from_slice(payload).map_err(|e| mismatch(format!("its payload is not a simple-signing payload: {e}")))?;
    if parsed.critical.kind != SIGNATURE_TYPE {
        return Err(mismatch(format!("its payload's type is `{}`, not `{SIGNATURE_TYPE}`", parsed.critical.kind)));
    }
    if parsed.critical.image.docker_manifest_digest != digest {
        return Err(mismatch(format!("for the manifest {}, not {digest}", parsed.critical.image.docker_manifest_digest)));
    }
    Ok(key.fingerprint.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload, its signature and the public key, made by cosign: from the repository
    /// sigstore/sigstore-rs, `src/cosign/signature_layers.rs`,
    /// `build_correct_signature_layer_without_bundle` (the payload there is a JSON value
    /// serialized compactly, keys sorted, which is these bytes).
    const COSIGN_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENptdY/l3nB0yqkXLBWkZWQwo6+cu
OSWS1X9vPavpiQOoTTGC0xX57OojUadxF1cdQmrsiReWg2Wn4FneJfa8xw==
-----END PUBLIC KEY-----";
    const COSIGN_SIGNATURE: &str = "MEUCIQD6q/COgzOyW0YH1Dk+CCYSt4uAhm3FDHUwvPI55zwnlwIgE0ZK58ZOWpZw8YVmBapJhBqCfdPekIknimuO0xH8Jh8=";
    const COSIGN_REFERENCE: &str = "registry-testing.svc.lan/busybox";
    const COSIGN_DIGEST: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";
    /// Another key of the same file (its `is_signed_by_key` test), which did not sign.
    const OTHER_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAETJP9cqpUQsn2ggmJniWGjHdlsHzD
JsB89BPhZYch0U0hKANx5TY+ncrm0s8bfJxxHoenAEFhwhuXeb4PqIrtoQ==
-----END PUBLIC KEY-----";
    /// A key `cosign generate-key-pair` wrote with an empty password: from the repository
    /// sigstore/sigstore-rs, `tests/data/keys/cosign_generated_encrypted_empty_private.key`.
    const COSIGN_ENCRYPTED_EMPTY: &str = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjo2NTUzNiwiciI6
OCwicCI6MX0sInNhbHQiOiJFY3pJR3Z0bnpFcCsxaEpudERnbGI1UnoxN3gwQVMy
YklvWGRNcDQrU1NJPSJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wvc2VjcmV0Ym94
Iiwibm9uY2UiOiJtSVVKbG1OMzNINExvZ0dhaG5MamdmK3R4SmJwci93MCJ9LCJj
aXBoZXJ0ZXh0IjoiM3FtS2FidXRuYm1WT1IvTkZGM2NDaUErTXp1WWQ5L0VERDVI
MVlUSGhQVzZsSzAvdjVqdDZCQzlsME12NGV5am9qZkl0d3B6a2JJOXQrZGx5VXZ3
VUgvMWZjbkFZT2dEdXRLQzkvSkNiOE02SVY2VHpVaDF5c0ZFWDFzeG9xb1FzeUpL
bjM0UVlldFNlaVdDaGtmUHUyZXByQjFEV0pwekdzTGZIakxNVTkzOEdmNk1xM1A0
N0ZSd2syZzY1cFZnSGMwVWV1L1N1OUs0Zmc9PSJ9
-----END ENCRYPTED SIGSTORE PRIVATE KEY-----";

    fn key(pem: &str) -> PublicKey {
        PublicKey::from_pem(pem, Path::new("test.pub")).unwrap()
    }

    #[test]
    fn a_signature_cosign_made_verifies_over_our_payload() {
        let payload = payload(COSIGN_REFERENCE, COSIGN_DIGEST);
        let cosign = key(COSIGN_KEY);
        let other = key(OTHER_KEY);
        let found = verify_payload(&payload, COSIGN_SIGNATURE, COSIGN_DIGEST, &[other.clone(), cosign.clone()]).unwrap();
        assert_eq!(found, cosign.fingerprint());
        assert!(matches!(verify_payload(&payload, COSIGN_SIGNATURE, COSIGN_DIGEST, &[other]), Err(PayloadRefusal::NotByKeys)));
        // The same signature is not accepted for another manifest.
        let elsewhere = format!("sha256:{}", "0".repeat(64));
        let refusal = verify_payload(&payload, COSIGN_SIGNATURE, &elsewhere, std::slice::from_ref(&cosign)).unwrap_err();
        assert!(matches!(refusal, PayloadRefusal::Mismatch { .. }), "{refusal}");
        // One byte of the payload changed: not signed.
        let mut changed = payload.clone();
        changed[10] ^= 1;
        assert!(!cosign.verifies(&changed, COSIGN_SIGNATURE));
    }

    #[test]
    fn keys_round_trip_and_sign() {
        let private = PrivateKey::generate();
        let public = private.public();
        let again = PrivateKey::from_pem(&private.to_pem(), None, Path::new("k")).unwrap();
        assert_eq!(again.public(), public);
        let read = PublicKey::from_pem(&public.to_pem(), Path::new("k.pub")).unwrap();
        assert_eq!(read.fingerprint(), public.fingerprint());
        assert!(public.fingerprint().starts_with("sha256:") && public.fingerprint().len() == 71);
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = payload("127.0.0.1:5000/skills/x", &digest);
        let signature = private.sign(&payload);
        assert_eq!(verify_payload(&payload, &signature, &digest, &[read]).unwrap(), public.fingerprint());
        assert!(!PrivateKey::generate().public().verifies(&payload, &signature));
    }

    #[test]
    fn sec1_keys_are_read() {
        let private = PrivateKey::generate();
        let sec1 = p256::SecretKey::from(private.key.clone()).to_sec1_pem(LineEnding::LF).unwrap();
        assert!(sec1.starts_with("-----BEGIN EC PRIVATE KEY-----"));
        let read = PrivateKey::from_pem(&sec1, None, Path::new("ec.pem")).unwrap();
        assert_eq!(read.public(), private.public());
    }

    #[test]
    fn a_cosign_encrypted_key_opens_with_its_password_only() {
        let path = Path::new("cosign.key");
        let key = PrivateKey::from_pem(COSIGN_ENCRYPTED_EMPTY, None, path).unwrap();
        let payload = payload("r/x", COSIGN_DIGEST);
        assert!(key.public().verifies(&payload, &key.sign(&payload)));
        let wrong = PrivateKey::from_pem(COSIGN_ENCRYPTED_EMPTY, Some("not it"), path).unwrap_err();
        assert!(wrong.to_string().contains("password"), "{wrong}");
    }

    #[test]
    fn other_pem_is_refused_saying_what_to_use() {
        let path = Path::new("k.pem");
        let error = PrivateKey::from_pem("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n", None, path)
            .unwrap_err();
        assert!(error.to_string().contains("openssl pkcs8"), "{error}");
        let error = PublicKey::from_pem("not a key", Path::new("k.pub")).unwrap_err();
        assert!(error.to_string().contains("k.pub"), "{error}");
        assert_eq!(signature_tag(COSIGN_DIGEST), "sha256-f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b.sig");
    }
}
