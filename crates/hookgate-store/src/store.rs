//! The store's interface, split by who calls it.
//!
//! | trait | caller | what |
//! | --- | --- | --- |
//! | [`InboxStore`] | ingress, `/readyz`, shutdown | acceptance, admission, liveness, close |
//! | [`ProcessingStore`] | the worker, `events retry` | leases, fenced completion and failure, operator retry |
//! | [`OutboxStore`] | the relay, `events retry` | delivery leases, fenced results, operator retry |
//! | [`RetentionStore`] | the retention stage, `events purge` | expired payloads and id records, operator purges with their audit row |
//! | [`InspectStore`] | CLI, admin API, benchmark, tests | read-only views of the durable state |
//! | [`OperatorStore`] | the operator API, the `events` CLI | replay, re-delivery, the audit trail |
//! | [`JobStore`] | the operator API, the `jobs` stage | bulk jobs: created, controlled, leased and run a fenced batch at a time |
//! | [`RejectionStore`] | the rejection log's flusher, the operator API | sampled rejected requests and their per-cause counts |
//! | [`ReconcileStore`] | the `reconcile` stage, `hookgate reconcile`, the operator API | reconciliation scans, repairs with their findings, runs |
//!
//! [`Store`] is their union, implemented by every type that implements all nine, and what
//! the binary holds ([`SharedStore`]). Nothing here is backend-specific; each backend
//! implements the traits in its own folder.

use std::sync::Arc;

use hookgate_core::OutboxStatus;

use crate::jobs::{
    JobBatch, JobBatchResult, JobControl, JobControlResult, JobFence, JobFenceError, JobRecord,
    JobState, LeasedJob, NewJob,
};
use crate::keys::PayloadKeyStore;
use crate::operator::{EventQuery, NewAudit, OperationResult, Redelivery};
use crate::outbox::{FailedDelivery, LeasedDelivery, OutboxRecord};
use crate::processing::{
    Completion, FailedAttempt, HeldEvent, HeldGap, LeaseRequest, PaymentState, ProcessingError,
    ProcessingResult, ReleaseRequest, SequenceGapCheck,
};
use crate::reconcile::{
    Checkpoint, FindingBatch, FindingQuery, FindingRecord, FoundEvent, MarkerKey, MissingScan,
    NewRun, NoRetryWindow, ReceivedScan, RunRecord, RunState, StuckScan,
};
use crate::rejections::{
    RejectionCauseCount, RejectionCount, RejectionEntry, RejectionQuery, RejectionRecord,
};
use crate::retention::{AuditRecord, DeletedRows, ExpiredRows, PurgeBatch, PurgeRequest};
use crate::{Acceptance, Backlog, EventFilter, InboxRecord, NewInboxRow, StoreError};

/// The inbox's front door: what the ingress needs to acknowledge a webhook, what `/readyz`
/// probes, and what shutdown calls.
#[async_trait::async_trait]
pub trait InboxStore: Send + Sync {
    /// Accepts the rows of ONE request (a batch: a SendGrid array, Adyen notification items)
    /// as one unit, in the same group commit as other requests' rows, and returns after the
    /// commit: one [`Acceptance`] per row, in order, or an error and none of them stored.
    ///
    /// Each row is inserted under `UNIQUE(provider, endpoint_id, provider_event_id)`; a key
    /// already stored (by another request, or earlier in this one) is `Duplicate` with the
    /// stored row's id. Then, for a row with a [`crate::ReplayDigest`] whose key is new: if a
    /// row of the same endpoint with the same digest was received within its window, the row
    /// is not stored and is `ReplaySuspected` with that first row's id; otherwise it is stored
    /// and claims the digest. Key and digest checks are atomic with the insert: concurrent
    /// copies (of a key or of a body) give exactly one row.
    ///
    /// A row the database refuses fails its whole unit (every row rolled back, the same error
    /// for the request: 503), never the other requests committed with it. An empty unit is
    /// `Ok` with no acceptance and touches nothing. A unit counts as its rows towards
    /// `max_batch`, and is never split across transactions.
    async fn accept_request(&self, rows: Vec<NewInboxRow>) -> Result<Vec<Acceptance>, StoreError>;

    /// [`InboxStore::accept_request`] of a single-event request.
    async fn accept(&self, row: NewInboxRow) -> Result<Acceptance, StoreError> {
        let mut acceptances = self.accept_request(vec![row]).await?;
        match (acceptances.pop(), acceptances.is_empty()) {
            (Some(acceptance), true) => Ok(acceptance),
            _ => Err(StoreError::Corrupt(
                "acceptance of one row did not give one answer".into(),
            )),
        }
    }

    /// Whether an acceptance would be admitted to the commit queue now: `false` while the
    /// queue holds more than `max_queue_wait` of work. Cheap; the ingress checks it before
    /// reading a body, so shed requests cost almost nothing.
    fn admits(&self) -> bool {
        true
    }

    /// Cheap liveness probe of the database (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Finishes queued work and stops accepting new work (graceful shutdown).
    async fn close(&self);
}

/// The worker's view of the inbox: lease due rows, then settle each one, fenced on the
/// lease. The operator's [`ProcessingStore::retry_event`] is here too: it writes the same
/// processing columns (status, attempts, due time, lease) under the same rules as a failed
/// attempt, and on SQLite goes through the same writer commands.
#[async_trait::async_trait]
pub trait ProcessingStore: Send + Sync {
    /// Leases up to `limit` due rows: `RECEIVED`, `next_attempt_at <= now_ms`, no lease or an
    /// expired one, and (when `endpoints` is given) of one of those endpoints. Each gets
    /// `lease_owner = owner`, `lease_until = now_ms + lease_ms`, `attempt_count + 1` and the
    /// lease's number from a database-wide sequence (orders payment fetches), committed before returning (PostgreSQL: `FOR UPDATE SKIP LOCKED`,
    /// so concurrent callers never get the same row; SQLite: a claim through the writer).
    /// Without `with_payload` the sealed payloads are not read at all — for workers whose
    /// endpoints have no handlers, which never open them; on PostgreSQL each is ~10 KiB read
    /// back out of TOAST.
    async fn lease(&self, request: LeaseRequest<'_>) -> Result<Vec<InboxRecord>, StoreError>;

    /// Commits the outcomes of rows leased together; one result per row, in order. Each row
    /// is committed in ONE transaction with its effects, fenced on its lease
    /// (`lease_owner = owner AND lease_until > now_ms`, else [`ProcessingError::LeaseLost`]
    /// for that row, nothing of it written, and the others go on): the version gate on
    /// `object_state` (when the row has an object id and version: apply only if newer; a
    /// stale row becomes `PROCESSED`/`stale` and nothing else is written), then per handler
    /// its `processed_events` marker and, if the marker is new, its business changes; one
    /// `PENDING` outbox row per destination; and `PROCESSED`/`applied`. SQLite commits the
    /// rows together through group commit; PostgreSQL runs them in one transaction.
    ///
    /// A row of a sequenced endpoint (`result.sequence`, with an object id and a sequence)
    /// is first put in its object's order (`crate::sequence`): at or below the last applied,
    /// `stale`; the next one, applied (then the object's waiting row after it is due at
    /// once); further ahead, [`Completion::Waiting`] — not due, its attempt not counted.
    async fn complete_all(
        &self,
        results: Vec<ProcessingResult>,
    ) -> Vec<Result<Completion, ProcessingError>>;

    /// Records a failed attempt, fenced like [`ProcessingStore::complete_all`]: back to
    /// `RECEIVED` due at `retry_at_ms`, or `FAILED` when it is `None`; `last_error` bounded;
    /// lease released.
    async fn fail_attempt(&self, attempt: FailedAttempt) -> Result<(), ProcessingError>;

    /// Operator retry: a `FAILED` row becomes `RECEIVED`, due at `now_ms`, attempts reset.
    /// `false` when the row does not exist, is not `FAILED`, or its payload was purged.
    async fn retry_event(&self, inbox_id: &str, now_ms: i64) -> Result<bool, StoreError>;

    /// Sets a leased row aside for an operator: `HELD` with its reason, lease released,
    /// fenced like [`ProcessingStore::complete_all`] ([`ProcessingError::LeaseLost`] writes
    /// nothing).
    async fn hold_event(&self, held: HeldEvent) -> Result<(), ProcessingError>;

    /// Operator release: the `HELD` rows the request selects (whose payload is stored) become
    /// `RECEIVED`, due at `now_ms`, attempts reset, `released_at = now_ms`; how many. Rows
    /// held in a sequence gap are released with their object's other waiting rows, and only
    /// the lowest sequence of each object is due: the rest follow it in order, each applied
    /// over the gap.
    async fn release_held(&self, request: ReleaseRequest) -> Result<u64, StoreError>;

    /// The sequence-gap check of one endpoint: the waiting rows of its objects whose gap
    /// opened at or before `opened_before_ms`, or which have more than `max_waiting` waiting
    /// rows, become `HELD` with a reason naming the missing sequence (rows an operator
    /// released are left alone). One statement; returns what was held, per object.
    async fn hold_sequence_gaps(&self, check: SequenceGapCheck)
    -> Result<Vec<HeldGap>, StoreError>;
}

/// The relay's view of the outbox (see [`crate::outbox`]). The operator's
/// [`OutboxStore::retry_deliveries`] is here for the reason `retry_event` is with
/// processing: it writes the columns the relay leases by.
#[async_trait::async_trait]
pub trait OutboxStore: Send + Sync {
    /// Leases up to `limit` due deliveries of `destination`: `PENDING`,
    /// `next_attempt_at <= now_ms`, no lease or an expired one. Each gets `lease_owner`,
    /// `lease_until = now_ms + lease_ms` and `attempt_count + 1`, committed before returning
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: a claim through the writer). Oldest due
    /// first. Rows whose inbox row is gone are not returned.
    async fn lease_deliveries(
        &self,
        destination: &str,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<LeasedDelivery>, StoreError>;

    /// `PENDING → DELIVERED`, fenced on the lease; [`ProcessingError::LeaseLost`] otherwise.
    /// `note` is stored as `last_error` (bounded): `None` for a delivery that was sent, the
    /// reason for one that was settled without sending (a transform's `null`).
    async fn mark_delivered(
        &self,
        outbox_id: &str,
        owner: &str,
        now_ms: i64,
        note: Option<&str>,
    ) -> Result<(), ProcessingError>;

    /// Reschedules (`PENDING`, due at `retry_at_ms`) or fails (`FAILED`) a delivery, fenced on
    /// the lease; the lease is released and `last_error` stored bounded.
    async fn fail_delivery(&self, failure: FailedDelivery) -> Result<(), ProcessingError>;

    /// Operator retry of ONE event's deliveries: only its `FAILED` ones become `PENDING`, due
    /// at `now_ms`, attempts reset; none once the event's payload was purged. Returns how many.
    async fn retry_deliveries(&self, inbox_id: &str, now_ms: i64) -> Result<u64, StoreError>;
}

/// Retention and deletion on request (see [`crate::retention`]). Every call is one short
/// transaction of at most `limit` rows (SQLite: a command of the single writer, between
/// acceptance batches; PostgreSQL: `FOR UPDATE SKIP LOCKED`, so no caller waits on it);
/// callers loop until a call returns fewer than its limit. Only `PROCESSED` and `IGNORED`
/// rows are purged or deleted by age.
#[async_trait::async_trait]
pub trait RetentionStore: Send + Sync {
    /// Removes the sealed payloads of `PROCESSED`/`IGNORED` rows received before
    /// `received_before_ms` that have no `PENDING` delivery, oldest first, recording
    /// `payload_purged_at = now_ms`; the rows stay as id records. Returns how many.
    async fn purge_expired_payloads(
        &self,
        received_before_ms: i64,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Deletes expired `PROCESSED`/`IGNORED` inbox rows with what follows them: their
    /// payload if still stored, their deliveries and their processed markers.
    async fn delete_expired_rows(&self, scope: ExpiredRows<'_>) -> Result<DeletedRows, StoreError>;

    /// Deletes `object_state` rows of `endpoint_id` last changed before `updated_before_ms`
    /// (the version gate of objects whose events have all left the inbox). Returns how many.
    async fn delete_expired_object_state(
        &self,
        endpoint_id: &str,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Deletes replay-digest claims whose window ended before `now_ms`. Returns how many.
    async fn delete_expired_replay_claims(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// `received_at` (unix ms) of the oldest row whose payload is still stored, any status.
    async fn oldest_stored_payload_ms(&self) -> Result<Option<i64>, StoreError>;

    /// Returns freed pages to the file system, at most `max_pages` (SQLite's incremental
    /// vacuum; PostgreSQL's autovacuum does this on its own: 0). Returns how many.
    async fn reclaim_space(&self, max_pages: u32) -> Result<u64, StoreError>;

    /// An operator's purge, one batch: removes the payloads of up to `limit` matching rows
    /// whose payload is stored and that are not `RECEIVED`, and writes one `audit_log` row
    /// (`events.purge`, the actor, the selection, the ids) in the same transaction.
    async fn purge_payloads(&self, request: PurgeRequest<'_>) -> Result<PurgeBatch, StoreError>;
}

/// Read-only views of the durable state, for the operator CLI, the admin API, the
/// benchmark's verification and tests. Nothing here writes, and no acceptance, processing
/// or delivery path depends on it.
#[async_trait::async_trait]
pub trait InspectStore: Send + Sync {
    async fn get_event(&self, inbox_id: &str) -> Result<Option<InboxRecord>, StoreError>;

    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<InboxRecord>, StoreError>;

    /// One page of the operator API's event list: at most `query.limit` events matching
    /// every part of `query`, newest first by `received_at` (ties by id, descending),
    /// starting after `query.after`. Keyset paging: a page never repeats or skips an event
    /// that existed when paging began, however many are accepted meanwhile. Payloads are
    /// never read (`payload` is `None`; `payload_purged_at` tells whether one is stored).
    async fn page_events(&self, query: &EventQuery) -> Result<Vec<InboxRecord>, StoreError>;

    /// Number of inbox rows, all statuses (benchmark and test verification).
    async fn count_inbox(&self) -> Result<u64, StoreError>;

    /// Durable work still to do, for the lag gauges on `/metrics` (alert on these, not on
    /// queue depth alone).
    async fn backlog(&self) -> Result<Backlog, StoreError>;

    /// `RECEIVED` rows per endpoint id, in no particular order (the gateway reports those of
    /// endpoints missing from its config as orphaned).
    async fn received_per_endpoint(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// The distinct `provider_event_id`s stored for `endpoint_id`, in byte order (the
    /// benchmark checks that exactly the sent events were stored).
    async fn distinct_event_ids(&self, endpoint_id: &str) -> Result<Vec<String>, StoreError>;

    /// Every delivery of one event, by destination (byte order).
    async fn list_deliveries(&self, inbox_id: &str) -> Result<Vec<OutboxRecord>, StoreError>;

    /// Events (newest first) that have at least one `FAILED` delivery, filtered by
    /// `filter.endpoint_id` and `filter.limit` (`filter.status` is ignored).
    async fn events_with_failed_deliveries(
        &self,
        filter: &EventFilter,
    ) -> Result<Vec<InboxRecord>, StoreError>;

    /// Number of outbox rows in `status` (all destinations).
    async fn count_deliveries(&self, status: OutboxStatus) -> Result<u64, StoreError>;

    /// The newest applied version of an object (the version gate's `object_state`).
    async fn object_version(
        &self,
        provider: &str,
        endpoint_id: &str,
        object_id: &str,
    ) -> Result<Option<i64>, StoreError>;

    /// The consumers with a `processed_events` marker for one event, in byte order.
    async fn processed_markers(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Vec<String>, StoreError>;

    /// A row of the payments handler's `payment_state` projection (a business table; see
    /// each backend's `payments.rs`).
    async fn payment_state(&self, object_id: &str) -> Result<Option<PaymentState>, StoreError>;

    /// The newest `limit` rows of `audit_log`, newest first.
    async fn audit_log(&self, limit: u32) -> Result<Vec<AuditRecord>, StoreError>;
}

/// The operator's actions on stored events (see [`crate::operator`]) and their audit trail.
/// Each operation is one conditional statement (SQLite: a command of the single writer),
/// safe against a concurrent lease: it changes only rows no worker or relay holds a live
/// lease on, and clears the lease columns, so a late lease holder's fenced write fails.
#[async_trait::async_trait]
pub trait OperatorStore: Send + Sync {
    /// Writes one `audit_log` row.
    async fn record_audit(&self, entry: NewAudit) -> Result<(), StoreError>;

    /// Replay through processing: a `PROCESSED`, `IGNORED` or `FAILED` event whose payload is
    /// stored becomes `RECEIVED`, due at `now_ms`, attempts and outcome reset. A worker then
    /// processes it as any other row (whatever the endpoint's allow-list says now).
    async fn replay_event(
        &self,
        inbox_id: &str,
        now_ms: i64,
    ) -> Result<OperationResult, StoreError>;

    /// Re-delivery of a `PROCESSED` event to one destination (see [`Redelivery`]).
    async fn redeliver(&self, request: Redelivery<'_>) -> Result<OperationResult, StoreError>;
}

/// Bulk operator jobs (see [`crate::jobs`]). SQLite runs every write through the single
/// writer (sharing the group commit); PostgreSQL leases with `FOR UPDATE SKIP LOCKED`.
#[async_trait::async_trait]
pub trait JobStore: Send + Sync {
    /// Stores a `pending` job.
    async fn create_job(&self, job: NewJob) -> Result<(), StoreError>;

    async fn get_job(&self, job_id: &str) -> Result<Option<JobRecord>, StoreError>;

    /// Up to `limit` jobs, newest first; `before` is the id of the last job of the previous
    /// page (its creation time and id order the list).
    async fn list_jobs(
        &self,
        limit: u32,
        before: Option<&str>,
    ) -> Result<Vec<JobRecord>, StoreError>;

    /// An operator's pause, resume or cancel: applied only from the states the change takes
    /// ([`JobControl::from_states`]); a pause or a cancel drops the runner's lease, so its next
    /// write is refused.
    async fn control_job(
        &self,
        job_id: &str,
        control: JobControl,
        now_ms: i64,
    ) -> Result<JobControlResult, StoreError>;

    /// Leases the oldest runnable job: `pending`, or `running` whose lease expired (a runner
    /// that died). It becomes `running` under `owner` until `now_ms + lease_ms`, with a new
    /// `lease_epoch`.
    async fn lease_job(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<LeasedJob>, StoreError>;

    /// Records a job's snapshot time and total the first time it starts (a resumed job keeps
    /// its own), fenced.
    async fn start_job(
        &self,
        fence: &JobFence,
        snapshot_at_ms: i64,
        total: u64,
        now_ms: i64,
    ) -> Result<JobRecord, JobFenceError>;

    /// Applies the job's action to a batch of events and records the results, the cursor and
    /// a renewed lease, in ONE transaction fenced on the lease; nothing at all when the fence
    /// is closed ([`JobFenceError::Stopped`]).
    async fn run_job_batch(&self, batch: JobBatch) -> Result<JobBatchResult, JobFenceError>;

    /// Ends a run (`done` or `failed`, with a bounded error), fenced; the lease is released.
    async fn finish_job(
        &self,
        fence: &JobFence,
        state: JobState,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<(), JobFenceError>;
}

/// The rejection log (see [`crate::rejections`]).
#[async_trait::async_trait]
pub trait RejectionStore: Send + Sync {
    /// Writes sampled entries and adds per-minute counts, in one transaction.
    async fn record_rejections(
        &self,
        entries: Vec<RejectionEntry>,
        counts: Vec<RejectionCount>,
    ) -> Result<(), StoreError>;

    /// Matching entries, newest first, at most `query.limit`, after `query.before_id`.
    async fn list_rejections(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionRecord>, StoreError>;

    /// Per cause: rejections seen (sampled or not) and entries kept, matching `query`'s
    /// endpoint, cause and time (minute granularity for `seen`); by cause.
    async fn rejection_counts(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionCauseCount>, StoreError>;

    /// Retention of the log, one bounded batch: entries and counts older than
    /// `before_ms`, and the oldest entries beyond the newest `keep_entries`. Returns how
    /// many entries went.
    async fn trim_rejections(
        &self,
        before_ms: i64,
        keep_entries: u64,
        limit: u32,
    ) -> Result<u64, StoreError>;
}

/// Reconciliation inside the gateway (see [`crate::reconcile`]): bounded scans (reads, no
/// payload), the repairs with their finding rows, and the run records.
#[async_trait::async_trait]
pub trait ReconcileStore: Send + Sync {
    /// The endpoint's `RECEIVED` rows `scan.rows` names (overdue, or waiting for a missing
    /// sequence), at most `limit`.
    async fn received_rows(&self, scan: &ReceivedScan<'_>) -> Result<Vec<FoundEvent>, StoreError>;

    /// `PROCESSED`/`applied` rows of the endpoint, payload stored, received at or after
    /// `since_ms`, without a delivery to the destination; in `(received_at, inbox_id)` order
    /// after `after`, at most `limit`.
    async fn processed_without_delivery(
        &self,
        scan: &MissingScan<'_>,
    ) -> Result<Vec<FoundEvent>, StoreError>;

    /// The events of the endpoint whose `PENDING` delivery to the destination was leased, whose
    /// lease expired at or before `threshold_ms`, and that is due; at most `limit`.
    async fn stuck_deliveries(&self, scan: &StuckScan<'_>) -> Result<Vec<FoundEvent>, StoreError>;

    /// Processed markers of the endpoint without their inbox row, in key order after `after`.
    async fn orphan_markers(
        &self,
        endpoint_id: &str,
        after: Option<&MarkerKey>,
        limit: u32,
    ) -> Result<Vec<MarkerKey>, StoreError>;

    /// In ONE transaction: each finding's repair (when `batch.repair`), conditional on what
    /// the scan found still holding, and its `reconcile_findings` row when it held (a dry run
    /// records every finding, repairing nothing). One `bool` per finding: recorded.
    async fn record_findings(&self, batch: FindingBatch) -> Result<Vec<bool>, StoreError>;

    /// Findings, newest first (see [`FindingQuery`]).
    async fn list_findings(&self, query: &FindingQuery) -> Result<Vec<FindingRecord>, StoreError>;

    /// Deletes findings found before `before_ms`, at most `limit`. Returns how many.
    async fn trim_findings(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError>;

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError>;

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// Leases the oldest runnable run: `pending`, or `running` whose lease expired (its runner
    /// died). It becomes `running` under `owner` until `now_ms + lease_ms`.
    async fn lease_run(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<RunRecord>, StoreError>;

    /// Ends a run `done` or `failed` with its summary and a bounded error, fenced on `owner`;
    /// `false` when the run is no longer this runner's (nothing written).
    async fn finish_run(
        &self,
        run_id: &str,
        owner: &str,
        state: RunState,
        summary: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Provider reconciliation's checkpoint of the endpoint, if a run completed there.
    async fn checkpoint(&self, endpoint_id: &str) -> Result<Option<Checkpoint>, StoreError>;

    /// Records a completed provider run: the checkpoint (never moved back) and when.
    async fn save_checkpoint(
        &self,
        endpoint_id: &str,
        provider: &str,
        checkpoint_at_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// The inbox id stored under the unique key, if any (a read: nothing is inserted).
    async fn inbox_id_of(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Records a no-retry window of the endpoint: the gateway answered non-2xx from
    /// `started_at_ms` to `ended_at_ms`. It extends the endpoint's newest open window when it
    /// starts within or after that one (one open window per endpoint), else it is a new one.
    async fn record_no_retry_window(
        &self,
        endpoint_id: &str,
        started_at_ms: i64,
        ended_at_ms: i64,
    ) -> Result<(), StoreError>;

    /// The endpoint's windows no provider run covered yet, oldest first (at most
    /// [`crate::reconcile::MAX_OPEN_WINDOWS`]).
    async fn open_no_retry_windows(
        &self,
        endpoint_id: &str,
    ) -> Result<Vec<NoRetryWindow>, StoreError>;

    /// Marks the endpoint's open windows up to `up_to_window_id` covered at `now_ms`.
    async fn cover_no_retry_windows(
        &self,
        endpoint_id: &str,
        up_to_window_id: i64,
        now_ms: i64,
    ) -> Result<u64, StoreError>;
}

/// Everything a gateway process uses: the union of the five roles and key rotation
/// ([`PayloadKeyStore`]).
pub trait Store:
    InboxStore
    + OperatorStore
    + ProcessingStore
    + OutboxStore
    + RetentionStore
    + InspectStore
    + JobStore
    + RejectionStore
    + ReconcileStore
    + PayloadKeyStore
    + Send
    + Sync
    + 'static
{
}

impl<T> Store for T where
    T: InboxStore
        + OperatorStore
        + ProcessingStore
        + OutboxStore
        + RetentionStore
        + InspectStore
        + JobStore
        + RejectionStore
        + ReconcileStore
        + PayloadKeyStore
        + Send
        + Sync
        + 'static
{
}

/// How the binary holds its store.
pub type SharedStore = Arc<dyn Store>;
