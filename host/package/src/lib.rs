//! The skill package: everything about a skill on disk, and nothing that runs it (no
//! wasmtime here, so the registry, the index and the MCP front build without it).
//!
//! - [`Snapshot`] and [`read_source`]: the one reader of a skill's files (a `.wasm` or a
//!   folder), which never follows a symlink, refuses special files, caps sizes
//!   ([`SizeLimits`]) and hashes exactly what it read; it turns them into the
//!   [`SkillSource`](skillhost_core::SkillSource) runtimes receive. The registry, a direct
//!   load, `inspect`, `build` and the forge all read through it; what it read is what the
//!   registry serves agents as a skill's resources.
//! - The component's custom sections ([`read_section`], [`embed`], [`pack`]): a component
//!   carries its `skill.toml` and SKILL.md, so one `.wasm` is a complete skill; its
//!   top-level imports and exports ([`Interface`]).
//! - [`reflect`]: what a component offers, from its WIT: our world, or the tools of a
//!   generic component, typed as [`WitType`]s with their JSON Schemas.
//! - [`scratch`]: directories code no human approved writes into, and removing them
//!   without recursion or following a link ([`remove_tree`], [`ScratchRoot`]).
//! - [`OutDir`]: a folder the host writes what a sandbox produced into (a run's files),
//!   opened once, never written through a link.
//! - [`wellknown`]: the format of the Agent Skills well-known index, read ([`wellknown::parse`])
//!   and written from skills already read ([`wellknown::publish`]), with [`pack_tar_gz`], the
//!   one archive layout skillhost publishes. Fetching an index is skillhost-source's; the
//!   format is here so the MCP front serves an index without linking a fetcher.

mod archive;
mod component;
mod error;
pub mod nofollow;
mod out;
mod reflect;
pub mod scratch;
mod sections;
mod snapshot;
mod types;
pub mod wellknown;

pub use archive::pack_tar_gz;
pub use component::{component_manifest, embedded_instructions, folder_component, pack};
pub use error::ReadError;
pub use nofollow::read_file;
pub use out::{OutDir, WriteError};
pub use reflect::{ExportedFunction, Reflection, RefusedFunction, SKILL_EXPORT, docs_section, reflect};
pub use scratch::{ScratchDir, ScratchRoot, remove_in_background, remove_tree};
pub use sections::{
    DOCS_SECTION, FormatError, INSTRUCTIONS_SECTION, Interface, MANIFEST_SECTION, check_component, embed, read_section, strip_section,
};
pub use snapshot::{SizeLimits, Snapshot, check_size, excluded, folder_hash, read_source};
pub use types::{WitType, params_schema, schema};
