//! The HTTP front as an OAuth 2.1 resource server, as the MCP authorization specification
//! describes it: [`ResourceServer`] turns a verified access token ([`crate::jwt`]) into a
//! [`Caller`], and describes itself in the protected-resource metadata (RFC 9728) a client
//! fetches to learn which authorization server to ask.
//!
//! - The caller's **name** is a claim of the token (`sub` unless configured otherwise): a
//!   string of 1 to [`MAX_NAME_BYTES`] printable characters. `operator` and `local` are
//!   refused: they name the operator's token and the local user, and an issuer must not be
//!   able to mint either. A token caller (`skillhost caller add`) of the same name is the
//!   same principal to the org policy; `principal.via` tells them apart.
//! - Its **groups** are a claim (`groups` unless configured otherwise): an array of
//!   strings or one space-separated string. A token listing more than [`MAX_GROUPS`] groups,
//!   or a group that is not a string, is refused whole: keeping some groups and dropping
//!   others could drop the one a `forbid` names.
//! - Its **scopes** are the token's `scope` (or `scp`).
//!
//! The keys are the issuer's JWKS as the embedder last fetched it ([`ResourceServer::set_keys`]);
//! fetching is the embedder's (this crate makes no requests).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::caller::{Caller, Via};
use crate::jwt::{self, Jwks, JwtError, JwtRules};

/// The path of the protected-resource metadata (RFC 9728 section 3), before the resource's
/// own path.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// Groups a token may list, at most.
pub const MAX_GROUPS: usize = 256;
/// Bytes of a caller's name or a group's, at most.
pub const MAX_NAME_BYTES: usize = 255;
/// The least time between two fetches of the issuer's keys.
pub const MIN_REFETCH_GAP: std::time::Duration = std::time::Duration::from_secs(10);
/// Names an access token may not give its caller (in any case).
pub const RESERVED_NAMES: &[&str] = &["operator", "local"];

/// How access tokens are checked and named: `[oauth]` of the host config.
#[derive(Clone, Debug)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier (`iss` must equal it).
    pub issuer: String,
    /// This server's resource identifier, its canonical URL (`https://mcp.example.com/mcp`):
    /// tokens must be for it (`aud`), and the metadata names it.
    pub resource: String,
    /// The claim naming the caller. Default `sub`.
    pub name_claim: String,
    /// The claim listing the caller's groups. Default `groups`.
    pub groups_claim: String,
    /// Scopes the metadata says this server knows (`scopes_supported`); the org policy
    /// reads a token's scopes as `principal.scopes`.
    pub scopes_supported: Vec<String>,
}

impl OAuthSettings {
    /// Settings for `issuer` and `resource`, the claims `sub` and `groups`.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            resource: resource.into(),
            name_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
            scopes_supported: Vec::new(),
        }
    }
}

/// Why an access token does not name a caller.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The token itself was refused (signature, expiry, audience, ...).
    #[error(transparent)]
    Token(#[from] JwtError),
    /// The token is good but does not name a caller this host accepts.
    #[error("the access token's {claim} claim {problem}")]
    Claims {
        /// The claim.
        claim: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The settings cannot work (a resource that is not an absolute `http(s)` URL, ...).
    #[error("[oauth] {0}")]
    Settings(String),
}

/// Access tokens checked against the issuer's keys, and this server's metadata.
pub struct ResourceServer {
    settings: OAuthSettings,
    rules: JwtRules,
    /// The keys in force: replaced whole by [`ResourceServer::set_keys`].
    keys: RwLock<Arc<Jwks>>,
    /// How many times the keys were replaced.
    generation: AtomicU64,
    /// When the keys in force were fetched.
    fetched: parking_lot::Mutex<std::time::Instant>,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer").field("settings", &self.settings).field("keys", &self.keys.read().len()).finish()
    }
}

impl ResourceServer {
    /// A resource server holding `keys` (the issuer's JWKS, fetched by the embedder).
    pub fn new(settings: OAuthSettings, keys: Jwks) -> Result<Self, OAuthError> {
        check_settings(&settings)?;
        let rules = JwtRules::new(settings.issuer.clone(), settings.resource.clone());
        Ok(Self {
            settings,
            rules,
            keys: RwLock::new(Arc::new(keys)),
            generation: AtomicU64::new(0),
            fetched: parking_lot::Mutex::new(std::time::Instant::now()),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Put `keys` in force (a refetched JWKS).
    pub fn set_keys(&self, keys: Jwks) {
        *self.keys.write() = Arc::new(keys);
        *self.fetched.lock() = std::time::Instant::now();
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// How long ago the keys in force were fetched (made with [`new`](Self::new), or
    /// replaced by [`set_keys`](Self::set_keys)).
    pub fn keys_age(&self) -> std::time::Duration {
        self.fetched.lock().elapsed()
    }

    /// Whether a token naming a key not held is worth a refetch of the keys: only when
    /// the last fetch is [`MIN_REFETCH_GAP`] old or more (otherwise the keys are as new as
    /// the issuer's, and the token is refused at once).
    pub fn refetch_due(&self) -> bool {
        self.keys_age() >= MIN_REFETCH_GAP
    }

    /// How many times the keys were replaced: a waiter for a refetch compares it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The caller `token` names, checked at `now_unix` (Unix seconds). A
    /// [`JwtError::UnknownKey`] means the issuer may have rotated its keys: refetch them
    /// and ask again.
    pub fn authenticate(&self, token: &str, now_unix: u64) -> Result<Caller, OAuthError> {
        let keys = self.keys.read().clone();
        let verified = jwt::verify(token, &keys, &self.rules, now_unix)?;
        let claims = &verified.claims;
        let claim_error = |claim: &str, problem: String| OAuthError::Claims { claim: claim.to_owned(), problem };
        let name_claim = self.settings.name_claim.as_str();
        let name = match claims.get(name_claim) {
            Some(Value::String(name)) => name.clone(),
            Some(_) => return Err(claim_error(name_claim, "is not a string".into())),
            None => return Err(claim_error(name_claim, "is missing: it names the caller".into())),
        };
        if let Some(problem) = name_problem(&name) {
            return Err(claim_error(name_claim, problem));
        }
        if RESERVED_NAMES.iter().any(|reserved| reserved.eq_ignore_ascii_case(&name)) {
            return Err(claim_error(name_claim, format!("is `{name}`, a name this host keeps for itself")));
        }
        let groups_claim = self.settings.groups_claim.as_str();
        // Groups the issuer left out of the token (OpenID Connect's distributed claims, as
        // Entra does past ~200 groups) are groups a `forbid` may name: refused, never
        // read as "in no group".
        let distributed = claims.get("_claim_names").and_then(Value::as_object).is_some_and(|names| names.contains_key(groups_claim));
        if distributed {
            return Err(claim_error(
                groups_claim,
                "is not in the token (the issuer points to it elsewhere, `_claim_names`): its groups cannot be known, so none are assumed; have the issuer put the groups in the token, or filter them to fewer".into(),
            ));
        }
        let groups: Vec<String> = match claims.get(groups_claim) {
            None | Some(Value::Null) => Vec::new(),
            // One group, spaces and all ("IT Admins" is not `IT` and `Admins`).
            Some(Value::String(group)) => vec![group.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_owned).ok_or_else(|| claim_error(groups_claim, "lists a group that is not a string".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(claim_error(groups_claim, "is neither an array of strings nor a string".into())),
        };
        if groups.len() > MAX_GROUPS {
            return Err(claim_error(groups_claim, format!("lists {} groups, more than {MAX_GROUPS}", groups.len())));
        }
        if let Some(problem) = groups.iter().find_map(|group| name_problem(group)) {
            return Err(claim_error(groups_claim, format!("lists a group that {problem}")));
        }
        Ok(Caller { name, groups, via: Via::OAuth, scopes: verified.scopes })
    }

    /// The path the metadata is served at: [`METADATA_PATH`] followed by the resource's
    /// own path (`/.well-known/oauth-protected-resource/mcp` for `https://host/mcp`).
    pub fn metadata_path(&self) -> String {
        let path = self.resource_path();
        if path == "/" { METADATA_PATH.to_owned() } else { format!("{METADATA_PATH}{path}") }
    }

    /// The metadata's URL, for a 401's `WWW-Authenticate: Bearer resource_metadata="…"`.
    pub fn metadata_url(&self) -> String {
        let resource = &self.settings.resource;
        let origin_end = resource.find("://").map_or(0, |i| i + 3);
        let origin = resource[origin_end..].find('/').map_or(resource.as_str(), |i| &resource[..origin_end + i]);
        format!("{origin}{}", self.metadata_path())
    }

    /// The resource's path (`/` when it has none).
    fn resource_path(&self) -> &str {
        let resource = &self.settings.resource;
        let after = resource.find("://").map_or(0, |i| i + 3);
        resource[after..].find('/').map_or("/", |i| &resource[after + i..])
    }

    /// The protected-resource metadata document (RFC 9728 section 2).
    pub fn metadata(&self) -> Value {
        let mut document = json!({
            "resource": self.settings.resource,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "skillhost",
        });
        if !self.settings.scopes_supported.is_empty() {
            document["scopes_supported"] = json!(self.settings.scopes_supported);
        }
        document
    }
}

/// Whether `settings` can work: an issuer, and a resource that is an absolute `http(s)`
/// URL without query or fragment.
pub fn check_settings(settings: &OAuthSettings) -> Result<(), OAuthError> {
    if settings.issuer.trim().is_empty() {
        return Err(OAuthError::Settings("issuer is empty: set it to the authorization server's issuer identifier".into()));
    }
    let (scheme, rest) = settings.resource.split_once("://").unwrap_or_default();
    if !matches!(scheme, "https" | "http") || rest.is_empty() || rest.starts_with('/') || settings.resource.contains(['#', '?', ' ']) {
        return Err(OAuthError::Settings(format!(
            "resource `{}` is not this server's absolute URL (like https://mcp.example.com/mcp, no query or fragment)",
            settings.resource
        )));
    }
    if settings.name_claim.is_empty() || settings.groups_claim.is_empty() {
        return Err(OAuthError::Settings("name_claim and groups_claim may not be empty".into()));
    }
    Ok(())
}

/// Whether `name` may name a caller or group from a token: 1 to [`MAX_NAME_BYTES`] bytes,
/// no control characters (it reaches logs, the audit and `skillhost audit`'s terminal).
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Some(format!("is empty or longer than {MAX_NAME_BYTES} bytes"));
    }
    // Printable ASCII: no look-alike letters, no bidi or format characters, no quotes or
    // backticks to break out of a command a message suggests.
    let bad = name.chars().find(|c| !(c.is_ascii_graphic() || *c == ' ') || matches!(c, '"' | '`' | '\\' | '\''));
    bad.map(|c| format!("holds {c:?}: a caller's or group's name is printable ASCII without quotes or backslashes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(resource: &str) -> Result<ResourceServer, OAuthError> {
        // An Ed25519 key (RFC 8037 A.2's public key).
        let jwks = Jwks::parse(br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#).unwrap();
        ResourceServer::new(OAuthSettings::new("https://issuer.example", resource), jwks)
    }

    #[test]
    fn the_metadata_is_served_under_the_resources_path() {
        let s = server("https://mcp.example.com/mcp").unwrap();
        assert_eq!(s.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(s.metadata_url(), "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(s.metadata()["resource"], "https://mcp.example.com/mcp");
        assert_eq!(s.metadata()["authorization_servers"][0], "https://issuer.example");
        let root = server("http://127.0.0.1:8787").unwrap();
        assert_eq!(root.metadata_path(), METADATA_PATH);
        assert_eq!(root.metadata_url(), "http://127.0.0.1:8787/.well-known/oauth-protected-resource");
    }

    #[test]
    fn a_resource_that_is_not_an_absolute_url_is_refused() {
        for bad in ["mcp.example.com/mcp", "ftp://x/mcp", "https://", "https://x/mcp?a=1"] {
            assert!(matches!(server(bad), Err(OAuthError::Settings(_))), "{bad}");
        }
    }

    #[test]
    fn names_with_control_characters_or_too_long_are_refused() {
        assert_eq!(name_problem("alice@example.com"), None);
        assert_eq!(name_problem("auth0|12345"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem("a\u{1b}[2Jb").is_some());
        for look_alike in ["\u{43e}perator", "operator\u{202e}", "a`rm -rf`", "a\"b"] {
            assert!(name_problem(look_alike).is_some(), "{look_alike:?}");
        }
        assert!(name_problem(&"a".repeat(MAX_NAME_BYTES + 1)).is_some());
    }
}
