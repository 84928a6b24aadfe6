//! Verification of OAuth 2.1 access tokens that arrive as signed JWTs (RFC 7519, signed as JWS per RFC 7515).
//!
//! The MCP server acts as an OAuth resource server: a client sends `Authorization: Bearer <token>`, and this
//! module decides whether the token was really issued for this server by the configured authorization server,
//! and is still valid. Checks happen in this order, and each failure has its own [`JwtError`]:
//!
//! 1. **Size.** A token longer than 16 KiB is refused before anything is decoded, so a huge header costs nothing.
//! 2. **Shape.** Exactly three parts, `header.payload.signature`, each base64url without padding. The header must
//!    be a JSON object with an `alg`. If it has a `typ`, that must name a JWT (`JWT` or `at+jwt`, in any case,
//!    with or without the `application/` prefix). A header with `crit` is refused: it lists extensions the
//!    token says must be understood, and this module implements none.
//! 3. **Algorithm.** Only RS256, ES256 and EdDSA (Ed25519) are accepted. `none` (no signature at all), the HMAC
//!    family HS* (whose "secret" an attacker could set to our public key) and everything else are refused.
//! 4. **Key.** Keys come only from the JWKS the server was configured with; header fields that point at other
//!    keys (`jku`, `jwk`, `x5u`, `x5c`) are ignored. With a `kid` the keys carrying that kid are tried, and those
//!    published without one; without one, every key of the right type is. A key is used only for the algorithm of its own type (RSA for RS256,
//!    P-256 for ES256, Ed25519 for EdDSA), and only if the `alg` its JWK declares, if any, is that algorithm. So
//!    a token can never make us check its signature with a key of another type ("algorithm confusion").
//! 5. **Signature.** Checked over the exact ASCII bytes `header.payload` as received, before the claims are
//!    even decoded: nothing in the payload is read until the signature is known to be good.
//! 6. **Claims.** `exp` is required and must not have passed; `nbf`, if present, must have come; both allow a
//!    small clock skew (the leeway, 60 s by default). `iss` must equal the configured issuer exactly.
//!    `aud` (a string or an array of strings) must contain this server's audience exactly, so a token minted
//!    for another service is refused here. `sub` must be a non-empty string. `iat` is not checked.
//!
//! Not done here: fetching and refreshing the JWKS (on [`JwtError::UnknownKey`] the caller may refetch it,
//! rate-limited), deciding which scopes a request needs, replay detection (`jti`), revocation, and
//! sender-constrained tokens (DPoP, mTLS).
//!
//! Error messages never contain the token. The few values they quote from it (`alg`, `kid`, `typ`, `iss`) are
//! cut to 64 characters and printed with escapes, so a hostile token cannot flood or forge log lines.

use std::fmt;

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The largest token accepted, in bytes, checked before any decoding.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The largest JWKS document accepted, in bytes.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// The most keys a JWKS document may list (usable or not).
pub const MAX_JWKS_KEYS: usize = 64;
/// The clock skew allowed by [`JwtRules::new`], in seconds.
pub const DEFAULT_LEEWAY_SECS: u64 = 60;

/// How many characters of a token-supplied value an error message quotes.
const QUOTE_CHARS: usize = 64;
/// RSA moduli accepted in a JWKS, in bytes: 2048 to 8192 bits, as RS256 verification requires.
const RSA_MODULUS_BYTES: std::ops::RangeInclusive<usize> = 256..=1024;
/// RSA public exponents longer than this are refused (ring accepts at most 33 bits).
const RSA_MAX_EXPONENT_BYTES: usize = 8;

/// Base64url for JWK members: padding is tolerated there (the JWKS comes from the configured server, and some
/// servers pad), while tokens use the strict unpadded [`URL_SAFE_NO_PAD`].
const JWK_BASE64: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_encode_padding(false).with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why a token or a JWKS document was refused.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    /// The token is longer than [`MAX_TOKEN_BYTES`]; it was not decoded.
    #[error("access token is {len} bytes, more than the {max}-byte limit; check that the Authorization header carries a single token")]
    TooLarge {
        /// The token's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The token is not three base64url parts with a JSON header and JSON claims.
    #[error("access token is not a well-formed JWT: {0}; expected header.payload.signature, each base64url without padding")]
    Malformed(&'static str),
    /// The header's `alg` is not RS256, ES256 or EdDSA.
    #[error("access token uses signing algorithm {0:?}, which is refused; only RS256, ES256 and EdDSA are accepted")]
    UnsupportedAlgorithm(String),
    /// The header's `typ` does not name a JWT.
    #[error("access token header has typ {0:?}; expected \"JWT\" or \"at+jwt\" (is this an ID token or another kind of JWT?)")]
    UnsupportedType(String),
    /// The header lists critical extensions (`crit`), none of which are implemented here.
    #[error("access token header lists critical extensions (crit), which this server does not implement")]
    UnsupportedCritical,
    /// The header names a `kid` that no key in the JWKS has.
    #[error("no key in the JWKS has kid {0:?}; check that the JWKS comes from the token's issuer, and refetch it if the keys were rotated")]
    UnknownKey(String),
    /// The header has no `kid` and the JWKS has no key for the header's algorithm.
    #[error("access token has no kid and the JWKS has no key for {0}; check the JWKS URL and the issuer's signing algorithm")]
    NoKeyForAlgorithm(&'static str),
    /// The keys named by the header's `kid` are of another type than its `alg` needs (or declare another alg).
    #[error(
        "the key named by the token's kid cannot check {alg} signatures (other key type or declared alg); refused as algorithm confusion"
    )]
    AlgorithmMismatch {
        /// The algorithm the token's header asked for.
        alg: &'static str,
    },
    /// No candidate key verifies the signature.
    #[error("access token signature does not verify with the issuer's keys: the token was altered or signed by someone else")]
    BadSignature,
    /// `exp` has passed, by more than the leeway.
    #[error("access token expired at {expired_at} (Unix time); get a new token, or check this host's clock")]
    Expired {
        /// The token's `exp`, in Unix seconds.
        expired_at: u64,
    },
    /// `nbf` is still in the future, by more than the leeway.
    #[error("access token is not valid before {not_before} (Unix time); check the clocks of this host and the authorization server")]
    NotYetValid {
        /// The token's `nbf`, in Unix seconds.
        not_before: u64,
    },
    /// `iss` is not the configured issuer.
    #[error(
        "access token was issued by {found:?}, expected {expected:?}; the issuer must match exactly (scheme, host, path, trailing slash)"
    )]
    WrongIssuer {
        /// The token's `iss`, cut to 64 characters.
        found: String,
        /// The configured issuer.
        expected: String,
    },
    /// `aud` does not contain this server's audience.
    #[error("access token is not meant for this server: its aud does not contain {expected:?}; request the token for this resource")]
    WrongAudience {
        /// The configured audience.
        expected: String,
    },
    /// A required claim is absent.
    #[error("access token lacks the required claim {0:?}")]
    MissingClaim(&'static str),
    /// A claim has the wrong JSON type or an empty value.
    #[error("access token claim {0:?} has the wrong type or is empty (exp/nbf: number; iss/sub: string; aud: string or array of strings)")]
    InvalidClaim(&'static str),
    /// The rules themselves are unusable.
    #[error("JWT rules are incomplete: the expected {0} is empty; configure the authorization server's issuer and this server's audience")]
    InvalidRules(&'static str),
    /// The JWKS document was refused.
    #[error("JWKS refused: {0}")]
    Jwks(String),
}

/// The signing algorithms this module accepts, each tied to one key type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256, RSA keys of 2048 to 8192 bits.
    Rs256,
    /// ECDSA on P-256 with SHA-256, signature as the 64-byte `r || s`.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl Alg {
    /// The algorithm a header or JWK `alg` names, if accepted (exact, case-sensitive names per RFC 7518).
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "RS256" => Some(Self::Rs256),
            "ES256" => Some(Self::Es256),
            "EdDSA" => Some(Self::EdDsa),
            _ => None,
        }
    }

    /// The RFC 7518 name.
    fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Es256 => "ES256",
            Self::EdDsa => "EdDSA",
        }
    }
}

/// A public key's material, in the form ring takes.
#[derive(Clone)]
enum Material {
    /// Modulus and exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Uncompressed point `0x04 || x || y`.
    P256 { point: Vec<u8> },
    /// The 32-byte public key.
    Ed25519 { x: Vec<u8> },
}

impl Material {
    /// The only algorithm this key may check.
    fn alg(&self) -> Alg {
        match self {
            Self::Rsa { .. } => Alg::Rs256,
            Self::P256 { .. } => Alg::Es256,
            Self::Ed25519 { .. } => Alg::EdDsa,
        }
    }

    /// Whether `signature` is this key's signature of `message` under the key's own algorithm.
    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            Self::Rsa { n, e } => {
                RsaPublicKeyComponents { n, e }.verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, signature).is_ok()
            }
            Self::P256 { point } => UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point).verify(message, signature).is_ok(),
            Self::Ed25519 { x } => UnparsedPublicKey::new(&signature::ED25519, x).verify(message, signature).is_ok(),
        }
    }
}

/// One usable key of a JWKS.
#[derive(Clone)]
struct Key {
    kid: Option<String>,
    material: Material,
}

/// The usable signing keys of a JWKS document (RFC 7517), ready for [`verify`].
#[derive(Clone)]
pub struct Jwks {
    keys: Vec<Key>,
    skipped: Vec<String>,
}

impl fmt::Debug for Jwks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<(&str, Option<&str>)> = self.keys.iter().map(|k| (k.material.alg().name(), k.kid.as_deref())).collect();
        f.debug_struct("Jwks").field("keys", &keys).field("skipped", &self.skipped).finish()
    }
}

/// A JWKS document: only `keys` matters.
#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<Value>,
}

/// The JWK members this module reads; the rest are ignored.
#[derive(Deserialize)]
struct RawJwk {
    kty: Option<String>,
    #[serde(rename = "use")]
    key_use: Option<String>,
    key_ops: Option<Vec<String>>,
    alg: Option<String>,
    kid: Option<String>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

impl Jwks {
    /// Parse a JWKS document (RFC 7517): keys of kty RSA (`n`, `e`; alg RS256 or absent), EC P-256 (crv `P-256`,
    /// `x`, `y`; alg ES256 or absent) and OKP Ed25519 (crv `Ed25519`, `x`; alg EdDSA or absent).
    ///
    /// A key this module cannot use (a `use` other than `sig`, `key_ops` without `verify`, another kty or crv, a
    /// declared alg other than its type's, bad or wrongly sized members) is skipped, not an error; why is kept in
    /// [`Jwks::skipped`]. The document is refused if it is over [`MAX_JWKS_BYTES`], lists over [`MAX_JWKS_KEYS`]
    /// keys, is not a JSON object with a `keys` array, or yields no usable key.
    ///
    /// # Errors
    ///
    /// [`JwtError::Jwks`], saying which limit was passed or why each key was skipped.
    pub fn parse(json: &[u8]) -> Result<Self, JwtError> {
        if json.len() > MAX_JWKS_BYTES {
            return Err(JwtError::Jwks(format!("the document is {} bytes, more than the {MAX_JWKS_BYTES}-byte limit", json.len())));
        }
        let raw: RawJwks = serde_json::from_slice(json)
            .map_err(|_| JwtError::Jwks("the document is not a JSON object with a \"keys\" array (RFC 7517 section 5)".into()))?;
        if raw.keys.len() > MAX_JWKS_KEYS {
            return Err(JwtError::Jwks(format!("the document lists {} keys, more than the limit of {MAX_JWKS_KEYS}", raw.keys.len())));
        }
        let mut jwks = Self { keys: Vec::new(), skipped: Vec::new() };
        for (index, value) in raw.keys.into_iter().enumerate() {
            match parse_key(value) {
                Ok(key) => jwks.keys.push(key),
                Err(Skip(reason)) => jwks.skipped.push(format!("key {index}: {reason}")),
            }
        }
        if jwks.keys.is_empty() {
            let reasons = if jwks.skipped.is_empty() { "the keys array is empty".to_owned() } else { jwks.skipped.join("; ") };
            return Err(JwtError::Jwks(format!("no usable signing key (RS256, ES256 or EdDSA): {reasons}")));
        }
        Ok(jwks)
    }

    /// The number of usable keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no usable key (never true for a value [`Jwks::parse`] returned).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Why each skipped key of the document was skipped, e.g. to log once after a fetch.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

/// Why a JWK of the document is skipped, in words (kept in [`Jwks::skipped`], never an
/// error of its own: the document fails only when no key is usable).
struct Skip(String);

/// One JWK as a usable key, or the reason it is skipped.
fn parse_key(value: Value) -> Result<Key, Skip> {
    let raw: RawJwk = serde_json::from_value(value).map_err(|_| Skip("not a JSON object with string members".to_owned()))?;
    let label = raw.kid.as_deref().map_or_else(|| "(no kid)".to_owned(), |kid| format!("kid {:?}", clip(kid)));
    let skip = |why: Skip| Skip(format!("{label}: {}", why.0));
    if let Some(key_use) = raw.key_use.as_deref().filter(|u| *u != "sig") {
        return Err(skip(Skip(format!("use is {:?}, not \"sig\"", clip(key_use)))));
    }
    if raw.key_ops.as_ref().is_some_and(|ops| !ops.iter().any(|op| op == "verify")) {
        return Err(skip(Skip("key_ops does not include \"verify\"".into())));
    }
    let material = key_material(&raw).map_err(skip)?;
    if let Some(declared) = raw.alg.as_deref().filter(|alg| Alg::from_name(alg) != Some(material.alg())) {
        return Err(skip(Skip(format!("declares alg {:?}, but this key type is only used for {}", clip(declared), material.alg().name()))));
    }
    Ok(Key { kid: raw.kid, material })
}

/// The key material of a JWK, by its kty and crv.
fn key_material(raw: &RawJwk) -> Result<Material, Skip> {
    match (raw.kty.as_deref(), raw.crv.as_deref()) {
        (Some("RSA"), _) => rsa_material(raw),
        (Some("EC"), Some("P-256")) => {
            let x = fixed_member(raw.x.as_deref(), "x", 32)?;
            let y = fixed_member(raw.y.as_deref(), "y", 32)?;
            Ok(Material::P256 { point: [&[0x04][..], &x, &y].concat() })
        }
        (Some("OKP"), Some("Ed25519")) => Ok(Material::Ed25519 { x: fixed_member(raw.x.as_deref(), "x", 32)? }),
        (Some(kty @ ("EC" | "OKP")), crv) => Err(Skip(format!("kty {kty} with crv {:?} is not supported", crv.map(clip)))),
        (Some(kty), _) => Err(Skip(format!("kty {:?} is not supported", clip(kty)))),
        (None, _) => Err(Skip("no kty".into())),
    }
}

/// RSA modulus and exponent, leading zero bytes stripped, modulus 2048 to 8192 bits long.
fn rsa_material(raw: &RawJwk) -> Result<Material, Skip> {
    let n = strip_leading_zeros(member(raw.n.as_deref(), "n")?);
    let e = strip_leading_zeros(member(raw.e.as_deref(), "e")?);
    if !RSA_MODULUS_BYTES.contains(&n.len()) {
        return Err(Skip(format!("RSA modulus is {} bytes; RS256 needs 2048 to 8192 bits", n.len())));
    }
    if e.is_empty() || e.len() > RSA_MAX_EXPONENT_BYTES {
        return Err(Skip("RSA exponent is zero or too long".into()));
    }
    Ok(Material::Rsa { n, e })
}

/// A base64url JWK member, decoded.
fn member(value: Option<&str>, name: &str) -> Result<Vec<u8>, Skip> {
    let text = value.ok_or_else(|| Skip(format!("member {name} is missing")))?;
    JWK_BASE64.decode(text).map_err(|_| Skip(format!("member {name} is not base64url")))
}

/// A base64url JWK member that must decode to exactly `len` bytes.
fn fixed_member(value: Option<&str>, name: &str, len: usize) -> Result<Vec<u8>, Skip> {
    let bytes = member(value, name)?;
    if bytes.len() == len { Ok(bytes) } else { Err(Skip(format!("member {name} is {} bytes, expected {len}", bytes.len()))) }
}

/// The bytes without their leading zeros (JWKs should have none, some servers add one).
fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

/// What [`verify`] checks the claims against.
#[derive(Debug, Clone)]
pub struct JwtRules {
    /// The authorization server's issuer identifier; `iss` must equal it exactly.
    pub issuer: String,
    /// This server's audience (usually its canonical resource URL); `aud` must contain it exactly.
    pub audience: String,
    /// Clock skew allowed on `exp` and `nbf`, in seconds ([`DEFAULT_LEEWAY_SECS`] by default).
    pub leeway_secs: u64,
}

impl JwtRules {
    /// Rules for this issuer and audience, with the default leeway of [`DEFAULT_LEEWAY_SECS`].
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self { issuer: issuer.into(), audience: audience.into(), leeway_secs: DEFAULT_LEEWAY_SECS }
    }

    /// Refuse rules that would match an empty `iss` or `aud`.
    fn check(&self) -> Result<(), JwtError> {
        if self.issuer.is_empty() {
            return Err(JwtError::InvalidRules("issuer"));
        }
        if self.audience.is_empty() {
            return Err(JwtError::InvalidRules("audience"));
        }
        Ok(())
    }
}

/// What a verified token says.
#[derive(Debug, Clone)]
pub struct Verified {
    /// `sub`: whom the token was issued for (never empty).
    pub subject: String,
    /// `iss`: the issuer (equal to [`JwtRules::issuer`]).
    pub issuer: String,
    /// `exp`, in Unix seconds.
    pub expires_at: u64,
    /// The scopes granted: from `scope` (space-separated string) or, without it, `scp` (array of strings, or a
    /// space-separated string as some servers send it). Empty if neither claim is present.
    pub scopes: Vec<String>,
    /// All claims of the token.
    pub claims: Map<String, Value>,
}

/// Verify an access token: its size and shape, its algorithm and signature against `keys`, then its claims
/// against `rules` at time `now_unix` (Unix seconds). See the module documentation for every rule.
///
/// # Errors
///
/// The first rule the token breaks, as a [`JwtError`]; [`JwtError::InvalidRules`] if `rules` has an empty
/// issuer or audience.
pub fn verify(token: &str, keys: &Jwks, rules: &JwtRules, now_unix: u64) -> Result<Verified, JwtError> {
    rules.check()?;
    let payload = verified_payload(token, keys)?;
    let claims: Map<String, Value> =
        serde_json::from_slice(&payload).map_err(|_| JwtError::Malformed("the claims are not a JSON object"))?;
    check_claims(claims, rules, now_unix)
}

/// The three parts of a compact JWS, still encoded.
struct Parts<'a> {
    /// `header.payload`, the exact bytes the signature covers.
    signing_input: &'a str,
    header: &'a str,
    payload: &'a str,
    signature: &'a str,
}

/// The JOSE header members this module reads. Serde refuses a repeated `alg`, `kid`, `typ` or `crit`.
#[derive(Deserialize)]
struct RawHeader {
    alg: Option<String>,
    kid: Option<String>,
    typ: Option<String>,
    crit: Option<Value>,
}

/// Check the token's size, shape, header, algorithm and signature; return its decoded payload.
fn verified_payload(token: &str, keys: &Jwks) -> Result<Vec<u8>, JwtError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(JwtError::TooLarge { len: token.len(), max: MAX_TOKEN_BYTES });
    }
    let parts = split(token)?;
    let header = parse_header(parts.header)?;
    let alg = header_alg(&header)?;
    let signature = decode_part(parts.signature)?;
    let candidates = candidate_keys(keys, alg, header.kid.as_deref())?;
    if !candidates.iter().any(|key| key.material.verifies(parts.signing_input.as_bytes(), &signature)) {
        return Err(JwtError::BadSignature);
    }
    decode_part(parts.payload)
}

/// Split a compact JWS into exactly three non-empty parts.
fn split(token: &str) -> Result<Parts<'_>, JwtError> {
    let (signing_input, signature) = token.rsplit_once('.').ok_or(JwtError::Malformed("it has no dots"))?;
    let (header, payload) = signing_input.split_once('.').ok_or(JwtError::Malformed("it has two parts, not three"))?;
    if payload.contains('.') {
        return Err(JwtError::Malformed("it has more than three parts (an encrypted JWE is not accepted)"));
    }
    if header.is_empty() || payload.is_empty() || signature.is_empty() {
        return Err(JwtError::Malformed("a part is empty"));
    }
    Ok(Parts { signing_input, header, payload, signature })
}

/// One part, base64url-decoded; padding and stray characters are refused.
fn decode_part(part: &str) -> Result<Vec<u8>, JwtError> {
    URL_SAFE_NO_PAD.decode(part).map_err(|_| JwtError::Malformed("a part is not base64url without padding"))
}

/// The decoded JOSE header, with its `typ` and `crit` checked.
fn parse_header(encoded: &str) -> Result<RawHeader, JwtError> {
    let header: RawHeader = serde_json::from_slice(&decode_part(encoded)?)
        .map_err(|_| JwtError::Malformed("the header is not a JSON object with string alg, kid and typ"))?;
    if let Some(typ) = header.typ.as_deref().filter(|typ| !is_jwt_type(typ)) {
        return Err(JwtError::UnsupportedType(clip(typ)));
    }
    if header.crit.is_some() {
        return Err(JwtError::UnsupportedCritical);
    }
    Ok(header)
}

/// Whether a `typ` names a JWT access token: `JWT` or `at+jwt`, any case, `application/` prefix optional
/// (RFC 7515 section 4.1.9 makes `at+jwt` and `application/at+jwt` the same).
fn is_jwt_type(typ: &str) -> bool {
    let bare = match (typ.get(..12), typ.get(12..)) {
        (Some(prefix), Some(rest)) if prefix.eq_ignore_ascii_case("application/") => rest,
        _ => typ,
    };
    bare.eq_ignore_ascii_case("JWT") || bare.eq_ignore_ascii_case("at+jwt")
}

/// The header's algorithm, if it is one this module accepts.
fn header_alg(header: &RawHeader) -> Result<Alg, JwtError> {
    let name = header.alg.as_deref().ok_or(JwtError::Malformed("the header has no alg"))?;
    Alg::from_name(name).ok_or_else(|| JwtError::UnsupportedAlgorithm(clip(name)))
}

/// The keys allowed to check this token: those with its `kid` (if any) whose type fits `alg`.
fn candidate_keys<'k>(keys: &'k Jwks, alg: Alg, kid: Option<&str>) -> Result<Vec<&'k Key>, JwtError> {
    let of_alg = |key: &&Key| key.material.alg() == alg;
    match kid {
        Some(kid) => {
            // A kid is a hint (RFC 7515 4.1.4): the keys it names, and those published
            // without a kid of their own.
            let named: Vec<&Key> = keys.keys.iter().filter(|key| key.kid.as_deref().is_none_or(|own| own == kid)).collect();
            if named.is_empty() {
                return Err(JwtError::UnknownKey(clip(kid)));
            }
            let usable: Vec<&Key> = named.into_iter().filter(of_alg).collect();
            if usable.is_empty() { Err(JwtError::AlgorithmMismatch { alg: alg.name() }) } else { Ok(usable) }
        }
        None => {
            let usable: Vec<&Key> = keys.keys.iter().filter(of_alg).collect();
            if usable.is_empty() { Err(JwtError::NoKeyForAlgorithm(alg.name())) } else { Ok(usable) }
        }
    }
}

/// Check the claims of a token whose signature is good.
fn check_claims(claims: Map<String, Value>, rules: &JwtRules, now_unix: u64) -> Result<Verified, JwtError> {
    let now = i128::from(now_unix);
    let leeway = i128::from(rules.leeway_secs);
    let exp = numeric_date(&claims, "exp", Rounding::Down)?.ok_or(JwtError::MissingClaim("exp"))?;
    if exp.saturating_add(leeway) <= now {
        return Err(JwtError::Expired { expired_at: to_unix(exp) });
    }
    if let Some(nbf) = numeric_date(&claims, "nbf", Rounding::Up)?
        && nbf > now.saturating_add(leeway)
    {
        return Err(JwtError::NotYetValid { not_before: to_unix(nbf) });
    }
    let issuer = required_string(&claims, "iss")?;
    if issuer != rules.issuer {
        return Err(JwtError::WrongIssuer { found: clip(issuer), expected: rules.issuer.clone() });
    }
    check_audience(&claims, &rules.audience)?;
    let subject = required_string(&claims, "sub")?.to_owned();
    let scopes = scopes(&claims)?;
    Ok(Verified { subject, issuer: issuer.to_owned(), expires_at: to_unix(exp), scopes, claims })
}

/// Which way to round a fractional NumericDate: always towards the stricter answer.
#[derive(Clone, Copy)]
enum Rounding {
    Down,
    Up,
}

/// A NumericDate claim (seconds, possibly fractional), if present.
fn numeric_date(claims: &Map<String, Value>, name: &'static str, rounding: Rounding) -> Result<Option<i128>, JwtError> {
    let Some(value) = claims.get(name) else { return Ok(None) };
    let number = value.as_number().ok_or(JwtError::InvalidClaim(name))?;
    if let Some(whole) = number.as_i64() {
        return Ok(Some(i128::from(whole)));
    }
    if let Some(whole) = number.as_u64() {
        return Ok(Some(i128::from(whole)));
    }
    let seconds = number.as_f64().filter(|f| f.is_finite()).ok_or(JwtError::InvalidClaim(name))?;
    let rounded = match rounding {
        Rounding::Down => seconds.floor(),
        Rounding::Up => seconds.ceil(),
    };
    // `as` saturates at the bounds of i128: no overflow, no panic.
    Ok(Some(rounded as i128))
}

/// A Unix time for an error or [`Verified::expires_at`], clamped into `u64`.
fn to_unix(seconds: i128) -> u64 {
    u64::try_from(seconds.max(0)).unwrap_or(u64::MAX)
}

/// A claim that must be a non-empty string.
fn required_string<'c>(claims: &'c Map<String, Value>, name: &'static str) -> Result<&'c str, JwtError> {
    match claims.get(name) {
        None => Err(JwtError::MissingClaim(name)),
        Some(Value::String(text)) if !text.is_empty() => Ok(text),
        Some(_) => Err(JwtError::InvalidClaim(name)),
    }
}

/// `aud` is a string or an array of strings, and contains `expected` exactly.
fn check_audience(claims: &Map<String, Value>, expected: &str) -> Result<(), JwtError> {
    let found = match claims.get("aud") {
        None => return Err(JwtError::MissingClaim("aud")),
        Some(Value::String(aud)) => aud == expected,
        Some(Value::Array(auds)) => {
            if !auds.iter().all(Value::is_string) {
                return Err(JwtError::InvalidClaim("aud"));
            }
            auds.iter().any(|aud| aud.as_str() == Some(expected))
        }
        Some(_) => return Err(JwtError::InvalidClaim("aud")),
    };
    if found { Ok(()) } else { Err(JwtError::WrongAudience { expected: expected.to_owned() }) }
}

/// The granted scopes: `scope` if present, else `scp`; each a space-separated string or an array of strings.
fn scopes(claims: &Map<String, Value>) -> Result<Vec<String>, JwtError> {
    let (name, value) = match (claims.get("scope"), claims.get("scp")) {
        (Some(value), _) => ("scope", value),
        (None, Some(value)) => ("scp", value),
        (None, None) => return Ok(Vec::new()),
    };
    match value {
        Value::String(list) => Ok(list.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()),
        Value::Array(items) => items.iter().map(|item| item.as_str().map(str::to_owned).ok_or(JwtError::InvalidClaim(name))).collect(),
        _ => Err(JwtError::InvalidClaim(name)),
    }
}

/// A token-supplied value cut to [`QUOTE_CHARS`] characters, for quoting (with `{:?}`) in a message.
fn clip(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
    use serde_json::json;

    // RFC 7515 Appendix A.2: the RSA public key (A.2.1) and the complete RS256 JWS (A.2.1, end).
    const A2_N: &str = concat!(
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddx",
        "HmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMs",
        "D1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSH",
        "SXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdV",
        "MTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8",
        "NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ",
    );
    const A2_E: &str = "AQAB";
    const A2_JWS: &str = concat!(
        "eyJhbGciOiJSUzI1NiJ9",
        ".",
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt",
        "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ",
        ".",
        "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7",
        "AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4",
        "BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K",
        "0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqv",
        "hJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrB",
        "p0igcN_IoypGlUPQGe77Rw",
    );
    /// The A.2 payload bytes (RFC 7515 A.1.1, reused by A.2), CRLF line breaks included.
    const A2_PAYLOAD: &[u8] = b"{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}";

    const ISSUER: &str = "https://auth.example.com";
    const AUDIENCE: &str = "https://mcp.example.com";
    const NOW: u64 = 1_700_000_000;

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A test signer: a P-256 or Ed25519 key pair made with ring.
    enum Signer {
        P256(EcdsaKeyPair),
        Ed(Ed25519KeyPair),
    }

    impl Signer {
        fn p256() -> Self {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            Self::P256(EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap())
        }

        fn ed25519() -> Self {
            let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
            Self::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
        }

        fn alg(&self) -> &'static str {
            match self {
                Self::P256(_) => "ES256",
                Self::Ed(_) => "EdDSA",
            }
        }

        fn sign(&self, message: &[u8]) -> Vec<u8> {
            match self {
                Self::P256(pair) => pair.sign(&SystemRandom::new(), message).unwrap().as_ref().to_vec(),
                Self::Ed(pair) => pair.sign(message).as_ref().to_vec(),
            }
        }

        /// The public JWK, with this kid.
        fn jwk(&self, kid: &str) -> Value {
            match self {
                Self::P256(pair) => {
                    let point = pair.public_key().as_ref();
                    assert_eq!(point.len(), 65);
                    json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                           "x": b64(&point[1..33]), "y": b64(&point[33..])})
                }
                Self::Ed(pair) => json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(pair.public_key().as_ref())}),
            }
        }

        /// A token with this header and these claims, signed by this key.
        fn token(&self, header: &Value, claims: &Value) -> String {
            sign_token(header, claims, |input| self.sign(input))
        }

        /// A token with the usual header (`alg` of this key, `typ` at+jwt, this kid) and these claims.
        fn token_with_kid(&self, kid: &str, claims: &Value) -> String {
            self.token(&json!({"alg": self.alg(), "typ": "at+jwt", "kid": kid}), claims)
        }
    }

    fn sign_token(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let signature = sign(input.as_bytes());
        format!("{input}.{}", b64(&signature))
    }

    fn a2_jwk(kid: &str) -> Value {
        json!({"kty": "RSA", "kid": kid, "n": A2_N, "e": A2_E})
    }

    fn jwks(keys: &[Value]) -> Jwks {
        Jwks::parse(json!({ "keys": keys }).to_string().as_bytes()).unwrap()
    }

    fn rules() -> JwtRules {
        JwtRules::new(ISSUER, AUDIENCE)
    }

    fn claims() -> Value {
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "user-42", "exp": NOW + 3600, "iat": NOW, "scope": "tools:read tools:call"})
    }

    /// Claims with one member replaced (or removed, with `Value::Null`).
    fn claims_with(name: &str, value: Value) -> Value {
        let mut claims = claims();
        let map = claims.as_object_mut().unwrap();
        if value.is_null() {
            map.remove(name);
        } else {
            map.insert(name.to_owned(), value);
        }
        claims
    }

    /// A P-256 signer, an Ed25519 signer, and a JWKS with both plus the RFC RSA key.
    fn setup() -> (Signer, Signer, Jwks) {
        let (ec, ed) = (Signer::p256(), Signer::ed25519());
        let keys = jwks(&[ec.jwk("ec-1"), ed.jwk("ed-1"), a2_jwk("rsa-1")]);
        (ec, ed, keys)
    }

    // ---- RFC 7515 A.2 -------------------------------------------------------------------------------------

    #[test]
    fn rfc7515_a2_rs256_signature_verifies() {
        let keys = jwks(&[a2_jwk("2010-12-29")]);
        // The A.2 header has no kid: every RSA key is tried.
        assert_eq!(verified_payload(A2_JWS, &keys).unwrap(), A2_PAYLOAD);
    }

    #[test]
    fn rfc7515_a2_flipped_signature_byte_fails() {
        let keys = jwks(&[a2_jwk("k")]);
        let (input, signature) = A2_JWS.rsplit_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
        for index in [0, 100, bytes.len() - 1] {
            bytes[index] ^= 0x01;
            let token = format!("{input}.{}", b64(&bytes));
            assert!(matches!(verified_payload(&token, &keys), Err(JwtError::BadSignature)), "byte {index}");
            bytes[index] ^= 0x01;
        }
    }

    #[test]
    fn rfc7515_a2_full_verify_passes_signature_then_checks_claims() {
        let keys = jwks(&[a2_jwk("k")]);
        let rules = JwtRules::new("joe", AUDIENCE);
        // Before exp the signature and exp pass; the example has no aud, which is then refused.
        assert!(matches!(verify(A2_JWS, &keys, &rules, 1_300_819_000), Err(JwtError::MissingClaim("aud"))));
        // After exp + leeway: expired.
        assert!(matches!(verify(A2_JWS, &keys, &rules, 1_300_819_441), Err(JwtError::Expired { expired_at: 1_300_819_380 })));
    }

    #[test]
    fn rfc7515_a2_key_with_leading_zero_and_padding_still_verifies() {
        let mut n = vec![0u8];
        n.extend(URL_SAFE_NO_PAD.decode(A2_N).unwrap());
        let padded = base64::engine::general_purpose::URL_SAFE.encode(&n);
        let keys = jwks(&[json!({"kty": "RSA", "n": padded, "e": "AQAB", "alg": "RS256", "use": "sig"})]);
        assert!(verified_payload(A2_JWS, &keys).is_ok());
    }

    // ---- valid tokens -------------------------------------------------------------------------------------

    #[test]
    fn es256_valid_token_passes() {
        let (ec, _, keys) = setup();
        let verified = verify(&ec.token_with_kid("ec-1", &claims()), &keys, &rules(), NOW).unwrap();
        assert_eq!(verified.subject, "user-42");
        assert_eq!(verified.issuer, ISSUER);
        assert_eq!(verified.expires_at, NOW + 3600);
        assert_eq!(verified.scopes, ["tools:read", "tools:call"]);
        assert_eq!(verified.claims.get("iat"), Some(&json!(NOW)));
    }

    #[test]
    fn ed25519_valid_token_passes() {
        let (_, ed, keys) = setup();
        let verified = verify(&ed.token_with_kid("ed-1", &claims()), &keys, &rules(), NOW).unwrap();
        assert_eq!(verified.subject, "user-42");
    }

    #[test]
    fn token_without_kid_tries_each_key_of_its_type() {
        let (first, second) = (Signer::p256(), Signer::p256());
        let keys = jwks(&[first.jwk("a"), second.jwk("b")]);
        let token = second.token(&json!({"alg": "ES256"}), &claims());
        assert!(verify(&token, &keys, &rules(), NOW).is_ok());
        let stranger = Signer::p256().token(&json!({"alg": "ES256"}), &claims());
        assert!(matches!(verify(&stranger, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
    }

    #[test]
    fn token_without_kid_and_no_key_of_its_type_is_refused() {
        let ec = Signer::p256();
        let keys = jwks(&[a2_jwk("rsa")]);
        let token = ec.token(&json!({"alg": "ES256"}), &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::NoKeyForAlgorithm("ES256"))));
    }

    #[test]
    fn typ_variants() {
        let (ec, _, keys) = setup();
        for typ in ["JWT", "jwt", "at+jwt", "AT+JWT", "application/at+jwt", "Application/JWT"] {
            let token = ec.token(&json!({"alg": "ES256", "kid": "ec-1", "typ": typ}), &claims());
            assert!(verify(&token, &keys, &rules(), NOW).is_ok(), "{typ}");
        }
        for typ in ["JWS", "dpop+jwt", "application/", "", "at+jwt ", "application/application/jwt"] {
            let token = ec.token(&json!({"alg": "ES256", "kid": "ec-1", "typ": typ}), &claims());
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::UnsupportedType(_))), "{typ}");
        }
    }

    #[test]
    fn scopes_from_scp_array_or_string() {
        let (ec, _, keys) = setup();
        let with_scp = |scp: Value| {
            claims_with("scope", Value::Null).as_object().cloned().map(|mut m| {
                m.insert("scp".into(), scp);
                Value::Object(m)
            })
        };
        let token = ec.token_with_kid("ec-1", &with_scp(json!(["a", "b"])).unwrap());
        assert_eq!(verify(&token, &keys, &rules(), NOW).unwrap().scopes, ["a", "b"]);
        let token = ec.token_with_kid("ec-1", &with_scp(json!("a  b")).unwrap());
        assert_eq!(verify(&token, &keys, &rules(), NOW).unwrap().scopes, ["a", "b"]);
        let token = ec.token_with_kid("ec-1", &with_scp(json!([1])).unwrap());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::InvalidClaim("scp"))));
        let token = ec.token_with_kid("ec-1", &claims_with("scope", Value::Null));
        assert!(verify(&token, &keys, &rules(), NOW).unwrap().scopes.is_empty());
    }

    // ---- time ---------------------------------------------------------------------------------------------

    #[test]
    fn expired_beyond_leeway_is_refused_within_leeway_passes() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(NOW - 61)));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Expired { expired_at }) if expired_at == NOW - 61));
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(NOW - 60)));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Expired { .. })), "exp must be > now - leeway");
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(NOW - 59)));
        assert!(verify(&token, &keys, &rules(), NOW).is_ok());
        let strict = JwtRules { leeway_secs: 0, ..rules() };
        assert!(matches!(verify(&token, &keys, &strict, NOW), Err(JwtError::Expired { .. })));
        // Fractional and huge values neither panic nor overflow.
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(1.5)));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Expired { expired_at: 1 })));
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(u64::MAX)));
        assert_eq!(verify(&token, &keys, &JwtRules { leeway_secs: u64::MAX, ..rules() }, u64::MAX).unwrap().expires_at, u64::MAX);
        let token = ec.token_with_kid("ec-1", &claims_with("exp", json!(-5)));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Expired { expired_at: 0 })));
    }

    #[test]
    fn nbf_in_the_future_is_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims_with("nbf", json!(NOW + 61)));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::NotYetValid { not_before }) if not_before == NOW + 61));
        let token = ec.token_with_kid("ec-1", &claims_with("nbf", json!(NOW + 60)));
        assert!(verify(&token, &keys, &rules(), NOW).is_ok());
        let token = ec.token_with_kid("ec-1", &claims_with("nbf", json!("soon")));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::InvalidClaim("nbf"))));
    }

    // ---- issuer, audience, subject ------------------------------------------------------------------------

    #[test]
    fn wrong_audience_is_refused() {
        let (ec, _, keys) = setup();
        for aud in [json!("https://other.example.com"), json!("https://mcp.example.com/"), json!(["x", "y"]), json!([])] {
            let token = ec.token_with_kid("ec-1", &claims_with("aud", aud.clone()));
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::WrongAudience { .. })), "{aud}");
        }
        for aud in [json!(5), json!([AUDIENCE, 5]), json!({"a": AUDIENCE})] {
            let token = ec.token_with_kid("ec-1", &claims_with("aud", aud.clone()));
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::InvalidClaim("aud"))), "{aud}");
        }
    }

    #[test]
    fn audience_array_containing_it_passes() {
        let (_, ed, keys) = setup();
        let token = ed.token_with_kid("ed-1", &claims_with("aud", json!(["https://other.example.com", AUDIENCE])));
        assert!(verify(&token, &keys, &rules(), NOW).is_ok());
    }

    #[test]
    fn wrong_issuer_is_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims_with("iss", json!("https://auth.example.com/")));
        let error = verify(&token, &keys, &rules(), NOW).unwrap_err();
        assert!(matches!(&error, JwtError::WrongIssuer { found, expected } if found == "https://auth.example.com/" && expected == ISSUER));
    }

    #[test]
    fn missing_or_mistyped_claims_are_refused() {
        let (ec, _, keys) = setup();
        let cases: [(&str, Value, &str); 7] = [
            ("exp", Value::Null, "exp"),
            ("iss", Value::Null, "iss"),
            ("aud", Value::Null, "aud"),
            ("sub", Value::Null, "sub"),
            ("exp", json!("2030-01-01"), "exp"),
            ("sub", json!(""), "sub"),
            ("sub", json!(42), "sub"),
        ];
        for (name, value, claim) in cases {
            let token = ec.token_with_kid("ec-1", &claims_with(name, value.clone()));
            let error = verify(&token, &keys, &rules(), NOW).unwrap_err();
            let ok = matches!(error, JwtError::MissingClaim(c) | JwtError::InvalidClaim(c) if c == claim);
            assert!(ok, "{name}={value}: {error}");
        }
    }

    #[test]
    fn empty_rules_are_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims());
        assert!(matches!(verify(&token, &keys, &JwtRules::new("", AUDIENCE), NOW), Err(JwtError::InvalidRules("issuer"))));
        assert!(matches!(verify(&token, &keys, &JwtRules::new(ISSUER, ""), NOW), Err(JwtError::InvalidRules("audience"))));
    }

    // ---- signatures, keys, algorithms ---------------------------------------------------------------------

    #[test]
    fn signature_by_another_key_with_the_same_kid_is_refused() {
        let (ec, ed, keys) = setup();
        let forged = Signer::p256().token_with_kid("ec-1", &claims());
        assert!(matches!(verify(&forged, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
        let forged = Signer::ed25519().token_with_kid("ed-1", &claims());
        assert!(matches!(verify(&forged, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
        // The real keys still work.
        assert!(verify(&ec.token_with_kid("ec-1", &claims()), &keys, &rules(), NOW).is_ok());
        assert!(verify(&ed.token_with_kid("ed-1", &claims()), &keys, &rules(), NOW).is_ok());
    }

    #[test]
    fn unknown_kid_is_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-2", &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::UnknownKey(kid)) if kid == "ec-2"));
    }

    #[test]
    fn alg_none_and_hmac_and_others_are_refused() {
        let (ec, _, keys) = setup();
        let body = b64(claims().to_string().as_bytes());
        for alg in ["none", "None", "NONE", "HS256", "HS384", "HS512", "PS256", "ES384", "ES256K", "RS512", "es256", "Ed25519", ""] {
            let header = b64(json!({"alg": alg, "kid": "ec-1"}).to_string().as_bytes());
            for signature in ["", "c2ln"] {
                let token = format!("{header}.{body}.{signature}");
                let error = verify(&token, &keys, &rules(), NOW).unwrap_err();
                let ok = matches!(&error, JwtError::UnsupportedAlgorithm(a) if a == alg)
                    || (signature.is_empty() && matches!(error, JwtError::Malformed(_)));
                assert!(ok, "{alg}: {error}");
            }
            // Even properly signed by an accepted key, the header's alg decides, and it is refused.
            let token = ec.token(&json!({"alg": alg, "kid": "ec-1"}), &claims());
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::UnsupportedAlgorithm(_))), "{alg}");
        }
        let token = ec.token(&json!({"kid": "ec-1"}), &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Malformed(_))));
        let token = ec.token(&json!({"alg": ["ES256"], "kid": "ec-1"}), &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Malformed(_))));
    }

    #[test]
    fn alg_that_does_not_fit_the_named_key_is_refused() {
        let (ec, ed, keys) = setup();
        // ES256 naming the RSA key and the Ed25519 key.
        for kid in ["rsa-1", "ed-1"] {
            let token = ec.token(&json!({"alg": "ES256", "kid": kid}), &claims());
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::AlgorithmMismatch { alg: "ES256" })), "{kid}");
        }
        // EdDSA naming the P-256 key; RS256 naming the P-256 and Ed25519 keys.
        let token = ed.token(&json!({"alg": "EdDSA", "kid": "ec-1"}), &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::AlgorithmMismatch { alg: "EdDSA" })));
        for kid in ["ec-1", "ed-1"] {
            let token = ed.token(&json!({"alg": "RS256", "kid": kid}), &claims());
            assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::AlgorithmMismatch { alg: "RS256" })), "{kid}");
        }
    }

    #[test]
    fn same_kid_on_keys_of_two_types_uses_only_the_fitting_one() {
        let (ec, ed) = (Signer::p256(), Signer::ed25519());
        let keys = jwks(&[ed.jwk("shared"), ec.jwk("shared")]);
        assert!(verify(&ec.token_with_kid("shared", &claims()), &keys, &rules(), NOW).is_ok());
        assert!(verify(&ed.token_with_kid("shared", &claims()), &keys, &rules(), NOW).is_ok());
        // An EdDSA signature presented as ES256 is never checked with the Ed25519 key.
        let token = sign_token(&json!({"alg": "ES256", "kid": "shared"}), &claims(), |input| ed.sign(input));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
    }

    #[test]
    fn tampered_payload_is_refused() {
        let (ec, ed, keys) = setup();
        for signer in [&ec, &ed] {
            let kid = if signer.alg() == "ES256" { "ec-1" } else { "ed-1" };
            let token = signer.token_with_kid(kid, &claims());
            let parts: Vec<&str> = token.split('.').collect();
            let evil = b64(claims_with("sub", json!("admin")).to_string().as_bytes());
            let tampered = format!("{}.{evil}.{}", parts[0], parts[2]);
            assert!(matches!(verify(&tampered, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
            // Tampered header (same alg and kid, extra member) too.
            let header = b64(json!({"alg": signer.alg(), "kid": kid, "x": 1}).to_string().as_bytes());
            let tampered = format!("{header}.{}.{}", parts[1], parts[2]);
            assert!(matches!(verify(&tampered, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
        }
    }

    #[test]
    fn der_encoded_ecdsa_signature_is_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims());
        let (input, signature) = token.rsplit_once('.').unwrap();
        let raw = URL_SAFE_NO_PAD.decode(signature).unwrap();
        // A DER SEQUENCE of two INTEGERs, as some libraries wrongly send.
        let mut der = vec![0x30, 68, 0x02, 32];
        der.extend(&raw[..32]);
        der.extend([0x02, 32]);
        der.extend(&raw[32..]);
        let token = format!("{input}.{}", b64(&der));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
    }

    #[test]
    fn crit_header_is_refused() {
        let (ec, _, keys) = setup();
        let token = ec.token(&json!({"alg": "ES256", "kid": "ec-1", "crit": ["b64"], "b64": false}), &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::UnsupportedCritical)));
    }

    #[test]
    fn embedded_jwk_and_jku_in_header_are_ignored() {
        let (_, _, keys) = setup();
        let attacker = Signer::p256();
        let header = json!({"alg": "ES256", "kid": "ec-1", "jwk": attacker.jwk("ec-1"), "jku": "https://evil.example/jwks"});
        let token = attacker.token(&header, &claims());
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::BadSignature)));
    }

    #[test]
    fn duplicate_header_alg_is_refused() {
        let (ec, _, keys) = setup();
        let header = b64(br#"{"alg":"ES256","kid":"ec-1","alg":"none"}"#);
        let input = format!("{header}.{}", b64(claims().to_string().as_bytes()));
        let token = format!("{input}.{}", b64(&ec.sign(input.as_bytes())));
        assert!(matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::Malformed(_))));
    }

    // ---- shape and size -----------------------------------------------------------------------------------

    #[test]
    fn oversized_token_is_refused_without_decoding() {
        let (_, _, keys) = setup();
        // Not even base64: any decoding would report Malformed instead.
        let token = "!".repeat(MAX_TOKEN_BYTES + 1);
        assert!(
            matches!(verify(&token, &keys, &rules(), NOW), Err(JwtError::TooLarge { len, max }) if len == MAX_TOKEN_BYTES + 1 && max == MAX_TOKEN_BYTES)
        );
        let at_limit = "!".repeat(MAX_TOKEN_BYTES);
        assert!(matches!(verify(&at_limit, &keys, &rules(), NOW), Err(JwtError::Malformed(_))));
    }

    #[test]
    fn big_but_valid_token_under_the_limit_passes() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims_with("pad", json!("x".repeat(10_000))));
        assert!(token.len() < MAX_TOKEN_BYTES);
        assert!(verify(&token, &keys, &rules(), NOW).is_ok());
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims());
        let parts: Vec<&str> = token.split('.').collect();
        let cases = [
            String::new(),
            ".".into(),
            "..".into(),
            "...".into(),
            parts[0].into(),
            format!("{}.{}", parts[0], parts[1]),
            format!("{token}.extra"),
            format!("{}..{}", parts[0], parts[2]),
            format!("{}={}", token, ""),
            format!("{}=.{}.{}", parts[0], parts[1], parts[2]),
            format!(" {token}"),
            format!("Bearer {token}"),
            format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(b"[1,2]"), parts[2]),
            format!("{}.{}.{}", base64::engine::general_purpose::STANDARD.encode(b"{\"alg\":\"ES256\"}?>"), parts[1], parts[2]),
        ];
        for case in cases {
            let result = verify(&case, &keys, &rules(), NOW);
            assert!(matches!(result, Err(JwtError::Malformed(_)) | Err(JwtError::BadSignature)), "{case:?}: {result:?}");
            assert!(result.is_err());
        }
    }

    #[test]
    fn more_than_three_parts_is_malformed() {
        let (ec, _, keys) = setup();
        let token = ec.token_with_kid("ec-1", &claims());
        let parts: Vec<&str> = token.split('.').collect();
        // JWE-shaped (five parts) and four parts, every part valid base64url: refused for its shape.
        for case in [format!("{token}.{}.{}", parts[2], parts[2]), format!("{}.{}.{}.{}", parts[0], parts[1], parts[1], parts[2])] {
            assert!(matches!(verify(&case, &keys, &rules(), NOW), Err(JwtError::Malformed(_))), "{case}");
        }
    }

    #[test]
    fn garbage_and_truncated_tokens_never_panic() {
        let (ec, ed, keys) = setup();
        let good = [ec.token_with_kid("ec-1", &claims()), ed.token_with_kid("ed-1", &claims()), A2_JWS.to_owned()];
        for token in &good {
            for end in 0..token.len() {
                assert!(verify(&token[..end], &keys, &rules(), NOW).is_err());
                assert!(verify(&token[end + 1..], &keys, &rules(), NOW).is_err());
            }
        }
        // Pseudo-random mutations (a fixed xorshift, so failures reproduce).
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet: Vec<char> = "AZaz09-_.=+/ {}\"\\é\u{0}".chars().collect();
        for round in 0..3000 {
            let mut chars: Vec<char> = good[round % good.len()].chars().collect();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() as usize) % chars.len().max(1);
                let c = alphabet[(next() as usize) % alphabet.len()];
                match next() % 3 {
                    0 if !chars.is_empty() => chars[at] = c,
                    1 if !chars.is_empty() => {
                        chars.remove(at);
                    }
                    _ => chars.insert(at.min(chars.len()), c),
                }
            }
            let token: String = chars.into_iter().collect();
            let _ = verify(&token, &keys, &rules(), NOW);
        }
        // Hostile headers and payloads behind a valid-looking structure.
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let headers = [deep.clone(), "null".into(), "1e999".into(), "{\"alg\":\"ES256\",\"kid\":\"ec-1\"".into(), "\u{FEFF}{}".into()];
        for header in headers {
            let token = format!("{}.{}.c2ln", b64(header.as_bytes()), b64(deep.as_bytes()));
            assert!(verify(&token, &keys, &rules(), NOW).is_err());
        }
        // Signed garbage payloads reach the claim parser and fail cleanly.
        for payload in [deep.as_str(), "null", "[]", "{\"exp\":1e999}", "{\"exp\":-1e308}", "\"x\"", ""] {
            let input = format!("{}.{}", b64(json!({"alg": "ES256", "kid": "ec-1"}).to_string().as_bytes()), b64(payload.as_bytes()));
            let token = format!("{input}.{}", b64(&ec.sign(input.as_bytes())));
            assert!(verify(&token, &keys, &rules(), NOW).is_err(), "{payload:.20}");
        }
    }

    #[test]
    fn error_messages_do_not_echo_the_token() {
        let (ec, _, keys) = setup();
        let long_kid = format!("kid\n{}", "k".repeat(500));
        let token = ec.token_with_kid(&long_kid, &claims());
        let message = verify(&token, &keys, &rules(), NOW).unwrap_err().to_string();
        assert!(!message.contains(&token));
        assert!(!message.contains('\n'), "control characters are escaped");
        assert!(message.len() < 400, "{message}");
        let parts: Vec<&str> = token.split('.').collect();
        for part in parts {
            assert!(!message.contains(part));
        }
    }

    // ---- JWKS ---------------------------------------------------------------------------------------------

    #[test]
    fn jwks_unknown_kty_and_unusable_keys_are_skipped() {
        let ec = Signer::p256();
        let keys = jwks(&[
            json!({"kty": "oct", "k": "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}),
            json!({"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"}),
            json!({"kty": "OKP", "crv": "X25519", "x": b64(&[1; 32])}),
            json!({"kty": "RSA", "use": "enc", "n": A2_N, "e": A2_E}),
            json!({"kty": "RSA", "alg": "PS256", "n": A2_N, "e": A2_E}),
            json!({"kty": "RSA", "alg": "RSA-OAEP", "n": A2_N, "e": A2_E}),
            json!({"kty": "RSA", "key_ops": ["encrypt"], "n": A2_N, "e": A2_E}),
            json!({"kty": "RSA", "n": "AQAB", "e": A2_E}),
            json!({"kty": "EC", "crv": "P-256", "x": b64(&[1; 31]), "y": b64(&[1; 32])}),
            json!({"kty": "OKP", "crv": "Ed25519", "alg": "ES256", "x": b64(&[1; 32])}),
            json!({"kty": "OKP", "crv": "Ed25519", "x": "not base64!"}),
            json!({"kty": 7}),
            json!("not an object"),
            json!({"n": A2_N}),
            ec.jwk("good"),
        ]);
        assert_eq!(keys.len(), 1);
        assert!(!keys.is_empty());
        assert_eq!(keys.skipped().len(), 14, "{:?}", keys.skipped());
        assert!(verify(&ec.token_with_kid("good", &claims()), &keys, &rules(), NOW).is_ok());
    }

    #[test]
    fn jwks_with_no_usable_key_is_an_error() {
        for document in
            [json!({"keys": []}), json!({"keys": [{"kty": "oct", "k": "AAAA"}, {"kty": "RSA", "use": "enc", "n": A2_N, "e": A2_E}]})]
        {
            let result = Jwks::parse(document.to_string().as_bytes());
            assert!(matches!(&result, Err(JwtError::Jwks(why)) if why.contains("no usable")), "{result:?}");
        }
    }

    #[test]
    fn jwks_limits_and_shape() {
        let ec = Signer::p256();
        let many: Vec<Value> = (0..=MAX_JWKS_KEYS).map(|i| ec.jwk(&format!("k{i}"))).collect();
        assert!(matches!(Jwks::parse(json!({ "keys": many }).to_string().as_bytes()), Err(JwtError::Jwks(_))));
        assert_eq!(jwks(&many[..MAX_JWKS_KEYS]).len(), MAX_JWKS_KEYS);
        let big = format!("{{\"keys\":[{}],\"pad\":\"{}\"}}", ec.jwk("k"), "x".repeat(MAX_JWKS_BYTES));
        assert!(matches!(Jwks::parse(big.as_bytes()), Err(JwtError::Jwks(why)) if why.contains("bytes")));
        for document in ["", "[]", "{}", "{\"keys\":{}}", "null", "{\"keys\":[1,2]} trailing"] {
            assert!(matches!(Jwks::parse(document.as_bytes()), Err(JwtError::Jwks(_))), "{document}");
        }
    }

    #[test]
    fn jwks_garbage_never_panics() {
        let (ec, ed) = (Signer::p256(), Signer::ed25519());
        let document = json!({"keys": [ec.jwk("a"), ed.jwk("b"), a2_jwk("c")]}).to_string();
        for end in 0..document.len() {
            let _ = Jwks::parse(&document.as_bytes()[..end]);
            let _ = Jwks::parse(&document.as_bytes()[end..]);
        }
        assert_eq!(Jwks::parse(document.as_bytes()).unwrap().len(), 3);
        let _ = Jwks::parse(&[0xff, 0xfe, 0x00]);
    }

    #[test]
    fn jwks_debug_shows_kids_not_key_bytes() {
        let keys = jwks(&[a2_jwk("rsa-1")]);
        let debug = format!("{keys:?}");
        assert!(debug.contains("rsa-1") && debug.contains("RS256"));
        assert!(!debug.contains("161"), "no key bytes: {debug}");
    }
}
