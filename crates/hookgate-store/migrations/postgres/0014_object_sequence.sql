-- hookgate PostgreSQL schema, version 14: sequenced deltas (issue 18). The same change as
-- migrations/sqlite/0013_object_sequence.sql, which says what each column means. (Version 13
-- belongs to another change; the versions need only ascend.) Re-runnable.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS sequence_number BIGINT;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS sequence_waiting_for BIGINT;

CREATE TABLE IF NOT EXISTS object_sequence (
    provider      TEXT   NOT NULL,
    endpoint_id   TEXT   NOT NULL,
    object_id     TEXT   NOT NULL,
    last_applied  BIGINT,
    gap_opened_at BIGINT,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (provider, endpoint_id, object_id)
);

CREATE INDEX IF NOT EXISTS object_sequence_gap ON object_sequence (gap_opened_at)
    WHERE gap_opened_at IS NOT NULL;

-- No column a lease writes is in it, so leases stay heap-only updates.
CREATE INDEX IF NOT EXISTS inbox_sequence_waiting
    ON inbox (provider, endpoint_id, object_id, sequence_number)
    WHERE sequence_waiting_for IS NOT NULL;
