//! Downloads held to [`Caps`]: HTTPS (plain HTTP only to a loopback host, or when a human
//! allowed it), a few redirects under the same rule, the whole transfer under the fetch's
//! timeout, the body counted as it arrives and refused past the cap, progress on the way.
//! `file://` URLs read a local file under the same cap.

use std::sync::Once;

use futures::StreamExt;
use url::Url;

use crate::address::is_loopback;
use crate::error::SourceError;
use crate::{Caps, FetchOptions};

/// Redirects followed before a download is refused.
const MAX_REDIRECTS: usize = 5;

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

/// An HTTP client for `caps`: its timeout, its redirect rule.
pub fn client(caps: &Caps) -> Result<reqwest::Client, SourceError> {
    install_crypto_provider();
    let allow_http = caps.allow_http;
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        let ok = match attempt.url().scheme() {
            "https" => true,
            "http" => allow_http || attempt.url().host_str().is_some_and(is_loopback),
            _ => false,
        };
        if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else if ok {
            attempt.follow()
        } else {
            attempt.error("a redirect to a scheme or host plain HTTP may not reach")
        }
    });
    reqwest::Client::builder()
        .timeout(caps.timeout)
        .redirect(policy)
        .user_agent(concat!("skillhost/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| SourceError::Http { url: String::new(), reason: format!("cannot make an HTTP client: {e}") })
}

/// The body at `url` (`https`, loopback `http`, or `file`), refused past `caps.download`
/// bytes; `what` names it in progress and errors.
pub async fn get(url: &Url, what: &str, options: &FetchOptions) -> Result<Vec<u8>, SourceError> {
    let caps = &options.caps;
    if url.scheme() == "file" {
        let path = url.to_file_path().map_err(|()| SourceError::Http { url: url.to_string(), reason: "not a local file".into() })?;
        return read_file_capped(&path, what, caps.download);
    }
    check_scheme(url, caps)?;
    let failed = |e: reqwest::Error| SourceError::Http { url: url.to_string(), reason: describe(&e) };
    let response = client(caps)?.get(url.clone()).send().await.map_err(failed)?;
    let status = response.status();
    if !status.is_success() {
        return Err(SourceError::Http { url: url.to_string(), reason: format!("the server answered {status}") });
    }
    let total = response.content_length();
    if let Some(total) = total.filter(|&t| t > caps.download) {
        return Err(SourceError::TooLarge { what: format!("{what} ({total} bytes, said the server)"), limit: caps.download });
    }
    let mut body = Vec::with_capacity(total.unwrap_or(0) as usize);
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(failed)?;
        if (body.len() + chunk.len()) as u64 > caps.download {
            return Err(SourceError::TooLarge { what: what.to_owned(), limit: caps.download });
        }
        body.extend_from_slice(&chunk);
        options.progress.bytes(what, body.len() as u64, total);
    }
    Ok(body)
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
        return Err(SourceError::TooLarge { what: what.to_owned(), limit: cap });
    }
    Ok(bytes)
}

/// A reqwest error as one line: the timeout said as one, the cause chain kept.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out; raise the fetch timeout if the source is slow".into();
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
