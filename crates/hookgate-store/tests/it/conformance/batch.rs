//! Conformance: a request's rows as one unit (`accept_request`), and the replay defence by
//! body digest.

use std::collections::HashMap;
use std::sync::Arc;

use hookgate_store::{Acceptance, NewInboxRow, ReplayDigest, Store, StoreError};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::{StoreTestExt, new_inbox_id, now_ms, row};

/// The idempotency window the replay checks use.
const WINDOW_MS: i64 = 60_000;

/// A row of a pack with the body-digest defence: `body` stands for the body's digest.
fn digest_row(endpoint_id: &str, event_id: &str, body: u8, received_at_ms: i64) -> NewInboxRow {
    NewInboxRow {
        received_at_ms,
        replay_digest: Some(ReplayDigest {
            digest: [body; 32],
            window_ms: WINDOW_MS,
        }),
        ..row(endpoint_id, event_id)
    }
}

fn ids(acceptances: &[Acceptance]) -> Vec<&str> {
    acceptances.iter().map(Acceptance::inbox_id).collect()
}

/// A request's rows are each accepted under their own key, in order; an element whose key
/// is already stored is `Duplicate` with the stored id, and the same id twice in one request
/// converges on one row. An empty request stores nothing.
pub async fn request_rows_commit_together(store: Arc<dyn Store>) {
    let earlier = row("ep-req", "evt_b");
    store.accept(earlier.clone()).await.unwrap();

    let rows = vec![
        row("ep-req", "evt_a"),
        row("ep-req", "evt_b"),
        row("ep-req", "evt_c"),
        row("ep-req", "evt_a"),
    ];
    let got = store.accept_request(rows.clone()).await.unwrap();
    assert_eq!(
        got,
        vec![
            Acceptance::Accepted {
                inbox_id: rows[0].inbox_id.clone()
            },
            Acceptance::Duplicate {
                inbox_id: earlier.inbox_id.clone()
            },
            Acceptance::Accepted {
                inbox_id: rows[2].inbox_id.clone()
            },
            Acceptance::Duplicate {
                inbox_id: rows[0].inbox_id.clone()
            },
        ]
    );
    assert!(store.get_event(&rows[1].inbox_id).await.unwrap().is_none());
    assert!(store.get_event(&rows[3].inbox_id).await.unwrap().is_none());
    assert_eq!(
        store.distinct_event_ids("ep-req").await.unwrap(),
        vec!["evt_a", "evt_b", "evt_c"]
    );

    // The whole request again (a provider retry): every element a duplicate of its row.
    let again: Vec<NewInboxRow> = ["evt_a", "evt_b", "evt_c"]
        .iter()
        .map(|id| row("ep-req", id))
        .collect();
    let got = store.accept_request(again).await.unwrap();
    assert!(
        got.iter()
            .all(|a| matches!(a, Acceptance::Duplicate { .. }))
    );
    assert_eq!(
        ids(&got),
        vec![
            rows[0].inbox_id.as_str(),
            earlier.inbox_id.as_str(),
            rows[2].inbox_id.as_str()
        ]
    );

    assert!(store.accept_request(Vec::new()).await.unwrap().is_empty());
    assert_eq!(store.count_inbox().await.unwrap(), 3);
    store.close().await;
}

/// One row the store refuses (its inbox id is already another row's: the primary key
/// refuses it on every backend) fails its whole request: nothing of it is stored, its digest
/// is not claimed, and the requests committed beside it are unaffected. The request's keys
/// stay free, so its retry lands whole.
pub async fn refused_row_fails_its_whole_request_only(store: Arc<dyn Store>) {
    let taken = row("ep-unit", "evt_taken");
    store.accept(taken.clone()).await.unwrap();

    let now = now_ms();
    let bad_unit = vec![
        digest_row("ep-unit", "evt_u1", 7, now),
        NewInboxRow {
            inbox_id: taken.inbox_id.clone(),
            ..row("ep-unit", "evt_u2")
        },
        row("ep-unit", "evt_u3"),
    ];
    let neighbours = 48;
    let barrier = Arc::new(Barrier::new(neighbours + 1));
    let mut tasks = JoinSet::new();
    for i in 0..neighbours {
        let store = Arc::clone(&store);
        let barrier = Arc::clone(&barrier);
        // Half single rows, half requests of two.
        let rows = if i % 2 == 0 {
            vec![row("ep-unit", &format!("evt_n{i:02}"))]
        } else {
            vec![
                row("ep-unit", &format!("evt_n{i:02}")),
                row("ep-unit", &format!("evt_n{i:02}_b")),
            ]
        };
        tasks.spawn(async move {
            barrier.wait().await;
            (Some(i), rows.clone(), store.accept_request(rows).await)
        });
    }
    {
        let store = Arc::clone(&store);
        let barrier = Arc::clone(&barrier);
        let rows = bad_unit.clone();
        tasks.spawn(async move {
            barrier.wait().await;
            (None, rows.clone(), store.accept_request(rows).await)
        });
    }
    let mut neighbour_rows = 0;
    while let Some(joined) = tasks.join_next().await {
        let (which, rows, result) = joined.expect("task");
        match which {
            None => assert!(
                matches!(result, Err(StoreError::Unavailable(_))),
                "the refused request: {result:?}"
            ),
            Some(i) => {
                let got = result.unwrap_or_else(|e| panic!("neighbour {i}: {e}"));
                let own: Vec<&str> = rows.iter().map(|r| r.inbox_id.as_str()).collect();
                assert_eq!(ids(&got), own, "neighbour {i}");
                assert!(got.iter().all(|a| matches!(a, Acceptance::Accepted { .. })));
                neighbour_rows += rows.len();
            }
        }
    }
    for r in [&bad_unit[0], &bad_unit[2]] {
        assert!(store.get_event(&r.inbox_id).await.unwrap().is_none());
    }
    let stored = store.distinct_event_ids("ep-unit").await.unwrap();
    assert!(
        !stored.iter().any(|id| id.starts_with("evt_u")),
        "nothing of the refused request is stored: {stored:?}"
    );
    assert_eq!(stored.len(), neighbour_rows + 1);
    assert_eq!(
        store
            .get_event(&taken.inbox_id)
            .await
            .unwrap()
            .unwrap()
            .provider_event_id,
        "evt_taken",
        "the row whose id was reused is untouched"
    );

    // The retry (fresh inbox ids, as the gateway allocates them) lands whole, and its
    // digest is free: the failed request's claim was rolled back with it.
    let retry: Vec<NewInboxRow> = bad_unit
        .iter()
        .map(|r| NewInboxRow {
            inbox_id: new_inbox_id(),
            ..r.clone()
        })
        .collect();
    let got = store.accept_request(retry.clone()).await.unwrap();
    assert_eq!(
        got,
        retry
            .iter()
            .map(|r| Acceptance::Accepted {
                inbox_id: r.inbox_id.clone()
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(
        store.count_inbox().await.unwrap(),
        neighbour_rows as u64 + 4
    );
    store.close().await;
}

/// 40 concurrent copies of one request of five events (fresh inbox ids each, as retries
/// arrive): one set of five rows, and every copy's answers name those rows, in order.
pub async fn concurrent_copies_of_one_request_one_set_of_rows(store: Arc<dyn Store>) {
    let keys = ["evt_1", "evt_2", "evt_3", "evt_4", "evt_5"];
    let copies = 40;
    let barrier = Arc::new(Barrier::new(copies));
    let mut tasks = JoinSet::new();
    for _ in 0..copies {
        let store = Arc::clone(&store);
        let barrier = Arc::clone(&barrier);
        let rows: Vec<NewInboxRow> = keys.iter().map(|k| row("ep-copies", k)).collect();
        tasks.spawn(async move {
            barrier.wait().await;
            let got = store.accept_request(rows.clone()).await;
            (rows, got)
        });
    }
    let mut answers = Vec::new();
    let mut winners: HashMap<String, String> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (rows, got) = joined.expect("task");
        let got = got.unwrap_or_else(|e| panic!("copy failed: {e}"));
        assert_eq!(got.len(), keys.len());
        for (r, a) in rows.iter().zip(&got) {
            if let Acceptance::Accepted { inbox_id } = a {
                assert_eq!(inbox_id, &r.inbox_id);
                let previous = winners.insert(r.provider_event_id.clone(), inbox_id.clone());
                assert!(
                    previous.is_none(),
                    "two Accepted for {}",
                    r.provider_event_id
                );
            } else {
                assert!(matches!(a, Acceptance::Duplicate { .. }), "{a:?}");
            }
        }
        answers.push(got);
    }
    assert_eq!(winners.len(), keys.len());
    for got in &answers {
        let expected: Vec<&str> = keys.iter().map(|k| winners[*k].as_str()).collect();
        assert_eq!(ids(got), expected);
    }
    assert_eq!(store.count_inbox().await.unwrap(), keys.len() as u64);
    store.close().await;
}

/// The same body under another id on the same endpoint, within the window: a duplicate of
/// the first row (distinguishable as a suspected replay), no row. A retry under the SAME id
/// is a plain duplicate; another endpoint, another body, a row without a digest, or the
/// same body after the window are new rows (and after the window the new row holds the body).
pub async fn replayed_body_is_a_duplicate_of_the_first_row(store: Arc<dyn Store>) {
    let t0 = now_ms() - 10 * WINDOW_MS;
    let first = digest_row("ep-gh", "delivery-1", 1, t0);
    assert_eq!(
        store.accept(first.clone()).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: first.inbox_id.clone()
        }
    );
    let replay = digest_row("ep-gh", "delivery-2", 1, t0 + 1_000);
    assert_eq!(
        store.accept(replay.clone()).await.unwrap(),
        Acceptance::ReplaySuspected {
            inbox_id: first.inbox_id.clone()
        }
    );
    assert!(store.get_event(&replay.inbox_id).await.unwrap().is_none());
    assert_eq!(
        store.count_inbox().await.unwrap(),
        1,
        "a replay creates no row"
    );

    // The provider's own retry keeps the id: a duplicate, not a replay.
    let retry = digest_row("ep-gh", "delivery-1", 1, t0 + 2_000);
    assert_eq!(
        store.accept(retry).await.unwrap(),
        Acceptance::Duplicate {
            inbox_id: first.inbox_id.clone()
        }
    );

    let elsewhere = digest_row("ep-other", "delivery-2", 1, t0 + 1_000);
    let other_body = digest_row("ep-gh", "delivery-3", 2, t0 + 1_000);
    let undefended = NewInboxRow {
        received_at_ms: t0 + 1_000,
        ..row("ep-gh", "delivery-4")
    };
    for fresh in [elsewhere, other_body, undefended] {
        assert_eq!(
            store.accept(fresh.clone()).await.unwrap(),
            Acceptance::Accepted {
                inbox_id: fresh.inbox_id.clone()
            },
            "{fresh:?}"
        );
    }
    // A pack without the defence is unaffected by digests: the same event id twice is its
    // only duplicate, whatever the bodies.
    let undefended_copy = NewInboxRow {
        received_at_ms: t0 + 1_500,
        ..row("ep-gh", "delivery-5")
    };
    assert!(matches!(
        store.accept(undefended_copy).await.unwrap(),
        Acceptance::Accepted { .. }
    ));

    // After the window the body is new again, and the new row holds it from then on.
    let later = digest_row("ep-gh", "delivery-6", 1, t0 + WINDOW_MS);
    assert_eq!(
        store.accept(later.clone()).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: later.inbox_id.clone()
        }
    );
    let replay_of_later = digest_row("ep-gh", "delivery-7", 1, t0 + WINDOW_MS + 10);
    assert_eq!(
        store.accept(replay_of_later).await.unwrap(),
        Acceptance::ReplaySuspected {
            inbox_id: later.inbox_id.clone()
        }
    );

    // Inside one request: the second element with the same body is a replay of the first.
    let now = now_ms();
    let unit = vec![
        digest_row("ep-gh", "delivery-8", 3, now),
        digest_row("ep-gh", "delivery-9", 3, now),
    ];
    assert_eq!(
        store.accept_request(unit.clone()).await.unwrap(),
        vec![
            Acceptance::Accepted {
                inbox_id: unit[0].inbox_id.clone()
            },
            Acceptance::ReplaySuspected {
                inbox_id: unit[0].inbox_id.clone()
            },
        ]
    );
    assert_eq!(store.count_inbox().await.unwrap(), 7);
    // No work for a replay: only stored rows are ever leased.
    let leased = store
        .lease_due("w", now_ms() + 1, 30_000, 100)
        .await
        .unwrap();
    assert_eq!(leased.len(), 7);
    store.close().await;
}

/// Hundreds of concurrent replays of one body under different ids: exactly one row, and
/// every other answer a suspected replay naming it; the same on a second endpoint, apart.
pub async fn concurrent_replays_one_row(store: Arc<dyn Store>) {
    let per_endpoint = 200;
    let endpoints = ["ep-r1", "ep-r2"];
    let barrier = Arc::new(Barrier::new(per_endpoint * endpoints.len()));
    let mut tasks = JoinSet::new();
    let now = now_ms();
    for endpoint in endpoints {
        for i in 0..per_endpoint {
            let store = Arc::clone(&store);
            let barrier = Arc::clone(&barrier);
            let r = digest_row(endpoint, &format!("delivery-{i}"), 9, now);
            tasks.spawn(async move {
                barrier.wait().await;
                let got = store.accept(r.clone()).await;
                (r, got)
            });
        }
    }
    let mut winners: HashMap<String, String> = HashMap::new();
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (r, got) = joined.expect("task");
        let got = got.unwrap_or_else(|e| panic!("accept failed: {e}"));
        match &got {
            Acceptance::Accepted { inbox_id } => {
                assert_eq!(inbox_id, &r.inbox_id);
                let previous = winners.insert(r.endpoint_id.clone(), inbox_id.clone());
                assert!(
                    previous.is_none(),
                    "two rows for one body on {}",
                    r.endpoint_id
                );
            }
            Acceptance::ReplaySuspected { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
        results.push((r, got));
    }
    assert_eq!(winners.len(), endpoints.len());
    for (r, got) in &results {
        assert_eq!(got.inbox_id(), winners[&r.endpoint_id]);
    }
    assert_eq!(store.count_inbox().await.unwrap(), endpoints.len() as u64);
    store.close().await;
}
