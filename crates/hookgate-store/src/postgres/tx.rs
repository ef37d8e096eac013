//! One short write transaction on a pooled connection, shared by processing and the outbox.
//!
//! A deadlock or serialization failure means the server rolled the transaction back, so the
//! whole write runs again from BEGIN, a few times, briefly spaced. Each attempt is bounded by
//! the request timeout; a connection that timed out is discarded rather than pooled again,
//! since the server may still be running its transaction.

use std::future::Future;
use std::time::Duration;

use deadpool_postgres::{Object, Pool, Transaction};

use super::error::{Failure, classify, classify_commit, from_pool};
use crate::{ProcessingError, StoreError};

/// Attempts of one write transaction on deadlock / serialization failure.
const MAX_ATTEMPTS: u32 = 5;

/// Why a write transaction did not commit.
pub(super) enum Failed {
    /// The lease fence matched no row: the caller no longer holds the lease; nothing written.
    LeaseLost,
    Db(Failure),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Failed::Db(classify(&e))
    }
}

impl Failed {
    /// For writes fenced on a lease, whose callers act on a lost lease. Retries that ran out
    /// and refused statements are both `Unavailable`: the row is not to blame.
    pub(super) fn into_processing_error(self) -> ProcessingError {
        match self {
            Failed::LeaseLost => ProcessingError::LeaseLost,
            Failed::Db(Failure::Fail(e)) => ProcessingError::Store(e),
            Failed::Db(Failure::Retry(m) | Failure::Rejected(m)) => {
                ProcessingError::Store(StoreError::Unavailable(m))
            }
        }
    }

    /// For writes that hold no lease (see [`ProcessingError::into_store_error`]).
    pub(super) fn into_store_error(self) -> StoreError {
        self.into_processing_error().into_store_error()
    }
}

/// A write that [`with_transaction`] runs inside one transaction. It may run again from the
/// start after a deadlock, so it must do nothing outside the transaction.
pub(super) trait RetryableWrite: Sync {
    type Output: Send;
    /// Names the kind of write in logs.
    const LABEL: &'static str;

    fn run<'a>(
        &'a self,
        tx: &'a Transaction<'a>,
    ) -> impl Future<Output = Result<Self::Output, Failed>> + Send + 'a;
}

/// Runs `write` in one transaction (retrying deadlocks), within `timeout` per attempt. A
/// connection that timed out is discarded.
pub(super) async fn with_transaction<W: RetryableWrite>(
    pool: &Pool,
    timeout: Duration,
    write: &W,
) -> Result<W::Output, Failed> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut client: Object = pool
            .get()
            .await
            .map_err(|e| Failed::Db(Failure::Fail(from_pool(e))))?;
        // Whether a timeout hit COMMIT, whose outcome the client then cannot know.
        let mut committing = false;
        let run = async {
            let tx = client.transaction().await?;
            let value = write.run(&tx).await?;
            committing = true;
            tx.commit()
                .await
                .map_err(|e| Failed::Db(classify_commit(&e)))?;
            Ok::<W::Output, Failed>(value)
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(Failed::Db(Failure::Retry(msg)))) if attempt < MAX_ATTEMPTS => {
                tracing::debug!(
                    attempt,
                    error = %msg,
                    "postgres {}: retrying transaction",
                    W::LABEL
                );
                tokio::time::sleep(Duration::from_millis(u64::from(attempt) * 3)).await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                drop(Object::take(client));
                return Err(Failed::Db(Failure::Fail(if committing {
                    StoreError::CommitUnknown("database did not answer COMMIT in time".into())
                } else {
                    StoreError::Unavailable("database did not answer in time".into())
                })));
            }
        }
    }
}
