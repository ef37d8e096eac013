//! Processing end to end (ARCHITECTURE.md, "One processed event"), on SQLite AND PostgreSQL:
//! webhooks in over real sockets, workers (`Processor::run_once`, or the pool, or the real
//! binary), the version gate, the `payments_projection` handler against a local fake of
//! Stripe's REST API, retries with backoff, FAILED and `hookgate events retry`, and crashes at
//! the worker failpoints.
//!
//! Each scenario is an `async fn(Backend)`; `both!` makes one test per backend.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hookgate::worker::{Processed, Processor};
use hookgate_core::retry::RetryPolicy;
use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::EventFilter;
use serde_json::{Value, json};

use crate::support::*;

const NOW: i64 = 1_764_547_200;
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const STRIPE_SECRET: &str = "whsec_processing_tests_stripe_secret";
const STRIPE_KEY: &str = "sk_test_fake_processing_key";

macro_rules! both {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Sqlite).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Postgres).await;
                }
            )+
        }
    };
}

both!(
    versions_3_1_2_and_every_order_of_5_converge,
    hundreds_of_copies_and_retries_make_one_mutation,
    transient_failures_back_off_then_fail_then_operator_retry_succeeds,
    stripe_events_out_of_order_converge_on_the_api,
    slow_handler_does_not_block_acknowledgements,
);

#[cfg(feature = "failpoints")]
mod crash {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_after_lease() {
        crash_then_restart_converges(Backend::Sqlite, "worker.after_lease", 2).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_after_apply_commit() {
        crash_then_restart_converges(Backend::Sqlite, "worker.after_apply_commit", 1).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_after_lease() {
        crash_then_restart_converges(Backend::Postgres, "worker.after_lease", 2).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_after_apply_commit() {
        crash_then_restart_converges(Backend::Postgres, "worker.after_apply_commit", 1).await;
    }
}

// ---------------------------------------------------------------------------------------
// A fake of Stripe's REST API: GET /v1/{collection}/{id}, Bearer auth, Stripe's JSON shapes.

#[derive(Default)]
struct FakeStripeState {
    /// id → the object as Stripe would return it now.
    objects: Mutex<HashMap<String, Value>>,
    /// Answer 500 to this many requests before answering normally.
    fail_next: AtomicUsize,
    /// Delay every answer by this much.
    delay_ms: AtomicU64,
    requests: AtomicUsize,
}

#[derive(Clone)]
struct FakeStripe {
    addr: SocketAddr,
    state: Arc<FakeStripeState>,
}

impl FakeStripe {
    async fn start() -> FakeStripe {
        let state = Arc::new(FakeStripeState::default());
        let router = axum::Router::new()
            .route("/v1/{collection}/{id}", axum::routing::get(fake_get))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        FakeStripe { addr, state }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn set(&self, object: &str, id: &str, status: &str, amount: i64) {
        let value = json!({
            "id": id,
            "object": object,
            "amount": amount,
            "currency": "usd",
            "status": status,
            "livemode": false,
            "metadata": {},
            "created": 1_700_000_000,
        });
        self.state
            .objects
            .lock()
            .unwrap()
            .insert(id.to_owned(), value);
    }

    fn fail_next(&self, n: usize) {
        self.state.fail_next.store(n, Ordering::SeqCst);
    }
}

async fn fake_get(
    State(state): State<Arc<FakeStripeState>>,
    UrlPath((collection, id)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        // The behaviour under test: a slow API, not synchronisation.
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let error = |status: StatusCode, kind: &str, message: String| {
        (
            status,
            axum::Json(json!({ "error": { "type": kind, "message": message } })),
        )
            .into_response()
    };
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {STRIPE_KEY}"))
    {
        return error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "Invalid API Key provided".into(),
        );
    }
    if state
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "Something went wrong on Stripe's end.".into(),
        );
    }
    let object = state.objects.lock().unwrap().get(&id).cloned();
    let singular = collection.trim_end_matches('s');
    match object {
        Some(o) if format!("{}s", o["object"].as_str().unwrap()) == collection => {
            axum::Json(o).into_response()
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("No such {singular}: '{id}'"),
        ),
    }
}

// ---------------------------------------------------------------------------------------
// The gateway: on either backend, through the tests' one builder.

fn stripe_section(fake: &FakeStripe) -> String {
    format!(
        // The fake answers within 150 ms; 1 s fits the crash tests' 2 s lease with its margin.
        "[providers.stripe]\napi_base = {}\napi_key = {}\ntimeout_ms = 1000\n",
        q(&fake.base()),
        q(STRIPE_KEY)
    )
}

/// The gateway these tests run on `backend`, with the fake Stripe API when given. Up to 200
/// concurrent copies are sent at once here: no in-flight shedding (pipeline.rs tests that).
/// In-process tests add `.fixed_clock(NOW)`; the binary runs on the real clock.
fn gateway(backend: Backend, fake: Option<&FakeStripe>, endpoints: &str) -> GatewayBuilder {
    let builder = TestGateway::builder()
        .backend(backend)
        .server("max_in_flight = 1024")
        .endpoints(endpoints);
    match fake {
        Some(f) => builder.section(&stripe_section(f)),
        None => builder,
    }
}

/// In-process on `backend`, the clock pinned at [`NOW`], no workers: tests drive
/// `run_once` themselves.
async fn start_driven(backend: Backend, fake: Option<&FakeStripe>, endpoints: &str) -> TestGateway {
    gateway(backend, fake, endpoints)
        .fixed_clock(NOW)
        .workers(0)
        .start()
        .await
}

fn sw_endpoint() -> String {
    endpoint_toml(
        "sw",
        "standard_webhooks",
        &[SW_SECRET],
        "object_id_pointer = \"/data/id\"\nobject_version_pointer = \"/data/version\"",
    )
}

fn stripe_endpoint(retry: &str) -> String {
    endpoint_toml(
        "stripe-main",
        "stripe",
        &[STRIPE_SECRET],
        &format!("handlers = [\"payments_projection\"]\n{retry}"),
    )
}

/// Runs `run_once` until nothing is due at the current clock; returns every result.
async fn drain(p: &Processor, owner: &str) -> Vec<Processed> {
    let mut all = Vec::new();
    loop {
        let done = p.run_once(owner, 50).await.unwrap();
        if done.is_empty() {
            return all;
        }
        all.extend(done);
    }
}

async fn post_sw(addr: SocketAddr, id: &str, object: &str, version: i64) -> RawResponse {
    let body = format!(
        r#"{{"type":"object.updated","timestamp":"2025-12-01T00:00:00Z","data":{{"id":"{object}","version":{version}}}}}"#
    );
    post_signed(
        addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        id,
        NOW,
        body.as_bytes(),
    )
    .await
}

fn stripe_body(event_id: &str, event_type: &str, object: &str, id: &str, status: &str) -> Vec<u8> {
    json!({
        "id": event_id,
        "object": "event",
        "type": event_type,
        "created": NOW - 5,
        "livemode": false,
        "data": { "object": { "id": id, "object": object, "status": status, "amount": 1, "currency": "usd" } }
    })
    .to_string()
    .into_bytes()
}

async fn post_stripe(addr: SocketAddr, body: &[u8]) -> RawResponse {
    post_signed(addr, "stripe-main", "stripe", STRIPE_SECRET, "", NOW, body).await
}

fn permutations(items: &[i64]) -> Vec<Vec<i64>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Scenarios

/// Versions 3, 1, 2 of one object through a Standard Webhooks endpoint with version
/// pointers, processed in arrival order; then all 120 orders of 5 versions, one object each:
/// every object ends at its highest version, every event PROCESSED, exactly the events not
/// newer than their object's stored version `stale`.
async fn versions_3_1_2_and_every_order_of_5_converge(backend: Backend) {
    let mut h = start_driven(backend, None, &sw_endpoint()).await;
    let p = h.processor();
    let mut expected: HashMap<String, Outcome> = HashMap::new();
    for (v, outcome) in [
        (3, Outcome::Applied),
        (1, Outcome::Stale),
        (2, Outcome::Stale),
    ] {
        let id = format!("msg_a_v{v}");
        let r = post_sw(h.addr, &id, "obj_a", v).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["status"], "accepted");
        let done = drain(&p, "w").await;
        assert_eq!(
            done,
            [Processed::Completed(hookgate_store::Completion::Processed(
                outcome
            ))],
            "version {v}"
        );
        expected.insert(id, outcome);
    }
    assert_eq!(
        h.store()
            .object_version("standard_webhooks", "sw", "obj_a")
            .await
            .unwrap(),
        Some(3)
    );

    let perms = permutations(&[1, 2, 3, 4, 5]);
    assert_eq!(perms.len(), 120);
    for round in 0..5 {
        let mut sends = tokio::task::JoinSet::new();
        for (k, perm) in perms.iter().enumerate() {
            let v = perm[round];
            let id = format!("msg_p{k}_v{v}");
            let newest_before = perm[..round].iter().copied().max().unwrap_or(0);
            expected.insert(
                id.clone(),
                if v > newest_before {
                    Outcome::Applied
                } else {
                    Outcome::Stale
                },
            );
            let addr = h.addr;
            sends.spawn(async move { post_sw(addr, &id, &format!("obj_p{k}"), v).await });
            if sends.len() >= 16 {
                let r = sends.join_next().await.unwrap().unwrap();
                assert_eq!(r.status, 200, "{}", r.body);
            }
        }
        while let Some(r) = sends.join_next().await {
            let r = r.unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
        }
        // This round's events are processed before the next round arrives: processing order
        // is the permutation's order.
        let done = drain(&p, "w").await;
        assert_eq!(done.len(), perms.len());
    }

    let events = h.events().await;
    assert_eq!(events.len(), 3 + 600);
    for e in &events {
        assert_eq!(e.status, InboxStatus::Processed, "{}", e.provider_event_id);
        assert_eq!(
            e.outcome,
            Some(expected[&e.provider_event_id]),
            "{}",
            e.provider_event_id
        );
        assert!(e.object_version.is_some() && e.object_id.is_some());
    }
    for k in 0..perms.len() {
        assert_eq!(
            h.store()
                .object_version("standard_webhooks", "sw", &format!("obj_p{k}"))
                .await
                .unwrap(),
            Some(5),
            "obj_p{k}"
        );
    }
    let stale = events
        .iter()
        .filter(|e| e.outcome == Some(Outcome::Stale))
        .count();
    let applied = events.len() - stale;
    // Per order, the applied events are its left-to-right maxima; over all 120 orders of 5
    // that is 120 * H(5) = 274, plus obj_a's one.
    assert_eq!(applied, 274 + 1);
    h.stop().await;
}

/// 200 concurrent copies of one Stripe event, the API failing twice (so the worker retries),
/// four workers draining at once: one inbox row, PROCESSED, and exactly one business
/// mutation (one `payment_state` write, one `processed_events` marker).
async fn hundreds_of_copies_and_retries_make_one_mutation(backend: Backend) {
    let fake = FakeStripe::start().await;
    fake.set("payment_intent", "pi_once", "succeeded", 2000);
    fake.fail_next(2);
    let mut h = start_driven(
        backend,
        Some(&fake),
        &stripe_endpoint("retry = { base_ms = 1000, cap_ms = 4000, max_attempts = 5 }"),
    )
    .await;
    let body = stripe_body(
        "evt_once",
        "payment_intent.succeeded",
        "payment_intent",
        "pi_once",
        "succeeded",
    );
    let mut sends = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let addr = h.addr;
        let body = body.clone();
        sends.spawn(async move { post_stripe(addr, &body).await });
    }
    let mut ids = std::collections::BTreeSet::new();
    while let Some(r) = sends.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        ids.insert(r.json()["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "every copy answered with the one row's id");

    let p = Arc::new(h.processor());
    let mut now = NOW * 1000;
    for _ in 0..10 {
        let mut workers = tokio::task::JoinSet::new();
        for w in 0..4 {
            let p = Arc::clone(&p);
            workers.spawn(async move { drain(&p, &format!("w{w}")).await });
        }
        while let Some(j) = workers.join_next().await {
            j.unwrap();
        }
        let events = h.events().await;
        if events[0].status != InboxStatus::Received {
            break;
        }
        now += 5_000;
        h.set_ms(now);
    }
    let events = h.events().await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status, InboxStatus::Processed);
    assert_eq!(events[0].outcome, Some(Outcome::Applied));
    assert_eq!(
        events[0].attempt_count, 3,
        "two transient failures, then success"
    );
    let state = h.store().payment_state("pi_once").await.unwrap().unwrap();
    assert_eq!(state.write_count, 1, "exactly one business mutation");
    assert_eq!(state.status, "succeeded");
    assert_eq!(
        h.store()
            .processed_markers("stripe", "stripe-main", "evt_once")
            .await
            .unwrap(),
        ["payments_projection"]
    );
    h.stop().await;
}

/// The API fails every time: each attempt backs off within its full-jitter ceiling, the
/// event ends FAILED after `max_attempts` with a redacted, bounded error; `hookgate events
/// retry ID` (the real binary) puts it back and it succeeds once the API is fixed.
async fn transient_failures_back_off_then_fail_then_operator_retry_succeeds(backend: Backend) {
    let fake = FakeStripe::start().await;
    fake.set("charge", "ch_retry", "succeeded", 700);
    fake.fail_next(usize::MAX);
    let policy = RetryPolicy {
        base_ms: 2_000,
        cap_ms: 8_000,
        max_attempts: 4,
    };
    let mut h = start_driven(
        backend,
        Some(&fake),
        &stripe_endpoint("retry = { base_ms = 2000, cap_ms = 8000, max_attempts = 4 }"),
    )
    .await;
    let body = stripe_body(
        "evt_retry",
        "charge.succeeded",
        "charge",
        "ch_retry",
        "succeeded",
    );
    let r = post_stripe(h.addr, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_owned();

    let p = h.processor();
    let mut now = NOW * 1000;
    let mut delays = Vec::new();
    for attempt in 1..=4u32 {
        let done = p.run_once("w", 10).await.unwrap();
        assert_eq!(done.len(), 1, "attempt {attempt}");
        match done[0] {
            Processed::Retrying { at_ms } => {
                assert!(attempt < 4);
                let delay = at_ms - now;
                assert!(
                    (0..=policy.ceiling_ms(attempt) as i64).contains(&delay),
                    "attempt {attempt}: delay {delay} outside full jitter"
                );
                delays.push(delay);
                // Not due before its time.
                if delay > 1_000 {
                    h.set_ms(now + 999);
                    assert!(p.run_once("w", 10).await.unwrap().is_empty());
                }
                now = (at_ms / 1000 + 1) * 1000;
                h.set_ms(now);
            }
            Processed::Failed => assert_eq!(attempt, 4, "FAILED only after max_attempts"),
            ref other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    assert_eq!(delays.len(), 3);
    let rec = h.store().get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Failed);
    assert_eq!(rec.attempt_count, 4);
    let err = rec.last_error.clone().unwrap();
    assert!(
        err.contains("payments_projection") && err.contains("500"),
        "{err}"
    );
    assert!(
        !err.contains(STRIPE_KEY) && !err.contains("\"data\""),
        "{err}"
    );
    assert!(err.chars().count() <= 500);
    assert!(h.store().payment_state("ch_retry").await.unwrap().is_none());

    // Operators see it, then retry it with the real binary.
    let list = cli(
        h.config_path(),
        &["events", "list", "--status", "failed", "--json"],
    );
    let lines: Vec<Value> = list
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{list}");
    for key in [
        "id",
        "provider",
        "endpoint_id",
        "provider_event_id",
        "event_type",
        "status",
        "outcome",
        "attempt_count",
    ] {
        assert!(lines[0].get(key).is_some(), "{key} missing: {list}");
    }
    assert_eq!(lines[0]["id"], id.as_str());
    assert_eq!(lines[0]["status"], "FAILED");
    assert_eq!(lines[0]["attempt_count"], 4);
    let show = cli(h.config_path(), &["events", "show", &id]);
    assert!(
        !show.contains("ch_retry\",\"object\""),
        "show prints no payload: {show}"
    );

    fake.fail_next(0);
    cli(h.config_path(), &["events", "retry", &id]);
    let rec = h.store().get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.status, InboxStatus::Received);
    assert_eq!(rec.attempt_count, 0);
    // The CLI stamped "due now" with the real clock; move the pinned clock past it.
    h.set_ms(rec.next_attempt_at_ms.unwrap() + 1_000);
    let done = p.run_once("w", 10).await.unwrap();
    assert_eq!(
        done,
        [Processed::Completed(hookgate_store::Completion::Processed(
            Outcome::Applied
        ))]
    );
    let state = h.store().payment_state("ch_retry").await.unwrap().unwrap();
    assert_eq!(
        (state.status.as_str(), state.amount, state.write_count),
        ("succeeded", Some(700), 1)
    );
    // The three retries are counted for on-call, and the processing commits timed (the
    // recorder is the process's: other tests of this endpoint only add to the counts).
    let metrics = metrics_text(h.admin).await;
    let retries = series_value(
        &metrics,
        "hookgate_processing_retries_total{endpoint=\"stripe-main\"}",
    )
    .unwrap_or_default();
    assert!(retries >= 3.0, "{retries} retries counted:\n{metrics}");
    let commits = series_value(&metrics, "hookgate_processing_commit_latency_seconds_count")
        .unwrap_or_default();
    assert!(commits >= 1.0, "{commits} processing commits timed");
    h.stop().await;
}

/// Runs the real binary with `args` and the config; panics on failure; returns stdout.
fn cli(config: &Path, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(binary());
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env_remove("HOOKGATE_FAILPOINTS");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Stripe events for one payment in the wrong order (succeeded before processing, a refund
/// before its charge, a dispute opened then updated): `payment_state` converges on what the
/// API says now, not on what each event carried.
async fn stripe_events_out_of_order_converge_on_the_api(backend: Backend) {
    let fake = FakeStripe::start().await;
    let mut h = start_driven(backend, Some(&fake), &stripe_endpoint("")).await;
    let p = h.processor();
    let send = |event_id: &'static str,
                kind: &'static str,
                object: &'static str,
                id: &'static str,
                status: &'static str| {
        let addr = h.addr;
        async move {
            let r = post_stripe(addr, &stripe_body(event_id, kind, object, id, status)).await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    };
    // The payment succeeded; its `succeeded` event arrives first, the older `processing` one
    // after it (it says "processing", the API says "succeeded").
    fake.set("payment_intent", "pi_ooo", "succeeded", 5000);
    send(
        "evt_pi_succeeded",
        "payment_intent.succeeded",
        "payment_intent",
        "pi_ooo",
        "succeeded",
    )
    .await;
    drain(&p, "w").await;
    h.set_ms(NOW * 1000 + 1_000);
    send(
        "evt_pi_processing",
        "payment_intent.processing",
        "payment_intent",
        "pi_ooo",
        "processing",
    )
    .await;
    drain(&p, "w").await;
    // A refund arrives before the charge it refunds.
    fake.set("refund", "re_ooo", "succeeded", 5000);
    fake.set("charge", "ch_ooo", "succeeded", 5000);
    h.set_ms(NOW * 1000 + 2_000);
    send(
        "evt_re_created",
        "refund.created",
        "refund",
        "re_ooo",
        "pending",
    )
    .await;
    drain(&p, "w").await;
    h.set_ms(NOW * 1000 + 3_000);
    send(
        "evt_ch_succeeded",
        "charge.succeeded",
        "charge",
        "ch_ooo",
        "pending",
    )
    .await;
    drain(&p, "w").await;
    // A dispute: the `closed` event arrives before `created`; the API says it was won.
    fake.set("dispute", "dp_ooo", "won", 5000);
    h.set_ms(NOW * 1000 + 4_000);
    send(
        "evt_dp_closed",
        "charge.dispute.closed",
        "dispute",
        "dp_ooo",
        "won",
    )
    .await;
    drain(&p, "w").await;
    h.set_ms(NOW * 1000 + 5_000);
    send(
        "evt_dp_created",
        "charge.dispute.created",
        "dispute",
        "dp_ooo",
        "needs_response",
    )
    .await;
    drain(&p, "w").await;
    // An event about an object the projection does not follow changes nothing, but is done.
    let other = json!({"id": "evt_cus", "object": "event", "type": "customer.created", "data": {"object": {"id": "cus_1", "object": "customer"}}});
    let r = post_stripe(h.addr, other.to_string().as_bytes()).await;
    assert_eq!(r.status, 200);
    drain(&p, "w").await;

    for (id, status) in [
        ("pi_ooo", "succeeded"),
        ("re_ooo", "succeeded"),
        ("ch_ooo", "succeeded"),
        ("dp_ooo", "won"),
    ] {
        let state = h.store().payment_state(id).await.unwrap().unwrap();
        assert_eq!(state.status, status, "{id}");
        assert_eq!(state.amount, Some(5000));
        assert_eq!(state.currency.as_deref(), Some("usd"));
    }
    // The API changes later (the payment is refunded): the next event converges on it.
    fake.set("payment_intent", "pi_ooo", "canceled", 5000);
    h.set_ms(NOW * 1000 + 6_000);
    send(
        "evt_pi_canceled",
        "payment_intent.canceled",
        "payment_intent",
        "pi_ooo",
        "canceled",
    )
    .await;
    drain(&p, "w").await;
    let state = h.store().payment_state("pi_ooo").await.unwrap().unwrap();
    assert_eq!(
        (state.status.as_str(), state.last_event_id.as_str()),
        ("canceled", "evt_pi_canceled")
    );

    let events = h.events().await;
    assert_eq!(events.len(), 8);
    assert!(
        events
            .iter()
            .all(|e| e.status == InboxStatus::Processed && e.outcome == Some(Outcome::Applied))
    );
    assert!(h.store().payment_state("cus_1").await.unwrap().is_none());
    // An object the API does not know is a permanent failure, at once.
    send(
        "evt_missing",
        "payment_intent.succeeded",
        "payment_intent",
        "pi_missing",
        "succeeded",
    )
    .await;
    assert_eq!(drain(&p, "w").await, [Processed::Failed]);
    h.stop().await;
}

/// Two pool workers busy with a slow API while 60 webhooks arrive: every webhook is
/// acknowledged (the slow handler runs outside the writer and any transaction), the backlog
/// waits in the inbox, then drains; nothing lost or duplicated.
async fn slow_handler_does_not_block_acknowledgements(backend: Backend) {
    let fake = FakeStripe::start().await;
    fake.state.delay_ms.store(150, Ordering::SeqCst);
    for i in 0..60 {
        fake.set(
            "payment_intent",
            &format!("pi_slow{i}"),
            "succeeded",
            100 + i,
        );
    }
    let mut h = gateway(backend, Some(&fake), &stripe_endpoint(""))
        .fixed_clock(NOW)
        .workers(2)
        .worker_settings("poll_interval_ms = 20")
        .start()
        .await;
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..60 {
        let addr = h.addr;
        sends.spawn(async move {
            let body = stripe_body(
                &format!("evt_slow{i}"),
                "payment_intent.succeeded",
                "payment_intent",
                &format!("pi_slow{i}"),
                "succeeded",
            );
            post_stripe(addr, &body).await
        });
    }
    let mut accepted = 0;
    while let Some(r) = sends.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["status"], "accepted");
        accepted += 1;
    }
    assert_eq!(accepted, 60);
    let backlog = h
        .store()
        .list_events(&EventFilter {
            status: Some(InboxStatus::Received),
            ..Default::default()
        })
        .await
        .unwrap()
        .len();
    assert!(
        backlog > 0,
        "the workers were saturated, so rows waited in the inbox"
    );
    let store = h.store().clone();
    wait_until("the backlog to drain", Duration::from_secs(90), || {
        let store = store.clone();
        async move {
            let events = store.list_events(&EventFilter::default()).await.unwrap();
            events.iter().all(|e| e.status == InboxStatus::Processed)
        }
    })
    .await;
    assert_eq!(h.events().await.len(), 60);
    for i in 0..60 {
        let state = h
            .store()
            .payment_state(&format!("pi_slow{i}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((state.amount, state.write_count), (Some(100 + i), 1));
    }
    assert_eq!(
        fake.state.requests.load(Ordering::SeqCst),
        60,
        "one fetch per event"
    );
    h.stop().await;
}

/// The real binary aborts at a worker failpoint; restarted without it, the event converges
/// to PROCESSED with exactly one business mutation.
#[cfg(feature = "failpoints")]
async fn crash_then_restart_converges(backend: Backend, failpoint: &str, attempts: i64) {
    let fake = FakeStripe::start().await;
    fake.set("payment_intent", "pi_crash", "succeeded", 4200);
    let files = gateway(backend, Some(&fake), &stripe_endpoint(""))
        .workers(1)
        .worker_settings("lease_seconds = 2\npoll_interval_ms = 20")
        .write()
        .await;
    let mut first = files.serve(Some(&format!("{failpoint}=abort")));
    let addr = first.addr();
    let body = stripe_body(
        "evt_crash",
        "payment_intent.succeeded",
        "payment_intent",
        "pi_crash",
        "succeeded",
    );
    // The worker may abort before the answer is written (it runs beside ingress); the row is
    // committed either way, since a worker only leases committed rows.
    let request = build_request(
        "POST",
        "/webhooks/stripe-main",
        &signed_headers("stripe", STRIPE_SECRET, "", real_now_secs(), &body),
        &body,
    );
    let answer = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(|| send_raw(addr, &request)).ok()
    })
    .await
    .unwrap();
    if let Some(r) = answer {
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let status = tokio::task::spawn_blocking(move || first.wait_exit())
        .await
        .unwrap();
    assert!(
        !status.success(),
        "the worker must have aborted at {failpoint}"
    );

    let second = files.serve(None);
    let store = files.open_store().await;
    let event = wait_for(
        "the event PROCESSED after the restart",
        Duration::from_secs(30),
        || {
            let store = store.clone();
            async move {
                let events = store.list_events(&EventFilter::default()).await.unwrap();
                assert_eq!(events.len(), 1);
                (events[0].status == InboxStatus::Processed).then(|| events[0].clone())
            }
        },
    )
    .await;
    assert_eq!(event.outcome, Some(Outcome::Applied));
    assert_eq!(event.attempt_count, attempts, "{failpoint}");
    let state = store.payment_state("pi_crash").await.unwrap().unwrap();
    assert_eq!((state.status.as_str(), state.write_count), ("succeeded", 1));
    assert_eq!(
        store
            .processed_markers("stripe", "stripe-main", "evt_crash")
            .await
            .unwrap(),
        ["payments_projection"]
    );
    store.close().await;
    // Asserts a clean shutdown.
    tokio::task::spawn_blocking(move || second.terminate())
        .await
        .unwrap();
}

#[cfg(feature = "failpoints")]
fn real_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `events show --payload` decrypts on purpose and says so; `hookgate worker` alone (no
/// webhook listener) processes what `serve` accepted, and stops cleanly on SIGTERM.
#[tokio::test]
async fn show_payload_and_standalone_worker() {
    let mut h = start_driven(Backend::Sqlite, None, &sw_endpoint()).await;
    let r = post_sw(h.addr, "msg_standalone", "obj_standalone", 4).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_owned();

    let plain: Value =
        serde_json::from_str(&cli(h.config_path(), &["events", "show", &id])).unwrap();
    assert!(
        plain.get("payload").is_none(),
        "no payload without --payload: {plain}"
    );
    let out = std::process::Command::new(binary())
        .args(["events", "show", &id, "--payload", "--config"])
        .arg(h.config_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let body: Value = serde_json::from_str(shown["payload"].as_str().unwrap()).unwrap();
    assert_eq!(
        body["data"]["id"], "obj_standalone",
        "the decrypted body is shown"
    );
    assert_eq!(body["data"]["version"], 4);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("decrypted"),
        "decrypting is announced"
    );

    let config_path = h.config_path().to_owned();
    let store = h.store().clone();
    // The same store, now with one worker, run by `hookgate worker` alone.
    let text = std::fs::read_to_string(&config_path)
        .unwrap()
        .replace("concurrency = 0", "concurrency = 1");
    let worker_config = config_path.with_file_name("worker.toml");
    std::fs::write(&worker_config, text).unwrap();
    let worker = BinaryGateway::start(BinaryRole::Worker, &worker_config, None);
    assert_eq!(worker.webhook, None, "a worker has no webhook listener");
    wait_until(
        "the standalone worker to process the event",
        Duration::from_secs(10),
        || {
            let (store, id) = (store.clone(), id.clone());
            async move {
                store.get_event(&id).await.unwrap().unwrap().status == InboxStatus::Processed
            }
        },
    )
    .await;
    let rec = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(rec.outcome, Some(Outcome::Applied));
    // Asserts that the worker stops cleanly on SIGTERM.
    tokio::task::spawn_blocking(move || worker.terminate())
        .await
        .unwrap();
    h.stop().await;
}
