//! placeholder: git (replaced by the git branch)
use crate::address::GitAddr;
use crate::{FetchOptions, Fetched, SourceError};
/// placeholder
pub async fn fetch(addr: &GitAddr, _options: &FetchOptions) -> Result<Fetched, SourceError> {
    Err(SourceError::Git { url: addr.to_string(), reason: "placeholder".into() })
}
/// placeholder
pub async fn resolve(addr: &GitAddr, _options: &FetchOptions) -> Result<String, SourceError> {
    Err(SourceError::Git { url: addr.to_string(), reason: "placeholder".into() })
}
