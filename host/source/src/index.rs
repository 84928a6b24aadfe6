//! placeholder: index (replaced by the git branch)
use crate::address::IndexAddr;
use crate::{FetchOptions, Fetched, SourceError};
/// placeholder
pub async fn fetch(addr: &IndexAddr, _options: &FetchOptions) -> Result<Fetched, SourceError> {
    Err(SourceError::Index { url: addr.to_string(), reason: "placeholder".into() })
}
/// placeholder
pub async fn resolve(addr: &IndexAddr, _options: &FetchOptions) -> Result<String, SourceError> {
    Err(SourceError::Index { url: addr.to_string(), reason: "placeholder".into() })
}
