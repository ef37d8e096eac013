//! The outbox on SQLite (see `crate::outbox`).
//!
//! Claims and results are writes, so they run on the single writer thread as commands (see
//! `command.rs`), group-committed with whatever else is queued; nothing slow (no delivery, no
//! network) ever runs there. Reads of the outbox are in `read.rs` (`InspectStore`).

use super::SqliteStore;
use super::command::{Failed, fail_leased};
use super::read::{COLUMNS, INBOX_WITH_PAYLOAD, mapped, record};
use crate::lease::LeasedTable;
use crate::outbox::{FailedDelivery, LeasedDelivery};
use crate::rows::{OUTBOX_COLUMNS, outbox_record};
use crate::statements::{MARK_DELIVERED, RETRY_DELIVERIES};
use crate::{OutboxStore, ProcessingError, StoreError};
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, bounded};

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
                         SELECT outbox_id FROM outbox INDEXED BY outbox_due \
                         WHERE status = 'PENDING' AND destination = ?3 \
                           AND next_attempt_at <= ?4 \
                           AND (lease_until IS NULL OR lease_until <= ?4) \
                         ORDER BY next_attempt_at, created_at LIMIT ?5) \
                     RETURNING {OUTBOX_COLUMNS}"
            );
            let mut deliveries = tx
                .prepare_cached(&sql)?
                .query_map(
                    rusqlite::params![owner, lease_until, destination, now_ms, limit],
                    mapped(|r| outbox_record(r)),
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
                "SELECT {} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id = ?1",
                *COLUMNS
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
        note: Option<&str>,
    ) -> Result<(), ProcessingError> {
        let (outbox_id, owner) = (outbox_id.to_owned(), owner.to_owned());
        let note = note.map(|n| bounded(n, MAX_LAST_ERROR_CHARS));
        self.write(move |tx| {
            let n = tx
                .prepare_cached(MARK_DELIVERED.sqlite())?
                .execute(rusqlite::params![outbox_id, owner, now_ms, note])?;
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
                .prepare_cached(RETRY_DELIVERIES.sqlite())?
                .execute(rusqlite::params![inbox_id, now_ms])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}
