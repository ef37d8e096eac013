//! Conformance checks of sequenced deltas (`hookgate_store::sequence`): waiting, filling a
//! gap, following in order, stale events, gap holds and releases applied in order. Pulled
//! into the suite by `mod.rs`, so every check runs on every backend.

use std::sync::Arc;

use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::{
    Completion, NewInboxRow, ProcessingResult, ReleaseRequest, SequenceGapCheck, SequenceStart,
    Store,
};

use super::{StoreTestExt, now_ms, row};

fn sequenced(endpoint: &str, event_id: &str, object_id: &str, sequence: i64) -> NewInboxRow {
    let mut r = row(endpoint, event_id);
    r.object_id = Some(object_id.to_owned());
    r.sequence_number = Some(sequence);
    r
}

fn result(inbox_id: &str, now: i64, start: SequenceStart) -> ProcessingResult {
    ProcessingResult {
        inbox_id: inbox_id.to_owned(),
        owner: "w".to_owned(),
        now_ms: now,
        handlers: Vec::new(),
        destinations: vec!["sink".to_owned()],
        sequence: Some(start),
    }
}

/// Leases what is due at `t` and completes each row; the ids leased with how each ended.
async fn drain(store: &Arc<dyn Store>, t: i64, start: SequenceStart) -> Vec<(String, Completion)> {
    let mut out = Vec::new();
    for leased in store.lease_due("w", t, 30_000, 16).await.unwrap() {
        let done = store
            .complete_all(vec![result(&leased.inbox_id, t + 1, start)])
            .await
            .pop()
            .unwrap()
            .unwrap();
        out.push((leased.inbox_id, done));
    }
    out
}

async fn accept(store: &Arc<dyn Store>, r: NewInboxRow) -> String {
    store.accept(r).await.unwrap().inbox_id().to_owned()
}

/// 1, 3, 2: 3 waits for 2 (not due, never leased, its attempt not counted); 2 fills the gap
/// and makes 3 due at once; 3 follows. A second event carrying 2 is stale and writes nothing.
pub async fn sequence_gap_waits_fills_and_follows(store: Arc<dyn Store>) {
    let one = SequenceStart::One;
    // Processing runs well after the arrivals (gap windows count from those).
    let arrived = now_ms();
    let t = arrived + 3_600_000;
    let s1 = accept(&store, sequenced("ep-seq", "e1", "obj", 1)).await;
    assert_eq!(
        drain(&store, t, one).await,
        [(s1.clone(), Completion::Processed(Outcome::Applied))]
    );
    let s3 = accept(&store, sequenced("ep-seq", "e3", "obj", 3)).await;
    assert_eq!(
        drain(&store, t + 10, one).await,
        [(s3.clone(), Completion::Waiting { for_sequence: 2 })]
    );
    let waiting = store.get_event(&s3).await.unwrap().unwrap();
    assert_eq!(waiting.status, InboxStatus::Received);
    assert_eq!(waiting.next_attempt_at_ms, None, "not due");
    assert_eq!(waiting.attempt_count, 0, "its attempt is not counted");
    assert_eq!(waiting.sequence_waiting_for, Some(2));
    assert!(store.outbox_destinations(&s3).await.unwrap().is_empty());
    assert!(
        store
            .lease_due("w", t + 1_000_000, 30_000, 16)
            .await
            .unwrap()
            .is_empty(),
        "a waiting row is never leased"
    );
    assert_eq!(store.backlog().await.unwrap().sequence_gaps_open, 1);

    let s2 = accept(&store, sequenced("ep-seq", "e2", "obj", 2)).await;
    assert_eq!(
        drain(&store, t + 20, one).await,
        [(s2.clone(), Completion::Processed(Outcome::Applied))]
    );
    let followed = store.get_event(&s3).await.unwrap().unwrap();
    assert_eq!(followed.next_attempt_at_ms, Some(t + 21), "due at once");
    assert_eq!(followed.sequence_waiting_for, None);
    assert_eq!(store.backlog().await.unwrap().sequence_gaps_open, 0);
    assert_eq!(
        drain(&store, t + 30, one).await,
        [(s3.clone(), Completion::Processed(Outcome::Applied))]
    );
    for id in [&s1, &s2, &s3] {
        assert_eq!(store.outbox_destinations(id).await.unwrap(), ["sink"]);
    }

    let again = accept(&store, sequenced("ep-seq", "e2-again", "obj", 2)).await;
    assert_eq!(
        drain(&store, t + 40, one).await,
        [(again.clone(), Completion::Processed(Outcome::Stale))]
    );
    assert!(store.outbox_destinations(&again).await.unwrap().is_empty());
    // Another object has a sequence of its own, and the first event of one must be 1.
    let other = accept(&store, sequenced("ep-seq", "o2", "other", 2)).await;
    assert_eq!(
        drain(&store, t + 50, one).await,
        [(other, Completion::Waiting { for_sequence: 1 })]
    );
}

/// `sequence_start = "any"`: 5 starts the object; 7, 8 and 9 wait for 6. The gap check holds
/// them with a reason naming 6 once the gap is past its window; a release makes only
/// the lowest due, each applied one the next, over the gap; the late 6 is then stale.
pub async fn sequence_gaps_are_held_and_released_in_order(store: Arc<dyn Store>) {
    let any = SequenceStart::Any;
    // Processing runs well after the arrivals (gap windows count from those).
    let arrived = now_ms();
    let t = arrived + 3_600_000;
    let s5 = accept(&store, sequenced("ep-gap", "e5", "obj", 5)).await;
    assert_eq!(
        drain(&store, t, any).await,
        [(s5, Completion::Processed(Outcome::Applied))]
    );
    let mut ahead = Vec::new();
    for n in [9, 7, 8] {
        ahead.push(accept(&store, sequenced("ep-gap", &format!("e{n}"), "obj", n)).await);
    }
    let waited = drain(&store, t + 10, any).await;
    assert_eq!(waited.len(), 3);
    assert!(
        waited
            .iter()
            .all(|(_, c)| *c == Completion::Waiting { for_sequence: 6 })
    );
    let check = |opened_before_ms: i64, max_waiting: u32| SequenceGapCheck {
        endpoint_id: "ep-gap".into(),
        opened_before_ms,
        max_waiting,
        reason: ": test".into(),
    };
    // Neither limit passed: nothing held.
    assert!(
        store
            .hold_sequence_gaps(check(arrived - 60_000, 100))
            .await
            .unwrap()
            .is_empty()
    );
    let held = store
        .hold_sequence_gaps(check(t + 1_000_000, 100))
        .await
        .unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (held[0].object_id.as_str(), held[0].missing, held[0].rows),
        ("obj", 6, 3)
    );
    for id in &ahead {
        let rec = store.get_event(id).await.unwrap().unwrap();
        assert_eq!(rec.status, InboxStatus::Held);
        let reason = rec.held_reason.unwrap();
        assert!(reason.contains("sequence 6"), "{reason}");
        assert!(reason.ends_with(": test"), "{reason}");
    }
    assert_eq!(store.backlog().await.unwrap().sequence_gaps_open, 1);

    let released = store
        .release_held(ReleaseRequest {
            endpoint_id: Some("ep-gap".into()),
            inbox_id: None,
            now_ms: t + 100,
        })
        .await
        .unwrap();
    assert_eq!(released, 3);
    assert_eq!(store.backlog().await.unwrap().sequence_gaps_open, 0);
    // One at a time, in sequence order: 7, then 8, then 9.
    for (n, id) in [(7, &ahead[1]), (8, &ahead[2]), (9, &ahead[0])] {
        assert_eq!(
            drain(&store, t + 100 + n, any).await,
            [(id.clone(), Completion::Processed(Outcome::Applied))],
            "sequence {n}"
        );
    }
    let late = accept(&store, sequenced("ep-gap", "e6", "obj", 6)).await;
    assert_eq!(
        drain(&store, t + 200, any).await,
        [(late, Completion::Processed(Outcome::Stale))]
    );
}

/// An object with more waiting events than `sequence_gap_max` is held at once, whatever the
/// age of its gap.
pub async fn too_many_waiting_events_are_held(store: Arc<dyn Store>) {
    let one = SequenceStart::One;
    // Processing runs well after the arrivals (gap windows count from those).
    let arrived = now_ms();
    let t = arrived + 3_600_000;
    for n in [3, 4, 5] {
        accept(&store, sequenced("ep-max", &format!("m{n}"), "obj", n)).await;
    }
    assert_eq!(drain(&store, t, one).await.len(), 3);
    let check = |max_waiting| SequenceGapCheck {
        endpoint_id: "ep-max".into(),
        opened_before_ms: arrived - 60_000,
        max_waiting,
        reason: String::new(),
    };
    assert!(store.hold_sequence_gaps(check(3)).await.unwrap().is_empty());
    let held = store.hold_sequence_gaps(check(2)).await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!((held[0].missing, held[0].rows), (1, 3));
}
