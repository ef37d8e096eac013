//! Provider reconciliation through the real binary, on both backends (issue 18, "With the
//! providers"), against a stand-in for Stripe's API that speaks its documented wire format
//! (`GET /v1/events` with `created[gte]`, `limit`, `starting_after`; the list object
//! `{"object":"list","data":[…],"has_more":…,"url":"/v1/events"}`; `Authorization: Bearer`;
//! 401 with `{"error":{…}}` on a bad key; 429 with `Retry-After`): events missing from the
//! inbox are brought in once, `source = reconciled`, and then processed and delivered as
//! usual; the one that arrived as a webhook is not duplicated; a second run resumes from the
//! checkpoint and finds nothing new; a bad key fails the run with a clear error, exit ≠ 0.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use hookgate_core::InboxStatus;
use hookgate_store::EventFilter;
use serde_json::{Value, json};

use crate::support::*;

const WHSEC: &str = "whsec_cHJvdmlkZXItcmVjb25jaWxlLXRlc3Qtc2VjcmV0";
const RESTRICTED_KEY: &str = "rk_test_provider_reconcile_0123456789";
const DEST_SECRET: &str = "whsec_aG9va2dhdGUtZGVzdGluYXRpb24tc2lnbmluZy1rISE=";
const WAIT: Duration = Duration::from_secs(60);

/// What the stand-in for Stripe's API holds and saw.
#[derive(Default)]
struct StripeState {
    /// Events, oldest first (Stripe lists them newest first).
    events: Vec<Value>,
    /// The query of every `GET /v1/events`, in order.
    queries: Vec<BTreeMap<String, String>>,
    /// The next this many calls are answered 429 with `Retry-After: 1`.
    throttle: u32,
    /// When the last 429 was answered.
    throttled_at: Option<Instant>,
    /// When the call after a 429 came.
    retried_at: Option<Instant>,
    /// Events delivered to every webhook endpoint (not listed with `delivery_success=false`).
    delivered: Vec<String>,
}

type Shared = Arc<Mutex<StripeState>>;

/// Stripe pages at most this many here, so a run follows `has_more` / `starting_after`.
const STAND_IN_PAGE: usize = 2;

async fn list_events(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> axum::response::Response {
    let mut s = state.lock().unwrap();
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {RESTRICTED_KEY}"))
    {
        let body = json!({"error": {
            "type": "invalid_request_error",
            "message": "Invalid API Key provided: rk_test_****0000",
        }});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    s.queries.push(query.clone());
    if s.throttle > 0 {
        s.throttle -= 1;
        s.throttled_at = Some(Instant::now());
        let body = json!({"error": {"type": "rate_limit_error", "message": "Too many requests"}});
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            axum::Json(body),
        )
            .into_response();
    }
    if s.throttled_at.is_some() && s.retried_at.is_none() {
        s.retried_at = Some(Instant::now());
    }
    let gte: i64 = query
        .get("created[gte]")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let limit: usize = query
        .get("limit")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut newest_first: Vec<&Value> = s
        .events
        .iter()
        .rev()
        .filter(|e| e["created"].as_i64().unwrap() >= gte)
        .filter(|e| {
            query.get("delivery_success").map(String::as_str) != Some("false")
                || !s.delivered.iter().any(|d| e["id"] == d.as_str())
        })
        .collect();
    if let Some(after) = query.get("starting_after") {
        let at = newest_first
            .iter()
            .position(|e| e["id"] == after.as_str())
            .expect("starting_after names a listed event");
        newest_first.drain(..=at);
    }
    let take = limit.min(STAND_IN_PAGE);
    let has_more = newest_first.len() > take;
    let data: Vec<Value> = newest_first.into_iter().take(take).cloned().collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "has_more": has_more,
        "url": "/v1/events",
    }))
    .into_response()
}

async fn stand_in(state: Shared) -> SocketAddr {
    let router = axum::Router::new()
        .route("/v1/events", axum::routing::get(list_events))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A Stripe event object as `/v1/events` lists it (and a webhook carries it).
fn stripe_event(id: &str, created: i64) -> Value {
    json!({
        "id": id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "type": "payment_intent.succeeded",
        "livemode": false,
        "pending_webhooks": 1,
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent", "status": "succeeded"}},
    })
}

/// A destination that counts deliveries per `Idempotency-Key`.
async fn receiver(keys: Arc<Mutex<BTreeMap<String, u32>>>) -> SocketAddr {
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let keys = Arc::clone(&keys);
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
                    .to_owned();
                *keys.lock().unwrap().entry(key).or_default() += 1;
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// The restricted key in a `file:` secret (owner-only), which a test can change.
struct KeyFile {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl KeyFile {
    fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stripe-key");
        std::fs::write(&path, RESTRICTED_KEY).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        Self { _dir: dir, path }
    }

    fn set(&self, key: &str) {
        std::fs::write(&self.path, key).unwrap();
    }
}

/// How a test's endpoint differs from the default one.
#[derive(Default)]
struct Options<'a> {
    /// `[reconcile] enabled`: the stage runs provider reconciliation on its schedule.
    stage: bool,
    /// More lines of the endpoint.
    endpoint: &'a str,
    /// More keys inside the endpoint's `reconcile = { … }`, each with a leading `, `.
    reconcile: &'a str,
}

/// What a test runs against: the Stripe stand-in's state, the deliveries the destination
/// counted per `Idempotency-Key`, the key file and the gateway's files (not started).
struct Setup {
    state: Shared,
    keys: Arc<Mutex<BTreeMap<String, u32>>>,
    key: KeyFile,
    files: GatewayFiles,
}

async fn setup(backend: Backend, options: Options<'_>) -> Setup {
    let state: Shared = Arc::default();
    let api = stand_in(Arc::clone(&state)).await;
    let keys: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let hook = receiver(Arc::clone(&keys)).await;
    let key = KeyFile::new();
    let files = gateway(backend, api, hook, &key, &options).write().await;
    Setup {
        state,
        keys,
        key,
        files,
    }
}

fn gateway(
    backend: Backend,
    api: SocketAddr,
    hook: SocketAddr,
    key: &KeyFile,
    options: &Options<'_>,
) -> GatewayBuilder {
    let builder = TestGateway::builder()
        .backend(backend)
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20");
    let builder = if options.stage {
        builder
    } else {
        builder.section("[reconcile]\nenabled = false\n")
    };
    builder
        .destinations(&format!(
            "[[destinations]]\nid = \"hook\"\nkind = \"http\"\nurl = {}\n\
             allow_private_network = true\nsigning_secrets = [{}]\ntimeout_ms = 10000\n",
            q(&format!("http://{hook}/hook")),
            q(DEST_SECRET)
        ))
        .endpoints(&endpoint_toml(
            "pay",
            "stripe",
            &[WHSEC],
            &format!(
                "destinations = [\"hook\"]\nreconcile = {{ api_key = {}, \
                 api_base = {}, interval_seconds = 600{} }}\n{}",
                q(&format!("file:{}", key.path.display())),
                q(&format!("http://{api}")),
                options.reconcile,
                options.endpoint
            ),
        ))
}

/// `hookgate reconcile --config F` with `args`: exit status, JSON report, stderr.
fn reconcile(files: &GatewayFiles, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(binary())
        .arg("reconcile")
        .arg("--config")
        .arg(&files.config_path)
        .args(args)
        .env_remove("HOOKGATE_FAILPOINTS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("not a JSON report (exit {code}): {stdout}\n{stderr}"));
    (code, report, stderr)
}

fn provider(report: &Value) -> &Value {
    &report["endpoints"][0]["provider"]
}

async fn rows(store: &hookgate_store::SharedStore) -> Vec<hookgate_store::InboxRecord> {
    store
        .list_events(&EventFilter {
            endpoint_id: Some("pay".into()),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn stripe_events_missing_from_the_inbox_are_brought_in_once(backend: Backend) {
    let now = unix_now();
    let Setup {
        state,
        keys,
        key,
        files,
    } = setup(backend, Options::default()).await;
    state.lock().unwrap().events = vec![
        stripe_event("evt_old", now - 40 * 86_400),
        stripe_event("evt_1", now - 3_000),
        stripe_event("evt_2", now - 2_000),
        stripe_event("evt_3", now - 1_000),
    ];
    let p = files.serve(None);

    // evt_2 arrived as a webhook; evt_1 and evt_3 never did.
    let body = state.lock().unwrap().events[2].to_string();
    let r = post_signed(
        p.addr(),
        "pay",
        "stripe",
        WHSEC,
        "evt_2",
        now,
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let webhook_row = r.json()["id"].as_str().unwrap().to_owned();
    let store = files.open_store().await;

    // A bad key: the run fails with a clear error and exit ≠ 0, nothing is stored.
    key.set("rk_test_wrong");
    let (code, report, stderr) = reconcile(&files, &[]);
    key.set(RESTRICTED_KEY);
    assert_ne!(code, 0, "{report}");
    assert!(
        stderr.contains("401") && stderr.contains("reconcile.api_key"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("rk_test_wrong"),
        "the key is never printed"
    );
    assert!(provider(&report)["error"].as_str().unwrap().contains("401"));
    assert_eq!(rows(&store).await.len(), 1);
    assert!(store.checkpoint("pay").await.unwrap().is_none());

    // A dry run lists and changes nothing.
    let (code, dry, _) = reconcile(&files, &["--dry-run"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(provider(&dry)["found"], 2, "{dry}");
    assert_eq!(provider(&dry)["already_present"], 1, "{dry}");
    assert_eq!(rows(&store).await.len(), 1);
    assert!(store.checkpoint("pay").await.unwrap().is_none());

    // The first real run looks back Stripe's 30 days, pages through the listing (the API
    // first answers 429 with Retry-After: 1, which is waited out), and brings in evt_1 and
    // evt_3 once; evt_2 keeps its webhook row.
    state.lock().unwrap().queries.clear();
    state.lock().unwrap().throttle = 1;
    let (code, run, stderr) = reconcile(&files, &["--endpoint", "pay"]);
    assert_eq!(code, 0, "{run}\n{stderr}");
    assert_eq!(provider(&run)["found"], 2, "{run}");
    assert_eq!(provider(&run)["already_present"], 1, "{run}");
    {
        let s = state.lock().unwrap();
        let waited = s.retried_at.unwrap() - s.throttled_at.unwrap();
        assert!(
            waited >= Duration::from_millis(950),
            "Retry-After honoured: {waited:?}"
        );
        let first = &s.queries[0];
        let gte: i64 = first["created[gte]"].parse().unwrap();
        assert!(
            (gte - (now - 30 * 86_400)).abs() < 120,
            "30 days back: {first:?}"
        );
        assert_eq!(first["limit"], "100");
        assert!(
            s.queries.iter().any(|q| q.get("starting_after").is_some()),
            "has_more followed: {:?}",
            s.queries
        );
    }
    let all = rows(&store).await;
    assert_eq!(all.len(), 3, "evt_1 and evt_3 added, evt_2 not duplicated");
    let by_id: BTreeMap<String, hookgate_store::InboxRecord> = all
        .into_iter()
        .map(|r| (r.provider_event_id.clone(), r))
        .collect();
    assert_eq!(by_id["evt_2"].inbox_id, webhook_row);
    assert_eq!(by_id["evt_1"].matched_secret_version, "api");
    assert_eq!(
        by_id["evt_1"].source,
        hookgate_core::EventSource::Reconciled
    );
    assert_eq!(by_id["evt_1"].api_version.as_deref(), Some("2024-06-20"));
    assert_eq!(by_id["evt_2"].source, hookgate_core::EventSource::Webhook);
    assert_eq!(
        by_id["evt_1"].event_type.as_deref(),
        Some("payment_intent.succeeded")
    );
    assert!(
        !by_id.contains_key("evt_old"),
        "older than the listing horizon"
    );

    // Then processed and delivered as usual, each under its own row's idempotency key.
    wait_until("all three processed and delivered", WAIT, || async {
        let k = keys.lock().unwrap().clone();
        by_id.values().all(|r| k.contains_key(&r.inbox_id))
    })
    .await;
    for r in rows(&store).await {
        assert_eq!(r.status, InboxStatus::Processed, "{}", r.provider_event_id);
    }
    let checkpoint = store.checkpoint("pay").await.unwrap().unwrap();
    assert_eq!(checkpoint.provider, "stripe");
    assert!((checkpoint.checkpoint_at_ms / 1000 - (unix_now() - 60)).abs() < 120);

    // A second run resumes from the checkpoint and finds nothing new.
    state.lock().unwrap().queries.clear();
    state
        .lock()
        .unwrap()
        .events
        .push(stripe_event("evt_4", unix_now()));
    let (code, again, _) = reconcile(&files, &[]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        provider(&again)["found"],
        1,
        "only the event created since: {again}"
    );
    let gte: i64 = state.lock().unwrap().queries[0]["created[gte]"]
        .parse()
        .unwrap();
    assert_eq!(
        gte,
        checkpoint.checkpoint_at_ms / 1000,
        "resumed at the checkpoint"
    );
    let (code, third, _) = reconcile(&files, &[]);
    assert_eq!(code, 0, "{third}");
    assert_eq!(provider(&third)["found"], 0, "{third}");
    assert_eq!(rows(&store).await.len(), 4);
    wait_until("evt_4 delivered", WAIT, || async {
        keys.lock().unwrap().len() == 4
    })
    .await;
    assert!(keys.lock().unwrap().values().all(|n| *n == 1));

    p.terminate();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stripe_events_missing_from_the_inbox_are_brought_in_once_on_sqlite() {
    stripe_events_missing_from_the_inbox_are_brought_in_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stripe_events_missing_from_the_inbox_are_brought_in_once_on_postgres() {
    stripe_events_missing_from_the_inbox_are_brought_in_once(Backend::Postgres).await;
}

/// The `reconcile` stage reconciles the endpoint with Stripe on its own schedule, counts what
/// it found on `/metrics`, and does not run again before `interval_seconds`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stage_reconciles_with_stripe_on_its_schedule() {
    let now = unix_now();
    let Setup {
        state,
        keys,
        key: _key,
        files,
    } = setup(
        Backend::Sqlite,
        Options {
            stage: true,
            ..Options::default()
        },
    )
    .await;
    state.lock().unwrap().events = vec![
        stripe_event("evt_a", now - 100),
        stripe_event("evt_b", now - 50),
    ];
    let p = files.serve(None);
    let admin = p.admin.unwrap();
    wait_until("both delivered", WAIT, || async {
        keys.lock().unwrap().len() == 2
    })
    .await;
    wait_until("counted", WAIT, || async {
        metric(
            admin,
            "hookgate_reconciled_total{provider=\"stripe\",outcome=\"found\"}",
        ) == Some(2.0)
    })
    .await;
    assert_eq!(
        metric(
            admin,
            "hookgate_provider_reconcile_runs_total{provider=\"stripe\",result=\"done\"}"
        ),
        Some(1.0)
    );
    // Within the interval (600 s) the stage lists nothing again.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(state.lock().unwrap().queries.len(), 1);
    p.terminate();
}

/// A Stripe event about customer `object` carrying `sequence` at `/data/object/sequence`.
fn sequenced_event(id: &str, created: i64, object: &str, sequence: i64) -> Value {
    let mut event = stripe_event(id, created);
    event["type"] = json!("customer.updated");
    event["data"]["object"] = json!({"id": object, "object": "customer", "sequence": sequence});
    event
}

async fn inbox_row(
    store: &hookgate_store::SharedStore,
    event_id: &str,
) -> Option<hookgate_store::InboxRecord> {
    rows(store)
        .await
        .into_iter()
        .find(|r| r.provider_event_id == event_id)
}

/// Waits (bounded) until the row of `event_id` has `status`; returns it.
async fn wait_status(
    store: &hookgate_store::SharedStore,
    event_id: &str,
    status: InboxStatus,
) -> hookgate_store::InboxRecord {
    wait_for(&format!("{event_id} {status}"), WAIT, || async {
        inbox_row(store, event_id)
            .await
            .filter(|r| r.status == status)
    })
    .await
}

/// A sequence gap that outlives its window asks the provider reconciliation for the missing
/// event at once, from before the gap opened (here: created before the last run's
/// checkpoint, so a scheduled run would not list it): it is brought in and applied; the held
/// event, released, then follows it in order (applied, not over a gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_sequence_gap_asks_stripe_for_the_missing_event() {
    let now = unix_now();
    let Setup {
        state,
        key: _key,
        files,
        ..
    } = setup(
        Backend::Sqlite,
        Options {
            stage: true,
            endpoint: "sequence_pointer = \"/data/object/sequence\"\nsequence_gap_seconds = 1",
            ..Options::default()
        },
    )
    .await;
    let p = files.serve(None);
    let store = files.open_store().await;
    wait_until(
        "the scheduled run at start listed nothing",
        WAIT,
        || async { state.lock().unwrap().queries.len() == 1 },
    )
    .await;

    // Stripe created 1, 2 and 3; its delivery of 2 never arrived.
    let events = [
        sequenced_event("evt_seq_1", now - 300, "cus_gap", 1),
        sequenced_event("evt_seq_2", now - 200, "cus_gap", 2),
        sequenced_event("evt_seq_3", now - 100, "cus_gap", 3),
    ];
    state.lock().unwrap().events = events.to_vec();
    for e in [&events[0], &events[2]] {
        let id = e["id"].as_str().unwrap();
        let body = e.to_string();
        let r = post_signed(
            p.addr(),
            "pay",
            "stripe",
            WHSEC,
            id,
            unix_now(),
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    wait_status(&store, "evt_seq_3", InboxStatus::Held).await;

    // The asked run lists from before the gap and brings 2 in; 2 is applied.
    let two = wait_status(&store, "evt_seq_2", InboxStatus::Processed).await;
    assert_eq!(two.source.as_str(), "reconciled");
    assert_eq!(two.outcome.map(|o| o.as_str()), Some("applied"));
    let asked = state.lock().unwrap().queries[1].clone();
    let gte: i64 = asked["created[gte]"].parse().unwrap();
    assert!(
        gte <= now - 200,
        "the asked run starts before the gap: {asked:?}"
    );
    assert_eq!(
        inbox_row(&store, "evt_seq_3").await.unwrap().status,
        InboxStatus::Held,
        "a held event waits for the operator"
    );

    let (code, out, err) = run_hookgate(
        &files.config_path,
        &["events", "release", "--endpoint", "pay"],
    );
    assert_eq!(code, 0, "{out} {err}");
    let three = wait_status(&store, "evt_seq_3", InboxStatus::Processed).await;
    assert_eq!(three.outcome.map(|o| o.as_str()), Some("applied"));
    assert!(three.processed_at_ms >= two.processed_at_ms);
    store.close().await;
    p.terminate();
}

/// `undelivered_only = true` lists with Stripe's `delivery_success=false`: only events not yet
/// delivered to every webhook endpoint, among them every one this endpoint never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undelivered_only_lists_what_stripe_has_not_delivered() {
    let now = unix_now();
    let Setup {
        state,
        key: _key,
        files,
        ..
    } = setup(
        Backend::Sqlite,
        Options {
            reconcile: ", undelivered_only = true",
            ..Options::default()
        },
    )
    .await;
    {
        let mut s = state.lock().unwrap();
        s.events = vec![
            stripe_event("evt_delivered", now - 300),
            stripe_event("evt_undelivered", now - 200),
        ];
        s.delivered = vec!["evt_delivered".into()];
    }
    let (code, report, stderr) = reconcile(&files, &[]);
    assert_eq!(code, 0, "{report}\n{stderr}");
    let listed: Vec<&str> = provider(&report)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec!["evt_undelivered"], "{report}");
    assert_eq!(provider(&report)["found"], 1);
    let queries = state.lock().unwrap().queries.clone();
    assert!(
        queries
            .iter()
            .all(|q| q.get("delivery_success").map(String::as_str) == Some("false")),
        "{queries:?}"
    );
    let (code, out, err) = run_hookgate(&files.config_path, &["config", "check"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("undelivered_only = true"), "{out}");
}
