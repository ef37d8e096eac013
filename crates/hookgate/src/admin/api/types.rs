//! The operator API's answers, as serialised and as described in the OpenAPI document (one
//! type for both, so the document cannot drift from what is sent).

use hookgate_store::{AuditRecord, InboxRecord, OutboxRecord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// RFC 3339 in UTC, millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// One event of a list (metadata only, never the payload).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventSummary {
    /// The inbox id (as in the webhook answer).
    pub id: String,
    /// `RECEIVED`, `PROCESSED`, `FAILED`, `IGNORED` or `HELD`.
    pub status: String,
    /// `webhook` (arrived signed) or `reconciled` (found through the provider's API).
    pub source: String,
    /// The provider's API version stamp, where its pack reads one.
    pub api_version: Option<String>,
    /// Why the event is `HELD` (`hookgate events release` / `POST /api/v1/events/release`).
    pub held_reason: Option<String>,
    pub provider: String,
    pub endpoint_id: String,
    pub event_type: Option<String>,
    /// When the gateway received it (RFC 3339).
    pub received_at: String,
    pub received_at_ms: i64,
    pub provider_event_id: String,
    pub object_id: Option<String>,
    pub object_version: Option<i64>,
    pub matched_secret_version: String,
    /// `applied` or `stale` once processed.
    pub outcome: Option<String>,
    pub attempt_count: i64,
    pub payload_stored: bool,
}

impl From<&InboxRecord> for EventSummary {
    fn from(e: &InboxRecord) -> Self {
        Self {
            id: e.inbox_id.clone(),
            status: e.status.as_str().to_owned(),
            source: e.source.as_str().to_owned(),
            api_version: e.api_version.clone(),
            held_reason: e.held_reason.clone(),
            provider: e.provider.clone(),
            endpoint_id: e.endpoint_id.clone(),
            event_type: e.event_type.clone(),
            received_at: rfc3339(e.received_at_ms),
            received_at_ms: e.received_at_ms,
            provider_event_id: e.provider_event_id.clone(),
            object_id: e.object_id.clone(),
            object_version: e.object_version,
            matched_secret_version: e.matched_secret_version.clone(),
            outcome: e.outcome.map(|o| o.as_str().to_owned()),
            attempt_count: e.attempt_count,
            payload_stored: e.payload_stored(),
        }
    }
}

/// A page of `GET /api/v1/events`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<EventSummary>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The processing attempts of an event (the gateway keeps their count and the last error,
/// not a history).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Attempts {
    /// Leases taken so far (attempts started).
    pub count: i64,
    /// Redacted and bounded.
    pub last_error: Option<String>,
    /// When the next attempt is due (RECEIVED only).
    pub next_attempt_at_ms: Option<i64>,
}

/// One delivery of an event to one destination.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Delivery {
    pub destination: String,
    /// `PENDING`, `DELIVERED` or `FAILED`.
    pub status: String,
    pub attempt_count: i64,
    pub next_attempt_at_ms: Option<i64>,
    pub last_error: Option<String>,
    pub created_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
    /// The `Idempotency-Key` it is sent with (the inbox id unless re-delivered with
    /// `fresh_key`).
    pub idempotency_key: String,
}

impl Delivery {
    pub fn new(d: &OutboxRecord) -> Self {
        Self {
            destination: d.destination.clone(),
            status: d.status.as_str().to_owned(),
            attempt_count: d.attempt_count,
            next_attempt_at_ms: d.next_attempt_at_ms,
            last_error: d.last_error.clone(),
            created_at_ms: d.created_at_ms,
            delivered_at_ms: d.delivered_at_ms,
            idempotency_key: d
                .idempotency_key
                .clone()
                .unwrap_or_else(|| d.inbox_id.clone()),
        }
    }
}

/// `GET /api/v1/events/{id}`: the event's metadata (the fields of `hookgate events show`),
/// its attempts and its deliveries.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventDetail {
    pub id: String,
    pub status: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: Option<String>,
    pub outcome: Option<String>,
    pub attempt_count: i64,
    pub object_id: Option<String>,
    pub object_version: Option<i64>,
    pub provider_created_at: Option<i64>,
    pub received_at: String,
    pub received_at_ms: i64,
    pub next_attempt_at_ms: Option<i64>,
    pub processed_at_ms: Option<i64>,
    pub last_error: Option<String>,
    pub payload_key_version: u32,
    pub matched_secret_version: String,
    pub payload_stored: bool,
    pub payload_purged_at_ms: Option<i64>,
    /// `webhook` or `reconciled`.
    pub source: String,
    pub api_version: Option<String>,
    /// Why the event is `HELD`.
    pub held_reason: Option<String>,
    /// When an operator last released it from `HELD`.
    pub released_at_ms: Option<i64>,
    pub attempts: Attempts,
    pub deliveries: Vec<Delivery>,
}

impl EventDetail {
    pub fn new(e: &InboxRecord, deliveries: &[OutboxRecord]) -> Self {
        Self {
            id: e.inbox_id.clone(),
            status: e.status.as_str().to_owned(),
            provider: e.provider.clone(),
            endpoint_id: e.endpoint_id.clone(),
            provider_event_id: e.provider_event_id.clone(),
            event_type: e.event_type.clone(),
            outcome: e.outcome.map(|o| o.as_str().to_owned()),
            attempt_count: e.attempt_count,
            object_id: e.object_id.clone(),
            object_version: e.object_version,
            provider_created_at: e.provider_created_at,
            received_at: rfc3339(e.received_at_ms),
            received_at_ms: e.received_at_ms,
            next_attempt_at_ms: e.next_attempt_at_ms,
            processed_at_ms: e.processed_at_ms,
            last_error: e.last_error.clone(),
            payload_key_version: e.payload_key_version,
            matched_secret_version: e.matched_secret_version.clone(),
            payload_stored: e.payload_stored(),
            payload_purged_at_ms: e.payload_purged_at_ms,
            source: e.source.as_str().to_owned(),
            api_version: e.api_version.clone(),
            held_reason: e.held_reason.clone(),
            released_at_ms: e.released_at_ms,
            attempts: Attempts {
                count: e.attempt_count,
                last_error: e.last_error.clone(),
                next_attempt_at_ms: e.next_attempt_at_ms,
            },
            deliveries: deliveries.iter().map(Delivery::new).collect(),
        }
    }
}

/// `GET /api/v1/events/{id}/payload`: the decrypted body (audited as `decrypt`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Payload {
    pub id: String,
    /// `utf8` (`body` is the text) or `base64` (`body` is the bytes in base64).
    pub encoding: String,
    pub body: String,
}

/// The body of `POST /api/v1/events/{id}/replay` (empty, or `{}`: through processing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// Re-deliver to this destination only (even if its filter would exclude the event).
    #[serde(default)]
    pub destination: Option<String>,
    /// With `destination`: send with a new `Idempotency-Key` (recorded on the delivery and
    /// in the audit) instead of the one it had.
    #[serde(default)]
    pub fresh_key: bool,
}

/// The body of `POST /api/v1/events/release`: which `HELD` events to release (all when both
/// are left out).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeldRelease {
    /// Only this endpoint's held events.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Only this event (its inbox id).
    #[serde(default)]
    pub id: Option<String>,
}

/// What `POST /api/v1/events/release` did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Released {
    /// Events put back to `RECEIVED`, due now (workers process them at their next poll).
    pub released: u64,
}

/// What an operation did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OperationDone {
    pub id: String,
    /// `retry`, `replay` or `redeliver`.
    pub action: String,
    /// The event's status now.
    pub status: String,
    /// For `retry`: how many FAILED deliveries went back to PENDING (0 when the event
    /// itself was retried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// For `redeliver`: the key the delivery is sent with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// One audit entry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    /// RFC 3339.
    pub at: String,
    /// The token's name (`-` when no known token was presented; the OS user for the CLI on
    /// the store directly).
    pub token: String,
    /// `decrypt`, `retry`, `replay`, `redeliver`, `events.purge`, or for a refused read
    /// `events.list`, `events.show`, `audit.list`.
    pub action: String,
    /// The inbox id (or what else the action named).
    pub target: String,
    /// The filter of an action over many events (JSON text), `null` for one event.
    pub filter: Option<String>,
    /// `ok`, `denied`, or the error code of a refused operation (`payload_purged`, …).
    pub result: String,
    /// More about it (JSON text): a re-delivery's destination and key, a purge's ids.
    pub detail: Option<String>,
}

impl From<&AuditRecord> for AuditEntry {
    fn from(a: &AuditRecord) -> Self {
        Self {
            at: rfc3339(a.at_ms),
            token: a.actor.clone(),
            action: a.action.clone(),
            target: a.target.clone(),
            filter: a.filter.clone(),
            result: a.result.clone(),
            detail: a.detail.clone(),
        }
    }
}

/// `GET /api/v1/audit`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    /// Newest first.
    pub entries: Vec<AuditEntry>,
}
