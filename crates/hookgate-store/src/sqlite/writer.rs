//! The single writer thread and group commit.
//!
//! One `std::thread` owns the only write connection. Callers hand it [`Job`]s over a bounded
//! channel (see `SqliteStore::accept`). The loop blocks for the first job, then drains
//! whatever else is already queued, up to `max_batch` (no timer: batches grow naturally with
//! load, and a lone request is committed at once), and runs them in ONE transaction:
//!
//! ```text
//! BEGIN IMMEDIATE
//!   per row: SAVEPOINT; INSERT .. ON CONFLICT (unique key) DO NOTHING RETURNING inbox_id;
//!            no row returned -> SELECT the existing row's id (Duplicate);
//!            the statement failed -> ROLLBACK TO the savepoint; that row alone gets the error
//! COMMIT   (synchronous=FULL: one fsync for the whole batch)
//! ```
//!
//! Only after COMMIT succeeds is any caller answered with `Ok`. If the transaction is lost
//! (COMMIT fails, or SQLite rolled it back itself after a disk-full or I/O error) every
//! caller of the batch gets an error, never an `Ok` for a row that is not committed.
//! Errors never poison the writer: the transaction is rolled back, and if the connection
//! itself looks broken it is dropped and reopened for the next batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use rusqlite::{Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::error::{from_sqlite, is_environmental};
use super::open_write_connection;
use crate::{Acceptance, GroupCommitOptions, NewInboxRow, StoreError};

/// What the writer thread is asked to do.
// Acceptances are the hot path: kept inline (no allocation per request); the rare
// processing command is the small one.
#[allow(clippy::large_enum_variant)]
pub(super) enum Command {
    /// An acceptance: group-committed with whatever other acceptances are queued.
    Accept(Job),
    /// A processing write (lease, complete, fail, retry; see `processing.rs`): runs alone,
    /// between group-commit batches, in its own short transaction, and answers its caller
    /// itself. Returns whether the connection looks broken. Dropped unrun (so its caller sees
    /// the writer gone) only when no connection can be opened.
    Exec(Box<dyn FnOnce(&Connection) -> bool + Send>),
}

/// One acceptance waiting for the writer.
pub(super) struct Job {
    pub(super) row: NewInboxRow,
    /// Answered only after the batch's commit (or its failure).
    pub(super) reply: oneshot::Sender<Result<Acceptance, StoreError>>,
}

const INSERT_SQL: &str = "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
     event_type, object_id, object_version, provider_created_at, received_at, payload, \
     payload_key_version, payload_digest, matched_secret_version, status, next_attempt_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) \
     ON CONFLICT (provider, endpoint_id, provider_event_id) DO NOTHING \
     RETURNING inbox_id";

const EXISTING_SQL: &str = "SELECT inbox_id FROM inbox WHERE provider = ?1 AND endpoint_id = ?2 AND provider_event_id = ?3";

/// Counters the writer keeps for [`super::SqliteStore::commit_stats`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) transactions: AtomicU64,
    pub(super) rows: AtomicU64,
    pub(super) failed_transactions: AtomicU64,
}

/// State owned by the writer thread.
pub(super) struct Writer {
    path: PathBuf,
    /// `None` after the connection was judged broken; reopened at the next batch.
    conn: Option<Connection>,
    options: GroupCommitOptions,
    counters: Arc<Counters>,
    /// Test hook: make the next COMMIT fail as the `store.commit` failpoint would.
    #[cfg(test)]
    fail_next_commit: bool,
}

impl Writer {
    pub(super) fn new(
        path: PathBuf,
        conn: Connection,
        options: GroupCommitOptions,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            path,
            conn: Some(conn),
            options,
            counters,
            #[cfg(test)]
            fail_next_commit: false,
        }
    }

    /// The thread body: runs until every sender is dropped and the queue is drained.
    pub(super) fn run(mut self, rx: Receiver<Command>) {
        let max_batch = if self.options.enabled {
            self.options.max_batch.max(1)
        } else {
            1
        };
        let mut batch = Vec::with_capacity(max_batch);
        // `recv` keeps returning queued jobs after the last sender is gone, so close drains.
        while let Ok(first) = rx.recv() {
            let mut next = Some(first);
            while let Some(command) = next.take() {
                match command {
                    Command::Exec(f) => self.exec(f),
                    Command::Accept(job) => {
                        batch.push(job);
                        while batch.len() < max_batch {
                            match rx.try_recv() {
                                Ok(Command::Accept(job)) => batch.push(job),
                                // Runs right after this batch, keeping queue order.
                                Ok(other) => {
                                    next = Some(other);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        self.run_batch(&mut batch);
                    }
                }
            }
        }
        tracing::debug!("sqlite writer stopped");
    }

    /// Runs one processing command on the write connection (reopened if needed) and leaves
    /// no transaction open behind it.
    fn exec(&mut self, f: Box<dyn FnOnce(&Connection) -> bool + Send>) {
        if self.conn.is_none() {
            match open_write_connection(&self.path) {
                Ok(conn) => self.conn = Some(conn),
                Err(err) => {
                    tracing::warn!(error = %err, "sqlite writer cannot open its connection");
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        let suspect = f(conn);
        if suspect || !conn.is_autocommit() {
            self.after_failure(suspect);
        }
    }

    /// Runs one group-commit transaction over `batch` and answers every job in it.
    pub(super) fn run_batch(&mut self, batch: &mut Vec<Job>) {
        let started = Instant::now();
        let results = self.execute_batch(batch);
        let rows = batch.len();
        let accepted = results
            .iter()
            .filter(|r| matches!(r, Ok(Acceptance::Accepted { .. })))
            .count();
        let failed = results.iter().filter(|r| r.is_err()).count();
        self.counters.transactions.fetch_add(1, Ordering::Relaxed);
        self.counters.rows.fetch_add(rows as u64, Ordering::Relaxed);
        if failed == rows {
            self.counters
                .failed_transactions
                .fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(
            rows,
            accepted,
            duplicates = rows - accepted - failed,
            failed,
            commit_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "sqlite group commit"
        );
        for (job, result) in batch.drain(..).zip(results) {
            // A caller that went away (request cancelled) no longer needs the answer; its
            // row is committed all the same and a retry converges on it.
            let _ = job.reply.send(result);
        }
    }

    /// Returns one result per job, in order. `Ok` only if the commit succeeded.
    fn execute_batch(&mut self, batch: &[Job]) -> Vec<Result<Acceptance, StoreError>> {
        let all_fail = |err: StoreError| -> Vec<Result<Acceptance, StoreError>> {
            batch.iter().map(|_| Err(clone_error(&err))).collect()
        };
        if self.conn.is_none() {
            match open_write_connection(&self.path) {
                Ok(conn) => self.conn = Some(conn),
                Err(err) => return all_fail(err),
            }
        }
        let Some(conn) = self.conn.as_ref() else {
            return all_fail(StoreError::Unavailable(
                "sqlite writer has no connection".into(),
            ));
        };

        if let Err(err) = conn.execute_batch("BEGIN IMMEDIATE") {
            let broken = is_environmental(&err);
            let out = all_fail(from_sqlite(err));
            self.after_failure(broken);
            return out;
        }

        let mut results = Vec::with_capacity(batch.len());
        let mut broken = false;
        for job in batch {
            match insert_one(conn, &job.row) {
                Ok(acceptance) => results.push(Ok(acceptance)),
                Err(err) => {
                    broken |= is_environmental(&err);
                    tracing::warn!(error = %err, "sqlite accept: row failed, isolated");
                    results.push(Err(from_sqlite(err)));
                    // Disk full, I/O and similar errors may make SQLite roll the whole
                    // transaction back by itself: then the earlier rows are gone too.
                    if conn.is_autocommit() {
                        let out = all_fail(StoreError::Unavailable(
                            "sqlite transaction rolled back after an error".into(),
                        ));
                        self.after_failure(true);
                        return out;
                    }
                    if let Err(err) =
                        conn.execute_batch("ROLLBACK TO accept_row; RELEASE accept_row")
                    {
                        let out = all_fail(from_sqlite(err));
                        self.after_failure(true);
                        return out;
                    }
                }
            }
        }

        let commit_started = Instant::now();
        match self.commit() {
            Ok(()) => {
                tracing::trace!(
                    fsync_us =
                        u64::try_from(commit_started.elapsed().as_micros()).unwrap_or(u64::MAX),
                    "sqlite commit"
                );
                results
            }
            Err((err, conn_broken)) => {
                tracing::error!(error = %err, rows = batch.len(), "sqlite commit failed");
                self.after_failure(broken || conn_broken);
                all_fail(StoreError::CommitUnknown(err))
            }
        }
    }

    /// COMMIT, with the `store.commit` failpoint right before it. The error says whether the
    /// connection should be replaced.
    fn commit(&mut self) -> Result<(), (String, bool)> {
        hookgate_core::fail_point!(
            "store.commit",
            return Err(("failpoint store.commit".to_owned(), false))
        );
        #[cfg(test)]
        if std::mem::take(&mut self.fail_next_commit) {
            return Err(("test hook: commit failed".to_owned(), false));
        }
        let Some(conn) = self.conn.as_ref() else {
            return Err(("sqlite writer has no connection".to_owned(), true));
        };
        conn.execute_batch("COMMIT")
            .map_err(|err| (err.to_string(), is_environmental(&err)))
    }

    /// Leaves no transaction open; drops the connection if it may be unusable, so the next
    /// batch starts from a fresh one (no poisoned state once the disk has space again).
    fn after_failure(&mut self, connection_suspect: bool) {
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        let rolled_back = conn.is_autocommit() || conn.execute_batch("ROLLBACK").is_ok();
        if !rolled_back {
            tracing::warn!("sqlite rollback failed; reopening the connection");
        }
        if connection_suspect || !conn.is_autocommit() {
            // Dropping the connection rolls back anything still open.
            self.conn = None;
        }
    }

    #[cfg(test)]
    pub(super) fn fail_next_commit(&mut self) {
        self.fail_next_commit = true;
    }
}

/// The same failure for every caller of a batch ([`StoreError`] is not `Clone`).
fn clone_error(err: &StoreError) -> StoreError {
    match err {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::CommitUnknown(m) => StoreError::CommitUnknown(m.clone()),
        StoreError::Overloaded => StoreError::Overloaded,
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        StoreError::Config(m) => StoreError::Config(m.clone()),
    }
}

/// One row inside the batch transaction, under its own savepoint (released on success; on
/// error the caller rolls back to it).
fn insert_one(conn: &Connection, row: &NewInboxRow) -> rusqlite::Result<Acceptance> {
    conn.prepare_cached("SAVEPOINT accept_row")?.execute([])?;
    // Rows to process are due at once; ignored rows are never claimed.
    let next_attempt_at = match row.status {
        hookgate_core::InboxStatus::Received => Some(row.received_at_ms),
        _ => None,
    };
    let inserted: Option<String> = conn
        .prepare_cached(INSERT_SQL)?
        .query_row(
            rusqlite::params![
                row.inbox_id,
                row.provider,
                row.endpoint_id,
                row.provider_event_id,
                row.event_type,
                row.object_id,
                row.object_version,
                row.provider_created_at,
                row.received_at_ms,
                row.payload,
                i64::from(row.payload_key_version),
                row.payload_digest,
                row.matched_secret_version,
                row.status.as_str(),
                next_attempt_at,
            ],
            |r| r.get(0),
        )
        .optional()?;
    let acceptance = match inserted {
        Some(inbox_id) => Acceptance::Accepted { inbox_id },
        None => {
            // The unique key is already taken, possibly by an earlier row of this batch.
            let inbox_id: String = conn.prepare_cached(EXISTING_SQL)?.query_row(
                (&row.provider, &row.endpoint_id, &row.provider_event_id),
                |r| r.get(0),
            )?;
            Acceptance::Duplicate { inbox_id }
        }
    };
    conn.prepare_cached("RELEASE accept_row")?.execute([])?;
    Ok(acceptance)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema::migrate;
    use hookgate_core::InboxStatus;

    fn row(inbox_id: &str, event_id: &str) -> NewInboxRow {
        NewInboxRow {
            inbox_id: inbox_id.into(),
            provider: "stripe".into(),
            endpoint_id: "ep".into(),
            provider_event_id: event_id.into(),
            event_type: Some("charge.succeeded".into()),
            object_id: None,
            object_version: None,
            provider_created_at: None,
            received_at_ms: 1,
            payload: vec![1, 2, 3],
            payload_key_version: 1,
            payload_digest: vec![9; 32],
            matched_secret_version: "v1".into(),
            status: InboxStatus::Received,
        }
    }

    fn writer(dir: &tempfile::TempDir) -> Writer {
        let path = dir.path().join("w.db");
        let mut conn = open_write_connection(&path).unwrap();
        migrate(&mut conn).unwrap();
        Writer::new(path, conn, GroupCommitOptions::default(), Arc::default())
    }

    /// Runs one batch and returns the answers in order.
    fn run(w: &mut Writer, rows: Vec<NewInboxRow>) -> Vec<Result<Acceptance, StoreError>> {
        let mut rxs = Vec::new();
        let mut batch: Vec<Job> = rows
            .into_iter()
            .map(|row| {
                let (reply, rx) = oneshot::channel();
                rxs.push(rx);
                Job { row, reply }
            })
            .collect();
        w.run_batch(&mut batch);
        rxs.into_iter()
            .map(|mut rx| rx.try_recv().expect("answered"))
            .collect()
    }

    fn count(w: &Writer) -> i64 {
        w.conn
            .as_ref()
            .unwrap()
            .query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn duplicate_inside_one_batch_gets_first_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        let out = run(
            &mut w,
            vec![
                row("a", "e1"),
                row("b", "e1"),
                row("c", "e2"),
                row("d", "e1"),
            ],
        );
        assert_eq!(
            out[0].as_ref().unwrap(),
            &Acceptance::Accepted {
                inbox_id: "a".into()
            }
        );
        assert_eq!(
            out[1].as_ref().unwrap(),
            &Acceptance::Duplicate {
                inbox_id: "a".into()
            }
        );
        assert_eq!(
            out[2].as_ref().unwrap(),
            &Acceptance::Accepted {
                inbox_id: "c".into()
            }
        );
        assert_eq!(
            out[3].as_ref().unwrap(),
            &Acceptance::Duplicate {
                inbox_id: "a".into()
            }
        );
        assert_eq!(count(&w), 2);
    }

    #[test]
    fn bad_row_is_isolated_from_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        // "a" twice under different keys: the primary key refuses the second row only.
        let out = run(&mut w, vec![row("a", "e1"), row("a", "e2"), row("c", "e3")]);
        assert!(matches!(out[0], Ok(Acceptance::Accepted { .. })));
        assert!(
            matches!(out[1], Err(StoreError::Unavailable(_))),
            "{:?}",
            out[1]
        );
        assert!(matches!(out[2], Ok(Acceptance::Accepted { .. })));
        assert_eq!(count(&w), 2);
        // The refused row's key is free: a retry with a fresh id lands.
        let out = run(&mut w, vec![row("b", "e2")]);
        assert!(matches!(out[0], Ok(Acceptance::Accepted { .. })));
    }

    #[test]
    fn failed_commit_answers_every_caller_with_error_and_writer_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        w.fail_next_commit();
        let out = run(&mut w, vec![row("a", "e1"), row("b", "e1"), row("c", "e2")]);
        assert!(
            out.iter()
                .all(|r| matches!(r, Err(StoreError::CommitUnknown(_)))),
            "{out:?}"
        );
        assert_eq!(count(&w), 0);
        let out = run(&mut w, vec![row("a", "e1"), row("c", "e2")]);
        assert!(
            out.iter()
                .all(|r| matches!(r, Ok(Acceptance::Accepted { .. }))),
            "{out:?}"
        );
        assert_eq!(count(&w), 2);
    }
}
