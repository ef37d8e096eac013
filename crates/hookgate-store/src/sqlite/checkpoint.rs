//! WAL checkpoints on their own thread, off the writer's path.
//!
//! In WAL mode every committed page is written twice: appended to the WAL at commit, then
//! copied into the database file by a checkpoint. SQLite's automatic checkpoint runs inside
//! the committing connection, so with the default settings the writer thread spent about
//! 40 % of its time copying pages (the largest cost in the benchmark's profile) while every
//! acceptance queued behind it waited.
//!
//! Here a dedicated thread, with its own connection, runs `PASSIVE` checkpoints whenever the
//! writer has committed about [`CHECKPOINT_EVERY_BYTES`] since the last one (or after
//! [`IDLE_CHECKPOINT_AFTER`] with anything pending). A passive checkpoint takes no lock that
//! the writer or readers wait on; it copies what is committed and fsyncs the database file.
//!
//! The writer keeps SQLite's automatic checkpoint as a backstop, at [`WRITER_AUTOCHECKPOINT_BYTES`]
//! (far above what this thread lets pile up): if this thread falls behind or stops, the WAL
//! still stays bounded. SQLite only restarts the WAL from its beginning when a write
//! transaction starts with every frame already copied; under sustained load that is the
//! backstop's job, and it then copies only the tail this thread has not reached yet.
//! `journal_size_limit` truncates the file after such a restart.
//!
//! Durability does not depend on this thread: a commit is durable once its WAL frames are
//! fsynced, before any caller is answered; a checkpoint only moves committed pages.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use super::open_write_connection;
use crate::StoreError;

/// Checkpoint once the writer has committed about this much since the last checkpoint.
/// Small and often beats large and rare here: each checkpoint ends with an fsync of the
/// database file that the writer's WAL fsyncs queue behind. Side by side on the benchmark
/// machine, 512 KiB beat 2 MiB in every pair (p99 at 2,000/s 7–9 ms vs 9–49 ms; closed loop
/// 8.4–10.4k vs 6.5–8.9k/s), and 16 MiB was worse than 2 MiB (p99 19–29 ms vs 12–13 ms).
pub(super) const CHECKPOINT_EVERY_BYTES: u64 = 512 * 1024;

/// With less pending than that, checkpoint anyway after this long without reaching it.
const IDLE_CHECKPOINT_AFTER: Duration = Duration::from_secs(1);

/// After a failed checkpoint (disk full, I/O), wait this long before the next attempt.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// The writer's own automatic checkpoint (converted to pages of the file): the backstop.
pub(super) const WRITER_AUTOCHECKPOINT_BYTES: i64 = 64 * 1024 * 1024;

/// The WAL file is truncated to this size when SQLite restarts it.
pub(super) const JOURNAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;

/// Commands the writer counts as this many bytes at least (status updates write pages too).
const MIN_BYTES_PER_COMMAND: u64 = 512;

/// How the writer tells the checkpointer that committed data is waiting.
#[derive(Debug, Default)]
pub(super) struct CheckpointSignal {
    state: Mutex<SignalState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct SignalState {
    pending_bytes: u64,
    stop: bool,
}

impl CheckpointSignal {
    /// Called by the writer after a commit of `commands` commands carrying `payload_bytes`.
    pub(super) fn committed(&self, commands: usize, payload_bytes: u64) {
        let added = payload_bytes.max(commands as u64 * MIN_BYTES_PER_COMMAND);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let before = state.pending_bytes;
        state.pending_bytes = before.saturating_add(added);
        // Wake only when crossing the threshold: one notification per checkpoint's worth.
        if before < CHECKPOINT_EVERY_BYTES && state.pending_bytes >= CHECKPOINT_EVERY_BYTES {
            self.wake.notify_one();
        }
    }

    fn stop(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop = true;
        self.wake.notify_one();
    }

    /// Blocks until a checkpoint is due. `None` once stopped.
    fn wait_for_work(&self) -> Option<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.stop {
                return None;
            }
            if state.pending_bytes >= CHECKPOINT_EVERY_BYTES {
                break;
            }
            let (next, timeout) = self
                .wake
                .wait_timeout(state, IDLE_CHECKPOINT_AFTER)
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            if timeout.timed_out() && state.pending_bytes > 0 && !state.stop {
                break;
            }
        }
        state.pending_bytes = 0;
        Some(())
    }
}

/// The running checkpointer; [`Checkpointer::stop`] ends and joins it.
#[derive(Debug)]
pub(super) struct Checkpointer {
    signal: Arc<CheckpointSignal>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens the thread's connection and starts it.
    pub(super) fn start(path: PathBuf, signal: Arc<CheckpointSignal>) -> Result<Self, StoreError> {
        let conn = open_write_connection(&path)?;
        let thread_signal = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("hookgate-sqlite-checkpoint".into())
            .spawn(move || run(&conn, &thread_signal))
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot start the sqlite checkpointer: {e}"))
            })?;
        Ok(Self {
            signal,
            thread: Some(thread),
        })
    }

    /// Stops the thread (after the checkpoint in progress, if any) and joins it.
    pub(super) fn stop(&mut self) {
        self.signal.stop();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("sqlite checkpointer thread panicked");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(conn: &Connection, signal: &CheckpointSignal) {
    while signal.wait_for_work().is_some() {
        match passive_checkpoint(conn) {
            Ok((wal_frames, copied)) => {
                tracing::trace!(wal_frames, copied, "sqlite checkpoint");
            }
            Err(err) => {
                // Nothing is lost: the frames stay in the WAL and the next attempt copies them.
                tracing::warn!(error = %err, "sqlite checkpoint failed; retrying");
                std::thread::sleep(RETRY_AFTER_ERROR);
            }
        }
    }
    tracing::debug!("sqlite checkpointer stopped");
}

/// `PRAGMA wal_checkpoint(PASSIVE)`: (frames in the WAL, frames copied so far).
fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}
