//! [`Caller`]: who sent a request, as the front authenticated it.

use std::fmt;

/// How a caller proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The local user, over stdio: the person who started the host, never subject to the
    /// org policy.
    Local,
    /// The token `serve --http` was given (`--token-file`, `SKILLHOST_MCP_TOKEN`): the
    /// caller named `operator`.
    Operator,
    /// A token made with `skillhost caller add`.
    Token,
    /// An OAuth access token (a JWT from the configured issuer).
    OAuth,
}

impl Via {
    /// Its name, as the org policy sees it (`principal.via`).
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Local => "local",
            Via::Operator => "operator",
            Via::Token => "token",
            Via::OAuth => "oauth",
        }
    }
}

/// Someone reaching the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Its name: the principal `Caller::"NAME"` of the org policy, the name in the audit.
    pub name: String,
    /// The groups it is in (`Group::"NAME"`).
    pub groups: Vec<String>,
    /// How it proved who it is.
    pub via: Via,
    /// The scopes of its OAuth access token; empty otherwise.
    pub scopes: Vec<String>,
}

impl Caller {
    /// The local user (stdio).
    pub fn local() -> Self {
        Self { name: "local".to_owned(), groups: Vec::new(), via: Via::Local, scopes: Vec::new() }
    }

    /// The holder of the operator's token.
    pub fn operator() -> Self {
        Self { name: "operator".to_owned(), groups: Vec::new(), via: Via::Operator, scopes: Vec::new() }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name)
    }
}

/// Whether `name` may name a caller or a group: 1 to 64 ASCII letters, digits, `-`, `_`,
/// `.` or `@` (an e-mail address or an OAuth subject), not starting with a punctuation
/// mark.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
}
