//! The single writer thread and group commit.
//!
//! One `std::thread` owns the only write connection. Callers hand it [`QueuedAcceptance`]s
//! over a bounded channel (see `SqliteStore::accept`). The loop blocks for the first job,
//! then drains whatever else is already queued, up to `max_batch` (no timer: batches grow
//! naturally with load, and a lone request is committed at once), and runs them in ONE
//! transaction:
//!
//! ```text
//! BEGIN IMMEDIATE
//!   per unit (one request's rows), per row, in order:
//!            INSERT .. ON CONFLICT (unique key) DO NOTHING;
//!            nothing inserted -> SELECT the existing row's id (Duplicate); a row to process
//!              whose stored copy is IGNORED (the allow-list admits it now) -> that copy back
//!              to RECEIVED, due now (still Duplicate);
//!            inserted, with a replay digest -> claim (endpoint, digest) in replay_digests
//!              unless a live claim holds it; held -> DELETE the row again (ReplaySuspected,
//!              the claimant's id);
//!            inserted (and kept) -> INSERT its sealed payload into inbox_payload (Accepted);
//!   a statement failed -> ROLLBACK, BEGIN IMMEDIATE, and the units again, each under a
//!            SAVEPOINT this time: a failing unit is rolled back to its savepoint (every
//!            row of it) and alone gets the error
//!   then the processing commands, each under its own savepoint
//! COMMIT   (synchronous=FULL: one fsync for the whole batch)
//! ```
//!
//! A unit counts as its rows towards `max_batch` and is never split across transactions;
//! the single writer makes the key and digest checks atomic with the inserts.
//!
//! The first pass takes no savepoints because a savepoint makes SQLite copy every page a row
//! touches into its sub-journal first (measured: ~5 % of the writer's time); nothing of the
//! batch is answered before COMMIT, so starting the batch over is always safe.
//!
//! Processing and delivery commands (lease, complete, fail, mark; see `command.rs`) queued
//! beside acceptances run in the same transaction, after them, each under its own savepoint,
//! so the workers' writes share the fsync instead of adding one per event in front of
//! acceptances.
//!
//! Only after COMMIT succeeds is any caller answered with `Ok`. If the transaction is lost
//! (COMMIT fails, or SQLite rolled it back itself after a disk-full or I/O error) every
//! caller of the batch gets an error, never an `Ok` for a row that is not committed.
//! Errors never poison the writer: the transaction is rolled back, and if the connection
//! itself looks broken it is dropped and reopened for the next batch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;

use rusqlite::Connection;

use super::checkpoint::CheckpointSignal;
use super::error::{from_sqlite, is_environmental};
use super::open_write_connection;
use crate::admission::{Admission, QueuedAcceptance, UnitResult};
use crate::{Acceptance, GroupCommitOptions, NewInboxRow, ReplayDigest, StoreError};

/// What the writer thread is asked to do.
// Acceptances are the hot path: kept inline (no allocation per request); the rarer
// processing command is the small one.
#[allow(clippy::large_enum_variant)]
pub(super) enum Command {
    /// An acceptance.
    Accept(QueuedAcceptance),
    /// A processing or delivery write (see `command.rs`): runs under its own savepoint inside
    /// the batch transaction and returns how to answer its caller once the commit's outcome is
    /// known. Dropped unrun (its caller sees the writer gone) only when no connection opens.
    Exec(ExecFn),
}

impl Command {
    /// What the command counts towards `max_batch`: a unit its rows, a command one.
    fn rows(&self) -> usize {
        match self {
            Command::Accept(job) => job.rows.len().max(1),
            Command::Exec(_) => 1,
        }
    }
}

pub(super) type ExecFn = Box<dyn FnOnce(&Connection) -> Executed + Send>;

/// What a command left behind inside the batch transaction.
pub(super) struct Executed {
    /// The connection looks broken (I/O, disk full): replace it after this batch.
    pub(super) suspect: bool,
    /// Answers the caller; `Some(error)` when the batch did not commit.
    pub(super) reply: Box<dyn FnOnce(Option<StoreError>) + Send>,
}

const INSERT_SQL: &str = "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
     event_type, object_id, object_version, provider_created_at, received_at, \
     payload_key_version, payload_digest, matched_secret_version, status, next_attempt_at, \
     source, api_version, sequence_number) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) \
     ON CONFLICT (provider, endpoint_id, provider_event_id) DO NOTHING";

/// The sealed payload, in its own table (schema version 4) so that status updates of the
/// small inbox row never rewrite the payload's overflow pages.
const INSERT_PAYLOAD_SQL: &str = "INSERT INTO inbox_payload (inbox_id, payload) VALUES (?1, ?2)";

const EXISTING_SQL: &str = "SELECT inbox_id FROM inbox WHERE provider = ?1 AND endpoint_id = ?2 AND provider_event_id = ?3";

/// A redelivery of an event stored `IGNORED` that the allow-list now admits: the stored row
/// goes back to work, due at the redelivery's receipt, while its payload is stored (a purged
/// row is never processed again). Parameters: inbox id, due (ms). PostgreSQL's batch form is
/// in `postgres/accept.rs`.
const REVIVE_IGNORED_SQL: &str = "UPDATE inbox SET status = 'RECEIVED', outcome = NULL, \
     attempt_count = 0, next_attempt_at = ?2, processed_at = NULL, last_error = NULL, \
     lease_owner = NULL, lease_until = NULL \
     WHERE inbox_id = ?1 AND status = 'IGNORED' AND payload_purged_at IS NULL";

/// Claims a body's digest for a new row, unless a claim that has not expired holds it
/// (schema version 5). One row changed = claimed.
const CLAIM_DIGEST_SQL: &str = "INSERT INTO replay_digests (endpoint_id, digest, inbox_id, \
     received_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT (endpoint_id, digest) DO UPDATE SET inbox_id = excluded.inbox_id, \
     received_at = excluded.received_at, expires_at = excluded.expires_at \
     WHERE replay_digests.expires_at <= excluded.received_at";

const CLAIMANT_SQL: &str =
    "SELECT inbox_id FROM replay_digests WHERE endpoint_id = ?1 AND digest = ?2";

/// Takes back a row inserted a moment ago in this transaction (a suspected replay).
const UNDO_INSERT_SQL: &str = "DELETE FROM inbox WHERE inbox_id = ?1";

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
    /// Told how much each commit wrote, so checkpoints run on their own thread.
    checkpoint: Arc<CheckpointSignal>,
    /// Told how long the rows of each batch waited; sheds rows that waited too long.
    admission: Arc<Admission>,
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
        checkpoint: Arc<CheckpointSignal>,
        admission: Arc<Admission>,
    ) -> Self {
        Self {
            path,
            conn: Some(conn),
            options,
            counters,
            checkpoint,
            admission,
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
        // `recv` keeps returning queued commands after the last sender is gone, so close drains.
        // A unit counts as its rows; one larger than `max_batch` has a transaction of its own.
        loop {
            let first = match rx.try_recv() {
                Ok(command) => command,
                Err(TryRecvError::Empty) => {
                    self.admission.queue_empty();
                    match rx.recv() {
                        Ok(command) => command,
                        Err(_) => break,
                    }
                }
                Err(TryRecvError::Disconnected) => break,
            };
            let mut rows = self.take(&mut batch, first);
            while rows < max_batch {
                match rx.try_recv() {
                    Ok(command) => rows += self.take(&mut batch, command),
                    Err(_) => break,
                }
            }
            if let Some(oldest) = batch.iter().find_map(|c| match c {
                Command::Accept(job) => Some(job.enqueued_at),
                Command::Exec(_) => None,
            }) {
                self.admission.batch_taken(oldest);
            }
            if !batch.is_empty() {
                self.run_batch(&mut batch);
            }
        }
        tracing::debug!("sqlite writer stopped");
    }

    /// Adds a dequeued command to the batch, unless it is an acceptance that already waited
    /// longer than `max_queue_wait`: that one is answered `Overloaded` without being written.
    /// Returns what it added towards `max_batch` (see [`Command::rows`]).
    fn take(&self, batch: &mut Vec<Command>, command: Command) -> usize {
        let command = match command {
            Command::Accept(job) => match self.admission.keep_unless_expired(job) {
                Some(job) => Command::Accept(job),
                None => return 0,
            },
            exec @ Command::Exec(_) => exec,
        };
        let rows = command.rows();
        batch.push(command);
        rows
    }

    /// Runs one group-commit transaction over `batch` and answers everything in it.
    pub(super) fn run_batch(&mut self, batch: &mut Vec<Command>) {
        let started = Instant::now();
        let span = crate::admission::commit_batch_span(
            "sqlite",
            batch.iter().filter_map(|command| match command {
                Command::Accept(job) => Some(job),
                Command::Exec(_) => None,
            }),
            batch
                .iter()
                .filter(|command| matches!(command, Command::Exec(_)))
                .count(),
        );
        let (mut results, commit_error) = span.in_scope(|| self.execute_batch(batch));
        span.record(
            "hookgate.batch.outcome",
            if commit_error.is_none() {
                "committed"
            } else {
                "failed"
            },
        );
        let rows = batch.len();
        if commit_error.is_none() {
            let payload_bytes = batch
                .iter()
                .map(|command| match command {
                    Command::Accept(job) => job.rows.iter().map(|r| r.payload.len() as u64).sum(),
                    Command::Exec(_) => 0,
                })
                .sum();
            self.checkpoint.committed(rows, payload_bytes);
        }
        let failed = results.iter().filter(|r| r.failed()).count();
        self.counters.transactions.fetch_add(1, Ordering::Relaxed);
        self.counters.rows.fetch_add(rows as u64, Ordering::Relaxed);
        if failed == rows {
            self.counters
                .failed_transactions
                .fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(
            rows,
            failed,
            commit_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "sqlite group commit"
        );
        for (command, result) in batch.drain(..).zip(results.drain(..)) {
            // A caller that went away (request cancelled) no longer needs the answer; what
            // it asked for is committed all the same and a retry converges on it.
            match (command, result) {
                (Command::Accept(job), Outcome::Accept(result)) => {
                    let _ = job.reply.send(match &commit_error {
                        None => result,
                        Some(err) => Err(err.clone()),
                    });
                }
                (_, Outcome::Exec(reply)) => reply(commit_error.as_ref().cloned()),
                (Command::Exec(_), Outcome::NotRun(err)) => drop(err),
                (Command::Accept(job), Outcome::NotRun(err)) => {
                    let _ = job.reply.send(Err(err));
                }
                (Command::Exec(_), Outcome::Accept(_)) => unreachable!("outcomes follow commands"),
            }
        }
    }

    /// Runs every command of the batch inside one transaction, then commits. Returns one
    /// outcome per command, in order, and the commit's error (which then applies to all).
    fn execute_batch(&mut self, batch: &mut [Command]) -> (Vec<Outcome>, Option<StoreError>) {
        let not_run = |err: StoreError| -> Vec<Outcome> {
            batch.iter().map(|_| Outcome::NotRun(err.clone())).collect()
        };
        if self.conn.is_none() {
            match open_write_connection(&self.path) {
                Ok(conn) => self.conn = Some(conn),
                Err(err) => return (not_run(err), None),
            }
        }
        let Some(conn) = self.conn.as_ref() else {
            let err = StoreError::Unavailable("sqlite writer has no connection".into());
            return (not_run(err), None);
        };

        if let Err(err) = conn.execute_batch("BEGIN IMMEDIATE") {
            let broken = is_environmental(&err);
            let out = not_run(from_sqlite(err));
            self.after_failure(broken);
            return (out, None);
        }

        let mut broken = false;
        let mut lost = false;
        // Outcomes by command position: the acceptances now, the commands after them.
        let accepted = accept_all(conn, batch, Isolation::None).or_else(|err| {
            tracing::debug!(error = %err, "sqlite accept: a row failed; batch again with savepoints");
            broken |= is_environmental(&err);
            begin_again(conn)?;
            accept_all(conn, batch, Isolation::SavepointPerUnit)
        });
        let mut results = accepted.unwrap_or_else(|err| {
            broken |= is_environmental(&err);
            lost = true;
            Vec::new()
        });
        if !lost {
            for (slot, command) in results.iter_mut().zip(batch.iter_mut()) {
                let Command::Exec(f) = command else { continue };
                // Take the closure out; the slot keeps a no-op that is never called.
                let f = std::mem::replace(f, Box::new(|_| unreachable_executed()));
                let executed = f(conn);
                broken |= executed.suspect;
                *slot = Some(Outcome::Exec(executed.reply));
                if conn.is_autocommit() {
                    lost = true;
                    break;
                }
            }
        }
        // Commands a lost batch never reached stay `None` and are answered `NotRun`.
        if lost {
            // Disk full, I/O and similar errors may make SQLite roll the whole transaction
            // back by itself: then every earlier write of the batch is gone too.
            self.after_failure(true);
            let err =
                StoreError::Unavailable("sqlite transaction rolled back after an error".into());
            return (fill(results, batch.len(), &err), Some(err));
        }
        let results = fill(
            results,
            batch.len(),
            &StoreError::Unavailable("sqlite command was not run".into()),
        );

        let commit_started = Instant::now();
        match self.commit() {
            Ok(()) => {
                tracing::trace!(
                    fsync_us =
                        u64::try_from(commit_started.elapsed().as_micros()).unwrap_or(u64::MAX),
                    "sqlite commit"
                );
                (results, None)
            }
            Err((err, conn_broken)) => {
                tracing::error!(error = %err, commands = batch.len(), "sqlite commit failed");
                self.after_failure(broken || conn_broken);
                (results, Some(StoreError::CommitUnknown(err)))
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

/// What became of one command of a batch, before the commit's outcome is applied.
enum Outcome {
    Accept(UnitResult),
    Exec(Box<dyn FnOnce(Option<StoreError>) + Send>),
    /// The batch stopped before this command ran.
    NotRun(StoreError),
}

impl Outcome {
    fn failed(&self) -> bool {
        matches!(self, Outcome::Accept(Err(_)) | Outcome::NotRun(_))
    }
}

/// One outcome per command (`len` of them): `err` for those a lost batch never reached.
fn fill(mut results: Vec<Option<Outcome>>, len: usize, err: &StoreError) -> Vec<Outcome> {
    results.resize_with(len, || None);
    results
        .into_iter()
        .map(|outcome| outcome.unwrap_or_else(|| Outcome::NotRun(err.clone())))
        .collect()
}

/// Ends the open transaction (if SQLite has not already rolled it back) and starts another.
fn begin_again(conn: &Connection) -> rusqlite::Result<()> {
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    conn.execute_batch("BEGIN IMMEDIATE")
}

/// How [`accept_all`] keeps one unit's failure from the others.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// No savepoints: any failing statement fails the pass, and the caller starts over.
    None,
    /// Each unit under its own savepoint: a failing unit is rolled back alone (all its rows)
    /// and gets the error.
    SavepointPerUnit,
}

/// Inserts every acceptance unit of `batch` inside the open transaction. Returns one slot
/// per command: the unit's outcome, `None` for processing commands (run afterwards).
/// `Err` means the pass stopped: with [`Isolation::None`], at the first failing statement;
/// with savepoints, only when the transaction itself was lost.
fn accept_all(
    conn: &Connection,
    batch: &[Command],
    isolation: Isolation,
) -> rusqlite::Result<Vec<Option<Outcome>>> {
    let mut results = Vec::with_capacity(batch.len());
    for command in batch {
        let Command::Accept(job) = command else {
            results.push(None);
            continue;
        };
        if isolation == Isolation::None {
            results.push(Some(Outcome::Accept(Ok(insert_unit(conn, &job.rows)?))));
            continue;
        }
        conn.prepare_cached("SAVEPOINT accept_unit")?.execute([])?;
        match insert_unit(conn, &job.rows) {
            Ok(acceptances) => {
                conn.prepare_cached("RELEASE accept_unit")?.execute([])?;
                results.push(Some(Outcome::Accept(Ok(acceptances))));
            }
            Err(err) => {
                tracing::warn!(error = %err, rows = job.rows.len(), "sqlite accept: unit failed, isolated");
                if conn.is_autocommit() {
                    return Err(err);
                }
                conn.execute_batch("ROLLBACK TO accept_unit; RELEASE accept_unit")?;
                results.push(Some(Outcome::Accept(Err(from_sqlite(err)))));
            }
        }
    }
    Ok(results)
}

fn unreachable_executed() -> Executed {
    unreachable!("a command runs once")
}

/// The rows of one unit, in order; the first error stops it (the caller rolls back all of it).
fn insert_unit(conn: &Connection, rows: &[NewInboxRow]) -> rusqlite::Result<Vec<Acceptance>> {
    rows.iter().map(|row| insert_one(conn, row)).collect()
}

/// One row inside the batch transaction: its inbox row, its digest claim and, when new and
/// kept, its payload. On error the caller rolls back what it wrote (to the unit's
/// savepoint, or the whole transaction).
fn insert_one(conn: &Connection, row: &NewInboxRow) -> rusqlite::Result<Acceptance> {
    // Rows to process are due at once; ignored rows are never claimed.
    let next_attempt_at = match row.status {
        hookgate_core::InboxStatus::Received => Some(row.received_at_ms),
        _ => None,
    };
    // `changes` rather than `RETURNING`: the id is the one we supplied, and RETURNING costs
    // SQLite an ephemeral table per statement.
    let inserted = conn.prepare_cached(INSERT_SQL)?.execute(rusqlite::params![
        row.inbox_id,
        row.provider,
        row.endpoint_id,
        row.provider_event_id,
        row.event_type,
        row.object_id,
        row.object_version,
        row.provider_created_at,
        row.received_at_ms,
        i64::from(row.payload_key_version),
        row.payload_digest,
        row.matched_secret_version,
        row.status.as_str(),
        next_attempt_at,
        row.source.as_str(),
        row.api_version,
        row.sequence_number,
    ])? == 1;
    if !inserted {
        // The unique key is already taken, possibly by an earlier row of this batch. A key
        // already stored wins over the digest: a retry of the same id is a plain duplicate.
        let inbox_id: String = conn.prepare_cached(EXISTING_SQL)?.query_row(
            (&row.provider, &row.endpoint_id, &row.provider_event_id),
            |r| r.get(0),
        )?;
        // IGNORED is replayable by design: a redelivery the allow-list now admits puts the
        // stored row back to work (no-op unless it is IGNORED with its payload stored).
        if row.status == hookgate_core::InboxStatus::Received {
            conn.prepare_cached(REVIVE_IGNORED_SQL)?
                .execute(rusqlite::params![inbox_id, row.received_at_ms])?;
        }
        return Ok(Acceptance::Duplicate { inbox_id });
    }
    if let Some(replay) = &row.replay_digest
        && let Some(first) = claim_digest(conn, row, replay)?
    {
        conn.prepare_cached(UNDO_INSERT_SQL)?
            .execute([&row.inbox_id])?;
        return Ok(Acceptance::ReplaySuspected { inbox_id: first });
    }
    // Only a row inserted (and kept) now gets a payload: a duplicate keeps the first copy's.
    conn.prepare_cached(INSERT_PAYLOAD_SQL)?
        .execute(rusqlite::params![row.inbox_id, row.payload])?;
    Ok(Acceptance::Accepted {
        inbox_id: row.inbox_id.clone(),
    })
}

/// Claims `replay` for `row`: `None` when claimed, else the id of the row whose claim holds.
fn claim_digest(
    conn: &Connection,
    row: &NewInboxRow,
    replay: &ReplayDigest,
) -> rusqlite::Result<Option<String>> {
    let claimed = conn
        .prepare_cached(CLAIM_DIGEST_SQL)?
        .execute(rusqlite::params![
            row.endpoint_id,
            &replay.digest[..],
            row.inbox_id,
            row.received_at_ms,
            row.received_at_ms.saturating_add(replay.window_ms.max(0)),
        ])?
        == 1;
    if claimed {
        return Ok(None);
    }
    conn.prepare_cached(CLAIMANT_SQL)?
        .query_row((&row.endpoint_id, &replay.digest[..]), |r| r.get(0))
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema::migrate;
    use hookgate_core::InboxStatus;
    use rusqlite::OptionalExtension;
    use tokio::sync::oneshot;

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
            source: hookgate_core::EventSource::Webhook,
            api_version: None,
            replay_digest: None,
            sequence_number: None,
        }
    }

    fn writer(dir: &tempfile::TempDir) -> Writer {
        let path = dir.path().join("w.db");
        let mut conn = open_write_connection(&path).unwrap();
        migrate(&mut conn).unwrap();
        Writer::new(
            path,
            conn,
            GroupCommitOptions::default(),
            Arc::default(),
            Arc::default(),
            Arc::new(Admission::new(std::time::Duration::from_secs(60))),
        )
    }

    type Answer = oneshot::Receiver<UnitResult>;

    /// An acceptance unit of `rows` queued now, and where its answer arrives.
    fn unit_command(rows: Vec<NewInboxRow>) -> (Command, Answer) {
        let (reply, rx) = oneshot::channel();
        let command = Command::Accept(QueuedAcceptance {
            rows,
            reply,
            enqueued_at: Instant::now(),
            origin: tracing::Span::none(),
        });
        (command, rx)
    }

    /// The answer of a unit of one row.
    fn single(answer: UnitResult) -> Result<Acceptance, StoreError> {
        answer.map(|mut acceptances| {
            assert_eq!(acceptances.len(), 1);
            acceptances.pop().unwrap()
        })
    }

    /// An acceptance of `row` queued now, and where its answer arrives.
    fn accept_command(row: NewInboxRow) -> (Command, Answer) {
        unit_command(vec![row])
    }

    /// Runs one batch of single-row units and returns the answers in order.
    fn run(w: &mut Writer, rows: Vec<NewInboxRow>) -> Vec<Result<Acceptance, StoreError>> {
        let (mut batch, rxs): (Vec<Command>, Vec<Answer>) =
            rows.into_iter().map(accept_command).unzip();
        w.run_batch(&mut batch);
        rxs.into_iter()
            .map(|mut rx| single(rx.try_recv().expect("answered")))
            .collect()
    }

    fn count(w: &Writer) -> i64 {
        let n = |table: &str| -> i64 {
            w.conn
                .as_ref()
                .unwrap()
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        let rows = n("inbox");
        assert_eq!(n("inbox_payload"), rows, "one payload row per inbox row");
        rows
    }

    fn payload_of(w: &Writer, inbox_id: &str) -> Option<Vec<u8>> {
        w.conn
            .as_ref()
            .unwrap()
            .query_row(
                "SELECT payload FROM inbox_payload WHERE inbox_id = ?1",
                [inbox_id],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
    }

    /// A row that waited past `max_queue_wait` is answered `Overloaded`, never written, and
    /// closes the admission gate even when it leaves the batch with no acceptance at all.
    #[test]
    fn expired_acceptance_is_shed_and_closes_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        w.admission = Arc::new(Admission::new(std::time::Duration::from_millis(50)));
        let (reply, mut answer) = oneshot::channel();
        let stale = Instant::now()
            .checked_sub(std::time::Duration::from_millis(80))
            .unwrap();
        let mut batch = Vec::new();
        w.take(
            &mut batch,
            Command::Accept(QueuedAcceptance {
                rows: vec![row("stale", "e_stale")],
                reply,
                enqueued_at: stale,
                origin: tracing::Span::none(),
            }),
        );
        assert!(batch.is_empty(), "a shed row is not written");
        assert!(matches!(
            answer.try_recv().unwrap(),
            Err(StoreError::Overloaded)
        ));
        assert!(!w.admission.is_open());
        let rows: i64 = w
            .conn
            .as_ref()
            .unwrap()
            .query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
    }

    #[test]
    fn duplicate_inside_one_batch_gets_first_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        let mut copy = row("b", "e1");
        copy.payload = b"a later copy".to_vec();
        let out = run(
            &mut w,
            vec![row("a", "e1"), copy, row("c", "e2"), row("d", "e1")],
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
        // A duplicate neither adds a payload nor replaces the first copy's.
        assert_eq!(payload_of(&w, "a"), Some(vec![1, 2, 3]));
        assert_eq!(payload_of(&w, "b"), None);
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

    /// A unit with one refused row fails whole (all its rows rolled back, its digest claim
    /// too) while the units committed in the same transaction land.
    #[test]
    fn refused_row_fails_its_unit_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        run(&mut w, vec![row("a", "e1")]);
        let mut claimed = row("u1", "e_u1");
        claimed.replay_digest = Some(ReplayDigest {
            digest: [5; 32],
            window_ms: 1_000,
        });
        let (before, before_answer) = unit_command(vec![row("b", "e2"), row("c", "e3")]);
        // "a" again under a new key: the primary key refuses it, in the middle of its unit.
        let (bad, bad_answer) = unit_command(vec![claimed, row("a", "e_u2"), row("u3", "e_u3")]);
        let (after, after_answer) = unit_command(vec![row("d", "e4")]);
        let mut batch = vec![before, bad, after];
        w.run_batch(&mut batch);
        let answers: Vec<UnitResult> = [before_answer, bad_answer, after_answer]
            .into_iter()
            .map(|mut rx| rx.try_recv().unwrap())
            .collect();
        assert_eq!(answers[0].as_ref().unwrap().len(), 2, "{answers:?}");
        assert!(
            matches!(answers[1], Err(StoreError::Unavailable(_))),
            "{answers:?}"
        );
        assert_eq!(answers[2].as_ref().unwrap().len(), 1, "{answers:?}");
        assert_eq!(count(&w), 4, "a, b, c and d; nothing of the refused unit");
        let claims: i64 = w
            .conn
            .as_ref()
            .unwrap()
            .query_row("SELECT count(*) FROM replay_digests", [], |r| r.get(0))
            .unwrap();
        assert_eq!(claims, 0, "the refused unit's claim is rolled back with it");
    }

    /// A failing row sends the batch round again with savepoints: the processing command of
    /// the batch runs once, in the transaction that commits, beside the rows that succeed.
    #[test]
    fn failing_row_restarts_the_batch_and_its_command_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        run(&mut w, vec![row("a", "e1")]);
        let runs = Arc::new(AtomicU64::new(0));
        let (command, mut done) = bump_command();
        let Command::Exec(bump) = command else {
            unreachable!()
        };
        let counted = runs.clone();
        let command = Command::Exec(Box::new(move |conn: &Connection| {
            counted.fetch_add(1, Ordering::Relaxed);
            bump(conn)
        }));
        // "b" twice: the second breaks the first pass on the primary key.
        let (b, b_answer) = accept_command(row("b", "e2"));
        let (b_again, b_again_answer) = accept_command(row("b", "e3"));
        let (c, c_answer) = accept_command(row("c", "e4"));
        let mut batch = vec![b, command, b_again, c];
        let rxs = [b_answer, b_again_answer, c_answer];
        w.run_batch(&mut batch);
        let out: Vec<_> = rxs
            .into_iter()
            .map(|mut rx| single(rx.try_recv().unwrap()))
            .collect();
        assert!(matches!(out[0], Ok(Acceptance::Accepted { .. })), "{out:?}");
        assert!(matches!(out[1], Err(StoreError::Unavailable(_))), "{out:?}");
        assert!(matches!(out[2], Ok(Acceptance::Accepted { .. })), "{out:?}");
        assert_eq!(
            done.try_recv().unwrap(),
            None,
            "the command's batch committed"
        );
        assert_eq!(runs.load(Ordering::Relaxed), 1, "the command ran once");
        assert_eq!(attempts_of_a(&w), Some(7));
        assert_eq!(count(&w), 3, "a, b and c");
    }

    /// A row whose payload insert fails loses its inbox row too (one savepoint for both),
    /// and only that row: its neighbours commit with their payloads.
    #[test]
    fn failed_payload_insert_rolls_back_its_inbox_row_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        // A stray payload row for "b" (foreign keys off to plant it) makes b's payload
        // insert fail after its inbox insert succeeded.
        let conn = w.conn.as_ref().unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF; \
             INSERT INTO inbox_payload (inbox_id, payload) VALUES ('b', x'00'); \
             PRAGMA foreign_keys = ON;",
        )
        .unwrap();
        let out = run(&mut w, vec![row("a", "e1"), row("b", "e2"), row("c", "e3")]);
        assert!(matches!(out[0], Ok(Acceptance::Accepted { .. })));
        assert!(
            matches!(out[1], Err(StoreError::Unavailable(_))),
            "{:?}",
            out[1]
        );
        assert!(matches!(out[2], Ok(Acceptance::Accepted { .. })));
        let ids: Vec<String> = w
            .conn
            .as_ref()
            .unwrap()
            .prepare("SELECT inbox_id FROM inbox ORDER BY inbox_id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            ids,
            ["a", "c"],
            "b's inbox row rolled back with its payload"
        );
        assert_eq!(payload_of(&w, "a"), Some(vec![1, 2, 3]));
        assert_eq!(
            payload_of(&w, "b"),
            Some(vec![0]),
            "the stray row untouched"
        );
        assert_eq!(payload_of(&w, "c"), Some(vec![1, 2, 3]));
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

    /// A command that bumps `attempt_count` of row `a` and reports, through `rx`, how the
    /// batch it ran in ended.
    fn bump_command() -> (Command, oneshot::Receiver<Option<String>>) {
        let (tx, rx) = oneshot::channel();
        let command = Command::Exec(Box::new(move |conn: &Connection| {
            conn.execute(
                "UPDATE inbox SET attempt_count = 7 WHERE inbox_id = 'a'",
                [],
            )
            .unwrap();
            Executed {
                suspect: false,
                reply: Box::new(move |commit_error| {
                    let _ = tx.send(commit_error.map(|e| e.to_string()));
                }),
            }
        }));
        (command, rx)
    }

    fn attempts_of_a(w: &Writer) -> Option<i64> {
        w.conn
            .as_ref()
            .unwrap()
            .query_row(
                "SELECT attempt_count FROM inbox WHERE inbox_id = 'a'",
                [],
                |r| r.get(0),
            )
            .ok()
    }

    #[test]
    fn commands_share_the_batch_transaction_and_learn_its_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(&dir);
        run(&mut w, vec![row("a", "e1")]);
        let before = w.counters.transactions.load(Ordering::Relaxed);

        // One acceptance and one command: one transaction, both answered after it.
        let (accept, mut accepted) = accept_command(row("b", "e2"));
        let (command, mut done) = bump_command();
        let mut batch = vec![accept, command];
        w.run_batch(&mut batch);
        assert_eq!(w.counters.transactions.load(Ordering::Relaxed), before + 1);
        assert!(matches!(
            single(accepted.try_recv().unwrap()),
            Ok(Acceptance::Accepted { .. })
        ));
        assert_eq!(done.try_recv().unwrap(), None);
        assert_eq!(attempts_of_a(&w), Some(7));

        // A failed commit: the command learns it, and its write is gone with the batch.
        w.conn
            .as_ref()
            .unwrap()
            .execute("UPDATE inbox SET attempt_count = 0", [])
            .unwrap();
        w.fail_next_commit();
        let (accept, mut accepted) = accept_command(row("c", "e3"));
        let (command, mut done) = bump_command();
        let mut batch = vec![command, accept];
        w.run_batch(&mut batch);
        assert!(
            done.try_recv().unwrap().is_some(),
            "the command must see the failed commit"
        );
        assert!(matches!(
            accepted.try_recv().unwrap(),
            Err(StoreError::CommitUnknown(_))
        ));
        assert_eq!(attempts_of_a(&w), Some(0));
        assert_eq!(count(&w), 2);
    }
}
