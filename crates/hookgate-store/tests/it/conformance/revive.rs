//! IGNORED is replayable by design: a provider's redelivery of an event stored `IGNORED`,
//! once the endpoint's allow-list admits its type (the redelivered row arrives `RECEIVED`),
//! puts the stored row back to work in the redelivery's acceptance transaction, answered
//! `Duplicate` with the stored id — on every backend.

use std::sync::Arc;

use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::{Acceptance, NewInboxRow, ProcessingResult, Store};

use super::{StoreTestExt, now_ms, row};

fn ignored(r: NewInboxRow) -> NewInboxRow {
    NewInboxRow {
        status: InboxStatus::Ignored,
        source: hookgate_core::EventSource::Webhook,
        api_version: None,
        ..r
    }
}

fn at(r: NewInboxRow, received_at_ms: i64) -> NewInboxRow {
    NewInboxRow {
        received_at_ms,
        ..r
    }
}

/// Stored `IGNORED`; a redelivery still ignored changes nothing; one now allowed makes the
/// stored row `RECEIVED`, due at the redelivery's receipt with its attempts reset, then it is
/// leased and processed like any row; a later redelivery of the processed row changes nothing.
/// A row whose payload was purged stays `IGNORED`. Several revivals in one request's unit
/// (and beside a new row) commit together.
pub async fn ignored_row_redelivered_when_allowed_goes_back_to_work(store: Arc<dyn Store>) {
    let t0 = now_ms() - 60_000;
    let first = ignored(at(row("ep-rv", "evt_rv"), t0));
    let id = first.inbox_id.clone();
    assert_eq!(
        store.accept(first).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: id.clone()
        }
    );

    // Still outside the allow-list: a plain duplicate, nothing changes.
    let again = store
        .accept(ignored(at(row("ep-rv", "evt_rv"), t0 + 1_000)))
        .await
        .unwrap();
    assert_eq!(
        again,
        Acceptance::Duplicate {
            inbox_id: id.clone()
        }
    );
    let e = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(e.status, InboxStatus::Ignored);
    assert_eq!(e.next_attempt_at_ms, None);
    assert!(
        store
            .lease_due("w", now_ms() + 1_000, 30_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "an IGNORED row is never leased"
    );

    // Allowed now: back to work, same id.
    let revived_at = t0 + 2_000;
    let redelivery = at(row("ep-rv", "evt_rv"), revived_at);
    let redelivery_id = redelivery.inbox_id.clone();
    assert_eq!(
        store.accept(redelivery).await.unwrap(),
        Acceptance::Duplicate {
            inbox_id: id.clone()
        }
    );
    assert!(store.get_event(&redelivery_id).await.unwrap().is_none());
    let e = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(e.status, InboxStatus::Received);
    assert_eq!(e.next_attempt_at_ms, Some(revived_at));
    assert_eq!(e.attempt_count, 0);
    assert_eq!(e.received_at_ms, t0, "received_at stays the first copy's");
    assert_eq!(store.count_inbox().await.unwrap(), 1);

    let leased = store
        .lease_due("w", now_ms() + 1_000, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(
        leased
            .iter()
            .map(|r| r.inbox_id.as_str())
            .collect::<Vec<_>>(),
        vec![id.as_str()]
    );
    assert_eq!(
        leased[0].payload.as_deref(),
        Some(b"sealed:evt_rv".as_slice()),
        "the first copy's payload is processed"
    );
    let outcome = store
        .complete(ProcessingResult {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: now_ms() + 1_000,
            handlers: Vec::new(),
            destinations: Vec::new(),
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied);

    // A redelivery of a PROCESSED row is a plain duplicate.
    store
        .accept(at(row("ep-rv", "evt_rv"), t0 + 3_000))
        .await
        .unwrap();
    let e = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(e.status, InboxStatus::Processed);
    assert_eq!(e.attempt_count, 1);

    // A purged IGNORED row stays IGNORED: without its payload it is never processed again.
    let old = now_ms() - 40 * 86_400_000;
    let purged = ignored(at(row("ep-rv", "evt_purged"), old));
    let purged_id = purged.inbox_id.clone();
    store.accept(purged).await.unwrap();
    assert_eq!(
        store
            .purge_expired_payloads(old + 1, now_ms(), 10)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store.accept(row("ep-rv", "evt_purged")).await.unwrap(),
        Acceptance::Duplicate {
            inbox_id: purged_id.clone()
        }
    );
    let e = store.get_event(&purged_id).await.unwrap().unwrap();
    assert_eq!(e.status, InboxStatus::Ignored);
    assert!(!e.payload_stored());

    // One request: two revivals and a new row, one unit.
    let a = ignored(row("ep-rv", "evt_a"));
    let b = ignored(row("ep-rv", "evt_b"));
    let (a_id, b_id) = (a.inbox_id.clone(), b.inbox_id.clone());
    store.accept_request(vec![a, b]).await.unwrap();
    let new = row("ep-rv", "evt_new");
    let new_id = new.inbox_id.clone();
    let answers = store
        .accept_request(vec![row("ep-rv", "evt_b"), new, row("ep-rv", "evt_a")])
        .await
        .unwrap();
    assert_eq!(
        answers,
        vec![
            Acceptance::Duplicate {
                inbox_id: b_id.clone()
            },
            Acceptance::Accepted {
                inbox_id: new_id.clone()
            },
            Acceptance::Duplicate {
                inbox_id: a_id.clone()
            },
        ]
    );
    for id in [&a_id, &b_id, &new_id] {
        let e = store.get_event(id).await.unwrap().unwrap();
        assert_eq!(e.status, InboxStatus::Received, "{id}");
    }
    store.close().await;
}
