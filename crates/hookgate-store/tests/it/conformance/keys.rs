//! Payload key rotation: counts per key version, batches in `inbox_id` order after a cursor,
//! and the fenced re-seal write (leased rows and rows re-sealed in between are left alone).

use std::sync::Arc;

use hookgate_store::{KeyVersionRows, ResealedPayload, Store};

use super::{StoreTestExt, accept_all, now_ms, row};

fn resealed(inbox_id: &str, from: u32, to: u32, tag: &str) -> ResealedPayload {
    ResealedPayload {
        inbox_id: inbox_id.to_owned(),
        from_version: from,
        key_version: to,
        payload: format!("resealed:{tag}").into_bytes(),
        payload_digest: vec![0xCD; 32],
    }
}

pub async fn payloads_are_counted_walked_and_resealed_per_key_version(store: Arc<dyn Store>) {
    let mut rows = Vec::new();
    for i in 0..5 {
        rows.push(row("ep-keys", &format!("evt_v1_{i}")));
    }
    for i in 0..2 {
        let mut r = row("ep-keys", &format!("evt_v2_{i}"));
        r.payload_key_version = 2;
        rows.push(r);
    }
    assert!(
        accept_all(&store, rows, 4)
            .await
            .iter()
            .all(|(_, r)| r.is_ok())
    );
    assert_eq!(
        store.payload_key_rows().await.unwrap(),
        vec![
            KeyVersionRows {
                version: 1,
                rows: 5
            },
            KeyVersionRows {
                version: 2,
                rows: 2
            },
        ]
    );

    // A walk in inbox_id order, two at a time, resumes after its cursor and sees no leased row.
    let now = now_ms();
    let leased = store.lease_due("w", now, 60_000, 1).await.unwrap();
    assert_eq!(leased.len(), 1);
    let leased_id = leased[0].inbox_id.clone();
    let mut walked = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let batch = store
            .sealed_under(1, after.as_deref(), now, 2)
            .await
            .unwrap();
        assert!(batch.len() <= 2);
        let Some(last) = batch.last() else { break };
        after = Some(last.inbox_id.clone());
        walked.extend(batch);
    }
    let ids: Vec<&str> = walked.iter().map(|r| r.inbox_id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "walked in inbox_id order");
    if leased[0].payload_key_version == 1 {
        assert_eq!(walked.len(), 4, "the leased row is not walked");
        assert!(!ids.contains(&leased_id.as_str()));
    } else {
        assert_eq!(walked.len(), 5);
    }
    for r in &walked {
        assert_eq!(r.key_version, 1);
        assert_eq!(
            r.payload,
            format!("sealed:{}", r.provider_event_id).into_bytes()
        );
        assert_eq!(r.provider, "stripe");
        assert_eq!(r.endpoint_id, "ep-keys");
    }

    // The fenced write: the leased row and a row already re-sealed are left alone.
    let target = walked[0].inbox_id.clone();
    let mut batch: Vec<ResealedPayload> = walked
        .iter()
        .map(|r| resealed(&r.inbox_id, 1, 3, &r.provider_event_id))
        .collect();
    batch.push(resealed(
        &leased_id,
        leased[0].payload_key_version,
        3,
        "leased",
    ));
    let written = store.reseal(batch, now).await.unwrap();
    assert_eq!(written, walked.len() as u64);
    let again = store
        .reseal(vec![resealed(&target, 1, 3, "twice")], now)
        .await
        .unwrap();
    assert_eq!(
        again, 0,
        "a row no longer under version 1 is not written again"
    );

    let record = store.get_event(&target).await.unwrap().unwrap();
    assert_eq!(record.payload_key_version, 3);
    assert_eq!(
        record.payload.as_deref(),
        Some(format!("resealed:{}", record.provider_event_id).as_bytes())
    );
    assert_eq!(record.payload_digest, vec![0xCD; 32]);
    let untouched = store.get_event(&leased_id).await.unwrap().unwrap();
    assert_eq!(untouched.payload_key_version, leased[0].payload_key_version);
    assert_eq!(
        untouched.payload.as_deref(),
        Some(format!("sealed:{}", untouched.provider_event_id).as_bytes())
    );

    let counts = store.payload_key_rows().await.unwrap();
    let total: u64 = counts.iter().map(|c| c.rows).sum();
    assert_eq!(total, 7, "{counts:?}");
    assert_eq!(
        counts.iter().find(|c| c.version == 3).map(|c| c.rows),
        Some(walked.len() as u64)
    );
    store.close().await;
}
