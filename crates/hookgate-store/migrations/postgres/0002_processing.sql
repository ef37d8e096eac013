-- hookgate PostgreSQL schema, version 2: processing (DESIGN.md §5); same tables and columns
-- as migrations/sqlite/0002_processing.sql.
-- The payment state projection written by the `payments_projection` handler inside the
-- processing transaction: what the provider's API said about each payment object, as of
-- `refreshed_at` (unix ms). `write_count` counts writes to the row (1 = inserted, never
-- updated), so "one business mutation per event" is observable.
CREATE TABLE payment_state (
    object_id     TEXT   NOT NULL PRIMARY KEY,
    object_type   TEXT   NOT NULL,
    status        TEXT   NOT NULL,
    amount        BIGINT,
    currency      TEXT,
    refreshed_at  BIGINT NOT NULL,
    last_event_id TEXT   NOT NULL,
    write_count   BIGINT NOT NULL DEFAULT 1
);

-- Operators list FAILED rows; workers find expired leases through inbox_due.
CREATE INDEX inbox_status ON inbox (status, received_at);
