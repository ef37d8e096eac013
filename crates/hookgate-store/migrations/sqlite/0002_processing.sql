-- hookgate SQLite schema, version 2: processing (DESIGN.md §5).
-- The payment state projection written by the `payments_projection` handler inside the
-- processing transaction: what the provider's API said about each payment object, as of
-- `refreshed_at` (unix ms). `write_count` counts writes to the row (1 = inserted, never
-- updated), so "one business mutation per event" is observable.
CREATE TABLE payment_state (
    object_id     TEXT    NOT NULL PRIMARY KEY,
    object_type   TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    amount        INTEGER,
    currency      TEXT,
    refreshed_at  INTEGER NOT NULL,
    last_event_id TEXT    NOT NULL,
    write_count   INTEGER NOT NULL DEFAULT 1
) STRICT, WITHOUT ROWID;

-- Operators list FAILED rows; workers find expired leases through inbox_due.
CREATE INDEX inbox_status ON inbox (status, received_at);
