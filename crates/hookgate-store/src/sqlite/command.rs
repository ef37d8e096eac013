//! Processing and delivery writes on the single writer thread.
//!
//! A command (lease, complete, fail, retry, mark a delivery) is sent to the writer as a
//! [`Command::Exec`] and runs inside the writer's current group-commit transaction under its
//! own savepoint, beside the acceptances queued with it: one fsync serves them all, so
//! processing never costs the acknowledgement path an fsync per event. Its caller is answered
//! only after that transaction commits (or with the commit's error). Nothing slow runs here:
//! workers do their network I/O before they call in.

use std::sync::PoisonError;
use std::sync::mpsc::TrySendError;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::SqliteStore;
use super::error::is_environmental;
use super::read::from_row_error;
use super::writer::{Command, Executed};
use crate::StoreError;
use crate::lease::LeasedTable;
use crate::processing::ProcessingError;

/// How a command failed inside the writer.
pub(super) enum Failed {
    LeaseLost,
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        Failed::Sql(e)
    }
}

impl Failed {
    fn suspect(&self) -> bool {
        match self {
            Failed::LeaseLost => false,
            Failed::Sql(e) => is_environmental(e),
        }
    }

    fn into_error(self) -> ProcessingError {
        match self {
            Failed::LeaseLost => ProcessingError::LeaseLost,
            Failed::Sql(e) => ProcessingError::Store(from_row_error(e)),
        }
    }
}

/// Runs `body` under a savepoint of the writer's open transaction; on error its writes are
/// rolled back and the rest of the batch is untouched.
pub(super) fn in_savepoint<T>(
    conn: &Connection,
    body: impl FnOnce(&Connection) -> Result<T, Failed>,
) -> Result<T, Failed> {
    conn.prepare_cached("SAVEPOINT command")?.execute([])?;
    match body(conn) {
        Ok(value) => {
            conn.prepare_cached("RELEASE command")?.execute([])?;
            Ok(value)
        }
        Err(failed) => {
            // If SQLite already rolled the whole transaction back, there is no savepoint
            // left; the writer notices (autocommit) and fails the batch.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK TO command; RELEASE command");
            }
            Err(failed)
        }
    }
}

impl SqliteStore {
    /// Sends `body` to the writer thread (a full queue is `Overloaded`, never a blocked
    /// runtime) and waits until the transaction it ran in has committed.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        body: impl FnOnce(&Connection) -> Result<T, Failed> + Send + 'static,
    ) -> Result<T, ProcessingError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Exec(Box::new(move |conn: &Connection| {
            let result = in_savepoint(conn, body);
            let suspect = result.as_ref().err().is_some_and(Failed::suspect);
            Executed {
                suspect,
                reply: Box::new(move |commit_error: Option<StoreError>| {
                    let answer = match (result, commit_error) {
                        (Ok(value), None) => Ok(value),
                        (Ok(_), Some(err)) => Err(ProcessingError::Store(err)),
                        (Err(failed), _) => Err(failed.into_error()),
                    };
                    let _ = reply.send(answer);
                }),
            }
        }));
        {
            let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(sender) = sender.as_ref() else {
                return Err(StoreError::Unavailable("sqlite store is closed".into()).into());
            };
            match sender.try_send(command) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => return Err(StoreError::Overloaded.into()),
                Err(TrySendError::Disconnected(_)) => {
                    return Err(StoreError::Unavailable("sqlite writer has stopped".into()).into());
                }
            }
        }
        answer.await.map_err(|_| {
            ProcessingError::Store(StoreError::CommitUnknown(
                "sqlite writer stopped before answering".into(),
            ))
        })?
    }
}

/// A fenced failed attempt on a leased row (see [`LeasedTable::fail_sql`]); `Ok(false)` when
/// the caller no longer holds the lease and nothing was written.
pub(super) fn fail_leased(
    conn: &Connection,
    table: LeasedTable,
    id: &str,
    owner: &str,
    now_ms: i64,
    retry_at_ms: Option<i64>,
    error: &str,
) -> rusqlite::Result<bool> {
    let n = conn
        .prepare_cached(&table.fail_sql(|n| format!("?{n}")))?
        .execute(rusqlite::params![
            id,
            owner,
            now_ms,
            table.status_after_failure(retry_at_ms),
            retry_at_ms,
            error,
        ])?;
    Ok(n == 1)
}
