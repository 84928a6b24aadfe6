//! placeholder: oci (replaced by the OCI branch)
use crate::address::OciAddr;
use crate::{FetchOptions, Fetched, SourceError};
/// Registry credentials.
#[derive(Clone, Debug, Default)]
pub struct Auth;
/// placeholder
pub async fn pull(addr: &OciAddr, _options: &FetchOptions) -> Result<Fetched, SourceError> {
    Err(SourceError::Oci { reference: addr.to_string(), reason: "placeholder".into() })
}
/// placeholder
pub async fn resolve(addr: &OciAddr, _options: &FetchOptions) -> Result<String, SourceError> {
    Err(SourceError::Oci { reference: addr.to_string(), reason: "placeholder".into() })
}
