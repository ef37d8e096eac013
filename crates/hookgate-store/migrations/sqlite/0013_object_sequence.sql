-- hookgate SQLite schema, version 13: sequenced deltas (issue 18). The same change as
-- migrations/postgres/0014_object_sequence.sql. (Version 12 belongs to another change; the
-- versions need only ascend.)
--
-- `sequence_number`: the event's position in its object's sequence, read at acceptance with
-- the endpoint's `sequence_pointer`. `sequence_waiting_for`: while the row waits for a
-- missing earlier event (RECEIVED with no due time, never leased) or is HELD because that
-- gap outlived its window, the sequence it waits for; NULL otherwise.
ALTER TABLE inbox ADD COLUMN sequence_number INTEGER;
ALTER TABLE inbox ADD COLUMN sequence_waiting_for INTEGER;

-- A waiting row is RECEIVED without a due time, so leases now require one. Acceptance has
-- always set it; rows an older build left without one are due from their receipt.
UPDATE inbox SET next_attempt_at = received_at
WHERE status = 'RECEIVED' AND next_attempt_at IS NULL;

-- (IF NOT EXISTS: the upgrade tests re-run it on a database whose inbox 11 rebuilt.)
-- Per object of a sequenced endpoint, keyed like object_state: the last applied sequence
-- (NULL until one is applied) and when its current gap opened (the arrival of the first
-- event waiting for it; NULL while nothing waits).
CREATE TABLE IF NOT EXISTS object_sequence (
    provider      TEXT    NOT NULL,
    endpoint_id   TEXT    NOT NULL,
    object_id     TEXT    NOT NULL,
    last_applied  INTEGER,
    gap_opened_at INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (provider, endpoint_id, object_id)
) STRICT;

CREATE INDEX IF NOT EXISTS object_sequence_gap ON object_sequence (gap_opened_at)
    WHERE gap_opened_at IS NOT NULL;

-- The waiting rows of one object in sequence order: the next one to follow, the gap checks.
CREATE INDEX IF NOT EXISTS inbox_sequence_waiting
    ON inbox (provider, endpoint_id, object_id, sequence_number)
    WHERE sequence_waiting_for IS NOT NULL;
