//! The outbox on SQLite (see `crate::outbox`).
//!
//! Claims and results are writes, so they run on the single writer thread as commands (see
//! `command.rs`), group-committed with whatever else is queued; nothing slow (no delivery, no
//! network) ever runs there. Reads use the read pool.

use hookgate_core::OutboxStatus;
use rusqlite::Row;

use super::SqliteStore;
use super::command::{Failed, fail_leased};
use super::read::{COLUMNS, INBOX_WITH_PAYLOAD, corrupt, record};
use crate::lease::LeasedTable;
use crate::outbox::{FailedDelivery, LeasedDelivery, OutboxRecord, OutboxStore};
use crate::{EventFilter, InboxRecord, ProcessingError, StoreError};

const OUTBOX_COLUMNS: &str = "outbox_id, inbox_id, destination, status, attempt_count, \
     next_attempt_at, last_error, created_at, delivered_at";

fn outbox_record(r: &Row<'_>) -> rusqlite::Result<OutboxRecord> {
    let status: String = r.get(3)?;
    let status = status
        .parse::<OutboxStatus>()
        .map_err(|_| corrupt("outbox row has an unknown status".into()))?;
    Ok(OutboxRecord {
        outbox_id: r.get(0)?,
        inbox_id: r.get(1)?,
        destination: r.get(2)?,
        status,
        attempt_count: r.get(4)?,
        next_attempt_at_ms: r.get(5)?,
        last_error: r.get(6)?,
        created_at_ms: r.get(7)?,
        delivered_at_ms: r.get(8)?,
    })
}

#[async_trait::async_trait]
impl OutboxStore for SqliteStore {
    async fn lease_deliveries(
        &self,
        destination: &str,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<LeasedDelivery>, StoreError> {
        let destination = destination.to_owned();
        let owner = owner.to_owned();
        let lease_until = now_ms.saturating_add(lease_ms.max(1));
        self.write(move |tx| {
            let sql = format!(
                "UPDATE outbox SET lease_owner = ?1, lease_until = ?2, \
                         attempt_count = attempt_count + 1 \
                     WHERE outbox_id IN ( \
                         SELECT outbox_id FROM outbox \
                         WHERE status = 'PENDING' AND destination = ?3 \
                           AND (next_attempt_at IS NULL OR next_attempt_at <= ?4) \
                           AND (lease_until IS NULL OR lease_until <= ?4) \
                         ORDER BY next_attempt_at, created_at LIMIT ?5) \
                     RETURNING {OUTBOX_COLUMNS}"
            );
            let mut deliveries = tx
                .prepare_cached(&sql)?
                .query_map(
                    rusqlite::params![owner, lease_until, destination, now_ms, limit],
                    outbox_record,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            deliveries.sort_by(|a, b| {
                (a.next_attempt_at_ms, a.created_at_ms, &a.outbox_id).cmp(&(
                    b.next_attempt_at_ms,
                    b.created_at_ms,
                    &b.outbox_id,
                ))
            });
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id = ?1"
            ))?;
            let mut out = Vec::with_capacity(deliveries.len());
            for delivery in deliveries {
                let mut rows = stmt.query_map([&delivery.inbox_id], record)?;
                if let Some(event) = rows.next().transpose()? {
                    out.push(LeasedDelivery { delivery, event });
                }
            }
            Ok(out)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn mark_delivered(
        &self,
        outbox_id: &str,
        owner: &str,
        now_ms: i64,
    ) -> Result<(), ProcessingError> {
        let (outbox_id, owner) = (outbox_id.to_owned(), owner.to_owned());
        self.write(move |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE outbox SET status = 'DELIVERED', delivered_at = ?3, \
                             next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, \
                             last_error = NULL \
                         WHERE outbox_id = ?1 AND status = 'PENDING' \
                           AND lease_owner = ?2 AND lease_until > ?3",
                )?
                .execute(rusqlite::params![outbox_id, owner, now_ms])?;
            if n == 0 {
                return Err(Failed::LeaseLost);
            }
            Ok(())
        })
        .await
    }

    async fn fail_delivery(&self, failure: FailedDelivery) -> Result<(), ProcessingError> {
        self.write(move |tx| {
            let held = fail_leased(
                tx,
                LeasedTable::Outbox,
                &failure.outbox_id,
                &failure.owner,
                failure.now_ms,
                failure.retry_at_ms,
                &failure.stored_error(),
            )?;
            if held { Ok(()) } else { Err(Failed::LeaseLost) }
        })
        .await
    }

    async fn retry_deliveries(&self, inbox_id: &str, now_ms: i64) -> Result<u64, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.write(move |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE outbox SET status = 'PENDING', attempt_count = 0, \
                             next_attempt_at = ?2, lease_owner = NULL, lease_until = NULL \
                         WHERE inbox_id = ?1 AND status = 'FAILED'",
                )?
                .execute(rusqlite::params![inbox_id, now_ms])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn list_deliveries(&self, inbox_id: &str) -> Result<Vec<OutboxRecord>, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE inbox_id = ?1 ORDER BY destination"
            ))?
            .query_map([inbox_id], outbox_record)?
            .collect()
        })
        .await
    }

    async fn events_with_failed_deliveries(
        &self,
        filter: &EventFilter,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let endpoint_id = filter.endpoint_id.clone();
        let limit = filter.limit.map_or(-1, i64::from);
        self.read(move |conn| {
            let sql = format!(
                "SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id IN \
                     (SELECT inbox_id FROM outbox WHERE status = 'FAILED') \
                   AND (?1 IS NULL OR endpoint_id = ?1) \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT ?2"
            );
            conn.prepare_cached(&sql)?
                .query_map(rusqlite::params![endpoint_id, limit], record)?
                .collect()
        })
        .await
    }

    async fn count_deliveries(&self, status: OutboxStatus) -> Result<u64, StoreError> {
        self.read(move |conn| {
            let n: i64 = conn
                .prepare_cached("SELECT count(*) FROM outbox WHERE status = ?1")?
                .query_row([status.as_str()], |r| r.get(0))?;
            u64::try_from(n).map_err(|_| corrupt("negative row count".into()))
        })
        .await
    }
}
