//! Processing types: what a worker hands the store, and what it gets back.
//!
//! Only the store knows SQL, so a handler's business change is a typed [`BusinessChange`]
//! that the store applies inside the processing transaction, together with the version gate,
//! the `processed_events` markers, the outbox rows and `inbox.status = PROCESSED`
//! ([`crate::ProcessingStore::complete_all`]). Nothing here does I/O.

use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, bounded};

use crate::StoreError;

/// One local business change, applied by the store inside the processing transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusinessChange {
    /// Stores the provider's current state of a payment object (`payment_state`), as fetched
    /// at `refreshed_at_ms` (the worker's clock, kept for operators). Fetches are ordered by
    /// the lease they were made under: the store stamps each lease with a number from one
    /// database-wide sequence (`lease_seq`), and a row is never overwritten by a fetch made
    /// under an earlier lease — every change of the object sends an event, whose lease comes
    /// after the change and whose fetch comes after its lease, so the projection converges on
    /// the provider's latest state whatever the commit order and whatever the instances'
    /// clocks. Only fetches under one lease (one worker, one clock) are ordered by
    /// `refreshed_at_ms`.
    UpsertPaymentState {
        object_id: String,
        object_type: String,
        status: String,
        amount: Option<i64>,
        currency: Option<String>,
        refreshed_at_ms: i64,
        last_event_id: String,
    },
}

/// What one handler (a `processed_events` consumer) wants committed for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerOutput {
    /// The consumer name of the `processed_events` marker (the handler's name).
    pub consumer: String,
    /// Applied only if this consumer's marker for the event was not already there.
    pub changes: Vec<BusinessChange>,
}

/// Everything [`crate::ProcessingStore::complete_all`] commits for one leased inbox row.
#[derive(Debug, Clone)]
pub struct ProcessingResult {
    pub inbox_id: String,
    /// The lease owner; the commit is fenced on it.
    pub owner: String,
    /// The worker's clock: the lease must still be valid at this time.
    pub now_ms: i64,
    pub handlers: Vec<HandlerOutput>,
    /// One outbox row (PENDING) per destination of the endpoint.
    pub destinations: Vec<String>,
}

/// A failed attempt, recorded by [`crate::ProcessingStore::fail_attempt`] (fenced like a
/// completion).
#[derive(Clone)]
pub struct FailedAttempt {
    pub inbox_id: String,
    pub owner: String,
    pub now_ms: i64,
    /// Redacted by the caller (no payload bytes, no secrets); the store bounds its length.
    pub error: String,
    /// `Some(t)`: back to RECEIVED, due at `t`; `None`: FAILED.
    pub retry_at_ms: Option<i64>,
}

impl std::fmt::Debug for FailedAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailedAttempt")
            .field("inbox_id", &self.inbox_id)
            .field("owner", &self.owner)
            .field("retry_at_ms", &self.retry_at_ms)
            .finish_non_exhaustive()
    }
}

impl FailedAttempt {
    /// The error as stored: at most [`MAX_LAST_ERROR_CHARS`] characters.
    pub fn stored_error(&self) -> String {
        bounded(&self.error, MAX_LAST_ERROR_CHARS)
    }
}

/// A leased row set aside for an operator (`HELD`), by
/// [`crate::ProcessingStore::hold_event`], fenced like a completion.
#[derive(Debug, Clone)]
pub struct HeldEvent {
    pub inbox_id: String,
    pub owner: String,
    pub now_ms: i64,
    /// Why, for operators (`held_reason`): no payload bytes, no secrets; bounded by the store.
    pub reason: String,
}

impl HeldEvent {
    /// The reason as stored: at most [`MAX_LAST_ERROR_CHARS`] characters.
    pub fn stored_reason(&self) -> String {
        bounded(&self.reason, MAX_LAST_ERROR_CHARS)
    }
}

/// Which `HELD` rows an operator releases ([`crate::ProcessingStore::release_held`]): all of
/// them, one endpoint's, or one event.
#[derive(Debug, Clone, Default)]
pub struct ReleaseRequest {
    pub endpoint_id: Option<String>,
    pub inbox_id: Option<String>,
    pub now_ms: i64,
}

/// What to lease (see [`crate::ProcessingStore::lease`]): up to `limit` due rows for `owner`, until
/// `now_ms + lease_ms`.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    pub owner: &'a str,
    pub now_ms: i64,
    pub lease_ms: i64,
    pub limit: u32,
    /// Whether the records carry their sealed payloads (`None` in every record otherwise).
    pub with_payload: bool,
    /// `Some(ids)`: only rows of these endpoints are leased; rows of any other endpoint (one
    /// removed from the config) are left alone — still `RECEIVED`, attempts unchanged — until
    /// it is configured again. `None`: rows of every endpoint.
    pub endpoints: Option<&'a [String]>,
}

/// Why a fenced processing write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ProcessingError {
    /// The caller no longer holds the lease (it expired and may have been taken over, or the
    /// row is no longer RECEIVED): nothing was written.
    #[error("lease lost: the row is no longer leased to this worker")]
    LeaseLost,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ProcessingError {
    /// For writes that hold no lease: a lease loss there is a bug in the store, reported as
    /// unavailable rather than trusted.
    pub(crate) fn into_store_error(self) -> StoreError {
        match self {
            ProcessingError::Store(e) => e,
            ProcessingError::LeaseLost => StoreError::Unavailable("unexpected lease loss".into()),
        }
    }
}

/// A row of the payments handler's `payment_state` projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentState {
    pub object_id: String,
    pub object_type: String,
    pub status: String,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub refreshed_at_ms: i64,
    pub last_event_id: String,
    /// The lease number the stored fetch was made under (0: written before schema 6/7).
    pub fetch_seq: i64,
    /// How many times the row was written (1 = inserted once, never updated): makes "exactly
    /// one business mutation" observable.
    pub write_count: i64,
}
