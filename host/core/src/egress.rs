//! The one egress policy every runtime applies to outbound requests (no I/O here).
//!
//! A skill's `[network]` section lists rules `scheme://host[:port]`:
//!
//! ```toml
//! [network]
//! allow = ["https://api.github.com", "https://*.example.com:8443", "http://10.0.0.5:8080"]
//! deny = ["https://admin.example.com"]     # wins over allow
//! private = ["http://localhost:8080"]      # exact hosts that may resolve to private addresses
//! ```
//!
//! - The port defaults to the scheme's (80, 443); another port must be written out.
//! - `*.example.com` matches any subdomain of example.com, never example.com itself.
//! - IP literals and CIDR ranges (`http://10.0.0.0/8:8080` is not valid; write
//!   `http://10.0.0.0/8` with the default port, or list addresses) match only requests to
//!   IP literals; names never match IP rules and IPs never match name rules.
//! - After DNS, loopback, private, link-local, unique-local, multicast, unspecified,
//!   shared (CGNAT) and IPv4-mapped addresses are refused unless the request's host is an IP
//!   literal that a rule names, or the host is listed exactly under `private`.
//!
//! URLs are normalised by the WHATWG rules (the `url` crate): lowercase, IDN to punycode,
//! IPv4 in decimal, octal or hex becomes a dotted address; a trailing dot is dropped and
//! userinfo is refused.

use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

/// A scheme skills may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// The scheme's default port.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        })
    }
}

/// The host part of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostPattern {
    /// Exactly this (normalised) name.
    Name(String),
    /// Any subdomain of this (normalised) name, not the name itself.
    Subdomains(String),
    /// Addresses in this range (a single address is a /32 or /128).
    Ip(IpNet),
}

/// One `scheme://host[:port]` rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Rule {
    /// The rule as written.
    pub text: String,
    /// Its scheme.
    pub scheme: Scheme,
    /// Its host pattern.
    pub host: HostPattern,
    /// Its port (the scheme's default when not written).
    pub port: u16,
}

/// Why a rule could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("network rule `{rule}` {reason}; write rules as `https://api.example.com`, `https://*.example.com:8443` or `http://10.0.0.5:8080`")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Rule {
    /// Parse a rule.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let fail = |reason: &str| RuleError { rule: text.to_owned(), reason: reason.to_owned() };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| fail("has no scheme"))?;
        let scheme = Scheme::parse(scheme).ok_or_else(|| fail("must use http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('@') {
            return Err(fail("must not contain userinfo (`@`)"));
        }
        if rest.contains(['?', '#']) || (rest.contains('/') && !looks_like_cidr(rest)) {
            return Err(fail("must not have a path, query or fragment"));
        }
        // CIDR: `10.0.0.0/8`, `[fd00::]/8`, optionally followed by `:port` on IPv4.
        if let Some(rule) = parse_cidr(rest, scheme) {
            let (net, port) = rule.map_err(&fail)?;
            return Ok(Rule { text: text.to_owned(), scheme, host: HostPattern::Ip(net), port });
        }
        let wildcard = rest.starts_with("*.");
        let parse_target = if wildcard { format!("{scheme}://{}", &rest[2..]) } else { format!("{scheme}://{rest}") };
        if rest.starts_with('*') && !wildcard {
            return Err(fail("may only use `*.` at the start, for subdomains"));
        }
        if rest.get(usize::from(wildcard) * 2..).is_some_and(|r| r.contains('*')) {
            return Err(fail("may only use `*.` at the start, for subdomains"));
        }
        let url = url::Url::parse(&parse_target).map_err(|e| fail(&format!("is not a valid URL authority ({e})")))?;
        let port = url.port().unwrap_or(scheme.default_port());
        let host = match url.host() {
            None => return Err(fail("has no host")),
            Some(url::Host::Domain(name)) => {
                let name = host_name(name).ok_or_else(|| fail("has no valid host name (a label is empty)"))?.to_owned();
                if wildcard {
                    if !name.contains('.') {
                        return Err(fail("would match every subdomain of a top-level domain"));
                    }
                    HostPattern::Subdomains(name)
                } else {
                    HostPattern::Name(name)
                }
            }
            Some(_) if wildcard => return Err(fail("cannot use `*.` with an IP address")),
            Some(url::Host::Ipv4(addr)) => HostPattern::Ip(IpNet::from(IpAddr::V4(addr))),
            Some(url::Host::Ipv6(addr)) => HostPattern::Ip(IpNet::from(IpAddr::V6(addr))),
        };
        Ok(Rule { text: text.to_owned(), scheme, host, port })
    }

    /// Whether this rule matches a normalised request target.
    pub fn matches(&self, target: &Target) -> bool {
        if self.scheme != target.scheme || self.port != target.port {
            return false;
        }
        match (&self.host, &target.host) {
            (HostPattern::Name(name), TargetHost::Name(host)) => name == host,
            (HostPattern::Subdomains(parent), TargetHost::Name(host)) => {
                host.len() > parent.len() + 1 && host.ends_with(parent.as_str()) && host.as_bytes()[host.len() - parent.len() - 1] == b'.'
            }
            (HostPattern::Ip(net), TargetHost::Ip(ip)) => net.contains(ip),
            _ => false,
        }
    }
}

fn looks_like_cidr(rest: &str) -> bool {
    rest.split_once('/').is_some_and(|(_, after)| after.chars().next().is_some_and(|c| c.is_ascii_digit()))
}

/// Parse `addr/prefix[:port]` (IPv4) or `[addr]/prefix[:port]` (IPv6). `None` when `rest`
/// is not CIDR-shaped.
fn parse_cidr(rest: &str, scheme: Scheme) -> Option<Result<(IpNet, u16), &'static str>> {
    let (addr, after) = rest.split_once('/')?;
    let (prefix, port) = match after.split_once(':') {
        Some((prefix, port)) => (prefix, Some(port)),
        None => (after, None),
    };
    Some((|| {
        let addr: IpAddr = addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| "has a CIDR range whose address is not an IP address")?;
        let net = prefix.parse().ok().and_then(|prefix| IpNet::new(addr, prefix).ok()).ok_or(if addr.is_ipv4() {
            "has a CIDR prefix that is not 0..=32"
        } else {
            "has a CIDR prefix that is not 0..=128"
        })?;
        let port = match port {
            Some(port) => port.parse().map_err(|_| "has an invalid port")?,
            None => scheme.default_port(),
        };
        Ok((net, port))
    })())
}

/// The host of a normalised request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetHost {
    /// A DNS name, lowercase ASCII (punycode), without a trailing dot.
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl fmt::Display for TargetHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetHost::Name(name) => f.write_str(name),
            TargetHost::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            TargetHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// A request target after normalisation: what rules are checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its scheme.
    pub scheme: Scheme,
    /// Its host.
    pub host: TargetHost,
    /// Its port (explicit or the scheme's default).
    pub port: u16,
    /// Path, without the query (for the audit log).
    pub path: String,
    /// Path and query, as sent to the server.
    pub path_and_query: String,
}

impl Target {
    /// The authority to send as the `Host` header: the host, plus the port when it is not
    /// the scheme's default.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() { self.host.to_string() } else { format!("{}:{}", self.host, self.port) }
    }

    /// `scheme://host:port`, for messages and the audit log.
    pub fn origin(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// Why a request was refused. The message names what was refused and how to allow it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// The URL could not be parsed, or uses a scheme other than http(s).
    #[error("`{url}` is not an allowed URL: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL carries a user name or password.
    #[error("`{url}` carries userinfo (`user@`), which is never sent; put credentials in a `[[secrets]]` binding")]
    Userinfo {
        /// The URL as given.
        url: String,
    },
    /// No allow rule matches.
    #[error(
        "{origin} is not in the skill's network allowlist; to allow it, add \"{suggestion}\" to `[network] allow` in its skill.toml and approve the skill again"
    )]
    NotAllowed {
        /// `scheme://host:port`.
        origin: String,
        /// The rule that would allow it.
        suggestion: String,
    },
    /// A deny rule matches.
    #[error("{origin} is refused by the skill's deny rule `{rule}`")]
    DenyRule {
        /// `scheme://host:port`.
        origin: String,
        /// The deny rule.
        rule: String,
    },
    /// The name resolved to an address that is not public.
    #[error(
        "{host} resolves to {addr}, a {kind} address, which is refused unless the host is listed under `[network] private` in the skill's skill.toml"
    )]
    PrivateAddress {
        /// The host name.
        host: String,
        /// The address.
        addr: IpAddr,
        /// What kind of address it is.
        kind: &'static str,
    },
    /// The name did not resolve.
    #[error("{host} did not resolve: {reason}")]
    Unresolved {
        /// The host name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
}

/// A skill's parsed `[network]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EgressPolicy {
    /// Requests matching one of these are allowed (unless denied).
    pub allow: Vec<Rule>,
    /// Requests matching one of these are refused, whatever `allow` says.
    pub deny: Vec<Rule>,
    /// Exact hosts allowed to resolve to loopback or private addresses (also allowed).
    pub private: Vec<Rule>,
}

/// `[network]` as written in skill.toml.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    /// Allowed `scheme://host[:port]` rules.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Refused rules, winning over `allow`.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Exact hosts that may resolve to private addresses.
    #[serde(default)]
    pub private: Vec<String>,
}

impl EgressPolicy {
    /// Parse the rules of a `[network]` section.
    pub fn from_section(section: &NetworkSection) -> Result<Self, RuleError> {
        let parse = |rules: &[String]| rules.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        let private = parse(&section.private)?;
        if let Some(rule) = private.iter().find(|r| !matches!(r.host, HostPattern::Name(_))) {
            return Err(RuleError {
                rule: rule.text.clone(),
                reason: "under `private` must name one exact host (IP rules need no `private` entry)".into(),
            });
        }
        Ok(Self { allow: parse(&section.allow)?, deny: parse(&section.deny)?, private })
    }

    /// Whether the skill may make any request at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.private.is_empty()
    }

    /// Normalise `url` and check it against the rules, before any DNS.
    pub fn check_url(&self, url: &str) -> Result<Target, Denial> {
        let target = normalise(url)?;
        if let Some(rule) = self.deny.iter().find(|r| r.matches(&target)) {
            return Err(Denial::DenyRule { origin: target.origin(), rule: rule.text.clone() });
        }
        if self.allow.iter().chain(&self.private).any(|r| r.matches(&target)) {
            Ok(target)
        } else {
            let suggestion = if target.port == target.scheme.default_port() {
                format!("{}://{}", target.scheme, target.host)
            } else {
                format!("{}://{}:{}", target.scheme, target.host, target.port)
            };
            Err(Denial::NotAllowed { origin: target.origin(), suggestion })
        }
    }

    /// Pick the address to connect to among those `target`'s name resolved to: the first
    /// public one, or, for a host listed under `private`, the first one. IP literals were
    /// checked by their rule and are returned as they are.
    pub fn check_addrs(&self, target: &Target, addrs: &[IpAddr]) -> Result<IpAddr, Denial> {
        let name = match &target.host {
            TargetHost::Ip(ip) => return Ok(*ip),
            TargetHost::Name(name) => name,
        };
        let first = *addrs.first().ok_or_else(|| Denial::Unresolved { host: name.clone(), reason: "no addresses".into() })?;
        if self.private.iter().any(|r| r.matches(target)) {
            return Ok(first);
        }
        match addrs.iter().find(|a| special_kind(**a).is_none()) {
            Some(addr) => Ok(*addr),
            None => Err(Denial::PrivateAddress { host: name.clone(), addr: first, kind: special_kind(first).unwrap_or("non-public") }),
        }
    }
}

/// `[[secrets]]`: a secret the host adds as a header to requests to some hosts. The skill
/// never sees the value.
///
/// ```toml
/// [[secrets]]
/// name = "github"
/// header = "Authorization"
/// format = "Bearer {}"
/// hosts = ["https://api.github.com"]
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretBinding {
    /// The secret's name in the host's secret store (`skillhost secret set NAME`).
    pub name: String,
    /// The header it is sent in.
    pub header: String,
    /// The header value, with `{}` standing for the secret.
    pub format: String,
    /// Requests it is added to; each must also be allowed by `[network]`.
    pub hosts: Vec<Rule>,
}

/// `[[secrets]]` as written in skill.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSection {
    /// Secret name.
    pub name: String,
    /// Header name.
    pub header: String,
    /// Value format with one `{}`; default `{}`.
    #[serde(default = "plain_format")]
    pub format: String,
    /// Rules of the hosts that receive it.
    pub hosts: Vec<String>,
}

fn plain_format() -> String {
    "{}".to_owned()
}

/// Whether `name` is a valid secret name: `^[a-z][a-z0-9_-]*$`, at most 64 bytes.
pub fn valid_secret_name(name: &str) -> bool {
    name.len() <= 64
        && name.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Why a `[[secrets]]` entry is refused; each names the secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// Its name is not `^[a-z][a-z0-9_-]*$` (see [`valid_secret_name`]).
    #[error("secret name `{name}` must be lowercase letters, digits, `_` or `-`")]
    BadName {
        /// The name as written.
        name: String,
    },
    /// Its header is not a header name.
    #[error("secret `{name}`: `{header}` is not a valid header name")]
    BadHeader {
        /// The secret.
        name: String,
        /// The header as written.
        header: String,
    },
    /// Its header is one the host sets itself.
    #[error("secret `{name}`: header `{header}` is managed by the host")]
    HostHeader {
        /// The secret.
        name: String,
        /// The header as written.
        header: String,
    },
    /// Its format has not exactly one `{}`, or has a line break.
    #[error("secret `{name}`: format must contain `{{}}` exactly once, e.g. \"Bearer {{}}\"")]
    BadFormat {
        /// The secret.
        name: String,
    },
    /// It lists no hosts.
    #[error("secret `{name}` is bound to no hosts; list where it may be sent in `hosts`")]
    NoHosts {
        /// The secret.
        name: String,
    },
    /// One of its hosts is not a rule.
    #[error("secret `{name}`: {source}")]
    Rule {
        /// The secret.
        name: String,
        /// Why the rule does not parse.
        source: RuleError,
    },
    /// One of its hosts is not allowed by `[network]`.
    #[error("secret `{name}` is bound to `{rule}`, which `[network] allow` does not list; add it there too")]
    NotAllowed {
        /// The secret.
        name: String,
        /// The rule as written.
        rule: String,
    },
}

/// Who adds a bound secret to a skill's requests, for [`SecretBinding::approval_line`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretCarrier {
    /// The host makes the requests (a WebAssembly skill's).
    Host,
    /// The host's proxy, for code in a sandbox (a server skill, a run of scripts).
    Proxy,
}

impl SecretBinding {
    /// What a human approves: the header exactly as it will be sent (the value shown as
    /// `<secret NAME>`), the hosts, and who adds it.
    pub fn approval_line(&self, carrier: SecretCarrier) -> String {
        let hosts: Vec<&str> = self.hosts.iter().map(|r| r.text.as_str()).collect();
        let value = self.format.replacen("{}", &format!("<secret {}>", self.name), 1);
        let by = match carrier {
            SecretCarrier::Host => "by the host, which makes the skill's requests; the skill never holds the value",
            SecretCarrier::Proxy => {
                "by the host's proxy, over HTTPS too (it answers for these hosts with the host's egress CA, which the sandbox trusts); the sandbox never holds the value"
            }
        };
        format!("secret `{}` sent as `{}: {value}` to {} {by}", self.name, self.header, hosts.join(", "))
    }

    /// Check a `[[secrets]]` entry against the skill's network policy.
    pub fn from_section(section: &SecretSection, network: &EgressPolicy) -> Result<Self, SecretError> {
        let name = || section.name.clone();
        if !valid_secret_name(&section.name) {
            return Err(SecretError::BadName { name: name() });
        }
        let header_ok =
            !section.header.is_empty() && section.header.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !header_ok {
            return Err(SecretError::BadHeader { name: name(), header: section.header.clone() });
        }
        if ["host", "content-length", "transfer-encoding", "connection"].contains(&section.header.to_ascii_lowercase().as_str()) {
            return Err(SecretError::HostHeader { name: name(), header: section.header.clone() });
        }
        if section.format.matches("{}").count() != 1 || section.format.contains(['\r', '\n']) {
            return Err(SecretError::BadFormat { name: name() });
        }
        if section.hosts.is_empty() {
            return Err(SecretError::NoHosts { name: name() });
        }
        let mut hosts = Vec::with_capacity(section.hosts.len());
        for text in &section.hosts {
            let rule = Rule::parse(text).map_err(|source| SecretError::Rule { name: name(), source })?;
            let covered = network.allow.iter().chain(&network.private).any(|allow| allow == &rule || allow.text == rule.text);
            if !covered {
                return Err(SecretError::NotAllowed { name: name(), rule: text.clone() });
            }
            hosts.push(rule);
        }
        Ok(Self { name: section.name.clone(), header: section.header.clone(), format: section.format.clone(), hosts })
    }

    /// The header value carrying `secret`.
    pub fn header_value(&self, secret: &str) -> String {
        self.format.replacen("{}", secret, 1)
    }
}

/// A parsed domain without its one trailing dot (the DNS root), or `None` when a label is empty
/// (`..`, `a..b`, `example.com..`) or it still holds a percent sign: no resolver reaches such a
/// name, and keeping it would let `a..` and `a.` differ by normalising twice.
fn host_name(name: &str) -> Option<&str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    (!name.split('.').any(str::is_empty) && !name.contains('%')).then_some(name)
}

/// Normalise a request URL (WHATWG): refuses other schemes and userinfo.
pub fn normalise(url: &str) -> Result<Target, Denial> {
    let bad = |reason: String| Denial::BadUrl { url: url.to_owned(), reason };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let scheme = Scheme::parse(parsed.scheme()).ok_or_else(|| bad(format!("scheme `{}` is not http or https", parsed.scheme())))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Denial::Userinfo { url: url.to_owned() });
    }
    let host = match parsed.host() {
        None => return Err(bad("it has no host".into())),
        Some(url::Host::Domain(name)) => {
            TargetHost::Name(host_name(name).ok_or_else(|| bad("its host is not a valid name".into()))?.to_owned())
        }
        Some(url::Host::Ipv4(ip)) => TargetHost::Ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => TargetHost::Ip(IpAddr::V6(ip)),
    };
    let port = parsed.port().unwrap_or(scheme.default_port());
    let path = parsed.path().to_owned();
    let path_and_query = match parsed.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    Ok(Target { scheme, host, port, path, path_and_query })
}

/// What kind of non-public address `ip` is, if it is one.
pub fn special_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return Some(special_v4(v4).unwrap_or("IPv4-mapped"));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if first & 0xfe00 == 0xfc00 {
                Some("unique-local")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if v6.segments()[..6] == [0, 0, 0, 0, 0, 0] || first == 0x64 && v6.segments()[1] == 0xff9b || first == 0x2002 {
                // IPv4-compatible, NAT64 and 6to4 embed IPv4 addresses.
                Some("IPv4-embedding")
            } else if first == 0x2001 && v6.segments()[1] == 0xdb8 {
                Some("documentation")
            } else {
                None
            }
        }
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_multicast() || a >= 240 {
        Some("multicast or reserved")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (CGNAT)")
    } else if ip.is_documentation() || (a == 198 && (b == 18 || b == 19)) || (a == 192 && b == 0 && ip.octets()[2] == 0) {
        Some("reserved")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str], private: &[&str]) -> EgressPolicy {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        EgressPolicy::from_section(&NetworkSection { allow: owned(allow), deny: owned(deny), private: owned(private) }).unwrap()
    }

    #[test]
    fn rules_parse_or_explain() {
        let table = [
            ("https://api.github.com", Ok((Scheme::Https, HostPattern::Name("api.github.com".into()), 443))),
            ("http://API.GitHub.com.:8080/", Ok((Scheme::Http, HostPattern::Name("api.github.com".into()), 8080))),
            ("https://*.example.com", Ok((Scheme::Https, HostPattern::Subdomains("example.com".into()), 443))),
            ("http://127.0.0.1:9000", Ok((Scheme::Http, HostPattern::Ip("127.0.0.1/32".parse().unwrap()), 9000))),
            ("http://10.0.0.0/8", Ok((Scheme::Http, HostPattern::Ip("10.0.0.0/8".parse().unwrap()), 80))),
            ("https://[::1]:8443", Ok((Scheme::Https, HostPattern::Ip("::1/128".parse().unwrap()), 8443))),
            ("https://bücher.example", Ok((Scheme::Https, HostPattern::Name("xn--bcher-kva.example".into()), 443))),
            ("ftp://example.com", Err("must use http or https")),
            ("example.com", Err("has no scheme")),
            ("https://user@example.com", Err("userinfo")),
            ("https://example.com/path", Err("path")),
            ("https://*example.com", Err("`*.` at the start")),
            ("https://a.*.example.com", Err("`*.` at the start")),
            ("https://*.com", Err("top-level domain")),
            ("https://*.10.0.0.1", Err("IP address")),
            ("http://10.0.0.0/33", Err("CIDR prefix")),
        ];
        for (text, expected) in table {
            match (Rule::parse(text), expected) {
                (Ok(rule), Ok((scheme, host, port))) => assert_eq!((rule.scheme, rule.host, rule.port), (scheme, host, port), "{text}"),
                (Err(err), Err(reason)) => {
                    let msg = err.to_string();
                    assert!(msg.contains(reason), "{text}: {msg}");
                    assert!(msg.contains("write rules as"), "says how to fix: {msg}");
                }
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A name with an empty label (`...`, `a..b`, `example.com..`) is no host: one trailing dot
    /// (the root) is dropped, anything else is refused, so a target always normalises to itself.
    #[test]
    fn a_host_with_an_empty_label_is_refused() {
        for url in ["http://.../", "http://../", "https://a..b/", "https://example.com../", "http://./"] {
            let err = normalise(url).expect_err(url);
            assert!(err.to_string().contains("not a valid name"), "{url}: {err}");
        }
        for rule in ["https://a..b", "https://example.com..", "https://*..example.com", "http://..."] {
            assert!(Rule::parse(rule).is_err(), "{rule}");
        }
        assert_eq!(normalise("https://Example.COM./x").unwrap().host, TargetHost::Name("example.com".into()));
    }

    #[test]
    fn url_checks() {
        let p = policy(
            &["https://api.github.com", "https://*.example.com", "http://127.0.0.1:9000", "http://10.0.0.0/8"],
            &["https://admin.example.com"],
            &[],
        );
        let table = [
            ("https://api.github.com/repos?x=1", true),
            ("https://API.GITHUB.COM./repos", true),
            ("https://api.github.com:443/", true),
            ("https://api.github.com:8443/", false),
            ("http://api.github.com/", false),
            ("https://github.com/", false),
            ("https://a.example.com/", true),
            ("https://a.b.example.com/", true),
            ("https://example.com/", false),
            ("https://notexample.com/", false),
            ("https://admin.example.com/", false),
            ("http://127.0.0.1:9000/", true),
            ("http://2130706433:9000/", true),
            ("http://0x7f.0.0.1:9000/", true),
            ("http://0177.0.0.1:9000/", true),
            ("http://127.0.0.1:9001/", false),
            ("http://localhost:9000/", false),
            ("http://10.1.2.3/", true),
            ("http://11.1.2.3/", false),
            ("https://api.github.com@evil.com/", false),
            ("https://evil.com#@api.github.com", false),
            ("https://аpi.github.com/", false),
            ("http://[::ffff:127.0.0.1]:9000/", false),
        ];
        for (url, allowed) in table {
            assert_eq!(p.check_url(url).is_ok(), allowed, "{url}: {:?}", p.check_url(url));
        }
        let err = p.check_url("https://api.github.com:8443/x").unwrap_err().to_string();
        assert_eq!(
            err,
            "https://api.github.com:8443 is not in the skill's network allowlist; to allow it, add \"https://api.github.com:8443\" to `[network] allow` in its skill.toml and approve the skill again"
        );
        assert!(p.check_url("https://user:pw@api.github.com/").unwrap_err().to_string().contains("userinfo"));
        assert!(p.check_url("https://admin.example.com/").unwrap_err().to_string().contains("deny rule"));
    }

    #[test]
    fn resolved_addresses() {
        let p = policy(&["https://api.github.com", "http://10.0.0.5"], &[], &["http://db.internal:5432"]);
        let github = p.check_url("https://api.github.com/").unwrap();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        assert_eq!(p.check_addrs(&github, &[ip("140.82.112.5")]), Ok(ip("140.82.112.5")));
        assert_eq!(p.check_addrs(&github, &[ip("127.0.0.1"), ip("140.82.112.5")]), Ok(ip("140.82.112.5")), "skips the private one");
        for bad in [
            "127.0.0.1",
            "10.0.0.1",
            "192.168.1.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:8.8.8.8",
            "64:ff9b::a00:1",
        ] {
            let err = p.check_addrs(&github, &[ip(bad)]).unwrap_err();
            assert!(matches!(err, Denial::PrivateAddress { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("`[network] private`"), "{err}");
        }
        let db = p.check_url("http://db.internal:5432/").unwrap();
        assert_eq!(p.check_addrs(&db, &[ip("10.1.1.1")]), Ok(ip("10.1.1.1")), "listed under private");
        let literal = p.check_url("http://10.0.0.5/").unwrap();
        assert_eq!(p.check_addrs(&literal, &[]), Ok(ip("10.0.0.5")), "an IP literal named by a rule");
        assert!(
            EgressPolicy::from_section(&NetworkSection { private: vec!["https://*.corp.example".into()], ..Default::default() }).is_err()
        );
    }
}
