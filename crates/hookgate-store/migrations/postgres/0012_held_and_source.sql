-- hookgate PostgreSQL schema, version 12: the status HELD, and what an event came with and from
-- (issues 18 and 19). The same change as migrations/sqlite/0011_held_and_source.sql, which
-- says what each column means. Written to be re-runnable, as every migration here.
ALTER TABLE inbox DROP CONSTRAINT IF EXISTS inbox_status_check;
ALTER TABLE inbox ADD CONSTRAINT inbox_status_check
    CHECK (status IN ('RECEIVED', 'PROCESSED', 'FAILED', 'IGNORED', 'HELD'));
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS source TEXT NOT NULL DEFAULT 'webhook'
    CONSTRAINT inbox_source_check CHECK (source IN ('webhook', 'reconciled'));
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS api_version TEXT;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS held_reason TEXT;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS released_at BIGINT;
