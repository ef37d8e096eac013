//! Bulk jobs and the rejection log (`JobStore`, `RejectionStore`) on every backend: leases
//! fenced by epoch, a batch's action and progress committed together, pause / resume /
//! cancel closing the fence, an expired lease taken over; rejection entries paged newest
//! first with filters, per-cause counts, bounded retention.

use std::sync::Arc;

use hookgate_core::InboxStatus;
use hookgate_store::{
    FailedAttempt, JobAction, JobBatch, JobControl, JobControlResult, JobFenceError, JobState,
    NewJob, ProcessingResult, RejectionCount, RejectionEntry, RejectionQuery, Store,
};

use super::{StoreTestExt, now_ms, row};

fn new_job(id: &str, action: JobAction, at: i64) -> NewJob {
    NewJob {
        job_id: id.to_owned(),
        action,
        filter: r#"{"status":"failed"}"#.to_owned(),
        destination: None,
        fresh_key: false,
        created_by: "ops".to_owned(),
        now_ms: at,
    }
}

/// Accepts an event and fails its only attempt for good; returns its id.
async fn failed_event(store: &Arc<dyn Store>, event_id: &str) -> String {
    let id = store
        .accept(row("ep-j", event_id))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    let leased = store
        .lease_due("w", now_ms() + 1_000, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    store
        .fail_attempt(FailedAttempt {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: now_ms(),
            error: "permanent: test".into(),
            retry_at_ms: None,
        })
        .await
        .unwrap();
    id
}

async fn status(store: &Arc<dyn Store>, id: &str) -> InboxStatus {
    store.get_event(id).await.unwrap().unwrap().status
}

pub async fn job_batches_are_fenced_resumable_and_exact(store: Arc<dyn Store>) {
    let t = now_ms();
    let f1 = failed_event(&store, "f1").await;
    let f2 = failed_event(&store, "f2").await;
    let f3 = failed_event(&store, "f3").await;
    let done = store
        .accept(row("ep-j", "p1"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    let leased = store
        .lease_due("w", now_ms() + 1_000, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    store
        .complete(ProcessingResult {
            inbox_id: done.clone(),
            owner: "w".into(),
            now_ms: now_ms(),
            handlers: Vec::new(),
            destinations: Vec::new(),
            sequence: None,
        })
        .await
        .unwrap();

    store
        .create_job(new_job("job-1", JobAction::Retry, t))
        .await
        .unwrap();
    store
        .create_job(new_job("job-2", JobAction::Replay, t + 1))
        .await
        .unwrap();
    let job = store.get_job("job-1").await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Pending);
    assert_eq!((job.done, job.failed, job.total), (0, 0, None));
    assert_eq!(job.filter, r#"{"status":"failed"}"#);
    let listed = store.list_jobs(10, None).await.unwrap();
    assert_eq!(
        listed.iter().map(|j| j.job_id.as_str()).collect::<Vec<_>>(),
        vec!["job-2", "job-1"],
        "newest first"
    );
    let page = store.list_jobs(10, Some("job-2")).await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].job_id, "job-1");

    // Cancel job-2 before it runs: never leased.
    assert!(matches!(
        store.control_job("job-2", JobControl::Cancel, t + 2).await.unwrap(),
        JobControlResult::Changed(j) if j.state == JobState::Cancelled && j.finished_at_ms == Some(t + 2)
    ));

    let lease = store
        .lease_job("r1", t + 10, 60_000)
        .await
        .unwrap()
        .expect("job-1 runnable");
    assert_eq!(lease.fence.job_id, "job-1");
    assert_eq!(lease.job.state, JobState::Running);
    assert!(
        store
            .lease_job("r2", t + 20, 60_000)
            .await
            .unwrap()
            .is_none(),
        "a held job is not leased twice; a cancelled one never"
    );
    let started = store
        .start_job(&lease.fence, t + 10, 3, t + 10)
        .await
        .unwrap();
    assert_eq!(started.total, Some(3));
    assert_eq!(started.snapshot_at_ms, Some(t + 10));

    let batch =
        |fence: &hookgate_store::JobFence, ids: &[&String], cursor: &str, at: i64| JobBatch {
            fence: fence.clone(),
            action: JobAction::Retry,
            destination: None,
            fresh_keys: Vec::new(),
            inbox_ids: ids.iter().map(|s| (*s).clone()).collect(),
            cursor: cursor.to_owned(),
            now_ms: at,
            lease_ms: 60_000,
        };
    let r = store
        .run_job_batch(batch(&lease.fence, &[&f1, &f2], "c2", t + 30))
        .await
        .unwrap();
    assert_eq!((r.done, r.failed), (2, 0));
    assert_eq!(status(&store, &f1).await, InboxStatus::Received);
    assert_eq!(status(&store, &f2).await, InboxStatus::Received);

    // Paused: the runner's next batch writes nothing and learns why.
    assert!(matches!(
        store.control_job("job-1", JobControl::Pause, t + 40).await.unwrap(),
        JobControlResult::Changed(j) if j.state == JobState::Paused
    ));
    match store
        .run_job_batch(batch(&lease.fence, &[&f3], "c3", t + 50))
        .await
    {
        Err(JobFenceError::Stopped(Some(JobState::Paused))) => {}
        other => panic!("expected a stop on pause, got {other:?}"),
    }
    assert_eq!(
        status(&store, &f3).await,
        InboxStatus::Failed,
        "nothing applied"
    );
    assert!(matches!(
        store.control_job("job-1", JobControl::Pause, t + 55).await.unwrap(),
        JobControlResult::Conflict(j) if j.state == JobState::Paused
    ));
    assert!(
        store
            .lease_job("r2", t + 60, 60_000)
            .await
            .unwrap()
            .is_none(),
        "paused"
    );

    // Resumed: another runner takes it from the cursor with the counts so far.
    assert!(matches!(
        store.control_job("job-1", JobControl::Resume, t + 70).await.unwrap(),
        JobControlResult::Changed(j) if j.state == JobState::Pending
    ));
    let again = store
        .lease_job("r2", t + 80, 60_000)
        .await
        .unwrap()
        .unwrap();
    assert!(again.fence.epoch > lease.fence.epoch);
    assert_eq!(again.job.cursor.as_deref(), Some("c2"));
    assert_eq!(
        (again.job.done, again.job.failed, again.job.total),
        (2, 0, Some(3))
    );
    let kept = store
        .start_job(&again.fence, t + 80, 99, t + 80)
        .await
        .unwrap();
    assert_eq!(
        (kept.total, kept.snapshot_at_ms),
        (Some(3), Some(t + 10)),
        "the first start's"
    );
    match store
        .run_job_batch(batch(&lease.fence, &[&f3], "c3", t + 90))
        .await
    {
        Err(JobFenceError::Stopped(Some(JobState::Running))) => {}
        other => panic!("the old runner is fenced out: {other:?}"),
    }
    let r = store
        .run_job_batch(batch(&again.fence, &[&f3, &done], "c4", t + 100))
        .await
        .unwrap();
    assert_eq!(
        (r.done, r.failed),
        (1, 1),
        "a PROCESSED event is not retried"
    );
    store
        .finish_job(&again.fence, JobState::Done, None, t + 110)
        .await
        .unwrap();
    let finished = store.get_job("job-1").await.unwrap().unwrap();
    assert_eq!(finished.state, JobState::Done);
    assert_eq!((finished.done, finished.failed), (3, 1));
    assert_eq!(finished.cursor.as_deref(), Some("c4"));
    assert_eq!(finished.finished_at_ms, Some(t + 110));
    assert!(matches!(
        store
            .control_job("job-1", JobControl::Cancel, t + 120)
            .await
            .unwrap(),
        JobControlResult::Conflict(_)
    ));
    assert!(matches!(
        store
            .control_job("nope", JobControl::Cancel, t)
            .await
            .unwrap(),
        JobControlResult::NotFound
    ));

    // A runner that dies: its lease expires and the job is taken over with a new epoch.
    store
        .create_job(new_job("job-3", JobAction::Replay, t + 200))
        .await
        .unwrap();
    let first = store
        .lease_job("dead", t + 200, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .lease_job("r3", t + 500, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    let taken = store
        .lease_job("r3", t + 1_300, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.fence.job_id, "job-3");
    assert!(taken.fence.epoch > first.fence.epoch);
    let mut replay = batch(&taken.fence, &[&done], "c1", t + 1_400);
    replay.action = JobAction::Replay;
    let r = store.run_job_batch(replay).await.unwrap();
    assert_eq!((r.done, r.failed), (1, 0));
    assert_eq!(
        status(&store, &done).await,
        InboxStatus::Received,
        "replayed"
    );
    store.close().await;
}

fn entry(at: i64, endpoint: &str, cause: &str) -> RejectionEntry {
    RejectionEntry {
        at_ms: at,
        endpoint: endpoint.to_owned(),
        cause: cause.to_owned(),
        reason: None,
        headers_json: r#"[["content-type","application/json"],["webhook-signature","[redacted]"]]"#
            .to_owned(),
        body_size: Some(42),
        body_digest: Some(vec![7; 32]),
    }
}

pub async fn rejections_page_filter_count_and_trim(store: Arc<dyn Store>) {
    // The start of a minute (unix ms).
    let minute = 1_700_000_040_000;
    store
        .record_rejections(
            vec![
                entry(minute + 1, "ep-a", "invalid_signature"),
                entry(minute + 2, "ep-b", "stale_timestamp"),
                entry(minute + 3, "ep-a", "invalid_signature"),
            ],
            vec![
                RejectionCount {
                    minute_ms: minute,
                    endpoint: "ep-a".into(),
                    cause: "invalid_signature".into(),
                    seen: 250,
                },
                RejectionCount {
                    minute_ms: minute,
                    endpoint: "ep-b".into(),
                    cause: "stale_timestamp".into(),
                    seen: 1,
                },
            ],
        )
        .await
        .unwrap();
    store
        .record_rejections(
            vec![entry(minute + 60_001, "ep-a", "bad_request")],
            vec![RejectionCount {
                minute_ms: minute,
                endpoint: "ep-a".into(),
                cause: "invalid_signature".into(),
                seen: 5,
            }],
        )
        .await
        .unwrap();
    let all = |limit| RejectionQuery {
        limit,
        ..Default::default()
    };
    let first = store.list_rejections(&all(3)).await.unwrap();
    assert_eq!(
        first
            .iter()
            .map(|r| r.entry.at_ms - minute)
            .collect::<Vec<_>>(),
        vec![60_001, 3, 2],
        "newest first"
    );
    assert_eq!(
        first[1].entry,
        entry(minute + 3, "ep-a", "invalid_signature")
    );
    let rest = store
        .list_rejections(&RejectionQuery {
            before_id: Some(first[2].id),
            ..all(3)
        })
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].entry.at_ms, minute + 1);
    let only_a = RejectionQuery {
        endpoint: Some("ep-a".into()),
        cause: Some("invalid_signature".into()),
        ..all(10)
    };
    assert_eq!(store.list_rejections(&only_a).await.unwrap().len(), 2);
    let late = RejectionQuery {
        since_ms: Some(minute + 3),
        until_ms: Some(minute + 60_002),
        ..all(10)
    };
    assert_eq!(store.list_rejections(&late).await.unwrap().len(), 2);

    let counts = store.rejection_counts(&all(0)).await.unwrap();
    let by = |cause: &str| {
        counts
            .iter()
            .find(|c| c.cause == cause)
            .map(|c| (c.seen, c.logged))
    };
    assert_eq!(by("invalid_signature"), Some((255, 2)));
    assert_eq!(by("stale_timestamp"), Some((1, 1)));
    assert_eq!(
        by("bad_request"),
        Some((1, 1)),
        "logged without a count row"
    );
    let a_counts = store.rejection_counts(&only_a).await.unwrap();
    assert_eq!(a_counts.len(), 1);
    assert_eq!((a_counts[0].seen, a_counts[0].logged), (255, 2));

    // Retention: beyond the newest 2 entries, then by age (counts too).
    assert_eq!(store.trim_rejections(0, 2, 100).await.unwrap(), 2);
    assert_eq!(store.list_rejections(&all(10)).await.unwrap().len(), 2);
    assert_eq!(
        store
            .trim_rejections(minute + 60_000, 100, 100)
            .await
            .unwrap(),
        1
    );
    let left = store.list_rejections(&all(10)).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].entry.cause, "bad_request");
    let counts = store.rejection_counts(&all(0)).await.unwrap();
    assert_eq!(counts.len(), 1, "old minutes' counts went too: {counts:?}");
    store.close().await;
}
