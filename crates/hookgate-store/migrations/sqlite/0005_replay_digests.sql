-- hookgate SQLite schema, version 5: replays of a body under a fresh unsigned id.
-- For packs whose id and timestamp are both unsigned (`replay_defence = "body_digest"`), a
-- captured request replayed with a new id header verifies again. Each row accepted for such
-- a pack claims its body here: a keyed digest of the verified body bytes (never a bare hash),
-- per endpoint, held until `expires_at` (its `received_at` plus the idempotency window).
-- While the claim holds, another row with the same digest is answered as a duplicate of
-- `inbox_id` and not stored; an expired claim passes to the next row with that body.
-- The claim is written in the same transaction as its inbox row (the single writer makes the
-- check atomic). No foreign key: a claim is only a pointer for the answer, and claims of
-- nothing but expired windows may be deleted at any time (e.g. by retention).
CREATE TABLE IF NOT EXISTS replay_digests (
    endpoint_id TEXT    NOT NULL,
    digest      BLOB    NOT NULL,
    inbox_id    TEXT    NOT NULL,
    received_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (endpoint_id, digest)
) STRICT, WITHOUT ROWID;
