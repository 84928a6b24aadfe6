//! Who is calling, and what the org policy lets them see and do.
//!
//! - [`Authenticator`]: every HTTP request's `Authorization: Bearer TOKEN` names its
//!   caller: the operator's token (`serve --http`'s, compared in constant time) is the
//!   caller `operator`; a caller's token (`skh_…`, checked for its shape first) is looked
//!   up by its SHA-256 in the state store's callers (an expired or removed one is
//!   refused); with `[oauth]`, any other token is an OAuth access token checked against
//!   the issuer's keys ([`OAuthFront`]; a key it does not hold makes the embedder refetch
//!   them once, then the token is checked again). Anything else is a 401.
//! - [`Scope`]: one request's caller and the org policy in force. Listings (`tools/list`,
//!   `tool_search`, `skill_list`, `skills/list`, resources, the instructions) show only
//!   what the caller may use ([`Scope::sees_tool`], [`Scope::sees_skill`]); an action
//!   ([`Scope::check`]) is refused naming the policy that refused it, and audited. The
//!   local user (stdio) and a host without an org policy are not restricted.

use std::sync::Arc;
use std::time::SystemTime;

use skillhost_access::jwt::JwtError;
use skillhost_access::{Action, Caller, Decision, OAuthError, OrgPolicy, Policies, ResourceServer, Target, Via};
use skillhost_registry::{AuditLog, CallerStore, DecisionRecord, Entry};

use crate::tools::ToolEntry;

/// The front as an OAuth resource server: the issuer's keys and claims
/// ([`ResourceServer`]), and how to ask the embedder to refetch the keys.
#[derive(Clone, Debug)]
pub struct OAuthFront {
    /// Checks access tokens; serves the protected-resource metadata.
    pub server: Arc<ResourceServer>,
    /// Notified when a token names a key the server does not hold (the issuer may have
    /// rotated its keys): the embedder refetches the JWKS, at a rate it bounds, and puts
    /// it in force with [`ResourceServer::set_keys`].
    pub refetch: Arc<tokio::sync::Notify>,
}

/// How long a request whose token names an unknown key waits for the keys to be refetched.
const REFETCH_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Requests that wait for a refetch at once; more are refused at once.
const MAX_REFETCH_WAITERS: usize = 16;

/// Store lookups of callers' tokens at once; more requests wait (a flood of made-up
/// tokens cannot take the state store's connections from everything else).
const MAX_LOOKUPS: usize = 8;

/// How the HTTP front tells who sent a request.
pub(crate) struct Authenticator {
    /// `Bearer TOKEN` of the operator's token.
    operator: String,
    callers: Option<Arc<dyn CallerStore>>,
    lookups: tokio::sync::Semaphore,
    oauth: Option<OAuthFront>,
    /// Places for requests waiting on a refetch of the issuer's keys.
    waiters: tokio::sync::Semaphore,
}

/// Why a request was not authenticated (the 401's `error_description`).
#[derive(Debug)]
pub(crate) enum Unauthenticated {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token nobody holds (never made, or its caller removed).
    Unknown,
    /// The caller's token expired.
    Expired,
    /// The callers could not be read.
    Store,
    /// An OAuth access token was refused.
    AccessToken(OAuthError),
}

impl Unauthenticated {
    pub(crate) fn description(&self) -> String {
        match self {
            Unauthenticated::Missing => {
                "missing bearer token: send `Authorization: Bearer TOKEN` (the token skillhost serve was given, one from `skillhost caller add`, or an access token from the authorization server the metadata names)".into()
            }
            Unauthenticated::Unknown => "unknown bearer token: it was never made here, or its caller was removed (`skillhost caller list`)".into(),
            Unauthenticated::Expired => "expired bearer token: ask for a new one (`skillhost caller add`)".into(),
            Unauthenticated::Store => "the callers cannot be read from the state store right now; try again".into(),
            Unauthenticated::AccessToken(e) => format!("access token refused: {e}"),
        }
    }
}

impl Authenticator {
    pub(crate) fn new(operator_token: &str, callers: Option<Arc<dyn CallerStore>>, oauth: Option<OAuthFront>) -> Self {
        Self {
            operator: format!("Bearer {operator_token}"),
            callers,
            lookups: tokio::sync::Semaphore::new(MAX_LOOKUPS),
            oauth,
            waiters: tokio::sync::Semaphore::new(MAX_REFETCH_WAITERS),
        }
    }

    /// The resource server, when the front accepts OAuth access tokens.
    pub(crate) fn oauth(&self) -> Option<&ResourceServer> {
        self.oauth.as_ref().map(|o| &*o.server)
    }

    /// The caller of a request whose `Authorization` header is `header`.
    pub(crate) async fn authenticate(&self, header: Option<&[u8]>) -> Result<Caller, Unauthenticated> {
        let header = header.unwrap_or_default();
        if constant_time_eq(header, self.operator.as_bytes()) {
            return Ok(Caller::operator());
        }
        // The scheme's name is case-insensitive (RFC 7235 2.1).
        let token = header
            .split_at_checked(7)
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"Bearer "))
            .and_then(|(_, token)| std::str::from_utf8(token).ok())
            .ok_or(Unauthenticated::Missing)?;
        let token = token.trim();
        if token.starts_with(skillhost_access::token::PREFIX) {
            return self.token_caller(token).await;
        }
        match &self.oauth {
            Some(oauth) => self.oauth_caller(oauth, token).await,
            None => Err(Unauthenticated::Unknown),
        }
    }

    /// The caller holding the caller's token `token`.
    async fn token_caller(&self, token: &str) -> Result<Caller, Unauthenticated> {
        // Only a token of the shape `generate` makes is looked up.
        if !skillhost_access::token::well_formed(token) {
            return Err(Unauthenticated::Unknown);
        }
        let Some(store) = self.callers.clone() else { return Err(Unauthenticated::Unknown) };
        // Only a token's hash is looked up (and kept): a lookup by a high-entropy
        // secret's hash leaks nothing by its timing.
        let hash = skillhost_access::token::sha256(token);
        let _slot = self.lookups.acquire().await.map_err(|_| Unauthenticated::Store)?;
        let found = tokio::task::spawn_blocking(move || store.find(&hash)).await;
        let record = match found {
            Ok(Ok(Some(record))) => record,
            Ok(Ok(None)) => return Err(Unauthenticated::Unknown),
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot look a caller's token up");
                return Err(Unauthenticated::Store);
            }
            Err(_) => return Err(Unauthenticated::Store),
        };
        if record.expired(SystemTime::now()) {
            return Err(Unauthenticated::Expired);
        }
        Ok(Caller { name: record.name, groups: record.groups, via: Via::Token, scopes: Vec::new() })
    }
}

impl Authenticator {
    /// The caller of the access token `token`. A token naming a key the server does not
    /// hold has the keys refetched and is checked again, waiting at most [`REFETCH_WAIT`],
    /// but only when a fetch is due (the keys are [`MIN_REFETCH_GAP`] old) and a place
    /// to wait is free: a stream of made-up key ids costs no waits and no fetches.
    ///
    /// [`MIN_REFETCH_GAP`]: skillhost_access::oauth::MIN_REFETCH_GAP
    async fn oauth_caller(&self, oauth: &OAuthFront, token: &str) -> Result<Caller, Unauthenticated> {
        // A clock before 1970 checks no expiry: refused, never read as time 0.
        let now = || SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).map_err(|_| Unauthenticated::Store);
        let unknown = match oauth.server.authenticate(token, now()?) {
            Err(OAuthError::Token(unknown @ JwtError::UnknownKey(_))) => unknown,
            other => return other.map_err(Unauthenticated::AccessToken),
        };
        let waiting = self.waiters.try_acquire().ok().filter(|_| oauth.server.refetch_due());
        let Some(_place) = waiting else { return Err(Unauthenticated::AccessToken(OAuthError::Token(unknown))) };
        let before = oauth.server.generation();
        oauth.refetch.notify_one();
        let deadline = tokio::time::Instant::now() + REFETCH_WAIT;
        while oauth.server.generation() == before && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        oauth.server.authenticate(token, now()?).map_err(Unauthenticated::AccessToken)
    }
}

/// Whether `a` and `b` are equal, in time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One request's caller and the org policy in force.
pub(crate) struct Scope {
    caller: Caller,
    /// `None`: not restricted (no org policy, or the local user).
    policy: Option<Arc<OrgPolicy>>,
    audit: Option<Arc<dyn AuditLog>>,
}

/// What the org policy says to an action it does not refuse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Permit {
    /// Go ahead.
    Yes,
    /// Only once a human said yes to this one use: `policies` are the `@require_approval`
    /// permits that allow it.
    IfHumanApproves { policies: Vec<String> },
}

/// `policies` as `` `a`, `b` ``.
pub(crate) fn quoted(policies: &[String]) -> String {
    policies.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
}

/// The org policy refused an action.
#[derive(Debug, thiserror::Error)]
#[error(
    "caller `{caller}` may not {action} {resource}: {reason}; the org policy decides who may do what: ask whoever keeps it (`skillhost audit --caller {caller}` shows the decisions)"
)]
pub(crate) struct Refused {
    caller: String,
    action: &'static str,
    resource: String,
    reason: String,
}

impl Scope {
    /// The scope of `caller` under `policies` (`None`: no org policy), decisions written
    /// to `audit`.
    pub(crate) fn new(caller: Caller, policies: Option<&Policies>, audit: Option<Arc<dyn AuditLog>>) -> Self {
        let policy = policies.filter(|_| caller.via != Via::Local).map(Policies::current);
        Self { caller, policy, audit }
    }

    /// The caller.
    pub(crate) fn caller(&self) -> &Caller {
        &self.caller
    }

    /// Whether an org policy restricts what the caller sees.
    pub(crate) fn restricted(&self) -> bool {
        self.policy.is_some()
    }

    /// The local user, whom no org policy restricts (the CLI's own listings).
    pub(crate) fn local() -> Self {
        Self { caller: Caller::local(), policy: None, audit: None }
    }

    fn decide(&self, action: Action, target: &Target<'_>) -> Option<Decision> {
        Some(self.policy.as_ref()?.decide(&self.caller, action, target))
    }

    /// Whether the caller may see `tool` in listings and searches: whether it may call it.
    pub(crate) fn sees_tool(&self, tool: &ToolEntry) -> bool {
        self.decide(Action::Call, &tool_target(tool)).is_none_or(|d| d.allowed)
    }

    /// Whether the caller may see `entry`'s skill in listings.
    pub(crate) fn sees_skill(&self, entry: &Entry) -> bool {
        self.decide(Action::List, &skill_target(entry.name.as_str(), entry)).is_none_or(|d| d.allowed)
    }

    /// Whether the caller may do `action` to the skill `name` (`entry` when it is in the
    /// catalog); the decision is audited. A permit marked `@require_approval` refuses
    /// here: only a tool call can ask a human (see [`Scope::check_tool`]).
    pub(crate) fn check_skill(&self, action: Action, name: &str, entry: Option<&Entry>) -> Result<(), Refused> {
        let target = Target::Skill { name, runtime: entry.and_then(|e| e.loaded.as_ref()).map_or("", |l| l.runtime) };
        match self.check(action, &target)? {
            Permit::Yes => Ok(()),
            Permit::IfHumanApproves { policies } => {
                self.record(action, &target, false, &policies);
                Err(self.refused(
                    action,
                    &target,
                    format!(
                        "permitted by {} only with a human's approval of each use (@require_approval), which only a tool call can ask for",
                        quoted(&policies)
                    ),
                ))
            }
        }
    }

    /// Whether the caller may call `tool`: yes (audited), or only once a human approved
    /// this call (audited when answered, [`Scope::record`]).
    pub(crate) fn check_tool(&self, tool: &ToolEntry) -> Result<Permit, Refused> {
        self.check(Action::Call, &tool_target(tool))
    }

    /// The policy's decision; audited unless it waits for a human's answer.
    fn check(&self, action: Action, target: &Target<'_>) -> Result<Permit, Refused> {
        let Some(decision) = self.decide(action, target) else { return Ok(Permit::Yes) };
        if decision.allowed && decision.require_approval {
            return Ok(Permit::IfHumanApproves { policies: decision.policies });
        }
        self.record(action, target, decision.allowed, &decision.policies);
        if decision.allowed {
            return Ok(Permit::Yes);
        }
        Err(self.refused(action, target, decision.reason()))
    }

    /// Audit a decision: the policy's, or a human's answer to a `@require_approval` call
    /// (`policies` the permits that asked for it).
    pub(crate) fn record(&self, action: Action, target: &Target<'_>, allowed: bool, policies: &[String]) {
        if let Some(audit) = &self.audit {
            audit.record_decision(DecisionRecord {
                time: SystemTime::now(),
                caller: self.caller.name.clone(),
                action: action.as_str().to_owned(),
                resource: target.shown(),
                allowed,
                policies: policies.to_vec(),
            });
        }
    }

    fn refused(&self, action: Action, target: &Target<'_>, reason: String) -> Refused {
        Refused { caller: self.caller.name.clone(), action: action.as_str(), resource: target.shown(), reason }
    }

    /// Whether the caller may use the forge (see `skill_create` and `skill_update`): the
    /// policy permits it `create` or `update` on a skill of no name, so a permit that
    /// names its skills still lets the call through but not the listing.
    pub(crate) fn sees_forge(&self) -> bool {
        [Action::Create, Action::Update]
            .into_iter()
            .any(|action| self.decide(action, &Target::Skill { name: "", runtime: "" }).is_none_or(|d| d.allowed))
    }
}

pub(crate) fn tool_target(tool: &ToolEntry) -> Target<'_> {
    Target::Tool { skill: tool.skill.as_str(), tool: &tool.spec.name, public: &tool.name }
}

fn skill_target<'a>(name: &'a str, entry: &'a Entry) -> Target<'a> {
    Target::Skill { name, runtime: entry.loaded.as_ref().map_or("", |l| l.runtime) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
