//! The store: the inbox is the source of truth (DESIGN.md §4).
//!
//! [`Store`] is the one interface the binary sees; only this crate knows SQL. Backends:
//! `sqlite` (embedded default: one writer thread, group commit, WAL, `synchronous=FULL`) and
//! `postgres` (several gateway instances on one database). Both share the same tables,
//! columns, status values and unique key, and one conformance suite (`tests/`) runs on both.
//!
//! Acceptance is one atomic conflict-ignoring insert of the inbox row; a duplicate reads the
//! existing row's id. Concurrent acceptances share a transaction and a commit (group commit);
//! each caller is answered only after that commit, and one bad row never fails its batch.

use std::fmt;
use std::sync::Arc;

use hookgate_core::{InboxStatus, Outcome};

mod admission;
mod lease;
pub mod outbox;
pub mod postgres;
pub mod processing;
pub mod sqlite;

pub use outbox::{FailedDelivery, LeasedDelivery, OutboxRecord, OutboxStore};
pub use processing::{
    BusinessChange, FailedAttempt, HandlerOutput, LeaseRequest, PaymentState, ProcessingError,
    ProcessingResult,
};
pub use sqlite::{CommitStats, SqliteStore};

/// A verified event, sealed, ready to become an inbox row.
#[derive(Clone)]
pub struct NewInboxRow {
    /// Allocated by the caller (UUIDv7 text); kept only if this row is the first copy.
    pub inbox_id: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: Option<String>,
    pub object_id: Option<String>,
    pub object_version: Option<i64>,
    /// Provider's created-at, unix seconds.
    pub provider_created_at: Option<i64>,
    /// When the gateway received it, unix milliseconds.
    pub received_at_ms: i64,
    /// `nonce || ciphertext` (see `hookgate_core::seal`); never plaintext.
    pub payload: Vec<u8>,
    pub payload_key_version: u32,
    /// Keyed MAC of the plaintext payload.
    pub payload_digest: Vec<u8>,
    pub matched_secret_version: String,
    /// `Received` for events to process, `Ignored` for types not allowed on the endpoint.
    pub status: InboxStatus,
}

impl fmt::Debug for NewInboxRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewInboxRow")
            .field("inbox_id", &self.inbox_id)
            .field("provider", &self.provider)
            .field("endpoint_id", &self.endpoint_id)
            .field("status", &self.status)
            .field("payload_len", &self.payload.len())
            .finish_non_exhaustive()
    }
}

/// What the insert under the unique key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acceptance {
    /// This request's row was committed.
    Accepted { inbox_id: String },
    /// An earlier copy was already committed; its id.
    Duplicate { inbox_id: String },
}

impl Acceptance {
    pub fn inbox_id(&self) -> &str {
        match self {
            Acceptance::Accepted { inbox_id } | Acceptance::Duplicate { inbox_id } => inbox_id,
        }
    }
}

/// An inbox row as read back (metadata and the sealed payload).
#[derive(Clone, PartialEq, Eq)]
pub struct InboxRecord {
    pub inbox_id: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: Option<String>,
    pub object_id: Option<String>,
    pub object_version: Option<i64>,
    pub provider_created_at: Option<i64>,
    pub received_at_ms: i64,
    /// `None` once purged by retention.
    pub payload: Option<Vec<u8>>,
    pub payload_key_version: u32,
    pub payload_digest: Vec<u8>,
    pub matched_secret_version: String,
    pub status: InboxStatus,
    pub outcome: Option<Outcome>,
    pub attempt_count: i64,
    pub next_attempt_at_ms: Option<i64>,
    pub last_error: Option<String>,
    pub processed_at_ms: Option<i64>,
}

impl fmt::Debug for InboxRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxRecord")
            .field("inbox_id", &self.inbox_id)
            .field("provider", &self.provider)
            .field("endpoint_id", &self.endpoint_id)
            .field("provider_event_id", &self.provider_event_id)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// What is still to be done, read from the durable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    /// Inbox rows waiting for processing (`RECEIVED`).
    pub received: u64,
    /// `received_at` (unix ms) of the oldest of them.
    pub oldest_received_at_ms: Option<i64>,
    /// Inbox rows whose processing `FAILED`.
    pub failed: u64,
    /// Deliveries not yet made (`PENDING`).
    pub outbox_pending: u64,
    /// `created_at` (unix ms) of the oldest of them.
    pub oldest_pending_at_ms: Option<i64>,
    /// Deliveries that `FAILED`.
    pub outbox_failed: u64,
}

/// One query for [`Store::backlog`]; the same SQL on both backends (each count is served by
/// a status index).
pub(crate) const BACKLOG_SQL: &str = "SELECT \
     (SELECT count(*) FROM inbox WHERE status = 'RECEIVED'), \
     (SELECT min(received_at) FROM inbox WHERE status = 'RECEIVED'), \
     (SELECT count(*) FROM inbox WHERE status = 'FAILED'), \
     (SELECT count(*) FROM outbox WHERE status = 'PENDING'), \
     (SELECT min(created_at) FROM outbox WHERE status = 'PENDING'), \
     (SELECT count(*) FROM outbox WHERE status = 'FAILED')";

/// Filter for listing events (operator CLI, tests, benchmark verification).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub status: Option<InboxStatus>,
    pub endpoint_id: Option<String>,
    /// At most this many rows, newest first; `None` = all.
    pub limit: Option<u32>,
}

/// Store failures, classified for the caller's decision. Never carries payload bytes.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or refused the work (503; the provider retries).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The commit may or may not have landed (503; the retry converges on the unique row).
    #[error("commit outcome unknown: {0}")]
    CommitUnknown(String),
    /// The store is overloaded and shed the request before trying (503).
    #[error("store overloaded")]
    Overloaded,
    /// Stored data is inconsistent with what this version expects (500).
    #[error("store data corrupt: {0}")]
    Corrupt(String),
    /// The store URL or options are invalid (start-up error).
    #[error("invalid store configuration: {0}")]
    Config(String),
}

/// The store interface shared by every backend. Its outbox half is [`OutboxStore`].
#[async_trait::async_trait]
pub trait Store: OutboxStore + Send + Sync + 'static {
    /// Inserts the row under `UNIQUE(provider, endpoint_id, provider_event_id)` and commits
    /// durably before returning. On conflict, returns the existing row's id.
    async fn accept(&self, row: NewInboxRow) -> Result<Acceptance, StoreError>;

    /// Whether an acceptance would be admitted to the commit queue now: `false` while the
    /// queue holds more than `max_queue_wait` of work. Cheap; the ingress checks it before
    /// reading a body, so shed requests cost almost nothing.
    fn admits(&self) -> bool {
        true
    }

    /// Cheap liveness probe of the database (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    async fn get_event(&self, inbox_id: &str) -> Result<Option<InboxRecord>, StoreError>;

    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<InboxRecord>, StoreError>;

    /// Number of inbox rows, all statuses (benchmark and test verification).
    async fn count_inbox(&self) -> Result<u64, StoreError>;

    /// Durable work still to do, for the lag gauges on `/metrics` (alert on these, not on
    /// queue depth alone).
    async fn backlog(&self) -> Result<Backlog, StoreError>;

    /// The distinct `provider_event_id`s stored for `endpoint_id`, sorted ascending
    /// (the benchmark checks that exactly the sent events were stored).
    async fn distinct_event_ids(&self, endpoint_id: &str) -> Result<Vec<String>, StoreError>;

    /// Finishes queued work and stops accepting new work (graceful shutdown).
    async fn close(&self);

    // ---- Processing (DESIGN.md §5–§6; see [`processing`]) ----

    /// Leases up to `limit` due rows: `RECEIVED`, `next_attempt_at <= now_ms`, and no lease or
    /// an expired one. Each gets `lease_owner = owner`, `lease_until = now_ms + lease_ms` and
    /// `attempt_count + 1`, committed before returning (PostgreSQL: `FOR UPDATE SKIP LOCKED`,
    /// so concurrent callers never get the same row; SQLite: a claim through the writer).
    /// Without `with_payload` the sealed payloads are not read at all — for workers whose
    /// endpoints have no handlers, which never open them; on PostgreSQL each is ~10 KiB read
    /// back out of TOAST.
    async fn lease(&self, request: LeaseRequest<'_>) -> Result<Vec<InboxRecord>, StoreError>;

    /// [`Store::lease`] with the payloads.
    async fn lease_due(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        self.lease(LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload: true,
        })
        .await
    }

    /// [`Store::lease`] without the payloads (`payload` is `None` in every record).
    async fn lease_due_without_payload(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        self.lease(LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload: false,
        })
        .await
    }

    /// Commits the outcome of one leased row in ONE transaction, fenced on the lease
    /// (`lease_owner = owner AND lease_until > now_ms`, else [`ProcessingError::LeaseLost`]
    /// and nothing is written): the version gate on `object_state` (when the row has an object
    /// id and version: apply only if newer; a stale row becomes `PROCESSED`/`stale` and nothing
    /// else is written), then per handler its `processed_events` marker and, if the marker is
    /// new, its business changes; one `PENDING` outbox row per destination; and
    /// `PROCESSED`/`applied`. Returns the outcome.
    async fn complete(&self, result: ProcessingResult) -> Result<Outcome, ProcessingError>;

    /// Commits the outcomes of rows leased together, each exactly as [`Store::complete`]
    /// would (its own fence, gate and effects); one result per row, in order, and a row whose
    /// lease was lost does not hold back the others. The default runs the completions
    /// concurrently, so a group-committing backend (SQLite) commits them together; PostgreSQL
    /// runs them in one transaction.
    async fn complete_all(
        &self,
        results: Vec<ProcessingResult>,
    ) -> Vec<Result<Outcome, ProcessingError>> {
        futures_util::future::join_all(results.into_iter().map(|r| self.complete(r))).await
    }

    /// Records a failed attempt, fenced like [`Store::complete`]: back to `RECEIVED` due at
    /// `retry_at_ms`, or `FAILED` when it is `None`; `last_error` bounded; lease released.
    async fn fail_attempt(&self, attempt: FailedAttempt) -> Result<(), ProcessingError>;

    /// Operator retry: a `FAILED` row becomes `RECEIVED`, due at `now_ms`, attempts reset.
    /// `false` when the row does not exist or is not `FAILED`.
    async fn retry_event(&self, inbox_id: &str, now_ms: i64) -> Result<bool, StoreError>;

    /// The newest applied version of an object (the gate's `object_state`).
    async fn object_version(
        &self,
        provider: &str,
        endpoint_id: &str,
        object_id: &str,
    ) -> Result<Option<i64>, StoreError>;

    /// A row of the `payment_state` projection.
    async fn payment_state(&self, object_id: &str) -> Result<Option<PaymentState>, StoreError>;

    /// The consumers with a `processed_events` marker for one event, sorted.
    async fn processed_markers(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Vec<String>, StoreError>;

    /// The destinations with an outbox row for `inbox_id`, sorted.
    async fn outbox_destinations(&self, inbox_id: &str) -> Result<Vec<String>, StoreError>;
}

pub type SharedStore = Arc<dyn Store>;

/// Tuning of group commit, shared by the backends.
#[derive(Debug, Clone)]
pub struct GroupCommitOptions {
    /// `false` = one transaction per request (for measurement only).
    pub enabled: bool,
    /// Most rows in one transaction.
    pub max_batch: usize,
    /// Rows queued for the writer before new requests are shed with [`StoreError::Overloaded`].
    pub queue_capacity: usize,
    /// Longest a row waits in the queue for its batch. The queue admits about this much
    /// work at the measured commit rate and sheds the rest with [`StoreError::Overloaded`]
    /// (503 + `Retry-After`), so acknowledgement latency stays bounded under overload.
    pub max_queue_wait: std::time::Duration,
}

impl Default for GroupCommitOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            max_batch: 512,
            queue_capacity: 8192,
            max_queue_wait: std::time::Duration::from_millis(250),
        }
    }
}
