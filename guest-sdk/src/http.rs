//! Outbound HTTP to the hosts the skill was allowed to reach.
//!
//! A skill asks for network access in its `skill.toml`; the host links
//! `wasi:http` only for skills with a `[network]` section, and checks every
//! request against it (scheme, host and port; DNS is resolved and checked by
//! the host, never by the skill):
//!
//! ```toml
//! [network]
//! allow = ["https://crates.io", "https://*.example.com"]  # `*.` = any subdomain
//! deny = ["https://admin.example.com"]                    # optional, wins over allow
//!
//! [[secrets]]                          # optional: the host adds the header,
//! name = "crates"                      # the skill never sees the value
//! header = "Authorization"
//! format = "Bearer {}"
//! hosts = ["https://crates.io"]
//! ```
//!
//! A request to any other host fails with [`HttpError::Denied`], which `?`
//! turns into [`ToolError::Denied`] naming the host and the `[network]
//! allow` entry the skill needs, so a human can decide to grant it.
//!
//! A complete network skill, with one tool:
//!
//! ```no_run
//! use skillhost_sdk::http;
//! use skillhost_sdk::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct CrateInput {
//!     /// The crate's name on crates.io, e.g. `serde`.
//!     name: String,
//! }
//!
//! /// What crates.io answers (only the fields the tool reads).
//! #[derive(Deserialize)]
//! struct CratesIo {
//!     #[serde(rename = "crate")]
//!     krate: CrateInfo,
//! }
//!
//! #[derive(Deserialize)]
//! struct CrateInfo {
//!     max_stable_version: Option<String>,
//!     downloads: u64,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct CrateOutput {
//!     /// The newest stable version, if any.
//!     version: Option<String>,
//!     /// All-time downloads.
//!     downloads: u64,
//! }
//!
//! /// The newest stable version of a crate on crates.io and its downloads.
//! #[tool(read_only, idempotent, open_world, example = r#"{"name": "serde"}"#)]
//! fn crate_version(input: CrateInput) -> Result<CrateOutput, ToolError> {
//!     // Input comes from an agent: keep it from changing the URL's path.
//!     if input.name.is_empty()
//!         || !input.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
//!     {
//!         return Err(ToolError::invalid_input("name: not a crate name"));
//!     }
//!     let url = format!("https://crates.io/api/v1/crates/{}", input.name);
//!     let answer: CratesIo = http::Request::get(&url)
//!         .header("User-Agent", "crate-version-skill (you@example.com)")
//!         .timeout(std::time::Duration::from_secs(5))
//!         .send()?             // denied / timeout / connection errors
//!         .error_for_status()? // 404 and friends
//!         .json()?;            // not the JSON we expected
//!     Ok(CrateOutput {
//!         version: answer.krate.max_stable_version,
//!         downloads: answer.krate.downloads,
//!     })
//! }
//!
//! skillhost_sdk::skill!(crate_version);
//! # fn main() {}
//! ```
//!
//! with `[network] allow = ["https://crates.io"]` in its `skill.toml`. For a
//! plain JSON API, [`get_json`] and [`post_json`] do the same in one call.
//!
//! # What to expect
//!
//! - Requests block until the whole response body is read. [`get`], [`post`]
//!   and [`request`] return a [`Response`] for *any* status; use
//!   [`Response::error_for_status`] (or the JSON helpers) to turn a 4xx/5xx
//!   into an error.
//! - Redirects are not followed: the skill sees the 3xx and its `Location`
//!   header, and a request to the new location is checked like any other.
//! - The host caps response size and time: past them a request fails with
//!   [`HttpError::TooLarge`] or [`HttpError::Timeout`].
//!   [`Request::timeout`] and [`Request::max_body`] set tighter limits.
//! - The host sets `Host` from the URL and refuses hop-by-hop headers
//!   (`Connection`, `Transfer-Encoding`, ...): setting one is
//!   [`HttpError::Invalid`]. Headers bound to a secret are added by the host,
//!   after the request leaves the skill.
//! - No request ever panics or traps: every failure is an [`HttpError`].
//!
//! Off wasm (a skill's native unit tests) there is no network: requests fail
//! with [`HttpError::Connection`] unless a test answers them with
//! `with_handler` (only compiled off wasm).

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ToolError;

mod backend;

/// An HTTP method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// Any other method, sent as written.
    Other(String),
}

impl Method {
    /// The method's name as sent, e.g. `"GET"`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
            Self::Options => "OPTIONS",
            Self::Other(name) => name,
        }
    }
}

impl From<&str> for Method {
    /// The standard methods in any case (`"get"` is [`Method::Get`]); any
    /// other name is [`Method::Other`], sent as written.
    fn from(name: &str) -> Self {
        match name.to_ascii_uppercase().as_str() {
            "GET" => Self::Get,
            "HEAD" => Self::Head,
            "POST" => Self::Post,
            "PUT" => Self::Put,
            "PATCH" => Self::Patch,
            "DELETE" => Self::Delete,
            "OPTIONS" => Self::Options,
            _ => Self::Other(name.to_owned()),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An HTTP request: build it, then [`send`](Request::send) it.
///
/// ```no_run
/// # fn main() -> Result<(), skillhost_sdk::http::HttpError> {
/// use std::time::Duration;
/// use skillhost_sdk::http::Request;
///
/// let response = Request::post("https://api.example.com/v1/notes")
///     .header("Accept", "application/json")
///     .json(&serde_json::json!({"text": "hello"}))
///     .timeout(Duration::from_secs(10))
///     .send()?;
/// println!("{} {}", response.status, response.text());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
    max_body: Option<u64>,
    /// An error from building the request (a body that did not serialise),
    /// reported by `send`.
    error: Option<HttpError>,
}

impl Request {
    /// A request with any method to `url` (`http://` or `https://`).
    pub fn new(method: impl Into<Method>, url: impl Into<String>) -> Self {
        Self { method: method.into(), url: url.into(), headers: Vec::new(), body: Vec::new(), timeout: None, max_body: None, error: None }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::Get, url)
    }

    /// A `HEAD` request: only the status and headers come back.
    pub fn head(url: impl Into<String>) -> Self {
        Self::new(Method::Head, url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::Post, url)
    }

    /// A `PUT` request.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new(Method::Put, url)
    }

    /// A `PATCH` request.
    pub fn patch(url: impl Into<String>) -> Self {
        Self::new(Method::Patch, url)
    }

    /// A `DELETE` request.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new(Method::Delete, url)
    }

    /// Adds a header. Adding a name twice sends both values.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body (sent as is, with its `Content-Length`; set
    /// `Content-Type` with [`header`](Request::header)).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and `Content-Type:
    /// application/json` unless a content type was already set.
    ///
    /// A value that cannot be serialised is reported by
    /// [`send`](Request::send) as [`HttpError::Invalid`].
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => self.body = body,
            Err(error) => {
                self.error =
                    Some(HttpError::Invalid(format!("the JSON body of {} {} could not be serialised: {error}", self.method, self.url)));
            }
        }
        if self.header_value("content-type").is_none() {
            self.headers.push(("Content-Type".into(), "application/json".into()));
        }
        self
    }

    /// Gives up after `timeout`: connecting, waiting for the response and
    /// reading the body all count. Without it only the host's limits apply
    /// (and the call's own deadline, after which the whole call stops).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Fails with [`HttpError::TooLarge`] when the response body is longer
    /// than `bytes` (the host's own cap applies either way).
    pub fn max_body(mut self, bytes: u64) -> Self {
        self.max_body = Some(bytes);
        self
    }

    /// Sends the request and reads the whole response: [`request`].
    pub fn send(self) -> Result<Response, HttpError> {
        request(self)
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The URL, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body.
    pub fn body_bytes(&self) -> &[u8] {
        &self.body
    }

    /// The timeout set with [`timeout`](Request::timeout).
    pub fn timeout_value(&self) -> Option<Duration> {
        self.timeout
    }
}

/// A response: status, headers and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The URL that was requested (redirects are not followed, so this is
    /// the URL the response came from).
    pub url: String,
    /// The status code, e.g. `200`.
    pub status: u16,
    /// The headers in the order received; names are lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with `status`, no headers and no body (for tests).
    pub fn new(status: u16) -> Self {
        Self { url: String::new(), status, headers: Vec::new(), body: Vec::new() }
    }

    /// Adds a header (for tests).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body (for tests).
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The body as text; invalid UTF-8 becomes `U+FFFD`.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON into `T`. An empty body parses as `null`
    /// (so `()` and `Option<T>` accept a `204 No Content`).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        let body: &[u8] = if self.body.iter().all(u8::is_ascii_whitespace) { b"null" } else { &self.body };
        serde_json::from_slice(body).map_err(|error| HttpError::Decode { url: self.url.clone(), message: error.to_string() })
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Whether the status is a redirect (3xx); the target is in
    /// `header("location")`.
    pub fn is_redirect(&self) -> bool {
        (300..400).contains(&self.status)
    }

    /// `Ok(self)` for a 1xx, 2xx or 3xx status, otherwise
    /// [`HttpError::Status`] with the start of the body (APIs explain
    /// errors there).
    pub fn error_for_status(self) -> Result<Self, HttpError> {
        if self.status < 400 {
            return Ok(self);
        }
        let mut body = self.text().trim().to_owned();
        if body.len() > STATUS_BODY_CAP {
            let mut end = STATUS_BODY_CAP;
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            body.truncate(end);
            body.push('…');
        }
        Err(HttpError::Status { url: self.url, status: self.status, body })
    }
}

/// How much of a body [`HttpError::Status`] keeps.
const STATUS_BODY_CAP: usize = 300;

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Why a request did not produce a [`Response`].
///
/// `?` turns it into a [`ToolError`]: [`HttpError::Denied`] into
/// [`ToolError::Denied`], everything else into [`ToolError::Failed`], each
/// with the message shown here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The host refused the request (`wasi:http` `HTTP-request-denied`):
    /// the URL's host is not allowed for this skill. `message` says which
    /// `[network] allow` entry the skill needs.
    Denied {
        /// The URL that was refused.
        url: String,
        /// What was refused and how to allow it.
        message: String,
    },
    /// The request or the response took too long (the request's
    /// [`timeout`](Request::timeout) or the host's).
    Timeout {
        /// The URL requested.
        url: String,
    },
    /// The response (body or headers) is larger than the request's
    /// [`max_body`](Request::max_body) or the host's cap.
    TooLarge {
        /// The URL requested.
        url: String,
        /// The response's status, when it arrived before the body was cut.
        status: Option<u16>,
        /// The limit that was hit, in bytes, when known.
        limit: Option<u64>,
    },
    /// No response: DNS, connection, TLS or protocol failure.
    Connection(String),
    /// The request itself is not valid: the URL, a header or the method.
    Invalid(String),
    /// The server answered with an error status (from
    /// [`Response::error_for_status`] and the JSON helpers).
    Status {
        /// The URL requested.
        url: String,
        /// The status code, 400 or more.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The response body is not the JSON that was expected.
    Decode {
        /// The URL requested.
        url: String,
        /// What did not parse.
        message: String,
    },
}

impl HttpError {
    /// A short stable name of the kind: `denied`, `timeout`, `too_large`,
    /// `connection`, `invalid`, `status` or `decode`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Denied { .. } => "denied",
            Self::Timeout { .. } => "timeout",
            Self::TooLarge { .. } => "too_large",
            Self::Connection(_) => "connection",
            Self::Invalid(_) => "invalid",
            Self::Status { .. } => "status",
            Self::Decode { .. } => "decode",
        }
    }

    /// The error for a request the host refused.
    pub(crate) fn denied(method: &Method, url: &str) -> Self {
        let target = parse_url(url).ok();
        if target.as_ref().is_some_and(|t| t.authority.contains('@')) {
            return Self::Denied {
                url: url.to_owned(),
                message: format!(
                    "{method} {url} was refused by the host: URLs with user info (`user@host`) \
                     are never sent. Leave credentials out of the URL; a `[[secrets]]` entry \
                     in skill.toml makes the host add them to requests to their hosts"
                ),
            };
        }
        let origin = target.map_or_else(|| url.to_owned(), |t| t.origin());
        Self::Denied {
            url: url.to_owned(),
            message: format!(
                "{method} {url} was refused by the host: `{origin}` is not allowed for this \
                 skill (not in its allowlist, denied, or resolving to a private address). The \
                 skill needs a `[network] allow` entry for it in skill.toml, e.g. \
                 allow = [\"{origin}\"], approved by a human"
            ),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied { message, .. } => f.write_str(message),
            Self::Timeout { url } => write!(f, "the request to {url} timed out"),
            Self::TooLarge { url, limit, .. } => {
                write!(f, "the response from {url} is too large")?;
                match limit {
                    Some(limit) => write!(f, " (limit {limit} bytes)"),
                    None => f.write_str(" (over the host's limit)"),
                }
            }
            Self::Connection(message) | Self::Invalid(message) => f.write_str(message),
            Self::Status { url, status, body } => {
                write!(f, "{url} answered {status}")?;
                if let Some(reason) = reason_phrase(*status) {
                    write!(f, " {reason}")?;
                }
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            Self::Decode { url, message } => {
                write!(f, "the response from {url} is not the expected JSON: {message}")
            }
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for ToolError {
    /// [`HttpError::Denied`] becomes [`ToolError::Denied`] (a human may grant
    /// the host), anything else [`ToolError::Failed`].
    fn from(error: HttpError) -> Self {
        match error {
            HttpError::Denied { message, .. } => ToolError::Denied(message),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

fn reason_phrase(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}

/// The parts of a URL `wasi:http` wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `true` for `https`.
    pub(crate) https: bool,
    /// `host[:port]` exactly as written (with any user info: the host
    /// judges it, the SDK does not clean it up).
    pub(crate) authority: String,
    /// `/path?query`, without the fragment.
    pub(crate) path_with_query: String,
}

impl Target {
    /// `scheme://host[:port]`, lowercase and without user info: what a
    /// `[network] allow` entry names.
    pub(crate) fn origin(&self) -> String {
        let host = self.authority.rsplit_once('@').map_or(self.authority.as_str(), |(_, host)| host);
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", host.to_ascii_lowercase())
    }
}

/// Splits an absolute `http(s)://` URL into scheme, authority and path.
pub(crate) fn parse_url(url: &str) -> Result<Target, HttpError> {
    let invalid = |why: &str| HttpError::Invalid(format!("invalid URL `{url}`: {why}"));
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid("it contains whitespace or control characters (percent-encode them)"));
    }
    let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("expected an absolute URL such as https://example.com/path"))?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "https" => true,
        "http" => false,
        _ => return Err(invalid("only http:// and https:// URLs are supported")),
    };
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() || authority.ends_with('@') {
        return Err(invalid("it has no host"));
    }
    let path_with_query = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
    Ok(Target { https, authority: authority.to_owned(), path_with_query })
}

/// Sends `request` and reads the whole response.
///
/// Any status is a [`Response`]; an error is a request that got no complete
/// response (refused, timed out, too large, failed to connect, invalid).
pub fn request(request: Request) -> Result<Response, HttpError> {
    if let Some(error) = request.error {
        return Err(error);
    }
    let target = parse_url(&request.url)?;
    #[cfg(target_arch = "wasm32")]
    {
        backend::send(&request, &target)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = target;
        let url = request.url.clone();
        let max_body = request.max_body;
        let mut response = mock::send(&request)?;
        response.url = url.clone();
        if let Some(limit) = max_body
            && response.body.len() as u64 > limit
        {
            return Err(HttpError::TooLarge { url, status: Some(response.status), limit: Some(limit) });
        }
        Ok(response)
    }
}

/// `GET url`: a [`Response`] for any status.
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// `POST url` with `body`: a [`Response`] for any status.
pub fn post(url: &str, body: impl Into<Vec<u8>>) -> Result<Response, HttpError> {
    Request::post(url).body(body).send()
}

/// `GET url` with `Accept: application/json`, parsing a 2xx body as `T`;
/// a status of 400 or more is [`HttpError::Status`].
pub fn get_json<T: DeserializeOwned>(url: &str) -> Result<T, HttpError> {
    Request::get(url).header("Accept", "application/json").send()?.error_for_status()?.json()
}

/// `POST url` with `body` as JSON, parsing the answer as `R` (use
/// `serde_json::Value` for any JSON, `()` for an empty body); a status of
/// 400 or more is [`HttpError::Status`].
pub fn post_json<T: Serialize + ?Sized, R: DeserializeOwned>(url: &str, body: &T) -> Result<R, HttpError> {
    Request::post(url).header("Accept", "application/json").json(body).send()?.error_for_status()?.json()
}

#[cfg(not(target_arch = "wasm32"))]
pub use mock::with_handler;

/// Off wasm: requests are answered by a test's handler, or fail.
#[cfg(not(target_arch = "wasm32"))]
mod mock {
    use std::cell::RefCell;

    use super::{HttpError, Request, Response};

    type Handler = Box<dyn FnMut(&Request) -> Result<Response, HttpError>>;

    thread_local! {
        static HANDLER: RefCell<Option<Handler>> = const { RefCell::new(None) };
    }

    /// Runs `f` with every request on this thread answered by `handler`:
    /// for a skill's native unit tests (only compiled off wasm).
    ///
    /// ```
    /// use skillhost_sdk::http::{self, Response};
    ///
    /// let status = http::with_handler(
    ///     |request| Ok(Response::new(200).with_body(format!("you asked for {}", request.url()))),
    ///     || http::get("https://example.com/").map(|r| r.status),
    /// );
    /// assert_eq!(status, Ok(200));
    /// ```
    pub fn with_handler<R>(handler: impl FnMut(&Request) -> Result<Response, HttpError> + 'static, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Handler>);
        impl Drop for Restore {
            fn drop(&mut self) {
                HANDLER.with(|h| *h.borrow_mut() = self.0.take());
            }
        }
        let _restore = Restore(HANDLER.with(|h| h.borrow_mut().replace(Box::new(handler))));
        f()
    }

    pub(super) fn send(request: &Request) -> Result<Response, HttpError> {
        // Taken out while it runs, so a handler may itself make requests
        // (they fail: there is no handler inside a handler).
        let Some(mut handler) = HANDLER.with(|h| h.borrow_mut().take()) else {
            return Err(HttpError::Connection(format!(
                "{} {}: outbound HTTP works only inside skillhost (wasm32-wasip2); in native \
                 tests, answer requests with `skillhost_sdk::http::with_handler`",
                request.method(),
                request.url()
            )));
        };
        let result = handler(request);
        HANDLER.with(|h| {
            let mut slot = h.borrow_mut();
            if slot.is_none() {
                *slot = Some(handler);
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let t = parse_url("https://api.github.com/repos/a/b?x=1#frag").unwrap();
        assert!(t.https);
        assert_eq!(t.authority, "api.github.com");
        assert_eq!(t.path_with_query, "/repos/a/b?x=1");
        assert_eq!(t.origin(), "https://api.github.com");

        let t = parse_url("HTTP://Example.COM:8080").unwrap();
        assert!(!t.https);
        assert_eq!(t.authority, "Example.COM:8080");
        assert_eq!(t.path_with_query, "/");
        assert_eq!(t.origin(), "http://example.com:8080");

        assert_eq!(parse_url("http://h?q=1").unwrap().path_with_query, "/?q=1");
        // User info is passed through for the host to judge (and refuse).
        let t = parse_url("http://allowed@evil.test/").unwrap();
        assert_eq!(t.authority, "allowed@evil.test");
        assert_eq!(t.origin(), "http://evil.test");
    }

    #[test]
    fn bad_urls_are_invalid_and_named() {
        for bad in [
            "example.com",
            "ftp://example.com/",
            "https://",
            "https:///path",
            "https://user@/x",
            "https://exa mple.com/",
            "https://example.com/\n",
        ] {
            let error = parse_url(bad).unwrap_err();
            assert_eq!(error.code(), "invalid", "{bad}");
            assert!(error.to_string().contains(bad.trim()), "{bad}: {error}");
        }
    }

    #[test]
    fn denied_names_the_origin_and_the_allow_entry() {
        let error = HttpError::denied(&Method::Get, "https://Evil.example:8443/x?y");
        let message = error.to_string();
        assert!(message.contains("`https://evil.example:8443` is not allowed"), "{message}");
        assert!(message.contains("[network] allow"), "{message}");
        assert!(message.contains("allow = [\"https://evil.example:8443\"]"), "{message}");
        assert!(matches!(ToolError::from(error), ToolError::Denied(m) if m == message));
        let userinfo = HttpError::denied(&Method::Get, "http://allowed@evil.test/").to_string();
        assert!(userinfo.contains("user info") && !userinfo.contains("allow = ["), "{userinfo}");
    }

    #[test]
    fn errors_map_to_tool_errors() {
        let timeout = HttpError::Timeout { url: "https://x.test/".into() };
        assert_eq!(ToolError::from(timeout), ToolError::failed("the request to https://x.test/ timed out"));
        let large = HttpError::TooLarge { url: "https://x.test/".into(), status: Some(200), limit: None };
        assert_eq!(large.code(), "too_large");
        assert!(matches!(ToolError::from(large), ToolError::Failed(m) if m.contains("too large")));
        assert!(matches!(
            ToolError::from(HttpError::Connection("refused".into())),
            ToolError::Failed(m) if m == "refused"
        ));
    }

    #[test]
    fn methods_parse_and_print() {
        assert_eq!(Method::from("get"), Method::Get);
        assert_eq!(Method::from("DELETE"), Method::Delete);
        assert_eq!(Method::from("PROPFIND"), Method::Other("PROPFIND".into()));
        assert_eq!(Method::Patch.to_string(), "PATCH");
    }

    #[test]
    fn responses_read_headers_text_and_json() {
        let response = Response::new(200).with_header("content-type", "application/json").with_body(r#"{"a": 1}"#);
        assert_eq!(response.header("Content-Type"), Some("application/json"));
        assert_eq!(response.header("x-missing"), None);
        assert_eq!(response.text(), r#"{"a": 1}"#);
        let value: serde_json::Value = response.json().unwrap();
        assert_eq!(value["a"], 1);
        assert!(response.is_success() && !response.is_redirect());

        let bad = Response::new(200).with_body("<html>");
        assert_eq!(bad.json::<serde_json::Value>().unwrap_err().code(), "decode");
        let empty = Response::new(204);
        assert_eq!(empty.json::<()>(), Ok(()));
        assert_eq!(empty.json::<Option<u32>>(), Ok(None));
        assert_eq!(Response::new(200).with_body(vec![0xff, b'a']).text(), "\u{fffd}a");
    }

    #[test]
    fn error_for_status_keeps_the_start_of_the_body() {
        assert!(Response::new(302).error_for_status().is_ok());
        let mut response = Response::new(404).with_body(r#"{"message": "Not Found"}"#);
        response.url = "https://api.github.com/repos/a/b".into();
        let error = response.error_for_status().unwrap_err();
        assert_eq!(error.to_string(), r#"https://api.github.com/repos/a/b answered 404 Not Found: {"message": "Not Found"}"#);
        let long = Response::new(500).with_body("é".repeat(400));
        let HttpError::Status { body, .. } = long.error_for_status().unwrap_err() else {
            panic!("expected a status error");
        };
        assert!(body.len() <= STATUS_BODY_CAP + '…'.len_utf8() && body.ends_with('…'));
    }

    #[test]
    fn requests_build_headers_and_json_bodies() {
        let request = Request::post("https://x.test/").header("Authorization", "Bearer t").json(&serde_json::json!({"a": 1}));
        assert_eq!(request.header_value("content-type"), Some("application/json"));
        assert_eq!(request.body_bytes(), br#"{"a":1}"#);
        let custom = Request::post("https://x.test/").header("Content-Type", "application/vnd.api+json").json(&1);
        assert_eq!(custom.headers().len(), 1, "an explicit content type is kept");

        let mut map = std::collections::HashMap::new();
        map.insert(vec![1u8], 1);
        let error = Request::post("https://x.test/").json(&map).send().unwrap_err();
        assert_eq!(error.code(), "invalid");
    }

    #[test]
    fn native_requests_fail_without_a_handler() {
        let error = get("https://example.com/").unwrap_err();
        assert_eq!(error.code(), "connection");
        assert!(error.to_string().contains("with_handler"), "{error}");
    }

    #[test]
    fn handlers_answer_requests_and_json_helpers_check_the_status() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let log = seen.clone();
        with_handler(
            move |request| {
                log.borrow_mut().push(format!("{} {} {:?}", request.method(), request.url(), request.header_value("accept")));
                match request.url() {
                    "https://x.test/ok" => Ok(Response::new(200).with_body(r#"{"n": 2}"#)),
                    "https://x.test/echo" => Ok(Response::new(201).with_body(request.body_bytes().to_vec())),
                    "https://x.test/big" => Ok(Response::new(200).with_body(vec![b'x'; 10])),
                    _ => Ok(Response::new(404)),
                }
            },
            || {
                let value: serde_json::Value = get_json("https://x.test/ok").unwrap();
                assert_eq!(value["n"], 2);
                let echoed: serde_json::Value = post_json("https://x.test/echo", &serde_json::json!({"k": "v"})).unwrap();
                assert_eq!(echoed["k"], "v");
                let missing = get_json::<serde_json::Value>("https://x.test/nope").unwrap_err();
                assert!(matches!(missing, HttpError::Status { status: 404, .. }));
                let response = get("https://x.test/nope").unwrap();
                assert_eq!((response.status, response.url.as_str()), (404, "https://x.test/nope"));
                let big = Request::get("https://x.test/big").max_body(4).send().unwrap_err();
                assert!(matches!(big, HttpError::TooLarge { status: Some(200), limit: Some(4), .. }));
                assert_eq!(get("ftp://x.test/").unwrap_err().code(), "invalid", "checked before the handler");
            },
        );
        assert_eq!(
            seen.borrow().as_slice(),
            [
                "GET https://x.test/ok Some(\"application/json\")",
                "POST https://x.test/echo Some(\"application/json\")",
                "GET https://x.test/nope Some(\"application/json\")",
                "GET https://x.test/nope None",
                "GET https://x.test/big None",
            ]
        );
        assert_eq!(get("https://x.test/ok").unwrap_err().code(), "connection", "restored");
    }
}
