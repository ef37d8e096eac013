//! SQLite backend: the embedded default.
//!
//! A single file in WAL mode with `synchronous=FULL`. Code map:
//!
//! - `mod.rs` (this file): [`SqliteStore`], opening, connection settings, the
//!   [`InboxStore`] impl (acceptance, ping, close).
//! - `schema.rs`: versioned migrations (`migrations/sqlite/*.sql`), applied at open.
//! - `writer.rs`: the one writer thread and group commit: how acceptances share a
//!   transaction and an fsync, and why no caller hears `Ok` before its commit.
//! - `command.rs`: processing and delivery writes sent to the writer thread.
//! - `processing.rs`, `outbox.rs`: the [`crate::ProcessingStore`] and
//!   [`crate::OutboxStore`] impls.
//! - `payments.rs`: the payments handler's business table.
//! - `read.rs`: the [`crate::InspectStore`] impl, on a small pool of read connections,
//!   off the writer's path.
//! - `checkpoint.rs`: WAL checkpoints on their own thread.
//! - `error.rs`: SQLite failures → [`StoreError`] kinds.
//!
//! Shutdown: [`InboxStore::close`] drops the channel's only sender; the writer drains what is
//! queued, commits it, answers it, and exits; `close` then joins the thread.

mod checkpoint;
mod command;
mod error;
mod jobs;
mod keys;
mod operator;
mod outbox;
mod payments;
mod processing;
mod read;
mod reconcile;
mod retention;
mod schema;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use self::checkpoint::{CheckpointSignal, Checkpointer};
use self::error::from_sqlite;
use self::read::ReadPool;
use self::writer::{Command, Counters, Writer};
use crate::admission::Admission;
use crate::{Acceptance, GroupCommitOptions, InboxStore, NewInboxRow, StoreError};

/// How long a connection waits on a lock held by another connection (or process) before
/// reporting busy. Only the writer takes write locks, so this mainly covers checkpoints and
/// an operator's second process.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 4;

/// Prepared statements cached per connection (the writer uses about six).
const STATEMENT_CACHE: usize = 32;

/// Page cache per connection, KiB (the writer and each pooled reader).
const CACHE_KIB: i64 = 16 * 1024;

/// The SQLite store. Cheap to share behind an `Arc`; see the module docs for its threads.
pub struct SqliteStore {
    path: PathBuf,
    /// The writer's queue; `None` once closed, so later acceptances fail fast. Locked only
    /// around a non-blocking `try_send`, never across an `.await`.
    sender: Mutex<Option<SyncSender<Command>>>,
    /// Joined by `close`, after the queue is drained.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Copies committed WAL pages into the database file off the writer's path; stopped by
    /// `close` after the writer.
    checkpointer: Mutex<Option<Checkpointer>>,
    reads: Arc<ReadPool>,
    /// Whether acceptances are admitted (the writer judges how long rows wait).
    admission: Arc<Admission>,
    /// Shared with the writer; read by [`SqliteStore::commit_stats`].
    counters: Arc<Counters>,
}

/// What group commit has done so far (for the benchmark and tests: `rows / transactions`
/// is the mean batch size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitStats {
    /// Transactions the writer ran (one per batch).
    pub transactions: u64,
    /// Acceptance requests they carried.
    pub rows: u64,
    /// Transactions in which no row succeeded (commit failed, disk full, ...).
    pub failed_transactions: u64,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating the file and its parent directory if needed) and migrates the
    /// database, then starts the writer thread.
    pub fn open(path: &Path, options: GroupCommitOptions) -> Result<SqliteStore, StoreError> {
        if options.max_batch == 0 {
            return Err(StoreError::Config(
                "group commit max_batch must be at least 1".into(),
            ));
        }
        if options.queue_capacity == 0 {
            return Err(StoreError::Config(
                "group commit queue_capacity must be at least 1".into(),
            ));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Unavailable(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        create_private_file(path)?;
        let mut conn = open_write_connection(path)?;
        schema::migrate(&mut conn)?;
        ensure_incremental_vacuum(&conn, path)?;

        let (sender, receiver) = std::sync::mpsc::sync_channel(options.queue_capacity);
        let counters = Arc::new(Counters::default());
        let signal = Arc::new(CheckpointSignal::default());
        let admission = Arc::new(Admission::new(options.max_queue_wait));
        let checkpointer = Checkpointer::start(path.to_path_buf(), Arc::clone(&signal))?;
        let writer = Writer::new(
            path.to_path_buf(),
            conn,
            options.clone(),
            Arc::clone(&counters),
            signal,
            Arc::clone(&admission),
        );
        let handle = std::thread::Builder::new()
            .name("hookgate-sqlite-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the sqlite writer: {e}")))?;
        tracing::info!(
            path = %path.display(),
            group_commit = options.enabled,
            max_batch = options.max_batch,
            queue_capacity = options.queue_capacity,
            "sqlite store open"
        );
        Ok(SqliteStore {
            path: path.to_path_buf(),
            sender: Mutex::new(Some(sender)),
            writer: Mutex::new(Some(handle)),
            checkpointer: Mutex::new(Some(checkpointer)),
            reads: Arc::new(ReadPool::new(path.to_path_buf(), MAX_IDLE_READERS)),
            admission,
            counters,
        })
    }

    /// [`SqliteStore::open`] from a store URL; see [`SqliteStore::path_from_url`].
    pub fn open_url(url: &str, options: GroupCommitOptions) -> Result<SqliteStore, StoreError> {
        Self::open(&Self::path_from_url(url)?, options)
    }

    /// `sqlite://data/hookgate.db` is relative to the working directory,
    /// `sqlite:///var/lib/hookgate/hookgate.db` is absolute. In-memory databases are refused
    /// (they would not survive a restart, and every connection would see its own).
    pub fn path_from_url(url: &str) -> Result<PathBuf, StoreError> {
        let rest = url.strip_prefix("sqlite://").ok_or_else(|| {
            StoreError::Config(
                "a SQLite store URL starts with sqlite:// (sqlite://path/to/file.db)".into(),
            )
        })?;
        if rest.is_empty() || rest.ends_with('/') {
            return Err(StoreError::Config(
                "the SQLite store URL names no file".into(),
            ));
        }
        if rest == ":memory:" || rest.starts_with("file:") || rest.contains("mode=memory") {
            return Err(StoreError::Config(
                "in-memory SQLite databases are not durable".into(),
            ));
        }
        Ok(PathBuf::from(rest))
    }

    /// Group-commit counters since open.
    pub fn commit_stats(&self) -> CommitStats {
        CommitStats {
            transactions: self.counters.transactions.load(Ordering::Relaxed),
            rows: self.counters.rows.load(Ordering::Relaxed),
            failed_transactions: self.counters.failed_transactions.load(Ordering::Relaxed),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs a read on a pooled connection in `spawn_blocking`.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let pool = Arc::clone(&self.reads);
        tokio::task::spawn_blocking(move || pool.with(f))
            .await
            .map_err(|e| StoreError::Unavailable(format!("sqlite read task failed: {e}")))?
    }

    fn writer_running(&self) -> bool {
        let open = self
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        let alive = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|h| !h.is_finished());
        open && alive
    }
}

#[async_trait::async_trait]
impl InboxStore for SqliteStore {
    async fn accept_request(&self, rows: Vec<NewInboxRow>) -> Result<Vec<Acceptance>, StoreError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        {
            let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(sender) = sender.as_ref() else {
                return Err(StoreError::Unavailable("sqlite store is closed".into()));
            };
            // Never block the runtime: more than `max_queue_wait` of queued work, or a full
            // queue, sheds the request (503, provider retries).
            let job = self.admission.admit(rows, reply)?;
            match sender.try_send(Command::Accept(job)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => return Err(StoreError::Overloaded),
                Err(TrySendError::Disconnected(_)) => {
                    return Err(StoreError::Unavailable("sqlite writer has stopped".into()));
                }
            }
        }
        // The writer answers after its commit. A dropped reply means the writer died with the
        // row in hand, so whether it landed is unknown.
        answer.await.map_err(|_| {
            StoreError::CommitUnknown("sqlite writer stopped before answering".into())
        })?
    }

    fn admits(&self) -> bool {
        self.admission.is_open()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        if !self.writer_running() {
            return Err(StoreError::Unavailable(
                "sqlite writer is not running".into(),
            ));
        }
        self.read(read::ping).await
    }

    async fn close(&self) {
        // Dropping the only sender lets the writer drain the queue and exit.
        drop(
            self.sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            match tokio::task::spawn_blocking(move || handle.join()).await {
                Ok(Ok(())) => tracing::info!(path = %self.path.display(), "sqlite store closed"),
                Ok(Err(_)) => tracing::error!("sqlite writer thread panicked"),
                Err(e) => tracing::error!(error = %e, "joining the sqlite writer failed"),
            }
        }
        let checkpointer = self
            .checkpointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut checkpointer) = checkpointer {
            // Joining waits for a checkpoint in progress (file copies and an fsync).
            let _ = tokio::task::spawn_blocking(move || checkpointer.stop()).await;
        }
        self.reads.clear();
    }
}

/// Creates the database file `0600` when it does not exist yet, whatever the umask: it holds
/// sealed payloads, idempotency records and business state. SQLite creates `-wal` and `-shm`
/// with the permissions of the database file, so they are `0600` too. An existing file keeps
/// its permissions (an operator may have chosen them), with a warning when others can read it.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(file) => {
            // `mode` is filtered by the umask, which can only remove bits: set it exactly.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| {
                    StoreError::Unavailable(format!("cannot chmod {}: {e}", path.display()))
                })?;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if let Ok(meta) = std::fs::metadata(path)
                && meta.permissions().mode() & 0o077 != 0
            {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{:o}", meta.permissions().mode() & 0o777),
                    "the database file is readable or writable by others than its owner"
                );
            }
            Ok(())
        }
        Err(e) => Err(StoreError::Unavailable(format!(
            "cannot create {}: {e}",
            path.display()
        ))),
    }
}

/// The writer's connection: WAL, `synchronous=FULL` (every commit is fsynced before anyone is
/// answered), foreign keys, a busy timeout and a statement cache.
/// Retention frees pages in bulk; `auto_vacuum = INCREMENTAL` lets the retention stage hand
/// them back to the file system in small steps (`PRAGMA incremental_vacuum`). A file created
/// before hookgate set it (every database of schema version 6 or older) switches only
/// through a `VACUUM`, which rewrites the whole file once: done here, at the first open by
/// this version, before any other connection exists. It needs free disk space about the
/// size of the file and time in proportion to it; until then (and if it fails) freed pages
/// are still reused by new rows, the file just does not shrink.
fn ensure_incremental_vacuum(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    const INCREMENTAL: i64 = 2;
    let mode = |conn: &Connection| {
        conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))
            .map_err(from_sqlite)
    };
    if mode(conn)? == INCREMENTAL {
        return Ok(());
    }
    let started = std::time::Instant::now();
    tracing::warn!(
        path = %path.display(),
        "sqlite: switching the database to incremental auto-vacuum; VACUUM rewrites the file once"
    );
    conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
        .map_err(from_sqlite)?;
    if mode(conn)? != INCREMENTAL {
        return Err(StoreError::Unavailable(
            "sqlite did not switch to auto_vacuum = INCREMENTAL".into(),
        ));
    }
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "sqlite: incremental auto-vacuum on"
    );
    Ok(())
}

pub(super) fn open_write_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(from_sqlite)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(from_sqlite)?;
    // Only a new, empty file takes it, and only before WAL mode writes its header; an
    // existing file keeps its mode until `ensure_incremental_vacuum`'s VACUUM (and is not
    // written to here: opening must work on a full disk).
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .map_err(from_sqlite)?;
    if pages == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .map_err(from_sqlite)?;
    }
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(from_sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Config(format!(
            "SQLite refused WAL mode (got {mode})"
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(from_sqlite)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(from_sqlite)?;
    // Checkpoints run on their own thread (checkpoint.rs); this is only the backstop.
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .map_err(from_sqlite)?;
    conn.pragma_update(
        None,
        "wal_autocheckpoint",
        checkpoint::WRITER_AUTOCHECKPOINT_BYTES / page_size.max(512),
    )
    .map_err(from_sqlite)?;
    conn.pragma_update(
        None,
        "journal_size_limit",
        checkpoint::JOURNAL_SIZE_LIMIT_BYTES,
    )
    .map_err(from_sqlite)?;
    tune_cache(&conn)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// A larger page cache: sealed payloads span several overflow pages, and workers read rows
/// soon after they were written; with SQLite's default 2 MiB most of those reads were a
/// `pread` and a copy (the largest cost in the profile of the benchmark with workers on).
fn tune_cache(conn: &Connection) -> Result<(), StoreError> {
    conn.pragma_update(None, "cache_size", -CACHE_KIB)
        .map_err(from_sqlite)
}

/// A read connection: same file, `query_only`, never creates it.
pub(super) fn open_read_connection(path: &Path) -> Result<Connection, StoreError> {
    // READ_WRITE (not READ_ONLY) so the WAL index can be updated; `query_only` forbids writes.
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(from_sqlite)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(from_sqlite)?;
    conn.pragma_update(None, "query_only", "ON")
        .map_err(from_sqlite)?;
    tune_cache(&conn)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_forms() {
        assert_eq!(
            SqliteStore::path_from_url("sqlite://data/h.db").unwrap(),
            PathBuf::from("data/h.db")
        );
        assert_eq!(
            SqliteStore::path_from_url("sqlite:///var/h.db").unwrap(),
            PathBuf::from("/var/h.db")
        );
        for bad in [
            "postgres://x/y",
            "sqlite://",
            "sqlite://:memory:",
            "h.db",
            "sqlite://dir/",
        ] {
            assert!(
                matches!(SqliteStore::path_from_url(bad), Err(StoreError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn write_connection_is_wal_and_synchronous_full() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_write_connection(&dir.path().join("p.db")).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 2, "FULL");
        let fk: i64 = conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        // The writer's own checkpoint is only the backstop: 64 MiB whatever the page size.
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        let backstop: i64 = conn
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            backstop * page_size,
            checkpoint::WRITER_AUTOCHECKPOINT_BYTES
        );
    }

    #[test]
    fn zero_sizes_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.db");
        let opts = GroupCommitOptions {
            max_batch: 0,
            ..Default::default()
        };
        assert!(matches!(
            SqliteStore::open(&path, opts),
            Err(StoreError::Config(_))
        ));
        let opts = GroupCommitOptions {
            queue_capacity: 0,
            ..Default::default()
        };
        assert!(matches!(
            SqliteStore::open(&path, opts),
            Err(StoreError::Config(_))
        ));
    }
}
