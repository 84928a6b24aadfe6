//! The host's configuration file, `config.toml`: read once, checked whole, handed to
//! [`HostBuilder::config`](crate::HostBuilder::config). One section per subsystem:
//!
//! ```toml
//! skills_from = ["claude"]          # other agents' skill folders, served read-only
//!
//! [sandbox]
//! allow_weaker = ["cgroup"]         # isolation layers server skills may run without
//! venv = "/srv/skillhost/python"    # the managed Python venv [default: DATA_DIR/python]
//!
//! [sources]
//! allow_hosts = ["https://pkg-containers.githubusercontent.com"]
//! [[sources.verify]]
//! prefix = "oci://registry.example.com/team/"
//! key = "/etc/skillhost/team.pub"
//!
//! [packages]
//! python_index = "https://pypi.org/simple"
//! npm_registry = "https://registry.npmjs.org/"
//!
//! [forge]
//! max_concurrent_builds = 2
//! attempt_window = "1h"
//!
//! [state]
//! url = "postgres://skillhost@db.internal:5432/skillhost"   # default "sqlite": files in the data dir
//! replica = "a"                     # this host's name in the shared audit [default: the host name]
//! keys = "/etc/skillhost/keys"      # shared secrets approval questions are signed with
//!
//! [team]
//! lock = "/etc/skillhost/skills.lock"   # serve exactly the skills this lock pins
//!
//! [telemetry]
//! otlp_endpoint = "http://otel-collector:4318"   # export traces of calls and runs (OTLP/HTTP)
//!
//! [org]
//! policies = "/etc/skillhost/policy"   # the org policy in Cedar: who may do what over HTTP
//! ```
//!
//! A key the host does not know is refused, naming the file, the line and the keys that
//! are valid there: a misspelt opt-out or verification rule is never silently ignored.
//! So is a value that cannot be used (a package index that is not `https://`, a host rule
//! that does not parse, a duration that is not one). A missing file is the defaults.
//! A relative path in it (`venv`, a verification `key`, `python_wheels`,
//! `npm_offline_cache`) is relative to the file's own directory, never to the directory
//! the host happens to be started from (an MCP client starts it anywhere, a project
//! directory among them).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use skillhost_core::run::{NPM_REGISTRY, NpmRegistry, PackageSources, PythonIndex};
use skillhost_forge::ForgeConfig;
use skillhost_forge::llm::LlmConfig;
use skillhost_source::{Caps, KeyPolicy, sign};
use skillhost_store::StateUrl;

/// The file name of the host config in a data dir.
pub const CONFIG_FILE: &str = "config.toml";

/// `config.toml`, parsed and checked ([`HostConfig::read`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HostConfig {
    /// Other agents' Agent Skills folders to serve read-only, as external layers
    /// ([`Agent::folders`]).
    #[serde(default)]
    pub skills_from: Vec<Agent>,
    /// `[sandbox]`: how server skills and scripts are jailed.
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// `[sources]`: remote skill sources.
    #[serde(default)]
    pub sources: SourcesSection,
    /// `[packages]`: where the packages skills' scripts declare come from.
    #[serde(default)]
    pub packages: PackagesSection,
    /// `[forge]`: the forge's caps and its optional model.
    #[serde(default)]
    pub forge: ForgeSection,
    /// `[state]`: where trust, the audit log and the statistics live.
    #[serde(default)]
    pub state: StateSection,
    /// `[team]`: a replica of a team gateway.
    #[serde(default)]
    pub team: TeamSection,
    /// `[telemetry]`: where `serve` sends the traces of calls and runs.
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// `[org]`: the org policy deciding what each caller may do.
    #[serde(default)]
    pub org: OrgSection,
    /// `[oauth]`: OAuth 2.1 access tokens accepted at the HTTP front.
    #[serde(default)]
    pub oauth: OAuthSection,
    /// `[quotas]`: each caller's limits on tool calls over HTTP.
    #[serde(default)]
    pub quotas: QuotasSection,
    /// The file this was read from (`None`: built in code).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// `[sandbox]` of the host config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SandboxSection {
    /// Isolation layers server skills and scripts may run without when this machine
    /// lacks them (`"uid drop"`, `"cgroup"`, `"seccomp"`): a human's opt-out, shown
    /// wherever the isolation is reported. Default: none (a missing layer stops them).
    #[serde(default)]
    pub allow_weaker: Vec<String>,
    /// The managed Python venv server skills run with. Default: `DATA_DIR/python`.
    pub venv: Option<PathBuf>,
}

/// `[sources]` of the host config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SourcesSection {
    /// `[[sources.verify]]`: every skill installed from under `prefix` must be signed by
    /// `key`.
    #[serde(default)]
    pub verify: Vec<VerifyRule>,
    /// Hosts a source may send a fetch to besides its own (a registry's blob storage or
    /// token service, an index's CDN); never a loopback or private address from a public
    /// source.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

/// One `[[sources.verify]]` rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct VerifyRule {
    /// A source address prefix, e.g. `oci://registry.example.com/team/`.
    pub prefix: String,
    /// The public key (PEM) its skills must be signed with.
    pub key: PathBuf,
}

/// `[packages]` of the host config: the only sources uv and npm are handed, whatever
/// `uv.toml`, `.npmrc` or environment the host was started with.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PackagesSection {
    /// A Python package index (PEP 503), `https://` or `http://` to loopback. Default:
    /// PyPI.
    pub python_index: Option<String>,
    /// Instead of an index: a directory of wheels, the only ones installed.
    pub python_wheels: Option<PathBuf>,
    /// The npm registry every lockfile URL must lie on. Default: registry.npmjs.org.
    pub npm_registry: Option<String>,
    /// Install node packages from this npm cache only.
    pub npm_offline_cache: Option<PathBuf>,
}

/// `[forge]` of the host config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ForgeSection {
    /// `[forge.llm]`: the model `skillhost forge --generate` asks.
    pub llm: Option<LlmConfig>,
    /// Submissions built and tested at once.
    pub max_concurrent_builds: Option<usize>,
    /// Submissions taken per `attempt_window`, across all names.
    pub max_attempts_per_window: Option<u32>,
    /// The window, e.g. `"1h"`, `"30m"`.
    #[serde(default, deserialize_with = "duration")]
    pub attempt_window: Option<Duration>,
}

/// `[state]` of the host config: one person's SQLite files, or the PostgreSQL database
/// the replicas of a team gateway share.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StateSection {
    /// `sqlite` (the default: `trust.db`, `audit.db`, `stats.db` in the data dir) or
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DATABASE`.
    #[serde(default, deserialize_with = "state_url")]
    pub url: Option<StateUrl>,
    /// This host's name in the rows it writes to a shared database. Default: the host
    /// name.
    pub replica: Option<String>,
    /// A file of shared secrets, one per line (hex, at least 32 bytes), readable by its
    /// owner only: the first signs the approval questions asked of MCP clients, every
    /// one verifies them, so a question asked by one replica is answered on any (rotate
    /// by adding a new first line, and dropping the old one once its questions expired).
    /// Default: a random key per process.
    pub keys: Option<PathBuf>,
}

/// `[team]` of the host config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TeamSection {
    /// Serve exactly the skills this `skills.lock` pins, with the bytes it pins: every
    /// registry the host opens refuses a skill the lock does not name or whose files hash
    /// otherwise; `serve` installs the locked skills at start and when the file changes
    /// (as `skillhost sync` does). Default: none (serve what the layers hold).
    pub lock: Option<PathBuf>,
}

/// `[telemetry]` of the host config: OpenTelemetry traces of each call and run (MCP
/// request, registry, runtime, outbound requests), exported by `serve` over OTLP/HTTP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TelemetrySection {
    /// The OTLP/HTTP endpoint of a collector, `http://` or `https://` (traces are posted
    /// to its `/v1/traces`, protobuf). Default: the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` when set, else no export.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans. Default: `OTEL_SERVICE_NAME`, else
    /// `skillhost`.
    pub service_name: Option<String>,
}

/// `[org]` of the host config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OrgSection {
    /// A directory of `*.cedar` files: the org policy `serve --http` holds every caller to
    /// (validated at start, which fails on a set that does not validate; reloaded when a
    /// file changes, a set that does not validate refused while the one in force keeps
    /// serving). Default: none (every caller with a token may do everything).
    pub policies: Option<PathBuf>,
}

/// `[oauth]` of the host config: the HTTP front as an OAuth 2.1 resource server (the MCP
/// authorization specification). `issuer`, `resource` and `jwks_url` go together.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OAuthSection {
    /// The authorization server's issuer identifier: a token's `iss` must equal it.
    pub issuer: Option<String>,
    /// This server's canonical URL as clients reach it (`https://mcp.example.com/mcp`): a
    /// token's `aud` must name it; the protected-resource metadata is served under it.
    pub resource: Option<String>,
    /// Where the issuer publishes its signing keys (JWKS), fetched at start, every
    /// [`JWKS_REFRESH`](crate::oauth::JWKS_REFRESH) and when a token names a key not held.
    pub jwks_url: Option<String>,
    /// The claim naming the caller (the org policy's `Caller::"…"`). Default `sub`.
    pub name_claim: Option<String>,
    /// The claim listing the caller's groups (`Group::"…"`). Default `groups`.
    pub groups_claim: Option<String>,
    /// Scopes the metadata lists as known here; the org policy reads a token's scopes as
    /// `principal.scopes`.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// `[quotas]` of the host config: each caller's limits on `tools/call` over HTTP, on each
/// replica. A call over them is answered 429 with `Retry-After`, nothing of it run.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct QuotasSection {
    /// Tool calls per minute: a burst of as many, then one each `60 / N` seconds.
    /// Default: no limit.
    pub calls_per_minute: Option<u32>,
    /// Tool calls in flight at once. Default: no limit.
    pub concurrent_calls: Option<u32>,
    /// Overrides by caller name (`[quotas.callers.ci-bot]`): each key it sets replaces
    /// the default's.
    #[serde(default)]
    pub callers: std::collections::BTreeMap<String, CallerQuota>,
}

/// `[quotas.callers.NAME]`: one caller's limits.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CallerQuota {
    /// Tool calls per minute.
    pub calls_per_minute: Option<u32>,
    /// Tool calls in flight at once.
    pub concurrent_calls: Option<u32>,
}

/// A key of `[state] keys` shorter than this is refused.
pub const MIN_KEY_BYTES: usize = 32;

/// An agent whose skill folders the host can serve read-only (`skills_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Agent {
    /// Claude Code: `~/.claude/skills`, then the project's `./.claude/skills`.
    Claude,
    /// The Agent Skills standard's own folders, which Codex CLI and Amp read:
    /// `~/.agents/skills`, then the project's `./.agents/skills`.
    Agents,
    /// Cursor: `~/.cursor/skills`, then the project's `./.cursor/skills`.
    Cursor,
}

/// Why the host config cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read the host config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A key, a value or the TOML itself is wrong at a position of the file.
    #[error("{}:{line}:{column}: {message}; {fix}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
        /// What to do.
        fix: String,
    },
    /// A section's values do not go together or cannot be used.
    #[error("{}: [{section}]: {message}", file.display())]
    Section {
        /// The file.
        file: PathBuf,
        /// The section.
        section: &'static str,
        /// What is wrong, and what to do.
        message: String,
    },
    /// A key a `[[sources.verify]]` rule names cannot be read.
    #[error("{}: [[sources.verify]] for `{prefix}`: {source}", file.display())]
    Key {
        /// The file.
        file: PathBuf,
        /// The rule's prefix.
        prefix: String,
        /// Why the key cannot be used.
        #[source]
        source: Box<skillhost_source::SourceError>,
    },
}

impl HostConfig {
    /// Read and check the config at `path`; a missing file is the defaults.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self { path: Some(path.to_owned()), ..Self::default() }),
            Err(source) => Err(ConfigError::Read { path: path.to_owned(), source }),
        }
    }

    /// Parse and check config text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let at = |span: Option<Range<usize>>, message: String, fix: String| {
            let (line, column) = span.map_or((1, 1), |s| line_col(text, s.start));
            ConfigError::Invalid { file: path.to_owned(), line, column, message, fix }
        };
        let mut config: Self = toml::from_str(text).map_err(|e| {
            let (message, fix) = explain(e.message().trim());
            at(e.span(), message, fix)
        })?;
        config.path = Some(path.to_owned());
        config.anchor_paths(path.parent().unwrap_or(Path::new("/")));
        config.package_sources()?;
        config.source_caps(Caps::default())?;
        config.state_keys()?;
        config.check_telemetry()?;
        config.oauth()?;
        config.quotas()?;
        Ok(config)
    }

    /// Every relative path made relative to `dir`, the config file's directory.
    fn anchor_paths(&mut self, dir: &Path) {
        let anchor = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        };
        let optional = [
            &mut self.sandbox.venv,
            &mut self.packages.python_wheels,
            &mut self.packages.npm_offline_cache,
            &mut self.state.keys,
            &mut self.team.lock,
            &mut self.org.policies,
        ];
        optional.into_iter().flatten().for_each(anchor);
        self.sources.verify.iter_mut().for_each(|rule| anchor(&mut rule.key));
    }

    /// The file named in errors.
    fn file(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| PathBuf::from(CONFIG_FILE))
    }

    /// `[packages]` as the sources the sandbox installs from, checked.
    pub fn package_sources(&self) -> Result<PackageSources, ConfigError> {
        let section = &self.packages;
        let refused = |message: String| ConfigError::Section { file: self.file(), section: "packages", message };
        let python = match (&section.python_index, &section.python_wheels) {
            (Some(_), Some(_)) => return Err(refused("it names both python_index and python_wheels; keep one".into())),
            (Some(url), None) => PythonIndex::Url(url.clone()),
            (None, Some(dir)) => PythonIndex::Wheels(dir.clone()),
            (None, None) => PythonIndex::default(),
        };
        let npm = NpmRegistry {
            url: section.npm_registry.clone().unwrap_or_else(|| NPM_REGISTRY.to_owned()),
            offline_cache: section.npm_offline_cache.clone(),
        };
        let sources = PackageSources { python, npm };
        sources.check().map_err(|e| refused(e.to_string()))?;
        Ok(sources)
    }

    /// `base` with `[sources] allow_hosts` added.
    pub fn source_caps(&self, mut base: Caps) -> Result<Caps, ConfigError> {
        for rule in &self.sources.allow_hosts {
            base.allow_host(rule).map_err(|e| ConfigError::Section {
                file: self.file(),
                section: "sources",
                message: format!("allow_hosts `{rule}`: {e}"),
            })?;
        }
        Ok(base)
    }

    /// `keys` with the `[[sources.verify]]` rules added, each key read from its file.
    pub fn verify_keys(&self, keys: &mut KeyPolicy) -> Result<(), ConfigError> {
        for rule in &self.sources.verify {
            let key_error = |source| ConfigError::Key { file: self.file(), prefix: rule.prefix.clone(), source: Box::new(source) };
            let text = std::fs::read_to_string(&rule.key)
                .map_err(|e| key_error(skillhost_source::SourceError::Io { path: rule.key.clone(), source: e }))?;
            keys.rule(rule.prefix.clone(), sign::PublicKey::from_pem(&text, &rule.key).map_err(key_error)?);
        }
        Ok(())
    }

    /// `[team] lock` as the registry's pins: each locked skill's content hash; `None`
    /// without a lock.
    pub fn pins(&self) -> Result<Option<skillhost_registry::Pins>, ConfigError> {
        let Some(path) = &self.team.lock else { return Ok(None) };
        let lock = skillhost_source::lock::Lockfile::read(path).map_err(|e| ConfigError::Section {
            file: self.file(),
            section: "team",
            message: format!("lock {}: {e}", path.display()),
        })?;
        let hashes = lock.skills.into_iter().map(|locked| (locked.name, locked.content)).collect();
        Ok(Some(skillhost_registry::Pins { lock: path.clone(), hashes }))
    }

    /// `[telemetry] otlp_endpoint` checked: an `http://` or `https://` URL with a host.
    fn check_telemetry(&self) -> Result<(), ConfigError> {
        let Some(endpoint) = &self.telemetry.otlp_endpoint else { return Ok(()) };
        let usable = url::Url::parse(endpoint).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
        match usable {
            Some(_) => Ok(()),
            None => Err(ConfigError::Section {
                file: self.file(),
                section: "telemetry",
                message: format!(
                    "otlp_endpoint `{endpoint}` is not an http:// or https:// URL; name the collector's OTLP/HTTP address, e.g. `http://otel-collector:4318`"
                ),
            }),
        }
    }

    /// `[oauth]` as the resource server's settings and the JWKS URL; `None` when the
    /// section is empty.
    pub fn oauth(&self) -> Result<Option<(skillhost_access::OAuthSettings, url::Url)>, ConfigError> {
        let section = &self.oauth;
        let refused = |message: String| ConfigError::Section { file: self.file(), section: "oauth", message };
        let (issuer, resource, jwks_url) = match (&section.issuer, &section.resource, &section.jwks_url) {
            (None, None, None) => return Ok(None),
            (Some(issuer), Some(resource), Some(jwks_url)) => (issuer, resource, jwks_url),
            _ => {
                return Err(refused(
                    "issuer, resource and jwks_url go together: set all three (the authorization server's issuer, this server's URL as clients reach it, the issuer's JWKS URL)".into(),
                ));
            }
        };
        if self.org.policies.is_none() {
            return Err(refused(
                "an OAuth issuer admits whoever it signs a token for, and without an org policy every such caller could do everything (call, run, create and approve skills): set `policies` under [org] (see org-policy.md)".into(),
            ));
        }
        // As clients will send it in `aud`: a URL that is already in its normal form.
        let normal = url::Url::parse(resource).ok().filter(|u| {
            let text = u.as_str();
            matches!(u.scheme(), "http" | "https")
                && u.username().is_empty()
                && u.password().is_none()
                && (text == resource || text.strip_suffix('/') == Some(resource.as_str()))
        });
        if normal.is_none() {
            return Err(refused(format!(
                "resource `{resource}` is not this server's URL in normal form (lower-case scheme and host, no user, query or fragment, e.g. https://mcp.example.com/mcp): a token's `aud` must equal it exactly"
            )));
        }
        let jwks = url::Url::parse(jwks_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| refused(format!("jwks_url `{jwks_url}` is not an https:// URL (the issuer's `jwks_uri`)")))?;
        let mut settings = skillhost_access::OAuthSettings::new(issuer.clone(), resource.clone());
        if let Some(claim) = &section.name_claim {
            settings.name_claim = claim.clone();
        }
        if let Some(claim) = &section.groups_claim {
            settings.groups_claim = claim.clone();
        }
        settings.scopes_supported = section.scopes_supported.clone();
        // The same checks the front makes when it starts: a bad resource fails here.
        skillhost_access::oauth::check_settings(&settings).map_err(|e| refused(e.to_string()))?;
        Ok(Some((settings, jwks)))
    }

    /// `[quotas]` as the front's quota config; a limit of 0 is refused (the org policy is
    /// what keeps a caller from calling).
    pub fn quotas(&self) -> Result<skillhost_mcp::QuotaConfig, ConfigError> {
        let section = &self.quotas;
        let quota = |calls_per_minute: Option<u32>, concurrent_calls: Option<u32>, at: &str| {
            if calls_per_minute == Some(0) || concurrent_calls == Some(0) {
                return Err(ConfigError::Section {
                    file: self.file(),
                    section: "quotas",
                    message: format!(
                        "{at}: a limit of 0 lets no call through; leave the key out for no limit, and refuse a caller in the org policy"
                    ),
                });
            }
            Ok(skillhost_mcp::Quota { calls_per_minute, concurrent_calls })
        };
        let mut config = skillhost_mcp::QuotaConfig {
            default: quota(section.calls_per_minute, section.concurrent_calls, "the default")?,
            ..Default::default()
        };
        for (name, own) in &section.callers {
            config.callers.insert(name.clone(), quota(own.calls_per_minute, own.concurrent_calls, &format!("caller `{name}`"))?);
        }
        Ok(config)
    }

    /// This host's name in a shared state store: `[state] replica`, else the host name.
    pub fn replica(&self) -> String {
        self.state.replica.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "skillhost".to_owned())
        })
    }

    /// The secrets of `[state] keys`, the signing one first; empty when none is named.
    pub fn state_keys(&self) -> Result<Vec<Vec<u8>>, ConfigError> {
        let Some(path) = &self.state.keys else { return Ok(Vec::new()) };
        let refused = |message: String| ConfigError::Section { file: self.file(), section: "state", message };
        let text = read_keys_file(path).map_err(|e| refused(format!("keys {}: {e}", path.display())))?;
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#')) {
            let key = hex::decode(line.trim()).ok().filter(|k| k.len() >= MIN_KEY_BYTES).ok_or_else(|| {
                refused(format!(
                    "keys {}:{}: not a key: write {MIN_KEY_BYTES} or more random bytes in hex, one key per line (`openssl rand -hex 32`)",
                    path.display(),
                    n + 1
                ))
            })?;
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(refused(format!("keys {}: holds no key; write one with `openssl rand -hex 32 > FILE`", path.display())));
        }
        Ok(keys)
    }

    /// The forge's configuration in `dir`: `[forge]`'s caps over the defaults, and the
    /// sandbox's `allow_weaker` (a build runs code no human approved: it may lack only
    /// the layers a human let the sandbox run without).
    pub fn forge_config(&self, dir: impl Into<PathBuf>) -> ForgeConfig {
        let mut config = ForgeConfig::new(dir);
        let caps = &self.forge;
        if let Some(n) = caps.max_concurrent_builds {
            config.max_concurrent_builds = n;
        }
        if let Some(n) = caps.max_attempts_per_window {
            config.max_attempts_per_window = n;
        }
        if let Some(window) = caps.attempt_window {
            config.attempt_window = window;
        }
        config.allow_weaker = self.sandbox.allow_weaker.clone();
        config
    }
}

impl Agent {
    /// The name in the config file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Agents => "agents",
            Agent::Cursor => "cursor",
        }
    }

    /// Every agent, for help texts.
    pub const ALL: &'static [Agent] = &[Agent::Claude, Agent::Agents, Agent::Cursor];

    /// The agent's skill folders, in precedence order, whether or not they exist: the
    /// personal one, then the project's.
    pub fn folders(self, home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
        let below = match self {
            Agent::Claude => ".claude/skills",
            Agent::Agents => ".agents/skills",
            Agent::Cursor => ".cursor/skills",
        };
        home.map(|h| h.join(below)).into_iter().chain([cwd.join(below)]).collect()
    }

    /// The folders of `agents` that exist, each once (as a canonical path), none of them
    /// `workspace` itself, in order: the external layers of a registry
    /// ([`RegistryConfig::external`](crate::RegistryConfig::external)).
    pub fn existing_folders(agents: &[Agent], workspace: Option<&Path>) -> std::io::Result<Vec<PathBuf>> {
        if agents.is_empty() {
            return Ok(Vec::new());
        }
        let home = std::env::home_dir();
        let cwd = std::env::current_dir()?;
        let workspace = workspace.and_then(|dir| std::fs::canonicalize(dir).ok());
        let mut found: Vec<PathBuf> = Vec::new();
        for agent in agents {
            for folder in agent.folders(home.as_deref(), &cwd) {
                let Ok(folder) = std::fs::canonicalize(&folder) else { continue };
                if folder.is_dir() && !found.contains(&folder) && workspace.as_ref() != Some(&folder) {
                    found.push(folder);
                }
            }
        }
        Ok(found)
    }
}

/// A name that is not an [`Agent`]'s.
#[derive(Debug, thiserror::Error)]
#[error("unknown agent `{0}`; known: {known}", known = Agent::ALL.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", "))]
pub struct UnknownAgent(pub String);

impl std::str::FromStr for Agent {
    type Err = UnknownAgent;

    fn from_str(text: &str) -> Result<Self, UnknownAgent> {
        Agent::ALL.iter().copied().find(|a| a.as_str() == text).ok_or_else(|| UnknownAgent(text.to_owned()))
    }
}

/// The text of a `[state] keys` file: a regular file (a link is followed: Kubernetes
/// mounts a secret as one, and the path is the operator's, never a skill's) that others
/// cannot read; its group may (a secret mounted `0440` for the pod's group).
fn read_keys_file(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "writable by users other than its owner (mode {:o}): whoever can write it can sign approvals; run `chmod go-w {}`",
            meta.mode() & 0o777,
            path.display()
        )));
    }
    if meta.mode() & 0o007 != 0 {
        return Err(std::io::Error::other(format!(
            "readable by every user (mode {:o}); run `chmod o-rwx {}`, and consider the keys leaked: make new ones",
            meta.mode() & 0o777,
            path.display()
        )));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, 64 << 10), &mut text)?;
    Ok(text)
}

fn state_url<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<StateUrl>, D::Error> {
    let text: Option<String> = Deserialize::deserialize(d)?;
    text.map(|t| t.parse().map_err(serde::de::Error::custom)).transpose()
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text: Option<String> = Deserialize::deserialize(d)?;
    text.map(|t| skillhost_core::parse_duration(&t).map_err(serde::de::Error::custom)).transpose()
}

/// 1-based line and column of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, column)
}

/// A TOML error as what is wrong and what to do: an unknown key names the valid ones.
fn explain(message: &str) -> (String, String) {
    let reference = "see docs/configuration.md";
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, valid) = rest.split_once('`').unwrap_or((rest, ""));
        let valid = valid.trim_start_matches(',').trim().trim_start_matches("expected ").trim_start_matches("one of ");
        let fix = if valid.is_empty() {
            format!("remove it or correct its spelling ({reference})")
        } else {
            format!("the valid keys here are {valid}; remove it or correct its spelling ({reference})")
        };
        return (format!("unknown key `{key}`"), fix);
    }
    (message.to_owned(), format!("fix the value at that position ({reference})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_refused_with_its_line_and_the_valid_keys() {
        let text = "skills_from = [\"claude\"]\n\n[sandbox]\nallow_weakre = [\"cgroup\"]\n";
        let error = HostConfig::parse(text, Path::new("/data/config.toml")).unwrap_err().to_string();
        assert!(error.starts_with("/data/config.toml:4:1: unknown key `allow_weakre`"), "{error}");
        assert!(error.contains("the valid keys here are `allow_weaker` or `venv`"), "the valid keys are named: {error}");
        let error = HostConfig::parse("[sorces]\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(error.starts_with("c.toml:1:2: unknown key `sorces`") && error.contains("`sources`"), "{error}");
    }

    #[test]
    fn values_that_cannot_be_used_are_refused_at_read() {
        let refused = |text: &str| HostConfig::parse(text, Path::new("c.toml")).unwrap_err().to_string();
        assert!(refused("[packages]\npython_index = \"http://example.com/simple\"\n").contains("[packages]"));
        assert!(refused("[packages]\npython_index = \"https://a/\"\npython_wheels = \"/w\"\n").contains("keep one"));
        assert!(refused("[forge]\nattempt_window = \"soon\"\n").starts_with("c.toml:2:18:"));
        assert!(refused("skills_from = [\"windsurf\"]\n").contains("windsurf"));
        let config = HostConfig::parse("[forge]\nattempt_window = \"30m\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(config.forge_config("/f").attempt_window, Duration::from_secs(1800));
    }

    #[test]
    fn an_agents_personal_folder_comes_before_the_projects() {
        let folders = Agent::Claude.folders(Some(Path::new("/home/ada")), Path::new("/work/p"));
        assert_eq!(folders, [PathBuf::from("/home/ada/.claude/skills"), PathBuf::from("/work/p/.claude/skills")]);
    }

    #[test]
    fn relative_paths_are_the_config_files_never_the_working_directorys() {
        let text = "[sandbox]\nvenv = \"python\"\n[packages]\npython_wheels = \"wheels\"\n[[sources.verify]]\nprefix = \"oci://r/\"\nkey = \"team.pub\"\n";
        let config = HostConfig::parse(text, Path::new("/srv/skillhost/config.toml")).unwrap();
        assert_eq!(config.sandbox.venv.as_deref(), Some(Path::new("/srv/skillhost/python")));
        assert_eq!(config.packages.python_wheels.as_deref(), Some(Path::new("/srv/skillhost/wheels")));
        assert_eq!(config.sources.verify[0].key, Path::new("/srv/skillhost/team.pub"));
        let absolute = HostConfig::parse("[sandbox]\nvenv = \"/opt/venv\"\n", Path::new("/srv/config.toml")).unwrap();
        assert_eq!(absolute.sandbox.venv.as_deref(), Some(Path::new("/opt/venv")));
    }

    #[test]
    fn a_missing_file_is_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = HostConfig::read(&dir.path().join(CONFIG_FILE)).unwrap();
        assert!(config.skills_from.is_empty() && config.sandbox.allow_weaker.is_empty());
        assert_eq!(config.package_sources().unwrap(), PackageSources::default());
    }

    #[test]
    fn state_keys_are_read_in_order_from_a_file_others_cannot_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let (new, old) = ("ab".repeat(32), "cd".repeat(40));
        std::fs::write(&keys, format!("# signing key first\n{new}\n\n{old}\n")).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o640)).unwrap();
        let config = HostConfig::parse("[state]\nkeys = \"keys\"\n", &dir.path().join("config.toml")).unwrap();
        assert_eq!(config.state_keys().unwrap(), [hex::decode(&new).unwrap(), hex::decode(&old).unwrap()]);
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = HostConfig::parse("[state]\nkeys = \"keys\"\n", &dir.path().join("config.toml")).unwrap_err().to_string();
        assert!(error.contains("readable by every user") && error.contains("chmod o-rwx"), "{error}");
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o660)).unwrap();
        let error = HostConfig::parse("[state]\nkeys = \"keys\"\n", &dir.path().join("config.toml")).unwrap_err().to_string();
        assert!(error.contains("writable by users other than its owner") && error.contains("chmod go-w"), "{error}");
        std::fs::write(&keys, "abcd\n").unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = HostConfig::parse("[state]\nkeys = \"keys\"\n", &dir.path().join("config.toml")).unwrap_err().to_string();
        assert!(error.contains("keys:1: not a key") && error.contains("openssl rand -hex 32"), "{error}");
        let error = HostConfig::parse("[state]\nurl = \"mysql://x\"\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(error.starts_with("c.toml:2:7: state `mysql://…` is neither `sqlite` nor"), "{error}");
    }

    #[test]
    fn a_telemetry_endpoint_is_an_http_url() {
        let config = HostConfig::parse("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(config.telemetry.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        for bad in ["127.0.0.1:4318", "grpc://collector:4317", "http://"] {
            let error =
                HostConfig::parse(&format!("[telemetry]\notlp_endpoint = \"{bad}\"\n"), Path::new("c.toml")).unwrap_err().to_string();
            assert!(error.contains(&format!("otlp_endpoint `{bad}` is not an http:// or https:// URL")), "{error}");
        }
    }

    fn parse(text: &str) -> Result<HostConfig, ConfigError> {
        HostConfig::parse(text, Path::new("/etc/skillhost/config.toml"))
    }

    #[test]
    fn oauth_needs_its_issuer_resource_and_keys_together_and_a_usable_resource() {
        let whole = "[org]\npolicies = \"policy\"\n\n[oauth]\nissuer = \"https://id.example\"\nresource = \"https://mcp.example/mcp\"\njwks_url = \"https://id.example/jwks\"\n";
        let (settings, jwks) = parse(whole).unwrap().oauth().unwrap().expect("configured");
        assert_eq!((settings.name_claim.as_str(), settings.groups_claim.as_str()), ("sub", "groups"));
        assert_eq!(jwks.as_str(), "https://id.example/jwks");
        assert!(parse("").unwrap().oauth().unwrap().is_none());
        for (bad, says) in [
            ("[oauth]\nissuer = \"https://id.example\"\n", "go together"),
            (&whole.replace("https://mcp.example/mcp", "mcp.example/mcp"), "normal form"),
            (&whole.replace("https://id.example/jwks", "file:///etc/jwks"), "jwks_url"),
            (&whole.replace("https://mcp.example/mcp", "https://MCP.example/mcp"), "normal form"),
            (&whole.replace("https://mcp.example/mcp", "https://user@mcp.example/mcp"), "normal form"),
            (&whole.replace("[org]\npolicies = \"policy\"\n", ""), "without an org policy"),
        ] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.contains("[oauth]") && error.contains(says), "{error}");
        }
    }
}
