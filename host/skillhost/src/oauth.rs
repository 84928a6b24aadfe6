//! The HTTP front's OAuth keys: `[oauth]` of the host config made into the
//! [`OAuthFront`] `serve_http` checks access tokens with, the issuer's JWKS fetched at
//! start (a front that cannot check tokens does not start) and kept fresh: every
//! [`JWKS_REFRESH`], and when a token names a key not held (the issuer rotated its keys),
//! at most once per [`MIN_REFETCH_GAP`] however many such tokens arrive. A refetch that
//! fails keeps the keys in force and says so in the log.
//!
//! The fetch is a source fetch ([`skillhost_source::http::Fetcher`]): `https`, or `http`
//! to loopback, at most [`MAX_JWKS_BYTES`], its redirects held to the JWKS URL's origin.

use std::sync::{Arc, Weak};
use std::time::Duration;

use skillhost_access::jwt::{Jwks, JwtError, MAX_JWKS_BYTES};
use skillhost_access::{OAuthError, ResourceServer};
use skillhost_mcp::OAuthFront;
use skillhost_source::SourceError;
use skillhost_source::http::{Cap, Fetcher, Named};
use url::Url;

use crate::HostConfig;

/// How often the issuer's keys are fetched again.
pub const JWKS_REFRESH: Duration = Duration::from_secs(300);
pub use skillhost_access::oauth::MIN_REFETCH_GAP;
/// Longest one fetch of the keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the front cannot take OAuth access tokens.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthSetupError {
    /// The JWKS could not be fetched.
    #[error("cannot fetch the OAuth issuer's keys ([oauth] jwks_url): {0}; check the URL and that the issuer answers")]
    Fetch(#[source] SourceError),
    /// The JWKS holds no key that can be used.
    #[error("the OAuth issuer's keys at {url} ([oauth] jwks_url) cannot be used: {source}")]
    Keys {
        /// The JWKS URL.
        url: String,
        /// Why.
        #[source]
        source: JwtError,
    },
    /// The settings cannot work.
    #[error(transparent)]
    Settings(#[from] OAuthError),
}

/// The front's OAuth side from `config`'s `[oauth]` (`None` without one): the keys
/// fetched now, a task keeping them fresh while the front holds them. Call it within a
/// tokio runtime.
pub async fn front(config: &HostConfig) -> Result<Option<OAuthFront>, crate::HostError> {
    let Some((settings, jwks_url)) = config.oauth()? else { return Ok(None) };
    let caps = config.source_caps(skillhost_source::Caps { timeout: FETCH_TIMEOUT, ..skillhost_source::Caps::default() })?;
    let keys = fetch(&jwks_url, &caps).await?;
    let server = Arc::new(ResourceServer::new(settings, keys).map_err(OAuthSetupError::from)?);
    let refetch = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(keep_fresh(Arc::downgrade(&server), refetch.clone(), jwks_url, caps));
    Ok(Some(OAuthFront { server, refetch }))
}

/// The JWKS at `url`, parsed.
pub async fn fetch(url: &Url, caps: &skillhost_source::Caps) -> Result<Jwks, OAuthSetupError> {
    let fetcher = Fetcher::new(url, caps).await.map_err(OAuthSetupError::Fetch)?;
    let body = fetcher
        .get(url, Named::Source, "the OAuth issuer's keys", Cap::of(MAX_JWKS_BYTES as u64), None)
        .await
        .map_err(OAuthSetupError::Fetch)?;
    Jwks::parse(&body).map_err(|source| OAuthSetupError::Keys { url: url.to_string(), source })
}

/// Refetch the keys every [`JWKS_REFRESH`] and when asked, no sooner than
/// [`MIN_REFETCH_GAP`] after the last fetch, until the front lets go of `server`.
async fn keep_fresh(server: Weak<ResourceServer>, refetch: Arc<tokio::sync::Notify>, url: Url, caps: skillhost_source::Caps) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(JWKS_REFRESH) => {}
            () = refetch.notified() => {}
        }
        // No sooner than the gap after the last fetch (the one at start included).
        let Some(age) = server.upgrade().map(|s| s.keys_age()) else { return };
        tokio::time::sleep(MIN_REFETCH_GAP.saturating_sub(age)).await;
        let fetched = fetch(&url, &caps).await;
        let Some(server) = server.upgrade() else { return };
        match fetched {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), %url, "the OAuth issuer's keys fetched again");
                server.set_keys(keys);
            }
            Err(error) => tracing::warn!(%error, "the OAuth issuer's keys could not be fetched again; the keys in force stay"),
        }
    }
}
