//! [`CallClaims`]: calls that run at most once across the hosts sharing a state store.
//!
//! A client that may send a call again (its connection dropped, a balancer answered
//! 502, a replica was draining) names the call with a key; the first host to claim the
//! key runs it and keeps its answer, and a call that comes again with that key, on any
//! replica, gets the kept answer instead of running a second time. A claim whose host
//! stopped while the call ran (killed, crashed) can be neither answered nor run again:
//! whether the call had its effect is unknown, and saying so is the only answer that
//! never runs it twice ([`Claim::Interrupted`]).

use crate::error::StoreError;

/// What a claim of a call's key found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This host claimed it: run the call, then [`CallClaims::finish`] it.
    New,
    /// It ran; its kept answer.
    Done(String),
    /// It runs now on `replica`, which is alive: wait and claim again.
    Running {
        /// The host running it.
        replica: String,
    },
    /// `replica` claimed it and stopped answering before it finished.
    Interrupted {
        /// The host that stopped.
        replica: String,
    },
}

/// Claims of calls by key, shared by the hosts of one state store.
pub trait CallClaims: Send + Sync {
    /// Claim `key` for this host, or find what became of it.
    fn claim(&self, key: &str) -> Result<Claim, StoreError>;

    /// Keep `answer` as the answer of `key`, claimed by this host.
    fn finish(&self, key: &str, answer: &str) -> Result<(), StoreError>;
}
