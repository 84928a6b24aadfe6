//! A SKILL.md skill's packages around its approval, wherever the approval is given (the
//! CLI's `approve`, an MCP client's answer): [`Host::resolve_packages`] resolves what its
//! scripts declare to exact versions and artifact hashes from the host's `[packages]`
//! sources (metadata only: nothing is installed) and records the lock, so the question
//! shows exactly what would be installed and from where; after a yes,
//! [`Host::install_resolved`] installs that lock (hashes required, no install script runs)
//! before the approval is recorded. A "no" installs nothing; a failed install approves
//! nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use skillhost_core::run::PackageLock;
use skillhost_registry::{Registry, RegistryError};

use crate::Host;

/// A skill's packages resolved and recorded, to install once a human said yes.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The skill.
    pub skill: String,
    /// What was resolved, as the approval request shows it.
    pub lock: PackageLock,
    files: Arc<BTreeMap<String, Vec<u8>>>,
}

/// Why a skill's packages could not be resolved or installed; its approval waits.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackagesError {
    /// This host has no sandbox to install them with.
    #[error(
        "skill `{skill}` declares packages and this host's sandbox is unavailable ({reason}); nothing was approved: see `skillhost doctor`"
    )]
    NoSandbox {
        /// The skill.
        skill: String,
        /// Why there is no sandbox.
        reason: String,
    },
    /// Resolving or installing failed.
    #[error("skill `{skill}`: its packages {stage}: {source}; nothing was approved")]
    Packages {
        /// The skill.
        skill: String,
        /// `could not be resolved`, `could not be installed`.
        stage: &'static str,
        /// Why.
        #[source]
        source: skillhost_sandbox::run::PackagesError,
    },
    /// The lock recorded now is not the one resolved for the question.
    #[error(
        "skill `{skill}`: its packages were resolved again while it was asked about; nothing was installed or approved: ask again (`skillhost approve {skill}`)"
    )]
    Changed {
        /// The skill.
        skill: String,
    },
    /// The registry refused (an unknown skill, the lock could not be recorded).
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl Host {
    /// Resolve the packages `name`'s scripts declare and record the lock (its approval
    /// request then lists them); `None` when it declares none.
    pub async fn resolve_packages(&self, registry: &Registry, name: &str) -> Result<Option<Resolved>, PackagesError> {
        let entry = registry.entry(name)?;
        let Some(loaded) = entry.loaded.as_ref() else { return Ok(None) };
        let Some(scripts) = loaded.scripts.as_ref().filter(|s| s.declares_packages()) else { return Ok(None) };
        // The sources a human named in `[packages]`: never the defaults in their place.
        let sandbox = self.sandbox().map_err(|e| PackagesError::NoSandbox { skill: name.to_owned(), reason: e.to_string() })?;
        let lock = sandbox.resolve_packages(&scripts.packages, &loaded.files).await.map_err(|source| PackagesError::Packages {
            skill: name.to_owned(),
            stage: "could not be resolved",
            source,
        })?;
        if scripts.lock.as_ref() != Some(&lock) {
            registry.set_lock(name, &lock).await?;
        }
        Ok(Some(Resolved { skill: name.to_owned(), lock, files: loaded.files.clone() }))
    }

    /// The packages `name`'s approval request shows now, resolved again only when none
    /// are recorded: what an answer to a question asked before is about.
    pub async fn recorded_packages(&self, registry: &Registry, name: &str) -> Result<Option<Resolved>, PackagesError> {
        let entry = registry.entry(name)?;
        let Some(loaded) = entry.loaded.as_ref() else { return Ok(None) };
        let Some(scripts) = loaded.scripts.as_ref().filter(|s| s.declares_packages()) else { return Ok(None) };
        match &scripts.lock {
            Some(lock) => Ok(Some(Resolved { skill: name.to_owned(), lock: lock.clone(), files: loaded.files.clone() })),
            None => self.resolve_packages(registry, name).await,
        }
    }

    /// Install `resolved` for its skill (after a human's yes, before the approval is
    /// recorded), refusing if the skill's recorded lock is no longer the one resolved.
    pub async fn install_resolved(&self, registry: &Registry, resolved: &Resolved) -> Result<(), PackagesError> {
        let skill = resolved.skill.as_str();
        let shown = registry.entry(skill)?.loaded.as_ref().and_then(|l| l.scripts.as_ref()).and_then(|s| s.lock.clone());
        if shown.as_ref() != Some(&resolved.lock) {
            return Err(PackagesError::Changed { skill: skill.to_owned() });
        }
        let sandbox = self.sandbox().map_err(|e| PackagesError::NoSandbox { skill: skill.to_owned(), reason: e.to_string() })?;
        sandbox.install_packages(&resolved.lock, &resolved.files).await.map_err(|source| PackagesError::Packages {
            skill: skill.to_owned(),
            stage: "could not be installed",
            source,
        })
    }
}

/// The host's resolving and installing for approvals answered over MCP
/// ([`SkillhostMcp::with_packages`](skillhost_mcp::SkillhostMcp::with_packages)).
pub struct McpPackages {
    host: Arc<Host>,
    registry: Arc<Registry>,
}

impl McpPackages {
    /// `host`'s sandbox resolving and installing the packages of `registry`'s skills.
    pub fn new(host: Arc<Host>, registry: Arc<Registry>) -> Self {
        Self { host, registry }
    }
}

impl skillhost_mcp::ApprovalPackages for McpPackages {
    fn resolve<'a>(&'a self, skill: &'a str) -> skillhost_mcp::PackagesFuture<'a> {
        Box::pin(async move { self.host.resolve_packages(&self.registry, skill).await.map(drop).map_err(Into::into) })
    }

    fn install<'a>(&'a self, skill: &'a str) -> skillhost_mcp::PackagesFuture<'a> {
        Box::pin(async move {
            match self.host.recorded_packages(&self.registry, skill).await? {
                Some(resolved) => Ok(self.host.install_resolved(&self.registry, &resolved).await?),
                None => Ok(()),
            }
        })
    }
}
