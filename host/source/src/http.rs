//! Every HTTP request of a remote source, through one [`Fetcher`] per source: held to
//! [`Caps`], told where it may go, its bodies capped before and while they are read.
//! `file://` URLs read a local file under the same cap ([`get`], [`read_file_capped`]).
//!
//! **Sizes.** [`read_body`] refuses a body whose `Content-Length` is over its cap before a
//! byte of it is read, and stops one that grows past the cap (chunked, endless) as soon as
//! it does: at most the cap and one network read are ever held. Manifests, indexes, token
//! answers and signatures have caps of their own, far under the download cap.
//!
//! **Where a fetch may go.** The source's address is the word of whoever typed it (or of
//! the lockfile that names it): its scheme, host and port are the fetch's *origin*. Every
//! other URL is a remote's word (a redirect's `Location`, an index entry, a registry's
//! token service or upload location) and is requested only when
//! - its scheme is `https`, or `http` to a loopback host (or anywhere with `allow_http`),
//!   and never `http` when the origin is `https`;
//! - it is on the origin (the same scheme, host and port), or on a host that
//!   [`Caps::allow_hosts`] (`[sources] allow_hosts` of the host config) names, or is one
//!   of the few hosts a well-known registry hands its own fetches to ([`COMPANIONS`]:
//!   GitHub's and Docker Hub's blob storage and token service);
//! - every address it connects to is within the origin's [`Reach`]: a source on a public
//!   address reaches public addresses only, one on a private network also that kind of
//!   address, one on loopback anything. Loopback, private, link-local, … are egress's
//!   classes ([`special_kind`]). The check is on the resolved addresses: before the
//!   request, and again when the connection is made (a name that answers otherwise the
//!   second time is still refused). Through a proxy from the environment (`HTTPS_PROXY`,
//!   …) the proxy resolves names, so the connection-time check cannot apply there.
//!
//! Credentials go only to the scheme, host and port they were given for, never across a
//! redirect. Redirects are followed here, one at a time (at most [`MAX_REDIRECTS`]), each
//! checked like any URL a remote named.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Once};

use futures::StreamExt;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, LOCATION};
use reqwest::{Method, StatusCode};
use skillhost_core::egress::{self, Scheme, Target, TargetHost, special_kind};
use url::Url;

use crate::address::is_loopback;
use crate::error::SourceError;
use crate::{Caps, FetchOptions, FetchProgress};

/// The hosts a well-known registry sends its own fetches to (its token service, its blob
/// storage), each allowed over HTTPS on its default port to a source on that registry
/// only, as if its `allow_hosts` named them: without them no image of GitHub's or
/// Docker Hub's registry could be installed. Every other address check still applies.
pub const COMPANIONS: &[(&str, &[&str])] =
    &[("ghcr.io", &["pkg-containers.githubusercontent.com"]), ("index.docker.io", &["auth.docker.io", "production.cloudflare.docker.com"])];

/// Whether `target` is a [`COMPANIONS`] host of `origin`.
fn companion(origin: &Target, target: &Target) -> bool {
    let (TargetHost::Name(origin_host), TargetHost::Name(host)) = (&origin.host, &target.host) else { return false };
    let https = |t: &Target| t.scheme == Scheme::Https && t.port == Scheme::Https.default_port();
    https(origin) && https(target) && COMPANIONS.iter().any(|(registry, hosts)| registry == origin_host && hosts.contains(&host.as_str()))
}

/// Redirects followed before a fetch is refused.
pub const MAX_REDIRECTS: usize = 5;

/// Bytes of an error answer's body read for its message.
const MAX_ERROR_BYTES: usize = 4 << 10;

/// Characters of an error answer shown.
const ERROR_SHOWN: usize = 300;

/// Make rustls use ring, the provider the rest of the host links, once per process
/// (reqwest is built without a provider of its own).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one first: either serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether `url` may be fetched under `caps`: `https`, or `http` to loopback (or anywhere
/// when `caps.allow_http`).
pub fn check_scheme(url: &Url, caps: &Caps) -> Result<(), SourceError> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if caps.allow_http || url.host_str().is_some_and(is_loopback) => Ok(()),
        "http" => Err(SourceError::Http {
            url: url.to_string(),
            reason: "plain HTTP is refused for a host that is not loopback; use https://, or pass --allow-http if you accept an unprotected download".into(),
        }),
        other => Err(SourceError::Http { url: url.to_string(), reason: format!("`{other}` downloads are not supported; use https://") }),
    }
}

/// How host names are looked up ([`Caps::lookup`]): the operating system's resolver unless
/// a test hands in another through [`Lookup::new`].
#[derive(Clone)]
pub struct Lookup(Arc<dyn skillhost_core::Resolver>);

impl Lookup {
    /// Names looked up with `resolver`.
    pub fn new(resolver: impl skillhost_core::Resolver + 'static) -> Self {
        Self(Arc::new(resolver))
    }

    async fn addrs(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        self.0.resolve(host, 0).await
    }
}

impl Default for Lookup {
    fn default() -> Self {
        Self::new(System)
    }
}

impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lookup")
    }
}

/// The operating system's resolver (through tokio).
struct System;

#[async_trait::async_trait]
impl skillhost_core::Resolver for System {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.map(|a| a.ip()).collect())
    }
}

/// The addresses the fetches of one origin may connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reach {
    /// The origin is this machine (every address it resolved to is loopback): anything.
    local: bool,
    /// Kinds of non-public address (egress's names: `private`, `unique-local`, …) the
    /// origin itself is on, never loopback.
    kinds: BTreeSet<&'static str>,
}

/// Whether an address of `kind` is this machine.
fn is_local(kind: &str) -> bool {
    matches!(kind, "loopback" | "unspecified")
}

impl Reach {
    /// Public addresses only.
    pub fn public() -> Self {
        Self { local: false, kinds: BTreeSet::new() }
    }

    /// The reach of an origin that resolved to `addrs`: anything when they are all
    /// loopback (a test, a local mirror); else public addresses and the kinds of the
    /// non-public ones among `addrs` (a registry on a private network may send a fetch
    /// within that network), never loopback.
    pub fn of(addrs: &[IpAddr]) -> Self {
        let kinds: Vec<Option<&'static str>> = addrs.iter().map(|ip| special_kind(*ip)).collect();
        let local = !kinds.is_empty() && kinds.iter().all(|k| k.is_some_and(is_local));
        Self { local, kinds: kinds.into_iter().flatten().filter(|k| !is_local(k)).collect() }
    }

    /// Whether a fetch of this origin may connect to `ip`; the kind of address refused if not.
    pub fn admits(&self, ip: IpAddr) -> Result<(), &'static str> {
        match special_kind(ip) {
            None => Ok(()),
            Some(_) if self.local => Ok(()),
            Some(kind) if self.kinds.contains(kind) => Ok(()),
            Some(kind) => Err(kind),
        }
    }
}

/// Who named a URL: the source's own address, or a remote.
#[derive(Clone, Debug)]
pub enum Named {
    /// The address the fetch was asked for (the user's, or the lockfile's).
    Source,
    /// A URL a remote named; what named it (`the index's entry for skill a1`).
    Remote(String),
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Named::Source => f.write_str("the source's address"),
            Named::Remote(what) => f.write_str(what),
        }
    }
}

/// One request for [`Fetcher::send`].
pub struct Call {
    /// Its method.
    pub method: Method,
    /// Where.
    pub url: Url,
    /// Who named `url`.
    pub by: Named,
    /// Its headers (no `Authorization`: that is `auth`).
    pub headers: HeaderMap,
    /// Credentials, sent to `url`'s scheme, host and port only.
    pub auth: Option<HeaderValue>,
    /// Its body.
    pub body: Option<Vec<u8>>,
}

impl Call {
    /// A `GET` of `url`, named by `by`.
    pub fn get(url: Url, by: Named) -> Self {
        Self { method: Method::GET, url, by, headers: HeaderMap::new(), auth: None, body: None }
    }
}

/// Proxies the environment gives reqwest (`ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY`, in
/// either case): the user's configuration, not a remote's word.
#[derive(Clone, Debug, Default)]
struct Proxies {
    /// Their host names, lower case.
    hosts: BTreeSet<String>,
    /// Whether `http://` URLs go through one.
    http: bool,
    /// Whether `https://` URLs go through one.
    https: bool,
}

impl Proxies {
    fn from_env() -> Self {
        let first = |names: [&str; 2]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
        let (all, http, https) =
            (first(["ALL_PROXY", "all_proxy"]), first(["HTTP_PROXY", "http_proxy"]), first(["HTTPS_PROXY", "https_proxy"]));
        let mut proxies = Proxies { http: all.is_some() || http.is_some(), https: all.is_some() || https.is_some(), ..Self::default() };
        for value in [all, http, https].into_iter().flatten() {
            let value = value.trim();
            let url = if value.contains("://") { Url::parse(value) } else { Url::parse(&format!("http://{value}")) };
            if let Some(host) = url.ok().and_then(|u| u.host_str().map(plain_name)) {
                proxies.hosts.insert(host);
            }
        }
        proxies
    }

    fn covers(&self, scheme: Scheme) -> bool {
        match scheme {
            Scheme::Http => self.http,
            Scheme::Https => self.https,
        }
    }
}

/// A host name as compared: lower case, without a trailing dot or IPv6 brackets.
fn plain_name(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase()
}

/// A connection refused because of the address its name resolved to.
#[derive(Debug)]
struct AddressRefused {
    host: String,
    addr: IpAddr,
    kind: &'static str,
}

impl fmt::Display for AddressRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} resolves to {}, a {} address", self.host, self.addr, self.kind)
    }
}

impl std::error::Error for AddressRefused {}

/// The resolver of a fetcher's connections: every name but a configured proxy's resolves
/// only to addresses within the origin's reach.
struct Guard {
    lookup: Lookup,
    reach: Reach,
    proxies: BTreeSet<String>,
}

impl reqwest::dns::Resolve for Guard {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = plain_name(name.as_str());
        let (lookup, reach, checked) = (self.lookup.clone(), self.reach.clone(), !self.proxies.contains(&host));
        Box::pin(async move {
            let addrs = lookup.addrs(&host).await?;
            let admitted: Vec<IpAddr> = addrs.iter().copied().filter(|ip| !checked || reach.admits(*ip).is_ok()).collect();
            match (admitted.is_empty(), addrs.first()) {
                (false, _) => Ok(Box::new(admitted.into_iter().map(|ip| SocketAddr::new(ip, 0))) as reqwest::dns::Addrs),
                (true, Some(&addr)) => {
                    let kind = reach.admits(addr).err().unwrap_or("non-public");
                    Err(Box::new(AddressRefused { host, addr, kind }) as Box<dyn std::error::Error + Send + Sync>)
                }
                (true, None) => Err(format!("{host} resolved to no address").into()),
            }
        })
    }
}

/// The requests of one source: its origin, what it may reach, one HTTP client.
pub struct Fetcher {
    client: reqwest::Client,
    origin: Target,
    reach: Reach,
    caps: Caps,
    proxies: Proxies,
}

impl Fetcher {
    /// A fetcher for the source at `origin` (its scheme, host and port; `https`, or `http`
    /// to loopback or with `allow_http`), its name resolved once to learn its [`Reach`].
    pub async fn new(origin: &Url, caps: &Caps) -> Result<Self, SourceError> {
        install_crypto_provider();
        check_scheme(origin, caps)?;
        let target =
            egress::normalise(origin.as_str()).map_err(|e| SourceError::Http { url: origin.to_string(), reason: e.to_string() })?;
        let proxies = Proxies::from_env();
        let reach = match &target.host {
            TargetHost::Ip(ip) => Reach::of(&[*ip]),
            TargetHost::Name(name) => match caps.lookup.addrs(name).await {
                Ok(addrs) => Reach::of(&addrs),
                // Behind a proxy a name may not resolve here: the proxy resolves it.
                Err(_) if proxies.covers(target.scheme) => Reach::public(),
                Err(e) => return Err(SourceError::Http { url: origin.to_string(), reason: format!("{name} did not resolve: {e}") }),
            },
        };
        let guard = Guard { lookup: caps.lookup.clone(), reach: reach.clone(), proxies: proxies.hosts.clone() };
        let client = reqwest::Client::builder()
            .timeout(caps.timeout)
            // Followed in `send`, each checked.
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(guard)
            .user_agent(concat!("skillhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SourceError::Http { url: origin.to_string(), reason: format!("cannot make an HTTP client: {e}") })?;
        Ok(Self { client, origin: target, reach, caps: caps.clone(), proxies })
    }

    /// `scheme://host:port` of the origin, for messages.
    pub fn origin(&self) -> String {
        self.origin.origin()
    }

    /// Whether `url` may be requested: its scheme, its host, its addresses (module docs).
    pub async fn check(&self, url: &Url, by: &Named) -> Result<(), SourceError> {
        let refuse = |reason: String| SourceError::Refused { url: url.to_string(), reason };
        let origin = self.origin.origin();
        let target = egress::normalise(url.as_str()).map_err(|e| refuse(format!("{by}: {e}")))?;
        if target.scheme == Scheme::Http && self.origin.scheme == Scheme::Https {
            return Err(refuse(format!(
                "{by} sends the fetch to plain HTTP after {origin} was asked for over HTTPS, which is never followed"
            )));
        }
        check_scheme(url, &self.caps).map_err(|e| match (by, e) {
            (Named::Remote(_), SourceError::Http { reason, .. }) => refuse(format!("{by} sends the fetch there: {reason}")),
            (_, e) => e,
        })?;
        let same = target.scheme == self.origin.scheme && target.host == self.origin.host && target.port == self.origin.port;
        if !same && !companion(&self.origin, &target) && !self.caps.allow_hosts.iter().any(|rule| rule.matches(&target)) {
            let site = match target.port == target.scheme.default_port() {
                true => format!("{}://{}", target.scheme, target.host),
                false => format!("{}://{}:{}", target.scheme, target.host, target.port),
            };
            return Err(refuse(format!(
                "{by} sends the fetch to another host than {origin}, and a source's fetches go only to its own scheme, host and port; \
                 if you trust {site}, add \"{site}\" to `allow_hosts` under `[sources]` in the host config"
            )));
        }
        let addrs = match &target.host {
            TargetHost::Ip(ip) => vec![*ip],
            TargetHost::Name(name) => match self.caps.lookup.addrs(name).await {
                Ok(addrs) if !addrs.is_empty() => addrs,
                Err(_) if self.proxies.covers(target.scheme) => return Ok(()),
                Ok(_) => return Err(SourceError::Http { url: url.to_string(), reason: format!("{name} resolved to no address") }),
                Err(e) => return Err(SourceError::Http { url: url.to_string(), reason: format!("{name} did not resolve: {e}") }),
            },
        };
        if addrs.iter().any(|ip| self.reach.admits(*ip).is_ok()) {
            return Ok(());
        }
        let addr = addrs[0];
        let refused = AddressRefused { host: target.host.to_string(), addr, kind: self.reach.admits(addr).err().unwrap_or("non-public") };
        Err(refuse(self.address_reason(by, &refused)))
    }

    /// Why a fetch to the address `refused` is not made, and what to do instead.
    fn address_reason(&self, by: &Named, refused: &AddressRefused) -> String {
        format!(
            "{by} sends the fetch to {refused}, and a source on {} may not reach a loopback or private address (only a source on \
             loopback, or on that network, may); no setting allows it: if you trust that service, name it as the source yourself",
            self.origin.origin()
        )
    }

    /// A request failure as a refusal (an address the connection was refused) or an HTTP
    /// error naming `url`.
    fn failed(&self, url: &Url, by: &Named, error: &reqwest::Error) -> SourceError {
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if let Some(refused) = cause.downcast_ref::<AddressRefused>() {
                return SourceError::Refused { url: url.to_string(), reason: self.address_reason(by, refused) };
            }
            source = cause.source();
        }
        SourceError::Http { url: url.to_string(), reason: describe(error) }
    }

    /// Send `call`, following redirects (each checked as a URL a remote named; `303`, and
    /// `301`/`302` after a `POST`, become a `GET`): the last answer, whatever its status.
    pub async fn send(&self, call: Call) -> Result<reqwest::Response, SourceError> {
        let Call { mut method, mut url, mut by, headers, auth, mut body } = call;
        let credentials_for = egress::normalise(url.as_str()).ok();
        for _ in 0..=MAX_REDIRECTS {
            self.check(&url, &by).await?;
            let mut request = self.client.request(method.clone(), url.clone()).headers(headers.clone());
            let here = egress::normalise(url.as_str()).ok();
            if let Some(auth) = auth.as_ref().filter(|_| same_site(here.as_ref(), credentials_for.as_ref())) {
                request = request.header(AUTHORIZATION, auth.clone());
            }
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let response = request.send().await.map_err(|e| self.failed(&url, &by, &e))?;
            let status = response.status();
            let location = response.headers().get(LOCATION).and_then(|l| l.to_str().ok()).map(str::to_owned);
            let Some(location) = location.filter(|_| status.is_redirection() && status != StatusCode::NOT_MODIFIED) else {
                return Ok(response);
            };
            let next = url.join(&location).map_err(|e| SourceError::Refused {
                url: text(&location),
                reason: format!("a redirect from {url} to a URL that does not parse ({e})"),
            })?;
            if status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND) && method == Method::POST)
            {
                method = Method::GET;
                body = None;
            }
            by = Named::Remote(format!("a redirect from {url}"));
            url = next;
        }
        Err(SourceError::Http { url: url.to_string(), reason: format!("more than {MAX_REDIRECTS} redirects") })
    }

    /// The body at `url` (named by `by`), at most `cap` bytes ([`read_body`]); any answer
    /// but a success refused, naming its status.
    pub async fn get(
        &self,
        url: &Url,
        by: Named,
        what: &str,
        cap: Cap<'_>,
        progress: Option<&dyn FetchProgress>,
    ) -> Result<Vec<u8>, SourceError> {
        let response = self.send(Call::get(url.clone(), by)).await?;
        let status = response.status();
        if !status.is_success() {
            let said = error_text(response).await;
            return Err(SourceError::Http { url: url.to_string(), reason: format!("the server answered {status}{said}") });
        }
        read_body(response, what, cap, progress).await
    }
}

/// Whether `a` and `b` have the same scheme, host and port (normalised as egress does).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    same_site(egress::normalise(a.as_str()).ok().as_ref(), egress::normalise(b.as_str()).ok().as_ref())
}

/// Whether two normalised URLs share scheme, host and port.
fn same_site(a: Option<&Target>, b: Option<&Target>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.scheme == b.scheme && a.host == b.host && a.port == b.port,
        _ => false,
    }
}

/// A cap on one body: its bytes, and what to do when a body is over it (`None`: nothing
/// more to say than that it is too large).
#[derive(Clone, Copy, Debug)]
pub struct Cap<'a> {
    /// Bytes.
    pub bytes: u64,
    /// What to do.
    pub fix: Option<&'a str>,
}

impl Cap<'_> {
    /// `bytes`, nothing more to say.
    pub fn of(bytes: u64) -> Cap<'static> {
        Cap { bytes, fix: None }
    }
}

/// The body of `response`, at most `cap.bytes`: a `Content-Length` over the cap is refused
/// before a byte is read; a body growing past it (chunked, endless, longer than it said) is
/// refused as soon as it does. `what` names it in progress and errors.
pub async fn read_body(
    response: reqwest::Response,
    what: &str,
    cap: Cap<'_>,
    progress: Option<&dyn FetchProgress>,
) -> Result<Vec<u8>, SourceError> {
    let url = response.url().to_string();
    let too_large = |what: String| SourceError::TooLarge { what, limit: cap.bytes, fix: cap.fix.map(str::to_owned) };
    let total = response.content_length();
    if let Some(total) = total.filter(|&t| t > cap.bytes) {
        return Err(too_large(format!("{what} ({total} bytes, said the server)")));
    }
    let mut body = Vec::with_capacity(total.unwrap_or(0) as usize);
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| SourceError::Http { url: url.clone(), reason: describe(&e) })?;
        if (body.len() + chunk.len()) as u64 > cap.bytes {
            return Err(too_large(what.to_owned()));
        }
        body.extend_from_slice(&chunk);
        if let Some(progress) = progress {
            progress.bytes(what, body.len() as u64, total);
        }
    }
    Ok(body)
}

/// The start of an error answer's body, as `: TEXT` on one line (empty when there is none),
/// read no further than 4 KiB.
pub async fn error_text(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < MAX_ERROR_BYTES {
        match stream.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(MAX_ERROR_BYTES - body.len())]),
            _ => break,
        }
    }
    let said = text(String::from_utf8_lossy(&body).trim());
    if said.is_empty() { String::new() } else { format!(": {said}") }
}

/// Text a remote wrote, on one line, control characters escaped, cut short.
fn text(said: &str) -> String {
    skillhost_core::text::one_line(said, ERROR_SHOWN)
}

/// The body at `url` (`https`, loopback `http`, or `file`), refused past `caps.download`
/// bytes; `what` names it in progress and errors.
pub async fn get(url: &Url, what: &str, options: &FetchOptions) -> Result<Vec<u8>, SourceError> {
    let cap = options.caps.download;
    if url.scheme() == "file" {
        let path = url.to_file_path().map_err(|()| SourceError::Http { url: url.to_string(), reason: "not a local file".into() })?;
        return read_file_capped(&path, what, cap);
    }
    let fetcher = Fetcher::new(url, &options.caps).await?;
    fetcher.get(url, Named::Source, what, Cap::of(cap), Some(&*options.progress)).await
}

/// A local file's bytes, refused past `cap`, its links not followed.
pub fn read_file_capped(path: &std::path::Path, what: &str, cap: u64) -> Result<Vec<u8>, SourceError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| SourceError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| SourceError::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(SourceError::TooLarge { what: what.to_owned(), limit: cap, fix: None });
    }
    Ok(bytes)
}

/// A reqwest error as one line: the timeout said as one, the cause chain kept.
pub fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out; raise the fetch timeout (--timeout) if the source is slow".into();
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::Mutex;

    use skillhost_core::egress::Rule;

    use super::*;

    /// Names answered from a table, not the network: each name's answers in turn, the last
    /// one again and again.
    struct Table(Mutex<BTreeMap<String, VecDeque<Vec<IpAddr>>>>);

    impl Table {
        fn lookup(entries: &[(&str, &[&[&str]])]) -> Lookup {
            let table = entries
                .iter()
                .map(|(name, answers)| {
                    let answers = answers.iter().map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect()).collect();
                    ((*name).to_owned(), answers)
                })
                .collect();
            Lookup::new(Table(Mutex::new(table)))
        }
    }

    #[async_trait::async_trait]
    impl skillhost_core::Resolver for Table {
        async fn resolve(&self, host: &str, _: u16) -> std::io::Result<Vec<IpAddr>> {
            let mut table = self.0.lock().unwrap();
            let answers = table.get_mut(host).ok_or_else(|| std::io::Error::other(format!("{host}: no such name in the table")))?;
            Ok(if answers.len() > 1 { answers.pop_front().unwrap() } else { answers[0].clone() })
        }
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[test]
    fn an_origin_reaches_its_own_kind_of_address_and_public_ones() {
        let public = Reach::of(&ips(&["93.184.215.14"]));
        assert_eq!(public, Reach::public());
        for (ip, kind) in [
            ("127.0.0.1", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("10.0.0.5", "private"),
            ("169.254.169.254", "link-local"),
            ("fd00::1", "unique-local"),
            ("100.64.0.1", "shared (CGNAT)"),
        ] {
            assert_eq!(public.admits(ip.parse().unwrap()), Err(kind), "{ip}");
        }
        assert_eq!(public.admits("1.1.1.1".parse().unwrap()), Ok(()));

        let loopback = Reach::of(&ips(&["::1", "127.0.0.1"]));
        for ip in ["127.0.0.2", "10.0.0.5", "169.254.169.254", "1.1.1.1"] {
            assert_eq!(loopback.admits(ip.parse().unwrap()), Ok(()), "{ip}");
        }

        // A registry on a private network: that network and the public one, never this
        // machine or the cloud's metadata service.
        let private = Reach::of(&ips(&["10.0.0.5"]));
        assert_eq!(private.admits("10.1.2.3".parse().unwrap()), Ok(()));
        assert_eq!(private.admits("1.1.1.1".parse().unwrap()), Ok(()));
        assert_eq!(private.admits("127.0.0.1".parse().unwrap()), Err("loopback"));
        assert_eq!(private.admits("169.254.169.254".parse().unwrap()), Err("link-local"));

        // A name answering both public and loopback is not a loopback origin.
        assert_eq!(Reach::of(&ips(&["93.184.215.14", "127.0.0.1"])).admits("127.0.0.1".parse().unwrap()), Err("loopback"));
        assert_eq!(Reach::of(&[]), Reach::public());
    }

    fn caps(lookup: Lookup, allow: &[&str]) -> Caps {
        Caps { lookup, allow_hosts: allow.iter().map(|r| Rule::parse(r).unwrap()).collect(), ..Caps::default() }
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    async fn refusal(fetcher: &Fetcher, target: &str) -> String {
        let by = Named::Remote("the index's entry for skill a1".into());
        match fetcher.check(&url(target), &by).await {
            Err(SourceError::Refused { url, reason }) => {
                assert_eq!(url, target);
                reason
            }
            other => panic!("{target}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_public_origin_may_not_send_a_fetch_to_loopback_or_private_addresses() {
        let lookup = Table::lookup(&[
            ("skills.corp.test", &[&["93.184.215.14"]]),
            ("cdn.corp.test", &[&["93.184.215.15"]]),
            ("evil.corp.test", &[&["127.0.0.1"]]),
            ("meta.corp.test", &[&["169.254.169.254"]]),
            ("mixed.corp.test", &[&["10.0.0.7", "127.0.0.1"]]),
        ]);
        let caps = caps(lookup, &["https://*.corp.test", "https://127.0.0.1", "https://10.0.0.9"]);
        let fetcher = Fetcher::new(&url("https://skills.corp.test/.well-known/agent-skills/index.json"), &caps).await.unwrap();
        let by = Named::Remote("a test".into());
        fetcher.check(&url("https://skills.corp.test/a1.tar.gz"), &by).await.unwrap();
        fetcher.check(&url("https://cdn.corp.test/a1.tar.gz"), &by).await.unwrap();

        // A public-looking name that resolves to 127.0.0.1, allowed as a host: refused by
        // its address.
        let reason = refusal(&fetcher, "https://evil.corp.test/a1.tar.gz").await;
        assert!(reason.contains("evil.corp.test resolves to 127.0.0.1, a loopback address"), "{reason}");
        assert!(reason.contains("the index's entry for skill a1") && reason.contains("https://skills.corp.test:443"), "{reason}");
        let reason = refusal(&fetcher, "https://meta.corp.test/latest").await;
        assert!(reason.contains("169.254.169.254, a link-local address"), "{reason}");
        let reason = refusal(&fetcher, "https://mixed.corp.test/").await;
        assert!(reason.contains("a private address"), "{reason}");
        // IP literals are their own address.
        assert!(refusal(&fetcher, "https://127.0.0.1/x").await.contains("a loopback address"));
        assert!(refusal(&fetcher, "https://10.0.0.9/x").await.contains("a private address"));
        // Another host not allowed; plain HTTP after HTTPS.
        let reason = refusal(&fetcher, "https://other.test:8443/x").await;
        assert!(reason.contains("another host") && reason.contains("add \"https://other.test:8443\" to `allow_hosts`"), "{reason}");
        let reason = refusal(&fetcher, "http://cdn.corp.test/x").await;
        assert!(reason.contains("plain HTTP"), "{reason}");
    }

    #[tokio::test]
    async fn a_well_known_registry_reaches_its_own_blob_storage_and_token_service_only() {
        let lookup = Table::lookup(&[
            ("ghcr.io", &[&["140.82.112.33"]]),
            ("pkg-containers.githubusercontent.com", &[&["185.199.108.154"]]),
            ("index.docker.io", &[&["54.198.86.24"]]),
            ("auth.docker.io", &[&["54.236.113.205"]]),
            ("production.cloudflare.docker.com", &[&["104.16.99.215"]]),
            ("evil.githubusercontent.com", &[&["127.0.0.1"]]),
            ("skills.corp.test", &[&["93.184.215.14"]]),
        ]);
        let caps = caps(lookup, &[]);
        let by = Named::Remote("a redirect".into());
        let ghcr = Fetcher::new(&url("https://ghcr.io/"), &caps).await.unwrap();
        ghcr.check(&url("https://pkg-containers.githubusercontent.com/ghcr1/blobs/sha256:ab"), &by).await.unwrap();
        // Only its own companions, only over HTTPS on the default port.
        assert!(refusal(&ghcr, "https://production.cloudflare.docker.com/x").await.contains("another host"));
        assert!(refusal(&ghcr, "https://pkg-containers.githubusercontent.com:8443/x").await.contains("another host"));
        assert!(refusal(&ghcr, "http://pkg-containers.githubusercontent.com/x").await.contains("plain HTTP"));
        assert!(refusal(&ghcr, "https://evil.githubusercontent.com/x").await.contains("another host"));
        let hub = Fetcher::new(&url("https://index.docker.io/"), &caps).await.unwrap();
        hub.check(&url("https://auth.docker.io/token?scope=repository:a/b:pull"), &by).await.unwrap();
        hub.check(&url("https://production.cloudflare.docker.com/registry-v2/x"), &by).await.unwrap();
        // Another registry does not inherit them.
        let other = Fetcher::new(&url("https://skills.corp.test/"), &caps).await.unwrap();
        assert!(refusal(&other, "https://pkg-containers.githubusercontent.com/x").await.contains("another host"));
    }

    #[tokio::test]
    async fn origins_on_loopback_and_private_networks_reach_their_own() {
        let lookup = Table::lookup(&[
            ("mirror.corp.test", &[&["10.0.0.5"]]),
            ("store.corp.test", &[&["10.0.0.6"]]),
            ("evil.corp.test", &[&["127.0.0.1"]]),
        ]);
        let caps = caps(lookup, &["https://*.corp.test", "http://*.corp.test"]);
        let private = Fetcher::new(&url("https://mirror.corp.test/"), &caps).await.unwrap();
        private.check(&url("https://store.corp.test/x"), &Named::Source).await.unwrap();
        assert!(refusal(&private, "https://evil.corp.test/x").await.contains("a loopback address"));

        let local = Fetcher::new(&url("http://127.0.0.1:1/"), &Caps { allow_http: true, ..caps }).await.unwrap();
        local.check(&url("https://evil.corp.test/x"), &Named::Source).await.unwrap();
        local.check(&url("http://store.corp.test/x"), &Named::Source).await.unwrap();
    }

    #[tokio::test]
    async fn a_name_that_answers_loopback_the_second_time_is_refused_at_connect() {
        // The origin resolves to a public address when it is classified and when its
        // request is checked, then to 127.0.0.1 when the connection is made: the connection
        // is refused (and no connection is attempted anywhere).
        let lookup = Table::lookup(&[("flip.corp.test", &[&["93.184.215.14"], &["93.184.215.14"], &["127.0.0.1"]])]);
        let fetcher = Fetcher::new(&url("https://flip.corp.test/"), &caps(lookup, &[])).await.unwrap();
        let error = fetcher.send(Call::get(url("https://flip.corp.test/index.json"), Named::Source)).await.unwrap_err();
        match &error {
            SourceError::Refused { reason, .. } => {
                assert!(reason.contains("flip.corp.test resolves to 127.0.0.1, a loopback address"), "{reason}")
            }
            other => panic!("{other}"),
        }
    }

    #[tokio::test]
    async fn the_connection_resolver_passes_only_the_reach_and_configured_proxies() {
        let lookup = Table::lookup(&[("evil.corp.test", &[&["127.0.0.1"]]), ("proxy.corp.test", &[&["127.0.0.1"]])]);
        let guard = Guard { lookup, reach: Reach::public(), proxies: BTreeSet::from(["proxy.corp.test".to_owned()]) };
        let resolve = |name: &str| reqwest::dns::Resolve::resolve(&guard, name.parse().unwrap());
        let error = resolve("evil.corp.test").await.err().unwrap();
        assert_eq!(error.to_string(), "evil.corp.test resolves to 127.0.0.1, a loopback address");
        let addrs: Vec<SocketAddr> = resolve("proxy.corp.test").await.ok().unwrap().collect();
        assert_eq!(addrs, [SocketAddr::from(([127, 0, 0, 1], 0))]);
    }
}
