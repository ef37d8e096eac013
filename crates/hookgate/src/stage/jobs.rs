//! The `jobs` stage: runs bulk operator jobs (`POST /api/v1/jobs`) stored in the database.
//!
//! One loop per worker process. A step without a job leases the oldest runnable one
//! (`pending`, or `running` whose runner died: its lease expired); a job's first run fixes its
//! snapshot time (events received later are live traffic, not the job's) and counts its total.
//! Then each step is one batch: the next events of the filter after the job's cursor, in the
//! events list's order (newest first), at most `[jobs] batch_size` of them, handed to
//! [`hookgate_store::JobStore::run_job_batch`], which applies the action and records the
//! progress and the new cursor in one fenced transaction. A kill -9 at any point loses at most
//! the batch in flight, which the next runner does again from the recorded cursor: the counts
//! stay exact. A pause or a cancel closes the fence; the runner's next batch writes nothing
//! and the loop lets the job go. Batches are paced to `[jobs] rate_per_second`, so a bulk
//! replay adds a bounded load next to live processing.

use std::sync::Arc;
use std::time::Duration;

use hookgate_store::{
    EventQuery, JobAction, JobBatch, JobFenceError, JobRecord, JobState, LeasedJob, PageKey,
};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{StageLoop, StagePool, Step};
use crate::state::AppState;
use crate::telemetry;

/// Stage name of the bulk jobs runner.
pub const JOBS: &str = "jobs";

/// Shutdown waits at most this long for a batch in flight (one short transaction).
pub const GRACE: Duration = Duration::from_secs(5);

/// Events counted per page when a job first starts (a page reads no payload).
const COUNT_PAGE: u32 = 500;

/// The stage.
pub struct Jobs {
    state: Arc<AppState>,
    instance: uuid::Uuid,
}

/// The job a loop is running, between its steps.
pub struct Running {
    owner: String,
    job: Option<Current>,
}

pub struct Current {
    lease: LeasedJob,
    query: EventQuery,
    cursor: Option<PageKey>,
    /// When the previous batch started, and how many events it had (pacing).
    last_batch: Option<(Instant, usize)>,
}

/// A job's stored filter (the events list's query-parameter names) as the store's query.
/// String values as given; numbers are taken as their decimal text (times in unix ms).
pub fn parse_filter(filter: &serde_json::Value) -> Result<EventQuery, String> {
    let serde_json::Value::Object(map) = filter else {
        return Err("filter must be a JSON object".into());
    };
    let mut q = EventQuery::default();
    for (key, value) in map {
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => return Err(format!("filter.{key} must be a string")),
        };
        if matches!(key.as_str(), "limit" | "cursor") {
            return Err(format!("filter.{key}: a job's filter has no paging"));
        }
        crate::admin::api::query::set_filter(&mut q, key, value).map_err(|e| {
            e.body
                .message
                .unwrap_or_else(|| format!("filter.{key} is not valid"))
        })?;
    }
    Ok(q)
}

/// The cursor a job records: the last event handled.
fn encode_cursor(key: &PageKey) -> String {
    format!("{}:{}", key.received_at_ms, key.inbox_id)
}

fn decode_cursor(text: &str) -> Option<PageKey> {
    let (at, id) = text.split_once(':')?;
    Some(PageKey {
        received_at_ms: at.parse().ok()?,
        inbox_id: id.to_owned(),
    })
}

/// What a step did with its job.
pub enum Outcome {
    /// A batch committed; more may follow.
    Progress,
    /// The job ended (done, failed) or was let go (paused, cancelled, taken over).
    Released,
    /// The store failed; the job is retried after its lease.
    StoreFailed,
}

impl Jobs {
    pub fn new(state: Arc<AppState>) -> Self {
        Self {
            state,
            instance: uuid::Uuid::now_v7(),
        }
    }

    fn config(&self) -> crate::config::operations::JobsConfig {
        self.state.runtime.load().config.jobs.clone()
    }

    /// Leases a runnable job and prepares its run (first start: snapshot and total).
    pub async fn take(&self, owner: &str) -> Result<Option<Current>, hookgate_store::StoreError> {
        let cfg = self.config();
        let now = self.state.clock.now_ms();
        let lease_ms = i64::try_from(cfg.lease.as_millis()).unwrap_or(i64::MAX);
        let Some(lease) = self.state.store.lease_job(owner, now, lease_ms).await? else {
            return Ok(None);
        };
        let job = &lease.job;
        let mut query = match self.validate(job) {
            Ok(q) => q,
            Err(reason) => {
                self.finish(&lease, JobState::Failed, Some(&reason)).await;
                return Ok(None);
            }
        };
        let snapshot = match job.snapshot_at_ms {
            Some(at) => at,
            None => {
                // Events received up to now (inclusive) are the job's.
                let at = now + 1;
                let total = self.count(&query, at).await?;
                match self
                    .state
                    .store
                    .start_job(&lease.fence, at, total, now)
                    .await
                {
                    Ok(started) => {
                        telemetry::job_started(&started.job_id, started.action.as_str(), total);
                        at
                    }
                    Err(JobFenceError::Stopped(_)) => return Ok(None),
                    Err(JobFenceError::Store(e)) => return Err(e),
                }
            }
        };
        query.received_before_ms = Some(match query.received_before_ms {
            Some(t) => t.min(snapshot),
            None => snapshot,
        });
        let cursor = job.cursor.as_deref().and_then(decode_cursor);
        Ok(Some(Current {
            lease,
            query,
            cursor,
            last_batch: None,
        }))
    }

    /// The job's filter, and that its action can run here.
    fn validate(&self, job: &JobRecord) -> Result<EventQuery, String> {
        let filter: serde_json::Value =
            serde_json::from_str(&job.filter).map_err(|_| "filter is not JSON".to_owned())?;
        let query = parse_filter(&filter)?;
        if job.action == JobAction::Redeliver {
            let runtime = self.state.runtime.load();
            match &job.destination {
                None => return Err("a redeliver job names a destination".into()),
                Some(d) if !runtime.config.destinations.iter().any(|c| c.id == *d) => {
                    return Err(format!("destination {d:?} is not configured"));
                }
                Some(_) => {}
            }
        }
        Ok(query)
    }

    /// Matching events received before `snapshot`, counted a page at a time.
    async fn count(
        &self,
        query: &EventQuery,
        snapshot: i64,
    ) -> Result<u64, hookgate_store::StoreError> {
        let mut q = query.clone();
        q.received_before_ms = Some(q.received_before_ms.map_or(snapshot, |t| t.min(snapshot)));
        q.limit = COUNT_PAGE;
        let mut total = 0u64;
        loop {
            let page = self.state.store.page_events(&q).await?;
            total += page.len() as u64;
            match page.last() {
                Some(last) if page.len() == COUNT_PAGE as usize => {
                    q.after = Some(PageKey {
                        received_at_ms: last.received_at_ms,
                        inbox_id: last.inbox_id.clone(),
                    });
                }
                _ => return Ok(total),
            }
        }
    }

    async fn finish(&self, lease: &LeasedJob, state: JobState, error: Option<&str>) {
        let now = self.state.clock.now_ms();
        match self
            .state
            .store
            .finish_job(&lease.fence, state, error, now)
            .await
        {
            Ok(()) => telemetry::job_finished(&lease.fence.job_id, state.as_str(), error),
            Err(JobFenceError::Stopped(_)) => {}
            Err(JobFenceError::Store(e)) => telemetry::job_store_failed(&lease.fence.job_id, &e),
        }
    }

    /// One batch of `current` (paced to the rate first).
    pub async fn batch(&self, current: &mut Current, stop: &mut watch::Receiver<bool>) -> Outcome {
        let cfg = self.config();
        if let Some((started, n)) = current.last_batch {
            let due = started + Duration::from_secs_f64(n as f64 / f64::from(cfg.rate_per_second));
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = stop.changed() => return Outcome::Progress,
            }
        }
        let started = Instant::now();
        let mut q = current.query.clone();
        q.after = current.cursor.clone();
        q.limit = cfg.batch_size;
        let page = match self.state.store.page_events(&q).await {
            Ok(p) => p,
            Err(e) => {
                telemetry::job_store_failed(&current.lease.fence.job_id, &e);
                return Outcome::StoreFailed;
            }
        };
        let Some(last) = page.last() else {
            self.finish(&current.lease, JobState::Done, None).await;
            return Outcome::Released;
        };
        let next = PageKey {
            received_at_ms: last.received_at_ms,
            inbox_id: last.inbox_id.clone(),
        };
        let job = &current.lease.job;
        let fresh_keys = if job.action == JobAction::Redeliver && job.fresh_key {
            page.iter()
                .map(|_| uuid::Uuid::now_v7().to_string())
                .collect()
        } else {
            Vec::new()
        };
        let now = self.state.clock.now_ms();
        let batch = JobBatch {
            fence: current.lease.fence.clone(),
            action: job.action,
            destination: job.destination.clone(),
            inbox_ids: page.iter().map(|r| r.inbox_id.clone()).collect(),
            fresh_keys,
            cursor: encode_cursor(&next),
            now_ms: now,
            lease_ms: i64::try_from(cfg.lease.as_millis()).unwrap_or(i64::MAX),
        };
        match self.state.store.run_job_batch(batch).await {
            Ok(result) => {
                telemetry::job_batch(job.action.as_str(), result.done, result.failed);
                current.cursor = Some(next);
                current.last_batch = Some((started, page.len()));
                Outcome::Progress
            }
            Err(JobFenceError::Stopped(state)) => {
                telemetry::job_released(&current.lease.fence.job_id, state.map(JobState::as_str));
                Outcome::Released
            }
            Err(JobFenceError::Store(e)) => {
                telemetry::job_store_failed(&current.lease.fence.job_id, &e);
                Outcome::StoreFailed
            }
        }
    }
}

impl StageLoop for Jobs {
    type Local = Running;

    fn name(&self) -> &'static str {
        JOBS
    }

    fn start_loop(&self, index: usize) -> Running {
        Running {
            owner: format!("jobs-{}-{index}", self.instance),
            job: None,
        }
    }

    async fn step(&self, local: &mut Running, stop: &mut watch::Receiver<bool>) -> Step {
        let mut current = match local.job.take() {
            Some(c) => c,
            None => match self.take(&local.owner).await {
                Ok(Some(c)) => c,
                Ok(None) => return Step::Idle,
                Err(e) => {
                    telemetry::job_store_failed("-", &e);
                    return Step::Idle;
                }
            },
        };
        match self.batch(&mut current, stop).await {
            Outcome::Progress => {
                local.job = Some(current);
                Step::Busy
            }
            Outcome::Released => Step::Busy,
            // Let the lease run out; this or another runner takes the job again.
            Outcome::StoreFailed => Step::Idle,
        }
    }
}

/// Starts the jobs stage (one supervised loop).
pub fn start(state: &Arc<AppState>) -> StagePool {
    let poll = state.runtime.load().config.jobs.poll_interval;
    StagePool::start(
        Arc::new(Jobs::new(Arc::clone(state))),
        1,
        poll,
        Arc::clone(&state.stages),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_like_the_events_list() {
        let q = parse_filter(&serde_json::json!({
            "status": "FAILED", "endpoint_id": "ep", "received_after": 5
        }))
        .unwrap();
        assert_eq!(q.status, Some(hookgate_core::InboxStatus::Failed));
        assert_eq!(q.endpoint_id.as_deref(), Some("ep"));
        assert_eq!(q.received_after_ms, Some(5));
        for bad in [
            serde_json::json!({"colour": "red"}),
            serde_json::json!({"status": "done"}),
            serde_json::json!({"limit": "5"}),
            serde_json::json!({"status": ["failed"]}),
            serde_json::json!(["status"]),
        ] {
            assert!(parse_filter(&bad).is_err(), "{bad}");
        }
        let key = PageKey {
            received_at_ms: 9,
            inbox_id: "01-ab".into(),
        };
        assert_eq!(decode_cursor(&encode_cursor(&key)), Some(key));
    }
}
