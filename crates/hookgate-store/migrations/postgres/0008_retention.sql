-- hookgate PostgreSQL schema, version 8: retention and deletion on request (issue 15); the
-- same changes as migrations/sqlite/0007_retention.sql, which says why each exists.
--
-- Written so that running it again changes nothing.
--
-- 1. `payload_purged_at`: NULL while the sealed payload is stored, the time it was removed
--    after. Rows without a payload from before count as purged at their receipt.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS payload_purged_at BIGINT;
UPDATE inbox SET payload_purged_at = received_at
WHERE payload IS NULL AND payload_purged_at IS NULL;

-- 2. Expired payloads by a range scan of the rows that still store one. The lease stays a
--    HOT update: it changes neither column of this index.
CREATE INDEX IF NOT EXISTS inbox_payload_expiry ON inbox (received_at)
    WHERE payload_purged_at IS NULL;

-- 3. Expired object state and replay claims.
CREATE INDEX IF NOT EXISTS object_state_expiry ON object_state (endpoint_id, updated_at);
CREATE INDEX IF NOT EXISTS replay_digests_expiry ON replay_digests (expires_at);

-- 4. The audit log (`hookgate events purge` today, the operator API later).
CREATE TABLE IF NOT EXISTS audit_log (
    audit_id TEXT   NOT NULL PRIMARY KEY,
    at       BIGINT NOT NULL,
    actor    TEXT   NOT NULL,
    action   TEXT   NOT NULL,
    target   TEXT   NOT NULL,
    detail   TEXT
);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at);
