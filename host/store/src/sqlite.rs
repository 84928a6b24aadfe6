//! The host's SQLite files (`trust.db`, `stats.db`, `audit.db`), opened one way, and the
//! background writer of the append-only ones ([`crate::writer`]).
//!
//! [`connect`] opens a database as every store does: WAL (readers never block the
//! writer), a 5 s busy timeout for the other processes of the same data dir (a `serve` and
//! a `skillhost stats` side by side), and no checkpoint when the process closes it.
//! [`Writer::start`] writes a store's rows on a thread of its own, each batch in one
//! transaction.
//!
//! **A commit is on disk when it returns** (`synchronous = FULL`: the WAL is synced at
//! each commit), so an audit row, an approval, a rejection or a revoked token survives a
//! crash of the process or of the machine from its commit on; only the usage statistics
//! ([`Commit::Written`]) are written without a sync, and survive a crash of the process
//! but not of the machine. Closing a database neither checkpoints it nor removes its WAL:
//! a short-lived command (`skillhost run`) would otherwise pay two syncs and a directory
//! sync per database at exit, and as many again to make the WAL anew at its next start.
//! The WAL is checkpointed at the commit that takes it past [`CHECKPOINT_PAGES`] (SQLite's
//! default is 1,000): the first connection of the next process reads every frame of it
//! again to rebuild its index (the WAL is left behind at each exit, its index with it),
//! which cost 1.2 ms per database at each start, with a full one, and a database that
//! grows with every call (the usage statistics, the audit log) is never far from full.
//!
//! The files are the owner's alone: [`connect`] creates a database 0600 (SQLite gives its
//! `-wal` and `-shm` files the database's mode), tightens an existing one and its `-wal`,
//! `-shm` and `-journal` files to 0600, and takes read and write away from everyone else
//! on the directory holding them. The directory keeps its search bits: on a root host the
//! sandbox's unprivileged uid passes through the data dir to the sandbox work dir inside
//! it, without listing or reading it. The audit log holds every URL a skill reached; the
//! trust store, who approved what.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

/// How far a commit is when it returns (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// On disk: the WAL is synced (`synchronous = FULL`).
    Synced,
    /// Written to the WAL, not synced (`synchronous = NORMAL`): lost if the machine
    /// crashes before the next checkpoint. For statistics only.
    Written,
}

/// The most pages a database's WAL holds before a commit checkpoints it into the
/// database (synced on the writing thread: the writer's for the statistics and the audit
/// log), so that an open reads at most these again (~0.1 ms).
pub const CHECKPOINT_PAGES: u32 = 100;

/// Open (or create) the database at `path`, as every store does, its commits
/// [`Commit::Synced`].
pub fn connect(path: &Path) -> rusqlite::Result<Connection> {
    connect_as(path, Commit::Synced)
}

/// [`connect`] with commits as `commit` says.
pub fn connect_as(path: &Path, commit: Commit) -> rusqlite::Result<Connection> {
    make_private(path).map_err(|e| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("cannot make {} readable by its owner only: {e}", path.display())),
        )
    })?;
    let db = Connection::open(path)?;
    db.busy_timeout(Duration::from_secs(5))?;
    db.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    // Kept in the file: set once, when it is made.
    let mode: String = db.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        db.pragma_update(None, "journal_mode", "WAL")?;
    }
    db.pragma_update(None, "synchronous", if commit == Commit::Synced { "FULL" } else { "NORMAL" })?;
    db.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)?;
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

/// Rows of type `T` written to one SQLite database on a thread of its own
/// ([`crate::writer::Writer`]), each batch in one transaction.
pub type Writer<T> = crate::writer::Writer<T>;

impl<T: Send + 'static> crate::writer::Writer<T> {
    /// Start the thread `name` writing to `db` (at `path`, for its warnings) with `write`,
    /// which gets every row of a batch that gathered together, inside one transaction. A
    /// batch that fails is logged and dropped: losing a statistic never fails a call.
    pub fn start(
        name: &str,
        path: &Path,
        db: Connection,
        write: impl FnMut(&rusqlite::Transaction<'_>, &T) -> rusqlite::Result<()> + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::sqlite(name, path, db, crate::writer::GATHER, write)
    }

    fn sqlite(
        name: &str,
        path: &Path,
        mut db: Connection,
        gather: Duration,
        mut write: impl FnMut(&rusqlite::Transaction<'_>, &T) -> rusqlite::Result<()> + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::with_batches(name, path.display().to_string(), gather, move |rows: &[T]| {
            let tx = db.transaction()?;
            for row in rows {
                write(&tx, row)?;
            }
            tx.commit()
        })
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
        let writer = Writer::sqlite("test-writer", &path, db, Duration::from_secs(600), insert).unwrap();
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

    /// A database written at every call keeps a short WAL: what the next process's first
    /// open reads again is a checkpoint's worth of frames, not every commit since.
    #[test]
    fn the_wal_a_process_leaves_is_short_for_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.db");
        let db = connect_as(&path, Commit::Written).unwrap();
        db.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)").unwrap();
        // One page a commit, as a statistics row is.
        for n in 0..3 * CHECKPOINT_PAGES {
            db.execute("INSERT INTO t (n) VALUES (?1)", [n]).unwrap();
        }
        // Closed as a process exits: no checkpoint (NO_CKPT_ON_CLOSE), the WAL left.
        drop(db);
        let db = connect(&path).unwrap();
        let (busy, frames): (i64, i64) = db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!(busy, 0);
        assert!(
            frames <= i64::from(CHECKPOINT_PAGES) + 1,
            "the open read {frames} frames of WAL again; checkpoints should keep it to {CHECKPOINT_PAGES}"
        );
        assert_eq!(db.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).unwrap(), i64::from(3 * CHECKPOINT_PAGES));
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
