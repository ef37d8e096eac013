-- hookgate SQLite schema, version 7: retention and deletion on request (issue 15).
--
-- 1. Whether the sealed payload is still stored is recorded, not derived from the clock:
--    `payload_purged_at` is NULL while it is stored and the time it was removed after
--    (retention or `hookgate events purge`). Rows of older versions without a payload (none
--    were ever purged, but a version 3 database could hold NULL payloads) count as purged at
--    their receipt. A purged row pins no payload key.
ALTER TABLE inbox ADD COLUMN payload_purged_at INTEGER;
UPDATE inbox SET payload_purged_at = received_at
WHERE NOT EXISTS (SELECT 1 FROM inbox_payload p WHERE p.inbox_id = inbox.inbox_id);

-- 2. Retention finds expired payloads by a range scan of the rows whose payload is still
--    stored, oldest first; a purged row leaves this index, so each batch starts where the
--    expired payloads are instead of walking the rows already purged. Status changes do not
--    touch it (neither column changes after acceptance until the purge).
CREATE INDEX inbox_payload_expiry ON inbox (received_at) WHERE payload_purged_at IS NULL;

-- 3. Expired rows are found per endpoint through `inbox_endpoint_received` (version 1) and
--    across endpoints through `inbox_status`; their markers by the primary key of
--    `processed_events`, their deliveries by `UNIQUE (inbox_id, destination)`. Object state
--    whose last change is older than the endpoint's idempotency window, and replay claims
--    whose window has ended, get indexes of their own.
CREATE INDEX object_state_expiry ON object_state (endpoint_id, updated_at);
CREATE INDEX replay_digests_expiry ON replay_digests (expires_at);

-- 4. What operators did to stored data, and who did it: `hookgate events purge` writes here
--    today, the operator API later. One row per committed action; `target` names what it
--    acted on (an event id or a filter), `detail` is JSON (e.g. the ids it purged).
CREATE TABLE audit_log (
    audit_id TEXT    NOT NULL PRIMARY KEY,
    at       INTEGER NOT NULL,
    actor    TEXT    NOT NULL,
    action   TEXT    NOT NULL,
    target   TEXT    NOT NULL,
    detail   TEXT
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at);
