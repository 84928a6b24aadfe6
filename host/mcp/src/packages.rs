//! What an approval answered over MCP does with a skill's packages: the embedder's
//! [`ApprovalPackages`] resolves them before the question is asked (so it lists every
//! `name==version` with its hashes, as the terminal's does) and installs them after a yes,
//! before the approval is recorded. Without one, a skill that declares packages is never
//! approved over MCP: its question says to approve it at a terminal.

use std::future::Future;
use std::pin::Pin;

/// Why resolving or installing failed, as the embedder says it.
pub type PackagesFailure = Box<dyn std::error::Error + Send + Sync>;

/// A future of the embedder's.
pub type PackagesFuture<'a> = Pin<Box<dyn Future<Output = Result<(), PackagesFailure>> + Send + 'a>>;

/// Resolves and installs a skill's packages around its approval (the `skillhost` facade
/// implements it on its host's sandbox).
pub trait ApprovalPackages: Send + Sync {
    /// Resolve `skill`'s packages and record the lock its approval question shows.
    fn resolve<'a>(&'a self, skill: &'a str) -> PackagesFuture<'a>;
    /// Install the packages recorded for `skill` now (what its question showed).
    fn install<'a>(&'a self, skill: &'a str) -> PackagesFuture<'a>;
}
