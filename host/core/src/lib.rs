//! Runtime-neutral types of skillhost: what a skill *is* (its manifest and tools), what it
//! *asks* for (capabilities), what the host *allows* (policy) and what it finally *holds*
//! (the grant), and the seam every runtime implements ([`SkillRuntime`], [`Skill`]) with
//! the envelope every call runs in ([`Envelope`]).
//!
//! This crate runs nothing and knows nothing of wasmtime or processes; its only I/O is
//! opening a granted directory ([`open_beneath`], [`DirGrant::open`], below a root
//! held open: [`HeldRoots`]) (and handing freed heap back to the kernel,
//! [`give_back_freed_memory`], [`trim_as_freed`]). The wasm and
//! sandbox runtimes depend on it, never the other way round.

mod background;
mod call;
pub mod egress;
mod grant;
mod heap;
mod limits;
mod manifest;
mod name;
mod net;
mod provenance;
mod risk;
pub mod run;
mod runtime;
mod server;
pub mod text;
mod tool;

pub use background::{BACKGROUND_NICE, BackgroundError, in_the_background};
pub use call::{Envelope, Invocation, InvokeError, Invoked, Output};
pub use egress::{Denial, EgressPolicy, SecretBinding, SecretCarrier, SecretError};
pub use grant::{
    Beneath, DataKey, DirError, DirGrant, FileMode, Grant, GrantError, HeldRoots, PROBE_TIMEOUT, Policy, dir_beneath, open_beneath,
};
pub use heap::{drop_cached_pages, give_back_freed_memory, trim_as_freed};
pub use limits::{ByteSize, Limits, LimitsRequest, QuantityError, fmt_duration, parse_duration, parse_size};
pub use manifest::{FileCapability, MAX_MANIFEST_BYTES, ManifestError, SearchMeta, SkillManifest, TestCase};
pub use name::{NameError, SkillName};
pub use net::{AuditSink, EgressOutcome, EgressRecord, NoAudit, NoSecrets, Resolver, SecretSource};
pub use provenance::{Provenance, SignatureStatus};
pub use risk::RiskTier;
pub use run::{
    DeclaredError, HostPath, NodeLock, NodePackages, PackageLock, RequirementError, RunError, RunFile, RunInput, RunOutput, RunPolicy,
    ScriptJob,
};
pub use runtime::{
    CacheOutcome, CallContext, CallError, CallFailure, LazyRuntime, LoadError, ManifestHint, Progress, ProgressSink, Runtimes, Skill,
    SkillCode, SkillRuntime, SkillSource, TestReport, TestRun, ToolOutput,
};
pub use server::{EnvSecret, ServerConfig, StartMode};
pub use tool::{
    Annotations, MAX_SKILL_DESCRIPTIONS, MAX_SKILL_SCHEMAS, MAX_TOOL_DESCRIPTION, MAX_TOOL_EXAMPLES, MAX_TOOL_SCHEMA, MAX_TOOLS,
    OutputMismatch, OutputSchemas, RESERVED_TOOL_NAMES, STANDARD_FORMATS, ToolSpec, ToolSpecError, check_skill_tools,
    prepare_output_checks, standard_formats,
};
