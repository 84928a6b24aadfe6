//! The host's SQLite files (`trust.db`, `stats.db`, `audit.db`), opened one way, and the
//! background writer the append-only ones share.
//!
//! [`connect`] opens a database as every store does: WAL (readers never block the
//! writer), `synchronous = NORMAL`, a 5 s busy timeout for the other processes of the same
//! data dir (a `serve` and a `skillhost stats` side by side). [`Writer`] queues rows and
//! writes them on a thread of its own, each batch that gathered for a few milliseconds in
//! one transaction, so a call never waits for the disk nor pays to wake a thread;
//! [`Writer::flush`] waits for what was queued before it (and does not wait for the
//! gathering), and dropping the writer drains the queue and joins the thread, so a
//! short-lived process (`skillhost call`) loses nothing. A process killed outright loses
//! the rows of its last few milliseconds.
//!
//! The files are the owner's alone: [`connect`] creates a database 0600 (SQLite gives its
//! `-wal` and `-shm` files the database's mode), tightens an existing one and its `-wal`,
//! `-shm` and `-journal` files to 0600, and takes read and write away from everyone else
//! on the directory holding them. The directory keeps its search bits: on a root host the
//! sandbox's unprivileged uid passes through the data dir to the sandbox work dir inside
//! it, without listing or reading it. The audit log holds every URL a skill reached; the
//! trust store, who approved what.

use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// Open (or create) the database at `path`, as every store does.
pub fn connect(path: &Path) -> rusqlite::Result<Connection> {
    make_private(path).map_err(|e| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("cannot make {} readable by its owner only: {e}", path.display())),
        )
    })?;
    let db = Connection::open(path)?;
    db.busy_timeout(Duration::from_secs(5))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(db)
}

/// Create the database file 0600 if missing; make it and SQLite's side files 0600 and
/// its directory unreadable and unwritable by others (see the module doc).
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let tighten = |path: &Path, keep: u32| -> std::io::Result<()> {
        let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
        if mode & !keep != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & keep))?;
        }
        Ok(())
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: a directory of someone else's (a shared data dir) stays as it is.
        if let Err(error) = tighten(dir, 0o7711) {
            tracing::warn!(dir = %dir.display(), %error, "cannot take read access to the data dir away from other users");
        }
    }
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        match tighten(Path::new(&side), 0o600) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

enum Message<T> {
    Row(T),
    Flush(Sender<()>),
}

/// How long the writer lets rows gather after the first one of a batch before it writes
/// them, unless a reader is waiting ([`Writer::flush`]) or the writer is dropped. However
/// fast calls come, the writer wakes and commits at most once per interval, and only the
/// row that starts a batch pays for waking it: a call that records a row takes a lock
/// and pushes, nothing more.
const GATHER: Duration = Duration::from_millis(10);

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
    /// Start the thread `name` writing to `db` (at `path`, for its warnings) with `write`,
    /// which gets every batch of rows that gathered together and runs inside one
    /// transaction. A batch that fails is logged and dropped: losing a statistic never
    /// fails a call.
    pub fn start(
        name: &str,
        path: &Path,
        db: Connection,
        write: impl FnMut(&rusqlite::Transaction<'_>, &T) -> rusqlite::Result<()> + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::start_gathering(name, path, db, GATHER, write)
    }

    fn start_gathering(
        name: &str,
        path: &Path,
        mut db: Connection,
        gather: Duration,
        mut write: impl FnMut(&rusqlite::Transaction<'_>, &T) -> rusqlite::Result<()> + Send + 'static,
    ) -> std::io::Result<Self> {
        let queue =
            Arc::new(Queue { state: Mutex::new(Pending { messages: Vec::new(), waiting: 0, closed: false }), wake: Condvar::new() });
        let path: PathBuf = path.to_owned();
        let shared = queue.clone();
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            while let Some(batch) = shared.next_batch(gather) {
                let written = db.transaction().and_then(|tx| {
                    for message in &batch {
                        if let Message::Row(row) = message {
                            write(&tx, row)?;
                        }
                    }
                    tx.commit()
                });
                if let Err(error) = written {
                    tracing::warn!(path = %path.display(), %error, "cannot write {} rows", batch.len());
                }
                for message in batch {
                    if let Message::Flush(done) = message {
                        let _ = done.send(());
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_written_in_order_and_none_is_lost_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let db = connect(&path).unwrap();
        db.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)").unwrap();
        let writer =
            Writer::start("test-writer", &path, db, |tx, n: &i64| tx.execute("INSERT INTO t (n) VALUES (?1)", [n]).map(drop)).unwrap();
        for n in 0..100 {
            writer.send(n);
        }
        writer.flush();
        let count = |db: &Connection| db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(count(&connect(&path).unwrap()), 100, "flush waits for what was queued");
        for n in 100..200 {
            writer.send(n);
        }
        drop(writer);
        let db = connect(&path).unwrap();
        assert_eq!(count(&db), 200, "dropping the writer drains its queue");
        let in_order: Vec<i64> =
            db.prepare("SELECT n FROM t ORDER BY rowid").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        assert_eq!(in_order, (0..200).collect::<Vec<_>>());
    }

    /// Rows gather before they are written, so a stream of calls wakes the writer once per
    /// batch, not once per row; a reader's flush does not wait for the gathering.
    #[test]
    fn rows_gather_into_one_batch_and_a_flush_writes_them_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let db = connect(&path).unwrap();
        db.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)").unwrap();
        let insert = |tx: &rusqlite::Transaction<'_>, n: &i64| tx.execute("INSERT INTO t (n) VALUES (?1)", [n]).map(drop);
        let writer = Writer::start_gathering("test-writer", &path, db, Duration::from_secs(600), insert).unwrap();
        let count = || connect(&path).unwrap().query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).unwrap();
        for n in 0..100 {
            writer.send(n);
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(count(), 0, "rows wait for the rest of their batch: the writer was not woken for each");
        writer.flush();
        assert_eq!(count(), 100, "a flush writes what gathered, without waiting for the interval");
        writer.send(100);
        drop(writer);
        assert_eq!(count(), 101, "dropping the writer writes what gathered at once");
    }

    /// The databases of the data dir (trust, audit, stats) are the owner's alone, and so
    /// are SQLite's side files; files an older host left readable are tightened at open.
    #[test]
    fn databases_and_their_side_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let data = tempfile::tempdir().unwrap();
        std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = data.path().join("audit.db");
        let db = connect(&path).unwrap();
        db.execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1)").unwrap();
        for file in ["audit.db", "audit.db-wal", "audit.db-shm"] {
            assert_eq!(mode(&data.path().join(file)), 0o600, "{file}");
        }
        assert_eq!(mode(data.path()), 0o711, "others may pass through the data dir, not list or read it");
        drop(db);

        // A database an older host made with the umask's 0644, open in WAL mode.
        let old = data.path().join("trust.db");
        let before = Connection::open(&old).unwrap();
        before.pragma_update(None, "journal_mode", "WAL").unwrap();
        before.execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1)").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        for file in ["trust.db-wal", "trust.db-shm"] {
            std::fs::set_permissions(data.path().join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let db = connect(&old).unwrap();
        db.execute_batch("INSERT INTO t VALUES (2)").unwrap();
        drop(before);
        for file in ["trust.db", "trust.db-wal", "trust.db-shm"] {
            assert_eq!(mode(&data.path().join(file)), 0o600, "{file}");
        }
    }
}
