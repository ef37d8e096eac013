//! Sequenced deltas (an endpoint's `sequence_pointer`): the events of one object are applied
//! in sequence order, decided inside the processing transaction under the lease fence.
//!
//! Per object, `object_sequence` keeps the last applied sequence and when its current gap
//! opened. An event at or below the last applied is `stale`; the next one is applied, and the
//! object's waiting event with the sequence after it is made due at once (the chain follows
//! without waiting for a gap to close on its own); one further ahead *waits*: `RECEIVED` with
//! no due time (never leased), its attempt given back, `sequence_waiting_for` naming what it
//! waits for. A gap that outlives its window, or an object with too many waiting events, is
//! set aside as `HELD` ([`crate::ProcessingStore::hold_sequence_gaps`]); an operator's release
//! applies the released events in sequence order over the missing one, which is then stale.
//!
//! What both backends run is here: the pure decision and the statements (PostgreSQL's text;
//! SQLite reads it with `?n`).

use crate::statements::Statement;

/// Where an object's sequence starts: what its first applied event must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceStart {
    /// The first applied sequence is 1 (the default): an object's first event with a higher
    /// one waits for 1.
    One,
    /// `sequence_start = "any"`: whatever sequence an object's first event carries is where
    /// its sequence starts.
    Any,
}

/// What the processing transaction does with one sequenced event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Apply,
    Stale,
    /// Waits, not due, for this sequence.
    Wait(i64),
}

/// The decision for an event carrying `sequence`, given the object's last applied one.
/// `released_over_gap`: an operator released the event while it waited (it is applied over
/// the missing sequence).
pub(crate) fn decide(
    sequence: i64,
    last_applied: Option<i64>,
    start: SequenceStart,
    released_over_gap: bool,
) -> Decision {
    // Starting at 1 is as if 0 had been applied.
    let last = last_applied.or(match start {
        SequenceStart::One => Some(0),
        SequenceStart::Any => None,
    });
    match last {
        None => Decision::Apply,
        Some(last) if sequence <= last => Decision::Stale,
        Some(last) if sequence == last.saturating_add(1) || released_over_gap => Decision::Apply,
        Some(last) => Decision::Wait(last.saturating_add(1)),
    }
}

/// The object's state row exists before it is read (and locked, on PostgreSQL: concurrent
/// events of one object serialise on it). Parameters: provider, endpoint, object, now (ms).
pub(crate) static SEQUENCE_ENSURE: Statement = Statement::new(
    "INSERT INTO object_sequence (provider, endpoint_id, object_id, updated_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
);

/// Parameters: provider, endpoint, object. (PostgreSQL adds `FOR UPDATE`.)
pub(crate) static SEQUENCE_READ: Statement = Statement::new(
    "SELECT last_applied FROM object_sequence \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3",
);

/// The leased row starts to wait: not due, lease released, its attempt not counted.
/// Parameters: inbox id, the sequence it waits for.
pub(crate) static SEQUENCE_WAIT: Statement = Statement::new(
    "UPDATE inbox SET sequence_waiting_for = $2, next_attempt_at = NULL, \
         lease_owner = NULL, lease_until = NULL, \
         attempt_count = CASE WHEN attempt_count > 0 THEN attempt_count - 1 ELSE 0 END \
     WHERE inbox_id = $1",
);

/// The gap's window opens at the arrival of the first event waiting in it. Parameters:
/// provider, endpoint, object, that arrival (ms), now (ms).
pub(crate) static SEQUENCE_GAP_OPEN: Statement = Statement::new(
    "UPDATE object_sequence SET gap_opened_at = coalesce(gap_opened_at, $4), updated_at = $5 \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3",
);

/// An applied event advances the object. Parameters: provider, endpoint, object, sequence,
/// now (ms).
pub(crate) static SEQUENCE_ADVANCE: Statement = Statement::new(
    "UPDATE object_sequence SET last_applied = $4, updated_at = $5 \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3",
);

/// After an event is applied, the object's waiting rows wait for the one after it.
/// Parameters: provider, endpoint, object, that sequence.
pub(crate) static SEQUENCE_WAITING_FOR: Statement = Statement::new(
    "UPDATE inbox SET sequence_waiting_for = $4 \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3 \
       AND sequence_waiting_for IS NOT NULL AND status = 'RECEIVED' \
       AND next_attempt_at IS NULL",
);

/// The object's waiting row with the lowest sequence: its id, sequence and whether an
/// operator released it. Parameters: provider, endpoint, object.
pub(crate) static SEQUENCE_NEXT_WAITING: Statement = Statement::new(
    "SELECT inbox_id, sequence_number, released_at IS NOT NULL FROM inbox \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3 \
       AND sequence_waiting_for IS NOT NULL AND status = 'RECEIVED' \
       AND next_attempt_at IS NULL \
     ORDER BY sequence_number LIMIT 1",
);

/// The next event of the chain is due now (a released one keeps `sequence_waiting_for`, which
/// tells processing that it is applied over the gap). Parameters: inbox id, now (ms).
pub(crate) static SEQUENCE_FOLLOW: Statement = Statement::new(
    "UPDATE inbox SET next_attempt_at = $2, \
         sequence_waiting_for = CASE WHEN released_at IS NULL THEN NULL \
             ELSE sequence_waiting_for END \
     WHERE inbox_id = $1 AND status = 'RECEIVED' AND next_attempt_at IS NULL",
);

/// The object's gap: none while the chain moves (`$4` true), else from the arrival of the
/// first event still waiting (none when nothing waits). Parameters: provider, endpoint,
/// object, moving, now (ms).
pub(crate) static SEQUENCE_GAP_AFTER_APPLY: Statement = Statement::new(
    "UPDATE object_sequence SET updated_at = $5, gap_opened_at = CASE WHEN $4 THEN NULL ELSE \
         (SELECT min(i.received_at) FROM inbox i \
          WHERE i.provider = $1 AND i.endpoint_id = $2 AND i.object_id = $3 \
            AND i.sequence_waiting_for IS NOT NULL AND i.status = 'RECEIVED' \
            AND i.next_attempt_at IS NULL) END \
     WHERE provider = $1 AND endpoint_id = $2 AND object_id = $3",
);

/// A processed sequenced row no longer waits for anything. Parameter: inbox id.
pub(crate) static SEQUENCE_DONE: Statement =
    Statement::new("UPDATE inbox SET sequence_waiting_for = NULL WHERE inbox_id = $1");

/// The objects of an endpoint whose gap is past its window or which have more waiting rows
/// than allowed; their waiting rows (not released by an operator) become `HELD`.
/// Parameters: endpoint, gap opened at or before (ms), most waiting rows per object,
/// reason's tail. Returns each held row's object and the sequence it waits for.
pub(crate) static SEQUENCE_HOLD_GAPS: Statement = Statement::new(
    "UPDATE inbox SET status = 'HELD', \
         held_reason = 'sequence ' || sequence_waiting_for || ' of object ' || object_id \
             || ' is missing' || $4, \
         next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL \
     WHERE endpoint_id = $1 AND status = 'RECEIVED' AND next_attempt_at IS NULL \
       AND sequence_waiting_for IS NOT NULL AND released_at IS NULL \
       AND (provider, endpoint_id, object_id) IN ( \
           SELECT provider, endpoint_id, object_id FROM object_sequence \
           WHERE endpoint_id = $1 AND gap_opened_at <= $2 \
           UNION \
           SELECT provider, endpoint_id, object_id FROM inbox \
           WHERE endpoint_id = $1 AND status = 'RECEIVED' AND next_attempt_at IS NULL \
             AND sequence_waiting_for IS NOT NULL AND released_at IS NULL \
           GROUP BY provider, endpoint_id, object_id HAVING count(*) > $3) \
     RETURNING object_id, sequence_waiting_for",
);

/// Released with the held rows: the other waiting rows of their objects (which arrived after
/// the hold), so the object's rows follow each other from the lowest. Parameter: the
/// release's time (ms), its `released_at`.
pub(crate) static RELEASE_OBJECT_WAITING: Statement = Statement::new(
    "UPDATE inbox SET released_at = $1 \
     WHERE status = 'RECEIVED' AND next_attempt_at IS NULL \
       AND sequence_waiting_for IS NOT NULL AND released_at IS NULL \
       AND (provider, endpoint_id, object_id) IN ( \
           SELECT provider, endpoint_id, object_id FROM inbox \
           WHERE released_at = $1 AND sequence_waiting_for IS NOT NULL \
             AND status = 'RECEIVED')",
);

/// The released objects' gaps are closed by the operator's decision. Parameter: the release's
/// time (ms).
pub(crate) static RELEASE_CLOSE_GAPS: Statement = Statement::new(
    "UPDATE object_sequence SET gap_opened_at = NULL, updated_at = $1 \
     WHERE (provider, endpoint_id, object_id) IN ( \
           SELECT provider, endpoint_id, object_id FROM inbox \
           WHERE released_at = $1 AND sequence_waiting_for IS NOT NULL \
             AND status = 'RECEIVED')",
);

/// Of each released object, only the waiting row with the lowest sequence is made due: rows
/// released together are applied one after another, in order (each applied one makes the
/// next due). Parameter: the release's time (ms).
pub(crate) static RELEASE_FIRST_DUE: Statement = Statement::new(
    "UPDATE inbox SET next_attempt_at = $1 \
     WHERE inbox_id IN ( \
         SELECT w.inbox_id FROM inbox w \
         WHERE w.released_at = $1 AND w.sequence_waiting_for IS NOT NULL \
           AND w.status = 'RECEIVED' AND w.next_attempt_at IS NULL \
           AND NOT EXISTS (SELECT 1 FROM inbox o \
               WHERE o.provider = w.provider AND o.endpoint_id = w.endpoint_id \
                 AND o.object_id = w.object_id AND o.sequence_waiting_for IS NOT NULL \
                 AND o.status = 'RECEIVED' AND o.next_attempt_at IS NULL \
                 AND o.sequence_number < w.sequence_number))",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        use Decision::*;
        use SequenceStart::*;
        assert_eq!(decide(1, None, One, false), Apply);
        assert_eq!(decide(3, None, One, false), Wait(1));
        assert_eq!(decide(3, None, One, true), Apply);
        assert_eq!(decide(0, None, One, false), Stale);
        assert_eq!(decide(7, None, Any, false), Apply);
        assert_eq!(decide(2, Some(1), One, false), Apply);
        assert_eq!(decide(1, Some(1), Any, false), Stale);
        assert_eq!(decide(4, Some(2), Any, false), Wait(3));
        assert_eq!(decide(4, Some(2), Any, true), Apply);
        assert_eq!(decide(2, Some(4), One, true), Stale);
    }
}
