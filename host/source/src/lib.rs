//! Skills from anywhere, pinned and verified: where a skill's bytes come from when they are
//! not a local folder.
//!
//! - [`oci`]: a component (in the layout wasm-pkg-tools use) or a skill folder (one
//!   tar+gzip layer) in an OCI registry, pulled by tag or digest and pushed by `publish`;
//!   [`sign`] the cosign-format signatures stored beside it.
//! - [`git`]: a skill folder at a commit of a git repository, through the system `git`.
//! - [`index`]: the Agent Skills well-known index (`/.well-known/agent-skills/index.json`)
//!   and its archives, unpacked under [`archive`]'s rules.
//! - [`lock`]: `skills.lock`, the exact set of remote skills a team shares.
//!
//! **Invariant: nothing is written until it is verified.** A fetch returns the skill's
//! bytes in memory ([`Fetched`]), held to [`Caps`], their digest (and signature, when a key
//! is asked for) checked; the registry then installs exactly those bytes. A git clone is the
//! one thing on disk, in a staging directory removed whatever happens.

pub mod address;
pub mod archive;
pub mod error;
pub mod git;
pub mod http;
pub mod index;
pub mod install;
pub mod lock;
pub mod oci;
pub mod sign;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use address::SourceAddr;
pub use error::SourceError;
pub use install::{Installed, Installer, KeyPolicy, Outdated, Synced};
pub use skillhost_core::{Provenance, SignatureStatus};

/// What every download and unpacking is held to.
#[derive(Clone, Debug)]
pub struct Caps {
    /// Largest download (an artifact, an archive, a manifest), in bytes.
    pub download: u64,
    /// Largest total of a skill's unpacked files, in bytes.
    pub unpacked: u64,
    /// Most files in one skill.
    pub files: usize,
    /// Longest a whole fetch may take (connect, transfer, a git clone).
    pub timeout: Duration,
    /// Plain HTTP to a host that is not loopback (a registry or an index); off unless a
    /// human passed the flag that allows it.
    pub allow_http: bool,
    /// Hosts (`scheme://host[:port]`, `https://*.example.com`) a source may send a fetch to
    /// besides its own: a redirect, an index entry, a registry's token service or blob
    /// storage on another host. Empty by default: a fetch goes only to the scheme, host and
    /// port of the address it was asked for. `[sources] allow_hosts` of the host config.
    /// It never lets a remote source reach a loopback or private address (see [`http`]).
    pub allow_hosts: Vec<skillhost_core::egress::Rule>,
    /// How host names are looked up: the system's resolver unless a test hands in another.
    pub lookup: http::Lookup,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            download: 64 << 20,
            unpacked: 50 << 20,
            files: 1000,
            timeout: Duration::from_secs(120),
            allow_http: false,
            allow_hosts: Vec::new(),
            lookup: http::Lookup::default(),
        }
    }
}

impl Caps {
    /// Let sources send fetches to `rule` (`scheme://host[:port]`, `https://*.example.com`)
    /// besides their own host: an entry of `[sources] allow_hosts`. The rule is refused,
    /// saying how to write one, when it does not parse.
    pub fn allow_host(&mut self, rule: &str) -> Result<(), skillhost_core::egress::RuleError> {
        self.allow_hosts.push(skillhost_core::egress::Rule::parse(rule)?);
        Ok(())
    }
}

/// A skill's bytes as fetched, not yet written anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Artifact {
    /// A component (`NAME.wasm`), its manifest embedded.
    Component(Vec<u8>),
    /// A skill folder: relative `/`-separated path to contents.
    Folder(BTreeMap<String, Vec<u8>>),
}

/// One fetched skill: its bytes and where they came from.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The bytes.
    pub artifact: Artifact,
    /// Where they came from, pinned.
    pub provenance: Provenance,
}

/// Progress of a long download, for a terminal: `done` bytes of `total` (when known) of
/// the thing named by `what`.
pub trait FetchProgress: Send + Sync {
    /// `done` bytes of `what` so far, of `total` when the server said.
    fn bytes(&self, what: &str, done: u64, total: Option<u64>);
}

/// No progress shown.
pub struct Quiet;

impl FetchProgress for Quiet {
    fn bytes(&self, _: &str, _: u64, _: Option<u64>) {}
}

/// How a fetch runs: its caps, its progress, and the keys a signature must verify against.
#[derive(Clone)]
pub struct FetchOptions {
    /// Size, count and time caps.
    pub caps: Caps,
    /// Where progress goes.
    pub progress: Arc<dyn FetchProgress>,
    /// Public keys (PEM) one of which must have signed an OCI artifact; empty: signatures
    /// are not checked, and the provenance says so.
    pub verify_keys: Vec<sign::PublicKey>,
    /// Credentials for OCI registries.
    pub auth: oci::Auth,
    /// Where a git clone is staged (removed after the fetch).
    pub staging: std::path::PathBuf,
}

/// Fetch the skill `addr` names, checked (its digest, and its signature when
/// `options.verify_keys` is not empty).
/// The whole fetch (an index and its artifact, a clone and its archive) within
/// `options.caps.timeout`.
pub async fn fetch(addr: &SourceAddr, options: &FetchOptions) -> Result<Fetched, SourceError> {
    let fetch = async {
        match addr {
            SourceAddr::Oci(oci) => oci::pull(oci, options).await,
            SourceAddr::Git(git) => git::fetch(git, options).await,
            SourceAddr::Index(index) => index::fetch(index, options).await,
        }
    };
    within(addr, options, fetch).await
}

/// The digest `addr` names now (an OCI manifest, a git commit, an index entry's sha256),
/// fetching nothing else.
pub async fn resolve(addr: &SourceAddr, options: &FetchOptions) -> Result<String, SourceError> {
    let resolve = async {
        match addr {
            SourceAddr::Oci(oci) => oci::resolve(oci, options).await,
            SourceAddr::Git(git) => git::resolve(git, options).await,
            SourceAddr::Index(index) => index::resolve(index, options).await,
        }
    };
    within(addr, options, resolve).await
}

/// `work` on `addr`, stopped at `options.caps.timeout`.
async fn within<T>(
    addr: &SourceAddr,
    options: &FetchOptions,
    work: impl std::future::Future<Output = Result<T, SourceError>>,
) -> Result<T, SourceError> {
    tokio::time::timeout(options.caps.timeout, work).await.unwrap_or_else(|_| {
        Err(SourceError::Http {
            url: addr.to_string(),
            reason: format!("timed out after {:?}; raise --timeout if the source is slow", options.caps.timeout),
        })
    })
}
