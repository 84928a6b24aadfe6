//! The packages a skill's scripts declare, where the host takes them from, and what a lock
//! of them records.
//!
//! - [`declared_packages`]: the Python packages a skill's scripts declare (PEP 723 inline
//!   metadata, `requirements.txt`, the policy's), plain requirements only.
//! - [`PackageSources`]: the Python index and the npm registry, named by the host's
//!   configuration only (never by a skill, a lockfile, or the directory or environment the
//!   host was started from), shown in every approval request of a skill with packages and
//!   part of every lock and environment made from them.
//! - [`declared_node`]: a skill's `package.json` and `package-lock.json`, every `resolved`
//!   URL of which must lie on the host's registry.
//! - [`PackageLock`]: what a human approves: the exact packages with their artifact hashes,
//!   the index they come from, and the environments named by the hash of all of that
//!   ([`env_name`]), so that an environment made from anything else is never taken for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::RunPolicy;

/// The largest number of packages a skill may declare (its scripts and policy together).
pub const MAX_PACKAGES: usize = 64;

/// The Python packages a skill's scripts declare, the standard ways: PEP 723 inline
/// metadata in any `.py` file (`# /// script` … `dependencies = [...]` … `# ///`) and a
/// `requirements.txt` at the skill's root or in `scripts/`, plus those `policy` adds;
/// sorted and deduplicated. Only plain requirements count (`name[extras] SPECIFIERS;
/// markers`): an option (`-r`, `--index-url`), a URL or a direct reference is refused,
/// naming the file, so nothing but the host's package index is ever asked.
pub fn declared_packages(files: &BTreeMap<String, Vec<u8>>, policy: &RunPolicy) -> Result<Vec<String>, DeclaredError> {
    let mut found: Vec<String> = policy.packages.clone();
    for (path, bytes) in files {
        let Ok(text) = std::str::from_utf8(bytes) else { continue };
        if path.ends_with(".py") {
            for dep in pep723_dependencies(text).map_err(|source| DeclaredError::Script { path: path.clone(), source })?.unwrap_or_default()
            {
                check_requirement(&dep).map_err(|source| DeclaredError::InFile { path: path.clone(), line: None, source })?;
                found.push(dep);
            }
        } else if path == "requirements.txt" || path == "scripts/requirements.txt" {
            for (n, line) in text.lines().enumerate() {
                let line = line.split(" #").next().unwrap_or_default().trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                check_requirement(line).map_err(|source| DeclaredError::InFile { path: path.clone(), line: Some(n + 1), source })?;
                found.push(line.to_owned());
            }
        }
    }
    for requirement in &found {
        check_requirement(requirement)?;
    }
    found.sort();
    found.dedup();
    if found.len() > MAX_PACKAGES {
        return Err(DeclaredError::TooMany { count: found.len() });
    }
    Ok(found)
}

/// The `dependencies` of a PEP 723 `script` block, if `text` has one.
fn pep723_dependencies(text: &str) -> Result<Option<Vec<String>>, ScriptBlockError> {
    let mut lines = text.lines().skip_while(|l| l.trim_end() != "# /// script");
    if lines.next().is_none() {
        return Ok(None);
    }
    let mut toml_text = String::new();
    for line in lines {
        if line.trim_end() == "# ///" {
            #[derive(Deserialize)]
            struct Script {
                #[serde(default)]
                dependencies: Vec<String>,
            }
            let script: Script = toml::from_str(&toml_text).map_err(|source| ScriptBlockError::Toml { source })?;
            return Ok(Some(script.dependencies));
        }
        let content = line.strip_prefix("# ").or_else(|| line.strip_prefix('#')).ok_or(ScriptBlockError::NotAComment)?;
        toml_text.push_str(content);
        toml_text.push('\n');
    }
    Err(ScriptBlockError::NotClosed)
}

/// Whether `requirement` is a plain one: a name, extras, version specifiers and markers,
/// no option, URL or direct reference (what an installer could read as anything but a
/// package of the host's index).
pub fn check_requirement(requirement: &str) -> Result<(), RequirementError> {
    let bad = |why: &'static str| Err(RequirementError { requirement: crate::text::quote(requirement, 80), why });
    if requirement.is_empty() || requirement.len() > 200 {
        return bad("is empty or longer than 200 bytes");
    }
    if requirement.starts_with('-') {
        return bad("is an installer option, which a skill may not give");
    }
    if requirement.contains("://") || requirement.contains('@') {
        return bad("names a URL or a direct reference; packages come from the host's index only");
    }
    if !requirement.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        || !requirement.chars().all(|c| c.is_ascii_alphanumeric() || " ._-[],<>=!~;'\"()*".contains(c))
    {
        return bad("is not a requirement");
    }
    Ok(())
}

/// A requirement that is not a plain one (see [`check_requirement`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{requirement}` {why}; write `NAME==VERSION` or `NAME>=VERSION`")]
pub struct RequirementError {
    /// The requirement as written, quoted and cut for a message.
    pub requirement: String,
    /// What it is instead.
    pub why: &'static str,
}

/// Why a `.py` file's PEP 723 `# /// script` block cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptBlockError {
    /// Its TOML does not parse.
    #[error("is not valid TOML: {}", .source.message())]
    Toml {
        /// The parser's error.
        source: toml::de::Error,
    },
    /// A line inside it is not a comment.
    #[error("has a line not starting with `#`")]
    NotAComment,
    /// It has no closing `# ///`.
    #[error("is not closed with `# ///`")]
    NotClosed,
}

/// Why the Python packages a skill's scripts declare are refused (see
/// [`declared_packages`]); each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclaredError {
    /// A `# /// script` block cannot be read.
    #[error("{path}: its `# /// script` block {source}")]
    Script {
        /// The `.py` file.
        path: String,
        /// What is wrong with its block.
        source: ScriptBlockError,
    },
    /// A requirement in a file is not a plain one.
    #[error("{path}{}: {source}", line.map(|n| format!(":{n}")).unwrap_or_default())]
    InFile {
        /// The file.
        path: String,
        /// Its line, in a `requirements.txt`.
        line: Option<usize>,
        /// What is wrong with it.
        source: RequirementError,
    },
    /// A requirement of the run policy is not a plain one.
    #[error(transparent)]
    Policy(#[from] RequirementError),
    /// More than [`MAX_PACKAGES`].
    #[error("it declares {count} packages, more than the {MAX_PACKAGES} a skill may")]
    TooMany {
        /// How many it declares.
        count: usize,
    },
}

/// The Python index packages come from unless the host's configuration names another.
pub const PYPI: &str = "https://pypi.org/simple";
/// The npm registry node packages come from unless the host's configuration names another.
pub const NPM_REGISTRY: &str = "https://registry.npmjs.org/";

/// Where the host installs the packages skills declare from (see the module docs).
/// Default: [`PYPI`] and [`NPM_REGISTRY`], over the network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackageSources {
    /// Python packages.
    pub python: PythonIndex,
    /// Node packages.
    pub npm: NpmRegistry,
}

impl PackageSources {
    /// Whether both sources are usable: see [`PythonIndex::check`] and [`NpmRegistry::check`].
    pub fn check(&self) -> Result<(), SourcesError> {
        self.python.check()?;
        self.npm.check()
    }
}

/// Where Python packages come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PythonIndex {
    /// A package index (PEP 503 simple API), e.g. [`PYPI`]: `https://`, or `http://` to a
    /// loopback host only.
    Url(String),
    /// The wheels in a local directory and nothing else (uv's `--no-index --find-links
    /// DIR`): an offline host. Absolute.
    Wheels(PathBuf),
}

impl Default for PythonIndex {
    fn default() -> Self {
        Self::Url(PYPI.to_owned())
    }
}

impl PythonIndex {
    /// Whether it can be used: a URL as [`PythonIndex::Url`] says, with no user name,
    /// password, query or fragment; an absolute directory.
    pub fn check(&self) -> Result<(), SourcesError> {
        match self {
            Self::Url(url) => check_source_url(url).map(|_| ()),
            Self::Wheels(dir) if dir.is_absolute() => Ok(()),
            Self::Wheels(dir) => Err(SourcesError::RelativeWheels(dir.clone())),
        }
    }

    /// What an approval request shows and a lock records: the index's URL, or the wheels
    /// directory.
    pub fn describe(&self) -> String {
        match self {
            Self::Url(url) => url.clone(),
            Self::Wheels(dir) => format!("the wheels in {} (no index)", dir.display()),
        }
    }
}

/// Where node packages come from: a registry, over the network or from an npm cache
/// filled beforehand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpmRegistry {
    /// The registry's URL, e.g. [`NPM_REGISTRY`]: `https://`, or `http://` to a loopback
    /// host only. Every `resolved` URL of a skill's lockfile must lie under it (same
    /// scheme, host and port, its path a prefix).
    pub url: String,
    /// Install from this npm cache only, never the network (npm's `--offline --cache
    /// DIR`): an offline host. Default: none.
    pub offline_cache: Option<PathBuf>,
}

impl Default for NpmRegistry {
    fn default() -> Self {
        Self { url: NPM_REGISTRY.to_owned(), offline_cache: None }
    }
}

impl NpmRegistry {
    /// Whether it can be used: a URL as [`NpmRegistry::url`] says, with no user name,
    /// password, query or fragment; an absolute cache directory.
    pub fn check(&self) -> Result<(), SourcesError> {
        check_source_url(&self.url)?;
        match &self.offline_cache {
            Some(dir) if !dir.is_absolute() => Err(SourcesError::RelativeCache(dir.clone())),
            _ => Ok(()),
        }
    }

    /// Its URL ending in `/`: what npm is handed and what a lock records.
    pub fn base(&self) -> String {
        if self.url.ends_with('/') { self.url.clone() } else { format!("{}/", self.url) }
    }

    /// What an approval request shows.
    pub fn describe(&self) -> String {
        match &self.offline_cache {
            None => self.base(),
            Some(cache) => format!("{} (offline, from the npm cache {})", self.base(), cache.display()),
        }
    }

    /// Whether `resolved` (a lockfile's URL) lies on this registry: in canonical form (as
    /// a URL parser writes it back: no `..`, no escapes a parser would undo), with the
    /// registry's scheme, host and port, no user name or fragment, and a path under the
    /// registry's.
    pub fn holds(&self, resolved: &str) -> bool {
        let (Ok(base), Ok(url)) = (url::Url::parse(&self.base()), url::Url::parse(resolved)) else { return false };
        url.as_str() == resolved
            && url.scheme() == base.scheme()
            && url.host_str() == base.host_str()
            && url.port_or_known_default() == base.port_or_known_default()
            && url.username().is_empty()
            && url.password().is_none()
            && url.fragment().is_none()
            && url.path().starts_with(base.path())
    }
}

/// `url` parsed, when it may name a package source (see [`PythonIndex::check`]).
fn check_source_url(url: &str) -> Result<url::Url, SourcesError> {
    let shown = || crate::text::quote(url, 120);
    let parsed = url::Url::parse(url).map_err(|source| SourcesError::NotAUrl { url: shown(), source })?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(SourcesError::NotHttps { url: shown() }),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(SourcesError::Credentials { url: shown() });
    }
    if parsed.as_str() != url && parsed.as_str() != format!("{url}/") {
        return Err(SourcesError::NotCanonical { url: shown(), canonical: parsed.to_string() });
    }
    Ok(parsed)
}

/// The node packages a skill's scripts declare: a `package.json` with dependencies and
/// the `package-lock.json` beside it (at the skill's root or in `scripts/`), which fixes
/// every package to a version, a URL on the host's registry and an integrity hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePackages {
    /// Where the two files are: `""` or `"scripts/"`.
    pub dir: String,
    /// SHA-256 over both files: what a lock of them records.
    pub hash: String,
    /// Every package the lockfile installs (dev ones left out), `name@version`, sorted.
    pub packages: Vec<String>,
    /// The integrity hash of each of `packages` (`sha512-…`; two when two entries of one
    /// version differ, space-separated).
    pub integrity: BTreeMap<String, String>,
}

/// The node packages `files` declare, if any (see [`NodePackages`]). Refused, naming the
/// file and, where it can be found, the line: a `package.json` with dependencies but no
/// lockfile, a lockfile older than npm 7's (no `packages`), an entry that is not a
/// tarball with an integrity hash (a link, a git or file source), and any `resolved` URL
/// (of a dev package too) that is not on `registry` ([`NpmRegistry::holds`]): the host
/// installs from its registry only, whatever the lockfile says.
pub fn declared_node(files: &BTreeMap<String, Vec<u8>>, registry: &NpmRegistry) -> Result<Option<NodePackages>, NodeError> {
    let Some(dir) = ["", "scripts/"].into_iter().find(|dir| files.contains_key(&format!("{dir}package.json"))) else { return Ok(None) };
    let manifest_path = format!("{dir}package.json");
    let manifest: serde_json::Value =
        serde_json::from_slice(&files[&manifest_path]).map_err(|source| NodeError::Json { path: manifest_path.clone(), source })?;
    if manifest.get("dependencies").and_then(serde_json::Value::as_object).is_none_or(serde_json::Map::is_empty) {
        return Ok(None);
    }
    let lock_path = format!("{dir}package-lock.json");
    let lock_bytes =
        files.get(&lock_path).ok_or_else(|| NodeError::NoLockfile { manifest: manifest_path.clone(), lock: lock_path.clone() })?;
    let lock_text = String::from_utf8_lossy(lock_bytes);
    let lock: serde_json::Value =
        serde_json::from_slice(lock_bytes).map_err(|source| NodeError::Json { path: lock_path.clone(), source })?;
    let entries =
        lock.get("packages").and_then(serde_json::Value::as_object).ok_or_else(|| NodeError::OldLockfile { lock: lock_path.clone() })?;
    // `FILE:LINE` of the first place `value` (as JSON) is written, else of `key`.
    let at = |value: &str, key: &str| {
        let line = [value, key]
            .iter()
            .filter_map(|v| serde_json::to_string(v).ok())
            .find_map(|needle| lock_text.find(&needle))
            .map(|offset| lock_text[..offset].matches('\n').count() + 1);
        line.map_or_else(|| lock_path.clone(), |line| format!("{lock_path}:{line}"))
    };
    let mut found: Vec<(String, String)> = Vec::new();
    for (key, entry) in entries {
        let Some((_, name)) = key.rsplit_once("node_modules/") else { continue };
        let field = |f: &str| entry.get(f).and_then(serde_json::Value::as_str);
        let shown = crate::text::quote(key, 120);
        let web = |url: &str| ["https://", "http://"].iter().any(|s| url.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s)));
        // Every URL is checked, a dev package's too: npm is never handed one elsewhere.
        if let Some(resolved) = field("resolved").filter(|r| web(r))
            && !registry.holds(resolved)
        {
            return Err(NodeError::OffRegistry {
                at: at(resolved, key),
                package: shown,
                resolved: crate::text::quote(resolved, 160),
                registry: registry.base(),
            });
        }
        // Dev packages are never installed; a bundled one is never fetched: its files come
        // inside its parent's tarball, which its parent's hash checks, and it is not shown
        // as a package of its own checked by a hash of its own.
        if [entry.get("dev"), entry.get("inBundle")].contains(&Some(&serde_json::Value::Bool(true))) {
            continue;
        }
        if field("name").is_some_and(|real| real != name) {
            return Err(NodeError::Alias {
                at: at(key, key),
                package: shown,
                real: crate::text::quote(field("name").unwrap_or_default(), 120),
            });
        }
        let (Some(version), Some(resolved), Some(integrity)) = (field("version"), field("resolved"), field("integrity")) else {
            return Err(NodeError::NotFromRegistry { at: at(key, key), package: shown });
        };
        let plain = |text: &str| !text.is_empty() && text.len() <= 214 && text.chars().all(|c| c.is_ascii_graphic());
        if !plain(name) || !plain(version) {
            return Err(NodeError::NotPlain { at: at(key, key), package: shown });
        }
        if !web(resolved) || entry.get("link").is_some() {
            return Err(NodeError::NotATarball { at: at(resolved, key), package: shown, resolved: crate::text::quote(resolved, 120) });
        }
        // The registry's own tarball of exactly this name and version: a URL on the
        // registry but of another package would be installed under this name.
        let file = name.rsplit_once('/').map_or(name, |(_, base)| base);
        let tarball = format!("{}{name}/-/{file}-{version}.tgz", registry.base());
        if resolved != tarball {
            return Err(NodeError::OtherTarball {
                at: at(resolved, key),
                package: shown,
                resolved: crate::text::quote(resolved, 160),
                of: format!("{name}@{version}"),
                tarball,
            });
        }
        let integrity_ok = integrity.split_whitespace().all(|one| {
            one.split_once('-').is_some_and(|(algorithm, digest)| {
                matches!(algorithm, "sha512" | "sha384" | "sha256")
                    && !digest.is_empty()
                    && digest.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c))
            })
        });
        if integrity.is_empty() || integrity.len() > 1024 || !integrity_ok {
            return Err(NodeError::BadIntegrity { at: at(integrity, key), package: shown });
        }
        found.push((format!("{name}@{version}"), integrity.to_owned()));
    }
    found.sort();
    found.dedup();
    let mut integrity: BTreeMap<String, String> = BTreeMap::new();
    for (package, hash) in found {
        integrity.entry(package).and_modify(|all| *all = format!("{all} {hash}")).or_insert(hash);
    }
    let packages: Vec<String> = integrity.keys().cloned().collect();
    if packages.len() > MAX_PACKAGES * 8 {
        return Err(NodeError::TooMany { lock: lock_path, count: packages.len() });
    }
    let mut hasher = sha2::Sha256::new();
    hasher.update(&files[&manifest_path]);
    hasher.update(lock_bytes);
    Ok(Some(NodePackages { dir: dir.to_owned(), hash: hex::encode(hasher.finalize()), packages, integrity }))
}

/// Why a package source of the host's configuration cannot be used (see
/// [`PackageSources::check`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourcesError {
    /// [`PythonIndex::Wheels`] is relative.
    #[error("the Python wheels directory {} is not an absolute path", .0.display())]
    RelativeWheels(PathBuf),
    /// [`NpmRegistry::offline_cache`] is relative.
    #[error("the npm cache {} is not an absolute path", .0.display())]
    RelativeCache(PathBuf),
    /// The URL does not parse.
    #[error("the package source {url} is not a URL: {source}")]
    NotAUrl {
        /// The URL, quoted.
        url: String,
        /// The parser's error.
        source: url::ParseError,
    },
    /// Neither `https://` nor `http://` to a loopback host.
    #[error("the package source {url} must be https:// (http:// only to a loopback host)")]
    NotHttps {
        /// The URL, quoted.
        url: String,
    },
    /// It holds a user name, password, query or fragment.
    #[error("the package source {url} may not hold a user name, password, query or fragment")]
    Credentials {
        /// The URL, quoted.
        url: String,
    },
    /// A parser would write it otherwise.
    #[error("the package source {url} is not in canonical form; write {canonical}")]
    NotCanonical {
        /// The URL, quoted.
        url: String,
        /// How a parser writes it.
        canonical: String,
    },
}

/// Why a skill's node packages are refused (see [`declared_node`]); each names the file
/// and, where it can be found, the line (`at`: `FILE` or `FILE:LINE`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// `package.json` or `package-lock.json` is not JSON.
    #[error("{path}: not valid JSON: {source}")]
    Json {
        /// The file.
        path: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// Dependencies without a lockfile.
    #[error("{manifest} declares dependencies but there is no {lock} beside it; run `npm install --package-lock-only` and add it")]
    NoLockfile {
        /// The `package.json`.
        manifest: String,
        /// The lockfile it needs.
        lock: String,
    },
    /// A lockfile without `packages`.
    #[error("{lock} has no `packages` (a lockfile of npm 6 or older); write it again with npm 7 or newer")]
    OldLockfile {
        /// The lockfile.
        lock: String,
    },
    /// A `resolved` URL not on the host's registry.
    #[error(
        "{at}: {package} resolves to {resolved}, which is not on this host's npm registry {registry}; the host installs from its registry only (write the lockfile again against it: `npm install --package-lock-only --registry {registry}`)"
    )]
    OffRegistry {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
        /// The URL, quoted.
        resolved: String,
        /// The host's registry.
        registry: String,
    },
    /// An `npm:` alias.
    #[error("{at}: {package} is an alias of {real} (`npm:`); the host installs each package under its own name only")]
    Alias {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
        /// The package it stands for, quoted.
        real: String,
    },
    /// An entry without a version, URL or integrity.
    #[error("{at}: {package} has no version, resolved URL or integrity; only registry packages can be installed")]
    NotFromRegistry {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
    },
    /// A name or version that is not plain.
    #[error("{at}: {package} is not a plain package name and version")]
    NotPlain {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
    },
    /// A link, a git or a file source.
    #[error("{at}: {package} comes from `{resolved}`, not a registry tarball")]
    NotATarball {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
        /// Where it comes from, quoted.
        resolved: String,
    },
    /// A URL on the registry, but not this package's tarball.
    #[error("{at}: {package} resolves to {resolved}, which is not the registry's tarball of {of} ({tarball})")]
    OtherTarball {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
        /// The URL, quoted.
        resolved: String,
        /// `name@version`.
        of: String,
        /// The tarball's URL it should be.
        tarball: String,
    },
    /// An integrity that is not a hash.
    #[error("{at}: {package} has an integrity that is not a hash (`sha512-…`)")]
    BadIntegrity {
        /// Where.
        at: String,
        /// The lockfile's key, quoted.
        package: String,
    },
    /// More than eight times [`MAX_PACKAGES`].
    #[error("{lock} installs {count} packages, more than the {} a skill may", MAX_PACKAGES * 8)]
    TooMany {
        /// The lockfile.
        lock: String,
        /// How many it installs.
        count: usize,
    },
}

/// Why a [`PackageLock`] is stale (see [`PackageLock::fresh`]): the skill's packages must
/// be resolved and approved again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StaleLock {
    /// The declared packages differ.
    #[error("its packages changed since they were resolved")]
    Changed,
    /// It has Python packages, and none are declared.
    #[error("it records Python packages none declares")]
    UndeclaredPython,
    /// Python packages are declared, and it has none.
    #[error("it records no Python package")]
    NoPython,
    /// Another Python index.
    #[error("it was resolved from {was}, and this host's Python index is {now}")]
    OtherIndex {
        /// The index it records.
        was: String,
        /// This host's.
        now: String,
    },
    /// A package without hashes.
    #[error("not every Python package has its artifact hashes")]
    Unhashed,
    /// An environment not named by its manifest.
    #[error("its Python environment is not named by what it holds")]
    PythonEnv,
    /// Another npm registry.
    #[error("its node packages come from {was}, and this host's npm registry is {now}")]
    OtherRegistry {
        /// The registry it records.
        was: String,
        /// This host's.
        now: String,
    },
    /// The lockfile changed.
    #[error("its node packages are not those of its lockfile")]
    NodeChanged,
    /// Node packages in one and not the other.
    #[error("its node packages are not those declared")]
    NodeUndeclared,
}

/// Why a lock file cannot be read (see [`PackageLock::read`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockReadError {
    /// Not UTF-8.
    #[error("{}: not UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// Not a lock.
    #[error("{}: {}", path.display(), source.message())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// Over the cap.
    #[error("{}: too large", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Reading it failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The kind of a package environment: the prefix of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvKind {
    /// A Python venv: `py-HASH`.
    Python,
    /// A `node_modules` tree: `node-HASH`.
    Node,
}

impl EnvKind {
    /// `py` or `node`.
    pub fn prefix(self) -> &'static str {
        match self {
            EnvKind::Python => "py",
            EnvKind::Node => "node",
        }
    }
}

/// The name of the environment made from `manifest` (a lock's
/// [`python_manifest`](PackageLock::python_manifest) or [`NodeLock::manifest`]):
/// `PREFIX-` and 32 hex digits of its SHA-256. The environment records its manifest, so
/// that it is used only when what it was made from hashes to its name.
pub fn env_name(kind: EnvKind, manifest: &str) -> String {
    format!("{}-{}", kind.prefix(), &hex::encode(sha2::Sha256::digest(manifest))[..32])
}

/// The kind of an environment named `name`, if it is a well-formed name ([`env_name`]).
pub fn env_kind(name: &str) -> Option<EnvKind> {
    let (kind, hash) = name.split_once('-')?;
    let kind = [EnvKind::Python, EnvKind::Node].into_iter().find(|k| k.prefix() == kind)?;
    (hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some(kind)
}

/// The packages a skill's scripts declared, resolved to exact versions and artifact hashes
/// from the host's sources before a human was asked, and the environments they are
/// installed into once approved (kept beside its policy; written by the host, never by the
/// skill). An environment's name is the hash of everything that decides its bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageLock {
    /// The hash of what was declared ([`declared_hash`](Self::declared_hash)): a changed
    /// declaration makes it stale.
    pub declared: String,
    /// The Python index they were resolved from ([`PythonIndex::describe`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub index: String,
    /// The Python they were resolved for: its version and prefix.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub python: String,
    /// Every Python package, `name==version`, sorted.
    #[serde(default)]
    pub packages: Vec<String>,
    /// The Python environment's name ([`env_name`] of
    /// [`python_manifest`](Self::python_manifest)), shared by skills with the same
    /// manifest; empty when none was declared.
    #[serde(default)]
    pub env: String,
    /// The artifact hashes each of `packages` may be installed from (`sha256:HEX`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hashes: BTreeMap<String, Vec<String>>,
    /// The node packages, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeLock>,
}

/// Node packages as a skill's lockfile fixes them, from the host's registry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeLock {
    /// Every package, `name@version`, sorted.
    pub packages: Vec<String>,
    /// The registry every one of them comes from ([`NpmRegistry::base`]).
    #[serde(default)]
    pub registry: String,
    /// The hash of the skill's `package.json` and `package-lock.json` ([`NodePackages::hash`]).
    #[serde(default)]
    pub files: String,
    /// The environment's name ([`env_name`] of [`manifest`](Self::manifest)), shared by
    /// skills with the same manifest.
    pub env: String,
    /// The integrity hash of each of `packages`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub integrity: BTreeMap<String, String>,
}

impl NodeLock {
    /// The lock of `node` from `registry`.
    pub fn of(node: &NodePackages, registry: &NpmRegistry) -> Self {
        let mut lock = Self {
            packages: node.packages.clone(),
            registry: registry.base(),
            files: node.hash.clone(),
            env: String::new(),
            integrity: node.integrity.clone(),
        };
        lock.env = env_name(EnvKind::Node, &lock.manifest());
        lock
    }

    /// Everything that decides the bytes of its environment, as text: the registry, the
    /// two files' hash and every package with its integrity. What the environment records.
    pub fn manifest(&self) -> String {
        let mut text = format!("skillhost node environment 1\nregistry {}\nfiles {}\n", self.registry, self.files);
        for package in &self.packages {
            text.push_str(&format!("{package} {}\n", self.integrity.get(package).map_or("", String::as_str)));
        }
        text
    }
}

impl PackageLock {
    /// The hash a lock of the Python requirements `declared` and the node packages `node`
    /// records.
    pub fn declared_hash(declared: &[String], node: Option<&NodePackages>) -> String {
        let node = node.map_or("", |n| n.hash.as_str());
        hex::encode(sha2::Sha256::digest(format!("{}\nnode {node}", declared.join("\n"))))
    }

    /// Everything that decides the bytes of its Python environment, as text: the index,
    /// the Python, every package with its artifact hashes. What the environment records.
    pub fn python_manifest(&self) -> String {
        let mut text = format!("skillhost python environment 1\nindex {}\npython {}\n", self.index, self.python);
        for package in &self.packages {
            let hashes = self.hashes.get(package).map(|h| h.join(" ")).unwrap_or_default();
            text.push_str(&format!("{package} {hashes}\n"));
        }
        text
    }

    /// What an approval binds to: both manifests.
    pub fn binding(&self) -> String {
        let node = self.node.as_ref().map(NodeLock::manifest).unwrap_or_default();
        format!("{}\n{node}", if self.packages.is_empty() { String::new() } else { self.python_manifest() })
    }

    /// Whether this lock is the one of the Python requirements `python` and the node
    /// packages `node` from `sources`, whole and consistent (each environment named by its
    /// manifest's hash, every package with its hashes); else why not. A lock that is not
    /// is stale: the skill's packages must be resolved and approved again.
    pub fn fresh(&self, python: &[String], node: Option<&NodePackages>, sources: &PackageSources) -> Result<(), StaleLock> {
        if self.declared != Self::declared_hash(python, node) {
            return Err(StaleLock::Changed);
        }
        if python.is_empty() {
            if !self.packages.is_empty() || !self.env.is_empty() {
                return Err(StaleLock::UndeclaredPython);
            }
        } else {
            if self.packages.is_empty() {
                return Err(StaleLock::NoPython);
            }
            if self.index != sources.python.describe() {
                return Err(StaleLock::OtherIndex { was: self.index.clone(), now: sources.python.describe() });
            }
            let hashed = self.packages.iter().all(|p| self.hashes.get(p).is_some_and(|h| !h.is_empty()));
            if !hashed || self.hashes.len() != self.packages.len() {
                return Err(StaleLock::Unhashed);
            }
            if self.env != env_name(EnvKind::Python, &self.python_manifest()) {
                return Err(StaleLock::PythonEnv);
            }
        }
        match (node, &self.node) {
            (None, None) => Ok(()),
            (Some(node), Some(lock)) => {
                if *lock != NodeLock::of(node, &sources.npm) {
                    return Err(if lock.registry != sources.npm.base() {
                        StaleLock::OtherRegistry { was: lock.registry.clone(), now: sources.npm.base() }
                    } else {
                        StaleLock::NodeChanged
                    });
                }
                Ok(())
            }
            _ => Err(StaleLock::NodeUndeclared),
        }
    }

    /// Read the lock at `path`, if there is one.
    pub fn read(path: &Path) -> Result<Option<Self>, LockReadError> {
        let path_buf = || path.to_owned();
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() <= super::MAX_POLICY_BYTES * 64 => {
                let text = std::str::from_utf8(&bytes).map_err(|_| LockReadError::NotUtf8 { path: path_buf() })?;
                Self::parse(text, path).map(Some)
            }
            Ok(_) => Err(LockReadError::TooLarge { path: path_buf() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LockReadError::Io { path: path_buf(), source }),
        }
    }

    /// The lock in `text` (the file at `path`, for errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, LockReadError> {
        if text.len() > super::MAX_POLICY_BYTES * 64 {
            return Err(LockReadError::TooLarge { path: path.to_owned() });
        }
        toml::from_str(text).map_err(|source| LockReadError::Toml { path: path.to_owned(), source })
    }

    /// Its file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        list.iter().map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec())).collect()
    }

    const MANIFEST: &str = r#"{"dependencies": {"a": "^1"}}"#;

    /// A lockfile whose package `a` resolves to `resolved`.
    fn lockfile(resolved: &str) -> String {
        format!(
            "{{\"lockfileVersion\": 3, \"packages\": {{\n  \"\": {{}},\n  \"node_modules/a\": {{\"version\": \"1.2.0\", \"resolved\": \"{resolved}\", \"integrity\": \"sha512-x\"}},\n  \"node_modules/a/node_modules/@s/b\": {{\"version\": \"2.0.0\", \"resolved\": \"https://registry.npmjs.org/@s/b/-/b-2.0.0.tgz\", \"integrity\": \"sha512-y\"}},\n  \"node_modules/dev\": {{\"version\": \"9.0.0\", \"dev\": true}}\n}}}}"
        )
    }

    #[test]
    fn node_packages_come_from_a_lockfile_of_registry_tarballs() {
        let npm = NpmRegistry::default();
        let lock = lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz");
        let node =
            declared_node(&files(&[("scripts/package.json", MANIFEST), ("scripts/package-lock.json", &lock)]), &npm).unwrap().unwrap();
        assert_eq!(node.dir, "scripts/");
        assert_eq!(node.packages, ["@s/b@2.0.0", "a@1.2.0"]);
        assert_eq!(node.integrity["a@1.2.0"], "sha512-x");
        assert_eq!(declared_node(&files(&[("package.json", r#"{"name": "x"}"#)]), &npm).unwrap(), None, "no dependencies");
        for (files, says) in [
            (files(&[("package.json", MANIFEST)]), "no package-lock.json"),
            (
                files(&[("package.json", MANIFEST), ("package-lock.json", &lockfile("file:../a.tgz"))]),
                "package-lock.json:3: \"node_modules/a\" comes from `\"file:../a.tgz\"`, not a registry tarball",
            ),
            (files(&[("package.json", MANIFEST), ("package-lock.json", r#"{"lockfileVersion": 1, "dependencies": {}}"#)]), "npm 6"),
            (
                files(&[
                    ("package.json", MANIFEST),
                    ("package-lock.json", &lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz").replace("1.2.0\"", "1.2.0\\u001b[2J\"")),
                ]),
                "not a plain package name",
            ),
            (
                files(&[
                    ("package.json", MANIFEST),
                    ("package-lock.json", &lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz").replace("sha512-x", "md5-x")),
                ]),
                "integrity that is not a hash",
            ),
        ] {
            let error = declared_node(&files, &npm).unwrap_err().to_string();
            assert!(error.contains(says), "{says}: {error}");
        }
    }

    #[test]
    fn a_resolved_url_off_the_hosts_registry_is_refused_naming_its_line() {
        let npm = NpmRegistry::default();
        for resolved in [
            "https://evil.example/a/-/a-1.2.0.tgz",
            "https://registry.npmjs.org.evil.example/a/-/a-1.2.0.tgz",
            "https://registry.npmjs.org@evil.example/a/-/a-1.2.0.tgz",
            "https://user@registry.npmjs.org/a/-/a-1.2.0.tgz",
            "http://registry.npmjs.org/a/-/a-1.2.0.tgz",
            "https://registry.npmjs.org:8443/a/-/a-1.2.0.tgz",
            "https://registry.npmjs.org/../evil/a-1.2.0.tgz",
            "https://registry.npmjs.org/%2e%2e/evil/a-1.2.0.tgz",
            "https://REGISTRY.npmjs.org/a/-/a-1.2.0.tgz",
            "https://registry.npmjs.org/a/-/a-1.2.0.tgz#frag",
        ] {
            let skill = files(&[("package.json", MANIFEST), ("package-lock.json", &lockfile(resolved))]);
            let error = declared_node(&skill, &npm).unwrap_err().to_string();
            assert!(error.starts_with("package-lock.json:3: \"node_modules/a\" resolves to"), "{resolved}: {error}");
            assert!(error.contains("not on this host's npm registry https://registry.npmjs.org/"), "{error}");
        }
        // A dev package's URL too, though npm would not fetch it.
        let dev = lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz")
            .replace("\"dev\": true", "\"dev\": true, \"resolved\": \"https://evil.example/dev.tgz\"");
        let error = declared_node(&files(&[("package.json", MANIFEST), ("package-lock.json", &dev)]), &npm).unwrap_err().to_string();
        assert!(error.starts_with("package-lock.json:5: \"node_modules/dev\""), "{error}");
        // Another registry's host: its lockfiles only.
        let mirror = NpmRegistry { url: "https://npm.example.com/mirror".into(), offline_cache: None };
        let on_mirror = lockfile("https://npm.example.com/mirror/a/-/a-1.2.0.tgz")
            .replace("https://registry.npmjs.org/@s", "https://npm.example.com/mirror/@s");
        assert!(declared_node(&files(&[("package.json", MANIFEST), ("package-lock.json", &on_mirror)]), &mirror).unwrap().is_some());
        let beside = on_mirror.replace("/mirror/a/", "/mirrored/a/");
        assert!(declared_node(&files(&[("package.json", MANIFEST), ("package-lock.json", &beside)]), &mirror).is_err());
        let npmjs = lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz");
        assert!(declared_node(&files(&[("package.json", MANIFEST), ("package-lock.json", &npmjs)]), &mirror).is_err());
    }

    /// Attack (round 5): the request shows each node package by the name its lockfile key
    /// gives; a `resolved` URL on the registry but of another package (`lodash` installed
    /// from `evilpkg`'s tarball), an alias, a weak hash, or an entry "in a bundle" (never
    /// fetched, its files come in the parent's tarball) must not be shown as that package,
    /// checked by its own hash.
    #[test]
    fn a_node_package_is_the_registrys_tarball_of_the_name_it_is_shown_by() {
        let npm = NpmRegistry::default();
        let of = |key: &str, entry: &str| {
            let lock = format!("{{\"lockfileVersion\": 3, \"packages\": {{\"\": {{}}, \"{key}\": {entry}}}}}");
            declared_node(&files(&[("package.json", MANIFEST), ("package-lock.json", &lock)]), &npm)
        };
        let good =
            r#"{"version": "4.17.21", "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz", "integrity": "sha512-v2k"}"#;
        assert_eq!(of("node_modules/lodash", good).unwrap().unwrap().packages, ["lodash@4.17.21"]);
        let scoped = r#"{"version": "2.0.0", "resolved": "https://registry.npmjs.org/@s/b/-/b-2.0.0.tgz", "integrity": "sha512-y"}"#;
        assert_eq!(of("node_modules/@s/b", scoped).unwrap().unwrap().packages, ["@s/b@2.0.0"]);
        for (key, entry, says) in [
            (
                "node_modules/lodash",
                r#"{"version": "4.17.21", "resolved": "https://registry.npmjs.org/evilpkg/-/evilpkg-1.0.0.tgz", "integrity": "sha512-x"}"#,
                "is not the registry's tarball of lodash@4.17.21",
            ),
            (
                "node_modules/lodash",
                r#"{"version": "4.17.21", "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.20.tgz", "integrity": "sha512-x"}"#,
                "is not the registry's tarball of lodash@4.17.21",
            ),
            (
                "node_modules/lodash",
                r#"{"name": "evilpkg", "version": "1.0.0", "resolved": "https://registry.npmjs.org/evilpkg/-/evilpkg-1.0.0.tgz", "integrity": "sha512-x"}"#,
                "an alias",
            ),
            ("node_modules/lodash", &good.replace("sha512-v2k", "sha1-abc"), "integrity that is not a hash"),
        ] {
            let error = of(key, entry).unwrap_err().to_string();
            assert!(error.contains(says), "{entry}: {error}");
        }
        let bundled = of("node_modules/evilpkg2/node_modules/lodash", &good.replace("{", r#"{"inBundle": true, "#)).unwrap();
        assert_eq!(bundled.unwrap().packages, Vec::<String>::new(), "a bundled entry is not shown as a package checked on its own");
    }

    #[test]
    fn a_package_source_is_https_or_loopback_http_without_credentials() {
        for good in [PYPI, "https://pypi.example.com/simple/", "http://127.0.0.1:8080/simple", "http://localhost:1/", "http://[::1]:9/x"] {
            assert!(PythonIndex::Url(good.into()).check().is_ok(), "{good}");
        }
        for bad in [
            "http://pypi.org/simple",
            "ftp://pypi.org/simple",
            "https://user:pw@pypi.org/simple",
            "https://pypi.org/simple?x=1",
            "https://pypi.org/simple#x",
            "https://pypi.org/a/../simple",
            "not a url",
        ] {
            assert!(PythonIndex::Url(bad.into()).check().is_err(), "{bad}");
        }
        assert!(PythonIndex::Wheels("relative".into()).check().is_err());
        assert!(NpmRegistry { url: NPM_REGISTRY.into(), offline_cache: Some("cache".into()) }.check().is_err());
        assert_eq!(NpmRegistry { url: "https://npm.example.com".into(), offline_cache: None }.base(), "https://npm.example.com/");
    }

    #[test]
    fn a_lock_is_fresh_only_for_its_declaration_sources_and_manifests() {
        let sources = PackageSources::default();
        let python = vec!["tinypkg>=1".to_owned()];
        let mut lock = PackageLock {
            declared: PackageLock::declared_hash(&python, None),
            index: sources.python.describe(),
            python: "3.11.2 /usr".into(),
            packages: vec!["tinypkg==1.2.3".into()],
            hashes: BTreeMap::from([("tinypkg==1.2.3".to_owned(), vec![format!("sha256:{}", "a".repeat(64))])]),
            ..PackageLock::default()
        };
        lock.env = env_name(EnvKind::Python, &lock.python_manifest());
        assert_eq!(lock.fresh(&python, None, &sources), Ok(()));
        assert_eq!(env_kind(&lock.env), Some(EnvKind::Python));
        assert_eq!(PackageLock::read_text(&lock.to_toml()), lock, "it reads back what it writes");

        let other_index = PackageSources { python: PythonIndex::Url("https://pypi.example.com/simple".into()), ..sources.clone() };
        assert!(
            lock.fresh(&python, None, &other_index)
                .unwrap_err()
                .to_string()
                .contains("this host's Python index is https://pypi.example.com/simple")
        );
        assert!(lock.fresh(&["tinypkg>=2".into()], None, &sources).is_err());
        let mut unhashed = lock.clone();
        unhashed.hashes.clear();
        assert!(unhashed.fresh(&python, None, &sources).is_err());
        let mut renamed = lock.clone();
        renamed.hashes.insert("tinypkg==1.2.3".into(), vec![format!("sha256:{}", "b".repeat(64))]);
        assert!(
            renamed.fresh(&python, None, &sources).unwrap_err().to_string().contains("not named by what it holds"),
            "another artifact is another environment"
        );
        // A lock of an earlier format (a 16-digit name, no index or hashes) is stale.
        let old = "declared = \"x\"\npackages = [\"tinypkg==1.2.3\"]\nenv = \"py-0123456789abcdef\"\n";
        let old: PackageLock = toml::from_str(old).unwrap();
        assert!(old.fresh(&python, None, &sources).is_err());
        assert_eq!(env_kind("py-0123456789abcdef"), None);

        let node_files =
            files(&[("package.json", MANIFEST), ("package-lock.json", &lockfile("https://registry.npmjs.org/a/-/a-1.2.0.tgz"))]);
        let node = declared_node(&node_files, &sources.npm).unwrap().unwrap();
        let node_lock = PackageLock {
            declared: PackageLock::declared_hash(&[], Some(&node)),
            node: Some(NodeLock::of(&node, &sources.npm)),
            ..PackageLock::default()
        };
        assert_eq!(node_lock.fresh(&[], Some(&node), &sources), Ok(()));
        let mirror = PackageSources { npm: NpmRegistry { url: "https://npm.example.com/".into(), offline_cache: None }, ..sources.clone() };
        assert!(
            node_lock
                .fresh(&[], Some(&node), &mirror)
                .unwrap_err()
                .to_string()
                .contains("this host's npm registry is https://npm.example.com/")
        );
        assert_ne!(NodeLock::of(&node, &mirror.npm).env, node_lock.node.as_ref().unwrap().env, "another registry, another environment");
        assert_eq!(PackageLock::read_text(&node_lock.to_toml()), node_lock);
    }

    impl PackageLock {
        fn read_text(text: &str) -> Self {
            toml::from_str(text).unwrap()
        }
    }
}
