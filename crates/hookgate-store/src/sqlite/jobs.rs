//! The [`JobStore`] and [`RejectionStore`] impls: every write is a command of the single
//! writer (`command.rs`), so a job batch — the action on its events, the progress and the
//! cursor — is one savepoint inside a group-commit transaction, committed or lost whole.
//! Reads use the read pool.

use rusqlite::{Connection, OptionalExtension, ToSql};

use super::SqliteStore;
use super::command::Failed;
use super::read::mapped;
use crate::jobs::{
    FINISH_JOB, INSERT_JOB, JOB_COLUMNS, JOB_FENCE, JOB_PROGRESS, JOB_STATE, JobAction, JobBatch,
    JobBatchResult, JobControl, JobControlResult, JobFence, JobFenceError, JobRecord, JobState,
    LeasedJob, NewJob, REDELIVER, REPLAY_EVENT, RETRY_DELIVERIES, RETRY_EVENT, START_JOB,
    job_record, outbox_id,
};
use crate::rejections::{
    ADD_COUNT, INSERT_ENTRY, Param, RejectionCauseCount, RejectionCount, RejectionEntry,
    RejectionQuery, RejectionRecord, TRIM_COUNTS, TRIM_ENTRIES, counts_sql, entry_record, list_sql,
    merge_counts, sqlite_text,
};
use crate::{JobStore, ProcessingError, RejectionStore, StoreError};

/// The oldest runnable job: pending, or running with an expired lease. Parameter: now.
const RUNNABLE_JOB: &str = "SELECT job_id FROM jobs INDEXED BY jobs_runnable \
     WHERE state IN ('pending', 'running') AND (lease_until IS NULL OR lease_until <= ?1) \
     ORDER BY created_at LIMIT 1";

fn select_job(conn: &Connection, job_id: &str) -> rusqlite::Result<Option<JobRecord>> {
    conn.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?1"))?
        .query_row([job_id], mapped(|r| job_record(r)))
        .optional()
}

fn state_of(conn: &Connection, job_id: &str) -> rusqlite::Result<Option<JobState>> {
    let state: Option<String> = conn
        .prepare_cached(JOB_STATE.sqlite())?
        .query_row([job_id], |r| r.get(0))
        .optional()?;
    Ok(state.as_deref().and_then(JobState::parse))
}

/// `Ok(None)` while `fence` holds; otherwise the job's state (the caller writes nothing).
fn check_fence(conn: &Connection, fence: &JobFence) -> rusqlite::Result<Option<Option<JobState>>> {
    let held = conn
        .prepare_cached(JOB_FENCE.sqlite())?
        .query_row(
            rusqlite::params![fence.job_id, fence.owner, fence.epoch],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if held {
        Ok(None)
    } else {
        Ok(Some(state_of(conn, &fence.job_id)?))
    }
}

fn fence_error(e: ProcessingError) -> JobFenceError {
    JobFenceError::Store(e.into_store_error())
}

/// The job's action on its `i`-th event; `true` when it applied.
fn apply(conn: &Connection, batch: &JobBatch, i: usize) -> rusqlite::Result<bool> {
    let now = batch.now_ms;
    let inbox_id = &batch.inbox_ids[i];
    Ok(match batch.action {
        JobAction::Retry => {
            let event = conn
                .prepare_cached(RETRY_EVENT.sqlite())?
                .execute(rusqlite::params![inbox_id, now])?;
            let deliveries = conn
                .prepare_cached(RETRY_DELIVERIES.sqlite())?
                .execute(rusqlite::params![inbox_id, now])?;
            event + deliveries > 0
        }
        JobAction::Replay => {
            conn.prepare_cached(&sqlite_text(REPLAY_EVENT))?
                .execute(rusqlite::params![inbox_id, now])?
                == 1
        }
        JobAction::Redeliver => match &batch.destination {
            None => false,
            Some(d) => {
                conn.prepare_cached(&sqlite_text(REDELIVER))?
                    .execute(rusqlite::params![
                        outbox_id(inbox_id, d),
                        d,
                        now,
                        batch.fresh_keys.get(i),
                        inbox_id
                    ])?
                    == 1
            }
        },
    })
}

#[async_trait::async_trait]
impl JobStore for SqliteStore {
    async fn create_job(&self, job: NewJob) -> Result<(), StoreError> {
        self.write(move |conn| {
            conn.prepare_cached(INSERT_JOB.sqlite())?
                .execute(rusqlite::params![
                    job.job_id,
                    job.action.as_str(),
                    job.filter,
                    job.destination,
                    i64::from(job.fresh_key),
                    job.created_by,
                    job.now_ms,
                ])?;
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn get_job(&self, job_id: &str) -> Result<Option<JobRecord>, StoreError> {
        let job_id = job_id.to_owned();
        self.read(move |conn| select_job(conn, &job_id)).await
    }

    async fn list_jobs(
        &self,
        limit: u32,
        before: Option<&str>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let before = before.map(str::to_owned);
        self.read(move |conn| {
            let limit = i64::from(limit);
            match &before {
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS} FROM jobs \
                         ORDER BY created_at DESC, job_id DESC LIMIT ?1"
                    ))?
                    .query_map([limit], mapped(|r| job_record(r)))?
                    .collect(),
                Some(b) => conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS} FROM jobs \
                         WHERE (created_at, job_id) < \
                             (SELECT created_at, job_id FROM jobs WHERE job_id = ?1) \
                         ORDER BY created_at DESC, job_id DESC LIMIT ?2"
                    ))?
                    .query_map(rusqlite::params![b, limit], mapped(|r| job_record(r)))?
                    .collect(),
            }
        })
        .await
    }

    async fn control_job(
        &self,
        job_id: &str,
        control: JobControl,
        now_ms: i64,
    ) -> Result<JobControlResult, StoreError> {
        let job_id = job_id.to_owned();
        self.write(move |conn| {
            let Some(job) = select_job(conn, &job_id)? else {
                return Ok(JobControlResult::NotFound);
            };
            if !control.from_states().contains(&job.state) {
                return Ok(JobControlResult::Conflict(job));
            }
            let to = control.to_state();
            let finished = to.is_final().then_some(now_ms);
            conn.prepare_cached(
                "UPDATE jobs SET state = ?2, updated_at = ?3, finished_at = ?4, \
                     lease_owner = NULL, lease_until = NULL WHERE job_id = ?1",
            )?
            .execute(rusqlite::params![job_id, to.as_str(), now_ms, finished])?;
            let after = select_job(conn, &job_id)?
                .ok_or_else(|| Failed::Sql(rusqlite::Error::QueryReturnedNoRows))?;
            Ok(JobControlResult::Changed(after))
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn lease_job(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<LeasedJob>, StoreError> {
        // An idle runner polls: look on a read connection first, so that no job means no
        // command in the writer's queue (acceptances never wait behind an empty lease).
        let runnable = self
            .read(move |conn| {
                conn.prepare_cached(RUNNABLE_JOB)?
                    .query_row([now_ms], |_| Ok(()))
                    .optional()
            })
            .await?;
        if runnable.is_none() {
            return Ok(None);
        }
        let owner = owner.to_owned();
        self.write(move |conn| {
            let Some(job_id): Option<String> = conn
                .prepare_cached(RUNNABLE_JOB)?
                .query_row([now_ms], |r| r.get(0))
                .optional()?
            else {
                return Ok(None);
            };
            let epoch: i64 = conn
                .prepare_cached(
                    "UPDATE jobs SET state = 'running', lease_owner = ?2, lease_until = ?3, \
                         lease_epoch = lease_epoch + 1, updated_at = ?4 \
                     WHERE job_id = ?1 RETURNING lease_epoch",
                )?
                .query_row(
                    rusqlite::params![job_id, owner, now_ms + lease_ms, now_ms],
                    |r| r.get(0),
                )?;
            let job = select_job(conn, &job_id)?
                .ok_or_else(|| Failed::Sql(rusqlite::Error::QueryReturnedNoRows))?;
            Ok(Some(LeasedJob {
                fence: JobFence {
                    job_id,
                    owner,
                    epoch,
                },
                job,
            }))
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn start_job(
        &self,
        fence: &JobFence,
        snapshot_at_ms: i64,
        total: u64,
        now_ms: i64,
    ) -> Result<JobRecord, JobFenceError> {
        let fence = fence.clone();
        let total = i64::try_from(total).unwrap_or(i64::MAX);
        self.write(move |conn| {
            if let Some(state) = check_fence(conn, &fence)? {
                return Ok(Err(state));
            }
            conn.prepare_cached(START_JOB.sqlite())?
                .execute(rusqlite::params![
                    fence.job_id,
                    snapshot_at_ms,
                    total,
                    now_ms
                ])?;
            Ok(select_job(conn, &fence.job_id)?.ok_or(None))
        })
        .await
        .map_err(fence_error)?
        .map_err(JobFenceError::Stopped)
    }

    async fn run_job_batch(&self, batch: JobBatch) -> Result<JobBatchResult, JobFenceError> {
        self.write(move |conn| {
            if let Some(state) = check_fence(conn, &batch.fence)? {
                return Ok(Err(state));
            }
            let mut result = JobBatchResult::default();
            for i in 0..batch.inbox_ids.len() {
                if apply(conn, &batch, i)? {
                    result.done += 1;
                } else {
                    result.failed += 1;
                }
            }
            conn.prepare_cached(JOB_PROGRESS.sqlite())?
                .execute(rusqlite::params![
                    batch.fence.job_id,
                    result.done as i64,
                    result.failed as i64,
                    batch.cursor,
                    batch.now_ms,
                    batch.now_ms + batch.lease_ms,
                ])?;
            Ok(Ok(result))
        })
        .await
        .map_err(fence_error)?
        .map_err(JobFenceError::Stopped)
    }

    async fn finish_job(
        &self,
        fence: &JobFence,
        state: JobState,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<(), JobFenceError> {
        let fence = fence.clone();
        let error = error.map(|e| e.chars().take(500).collect::<String>());
        self.write(move |conn| {
            if let Some(current) = check_fence(conn, &fence)? {
                return Ok(Err(current));
            }
            conn.prepare_cached(FINISH_JOB.sqlite())?
                .execute(rusqlite::params![
                    fence.job_id,
                    state.as_str(),
                    error,
                    now_ms
                ])?;
            Ok(Ok(()))
        })
        .await
        .map_err(fence_error)?
        .map_err(JobFenceError::Stopped)
    }
}

pub(super) fn bind(params: &[Param]) -> Vec<&dyn ToSql> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(n) => n as &dyn ToSql,
            Param::Text(s) => s as &dyn ToSql,
        })
        .collect()
}

fn per_cause(
    conn: &Connection,
    sql: &str,
    params: &[Param],
) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt = conn.prepare_cached(&sqlite_text(sql))?;
    let rows = stmt.query_map(bind(params).as_slice(), |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

#[async_trait::async_trait]
impl RejectionStore for SqliteStore {
    async fn record_rejections(
        &self,
        entries: Vec<RejectionEntry>,
        counts: Vec<RejectionCount>,
    ) -> Result<(), StoreError> {
        if entries.is_empty() && counts.is_empty() {
            return Ok(());
        }
        self.write(move |conn| {
            let mut insert = conn.prepare_cached(&sqlite_text(INSERT_ENTRY))?;
            for e in &entries {
                insert.execute(rusqlite::params![
                    e.at_ms,
                    e.endpoint,
                    e.cause,
                    e.reason,
                    e.headers_json,
                    e.body_size.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                    e.body_digest,
                ])?;
            }
            let mut add = conn.prepare_cached(&sqlite_text(ADD_COUNT))?;
            for c in &counts {
                add.execute(rusqlite::params![
                    c.minute_ms,
                    c.endpoint,
                    c.cause,
                    i64::try_from(c.seen).unwrap_or(i64::MAX)
                ])?;
            }
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn list_rejections(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionRecord>, StoreError> {
        let (sql, params) = list_sql(query);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&sqlite_text(&sql))?;
            let rows = stmt.query_map(bind(&params).as_slice(), mapped(|r| entry_record(r)))?;
            rows.collect()
        })
        .await
    }

    async fn rejection_counts(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionCauseCount>, StoreError> {
        let (seen_sql, seen_params, logged_sql, logged_params) = counts_sql(query);
        self.read(move |conn| {
            Ok(merge_counts(
                per_cause(conn, &seen_sql, &seen_params)?,
                per_cause(conn, &logged_sql, &logged_params)?,
            ))
        })
        .await
    }

    async fn trim_rejections(
        &self,
        before_ms: i64,
        keep_entries: u64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let keep = i64::try_from(keep_entries).unwrap_or(i64::MAX);
        self.write(move |conn| {
            let n = conn
                .prepare_cached(&sqlite_text(TRIM_ENTRIES))?
                .execute(rusqlite::params![before_ms, keep, i64::from(limit)])?;
            conn.prepare_cached(&sqlite_text(TRIM_COUNTS))?
                .execute([before_ms])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}
