-- hookgate SQLite schema, version 3: a covering index for leasing.
-- Workers look for due, unleased RECEIVED rows. With only `next_attempt_at` indexed, SQLite
-- had to read each candidate row to test `lease_until` — and that column lies after the
-- sealed payload, so every test walked the payload's overflow pages. This index answers the
-- whole search (including `inbox_id`, and `status`, which the query names) without touching
-- the table; the lease query names it with INDEXED BY, because the planner preferred
-- `inbox_status` and then read every RECEIVED row.
DROP INDEX inbox_due;
CREATE INDEX inbox_due ON inbox (next_attempt_at, lease_until, inbox_id, status)
    WHERE status = 'RECEIVED';
