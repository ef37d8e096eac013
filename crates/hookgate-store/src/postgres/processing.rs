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
    Completion, FailedAttempt, HeldEvent, HeldGap, LeaseRequest, ProcessingError, ProcessingResult,
    ReleaseRequest, SequenceGapCheck, held_gaps,
};
use crate::rows::{inbox_record, inbox_select_list};
use crate::sequence::{
    Decision, RELEASE_CLOSE_GAPS, RELEASE_FIRST_DUE, RELEASE_OBJECT_WAITING, SEQUENCE_ADVANCE,
    SEQUENCE_DONE, SEQUENCE_ENSURE, SEQUENCE_FOLLOW, SEQUENCE_GAP_AFTER_APPLY, SEQUENCE_GAP_OPEN,
    SEQUENCE_HOLD_GAPS, SEQUENCE_NEXT_WAITING, SEQUENCE_READ, SEQUENCE_WAIT, SEQUENCE_WAITING_FOR,
    decide,
};
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

/// The object's sequence state, locked until COMMIT: events of one object are decided one
/// after another, whichever instances process them.
static SEQUENCE_FOR_UPDATE: LazyLock<String> =
    LazyLock::new(|| format!("{} FOR UPDATE", SEQUENCE_READ.postgres()));

#[async_trait::async_trait]
impl ProcessingStore for PostgresStore {
    async fn lease(&self, request: LeaseRequest<'_>) -> Result<Vec<InboxRecord>, StoreError> {
        lease_due(&self.pool, self.options.request_timeout, request).await
    }

    async fn complete_all(
        &self,
        results: Vec<ProcessingResult>,
    ) -> Vec<Result<Completion, ProcessingError>> {
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

    async fn hold_sequence_gaps(
        &self,
        check: SequenceGapCheck,
    ) -> Result<Vec<HeldGap>, StoreError> {
        match with_transaction(
            &self.pool,
            self.options.request_timeout,
            &Op::HoldGaps(&check),
        )
        .await
        .map_err(Failed::into_store_error)?
        {
            Done::Rows(rows) => Ok(held_gaps(
                rows.iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))),
            )),
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
    HoldGaps(&'r SequenceGapCheck),
}

enum Done {
    Rows(Vec<tokio_postgres::Row>),
    Outcome(Completion),
    Outcomes(Vec<Option<Completion>>),
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
                        outcomes.push(Some(Completion::Processed(Outcome::Applied)));
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
                let n = tx
                    .execute(&stmt, &[&r.endpoint_id, &r.inbox_id, &r.now_ms])
                    .await?;
                // Then the sequenced rows, in this order (each statement reads what the one
                // before wrote).
                for statement in [
                    &RELEASE_OBJECT_WAITING,
                    &RELEASE_CLOSE_GAPS,
                    &RELEASE_FIRST_DUE,
                ] {
                    let stmt = tx.prepare_cached(statement.postgres()).await?;
                    tx.execute(&stmt, &[&r.now_ms]).await?;
                }
                Done::Count(n)
            }
            Op::HoldGaps(c) => {
                let stmt = tx.prepare_cached(SEQUENCE_HOLD_GAPS.postgres()).await?;
                Done::Rows(
                    tx.query(
                        &stmt,
                        &[
                            &c.endpoint_id,
                            &c.opened_before_ms,
                            &i64::from(c.max_waiting),
                            &c.reason,
                        ],
                    )
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
) -> Result<Completion, ProcessingError> {
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
) -> Vec<Result<Completion, ProcessingError>> {
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
        .filter(|r| r.handlers.is_empty() && r.destinations.is_empty() && r.sequence.is_none())
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

async fn complete_in(tx: &Transaction<'_>, r: &ProcessingResult) -> Result<Completion, Failed> {
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
    let received_at_ms: i64 = row.get(6);
    let sequence_number: Option<i64> = row.get(7);
    let released_over_gap: bool = row.get(8);

    // Sequence order first: a row that waits or is stale goes no further.
    let sequenced = match (&object_id, sequence_number, r.sequence) {
        (Some(object_id), Some(sequence), Some(start)) => {
            let key = [provider.as_str(), endpoint_id.as_str(), object_id.as_str()];
            let ensure = tx.prepare_cached(SEQUENCE_ENSURE.postgres()).await?;
            tx.execute(&ensure, &[&key[0], &key[1], &key[2], &r.now_ms])
                .await?;
            let read = tx.prepare_cached(&SEQUENCE_FOR_UPDATE).await?;
            let last: Option<i64> = tx
                .query_one(&read, &[&key[0], &key[1], &key[2]])
                .await?
                .get(0);
            match decide(sequence, last, start, released_over_gap) {
                Decision::Apply => Some(sequence),
                Decision::Stale => {
                    let done = tx.prepare_cached(SEQUENCE_DONE.postgres()).await?;
                    tx.execute(&done, &[&r.inbox_id]).await?;
                    let mark = tx.prepare_cached(MARK_PROCESSED.postgres()).await?;
                    tx.execute(&mark, &[&r.inbox_id, &Outcome::Stale.as_str(), &r.now_ms])
                        .await?;
                    return Ok(Completion::Processed(Outcome::Stale));
                }
                Decision::Wait(for_sequence) => {
                    let wait = tx.prepare_cached(SEQUENCE_WAIT.postgres()).await?;
                    tx.execute(&wait, &[&r.inbox_id, &for_sequence]).await?;
                    let open = tx.prepare_cached(SEQUENCE_GAP_OPEN.postgres()).await?;
                    tx.execute(
                        &open,
                        &[&key[0], &key[1], &key[2], &received_at_ms, &r.now_ms],
                    )
                    .await?;
                    return Ok(Completion::Waiting { for_sequence });
                }
            }
        }
        _ => None,
    };

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

    if let (Some(sequence), Some(object_id)) = (sequenced, &object_id) {
        sequence_applied(tx, r, [&provider, &endpoint_id, object_id], sequence).await?;
    }

    let done = tx.prepare_cached(MARK_PROCESSED.postgres()).await?;
    tx.execute(&done, &[&r.inbox_id, &outcome.as_str(), &r.now_ms])
        .await?;
    Ok(Completion::Processed(outcome))
}

/// An applied sequenced row advances its object; the object's waiting row after it is due at
/// once (or, released by an operator, whatever its sequence), and the gap is recomputed.
async fn sequence_applied(
    tx: &Transaction<'_>,
    r: &ProcessingResult,
    key: [&str; 3],
    sequence: i64,
) -> Result<(), Failed> {
    let [provider, endpoint_id, object_id] = key;
    let advance = tx.prepare_cached(SEQUENCE_ADVANCE.postgres()).await?;
    tx.execute(
        &advance,
        &[&provider, &endpoint_id, &object_id, &sequence, &r.now_ms],
    )
    .await?;
    let done = tx.prepare_cached(SEQUENCE_DONE.postgres()).await?;
    tx.execute(&done, &[&r.inbox_id]).await?;
    let next_sequence = sequence.saturating_add(1);
    let waiting = tx.prepare_cached(SEQUENCE_WAITING_FOR.postgres()).await?;
    tx.execute(
        &waiting,
        &[&provider, &endpoint_id, &object_id, &next_sequence],
    )
    .await?;
    let next = tx.prepare_cached(SEQUENCE_NEXT_WAITING.postgres()).await?;
    let next = tx
        .query_opt(&next, &[&provider, &endpoint_id, &object_id])
        .await?;
    let mut moving = false;
    if let Some(row) = next {
        let (inbox_id, n, released): (String, i64, bool) = (row.get(0), row.get(1), row.get(2));
        if n == next_sequence || released {
            let follow = tx.prepare_cached(SEQUENCE_FOLLOW.postgres()).await?;
            tx.execute(&follow, &[&inbox_id, &r.now_ms]).await?;
            moving = true;
        }
    }
    let gap = tx
        .prepare_cached(SEQUENCE_GAP_AFTER_APPLY.postgres())
        .await?;
    tx.execute(
        &gap,
        &[&provider, &endpoint_id, &object_id, &moving, &r.now_ms],
    )
    .await?;
    Ok(())
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
