-- hookgate PostgreSQL schema, version 10: the operator API (issue 17). The same changes as
-- migrations/sqlite/0009_operator_api.sql.
--
-- 1. Every audited request has a result ('ok', or 'denied' for a refused one) and the filter
--    it named (JSON, NULL for an action on one event). Rows written before are purges that
--    committed: 'ok'.
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS result TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS filter TEXT;

-- 2. A re-delivery with `fresh_key` sends a new Idempotency-Key; the delivery keeps it (and
--    its later retries send the same). NULL: the inbox id, as before.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS idempotency_key TEXT;

-- 3. The event list pages newest first on (received_at, inbox_id) (keyset paging); its
--    filters by provider event id and object id are lookups of their own. None of these
--    columns changes when a row is leased or completed, so leases stay heap-only updates
--    (version 5).
CREATE INDEX IF NOT EXISTS inbox_received_page ON inbox (received_at, inbox_id);
CREATE INDEX IF NOT EXISTS inbox_provider_event ON inbox (provider_event_id);
CREATE INDEX IF NOT EXISTS inbox_object ON inbox (object_id) WHERE object_id IS NOT NULL;
