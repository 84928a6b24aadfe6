//! What a skill finally holds: a [`Grant`] is what its manifest asks for, cut to what the
//! host's [`Policy`] allows. (Human approval, the third part of the intersection, is the
//! registry's, which only ever narrows a grant.) Runtimes build their sandboxes from a
//! `Grant` and nothing else.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::egress::{EgressPolicy, SecretBinding};
use crate::limits::{ByteSize, Limits, fmt_duration};
use crate::manifest::SkillManifest;
use crate::name::SkillName;

/// How a granted directory may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum FileMode {
    /// Read files and list directories.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Also create, write, rename and delete files and directories.
    #[serde(rename = "rw")]
    ReadWrite,
}

/// What the host allows any skill, whatever its manifest asks.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Directory holding one data dir per skill (`<data_root>/<skill>/`).
    pub data_root: PathBuf,
    /// The largest limits a manifest may ask for. Default: [`Limits::MAX`].
    pub max: Limits,
    /// Limits for skills that ask for none. Default: [`Limits::DEFAULT`].
    pub default: Limits,
    /// Whether skills may be granted writable directories. Default: `true`.
    pub allow_writable_files: bool,
    /// Whether skills may be granted outbound HTTP to the hosts they declare. Default: `true`.
    pub allow_network: bool,
}

impl Policy {
    /// A policy with the default limits and data dirs under `data_root`.
    pub fn new(data_root: impl Into<PathBuf>) -> Self {
        Self {
            data_root: data_root.into(),
            max: Limits::MAX,
            default: Limits::DEFAULT,
            allow_writable_files: true,
            allow_network: true,
        }
    }

    /// The data dir of `skill`.
    pub fn data_dir(&self, skill: &SkillName) -> PathBuf {
        self.data_root.join(skill.as_str())
    }
}

/// A directory the skill may open, and where it sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DirGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the guest sees it: `/data` or `/data/<path>`.
    pub guest: String,
    /// Read-only or read-write.
    pub mode: FileMode,
}

/// Everything one skill may do. Deny by default: what is not here, the skill cannot do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The skill this grant belongs to.
    pub skill: SkillName,
    /// Preopened directories.
    pub dirs: Vec<DirGrant>,
    /// Hard limits on each call.
    pub limits: Limits,
    /// Where it may send HTTP requests; empty: nowhere (and no HTTP interface is linked).
    pub network: EgressPolicy,
    /// Secrets the host adds to its requests.
    pub secrets: Vec<SecretBinding>,
}

/// Why a skill's request cannot be granted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// A limit asked for is above the host's maximum.
    #[error("skill `{skill}` asks for {limit} = {asked}, above the host maximum of {max}; lower `[limits] {limit}` in its skill.toml or raise the host maximum")]
    LimitAboveMax {
        /// The skill.
        skill: SkillName,
        /// Which limit (`timeout`, `memory`, `output`, `concurrency`).
        limit: &'static str,
        /// What the manifest asked, formatted.
        asked: String,
        /// The host's maximum, formatted.
        max: String,
    },
    /// A limit of zero would make every call fail.
    #[error("skill `{skill}` asks for {limit} = 0; remove the line or give a positive value")]
    ZeroLimit {
        /// The skill.
        skill: SkillName,
        /// Which limit.
        limit: &'static str,
    },
    /// The host allows no network access.
    #[error("skill `{skill}` asks for network access but this host allows none; remove `[network]` from its skill.toml or allow network in the host policy")]
    NetworkDenied {
        /// The skill.
        skill: SkillName,
    },
    /// The host does not allow writable directories.
    #[error("skill `{skill}` asks to write to `{path}` but this host allows read-only files only; change its mode to \"ro\" or allow writable files in the host policy")]
    WritableDenied {
        /// The skill.
        skill: SkillName,
        /// The path asked for.
        path: String,
    },
}

impl Grant {
    /// The grant for `manifest` under `policy`: what it asks, within what the host allows.
    pub fn new(manifest: &SkillManifest, policy: &Policy) -> Result<Self, GrantError> {
        let skill = manifest.name.clone();
        let asked = &manifest.limits;
        let base = policy.default;
        let mut limits = Limits {
            timeout: asked.timeout.unwrap_or(base.timeout),
            memory: asked.memory.unwrap_or(base.memory),
            output: asked.output.unwrap_or(base.output),
            concurrency: asked.concurrency.unwrap_or(base.concurrency),
            log: base.log,
        };
        let max = policy.max;
        let checks: [(&'static str, bool, bool, String, String); 4] = [
            ("timeout", limits.timeout > max.timeout, limits.timeout.is_zero(), fmt_duration(limits.timeout), fmt_duration(max.timeout)),
            ("memory", limits.memory > max.memory, limits.memory == 0, ByteSize(limits.memory).to_string(), ByteSize(max.memory).to_string()),
            ("output", limits.output > max.output, limits.output == 0, ByteSize(limits.output).to_string(), ByteSize(max.output).to_string()),
            ("concurrency", limits.concurrency > max.concurrency, limits.concurrency == 0, limits.concurrency.to_string(), max.concurrency.to_string()),
        ];
        for (limit, above, zero, asked, max) in checks {
            if zero {
                return Err(GrantError::ZeroLimit { skill, limit });
            }
            if above {
                return Err(GrantError::LimitAboveMax { skill, limit, asked, max });
            }
        }
        limits.log = limits.log.min(max.log);

        let data_dir = policy.data_dir(&skill);
        let mut dirs = Vec::with_capacity(manifest.files.len());
        for file in &manifest.files {
            if file.mode == FileMode::ReadWrite && !policy.allow_writable_files {
                return Err(GrantError::WritableDenied { skill, path: file.path.clone() });
            }
            let (host, guest) = if file.path == "." {
                (data_dir.clone(), "/data".to_owned())
            } else {
                (data_dir.join(&file.path), format!("/data/{}", file.path))
            };
            dirs.push(DirGrant { host, guest, mode: file.mode });
        }
        if !manifest.network.is_empty() && !policy.allow_network {
            return Err(GrantError::NetworkDenied { skill });
        }
        Ok(Grant { skill, dirs, limits, network: manifest.network.clone(), secrets: manifest.secrets.clone() })
    }

    /// A grant with no capabilities and the given limits: pure computation only.
    pub fn pure(skill: SkillName, limits: Limits) -> Self {
        Self { skill, dirs: Vec::new(), limits, network: EgressPolicy::default(), secrets: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    use crate::manifest::test_manifest as manifest;

    #[test]
    fn nothing_asked_nothing_granted() {
        let grant = Grant::new(&manifest(""), &Policy::new("/var/skills")).unwrap();
        assert!(grant.dirs.is_empty());
        assert_eq!(grant.limits, Limits::DEFAULT);
    }

    #[test]
    fn dirs_map_into_the_data_dir() {
        let m = manifest("[[capabilities.files]]\npath = \".\"\nmode = \"ro\"\n[[capabilities.files]]\npath = \"out\"\nmode = \"rw\"\n");
        let grant = Grant::new(&m, &Policy::new("/var/skills")).unwrap();
        assert_eq!(
            grant.dirs,
            vec![
                DirGrant { host: "/var/skills/demo".into(), guest: "/data".into(), mode: FileMode::ReadOnly },
                DirGrant { host: "/var/skills/demo/out".into(), guest: "/data/out".into(), mode: FileMode::ReadWrite },
            ]
        );
        let mut strict = Policy::new("/var/skills");
        strict.allow_writable_files = false;
        let err = Grant::new(&m, &strict).unwrap_err().to_string();
        assert!(err.contains("`demo` asks to write to `out`"), "{err}");
    }

    #[test]
    fn limits_within_maxima() {
        let table = [
            ("timeout = \"5s\"", Ok(())),
            ("timeout = \"10m\"", Err("timeout = 600s, above the host maximum of 120s")),
            ("memory = \"2GiB\"", Err("memory = 2 GiB, above the host maximum of 1 GiB")),
            ("output = \"0\"", Err("output = 0")),
            ("concurrency = 1000", Err("concurrency = 1000, above the host maximum of 64")),
        ];
        for (line, expected) in table {
            let result = Grant::new(&manifest(&format!("[limits]\n{line}\n")), &Policy::new("/d"));
            match (result, expected) {
                (Ok(grant), Ok(())) => assert_eq!(grant.limits.timeout, Duration::from_secs(5)),
                (Err(err), Err(text)) => assert!(err.to_string().contains(text), "{err}"),
                (result, expected) => panic!("{line}: got {result:?}, expected {expected:?}"),
            }
        }
    }
}
