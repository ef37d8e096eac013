//! Processing on PostgreSQL: leases (`FOR UPDATE SKIP LOCKED`), fenced completion with the
//! version gate, failed attempts and operator retries.
//!
//! Every write is one short transaction on a pooled connection, bounded by the request
//! timeout; nothing slow runs inside it (workers do their network calls before calling in).
//! Several gateway instances may lease from one database: `SKIP LOCKED` hands each due row to
//! one of them, and the lease fence (`lease_owner`, `lease_until`) decides who may complete.
//! Deadlocks and serialization failures retry the whole transaction.

use std::sync::LazyLock;
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use hookgate_core::Outcome;

use super::error::Failure;
use super::tx::{Failed, RetryableWrite, with_transaction};
use super::{PostgresStore, payments};
use crate::lease::LeasedTable;
use crate::processing::{
    FailedAttempt, HeldEvent, LeaseRequest, ProcessingError, ProcessingResult, ReleaseRequest,
};
use crate::rows::{inbox_record, inbox_select_list};
use crate::statements::{
    COMPLETE_FENCE, HOLD_EVENT, MARK_PROCESSED, OUTBOX_INSERT, PROCESSED_MARKER, RELEASE_HELD,
    RETRY_EVENT, VERSION_GATE,
};
use crate::{InboxRecord, ProcessingStore, StoreError};

/// `i.col, i.col, ...` for statements joining the inbox with something else; without the
/// payload, `NULL` in its place (never read out of TOAST).
fn prefixed_columns(with_payload: bool) -> String {
    inbox_select_list(|c| match c {
        "payload" if !with_payload => "NULL::bytea".to_owned(),
        c => format!("i.{c}"),
    })
}

/// The completion fence, locking the row until COMMIT.
static FENCE_FOR_UPDATE: LazyLock<String> =
    LazyLock::new(|| format!("{} FOR UPDATE", COMPLETE_FENCE.postgres()));

#[async_trait::async_trait]
impl ProcessingStore for PostgresStore {
    async fn lease(&self, request: LeaseRequest<'_>) -> Result<Vec<InboxRecord>, StoreError> {
        lease_due(&self.pool, self.options.request_timeout, request).await
    }

    async fn complete_all(
        &self,
        results: Vec<ProcessingResult>,
    ) -> Vec<Result<Outcome, ProcessingError>> {
        complete_all(&self.pool, self.options.request_timeout, &results).await
    }

    async fn fail_attempt(&self, attempt: FailedAttempt) -> Result<(), ProcessingError> {
        with_transaction(
            &self.pool,
            self.options.request_timeout,
            &Op::Fail(&attempt),
        )
        .await
        .map(|_| ())
        .map_err(Failed::into_processing_error)
    }

    async fn hold_event(&self, held: HeldEvent) -> Result<(), ProcessingError> {
        with_transaction(&self.pool, self.options.request_timeout, &Op::Hold(&held))
            .await
            .map(|_| ())
            .map_err(Failed::into_processing_error)
    }

    async fn release_held(&self, request: ReleaseRequest) -> Result<u64, StoreError> {
        match with_transaction(
            &self.pool,
            self.options.request_timeout,
            &Op::Release(&request),
        )
        .await
        .map_err(Failed::into_store_error)?
        {
            Done::Count(n) => Ok(n),
            _ => Err(unexpected()),
        }
    }

    async fn retry_event(&self, inbox_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let op = Op::Retry { inbox_id, now_ms };
        match with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)?
        {
            Done::Flag(f) => Ok(f),
            _ => Err(unexpected()),
        }
    }
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
    Hold(&'r HeldEvent),
    Release(&'r ReleaseRequest),
}

enum Done {
    Rows(Vec<tokio_postgres::Row>),
    Outcome(Outcome),
    Outcomes(Vec<Option<Outcome>>),
    Unit,
    Flag(bool),
    Count(u64),
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
            Op::Hold(h) => {
                let stmt = tx.prepare_cached(HOLD_EVENT.postgres()).await?;
                let reason = h.stored_reason();
                let n = tx
                    .execute(&stmt, &[&h.inbox_id, &h.owner, &h.now_ms, &reason])
                    .await?;
                if n != 1 {
                    return Err(Failed::LeaseLost);
                }
                Done::Unit
            }
            Op::Release(r) => {
                let stmt = tx.prepare_cached(RELEASE_HELD.postgres()).await?;
                Done::Count(
                    tx.execute(&stmt, &[&r.endpoint_id, &r.inbox_id, &r.now_ms])
                        .await?,
                )
            }
        })
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected processing result".into())
}

async fn lease_due(
    pool: &Pool,
    timeout: Duration,
    lease: LeaseRequest<'_>,
) -> Result<Vec<InboxRecord>, StoreError> {
    match with_transaction(pool, timeout, &Op::Lease(lease))
        .await
        .map_err(Failed::into_store_error)?
    {
        Done::Rows(rows) => rows.iter().map(inbox_record).collect(),
        _ => Err(unexpected()),
    }
}

async fn lease_in(
    tx: &Transaction<'_>,
    lease: &LeaseRequest<'_>,
) -> Result<Vec<tokio_postgres::Row>, Failed> {
    let lease_until = lease.now_ms.saturating_add(lease.lease_ms.max(1));
    let limit = i64::from(lease.limit);
    // Rows of endpoints the caller does not serve are skipped (they wait, untouched). With
    // `force_custom_plan` the NULL test is folded away when planning.
    let endpoints: Option<Vec<&str>> = lease
        .endpoints
        .map(|ids| ids.iter().map(String::as_str).collect());
    if endpoints.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let sql = format!(
        "WITH due AS ( \
             SELECT inbox_id FROM inbox \
             WHERE status = 'RECEIVED' \
               AND next_attempt_at <= $1 \
               AND (lease_until IS NULL OR lease_until <= $1) \
               AND ($5::text[] IS NULL OR endpoint_id = ANY ($5::text[])) \
             ORDER BY next_attempt_at NULLS FIRST \
             LIMIT $4 \
             FOR UPDATE SKIP LOCKED), \
         seq AS (SELECT nextval('lease_seq') AS value) \
         UPDATE inbox AS i SET lease_owner = $2, lease_until = $3, \
             attempt_count = i.attempt_count + 1, lease_seq = seq.value \
         FROM due, seq WHERE i.inbox_id = due.inbox_id \
         RETURNING {}",
        prefixed_columns(lease.with_payload)
    );
    let stmt = tx.prepare_cached(&sql).await?;
    Ok(tx
        .query(
            &stmt,
            &[
                &lease.now_ms,
                &lease.owner,
                &lease_until,
                &limit,
                &endpoints,
            ],
        )
        .await?)
}

async fn complete(
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
async fn complete_all(
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
    let fence = tx.prepare_cached(&FENCE_FOR_UPDATE).await?;
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
    let lease_seq: i64 = row.get(5);

    // Concurrent writers of one object serialise on its row (or its unique-index entry).
    let mut outcome = Outcome::Applied;
    if let (Some(object_id), Some(version)) = (&object_id, object_version) {
        let gate = tx.prepare_cached(VERSION_GATE.postgres()).await?;
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
        let marker = tx.prepare_cached(PROCESSED_MARKER.postgres()).await?;
        for handler in &r.handlers {
            let fresh = tx
                .execute(
                    &marker,
                    &[&provider, &endpoint_id, &event_id, &handler.consumer],
                )
                .await?;
            if fresh == 1 {
                for change in &handler.changes {
                    payments::apply(tx, change, lease_seq).await?;
                }
            }
        }
        if !r.destinations.is_empty() {
            let outbox = tx.prepare_cached(OUTBOX_INSERT.postgres()).await?;
            for destination in &r.destinations {
                let outbox_id = format!("{}:{destination}", r.inbox_id);
                tx.execute(&outbox, &[&outbox_id, &r.inbox_id, destination, &r.now_ms])
                    .await?;
            }
        }
    }

    let done = tx.prepare_cached(MARK_PROCESSED.postgres()).await?;
    tx.execute(&done, &[&r.inbox_id, &outcome.as_str(), &r.now_ms])
        .await?;
    Ok(outcome)
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

async fn retry_in(tx: &Transaction<'_>, inbox_id: &str, now_ms: i64) -> Result<bool, Failed> {
    let stmt = tx.prepare_cached(RETRY_EVENT.postgres()).await?;
    Ok(tx.execute(&stmt, &[&inbox_id, &now_ms]).await? == 1)
}
