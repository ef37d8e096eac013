//! Reconciliation inside the gateway (issue 18), for both backends: what the scans of
//! [`crate::ReconcileStore`] look for, how a finding is repaired and recorded, and the run
//! records (schema: SQLite 12, PostgreSQL 13).
//!
//! The scans read; the binary decides which destinations an event routes to and hands the
//! findings back to [`crate::ReconcileStore::record_findings`], which re-checks each one in
//! the statement that repairs it (so a row a worker took meanwhile is not touched, and not
//! recorded) and writes the finding's row in the same transaction: a finding is listed
//! exactly when its repair committed. Every repair is conditional and idempotent, so two
//! instances reconciling at once repair each thing once (the second finds it repaired).

use std::fmt;

use crate::StoreError;
use crate::rows::Columns;
use crate::statements::Statement;

/// What a reconciliation finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// A `RECEIVED` row past its due time by more than the grace, with no live lease (and
    /// any expired lease expired more than the grace ago). Repaired: made due now.
    ReceivedOverdue,
    /// A `PROCESSED`/`applied` row with its payload stored and no outbox row for a
    /// destination its endpoint routes it to now. Repaired: the delivery inserted `PENDING`,
    /// due now (its idempotency key is the inbox id, as for every delivery processing writes).
    MissingOutbox,
    /// A `PENDING` delivery that was leased, whose lease expired more than the grace ago, and
    /// that is due (not waiting for a scheduled retry): its relay died and none took it over.
    /// Repaired: the dead lease cleared, due now.
    OutboxStuck,
    /// A `processed_events` marker whose inbox row is gone. Not safe to redo anything:
    /// reported only.
    OrphanMarker,
    /// A `RECEIVED` row of a sequenced endpoint waiting (not due by design) for an earlier
    /// sequence of its object, received more than the grace ago. Nothing is safe to redo (the
    /// `sequence_gaps` stage holds the gap when its window ends; only the missing event or an
    /// operator's release moves it): reported, so a run shows what waits.
    SequenceWaiting,
}

impl FindingKind {
    pub const ALL: [FindingKind; 5] = [
        FindingKind::ReceivedOverdue,
        FindingKind::MissingOutbox,
        FindingKind::OutboxStuck,
        FindingKind::OrphanMarker,
        FindingKind::SequenceWaiting,
    ];

    /// The stored name and the `kind` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ReceivedOverdue => "received_overdue",
            FindingKind::MissingOutbox => "missing_outbox",
            FindingKind::OutboxStuck => "outbox_stuck",
            FindingKind::OrphanMarker => "orphan_marker",
            FindingKind::SequenceWaiting => "sequence_waiting",
        }
    }

    pub fn parse(s: &str) -> Option<FindingKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// What a repairing run does about a finding of this kind.
    pub fn repair_action(self) -> FindingAction {
        match self {
            FindingKind::ReceivedOverdue | FindingKind::OutboxStuck => FindingAction::MadeDue,
            FindingKind::MissingOutbox => FindingAction::Enqueued,
            FindingKind::OrphanMarker | FindingKind::SequenceWaiting => FindingAction::Reported,
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was done about a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingAction {
    /// The row was made due now (`received_overdue`, `outbox_stuck`).
    MadeDue,
    /// The missing delivery was inserted `PENDING` (`missing_outbox`).
    Enqueued,
    /// Nothing is safe to redo: listed for an operator (`orphan_marker`, `sequence_waiting`).
    Reported,
    /// A dry run through the operator API: found, listed, nothing changed.
    DryRun,
}

impl FindingAction {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingAction::MadeDue => "made_due",
            FindingAction::Enqueued => "enqueued",
            FindingAction::Reported => "reported",
            FindingAction::DryRun => "dry_run",
        }
    }

    pub fn parse(s: &str) -> Option<FindingAction> {
        Some(match s {
            "made_due" => FindingAction::MadeDue,
            "enqueued" => FindingAction::Enqueued,
            "reported" => FindingAction::Reported,
            "dry_run" => FindingAction::DryRun,
            _ => return None,
        })
    }
}

/// An inbox row a scan found (no payload, no sealed data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundEvent {
    pub inbox_id: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: Option<String>,
    pub received_at_ms: i64,
}

/// A processed marker: the key of `processed_events` (also the keyset of its scan).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MarkerKey {
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub consumer: String,
}

/// Which `RECEIVED` rows a [`ReceivedScan`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceivedRows {
    /// Overdue (see [`FindingKind::ReceivedOverdue`]): due at or before the threshold, any
    /// lease expired at or before it; oldest due first.
    Overdue,
    /// Waiting for a missing sequence (see [`FindingKind::SequenceWaiting`]), received at or
    /// before the threshold; oldest first.
    WaitingForSequence,
}

impl ReceivedRows {
    /// The kind of finding each row found is.
    pub fn finding(self) -> FindingKind {
        match self {
            ReceivedRows::Overdue => FindingKind::ReceivedOverdue,
            ReceivedRows::WaitingForSequence => FindingKind::SequenceWaiting,
        }
    }

    pub(crate) fn statement(self) -> &'static Statement {
        match self {
            ReceivedRows::Overdue => &SCAN_OVERDUE,
            ReceivedRows::WaitingForSequence => &SCAN_WAITING,
        }
    }
}

/// `RECEIVED` rows of one endpoint that reconciliation reports ([`ReceivedRows`]).
#[derive(Debug, Clone)]
pub struct ReceivedScan<'a> {
    pub endpoint_id: &'a str,
    pub rows: ReceivedRows,
    /// `now - grace`.
    pub threshold_ms: i64,
    /// Only rows received at or after this time (0: all).
    pub since_ms: i64,
    pub limit: u32,
}

/// `PROCESSED`/`applied` rows of one endpoint without a delivery to `destination`, in
/// `(received_at, inbox_id)` order after `after`.
#[derive(Debug, Clone)]
pub struct MissingScan<'a> {
    pub endpoint_id: &'a str,
    pub destination: &'a str,
    pub since_ms: i64,
    /// The last row of the previous page.
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

/// Stuck deliveries of one endpoint's events to `destination` (see
/// [`FindingKind::OutboxStuck`]).
#[derive(Debug, Clone)]
pub struct StuckScan<'a> {
    pub endpoint_id: &'a str,
    pub destination: &'a str,
    /// `now - grace`: the lease expired at or before it.
    pub threshold_ms: i64,
    pub now_ms: i64,
    /// Only deliveries created at or after this time (0: all).
    pub since_ms: i64,
    pub limit: u32,
}

/// One finding to repair (or, in a dry run, only to record) and record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFinding {
    pub kind: FindingKind,
    pub endpoint_id: String,
    pub provider: Option<String>,
    pub provider_event_id: Option<String>,
    pub inbox_id: Option<String>,
    pub destination: Option<String>,
    pub consumer: Option<String>,
}

/// A batch of findings of one run, repaired and recorded in one transaction.
#[derive(Debug, Clone)]
pub struct FindingBatch {
    pub run_id: String,
    /// `false`: nothing is repaired; each finding is recorded as [`FindingAction::DryRun`].
    pub repair: bool,
    /// The threshold the scans used (`now - grace`), re-checked by the repairs.
    pub threshold_ms: i64,
    pub now_ms: i64,
    pub findings: Vec<NewFinding>,
}

/// A recorded finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingRecord {
    pub finding_id: i64,
    pub run_id: String,
    pub kind: FindingKind,
    pub endpoint_id: String,
    pub provider: Option<String>,
    pub provider_event_id: Option<String>,
    pub inbox_id: Option<String>,
    pub destination: Option<String>,
    pub consumer: Option<String>,
    pub action: FindingAction,
    pub found_at_ms: i64,
}

/// Most findings one listing returns.
pub const MAX_FINDINGS_PAGE: u32 = 500;

/// Which findings to list: newest first, at most `limit`, before `before_id`.
#[derive(Debug, Clone, Default)]
pub struct FindingQuery {
    pub run_id: Option<String>,
    pub kind: Option<FindingKind>,
    pub endpoint_id: Option<String>,
    pub before_id: Option<i64>,
    pub limit: u32,
}

/// Who started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunTrigger {
    /// The `reconcile` stage's timer.
    Schedule,
    /// `hookgate reconcile`.
    Cli,
    /// `POST /api/v1/reconcile`.
    Api,
}

impl RunTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Schedule => "schedule",
            RunTrigger::Cli => "cli",
            RunTrigger::Api => "api",
        }
    }

    pub fn parse(s: &str) -> Option<RunTrigger> {
        Some(match s {
            "schedule" => RunTrigger::Schedule,
            "cli" => RunTrigger::Cli,
            "api" => RunTrigger::Api,
            _ => return None,
        })
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    /// Requested through the API, waiting for a `reconcile` stage to lease it.
    Pending,
    Running,
    Done,
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        Some(match s {
            "pending" => RunState::Pending,
            "running" => RunState::Running,
            "done" => RunState::Done,
            "failed" => RunState::Failed,
            _ => return None,
        })
    }
}

/// A run as created.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub run_id: String,
    pub trigger: RunTrigger,
    pub endpoint_id: Option<String>,
    pub since_ms: Option<i64>,
    pub dry_run: bool,
    /// `Pending` (API: a stage runs it) or `Running` under `owner` (the caller runs it).
    pub state: RunState,
    /// Who asked: the API token's name, the OS user, or `schedule`.
    pub requested_by: String,
    /// The runner, for a run created `Running`.
    pub owner: Option<String>,
    pub lease_ms: i64,
    pub now_ms: i64,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    pub run_id: String,
    pub trigger: RunTrigger,
    pub endpoint_id: Option<String>,
    pub since_ms: Option<i64>,
    pub dry_run: bool,
    pub state: RunState,
    pub requested_by: String,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// JSON: what the run found per endpoint and kind (set when it ended).
    pub summary: Option<String>,
    pub last_error: Option<String>,
}

/// Longest `last_error` a run keeps.
pub const MAX_RUN_ERROR: usize = 512;

pub(crate) const RUN_COLUMNS: &str = "run_id, trigger_kind, endpoint_id, since, dry_run, state, \
     requested_by, created_at, started_at, finished_at, summary, last_error";

pub(crate) fn run_record(r: &impl Columns) -> Result<RunRecord, StoreError> {
    let trigger = r.text(1)?;
    let state = r.text(5)?;
    Ok(RunRecord {
        run_id: r.text(0)?,
        trigger: RunTrigger::parse(&trigger)
            .ok_or_else(|| StoreError::Corrupt(format!("reconcile trigger {trigger:?}")))?,
        endpoint_id: r.opt_text(2)?,
        since_ms: r.opt_int(3)?,
        dry_run: r.int(4)? != 0,
        state: RunState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("reconcile run state {state:?}")))?,
        requested_by: r.text(6)?,
        created_at_ms: r.int(7)?,
        started_at_ms: r.opt_int(8)?,
        finished_at_ms: r.opt_int(9)?,
        summary: r.opt_text(10)?,
        last_error: r.opt_text(11)?,
    })
}

pub(crate) const FINDING_COLUMNS: &str = "finding_id, run_id, kind, endpoint_id, provider, \
     provider_event_id, inbox_id, destination, consumer, action, found_at";

pub(crate) fn finding_record(r: &impl Columns) -> Result<FindingRecord, StoreError> {
    let kind = r.text(2)?;
    let action = r.text(9)?;
    Ok(FindingRecord {
        finding_id: r.int(0)?,
        run_id: r.text(1)?,
        kind: FindingKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("finding kind {kind:?}")))?,
        endpoint_id: r.text(3)?,
        provider: r.opt_text(4)?,
        provider_event_id: r.opt_text(5)?,
        inbox_id: r.opt_text(6)?,
        destination: r.opt_text(7)?,
        consumer: r.opt_text(8)?,
        action: FindingAction::parse(&action)
            .ok_or_else(|| StoreError::Corrupt(format!("finding action {action:?}")))?,
        found_at_ms: r.int(10)?,
    })
}

pub(crate) fn found_event(r: &impl Columns) -> Result<FoundEvent, StoreError> {
    Ok(FoundEvent {
        inbox_id: r.text(0)?,
        provider: r.text(1)?,
        endpoint_id: r.text(2)?,
        provider_event_id: r.text(3)?,
        event_type: r.opt_text(4)?,
        received_at_ms: r.int(5)?,
    })
}

pub(crate) fn marker_key(r: &impl Columns) -> Result<MarkerKey, StoreError> {
    Ok(MarkerKey {
        provider: r.text(0)?,
        endpoint_id: r.text(1)?,
        provider_event_id: r.text(2)?,
        consumer: r.text(3)?,
    })
}

/// Parameters: endpoint, threshold, since, limit. A row waiting for a missing sequence
/// (`sequence_waiting_for`) is not due by design: never overdue, never made due here.
pub(crate) static SCAN_OVERDUE: Statement = Statement::new(
    "SELECT i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type, i.received_at \
         FROM inbox i \
         WHERE i.status = 'RECEIVED' AND i.endpoint_id = $1 \
           AND i.sequence_waiting_for IS NULL \
           AND coalesce(i.next_attempt_at, i.received_at) <= $2 \
           AND (i.lease_until IS NULL OR i.lease_until <= $2) \
           AND i.received_at >= $3 \
         ORDER BY i.next_attempt_at, i.inbox_id LIMIT $4",
);

/// Parameters: endpoint, threshold, since, limit: rows waiting for a missing sequence,
/// received at or before the threshold; oldest first.
pub(crate) static SCAN_WAITING: Statement = Statement::new(
    "SELECT i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type, i.received_at \
         FROM inbox i \
         WHERE i.status = 'RECEIVED' AND i.endpoint_id = $1 \
           AND i.sequence_waiting_for IS NOT NULL AND i.released_at IS NULL \
           AND i.received_at <= $2 AND i.received_at >= $3 \
         ORDER BY i.received_at, i.inbox_id LIMIT $4",
);

/// Parameter: inbox id. The row still waits (a `sequence_waiting` finding holds).
pub(crate) static WAITING_STILL: Statement = Statement::new(
    "SELECT 1 FROM inbox WHERE inbox_id = $1 AND status = 'RECEIVED' \
       AND sequence_waiting_for IS NOT NULL AND released_at IS NULL",
);

/// Parameters: endpoint, destination, since, after received_at, after inbox id, limit.
pub(crate) static SCAN_MISSING: Statement = Statement::new(
    "SELECT i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type, i.received_at \
         FROM inbox i \
         WHERE i.endpoint_id = $1 AND i.status = 'PROCESSED' AND i.outcome = 'applied' \
           AND i.payload_purged_at IS NULL AND i.received_at >= $3 \
           AND (i.received_at > $4 OR (i.received_at = $4 AND i.inbox_id > $5)) \
           AND NOT EXISTS (SELECT 1 FROM outbox o \
               WHERE o.inbox_id = i.inbox_id AND o.destination = $2) \
         ORDER BY i.received_at, i.inbox_id LIMIT $6",
);

/// Parameters: endpoint, destination, threshold, now, since, limit.
pub(crate) static SCAN_STUCK: Statement = Statement::new(
    "SELECT i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type, i.received_at \
         FROM outbox o JOIN inbox i ON i.inbox_id = o.inbox_id \
         WHERE o.destination = $2 AND o.status = 'PENDING' AND i.endpoint_id = $1 \
           AND o.lease_until IS NOT NULL AND o.lease_until <= $3 \
           AND o.next_attempt_at <= $4 AND o.created_at >= $5 \
         ORDER BY o.next_attempt_at, o.outbox_id LIMIT $6",
);

/// Parameters: endpoint, after (provider, event id, consumer), limit.
pub(crate) static SCAN_ORPHANS: Statement = Statement::new(
    "SELECT p.provider, p.endpoint_id, p.provider_event_id, p.consumer \
     FROM processed_events p \
     WHERE p.endpoint_id = $1 AND (p.provider, p.provider_event_id, p.consumer) > ($2, $3, $4) \
       AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.provider = p.provider \
           AND i.endpoint_id = p.endpoint_id AND i.provider_event_id = p.provider_event_id) \
     ORDER BY p.provider, p.provider_event_id, p.consumer LIMIT $5",
);

/// The repair of a `received_overdue` row, re-checking what the scan found. Parameters:
/// inbox id, threshold, now.
pub(crate) static REPAIR_OVERDUE: Statement = Statement::new(
    "UPDATE inbox SET next_attempt_at = $3, lease_owner = NULL, lease_until = NULL \
     WHERE inbox_id = $1 AND status = 'RECEIVED' AND sequence_waiting_for IS NULL \
       AND coalesce(next_attempt_at, received_at) <= $2 \
       AND (lease_until IS NULL OR lease_until <= $2)",
);

/// The repair of a `missing_outbox` finding: the delivery processing would have written.
/// Parameters: outbox id, inbox id, destination, now.
pub(crate) static REPAIR_MISSING: Statement = Statement::new(
    "INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
         next_attempt_at, created_at) \
     SELECT $1, i.inbox_id, $3, 'PENDING', 0, $4, $4 FROM inbox i \
     WHERE i.inbox_id = $2 AND i.status = 'PROCESSED' AND i.outcome = 'applied' \
       AND i.payload_purged_at IS NULL \
     ON CONFLICT DO NOTHING",
);

/// The repair of an `outbox_stuck` delivery. Parameters: outbox id, threshold, now.
pub(crate) static REPAIR_STUCK: Statement = Statement::new(
    "UPDATE outbox SET next_attempt_at = $3, lease_owner = NULL, lease_until = NULL \
     WHERE outbox_id = $1 AND status = 'PENDING' \
       AND lease_until IS NOT NULL AND lease_until <= $2 AND next_attempt_at <= $3",
);

/// Whether a marker is still without its inbox row. Parameters: provider, endpoint, event id,
/// consumer.
pub(crate) static ORPHAN_STILL: Statement = Statement::new(
    "SELECT 1 FROM processed_events p \
     WHERE p.provider = $1 AND p.endpoint_id = $2 AND p.provider_event_id = $3 \
       AND p.consumer = $4 \
       AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.provider = p.provider \
           AND i.endpoint_id = p.endpoint_id AND i.provider_event_id = p.provider_event_id)",
);

/// Parameters: run, kind, endpoint, provider, event id, inbox id, destination, consumer,
/// action, found at.
pub(crate) static INSERT_FINDING: Statement = Statement::new(
    "INSERT INTO reconcile_findings (run_id, kind, endpoint_id, provider, provider_event_id, \
         inbox_id, destination, consumer, action, found_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
);

/// Parameters: run id, trigger, endpoint, since, dry run (0/1), state, requested by, now,
/// started at, owner, lease until.
pub(crate) static INSERT_RUN: Statement = Statement::new(
    "INSERT INTO reconcile_runs (run_id, trigger_kind, endpoint_id, since, dry_run, state, \
         requested_by, created_at, started_at, lease_owner, lease_until) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
);

/// Ends a run, fenced on its runner. Parameters: run id, owner, state, summary, error, now.
pub(crate) static FINISH_RUN: Statement = Statement::new(
    "UPDATE reconcile_runs SET state = $3, summary = $4, last_error = $5, finished_at = $6, \
         lease_owner = NULL, lease_until = NULL \
     WHERE run_id = $1 AND state = 'running' AND lease_owner = $2",
);

/// Deletes findings found before a time, a batch. Parameters: before, limit.
pub(crate) static TRIM_FINDINGS: Statement = Statement::new(
    "DELETE FROM reconcile_findings WHERE finding_id IN (SELECT finding_id \
         FROM reconcile_findings WHERE found_at < $1 ORDER BY found_at LIMIT $2)",
);

/// The listing's `WHERE … ORDER BY … LIMIT` with its parameters, `$n` placeholders.
pub(crate) fn list_sql(query: &FindingQuery) -> (String, Vec<crate::rejections::Param>) {
    use crate::rejections::Param;
    let mut conditions = Vec::new();
    let mut params = Vec::new();
    let mut push = |condition: &str, p: Param| {
        params.push(p);
        conditions.push(condition.replace('?', &format!("${}", params.len())));
    };
    if let Some(run) = &query.run_id {
        push("run_id = ?", Param::Text(run.clone()));
    }
    if let Some(kind) = query.kind {
        push("kind = ?", Param::Text(kind.as_str().to_owned()));
    }
    if let Some(endpoint) = &query.endpoint_id {
        push("endpoint_id = ?", Param::Text(endpoint.clone()));
    }
    if let Some(before) = query.before_id {
        push("finding_id < ?", Param::Int(before));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    params.push(Param::Int(i64::from(
        query.limit.clamp(1, MAX_FINDINGS_PAGE),
    )));
    let sql = format!(
        "SELECT {FINDING_COLUMNS} FROM reconcile_findings{filter} \
         ORDER BY finding_id DESC LIMIT ${}",
        params.len()
    );
    (sql, params)
}

/// How far provider reconciliation has read an endpoint's provider listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub provider: String,
    /// Everything the provider created (sent) before this time, unix ms, was listed.
    pub checkpoint_at_ms: i64,
    /// When a run last completed on the endpoint (the schedule's per-provider rate limit).
    pub updated_at_ms: i64,
}

/// A time the gateway answered a provider that never retries (GitHub) with non-2xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRetryWindow {
    pub window_id: i64,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
}

/// Parameters: endpoint.
pub(crate) static SELECT_CHECKPOINT: Statement = Statement::new(
    "SELECT provider, checkpoint_at, updated_at FROM reconcile_checkpoints WHERE endpoint_id = $1",
);

/// Parameters: endpoint, provider, checkpoint, now. The checkpoint never moves back (a run
/// `--since` earlier re-reads, it does not forget what later runs read).
pub(crate) static SQLITE_SAVE_CHECKPOINT: &str = "INSERT INTO reconcile_checkpoints (endpoint_id, provider, checkpoint_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (endpoint_id) DO UPDATE SET provider = excluded.provider, \
         checkpoint_at = max(checkpoint_at, excluded.checkpoint_at), updated_at = excluded.updated_at";

/// [`SQLITE_SAVE_CHECKPOINT`] for PostgreSQL.
pub(crate) static POSTGRES_SAVE_CHECKPOINT: &str = "INSERT INTO reconcile_checkpoints (endpoint_id, provider, checkpoint_at, updated_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (endpoint_id) DO UPDATE SET provider = EXCLUDED.provider, \
         checkpoint_at = GREATEST(reconcile_checkpoints.checkpoint_at, EXCLUDED.checkpoint_at), \
         updated_at = EXCLUDED.updated_at";

/// The inbox row of a key. Parameters: provider, endpoint, event id.
pub(crate) static SELECT_KEY: Statement = Statement::new(
    "SELECT inbox_id FROM inbox WHERE provider = $1 AND endpoint_id = $2 AND provider_event_id = $3",
);

/// Extends the endpoint's newest open window to `ended at` when the new one starts within or
/// after it (only a window's start decides where a run begins, so one open window per
/// endpoint is enough); an earlier start (another instance's older window) is recorded as a
/// window of its own, so a run that already read the newest one still starts early enough.
/// Parameters: endpoint, started at, ended at.
pub(crate) static EXTEND_WINDOW: Statement = Statement::new(
    "UPDATE reconcile_no_retry_windows \
     SET ended_at = CASE WHEN ended_at > $3 THEN ended_at ELSE $3 END \
     WHERE window_id = (SELECT max(window_id) FROM reconcile_no_retry_windows \
                        WHERE endpoint_id = $1 AND covered_at IS NULL) \
       AND started_at <= $2",
);

/// When [`EXTEND_WINDOW`] changed nothing. Parameters: endpoint, started at, ended at.
pub(crate) static INSERT_WINDOW: Statement = Statement::new(
    "INSERT INTO reconcile_no_retry_windows (endpoint_id, started_at, ended_at) VALUES ($1, $2, $3)",
);

/// The most open windows one read returns (older ones wait for the next run).
pub const MAX_OPEN_WINDOWS: i64 = 1_000;

/// Parameters: endpoint, limit.
pub(crate) static OPEN_WINDOWS: Statement = Statement::new(
    "SELECT window_id, started_at, ended_at FROM reconcile_no_retry_windows \
     WHERE endpoint_id = $1 AND covered_at IS NULL ORDER BY window_id LIMIT $2",
);

/// Parameters: endpoint, up to window id, now.
pub(crate) static COVER_WINDOWS: Statement = Statement::new(
    "UPDATE reconcile_no_retry_windows SET covered_at = $3 \
     WHERE endpoint_id = $1 AND window_id <= $2 AND covered_at IS NULL",
);

pub(crate) fn checkpoint_row(r: &impl Columns) -> Result<Checkpoint, StoreError> {
    Ok(Checkpoint {
        provider: r.text(0)?,
        checkpoint_at_ms: r.int(1)?,
        updated_at_ms: r.int(2)?,
    })
}

pub(crate) fn window_row(r: &impl Columns) -> Result<NoRetryWindow, StoreError> {
    Ok(NoRetryWindow {
        window_id: r.int(0)?,
        started_at_ms: r.int(1)?,
        ended_at_ms: r.int(2)?,
    })
}

/// The outbox id of a delivery (as processing names them).
pub(crate) fn outbox_id(inbox_id: &str, destination: &str) -> String {
    crate::jobs::outbox_id(inbox_id, destination)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in FindingKind::ALL {
            assert_eq!(FindingKind::parse(k.as_str()), Some(k));
        }
        for a in [
            FindingAction::MadeDue,
            FindingAction::Enqueued,
            FindingAction::Reported,
            FindingAction::DryRun,
        ] {
            assert_eq!(FindingAction::parse(a.as_str()), Some(a));
        }
        for s in [
            RunState::Pending,
            RunState::Running,
            RunState::Done,
            RunState::Failed,
        ] {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
        }
        assert_eq!(FindingKind::parse("lost"), None);
    }

    #[test]
    fn the_listing_numbers_its_parameters_in_order() {
        let (sql, params) = list_sql(&FindingQuery {
            run_id: Some("r".into()),
            kind: Some(FindingKind::MissingOutbox),
            endpoint_id: None,
            before_id: Some(9),
            limit: 10_000,
        });
        assert!(sql.contains("WHERE run_id = $1 AND kind = $2 AND finding_id < $3"));
        assert!(sql.ends_with("LIMIT $4"));
        assert_eq!(params.len(), 4);
        assert!(matches!(params[3], crate::rejections::Param::Int(500)));
    }
}
