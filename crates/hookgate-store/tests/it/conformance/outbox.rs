//! Conformance checks of the outbox: per-destination leases, fencing,
//! DELIVERED / rescheduled / FAILED, operator retries of one event's failed deliveries, and
//! no outbox row for a stale event. Pulled into the suite by `mod.rs`, so every check runs on
//! every backend.

use std::collections::BTreeSet;
use std::sync::Arc;

use hookgate_core::retry::MAX_LAST_ERROR_CHARS;
use hookgate_core::{OutboxStatus, Outcome};
use hookgate_store::{
    EventFilter, FailedDelivery, NewInboxRow, ProcessingError, ProcessingResult, Store,
};
use tokio::task::JoinSet;

use super::{StoreTestExt, now_ms, row};

/// Accepts `r`, processes it (lease + complete) with `destinations`; returns its inbox id.
async fn processed(
    store: &Arc<dyn Store>,
    r: NewInboxRow,
    destinations: &[&str],
    t: i64,
) -> (String, Outcome) {
    let id = store.accept(r).await.unwrap().inbox_id().to_owned();
    let leased = store.lease_due("worker", t, 30_000, 100).await.unwrap();
    assert!(leased.iter().any(|l| l.inbox_id == id));
    let mut outcome = None;
    for l in leased {
        let o = store
            .complete(ProcessingResult {
                inbox_id: l.inbox_id.clone(),
                owner: "worker".into(),
                now_ms: t,
                handlers: Vec::new(),
                destinations: destinations.iter().map(|d| (*d).to_owned()).collect(),
            })
            .await
            .unwrap();
        if l.inbox_id == id {
            outcome = Some(o);
        }
    }
    (id, outcome.unwrap())
}

fn failure(outbox_id: &str, owner: &str, now: i64, retry_at: Option<i64>) -> FailedDelivery {
    FailedDelivery {
        outbox_id: outbox_id.to_owned(),
        owner: owner.to_owned(),
        now_ms: now,
        error: "transient: http status 503".into(),
        retry_at_ms: retry_at,
    }
}

/// Leases are per destination, carry the inbox row (payload included), are given to one
/// owner at a time, and only the holder may mark the delivery.
pub async fn outbox_leases_per_destination_and_fences_marks(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    let (id, outcome) = processed(&store, row("ep-ob", "evt_1"), &["a", "b"], t).await;
    assert_eq!(outcome, Outcome::Applied);
    let a = store
        .lease_deliveries("a", "relay-1", t, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(a.len(), 1, "only destination a's row");
    assert_eq!(a[0].delivery.destination, "a");
    assert_eq!(a[0].delivery.inbox_id, id);
    assert_eq!(a[0].delivery.attempt_count, 1);
    assert_eq!(a[0].event.inbox_id, id);
    assert_eq!(a[0].event.payload.as_deref(), Some(&b"sealed:evt_1"[..]));
    assert!(
        store
            .lease_deliveries("a", "relay-2", t + 1, 30_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "leased rows are not handed out twice"
    );
    let outbox_id = a[0].delivery.outbox_id.clone();
    assert!(matches!(
        store
            .mark_delivered(&outbox_id, "relay-2", t + 2, None)
            .await,
        Err(ProcessingError::LeaseLost)
    ));
    store
        .mark_delivered(&outbox_id, "relay-1", t + 2, None)
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .mark_delivered(&outbox_id, "relay-1", t + 3, None)
                .await,
            Err(ProcessingError::LeaseLost)
        ),
        "a DELIVERED row is not marked again"
    );
    let ds = store.list_deliveries(&id).await.unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(
        (ds[0].destination.as_str(), ds[0].status),
        ("a", OutboxStatus::Delivered)
    );
    assert_eq!(ds[0].delivered_at_ms, Some(t + 2));
    assert_eq!(ds[0].last_error, None, "a plain delivery carries no note");
    assert_eq!(
        (ds[1].destination.as_str(), ds[1].status),
        ("b", OutboxStatus::Pending)
    );
    // Settled without sending (a transform's null): DELIVERED, the note kept as last_error.
    let b = store
        .lease_deliveries("b", "relay-1", t + 2, 30_000, 10)
        .await
        .unwrap();
    store
        .mark_delivered(
            &b[0].delivery.outbox_id,
            "relay-1",
            t + 3,
            Some("skipped: transform output null"),
        )
        .await
        .unwrap();
    let skipped = store.list_deliveries(&id).await.unwrap().remove(1);
    assert_eq!(skipped.status, OutboxStatus::Delivered);
    assert_eq!(
        skipped.last_error.as_deref(),
        Some("skipped: transform output null")
    );
    assert_eq!(
        store
            .count_deliveries(OutboxStatus::Delivered)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store.count_deliveries(OutboxStatus::Pending).await.unwrap(),
        0
    );
    store.close().await;
}

/// An expired lease is taken over and fences the old holder; failures reschedule (not due
/// before their time) or fail with a bounded error; an operator retry re-drives only the
/// FAILED deliveries of that one event.
pub async fn outbox_reschedules_fails_and_retries_only_failed(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    let (id, _) = processed(&store, row("ep-ob2", "evt_1"), &["a", "b"], t).await;
    let (other, _) = processed(&store, row("ep-ob2", "evt_2"), &["b"], t).await;
    let a = store
        .lease_deliveries("a", "relay-1", t, 1_000, 1)
        .await
        .unwrap();
    store
        .mark_delivered(&a[0].delivery.outbox_id, "relay-1", t + 1, None)
        .await
        .unwrap();

    let first = store
        .lease_deliveries("b", "relay-1", t, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    let mine = first
        .iter()
        .find(|l| l.delivery.inbox_id == id)
        .unwrap()
        .delivery
        .outbox_id
        .clone();
    let again = store
        .lease_deliveries("b", "relay-2", t + 2_000, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 2, "expired leases are taken over");
    assert!(again.iter().all(|l| l.delivery.attempt_count == 2));
    assert!(matches!(
        store
            .fail_delivery(failure(&mine, "relay-1", t + 2_001, None))
            .await,
        Err(ProcessingError::LeaseLost)
    ));
    store
        .fail_delivery(failure(&mine, "relay-2", t + 2_001, Some(t + 5_000)))
        .await
        .unwrap();
    let due: Vec<_> = store
        .lease_deliveries("b", "relay-3", t + 4_000, 1_000, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.delivery.inbox_id == id)
        .collect();
    assert!(due.is_empty(), "not due before its retry time");
    let due = store
        .lease_deliveries("b", "relay-3", t + 5_000, 1_000, 10)
        .await
        .unwrap();
    let due = due.iter().find(|l| l.delivery.inbox_id == id).unwrap();
    assert_eq!(due.delivery.attempt_count, 3);
    assert_eq!(
        due.delivery.last_error.as_deref(),
        Some("transient: http status 503")
    );
    let mut long = failure(&mine, "relay-3", t + 5_001, None);
    long.error = "x".repeat(5 * MAX_LAST_ERROR_CHARS);
    store.fail_delivery(long).await.unwrap();
    let ds = store.list_deliveries(&id).await.unwrap();
    assert_eq!(ds[1].status, OutboxStatus::Failed);
    assert!(ds[1].last_error.as_ref().unwrap().chars().count() <= MAX_LAST_ERROR_CHARS);
    assert!(
        store
            .lease_deliveries("b", "relay-3", t + 99_000, 1_000, 10)
            .await
            .unwrap()
            .iter()
            .all(|l| l.delivery.inbox_id != id),
        "FAILED is never leased"
    );

    let failed = store
        .events_with_failed_deliveries(&EventFilter::default())
        .await
        .unwrap();
    assert_eq!(
        failed
            .iter()
            .map(|e| e.inbox_id.clone())
            .collect::<Vec<_>>(),
        vec![id.clone()]
    );
    let filtered = store
        .events_with_failed_deliveries(&EventFilter {
            endpoint_id: Some("elsewhere".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(filtered.is_empty());

    assert_eq!(store.retry_deliveries(&other, t + 6_000).await.unwrap(), 0);
    assert_eq!(store.retry_deliveries(&id, t + 6_000).await.unwrap(), 1);
    assert_eq!(store.retry_deliveries(&id, t + 6_000).await.unwrap(), 0);
    let ds = store.list_deliveries(&id).await.unwrap();
    assert_eq!(ds[0].status, OutboxStatus::Delivered, "untouched");
    assert_eq!(ds[1].status, OutboxStatus::Pending);
    assert_eq!(ds[1].attempt_count, 0);
    let redo = store
        .lease_deliveries("b", "relay-4", t + 6_000, 1_000, 10)
        .await
        .unwrap();
    assert!(redo.iter().any(|l| l.delivery.inbox_id == id));
    assert!(
        store
            .events_with_failed_deliveries(&EventFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}

/// Concurrent relays never lease the same delivery.
pub async fn concurrent_delivery_leases_never_share_a_row(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    for i in 0..30 {
        store
            .accept(row("ep-ob3", &format!("evt_{i}")))
            .await
            .unwrap();
    }
    for l in store.lease_due("worker", t, 30_000, 100).await.unwrap() {
        store
            .complete(ProcessingResult {
                inbox_id: l.inbox_id,
                owner: "worker".into(),
                now_ms: t,
                handlers: Vec::new(),
                destinations: vec!["d".into()],
            })
            .await
            .unwrap();
    }
    let mut tasks = JoinSet::new();
    for r in 0..6 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut got = Vec::new();
            loop {
                let leased = store
                    .lease_deliveries("d", &format!("relay-{r}"), t, 30_000, 5)
                    .await
                    .unwrap();
                if leased.is_empty() {
                    return got;
                }
                got.extend(leased.into_iter().map(|l| l.delivery.outbox_id));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(r) = tasks.join_next().await {
        all.extend(r.unwrap());
    }
    let unique: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 30);
    assert_eq!(unique.len(), 30);
    store.close().await;
}

/// A stale event (the version gate) gets no outbox row.
pub async fn stale_event_gets_no_outbox_row(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    let mut newer = row("ep-ob4", "evt_v2");
    newer.object_id = Some("obj".into());
    newer.object_version = Some(2);
    let (newer, o) = processed(&store, newer, &["d"], t).await;
    assert_eq!(o, Outcome::Applied);
    let mut older = row("ep-ob4", "evt_v1");
    older.object_id = Some("obj".into());
    older.object_version = Some(1);
    let (older, o) = processed(&store, older, &["d"], t).await;
    assert_eq!(o, Outcome::Stale);
    assert_eq!(store.list_deliveries(&newer).await.unwrap().len(), 1);
    assert!(store.list_deliveries(&older).await.unwrap().is_empty());
    store.close().await;
}
