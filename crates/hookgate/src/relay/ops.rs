//! What operators see of deliveries (`hookgate events show`): the outbox half of the event
//! commands, kept here so the CLI stays a thin caller; and why a replay is refused, in the
//! form the operator API answers it.

use hookgate_store::OutboxRecord;
use serde_json::{Value, json};

/// Why an operator's replay (retry, re-processing, redelivery) of an event is refused. The
/// store refuses it atomically (its retry statements require a stored payload); this names
/// the refusal for the CLI and, later, the operator API's HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplayRefused {
    /// Retention or `events purge` removed the payload: nothing is left to process or send.
    #[error("the event's payload was purged")]
    PayloadPurged,
}

impl ReplayRefused {
    /// The HTTP status the operator API answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ReplayRefused::PayloadPurged => 409,
        }
    }

    /// The answer's body: `{"error":"payload_purged"}`.
    pub fn body(self) -> Value {
        match self {
            ReplayRefused::PayloadPurged => json!({ "error": "payload_purged" }),
        }
    }
}

/// `events show`: one JSON object per delivery.
pub fn deliveries_json(deliveries: &[OutboxRecord]) -> Value {
    Value::Array(
        deliveries
            .iter()
            .map(|d| {
                json!({
                    "destination": d.destination,
                    "status": d.status.as_str(),
                    "attempt_count": d.attempt_count,
                    "next_attempt_at_ms": d.next_attempt_at_ms,
                    "last_error": d.last_error,
                    "created_at_ms": d.created_at_ms,
                    "delivered_at_ms": d.delivered_at_ms,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::ReplayRefused;

    #[test]
    fn a_purged_payload_is_a_conflict_named_payload_purged() {
        let refused = ReplayRefused::PayloadPurged;
        assert_eq!(refused.http_status(), 409);
        assert_eq!(refused.body().to_string(), r#"{"error":"payload_purged"}"#);
    }
}
