//! Conformance checks of the operator API's store calls: a page of events by every filter
//! with keyset paging (no payloads read), the audit trail, replay through processing and
//! re-delivery to one destination, both refused while a worker or relay holds a live lease
//! and fencing out the holder of an expired one.

use std::sync::Arc;

use hookgate_core::{InboxStatus, OutboxStatus, Outcome};
use hookgate_store::{
    EventQuery, NewAudit, OperationResult, PageKey, ProcessingError, ProcessingResult, Redelivery,
    Store,
};

use super::{StoreTestExt, now_ms, row, row_for};

fn query(limit: u32) -> EventQuery {
    EventQuery {
        limit,
        ..EventQuery::default()
    }
}

async fn ids(store: &Arc<dyn Store>, q: EventQuery) -> Vec<String> {
    let page = store.page_events(&q).await.unwrap();
    assert!(
        page.iter().all(|r| r.payload.is_none()),
        "a page reads no payload"
    );
    page.into_iter().map(|r| r.inbox_id).collect()
}

/// Leases every due row and completes it with `destinations`.
async fn process_all(store: &Arc<dyn Store>, t: i64, destinations: &[&str]) {
    for l in store.lease_due("worker", t, 30_000, 100).await.unwrap() {
        store
            .complete(ProcessingResult {
                inbox_id: l.inbox_id.clone(),
                owner: "worker".into(),
                now_ms: t,
                handlers: Vec::new(),
                destinations: destinations.iter().map(|d| (*d).to_owned()).collect(),
            })
            .await
            .unwrap();
    }
}

/// Every filter of the list, each alone, and pages that neither repeat nor skip.
pub async fn event_pages_filter_and_never_repeat_or_skip(store: Arc<dyn Store>) {
    let base = now_ms();
    let mut accepted = Vec::new();
    for i in 0..12i64 {
        let mut r = row_for(
            if i % 3 == 0 { "github" } else { "stripe" },
            if i % 2 == 0 { "ep-a" } else { "ep-b" },
            &format!("evt_{i}"),
        );
        r.event_type = Some(
            if i < 6 {
                "invoice.paid"
            } else {
                "customer.created"
            }
            .into(),
        );
        r.object_id = Some(format!("obj_{}", i % 4));
        r.matched_secret_version = if i == 5 { "v2" } else { "v1" }.into();
        // Two rows share each millisecond: ties are ordered by id.
        r.received_at_ms = base + i / 2;
        if i == 11 {
            r.status = InboxStatus::Ignored;
        }
        store.accept(r.clone()).await.unwrap();
        accepted.push(r);
    }
    let mut newest_first: Vec<(i64, String)> = accepted
        .iter()
        .map(|r| (r.received_at_ms, r.inbox_id.clone()))
        .collect();
    newest_first.sort();
    newest_first.reverse();
    let all: Vec<String> = newest_first.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(ids(&store, query(100)).await, all);

    // Pages of 5: the last id of each page is the next page's key.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .page_events(&EventQuery {
                after: after.clone(),
                ..query(5)
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        let last = page.last().unwrap();
        after = Some(PageKey {
            received_at_ms: last.received_at_ms,
            inbox_id: last.inbox_id.clone(),
        });
        paged.extend(page.into_iter().map(|r| r.inbox_id));
        // Rows accepted meanwhile are newer: they never enter a page after the first.
        let mut newer = row("ep-a", &format!("late_{}", paged.len()));
        newer.received_at_ms = base + 1_000;
        store.accept(newer).await.unwrap();
    }
    assert_eq!(paged, all, "no repeat, no gap");

    let expect = |pred: &dyn Fn(&hookgate_store::NewInboxRow) -> bool| -> Vec<String> {
        all.iter()
            .filter(|id| pred(accepted.iter().find(|r| &r.inbox_id == *id).unwrap()))
            .cloned()
            .collect()
    };
    let within = |q: EventQuery| {
        let store = store.clone();
        async move {
            ids(
                &store,
                EventQuery {
                    // Not the rows the paging loop added (received later).
                    received_before_ms: q.received_before_ms.or(Some(base + 100)),
                    ..q
                },
            )
            .await
        }
    };
    assert_eq!(
        within(EventQuery {
            status: Some(InboxStatus::Ignored),
            ..query(100)
        })
        .await,
        expect(&|r| r.status == InboxStatus::Ignored)
    );
    assert_eq!(
        within(EventQuery {
            provider: Some("github".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.provider == "github")
    );
    assert_eq!(
        within(EventQuery {
            endpoint_id: Some("ep-b".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.endpoint_id == "ep-b")
    );
    assert_eq!(
        within(EventQuery {
            event_type: Some("invoice.*".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.event_type.as_deref() == Some("invoice.paid"))
    );
    assert_eq!(
        within(EventQuery {
            event_type: Some("c?stomer.created".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.event_type.as_deref() == Some("customer.created"))
    );
    assert!(
        within(EventQuery {
            event_type: Some("invoice_paid".into()),
            ..query(100)
        })
        .await
        .is_empty(),
        "_ is not a wildcard"
    );
    assert_eq!(
        within(EventQuery {
            received_after_ms: Some(base + 2),
            received_before_ms: Some(base + 4),
            ..query(100)
        })
        .await,
        expect(&|r| r.received_at_ms >= base + 2 && r.received_at_ms < base + 4)
    );
    assert_eq!(
        within(EventQuery {
            provider_event_id: Some("evt_7".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.provider_event_id == "evt_7")
    );
    assert_eq!(
        within(EventQuery {
            object_id: Some("obj_1".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.object_id.as_deref() == Some("obj_1"))
    );
    assert_eq!(
        within(EventQuery {
            matched_secret_version: Some("v2".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.matched_secret_version == "v2")
    );
    // Deliveries: process everything to "d1", fail evt_0's delivery.
    let t = now_ms() + 1_000;
    process_all(&store, t, &["d1"]).await;
    let leased = store
        .lease_deliveries("d1", "relay", t, 30_000, 100)
        .await
        .unwrap();
    let first = leased
        .iter()
        .find(|l| l.event.provider_event_id == "evt_0")
        .unwrap();
    store
        .fail_delivery(hookgate_store::FailedDelivery {
            outbox_id: first.delivery.outbox_id.clone(),
            owner: "relay".into(),
            now_ms: t,
            error: "permanent".into(),
            retry_at_ms: None,
        })
        .await
        .unwrap();
    let evt0 = vec![first.event.inbox_id.clone()];
    assert_eq!(
        within(EventQuery {
            destination: Some("d1".into()),
            delivery_status: Some(OutboxStatus::Failed),
            ..query(100)
        })
        .await,
        evt0
    );
    assert_eq!(
        within(EventQuery {
            delivery_status: Some(OutboxStatus::Failed),
            ..query(100)
        })
        .await,
        evt0
    );
    assert!(
        within(EventQuery {
            destination: Some("d2".into()),
            ..query(100)
        })
        .await
        .is_empty()
    );
    // The ignored row was never processed: it has no delivery.
    assert_eq!(
        within(EventQuery {
            destination: Some("d1".into()),
            ..query(100)
        })
        .await,
        expect(&|r| r.status != InboxStatus::Ignored)
    );
    store.close().await;
}

/// Audit rows round-trip with their result and filter, newest first.
pub async fn audit_entries_round_trip(store: Arc<dyn Store>) {
    let t = now_ms();
    for (i, result) in ["ok", "denied"].into_iter().enumerate() {
        store
            .record_audit(NewAudit {
                audit_id: format!("a{i}"),
                at_ms: t + i as i64,
                actor: "ops".into(),
                action: "replay".into(),
                target: "ib-1".into(),
                filter: (i == 1).then(|| r#"{"status":"failed"}"#.to_owned()),
                result: result.into(),
                detail: Some("{}".into()),
            })
            .await
            .unwrap();
    }
    let log = store.audit_log(10).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].result, "denied");
    assert_eq!(log[0].filter.as_deref(), Some(r#"{"status":"failed"}"#));
    assert_eq!(log[1].result, "ok");
    assert_eq!(log[1].filter, None);
    assert_eq!(log[1].actor, "ops");
    store.close().await;
}

/// Replay puts a PROCESSED or IGNORED row back to work; never a RECEIVED row a worker may
/// hold, and the holder of an expired lease cannot complete a replayed row.
pub async fn replay_is_fenced_against_leases(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    let mut ignored = row("ep-rp", "evt_ignored");
    ignored.status = InboxStatus::Ignored;
    let ignored = store.accept(ignored).await.unwrap().inbox_id().to_owned();
    let leased_id = store
        .accept(row("ep-rp", "evt_leased"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    assert_eq!(
        store.replay_event(&ignored, t).await.unwrap(),
        OperationResult::Done
    );
    // Both are RECEIVED now; worker-1 leases them.
    let leased = store.lease_due("worker-1", t, 5_000, 10).await.unwrap();
    assert_eq!(leased.len(), 2);
    assert_eq!(
        store.replay_event(&leased_id, t + 1).await.unwrap(),
        OperationResult::InProgress,
        "a leased row is not touched"
    );
    assert_eq!(
        store.replay_event("ib-missing", t).await.unwrap(),
        OperationResult::NotFound
    );
    for id in [&ignored, &leased_id] {
        store
            .complete(ProcessingResult {
                inbox_id: id.clone(),
                owner: "worker-1".into(),
                now_ms: t + 2,
                handlers: Vec::new(),
                destinations: vec!["d".into()],
            })
            .await
            .unwrap();
    }
    let e = store.get_event(&ignored).await.unwrap().unwrap();
    assert_eq!(
        e.status,
        InboxStatus::Processed,
        "a replayed IGNORED row ends PROCESSED"
    );
    // Replay of a PROCESSED row: worker-2 takes it; worker-2's lease expires, worker-3 takes
    // over after another replay... the late holder is fenced.
    assert_eq!(
        store.replay_event(&leased_id, t + 3).await.unwrap(),
        OperationResult::Done
    );
    let e = store.get_event(&leased_id).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.attempt_count, e.outcome),
        (InboxStatus::Received, 0, None)
    );
    let again = store.lease_due("worker-2", t + 4, 5_000, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        store
            .complete(ProcessingResult {
                inbox_id: leased_id.clone(),
                owner: "worker-1".into(),
                now_ms: t + 5,
                handlers: Vec::new(),
                destinations: vec!["d".into()],
            })
            .await
            .map_err(|e| matches!(e, ProcessingError::LeaseLost)),
        Err(true),
        "the first lease's holder is fenced out"
    );
    assert_eq!(
        store
            .complete(ProcessingResult {
                inbox_id: leased_id.clone(),
                owner: "worker-2".into(),
                now_ms: t + 5,
                handlers: Vec::new(),
                destinations: vec!["d".into()],
            })
            .await
            .map_err(|e| e.to_string()),
        Ok(Outcome::Applied)
    );
    assert_eq!(
        store.list_deliveries(&leased_id).await.unwrap().len(),
        1,
        "the replay did not add a second delivery to the same destination"
    );
    store.close().await;
}

/// Re-delivery: PENDING again with the same key (or a recorded fresh one), a new row for a
/// destination the event had none for; refused while a relay holds the delivery, for an
/// event not PROCESSED, and for a missing event.
pub async fn redelivery_is_fenced_and_records_fresh_keys(store: Arc<dyn Store>) {
    let t = now_ms() + 1_000;
    let id = store
        .accept(row("ep-rd", "evt_1"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    let redeliver = |destination: &'static str, fresh: Option<&'static str>, at: i64| {
        let (store, id) = (store.clone(), id.clone());
        async move {
            store
                .redeliver(Redelivery {
                    inbox_id: &id,
                    destination,
                    fresh_key: fresh,
                    outbox_id: &format!("ob-{destination}-{at}"),
                    now_ms: at,
                })
                .await
                .unwrap()
        }
    };
    assert_eq!(
        redeliver("d1", None, t).await,
        OperationResult::NotProcessed
    );
    process_all(&store, t, &["d1"]).await;
    let leased = store
        .lease_deliveries("d1", "relay-1", t, 5_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(
        redeliver("d1", None, t + 1).await,
        OperationResult::InProgress,
        "a delivery a relay holds is not touched"
    );
    store
        .mark_delivered(&leased[0].delivery.outbox_id, "relay-1", t + 2, None)
        .await
        .unwrap();
    assert_eq!(redeliver("d1", None, t + 3).await, OperationResult::Done);
    let d = &store.list_deliveries(&id).await.unwrap()[0];
    assert_eq!(
        (d.status, d.attempt_count, d.idempotency_key.as_deref()),
        (OutboxStatus::Pending, 0, None)
    );
    let again = store
        .lease_deliveries("d1", "relay-2", t + 3, 5_000, 10)
        .await
        .unwrap();
    assert_eq!(again[0].delivery.idempotency_key(&again[0].event), id);
    assert_eq!(
        redeliver("d1", Some("fresh-key-1"), t + 4).await,
        OperationResult::InProgress
    );
    // relay-2's lease expires: a re-delivery with a fresh key takes the row, and relay-2's
    // late mark is fenced out.
    assert_eq!(
        redeliver("d1", Some("fresh-key-1"), t + 6_000).await,
        OperationResult::Done
    );
    assert_eq!(
        store
            .mark_delivered(&again[0].delivery.outbox_id, "relay-2", t + 6_001, None)
            .await
            .map_err(|e| matches!(e, ProcessingError::LeaseLost)),
        Err(true)
    );
    let third = store
        .lease_deliveries("d1", "relay-3", t + 6_001, 5_000, 10)
        .await
        .unwrap();
    assert_eq!(
        third[0].delivery.idempotency_key(&third[0].event),
        "fresh-key-1"
    );
    store
        .mark_delivered(&third[0].delivery.outbox_id, "relay-3", t + 6_002, None)
        .await
        .unwrap();
    assert_eq!(
        redeliver("d1", None, t + 6_003).await,
        OperationResult::Done,
        "without fresh_key the recorded key stays"
    );
    let d = &store.list_deliveries(&id).await.unwrap()[0];
    assert_eq!(d.idempotency_key.as_deref(), Some("fresh-key-1"));
    // A destination it had no delivery for gets one.
    assert_eq!(
        redeliver("d2", None, t + 6_004).await,
        OperationResult::Done
    );
    assert_eq!(
        store.outbox_destinations(&id).await.unwrap(),
        vec!["d1".to_owned(), "d2".to_owned()]
    );
    let missing = store
        .redeliver(Redelivery {
            inbox_id: "ib-missing",
            destination: "d1",
            fresh_key: None,
            outbox_id: "ob-x",
            now_ms: t,
        })
        .await
        .unwrap();
    assert_eq!(missing, OperationResult::NotFound);
    store.close().await;
}
