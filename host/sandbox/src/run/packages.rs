//! The packages a skill's scripts declare: resolved before a human is asked to approve
//! the skill (metadata only, nothing installed: [`BwrapRuntime::resolve_packages`]),
//! installed only once the human said yes ([`BwrapRuntime::install_packages`]), never at
//! run time.
//!
//! - Python: uv (from PyPI, installed into the managed venv by `skillhost setup python`)
//!   resolves the requirements to exact versions for the managed venv's Python, with the
//!   hash of every artifact (`uv pip compile --generate-hashes`), wheels only (no package's
//!   build code runs on the host); once approved it installs exactly that set, each
//!   artifact checked against its hashes (`--require-hashes`), into `<work_dir>/envs/py-HASH`.
//! - Node: the skill's `package-lock.json` is the resolution: every `resolved` URL on the
//!   host's registry, every package with its integrity hash
//!   ([`declared_node`](skillhost_core::run::declared_node), checked at load). Once
//!   approved, `npm ci --ignore-scripts --omit=dev` installs exactly that (no install
//!   script runs) into `<work_dir>/envs/node-HASH`, seen by a run at `/node_modules`.
//!
//! **A tool the host runs for a skill reads only what the host hands it.** uv and npm run
//! in a private empty directory (never the directory the host was started in), with a
//! private empty `HOME`, their configuration discovery off (uv `--no-config`; npm's user
//! and global config pointing at empty files the host wrote, its project the staging
//! directory the host made), a cleared environment (only `PATH`, the proxy variables and
//! the CA trust variables of the host's, see [`PASSED_ENV`]), and the index or registry
//! the host's configuration names ([`BwrapConfig::packages`](crate::BwrapConfig::packages)).
//!
//! **An environment is named by everything that decides its bytes**: `PREFIX-` and the hash
//! of its manifest ([`env_name`]): the index or registry, the Python, every package with
//! its artifact hashes (the lockfile's hash for node). It records that manifest (written
//! last, when complete) and the digest of its tree; a run uses it only when the recorded
//! manifest hashes to the name its lock gives ([`BwrapRuntime::check_env`]), and an
//! install reuses it only when its tree is still the one recorded. Skills with the same
//! manifest share one environment; a run binds it read-only.
//!
//! uv was chosen over pip for Python: it resolves a set to exact versions and hashes
//! without installing it (`uv pip compile`), refuses source builds with one flag, is one
//! static binary from PyPI, and installs a resolved set in well under a second from its
//! cache.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sha2::Digest;
use skillhost_core::RequirementError;
use skillhost_core::run::{EnvKind, NodeError, NodeLock, PackageLock, PythonIndex, SourcesError, declared_node, env_kind, env_name};
use tokio::io::AsyncWriteExt;

use crate::BwrapRuntime;

/// Why a skill's packages could not be resolved or installed (the message says which,
/// and what to do).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackagesError {
    /// The host's configured package sources are not usable.
    #[error("this host's package sources: {0}")]
    Sources(#[source] SourcesError),
    /// The skill's node packages are refused.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// A Python requirement is not a plain one.
    #[error(transparent)]
    Requirement(#[from] RequirementError),
    /// No managed venv, so no uv.
    #[error("this host has no managed Python venv; run `skillhost setup python`")]
    NoVenv,
    /// The managed venv has no uv.
    #[error("{} is missing; run `skillhost setup python`, which installs uv into the venv", .0.display())]
    NoUv(PathBuf),
    /// npm is not on `PATH`.
    #[error("`npm` was not found on PATH; install node and npm")]
    NoNpm,
    /// uv's resolution is not what the host accepts.
    #[error("uv's resolution of {packages} from {index}: {source}")]
    Resolution {
        /// The requirements, comma-separated.
        packages: String,
        /// The index.
        index: String,
        /// What is wrong with it.
        source: ResolutionError,
    },
    /// uv or npm failed.
    #[error("{what}: {source}")]
    Tool {
        /// What it was asked to do.
        what: String,
        /// How it failed.
        source: ToolError,
    },
    /// The lock was made for another index, Python or registry, or other files, or is
    /// not whole: the skill must be approved again.
    #[error("{0}")]
    Stale(String),
    /// The host failed on its own files.
    #[error("{what}: {source}")]
    Io {
        /// What it was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Why an environment is not used (see [`BwrapRuntime::check_env`]); each says to approve
/// the skill again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// Not a name [`env_name`] gives.
    #[error("`{0}` is not an environment name of this host; approve the skill again")]
    NotAName(String),
    /// A link where the host made a directory.
    #[error(
        "environment {name} is not used: {} is a link, not the directory the host made; approving the skill again installs it again",
        path.display()
    )]
    Link {
        /// The environment.
        name: String,
        /// The link.
        path: PathBuf,
    },
    /// Not installed.
    #[error("environment {0} is not installed on this host; approving the skill again installs it")]
    NotInstalled(String),
    /// Its record cannot be read.
    #[error("environment {name} cannot be read ({source}); approving the skill again installs it again")]
    Unreadable {
        /// The environment.
        name: String,
        /// The error.
        source: std::io::Error,
    },
    /// It records another manifest than its name binds.
    #[error(
        "environment {0} records another manifest than the one its name binds (made from other packages or another index, or changed); approving the skill again installs it again"
    )]
    OtherManifest(String),
}

/// Why uv's output is not a resolution the host accepts: each names the line, quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolutionError {
    /// Not `name==version`.
    #[error("{0} is not an exact `name==version`")]
    NotExact(String),
    /// A word after the requirement that is not `--hash=`.
    #[error("{line} holds `{word}`, not a hash")]
    NotAHashOption {
        /// The line.
        line: String,
        /// The word.
        word: String,
    },
    /// A hash of another algorithm, or not hex.
    #[error("{line}: `{hash}` is not a hash")]
    BadHash {
        /// The line.
        line: String,
        /// The hash.
        hash: String,
    },
    /// No hash.
    #[error("{0} has no artifact hash")]
    NoHash(String),
    /// The same requirement twice.
    #[error("{0} comes twice")]
    Twice(String),
}

/// How a package tool (uv, npm) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// It did not start.
    #[error("cannot start {}: {source}", program.display())]
    Start {
        /// The program.
        program: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// It ran past [`TOOL_TIMEOUT`].
    #[error("it took more than 10 minutes")]
    Timeout,
    /// Waiting for it failed.
    #[error(transparent)]
    Wait(std::io::Error),
    /// It exited with an error: the last lines of its stderr.
    #[error("{0}")]
    Failed(String),
}

/// The file that marks an environment as complete: the manifest it was made from.
const COMPLETE: &str = ".skillhost-complete";
/// The digest of an environment's tree (every path, mode, link target and file hash),
/// written before [`COMPLETE`].
const TREE: &str = ".skillhost-tree";
/// The largest manifest read back.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// How long one uv or npm may take.
const TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The variables of the host's environment a package tool is handed besides `PATH`:
/// how this machine reaches the network (proxies) and whom it trusts (CA bundles). No
/// `UV_*`, `PIP_*` or `npm_config_*` variable reaches a tool.
pub const PASSED_ENV: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

impl BwrapRuntime {
    /// Where this runtime takes packages from ([`BwrapConfig::packages`](crate::BwrapConfig::packages)).
    pub fn package_sources(&self) -> &skillhost_core::run::PackageSources {
        &self.inner.config.packages
    }

    /// Resolve what a skill's scripts declare, installing nothing: `python` (plain
    /// requirements, see [`declared_packages`](skillhost_core::run::declared_packages))
    /// to exact versions and artifact hashes from the host's index (metadata only), and
    /// the node packages of its `files` as their lockfile fixes them. The lock to record
    /// for the skill, so that its approval request shows exactly what will be installed
    /// and from where; install it with [`install_packages`](Self::install_packages) once
    /// a human approved it.
    pub async fn resolve_packages(&self, python: &[String], files: &BTreeMap<String, Vec<u8>>) -> Result<PackageLock, PackagesError> {
        let sources = &self.inner.config.packages;
        sources.check().map_err(PackagesError::Sources)?;
        let node = declared_node(files, &sources.npm)?;
        let mut lock = PackageLock { declared: PackageLock::declared_hash(python, node.as_ref()), ..PackageLock::default() };
        if !python.is_empty() {
            let (hashes, python_id) = self.resolve_python(python).await?;
            lock.index = sources.python.describe();
            lock.python = python_id;
            lock.packages = hashes.keys().cloned().collect();
            lock.hashes = hashes;
            lock.env = env_name(EnvKind::Python, &lock.python_manifest());
        }
        lock.node = node.as_ref().map(|node| NodeLock::of(node, &sources.npm));
        Ok(lock)
    }

    /// Install exactly what `lock` (from [`resolve_packages`](Self::resolve_packages),
    /// approved by a human) names, each set into its environment, an environment already
    /// there and intact kept; `files` are the skill's (its `package.json` and lockfile).
    /// Refused when the lock is not this host's (another index, registry or Python) or
    /// not the files' anymore: resolve and approve again.
    pub async fn install_packages(&self, lock: &PackageLock, files: &BTreeMap<String, Vec<u8>>) -> Result<(), PackagesError> {
        self.inner.config.packages.check().map_err(PackagesError::Sources)?;
        if !lock.packages.is_empty() {
            self.install_python(lock).await?;
        }
        if let Some(node) = &lock.node {
            self.install_node(node, files).await?;
        }
        Ok(())
    }

    /// uv and the managed venv.
    fn uv(&self) -> Result<(PathBuf, &crate::Venv), PackagesError> {
        let venv = self.venv().ok_or(PackagesError::NoVenv)?;
        let uv = venv.dir.join("bin/uv");
        if !uv.is_file() {
            return Err(PackagesError::NoUv(uv));
        }
        Ok((uv, venv))
    }

    /// uv's arguments naming the host's index, and nothing else.
    fn index_args(&self) -> Vec<OsString> {
        match &self.inner.config.packages.python {
            PythonIndex::Url(url) => vec!["--index-url".into(), url.into()],
            PythonIndex::Wheels(dir) => vec!["--no-index".into(), "--find-links".into(), dir.into()],
        }
    }

    /// The environment a run of uv gets besides the scrubbed base: its cache (the host's,
    /// shared), no progress bars, no Python downloads, no configuration file.
    fn uv_env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("UV_CACHE_DIR".into(), self.inner.config.work_dir.join("cache/uv").into()),
            ("UV_NO_PROGRESS".into(), "1".into()),
            ("UV_PYTHON_DOWNLOADS".into(), "never".into()),
            ("UV_NO_CONFIG".into(), "1".into()),
        ]
    }

    /// Resolve `declared` with uv (metadata only): each package (`name==version`) with
    /// its artifact hashes, and the Python they are for.
    async fn resolve_python(&self, declared: &[String]) -> Result<(BTreeMap<String, Vec<String>>, String), PackagesError> {
        for requirement in declared {
            skillhost_core::run::check_requirement(requirement)?;
        }
        let (uv, venv) = self.uv()?;
        let scratch = Scratch::new(&self.inner.config.work_dir)?;
        let mut compile: Vec<OsString> = [
            "pip",
            "compile",
            "-",
            "--no-config",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--generate-hashes",
            "--only-binary",
            ":all:",
            "--python",
        ]
        .map(OsString::from)
        .into();
        compile.push(venv.python().into_os_string());
        compile.extend(self.index_args());
        let index = self.inner.config.packages.python.describe();
        let resolved = run_tool(&uv, &compile, Some(declared.join("\n")), &scratch, &self.uv_env())
            .await
            .map_err(|source| PackagesError::Tool { what: format!("uv could not resolve {} from {index}", declared.join(", ")), source })?;
        let hashes = parse_resolved(&resolved).map_err(|source| PackagesError::Resolution {
            packages: declared.join(", "),
            index: index.clone(),
            source,
        })?;
        Ok((hashes, python_identity(venv)))
    }

    /// Install the Python set of `lock` into its environment.
    async fn install_python(&self, lock: &PackageLock) -> Result<(), PackagesError> {
        let fail = PackagesError::Stale;
        let (uv, venv) = self.uv()?;
        let index = self.inner.config.packages.python.describe();
        if lock.index != index {
            return Err(fail(format!(
                "its Python packages were resolved from {}, and this host's index is now {index}; approve it again to resolve them from there",
                lock.index
            )));
        }
        let python = python_identity(venv);
        if lock.python != python {
            return Err(fail(format!(
                "its Python packages were resolved for Python {}, and this host's managed Python is {python}; approve it again to resolve them for it",
                lock.python
            )));
        }
        let manifest = lock.python_manifest();
        if lock.env != env_name(EnvKind::Python, &manifest) || lock.packages.iter().any(|p| lock.hashes.get(p).is_none_or(Vec::is_empty)) {
            return Err(fail("its lock is not whole (an environment not named by its packages and hashes); approve it again".into()));
        }
        let dir = self.inner.config.work_dir.join("envs").join(&lock.env);
        if intact(&dir, &manifest).await {
            return Ok(());
        }
        clear(&dir)?;
        std::fs::create_dir_all(dir.parent().unwrap_or(&dir))
            .map_err(|source| PackagesError::Io { what: format!("cannot make {}", dir.display()), source })?;
        let scratch = Scratch::new(&self.inner.config.work_dir)?;
        let result = async {
            let mut make: Vec<OsString> = ["venv", "--no-config", "--quiet", "--python"].map(OsString::from).into();
            make.push(venv.python().into_os_string());
            make.push(dir.clone().into_os_string());
            run_tool(&uv, &make, None, &scratch, &self.uv_env())
                .await
                .map_err(|source| PackagesError::Tool { what: format!("uv could not make {}", dir.display()), source })?;
            let requirements = scratch.write(
                "requirements.txt",
                &lock
                    .packages
                    .iter()
                    .map(|p| format!("{p} {}\n", lock.hashes[p].iter().map(|h| format!("--hash={h}")).collect::<Vec<_>>().join(" ")))
                    .collect::<String>(),
            )?;
            let mut install: Vec<OsString> =
                // Copies, not links into uv's cache: a file changed in one environment
                // changes neither the cache nor the next environment made from it.
                ["pip", "install", "--no-config", "--quiet", "--no-deps", "--require-hashes", "--link-mode", "copy", "--only-binary", ":all:", "--python"]
                    .map(OsString::from)
                    .into();
            install.push(dir.join("bin/python").into_os_string());
            install.extend(self.index_args());
            install.extend(["-r".into(), requirements.into_os_string()]);
            run_tool(&uv, &install, None, &scratch, &self.uv_env())
                .await
                .map_err(|source| PackagesError::Tool { what: format!("uv could not install {} from {index}", lock.packages.join(", ")), source })?;
            complete(&dir, &manifest).await
        }
        .await;
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    /// Install what the lockfile of `files` names, as `lock` recorded it, with `npm ci`.
    async fn install_node(&self, lock: &NodeLock, files: &BTreeMap<String, Vec<u8>>) -> Result<(), PackagesError> {
        let fail = PackagesError::Stale;
        let io = |what: String| move |source| PackagesError::Io { what, source };
        let registry = &self.inner.config.packages.npm;
        let node = declared_node(files, registry)?.ok_or_else(|| fail("it declares no node packages any more".into()))?;
        if NodeLock::of(&node, registry) != *lock {
            return Err(fail(format!(
                "its node packages were locked from {} for other files, and this host's registry is {}; approve it again",
                lock.registry,
                registry.base()
            )));
        }
        let npm = skillhost_jail::which("npm").ok_or(PackagesError::NoNpm)?;
        let envs = self.inner.config.work_dir.join("envs");
        let dir = envs.join(&lock.env);
        let manifest = lock.manifest();
        if intact(&dir, &manifest).await {
            return Ok(());
        }
        std::fs::create_dir_all(&envs).map_err(io(format!("cannot make {}", envs.display())))?;
        // Made aside and renamed: npm ci's tree has no absolute paths.
        let staging = tempfile::Builder::new()
            .prefix(".staging-node-")
            .tempdir_in(&envs)
            .map_err(io(format!("cannot make a staging directory in {}", envs.display())))?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::write(staging.path().join(file), &files[&format!("{}{file}", node.dir)])
                .map_err(io(format!("cannot write {file} into {}", staging.path().display())))?;
        }
        let scratch = Scratch::new(&self.inner.config.work_dir)?;
        let user = scratch.write("npmrc-user", "")?;
        let global = scratch.write("npmrc-global", "")?;
        let cache = match &registry.offline_cache {
            Some(cache) => cache.clone(),
            None => self.inner.config.work_dir.join("cache/npm"),
        };
        let mut args: Vec<OsString> = vec!["ci".into(), "--prefix".into(), staging.path().into()];
        args.extend(
            [
                "--ignore-scripts",
                "--omit=dev",
                "--no-audit",
                "--no-fund",
                "--update-notifier=false",
                "--loglevel=error",
                "--replace-registry-host=never",
            ]
            .map(OsString::from),
        );
        args.extend(["--userconfig".into(), user.into_os_string(), "--globalconfig".into(), global.into_os_string()]);
        args.extend(["--registry".into(), registry.base().into(), "--cache".into(), cache.into_os_string()]);
        if registry.offline_cache.is_some() {
            args.push("--offline".into());
        }
        run_tool(&npm, &args, None, &scratch, &[]).await.map_err(|source| PackagesError::Tool {
            what: format!("npm could not install {} from {}", node.packages.join(", "), registry.describe()),
            source,
        })?;
        complete(staging.path(), &manifest).await?;
        clear(&dir)?;
        let staged = staging.keep();
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755));
        std::fs::rename(&staged, &dir).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            PackagesError::Io { what: "cannot move the environment into place".into(), source: e }
        })
    }

    /// The directory of the environment `name` (a lock's [`PackageLock::env`] or
    /// [`NodeLock::env`]) when it is complete and was made from what its name says: the
    /// manifest it records hashes to `name`. Else why not, saying to approve again.
    pub fn check_env(&self, name: &str) -> Result<PathBuf, EnvError> {
        let kind = env_kind(name).ok_or_else(|| EnvError::NotAName(name.to_owned()))?;
        let dir = self.inner.config.work_dir.join("envs").join(name);
        // Bound by path: a link planted in its place (or at its `node_modules`) would bind
        // what it points to.
        for path in [dir.clone(), dir.join("node_modules")] {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(EnvError::Link { name: name.to_owned(), path });
            }
        }
        let manifest = read_capped(&dir.join(COMPLETE)).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => EnvError::NotInstalled(name.to_owned()),
            _ => EnvError::Unreadable { name: name.to_owned(), source },
        })?;
        if env_name(kind, &manifest) != name {
            return Err(EnvError::OtherManifest(name.to_owned()));
        }
        Ok(dir)
    }

    /// [`check_env`](Self::check_env), as an option.
    pub(crate) fn package_env(&self, name: &str) -> Option<PathBuf> {
        self.check_env(name).inspect_err(|e| tracing::warn!(env = name, "not used: {e}")).ok()
    }
}

/// The Python the managed venv runs, as a lock records it: its version and prefix.
fn python_identity(venv: &crate::Venv) -> String {
    let cfg = std::fs::read_to_string(venv.dir.join("pyvenv.cfg")).unwrap_or_default();
    let version = cfg
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| matches!(k.trim(), "version" | "version_info"))
        .map_or_else(|| "unknown".to_owned(), |(_, v)| v.trim().to_owned());
    format!("{version} {}", venv.prefix.display())
}

/// The artifact hashes of each package of `uv pip compile --generate-hashes` output: every
/// requirement `name==version` (extras allowed), each with at least one `--hash=ALG:HEX`;
/// anything else (an option, a URL, a requirement without a hash) is refused.
fn parse_resolved(text: &str) -> Result<BTreeMap<String, Vec<String>>, ResolutionError> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut hashes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let mut words = line.split_whitespace();
        let requirement = words.next().unwrap_or_default();
        let shown = skillhost_core::text::quote(line, 120);
        let (name, version) = requirement.split_once("==").ok_or_else(|| ResolutionError::NotExact(shown.clone()))?;
        let base = name.split_once('[').map_or(name, |(base, extras)| if extras.ends_with(']') { base } else { "" });
        let name_ok = !base.is_empty() && base.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        let version_ok = !version.is_empty() && version.chars().all(|c| c.is_ascii_alphanumeric() || ".+!_-".contains(c));
        if !name_ok || !version_ok || name.contains("://") {
            return Err(ResolutionError::NotExact(shown));
        }
        let mut found = Vec::new();
        for word in words {
            let hash = word
                .strip_prefix("--hash=")
                .ok_or_else(|| ResolutionError::NotAHashOption { line: shown.clone(), word: skillhost_core::text::quote(word, 60) })?;
            let ok = hash.split_once(':').is_some_and(|(algorithm, hex)| {
                matches!(algorithm, "sha256" | "sha384" | "sha512") && !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
            });
            if !ok {
                return Err(ResolutionError::BadHash { line: shown, hash: skillhost_core::text::quote(hash, 60) });
            }
            found.push(hash.to_ascii_lowercase());
        }
        if found.is_empty() {
            return Err(ResolutionError::NoHash(shown));
        }
        found.sort();
        found.dedup();
        if hashes.insert(requirement.to_owned(), found).is_some() {
            return Err(ResolutionError::Twice(shown));
        }
    }
    Ok(hashes)
}

/// Whether the environment `dir` is complete, was made from `manifest` and its tree is
/// still the one recorded when it was made.
async fn intact(dir: &Path, manifest: &str) -> bool {
    if read_capped(&dir.join(COMPLETE)).ok().as_deref() != Some(manifest) {
        return false;
    }
    let Ok(recorded) = read_capped(&dir.join(TREE)) else { return false };
    let dir = dir.to_owned();
    let now = tokio::task::spawn_blocking(move || tree_digest(&dir)).await;
    matches!(now, Ok(Ok(now)) if now == recorded.trim())
}

/// Mark the environment `dir` complete: its tree's digest, then its manifest.
async fn complete(dir: &Path, manifest: &str) -> Result<(), PackagesError> {
    let fail = |source: std::io::Error| PackagesError::Io { what: format!("cannot record the environment {}", dir.display()), source };
    let owned = dir.to_owned();
    let digest =
        tokio::task::spawn_blocking(move || tree_digest(&owned)).await.map_err(|e| fail(std::io::Error::other(e)))?.map_err(fail)?;
    std::fs::write(dir.join(TREE), format!("{digest}\n")).map_err(fail)?;
    std::fs::write(dir.join(COMPLETE), manifest).map_err(fail)
}

/// Remove `dir` if it is there (an unfinished, changed or foreign environment).
fn clear(dir: &Path) -> Result<(), PackagesError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(meta) if !meta.is_dir() => std::fs::remove_file(dir),
        _ => std::fs::remove_dir_all(dir),
    }
    .map_err(|source| PackagesError::Io { what: format!("cannot clear {}", dir.display()), source })
}

/// The text of `path`, at most [`MAX_MANIFEST_BYTES`], `path` itself not a link.
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link planted in its place.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32).open(path)?;
    let mut text = String::new();
    file.take(MAX_MANIFEST_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// SHA-256 over every entry under `dir` (but its two marker files), in name order: each
/// directory, each link and its target, each file's mode and content hash. Links are
/// never followed.
fn tree_digest(dir: &Path) -> std::io::Result<String> {
    fn walk(root: &Path, relative: &Path, hasher: &mut sha2::Sha256) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mut entries: Vec<_> = std::fs::read_dir(root.join(relative))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name();
            if relative.as_os_str().is_empty() && (name == COMPLETE || name == TREE) {
                continue;
            }
            let path = relative.join(&name);
            let shown = path.to_string_lossy();
            let meta = std::fs::symlink_metadata(root.join(&path))?;
            if meta.is_dir() {
                hasher.update(format!("d {shown}\n"));
                walk(root, &path, hasher)?;
            } else if meta.is_symlink() {
                hasher.update(format!("l {shown} {}\n", std::fs::read_link(root.join(&path))?.to_string_lossy()));
            } else if meta.is_file() {
                let mut file_hash = sha2::Sha256::new();
                std::io::copy(&mut std::fs::File::open(root.join(&path))?, &mut file_hash)?;
                hasher.update(format!("f {shown} {:o} {}\n", meta.permissions().mode() & 0o7777, hex::encode(file_hash.finalize())));
            } else {
                hasher.update(format!("o {shown}\n"));
            }
        }
        Ok(())
    }
    let mut hasher = sha2::Sha256::new();
    walk(dir, Path::new(""), &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// A private directory for one tool's run (0700, removed when dropped): an empty working
/// directory, an empty home and the files the host writes for the tool.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new(work_dir: &Path) -> Result<Self, PackagesError> {
        let fail =
            |source: std::io::Error| PackagesError::Io { what: "cannot make a private directory for the package tools".into(), source };
        let root = work_dir.join("tools");
        std::fs::create_dir_all(&root).map_err(fail)?;
        let dir = tempfile::Builder::new().prefix("tool-").tempdir_in(&root).map_err(fail)?;
        for sub in ["cwd", "home", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).map_err(fail)?;
        }
        Ok(Self(dir))
    }

    /// Write `name` with `text` in it (outside the working directory): its path.
    fn write(&self, name: &str, text: &str) -> Result<PathBuf, PackagesError> {
        let path = self.0.path().join(name);
        std::fs::write(&path, text).map_err(|source| PackagesError::Io { what: format!("cannot write {}", path.display()), source })?;
        Ok(path)
    }
}

/// Run `program` (uv, npm) with `args` (stdin `input`) in `scratch`'s empty working
/// directory, with its empty home, the host's `PATH` and [`PASSED_ENV`] and `env`, nothing
/// else: its stdout, or its stderr's last lines.
async fn run_tool(
    program: &Path,
    args: &[OsString],
    input: Option<String>,
    scratch: &Scratch,
    env: &[(OsString, OsString)],
) -> Result<String, ToolError> {
    let mut command = tokio::process::Command::new(program);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    command.current_dir(scratch.0.path().join("cwd")).env_clear();
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    // The tool's own directory first: npm's `#!/usr/bin/env node` finds the node beside it.
    let path = match program.parent() {
        Some(dir) => std::env::join_paths(std::iter::once(dir.to_owned()).chain(std::env::split_paths(&path))).unwrap_or(path),
        None => path,
    };
    command.env("PATH", path).env("HOME", scratch.0.path().join("home")).env("TMPDIR", scratch.0.path().join("tmp"));
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = command.spawn().map_err(|source| ToolError::Start { program: program.to_owned(), source })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.unwrap_or_default().as_bytes()).await;
    }
    let out =
        tokio::time::timeout(TOOL_TIMEOUT, child.wait_with_output()).await.map_err(|_| ToolError::Timeout)?.map_err(ToolError::Wait)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(ToolError::Failed(tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolution_is_exact_versions_each_with_its_hashes() {
        let text = "tinypkg==1.2.3 \\\n    --hash=sha256:F864d5 \\\n    --hash=sha256:00aa\nrich[jupyter]==13.7.1 --hash=sha512:ab\n";
        let hashes = parse_resolved(text).unwrap();
        assert_eq!(hashes.keys().collect::<Vec<_>>(), ["rich[jupyter]==13.7.1", "tinypkg==1.2.3"]);
        assert_eq!(hashes["tinypkg==1.2.3"], ["sha256:00aa", "sha256:f864d5"]);
        for (bad, says) in [
            ("tinypkg==1.2.3\n", "no artifact hash"),
            ("tinypkg>=1.2.3 --hash=sha256:00\n", "not an exact"),
            ("--index-url https://evil.example/simple\n", "not an exact"),
            ("evil @ https://evil.example/e.whl --hash=sha256:00\n", "not an exact"),
            ("tinypkg==1.2.3 --hash=md5:00\n", "not a hash"),
            ("tinypkg==1.2.3 --find-links=/x\n", "not a hash"),
            ("a==1 --hash=sha256:00\na==1 --hash=sha256:11\n", "comes twice"),
        ] {
            assert!(parse_resolved(bad).unwrap_err().to_string().contains(says), "{bad}: {says}");
        }
    }

    #[test]
    fn a_tree_digest_follows_every_byte_mode_and_link_but_not_the_markers() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/a.py"), "A = 1\n").unwrap();
        std::os::unix::fs::symlink("lib/a.py", dir.path().join("link")).unwrap();
        let first = tree_digest(dir.path()).unwrap();
        std::fs::write(dir.path().join(COMPLETE), "manifest").unwrap();
        std::fs::write(dir.path().join(TREE), "x").unwrap();
        assert_eq!(tree_digest(dir.path()).unwrap(), first, "the markers are not part of the tree");
        std::fs::write(dir.path().join("lib/a.py"), "A = 2\n").unwrap();
        let changed = tree_digest(dir.path()).unwrap();
        assert_ne!(changed, first);
        std::fs::set_permissions(dir.path().join("lib/a.py"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(tree_digest(dir.path()).unwrap(), changed);
    }
}
