//! Processing on SQLite: leases, fenced completion with the version gate, failed attempts and
//! operator retries (the [`ProcessingStore`] impl).
//!
//! Every write here runs on the single writer thread as a command (see `command.rs`), under
//! its own savepoint inside the writer's group-commit transaction: a claim can never race
//! another claim or an acceptance, one fsync serves a whole batch, and nothing slow (no
//! handler, no network) ever runs there — workers do their slow work before calling in.

use hookgate_core::Outcome;
use rusqlite::{Connection, OptionalExtension};

use super::command::{Failed, fail_leased};
use super::read::{RETURNING_COLUMNS, RETURNING_COLUMNS_WITHOUT_PAYLOAD, record};
use super::{SqliteStore, payments};
use crate::lease::LeasedTable;
use crate::processing::{
    FailedAttempt, HeldEvent, LeaseRequest, ProcessingError, ProcessingResult, ReleaseRequest,
};
use crate::statements::{
    COMPLETE_FENCE, HOLD_EVENT, MARK_PROCESSED, OUTBOX_INSERT, PROCESSED_MARKER, RELEASE_HELD,
    RETRY_EVENT, VERSION_GATE,
};
use crate::{InboxRecord, ProcessingStore, StoreError};

#[async_trait::async_trait]
impl ProcessingStore for SqliteStore {
    async fn lease(&self, request: LeaseRequest<'_>) -> Result<Vec<InboxRecord>, StoreError> {
        let LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload,
            endpoints,
        } = request;
        let owner = owner.to_owned();
        let columns: &str = if with_payload {
            &RETURNING_COLUMNS
        } else {
            &RETURNING_COLUMNS_WITHOUT_PAYLOAD
        };
        // Rows of endpoints the caller does not serve are skipped (they wait, untouched).
        let (endpoint_filter, endpoints) = match endpoints {
            Some([]) => return Ok(Vec::new()),
            Some(ids) => {
                let placeholders: Vec<String> =
                    (0..ids.len()).map(|i| format!("?{}", i + 6)).collect();
                (
                    format!("AND endpoint_id IN ({})", placeholders.join(", ")),
                    ids.to_vec(),
                )
            }
            None => (String::new(), Vec::new()),
        };
        let sql = format!(
            "UPDATE inbox SET lease_owner = ?1, lease_until = ?2, \
                     attempt_count = attempt_count + 1, lease_seq = ?5 \
                 WHERE inbox_id IN ( \
                     SELECT inbox_id FROM inbox INDEXED BY inbox_due \
                     WHERE status = 'RECEIVED' \
                       AND (next_attempt_at IS NULL OR next_attempt_at <= ?3) \
                       AND (lease_until IS NULL OR lease_until <= ?3) \
                       {endpoint_filter} \
                     ORDER BY next_attempt_at LIMIT ?4) \
                 RETURNING {columns}"
        );
        let lease_until = now_ms.saturating_add(lease_ms.max(1));
        self.write(move |tx| {
            // The next lease number is taken only by a lease that leased something: an empty
            // poll (idle workers poll several times a second) then writes nothing, so its
            // transaction needs no WAL frame and no fsync of its own. The single writer makes
            // read-then-advance race-free.
            let seq: i64 = tx
                .prepare_cached("SELECT value + 1 FROM lease_sequence WHERE id = 1")?
                .query_row([], |r| r.get(0))?;
            let mut params: Vec<&dyn rusqlite::ToSql> =
                vec![&owner, &lease_until, &now_ms, &limit, &seq];
            params.extend(endpoints.iter().map(|e| e as &dyn rusqlite::ToSql));
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(params.as_slice(), record)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            if !rows.is_empty() {
                tx.prepare_cached("UPDATE lease_sequence SET value = ?1 WHERE id = 1")?
                    .execute([seq])?;
            }
            Ok(rows)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    /// Each completion is its own writer command, all queued at once, so group commit puts
    /// them in one transaction (one fsync) while each keeps its own savepoint and fence.
    async fn complete_all(
        &self,
        results: Vec<ProcessingResult>,
    ) -> Vec<Result<Outcome, ProcessingError>> {
        futures_util::future::join_all(
            results
                .into_iter()
                .map(|result| self.write(move |tx| complete_in(tx, &result))),
        )
        .await
    }

    async fn fail_attempt(&self, attempt: FailedAttempt) -> Result<(), ProcessingError> {
        self.write(move |tx| {
            let held = fail_leased(
                tx,
                LeasedTable::Inbox,
                &attempt.inbox_id,
                &attempt.owner,
                attempt.now_ms,
                attempt.retry_at_ms,
                &attempt.stored_error(),
            )?;
            if held { Ok(()) } else { Err(Failed::LeaseLost) }
        })
        .await
    }

    async fn retry_event(&self, inbox_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.write(move |tx| {
            let n = tx
                .prepare_cached(RETRY_EVENT.sqlite())?
                .execute(rusqlite::params![inbox_id, now_ms])?;
            Ok(n == 1)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn hold_event(&self, held: HeldEvent) -> Result<(), ProcessingError> {
        self.write(move |tx| {
            let n = tx
                .prepare_cached(HOLD_EVENT.sqlite())?
                .execute(rusqlite::params![
                    held.inbox_id,
                    held.owner,
                    held.now_ms,
                    held.stored_reason(),
                ])?;
            if n == 1 {
                Ok(())
            } else {
                Err(Failed::LeaseLost)
            }
        })
        .await
    }

    async fn release_held(&self, request: ReleaseRequest) -> Result<u64, StoreError> {
        self.write(move |tx| {
            let n = tx
                .prepare_cached(RELEASE_HELD.sqlite())?
                .execute(rusqlite::params![
                    request.endpoint_id,
                    request.inbox_id,
                    request.now_ms,
                ])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}

/// The body of the processing transaction (see `ProcessingStore::complete_all`).
fn complete_in(tx: &Connection, r: &ProcessingResult) -> Result<Outcome, Failed> {
    type Fenced = (String, String, String, Option<String>, Option<i64>, i64);
    let fenced: Option<Fenced> = tx
        .prepare_cached(COMPLETE_FENCE.sqlite())?
        .query_row(rusqlite::params![r.inbox_id, r.owner, r.now_ms], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .optional()?;
    let Some((provider, endpoint_id, event_id, object_id, object_version, lease_seq)) = fenced
    else {
        return Err(Failed::LeaseLost);
    };

    let mut outcome = Outcome::Applied;
    if let (Some(object_id), Some(version)) = (&object_id, object_version) {
        let n = tx
            .prepare_cached(VERSION_GATE.sqlite())?
            .execute(rusqlite::params![
                provider,
                endpoint_id,
                object_id,
                version,
                r.now_ms
            ])?;
        if n == 0 {
            outcome = Outcome::Stale;
        }
    }

    if outcome == Outcome::Applied {
        for handler in &r.handlers {
            let fresh = tx.prepare_cached(PROCESSED_MARKER.sqlite())?.execute((
                &provider,
                &endpoint_id,
                &event_id,
                &handler.consumer,
            ))?;
            if fresh == 1 {
                for change in &handler.changes {
                    payments::apply(tx, change, lease_seq)?;
                }
            }
        }
        for destination in &r.destinations {
            tx.prepare_cached(OUTBOX_INSERT.sqlite())?
                .execute(rusqlite::params![
                    format!("{}:{destination}", r.inbox_id),
                    r.inbox_id,
                    destination,
                    r.now_ms
                ])?;
        }
    }

    tx.prepare_cached(MARK_PROCESSED.sqlite())?
        .execute(rusqlite::params![r.inbox_id, outcome.as_str(), r.now_ms])?;
    Ok(outcome)
}
