//! The store conformance suite: backend-agnostic checks of the [`Store`] contract (the
//! inbox's unique key, acknowledgement only after commit, fenced leases, the version gate,
//! the outbox; ARCHITECTURE.md), run against every backend.
//!
//! Each check is a `pub async fn(Arc<dyn Store>)` expecting a FRESH, empty store (a database
//! or schema per test) and closing it at the end. A backend's test module does
//!
//! ```ignore
//! async fn fresh() -> (Arc<dyn Store>, impl Sized /* guard kept alive for the test */) { .. }
//! conformance_tests!(fresh);
//! ```
//!
//! and gets one `#[tokio::test]` per check, so a check added here runs on every backend.
// Each backend's module uses a different subset of the helpers.
#![allow(unreachable_pub, dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use std::future::Future;

use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::{
    Acceptance, EventFilter, InboxRecord, LeaseRequest, NewInboxRow, ProcessingError,
    ProcessingResult, Store, StoreError,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

mod processing;
// Reached as `conformance::<check>` by the macro.
pub use processing::*;
mod outbox;
pub use outbox::*;
mod batch;
pub use batch::*;
mod keys;
pub use keys::*;
mod retention;
pub use retention::*;
mod operator;
pub use operator::*;
mod revive;
pub use revive::*;
mod jobs;
pub use jobs::*;
mod reconcile;
pub use reconcile::*;
mod sequence;
pub use sequence::*;

/// What tests read or do through the production traits, spelled as the tests use it.
pub trait StoreTestExt {
    /// One completion, through [`hookgate_store::ProcessingStore::complete_all`].
    fn complete(
        &self,
        result: ProcessingResult,
    ) -> impl Future<Output = Result<Outcome, ProcessingError>> + Send;

    /// Leases due rows of every endpoint with their payloads.
    fn lease_due(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<InboxRecord>, StoreError>> + Send;

    /// [`StoreTestExt::lease_due`] without the payloads (`payload` is `None` in every record).
    fn lease_due_without_payload(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<InboxRecord>, StoreError>> + Send;

    /// The destinations with an outbox row for `inbox_id`, sorted.
    fn outbox_destinations(
        &self,
        inbox_id: &str,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;
}

impl<S: Store + ?Sized> StoreTestExt for S {
    async fn lease_due(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        self.lease(LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload: true,
            endpoints: None,
        })
        .await
    }

    async fn lease_due_without_payload(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: u32,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        self.lease(LeaseRequest {
            owner,
            now_ms,
            lease_ms,
            limit,
            with_payload: false,
            endpoints: None,
        })
        .await
    }

    async fn complete(&self, result: ProcessingResult) -> Result<Outcome, ProcessingError> {
        let mut outcomes = self.complete_all(vec![result]).await;
        assert_eq!(outcomes.len(), 1, "one outcome per result");
        outcomes.pop().expect("one outcome").map(|c| {
            c.outcome()
                .unwrap_or_else(|| panic!("a row of an unsequenced result waits: {c:?}"))
        })
    }

    fn outbox_destinations(
        &self,
        inbox_id: &str,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        let inbox_id = inbox_id.to_owned();
        async move {
            Ok(self
                .list_deliveries(&inbox_id)
                .await?
                .into_iter()
                .map(|d| d.destination)
                .collect())
        }
    }
}

/// One `#[tokio::test]` per conformance check, each on a store from `$fresh().await`, which
/// returns `(Arc<dyn Store>, guard)`; the guard (temp dir, test database) lives until the end.
macro_rules! conformance_tests {
    ($fresh:path) => {
        conformance_tests!(@each $fresh;
            accept_then_duplicate,
            concurrent_copies_one_row,
            duplicate_within_one_batch,
            mixed_distinct_and_duplicates,
            ignored_status_stored,
            get_and_list_round_trip,
            payload_stored_as_given,
            ping_and_counts,
            close_rejects_new_work,
            lease_claims_due_rows_once,
            concurrent_leases_never_share_a_row,
            expired_lease_is_taken_over_and_old_holder_is_fenced,
            completing_rows_together_fences_each_row,
            lease_without_payload_leaves_it_stored,
            version_gate_converges_for_every_order,
            unversioned_events_skip_the_gate_and_newest_fetch_wins,
            failed_attempts_back_off_fail_and_retry,
            payload_survives_status_changes,
            outbox_leases_per_destination_and_fences_marks,
            outbox_reschedules_fails_and_retries_only_failed,
            concurrent_delivery_leases_never_share_a_row,
            stale_event_gets_no_outbox_row,
            request_rows_commit_together,
            refused_row_fails_its_whole_request_only,
            concurrent_copies_of_one_request_one_set_of_rows,
            replayed_body_is_a_duplicate_of_the_first_row,
            concurrent_replays_one_row,
            lease_skips_rows_of_unserved_endpoints,
            payment_fetches_are_ordered_by_lease_not_by_clock,
            payloads_are_counted_walked_and_resealed_per_key_version,
            retention_purges_expired_payloads_of_finished_rows_only,
            expired_rows_go_with_what_follows_them,
            ended_replay_claims_are_deleted,
            operator_purge_is_audited_and_blocks_replays,
            event_pages_filter_and_never_repeat_or_skip,
            audit_entries_round_trip,
            replay_is_fenced_against_leases,
            redelivery_is_fenced_and_records_fresh_keys,
            ignored_row_redelivered_when_allowed_goes_back_to_work,
            job_batches_are_fenced_resumable_and_exact,
            rejections_page_filter_count_and_trim,
            reconcile_scans_repair_once_and_record_findings,
            no_retry_windows_extend_cover_and_stay_apart,
            sequence_gap_waits_fills_and_follows,
            sequence_gaps_are_held_and_released_in_order,
            too_many_waiting_events_are_held,
        );
    };
    (@each $fresh:path; $($check:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $check() {
                let (store, _guard) = $fresh().await;
                $crate::conformance::$check(store).await;
            }
        )+
    };
}

/// A unique inbox id (the gateway uses UUIDv7; any unique text will do here).
pub fn new_inbox_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "ib-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A plausible sealed row for `provider`/`endpoint_id`/`event_id`, with a fresh inbox id.
pub fn row_for(provider: &str, endpoint_id: &str, event_id: &str) -> NewInboxRow {
    NewInboxRow {
        inbox_id: new_inbox_id(),
        provider: provider.to_owned(),
        endpoint_id: endpoint_id.to_owned(),
        provider_event_id: event_id.to_owned(),
        event_type: Some("charge.succeeded".to_owned()),
        object_id: Some("ch_1".to_owned()),
        object_version: None,
        provider_created_at: Some(1_700_000_000),
        received_at_ms: now_ms(),
        payload: format!("sealed:{event_id}").into_bytes(),
        payload_key_version: 1,
        payload_digest: vec![0xAB; 32],
        matched_secret_version: "v1".to_owned(),
        status: InboxStatus::Received,
        source: hookgate_core::EventSource::Webhook,
        api_version: None,
        replay_digest: None,
        sequence_number: None,
    }
}

/// A `max_queue_wait` no test reaches.
pub const NEVER_SHED: std::time::Duration = std::time::Duration::from_secs(3600);

pub fn row(endpoint_id: &str, event_id: &str) -> NewInboxRow {
    row_for("stripe", endpoint_id, event_id)
}

/// Accepts every row concurrently (at most `concurrency` in flight); results in input order.
pub async fn accept_all(
    store: &Arc<dyn Store>,
    rows: Vec<NewInboxRow>,
    concurrency: usize,
) -> Vec<(NewInboxRow, Result<Acceptance, StoreError>)> {
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = JoinSet::new();
    for (i, row) in rows.into_iter().enumerate() {
        let store = Arc::clone(store);
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .expect("semaphore open");
        tasks.spawn(async move {
            let result = store.accept(row.clone()).await;
            drop(permit);
            (i, row, result)
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        out.push(joined.expect("accept task panicked"));
    }
    out.sort_by_key(|(i, _, _)| *i);
    out.into_iter()
        .map(|(_, row, result)| (row, result))
        .collect()
}

/// For each key: exactly one `Accepted` (with the accepting request's own id), and every
/// copy answered with that same id. Returns the key → stored id map.
fn check_one_winner_per_key(
    results: &[(NewInboxRow, Result<Acceptance, StoreError>)],
) -> HashMap<String, String> {
    let mut winners: HashMap<String, String> = HashMap::new();
    for (row, result) in results {
        let acceptance = result
            .as_ref()
            .unwrap_or_else(|e| panic!("accept failed: {e}"));
        if let Acceptance::Accepted { inbox_id } = acceptance {
            assert_eq!(
                inbox_id, &row.inbox_id,
                "Accepted must carry the request's own id"
            );
            let previous = winners.insert(row.provider_event_id.clone(), inbox_id.clone());
            assert!(
                previous.is_none(),
                "two Accepted for {}",
                row.provider_event_id
            );
        }
    }
    for (row, result) in results {
        let winner = winners
            .get(&row.provider_event_id)
            .unwrap_or_else(|| panic!("no Accepted for {}", row.provider_event_id));
        assert_eq!(
            result.as_ref().unwrap().inbox_id(),
            winner,
            "copy of {}",
            row.provider_event_id
        );
    }
    winners
}

/// First copy Accepted with its own id; later copies Duplicate with the first id and change
/// nothing; the key is (provider, endpoint, event id), so other endpoints/providers are new.
pub async fn accept_then_duplicate(store: Arc<dyn Store>) {
    let first = row("ep-a", "evt_1");
    let got = store.accept(first.clone()).await.unwrap();
    assert_eq!(
        got,
        Acceptance::Accepted {
            inbox_id: first.inbox_id.clone()
        }
    );

    let mut retry = row("ep-a", "evt_1");
    retry.payload = b"another attempt".to_vec();
    retry.status = InboxStatus::Ignored;
    let got = store.accept(retry.clone()).await.unwrap();
    assert_eq!(
        got,
        Acceptance::Duplicate {
            inbox_id: first.inbox_id.clone()
        }
    );
    assert!(
        store.get_event(&retry.inbox_id).await.unwrap().is_none(),
        "a duplicate's id is never stored"
    );
    let stored = store
        .get_event(&first.inbox_id)
        .await
        .unwrap()
        .expect("first row stored");
    assert_eq!(
        stored.payload.as_deref(),
        Some(first.payload.as_slice()),
        "first copy wins"
    );
    assert_eq!(stored.status, InboxStatus::Received);

    let other_endpoint = row("ep-b", "evt_1");
    let got = store.accept(other_endpoint.clone()).await.unwrap();
    assert_eq!(
        got,
        Acceptance::Accepted {
            inbox_id: other_endpoint.inbox_id.clone()
        }
    );
    let other_provider = row_for("github", "ep-a", "evt_1");
    let got = store.accept(other_provider.clone()).await.unwrap();
    assert_eq!(
        got,
        Acceptance::Accepted {
            inbox_id: other_provider.inbox_id.clone()
        }
    );

    assert_eq!(store.count_inbox().await.unwrap(), 3);
    store.close().await;
}

/// 500 concurrent copies of one event: one row, one Accepted, every answer the same id.
pub async fn concurrent_copies_one_row(store: Arc<dyn Store>) {
    let rows: Vec<_> = (0..500).map(|_| row("ep-c", "evt_same")).collect();
    let results = accept_all(&store, rows, 500).await;
    let accepted = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Acceptance::Accepted { .. })))
        .count();
    assert_eq!(accepted, 1);
    let winners = check_one_winner_per_key(&results);
    assert_eq!(store.count_inbox().await.unwrap(), 1);
    assert_eq!(
        store.distinct_event_ids("ep-c").await.unwrap(),
        vec!["evt_same".to_owned()]
    );
    let stored = store
        .get_event(&winners["evt_same"])
        .await
        .unwrap()
        .expect("row stored");
    assert_eq!(stored.provider_event_id, "evt_same");
    store.close().await;
}

/// Copies submitted at the same instant (so a group-committing backend puts them in one
/// transaction): the later copies are Duplicate with the first one's id.
pub async fn duplicate_within_one_batch(store: Arc<dyn Store>) {
    let mut rows = Vec::new();
    for copy in 0..8 {
        for key in 0..25 {
            let mut r = row("ep-batch", &format!("evt_{key:02}"));
            r.payload = format!("copy {copy}").into_bytes();
            rows.push(r);
        }
    }
    let n = rows.len();
    let results = accept_all(&store, rows, n).await;
    let winners = check_one_winner_per_key(&results);
    assert_eq!(winners.len(), 25);
    let duplicates = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Acceptance::Duplicate { .. })))
        .count();
    assert_eq!(duplicates, 25 * 7);
    assert_eq!(store.count_inbox().await.unwrap(), 25);
    store.close().await;
}

/// Thousands of rows, 10 % duplicates, shuffled, concurrent: exactly the distinct set stored.
pub async fn mixed_distinct_and_duplicates(store: Arc<dyn Store>) {
    mixed_distinct_and_duplicates_n(store, 3000).await;
}

pub async fn mixed_distinct_and_duplicates_n(store: Arc<dyn Store>, distinct: usize) {
    let duplicates = distinct / 9; // ≈ 10 % of all requests
    let mut rows: Vec<_> = (0..distinct)
        .map(|i| row("ep-mix", &format!("evt_{i:06}")))
        .collect();
    for j in 0..duplicates {
        let i = (j * 7919) % distinct;
        rows.push(row("ep-mix", &format!("evt_{i:06}")));
    }
    // Deterministic shuffle (xorshift), so copies race their originals.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..rows.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        rows.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let total = rows.len();
    let results = accept_all(&store, rows, 256).await;
    assert_eq!(results.len(), total);
    let winners = check_one_winner_per_key(&results);
    assert_eq!(winners.len(), distinct);
    let dup_answers = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Acceptance::Duplicate { .. })))
        .count();
    assert_eq!(dup_answers, duplicates);

    let expected: Vec<String> = (0..distinct)
        .map(|i| format!("evt_{i:06}"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(store.distinct_event_ids("ep-mix").await.unwrap(), expected);
    assert_eq!(store.count_inbox().await.unwrap(), distinct as u64);
    assert!(
        store
            .distinct_event_ids("ep-none")
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}

/// A verified event of a type the endpoint does not allow is stored as IGNORED (replayable).
pub async fn ignored_status_stored(store: Arc<dyn Store>) {
    let mut ignored = row("ep-ign", "evt_ignored");
    ignored.status = InboxStatus::Ignored;
    let got = store.accept(ignored.clone()).await.unwrap();
    assert_eq!(
        got,
        Acceptance::Accepted {
            inbox_id: ignored.inbox_id.clone()
        }
    );
    let received = row("ep-ign", "evt_received");
    store.accept(received.clone()).await.unwrap();

    let stored = store
        .get_event(&ignored.inbox_id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.status, InboxStatus::Ignored);
    assert_eq!(stored.outcome, None);

    let only_ignored = EventFilter {
        status: Some(InboxStatus::Ignored),
        ..Default::default()
    };
    let listed = store.list_events(&only_ignored).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| r.inbox_id.as_str())
            .collect::<Vec<_>>(),
        vec![ignored.inbox_id.as_str()]
    );
    let only_received = EventFilter {
        status: Some(InboxStatus::Received),
        ..Default::default()
    };
    let listed = store.list_events(&only_received).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| r.inbox_id.as_str())
            .collect::<Vec<_>>(),
        vec![received.inbox_id.as_str()]
    );

    // A later copy allowed by a fixed allow-list is still a duplicate of the ignored row,
    // which goes back to work (IGNORED is replayable by design; see `revive.rs`).
    let copy = row("ep-ign", "evt_ignored");
    assert_eq!(
        store.accept(copy).await.unwrap(),
        Acceptance::Duplicate {
            inbox_id: ignored.inbox_id.clone()
        }
    );
    let stored = store
        .get_event(&ignored.inbox_id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.status, InboxStatus::Received);
    store.close().await;
}

/// Every field written at acceptance reads back unchanged; fresh processing state is empty;
/// listing filters by status, endpoint and matched secret version, newest first, with a limit.
pub async fn get_and_list_round_trip(store: Arc<dyn Store>) {
    let full = NewInboxRow {
        inbox_id: new_inbox_id(),
        provider: "standard-webhooks".to_owned(),
        endpoint_id: "ep-full".to_owned(),
        provider_event_id: "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W".to_owned(),
        event_type: Some("invoice.paid".to_owned()),
        object_id: Some("in_42".to_owned()),
        object_version: Some(9_007_199_254_740_993),
        provider_created_at: Some(1_714_000_000),
        received_at_ms: 1_714_000_000_123,
        payload: vec![0, 1, 2, 3, 255],
        payload_key_version: u32::MAX,
        payload_digest: (0..32).collect(),
        matched_secret_version: "2024-05-rotation".to_owned(),
        status: InboxStatus::Received,
        source: hookgate_core::EventSource::Webhook,
        api_version: None,
        replay_digest: None,
        sequence_number: None,
    };
    store.accept(full.clone()).await.unwrap();
    let got = store
        .get_event(&full.inbox_id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(got.inbox_id, full.inbox_id);
    assert_eq!(got.provider, full.provider);
    assert_eq!(got.endpoint_id, full.endpoint_id);
    assert_eq!(got.provider_event_id, full.provider_event_id);
    assert_eq!(got.event_type, full.event_type);
    assert_eq!(got.object_id, full.object_id);
    assert_eq!(got.object_version, full.object_version);
    assert_eq!(got.provider_created_at, full.provider_created_at);
    assert_eq!(got.received_at_ms, full.received_at_ms);
    assert_eq!(got.payload, Some(full.payload.clone()));
    assert_eq!(got.payload_key_version, full.payload_key_version);
    assert_eq!(got.payload_digest, full.payload_digest);
    assert_eq!(got.matched_secret_version, full.matched_secret_version);
    assert_eq!(got.status, InboxStatus::Received);
    assert_eq!(got.outcome, None);
    assert_eq!(got.attempt_count, 0);
    assert_eq!(got.last_error, None);
    assert_eq!(got.processed_at_ms, None);

    let bare = NewInboxRow {
        event_type: None,
        object_id: None,
        object_version: None,
        provider_created_at: None,
        ..row("ep-full", "evt_bare")
    };
    store.accept(bare.clone()).await.unwrap();
    let got = store
        .get_event(&bare.inbox_id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(
        (
            got.event_type,
            got.object_id,
            got.object_version,
            got.provider_created_at
        ),
        (None, None, None, None)
    );

    assert!(store.get_event("no-such-id").await.unwrap().is_none());

    // Listing: 5 rows on one endpoint at known times, 2 elsewhere.
    let mut listed_ids = Vec::new();
    for i in 0..5 {
        let r = NewInboxRow {
            received_at_ms: 2_000_000 + i,
            // Rows 1 and 3 were verified by the compromised version.
            matched_secret_version: if i % 2 == 1 { "v2-leaked" } else { "v1" }.to_owned(),
            ..row("ep-list", &format!("evt_l{i}"))
        };
        listed_ids.push(r.inbox_id.clone());
        store.accept(r).await.unwrap();
    }
    listed_ids.reverse(); // newest first
    let on_endpoint = EventFilter {
        endpoint_id: Some("ep-list".to_owned()),
        ..Default::default()
    };
    let got: Vec<_> = store
        .list_events(&on_endpoint)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.inbox_id)
        .collect();
    assert_eq!(got, listed_ids);
    let limited = EventFilter {
        limit: Some(2),
        ..on_endpoint.clone()
    };
    let got: Vec<_> = store
        .list_events(&limited)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.inbox_id)
        .collect();
    assert_eq!(got, listed_ids[..2].to_vec());
    let by_version = EventFilter {
        matched_secret_version: Some("v2-leaked".to_owned()),
        ..Default::default()
    };
    let got: Vec<_> = store
        .list_events(&by_version)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.inbox_id)
        .collect();
    assert_eq!(got, vec![listed_ids[1].clone(), listed_ids[3].clone()]);
    let by_version_on_endpoint = EventFilter {
        endpoint_id: Some("ep-list".to_owned()),
        limit: Some(1),
        ..by_version.clone()
    };
    let got: Vec<_> = store
        .list_events(&by_version_on_endpoint)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.inbox_id)
        .collect();
    assert_eq!(got, vec![listed_ids[1].clone()]);
    let none = EventFilter {
        status: Some(InboxStatus::Processed),
        ..on_endpoint.clone()
    };
    assert!(store.list_events(&none).await.unwrap().is_empty());
    let everything = store.list_events(&EventFilter::default()).await.unwrap();
    assert_eq!(everything.len(), 7);
    assert!(
        everything
            .windows(2)
            .all(|w| w[0].received_at_ms >= w[1].received_at_ms),
        "newest first"
    );
    store.close().await;
}

/// Sealed payloads are opaque bytes: every byte value, empty, and 1 MiB come back as given.
pub async fn payload_stored_as_given(store: Arc<dyn Store>) {
    let mut big = vec![0u8; 1 << 20];
    let mut x: u32 = 1;
    for b in &mut big {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *b = (x >> 24) as u8;
    }
    let payloads: Vec<Vec<u8>> = vec![(0..=255).collect(), Vec::new(), vec![0; 17], big];
    for (i, payload) in payloads.into_iter().enumerate() {
        let mut r = row("ep-bytes", &format!("evt_b{i}"));
        r.payload = payload.clone();
        r.payload_digest = payload.iter().rev().take(32).copied().collect();
        store.accept(r.clone()).await.unwrap();
        let got = store.get_event(&r.inbox_id).await.unwrap().expect("stored");
        assert_eq!(
            got.payload.as_deref(),
            Some(payload.as_slice()),
            "payload {i}"
        );
        assert_eq!(got.payload_digest, r.payload_digest, "digest {i}");
    }
    store.close().await;
}

/// `ping` answers on a healthy store; the counters agree with what was accepted.
pub async fn ping_and_counts(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
    assert_eq!(store.count_inbox().await.unwrap(), 0);
    assert!(
        store
            .distinct_event_ids("ep-count")
            .await
            .unwrap()
            .is_empty()
    );
    for id in ["b", "a", "c"] {
        store.accept(row("ep-count", id)).await.unwrap();
    }
    store.accept(row("ep-count", "a")).await.unwrap();
    store
        .accept(row_for("github", "ep-count", "a"))
        .await
        .unwrap();
    assert_eq!(store.count_inbox().await.unwrap(), 4);
    assert_eq!(
        store.distinct_event_ids("ep-count").await.unwrap(),
        vec!["a", "b", "c"]
    );
    // Four rows wait for processing; nothing failed, nothing to deliver.
    let backlog = store.backlog().await.unwrap();
    assert_eq!(backlog.received, 4);
    assert!(backlog.oldest_received_at_ms.is_some());
    assert_eq!(
        (
            backlog.failed,
            backlog.outbox_pending,
            backlog.outbox_failed
        ),
        (0, 0, 0)
    );
    assert_eq!(backlog.oldest_pending_at_ms, None);
    store.ping().await.unwrap();
    store.close().await;
}

/// After `close`, acceptance is refused as unavailable (503), and what was accepted before
/// is kept; `close` is idempotent.
pub async fn close_rejects_new_work(store: Arc<dyn Store>) {
    let before = row("ep-close", "evt_before");
    store.accept(before.clone()).await.unwrap();
    store.close().await;
    let err = store
        .accept(row("ep-close", "evt_after"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    store.close().await;
}

/// The shedding contract under a stalled commit path. `stall` is holding the store's write
/// lock when this is called; `release` ends the stall after a while. Rows that waited longer
/// than the store's `max_queue_wait` (well under the stall) are answered `Overloaded` and
/// never written; every `Accepted` row is stored; once the queue drains the store admits
/// again and accepts new rows.
pub async fn shed_during_stall(
    store: Arc<dyn Store>,
    release: impl std::future::Future<Output = ()>,
) {
    let mut tasks = JoinSet::new();
    for i in 0..40 {
        let store = Arc::clone(&store);
        let r = row("ep-shed", &format!("evt_shed_{i}"));
        tasks.spawn(async move { (r.clone(), store.accept(r).await) });
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    release.await;
    let (mut accepted, mut shed) = (Vec::new(), 0);
    while let Some(joined) = tasks.join_next().await {
        match joined.expect("accept task") {
            (r, Ok(Acceptance::Accepted { inbox_id })) => {
                assert_eq!(inbox_id, r.inbox_id);
                accepted.push(inbox_id);
            }
            (_, Err(StoreError::Overloaded)) => shed += 1,
            (_, other) => panic!("only Accepted or Overloaded under a stall, got {other:?}"),
        }
    }
    assert!(
        shed > 0,
        "rows queued behind a stall longer than max_queue_wait are shed"
    );
    assert!(
        !accepted.is_empty(),
        "the batch taken before the stall commits"
    );
    assert_eq!(
        store.count_inbox().await.unwrap(),
        accepted.len() as u64,
        "shed rows are never written"
    );
    for id in &accepted {
        assert!(
            store.get_event(id).await.unwrap().is_some(),
            "acknowledged {id} lost"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !store.admits() {
        assert!(
            std::time::Instant::now() < deadline,
            "admission never reopened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let after = store.accept(row("ep-shed", "evt_after")).await;
    assert!(
        matches!(after, Ok(Acceptance::Accepted { .. })),
        "{after:?}"
    );
}
