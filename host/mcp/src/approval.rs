//! The `requestState` of an approval question asked of a 2026-07-28 client.
//!
//! Over the 2026-07-28 protocol a human's answer to an approval question comes back in a
//! retried `tools/call`, with the `requestState` the server sent. That string is all that
//! ties the answer to the question, and it passes through the client, so it is a token
//! the server checks without trusting anyone who holds it: HMAC-SHA256, keyed with 32
//! bytes drawn from the OS when the server starts (never stored, so a restart voids every
//! open question), or with the shared keys of `[state] keys` (the first signs, each
//! verifies: a question one replica asked is answered on any), over exactly what was
//! asked — the MCP session, the skill, the content hash and capability digest shown —
//! plus a random nonce and an expiry (10 minutes by default). A token is good once: its
//! nonce is kept until it is answered or expires, and where replicas share a state store
//! its first use is claimed there ([`CallClaims`]), so no two replicas take one answer.
//!
//! A token that is forged, altered, from another server process, sent by another
//! session, for another skill, expired or already answered is refused with the reason
//! ([`StateError`]), and nothing is recorded.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use skillhost_registry::{CallClaims, Claim};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

/// The token's version and the MAC's domain separator.
const VERSION: &str = "v1";
/// Longest token accepted, in bytes: longer is not one of ours, and is not decoded.
const MAX_TOKEN: usize = 2048;
/// Most questions open at once, over all sessions: bounds the memory of nonces.
const MAX_OPEN: usize = 4096;

/// What a human was asked: an approval of exactly this version of this skill, by the
/// session that called it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Asked {
    /// The MCP session that was asked (see `SkillhostMcp::session_key`).
    #[serde(rename = "s")]
    pub session: String,
    /// The skill.
    #[serde(rename = "k")]
    pub skill: String,
    /// Its content hash when asked.
    #[serde(rename = "h")]
    pub content_hash: String,
    /// Its capability digest when asked.
    #[serde(rename = "d")]
    pub capability_digest: String,
    /// For a question about one call (an org policy's `@require_approval`), not the
    /// skill: the call's hash (its tool and arguments). An answer to one kind of question
    /// never answers the other.
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// The signed part of a token.
#[derive(Serialize, Deserialize)]
struct Payload {
    /// Random, hex: what makes a token single-use.
    #[serde(rename = "n")]
    nonce: String,
    /// Unix time in milliseconds after which the answer is refused.
    #[serde(rename = "e")]
    expires: u64,
    #[serde(flatten)]
    asked: Asked,
}

/// Why a `requestState` was refused. Nothing is recorded in any case.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateError {
    /// Not a token this server process made: forged, altered, or from before a restart.
    #[error(
        "requestState refused: it is not an approval question this skillhost asked (forged, altered, or from before a restart); \
         call the tool again without requestState to be asked again"
    )]
    NotOurs,
    /// Past its expiry.
    #[error("requestState refused: the approval question expired (it is good for {0:?}); call the tool again to be asked again")]
    Expired(Duration),
    /// Issued to another MCP session.
    #[error("requestState refused: it was issued to another MCP session, and only the session that was asked can answer")]
    OtherSession,
    /// Issued for another skill.
    #[error("requestState refused: it asks about skill `{asked}`, not `{called}`")]
    OtherSkill {
        /// The skill of the question.
        asked: String,
        /// The skill called.
        called: String,
    },
    /// Answered already.
    #[error(
        "requestState refused: this approval question was already answered (a requestState is good once); call the tool again to be asked again"
    )]
    Used,
    /// Too many questions open.
    #[error(
        "too many unanswered approval questions ({MAX_OPEN}); answer them or let them expire, or run `skillhost approve NAME` in a terminal"
    )]
    TooMany,
    /// The shared state store where a token's first use is claimed did not answer.
    #[error("the approval answer cannot be checked now: the state store did not answer ({0}); answer the question again in a moment")]
    Store(String),
    /// No key: the OS random source failed when the server started.
    #[error("approval questions are unavailable: the OS random source failed; run `skillhost approve NAME` in a terminal")]
    NoRandom,
}

/// Issues and redeems approval tokens for one server process (all its sessions), or for
/// the replicas sharing its keys and claims.
pub(crate) struct Approvals {
    /// The signing key first, then those that only verify.
    keys: Vec<hmac::Key>,
    /// Where a token's first use is claimed when replicas share keys.
    claims: Option<Arc<dyn CallClaims>>,
    random: SystemRandom,
    ttl: Duration,
    /// Nonces of the questions not answered yet, with their expiry.
    open: Mutex<HashMap<String, u64>>,
}

impl Approvals {
    /// A fresh key from the OS; questions are good for `ttl`.
    #[cfg(test)]
    pub fn new(ttl: Duration) -> Self {
        Self::shared(ttl, &[], None)
    }

    /// Keyed with `keys` (the first signs; a fresh key from the OS when empty), a token's
    /// first use claimed in `claims` when given; questions are good for `ttl`.
    pub fn shared(ttl: Duration, keys: &[Vec<u8>], claims: Option<Arc<dyn CallClaims>>) -> Self {
        let random = SystemRandom::new();
        let mut keys: Vec<hmac::Key> = keys.iter().map(|k| hmac::Key::new(hmac::HMAC_SHA256, k)).collect();
        if keys.is_empty() {
            let mut bytes = [0u8; 32];
            match random.fill(&mut bytes) {
                Ok(()) => keys.push(hmac::Key::new(hmac::HMAC_SHA256, &bytes)),
                Err(_) => tracing::warn!("the OS random source failed: approvals through MCP elicitation are off"),
            }
        }
        Self { keys, claims, random, ttl, open: Mutex::default() }
    }

    /// The `requestState` for asking `asked`.
    pub fn issue(&self, asked: Asked) -> Result<String, StateError> {
        let key = self.keys.first().ok_or(StateError::NoRandom)?;
        let mut nonce = [0u8; 16];
        self.random.fill(&mut nonce).map_err(|_| StateError::NoRandom)?;
        let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let now = now_ms();
        let expires = now.saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX));
        {
            let mut open = self.open.lock();
            open.retain(|_, until| *until >= now);
            if open.len() >= MAX_OPEN {
                return Err(StateError::TooMany);
            }
            open.insert(nonce.clone(), expires);
        }
        let payload = serde_json::to_vec(&Payload { nonce, expires, asked }).map_err(|_| StateError::NotOurs)?;
        let body = format!("{VERSION}.{}", URL_SAFE_NO_PAD.encode(payload));
        let tag = hmac::sign(key, body.as_bytes());
        Ok(format!("{body}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref())))
    }

    /// Check `token`, sent by `session` in a call of `skill`, and use it up: what the
    /// human was asked. A token refused for its session or skill stays usable by the
    /// session it was issued to.
    pub fn redeem(&self, token: &str, session: &str, skill: &str) -> Result<Asked, StateError> {
        if self.keys.is_empty() {
            return Err(StateError::NoRandom);
        }
        if token.len() > MAX_TOKEN {
            return Err(StateError::NotOurs);
        }
        let (body, tag) = token.rsplit_once('.').ok_or(StateError::NotOurs)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| StateError::NotOurs)?;
        // Constant time; nothing of the body is read before it is known to be ours.
        if !self.keys.iter().any(|key| hmac::verify(key, body.as_bytes(), &tag).is_ok()) {
            return Err(StateError::NotOurs);
        }
        let encoded = body.strip_prefix(VERSION).and_then(|b| b.strip_prefix('.')).ok_or(StateError::NotOurs)?;
        let payload: Payload =
            URL_SAFE_NO_PAD.decode(encoded).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).ok_or(StateError::NotOurs)?;
        let now = now_ms();
        if now > payload.expires {
            self.open.lock().remove(&payload.nonce);
            return Err(StateError::Expired(self.ttl));
        }
        if payload.asked.session != session {
            return Err(StateError::OtherSession);
        }
        if payload.asked.skill != skill {
            return Err(StateError::OtherSkill { asked: payload.asked.skill, called: skill.to_owned() });
        }
        let asked_here = self.open.lock().remove(&payload.nonce).is_some();
        match &self.claims {
            // Asked by any replica: the first to claim the nonce takes the answer.
            Some(claims) => match claims.claim(&format!("approval-nonce\u{1f}{}", payload.nonce)) {
                Ok(Claim::New) => {}
                Ok(_) => return Err(StateError::Used),
                Err(error) => return Err(StateError::Store(error.to_string())),
            },
            None if !asked_here => return Err(StateError::Used),
            None => {}
        }
        Ok(payload.asked)
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(session: &str) -> Asked {
        Asked { session: session.into(), skill: "gated".into(), content_hash: "h".into(), capability_digest: "d".into(), call: None }
    }

    #[test]
    fn a_token_is_good_once_for_its_session_and_skill() {
        let approvals = Approvals::new(Duration::from_secs(600));
        let token = approvals.issue(asked("s1")).unwrap();
        assert_eq!(approvals.redeem(&token, "s2", "gated"), Err(StateError::OtherSession));
        assert!(matches!(approvals.redeem(&token, "s1", "other"), Err(StateError::OtherSkill { .. })));
        assert_eq!(approvals.redeem(&token, "s1", "gated"), Ok(asked("s1")), "refusals to others did not use it up");
        assert_eq!(approvals.redeem(&token, "s1", "gated"), Err(StateError::Used));
    }

    #[test]
    fn forged_altered_and_foreign_tokens_are_not_ours() {
        let approvals = Approvals::new(Duration::from_secs(600));
        let token = approvals.issue(asked("s1")).unwrap();
        // Re-sign another session's payload without the key: the tag no longer matches.
        let (body, tag) = token.rsplit_once('.').unwrap();
        let payload = URL_SAFE_NO_PAD.decode(body.strip_prefix("v1.").unwrap()).unwrap();
        let forged = String::from_utf8(payload).unwrap().replace("\"s1\"", "\"s2\"");
        let forged = format!("v1.{}.{tag}", URL_SAFE_NO_PAD.encode(forged));
        assert_eq!(approvals.redeem(&forged, "s2", "gated"), Err(StateError::NotOurs));
        let other = Approvals::new(Duration::from_secs(600));
        assert_eq!(other.redeem(&token, "s1", "gated"), Err(StateError::NotOurs), "another process's key");
        for junk in ["", "approval-1-0", "v1.", "v1..", ".", &"a".repeat(5000), "v1.e30.AAAA"] {
            assert_eq!(approvals.redeem(junk, "s1", "gated"), Err(StateError::NotOurs), "{junk:?}");
        }
        assert_eq!(approvals.redeem(&token, "s1", "gated"), Ok(asked("s1")));
    }

    #[test]
    fn tokens_expire() {
        let approvals = Approvals::new(Duration::from_millis(1));
        let token = approvals.issue(asked("s1")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(approvals.redeem(&token, "s1", "gated"), Err(StateError::Expired(_))));
        assert!(approvals.open.lock().is_empty(), "an expired question is forgotten");
    }
}
