//! Agents' tokens: `skh_` and 32 bytes from the OS random source (base64url), kept by the
//! host only as their SHA-256 ([`sha256`]): the store cannot give a token back, and
//! guessing one is guessing 256 random bits.

use base64::Engine as _;
use ring::rand::SecureRandom as _;

/// What every token starts with (so a leaked one is recognisable in a secret scanner).
pub const PREFIX: &str = "skh_";

/// The OS random source failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot make a token: the operating system's random source failed")]
pub struct NoRandom;

/// A new token.
pub fn generate() -> Result<String, NoRandom> {
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| NoRandom)?;
    Ok(format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

/// Whether `token` has the shape [`generate`] makes ([`PREFIX`] and 43 base64url
/// characters): only such a token is worth looking up.
pub fn well_formed(token: &str) -> bool {
    token
        .strip_prefix(PREFIX)
        .is_some_and(|rest| rest.len() == 43 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// The SHA-256 of `token`, lowercase hex: what the store keeps and looks up.
pub fn sha256(token: &str) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed_to_hex() {
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43 && a != b);
        assert!(well_formed(&a) && well_formed(&b));
        assert!(!well_formed("skh_short") && !well_formed(&format!("{a}x")) && !well_formed(&format!("{PREFIX}{}", "/".repeat(43))));
        assert_eq!(sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
