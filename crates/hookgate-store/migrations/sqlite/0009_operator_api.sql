-- hookgate SQLite schema, version 9: the operator API (issue 17). The same changes as
-- migrations/postgres/0010_operator_api.sql.
--
-- 1. Every audited request has a result ('ok', or 'denied' for a refused one) and the filter
--    it named (JSON, NULL for an action on one event). Rows written before are purges that
--    committed: 'ok'.
ALTER TABLE audit_log ADD COLUMN result TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE audit_log ADD COLUMN filter TEXT;

-- 2. A re-delivery with `fresh_key` sends a new Idempotency-Key; the delivery keeps it (and
--    its later retries send the same). NULL: the inbox id, as before.
ALTER TABLE outbox ADD COLUMN idempotency_key TEXT;

-- 3. The event list pages newest first on (received_at, inbox_id) (keyset paging); its
--    filters by provider event id and object id are lookups of their own. The other filters
--    (status, endpoint, secret version, type, provider) narrow a page's scan of this order.
CREATE INDEX inbox_received_page ON inbox (received_at, inbox_id);
CREATE INDEX inbox_provider_event ON inbox (provider_event_id);
CREATE INDEX inbox_object ON inbox (object_id) WHERE object_id IS NOT NULL;
