-- hookgate PostgreSQL schema, version 13: reconciliation (issue 18). The same tables as
-- migrations/sqlite/0012_reconcile.sql.
--
-- 1. A reconciliation run: started by the `reconcile` stage on its schedule, by `hookgate
--    reconcile`, or by `POST /api/v1/reconcile` (`pending` until a stage leases it; a run
--    whose runner died is leased again after its lease). `summary` is the JSON of what it
--    found per endpoint and kind once it ended. A `hookgate reconcile --dry-run` writes no run.
CREATE TABLE IF NOT EXISTS reconcile_runs (
    run_id       TEXT    NOT NULL PRIMARY KEY,
    trigger_kind TEXT    NOT NULL CHECK (trigger_kind IN ('schedule', 'cli', 'api')),
    endpoint_id  TEXT,
    since        BIGINT,
    dry_run      BIGINT  NOT NULL DEFAULT 0 CHECK (dry_run IN (0, 1)),
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
    requested_by TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    started_at   BIGINT,
    finished_at  BIGINT,
    lease_owner  TEXT,
    lease_until  BIGINT,
    summary      TEXT,
    last_error   TEXT
);
CREATE INDEX IF NOT EXISTS reconcile_runs_created ON reconcile_runs (created_at, run_id);
CREATE INDEX IF NOT EXISTS reconcile_runs_runnable ON reconcile_runs (created_at)
    WHERE state IN ('pending', 'running');

-- 2. What runs found, one row per finding: its kind, what it names (an event, a delivery, a
--    processed marker) and what was done about it (`made_due`, `enqueued`, `reported`, or
--    `dry_run`). Written in the transaction of the repair it records, so a finding is listed
--    exactly when its repair committed. Listed newest first (`finding_id` ascends); trimmed by
--    age (`[reconcile] findings_retention_days`).
CREATE TABLE IF NOT EXISTS reconcile_findings (
    finding_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id            TEXT    NOT NULL,
    kind              TEXT    NOT NULL,
    endpoint_id       TEXT    NOT NULL,
    provider          TEXT,
    provider_event_id TEXT,
    inbox_id          TEXT,
    destination       TEXT,
    consumer          TEXT,
    action            TEXT    NOT NULL,
    found_at          BIGINT  NOT NULL
);
CREATE INDEX IF NOT EXISTS reconcile_findings_run ON reconcile_findings (run_id, finding_id);
CREATE INDEX IF NOT EXISTS reconcile_findings_found ON reconcile_findings (found_at);

-- 3. Provider reconciliation: per endpoint, how far the provider's listing has been read
--    (`checkpoint_at`, unix ms: events created before it were listed and brought in), so a
--    run resumes where the last one stopped.
CREATE TABLE IF NOT EXISTS reconcile_checkpoints (
    endpoint_id   TEXT    NOT NULL PRIMARY KEY,
    provider      TEXT    NOT NULL,
    checkpoint_at BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);

-- 4. No-retry windows: while the gateway answered a provider that never retries (GitHub)
--    with non-2xx, the window is recorded, and the endpoint's next provider reconciliation
--    covers it (`covered_at` set then).
CREATE TABLE IF NOT EXISTS reconcile_no_retry_windows (
    window_id   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    ended_at    BIGINT  NOT NULL,
    covered_at  BIGINT
);
CREATE INDEX IF NOT EXISTS reconcile_no_retry_open ON reconcile_no_retry_windows (endpoint_id)
    WHERE covered_at IS NULL;
