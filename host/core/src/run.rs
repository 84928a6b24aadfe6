//! Running a command of a skill's scripts: the Agent Skills form (a SKILL.md folder with
//! `scripts/`) made runnable in the jail instead of on the host by an agent's own shell.
//!
//! - [`RunPolicy`]: what a skill's scripts may have beyond nothing (hosts through the
//!   egress proxy, secrets the proxy adds, its data dir, host directories a human granted,
//!   limits, the workspace size), written by a human on the host (`skillhost policy`),
//!   never read from the skill's own folder, and bound to the approval through its
//!   [digest](RunPolicy::digest).
//! - [`ScriptJob`]: one run as the registry hands it to a runner: the approved snapshot's
//!   files, the grant made from the policy, the command and the input files.
//! - [`RunOutput`], [`RunFile`]: what came back; [`RunError`]: why there is nothing to show.
//! - [`scripts_of`]: which files of a skill make it runnable code rather than instructions.
//! - [`command_starts_script`]: the approval binds what runs: a run's command must start
//!   one of those scripts unless its policy allows any command (`command`).
//!
//! Like the rest of core this runs nothing: the runner is the jail's
//! ([`SkillRuntime::run_script`](crate::SkillRuntime::run_script)).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest;
use toml::Spanned;

use crate::egress::{EgressPolicy, NetworkSection, SecretBinding, SecretCarrier, SecretSection};
use crate::grant::{DataKey, DirGrant, FileMode, Grant, GrantError, Policy};
use crate::limits::{ByteSize, LimitsRequest, parse_size};
use crate::manifest::{FileCapability, ManifestError, SearchMeta, SkillManifest};
use crate::name::SkillName;

mod command;
mod packages;
pub use command::{INTERPRETERS, StartForm, StartedScript, command_starts_script};
pub use packages::{
    DeclaredError, EnvKind, LockReadError, MAX_PACKAGES, NPM_REGISTRY, NodeError, NodeLock, NodePackages, NpmRegistry, PYPI, PackageLock,
    PackageSources, PythonIndex, RequirementError, ScriptBlockError, SourcesError, StaleLock, check_requirement, declared_node,
    declared_packages, env_kind, env_name,
};

/// The largest policy file read, in bytes.
pub const MAX_POLICY_BYTES: usize = 16 * 1024;
/// The workspace of a run when its policy names none: a tmpfs inside the jail.
pub const DEFAULT_WORKSPACE: u64 = 64 << 20;
/// The largest workspace a policy may ask for.
pub const MAX_WORKSPACE: u64 = 1 << 30;
/// Every input file of one run together, in bytes.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;
/// Input files of one run.
pub const MAX_INPUT_FILES: usize = 64;
/// Files a run's answer lists (the walk of its workspace stops there).
pub const MAX_RUN_FILES: usize = 1000;
/// How deep the walk of a workspace goes.
pub const MAX_RUN_DEPTH: usize = 16;
/// Words of a command.
pub const MAX_COMMAND_ARGS: usize = 256;
/// Bytes of a command, all words together.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// Where a human-granted host directory appears inside the jail: `/host/NAME`.
pub const HOST_PATHS: &str = "/host";

/// Extensions of files that are scripts wherever they lie in a skill's folder.
const SCRIPT_EXTENSIONS: &[&str] = &["py", "sh", "bash", "js", "mjs", "cjs", "ts", "rb", "pl"];

/// The files of a skill that make it runnable code: everything under `scripts/` (the Agent
/// Skills convention for executable code) and any file with a script's extension, sorted.
/// A skill with none is instructions only.
pub fn scripts_of(files: &BTreeMap<String, Vec<u8>>) -> Vec<(&str, String)> {
    files
        .iter()
        .filter(|(path, _)| script_path(path))
        .map(|(path, bytes)| (path.as_str(), hex::encode(sha2::Sha256::digest(bytes))))
        .collect()
}

/// Whether a skill's file at `path` is a script (see [`scripts_of`]).
pub fn script_path(path: &str) -> bool {
    path.starts_with("scripts/") || Path::new(path).extension().and_then(|e| e.to_str()).is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e))
}

/// A host directory a human granted to a skill's scripts, seen at `/host/NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostPath {
    /// The directory on the host: absolute, opened without following a link anywhere on
    /// its way.
    pub host: PathBuf,
    /// Its name inside (`/host/NAME`); default: the directory's own name.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `ro` or `rw`.
    pub mode: FileMode,
}

impl HostPath {
    /// Where the scripts see it.
    pub fn guest(&self) -> String {
        let name =
            self.name.clone().unwrap_or_else(|| self.host.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
        format!("{HOST_PATHS}/{name}")
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    network: Option<Spanned<NetworkSection>>,
    #[serde(default)]
    secrets: Vec<Spanned<SecretSection>>,
    #[serde(default)]
    data: Option<FileMode>,
    #[serde(default)]
    paths: Vec<Spanned<HostPath>>,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    workspace: Option<Spanned<String>>,
    #[serde(default)]
    packages: Vec<String>,
    #[serde(default)]
    any_command: bool,
}

/// What a skill's scripts may have, beyond the default of nothing: no network, no
/// secrets, no data dir, no host paths, the host's default limits. Written by a human on
/// the host (`skillhost policy NAME ...`), kept outside the skill's folder under its
/// identity, shown in its approval request and bound to the approval by
/// [`digest`](Self::digest): a changed policy is a change, back to review.
///
/// Its file is TOML:
///
/// ```toml
/// data = "rw"                            # its data dir at /data (`ro` or `rw`)
/// workspace = "128MiB"                   # the per-run workspace
/// packages = ["requests==2.32.3"]        # added to what its scripts declare
/// any_command = false                    # true: runs may start any command, not only its scripts
/// [network]
/// allow = ["https://api.example.com"]
/// [[secrets]]                            # added by the egress proxy, never seen by the script
/// name = "example-token"
/// header = "Authorization"
/// format = "Bearer {}"
/// hosts = ["https://api.example.com"]
/// [[paths]]                              # seen at /host/reports
/// host = "/home/me/reports"
/// mode = "ro"
/// [limits]
/// timeout = "60s"
/// memory = "1GiB"
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunPolicy {
    /// Where it may send requests, through the egress proxy.
    pub network: EgressPolicy,
    /// Secrets the proxy adds to its requests.
    pub secrets: Vec<SecretBinding>,
    /// Its data dir at `/data`, and how.
    pub data: Option<FileMode>,
    /// Host directories a human granted.
    pub paths: Vec<HostPath>,
    /// Limits of each run (time, memory of the whole tree, output).
    pub limits: LimitsRequest,
    /// The size of each run's workspace.
    pub workspace: u64,
    /// Packages added to those its scripts declare.
    pub packages: Vec<String>,
    /// Whether a run may start any command with these grants (inline code, any program
    /// in the jail), not only one of the skill's approved scripts
    /// ([`command_starts_script`]). Only a human gives it (`skillhost policy NAME
    /// --any-command`); its approval request says so in words of its own.
    pub any_command: bool,
}

#[derive(Serialize)]
struct Canonical<'a> {
    network: [Vec<&'a str>; 3],
    secrets: Vec<(&'a str, &'a str, &'a str, Vec<&'a str>)>,
    data: Option<FileMode>,
    paths: &'a [HostPath],
    limits: &'a LimitsRequest,
    workspace: u64,
    packages: &'a [String],
    /// Left out when false, so the digests of policies written before it stay the same.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    any_command: bool,
}

impl RunPolicy {
    /// The default: nothing.
    pub fn none() -> Self {
        Self { workspace: DEFAULT_WORKSPACE, ..Self::default() }
    }

    /// Parse a policy file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ManifestError> {
        let at = |span: Option<Range<usize>>, message: String, fix: &str| ManifestError {
            file: origin.to_owned(),
            position: span.map(|s| crate::manifest::line_col(text, s.start)),
            message,
            fix: fix.to_owned(),
        };
        if text.len() > MAX_POLICY_BYTES {
            return Err(at(None, format!("policy is {} bytes, more than the {MAX_POLICY_BYTES} allowed", text.len()), "keep it small"));
        }
        let raw: RawPolicy = toml::from_str(text).map_err(|e| at(e.span(), e.message().trim().to_owned(), "fix the policy file"))?;
        let network = match &raw.network {
            None => EgressPolicy::default(),
            Some(section) => EgressPolicy::from_section(section.get_ref())
                .map_err(|e| at(Some(section.span()), e.to_string(), "fix the rule in `[network]`"))?,
        };
        let mut secrets: Vec<SecretBinding> = Vec::new();
        for section in &raw.secrets {
            let binding = SecretBinding::from_section(section.get_ref(), &network)
                .map_err(|e| at(Some(section.span()), e.to_string(), "fix this `[[secrets]]` entry"))?;
            if secrets.iter().any(|s| s.name == binding.name) {
                return Err(at(Some(section.span()), format!("secret `{}` is bound twice", binding.name), "bind each secret once"));
            }
            secrets.push(binding);
        }
        let mut paths: Vec<HostPath> = Vec::new();
        for path in raw.paths {
            let span = path.span();
            let path = path.into_inner();
            check_host_path(&path).map_err(|e| at(Some(span.clone()), e.to_string(), "give an absolute directory and a plain name"))?;
            if paths.iter().any(|p| p.guest() == path.guest()) {
                return Err(at(
                    Some(span),
                    format!("two host paths are both seen at `{}`", path.guest()),
                    "give one of them `as = \"NAME\"`",
                ));
            }
            paths.push(path);
        }
        let workspace = match &raw.workspace {
            None => DEFAULT_WORKSPACE,
            Some(size) => {
                let bytes = parse_size(size.get_ref())
                    .map_err(|e| at(Some(size.span()), e.to_string(), "write a size, e.g. `workspace = \"128MiB\"`"))?;
                if bytes == 0 || bytes > MAX_WORKSPACE {
                    return Err(at(
                        Some(size.span()),
                        format!("workspace must be between 1 byte and {}", ByteSize(MAX_WORKSPACE)),
                        "write a smaller size",
                    ));
                }
                bytes
            }
        };
        for package in &raw.packages {
            if package.is_empty() || package.len() > 200 || package.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(at(
                    None,
                    format!("package `{}` is not a requirement", crate::text::quote(package, 64)),
                    "write `NAME==VERSION`",
                ));
            }
        }
        let any_command = raw.any_command;
        Ok(Self { network, secrets, data: raw.data, paths, limits: raw.limits, workspace, packages: raw.packages, any_command })
    }

    /// What a skill's own skill.toml asks for its scripts: its network rules, secrets,
    /// data dir (its `[[capabilities.files]]`, as the whole data dir with the widest mode
    /// asked) and limits; never host paths or packages, which only a human gives.
    pub fn asked_by(manifest: &SkillManifest) -> Self {
        let data = manifest.files.iter().map(|f| f.mode).max_by_key(|m| *m == FileMode::ReadWrite);
        Self { network: manifest.network.clone(), secrets: manifest.secrets.clone(), data, limits: manifest.limits.clone(), ..Self::none() }
    }

    /// Read the policy at `path`; none there is the default ([`none`](Self::none)).
    pub fn read(path: &Path) -> Result<Self, ManifestError> {
        let bad = |message: String| ManifestError {
            file: path.to_owned(),
            position: None,
            message,
            fix: "rewrite it with `skillhost policy`".into(),
        };
        match std::fs::read(path) {
            Ok(bytes) => Self::parse(std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::none()),
            Err(e) => Err(bad(e.to_string())),
        }
    }

    /// The policy as its file holds it (what [`parse`](Self::parse) reads back).
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        if let Some(mode) = self.data {
            out.push_str(&format!("data = {}\n", toml_str(mode_name(mode))));
        }
        if self.workspace != DEFAULT_WORKSPACE {
            out.push_str(&format!("workspace = {}\n", toml_str(&ByteSize(self.workspace).to_string())));
        }
        if !self.packages.is_empty() {
            out.push_str(&format!("packages = [{}]\n", self.packages.iter().map(|p| toml_str(p)).collect::<Vec<_>>().join(", ")));
        }
        if self.any_command {
            out.push_str("any_command = true\n");
        }
        let rules = |rules: &[crate::egress::Rule]| rules.iter().map(|r| toml_str(&r.text)).collect::<Vec<_>>().join(", ");
        if !self.network.is_empty() {
            out.push_str("\n[network]\n");
            for (key, list) in [("allow", &self.network.allow), ("deny", &self.network.deny), ("private", &self.network.private)] {
                if !list.is_empty() {
                    out.push_str(&format!("{key} = [{}]\n", rules(list)));
                }
            }
        }
        for secret in &self.secrets {
            out.push_str(&format!(
                "\n[[secrets]]\nname = {}\nheader = {}\nformat = {}\nhosts = [{}]\n",
                toml_str(&secret.name),
                toml_str(&secret.header),
                toml_str(&secret.format),
                rules(&secret.hosts)
            ));
        }
        for path in &self.paths {
            out.push_str(&format!("\n[[paths]]\nhost = {}\n", toml_str(&path.host.to_string_lossy())));
            if let Some(name) = &path.name {
                out.push_str(&format!("as = {}\n", toml_str(name)));
            }
            out.push_str(&format!("mode = {}\n", toml_str(mode_name(path.mode))));
        }
        let limits = toml::to_string(&self.limits).unwrap_or_default();
        if !limits.trim().is_empty() {
            out.push_str("\n[limits]\n");
            out.push_str(&limits);
        }
        out
    }

    /// What an approval binds to besides the content hash: a digest of everything the
    /// policy grants.
    pub fn digest(&self) -> String {
        fn texts(rules: &[crate::egress::Rule]) -> Vec<&str> {
            rules.iter().map(|r| r.text.as_str()).collect()
        }
        let canonical = Canonical {
            network: [texts(&self.network.allow), texts(&self.network.deny), texts(&self.network.private)],
            secrets: self.secrets.iter().map(|s| (s.name.as_str(), s.header.as_str(), s.format.as_str(), texts(&s.hosts))).collect(),
            data: self.data,
            paths: &self.paths,
            limits: &self.limits,
            workspace: self.workspace,
            packages: &self.packages,
            any_command: self.any_command,
        };
        let json = serde_json::to_vec(&canonical).unwrap_or_default();
        format!("scripts-{}", hex::encode(sha2::Sha256::digest(json)))
    }

    /// The grant a run of `skill`'s scripts holds under `host` (the host's limits, its
    /// data root; `key` the skill's identity): the host's checks of a manifest apply to
    /// the policy the same way, and every host path is a directory opened from `/`
    /// without following a link.
    pub fn grant(&self, skill: &SkillName, host: &Policy, key: &DataKey) -> Result<Grant, GrantError> {
        let mut limits = self.limits.clone();
        limits.timeout = limits.timeout.or(Some(DEFAULT_RUN_TIMEOUT.min(host.max.timeout)));
        limits.memory = limits.memory.or(Some(DEFAULT_RUN_MEMORY.min(host.max.memory)));
        let manifest = SkillManifest {
            name: skill.clone(),
            version: String::new(),
            description: String::new(),
            search: SearchMeta::default(),
            files: self.data.map(|mode| FileCapability { path: ".".into(), mode }).into_iter().collect(),
            limits,
            network: self.network.clone(),
            secrets: self.secrets.clone(),
            server: None,
        };
        let mut grant = Grant::new(&manifest, host, key)?;
        for path in &self.paths {
            if path.mode == FileMode::ReadWrite && !host.allow_writable_files {
                return Err(GrantError::WritableDenied { skill: skill.clone(), path: path.host.display().to_string() });
            }
            grant.dirs.push(DirGrant { host: path.host.clone(), root: PathBuf::from("/"), guest: path.guest(), mode: path.mode });
        }
        Ok(grant)
    }

    /// What it grants, one line each, as a human reviews it (none: the default).
    pub fn requests(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(mode) = self.data {
            lines.push(format!("its data dir at /data: {}", mode_words(mode)));
        }
        for path in &self.paths {
            lines.push(format!("host directory {} at {}: {}", path.host.display(), path.guest(), mode_words(path.mode)));
        }
        for (kind, rules) in
            [("allow", &self.network.allow), ("deny", &self.network.deny), ("private address allowed", &self.network.private)]
        {
            for rule in rules {
                lines.push(format!("network {kind}: {}", rule.text));
            }
        }
        lines.extend(self.secrets.iter().map(|secret| secret.approval_line(SecretCarrier::Proxy)));
        for package in &self.packages {
            lines.push(format!("package added by the policy: {package}"));
        }
        lines.push(format!("workspace of each run: {}", ByteSize(self.workspace)));
        if self.any_command {
            lines.push(
                "runs ANY command an agent sends (not only its scripts: inline code such as `python -c` or `sh -c`, any program in the jail), with every grant above"
                    .into(),
            );
        }
        lines
    }

    /// Whether it grants more than nothing (its risk is above a pure computation's).
    pub fn grants_anything(&self) -> bool {
        self.data.is_some() || !self.paths.is_empty() || !self.network.is_empty() || !self.secrets.is_empty()
    }

    /// Whether it grants anything a run could change or leak the host's things with.
    pub fn grants_writes_or_secrets(&self) -> bool {
        self.data == Some(FileMode::ReadWrite) || self.paths.iter().any(|p| p.mode == FileMode::ReadWrite) || !self.secrets.is_empty()
    }
}

/// Why a `[[paths]]` entry of a policy is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum HostPathError {
    #[error("host path `{0}` must be absolute, without `..`")]
    NotAbsolute(String),
    #[error("`{0}` is not a usable name inside the jail (letters, digits, `-`, `_`, `.`)")]
    BadName(String),
}

fn check_host_path(path: &HostPath) -> Result<(), HostPathError> {
    if !path.host.is_absolute() || path.host.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(HostPathError::NotAbsolute(path.host.display().to_string()));
    }
    let guest = path.guest();
    let name = &guest[HOST_PATHS.len() + 1..];
    if name.is_empty()
        || name.len() > 64
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        || name.starts_with('.')
    {
        return Err(HostPathError::BadName(crate::text::quote(name, 64)));
    }
    Ok(())
}

/// The mode as policy files and skill.toml write it.
fn mode_name(mode: FileMode) -> &'static str {
    match mode {
        FileMode::ReadOnly => "ro",
        FileMode::ReadWrite => "rw",
    }
}

fn mode_words(mode: FileMode) -> &'static str {
    match mode {
        FileMode::ReadOnly => "read-only",
        FileMode::ReadWrite => "read-write",
    }
}

fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A file an agent passes into a run's workspace, by content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInput {
    /// Its path in the workspace (relative, `/`-separated, no `..`).
    pub path: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Whether it is made executable (mode 0755, else 0644).
    pub executable: bool,
}

impl RunInput {
    /// A file that is not executable.
    pub fn file(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self { path: path.into(), bytes: bytes.into(), executable: false }
    }
}

/// One run, as the registry hands it to the runner: only an approved skill's, with the
/// bytes its approval covered.
#[derive(Clone, Debug)]
pub struct ScriptJob {
    /// The skill.
    pub skill: SkillName,
    /// The content hash its approval bound to.
    pub content_hash: String,
    /// Its files exactly as they were hashed (relative `/`-separated path to contents):
    /// what the jail sees at `/skill`, read-only, whatever its folder holds now.
    pub files: Arc<BTreeMap<String, Vec<u8>>>,
    /// What the run holds: its policy's grant.
    pub grant: Grant,
    /// The size of its workspace.
    pub workspace: u64,
    /// The command, as a SKILL.md writes it (`python scripts/fill.py in.pdf out.pdf`).
    pub command: Vec<String>,
    /// Files put into the workspace before the command starts.
    pub inputs: Vec<RunInput>,
    /// The environment its declared Python packages were installed into at approval
    /// ([`PackageLock::env`]), used instead of the host's managed venv.
    pub env: Option<String>,
    /// The environment of its node packages ([`NodeLock::env`]), seen at `/node_modules`.
    pub node_env: Option<String>,
    /// Whether its policy lets the command be any command ([`RunPolicy::any_command`]);
    /// otherwise it must start one of the skill's scripts ([`command_starts_script`]).
    pub any_command: bool,
}

impl ScriptJob {
    /// Check the command and the inputs against the caps and the path rules, and the
    /// command against the approval: unless its policy allows any command, it must start
    /// one of the skill's scripts ([`command_starts_script`]).
    pub fn check(&self) -> Result<(), RunError> {
        let bad = |reason: String| RunError::Refused { skill: self.skill.clone(), reason };
        if self.command.is_empty() || self.command[0].is_empty() {
            return Err(bad("the command is empty; give the program and its arguments, e.g. `python scripts/x.py`".into()));
        }
        let bytes: usize = self.command.iter().map(String::len).sum();
        if self.command.len() > MAX_COMMAND_ARGS || bytes > MAX_COMMAND_BYTES {
            return Err(bad(format!(
                "the command has {} words and {bytes} bytes, more than {MAX_COMMAND_ARGS} or {MAX_COMMAND_BYTES}",
                self.command.len()
            )));
        }
        if self.command.iter().any(|w| w.contains('\0')) {
            return Err(bad("a word of the command holds a NUL byte".into()));
        }
        if self.inputs.len() > MAX_INPUT_FILES {
            return Err(bad(format!("{} input files, more than the {MAX_INPUT_FILES} a run takes", self.inputs.len())));
        }
        let total: u64 = self.inputs.iter().map(|i| i.bytes.len() as u64).sum();
        if total > MAX_INPUT_BYTES.min(self.workspace) {
            return Err(bad(format!(
                "its input files hold {}, more than the {} a run takes; pass smaller files, or grant a host directory with `skillhost policy {} --path DIR`",
                ByteSize(total),
                ByteSize(MAX_INPUT_BYTES.min(self.workspace)),
                self.skill
            )));
        }
        for input in &self.inputs {
            check_relative(&input.path).map_err(|reason| bad(format!("input `{}` {reason}", crate::text::quote(&input.path, 80))))?;
        }
        if !self.any_command {
            command_starts_script(&self.skill, &self.command, &self.files)?;
        }
        Ok(())
    }
}

/// Whether `path` is a plain relative path: `/`-separated names, no `.`/`..`, no empty
/// name, no control characters, at most 512 bytes.
pub fn check_relative(path: &str) -> Result<(), &'static str> {
    if path.is_empty() || path.len() > 512 {
        return Err("must be 1 to 512 bytes");
    }
    if path.starts_with('/') {
        return Err("must be relative to the workspace");
    }
    if path.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return Err("must be plain names separated by `/` (no `..`, `.` or empty names)");
    }
    if path.chars().any(char::is_control) {
        return Err("holds a control character");
    }
    Ok(())
}

/// A file a run left in its workspace.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct RunFile {
    /// Its path in the workspace.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    /// Whether the run left it executable (any `x` bit).
    pub executable: bool,
    /// Its bytes.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for RunFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunFile")
            .field("path", &self.path)
            .field("size", &self.size)
            .field("sha256", &self.sha256)
            .field("executable", &self.executable)
            .finish_non_exhaustive()
    }
}

/// What a run left: how its command ended, what it printed and wrote.
#[derive(Clone, Serialize)]
pub struct RunOutput {
    /// The command's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// What it printed on stdout, up to [`output_cap`](Self::output_cap) bytes.
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// What it printed on stderr, up to [`output_cap`](Self::output_cap) bytes.
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// Bytes it printed on stdout, kept or not.
    pub stdout_bytes: u64,
    /// Bytes it printed on stderr, kept or not.
    pub stderr_bytes: u64,
    /// The cap on each of stdout and stderr (its policy's output limit).
    pub output_cap: u64,
    /// The files in its workspace when it ended that it wrote or changed (an input it
    /// left as it came is in [`unchanged_inputs`](Self::unchanged_inputs) instead), sorted
    /// by path.
    pub files: Vec<RunFile>,
    /// The inputs it left as they came (same bytes, same mode), by path.
    pub unchanged_inputs: Vec<String>,
    /// What the walk of the workspace left out, one line each (a link, a special file,
    /// the caps).
    pub skipped: Vec<String>,
    /// Bytes its workspace used at the end, and its size.
    pub workspace: (u64, u64),
    /// How long it ran (`duration_ms` in JSON).
    #[serde(rename = "duration_ms", serialize_with = "ser_millis")]
    pub duration: Duration,
}

impl std::fmt::Debug for RunOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |bytes: &[u8]| crate::text::quote(&String::from_utf8_lossy(bytes), 400);
        f.debug_struct("RunOutput")
            .field("exit_code", &self.exit_code)
            .field("signal", &self.signal)
            .field("stdout", &text(&self.stdout))
            .field("stderr", &text(&self.stderr))
            .field("files", &self.files)
            .field("skipped", &self.skipped)
            .field("workspace", &self.workspace)
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

/// Why a run has nothing to show. Each names the skill, what was refused and what to do.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The request breaks a rule (command, inputs).
    #[error("skill `{skill}`: run refused: {reason}")]
    Refused {
        /// The skill.
        skill: SkillName,
        /// What and how to fix it.
        reason: String,
    },
    /// This host runs no scripts (no sandbox, or an isolation layer missing).
    #[error("skill `{skill}`: this host cannot run scripts: {reason}")]
    Unavailable {
        /// The skill.
        skill: SkillName,
        /// Why, and the fix.
        reason: String,
    },
    /// The run was stopped at a limit; its sandbox was killed.
    #[error("skill `{skill}`: run stopped: {what}; its sandbox was killed; {fix}")]
    Limit {
        /// The skill.
        skill: SkillName,
        /// The limit and what the run did.
        what: String,
        /// How to allow more.
        fix: String,
    },
    /// The caller cancelled the run.
    #[error("skill `{skill}`: run cancelled")]
    Cancelled {
        /// The skill.
        skill: SkillName,
    },
    /// The jail failed (not the script).
    #[error("skill `{skill}`: the jail failed: {reason}")]
    Jail {
        /// The skill.
        skill: SkillName,
        /// What failed.
        reason: String,
    },
}

fn ser_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// The timeout of a run when its policy names none, longer than a tool call's: scripts
/// start interpreters and load libraries (never above the host's maximum).
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// The memory of a run's whole process tree when its policy names none (never above the
/// host's maximum).
pub const DEFAULT_RUN_MEMORY: u64 = 512 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        list.iter().map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec())).collect()
    }

    #[test]
    fn packages_come_from_pep_723_requirements_and_the_policy() {
        let skill = files(&[
            (
                "scripts/a.py",
                "#!/usr/bin/env python3\n# /// script\n# requires-python = \">=3.10\"\n# dependencies = [\n#   \"requests>=2\",\n#   \"rich\",\n# ]\n# ///\nimport requests\n",
            ),
            ("scripts/requirements.txt", "# pinned\nrich==13.7.1  # tables\n\nPyYAML>=6 ; python_version >= '3.8'\n"),
            ("README.py.txt", "# /// script\n# dependencies = [\"ignored\"]\n# ///\n"),
        ]);
        let policy = RunPolicy { packages: vec!["requests>=2".into(), "six==1.16.0".into()], ..RunPolicy::none() };
        assert_eq!(
            declared_packages(&skill, &policy).unwrap(),
            ["PyYAML>=6 ; python_version >= '3.8'", "requests>=2", "rich", "rich==13.7.1", "six==1.16.0"]
        );
        assert_eq!(declared_packages(&files(&[("scripts/x.sh", "echo")]), &RunPolicy::none()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn options_urls_and_broken_blocks_are_refused_naming_the_file() {
        for (path, text, says) in [
            ("requirements.txt", "-r other.txt\n", "requirements.txt:1"),
            ("requirements.txt", "ok\n--index-url https://evil.example/simple\n", "requirements.txt:2"),
            ("scripts/x.py", "# /// script\n# dependencies = [\"pkg @ git+https://x/y\"]\n# ///\n", "scripts/x.py"),
            ("scripts/x.py", "# /// script\n# dependencies = [\"a\"]\n", "not closed"),
            ("scripts/x.py", "# /// script\n# dependencies = [\"a\"\n# ///\n", "not valid TOML"),
        ] {
            let error = declared_packages(&files(&[(path, text)]), &RunPolicy::none()).unwrap_err().to_string();
            assert!(error.contains(says), "{path}: {error}");
        }
    }

    #[test]
    fn a_policy_reads_back_what_it_writes_and_its_digest_follows_every_grant() {
        let text = "data = \"rw\"\nworkspace = \"8MiB\"\npackages = [\"six==1.16.0\"]\n[network]\nallow = [\"http://127.0.0.1:8080\"]\n[[secrets]]\nname = \"tok\"\nheader = \"Authorization\"\nformat = \"Bearer {}\"\nhosts = [\"http://127.0.0.1:8080\"]\n[[paths]]\nhost = \"/srv/reports\"\nas = \"reports\"\nmode = \"ro\"\n[limits]\ntimeout = \"90s\"\n";
        let policy = RunPolicy::parse(text, Path::new("p.toml")).unwrap();
        let again = RunPolicy::parse(&policy.to_toml(), Path::new("p.toml")).unwrap();
        assert_eq!(policy, again);
        assert_eq!(policy.digest(), again.digest());
        assert_ne!(policy.digest(), RunPolicy::none().digest());
        let wider = RunPolicy::parse(&text.replace("\"ro\"", "\"rw\""), Path::new("p.toml")).unwrap();
        assert_ne!(policy.digest(), wider.digest());
        assert!(policy.grants_writes_or_secrets());
        assert_eq!(policy.paths[0].guest(), "/host/reports");
        for bad in [
            "[[paths]]\nhost = \"relative\"\nmode = \"ro\"\n",
            "workspace = \"2GiB\"\n",
            "unknown = 1\n",
            "[[secrets]]\nname = \"t\"\nheader = \"A\"\nhosts = [\"http://not-allowed\"]\n",
        ] {
            assert!(RunPolicy::parse(bad, Path::new("p.toml")).is_err(), "{bad}");
        }
    }

    #[test]
    fn any_command_is_part_of_the_digest_and_said_in_the_request() {
        let text = "[[paths]]\nhost = \"/srv/data\"\nmode = \"rw\"\n";
        let scripts_only = RunPolicy::parse(text, Path::new("p.toml")).unwrap();
        let any = RunPolicy::parse(&format!("any_command = true\n{text}"), Path::new("p.toml")).unwrap();
        assert!(any.any_command && !scripts_only.any_command);
        assert_eq!(RunPolicy::parse(&any.to_toml(), Path::new("p.toml")).unwrap(), any, "it reads back");
        assert_ne!(any.digest(), scripts_only.digest(), "changing it needs approval again");
        assert!(!scripts_only.requests().iter().any(|l| l.contains("ANY")), "{:?}", scripts_only.requests());
        let last = any.requests().pop().unwrap();
        assert!(
            last.starts_with("runs ANY command an agent sends (not only its scripts") && last.ends_with("with every grant above"),
            "{last}"
        );
        let manifest = SkillManifest::parse("name = \"xy\"\nversion = \"1\"\ndescription = \"d\"\n", Path::new("skill.toml")).unwrap();
        assert!(!RunPolicy::asked_by(&manifest).any_command, "a skill cannot ask for it");
    }

    #[test]
    fn scripts_are_files_under_scripts_or_with_a_scripts_extension() {
        let skill = files(&[("SKILL.md", ""), ("scripts/data.csv", ""), ("tool.py", ""), ("references/a.md", "")]);
        let paths: Vec<&str> = scripts_of(&skill).into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["scripts/data.csv", "tool.py"]);
    }
}
