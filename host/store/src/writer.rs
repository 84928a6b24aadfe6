//! [`Writer`]: the background writer of the append-only stores (usage statistics, the
//! audit log), whatever holds them (SQLite, PostgreSQL).
//!
//! It queues rows and writes them on a thread of its own, each batch that gathered for a
//! few milliseconds at once (one transaction), so a call never waits for the disk or the
//! network nor pays to wake a thread; [`Writer::flush`] waits for what was queued before
//! it (and does not wait for the gathering), and dropping the writer drains the queue and
//! joins the thread, so a short-lived process (`skillhost call`) loses nothing. A process
//! killed outright loses the rows of its last few milliseconds.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

enum Message<T> {
    Row(T),
    Flush(Sender<()>),
}

/// How long the writer lets rows gather after the first one of a batch before it writes
/// them, unless a reader is waiting ([`Writer::flush`]) or the writer is dropped. However
/// fast calls come, the writer wakes and commits at most once per interval, and only the
/// row that starts a batch pays for waking it: a call that records a row takes a lock
/// and pushes, nothing more.
pub const GATHER: Duration = Duration::from_millis(10);

/// What the callers and the writer thread share.
struct Queue<T> {
    state: Mutex<Pending<T>>,
    /// Signalled when a batch starts, a reader waits, or the writer is dropped.
    wake: Condvar,
}

struct Pending<T> {
    messages: Vec<Message<T>>,
    /// Readers waiting in [`Writer::flush`]: the batch is written without gathering more.
    waiting: usize,
    closed: bool,
}

/// Rows of type `T` written to one database on a thread of its own.
pub struct Writer<T> {
    queue: Arc<Queue<T>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<T: Send + 'static> Writer<T> {
    /// Start the thread `name` writing with `write`, which gets every batch of rows that
    /// gathered together ([`GATHER`] after its first row). A batch that fails is logged
    /// (naming `target`, the database) and dropped: losing a statistic never fails a call.
    pub fn with_batches<E: std::fmt::Display>(
        name: &str,
        target: String,
        gather: Duration,
        mut write: impl FnMut(&[T]) -> Result<(), E> + Send + 'static,
    ) -> std::io::Result<Self> {
        let queue =
            Arc::new(Queue { state: Mutex::new(Pending { messages: Vec::new(), waiting: 0, closed: false }), wake: Condvar::new() });
        let shared = queue.clone();
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            let mut rows = Vec::new();
            while let Some(batch) = shared.next_batch(gather) {
                let mut done = Vec::new();
                for message in batch {
                    match message {
                        Message::Row(row) => rows.push(row),
                        Message::Flush(waiting) => done.push(waiting),
                    }
                }
                if !rows.is_empty()
                    && let Err(error) = write(&rows)
                {
                    tracing::warn!(%target, %error, "cannot write {} rows", rows.len());
                }
                rows.clear();
                for waiting in done {
                    let _ = waiting.send(());
                }
            }
        })?;
        Ok(Self { queue, thread: Mutex::new(Some(thread)) })
    }

    /// Queue `row`; it is written within [`GATHER`], in order.
    pub fn send(&self, row: T) {
        self.queue.push(Message::Row(row), false);
    }

    /// Wait (at most 10 s) until every row queued before is written.
    pub fn flush(&self) {
        let (done, wait) = channel();
        if self.queue.push(Message::Flush(done), true) {
            let _ = wait.recv_timeout(Duration::from_secs(10));
        }
    }
}

impl<T> Queue<T> {
    /// Queue `message`; wake the writer when it starts a batch, or when `now` (a reader
    /// waits). False once the writer is dropped.
    fn push(&self, message: Message<T>, now: bool) -> bool {
        let mut pending = self.state.lock();
        if pending.closed {
            return false;
        }
        let starts = pending.messages.is_empty();
        pending.messages.push(message);
        pending.waiting += usize::from(now);
        drop(pending);
        if starts || now {
            self.wake.notify_one();
        }
        true
    }

    /// The writer's next batch: everything queued `gather` after its first message (at
    /// once if a reader waits or the writer is dropped); `None` once dropped and drained.
    fn next_batch(&self, gather: Duration) -> Option<Vec<Message<T>>> {
        let mut pending = self.state.lock();
        while pending.messages.is_empty() {
            if pending.closed {
                return None;
            }
            self.wake.wait(&mut pending);
        }
        let until = Instant::now() + gather;
        while pending.waiting == 0 && !pending.closed && !self.wake.wait_until(&mut pending, until).timed_out() {}
        pending.waiting = 0;
        Some(std::mem::take(&mut pending.messages))
    }
}

impl<T> Drop for Writer<T> {
    fn drop(&mut self) {
        // The thread writes what is queued at once, and ends.
        self.queue.state.lock().closed = true;
        self.queue.wake.notify_one();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}
