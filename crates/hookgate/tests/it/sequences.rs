//! Sequenced deltas through the real binary, on both backends: an endpoint declares
//! `sequence_pointer` and each object's events are applied in sequence order. 1, 3, 2: 3
//! waits (RECEIVED, not leased, attempts not counted) until 2 fills the gap, then follows; two
//! objects interleaved keep their own orders; a repeated delivery is a duplicate and another
//! event with an applied sequence is `stale` (counted). 1, 3 with a short
//! `sequence_gap_seconds`: 3 is HELD naming the missing 2, counted by
//! `hookgate_sequence_gaps_open`, released by `hookgate events release`, and the late 2 is
//! then stale. Bad sequence keys are refused at start-up naming the key.

use std::path::Path;
use std::time::Duration;

use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::SharedStore;
use serde_json::Value;

use crate::support::*;

const SECRET: &str = "whsec_hookgate_sequences_test_secret";
/// Brex's pack names no object id.
const BREX_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(60);

/// A Stripe event about `object` carrying `sequence` at `/data/object/sequence`.
fn event(id: &str, object: &str, sequence: i64) -> Vec<u8> {
    format!(
        r#"{{"id":"{id}","object":"event","created":1764547200,"type":"customer.updated","data":{{"object":{{"id":"{object}","object":"customer","sequence":{sequence}}}}}}}"#
    )
    .into_bytes()
}

/// Sends the event signed; the answer's status (`accepted` / `duplicate`) and inbox id.
async fn send(
    addr: std::net::SocketAddr,
    endpoint: &str,
    id: &str,
    object: &str,
    sequence: i64,
) -> (String, String) {
    let body = event(id, object, sequence);
    let r = post_signed(addr, endpoint, "stripe", SECRET, id, unix_now(), &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let json = r.json();
    (
        json["status"].as_str().unwrap().to_owned(),
        json["id"].as_str().unwrap().to_owned(),
    )
}

async fn accepted(
    addr: std::net::SocketAddr,
    endpoint: &str,
    id: &str,
    object: &str,
    sequence: i64,
) -> String {
    let (status, inbox_id) = send(addr, endpoint, id, object, sequence).await;
    assert_eq!(status, "accepted", "{id}");
    inbox_id
}

async fn wait_outcome(store: &SharedStore, id: &str, want: Outcome) {
    wait_until(&format!("{id} processed {want}"), WAIT, || {
        let (store, id) = (store.clone(), id.to_owned());
        async move {
            let e = store.get_event(&id).await.unwrap().unwrap();
            e.status == InboxStatus::Processed && e.outcome == Some(want)
        }
    })
    .await;
}

/// Waits until the row waits in its object's gap for `missing`.
async fn wait_waiting(store: &SharedStore, id: &str, missing: i64) {
    wait_until(&format!("{id} waits for {missing}"), WAIT, || {
        let (store, id) = (store.clone(), id.to_owned());
        async move {
            let e = store.get_event(&id).await.unwrap().unwrap();
            e.status == InboxStatus::Received && e.sequence_waiting_for == Some(missing)
        }
    })
    .await;
}

async fn processed_at(store: &SharedStore, id: &str) -> i64 {
    store
        .get_event(id)
        .await
        .unwrap()
        .unwrap()
        .processed_at_ms
        .unwrap()
}

fn events(config: &Path, args: &[&str]) -> (i32, String, String) {
    run_hookgate(config, &[&["events"], args].concat())
}

async fn sequences_apply_in_order(backend: Backend) {
    let files = TestGateway::builder()
        .backend(backend)
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .section("[reconcile]\nenabled = false\ngrace_seconds = 1\n")
        .endpoints(&format!(
            "{}{}",
            endpoint_toml(
                "seq",
                "stripe",
                &[SECRET],
                "sequence_pointer = \"/data/object/sequence\"",
            ),
            endpoint_toml(
                "seq-short",
                "stripe",
                &[SECRET],
                "sequence_pointer = \"/data/object/sequence\"\nsequence_gap_seconds = 1",
            )
        ))
        .write()
        .await;
    let gateway = files.serve(None);
    let addr = gateway.webhook.unwrap();
    let admin = gateway.admin.unwrap();
    let store = files.open_store().await;
    let config = files.config_path.clone();

    // 1, 3, 2: 3 waits for 2, then follows it.
    let a1 = accepted(addr, "seq", "evt_a1", "cus_a", 1).await;
    wait_outcome(&store, &a1, Outcome::Applied).await;
    let a3 = accepted(addr, "seq", "evt_a3", "cus_a", 3).await;
    wait_waiting(&store, &a3, 2).await;
    let waiting = store.get_event(&a3).await.unwrap().unwrap();
    assert_eq!(waiting.next_attempt_at_ms, None, "not due, never leased");
    assert_eq!(waiting.attempt_count, 0, "its attempt is not counted");
    assert_eq!(waiting.sequence_number, Some(3));
    let (code, out, err) = events(&config, &["show", &a3]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["status"], "RECEIVED");
    assert_eq!(
        (
            shown["sequence"].as_i64(),
            shown["sequence_waiting_for"].as_i64()
        ),
        (Some(3), Some(2))
    );
    wait_until("one gap open", WAIT, || async move {
        metric(admin, "hookgate_sequence_gaps_open") == Some(1.0)
    })
    .await;
    // Reconciliation reports the waiting row under its own kind, never as overdue, and
    // changes nothing about it.
    let report = wait_for("reconcile reports the waiting row", WAIT, || {
        let config = config.clone();
        async move {
            let (code, out, err) = run_hookgate(&config, &["reconcile", "--endpoint", "seq"]);
            assert_eq!(code, 0, "{out} {err}");
            let report: Value = serde_json::from_str(&out).unwrap();
            (report["endpoints"][0]["found"]["sequence_waiting"] == 1).then_some(report)
        }
    })
    .await;
    let found = &report["endpoints"][0];
    assert_eq!(found["found"]["received_overdue"], 0, "{report}");
    assert_eq!(
        (
            found["findings"][0]["kind"].as_str(),
            found["findings"][0]["inbox_id"].as_str(),
            found["findings"][0]["action"].as_str()
        ),
        (
            Some("sequence_waiting"),
            Some(a3.as_str()),
            Some("reported")
        )
    );
    let still = store.get_event(&a3).await.unwrap().unwrap();
    assert_eq!(
        (
            still.status,
            still.next_attempt_at_ms,
            still.sequence_waiting_for
        ),
        (InboxStatus::Received, None, Some(2)),
        "the report changed nothing"
    );
    let a2 = accepted(addr, "seq", "evt_a2", "cus_a", 2).await;
    wait_outcome(&store, &a2, Outcome::Applied).await;
    wait_outcome(&store, &a3, Outcome::Applied).await;
    assert!(processed_at(&store, &a3).await >= processed_at(&store, &a2).await);
    wait_until("no gap open", WAIT, || async move {
        metric(admin, "hookgate_sequence_gaps_open") == Some(0.0)
    })
    .await;

    // Two objects interleaved: each keeps its own order.
    let b1 = accepted(addr, "seq", "evt_b1", "cus_b", 1).await;
    let b3 = accepted(addr, "seq", "evt_b3", "cus_b", 3).await;
    let a4 = accepted(addr, "seq", "evt_a4", "cus_a", 4).await;
    wait_outcome(&store, &a4, Outcome::Applied).await;
    wait_outcome(&store, &b1, Outcome::Applied).await;
    wait_waiting(&store, &b3, 2).await;
    let b2 = accepted(addr, "seq", "evt_b2", "cus_b", 2).await;
    wait_outcome(&store, &b3, Outcome::Applied).await;
    assert!(processed_at(&store, &b3).await >= processed_at(&store, &b2).await);

    // Duplicates: the same delivery again is the same row; another event carrying an applied
    // sequence is stale, counted, and does not move the object back.
    let (status, again) = send(addr, "seq", "evt_a2", "cus_a", 2).await;
    assert_eq!(
        (status.as_str(), again.as_str()),
        ("duplicate", a2.as_str())
    );
    let stale = accepted(addr, "seq", "evt_a2_other", "cus_a", 2).await;
    wait_outcome(&store, &stale, Outcome::Stale).await;
    let a5 = accepted(addr, "seq", "evt_a5", "cus_a", 5).await;
    wait_outcome(&store, &a5, Outcome::Applied).await;
    assert!(
        metric(admin, "hookgate_events_processed_total{outcome=\"stale\"}").unwrap_or(0.0) >= 1.0
    );

    // 1, 3 with a one-second window: 3 is held naming 2, counted, and released by command;
    // the late 2 is then stale.
    let s1 = accepted(addr, "seq-short", "evt_s1", "cus_s", 1).await;
    wait_outcome(&store, &s1, Outcome::Applied).await;
    let s3 = accepted(addr, "seq-short", "evt_s3", "cus_s", 3).await;
    wait_until("the gap outlives its window: HELD", WAIT, || {
        let (store, id) = (store.clone(), s3.clone());
        async move { store.get_event(&id).await.unwrap().unwrap().status == InboxStatus::Held }
    })
    .await;
    let held = store.get_event(&s3).await.unwrap().unwrap();
    let reason = held.held_reason.unwrap();
    assert!(
        reason.contains("sequence 2") && reason.contains("sequence_gap_seconds"),
        "{reason}"
    );
    assert!(store.list_deliveries(&s3).await.unwrap().is_empty());
    wait_until("the held gap is counted", WAIT, || async move {
        metric(admin, "hookgate_sequence_gaps_open") == Some(1.0)
            && metric(admin, "hookgate_events_held") == Some(1.0)
    })
    .await;
    let (code, out, err) = events(&config, &["release", "--endpoint", "seq-short"]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["released"], 1);
    wait_outcome(&store, &s3, Outcome::Applied).await;
    let late = accepted(addr, "seq-short", "evt_s2", "cus_s", 2).await;
    wait_outcome(&store, &late, Outcome::Stale).await;
    wait_until("the gap is closed", WAIT, || async move {
        metric(admin, "hookgate_sequence_gaps_open") == Some(0.0)
            && metric(admin, "hookgate_events_held") == Some(0.0)
    })
    .await;
    store.close().await;
    drop(gateway);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_sequences_apply_in_order() {
    sequences_apply_in_order(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_sequences_apply_in_order() {
    sequences_apply_in_order(Backend::Postgres).await;
}

/// The sequence keys are refused at start-up, naming the key: a pointer where the provider
/// names no object id and none is configured, limits out of range, `sequence_start` other
/// than "any", and limits without a pointer.
#[test]
fn sequence_config_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let pointer = "sequence_pointer = \"/seq\"\n";
    for (provider, secret, line, want) in [
        (
            "brex",
            BREX_SECRET,
            pointer.to_owned(),
            "endpoints[0].sequence_pointer",
        ),
        (
            "stripe",
            SECRET,
            format!("{pointer}sequence_gap_seconds = 0"),
            "endpoints[0].sequence_gap_seconds",
        ),
        (
            "stripe",
            SECRET,
            format!("{pointer}sequence_gap_max = 0"),
            "endpoints[0].sequence_gap_max",
        ),
        (
            "stripe",
            SECRET,
            format!("{pointer}sequence_gap_max = 100000"),
            "endpoints[0].sequence_gap_max",
        ),
        (
            "stripe",
            SECRET,
            format!("{pointer}sequence_start = \"first\""),
            "endpoints[0].sequence_start",
        ),
        (
            "stripe",
            SECRET,
            "sequence_gap_seconds = 60".to_owned(),
            "endpoints[0].sequence_gap_seconds",
        ),
        (
            "stripe",
            SECRET,
            "sequence_pointer = \"seq\"".to_owned(),
            "endpoints[0].sequence_pointer",
        ),
    ] {
        let (code, _, stderr) = config_check_endpoint(dir.path(), provider, secret, &line);
        assert_ne!(code, 0, "{line} must be refused");
        assert!(stderr.contains(want), "{line}: {stderr}");
    }
    // A pointer with the object id from the pack (Stripe) or from object_id_pointer is fine.
    for (provider, secret, line) in [
        (
            "stripe",
            SECRET,
            format!("{pointer}sequence_start = \"any\""),
        ),
        (
            "brex",
            BREX_SECRET,
            format!("{pointer}object_id_pointer = \"/id\""),
        ),
    ] {
        let (code, stdout, stderr) = config_check_endpoint(dir.path(), provider, secret, &line);
        assert_eq!(code, 0, "{line}: {stderr}");
        assert!(stdout.contains("sequence_gap_seconds = 300"), "{stdout}");
    }
}
