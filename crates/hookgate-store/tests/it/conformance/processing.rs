//! Conformance checks of processing: leases, fencing, the version gate,
//! handler markers, outbox rows, failed attempts and operator retries. Pulled into the suite
//! by `mod.rs`, so every check runs on every backend.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hookgate_core::retry::MAX_LAST_ERROR_CHARS;
use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::{
    BusinessChange, Completion, FailedAttempt, HandlerOutput, LeaseRequest, NewInboxRow,
    ProcessingError, ProcessingResult, Store,
};
use tokio::task::JoinSet;

use super::{StoreTestExt, accept_all, now_ms, row};

/// A time safely after every `received_at` of rows made by `row()`.
fn later() -> i64 {
    now_ms() + 1_000
}

fn versioned(endpoint: &str, event_id: &str, object_id: &str, version: i64) -> NewInboxRow {
    let mut r = row(endpoint, event_id);
    r.object_id = Some(object_id.to_owned());
    r.object_version = Some(version);
    r
}

fn payment_change(object_id: &str, status: &str, at: i64, event: &str) -> BusinessChange {
    BusinessChange::UpsertPaymentState {
        object_id: object_id.to_owned(),
        object_type: "payment_intent".to_owned(),
        status: status.to_owned(),
        amount: Some(2000),
        currency: Some("usd".to_owned()),
        refreshed_at_ms: at,
        last_event_id: event.to_owned(),
    }
}

fn result(inbox_id: &str, owner: &str, now: i64) -> ProcessingResult {
    ProcessingResult {
        inbox_id: inbox_id.to_owned(),
        owner: owner.to_owned(),
        now_ms: now,
        handlers: Vec::new(),
        destinations: Vec::new(),
        sequence: None,
    }
}

async fn accept_one(store: &Arc<dyn Store>, r: NewInboxRow) -> String {
    store.accept(r).await.unwrap().inbox_id().to_owned()
}

/// Due rows are leased at most `limit` at a time, to one owner each, with `attempt_count`
/// counting leases; leased rows are not leased again while the lease holds.
pub async fn lease_claims_due_rows_once(store: Arc<dyn Store>) {
    for i in 0..5 {
        accept_one(&store, row("ep-lease", &format!("evt_{i}"))).await;
    }
    let mut ignored = row("ep-lease", "evt_ignored");
    ignored.status = InboxStatus::Ignored;
    accept_one(&store, ignored).await;
    let t = later();
    let a = store.lease_due("worker-a", t, 30_000, 3).await.unwrap();
    assert_eq!(a.len(), 3);
    assert!(
        a.iter()
            .all(|r| r.attempt_count == 1 && r.status == InboxStatus::Received)
    );
    let b = store.lease_due("worker-b", t, 30_000, 10).await.unwrap();
    assert_eq!(b.len(), 2, "only the unleased RECEIVED rows; never IGNORED");
    let ids: BTreeSet<_> = a.iter().chain(&b).map(|r| r.inbox_id.clone()).collect();
    assert_eq!(ids.len(), 5);
    assert!(
        store
            .lease_due("worker-c", t + 29_000, 30_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Not yet due: a row whose next attempt is in the future is not leased either.
    assert!(
        store
            .lease_due("worker-c", t - 60_000, 1_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}

/// Many workers leasing at once never get the same row.
pub async fn concurrent_leases_never_share_a_row(store: Arc<dyn Store>) {
    let rows: Vec<_> = (0..120)
        .map(|i| row("ep-cl", &format!("evt_{i}")))
        .collect();
    for (_, r) in accept_all(&store, rows, 64).await {
        r.unwrap();
    }
    let t = later();
    let mut tasks = JoinSet::new();
    for w in 0..8 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store
                    .lease_due(&format!("w{w}"), t, 30_000, 4)
                    .await
                    .unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|r| r.inbox_id));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(j) = tasks.join_next().await {
        all.extend(j.unwrap());
    }
    let distinct: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 120, "every row leased exactly once");
    assert_eq!(distinct.len(), 120);
    store.close().await;
}

/// Only the current lease holder can complete or fail a row: an expired lease is taken over
/// by another worker, and the old holder then gets `LeaseLost` and writes nothing.
pub async fn expired_lease_is_taken_over_and_old_holder_is_fenced(store: Arc<dyn Store>) {
    let id = accept_one(&store, row("ep-fence", "evt_1")).await;
    let t = later();
    let first = store.lease_due("old", t, 1_000, 10).await.unwrap();
    assert_eq!(first.len(), 1);
    // Still held: nobody else gets it.
    assert!(
        store
            .lease_due("new", t + 999, 1_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Expired: the old holder cannot complete after its lease, even before a takeover.
    let mut late = result(&id, "old", t + 1_000);
    late.handlers = vec![HandlerOutput {
        consumer: "c".into(),
        changes: vec![payment_change("pi_fence", "old", t, "evt_1")],
    }];
    assert!(matches!(
        store.complete(late.clone()).await,
        Err(ProcessingError::LeaseLost)
    ));
    let taken = store.lease_due("new", t + 1_500, 1_000, 10).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].attempt_count, 2);
    // The old holder, with a clock still inside its own lease, is fenced by the owner.
    let mut stale_holder = late.clone();
    stale_holder.now_ms = t + 10;
    assert!(matches!(
        store.complete(stale_holder).await,
        Err(ProcessingError::LeaseLost)
    ));
    let fail = FailedAttempt {
        inbox_id: id.clone(),
        owner: "old".into(),
        now_ms: t + 10,
        error: "boom".into(),
        retry_at_ms: None,
    };
    assert!(matches!(
        store.fail_attempt(fail).await,
        Err(ProcessingError::LeaseLost)
    ));
    assert!(store.payment_state("pi_fence").await.unwrap().is_none());
    assert!(
        store
            .processed_markers("stripe", "ep-fence", "evt_1")
            .await
            .unwrap()
            .is_empty()
    );

    let mut good = result(&id, "new", t + 1_600);
    good.handlers = vec![HandlerOutput {
        consumer: "c".into(),
        changes: vec![payment_change("pi_fence", "new", t + 1_600, "evt_1")],
    }];
    assert_eq!(
        store.complete(good.clone()).await.unwrap(),
        Outcome::Applied
    );
    // A second completion (a worker retry) is refused: the row is no longer leased.
    assert!(matches!(
        store.complete(good).await,
        Err(ProcessingError::LeaseLost)
    ));
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Processed);
    assert_eq!(rec.outcome, Some(Outcome::Applied));
    assert_eq!(rec.processed_at_ms, Some(t + 1_600));
    let state = store.payment_state("pi_fence").await.unwrap().unwrap();
    assert_eq!(state.status, "new");
    assert_eq!(state.write_count, 1, "exactly one business mutation");
    assert_eq!(
        store
            .processed_markers("stripe", "ep-fence", "evt_1")
            .await
            .unwrap(),
        ["c"]
    );
    assert!(
        store
            .lease_due("x", t + 99_000, 1_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}

/// A lease without payloads leases exactly as `lease_due` does but leaves every record's
/// payload out; the stored payload is untouched.
pub async fn lease_without_payload_leaves_it_stored(store: Arc<dyn Store>) {
    let mut r = row("ep-nopay", "evt_1");
    r.payload = vec![7u8; 20_000];
    let id = accept_one(&store, r).await;
    let t = later();
    let leased = store
        .lease_due_without_payload("w", t, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].inbox_id, id);
    assert_eq!(leased[0].attempt_count, 1);
    assert!(leased[0].payload.is_none());
    assert!(
        store
            .lease_due("other", t, 30_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "leased like any lease"
    );
    assert_eq!(
        store.complete(result(&id, "w", t + 1)).await.unwrap(),
        Outcome::Applied
    );
    let stored = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(stored.payload.as_deref(), Some(&[7u8; 20_000][..]));
    store.close().await;
}

/// Rows leased together are completed together: each as `complete` would (gate, outbox
/// rows, PROCESSED), one result per row in order, and a row whose lease was lost neither
/// fails the others nor is written.
pub async fn completing_rows_together_fences_each_row(store: Arc<dyn Store>) {
    let ids = [
        accept_one(&store, versioned("ep-all", "evt_a", "obj_a", 2)).await,
        accept_one(&store, versioned("ep-all", "evt_b", "obj_b", 1)).await,
        accept_one(&store, versioned("ep-all", "evt_c", "obj_a", 1)).await,
    ];
    let t = later();
    let leased = store.lease_due("w", t, 30_000, 10).await.unwrap();
    assert_eq!(leased.len(), 3);
    let mut results: Vec<ProcessingResult> = ids.iter().map(|id| result(id, "w", t + 1)).collect();
    for r in &mut results {
        r.destinations = vec!["nats-main".into()];
    }
    // The second row's lease is not ours (another owner's claim, as after a takeover).
    results[1].owner = "someone-else".into();
    let outcomes = store.complete_all(results).await;
    assert_eq!(outcomes.len(), 3);
    assert_eq!(
        outcomes[0].as_ref().unwrap(),
        &Completion::Processed(Outcome::Applied)
    );
    assert!(matches!(outcomes[1], Err(ProcessingError::LeaseLost)));
    // Older than the version the first row applied, in the same transaction.
    assert_eq!(
        outcomes[2].as_ref().unwrap(),
        &Completion::Processed(Outcome::Stale)
    );

    let a = store.get_event(&ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (a.status, a.outcome),
        (InboxStatus::Processed, Some(Outcome::Applied))
    );
    assert_eq!(
        store.outbox_destinations(&ids[0]).await.unwrap(),
        ["nats-main"]
    );
    let b = store.get_event(&ids[1]).await.unwrap().unwrap();
    assert_eq!((b.status, b.outcome), (InboxStatus::Received, None));
    assert!(store.outbox_destinations(&ids[1]).await.unwrap().is_empty());
    let c = store.get_event(&ids[2]).await.unwrap().unwrap();
    assert_eq!(
        (c.status, c.outcome),
        (InboxStatus::Processed, Some(Outcome::Stale))
    );
    assert!(store.outbox_destinations(&ids[2]).await.unwrap().is_empty());
    assert_eq!(
        store
            .object_version("stripe", "ep-all", "obj_a")
            .await
            .unwrap(),
        Some(2)
    );
    assert!(store.complete_all(Vec::new()).await.is_empty());

    // Rows that need nothing but their status (no handler, no destination, no version), beside
    // a versioned one, in one call; one of them no longer ours.
    let plain = [
        accept_one(&store, row("ep-all", "evt_p1")).await,
        accept_one(&store, row("ep-all", "evt_p2")).await,
        accept_one(&store, versioned("ep-all", "evt_p3", "obj_a", 1)).await,
        accept_one(&store, row("ep-all", "evt_p4")).await,
    ];
    let t2 = later() + 10;
    assert_eq!(store.lease_due("w", t2, 30_000, 10).await.unwrap().len(), 4);
    let mut results: Vec<ProcessingResult> =
        plain.iter().map(|id| result(id, "w", t2 + 5)).collect();
    results[1].owner = "someone-else".into();
    let outcomes = store.complete_all(results).await;
    assert_eq!(
        outcomes[0].as_ref().unwrap(),
        &Completion::Processed(Outcome::Applied)
    );
    assert!(matches!(outcomes[1], Err(ProcessingError::LeaseLost)));
    assert_eq!(
        outcomes[2].as_ref().unwrap(),
        &Completion::Processed(Outcome::Stale),
        "gated"
    );
    assert_eq!(
        outcomes[3].as_ref().unwrap(),
        &Completion::Processed(Outcome::Applied)
    );
    for (i, id) in plain.iter().enumerate() {
        let rec = store.get_event(id).await.unwrap().unwrap();
        if i == 1 {
            assert_eq!(
                (rec.status, rec.processed_at_ms),
                (InboxStatus::Received, None)
            );
        } else {
            assert_eq!(rec.status, InboxStatus::Processed, "row {i}");
            assert_eq!(rec.processed_at_ms, Some(t2 + 5), "row {i}");
            assert_eq!(rec.attempt_count, 1, "row {i}");
        }
    }
    // Completed rows are not leased again; the one whose lease was not ours still is leased
    // (to its real holder, "w"), until that lease expires.
    assert!(
        store
            .lease_due("x", t2 + 10, 30_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let back = store.lease_due("x", t2 + 31_000, 30_000, 10).await.unwrap();
    assert_eq!(back.len(), 2, "the lost-lease row and evt_b's row");
    store.close().await;
}

/// All 120 orders of versions 1..=5 of an object (one object per order, processed
/// concurrently across objects): each object ends at version 5, every event PROCESSED, an
/// event `applied` exactly when it was newer than all before it, and a stale event writes no
/// marker, no business change and no outbox row.
pub async fn version_gate_converges_for_every_order(store: Arc<dyn Store>) {
    let perms = permutations(&[1, 2, 3, 4, 5]);
    assert_eq!(perms.len(), 120);
    let t = later();
    let mut expected: HashMap<String, (String, Outcome)> = HashMap::new();
    for round in 0..5 {
        let rows: Vec<NewInboxRow> = perms
            .iter()
            .enumerate()
            .map(|(k, p)| {
                versioned(
                    "ep-gate",
                    &format!("o{k}-v{}", p[round]),
                    &format!("obj-{k}"),
                    p[round],
                )
            })
            .collect();
        for (k, p) in perms.iter().enumerate() {
            let newest_before = p[..round].iter().copied().max().unwrap_or(0);
            let outcome = if p[round] > newest_before {
                Outcome::Applied
            } else {
                Outcome::Stale
            };
            expected.insert(format!("o{k}-v{}", p[round]), (format!("obj-{k}"), outcome));
        }
        for (_, r) in accept_all(&store, rows, 64).await {
            r.unwrap();
        }
        // After every received_at so far (the clock of `row()` is the real one).
        let now = later().max(t) + round as i64;
        let leased = store.lease_due("gate", now, 60_000, 1_000).await.unwrap();
        assert_eq!(leased.len(), perms.len());
        let mut tasks = JoinSet::new();
        for rec in leased {
            let store = Arc::clone(&store);
            tasks.spawn(async move {
                let object = rec.object_id.clone().unwrap();
                let version = rec.object_version.unwrap();
                let mut r = result(&rec.inbox_id, "gate", now);
                r.handlers = vec![HandlerOutput {
                    consumer: "projection".into(),
                    changes: vec![payment_change(
                        &object,
                        &format!("v{version}"),
                        now,
                        &rec.provider_event_id,
                    )],
                }];
                r.destinations = vec!["d1".into()];
                let outcome = store.complete(r).await.unwrap();
                (rec.inbox_id, outcome)
            });
        }
        while let Some(j) = tasks.join_next().await {
            j.unwrap();
        }
    }
    let events = store.list_events(&Default::default()).await.unwrap();
    assert_eq!(events.len(), 600);
    let mut applied_per_object: HashMap<String, i64> = HashMap::new();
    for e in &events {
        assert_eq!(e.status, InboxStatus::Processed, "{}", e.provider_event_id);
        let (object, outcome) = &expected[&e.provider_event_id];
        assert_eq!(e.outcome, Some(*outcome), "{}", e.provider_event_id);
        let markers = store
            .processed_markers("stripe", "ep-gate", &e.provider_event_id)
            .await
            .unwrap();
        let outbox = store.outbox_destinations(&e.inbox_id).await.unwrap();
        if *outcome == Outcome::Applied {
            *applied_per_object.entry(object.clone()).or_default() += 1;
            assert_eq!(markers, ["projection"]);
            assert_eq!(outbox, ["d1"]);
        } else {
            assert!(markers.is_empty(), "stale events run no handler");
            assert!(outbox.is_empty(), "stale events write no outbox row");
        }
    }
    for k in 0..perms.len() {
        let object = format!("obj-{k}");
        assert_eq!(
            store
                .object_version("stripe", "ep-gate", &object)
                .await
                .unwrap(),
            Some(5)
        );
        let state = store.payment_state(&object).await.unwrap().unwrap();
        assert_eq!(state.status, "v5", "{object} ends at its highest version");
        assert_eq!(state.write_count, applied_per_object[&object]);
    }
    // The gate is per (provider, endpoint, object): another endpoint starts fresh.
    assert_eq!(
        store
            .object_version("stripe", "ep-other", "obj-0")
            .await
            .unwrap(),
        None
    );
    store.close().await;
}

/// Events without an object version skip the gate (and every copy of the payment fetch
/// converges on the newest fetch, whatever the commit order).
pub async fn unversioned_events_skip_the_gate_and_newest_fetch_wins(store: Arc<dyn Store>) {
    let a = accept_one(&store, row("ep-nv", "evt_a")).await;
    let b = accept_one(&store, row("ep-nv", "evt_b")).await;
    let t = later();
    assert_eq!(store.lease_due("w", t, 10_000, 10).await.unwrap().len(), 2);
    // b fetched later (newer state) but commits first; a's older fetch must not win.
    let mut rb = result(&b, "w", t + 5);
    rb.handlers = vec![HandlerOutput {
        consumer: "p".into(),
        changes: vec![payment_change("pi_nv", "succeeded", t + 2, "evt_b")],
    }];
    let mut ra = result(&a, "w", t + 6);
    ra.handlers = vec![HandlerOutput {
        consumer: "p".into(),
        changes: vec![payment_change("pi_nv", "processing", t + 1, "evt_a")],
    }];
    assert_eq!(store.complete(rb).await.unwrap(), Outcome::Applied);
    assert_eq!(store.complete(ra).await.unwrap(), Outcome::Applied);
    let state = store.payment_state("pi_nv").await.unwrap().unwrap();
    assert_eq!(state.status, "succeeded");
    assert_eq!(state.last_event_id, "evt_b");
    assert_eq!(state.write_count, 1);
    assert_eq!(
        store
            .object_version("stripe", "ep-nv", "ch_1")
            .await
            .unwrap(),
        None,
        "no version, no gate row"
    );
    store.close().await;
}

/// A failed attempt releases the lease and schedules the next one (not leased before it is
/// due); giving up is FAILED with a bounded error; `retry_event` puts a FAILED row back.
pub async fn failed_attempts_back_off_fail_and_retry(store: Arc<dyn Store>) {
    let id = accept_one(&store, row("ep-fail", "evt_1")).await;
    let t = later();
    assert_eq!(store.lease_due("w", t, 10_000, 10).await.unwrap().len(), 1);
    assert!(
        !store.retry_event(&id, t).await.unwrap(),
        "only FAILED rows are retried"
    );
    let long = "x".repeat(5_000);
    store
        .fail_attempt(FailedAttempt {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: t + 1,
            error: long,
            retry_at_ms: Some(t + 500),
        })
        .await
        .unwrap();
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Received);
    assert_eq!(rec.next_attempt_at_ms, Some(t + 500));
    assert_eq!(rec.attempt_count, 1);
    let err = rec.last_error.unwrap();
    assert!(err.chars().count() <= MAX_LAST_ERROR_CHARS, "bounded");
    assert!(
        store
            .lease_due("w", t + 499, 10_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store.lease_due("w", t + 500, 10_000, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt_count, 2);
    store
        .fail_attempt(FailedAttempt {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: t + 501,
            error: "handler payments_projection: permanent".into(),
            retry_at_ms: None,
        })
        .await
        .unwrap();
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Failed);
    assert_eq!(
        rec.last_error.as_deref(),
        Some("handler payments_projection: permanent")
    );
    assert!(
        store
            .lease_due("w", t + 99_999, 10_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let failed = store
        .list_events(&hookgate_store::EventFilter {
            status: Some(InboxStatus::Failed),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);

    assert!(store.retry_event(&id, t + 1_000).await.unwrap());
    assert!(!store.retry_event(&id, t + 1_000).await.unwrap());
    assert!(!store.retry_event("no-such-row", t).await.unwrap());
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Received);
    assert_eq!(rec.attempt_count, 0);
    let leased = store.lease_due("w2", t + 1_000, 10_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(
        store.complete(result(&id, "w2", t + 1_001)).await.unwrap(),
        Outcome::Applied
    );
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Processed);
    assert_eq!(rec.attempt_count, 1);
    store.close().await;
}

/// The sealed payload outlives every status change: it comes back, byte for byte, with the
/// leased row, after a failed attempt, after completion (from `get_event`, `list_events` and
/// the delivery lease), and a duplicate never replaces it.
pub async fn payload_survives_status_changes(store: Arc<dyn Store>) {
    // ~10 KiB, the design's average body: several pages on SQLite.
    let payload: Vec<u8> = (0..10 * 1024u32)
        .map(|i| (i.wrapping_mul(31) >> 3) as u8)
        .collect();
    let mut r = row("ep-keep", "evt_1");
    r.payload = payload.clone();
    let id = accept_one(&store, r.clone()).await;
    let t = later();
    let check = |rec: &hookgate_store::InboxRecord, when: &str| {
        assert_eq!(rec.inbox_id, id, "{when}");
        assert!(
            rec.payload.as_deref() == Some(payload.as_slice()),
            "payload changed {when}"
        );
        assert_eq!(rec.payload_digest, r.payload_digest, "{when}");
    };

    let leased = store.lease_due("w", t, 10_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    check(&leased[0], "in the lease");
    store
        .fail_attempt(FailedAttempt {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: t + 1,
            error: "transient: timeout".into(),
            retry_at_ms: Some(t + 2),
        })
        .await
        .unwrap();
    check(
        &store.get_event(&id).await.unwrap().unwrap(),
        "after a failed attempt",
    );

    let mut copy = row("ep-keep", "evt_1");
    copy.payload = b"a later copy".to_vec();
    assert_eq!(accept_one(&store, copy).await, id);

    let leased = store.lease_due("w", t + 2, 10_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    check(&leased[0], "in the second lease");
    let mut done = result(&id, "w", t + 3);
    done.destinations = vec!["d".into()];
    assert_eq!(store.complete(done).await.unwrap(), Outcome::Applied);
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Processed);
    check(&rec, "after completion");
    let listed = store
        .list_events(&hookgate_store::EventFilter {
            endpoint_id: Some("ep-keep".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    check(&listed[0], "in the listing");
    let deliveries = store
        .lease_deliveries("d", "relay", t + 4, 10_000, 10)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    check(&deliveries[0].event, "in the delivery lease");
    store.close().await;
}

fn permutations(items: &[i64]) -> Vec<Vec<i64>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

/// Rows of an endpoint the caller does not serve (removed from its config) are not leased:
/// they stay `RECEIVED` with their attempts unchanged, are reported per endpoint, and are
/// leased again once the endpoint is served.
pub async fn lease_skips_rows_of_unserved_endpoints(store: Arc<dyn Store>) {
    let kept = accept_one(&store, row("ep-kept", "evt_k")).await;
    let gone = accept_one(&store, row("ep-gone", "evt_g")).await;
    let t = later();
    let served = ["ep-kept".to_owned()];
    let lease = |owner: &'static str, endpoints: &'static [String], now_ms: i64| {
        let store = Arc::clone(&store);
        async move {
            store
                .lease(LeaseRequest {
                    owner,
                    now_ms,
                    lease_ms: 1,
                    limit: 10,
                    with_payload: false,
                    endpoints: Some(endpoints),
                })
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.inbox_id)
                .collect::<Vec<_>>()
        }
    };
    let served: &'static [String] = Box::leak(Box::new(served));
    for i in 0..3 {
        // lease_ms = 1: each lease has expired by the next one.
        assert_eq!(lease("w", served, t + 10 * i).await, vec![kept.clone()]);
    }
    let waiting = store.get_event(&gone).await.unwrap().unwrap();
    assert_eq!(waiting.status, InboxStatus::Received);
    assert_eq!(waiting.attempt_count, 0, "an unserved row is never leased");
    assert!(
        lease("w", &[], t + 100).await.is_empty(),
        "no endpoint, no lease"
    );
    let mut per_endpoint = store.received_per_endpoint().await.unwrap();
    per_endpoint.sort();
    assert_eq!(
        per_endpoint,
        [("ep-gone".to_owned(), 1), ("ep-kept".to_owned(), 1)]
    );
    let only_gone: &'static [String] = Box::leak(Box::new(["ep-gone".to_owned()]));
    assert_eq!(
        lease("w2", only_gone, t + 200).await,
        vec![gone.clone()],
        "back once served"
    );
    assert_eq!(
        store.get_event(&gone).await.unwrap().unwrap().attempt_count,
        1
    );
    store.close().await;
}

/// Payment fetches are ordered by the lease they were made under (a database sequence), not
/// by the workers' clocks: an instance whose clock runs an hour ahead fetched first (its
/// lease came first), so the later fetch of an instance with a right clock replaces it.
pub async fn payment_fetches_are_ordered_by_lease_not_by_clock(store: Arc<dyn Store>) {
    let early = accept_one(&store, row("ep-clock", "evt_early")).await;
    let t = later();
    let ahead = t + 3_600_000;
    let leased = store.lease_due("fast", ahead, 60_000, 1).await.unwrap();
    assert_eq!(leased[0].inbox_id, early);
    let mut r = result(&early, "fast", ahead);
    r.handlers = vec![HandlerOutput {
        consumer: "p".into(),
        changes: vec![payment_change("pi_clock", "processing", ahead, "evt_early")],
    }];
    assert_eq!(store.complete(r).await.unwrap(), Outcome::Applied);

    // The object changed after that fetch; its event is leased (and fetched) later.
    let late = accept_one(&store, row("ep-clock", "evt_late")).await;
    let t = later();
    let leased = store.lease_due("right", t, 60_000, 1).await.unwrap();
    assert_eq!(leased[0].inbox_id, late);
    let mut r = result(&late, "right", t);
    r.handlers = vec![HandlerOutput {
        consumer: "p".into(),
        changes: vec![payment_change("pi_clock", "succeeded", t, "evt_late")],
    }];
    assert_eq!(store.complete(r).await.unwrap(), Outcome::Applied);
    let state = store.payment_state("pi_clock").await.unwrap().unwrap();
    assert_eq!(
        state.status, "succeeded",
        "a clock ahead must not pin the older state"
    );
    assert_eq!(state.last_event_id, "evt_late");
    assert_eq!(state.write_count, 2);
    assert!(state.fetch_seq > 0);
    store.close().await;
}
