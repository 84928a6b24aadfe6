//! Direct loads, the registry's trust-less mode: one skill by its path, outside the layers
//! and the trust store, for development (`skillhost call ./dir`, `inspect`, `build`, an
//! editor trying the skill being written).
//!
//! The skill is read by the same reader as a layer's skill and loaded by the same runtime;
//! what it holds is the caller's to decide ([`Access`]), never a stored approval. Nothing
//! is kept: the caller holds the [`DirectSkill`], and its probe scratch dir goes with it.
//! Its data dir is its own (`<data root>/.dev/<name>`, [`DirectSkill::data_key`]), never
//! that of an installed skill of the same name.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use skillhost_core::{
    CacheOutcome, CallContext, CallError, DataKey, Grant, LoadError, Policy, Skill, SkillName, SkillRuntime, SkillSource, ToolOutput,
};
use skillhost_package::SizeLimits;

use crate::error::RegistryError;

/// What a directly loaded skill runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The [probe grant](Grant::probe): a fresh scratch dir at `/data`, no network (a
    /// component's requests are refused by the gate), no secrets, the deadline cut to
    /// [`PROBE_TIMEOUT`](skillhost_core::PROBE_TIMEOUT). What code nobody approved gets.
    Probe,
    /// Everything its skill.toml asks for, within the host's policy: the caller approves
    /// it, as a human at a terminal does with `skillhost call --grant`, or an editor after
    /// showing the requests in its own UI.
    Granted,
}

/// A skill loaded by its path, held by its caller alone.
#[derive(Clone)]
pub struct DirectSkill {
    /// The running skill.
    pub skill: Arc<dyn Skill>,
    /// What was read: manifest, origin, code, instructions.
    pub source: SkillSource,
    /// What its skill.toml asks for, within the host's policy: what [`Access::Granted`]
    /// gives it. It runs with this grant only when `access` says so.
    pub asked: Grant,
    /// What it was loaded with.
    pub access: Access,
    /// The scratch dir of a probe grant, removed with the last clone.
    _scratch: Option<Arc<skillhost_package::ScratchDir>>,
}

impl std::fmt::Debug for DirectSkill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSkill")
            .field("name", self.name())
            .field("origin", &self.source.origin)
            .field("runtime", &self.runtime())
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl DirectSkill {
    /// Read the skill at `path` (a `.wasm` file or a skill folder, with a component or a
    /// `[server]`) and load it with `access` on `runtime`, under `policy`. A probe's
    /// scratch dir is made in `scratch_root`.
    pub async fn load(
        runtime: &dyn SkillRuntime,
        policy: &Policy,
        scratch_root: &Path,
        path: &Path,
        access: Access,
    ) -> Result<Self, RegistryError> {
        let source = skillhost_package::read_source(path, &SizeLimits::default())?;
        let name = source.manifest.name.clone();
        let asked = Grant::new(&source.manifest, policy, &Self::data_key(&name)).map_err(LoadError::from)?;
        let (grant, scratch) = match access {
            Access::Granted => (asked.clone(), None),
            Access::Probe => {
                let scratch = skillhost_package::ScratchRoot::open(scratch_root)
                    .and_then(|root| root.dir(&format!("{name}-")))
                    .map_err(RegistryError::io(scratch_root, "cannot create the probe scratch dir of a skill loaded by its path"))?;
                (asked.probe_for(&source.code, scratch.path()), Some(Arc::new(scratch)))
            }
        };
        let skill = runtime.load(&source, grant).await?;
        Ok(Self { skill, source, asked, access, _scratch: scratch })
    }

    /// Whose data a directly loaded skill `name` has: its own, apart from every layer's.
    pub fn data_key(name: &SkillName) -> DataKey {
        DataKey::scoped("dev", name)
    }

    /// Its name.
    pub fn name(&self) -> &SkillName {
        &self.source.manifest.name
    }

    /// The runtime that runs it (`wasm`, `bwrap`).
    pub fn runtime(&self) -> &'static str {
        self.source.code.kind()
    }

    /// Whether its code was compiled, taken from the compiled cache, or is not compiled
    /// yet; `None` for a server skill (nothing is compiled).
    pub fn cache_outcome(&self) -> Option<CacheOutcome> {
        self.skill.cache_outcome()
    }

    /// Call `tool` with `input`, under what it was loaded with.
    pub async fn call(&self, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, CallError> {
        self.skill.call(tool, input, cx).await
    }
}
