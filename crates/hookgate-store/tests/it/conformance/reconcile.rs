//! Reconciliation (`ReconcileStore`) on every backend: each scan finds exactly its kind of
//! lost work and nothing live (a leased row, a delivery waiting for its retry, a delivered
//! one); each repair re-checks what was found, commits with its finding row, and is done once
//! (a second record of the same finding changes and records nothing); a dry run records
//! without changing anything; findings list newest first with filters and pages; runs are
//! leased once and ended only by their runner. (Orphan markers need a marker without its
//! inbox row, which no store call leaves: the backends' own tests make one with SQL.)

use std::sync::Arc;

use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::{
    FindingAction, FindingBatch, FindingKind, FindingQuery, FoundEvent, MissingScan, NewFinding,
    NewRun, ProcessingResult, ReceivedRows, ReceivedScan, RunState, RunTrigger, Store, StuckScan,
};

use super::{StoreTestExt, now_ms, row};

fn finding(kind: FindingKind, e: &FoundEvent, destination: Option<&str>) -> NewFinding {
    NewFinding {
        kind,
        endpoint_id: e.endpoint_id.clone(),
        provider: Some(e.provider.clone()),
        provider_event_id: Some(e.provider_event_id.clone()),
        inbox_id: Some(e.inbox_id.clone()),
        destination: destination.map(str::to_owned),
        consumer: None,
    }
}

fn batch(run: &str, repair: bool, threshold: i64, now: i64, f: Vec<NewFinding>) -> FindingBatch {
    FindingBatch {
        run_id: run.to_owned(),
        repair,
        threshold_ms: threshold,
        now_ms: now,
        findings: f,
    }
}

fn ids(found: &[FoundEvent]) -> Vec<&str> {
    found.iter().map(|e| e.inbox_id.as_str()).collect()
}

pub async fn reconcile_scans_repair_once_and_record_findings(store: Arc<dyn Store>) {
    let t = now_ms();
    let ep = "ep-rc";
    // An overdue row: due long ago, never leased; a live one leased now.
    let mut old = row(ep, "overdue");
    old.received_at_ms = t - 600_000;
    let overdue = store.accept(old).await.unwrap().inbox_id().to_owned();
    let mut live = row(ep, "live");
    live.received_at_ms = t - 600_000;
    let live = store.accept(live).await.unwrap().inbox_id().to_owned();
    // A processed row with a delivery to d1 only.
    let mut done = row(ep, "done");
    done.received_at_ms = t - 700_000;
    let done = store.accept(done).await.unwrap().inbox_id().to_owned();

    let leased = store.lease_due("w", t, 60_000, 10).await.unwrap();
    assert_eq!(leased.len(), 3, "every row was due");
    store
        .complete(ProcessingResult {
            inbox_id: done.clone(),
            owner: "w".into(),
            now_ms: t,
            handlers: Vec::new(),
            destinations: vec!["d1".into()],
            sequence: None,
        })
        .await
        .unwrap();
    // The overdue row's worker died: its lease (until t + 60 s) is long over by `later`.
    let later = t + 3_600_000;
    let threshold = later - 60_000;
    // The live row is leased again, now, by a working worker.
    let live_lease = store
        .lease(hookgate_store::LeaseRequest {
            owner: "w2",
            now_ms: later,
            lease_ms: 60_000,
            limit: 1,
            with_payload: false,
            endpoints: None,
        })
        .await
        .unwrap();
    assert_eq!(live_lease.len(), 1);
    let relet = live_lease[0].inbox_id.clone();
    let (overdue, live) = if relet == live {
        (overdue, live)
    } else {
        (live, overdue)
    };

    let scan = ReceivedScan {
        rows: ReceivedRows::Overdue,
        endpoint_id: ep,
        threshold_ms: threshold,
        since_ms: 0,
        limit: 100,
    };
    let found = store.received_rows(&scan).await.unwrap();
    assert_eq!(
        ids(&found),
        vec![overdue.as_str()],
        "the live lease is no finding"
    );
    let other = ReceivedScan {
        rows: ReceivedRows::Overdue,
        endpoint_id: "ep-other",
        ..scan.clone()
    };
    assert!(store.received_rows(&other).await.unwrap().is_empty());
    let newer_only = ReceivedScan {
        rows: ReceivedRows::Overdue,
        since_ms: t,
        ..scan.clone()
    };
    assert!(store.received_rows(&newer_only).await.unwrap().is_empty());

    // A dry run records and changes nothing.
    let dry = vec![finding(FindingKind::ReceivedOverdue, &found[0], None)];
    let recorded = store
        .record_findings(batch("dry", false, threshold, later, dry.clone()))
        .await
        .unwrap();
    assert_eq!(recorded, vec![true]);
    assert_eq!(store.received_rows(&scan).await.unwrap().len(), 1);

    // The repair makes it due now, once.
    let recorded = store
        .record_findings(batch("r1", true, threshold, later, dry.clone()))
        .await
        .unwrap();
    assert_eq!(recorded, vec![true]);
    let rec = store.get_event(&overdue).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Received);
    assert_eq!(rec.next_attempt_at_ms, Some(later));
    assert!(store.received_rows(&scan).await.unwrap().is_empty());
    let again = store
        .record_findings(batch("r2", true, threshold, later, dry))
        .await
        .unwrap();
    assert_eq!(again, vec![false], "repaired already: not a finding");
    let due = store.lease_due("w3", later, 60_000, 10).await.unwrap();
    assert_eq!(
        due.iter().map(|r| r.inbox_id.as_str()).collect::<Vec<_>>(),
        vec![overdue.as_str()],
        "a worker takes the repaired row at once; the live one stays its holder's"
    );
    let _ = live;

    // A destination added to the endpoint: d2 is missing, d1 is not.
    let missing = |destination: &'static str| MissingScan {
        endpoint_id: ep,
        destination,
        since_ms: 0,
        after: None,
        limit: 100,
    };
    assert!(
        store
            .processed_without_delivery(&missing("d1"))
            .await
            .unwrap()
            .is_empty()
    );
    let found = store
        .processed_without_delivery(&missing("d2"))
        .await
        .unwrap();
    assert_eq!(ids(&found), vec![done.as_str()]);
    let recent = MissingScan {
        since_ms: t - 60_000,
        ..missing("d2")
    };
    assert!(
        store
            .processed_without_delivery(&recent)
            .await
            .unwrap()
            .is_empty(),
        "received before since"
    );
    let after = MissingScan {
        after: Some((found[0].received_at_ms, found[0].inbox_id.clone())),
        ..missing("d2")
    };
    assert!(
        store
            .processed_without_delivery(&after)
            .await
            .unwrap()
            .is_empty()
    );
    let f = vec![finding(FindingKind::MissingOutbox, &found[0], Some("d2"))];
    let recorded = store
        .record_findings(batch("r1", true, threshold, later, f.clone()))
        .await
        .unwrap();
    assert_eq!(recorded, vec![true]);
    let deliveries = store.list_deliveries(&done).await.unwrap();
    let d2 = deliveries.iter().find(|d| d.destination == "d2").unwrap();
    assert_eq!(d2.status, OutboxStatus::Pending);
    assert_eq!(d2.idempotency_key, None, "the inbox id, as every delivery");
    let again = store
        .record_findings(batch("r2", true, threshold, later, f))
        .await
        .unwrap();
    assert_eq!(again, vec![false]);
    assert_eq!(store.list_deliveries(&done).await.unwrap().len(), 2);

    // The relay takes d1 and dies; the lease runs out; d2 is leased live.
    let d1 = store
        .lease_deliveries("d1", "relay", later, 10_000, 10)
        .await
        .unwrap();
    assert_eq!(d1.len(), 1);
    let stuck = |destination: &'static str, at: i64| StuckScan {
        endpoint_id: ep,
        destination,
        threshold_ms: at - 60_000,
        now_ms: at,
        since_ms: 0,
        limit: 100,
    };
    assert!(
        store
            .stuck_deliveries(&stuck("d1", later + 30_000))
            .await
            .unwrap()
            .is_empty(),
        "its lease ended less than the grace ago"
    );
    let at = later + 600_000;
    let d2 = store
        .lease_deliveries("d2", "relay", at, 60_000, 10)
        .await
        .unwrap();
    assert_eq!(d2.len(), 1);
    assert!(
        store
            .stuck_deliveries(&stuck("d2", at))
            .await
            .unwrap()
            .is_empty(),
        "a live lease"
    );
    let found = store.stuck_deliveries(&stuck("d1", at)).await.unwrap();
    assert_eq!(ids(&found), vec![done.as_str()]);
    let f = vec![finding(FindingKind::OutboxStuck, &found[0], Some("d1"))];
    let recorded = store
        .record_findings(batch("r3", true, at - 60_000, at, f.clone()))
        .await
        .unwrap();
    assert_eq!(recorded, vec![true]);
    assert!(
        store
            .stuck_deliveries(&stuck("d1", at))
            .await
            .unwrap()
            .is_empty()
    );
    let again = store
        .record_findings(batch("r4", true, at - 60_000, at, f))
        .await
        .unwrap();
    assert_eq!(again, vec![false]);
    let relet = store
        .lease_deliveries("d1", "relay2", at, 60_000, 10)
        .await
        .unwrap();
    assert_eq!(relet.len(), 1, "due now, taken by a working relay");

    // The findings, newest first, filtered and paged.
    let all = store
        .list_findings(&FindingQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let kinds: Vec<(&str, FindingKind, FindingAction)> = all
        .iter()
        .map(|f| (f.run_id.as_str(), f.kind, f.action))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("r3", FindingKind::OutboxStuck, FindingAction::MadeDue),
            ("r1", FindingKind::MissingOutbox, FindingAction::Enqueued),
            ("r1", FindingKind::ReceivedOverdue, FindingAction::MadeDue),
            ("dry", FindingKind::ReceivedOverdue, FindingAction::DryRun),
        ]
    );
    assert_eq!(all[1].destination.as_deref(), Some("d2"));
    assert_eq!(all[1].inbox_id.as_deref(), Some(done.as_str()));
    assert_eq!(all[1].endpoint_id, ep);
    assert_eq!(all[1].found_at_ms, later);
    let r1 = store
        .list_findings(&FindingQuery {
            run_id: Some("r1".into()),
            kind: Some(FindingKind::MissingOutbox),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r1.len(), 1);
    let page = store
        .list_findings(&FindingQuery {
            before_id: Some(all[1].finding_id),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].finding_id, all[2].finding_id);
    assert_eq!(store.trim_findings(later + 1, 100).await.unwrap(), 3);
    assert_eq!(
        store
            .list_findings(&FindingQuery {
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
        1
    );

    // Runs: a requested one is leased once, then again only after its lease; only its
    // runner ends it.
    let run = |id: &str, state: RunState| NewRun {
        run_id: id.to_owned(),
        trigger: RunTrigger::Api,
        endpoint_id: Some(ep.into()),
        since_ms: Some(5),
        dry_run: true,
        state,
        requested_by: "ops".into(),
        owner: None,
        lease_ms: 0,
        now_ms: t,
    };
    store
        .create_run(run("run-1", RunState::Pending))
        .await
        .unwrap();
    let leased = store.lease_run("a", t, 1_000).await.unwrap().unwrap();
    assert_eq!(leased.run_id, "run-1");
    assert_eq!(leased.state, RunState::Running);
    assert_eq!(leased.started_at_ms, Some(t));
    assert!((leased.dry_run, leased.since_ms) == (true, Some(5)));
    assert!(store.lease_run("b", t + 10, 1_000).await.unwrap().is_none());
    let taken = store
        .lease_run("b", t + 2_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.run_id, "run-1", "its runner died: taken over");
    assert!(
        !store
            .finish_run("run-1", "a", RunState::Done, None, None, t + 2_100)
            .await
            .unwrap(),
        "the old runner writes nothing"
    );
    let long = "e".repeat(5_000);
    assert!(
        store
            .finish_run(
                "run-1",
                "b",
                RunState::Failed,
                Some(r#"{"total":0}"#),
                Some(&long),
                t + 2_200
            )
            .await
            .unwrap()
    );
    let ended = store.get_run("run-1").await.unwrap().unwrap();
    assert_eq!(ended.state, RunState::Failed);
    assert_eq!(ended.finished_at_ms, Some(t + 2_200));
    assert_eq!(ended.summary.as_deref(), Some(r#"{"total":0}"#));
    assert_eq!(ended.last_error.unwrap().len(), 512);
    assert!(
        store
            .lease_run("c", t + 9_000, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    let mut own = run("run-2", RunState::Running);
    own.owner = Some("cli".into());
    own.lease_ms = 60_000;
    store.create_run(own).await.unwrap();
    assert!(
        store.lease_run("c", t + 1, 1_000).await.unwrap().is_none(),
        "a run created running is its creator's"
    );
    assert!(
        store
            .finish_run("run-2", "cli", RunState::Done, None, None, t + 5)
            .await
            .unwrap()
    );
    assert!(store.get_run("nope").await.unwrap().is_none());
    store.close().await;
}

/// No-retry windows: a window starting within or after the endpoint's open one extends it
/// (one open window per endpoint); an earlier start is a window of its own; covering closes
/// the windows up to the one a run read, not one written after; endpoints stay apart.
pub async fn no_retry_windows_extend_cover_and_stay_apart(store: Arc<dyn Store>) {
    assert!(store.open_no_retry_windows("gh").await.unwrap().is_empty());
    store
        .record_no_retry_window("gh", 1_000, 1_500)
        .await
        .unwrap();
    store
        .record_no_retry_window("gh", 1_200, 2_000)
        .await
        .unwrap();
    store
        .record_no_retry_window("gh", 5_000, 5_100)
        .await
        .unwrap();
    // An extension never shortens.
    store
        .record_no_retry_window("gh", 1_000, 1_100)
        .await
        .unwrap();
    store
        .record_no_retry_window("other", 3_000, 3_000)
        .await
        .unwrap();
    let open = store.open_no_retry_windows("gh").await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((open[0].started_at_ms, open[0].ended_at_ms), (1_000, 5_100));
    // Another instance's older window is kept apart: a run that read the newest one and
    // started there has not covered it.
    store.record_no_retry_window("gh", 500, 600).await.unwrap();
    let open = store.open_no_retry_windows("gh").await.unwrap();
    assert_eq!(
        open.iter()
            .map(|w| (w.started_at_ms, w.ended_at_ms))
            .collect::<Vec<_>>(),
        vec![(1_000, 5_100), (500, 600)]
    );
    let first = open[0].window_id;
    assert_eq!(
        store
            .cover_no_retry_windows("gh", first, 9_000)
            .await
            .unwrap(),
        1
    );
    let open = store.open_no_retry_windows("gh").await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].started_at_ms, 500);
    assert_eq!(
        store
            .cover_no_retry_windows("gh", open[0].window_id, 9_000)
            .await
            .unwrap(),
        1
    );
    assert!(store.open_no_retry_windows("gh").await.unwrap().is_empty());
    // After everything was covered, the next answer opens a new window.
    store
        .record_no_retry_window("gh", 10_000, 10_000)
        .await
        .unwrap();
    let open = store.open_no_retry_windows("gh").await.unwrap();
    assert_eq!((open.len(), open[0].started_at_ms), (1, 10_000));
    assert_eq!(store.open_no_retry_windows("other").await.unwrap().len(), 1);
    store.close().await;
}
