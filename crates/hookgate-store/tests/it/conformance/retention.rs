//! Retention and deletion on request (`RetentionStore`), on every backend: which payloads
//! and rows expire, what follows a deleted row, the operator's purge with its audit row, and
//! that a purged event cannot be replayed.

use std::sync::Arc;

use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::retention::AUDIT_EVENTS_PURGE;
use hookgate_store::{
    ExpiredRows, FailedAttempt, FailedDelivery, HandlerOutput, NewInboxRow, ProcessingResult,
    PurgeRequest, PurgeSelection, ReplayDigest, Store, StoreError,
};

use super::{StoreTestExt, now_ms, row};

const DAY_MS: i64 = 86_400_000;

/// What a test row goes through after acceptance.
enum Life<'a> {
    /// Stays `RECEIVED`.
    Waiting,
    /// Processed, with a marker per consumer and a `PENDING` delivery per destination.
    Processed {
        consumers: &'a [&'a str],
        destinations: &'a [&'a str],
    },
    /// Its only attempt failed for good.
    Failed,
}

/// Accepts `r` and takes it through `life`, settled at time `t` (leased now, so that it is
/// due whatever `t` is); returns its inbox id. Each row is settled before the next is
/// accepted, so the lease finds exactly this one.
async fn stored(store: &Arc<dyn Store>, r: NewInboxRow, life: Life<'_>, t: i64) -> String {
    let id = store.accept(r).await.unwrap().inbox_id().to_owned();
    if matches!(life, Life::Waiting) {
        return id;
    }
    let leased = store
        .lease_due("worker", now_ms() + 1_000, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1, "only the new row is due");
    assert_eq!(leased[0].inbox_id, id);
    match life {
        Life::Processed {
            consumers,
            destinations,
        } => {
            store
                .complete(ProcessingResult {
                    inbox_id: id.clone(),
                    owner: "worker".into(),
                    now_ms: t,
                    handlers: consumers
                        .iter()
                        .map(|c| HandlerOutput {
                            consumer: (*c).to_owned(),
                            changes: Vec::new(),
                        })
                        .collect(),
                    destinations: destinations.iter().map(|d| (*d).to_owned()).collect(),
                })
                .await
                .unwrap();
        }
        Life::Failed => store
            .fail_attempt(FailedAttempt {
                inbox_id: id.clone(),
                owner: "worker".into(),
                now_ms: t,
                error: "permanent: test".into(),
                retry_at_ms: None,
            })
            .await
            .unwrap(),
        Life::Waiting => unreachable!(),
    }
    id
}

fn received_at(mut r: NewInboxRow, at_ms: i64) -> NewInboxRow {
    r.received_at_ms = at_ms;
    r
}

async fn payload_stored(store: &Arc<dyn Store>, id: &str) -> bool {
    let e = store.get_event(id).await.unwrap().expect(id);
    assert_eq!(
        e.payload.is_some(),
        e.payload_stored(),
        "the payload is readable exactly while it is recorded as stored"
    );
    e.payload_stored()
}

/// Only the payloads of `PROCESSED` and `IGNORED` rows past the window are purged, oldest
/// first, in batches of the limit; `RECEIVED` and `FAILED` rows and rows with a delivery still
/// `PENDING` keep theirs; the rows stay as id records (a redelivery is a duplicate).
pub async fn retention_purges_expired_payloads_of_finished_rows_only(store: Arc<dyn Store>) {
    let now = now_ms();
    let old = now - 40 * DAY_MS;
    let cutoff = now - 30 * DAY_MS;
    let done = |c: &'static [&'static str]| Life::Processed {
        consumers: c,
        destinations: &[],
    };
    let processed_a = stored(&store, received_at(row("ep", "a"), old), done(&[]), old).await;
    let processed_b = stored(&store, received_at(row("ep", "b"), old + 1), done(&[]), old).await;
    let mut ignored = received_at(row("ep", "ignored"), old + 2);
    ignored.status = InboxStatus::Ignored;
    let ignored = store.accept(ignored).await.unwrap().inbox_id().to_owned();
    let failed = stored(&store, received_at(row("ep", "f"), old), Life::Failed, old).await;
    let pending = stored(
        &store,
        received_at(row("ep", "p"), old),
        Life::Processed {
            consumers: &[],
            destinations: &["d"],
        },
        old,
    )
    .await;
    let recent = stored(&store, row("ep", "recent"), done(&[]), now).await;
    let waiting = stored(&store, received_at(row("ep", "w"), old), Life::Waiting, old).await;

    assert_eq!(
        store.purge_expired_payloads(cutoff, now, 2).await.unwrap(),
        2,
        "a batch stops at its limit"
    );
    assert_eq!(
        store.purge_expired_payloads(cutoff, now, 2).await.unwrap(),
        1
    );
    assert_eq!(
        store.purge_expired_payloads(cutoff, now, 2).await.unwrap(),
        0
    );
    for id in [&processed_a, &processed_b, &ignored] {
        assert!(!payload_stored(&store, id).await, "{id} purged");
        let e = store.get_event(id).await.unwrap().unwrap();
        assert_eq!(e.payload_purged_at_ms, Some(now), "recorded when");
    }
    for id in [&failed, &pending, &recent, &waiting] {
        assert!(payload_stored(&store, id).await, "{id} keeps its payload");
    }
    assert_eq!(
        store.oldest_stored_payload_ms().await.unwrap(),
        Some(old),
        "the waiting and failed rows still store theirs"
    );

    // The id record still answers a redelivery.
    let again = received_at(row("ep", "a"), now);
    assert_eq!(store.accept(again).await.unwrap().inbox_id(), processed_a);

    // Once its delivery is made, the pending row's payload goes too.
    let d = store
        .lease_deliveries("d", "relay", now, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(d.len(), 1);
    store
        .mark_delivered(&d[0].delivery.outbox_id, "relay", now, None)
        .await
        .unwrap();
    assert_eq!(
        store.purge_expired_payloads(cutoff, now, 10).await.unwrap(),
        1
    );
    assert!(!payload_stored(&store, &pending).await);
    store.close().await;
}

/// An expired id record goes with its payload, deliveries and processed markers; an
/// endpoint-scoped call touches only its endpoint, an unscoped one every endpoint;
/// `RECEIVED` and `FAILED` rows stay; the key is new again afterwards. Object state last
/// changed before the window goes too.
pub async fn expired_rows_go_with_what_follows_them(store: Arc<dyn Store>) {
    let now = now_ms();
    let old = now - 100 * DAY_MS;
    let cutoff = now - 90 * DAY_MS;
    let mut versioned = received_at(row("ep", "gone"), old);
    versioned.object_id = Some("obj_1".into());
    versioned.object_version = Some(3);
    let gone = stored(
        &store,
        versioned,
        Life::Processed {
            consumers: &["projection"],
            destinations: &["d1", "d2"],
        },
        old,
    )
    .await;
    let other_endpoint = stored(
        &store,
        received_at(row("ep-other", "x"), old),
        Life::Processed {
            consumers: &[],
            destinations: &[],
        },
        old,
    )
    .await;
    let failed = stored(&store, received_at(row("ep", "f"), old), Life::Failed, old).await;
    let waiting = stored(&store, received_at(row("ep", "w"), old), Life::Waiting, old).await;
    assert_eq!(
        store
            .processed_markers("stripe", "ep", "gone")
            .await
            .unwrap(),
        vec!["projection".to_owned()]
    );

    let deleted = store
        .delete_expired_rows(ExpiredRows {
            endpoint_id: Some("ep"),
            received_before_ms: cutoff,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(deleted.inbox, 1);
    assert_eq!(deleted.payloads, 1, "its payload was still stored");
    assert_eq!(deleted.outbox, 2);
    assert_eq!(deleted.processed_markers, 1);
    assert!(store.get_event(&gone).await.unwrap().is_none());
    assert!(store.list_deliveries(&gone).await.unwrap().is_empty());
    assert!(
        store
            .processed_markers("stripe", "ep", "gone")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_event(&other_endpoint).await.unwrap().is_some());
    assert!(store.get_event(&failed).await.unwrap().is_some());
    assert!(store.get_event(&waiting).await.unwrap().is_some());

    assert_eq!(
        store.object_version("stripe", "ep", "obj_1").await.unwrap(),
        Some(3)
    );
    assert_eq!(
        store
            .delete_expired_object_state("ep", cutoff, 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store.object_version("stripe", "ep", "obj_1").await.unwrap(),
        None
    );

    let unscoped = store
        .delete_expired_rows(ExpiredRows {
            endpoint_id: None,
            received_before_ms: cutoff,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(unscoped.inbox, 1, "the other endpoint's row");
    assert!(store.get_event(&other_endpoint).await.unwrap().is_none());
    assert_eq!(
        store.count_inbox().await.unwrap(),
        2,
        "FAILED and RECEIVED stay"
    );

    // Past its window the key is new again.
    let back = row("ep", "gone");
    let back_id = back.inbox_id.clone();
    assert_eq!(store.accept(back).await.unwrap().inbox_id(), back_id);
    store.close().await;
}

/// An expired replay claim is deleted; a live one stays.
pub async fn ended_replay_claims_are_deleted(store: Arc<dyn Store>) {
    let now = now_ms();
    let mut ended = received_at(row("ep", "r1"), now - 10_000);
    ended.replay_digest = Some(ReplayDigest {
        digest: [1; 32],
        window_ms: 1_000,
    });
    let mut live = row("ep", "r2");
    live.replay_digest = Some(ReplayDigest {
        digest: [2; 32],
        window_ms: 60_000,
    });
    store.accept(ended).await.unwrap();
    store.accept(live).await.unwrap();
    assert_eq!(
        store.delete_expired_replay_claims(now, 10).await.unwrap(),
        1
    );
    assert_eq!(
        store.delete_expired_replay_claims(now, 10).await.unwrap(),
        0
    );
    let mut replay = row("ep", "r3");
    replay.replay_digest = Some(ReplayDigest {
        digest: [2; 32],
        window_ms: 60_000,
    });
    assert!(
        matches!(
            store.accept(replay).await.unwrap(),
            hookgate_store::Acceptance::ReplaySuspected { .. }
        ),
        "the live claim still holds"
    );
    store.close().await;
}

/// An operator's purge removes the payloads it names at once (any age), leaves `RECEIVED`
/// rows alone and says so, writes one audit row per batch with the actor and the ids, and
/// afterwards the event can be neither retried nor redelivered.
pub async fn operator_purge_is_audited_and_blocks_replays(store: Arc<dyn Store>) {
    let now = now_ms();
    let failed = stored(&store, row("ep", "f"), Life::Failed, now).await;
    let delivered_badly = stored(
        &store,
        row("ep", "d"),
        Life::Processed {
            consumers: &[],
            destinations: &["dest"],
        },
        now,
    )
    .await;
    let leased = store
        .lease_deliveries("dest", "relay", now, 30_000, 10)
        .await
        .unwrap();
    store
        .fail_delivery(FailedDelivery {
            outbox_id: leased[0].delivery.outbox_id.clone(),
            owner: "relay".into(),
            now_ms: now,
            error: "permanent: http status 400".into(),
            retry_at_ms: None,
        })
        .await
        .unwrap();
    let untouched = stored(&store, row("ep-2", "u"), Life::Failed, now).await;
    let waiting = stored(&store, row("ep", "w"), Life::Waiting, now).await;

    assert!(matches!(
        store
            .purge_payloads(PurgeRequest {
                selection: &PurgeSelection::default(),
                limit: 10,
                now_ms: now,
                actor: "alice",
                audit_id: "audit-0",
            })
            .await,
        Err(StoreError::Config(_))
    ));

    let selection = PurgeSelection {
        inbox_ids: vec![failed.clone(), delivered_badly.clone(), waiting.clone()],
        endpoint_id: Some("ep".into()),
        received_before_ms: None,
    };
    let batch = store
        .purge_payloads(PurgeRequest {
            selection: &selection,
            limit: 10,
            now_ms: now,
            actor: "alice",
            audit_id: "audit-1",
        })
        .await
        .unwrap();
    let mut purged = batch.purged.clone();
    purged.sort();
    let mut expected = vec![failed.clone(), delivered_badly.clone()];
    expected.sort();
    assert_eq!(purged, expected);
    assert_eq!(batch.still_received, 1);
    assert!(!payload_stored(&store, &failed).await);
    assert!(!payload_stored(&store, &delivered_badly).await);
    assert!(payload_stored(&store, &waiting).await);
    assert!(payload_stored(&store, &untouched).await);

    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 1);
    let a = &audit[0];
    assert_eq!(
        (a.audit_id.as_str(), a.actor.as_str(), a.action.as_str()),
        ("audit-1", "alice", AUDIT_EVENTS_PURGE)
    );
    assert_eq!(a.at_ms, now);
    assert!(a.target.contains(&failed) && a.target.contains("endpoint=ep"));
    let detail = a.detail.as_deref().unwrap();
    assert!(detail.contains(&failed) && detail.contains(&delivered_badly));
    assert!(!detail.contains(&waiting));

    // Nothing left to process or deliver: replays are refused by the store.
    assert!(!store.retry_event(&failed, now).await.unwrap());
    assert_eq!(
        store.get_event(&failed).await.unwrap().unwrap().status,
        InboxStatus::Failed
    );
    assert_eq!(
        store.retry_deliveries(&delivered_badly, now).await.unwrap(),
        0
    );
    assert_eq!(
        store.list_deliveries(&delivered_badly).await.unwrap()[0].status,
        OutboxStatus::Failed
    );
    // An unpurged FAILED row still retries.
    assert!(store.retry_event(&untouched, now).await.unwrap());

    // A second purge of the same selection finds nothing, and is still audited.
    let again = store
        .purge_payloads(PurgeRequest {
            selection: &selection,
            limit: 10,
            now_ms: now + 1,
            actor: "bob",
            audit_id: "audit-2",
        })
        .await
        .unwrap();
    assert!(again.purged.is_empty());
    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].actor, "bob", "newest first");
    store.close().await;
}
