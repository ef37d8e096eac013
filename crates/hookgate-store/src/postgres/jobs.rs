//! The [`JobStore`] and [`RejectionStore`] impls: each write is one short transaction of the
//! shared retrying kind (`tx.rs`). A job lease takes its row `FOR UPDATE SKIP LOCKED`; every
//! runner write first locks the job row under its fence (`FOR UPDATE`), so a pause or cancel
//! and a batch never interleave: the batch's action on its events, the progress and the
//! cursor commit together or not at all.

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::error::Failure;
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::jobs::{
    FINISH_JOB, INSERT_JOB, JOB_COLUMNS, JOB_FENCE, JOB_PROGRESS, JOB_STATE, JobAction, JobBatch,
    JobBatchResult, JobControl, JobControlResult, JobFence, JobFenceError, JobRecord, JobState,
    LeasedJob, NewJob, REDELIVER, REPLAY_EVENT, RETRY_DELIVERIES, RETRY_EVENT, START_JOB,
    job_record, outbox_id,
};
use crate::rejections::{
    ADD_COUNT, INSERT_ENTRY, Param, RejectionCauseCount, RejectionCount, RejectionEntry,
    RejectionQuery, RejectionRecord, TRIM_COUNTS, TRIM_ENTRIES, counts_sql, entry_record, list_sql,
    merge_counts,
};
use crate::rows::Columns;
use crate::{JobStore, RejectionStore, StoreError};

enum Op<'a> {
    Create(&'a NewJob),
    Control {
        job_id: &'a str,
        control: JobControl,
        now_ms: i64,
    },
    Lease {
        owner: &'a str,
        now_ms: i64,
        lease_ms: i64,
    },
    Start {
        fence: &'a JobFence,
        snapshot_at_ms: i64,
        total: i64,
        now_ms: i64,
    },
    Batch(&'a JobBatch),
    Finish {
        fence: &'a JobFence,
        state: JobState,
        error: Option<&'a str>,
        now_ms: i64,
    },
    Record {
        entries: &'a [RejectionEntry],
        counts: &'a [RejectionCount],
    },
    Trim {
        before_ms: i64,
        keep: i64,
        limit: i64,
    },
}

enum Out {
    Unit,
    Count(u64),
    Control(JobControlResult),
    Leased(Option<LeasedJob>),
    Job(JobRecord),
    Batch(JobBatchResult),
    /// The fence was closed; the job's state (nothing was written).
    Stopped(Option<JobState>),
}

fn corrupt(e: StoreError) -> Failed {
    Failed::Db(Failure::Fail(e))
}

async fn select_job(
    tx: &Transaction<'_>,
    job_id: &str,
    lock: bool,
) -> Result<Option<JobRecord>, Failed> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let stmt = tx.prepare_cached(&sql).await?;
    match tx.query_opt(&stmt, &[&job_id]).await? {
        Some(row) => Ok(Some(job_record(&row).map_err(corrupt)?)),
        None => Ok(None),
    }
}

/// `None` while `fence` holds (the job row is then locked); otherwise the job's state.
async fn check_fence(
    tx: &Transaction<'_>,
    fence: &JobFence,
) -> Result<Option<Option<JobState>>, Failed> {
    let sql = format!("{} FOR UPDATE", JOB_FENCE.postgres());
    let stmt = tx.prepare_cached(&sql).await?;
    if tx
        .query_opt(&stmt, &[&fence.job_id, &fence.owner, &fence.epoch])
        .await?
        .is_some()
    {
        return Ok(None);
    }
    let stmt = tx.prepare_cached(JOB_STATE.postgres()).await?;
    let state = tx.query_opt(&stmt, &[&fence.job_id]).await?;
    Ok(Some(
        state.and_then(|r| JobState::parse(&r.get::<_, String>(0))),
    ))
}

async fn apply(tx: &Transaction<'_>, batch: &JobBatch, i: usize) -> Result<bool, Failed> {
    let now = batch.now_ms;
    let inbox_id = &batch.inbox_ids[i];
    Ok(match batch.action {
        JobAction::Retry => {
            let event = tx.prepare_cached(RETRY_EVENT.postgres()).await?;
            let deliveries = tx.prepare_cached(RETRY_DELIVERIES.postgres()).await?;
            let a = tx.execute(&event, &[inbox_id, &now]).await?;
            let b = tx.execute(&deliveries, &[inbox_id, &now]).await?;
            a + b > 0
        }
        JobAction::Replay => {
            let stmt = tx.prepare_cached(REPLAY_EVENT).await?;
            tx.execute(&stmt, &[inbox_id, &now]).await? == 1
        }
        JobAction::Redeliver => match &batch.destination {
            None => false,
            Some(d) => {
                let stmt = tx.prepare_cached(REDELIVER).await?;
                let key = batch.fresh_keys.get(i);
                tx.execute(&stmt, &[&outbox_id(inbox_id, d), d, &now, &key, inbox_id])
                    .await?
                    == 1
            }
        },
    })
}

impl RetryableWrite for Op<'_> {
    type Output = Out;
    const LABEL: &'static str = "jobs";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Out, Failed> {
        Ok(match self {
            Op::Create(job) => {
                let stmt = tx.prepare_cached(INSERT_JOB.postgres()).await?;
                tx.execute(
                    &stmt,
                    &[
                        &job.job_id,
                        &job.action.as_str(),
                        &job.filter,
                        &job.destination,
                        &i64::from(job.fresh_key),
                        &job.created_by,
                        &job.now_ms,
                    ],
                )
                .await?;
                Out::Unit
            }
            Op::Control {
                job_id,
                control,
                now_ms,
            } => {
                let Some(job) = select_job(tx, job_id, true).await? else {
                    return Ok(Out::Control(JobControlResult::NotFound));
                };
                if !control.from_states().contains(&job.state) {
                    return Ok(Out::Control(JobControlResult::Conflict(job)));
                }
                let to = control.to_state();
                let finished = to.is_final().then_some(*now_ms);
                let stmt = tx
                    .prepare_cached(
                        "UPDATE jobs SET state = $2, updated_at = $3, finished_at = $4, \
                             lease_owner = NULL, lease_until = NULL WHERE job_id = $1",
                    )
                    .await?;
                tx.execute(&stmt, &[job_id, &to.as_str(), now_ms, &finished])
                    .await?;
                let after = select_job(tx, job_id, false)
                    .await?
                    .ok_or_else(|| corrupt(StoreError::Corrupt("job vanished".into())))?;
                Out::Control(JobControlResult::Changed(after))
            }
            Op::Lease {
                owner,
                now_ms,
                lease_ms,
            } => {
                let stmt = tx
                    .prepare_cached(
                        "WITH next AS (SELECT job_id FROM jobs \
                             WHERE state IN ('pending', 'running') \
                               AND (lease_until IS NULL OR lease_until <= $1) \
                             ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
                         UPDATE jobs SET state = 'running', lease_owner = $2, lease_until = $3, \
                             lease_epoch = jobs.lease_epoch + 1, updated_at = $1 \
                         FROM next WHERE jobs.job_id = next.job_id \
                         RETURNING jobs.job_id, jobs.lease_epoch",
                    )
                    .await?;
                let until = now_ms + lease_ms;
                let Some(row) = tx.query_opt(&stmt, &[now_ms, owner, &until]).await? else {
                    return Ok(Out::Leased(None));
                };
                let job_id: String = row.get(0);
                let epoch: i64 = row.get(1);
                let job = select_job(tx, &job_id, false)
                    .await?
                    .ok_or_else(|| corrupt(StoreError::Corrupt("job vanished".into())))?;
                Out::Leased(Some(LeasedJob {
                    fence: JobFence {
                        job_id,
                        owner: (*owner).to_owned(),
                        epoch,
                    },
                    job,
                }))
            }
            Op::Start {
                fence,
                snapshot_at_ms,
                total,
                now_ms,
            } => {
                if let Some(state) = check_fence(tx, fence).await? {
                    return Ok(Out::Stopped(state));
                }
                let stmt = tx.prepare_cached(START_JOB.postgres()).await?;
                tx.execute(&stmt, &[&fence.job_id, snapshot_at_ms, total, now_ms])
                    .await?;
                match select_job(tx, &fence.job_id, false).await? {
                    Some(job) => Out::Job(job),
                    None => Out::Stopped(None),
                }
            }
            Op::Batch(batch) => {
                if let Some(state) = check_fence(tx, &batch.fence).await? {
                    return Ok(Out::Stopped(state));
                }
                let mut result = JobBatchResult::default();
                for i in 0..batch.inbox_ids.len() {
                    if apply(tx, batch, i).await? {
                        result.done += 1;
                    } else {
                        result.failed += 1;
                    }
                }
                let stmt = tx.prepare_cached(JOB_PROGRESS.postgres()).await?;
                let until = batch.now_ms + batch.lease_ms;
                tx.execute(
                    &stmt,
                    &[
                        &batch.fence.job_id,
                        &(result.done as i64),
                        &(result.failed as i64),
                        &batch.cursor,
                        &batch.now_ms,
                        &until,
                    ],
                )
                .await?;
                Out::Batch(result)
            }
            Op::Finish {
                fence,
                state,
                error,
                now_ms,
            } => {
                if let Some(current) = check_fence(tx, fence).await? {
                    return Ok(Out::Stopped(current));
                }
                let stmt = tx.prepare_cached(FINISH_JOB.postgres()).await?;
                tx.execute(&stmt, &[&fence.job_id, &state.as_str(), error, now_ms])
                    .await?;
                Out::Unit
            }
            Op::Record { entries, counts } => {
                let insert = tx.prepare_cached(INSERT_ENTRY).await?;
                for e in *entries {
                    let size = e.body_size.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
                    tx.execute(
                        &insert,
                        &[
                            &e.at_ms,
                            &e.endpoint,
                            &e.cause,
                            &e.reason,
                            &e.headers_json,
                            &size,
                            &e.body_digest,
                        ],
                    )
                    .await?;
                }
                // In key order, so two instances adding to the same minutes cannot deadlock.
                let mut sorted: Vec<&RejectionCount> = counts.iter().collect();
                sorted.sort_by(|a, b| {
                    (a.minute_ms, &a.endpoint, &a.cause).cmp(&(b.minute_ms, &b.endpoint, &b.cause))
                });
                let add = tx.prepare_cached(ADD_COUNT).await?;
                for c in sorted {
                    let seen = i64::try_from(c.seen).unwrap_or(i64::MAX);
                    tx.execute(&add, &[&c.minute_ms, &c.endpoint, &c.cause, &seen])
                        .await?;
                }
                Out::Unit
            }
            Op::Trim {
                before_ms,
                keep,
                limit,
            } => {
                let entries = tx.prepare_cached(TRIM_ENTRIES).await?;
                let n = tx.execute(&entries, &[before_ms, keep, limit]).await?;
                let counts = tx.prepare_cached(TRIM_COUNTS).await?;
                tx.execute(&counts, &[before_ms]).await?;
                Out::Count(n)
            }
        })
    }
}

impl PostgresStore {
    async fn jobs_write(&self, op: Op<'_>) -> Result<Out, StoreError> {
        with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected job write result".into())
}

fn fenced<T>(
    out: Result<Out, StoreError>,
    pick: impl FnOnce(Out) -> Option<T>,
) -> Result<T, JobFenceError> {
    match out? {
        Out::Stopped(state) => Err(JobFenceError::Stopped(state)),
        other => pick(other).ok_or_else(|| JobFenceError::Store(unexpected())),
    }
}

#[async_trait::async_trait]
impl JobStore for PostgresStore {
    async fn create_job(&self, job: NewJob) -> Result<(), StoreError> {
        self.jobs_write(Op::Create(&job)).await.map(|_| ())
    }

    async fn get_job(&self, job_id: &str) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = $1");
        let rows = self.query(&sql, &[&job_id]).await?;
        rows.first().map(job_record).transpose()
    }

    async fn list_jobs(
        &self,
        limit: u32,
        before: Option<&str>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let limit = i64::from(limit);
        let rows = match before {
            None => {
                let sql = format!(
                    "SELECT {JOB_COLUMNS} FROM jobs ORDER BY created_at DESC, job_id DESC LIMIT $1"
                );
                self.query(&sql, &[&limit]).await?
            }
            Some(b) => {
                let sql = format!(
                    "SELECT {JOB_COLUMNS} FROM jobs \
                     WHERE (created_at, job_id) < \
                         (SELECT created_at, job_id FROM jobs WHERE job_id = $1) \
                     ORDER BY created_at DESC, job_id DESC LIMIT $2"
                );
                self.query(&sql, &[&b, &limit]).await?
            }
        };
        rows.iter().map(job_record).collect()
    }

    async fn control_job(
        &self,
        job_id: &str,
        control: JobControl,
        now_ms: i64,
    ) -> Result<JobControlResult, StoreError> {
        match self
            .jobs_write(Op::Control {
                job_id,
                control,
                now_ms,
            })
            .await?
        {
            Out::Control(r) => Ok(r),
            _ => Err(unexpected()),
        }
    }

    async fn lease_job(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<LeasedJob>, StoreError> {
        match self
            .jobs_write(Op::Lease {
                owner,
                now_ms,
                lease_ms,
            })
            .await?
        {
            Out::Leased(l) => Ok(l),
            _ => Err(unexpected()),
        }
    }

    async fn start_job(
        &self,
        fence: &JobFence,
        snapshot_at_ms: i64,
        total: u64,
        now_ms: i64,
    ) -> Result<JobRecord, JobFenceError> {
        let out = self
            .jobs_write(Op::Start {
                fence,
                snapshot_at_ms,
                total: i64::try_from(total).unwrap_or(i64::MAX),
                now_ms,
            })
            .await;
        fenced(out, |o| match o {
            Out::Job(j) => Some(j),
            _ => None,
        })
    }

    async fn run_job_batch(&self, batch: JobBatch) -> Result<JobBatchResult, JobFenceError> {
        let out = self.jobs_write(Op::Batch(&batch)).await;
        fenced(out, |o| match o {
            Out::Batch(r) => Some(r),
            _ => None,
        })
    }

    async fn finish_job(
        &self,
        fence: &JobFence,
        state: JobState,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<(), JobFenceError> {
        let error: Option<String> = error.map(|e| e.chars().take(500).collect());
        let out = self
            .jobs_write(Op::Finish {
                fence,
                state,
                error: error.as_deref(),
                now_ms,
            })
            .await;
        fenced(out, |o| matches!(o, Out::Unit).then_some(()))
    }
}

pub(super) fn bind(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(n) => n as &(dyn ToSql + Sync),
            Param::Text(s) => s as &(dyn ToSql + Sync),
        })
        .collect()
}

impl PostgresStore {
    async fn per_cause(
        &self,
        sql: &str,
        params: &[Param],
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self.query(sql, &bind(params)).await?;
        rows.iter()
            .map(|r| Ok((r.text(0)?, r.opt_int(1)?.unwrap_or(0))))
            .collect()
    }
}

#[async_trait::async_trait]
impl RejectionStore for PostgresStore {
    async fn record_rejections(
        &self,
        entries: Vec<RejectionEntry>,
        counts: Vec<RejectionCount>,
    ) -> Result<(), StoreError> {
        if entries.is_empty() && counts.is_empty() {
            return Ok(());
        }
        self.jobs_write(Op::Record {
            entries: &entries,
            counts: &counts,
        })
        .await
        .map(|_| ())
    }

    async fn list_rejections(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionRecord>, StoreError> {
        let (sql, params) = list_sql(query);
        let rows = self.query(&sql, &bind(&params)).await?;
        rows.iter().map(entry_record).collect()
    }

    async fn rejection_counts(
        &self,
        query: &RejectionQuery,
    ) -> Result<Vec<RejectionCauseCount>, StoreError> {
        let (seen_sql, seen_params, logged_sql, logged_params) = counts_sql(query);
        Ok(merge_counts(
            self.per_cause(&seen_sql, &seen_params).await?,
            self.per_cause(&logged_sql, &logged_params).await?,
        ))
    }

    async fn trim_rejections(
        &self,
        before_ms: i64,
        keep_entries: u64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        match self
            .jobs_write(Op::Trim {
                before_ms,
                keep: i64::try_from(keep_entries).unwrap_or(i64::MAX),
                limit: i64::from(limit),
            })
            .await?
        {
            Out::Count(n) => Ok(n),
            _ => Err(unexpected()),
        }
    }
}
