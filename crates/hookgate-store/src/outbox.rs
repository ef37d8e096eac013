//! The outbox: one row per (inbox row, destination), written by the processing transaction
//! ([`crate::ProcessingStore::complete_all`]) and delivered by the relay.
//!
//! Rows move `PENDING → DELIVERED | FAILED`. The relay leases due `PENDING` rows of ONE
//! destination at a time (so a destination that is down never holds back another), delivers
//! them outside any transaction, then records the result fenced on its lease
//! (`lease_owner = owner AND lease_until > now`): a relay that lost its lease cannot overwrite
//! its successor. A crashed relay's rows come back when their lease expires and are delivered
//! again with the same idempotency key (effectively once; consumers dedupe on the inbox id).
//!
//! [`crate::OutboxStore`] is the relay's trait, implemented by each backend in its
//! `outbox.rs`; only the store knows SQL.

use std::fmt;

use hookgate_core::OutboxStatus;
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, bounded};

use crate::InboxRecord;

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
    /// The key a re-delivery with `fresh_key` recorded; `None`: the inbox id.
    pub idempotency_key: Option<String>,
}

impl OutboxRecord {
    /// The `Idempotency-Key` (and message id) this delivery is sent with.
    pub fn idempotency_key<'a>(&'a self, event: &'a InboxRecord) -> &'a str {
        self.idempotency_key.as_deref().unwrap_or(&event.inbox_id)
    }
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

/// A failed delivery attempt, recorded by [`crate::OutboxStore::fail_delivery`] (fenced on the lease).
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
