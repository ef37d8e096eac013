//! Rows back into records, once for both backends.
//!
//! A backend exposes a result row as [`Columns`] (one method: the value at a position, in
//! the four shapes both databases store); everything else — which column is which, the
//! status and outcome names, range checks — is here, so the two backends cannot drift apart.
//! A value this build cannot read is [`StoreError::Corrupt`].

use hookgate_core::{EventSource, InboxStatus, OutboxStatus, Outcome};

use crate::outbox::OutboxRecord;
use crate::{Backlog, InboxRecord, StoreError};

/// A column value as both backends store it.
pub(crate) enum Value {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

/// A result row of either backend.
pub(crate) trait Columns {
    /// The value at position `i` (0-based).
    fn value(&self, i: usize) -> Result<Value, StoreError>;

    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?
            .ok_or_else(|| corrupt(format!("column {i} is NULL")))
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.value(i)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s)),
            _ => Err(corrupt(format!("column {i} is not text"))),
        }
    }

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?
            .ok_or_else(|| corrupt(format!("column {i} is NULL")))
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.value(i)? {
            Value::Null => Ok(None),
            Value::Int(n) => Ok(Some(n)),
            _ => Err(corrupt(format!("column {i} is not an integer"))),
        }
    }

    fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        match self.value(i)? {
            Value::Null => Ok(None),
            Value::Blob(b) => Ok(Some(b)),
            _ => Err(corrupt(format!("column {i} is not a blob"))),
        }
    }

    fn blob(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.opt_blob(i)?
            .ok_or_else(|| corrupt(format!("column {i} is NULL")))
    }

    /// A `count(*)`.
    fn count(&self, i: usize) -> Result<u64, StoreError> {
        u64::try_from(self.int(i)?).map_err(|_| corrupt("negative row count".into()))
    }
}

fn corrupt(msg: String) -> StoreError {
    StoreError::Corrupt(msg)
}

/// The inbox columns in the order [`inbox_record`] reads them; `payload` is the sealed
/// payload (SQLite keeps it in `inbox_payload`, so each backend says where it comes from).
pub(crate) const INBOX_COLUMNS: [&str; 24] = [
    "inbox_id",
    "provider",
    "endpoint_id",
    "provider_event_id",
    "event_type",
    "object_id",
    "object_version",
    "provider_created_at",
    "received_at",
    "payload",
    "payload_key_version",
    "payload_digest",
    "matched_secret_version",
    "status",
    "outcome",
    "attempt_count",
    "next_attempt_at",
    "last_error",
    "processed_at",
    "payload_purged_at",
    "source",
    "api_version",
    "held_reason",
    "released_at",
];

/// [`INBOX_COLUMNS`] as a select list: each column through `column` (a table prefix, or
/// another expression for the payload).
pub(crate) fn inbox_select_list(column: impl Fn(&'static str) -> String) -> String {
    INBOX_COLUMNS
        .iter()
        .map(|c| column(c))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn inbox_record(r: &impl Columns) -> Result<InboxRecord, StoreError> {
    let status = r
        .text(13)?
        .parse::<InboxStatus>()
        .map_err(|_| corrupt("inbox row has an unknown status".into()))?;
    let outcome = r
        .opt_text(14)?
        .map(|s| s.parse::<Outcome>())
        .transpose()
        .map_err(|_| corrupt("inbox row has an unknown outcome".into()))?;
    let payload_key_version = u32::try_from(r.int(10)?)
        .map_err(|_| corrupt("inbox row has an out-of-range payload_key_version".into()))?;
    Ok(InboxRecord {
        inbox_id: r.text(0)?,
        provider: r.text(1)?,
        endpoint_id: r.text(2)?,
        provider_event_id: r.text(3)?,
        event_type: r.opt_text(4)?,
        object_id: r.opt_text(5)?,
        object_version: r.opt_int(6)?,
        provider_created_at: r.opt_int(7)?,
        received_at_ms: r.int(8)?,
        payload: r.opt_blob(9)?,
        payload_key_version,
        payload_digest: r.blob(11)?,
        matched_secret_version: r.text(12)?,
        status,
        outcome,
        attempt_count: r.int(15)?,
        next_attempt_at_ms: r.opt_int(16)?,
        last_error: r.opt_text(17)?,
        processed_at_ms: r.opt_int(18)?,
        payload_purged_at_ms: r.opt_int(19)?,
        source: r
            .text(20)?
            .parse::<EventSource>()
            .map_err(|_| corrupt("inbox row has an unknown source".into()))?,
        api_version: r.opt_text(21)?,
        held_reason: r.opt_text(22)?,
        released_at_ms: r.opt_int(23)?,
    })
}

/// The outbox columns in the order [`outbox_record`] reads them.
pub(crate) const OUTBOX_COLUMNS: &str = "outbox_id, inbox_id, destination, status, \
     attempt_count, next_attempt_at, last_error, created_at, delivered_at, idempotency_key";

pub(crate) fn outbox_record(r: &impl Columns) -> Result<OutboxRecord, StoreError> {
    let status = r
        .text(3)?
        .parse::<OutboxStatus>()
        .map_err(|_| corrupt("outbox row has an unknown status".into()))?;
    Ok(OutboxRecord {
        outbox_id: r.text(0)?,
        inbox_id: r.text(1)?,
        destination: r.text(2)?,
        status,
        attempt_count: r.int(4)?,
        next_attempt_at_ms: r.opt_int(5)?,
        last_error: r.opt_text(6)?,
        created_at_ms: r.int(7)?,
        delivered_at_ms: r.opt_int(8)?,
        idempotency_key: r.opt_text(9)?,
    })
}

/// A row of [`crate::statements::BACKLOG`].
pub(crate) fn backlog(r: &impl Columns) -> Result<Backlog, StoreError> {
    Ok(Backlog {
        received: r.count(0)?,
        oldest_received_at_ms: r.opt_int(1)?,
        failed: r.count(2)?,
        outbox_pending: r.count(3)?,
        oldest_pending_at_ms: r.opt_int(4)?,
        outbox_failed: r.count(5)?,
        held: r.count(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<Option<i64>>);

    impl Columns for Fixed {
        fn value(&self, i: usize) -> Result<Value, StoreError> {
            Ok(self.0[i].map_or(Value::Null, Value::Int))
        }
    }

    #[test]
    fn negative_counts_and_wrong_shapes_are_corrupt() {
        let row = Fixed(vec![Some(-1), None]);
        assert!(matches!(row.count(0), Err(StoreError::Corrupt(_))));
        assert!(matches!(row.int(1), Err(StoreError::Corrupt(_))));
        assert!(matches!(row.text(0), Err(StoreError::Corrupt(_))));
        assert_eq!(row.opt_int(1).unwrap(), None);
    }

    #[test]
    fn the_select_list_follows_the_record_order() {
        let list = inbox_select_list(|c| format!("i.{c}"));
        assert!(list.starts_with("i.inbox_id, i.provider,"));
        assert!(list.ends_with("i.released_at"));
    }
}
