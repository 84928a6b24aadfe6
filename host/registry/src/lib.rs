//! skillhost's skill registry: finds skills in layered directories, decides with the
//! trust store whether they may run, keeps them loaded and reloads them when their files
//! change, and installs or removes them in the user layer.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use skillhost_core::{CallContext, Policy};
//! use skillhost_registry::{Registry, RegistryConfig};
//! use skillhost_wasm::{WasmConfig, WasmRuntime};
//!
//! let mut config = RegistryConfig::new("/var/lib/skillhost");
//! config.workspace = Some("skills".into());
//! let runtime = Arc::new(WasmRuntime::new(WasmConfig::default())?);
//! let registry = Registry::open(config, runtime, Policy::new("/var/lib/skillhost/data")).await?;
//! for entry in registry.catalog() {
//!     println!("{} ({}, {})", entry.name, entry.layer, entry.state);
//! }
//! let out = registry.call("text-tools", "word_count", serde_json::json!({"text": "a b"}), CallContext::default()).await?;
//! # Ok(()) }
//! ```
//!
//! - `config`: [`RegistryConfig`], the [`Layer`]s and their precedence, size caps.
//! - `snapshot`: which entries of a layer are skills, and a skill read once through
//!   `skillhost-package`'s reader (`NAME.wasm`, a folder with skill.toml and skill.wasm or
//!   a `[server]`, a folder with only SKILL.md; symlink refusal, size caps, the content
//!   hash), or a skill-pack file. The registry runs no code itself: a
//!   [`SkillRuntime`](skillhost_core::SkillRuntime) does, so it builds without wasmtime.
//! - `skillmd`: SKILL.md frontmatter to the Agent Skills specification ([`Frontmatter`]),
//!   every rule checked, a broken one reported as a [`RuleError`] naming the [`Rule`].
//! - `pack`: skill packs: a folder with `pack.toml` whose `*.skill.md`,
//!   `*.skill.yaml` and `*.skill.yml` files load as instruction-only skills named
//!   `<pack>--<slug>`.
//! - the trust store (`<data_dir>/trust.db`) with the [`TrustState`] rules, and the usage
//!   statistics of calls (`<data_dir>/stats.db`), are `skillhost-store`'s
//!   [`TrustStore`](skillhost_store::TrustStore) and [`Stats`](skillhost_store::Stats),
//!   held as trait objects and opened (in SQLite) over the data dir.
//! - `registry`, `catalog`: [`Registry`] (catalog, calls, approvals), [`Entry`],
//!   [`RegistryEvent`].
//! - `direct`: the trust-less mode: one skill by its path, outside the layers and the
//!   trust store ([`DirectSkill`]), under the probe grant or the caller's own approval
//!   ([`Access`]); held by its caller, kept nowhere.
//! - `install`: [`Registry::install`] and [`Registry::remove`] in the user layer.
//! - `listing`: tool listings kept from earlier loads, so that loading the same code
//!   again runs none of it before its first call.
//! - `watch`: notify watcher, 150 ms debounce, one reload task.
//!
//! The trust operations ([`Registry::approve`], [`Registry::reject`],
//! [`Registry::disable`], [`Registry::enable`]) are for humans only: never expose them
//! to an agent.

mod catalog;
mod config;
mod direct;
mod error;
mod install;
mod listing;
mod pack;
mod registry;
mod skillmd;
mod snapshot;
mod watch;

pub use catalog::{
    ApprovalRequest, Entry, INSTRUCTIONS_RUNTIME, Loaded, PolicyFrom, RegistryEvent, SCRIPTS_RUNTIME, Scripts, Shadowed, TooLongForADialog,
    withheld_description, withheld_tool_description,
};
pub use config::{FirstLoad, Layer, Pins, RegistryConfig};
pub use direct::{Access, DirectSkill};
pub use error::RegistryError;
pub use pack::{PACK_MANIFEST, PackRef};
pub use registry::Registry;
pub use skillhost_package::{ReadError, SizeLimits};
pub use skillhost_store::run_files::{SHARED_BYTES, SHARED_RUNS};
pub use skillhost_store::{
    ApprovalChannel, ApprovedBy, AuditLog, CallClaims, CallerRecord, CallerStore, Claim, DecisionRecord, RunFile, RunFileStore, State,
    StoreError, TrustState,
};
pub use skillmd::{Frontmatter, MAX_FRONTMATTER, Rule, RuleError, parse as parse_skill_md};
