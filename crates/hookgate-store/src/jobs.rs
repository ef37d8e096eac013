//! Bulk operator jobs (`POST /api/v1/jobs`), for both backends: an action (retry, replay,
//! redeliver) over the events a filter selects, stored in `jobs` (schema: SQLite 10,
//! PostgreSQL 11) and run by the `jobs` stage a batch at a time.
//!
//! A runner leases one runnable job (`pending`, or `running` with an expired lease); each
//! lease takes a new `lease_epoch`, and every later write of the runner is fenced on
//! `lease_owner`, `lease_epoch` and `state = 'running'`. A batch ([`JobBatch`]) applies the
//! action to its events AND records the progress and the cursor in one transaction, so a run
//! killed at any point resumes exactly after the last committed batch, and the counts are
//! exact. A pause or a cancel changes `state` (and drops the lease): the runner's next write
//! finds the fence closed, writes nothing, and stops ([`JobFenceError::Stopped`]).
//!
//! The filter is stored as the JSON text the API received; the binary parses it (the events
//! list's filter) and selects each batch's events itself, in the events list's order.

use std::fmt;

use crate::StoreError;
use crate::rows::Columns;
use crate::statements::Statement;

/// What a job does to each event it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobAction {
    /// A `FAILED` event back to processing, and its `FAILED` deliveries back to `PENDING`.
    Retry,
    /// An `IGNORED` or `PROCESSED` event back through processing.
    Replay,
    /// The event delivered again to one destination.
    Redeliver,
}

impl JobAction {
    pub fn as_str(self) -> &'static str {
        match self {
            JobAction::Retry => "retry",
            JobAction::Replay => "replay",
            JobAction::Redeliver => "redeliver",
        }
    }

    pub fn parse(s: &str) -> Option<JobAction> {
        Some(match s {
            "retry" => JobAction::Retry,
            "replay" => JobAction::Replay,
            "redeliver" => JobAction::Redeliver,
            _ => return None,
        })
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Created (or resumed), waiting for a runner.
    Pending,
    /// A runner holds (or held, until its lease expires) the job.
    Running,
    Paused,
    Cancelled,
    /// Every selected event was handled.
    Done,
    /// The job cannot go on (its filter no longer parses, its destination is gone).
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Paused => "paused",
            JobState::Cancelled => "cancelled",
            JobState::Done => "done",
            JobState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        Some(match s {
            "pending" => JobState::Pending,
            "running" => JobState::Running,
            "paused" => JobState::Paused,
            "cancelled" => JobState::Cancelled,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            _ => return None,
        })
    }

    /// `cancelled`, `done` and `failed` never change again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Cancelled | JobState::Done | JobState::Failed
        )
    }
}

/// A job as created by the API.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// UUIDv7 text from the caller.
    pub job_id: String,
    pub action: JobAction,
    /// The filter as JSON text (the events list's query-parameter names).
    pub filter: String,
    pub destination: Option<String>,
    pub fresh_key: bool,
    /// The API token's name.
    pub created_by: String,
    pub now_ms: i64,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub job_id: String,
    pub action: JobAction,
    pub filter: String,
    pub destination: Option<String>,
    pub fresh_key: bool,
    pub state: JobState,
    pub created_by: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    /// Events received after this time (unix ms) are not the job's; set when it first starts.
    pub snapshot_at_ms: Option<i64>,
    /// Matching events when the job first started.
    pub total: Option<u64>,
    pub done: u64,
    pub failed: u64,
    /// The last event handled, in the events list's order (opaque to the store).
    pub cursor: Option<String>,
    pub last_error: Option<String>,
}

/// An operator's change of a job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobControl {
    /// `pending`/`running` → `paused`.
    Pause,
    /// `paused` → `pending` (a runner picks it up again from its cursor).
    Resume,
    /// `pending`/`running`/`paused` → `cancelled`.
    Cancel,
}

impl JobControl {
    /// The states this change applies to.
    pub fn from_states(self) -> &'static [JobState] {
        match self {
            JobControl::Pause => &[JobState::Pending, JobState::Running],
            JobControl::Resume => &[JobState::Paused],
            JobControl::Cancel => &[JobState::Pending, JobState::Running, JobState::Paused],
        }
    }

    pub fn to_state(self) -> JobState {
        match self {
            JobControl::Pause => JobState::Paused,
            JobControl::Resume => JobState::Pending,
            JobControl::Cancel => JobState::Cancelled,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobControl::Pause => "pause",
            JobControl::Resume => "resume",
            JobControl::Cancel => "cancel",
        }
    }
}

/// What [`crate::JobStore::control_job`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobControlResult {
    /// Changed; the job after.
    Changed(JobRecord),
    /// The job is in a state the change does not apply to; the job as it is.
    Conflict(JobRecord),
    NotFound,
}

/// A runner's hold on a job: every write is fenced on it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobFence {
    pub job_id: String,
    pub owner: String,
    /// The lease's number (a new one at every lease of the job).
    pub epoch: i64,
}

impl fmt::Debug for JobFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JobFence({} by {}#{})",
            self.job_id, self.owner, self.epoch
        )
    }
}

/// A leased job.
#[derive(Debug, Clone)]
pub struct LeasedJob {
    pub fence: JobFence,
    pub job: JobRecord,
}

/// Why a fenced job write wrote nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobFenceError {
    /// The job left `running` (paused, cancelled) or another runner holds it now; the state
    /// it is in, when it still exists.
    #[error("the job is no longer run by this runner")]
    Stopped(Option<JobState>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One batch of a leased job: `inbox_ids` get the job's action, and the job records their
/// results, `cursor` and a renewed lease, in one transaction.
#[derive(Debug, Clone)]
pub struct JobBatch {
    pub fence: JobFence,
    pub action: JobAction,
    pub destination: Option<String>,
    pub inbox_ids: Vec<String>,
    /// With a job's `fresh_key`: a new idempotency key per event (same length as
    /// `inbox_ids`), recorded on the re-delivery; empty otherwise.
    pub fresh_keys: Vec<String>,
    /// The cursor after the last of `inbox_ids`.
    pub cursor: String,
    pub now_ms: i64,
    /// The lease is renewed to `now_ms + lease_ms`.
    pub lease_ms: i64,
}

/// What a batch did: events the action applied to, and events it could not (not in a state
/// the action takes, payload purged, no such destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobBatchResult {
    pub done: u64,
    pub failed: u64,
}

/// Most events one batch may carry.
pub const MAX_JOB_BATCH: usize = 500;

pub(crate) const JOB_COLUMNS: &str = "job_id, action, filter, destination, fresh_key, state, \
     created_by, created_at, updated_at, finished_at, snapshot_at, total, done, failed, cursor, \
     last_error";

/// A job row in [`JOB_COLUMNS`] order.
pub(crate) fn job_record(r: &impl Columns) -> Result<JobRecord, StoreError> {
    let count = |i: usize| -> Result<u64, StoreError> {
        u64::try_from(r.int(i)?).map_err(|_| StoreError::Corrupt(format!("column {i} < 0")))
    };
    let action = r.text(1)?;
    let state = r.text(5)?;
    Ok(JobRecord {
        job_id: r.text(0)?,
        action: JobAction::parse(&action)
            .ok_or_else(|| StoreError::Corrupt(format!("job action {action:?}")))?,
        filter: r.text(2)?,
        destination: r.opt_text(3)?,
        fresh_key: r.int(4)? != 0,
        state: JobState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("job state {state:?}")))?,
        created_by: r.text(6)?,
        created_at_ms: r.int(7)?,
        updated_at_ms: r.int(8)?,
        finished_at_ms: r.opt_int(9)?,
        snapshot_at_ms: r.opt_int(10)?,
        total: r.opt_int(11)?.map(|n| u64::try_from(n).unwrap_or(0)),
        done: count(12)?,
        failed: count(13)?,
        cursor: r.opt_text(14)?,
        last_error: r.opt_text(15)?,
    })
}

/// Parameters: job id, action, filter, destination, fresh key (0/1), created by, now.
pub(crate) static INSERT_JOB: Statement = Statement::new(
    "INSERT INTO jobs (job_id, action, filter, destination, fresh_key, state, created_by, \
         created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $7)",
);

/// The fence of every runner write (PostgreSQL adds `FOR UPDATE`). Parameters: job id,
/// owner, epoch.
pub(crate) static JOB_FENCE: Statement = Statement::new(
    "SELECT state FROM jobs WHERE job_id = $1 AND state = 'running' \
       AND lease_owner = $2 AND lease_epoch = $3",
);

/// Parameter: job id.
pub(crate) static JOB_STATE: Statement = Statement::new("SELECT state FROM jobs WHERE job_id = $1");

/// The start of a job's first run: its snapshot time and total, once. Parameters: job id,
/// snapshot (ms), total, now.
pub(crate) static START_JOB: Statement = Statement::new(
    "UPDATE jobs SET snapshot_at = coalesce(snapshot_at, $2), total = coalesce(total, $3), \
         updated_at = $4 \
     WHERE job_id = $1",
);

/// A batch's progress. Parameters: job id, done, failed, cursor, now, lease until.
pub(crate) static JOB_PROGRESS: Statement = Statement::new(
    "UPDATE jobs SET done = done + $2, failed = failed + $3, cursor = $4, updated_at = $5, \
         lease_until = $6 \
     WHERE job_id = $1",
);

/// The end of a run. Parameters: job id, state (`done`/`failed`), error, now.
pub(crate) static FINISH_JOB: Statement = Statement::new(
    "UPDATE jobs SET state = $2, last_error = $3, finished_at = $4, updated_at = $4, \
         lease_owner = NULL, lease_until = NULL \
     WHERE job_id = $1",
);

/// Operator retry of a `FAILED` event and of its `FAILED` deliveries, as
/// `ProcessingStore::retry_event` and `OutboxStore::retry_deliveries` do one at a time.
pub(crate) use crate::statements::{RETRY_DELIVERIES, RETRY_EVENT};

/// The operator API's one-event operations, run by a job inside its batch's transaction.
pub(crate) use crate::operator::{REDELIVER, REPLAY_EVENT};

/// The outbox id of a delivery a job's re-delivery creates (as processing names them).
pub(crate) fn outbox_id(inbox_id: &str, destination: &str) -> String {
    format!("{inbox_id}:{destination}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in [JobAction::Retry, JobAction::Replay, JobAction::Redeliver] {
            assert_eq!(JobAction::parse(a.as_str()), Some(a));
        }
        for s in [
            JobState::Pending,
            JobState::Running,
            JobState::Paused,
            JobState::Cancelled,
            JobState::Done,
            JobState::Failed,
        ] {
            assert_eq!(JobState::parse(s.as_str()), Some(s));
        }
        assert_eq!(JobAction::parse("purge"), None);
        assert!(JobControl::Cancel.from_states().contains(&JobState::Paused));
        assert!(!JobControl::Pause.from_states().contains(&JobState::Paused));
    }
}
