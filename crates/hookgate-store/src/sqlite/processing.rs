//! Processing on SQLite: leases, fenced completion with the version gate, failed attempts and
//! operator retries.
//!
//! Every write here runs on the single writer thread as a command (see `command.rs`), under
//! its own savepoint inside the writer's group-commit transaction: a claim can never race
//! another claim or an acceptance, one fsync serves a whole batch, and nothing slow (no
//! handler, no network) ever runs there — workers do their slow work before calling in.
//! Reads use the read pool.

use hookgate_core::Outcome;
use rusqlite::{Connection, OptionalExtension};

use super::SqliteStore;
use super::command::{Failed, fail_leased};
use super::read::{RETURNING_COLUMNS, RETURNING_COLUMNS_WITHOUT_PAYLOAD, record};
use crate::lease::LeasedTable;
use crate::processing::{
    BusinessChange, FailedAttempt, LeaseRequest, PaymentState, ProcessingError, ProcessingResult,
};
use crate::{InboxRecord, StoreError};

impl SqliteStore {
    pub(super) async fn lease_impl(
        &self,
        request: LeaseRequest<'_>,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload,
        } = request;
        let owner = owner.to_owned();
        let columns = if with_payload {
            RETURNING_COLUMNS
        } else {
            RETURNING_COLUMNS_WITHOUT_PAYLOAD
        };
        let lease_until = now_ms.saturating_add(lease_ms.max(1));
        self.write(move |tx| {
            let sql = format!(
                "UPDATE inbox SET lease_owner = ?1, lease_until = ?2, \
                         attempt_count = attempt_count + 1 \
                     WHERE inbox_id IN ( \
                         SELECT inbox_id FROM inbox INDEXED BY inbox_due \
                         WHERE status = 'RECEIVED' \
                           AND (next_attempt_at IS NULL OR next_attempt_at <= ?3) \
                           AND (lease_until IS NULL OR lease_until <= ?3) \
                         ORDER BY next_attempt_at LIMIT ?4) \
                     RETURNING {columns}"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(
                    rusqlite::params![owner, lease_until, now_ms, i64::from(limit)],
                    record,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    pub(super) async fn complete_impl(
        &self,
        result: ProcessingResult,
    ) -> Result<Outcome, ProcessingError> {
        self.write(move |tx| complete_in(tx, &result)).await
    }

    pub(super) async fn fail_attempt_impl(
        &self,
        attempt: FailedAttempt,
    ) -> Result<(), ProcessingError> {
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

    pub(super) async fn retry_event_impl(
        &self,
        inbox_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.write(move |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE inbox SET status = 'RECEIVED', outcome = NULL, attempt_count = 0, \
                             next_attempt_at = ?2, lease_owner = NULL, lease_until = NULL \
                         WHERE inbox_id = ?1 AND status = 'FAILED'",
                )?
                .execute(rusqlite::params![inbox_id, now_ms])?;
            Ok(n == 1)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}

/// The body of the processing transaction (see `Store::complete`).
fn complete_in(tx: &Connection, r: &ProcessingResult) -> Result<Outcome, Failed> {
    type Fenced = (String, String, String, Option<String>, Option<i64>);
    let fenced: Option<Fenced> = tx
        .prepare_cached(
            "SELECT provider, endpoint_id, provider_event_id, object_id, object_version \
             FROM inbox WHERE inbox_id = ?1 AND status = 'RECEIVED' \
               AND lease_owner = ?2 AND lease_until > ?3",
        )?
        .query_row(rusqlite::params![r.inbox_id, r.owner, r.now_ms], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })
        .optional()?;
    let Some((provider, endpoint_id, event_id, object_id, object_version)) = fenced else {
        return Err(Failed::LeaseLost);
    };

    // The version gate: compare-and-set, applied only when strictly newer.
    let mut outcome = Outcome::Applied;
    if let (Some(object_id), Some(version)) = (&object_id, object_version) {
        let n = tx
            .prepare_cached(
                "INSERT INTO object_state (provider, endpoint_id, object_id, version, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (provider, endpoint_id, object_id) DO UPDATE \
                     SET version = excluded.version, updated_at = excluded.updated_at \
                     WHERE excluded.version > object_state.version",
            )?
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
            let fresh = tx
                .prepare_cached(
                    "INSERT INTO processed_events (provider, endpoint_id, provider_event_id, consumer) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                )?
                .execute((&provider, &endpoint_id, &event_id, &handler.consumer))?;
            if fresh == 1 {
                for change in &handler.changes {
                    apply_change(tx, change)?;
                }
            }
        }
        for destination in &r.destinations {
            tx.prepare_cached(
                "INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
                     next_attempt_at, created_at) \
                 VALUES (?1, ?2, ?3, 'PENDING', 0, ?4, ?4) ON CONFLICT DO NOTHING",
            )?
            .execute(rusqlite::params![
                format!("{}:{destination}", r.inbox_id),
                r.inbox_id,
                destination,
                r.now_ms
            ])?;
        }
    }

    tx.prepare_cached(
        "UPDATE inbox SET status = 'PROCESSED', outcome = ?2, processed_at = ?3, \
             next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL \
         WHERE inbox_id = ?1",
    )?
    .execute(rusqlite::params![r.inbox_id, outcome.as_str(), r.now_ms])?;
    Ok(outcome)
}

fn apply_change(tx: &Connection, change: &BusinessChange) -> rusqlite::Result<()> {
    match change {
        BusinessChange::UpsertPaymentState {
            object_id,
            object_type,
            status,
            amount,
            currency,
            refreshed_at_ms,
            last_event_id,
        } => {
            tx.prepare_cached(
                "INSERT INTO payment_state (object_id, object_type, status, amount, currency, \
                     refreshed_at, last_event_id, write_count) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1) \
                 ON CONFLICT (object_id) DO UPDATE SET object_type = excluded.object_type, \
                     status = excluded.status, amount = excluded.amount, \
                     currency = excluded.currency, refreshed_at = excluded.refreshed_at, \
                     last_event_id = excluded.last_event_id, \
                     write_count = payment_state.write_count + 1 \
                 WHERE excluded.refreshed_at >= payment_state.refreshed_at",
            )?
            .execute(rusqlite::params![
                object_id,
                object_type,
                status,
                amount,
                currency,
                refreshed_at_ms,
                last_event_id
            ])?;
        }
    }
    Ok(())
}

// ---- Reads (read pool) ----

pub(super) fn object_version(
    conn: &Connection,
    provider: &str,
    endpoint_id: &str,
    object_id: &str,
) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT version FROM object_state WHERE provider = ?1 AND endpoint_id = ?2 AND object_id = ?3",
    )?
    .query_row((provider, endpoint_id, object_id), |r| r.get(0))
    .optional()
}

pub(super) fn payment_state(
    conn: &Connection,
    object_id: &str,
) -> rusqlite::Result<Option<PaymentState>> {
    conn.prepare_cached(
        "SELECT object_id, object_type, status, amount, currency, refreshed_at, last_event_id, \
             write_count FROM payment_state WHERE object_id = ?1",
    )?
    .query_row([object_id], |r| {
        Ok(PaymentState {
            object_id: r.get(0)?,
            object_type: r.get(1)?,
            status: r.get(2)?,
            amount: r.get(3)?,
            currency: r.get(4)?,
            refreshed_at_ms: r.get(5)?,
            last_event_id: r.get(6)?,
            write_count: r.get(7)?,
        })
    })
    .optional()
}

pub(super) fn processed_markers(
    conn: &Connection,
    provider: &str,
    endpoint_id: &str,
    provider_event_id: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT consumer FROM processed_events \
         WHERE provider = ?1 AND endpoint_id = ?2 AND provider_event_id = ?3 ORDER BY consumer",
    )?;
    let rows = stmt.query_map((provider, endpoint_id, provider_event_id), |r| r.get(0))?;
    rows.collect()
}

pub(super) fn outbox_destinations(
    conn: &Connection,
    inbox_id: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT destination FROM outbox WHERE inbox_id = ?1 ORDER BY destination",
    )?;
    let rows = stmt.query_map([inbox_id], |r| r.get(0))?;
    rows.collect()
}
