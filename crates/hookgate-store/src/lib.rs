//! The store: the inbox is the source of truth, and only this crate knows SQL.
//!
//! The interface is split by who calls it (see [`store`]): [`InboxStore`] (acceptance),
//! [`ProcessingStore`] (the worker), [`OutboxStore`] (the relay) and [`InspectStore`]
//! (read-only: CLI, admin API, benchmark, tests); [`Store`] is their union and
//! [`SharedStore`] what the binary holds. [`open`] opens a backend from a store URL.
//!
//! Backends: `sqlite` (embedded default: one writer thread, group commit, WAL,
//! `synchronous=FULL`) and `postgres` (several gateway instances on one database). Both have
//! the same tables, columns, status values and unique key (ARCHITECTURE.md), read rows back
//! through one mapping ([`rows`]) and share every statement whose text is the same on both
//! ([`statements`]); one conformance suite (`tests/it/conformance/`) runs on both. The
//! payments handler's business table (`payment_state`) is written and read only in each
//! backend's `payments.rs`.
//!
//! Acceptance takes the rows of one request as a unit ([`InboxStore::accept_request`];
//! [`InboxStore::accept`] is the unit of one): each row one atomic conflict-ignoring insert
//! under its own unique key, a duplicate reading the existing row's id. Concurrent requests
//! share a transaction and a commit (group commit); each caller is answered only after that
//! commit. A unit is committed whole or not at all: a bad row fails its own request, never
//! the other requests of its batch.
//!
//! Replays of a body under a fresh unsigned id: a row may carry a [`ReplayDigest`] (the
//! keyed digest of its verified body, `hookgate_core::seal::ReplayKey`, and the idempotency
//! window). A new key whose body was accepted on the same endpoint within the window is
//! answered [`Acceptance::ReplaySuspected`] with the first row's id and not stored; the claim
//! lives in `replay_digests`, written in the acceptance transaction (atomic on both
//! backends).

use std::fmt;

use hookgate_core::{EventSource, InboxStatus, Outcome};

mod admission;
pub mod jobs;
pub mod keys;
mod lease;
mod migrations;
mod open;
pub mod operator;
pub mod outbox;
mod payments;
pub mod postgres;
pub mod processing;
pub mod reconcile;
pub mod rejections;
pub mod retention;
mod rows;
pub mod sequence;
pub mod sqlite;
mod statements;
pub mod store;

pub use jobs::{
    JobAction, JobBatch, JobBatchResult, JobControl, JobControlResult, JobFence, JobFenceError,
    JobRecord, JobState, LeasedJob, NewJob,
};
pub use keys::{KeyVersionRows, PayloadKeyStore, ResealedPayload, SealedPayload};
pub use open::{OpenOptions, open};
pub use operator::{EventQuery, NewAudit, OperationResult, PageKey, Redelivery};
pub use outbox::{FailedDelivery, LeasedDelivery, OutboxRecord};
pub use processing::{
    BusinessChange, Completion, FailedAttempt, HandlerOutput, HeldEvent, HeldGap, LeaseRequest,
    PaymentState, ProcessingError, ProcessingResult, ReleaseRequest, SequenceGapCheck,
};
pub use reconcile::{
    Checkpoint, FindingAction, FindingBatch, FindingKind, FindingQuery, FindingRecord, FoundEvent,
    MarkerKey, MissingScan, NewFinding, NewRun, NoRetryWindow, ReceivedRows, ReceivedScan,
    RunRecord, RunState, RunTrigger, StuckScan,
};
pub use rejections::{
    RejectionCauseCount, RejectionCount, RejectionEntry, RejectionQuery, RejectionRecord,
};
pub use retention::{
    AuditRecord, DeletedRows, ExpiredRows, PurgeBatch, PurgeRequest, PurgeSelection,
};
pub use sequence::SequenceStart;
pub use sqlite::{CommitStats, SqliteStore};
pub use store::{
    InboxStore, InspectStore, JobStore, OperatorStore, OutboxStore, ProcessingStore,
    ReconcileStore, RejectionStore, RetentionStore, SharedStore, Store,
};

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
    /// `Webhook` for what arrived signed; `Reconciled` for what reconciliation found through
    /// the provider's API.
    pub source: EventSource,
    /// The provider's API version stamp, where its pack says to read it (`api_version` in
    /// the pack); what an endpoint's `api_versions` pin is checked against at processing.
    pub api_version: Option<String>,
    /// The event's position in its object's sequence, read with the endpoint's
    /// `sequence_pointer` (the order processing applies the object's events in).
    pub sequence_number: Option<i64>,
    /// For packs whose id and timestamp are both unsigned (`replay_defence = "body_digest"`):
    /// the keyed digest of the verified body; `None` for every other pack.
    pub replay_digest: Option<ReplayDigest>,
}

/// A row's claim on its body: while the claim holds, another row of the same endpoint with
/// the same digest under another id is a replay ([`Acceptance::ReplaySuspected`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ReplayDigest {
    /// `hookgate_core::seal::ReplayKey::digest` of the verified body bytes.
    pub digest: [u8; 32],
    /// The idempotency window: the claim holds for rows received before
    /// `received_at_ms + window_ms` of the row that made it.
    pub window_ms: i64,
}

impl fmt::Debug for ReplayDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayDigest")
            .field("window_ms", &self.window_ms)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for NewInboxRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewInboxRow")
            .field("inbox_id", &self.inbox_id)
            .field("provider", &self.provider)
            .field("endpoint_id", &self.endpoint_id)
            .field("status", &self.status)
            .field("payload_len", &self.payload.len())
            .field("replay_digest", &self.replay_digest.is_some())
            .finish_non_exhaustive()
    }
}

/// What the insert under the unique key (and the replay digest) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acceptance {
    /// This request's row was committed.
    Accepted { inbox_id: String },
    /// An earlier copy was already committed; its id.
    Duplicate { inbox_id: String },
    /// Another id, but the same body (its [`ReplayDigest`]) was accepted on this endpoint
    /// within the window: answered as a duplicate of that first row, no row stored.
    ReplaySuspected { inbox_id: String },
}

impl Acceptance {
    pub fn inbox_id(&self) -> &str {
        match self {
            Acceptance::Accepted { inbox_id }
            | Acceptance::Duplicate { inbox_id }
            | Acceptance::ReplaySuspected { inbox_id } => inbox_id,
        }
    }

    /// What a later copy of the same key in the same transaction is answered: a duplicate
    /// of whatever the first copy found (a replay stays a replay).
    pub(crate) fn for_later_copy(&self) -> Acceptance {
        match self {
            Acceptance::ReplaySuspected { inbox_id } => Acceptance::ReplaySuspected {
                inbox_id: inbox_id.clone(),
            },
            other => Acceptance::Duplicate {
                inbox_id: other.inbox_id().to_owned(),
            },
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
    /// `None` once purged (retention or `events purge`), and in leases that do not read it.
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
    /// When the sealed payload was removed; `None` while it is stored. Stored state, set in
    /// the transaction that deletes the payload (never derived from the clock).
    pub payload_purged_at_ms: Option<i64>,
    pub source: EventSource,
    pub api_version: Option<String>,
    /// Why the row is `HELD` (cleared when it is released).
    pub held_reason: Option<String>,
    /// When an operator last released the row from `HELD` (`hookgate events release`): a
    /// released row is processed without the hold's check again.
    pub released_at_ms: Option<i64>,
    /// The event's position in its object's sequence (the endpoint's `sequence_pointer`).
    pub sequence_number: Option<i64>,
    /// While the row waits for a missing earlier event of its object (`RECEIVED`, not due)
    /// or is `HELD` because that gap outlived its window: the sequence it waits for.
    pub sequence_waiting_for: Option<i64>,
}

impl InboxRecord {
    /// Whether the sealed payload is still stored (`hookgate events show`'s `payload_stored`).
    pub fn payload_stored(&self) -> bool {
        self.payload_purged_at_ms.is_none()
    }
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
    /// Inbox rows set aside for an operator (`HELD`).
    pub held: u64,
    /// Objects of sequenced endpoints whose gap is open: events wait (or are held) for a
    /// missing earlier one.
    pub sequence_gaps_open: u64,
}

/// Filter for listing events (operator CLI, tests, benchmark verification).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub status: Option<InboxStatus>,
    pub endpoint_id: Option<String>,
    /// Only events verified by this secret version (`matched_secret_version`): what a
    /// compromised version let in, the first step of an emergency retirement.
    pub matched_secret_version: Option<String>,
    /// At most this many rows, newest first; `None` = all.
    pub limit: Option<u32>,
}

/// Store failures, classified for the caller's decision. Never carries payload bytes.
/// `Clone`: every caller of a failed batch gets the same error.
#[derive(Debug, Clone, thiserror::Error)]
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
