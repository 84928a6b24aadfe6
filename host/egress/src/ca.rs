//! The host's egress CA: the certificate authority the sandbox proxy signs leaf
//! certificates with when it terminates TLS for a secret-bound host ([`crate::terminate`]).
//!
//! - One per host installation, made on first need in its directory (the facade uses
//!   `<data_dir>/egress-ca`): `ca.key` (the PKCS#8 key, DER, mode 0600, never group or world
//!   readable: a key file that is, or that is not a regular file of this user, is refused,
//!   not used) and `ca.pem` (the certificate, for the bundles sandboxes trust). The
//!   directory is 0700. [`EgressCa::rotate`] makes a new key and certificate; sandboxes
//!   started afterwards trust the new one only.
//! - The certificate's name carries the first bytes of its key's SHA-256, so two
//!   installations (or a CA and its rotation) never share a name, and the issuer of a leaf
//!   is rebuilt from the key alone.
//! - Leaves ([`Authority::leaf`]) are minted per host name on demand (ECDSA P-256, valid
//!   from a day ago for [`LEAF_DAYS`] days) and kept in a bounded cache ([`LEAF_CACHE`]
//!   names, the least recently used making room), each for at most [`LEAF_KEPT`].
//! - [`Authority::bundle`] is what a sandbox trusts: the system's bundle (when the host has
//!   one) followed by this CA.
//!
//! The sandbox never holds the key: only the proxy, on the host, signs.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use sha2::Digest;

/// Names whose leaves are kept at once.
pub const LEAF_CACHE: usize = 256;

/// How long a leaf is kept and reused before a new one is minted.
pub const LEAF_KEPT: Duration = Duration::from_secs(24 * 3600);

/// Days a leaf is valid (from a day before it was minted).
pub const LEAF_DAYS: i64 = 7;

/// Where the system's CA bundle may be, first found wins.
const SYSTEM_BUNDLES: &[&str] =
    &["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"];

/// Why the egress CA cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    /// Reading or writing its files failed.
    #[error("egress CA at {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file may be read by others, or is not a regular file owned by this user.
    #[error(
        "egress CA key {} is {what}; it is refused, not used: remove it (a new CA is made on next need) or `chmod 600` it and `chown` it to the host's user",
        path.display()
    )]
    UnsafeKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A key or certificate could not be made or read.
    #[error("egress CA: {0}")]
    Cert(String),
}

/// The egress CA of one host: its directory, loaded (or made) on first need.
pub struct EgressCa {
    dir: PathBuf,
    current: parking_lot::Mutex<Option<Arc<Authority>>>,
}

impl std::fmt::Debug for EgressCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressCa").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl EgressCa {
    /// The CA kept in `dir`; nothing is read or made until [`authority`](Self::authority).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into(), current: parking_lot::Mutex::new(None) }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA, read from its directory, or made there when it has none.
    pub fn authority(&self) -> Result<Arc<Authority>, CaError> {
        let mut current = self.current.lock();
        if let Some(authority) = &*current {
            return Ok(authority.clone());
        }
        let authority = Arc::new(match self.read()? {
            Some(authority) => authority,
            None => self.make()?,
        });
        *current = Some(authority.clone());
        Ok(authority)
    }

    /// The CA as it is now, never made: `None` when the directory has none yet.
    pub fn existing(&self) -> Result<Option<Arc<Authority>>, CaError> {
        let mut current = self.current.lock();
        if let Some(authority) = &*current {
            return Ok(Some(authority.clone()));
        }
        let authority = self.read()?.map(Arc::new);
        current.clone_from(&authority);
        Ok(authority)
    }

    /// The CA's certificate file (PEM), for other trust stores.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Make a new key and certificate, replacing the old ones (sandboxes started from now
    /// on trust the new CA only; leaves of the old one are forgotten).
    pub fn rotate(&self) -> Result<Arc<Authority>, CaError> {
        let mut current = self.current.lock();
        let authority = Arc::new(self.make()?);
        *current = Some(authority.clone());
        Ok(authority)
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join("ca.key")
    }

    /// The CA in the directory, if it has a key.
    fn read(&self) -> Result<Option<Authority>, CaError> {
        let path = self.key_path();
        let io = |source| CaError::Io { path: path.clone(), source };
        let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(CaError::UnsafeKey { path, what: "a symbolic link".into() });
            }
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        let unsafe_key = |what: String| CaError::UnsafeKey { path: path.clone(), what };
        if !meta.is_file() {
            return Err(unsafe_key("not a regular file".into()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(unsafe_key(format!("readable or writable by others (mode {:o})", meta.mode() & 0o777)));
        }
        let uid = rustix::process::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(unsafe_key(format!("owned by uid {}, not the host's {uid}", meta.uid())));
        }
        let der = std::io::Read::bytes(file).collect::<Result<Vec<u8>, _>>().map_err(io)?;
        let key = KeyPair::try_from(der.as_slice()).map_err(|e| CaError::Cert(format!("{}: {e}", path.display())))?;
        let params = ca_params(&key);
        // The certificate is made again from the key when it is missing or not this key's.
        let cert = std::fs::read(self.cert_path())
            .ok()
            .and_then(|pem| CertificateDer::from_pem_slice(&pem).ok())
            .filter(|cert| contains(cert, key.public_key_raw()));
        let cert = match cert {
            Some(cert) => cert,
            None => {
                let cert = params.self_signed(&key).map_err(|e| CaError::Cert(e.to_string()))?.der().clone();
                write_file(&self.cert_path(), pem("CERTIFICATE", &cert).as_bytes(), 0o644)?;
                cert
            }
        };
        Ok(Some(Authority::new(params, key, cert)))
    }

    /// A new key and certificate, written to the directory.
    fn make(&self) -> Result<Authority, CaError> {
        let io = |source| CaError::Io { path: self.dir.clone(), source };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        let key = KeyPair::generate().map_err(|e| CaError::Cert(e.to_string()))?;
        let params = ca_params(&key);
        let cert = params.self_signed(&key).map_err(|e| CaError::Cert(e.to_string()))?.der().clone();
        write_file(&self.key_path(), &key.serialize_der(), 0o600)?;
        write_file(&self.cert_path(), pem("CERTIFICATE", &cert).as_bytes(), 0o644)?;
        tracing::info!(dir = %self.dir.display(), "made the egress CA sandboxes trust for secret-bound hosts");
        Ok(Authority::new(params, key, cert))
    }
}

/// The CA's common name, from its key: it carries the key's fingerprint.
fn ca_name(key: &KeyPair) -> String {
    format!("skillhost egress CA {}", hex::encode(&sha2::Sha256::digest(key.public_key_raw())[..8]))
}

/// The CA's parameters, from its key alone.
fn ca_params(key: &KeyPair) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "skillhost");
    name.push(DnType::CommonName, ca_name(key));
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

/// Whether `haystack` holds `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Write `bytes` to `path` with `mode`, through a new file renamed into place.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CaError> {
    let io = |source| CaError::Io { path: path.to_owned(), source };
    let tmp = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).custom_flags(libc::O_NOFOLLOW).open(&tmp).map_err(io)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(io)?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// `der` as PEM with `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The system's CA bundle: the first of the usual paths the host has.
pub fn system_bundle() -> Option<String> {
    SYSTEM_BUNDLES.iter().find_map(|path| std::fs::read_to_string(path).ok())
}

/// A loaded CA: signs leaves for the proxy.
pub struct Authority {
    name: String,
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    leaves: parking_lot::Mutex<VecDeque<(String, Arc<CertifiedKey>, Instant)>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    fn new(params: CertificateParams, key: KeyPair, cert: CertificateDer<'static>) -> Self {
        Self { name: ca_name(&key), issuer: Issuer::new(params, key), cert, leaves: parking_lot::Mutex::default() }
    }

    /// Its common name (`skillhost egress CA` and its key's fingerprint).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SHA-256 of its certificate, hex: what `openssl x509 -fingerprint -sha256` shows.
    pub fn fingerprint(&self) -> String {
        hex::encode(sha2::Sha256::digest(&self.cert))
    }

    /// The CA's certificate.
    pub fn cert(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The CA's certificate as PEM.
    pub fn cert_pem(&self) -> String {
        pem("CERTIFICATE", &self.cert)
    }

    /// What a sandbox trusts: the system's CA bundle (the first of the usual paths the
    /// host has; none when it has none) followed by this CA.
    pub fn bundle(&self) -> String {
        let mut bundle = system_bundle().unwrap_or_default();
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str("# skillhost egress CA: the host's proxy, for hosts a secret is bound to\n");
        bundle.push_str(&self.cert_pem());
        bundle
    }

    /// A certificate and key for `name` (a DNS name, never an IP address), signed by this
    /// CA: from the cache when one was minted within [`LEAF_KEPT`], else minted now.
    pub fn leaf(&self, name: &str) -> Result<Arc<CertifiedKey>, CaError> {
        let name = name.to_ascii_lowercase();
        {
            let mut leaves = self.leaves.lock();
            leaves.retain(|(_, _, made)| made.elapsed() < LEAF_KEPT);
            if let Some(at) = leaves.iter().position(|(n, _, _)| *n == name) {
                let entry = leaves.remove(at).expect("the position was just found");
                let key = entry.1.clone();
                leaves.push_back(entry);
                return Ok(key);
            }
        }
        let leaf = Arc::new(self.mint(&name)?);
        let mut leaves = self.leaves.lock();
        leaves.push_back((name, leaf.clone(), Instant::now()));
        while leaves.len() > LEAF_CACHE {
            leaves.pop_front();
        }
        Ok(leaf)
    }

    fn mint(&self, name: &str) -> Result<CertifiedKey, CaError> {
        let fail = |e: &dyn std::fmt::Display| CaError::Cert(format!("cannot mint a certificate for `{name}`: {e}"));
        if name.parse::<std::net::IpAddr>().is_ok() {
            return Err(fail(&"an IP address is never given a certificate"));
        }
        let key = KeyPair::generate().map_err(|e| fail(&e))?;
        let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(|e| fail(&e))?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(LEAF_DAYS);
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| fail(&e))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| fail(&e))?;
        Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn made_once_kept_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let ca = EgressCa::new(dir.path().join("ca"));
        let first = ca.authority().unwrap();
        let key = std::fs::metadata(dir.path().join("ca/ca.key")).unwrap();
        assert_eq!(key.mode() & 0o777, 0o600, "the key is the host's alone");
        assert_eq!(std::fs::metadata(dir.path().join("ca")).unwrap().mode() & 0o777, 0o700);
        let again = EgressCa::new(dir.path().join("ca")).authority().unwrap();
        assert_eq!(first.cert(), again.cert(), "read back, not made again");
        assert!(again.bundle().ends_with(&first.cert_pem()), "the bundle ends with the CA");
    }

    #[test]
    fn a_key_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        EgressCa::new(dir.path()).authority().unwrap();
        for mode in [0o640, 0o604, 0o660] {
            std::fs::set_permissions(dir.path().join("ca.key"), std::fs::Permissions::from_mode(mode)).unwrap();
            let error = EgressCa::new(dir.path()).authority().unwrap_err().to_string();
            assert!(error.contains("refused") && error.contains("chmod 600"), "{error}");
        }
        std::fs::set_permissions(dir.path().join("ca.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path().join("ca.key"), link.path().join("ca.key")).unwrap();
        let error = EgressCa::new(link.path()).authority().unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
    }

    #[test]
    fn leaves_chain_to_the_ca_are_cached_and_bounded_and_rotation_changes_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let ca = EgressCa::new(dir.path());
        let authority = ca.authority().unwrap();
        let leaf = authority.leaf("API.example.com").unwrap();
        assert!(Arc::ptr_eq(&leaf, &authority.leaf("api.example.com").unwrap()), "cached by name");

        let mut roots = rustls::RootCertStore::empty();
        roots.add(authority.cert().clone()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let verify = |name: &str| {
            let name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
            verifier.verify_server_cert(&leaf.cert[0], &[], &name, &[], rustls::pki_types::UnixTime::now())
        };
        assert!(verify("api.example.com").is_ok());
        assert!(verify("other.example.com").is_err(), "a leaf is for its name only");
        assert!(authority.leaf("127.0.0.1").is_err(), "no leaf for an address");

        for i in 0..LEAF_CACHE + 10 {
            authority.leaf(&format!("h{i}.test")).unwrap();
        }
        assert_eq!(authority.leaves.lock().len(), LEAF_CACHE);

        let rotated = ca.rotate().unwrap();
        assert_ne!(rotated.cert(), authority.cert());
        assert_eq!(EgressCa::new(dir.path()).authority().unwrap().cert(), rotated.cert(), "the new CA is the one kept");
    }
}
