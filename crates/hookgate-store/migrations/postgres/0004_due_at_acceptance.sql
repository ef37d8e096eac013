-- hookgate PostgreSQL schema, version 4: rows are due from their acceptance; payloads are
-- stored uncompressed.
-- Accepted RECEIVED rows used to keep `next_attempt_at` NULL until their first failure, so
-- the lease query had to ask `next_attempt_at IS NULL OR next_attempt_at <= now`. With that
-- OR the planner gathered every due row (a bitmap scan over the whole backlog) and sorted
-- it for each lease: 37 ms per lease with 25,000 rows waiting, most of PostgreSQL's CPU in
-- the benchmark. Acceptance now sets `next_attempt_at = received_at` (as SQLite always did),
-- so the lease is one range scan of `inbox_due` that stops at its LIMIT.
UPDATE inbox SET next_attempt_at = received_at
WHERE status = 'RECEIVED' AND next_attempt_at IS NULL;

-- Sealed payloads are ciphertext: PostgreSQL's TOAST compression (pglz) can never shrink them
-- and only spent CPU trying on every insert. EXTERNAL keeps them out of line, uncompressed
-- (new rows; existing ones are left as they are). Measured side by side: 5.0–5.2k → 6.3–7.4k
-- acknowledged events/s on the 2-core benchmark machine.
ALTER TABLE inbox ALTER COLUMN payload SET STORAGE EXTERNAL;
