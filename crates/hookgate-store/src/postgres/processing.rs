//! Processing on PostgreSQL: leases (`FOR UPDATE SKIP LOCKED`), fenced completion with the
//! version gate, failed attempts and operator retries.
//!
//! Every write is one short transaction on a pooled connection, bounded by the request
//! timeout; nothing slow runs inside it (workers do their network calls before calling in).
//! Several gateway instances may lease from one database: `SKIP LOCKED` hands each due row to
//! one of them, and the lease fence (`lease_owner`, `lease_until`) decides who may complete.
//! Deadlocks and serialization failures retry the whole transaction.

use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use hookgate_core::Outcome;

use super::error::Failure;
use super::read::{COLUMNS, record};
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::lease::LeasedTable;
use crate::processing::{
    BusinessChange, FailedAttempt, LeaseRequest, PaymentState, ProcessingError, ProcessingResult,
};
use crate::{InboxRecord, StoreError};

/// `i.col, i.col, ...` for statements joining the inbox with something else; without the
/// payload, `NULL` in its place (never read out of TOAST).
fn prefixed_columns(with_payload: bool) -> String {
    COLUMNS
        .split(',')
        .map(|c| match c.trim() {
            "payload" if !with_payload => "NULL::bytea".to_owned(),
            c => format!("i.{c}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One processing write, run by [`with_transaction`].
enum Op<'r> {
    Lease(LeaseRequest<'r>),
    Complete(&'r ProcessingResult),
    /// Several completions in one transaction; a lost lease is `None` for its row only.
    CompleteAll(&'r [ProcessingResult]),
    Fail(&'r FailedAttempt),
    Retry {
        inbox_id: &'r str,
        now_ms: i64,
    },
}

enum Done {
    Rows(Vec<tokio_postgres::Row>),
    Outcome(Outcome),
    Outcomes(Vec<Option<Outcome>>),
    Unit,
    Flag(bool),
}

impl RetryableWrite for Op<'_> {
    type Output = Done;
    const LABEL: &'static str = "processing";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Done, Failed> {
        Ok(match self {
            Op::Lease(lease) => Done::Rows(lease_in(tx, lease).await?),
            Op::Complete(r) => Done::Outcome(complete_in(tx, r).await?),
            Op::CompleteAll(rs) => {
                let settled = complete_plain_in(tx, rs).await?;
                let mut outcomes = Vec::with_capacity(rs.len());
                for r in rs.iter() {
                    if settled.contains(r.inbox_id.as_str()) {
                        outcomes.push(Some(Outcome::Applied));
                        continue;
                    }
                    // The fence is the first statement: a lost lease wrote nothing, and the
                    // transaction goes on for the other rows.
                    match complete_in(tx, r).await {
                        Ok(outcome) => outcomes.push(Some(outcome)),
                        Err(Failed::LeaseLost) => outcomes.push(None),
                        Err(e) => return Err(e),
                    }
                }
                Done::Outcomes(outcomes)
            }
            Op::Fail(a) => {
                fail_in(tx, a).await?;
                Done::Unit
            }
            Op::Retry { inbox_id, now_ms } => Done::Flag(retry_in(tx, inbox_id, *now_ms).await?),
        })
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected processing result".into())
}

pub(super) async fn lease_due(
    pool: &Pool,
    timeout: Duration,
    lease: LeaseRequest<'_>,
) -> Result<Vec<InboxRecord>, StoreError> {
    match with_transaction(pool, timeout, &Op::Lease(lease))
        .await
        .map_err(Failed::into_store_error)?
    {
        Done::Rows(rows) => rows.iter().map(record).collect(),
        _ => Err(unexpected()),
    }
}

async fn lease_in(
    tx: &Transaction<'_>,
    lease: &LeaseRequest<'_>,
) -> Result<Vec<tokio_postgres::Row>, Failed> {
    let lease_until = lease.now_ms.saturating_add(lease.lease_ms.max(1));
    let limit = i64::from(lease.limit);
    let sql = format!(
        "WITH due AS ( \
             SELECT inbox_id FROM inbox \
             WHERE status = 'RECEIVED' \
               AND next_attempt_at <= $1 \
               AND (lease_until IS NULL OR lease_until <= $1) \
             ORDER BY next_attempt_at NULLS FIRST \
             LIMIT $4 \
             FOR UPDATE SKIP LOCKED) \
         UPDATE inbox AS i SET lease_owner = $2, lease_until = $3, \
             attempt_count = i.attempt_count + 1 \
         FROM due WHERE i.inbox_id = due.inbox_id \
         RETURNING {}",
        prefixed_columns(lease.with_payload)
    );
    let stmt = tx.prepare_cached(&sql).await?;
    Ok(tx
        .query(&stmt, &[&lease.now_ms, &lease.owner, &lease_until, &limit])
        .await?)
}

pub(super) async fn complete(
    pool: &Pool,
    timeout: Duration,
    result: &ProcessingResult,
) -> Result<Outcome, ProcessingError> {
    match with_transaction(pool, timeout, &Op::Complete(result))
        .await
        .map_err(Failed::into_processing_error)?
    {
        Done::Outcome(o) => Ok(o),
        _ => Err(unexpected().into()),
    }
}
/// [`complete`] for several rows in one transaction (one commit, one WAL flush). If the
/// database refuses a statement, each row is completed on its own so that only the bad one
/// fails; any other failure is every row's.
pub(super) async fn complete_all(
    pool: &Pool,
    timeout: Duration,
    results: &[ProcessingResult],
) -> Vec<Result<Outcome, ProcessingError>> {
    if results.len() == 1 {
        return vec![complete(pool, timeout, &results[0]).await];
    }
    match with_transaction(pool, timeout, &Op::CompleteAll(results)).await {
        Ok(Done::Outcomes(outcomes)) => outcomes
            .into_iter()
            .map(|o| o.ok_or(ProcessingError::LeaseLost))
            .collect(),
        Ok(_) => results.iter().map(|_| Err(unexpected().into())).collect(),
        Err(Failed::Db(Failure::Rejected(_))) => {
            let mut out = Vec::with_capacity(results.len());
            for r in results {
                out.push(complete(pool, timeout, r).await);
            }
            out
        }
        Err(e) => {
            let message = e.into_processing_error().to_string();
            results
                .iter()
                .map(|_| Err(StoreError::Unavailable(message.clone()).into()))
                .collect()
        }
    }
}

/// The rows of `results` that need nothing but their status — no handler output, no
/// destination, and (read from the row) no object version to gate — completed with one
/// statement instead of a fence and an update each; returns their ids. The others (and rows
/// whose lease was lost) are left for [`complete_in`], which the same fence guards.
async fn complete_plain_in(
    tx: &Transaction<'_>,
    results: &[ProcessingResult],
) -> Result<std::collections::HashSet<String>, Failed> {
    let plain: Vec<&ProcessingResult> = results
        .iter()
        .filter(|r| r.handlers.is_empty() && r.destinations.is_empty())
        .collect();
    if plain.is_empty() {
        return Ok(Default::default());
    }
    let ids: Vec<&str> = plain.iter().map(|r| r.inbox_id.as_str()).collect();
    let owners: Vec<&str> = plain.iter().map(|r| r.owner.as_str()).collect();
    let nows: Vec<i64> = plain.iter().map(|r| r.now_ms).collect();
    let stmt = tx
        .prepare_cached(
            "UPDATE inbox AS i SET status = 'PROCESSED', outcome = 'applied', \
                 processed_at = u.now_ms, next_attempt_at = NULL, lease_owner = NULL, \
                 lease_until = NULL, last_error = NULL \
             FROM unnest($1::text[], $2::text[], $3::int8[]) AS u(inbox_id, owner, now_ms) \
             WHERE i.inbox_id = u.inbox_id AND i.status = 'RECEIVED' \
               AND i.lease_owner = u.owner AND i.lease_until > u.now_ms \
               AND (i.object_id IS NULL OR i.object_version IS NULL) \
             RETURNING i.inbox_id",
        )
        .await?;
    Ok(tx
        .query(&stmt, &[&ids, &owners, &nows])
        .await?
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect())
}

async fn complete_in(tx: &Transaction<'_>, r: &ProcessingResult) -> Result<Outcome, Failed> {
    let fence = tx
        .prepare_cached(
            "SELECT provider, endpoint_id, provider_event_id, object_id, object_version \
             FROM inbox WHERE inbox_id = $1 AND status = 'RECEIVED' \
               AND lease_owner = $2 AND lease_until > $3 \
             FOR UPDATE",
        )
        .await?;
    let Some(row) = tx
        .query_opt(&fence, &[&r.inbox_id, &r.owner, &r.now_ms])
        .await?
    else {
        return Err(Failed::LeaseLost);
    };
    let provider: String = row.get(0);
    let endpoint_id: String = row.get(1);
    let event_id: String = row.get(2);
    let object_id: Option<String> = row.get(3);
    let object_version: Option<i64> = row.get(4);

    // The version gate: compare-and-set, applied only when strictly newer. Concurrent
    // writers of one object serialise on its row (or its unique-index entry).
    let mut outcome = Outcome::Applied;
    if let (Some(object_id), Some(version)) = (&object_id, object_version) {
        let gate = tx
            .prepare_cached(
                "INSERT INTO object_state (provider, endpoint_id, object_id, version, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (provider, endpoint_id, object_id) DO UPDATE \
                     SET version = EXCLUDED.version, updated_at = EXCLUDED.updated_at \
                     WHERE EXCLUDED.version > object_state.version",
            )
            .await?;
        let n = tx
            .execute(
                &gate,
                &[&provider, &endpoint_id, object_id, &version, &r.now_ms],
            )
            .await?;
        if n == 0 {
            outcome = Outcome::Stale;
        }
    }

    if outcome == Outcome::Applied {
        let marker = tx
            .prepare_cached(
                "INSERT INTO processed_events (provider, endpoint_id, provider_event_id, consumer) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .await?;
        for handler in &r.handlers {
            let fresh = tx
                .execute(
                    &marker,
                    &[&provider, &endpoint_id, &event_id, &handler.consumer],
                )
                .await?;
            if fresh == 1 {
                for change in &handler.changes {
                    apply_change(tx, change).await?;
                }
            }
        }
        if !r.destinations.is_empty() {
            let outbox = tx
                .prepare_cached(
                    "INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
                         next_attempt_at, created_at) \
                     VALUES ($1, $2, $3, 'PENDING', 0, $4, $4) ON CONFLICT DO NOTHING",
                )
                .await?;
            for destination in &r.destinations {
                let outbox_id = format!("{}:{destination}", r.inbox_id);
                tx.execute(&outbox, &[&outbox_id, &r.inbox_id, destination, &r.now_ms])
                    .await?;
            }
        }
    }

    let done = tx
        .prepare_cached(
            "UPDATE inbox SET status = 'PROCESSED', outcome = $2, processed_at = $3, \
                 next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, \
                 last_error = NULL \
             WHERE inbox_id = $1",
        )
        .await?;
    tx.execute(&done, &[&r.inbox_id, &outcome.as_str(), &r.now_ms])
        .await?;
    Ok(outcome)
}

async fn apply_change(tx: &Transaction<'_>, change: &BusinessChange) -> Result<(), Failed> {
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
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO payment_state (object_id, object_type, status, amount, currency, \
                         refreshed_at, last_event_id, write_count) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 1) \
                     ON CONFLICT (object_id) DO UPDATE SET object_type = EXCLUDED.object_type, \
                         status = EXCLUDED.status, amount = EXCLUDED.amount, \
                         currency = EXCLUDED.currency, refreshed_at = EXCLUDED.refreshed_at, \
                         last_event_id = EXCLUDED.last_event_id, \
                         write_count = payment_state.write_count + 1 \
                     WHERE EXCLUDED.refreshed_at >= payment_state.refreshed_at",
                )
                .await?;
            tx.execute(
                &stmt,
                &[
                    object_id,
                    object_type,
                    status,
                    amount,
                    currency,
                    refreshed_at_ms,
                    last_event_id,
                ],
            )
            .await?;
        }
    }
    Ok(())
}

pub(super) async fn fail_attempt(
    pool: &Pool,
    timeout: Duration,
    attempt: &FailedAttempt,
) -> Result<(), ProcessingError> {
    with_transaction(pool, timeout, &Op::Fail(attempt))
        .await
        .map(|_| ())
        .map_err(Failed::into_processing_error)
}

async fn fail_in(tx: &Transaction<'_>, a: &FailedAttempt) -> Result<(), Failed> {
    let held = fail_leased(
        tx,
        LeasedTable::Inbox,
        &a.inbox_id,
        &a.owner,
        a.now_ms,
        a.retry_at_ms,
        &a.stored_error(),
    )
    .await?;
    if held { Ok(()) } else { Err(Failed::LeaseLost) }
}

/// A fenced failed attempt on a leased row (see [`LeasedTable::fail_sql`]); `Ok(false)` when
/// the caller no longer holds the lease and nothing was written.
pub(super) async fn fail_leased(
    tx: &Transaction<'_>,
    table: LeasedTable,
    id: &str,
    owner: &str,
    now_ms: i64,
    retry_at_ms: Option<i64>,
    error: &str,
) -> Result<bool, tokio_postgres::Error> {
    let stmt = tx
        .prepare_cached(&table.fail_sql(|n| format!("${n}")))
        .await?;
    let status = table.status_after_failure(retry_at_ms);
    let n = tx
        .execute(
            &stmt,
            &[&id, &owner, &now_ms, &status, &retry_at_ms, &error],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn retry_event(
    pool: &Pool,
    timeout: Duration,
    inbox_id: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    match with_transaction(pool, timeout, &Op::Retry { inbox_id, now_ms })
        .await
        .map_err(Failed::into_store_error)?
    {
        Done::Flag(f) => Ok(f),
        _ => Err(unexpected()),
    }
}

async fn retry_in(tx: &Transaction<'_>, inbox_id: &str, now_ms: i64) -> Result<bool, Failed> {
    let stmt = tx
        .prepare_cached(
            "UPDATE inbox SET status = 'RECEIVED', outcome = NULL, attempt_count = 0, \
                 next_attempt_at = $2, lease_owner = NULL, lease_until = NULL \
             WHERE inbox_id = $1 AND status = 'FAILED'",
        )
        .await?;
    Ok(tx.execute(&stmt, &[&inbox_id, &now_ms]).await? == 1)
}

// ---- Reads ----

pub(super) const OBJECT_VERSION_SQL: &str = "SELECT version FROM object_state \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3";

pub(super) const PAYMENT_STATE_SQL: &str = "SELECT object_id, object_type, status, amount, \
     currency, refreshed_at, last_event_id, write_count FROM payment_state WHERE object_id = $1";

pub(super) const MARKERS_SQL: &str = "SELECT consumer FROM processed_events \
     WHERE provider = $1 AND endpoint_id = $2 AND provider_event_id = $3 \
     ORDER BY consumer COLLATE \"C\"";

pub(super) const OUTBOX_SQL: &str = "SELECT destination FROM outbox WHERE inbox_id = $1 \
     ORDER BY destination COLLATE \"C\"";

pub(super) fn payment_state(r: &tokio_postgres::Row) -> Result<PaymentState, StoreError> {
    let corrupt = |e: tokio_postgres::Error| StoreError::Corrupt(format!("payment_state: {e}"));
    Ok(PaymentState {
        object_id: r.try_get(0).map_err(corrupt)?,
        object_type: r.try_get(1).map_err(corrupt)?,
        status: r.try_get(2).map_err(corrupt)?,
        amount: r.try_get(3).map_err(corrupt)?,
        currency: r.try_get(4).map_err(corrupt)?,
        refreshed_at_ms: r.try_get(5).map_err(corrupt)?,
        last_event_id: r.try_get(6).map_err(corrupt)?,
        write_count: r.try_get(7).map_err(corrupt)?,
    })
}
