//! skillhost's search index: finds skills and tools by what they do.
//!
//! ```no_run
//! # fn demo(registry: &skillhost_registry::Registry) -> Result<(), skillhost_index::IndexError> {
//! use skillhost_index::{Query, SearchIndex, Target};
//!
//! let index = SearchIndex::new()?;
//! index.sync(registry)?;
//! let found = index.search(&Query::new("is my site down?", Target::Tools))?;
//! for hit in &found.hits {
//!     println!("{} {:.2}", hit.public_name(), hit.score);
//! }
//! # Ok(()) }
//! ```
//!
//! - `doc`: what is indexed: [`SkillDoc`] and [`ToolDoc`], built from a registry
//!   [`Entry`](skillhost_registry::Entry) or written by hand (tests, benchmarks), and
//!   the [`SideEffects`] order of the search contract.
//! - `text`: the analyzer (split on non-alphanumerics, lowercase, English stop words,
//!   Porter stemming) shared by indexing and queries.
//! - `index`: [`SearchIndex`], tantivy BM25 over one document per tool and one per
//!   skill, kept in step with the registry ([`SearchIndex::sync`],
//!   [`SearchIndex::apply`], [`SearchIndex::follow`]); in memory ([`SearchIndex::new`])
//!   or on disk ([`SearchIndex::open`]) with a fingerprint per skill, so a restart over
//!   an unchanged catalogue embeds nothing.
//! - `store`: the schema (every field stored, vectors included) and opening a
//!   directory as an index, checked; a damaged or outdated one is rebuilt.
//! - `dense`: cosine similarity as dot products over one contiguous matrix of unit
//!   vectors.
//! - `embed`: the [`Embedder`] trait; with one, ranking is hybrid (a fixed blend of the
//!   words matched and the cosine similarity, ties broken by reciprocal rank fusion of
//!   BM25 and cosine rankings), without one the words matched (ties by BM25).
//! - `minilm` (feature `embed`, on by default): [`MiniLm`], all-MiniLM-L6-v2 run by ONNX
//!   Runtime loaded from a file at run time, its text split by `tokenizers`; never
//!   downloads. `int8` rewrites its graph so that its int8 weights stay int8 in memory.
//! - `rank`: the score contract: absolute scores in `[0, 1]` (the same query and
//!   document score the same whatever the limit and the rest of the catalogue),
//!   deterministic order, and the "no tool matched well" signal ([`WEAK_MATCH`]).
//!
//! **Invariant:** the index sees the registry only through its catalog and events, and a
//! skill's documents are removed before any change to it is committed, so a removed or
//! disabled skill never comes back in results.

mod dense;
mod doc;
mod embed;
mod index;
#[cfg(feature = "embed")]
mod int8;
#[cfg(feature = "embed")]
mod minilm;
mod rank;
mod store;
mod text;

pub use doc::{SideEffects, SkillDoc, ToolDoc};
pub use embed::{EmbedError, Embedder};
pub use index::{IndexError, IndexStatus, Query, SearchIndex, SyncProgress, SyncStats, Target};
#[cfg(feature = "embed")]
pub use int8::Rewritten;
#[cfg(feature = "embed")]
pub use minilm::{MODEL_DIR_ENV, MiniLm, ModelError, ModelFiles, find as find_model, from_env as embedder_from_env};
pub use rank::{Hit, Ranker, SearchResults, WEAK_MATCH};
pub use store::Storage;
