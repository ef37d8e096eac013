//! The checks after the final recovery and drain, on the store (opened by the runner once the
//! gateway has stopped), the HTTP receiver's record and the NATS stream:
//!
//! - every event that ever got a 2xx is stored, and exactly once (one row per event id, the
//!   row every 2xx answer named; at most one `accepted` answer per event);
//! - every stored event ended `PROCESSED`, or `FAILED` with a reason;
//! - each processed event has exactly one outbox row per destination (the business effect of
//!   processing: written once, in the processing transaction), each `DELIVERED`;
//! - the HTTP receiver's set of 2xx'd `Idempotency-Key`s equals the set of processed inbox ids,
//!   each key came with one event id, and the NATS stream holds every processed inbox id.
//!   Duplicates on the wire are allowed and counted.

use std::collections::{BTreeSet, HashMap};

use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::{EventFilter, SharedStore};

use crate::nats::StreamContents;
use crate::receiver::Received;
use crate::traffic::EventLedger;

#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Verification {
    /// Distinct events sent (at least one request).
    pub(crate) events_sent: u64,
    /// Distinct events that got at least one 2xx.
    pub(crate) acknowledged: u64,
    /// Acknowledged but not stored.
    pub(crate) lost: u64,
    /// Inbox rows beyond one per event id.
    pub(crate) duplicate_rows: u64,
    /// Events whose 2xx answers named another inbox id than the stored row, or several.
    pub(crate) inconsistent_ids: u64,
    /// Events answered `accepted` more than once.
    pub(crate) accepted_twice: u64,
    pub(crate) stored: u64,
    /// Stored without a 2xx (allowed: the commit landed, the answer did not).
    pub(crate) stored_unacknowledged: u64,
    pub(crate) processed: u64,
    pub(crate) failed_with_reason: u64,
    /// Neither PROCESSED nor FAILED with a reason after the drain.
    pub(crate) not_settled: u64,
    /// Outbox rows: one per processed event and destination.
    pub(crate) outbox_rows: u64,
    pub(crate) duplicate_outbox_rows: u64,
    pub(crate) missing_outbox_rows: u64,
    pub(crate) undelivered_outbox_rows: u64,
    /// Distinct idempotency keys the HTTP receiver answered 2xx.
    pub(crate) http_deliveries: u64,
    /// 2xx'd requests beyond one per key (allowed).
    pub(crate) http_duplicate_deliveries_on_wire: u64,
    /// Requests the receiver refused with 503 on purpose (retried by the relay).
    pub(crate) http_refused_on_purpose: u64,
    /// Processed events whose key never reached the receiver with a 2xx.
    pub(crate) http_missing: u64,
    /// Keys that are no processed inbox id, or came with two event ids, or requests without one.
    pub(crate) http_bad_keys: u64,
    pub(crate) nats_messages: u64,
    pub(crate) nats_deliveries: u64,
    pub(crate) nats_duplicates_in_stream: u64,
    pub(crate) nats_missing: u64,
    pub(crate) nats_unknown: u64,
    pub(crate) problems: Vec<String>,
}

impl Verification {
    fn problem(&mut self, counter: u64, text: String) {
        if counter <= 3 {
            self.problems.push(text);
        }
    }

    pub(crate) fn violations(&self) -> u64 {
        self.lost
            + self.duplicate_rows
            + self.inconsistent_ids
            + self.accepted_twice
            + self.not_settled
            + self.duplicate_outbox_rows
            + self.missing_outbox_rows
            + self.undelivered_outbox_rows
            + self.http_missing
            + self.http_bad_keys
            + self.nats_missing
            + self.nats_unknown
    }
}

pub(crate) async fn verify(
    store: &SharedStore,
    ledger: &HashMap<String, EventLedger>,
    received: &Received,
    stream: Option<&StreamContents>,
    destinations: &[&str],
) -> anyhow::Result<Verification> {
    let mut v = Verification {
        events_sent: ledger.len() as u64,
        ..Verification::default()
    };
    let rows = store
        .list_events(&EventFilter {
            endpoint_id: Some(crate::ENDPOINT.to_owned()),
            ..EventFilter::default()
        })
        .await?;
    let mut by_event: HashMap<&str, Vec<&hookgate_store::InboxRecord>> = HashMap::new();
    for r in &rows {
        by_event.entry(&r.provider_event_id).or_default().push(r);
    }
    v.stored = by_event.len() as u64;
    for (id, rs) in &by_event {
        if rs.len() > 1 {
            v.duplicate_rows += rs.len() as u64 - 1;
            v.problem(v.duplicate_rows, format!("{id}: {} inbox rows", rs.len()));
        }
    }
    let mut sorted: Vec<_> = ledger.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    for (id, e) in sorted {
        if e.accepted > 1 {
            v.accepted_twice += 1;
            v.problem(
                v.accepted_twice,
                format!("{id}: `accepted` {} times", e.accepted),
            );
        }
        let row = by_event.get(id.as_str()).and_then(|rs| rs.first());
        if !e.acknowledged {
            if row.is_some() {
                v.stored_unacknowledged += 1;
            }
            continue;
        }
        v.acknowledged += 1;
        let Some(row) = row else {
            v.lost += 1;
            v.problem(v.lost, format!("{id}: acknowledged but not stored"));
            continue;
        };
        if e.inbox_ids.len() > 1 || e.inbox_ids.iter().any(|i| *i != row.inbox_id) {
            v.inconsistent_ids += 1;
            v.problem(
                v.inconsistent_ids,
                format!(
                    "{id}: answers named {:?}, stored {}",
                    e.inbox_ids, row.inbox_id
                ),
            );
        }
    }

    let mut processed: BTreeSet<&str> = BTreeSet::new();
    for r in &rows {
        match r.status {
            InboxStatus::Processed => {
                v.processed += 1;
                processed.insert(&r.inbox_id);
            }
            InboxStatus::Failed if r.last_error.as_deref().is_some_and(|e| !e.is_empty()) => {
                v.failed_with_reason += 1;
            }
            other => {
                v.not_settled += 1;
                v.problem(
                    v.not_settled,
                    format!("{}: ended {other:?}", r.provider_event_id),
                );
            }
        }
    }
    for r in rows.iter().filter(|r| r.status == InboxStatus::Processed) {
        let deliveries = store.list_deliveries(&r.inbox_id).await?;
        v.outbox_rows += deliveries.len() as u64;
        for dest in destinations {
            let of_dest: Vec<_> = deliveries
                .iter()
                .filter(|d| d.destination == *dest)
                .collect();
            match of_dest.len() {
                0 => {
                    v.missing_outbox_rows += 1;
                    v.problem(
                        v.missing_outbox_rows,
                        format!("{}: no outbox row for {dest}", r.provider_event_id),
                    );
                }
                1 => {}
                n => {
                    v.duplicate_outbox_rows += n as u64 - 1;
                    v.problem(
                        v.duplicate_outbox_rows,
                        format!("{}: {n} outbox rows for {dest}", r.provider_event_id),
                    );
                }
            }
            for d in of_dest
                .iter()
                .filter(|d| d.status != OutboxStatus::Delivered)
            {
                v.undelivered_outbox_rows += 1;
                v.problem(
                    v.undelivered_outbox_rows,
                    format!(
                        "{}: delivery to {dest} ended {:?} ({})",
                        r.provider_event_id,
                        d.status,
                        d.last_error.as_deref().unwrap_or("")
                    ),
                );
            }
        }
    }

    let event_of: HashMap<&str, &str> = rows
        .iter()
        .map(|r| (r.inbox_id.as_str(), r.provider_event_id.as_str()))
        .collect();
    v.http_bad_keys += received.without_key;
    for (key, k) in &received.by_key {
        v.http_refused_on_purpose += k.refused;
        if k.accepted == 0 {
            continue;
        }
        v.http_deliveries += 1;
        v.http_duplicate_deliveries_on_wire += k.accepted - 1;
        let known = processed.contains(key.as_str())
            && event_of.get(key.as_str()) == Some(&k.event_id.as_str());
        if !known || k.conflicting_event_id {
            v.http_bad_keys += 1;
            v.problem(
                v.http_bad_keys,
                format!(
                    "HTTP key {key} (event {:?}) is no processed event's",
                    k.event_id
                ),
            );
        }
    }
    for id in &processed {
        if received.by_key.get(*id).is_none_or(|k| k.accepted == 0) {
            v.http_missing += 1;
            v.problem(
                v.http_missing,
                format!("{}: never delivered over HTTP", event_of[id]),
            );
        }
    }
    if let Some(stream) = stream {
        v.nats_messages = stream.messages;
        v.nats_unknown += stream.without_inbox_id;
        for (id, n) in &stream.by_inbox_id {
            v.nats_deliveries += 1;
            v.nats_duplicates_in_stream += n - 1;
            if !processed.contains(id.as_str()) {
                v.nats_unknown += 1;
                v.problem(
                    v.nats_unknown,
                    format!("NATS message for unknown inbox id {id}"),
                );
            }
        }
        for id in &processed {
            if !stream.by_inbox_id.contains_key(*id) {
                v.nats_missing += 1;
                v.problem(
                    v.nats_missing,
                    format!("{}: not in the NATS stream", event_of[id]),
                );
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::KeyRecord;
    use hookgate_store::NewInboxRow;

    fn row(inbox_id: &str, event_id: &str) -> NewInboxRow {
        NewInboxRow {
            inbox_id: inbox_id.to_owned(),
            provider: "stripe".to_owned(),
            endpoint_id: crate::ENDPOINT.to_owned(),
            provider_event_id: event_id.to_owned(),
            event_type: Some("payment_intent.succeeded".to_owned()),
            object_id: None,
            object_version: None,
            provider_created_at: None,
            received_at_ms: 1,
            payload: vec![0; 40],
            payload_key_version: 1,
            payload_digest: vec![0; 32],
            matched_secret_version: "v1".to_owned(),
            status: InboxStatus::Received,
            source: hookgate_core::EventSource::Webhook,
            api_version: None,
            replay_digest: None,
        }
    }

    fn acked(inbox_id: &str) -> EventLedger {
        EventLedger {
            attempts: 1,
            acknowledged: true,
            accepted: 1,
            inbox_ids: [inbox_id.to_owned()].into(),
        }
    }

    /// The checker must see what the runner exists to catch: a lost event, an answer naming
    /// another row, rows that never settled, a delivery key and a stream message that belong
    /// to no processed event.
    #[tokio::test]
    async fn every_kind_of_violation_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("h.db").display());
        let store = hookgate_store::open(&url, hookgate_store::OpenOptions::default())
            .await
            .unwrap();
        let a = "01900000-0000-7000-8000-00000000000a";
        let b = "01900000-0000-7000-8000-00000000000b";
        store.accept(row(a, "evt_a")).await.unwrap();
        store.accept(row(b, "evt_b")).await.unwrap();
        let ledger: HashMap<String, EventLedger> = [
            ("evt_a".to_owned(), acked(a)),
            ("evt_b".to_owned(), acked(a)), // answered with another event's row
            (
                "evt_c".to_owned(),
                acked("01900000-0000-7000-8000-00000000000c"),
            ), // never stored
            ("evt_d".to_owned(), EventLedger::default()), // sent, never acknowledged: allowed
        ]
        .into();
        let mut received = Received::default();
        received.by_key.insert(
            "not-an-inbox-id".to_owned(),
            KeyRecord {
                event_id: "evt_x".to_owned(),
                accepted: 2,
                ..KeyRecord::default()
            },
        );
        let stream = StreamContents {
            messages: 1,
            by_inbox_id: [("not-an-inbox-id".to_owned(), 1)].into(),
            without_inbox_id: 0,
        };
        let v = verify(&store, &ledger, &received, Some(&stream), &["receiver"])
            .await
            .unwrap();
        store.close().await;
        assert_eq!(v.events_sent, 4);
        assert_eq!(v.acknowledged, 3);
        assert_eq!(v.lost, 1, "{v:?}");
        assert_eq!(v.inconsistent_ids, 1, "{v:?}");
        assert_eq!(v.not_settled, 2, "{v:?}");
        assert_eq!(v.http_bad_keys, 1, "{v:?}");
        assert_eq!(v.http_duplicate_deliveries_on_wire, 1);
        assert_eq!(v.nats_unknown, 1, "{v:?}");
        assert_eq!(v.duplicate_rows, 0);
        assert_eq!(v.violations(), 6);
        assert!(!v.problems.is_empty());
    }
}
