//! placeholder: oci
/// Registry credentials.
#[derive(Clone, Debug, Default)]
pub struct Auth;
