-- hookgate SQLite schema, version 6: what the processing and delivery stages ask of the
-- database on a bad day (issue 14).
--
-- 1. Leases skip rows of endpoints that are not configured (they wait, RECEIVED, until the
--    endpoint comes back), so the lease's covering index also carries `endpoint_id`.
DROP INDEX inbox_due;
CREATE INDEX inbox_due ON inbox (next_attempt_at, lease_until, inbox_id, status, endpoint_id)
    WHERE status = 'RECEIVED';

-- 2. Every lease takes a number from one database-wide counter (`lease_seq`); the payment
--    projection keeps the fetch made under the highest lease number instead of the latest
--    worker clock (`refreshed_at`), so an instance whose clock runs ahead cannot pin an older
--    state. One row, updated by the single writer.
CREATE TABLE lease_sequence (
    id    INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
) STRICT;
INSERT INTO lease_sequence (id, value) VALUES (1, 0);
ALTER TABLE inbox ADD COLUMN lease_seq INTEGER;
-- Rows written before this version rank below every new fetch.
ALTER TABLE payment_state ADD COLUMN fetch_seq INTEGER NOT NULL DEFAULT 0;

-- 3. A delivery is due from its creation (as the outbox insert always did), so the outbox
--    lease is one range scan of its destination's due rows, without `IS NULL OR`.
UPDATE outbox SET next_attempt_at = created_at
WHERE status = 'PENDING' AND next_attempt_at IS NULL;
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (destination, next_attempt_at, created_at)
    WHERE status = 'PENDING';

-- 4. Every /metrics scrape counts FAILED deliveries: a small partial index answers it.
CREATE INDEX outbox_failed ON outbox (created_at) WHERE status = 'FAILED';
