//! Acceptance on PostgreSQL: group commit of conflict-ignoring inserts.
//!
//! Concurrent `accept_request` calls queue [`QueuedAcceptance`]s (one request's rows, a
//! unit) on a bounded channel (full → `Overloaded`). Each of several batch workers takes
//! whatever is queued (up to `max_batch` rows, a unit counting as its rows, no waiting for
//! more), so one slow commit does not serialise everything: while one worker commits, the
//! next one collects. A batch is:
//!
//! 1. flattened and sorted by `(provider, endpoint_id, provider_event_id)` — every batch of
//!    every instance takes its unique-index locks in one order, so two batches cannot
//!    deadlock on each other;
//! 2. deduplicated: later copies of a key inside the batch are duplicates of the first;
//! 3. one transaction: one multi-row `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING
//!    RETURNING` key; keys not returned were committed by someone else (another instance, or
//!    a batch of this one a moment ago) and their ids are read back in the same transaction;
//!    rows with a replay digest then claim it (`replay.rs`), and suspected replays are
//!    deleted again; then COMMIT, and only then is each caller answered.
//!
//! The transaction is the shared retrying one (`tx.rs`): deadlock / serialization failures
//! retry the whole batch, a connection failure before COMMIT is `Unavailable` and a failure
//! during COMMIT (or a timeout there) `CommitUnknown`. A row the database refuses makes
//! the batch statement fail; the batch is then split in halves by units, recursively, until
//! the bad unit stands alone and fails alone (all its rows) while its neighbours commit.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use tokio::sync::{Mutex, mpsc};

use super::error::Failure;
use super::replay;
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::admission::{Admission, QueuedAcceptance, UnitResult};
use crate::{Acceptance, NewInboxRow, StoreError};

const INSERT_SQL: &str = "\
INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
                   object_version, provider_created_at, received_at, payload,
                   payload_key_version, payload_digest, matched_secret_version, status,
                   next_attempt_at, source, api_version, sequence_number)
SELECT inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
       object_version, provider_created_at, received_at, payload,
       payload_key_version, payload_digest, matched_secret_version, status,
       CASE WHEN status = 'RECEIVED' THEN received_at END, source, api_version,
       sequence_number
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::int8[], $8::int8[], $9::int8[], $10::bytea[],
            $11::int8[], $12::bytea[], $13::text[], $14::text[], $15::text[], $16::text[],
            $17::int8[])
     WITH ORDINALITY AS t(inbox_id, provider, endpoint_id, provider_event_id, event_type,
                          object_id, object_version, provider_created_at, received_at, payload,
                          payload_key_version, payload_digest, matched_secret_version, status,
                          source, api_version, sequence_number, ord)
ORDER BY ord
ON CONFLICT (provider, endpoint_id, provider_event_id) DO NOTHING
RETURNING provider, endpoint_id, provider_event_id";

const EXISTING_SQL: &str = "\
SELECT i.provider, i.endpoint_id, i.provider_event_id, i.inbox_id
FROM inbox i
JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(provider, endpoint_id, provider_event_id)
  ON i.provider = k.provider
 AND i.endpoint_id = k.endpoint_id
 AND i.provider_event_id = k.provider_event_id";

type Key = (String, String, String);

fn key_of(row: &NewInboxRow) -> (&str, &str, &str) {
    (&row.provider, &row.endpoint_id, &row.provider_event_id)
}

/// A batch worker: takes what is queued, commits it, answers, repeats; ends when every
/// sender is gone and the queue is drained.
pub(super) async fn worker(
    queue: Arc<Mutex<mpsc::Receiver<QueuedAcceptance>>>,
    admission: Arc<Admission>,
    pool: Pool,
    max_batch: usize,
    op_timeout: Duration,
) {
    loop {
        let jobs = {
            let mut rx = queue.lock().await;
            let first = match rx.try_recv() {
                Ok(job) => job,
                Err(_) => {
                    admission.queue_empty();
                    let Some(job) = rx.recv().await else { return };
                    job
                }
            };
            // A unit counts as its rows; one larger than `max_batch` commits on its own.
            let mut rows = first.rows.len();
            let mut jobs = vec![first];
            while rows < max_batch {
                match rx.try_recv() {
                    Ok(job) => {
                        rows += job.rows.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
            // Judged while the queue is still held: another worker finding it empty (and
            // opening the gate) must come after this verdict, not before it.
            admission.batch_taken(jobs[0].enqueued_at);
            // Callers that gave up (deadline passed) were already answered 503; rows that
            // waited longer than `max_queue_wait` are answered 503 now. Neither is written.
            jobs.into_iter()
                .filter(|job| !job.reply.is_closed())
                .filter_map(|job| admission.keep_unless_expired(job))
                .collect::<Vec<QueuedAcceptance>>()
        };
        if jobs.is_empty() {
            continue;
        }
        let span = crate::admission::commit_batch_span("postgres", jobs.iter(), 0);
        let units: Vec<&[NewInboxRow]> = jobs.iter().map(|j| j.rows.as_slice()).collect();
        let results = commit_units(&pool, &units, op_timeout).await;
        let failed = results.iter().all(Result::is_err);
        span.record(
            "hookgate.batch.outcome",
            if failed { "failed" } else { "committed" },
        );
        drop(span);
        for (job, result) in jobs.into_iter().zip(results) {
            let _ = job.reply.send(result);
        }
    }
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Commits `units` (each the rows of one request, any order, duplicates allowed) in one
/// transaction; one result per unit, in the same order. A refused batch is bisected by
/// units until the bad units stand alone (a unit is never split: its rows fail together).
pub(super) fn commit_units<'a>(
    pool: &'a Pool,
    units: &'a [&'a [NewInboxRow]],
    op_timeout: Duration,
) -> BoxFut<'a, Vec<UnitResult>> {
    Box::pin(async move {
        if units.is_empty() {
            return Vec::new();
        }
        let batch = Batch::new(units);
        match with_transaction(pool, op_timeout, &batch).await {
            Ok(accepted) => batch.answers(&accepted),
            Err(Failed::Db(Failure::Rejected(msg))) if units.len() == 1 => {
                tracing::warn!(rows = units[0].len(), error = %msg, "postgres accept: unit refused, isolated");
                vec![Err(StoreError::Unavailable(msg))]
            }
            Err(Failed::Db(Failure::Rejected(msg))) => {
                tracing::warn!(units = units.len(), error = %msg, "postgres accept: batch refused, splitting");
                let (left, right) = units.split_at(units.len() / 2);
                let mut out = commit_units(pool, left, op_timeout).await;
                out.extend(commit_units(pool, right, op_timeout).await);
                out
            }
            Err(e) => {
                let err = e.into_store_error();
                units.iter().map(|_| Err(err.clone())).collect()
            }
        }
    })
}

/// One transaction's rows: the units flattened, sorted by key (every batch of every
/// instance takes its unique-index locks in one order, so two batches cannot deadlock on
/// each other) and deduplicated (later copies of a key are answered from the first).
struct Batch<'a> {
    /// Distinct keys in key order; each its first copy by arrival.
    unique: Vec<&'a NewInboxRow>,
    /// Arrival position of each `unique` row (which of two same bodies came first).
    arrival: Vec<usize>,
    /// Per unit, per row: its position in `unique` and whether it is that key's first copy.
    slots: Vec<Vec<(usize, bool)>>,
}

impl<'a> Batch<'a> {
    fn new(units: &'a [&'a [NewInboxRow]]) -> Self {
        let flat: Vec<(usize, usize, &NewInboxRow)> = units
            .iter()
            .enumerate()
            .flat_map(|(u, rows)| rows.iter().enumerate().map(move |(i, row)| (u, i, row)))
            .collect();
        // Stable sort by key: among equal keys, the earliest arrival comes first.
        let mut order: Vec<usize> = (0..flat.len()).collect();
        order.sort_by(|&a, &b| key_of(flat[a].2).cmp(&key_of(flat[b].2)));
        let mut unique: Vec<&NewInboxRow> = Vec::with_capacity(flat.len());
        let mut arrival = Vec::with_capacity(flat.len());
        let mut slots: Vec<Vec<(usize, bool)>> = units
            .iter()
            .map(|rows| vec![(0, true); rows.len()])
            .collect();
        for &at in &order {
            let (u, i, row) = flat[at];
            match unique.last() {
                Some(last) if key_of(last) == key_of(row) => {
                    slots[u][i] = (unique.len() - 1, false);
                }
                _ => {
                    unique.push(row);
                    arrival.push(at);
                    slots[u][i] = (unique.len() - 1, true);
                }
            }
        }
        Self {
            unique,
            arrival,
            slots,
        }
    }

    /// Each unit's answers from the acceptances of the distinct rows.
    fn answers(&self, accepted: &[Acceptance]) -> Vec<UnitResult> {
        self.slots
            .iter()
            .map(|unit| {
                Ok(unit
                    .iter()
                    .map(|&(u, first)| {
                        if first {
                            accepted[u].clone()
                        } else {
                            accepted[u].for_later_copy()
                        }
                    })
                    .collect())
            })
            .collect()
    }
}

impl RetryableWrite for Batch<'_> {
    type Output = Vec<Acceptance>;
    const LABEL: &'static str = "accept";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Vec<Acceptance>, Failed> {
        let mut out = insert_in(tx, &self.unique).await?;
        replay::settle(tx, &self.unique, &self.arrival, &mut out).await?;
        // Right before COMMIT, as in the SQLite writer.
        hookgate_core::fail_point!(
            "store.commit",
            return Err(Failed::Db(Failure::Fail(StoreError::CommitUnknown(
                "failpoint store.commit".into()
            ))))
        );
        Ok(out)
    }
}

async fn insert_in(tx: &Transaction<'_>, rows: &[&NewInboxRow]) -> Result<Vec<Acceptance>, Failed> {
    let insert = tx.prepare_cached(INSERT_SQL).await?;

    let ids: Vec<&str> = rows.iter().map(|r| r.inbox_id.as_str()).collect();
    let providers: Vec<&str> = rows.iter().map(|r| r.provider.as_str()).collect();
    let endpoints: Vec<&str> = rows.iter().map(|r| r.endpoint_id.as_str()).collect();
    let event_ids: Vec<&str> = rows.iter().map(|r| r.provider_event_id.as_str()).collect();
    let event_types: Vec<Option<&str>> = rows.iter().map(|r| r.event_type.as_deref()).collect();
    let object_ids: Vec<Option<&str>> = rows.iter().map(|r| r.object_id.as_deref()).collect();
    let object_versions: Vec<Option<i64>> = rows.iter().map(|r| r.object_version).collect();
    let created: Vec<Option<i64>> = rows.iter().map(|r| r.provider_created_at).collect();
    let received: Vec<i64> = rows.iter().map(|r| r.received_at_ms).collect();
    let payloads: Vec<&[u8]> = rows.iter().map(|r| r.payload.as_slice()).collect();
    let key_versions: Vec<i64> = rows
        .iter()
        .map(|r| i64::from(r.payload_key_version))
        .collect();
    let digests: Vec<&[u8]> = rows.iter().map(|r| r.payload_digest.as_slice()).collect();
    let secret_versions: Vec<&str> = rows
        .iter()
        .map(|r| r.matched_secret_version.as_str())
        .collect();
    let statuses: Vec<&str> = rows.iter().map(|r| r.status.as_str()).collect();
    let sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
    let api_versions: Vec<Option<&str>> = rows.iter().map(|r| r.api_version.as_deref()).collect();
    let sequences: Vec<Option<i64>> = rows.iter().map(|r| r.sequence_number).collect();

    let inserted = tx
        .query(
            &insert,
            &[
                &ids,
                &providers,
                &endpoints,
                &event_ids,
                &event_types,
                &object_ids,
                &object_versions,
                &created,
                &received,
                &payloads,
                &key_versions,
                &digests,
                &secret_versions,
                &statuses,
                &sources,
                &api_versions,
                &sequences,
            ],
        )
        .await?;

    let mut accepted: std::collections::HashSet<Key> = inserted
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, String>(1),
                r.get::<_, String>(2),
            )
        })
        .collect();
    let missing: Vec<&NewInboxRow> = rows
        .iter()
        .copied()
        .filter(|r| {
            !accepted.contains(&(
                r.provider.clone(),
                r.endpoint_id.clone(),
                r.provider_event_id.clone(),
            ))
        })
        .collect();

    let mut existing: HashMap<Key, String> = HashMap::new();
    if !missing.is_empty() {
        let select = tx.prepare_cached(EXISTING_SQL).await?;
        let p: Vec<&str> = missing.iter().map(|r| r.provider.as_str()).collect();
        let e: Vec<&str> = missing.iter().map(|r| r.endpoint_id.as_str()).collect();
        let v: Vec<&str> = missing
            .iter()
            .map(|r| r.provider_event_id.as_str())
            .collect();
        for row in tx.query(&select, &[&p, &e, &v]).await? {
            existing.insert((row.get(0), row.get(1), row.get(2)), row.get(3));
        }
    }

    revive_ignored(tx, rows, &accepted, &existing).await?;

    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let key = (
            r.provider.clone(),
            r.endpoint_id.clone(),
            r.provider_event_id.clone(),
        );
        if accepted.remove(&key) {
            out.push(Acceptance::Accepted {
                inbox_id: r.inbox_id.clone(),
            });
        } else if let Some(id) = existing.remove(&key) {
            out.push(Acceptance::Duplicate { inbox_id: id });
        } else {
            // The conflicting row was not visible (it cannot vanish; be safe): run again.
            return Err(Failed::Db(Failure::Retry(
                "conflicting inbox row not found".into(),
            )));
        }
    }

    Ok(out)
}

/// IGNORED is replayable by design: the stored copies of duplicates that are rows to process
/// now (the allow-list admits their type) go back to work, due at the redelivery's receipt
/// (no-op for a stored copy that is not IGNORED or whose payload was purged). In key order,
/// like the insert.
async fn revive_ignored(
    tx: &Transaction<'_>,
    rows: &[&NewInboxRow],
    accepted: &std::collections::HashSet<Key>,
    existing: &HashMap<Key, String>,
) -> Result<(), Failed> {
    let mut ids: Vec<&str> = Vec::new();
    let mut due: Vec<i64> = Vec::new();
    for r in rows {
        if r.status != hookgate_core::InboxStatus::Received {
            continue;
        }
        let key = (
            r.provider.clone(),
            r.endpoint_id.clone(),
            r.provider_event_id.clone(),
        );
        if accepted.contains(&key) {
            continue;
        }
        if let Some(id) = existing.get(&key) {
            ids.push(id);
            due.push(r.received_at_ms);
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    let revive = tx.prepare_cached(REVIVE_IGNORED_SQL).await?;
    tx.execute(&revive, &[&ids, &due]).await?;
    Ok(())
}

/// The SQLite writer's `REVIVE_IGNORED_SQL` for a batch of rows. Parameters: inbox ids, dues.
const REVIVE_IGNORED_SQL: &str = "\
UPDATE inbox i SET status = 'RECEIVED', outcome = NULL, attempt_count = 0,
       next_attempt_at = k.due, processed_at = NULL, last_error = NULL,
       lease_owner = NULL, lease_until = NULL
FROM unnest($1::text[], $2::int8[]) AS k(inbox_id, due)
WHERE i.inbox_id = k.inbox_id AND i.status = 'IGNORED' AND i.payload_purged_at IS NULL";
