//! The outbox on PostgreSQL (see `crate::outbox`).
//!
//! Each claim or result is one short transaction on a pooled connection, bounded by the
//! request timeout; nothing slow runs inside it (the relay delivers between transactions).
//! Several gateway instances may relay from one database: `FOR UPDATE SKIP LOCKED` hands each
//! due row to one of them, and the lease fence decides who may record the result. Deadlocks
//! and serialization failures retry the whole transaction.

use deadpool_postgres::Transaction;
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, bounded};
use tokio_postgres::Row;

use super::PostgresStore;
use super::processing::fail_leased;
use super::read::COLUMNS;
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::lease::LeasedTable;
use crate::outbox::{FailedDelivery, LeasedDelivery};
use crate::rows::{OUTBOX_COLUMNS, inbox_record, outbox_record};
use crate::statements::{MARK_DELIVERED, RETRY_DELIVERIES};
use crate::{OutboxStore, ProcessingError, StoreError};

/// One outbox write, run by [`with_transaction`].
enum Op<'r> {
    Lease {
        destination: &'r str,
        owner: &'r str,
        now_ms: i64,
        lease_until: i64,
        limit: i64,
    },
    Delivered {
        outbox_id: &'r str,
        owner: &'r str,
        now_ms: i64,
        note: Option<String>,
    },
    Fail(&'r FailedDelivery),
    Retry {
        inbox_id: &'r str,
        now_ms: i64,
    },
}

enum Done {
    Leased(Vec<(Row, Option<Row>)>),
    Count(u64),
}

impl RetryableWrite for Op<'_> {
    type Output = Done;
    const LABEL: &'static str = "outbox";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Done, Failed> {
        run_op(tx, self).await
    }
}

async fn run_op(tx: &Transaction<'_>, op: &Op<'_>) -> Result<Done, Failed> {
    match op {
        Op::Lease {
            destination,
            owner,
            now_ms,
            lease_until,
            limit,
        } => {
            let prefixed: Vec<String> = OUTBOX_COLUMNS
                .split(',')
                .map(|c| format!("o.{}", c.trim()))
                .collect();
            let sql = format!(
                "WITH due AS ( \
                     SELECT outbox_id FROM outbox \
                     WHERE status = 'PENDING' AND destination = $1 \
                       AND next_attempt_at <= $2 \
                       AND (lease_until IS NULL OR lease_until <= $2) \
                     ORDER BY next_attempt_at, created_at \
                     LIMIT $5 \
                     FOR UPDATE SKIP LOCKED) \
                 UPDATE outbox AS o SET lease_owner = $3, lease_until = $4, \
                     attempt_count = o.attempt_count + 1 \
                 FROM due WHERE o.outbox_id = due.outbox_id \
                 RETURNING {}",
                prefixed.join(", ")
            );
            let stmt = tx.prepare_cached(&sql).await?;
            let rows = tx
                .query(&stmt, &[destination, now_ms, owner, lease_until, limit])
                .await?;
            let get = tx
                .prepare_cached(&format!(
                    "SELECT {} FROM inbox WHERE inbox_id = $1",
                    *COLUMNS
                ))
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let inbox_id: String = row.get(1);
                let event = tx.query_opt(&get, &[&inbox_id]).await?;
                out.push((row, event));
            }
            Ok(Done::Leased(out))
        }
        Op::Delivered {
            outbox_id,
            owner,
            now_ms,
            note,
        } => {
            let stmt = tx.prepare_cached(MARK_DELIVERED.postgres()).await?;
            if tx.execute(&stmt, &[outbox_id, owner, now_ms, note]).await? == 0 {
                return Err(Failed::LeaseLost);
            }
            Ok(Done::Count(1))
        }
        Op::Fail(f) => {
            let held = fail_leased(
                tx,
                LeasedTable::Outbox,
                &f.outbox_id,
                &f.owner,
                f.now_ms,
                f.retry_at_ms,
                &f.stored_error(),
            )
            .await?;
            if !held {
                return Err(Failed::LeaseLost);
            }
            Ok(Done::Count(1))
        }
        Op::Retry { inbox_id, now_ms } => {
            let stmt = tx.prepare_cached(RETRY_DELIVERIES.postgres()).await?;
            Ok(Done::Count(tx.execute(&stmt, &[inbox_id, now_ms]).await?))
        }
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected outbox result".into())
}

#[async_trait::async_trait]
impl OutboxStore for PostgresStore {
    async fn lease_deliveries(
        &self,
        destination: &str,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<LeasedDelivery>, StoreError> {
        let op = Op::Lease {
            destination,
            owner,
            now_ms,
            lease_until: now_ms.saturating_add(lease_ms.max(1)),
            limit: i64::from(limit),
        };
        let Done::Leased(rows) = with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)?
        else {
            return Err(unexpected());
        };
        let mut out = Vec::with_capacity(rows.len());
        for (delivery, event) in rows {
            if let Some(event) = event {
                out.push(LeasedDelivery {
                    delivery: outbox_record(&delivery)?,
                    event: inbox_record(&event)?,
                });
            }
        }
        out.sort_by(|a, b| {
            (a.delivery.next_attempt_at_ms, a.delivery.created_at_ms)
                .cmp(&(b.delivery.next_attempt_at_ms, b.delivery.created_at_ms))
        });
        Ok(out)
    }

    async fn mark_delivered(
        &self,
        outbox_id: &str,
        owner: &str,
        now_ms: i64,
        note: Option<&str>,
    ) -> Result<(), ProcessingError> {
        let note = note.map(|n| bounded(n, MAX_LAST_ERROR_CHARS));
        let op = Op::Delivered {
            outbox_id,
            owner,
            now_ms,
            note,
        };
        with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map(|_| ())
            .map_err(Failed::into_processing_error)
    }

    async fn fail_delivery(&self, failure: FailedDelivery) -> Result<(), ProcessingError> {
        with_transaction(
            &self.pool,
            self.options.request_timeout,
            &Op::Fail(&failure),
        )
        .await
        .map(|_| ())
        .map_err(Failed::into_processing_error)
    }

    async fn retry_deliveries(&self, inbox_id: &str, now_ms: i64) -> Result<u64, StoreError> {
        match with_transaction(
            &self.pool,
            self.options.request_timeout,
            &Op::Retry { inbox_id, now_ms },
        )
        .await
        .map_err(Failed::into_store_error)?
        {
            Done::Count(n) => Ok(n),
            Done::Leased(_) => Err(unexpected()),
        }
    }
}
