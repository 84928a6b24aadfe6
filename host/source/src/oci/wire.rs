//! The registry API skillhost speaks: the OCI distribution spec's manifest and blob reads
//! and writes, and the docker token dance, through one [`Fetcher`]. Every answer is read
//! under a cap before and while it arrives ([`read_body`]); every URL the registry names (a
//! token service, a redirect, an upload location) is held to the fetcher's rules: the
//! registry's own scheme, host and port or a host the config allows, and never a loopback
//! or private address unless the registry is on one. Credentials go to the registry, and
//! to the token service it names (where they are meant), never elsewhere.

use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode};
use url::Url;

use crate::error::SourceError;
use crate::http::{self, Call, Cap, Fetcher, Named};
use crate::{FetchOptions, FetchProgress};

/// Largest manifest read, in bytes: the OCI image spec's recommended maximum (4 MiB). A
/// skill's manifest is well under a kilobyte.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// Largest answer of a token service read, in bytes.
pub const MAX_TOKEN_BYTES: u64 = 1 << 20;

/// What to do about a manifest over [`MAX_MANIFEST_BYTES`].
const MANIFEST_FIX: &str = "a manifest is at most 4 MiB (the OCI image spec's recommended maximum; a skill's is under 1 KiB), so this registry is not serving a skill here; check the address";

/// What to do about a token answer over [`MAX_TOKEN_BYTES`].
const TOKEN_FIX: &str = "a token is a few kilobytes, so this is not a registry token service; check the registry";

/// One repository of one registry, talked to through one fetcher.
pub(super) struct Wire {
    fetcher: Fetcher,
    /// `scheme://registry/`.
    base: Url,
    repository: String,
    /// The address as a person reads it, for errors.
    name: String,
    /// `USER`, `PASSWORD` for this registry, if any.
    credentials: Option<(String, String)>,
    /// The token scope's actions: `pull`, or `pull,push`.
    actions: &'static str,
    /// What the registry accepted last (a bearer token, or the credentials as Basic).
    authorization: Mutex<Option<HeaderValue>>,
}

/// A challenge of `WWW-Authenticate`: its scheme and parameters.
#[derive(Debug, PartialEq, Eq)]
struct Challenge {
    scheme: String,
    params: Vec<(String, String)>,
}

impl Challenge {
    /// `Bearer realm="…",service="…"` (one challenge; quoted values may hold commas).
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (scheme, mut rest) = text.split_once(' ').unwrap_or((text, ""));
        let mut params = Vec::new();
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if rest.is_empty() {
                break;
            }
            let (key, after) = rest.split_once('=')?;
            let (value, after) = match after.strip_prefix('"') {
                Some(quoted) => {
                    let end = quoted.find('"')?;
                    (&quoted[..end], &quoted[end + 1..])
                }
                None => after.split_once(',').unwrap_or((after, "")),
            };
            params.push((key.trim().to_ascii_lowercase(), value.to_owned()));
            rest = after;
        }
        Some(Self { scheme: scheme.to_ascii_lowercase(), params })
    }

    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The answer of a token service.
#[derive(serde::Deserialize)]
struct TokenAnswer {
    token: Option<String>,
    access_token: Option<String>,
}

impl Wire {
    /// The repository `repository` of `registry` (`HOST[:PORT]`), over HTTPS unless the
    /// registry is on loopback or `options.caps.allow_http`; `push` asks for push access.
    pub(super) async fn new(registry: &str, repository: &str, name: &str, options: &FetchOptions, push: bool) -> Result<Self, SourceError> {
        let host = match registry {
            // Docker Hub's API is served by another name than the one images are named by.
            "docker.io" | "registry-1.docker.io" => "index.docker.io",
            other => other,
        };
        let scheme = if options.caps.allow_http || crate::address::is_loopback(host) { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{host}/")).map_err(|e| SourceError::Oci {
            reference: name.to_owned(),
            reason: format!("the registry `{registry}` is not HOST[:PORT]: {e}"),
        })?;
        let fetcher = Fetcher::new(&base, &options.caps).await?;
        Ok(Self {
            fetcher,
            base,
            repository: repository.to_owned(),
            name: name.to_owned(),
            credentials: options.auth.for_registry(registry),
            actions: if push { "pull,push" } else { "pull" },
            authorization: Mutex::new(None),
        })
    }

    /// `BASE/v2/REPOSITORY/{kind}/{reference}`.
    fn url(&self, kind: &str, reference: &str) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("an http(s) URL has a path")
            .pop_if_empty()
            .push("v2")
            .extend(self.repository.split('/'))
            .push(kind)
            .push(reference);
        url
    }

    fn refuse(&self, reason: String) -> SourceError {
        SourceError::Oci { reference: self.name.clone(), reason }
    }

    /// The credentials as a Basic authorization.
    fn basic(&self) -> Option<HeaderValue> {
        let (user, password) = self.credentials.as_ref()?;
        HeaderValue::from_str(&format!("Basic {}", BASE64.encode(format!("{user}:{password}")))).ok()
    }

    /// Send `method` to `url` with the authorization the registry accepted (only when
    /// `url` is on the registry); on `401`, do what its challenge asks (a token, or the
    /// credentials) and send once more.
    async fn request(
        &self,
        method: Method,
        url: Url,
        by: Named,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<Response, SourceError> {
        let on_registry = http::same_origin(&url, &self.base);
        let call = |auth: Option<HeaderValue>| Call {
            method: method.clone(),
            url: url.clone(),
            by: by.clone(),
            headers: headers.clone(),
            auth: auth.filter(|_| on_registry),
            body: body.clone(),
        };
        let sent = self.authorization.lock().expect("not poisoned").clone();
        let response = self.fetcher.send(call(sent.clone())).await?;
        if response.status() != StatusCode::UNAUTHORIZED || !on_registry {
            return Ok(response);
        }
        let challenge = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).map(str::to_owned);
        drop(response);
        let Some(authorization) = self.authorize(challenge.as_deref()).await? else {
            return Err(self.refuse(format!(
                "{method} {url}: the registry asks for credentials and none are given; log in with `docker login` (read from ~/.docker/config.json) or pass --registry-secret"
            )));
        };
        if sent.as_ref() == Some(&authorization) {
            return Err(self.unauthorized(&format!("{method} {url}"), ""));
        }
        *self.authorization.lock().expect("not poisoned") = Some(authorization.clone());
        let response = self.fetcher.send(call(Some(authorization))).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            let said = http::error_text(response).await;
            return Err(self.unauthorized(&format!("{method} {url}"), &said));
        }
        Ok(response)
    }

    fn unauthorized(&self, what: &str, said: &str) -> SourceError {
        self.refuse(format!(
            "{what}: the registry refused the credentials{said}; log in with `docker login` (read from ~/.docker/config.json) or pass --registry-secret"
        ))
    }

    /// The authorization a `WWW-Authenticate` challenge asks for: a token from the token
    /// service it names (asked with the credentials, if any), or the credentials as Basic.
    async fn authorize(&self, challenge: Option<&str>) -> Result<Option<HeaderValue>, SourceError> {
        let challenge = challenge.and_then(Challenge::parse);
        let Some(challenge) = challenge.filter(|c| c.scheme == "bearer") else {
            return Ok(self.basic());
        };
        let realm = challenge.param("realm").ok_or_else(|| self.refuse("the registry's Bearer challenge names no realm".into()))?;
        let mut url =
            Url::parse(realm).map_err(|e| self.refuse(format!("the registry's token service `{}` is not a URL: {e}", text(realm))))?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = challenge.param("service") {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &format!("repository:{}:{}", self.repository, self.actions));
        }
        let by = Named::Remote("the registry's token service (its WWW-Authenticate realm)".into());
        let mut call = Call::get(url.clone(), by);
        call.auth = self.basic();
        let response = self.fetcher.send(call).await?;
        let status = response.status();
        if !status.is_success() {
            let said = http::error_text(response).await;
            let what = format!("the token service {url} answered {status}");
            return Err(match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => self.unauthorized(&what, &said),
                _ => self.refuse(format!("{what}{said}")),
            });
        }
        let what = format!("{}: the answer of the token service {url}", self.name);
        let body = http::read_body(response, &what, Cap { bytes: MAX_TOKEN_BYTES, fix: Some(TOKEN_FIX) }, None).await?;
        let answer: TokenAnswer =
            serde_json::from_slice(&body).map_err(|e| self.refuse(format!("the token service {url} answered what is not a token: {e}")))?;
        let token = answer.token.or(answer.access_token).filter(|t| !t.is_empty());
        let token = token.ok_or_else(|| self.refuse(format!("the token service {url} answered no token")))?;
        HeaderValue::from_str(&format!("Bearer {token}"))
            .map(Some)
            .map_err(|_| self.refuse(format!("the token service {url} answered a token that is not a header value")))
    }

    /// A failed answer as an error naming `what`, with what to do.
    async fn failure(&self, what: &str, response: Response) -> SourceError {
        let status = response.status();
        let said = http::error_text(response).await;
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => self.unauthorized(&format!("{what} ({status})"), &said),
            StatusCode::NOT_FOUND => self.refuse(format!("{what}: not found in the registry{said}; check the repository and tag")),
            _ => self.refuse(format!("{what}: the registry answered {status}{said}")),
        }
    }

    fn accept() -> HeaderMap {
        let mut headers = HeaderMap::new();
        let types = super::MANIFEST_MEDIA_TYPES.join(", ");
        headers.insert(ACCEPT, HeaderValue::from_str(&types).expect("media types are a header value"));
        headers
    }

    /// The manifest `reference` (a tag or a digest) names: its bytes, at most
    /// [`MAX_MANIFEST_BYTES`] (and the download cap), and the digest the registry says it
    /// has; `None` when there is no such manifest.
    pub(super) async fn manifest(&self, reference: &str, cap: u64) -> Result<Option<(Vec<u8>, Option<String>)>, SourceError> {
        let url = self.url("manifests", reference);
        let response = self.request(Method::GET, url, Named::Source, Self::accept(), None).await?;
        match response.status() {
            StatusCode::NOT_FOUND => return Ok(None),
            status if !status.is_success() => return Err(self.failure(&format!("the manifest {reference}"), response).await),
            _ => {}
        }
        let said = content_digest(&response);
        let what = format!("{}: the manifest `{reference}`", self.name);
        let cap = Cap { bytes: cap.min(MAX_MANIFEST_BYTES), fix: Some(MANIFEST_FIX) };
        Ok(Some((http::read_body(response, &what, cap, None).await?, said)))
    }

    /// The digest the registry gives the manifest `reference` names (`HEAD`); `None` when
    /// it names none (then the manifest is read and hashed).
    pub(super) async fn head_manifest(&self, reference: &str) -> Result<Option<String>, SourceError> {
        let url = self.url("manifests", reference);
        let response = self.request(Method::HEAD, url, Named::Source, Self::accept(), None).await?;
        if !response.status().is_success() {
            return Err(self.failure(&format!("the manifest {reference}"), response).await);
        }
        Ok(content_digest(&response))
    }

    /// The blob `digest`, at most `size` bytes (what its descriptor says), wherever the
    /// registry redirects within the rules.
    pub(super) async fn blob(&self, digest: &str, size: u64, what: &str, progress: &dyn FetchProgress) -> Result<Vec<u8>, SourceError> {
        let url = self.url("blobs", digest);
        let response = self.request(Method::GET, url, Named::Source, HeaderMap::new(), None).await?;
        if !response.status().is_success() {
            return Err(self.failure(what, response).await);
        }
        let cap = Cap { bytes: size, fix: Some("its descriptor in the manifest says it is that size, so the registry sent other bytes") };
        http::read_body(response, what, cap, Some(progress)).await
    }

    /// Store `data` as the blob `digest`, unless the registry has it.
    pub(super) async fn push_blob(&self, digest: &str, data: Vec<u8>, what: &str) -> Result<(), SourceError> {
        let exists = self.request(Method::HEAD, self.url("blobs", digest), Named::Source, HeaderMap::new(), None).await?;
        if exists.status().is_success() {
            return Ok(());
        }
        let mut start = self.url("blobs", "uploads");
        start.path_segments_mut().expect("an http(s) URL has a path").push("");
        let response = self.request(Method::POST, start, Named::Source, HeaderMap::new(), Some(Vec::new())).await?;
        if response.status() != StatusCode::ACCEPTED {
            return Err(self.failure(&format!("starting the upload of {what}"), response).await);
        }
        let location = response.headers().get(LOCATION).and_then(|l| l.to_str().ok()).map(str::to_owned);
        let location =
            location.ok_or_else(|| self.refuse(format!("starting the upload of {what}: the registry named no upload location")))?;
        let mut upload = response
            .url()
            .join(&location)
            .map_err(|e| self.refuse(format!("the upload location of {what}, `{}`, is not a URL: {e}", text(&location))))?;
        drop(response);
        upload.query_pairs_mut().append_pair("digest", digest);
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        let by = Named::Remote("the registry's upload location".into());
        let response = self.request(Method::PUT, upload, by, headers, Some(data)).await?;
        if !response.status().is_success() {
            return Err(self.failure(&format!("uploading {what}"), response).await);
        }
        Ok(())
    }

    /// Store `body` (of `media_type`) as the manifest `reference`.
    pub(super) async fn push_manifest(&self, reference: &str, body: Vec<u8>, media_type: &str) -> Result<(), SourceError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(media_type).expect("a media type is a header value"));
        let response = self.request(Method::PUT, self.url("manifests", reference), Named::Source, headers, Some(body)).await?;
        if !response.status().is_success() {
            return Err(self.failure(&format!("storing the manifest {reference}"), response).await);
        }
        Ok(())
    }
}

/// The `Docker-Content-Digest` of an answer.
fn content_digest(response: &Response) -> Option<String> {
    response.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()).map(|d| d.trim().to_owned())
}

/// Text a registry wrote, on one line, escaped.
fn text(said: &str) -> String {
    skillhost_core::text::one_line(said, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse() {
        let c = Challenge::parse(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.param("realm"), Some("https://auth.docker.io/token"));
        assert_eq!(c.param("scope"), Some("repository:a/b:pull,push"));
        let c = Challenge::parse("Basic realm=registry").unwrap();
        assert_eq!((c.scheme.as_str(), c.param("realm")), ("basic", Some("registry")));
        assert_eq!(Challenge::parse(r#"Bearer realm="unterminated"#), None);
    }
}
