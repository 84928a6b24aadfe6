//! Per-caller quotas on tool calls over HTTP (`[quotas]` of the host config): how many
//! `tools/call` requests a caller may send per minute, and how many of its calls may be in
//! flight at once, on this replica. A call over either is answered `429 Too Many
//! Requests` with `Retry-After` and a JSON-RPC error marked retriable, before any of it
//! runs; a call in flight holds its place until its answer ends (an SSE stream included).
//!
//! The rate is a token bucket per caller: up to `calls_per_minute` calls at once, then
//! one more each `60 / calls_per_minute` seconds. Listings, searches and the rest are not
//! counted: an agent must be able to see why it was refused and when to come back.
//! Limits are per replica: behind a load balancer of N replicas a caller gets up to N
//! times them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// One caller's limits; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    /// `tools/call` requests per minute (a burst of as many, then evenly spread).
    pub calls_per_minute: Option<u32>,
    /// Calls in flight at once.
    pub concurrent_calls: Option<u32>,
}

/// Every caller's limits: the default, and overrides by caller name (each field of an
/// override replaces the default's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaConfig {
    /// Every caller's, unless overridden.
    pub default: Quota,
    /// By caller name (`operator`, a `skillhost caller add` name, an OAuth subject).
    pub callers: BTreeMap<String, Quota>,
}

impl QuotaConfig {
    /// The limits of `caller`.
    pub fn of(&self, caller: &str) -> Quota {
        let own = self.callers.get(caller).copied().unwrap_or_default();
        Quota {
            calls_per_minute: own.calls_per_minute.or(self.default.calls_per_minute),
            concurrent_calls: own.concurrent_calls.or(self.default.concurrent_calls),
        }
    }

    /// Whether no caller has a limit.
    pub fn is_empty(&self) -> bool {
        self.default == Quota::default() && self.callers.values().all(|q| *q == Quota::default())
    }
}

/// Callers whose use is tracked at once; past it, those idle and refilled are forgotten.
const MAX_TRACKED: usize = 1 << 16;

/// What one caller used.
struct Usage {
    /// Calls its bucket holds now (as of `at`).
    tokens: f64,
    at: Instant,
    in_flight: u32,
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OverQuota {
    /// Over `calls_per_minute`; one more call is allowed after `retry_after`.
    Rate { limit: u32, retry_after: Duration },
    /// Over `concurrent_calls`.
    Concurrency { limit: u32 },
    /// Too many callers tracked at once to track one more.
    Busy,
}

impl OverQuota {
    /// Whole seconds to wait before trying again (at least 1).
    pub(crate) fn retry_after_seconds(&self) -> u64 {
        match self {
            OverQuota::Rate { retry_after, .. } => retry_after.as_secs_f64().ceil().max(1.0) as u64,
            OverQuota::Concurrency { .. } | OverQuota::Busy => 1,
        }
    }

    /// What was refused, for `caller`, and how to get more.
    pub(crate) fn describe(&self, caller: &str) -> String {
        let raise = format!("`calls_per_minute` / `concurrent_calls` under `[quotas.callers.\"{caller}\"]` in the host config");
        match self {
            OverQuota::Rate { limit, .. } => format!(
                "caller `{caller}` is over its quota of {limit} tool calls per minute on this replica; nothing of this call ran: retry after {} s (the operator can raise it: {raise})",
                self.retry_after_seconds()
            ),
            OverQuota::Concurrency { limit } => format!(
                "caller `{caller}` already has {limit} tool calls in flight, its quota on this replica; nothing of this call ran: retry when one ends (the operator can raise it: {raise})"
            ),
            OverQuota::Busy => {
                "this replica tracks too many callers' quotas at once; nothing of this call ran: retry in a second".to_owned()
            }
        }
    }
}

/// The quotas in force and every caller's use.
pub(crate) struct Quotas {
    config: QuotaConfig,
    usage: Mutex<HashMap<String, Usage>>,
}

/// Calls admitted and in flight: their places are given back when it is dropped.
pub(crate) struct Held {
    quotas: Arc<Quotas>,
    caller: String,
    calls: u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(usage) = self.quotas.usage.lock().get_mut(&self.caller) {
            usage.in_flight = usage.in_flight.saturating_sub(self.calls);
        }
    }
}

impl Quotas {
    pub(crate) fn new(config: QuotaConfig) -> Arc<Self> {
        Arc::new(Self { config, usage: Mutex::new(HashMap::new()) })
    }

    /// Admit the tool calls of `caller`'s request `body` now, or say why not. `None` when
    /// nothing is held (no limit for this caller, or no call). The body is read only for a
    /// caller with a limit: without quotas no request is parsed twice.
    pub(crate) fn admit(self: &Arc<Self>, caller: &str, body: &[u8]) -> Result<Option<Held>, OverQuota> {
        let quota = self.config.of(caller);
        if quota == Quota::default() {
            return Ok(None);
        }
        match tool_calls(body) {
            0 => Ok(None),
            calls => self.admit_at(caller, calls, quota, Instant::now()).map(Some),
        }
    }

    fn admit_at(self: &Arc<Self>, caller: &str, calls: u32, quota: Quota, now: Instant) -> Result<Held, OverQuota> {
        let capacity = quota.calls_per_minute.map_or(0.0, f64::from);
        let mut usage = self.usage.lock();
        if !usage.contains_key(caller) && usage.len() >= MAX_TRACKED {
            let config = &self.config;
            usage.retain(|name, u| {
                u.in_flight > 0 || refill(u, config.of(name), now) < f64::from(config.of(name).calls_per_minute.unwrap_or(0))
            });
            if usage.len() >= MAX_TRACKED {
                return Err(OverQuota::Busy);
            }
        }
        let entry = usage.entry(caller.to_owned()).or_insert(Usage { tokens: capacity, at: now, in_flight: 0 });
        if let Some(limit) = quota.concurrent_calls
            && entry.in_flight + calls > limit
        {
            return Err(OverQuota::Concurrency { limit });
        }
        if let Some(limit) = quota.calls_per_minute {
            let tokens = refill(entry, quota, now);
            let wanted = f64::from(calls);
            if tokens < wanted {
                let per_second = f64::from(limit) / 60.0;
                return Err(OverQuota::Rate { limit, retry_after: Duration::from_secs_f64((wanted - tokens) / per_second) });
            }
            entry.tokens = tokens - wanted;
            entry.at = now;
        }
        entry.in_flight += calls;
        Ok(Held { quotas: self.clone(), caller: caller.to_owned(), calls })
    }
}

/// The calls `usage`'s bucket holds at `now` under `quota`.
fn refill(usage: &Usage, quota: Quota, now: Instant) -> f64 {
    let Some(limit) = quota.calls_per_minute else { return 0.0 };
    let elapsed = now.saturating_duration_since(usage.at).as_secs_f64();
    (usage.tokens + elapsed * f64::from(limit) / 60.0).min(f64::from(limit))
}

/// How many `tools/call` requests the JSON-RPC `body` holds (one message, or a batch). A
/// body this cannot read is charged as one call: the server refuses it anyway, and no
/// shape read otherwise there may pass uncounted.
pub(crate) fn tool_calls(body: &[u8]) -> u32 {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let is_call = |head: &Head<'_>| head.method.as_deref() == Some("tools/call");
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        // No body: a GET of the notification stream, a DELETE of a session.
        None => 0,
        Some(b'[') => serde_json::from_slice::<Vec<Head<'_>>>(body).map_or(1, |batch| batch.iter().filter(|h| is_call(h)).count() as u32),
        _ => serde_json::from_slice::<Head<'_>>(body).map_or(1, |head| u32::from(is_call(&head))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(default: Quota) -> Arc<Quotas> {
        Quotas::new(QuotaConfig {
            default,
            callers: BTreeMap::from([("ci".to_owned(), Quota { calls_per_minute: Some(600), concurrent_calls: None })]),
        })
    }

    #[test]
    fn a_burst_of_the_rate_then_one_call_per_share_of_the_minute() {
        let q = quotas(Quota { calls_per_minute: Some(60), concurrent_calls: None });
        let quota = q.config.of("a");
        let start = Instant::now();
        let held: Vec<_> = (0..60).map(|_| q.admit_at("a", 1, quota, start).unwrap()).collect();
        drop(held);
        let Err(OverQuota::Rate { limit: 60, retry_after }) = q.admit_at("a", 1, quota, start) else {
            panic!("the 61st call in a burst is refused")
        };
        assert!((retry_after.as_secs_f64() - 1.0).abs() < 1e-6, "{retry_after:?}");
        assert!(q.admit_at("a", 1, quota, start + Duration::from_millis(999)).is_err());
        assert!(q.admit_at("a", 1, quota, start + Duration::from_secs(1)).is_ok(), "one a second comes back");
        assert!(q.admit_at("b", 1, quota, start).is_ok(), "each caller has its own");
    }

    #[test]
    fn calls_in_flight_hold_their_places_until_dropped() {
        let q = quotas(Quota { calls_per_minute: None, concurrent_calls: Some(2) });
        const CALL: &[u8] = br#"{"method":"tools/call"}"#;
        let (a, b) = (q.admit("a", CALL).unwrap(), q.admit("a", CALL).unwrap());
        assert_eq!(q.admit("a", CALL).err(), Some(OverQuota::Concurrency { limit: 2 }));
        assert!(q.admit("a", br#"{"method":"tools/list"}"#).unwrap().is_none(), "a listing is no call");
        drop(a);
        let c = q.admit("a", CALL).unwrap();
        assert!(q.admit("a", CALL).is_err());
        drop((b, c));
        assert!(q.admit("a", br#"[{"method":"tools/call"},{"method":"tools/call"}]"#).is_ok(), "a batch of two takes both places");
    }

    #[test]
    fn an_override_replaces_only_the_fields_it_names() {
        let q = quotas(Quota { calls_per_minute: Some(60), concurrent_calls: Some(4) });
        assert_eq!(q.config.of("ci"), Quota { calls_per_minute: Some(600), concurrent_calls: Some(4) });
        assert_eq!(q.config.of("other"), Quota { calls_per_minute: Some(60), concurrent_calls: Some(4) });
        assert!(QuotaConfig::default().is_empty());
    }

    #[test]
    fn tool_calls_are_counted_in_a_message_or_a_batch() {
        assert_eq!(tool_calls(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#), 1);
        assert_eq!(tool_calls(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), 0);
        assert_eq!(tool_calls(br#" [{"method":"tools/call"},{"method":"ping"},{"method":"tools/call"}]"#), 2);
        assert_eq!(tool_calls(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), 0);
        assert_eq!(tool_calls(br#"{"method":"tools\/call"}"#), 1, "an escaped name is the same name");
        assert_eq!(tool_calls(br#"{"method":"ping","method":"tools/call"}"#), 1, "unreadable: charged");
        assert_eq!(tool_calls(b"not json"), 1);
        assert_eq!(tool_calls(b""), 0, "a GET or DELETE has no body and is no call");
    }
}
