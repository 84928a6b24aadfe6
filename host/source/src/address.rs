//! [`SourceAddr`]: the address of a remote skill, as a person types it.
//!
//! - `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:HEX`
//! - `git+URL#path=DIR&rev=REV` (URL `https://`, `http://` to loopback, `ssh://`, `file://`;
//!   `path` defaults to the repository's root, `rev` to `HEAD`)
//! - `https://HOST/[PATH]#skill=NAME`: a skill of the Agent Skills well-known index under
//!   that URL (`https://HOST/PATH/.well-known/agent-skills/index.json`); the URL may also
//!   name an `index.json` itself, over `https://` or `file://`.
//!
//! Each has one canonical spelling ([`Display`](std::fmt::Display)), which is what
//! `skills.lock` and the provenance record.

use std::fmt;
use std::str::FromStr;

use url::Url;

use crate::error::SourceError;

/// Where a remote skill comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceAddr {
    /// An OCI registry.
    Oci(OciAddr),
    /// A git repository.
    Git(GitAddr),
    /// An Agent Skills well-known index.
    Index(IndexAddr),
}

/// `oci://REGISTRY/REPOSITORY(:TAG|@DIGEST)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciAddr {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// `a/b/c`, lower case.
    pub repository: String,
    /// The tag or digest.
    pub reference: OciRef,
}

/// A tag, which may move, or a digest, which may not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OciRef {
    /// `:TAG`.
    Tag(String),
    /// `@sha256:HEX`.
    Digest(String),
}

/// `git+URL#path=DIR&rev=REV`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitAddr {
    /// The repository's URL, without `git+`.
    pub url: String,
    /// The skill's folder in the repository (`/`-separated, plain), empty for the root.
    pub path: String,
    /// A branch, tag or commit; `HEAD` when not given.
    pub rev: String,
}

/// `URL#skill=NAME` of a well-known index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexAddr {
    /// The index document itself (`…/.well-known/agent-skills/index.json`, or the
    /// `index.json` the address named).
    pub index: Url,
    /// The skill chosen, when one is.
    pub skill: Option<String>,
}

/// Whether `text` is a remote source address rather than a local path.
pub fn is_remote(text: &str) -> bool {
    ["oci://", "git+", "https://", "http://"].iter().any(|p| text.starts_with(p))
}

/// Whether `host` (a URL's host, or `HOST[:PORT]`) is a loopback address or `localhost`,
/// the only hosts plain HTTP goes to without a human's flag.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[');
    let host = match host.rsplit_once(']') {
        Some((inner, _)) => inner,
        None => host.rsplit_once(':').filter(|(h, _)| !h.contains(':')).map_or(host, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn bad(address: &str, reason: impl Into<String>) -> SourceError {
    SourceError::BadAddress { address: address.to_owned(), reason: reason.into() }
}

const FORMS: &str = "use oci://REGISTRY/REPO:TAG, oci://REGISTRY/REPO@sha256:DIGEST, git+URL#path=DIR&rev=REV, or https://HOST/#skill=NAME";

impl FromStr for SourceAddr {
    type Err = SourceError;

    fn from_str(text: &str) -> Result<Self, SourceError> {
        if text.chars().any(char::is_control) || text.contains(char::is_whitespace) {
            return Err(bad(&text.escape_debug().to_string(), "it holds spaces or control characters"));
        }
        if let Some(rest) = text.strip_prefix("oci://") {
            return parse_oci(text, rest).map(SourceAddr::Oci);
        }
        if let Some(rest) = text.strip_prefix("git+") {
            return parse_git(text, rest).map(SourceAddr::Git);
        }
        if text.starts_with("https://") || text.starts_with("http://") || text.starts_with("file://") {
            return parse_index(text).map(SourceAddr::Index);
        }
        Err(bad(text, FORMS))
    }
}

fn parse_oci(text: &str, rest: &str) -> Result<OciAddr, SourceError> {
    let (registry, path) = rest.split_once('/').ok_or_else(|| bad(text, "it names no repository; use oci://REGISTRY/REPO:TAG"))?;
    if registry.is_empty() || !registry.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) {
        return Err(bad(text, "the registry is not HOST[:PORT]"));
    }
    let (repository, reference) = if let Some((repo, digest)) = path.split_once('@') {
        let hex = digest.strip_prefix("sha256:").ok_or_else(|| bad(text, "a digest is sha256:HEX"))?;
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()) {
            return Err(bad(text, "a digest is sha256: and 64 lower-case hex digits"));
        }
        (repo, OciRef::Digest(digest.to_owned()))
    } else {
        match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => {
                let ok = !tag.is_empty()
                    && tag.len() <= 128
                    && tag.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                    && !tag.starts_with(['.', '-']);
                if !ok {
                    return Err(bad(text, "a tag is up to 128 letters, digits, `.`, `_` or `-`, not starting with `.` or `-`"));
                }
                (repo, OciRef::Tag(tag.to_owned()))
            }
            _ => (path, OciRef::Tag("latest".to_owned())),
        }
    };
    let plain = |part: &str| {
        !part.is_empty()
            && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && part.starts_with(|c: char| c.is_ascii_alphanumeric())
    };
    if !repository.split('/').all(plain) {
        return Err(bad(text, "a repository is lower-case letters, digits, `.`, `_`, `-` and `/`"));
    }
    Ok(OciAddr { registry: registry.to_owned(), repository: repository.to_owned(), reference })
}

fn parse_git(text: &str, rest: &str) -> Result<GitAddr, SourceError> {
    let (url, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let parsed = Url::parse(url).map_err(|e| bad(text, format!("the repository URL: {e}")))?;
    match parsed.scheme() {
        "https" | "ssh" | "file" => {}
        "http" if parsed.host_str().is_some_and(is_loopback) => {}
        "http" => return Err(bad(text, "plain http:// is for a loopback host only; use https://")),
        other => return Err(bad(text, format!("git over `{other}` is not allowed; use https://, ssh:// or file://"))),
    }
    let mut path = String::new();
    let mut rev = "HEAD".to_owned();
    for pair in fragment.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("path", value)) => path = value.trim_matches('/').to_owned(),
            Some(("rev", value)) if !value.is_empty() => rev = value.to_owned(),
            _ => return Err(bad(text, format!("`{pair}` in the fragment: only path=DIR and rev=REV"))),
        }
    }
    if !path.is_empty() && !path.split('/').all(|p| !p.is_empty() && p != "." && p != ".." && !p.starts_with('-')) {
        return Err(bad(text, "path= is a plain relative folder"));
    }
    let rev_ok = rev.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c)) && !rev.starts_with('-') && !rev.contains("..");
    if !rev_ok {
        return Err(bad(text, "rev= is a branch, tag or commit: letters, digits, `.`, `_`, `-`, `/`"));
    }
    Ok(GitAddr { url: url.to_owned(), path, rev })
}

fn parse_index(text: &str) -> Result<IndexAddr, SourceError> {
    let (url, fragment) = text.split_once('#').unwrap_or((text, ""));
    let mut index = Url::parse(url).map_err(|e| bad(text, format!("the index URL: {e}")))?;
    if index.query().is_some() {
        return Err(bad(text, "an index URL has no query"));
    }
    if !index.path().ends_with(".json") {
        if !index.path().ends_with('/') {
            let path = format!("{}/", index.path());
            index.set_path(&path);
        }
        index = index.join(".well-known/agent-skills/index.json").map_err(|e| bad(text, e.to_string()))?;
    }
    let skill = match fragment.split_once('=') {
        None if fragment.is_empty() => None,
        Some(("skill", name)) if !name.is_empty() => Some(name.to_owned()),
        _ => return Err(bad(text, "the fragment is #skill=NAME")),
    };
    Ok(IndexAddr { index, skill })
}

impl fmt::Display for SourceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceAddr::Oci(oci) => oci.fmt(f),
            SourceAddr::Git(git) => git.fmt(f),
            SourceAddr::Index(index) => index.fmt(f),
        }
    }
}

impl fmt::Display for OciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reference {
            OciRef::Tag(tag) => write!(f, "oci://{}/{}:{tag}", self.registry, self.repository),
            OciRef::Digest(digest) => write!(f, "oci://{}/{}@{digest}", self.registry, self.repository),
        }
    }
}

impl fmt::Display for GitAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "git+{}#", self.url)?;
        if !self.path.is_empty() {
            write!(f, "path={}&", self.path)?;
        }
        write!(f, "rev={}", self.rev)
    }
}

impl fmt::Display for IndexAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.index)?;
        match &self.skill {
            Some(skill) => write!(f, "#skill={skill}"),
            None => Ok(()),
        }
    }
}

impl SourceAddr {
    /// The address that fetches exactly what `digest` names: an OCI tag becomes the
    /// digest, a git rev the commit; an index entry stays as it is (its digest is checked
    /// against the one pinned).
    pub fn pinned(&self, digest: &str) -> SourceAddr {
        match self {
            SourceAddr::Oci(oci) => SourceAddr::Oci(OciAddr { reference: OciRef::Digest(digest.to_owned()), ..oci.clone() }),
            SourceAddr::Git(git) => SourceAddr::Git(GitAddr { rev: digest.to_owned(), ..git.clone() }),
            SourceAddr::Index(_) => self.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> SourceAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn canonical_spellings_round_trip() {
        for text in [
            "oci://127.0.0.1:5000/skills/hello:1.0",
            "oci://ghcr.io/acme/skills/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "git+https://example.com/a/b.git#path=skills/x&rev=main",
            "git+file:///srv/repo.git#rev=HEAD",
            "https://skills.example.com/.well-known/agent-skills/index.json#skill=review",
        ] {
            assert_eq!(parse(text).to_string(), text);
        }
        assert_eq!(parse("oci://r.io/a").to_string(), "oci://r.io/a:latest");
        assert_eq!(parse("https://h.example/team").to_string(), "https://h.example/team/.well-known/agent-skills/index.json");
    }

    #[test]
    fn hostile_addresses_are_refused() {
        for text in [
            "oci://r.io/A:1",
            "oci://r.io/a@sha256:xyz",
            "oci://r.io/a:-x",
            "oci://r.io/../a:1",
            "git+ext::sh -c evil",
            "git+http://example.com/a.git",
            "git+https://e.com/a.git#path=../x",
            "git+https://e.com/a.git#rev=--upload-pack=evil",
            "git+https://e.com/a.git#rev=a..b",
            "git+https://e.com/a.git#cmd=x",
            "https://h/#skill=",
            "https://h/x\u{1b}[2J",
            "/local/path",
        ] {
            assert!(text.parse::<SourceAddr>().is_err(), "{text} parsed");
        }
    }

    #[test]
    fn loopback_hosts() {
        for host in ["127.0.0.1", "127.0.0.1:5000", "localhost:80", "[::1]:5000", "::1"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1:5000", "example.com", "[::2]:1"] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn pinning_an_oci_tag_names_the_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned = parse("oci://r.io/a:1").pinned(&digest);
        assert_eq!(pinned.to_string(), format!("oci://r.io/a@{digest}"));
        assert_eq!(parse("git+file:///r#rev=main").pinned("abc").to_string(), "git+file:///r#rev=abc");
    }
}
