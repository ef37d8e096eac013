-- hookgate SQLite schema, version 11: the status HELD, and what an event came with and from
-- (issues 18 and 19). The same change as migrations/postgres/0012_held_and_source.sql.
--
-- HELD: verified and stored, waiting for an operator (an API version the endpoint's consumers
-- cannot read yet, a sequence gap that outlived its window). `held_reason` says why;
-- `hookgate events release` puts the row back to RECEIVED, due now, and stamps `released_at`,
-- which tells processing that an operator decided: the hold is not applied to it again.
-- `source`: 'webhook' (arrived signed) or 'reconciled' (brought in from the provider's API).
-- `api_version`: the provider's API version stamp, read at acceptance where its pack says.
--
-- SQLite cannot alter a CHECK constraint, so the inbox is rebuilt: create, copy, drop, rename,
-- then its indexes again. The migration runner turns foreign keys off around its transaction
-- (outbox and inbox_payload reference the inbox) and runs `PRAGMA foreign_key_check` before it
-- commits, so a rebuild that lost a referenced row would be refused, not committed.
CREATE TABLE inbox_v11 (
    inbox_id               TEXT    NOT NULL PRIMARY KEY,
    provider               TEXT    NOT NULL,
    endpoint_id            TEXT    NOT NULL,
    provider_event_id      TEXT    NOT NULL,
    event_type             TEXT,
    object_id              TEXT,
    object_version         INTEGER,
    provider_created_at    INTEGER,
    received_at            INTEGER NOT NULL,
    payload_key_version    INTEGER NOT NULL,
    -- Keyed MAC of the plaintext, never a bare hash.
    payload_digest         BLOB    NOT NULL,
    matched_secret_version TEXT    NOT NULL,
    status                 TEXT    NOT NULL
        CHECK (status IN ('RECEIVED', 'PROCESSED', 'FAILED', 'IGNORED', 'HELD')),
    outcome                TEXT
        CHECK (outcome IS NULL OR outcome IN ('applied', 'stale')),
    attempt_count          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at        INTEGER,
    lease_owner            TEXT,
    lease_until            INTEGER,
    last_error             TEXT,
    processed_at           INTEGER,
    lease_seq              INTEGER,
    payload_purged_at      INTEGER,
    source                 TEXT    NOT NULL DEFAULT 'webhook'
        CHECK (source IN ('webhook', 'reconciled')),
    api_version            TEXT,
    held_reason            TEXT,
    released_at            INTEGER,
    UNIQUE (provider, endpoint_id, provider_event_id)
) STRICT;

INSERT INTO inbox_v11 (
    inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id, object_version,
    provider_created_at, received_at, payload_key_version, payload_digest,
    matched_secret_version, status, outcome, attempt_count, next_attempt_at, lease_owner,
    lease_until, last_error, processed_at, lease_seq, payload_purged_at)
SELECT
    inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id, object_version,
    provider_created_at, received_at, payload_key_version, payload_digest,
    matched_secret_version, status, outcome, attempt_count, next_attempt_at, lease_owner,
    lease_until, last_error, processed_at, lease_seq, payload_purged_at
FROM inbox;

DROP TABLE inbox;
ALTER TABLE inbox_v11 RENAME TO inbox;

CREATE INDEX inbox_endpoint_received ON inbox (endpoint_id, received_at);
CREATE INDEX inbox_status ON inbox (status, received_at);
CREATE INDEX inbox_due ON inbox (next_attempt_at, lease_until, inbox_id, status, endpoint_id)
    WHERE status = 'RECEIVED';
CREATE INDEX inbox_payload_expiry ON inbox (received_at) WHERE payload_purged_at IS NULL;
CREATE INDEX inbox_payload_key ON inbox (payload_key_version, inbox_id);
CREATE INDEX inbox_received_page ON inbox (received_at, inbox_id);
CREATE INDEX inbox_provider_event ON inbox (provider_event_id);
CREATE INDEX inbox_object ON inbox (object_id) WHERE object_id IS NOT NULL;
