-- hookgate SQLite schema, version 8: payload key rotation (issue 15). The same index as
-- migrations/postgres/0009_payload_key_index.sql.
--
-- The re-seal stage walks the rows of one retired key version in `inbox_id` order, a batch at
-- a time, and `hookgate keys status` counts rows per version: both are range scans of this
-- index instead of scans of the whole inbox. Nothing stored changes.
CREATE INDEX IF NOT EXISTS inbox_payload_key ON inbox (payload_key_version, inbox_id);
