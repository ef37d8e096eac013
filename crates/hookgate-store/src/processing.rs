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
    /// at `refreshed_at_ms`. A row refreshed later is never overwritten by an older fetch, so
    /// concurrent workers converge on the newest fetch whatever their commit order.
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
    /// How many times the row was written (1 = inserted once, never updated): makes "exactly
    /// one business mutation" observable.
    pub write_count: i64,
}
