//! Test fixture `net`: makes outbound requests through `wasi:http` and
//! reports exactly what the guest saw, for the host's egress tests.
//!
//! `fetch` never fails on a network error: every outcome is a report
//! `{"ok", "status", "headers", "body", "error", "code"}`, so a test asserts
//! on the outcome rather than on the SDK's mapping to `ToolError`. Headers
//! are sent exactly as given, including `Host` and `Authorization`: making
//! them harmless is the host's job. `env_secret` and `raw_socket` show what
//! a skill must not get (secrets in its environment, a socket of its own).
//!
//! The committed `skill.toml` has no `[network]` section: the tests write
//! their own with the port of their local server.

use std::collections::BTreeMap;
use std::time::Duration;

use skillhost_sdk::http::{self, HttpError, Request};
use skillhost_sdk::prelude::*;

/// A request to make.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchInput {
    /// The URL, passed to the host as given.
    url: String,
    /// The method (default `GET`).
    #[serde(default = "get")]
    method: String,
    /// Headers as `[name, value]` pairs, sent as given (a name may repeat).
    #[serde(default)]
    headers: Vec<(String, String)>,
    /// The request body, as text.
    #[serde(default)]
    body: Option<String>,
    /// Give up after this many milliseconds (default: only the host's limits).
    #[serde(default)]
    timeout_ms: Option<u64>,
    /// Fail when the body is longer than this many bytes (default: only the host's cap).
    #[serde(default)]
    max_body: Option<u64>,
}

fn get() -> String {
    "GET".into()
}

/// What the guest saw. Every field is always present (`null` when it does
/// not apply).
#[derive(Serialize, JsonSchema)]
struct FetchReport {
    /// Whether a complete response arrived (any status).
    ok: bool,
    /// The response status; also set when the body was cut for being too large.
    status: Option<u16>,
    /// The response headers as `[name, value]` pairs, in order.
    headers: Option<Vec<(String, String)>>,
    /// The response body as text (invalid UTF-8 replaced).
    body: Option<String>,
    /// The error's message, when `ok` is false.
    error: Option<String>,
    /// The kind of error: `denied`, `timeout`, `too_large`, `connection` or `invalid`.
    code: Option<String>,
}

/// Make one HTTP request and report what came back, or the error. Never
/// fails for a network reason: a refused host is `ok: false, code: "denied"`.
#[tool(
    open_world,
    example = r#"{"url": "http://127.0.0.1:8080/hello"}"#,
    example = r#"{"url": "http://127.0.0.1:8080/echo", "method": "POST", "headers": [["Host", "evil.test"], ["Authorization", "Bearer guest"]], "body": "hi"}"#
)]
fn fetch(input: FetchInput) -> Result<FetchReport, ToolError> {
    let mut request = Request::new(input.method.as_str(), input.url);
    for (name, value) in input.headers {
        request = request.header(name, value);
    }
    if let Some(body) = input.body {
        request = request.body(body);
    }
    if let Some(ms) = input.timeout_ms {
        request = request.timeout(Duration::from_millis(ms));
    }
    if let Some(bytes) = input.max_body {
        request = request.max_body(bytes);
    }
    Ok(match http::request(request) {
        Ok(response) => FetchReport {
            ok: true,
            status: Some(response.status),
            body: Some(response.text()),
            headers: Some(response.headers),
            error: None,
            code: None,
        },
        Err(error) => FetchReport {
            ok: false,
            status: match &error {
                HttpError::TooLarge { status, .. } => *status,
                _ => None,
            },
            headers: None,
            body: None,
            code: Some(error.code().to_owned()),
            error: Some(error.to_string()),
        },
    })
}

/// Every environment variable the skill can see, as an object (it should be
/// empty: bound secrets are added to requests by the host, never exposed).
#[tool(read_only, idempotent, example = r#"{}"#)]
fn env_secret() -> Result<BTreeMap<String, String>, ToolError> {
    Ok(std::env::vars_os().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())).collect())
}

/// An address to connect to.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SocketInput {
    /// `host:port`, e.g. `127.0.0.1:8080`.
    addr: String,
}

/// What a socket attempt did.
#[derive(Serialize, JsonSchema)]
struct SocketReport {
    /// Whether the connection was made (it must not be).
    ok: bool,
    /// The error, when it was refused.
    error: Option<String>,
}

/// Try to open a TCP connection with `std::net::TcpStream`, bypassing
/// wasi:http; the sandbox must refuse it.
#[tool(read_only, example = r#"{"addr": "127.0.0.1:8080"}"#)]
fn raw_socket(input: SocketInput) -> Result<SocketReport, ToolError> {
    Ok(match std::net::TcpStream::connect(&input.addr) {
        Ok(_) => SocketReport { ok: true, error: None },
        Err(error) => SocketReport { ok: false, error: Some(format!("{error} ({:?})", error.kind())) },
    })
}

skillhost_sdk::skill!(fetch, env_secret, raw_socket);
