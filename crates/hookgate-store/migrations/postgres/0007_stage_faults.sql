-- hookgate PostgreSQL schema, version 7: what the processing and delivery stages ask of the
-- database on a bad day (issue 14); the same changes as migrations/sqlite/0006_stage_faults.sql.
--
-- Written so that running it again changes nothing (a test replays migrations from 4).
--
-- 1. Every lease takes a number from a database sequence (`lease_seq`); the payment
--    projection keeps the fetch made under the highest lease number instead of the latest
--    worker clock (`refreshed_at`), so an instance whose clock runs ahead cannot pin an older
--    state. `inbox.lease_seq` is in no index: a lease stays a HOT update (version 5).
CREATE SEQUENCE IF NOT EXISTS lease_seq;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_seq BIGINT;
-- Rows written before this version rank below every new fetch.
ALTER TABLE payment_state ADD COLUMN IF NOT EXISTS fetch_seq BIGINT NOT NULL DEFAULT 0;

-- 2. A delivery is due from its creation (as the outbox insert always did). With
--    `next_attempt_at IS NULL OR …` and `NULLS FIRST` the outbox lease gathered and sorted
--    every due row of the table for each lease (the pattern version 4 removed from the
--    inbox); now it is one range scan of its destination's due rows that stops at its LIMIT.
UPDATE outbox SET next_attempt_at = created_at
WHERE status = 'PENDING' AND next_attempt_at IS NULL;
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (destination, next_attempt_at, created_at)
    WHERE status = 'PENDING';

-- 3. Every /metrics scrape counts FAILED deliveries: a small partial index answers it
--    instead of a scan of the whole outbox.
CREATE INDEX IF NOT EXISTS outbox_failed ON outbox (created_at) WHERE status = 'FAILED';
