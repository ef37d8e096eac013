//! The outbox (DESIGN.md §4–§5): one row per (inbox row, destination), written by the
//! processing transaction ([`crate::Store::complete`]) and delivered by the relay.
//!
//! Rows move `PENDING → DELIVERED | FAILED`. The relay leases due `PENDING` rows of ONE
//! destination at a time (so a destination that is down never holds back another), delivers
//! them outside any transaction, then records the result fenced on its lease
//! (`lease_owner = owner AND lease_until > now`): a relay that lost its lease cannot overwrite
//! its successor. A crashed relay's rows come back when their lease expires and are delivered
//! again with the same idempotency key (effectively once; consumers dedupe on the inbox id).
//!
//! [`OutboxStore`] is a supertrait of [`crate::Store`], implemented by each backend in its
//! `outbox.rs`; only the store knows SQL.

use std::fmt;

use hookgate_core::OutboxStatus;
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, bounded};

use crate::{EventFilter, InboxRecord, ProcessingError, StoreError};

/// An outbox row as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRecord {
    pub outbox_id: String,
    pub inbox_id: String,
    pub destination: String,
    pub status: OutboxStatus,
    /// Leases taken so far (delivery attempts started).
    pub attempt_count: i64,
    pub next_attempt_at_ms: Option<i64>,
    /// Redacted and bounded (never payload bytes, secrets or response bodies).
    pub last_error: Option<String>,
    pub created_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
}

/// One leased delivery: the outbox row and the inbox row it delivers (with the sealed payload).
#[derive(Clone)]
pub struct LeasedDelivery {
    pub delivery: OutboxRecord,
    pub event: InboxRecord,
}

impl fmt::Debug for LeasedDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedDelivery")
            .field("delivery", &self.delivery)
            .field("event", &self.event)
            .finish()
    }
}

/// A failed delivery attempt, recorded by [`OutboxStore::fail_delivery`] (fenced on the lease).
#[derive(Debug, Clone)]
pub struct FailedDelivery {
    pub outbox_id: String,
    pub owner: String,
    pub now_ms: i64,
    /// Redacted by the caller; the store bounds its length.
    pub error: String,
    /// `Some(t)`: stays `PENDING`, due at `t`; `None`: `FAILED`.
    pub retry_at_ms: Option<i64>,
}

impl FailedDelivery {
    /// The error as stored: at most [`MAX_LAST_ERROR_CHARS`] characters.
    pub fn stored_error(&self) -> String {
        bounded(&self.error, MAX_LAST_ERROR_CHARS)
    }
}

/// The relay's and the operator's view of the outbox.
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
    async fn mark_delivered(
        &self,
        outbox_id: &str,
        owner: &str,
        now_ms: i64,
    ) -> Result<(), ProcessingError>;

    /// Reschedules (`PENDING`, due at `retry_at_ms`) or fails (`FAILED`) a delivery, fenced on
    /// the lease; the lease is released and `last_error` stored bounded.
    async fn fail_delivery(&self, failure: FailedDelivery) -> Result<(), ProcessingError>;

    /// Operator retry of ONE event's deliveries: only its `FAILED` ones become `PENDING`, due
    /// at `now_ms`, attempts reset. Returns how many.
    async fn retry_deliveries(&self, inbox_id: &str, now_ms: i64) -> Result<u64, StoreError>;

    /// Every delivery of one event, by destination.
    async fn list_deliveries(&self, inbox_id: &str) -> Result<Vec<OutboxRecord>, StoreError>;

    /// Events (newest first) that have at least one `FAILED` delivery, filtered by
    /// `filter.endpoint_id` and `filter.limit` (`filter.status` is ignored).
    async fn events_with_failed_deliveries(
        &self,
        filter: &EventFilter,
    ) -> Result<Vec<InboxRecord>, StoreError>;

    /// Number of outbox rows in `status` (all destinations).
    async fn count_deliveries(&self, status: OutboxStatus) -> Result<u64, StoreError>;
}
