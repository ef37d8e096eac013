-- hookgate PostgreSQL schema, version 11: bulk operator jobs and the rejection log (issue 17).
-- The same tables as migrations/sqlite/0010_jobs_and_rejections.sql.
--
-- 1. A bulk job (`POST /api/v1/jobs`): an action over the events a filter selects, run by the
--    `jobs` stage a batch at a time. Each batch applies the action to its events and records
--    the progress and the cursor (the last event handled, in the events list's order) in ONE
--    transaction, fenced on the job's lease (`lease_owner` and `lease_epoch`, a number taken
--    anew at every lease): a run killed at any point resumes exactly where its last batch
--    committed, and a runner that lost its lease writes nothing. `snapshot_at` bounds the
--    selection to events received before the job started (events arriving later are live
--    traffic, not the job's); `total` is counted then.
CREATE TABLE IF NOT EXISTS jobs (
    job_id       TEXT    NOT NULL PRIMARY KEY,
    action       TEXT    NOT NULL CHECK (action IN ('retry', 'replay', 'redeliver')),
    filter       TEXT    NOT NULL,
    destination  TEXT,
    fresh_key    BIGINT  NOT NULL DEFAULT 0 CHECK (fresh_key IN (0, 1)),
    state        TEXT    NOT NULL
        CHECK (state IN ('pending', 'running', 'paused', 'cancelled', 'done', 'failed')),
    created_by   TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    finished_at  BIGINT,
    snapshot_at  BIGINT,
    total        BIGINT,
    done         BIGINT  NOT NULL DEFAULT 0,
    failed       BIGINT  NOT NULL DEFAULT 0,
    cursor       TEXT,
    lease_owner  TEXT,
    lease_until  BIGINT,
    lease_epoch  BIGINT  NOT NULL DEFAULT 0,
    last_error   TEXT
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_runnable ON jobs (created_at) WHERE state IN ('pending', 'running');

-- 2. The rejection log: a sample of rejected webhook requests (at most 100 per endpoint and
--    cause per minute, then 1 in 100), written in batches from an in-memory ring off the
--    acceptance path. Header names with redacted values (JSON), the body's size and keyed
--    digest; never the body. `rejection_counts` counts every rejection, sampled or not, per
--    minute, endpoint and cause (the per-cause counts of `GET /api/v1/rejections`). Both are
--    bounded by age and, the log, by rows (`[rejections]`).
CREATE TABLE IF NOT EXISTS rejections (
    rejection_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           BIGINT  NOT NULL,
    endpoint     TEXT    NOT NULL,
    cause        TEXT    NOT NULL,
    reason       TEXT,
    headers      TEXT    NOT NULL,
    body_size    BIGINT,
    body_digest  BYTEA
);
CREATE INDEX IF NOT EXISTS rejections_at ON rejections (at);
CREATE INDEX IF NOT EXISTS rejections_endpoint ON rejections (endpoint, rejection_id);
CREATE TABLE IF NOT EXISTS rejection_counts (
    minute   BIGINT  NOT NULL,
    endpoint TEXT    NOT NULL,
    cause    TEXT    NOT NULL,
    seen     BIGINT  NOT NULL,
    PRIMARY KEY (minute, endpoint, cause)
);
