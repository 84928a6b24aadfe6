//! Who may use a skillhost, and for what: the layer above the per-skill grant (what a
//! skill may touch), deciding who may use it.
//!
//! - [`caller`]: [`Caller`], someone reaching the host: the local user (stdio), the
//!   operator's token, an agent's own token, or an OAuth access token's subject.
//! - [`token`]: agents' tokens, made from the OS random source and kept only as their
//!   SHA-256.
//! - [`jwt`]: OAuth 2.1 access tokens as signed JWTs checked against an issuer's JWKS
//!   (RS256, ES256, EdDSA; issuer, audience, expiry), for the HTTP front as a resource
//!   server. Fetching the JWKS is the embedder's.
//! - [`oauth`]: [`ResourceServer`], the front as an OAuth resource server: an access
//!   token's caller (name, groups, scopes from its claims) and the protected-resource
//!   metadata (RFC 9728).
//! - [`policy`]: [`OrgPolicy`], the org policy in Cedar (schema [`policy::SCHEMA`]): which
//!   caller may list, read, call, run, create, update or approve which skill or tool;
//!   default deny, a `forbid` beats a `permit`; validated whole before it replaces the
//!   set in force.

pub mod caller;
pub mod jwt;
pub mod oauth;
pub mod policy;
pub mod token;

pub use caller::{Caller, Via};
pub use oauth::{OAuthError, OAuthSettings, ResourceServer};
pub use policy::{Action, Decision, OrgPolicy, Policies, PolicyError, PolicyLine, Target};
