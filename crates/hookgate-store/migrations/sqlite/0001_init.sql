-- hookgate SQLite schema, version 1: the four tables of DESIGN.md §4.
-- Applied once, inside the migration transaction, by src/sqlite/schema.rs.
-- Times are unix milliseconds except provider_created_at (provider's seconds).

-- The inbox is the source of truth: one row per logical provider event, inserted at
-- acceptance under the unique key, then leased by workers directly (no broker).
CREATE TABLE inbox (
    inbox_id               TEXT    NOT NULL PRIMARY KEY,
    provider               TEXT    NOT NULL,
    endpoint_id            TEXT    NOT NULL,
    provider_event_id      TEXT    NOT NULL,
    event_type             TEXT,
    object_id              TEXT,
    object_version         INTEGER,
    provider_created_at    INTEGER,
    received_at            INTEGER NOT NULL,
    -- Sealed (`nonce || ciphertext`), never plaintext; NULL once purged by retention.
    payload                BLOB,
    payload_key_version    INTEGER NOT NULL,
    -- Keyed MAC of the plaintext, never a bare hash.
    payload_digest         BLOB    NOT NULL,
    matched_secret_version TEXT    NOT NULL,
    status                 TEXT    NOT NULL
        CHECK (status IN ('RECEIVED', 'PROCESSED', 'FAILED', 'IGNORED')),
    outcome                TEXT
        CHECK (outcome IS NULL OR outcome IN ('applied', 'stale')),
    attempt_count          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at        INTEGER,
    lease_owner            TEXT,
    lease_until            INTEGER,
    last_error             TEXT,
    processed_at           INTEGER,
    UNIQUE (provider, endpoint_id, provider_event_id)
) STRICT;

-- Workers claim due RECEIVED rows in next_attempt_at order; the partial index stays small
-- because processed and ignored rows leave it.
CREATE INDEX inbox_due ON inbox (next_attempt_at) WHERE status = 'RECEIVED';

-- Operator listing by endpoint, newest first.
CREATE INDEX inbox_endpoint_received ON inbox (endpoint_id, received_at);

-- One delivery of one inbox row to one destination (transactional outbox).
CREATE TABLE outbox (
    outbox_id       TEXT    NOT NULL PRIMARY KEY,
    inbox_id        TEXT    NOT NULL REFERENCES inbox (inbox_id),
    destination     TEXT    NOT NULL,
    status          TEXT    NOT NULL
        CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    UNIQUE (inbox_id, destination)
) STRICT;

CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'PENDING';

-- Per-consumer markers written in the same transaction as the business change.
CREATE TABLE processed_events (
    provider          TEXT NOT NULL,
    endpoint_id       TEXT NOT NULL,
    provider_event_id TEXT NOT NULL,
    consumer          TEXT NOT NULL,
    PRIMARY KEY (provider, endpoint_id, provider_event_id, consumer)
) STRICT, WITHOUT ROWID;

-- The version gate (DESIGN.md §6): the newest applied version of each object.
CREATE TABLE object_state (
    provider    TEXT    NOT NULL,
    endpoint_id TEXT    NOT NULL,
    object_id   TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (provider, endpoint_id, object_id)
) STRICT, WITHOUT ROWID;
