-- hookgate PostgreSQL schema, version 6: replays of a body under a fresh unsigned id (see
-- migrations/sqlite/0005_replay_digests.sql for what a claim is).
-- Atomic across instances: the claim is an INSERT .. ON CONFLICT (endpoint_id, digest)
-- DO UPDATE .. WHERE the held claim has expired, in the acceptance transaction after the
-- inbox insert. A concurrent claim of the same digest waits on the primary key for the first
-- transaction's outcome, then sees its committed claim and loses; a suspected replay's inbox
-- row is deleted again before COMMIT, so it is never visible.
CREATE TABLE IF NOT EXISTS replay_digests (
    endpoint_id TEXT   NOT NULL,
    digest      BYTEA  NOT NULL,
    inbox_id    TEXT   NOT NULL,
    received_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, digest)
);
