//! placeholder: sign
/// A public key signatures are checked against.
#[derive(Clone, Debug)]
pub struct PublicKey;
