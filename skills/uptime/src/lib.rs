//! The `uptime` skill: checks whether web sites answer, with which status,
//! how fast and how large the body is.
//!
//! Requests go through the host's `wasi:http` gate, so only the hosts in
//! `skill.toml`'s `[network] allow` can be checked. A site that is down is a
//! successful result with `up: false` and the reason; a host the skill may
//! not reach is a `denied` error for `check` (a human has to grant it), and
//! a `denied` entry in `check_many`'s results.

use std::time::{Duration, Instant};

use skillhost_sdk::http::{HttpError, Request};
use skillhost_sdk::prelude::*;

/// Default time a check may take.
const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Longest time one check may take.
const MAX_TIMEOUT_MS: u64 = 20_000;
/// URLs `check_many` accepts at most.
const MAX_URLS: usize = 10;
/// Time `check_many` spends in total, below the skill's 60 s limit.
const BATCH_BUDGET: Duration = Duration::from_secs(50);
/// Below this much time left, `check_many` stops checking.
const MIN_CHECK_TIME: Duration = Duration::from_millis(250);
/// Sent with every check.
const USER_AGENT: &str = "skillhost-uptime/0.1";

/// A URL to check.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckInput {
    /// The URL, `https://` or `http://`; its host must be allowed in the skill's manifest.
    url: String,
    /// The status that counts as up (default: any status below 400).
    #[serde(default)]
    expect_status: Option<u16>,
    /// Give up after this many milliseconds (default 5000, at most 20000).
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The outcome of one check.
#[derive(Serialize, JsonSchema)]
struct CheckResult {
    /// The URL checked.
    url: String,
    /// Whether the site answered as expected.
    up: bool,
    /// The HTTP status, when an answer came.
    status: Option<u16>,
    /// Milliseconds until the whole answer arrived (or the check failed).
    response_time_ms: u64,
    /// Size of the response body in bytes, when it was read.
    body_bytes: Option<u64>,
    /// Where a redirect (3xx) points; redirects are not followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    redirect_to: Option<String>,
    /// Why the site is down, or what else went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The host is not allowed for this skill (only in `check_many`; `check` fails instead).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    denied: bool,
}

/// Check one URL: is it up, its HTTP status, response time and body size.
/// A site that does not answer is `up: false` with the reason in `error`.
#[tool(
    read_only,
    open_world,
    example = r#"{"url": "https://www.rust-lang.org"}"#,
    example = r#"{"url": "https://example.com/health", "expect_status": 204, "timeout_ms": 2000}"#
)]
fn check(input: CheckInput) -> Result<CheckResult, ToolError> {
    let timeout = timeout(input.timeout_ms)?;
    check_url(&input.url, input.expect_status, timeout)
}

/// Several URLs to check.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckManyInput {
    /// Up to 10 URLs, checked one after the other.
    urls: Vec<String>,
    /// The status that counts as up for every URL (default: any status below 400).
    #[serde(default)]
    expect_status: Option<u16>,
    /// Time each check may take, in milliseconds (default 5000, at most 20000).
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The outcome of several checks.
#[derive(Serialize, JsonSchema)]
struct CheckManyOutput {
    /// One result per URL checked, in the order given.
    results: Vec<CheckResult>,
    /// How many are up.
    up: usize,
    /// How many are down, denied included.
    down: usize,
    /// URLs not checked because the call ran out of time (about 50 s in total).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_checked: Vec<String>,
}

/// Check several URLs (up to 10), reporting progress: one result per URL,
/// plus how many are up and down. Hosts that are not allowed are reported
/// as `denied` results instead of failing the whole call.
#[tool(
    read_only,
    open_world,
    example = r#"{"urls": ["https://example.com", "https://www.rust-lang.org"]}"#,
    example = r#"{"urls": ["https://example.com"], "timeout_ms": 2000}"#
)]
fn check_many(input: CheckManyInput) -> Result<CheckManyOutput, ToolError> {
    let per_check = timeout(input.timeout_ms)?;
    if input.urls.is_empty() || input.urls.len() > MAX_URLS {
        return Err(ToolError::invalid_input(format!(
            "urls: give between 1 and {MAX_URLS} URLs (got {}); split a longer list into several calls",
            input.urls.len()
        )));
    }
    for (i, url) in input.urls.iter().enumerate() {
        validate_url(url).map_err(|e| ToolError::invalid_input(format!("urls[{i}]: {e}")))?;
    }

    let started = Instant::now();
    let total = input.urls.len() as u64;
    let mut out = CheckManyOutput { results: Vec::new(), up: 0, down: 0, not_checked: Vec::new() };
    for (done, url) in input.urls.into_iter().enumerate() {
        let left = BATCH_BUDGET.saturating_sub(started.elapsed());
        if left < MIN_CHECK_TIME {
            out.not_checked.push(url);
            continue;
        }
        skillhost_sdk::progress(done as u64, Some(total), Some(&format!("checking {url}")));
        let result = match check_url(&url, input.expect_status, per_check.min(left)) {
            Ok(result) => result,
            Err(ToolError::Denied(message)) => CheckResult {
                url,
                up: false,
                status: None,
                response_time_ms: 0,
                body_bytes: None,
                redirect_to: None,
                error: Some(message),
                denied: true,
            },
            Err(other) => return Err(other),
        };
        if result.up {
            out.up += 1;
        } else {
            out.down += 1;
        }
        out.results.push(result);
    }
    skillhost_sdk::progress(total, Some(total), Some("done"));
    Ok(out)
}

/// The per-check timeout from the input.
fn timeout(timeout_ms: Option<u64>) -> Result<Duration, ToolError> {
    match timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS) {
        ms @ 1..=MAX_TIMEOUT_MS => Ok(Duration::from_millis(ms)),
        ms => Err(ToolError::invalid_input(format!("timeout_ms: {ms} is out of range; give 1 to {MAX_TIMEOUT_MS}"))),
    }
}

/// A quick check that `url` is something to request.
fn validate_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return Err(format!("`{url}` is not an http(s) URL; write it in full, e.g. https://{url}"));
    }
    Ok(())
}

/// Checks one URL; only a malformed URL or a refused host is an error.
fn check_url(url: &str, expect_status: Option<u16>, timeout: Duration) -> Result<CheckResult, ToolError> {
    validate_url(url).map_err(|e| ToolError::invalid_input(format!("url: {e}")))?;
    let is_up = |status: u16| match expect_status {
        Some(expected) => status == expected,
        None => status < 400,
    };
    let started = Instant::now();
    let outcome = Request::get(url).header("User-Agent", USER_AGENT).timeout(timeout).send();
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut result = CheckResult {
        url: url.to_owned(),
        up: false,
        status: None,
        response_time_ms: elapsed,
        body_bytes: None,
        redirect_to: None,
        error: None,
        denied: false,
    };
    match outcome {
        Ok(response) => {
            result.up = is_up(response.status);
            result.status = Some(response.status);
            result.body_bytes = Some(response.body.len() as u64);
            if response.is_redirect() {
                result.redirect_to = response.header("location").map(str::to_owned);
            }
            if !result.up {
                result.error = Some(match expect_status {
                    Some(expected) => {
                        format!("answered {}, expected {expected}", response.status)
                    }
                    None => format!("answered {}", status_text(response.status)),
                });
            }
        }
        Err(error @ HttpError::Denied { .. }) => return Err(error.into()),
        Err(HttpError::Invalid(message)) => return Err(ToolError::invalid_input(message)),
        Err(HttpError::TooLarge { status, .. }) => {
            result.status = status;
            result.up = status.is_some_and(is_up);
            result.error = Some(format!(
                "the response body is larger than the host's limit{}",
                if result.up { " (the site is up; body_bytes unknown)" } else { "" }
            ));
        }
        Err(HttpError::Timeout { .. }) => {
            result.error = Some(format!("no answer within {} ms", timeout.as_millis()));
        }
        Err(other) => result.error = Some(other.to_string()),
    }
    Ok(result)
}

/// `503 Service Unavailable` and the like.
fn status_text(status: u16) -> String {
    let reason = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return status.to_string(),
    };
    format!("{status} {reason}")
}

skillhost_sdk::skill!(check, check_many);

#[cfg(test)]
mod tests {
    use super::*;
    use skillhost_sdk::http::{self, Response};

    fn answer(request: &Request) -> Result<Response, HttpError> {
        match request.url() {
            "https://ok.example.com/" => Ok(Response::new(200).with_body("hello")),
            "https://moved.example.com/" => Ok(Response::new(301).with_header("location", "https://ok.example.com/")),
            "https://broken.example.com/" => Ok(Response::new(503)),
            "https://slow.example.com/" => Err(HttpError::Timeout { url: request.url().into() }),
            url => Err(HttpError::Denied { url: url.into(), message: format!("{url} is not allowed") }),
        }
    }

    fn check_one(url: &str, expect_status: Option<u16>) -> Result<CheckResult, ToolError> {
        http::with_handler(answer, || check(CheckInput { url: url.into(), expect_status, timeout_ms: None }))
    }

    #[test]
    fn up_down_and_redirects() {
        let ok = check_one("https://ok.example.com/", None).unwrap();
        assert!(ok.up && ok.status == Some(200) && ok.body_bytes == Some(5) && ok.error.is_none());

        let moved = check_one("https://moved.example.com/", None).unwrap();
        assert!(moved.up);
        assert_eq!(moved.redirect_to.as_deref(), Some("https://ok.example.com/"));

        let broken = check_one("https://broken.example.com/", None).unwrap();
        assert!(!broken.up);
        assert_eq!(broken.error.as_deref(), Some("answered 503 Service Unavailable"));

        let expected = check_one("https://ok.example.com/", Some(204)).unwrap();
        assert_eq!(expected.error.as_deref(), Some("answered 200, expected 204"));

        let slow = check_one("https://slow.example.com/", None).unwrap();
        assert!(!slow.up && slow.status.is_none());
        assert_eq!(slow.error.as_deref(), Some("no answer within 5000 ms"));
    }

    #[test]
    fn denied_hosts_and_bad_input_are_errors() {
        assert!(matches!(check_one("https://evil.test/", None), Err(ToolError::Denied(_))));
        assert!(matches!(
            check_one("example.com", None),
            Err(ToolError::InvalidInput(m)) if m.contains("https://example.com")
        ));
        assert!(timeout(Some(0)).is_err() && timeout(Some(20_001)).is_err());
    }

    #[test]
    fn check_many_reports_denied_hosts_as_results() {
        let out = http::with_handler(answer, || {
            check_many(CheckManyInput {
                urls: vec!["https://ok.example.com/".into(), "https://evil.test/".into(), "https://broken.example.com/".into()],
                expect_status: None,
                timeout_ms: Some(1000),
            })
        })
        .unwrap();
        assert_eq!((out.up, out.down, out.results.len()), (1, 2, 3));
        assert!(out.results[1].denied && !out.results[1].up);
        assert!(out.not_checked.is_empty());

        let too_many = CheckManyInput { urls: vec!["https://ok.example.com/".into(); 11], expect_status: None, timeout_ms: None };
        assert!(matches!(check_many(too_many), Err(ToolError::InvalidInput(_))));
    }
}
