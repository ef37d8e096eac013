-- hookgate PostgreSQL schema, version 9: payload key rotation (issue 15). The same index as
-- migrations/sqlite/0008_payload_key_index.sql, partial on stored payloads (a purged payload
-- pins no key).
--
-- The re-seal stage walks the rows of one retired key version in `inbox_id` order, a batch at
-- a time, and `hookgate keys status` counts rows per version: both are range scans of this
-- index instead of scans of the whole inbox. A lease changes none of its columns, so leases
-- stay heap-only updates (version 5). Nothing stored changes.
CREATE INDEX IF NOT EXISTS inbox_payload_key ON inbox (payload_key_version, inbox_id)
    WHERE payload IS NOT NULL;
