//! Statements whose text is the same on both backends, written once.
//!
//! Each is written with PostgreSQL's `$n` parameters; SQLite reads the same text with `?n`
//! (rendered once, on first use). What differs between the backends — leases (`FOR UPDATE
//! SKIP LOCKED` vs a claim through the writer), acceptance, where the payload lives,
//! collations — stays in the backend's own module.

use std::sync::OnceLock;

/// One statement, for either backend.
pub(crate) struct Statement {
    text: &'static str,
    sqlite: OnceLock<String>,
}

impl Statement {
    pub(crate) const fn new(text: &'static str) -> Self {
        Self {
            text,
            sqlite: OnceLock::new(),
        }
    }

    /// The text with `$n` parameters.
    pub(crate) fn postgres(&self) -> &'static str {
        self.text
    }

    /// The text with `?n` parameters.
    pub(crate) fn sqlite(&self) -> &str {
        self.sqlite.get_or_init(|| self.text.replace('$', "?"))
    }
}

/// The fence of a completion: the leased row's key and object, only while the caller still
/// holds the lease, and the lease's number (orders payment fetches). Parameters: inbox id,
/// owner, now (ms). (PostgreSQL adds `FOR UPDATE`.)
pub(crate) static COMPLETE_FENCE: Statement = Statement::new(
    "SELECT provider, endpoint_id, provider_event_id, object_id, object_version, \
         coalesce(lease_seq, 0) \
     FROM inbox WHERE inbox_id = $1 AND status = 'RECEIVED' \
       AND lease_owner = $2 AND lease_until > $3",
);

/// The version gate: compare-and-set, applied only when strictly newer; no row changed means
/// the event is stale. Parameters: provider, endpoint, object id, version, now (ms).
pub(crate) static VERSION_GATE: Statement = Statement::new(
    "INSERT INTO object_state (provider, endpoint_id, object_id, version, updated_at) \
     VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (provider, endpoint_id, object_id) DO UPDATE \
         SET version = EXCLUDED.version, updated_at = EXCLUDED.updated_at \
         WHERE EXCLUDED.version > object_state.version",
);

/// A handler's `processed_events` marker; one row changed means it is new and the handler's
/// changes apply. Parameters: provider, endpoint, event id, consumer.
pub(crate) static PROCESSED_MARKER: Statement = Statement::new(
    "INSERT INTO processed_events (provider, endpoint_id, provider_event_id, consumer) \
     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
);

/// One `PENDING` delivery. Parameters: outbox id, inbox id, destination, now (ms).
pub(crate) static OUTBOX_INSERT: Statement = Statement::new(
    "INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
         next_attempt_at, created_at) \
     VALUES ($1, $2, $3, 'PENDING', 0, $4, $4) ON CONFLICT DO NOTHING",
);

/// The end of a completion. Parameters: inbox id, outcome, now (ms).
pub(crate) static MARK_PROCESSED: Statement = Statement::new(
    "UPDATE inbox SET status = 'PROCESSED', outcome = $2, processed_at = $3, \
         next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, last_error = NULL \
     WHERE inbox_id = $1",
);

/// Operator retry of a `FAILED` event whose payload is still stored (a purged one cannot be
/// processed again). Parameters: inbox id, now (ms).
pub(crate) static RETRY_EVENT: Statement = Statement::new(
    "UPDATE inbox SET status = 'RECEIVED', outcome = NULL, attempt_count = 0, \
         next_attempt_at = $2, lease_owner = NULL, lease_until = NULL \
     WHERE inbox_id = $1 AND status = 'FAILED' AND payload_purged_at IS NULL",
);

/// A leased row set aside for an operator: `RECEIVED → HELD`, fenced on the lease, lease
/// released and nothing due. Parameters: inbox id, owner, now (ms), reason.
pub(crate) static HOLD_EVENT: Statement = Statement::new(
    "UPDATE inbox SET status = 'HELD', held_reason = $4, next_attempt_at = NULL, \
         lease_owner = NULL, lease_until = NULL \
     WHERE inbox_id = $1 AND status = 'RECEIVED' AND lease_owner = $2 AND lease_until > $3",
);

/// An operator's release: `HELD → RECEIVED`, due now, attempts reset, `released_at` stamped
/// (processing does not hold a released row again). Rows whose payload was purged stay held:
/// there is nothing left to process. Parameters: endpoint id or NULL, inbox id or NULL,
/// now (ms).
pub(crate) static RELEASE_HELD: Statement = Statement::new(
    "UPDATE inbox SET status = 'RECEIVED', held_reason = NULL, released_at = $3, \
         next_attempt_at = $3, attempt_count = 0, lease_owner = NULL, lease_until = NULL \
     WHERE status = 'HELD' AND payload_purged_at IS NULL \
       AND (CAST($1 AS TEXT) IS NULL OR endpoint_id = $1) \
       AND (CAST($2 AS TEXT) IS NULL OR inbox_id = $2)",
);

/// `PENDING → DELIVERED`, fenced on the lease. Parameters: outbox id, owner, now (ms), a note
/// kept as `last_error` (NULL for a plain delivery; a skipped one says why).
pub(crate) static MARK_DELIVERED: Statement = Statement::new(
    "UPDATE outbox SET status = 'DELIVERED', delivered_at = $3, \
         next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL, last_error = $4 \
     WHERE outbox_id = $1 AND status = 'PENDING' \
       AND lease_owner = $2 AND lease_until > $3",
);

/// Operator retry of one event's `FAILED` deliveries, while its payload is stored (a
/// delivery sends it). Parameters: inbox id, now (ms).
pub(crate) static RETRY_DELIVERIES: Statement = Statement::new(
    "UPDATE outbox SET status = 'PENDING', attempt_count = 0, \
         next_attempt_at = $2, lease_owner = NULL, lease_until = NULL \
     WHERE inbox_id = $1 AND status = 'FAILED' \
       AND EXISTS (SELECT 1 FROM inbox i \
           WHERE i.inbox_id = $1 AND i.payload_purged_at IS NULL)",
);

/// `RECEIVED` rows per endpoint (the binary counts those of endpoints it does not know as
/// orphaned). PostgreSQL's text; SQLite names its covering `inbox_due` index (`sqlite/read.rs`),
/// which its planner would pass over for the whole-table `inbox_endpoint_received`.
pub(crate) static RECEIVED_PER_ENDPOINT: Statement = Statement::new(
    "SELECT endpoint_id, count(*) FROM inbox WHERE status = 'RECEIVED' GROUP BY endpoint_id",
);

/// What is still to be done, in one query (each count is served by a status index); read by
/// [`crate::rows::backlog`].
pub(crate) static BACKLOG: Statement = Statement::new(
    "SELECT \
     (SELECT count(*) FROM inbox WHERE status = 'RECEIVED'), \
     (SELECT min(received_at) FROM inbox WHERE status = 'RECEIVED'), \
     (SELECT count(*) FROM inbox WHERE status = 'FAILED'), \
     (SELECT count(*) FROM outbox WHERE status = 'PENDING'), \
     (SELECT min(created_at) FROM outbox WHERE status = 'PENDING'), \
     (SELECT count(*) FROM outbox WHERE status = 'FAILED'), \
     (SELECT count(*) FROM inbox WHERE status = 'HELD')",
);

pub(crate) static COUNT_INBOX: Statement = Statement::new("SELECT count(*) FROM inbox");

/// Parameter: status.
pub(crate) static COUNT_DELIVERIES: Statement =
    Statement::new("SELECT count(*) FROM outbox WHERE status = $1");

/// Parameters: provider, endpoint, object id.
pub(crate) static OBJECT_VERSION: Statement = Statement::new(
    "SELECT version FROM object_state \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_reads_the_same_text_with_question_marks() {
        assert!(MARK_DELIVERED.postgres().contains("lease_until > $3"));
        assert!(MARK_DELIVERED.sqlite().contains("lease_until > ?3"));
        assert!(!MARK_DELIVERED.sqlite().contains('$'));
    }
}
