//! [`BodyBudget`]: the host-wide cap on request-body bytes held in memory at once, across
//! every skill, runtime and egress proxy. A request body is buffered whole before it is
//! sent (so the server gets a `Content-Length` and the audit log an exact size); each
//! byte is reserved here before it is read, and released as it is sent or when the
//! request ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The host-wide budget of request-body bytes held in memory at once. Cheap to clone;
/// clones share the budget, so one [`NetConfig`](crate::NetConfig) (and every skill and
/// proxy using it) shares one. A body whose length is known reserves it whole before its
/// first byte is read; a body of unknown length (chunked) reserves as it arrives. A
/// reservation that does not fit waits at most [`BodyBudget::wait`], then the request is
/// refused.
#[derive(Clone)]
pub struct BodyBudget {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    wait: Duration,
    bytes: Arc<Semaphore>,
    peak: AtomicUsize,
}

impl std::fmt::Debug for BodyBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyBudget")
            .field("capacity", &self.inner.capacity)
            .field("wait", &self.inner.wait)
            .field("held", &self.held())
            .finish()
    }
}

impl Default for BodyBudget {
    /// 64 MiB, waiting at most 5 s for room.
    fn default() -> Self {
        Self::new(64 << 20, Duration::from_secs(5))
    }
}

/// A reservation did not fit in the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shortfall {
    /// More than the whole budget: it can never fit.
    OverCapacity,
    /// No room within the wait.
    Timeout,
}

impl BodyBudget {
    /// A budget of `capacity` bytes; a reservation waits at most `wait` for room.
    pub fn new(capacity: usize, wait: Duration) -> Self {
        let capacity = capacity.min(Semaphore::MAX_PERMITS);
        let inner = Inner { capacity, wait, bytes: Arc::new(Semaphore::new(capacity)), peak: AtomicUsize::new(0) };
        Self { inner: Arc::new(inner) }
    }

    /// Its size in bytes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// How long a reservation waits for room before the request is refused.
    pub fn wait(&self) -> Duration {
        self.inner.wait
    }

    /// Bytes reserved now.
    pub fn held(&self) -> usize {
        self.inner.capacity - self.inner.bytes.available_permits().min(self.inner.capacity)
    }

    /// The most bytes reserved at once since the budget was made.
    pub fn peak(&self) -> usize {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// Reserve `bytes`, waiting at most [`BodyBudget::wait`] for room.
    pub(crate) async fn reserve(&self, bytes: usize) -> Result<Reservation, Shortfall> {
        if bytes == 0 {
            return Ok(Reservation(None));
        }
        if bytes > self.inner.capacity {
            return Err(Shortfall::OverCapacity);
        }
        // `bytes` is at most the capacity, itself checked by the caller against the
        // request cap (16 MiB), so it fits a u32.
        let n = u32::try_from(bytes).map_err(|_| Shortfall::OverCapacity)?;
        let acquire = self.inner.bytes.clone().acquire_many_owned(n);
        match tokio::time::timeout(self.inner.wait, acquire).await {
            Ok(Ok(permit)) => {
                self.inner.peak.fetch_max(self.held(), Ordering::Relaxed);
                Ok(Reservation(Some(permit)))
            }
            // The semaphore is never closed.
            Ok(Err(_)) | Err(_) => Err(Shortfall::Timeout),
        }
    }
}

/// Bytes reserved in a [`BodyBudget`], released when dropped.
#[derive(Debug, Default)]
pub(crate) struct Reservation(Option<OwnedSemaphorePermit>);

impl Reservation {
    /// Bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Add `other` to it.
    pub(crate) fn merge(&mut self, other: Self) {
        match (&mut self.0, other.0) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// Give back up to `bytes` of it.
    pub(crate) fn release(&mut self, bytes: usize) {
        let Some(permit) = &mut self.0 else { return };
        if bytes >= permit.num_permits() {
            self.0 = None;
        } else {
            drop(permit.split(bytes));
        }
    }
}
