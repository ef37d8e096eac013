//! GitHub provider reconciliation and the no-retry window through the real binary, on both
//! backends (issue 18), against a stand-in for GitHub's REST API that speaks its documented
//! wire format: `GET /repos/{owner}/{repo}/hooks/{id}/deliveries?per_page=…` answered newest
//! first with cursor pagination in the `Link` header, `Authorization: Bearer`, `Accept:
//! application/vnd.github+json` and `X-GitHub-Api-Version: 2022-11-28` required (401 `{"message":
//! "Bad credentials"}` otherwise), 403 with `x-ratelimit-remaining: 0` / `x-ratelimit-reset`
//! for a spent rate limit, and `POST …/deliveries/{id}/attempts` answered 202, after which the
//! stand-in sends the delivery again to the gateway, signed as GitHub signs
//! (`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`, `X-GitHub-Delivery`,
//! `X-GitHub-Event`), and lists that attempt with the status code the gateway answered.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use hmac::{Hmac, Mac};
use hookgate_store::{EventFilter, SharedStore};
use serde_json::{Value, json};

use crate::support::*;

const HOOK_SECRET: &str = "github-reconcile-hook-secret";
const TOKEN: &str = "github_pat_reconcile_test_0123456789";
const HOOK: &str = "repos/octo-org/hello.world/hooks/4242";
const WAIT: Duration = Duration::from_secs(60);
/// The stand-in lists this many deliveries a page, so a run follows `Link: rel="next"`.
const STAND_IN_PAGE: usize = 2;

/// One delivery as GitHub keeps it (the stand-in also keeps its body, to send it again).
#[derive(Clone)]
struct Sent {
    id: u64,
    guid: String,
    delivered_at: i64,
    redelivery: bool,
    status_code: u16,
    event: String,
    body: String,
}

#[derive(Default)]
struct GithubState {
    /// Every delivery, in the order sent (listed newest first).
    deliveries: Vec<Sent>,
    /// The gateway's webhook listener, where deliveries are sent.
    gateway: Option<SocketAddr>,
    /// The cursor of every list call (`None`: the first page).
    list_calls: Vec<Option<usize>>,
    /// Delivery ids a redelivery was asked for, in order.
    attempts: Vec<u64>,
    /// Delivery ids whose redelivery GitHub refuses (422 "Validation Failed").
    refused: Vec<u64>,
    /// The next list call is answered 403 with a spent rate limit resetting in 2 s.
    rate_limit_once: bool,
    limited_at: Option<Instant>,
    retried_at: Option<Instant>,
    /// The first page's `rel="next"` names this origin instead of the stand-in's.
    foreign_next: Option<String>,
}

type Shared = Arc<Mutex<GithubState>>;

fn github_signature(body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(HOOK_SECRET.as_bytes()).unwrap();
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Sends one delivery to the gateway as GitHub does, and lists it with the status answered
/// (0 when nothing answered).
async fn deliver(state: &Shared, guid: &str, redelivery: bool) -> u16 {
    let (addr, body, event) = {
        let s = state.lock().unwrap();
        let first = s
            .deliveries
            .iter()
            .find(|d| d.guid == guid)
            .expect("a GUID the stand-in sent before");
        (s.gateway.unwrap(), first.body.clone(), first.event.clone())
    };
    let status = post_github(addr, guid, &event, body.as_bytes()).await;
    let mut s = state.lock().unwrap();
    let id = s.deliveries.len() as u64 + 1;
    s.deliveries.push(Sent {
        id,
        guid: guid.to_owned(),
        delivered_at: unix_now(),
        redelivery,
        status_code: status,
        event,
        body,
    });
    status
}

async fn post_github(addr: SocketAddr, guid: &str, event: &str, body: &[u8]) -> u16 {
    let headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "User-Agent".to_owned(),
            "GitHub-Hookshot/0a1b2c3".to_owned(),
        ),
        ("X-GitHub-Delivery".to_owned(), guid.to_owned()),
        ("X-GitHub-Event".to_owned(), event.to_owned()),
        ("X-GitHub-Hook-ID".to_owned(), "4242".to_owned()),
        ("X-Hub-Signature-256".to_owned(), github_signature(body)),
    ];
    send_raw_async(addr, build_request("POST", "/webhooks/gh", &headers, body))
        .await
        .status
}

/// A delivery the stand-in lists without sending it now (it was sent before the test).
fn listed(state: &Shared, guid: &str, ago_secs: i64, status_code: u16, redelivery: bool) {
    let mut s = state.lock().unwrap();
    let id = s.deliveries.len() as u64 + 1;
    s.deliveries.push(Sent {
        id,
        guid: guid.to_owned(),
        delivered_at: unix_now() - ago_secs,
        redelivery,
        status_code,
        event: "push".into(),
        body: push_body(guid),
    });
}

fn push_body(guid: &str) -> String {
    json!({
        "ref": "refs/heads/main",
        "after": format!("c0ffee{}", guid.len()),
        "repository": {"id": 1, "full_name": "octo-org/hello.world"},
        "head_commit": {"message": format!("commit for {guid}")},
    })
    .to_string()
}

fn authorized(headers: &HeaderMap) -> bool {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    h("authorization") == Some(&format!("Bearer {TOKEN}"))
        && h("accept") == Some("application/vnd.github+json")
        && h("x-github-api-version") == Some("2022-11-28")
        && h("user-agent").is_some_and(|ua| ua.starts_with("hookgate/"))
}

fn bad_credentials() -> axum::response::Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})),
    )
        .into_response()
}

async fn list_deliveries(
    State((state, origin)): State<(Shared, String)>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> axum::response::Response {
    if !authorized(&headers) {
        return bad_credentials();
    }
    let mut s = state.lock().unwrap();
    let cursor: Option<usize> = query.get("cursor").map(|c| c.parse().unwrap());
    s.list_calls.push(cursor);
    if s.rate_limit_once {
        s.rate_limit_once = false;
        s.limited_at = Some(Instant::now());
        let reset = (unix_now() + 2).to_string();
        return (
            StatusCode::FORBIDDEN,
            [
                ("x-ratelimit-limit", "5000".to_owned()),
                ("x-ratelimit-remaining", "0".to_owned()),
                ("x-ratelimit-reset", reset),
            ],
            axum::Json(json!({"message": "API rate limit exceeded for user ID 1."})),
        )
            .into_response();
    }
    if s.limited_at.is_some() && s.retried_at.is_none() {
        s.retried_at = Some(Instant::now());
    }
    assert_eq!(query.get("per_page").map(String::as_str), Some("100"));
    let newest_first: Vec<&Sent> = s.deliveries.iter().rev().collect();
    let from = cursor.unwrap_or(0);
    let page: Vec<Value> = newest_first
        .iter()
        .skip(from)
        .take(STAND_IN_PAGE)
        .map(|d| {
            json!({
                "id": d.id,
                "guid": d.guid,
                "delivered_at": jiff::Timestamp::from_second(d.delivered_at).unwrap().to_string(),
                "redelivery": d.redelivery,
                "duration": 0.27,
                "status": if (200..300).contains(&d.status_code) { "OK" } else { "Service Unavailable" },
                "status_code": d.status_code,
                "event": d.event,
                "action": null,
                "installation_id": null,
                "repository_id": 1,
                "throttled_at": null,
            })
        })
        .collect();
    let mut response = axum::Json(page).into_response();
    if from + STAND_IN_PAGE < newest_first.len() {
        let next_origin = s.foreign_next.clone().unwrap_or(origin);
        let link = format!(
            "<{next_origin}/{HOOK}/deliveries?cursor={}&per_page=100>; rel=\"next\"",
            from + STAND_IN_PAGE
        );
        response.headers_mut().insert("link", link.parse().unwrap());
    }
    response
}

async fn redeliver(
    State((state, _)): State<(Shared, String)>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> axum::response::Response {
    if !authorized(&headers) {
        return bad_credentials();
    }
    let guid = {
        let mut s = state.lock().unwrap();
        s.attempts.push(id);
        if s.refused.contains(&id) {
            let body = json!({
                "message": "Validation Failed",
                "documentation_url": "https://docs.github.com/rest/webhooks/repo-deliveries",
            });
            return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response();
        }
        match s.deliveries.iter().find(|d| d.id == id) {
            Some(d) => d.guid.clone(),
            None => return StatusCode::NOT_FOUND.into_response(),
        }
    };
    // GitHub answers at once and sends the delivery afterwards.
    let state = Arc::clone(&state);
    tokio::spawn(async move {
        deliver(&state, &guid, true).await;
    });
    (StatusCode::ACCEPTED, axum::Json(json!({}))).into_response()
}

/// The stand-in for GitHub's API on 127.0.0.1; its origin (`http://127.0.0.1:port`).
async fn stand_in(state: Shared) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .route(
            &format!("/{HOOK}/deliveries"),
            axum::routing::get(list_deliveries),
        )
        .route(
            &format!("/{HOOK}/deliveries/{{id}}/attempts"),
            axum::routing::post(redeliver),
        )
        .with_state((state, origin.clone()));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    origin
}

/// Any request at all to this listener is counted (a foreign origin the key must not reach).
async fn counting_listener(hits: Arc<Mutex<u32>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new().fallback(move || {
        let hits = Arc::clone(&hits);
        async move {
            *hits.lock().unwrap() += 1;
            StatusCode::OK
        }
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    origin
}

fn gateway(builder: GatewayBuilder, api_origin: &str, token: &str) -> GatewayBuilder {
    builder
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .section("[reconcile]\nenabled = false\n")
        .endpoints(&endpoint_toml(
            "gh",
            "github",
            &[HOOK_SECRET],
            &format!(
                "reconcile = {{ api_key = {}, api_base = {}, hook = {} }}",
                q(token),
                q(api_origin),
                q(HOOK)
            ),
        ))
}

/// `hookgate reconcile --config F <args>`: exit status, the endpoint's `provider` report,
/// stderr.
fn reconcile(files: &GatewayFiles, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["reconcile"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = run_hookgate(&files.config_path, &all);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("not a JSON report (exit {code}): {stdout}\n{stderr}"));
    (code, report["endpoints"][0]["provider"].clone(), stderr)
}

async fn rows(store: &SharedStore) -> BTreeMap<String, hookgate_store::InboxRecord> {
    store
        .list_events(&EventFilter {
            endpoint_id: Some("gh".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.provider_event_id.clone(), r))
        .collect()
}

fn attempts(state: &Shared) -> Vec<u64> {
    state.lock().unwrap().attempts.clone()
}

async fn deliveries_missing_from_the_inbox_are_redelivered_once(backend: Backend) {
    let state: Shared = Arc::default();
    let api = stand_in(Arc::clone(&state)).await;
    let files = gateway(TestGateway::builder().backend(backend), &api, TOKEN)
        .write()
        .await;
    let p = files.serve(None);
    state.lock().unwrap().gateway = Some(p.addr());
    let store = files.open_store().await;

    // Older than GitHub's 3 days: not looked at.
    listed(&state, "guid-too-old", 4 * 86_400, 503, false);
    // Arrived (the gateway stored it) though GitHub saw it fail (a timeout on its side).
    listed(&state, "guid-present", 3_000, 504, false);
    assert_eq!(deliver(&state, "guid-present", false).await, 200);
    // Failed, then a redelivery someone asked for by hand was answered 2xx elsewhere.
    listed(&state, "guid-answered", 2_500, 502, false);
    listed(&state, "guid-answered", 2_400, 200, true);
    // Failed, and GitHub refuses to redeliver it: reported, the others still asked for.
    listed(&state, "guid-refused", 2_200, 502, false);
    let refused = state.lock().unwrap().deliveries.last().unwrap().id;
    state.lock().unwrap().refused.push(refused);
    // Failed twice (the second a manual redelivery): its latest failed delivery is asked for.
    listed(&state, "guid-missing", 2_000, 503, false);
    listed(&state, "guid-missing", 1_500, 500, true);
    let latest_failed = state.lock().unwrap().deliveries.last().unwrap().id;
    // Never answered at all.
    listed(&state, "guid-lost", 1_000, 0, false);
    let lost = state.lock().unwrap().deliveries.last().unwrap().id;
    assert_eq!(rows(&store).await.len(), 1);

    // A key GitHub refuses: the run fails naming the key's setting, never printing it.
    let wrong = gateway(
        TestGateway::builder().backend(backend),
        &api,
        "ghp_wrong_token_value",
    )
    .render(&files.store_url);
    let good = std::fs::read_to_string(&files.config_path).unwrap();
    std::fs::write(&files.config_path, wrong).unwrap();
    let (code, report, stderr) = reconcile(&files, &[]);
    std::fs::write(&files.config_path, good).unwrap();
    assert_ne!(code, 0, "{report}");
    assert!(
        stderr.contains("401") && stderr.contains("reconcile.api_key"),
        "{stderr}"
    );
    assert!(!stderr.contains("ghp_wrong_token_value"), "{stderr}");
    assert!(attempts(&state).is_empty());

    // A dry run decides and asks for nothing.
    let (code, dry, stderr) = reconcile(&files, &["--dry-run"]);
    assert_eq!(code, 0, "{dry}\n{stderr}");
    assert_eq!(dry["api"], "github_deliveries");
    assert_eq!(
        (
            &dry["redelivered"],
            &dry["already_present"],
            &dry["answered"]
        ),
        (&json!(3), &json!(1), &json!(1)),
        "{dry}"
    );
    assert!(attempts(&state).is_empty(), "a dry run POSTs nothing");
    assert!(store.checkpoint("gh").await.unwrap().is_none());

    // The run: the listing first answers a spent rate limit (403, x-ratelimit-reset in 2 s),
    // which is waited out; it pages through `Link: rel="next"` and asks once for each GUID
    // neither in the inbox nor ever answered 2xx — its latest failed delivery, oldest first.
    {
        let mut s = state.lock().unwrap();
        s.list_calls.clear();
        s.rate_limit_once = true;
    }
    let (code, run, stderr) = reconcile(&files, &["--endpoint", "gh"]);
    assert_eq!(code, 0, "{run}\n{stderr}");
    assert_eq!(
        (
            &run["redelivered"],
            &run["redelivery_refused"],
            &run["already_present"],
            &run["answered"]
        ),
        (&json!(2), &json!(1), &json!(1), &json!(1)),
        "{run}"
    );
    assert_eq!(attempts(&state), vec![refused, latest_failed, lost]);
    {
        let s = state.lock().unwrap();
        let waited = s.retried_at.unwrap() - s.limited_at.unwrap();
        assert!(
            waited >= Duration::from_millis(900),
            "x-ratelimit-reset honoured: {waited:?}"
        );
        assert!(
            s.list_calls.iter().filter(|c| c.is_some()).count() >= 2,
            "Link rel=next followed: {:?}",
            s.list_calls
        );
    }
    // The redelivered events arrive signed, as webhooks.
    let arrived = wait_for("both redeliveries stored", WAIT, || async {
        let r = rows(&store).await;
        (r.contains_key("guid-missing") && r.contains_key("guid-lost")).then_some(r)
    })
    .await;
    assert_eq!(arrived.len(), 3, "{:?}", arrived.keys());
    for guid in ["guid-missing", "guid-lost"] {
        assert_eq!(arrived[guid].source, hookgate_core::EventSource::Webhook);
        assert_eq!(arrived[guid].matched_secret_version, "v1");
        assert_eq!(arrived[guid].event_type.as_deref(), Some("push"));
    }
    let checkpoint = store.checkpoint("gh").await.unwrap().unwrap();
    assert_eq!(checkpoint.provider, "github");

    // The next run finds them in the inbox and asks for nothing more.
    let (code, again, _) = reconcile(&files, &[]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["redelivered"], 0, "{again}");
    assert_eq!(attempts(&state).len(), 3);

    p.terminate();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_deliveries_missing_from_the_inbox_are_redelivered_once_on_sqlite() {
    deliveries_missing_from_the_inbox_are_redelivered_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_deliveries_missing_from_the_inbox_are_redelivered_once_on_postgres() {
    deliveries_missing_from_the_inbox_are_redelivered_once(Backend::Postgres).await;
}

/// A `rel="next"` to another origin is not followed (the key would go with it): the run fails,
/// saves no checkpoint and asks for no redelivery, not even of what the first page listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_next_link_to_another_origin_fails_the_run() {
    let state: Shared = Arc::default();
    let api = stand_in(Arc::clone(&state)).await;
    let hits: Arc<Mutex<u32>> = Arc::default();
    let foreign = counting_listener(Arc::clone(&hits)).await;
    state.lock().unwrap().foreign_next = Some(foreign.clone());
    for (n, guid) in ["guid-a", "guid-b", "guid-c"].iter().enumerate() {
        listed(&state, guid, 100 - n as i64, 503, false);
    }
    let files = gateway(TestGateway::builder(), &api, TOKEN).write().await;
    let (code, report, stderr) = reconcile(&files, &[]);
    assert_ne!(code, 0, "{report}");
    assert!(
        stderr.contains("another origin") && stderr.contains(&foreign),
        "{stderr}"
    );
    assert_eq!(*hits.lock().unwrap(), 0, "nothing sent to the other origin");
    assert!(attempts(&state).is_empty());
    let store = files.open_store().await;
    assert!(store.checkpoint("gh").await.unwrap().is_none());
    store.close().await;
}

/// What makes the store fail, and come back.
enum Outage {
    /// Another connection holds SQLite's write lock (the writer's busy timeout runs out).
    SqliteLocked(std::path::PathBuf, Option<rusqlite::Connection>),
    /// The PostgreSQL cluster is stopped.
    PostgresStopped(hookgate_testkit::PgCluster),
}

impl Outage {
    fn begin(&mut self) {
        match self {
            Outage::SqliteLocked(path, held) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                *held = Some(c);
            }
            Outage::PostgresStopped(cluster) => cluster.stop(),
        }
    }

    fn end(&mut self) {
        match self {
            Outage::SqliteLocked(_, held) => {
                held.take().unwrap().execute_batch("COMMIT").unwrap();
            }
            Outage::PostgresStopped(cluster) => cluster.start(),
        }
    }
}

/// A delivery the gateway could not commit (its store down) is answered 5xx; the endpoint's
/// no-retry window is kept in memory while the store is down and written once it is back; the
/// next run starts at that window even when told to start later, and redelivers the event,
/// which then arrives; the window is covered.
async fn a_store_outage_window_is_redelivered(backend: Backend) {
    let state: Shared = Arc::default();
    let api = stand_in(Arc::clone(&state)).await;
    let cluster = (backend == Backend::Postgres).then(hookgate_testkit::throwaway_cluster);
    let builder = match &cluster {
        None => TestGateway::builder(),
        Some(cluster) => {
            let url = cluster.create_database("hookgate_no_retry").await;
            TestGateway::builder().store_url(&url)
        }
    };
    let files = gateway(builder, &api, TOKEN).write().await;
    let p = files.serve(None);
    state.lock().unwrap().gateway = Some(p.addr());
    let mut outage = match cluster {
        None => Outage::SqliteLocked(files.db.clone().unwrap(), None),
        Some(cluster) => Outage::PostgresStopped(cluster),
    };

    outage.begin();
    {
        // The stand-in sends it now, while the store is down.
        let mut s = state.lock().unwrap();
        s.deliveries.push(Sent {
            id: 1,
            guid: "guid-outage".into(),
            delivered_at: unix_now(),
            redelivery: false,
            status_code: 0,
            event: "push".into(),
            body: push_body("guid-outage"),
        });
    }
    let body = push_body("guid-outage");
    let sent_at_ms = unix_now() * 1000;
    let status = post_github(p.addr(), "guid-outage", "push", body.as_bytes()).await;
    assert!((500..600).contains(&status), "answered {status}");
    state.lock().unwrap().deliveries[0].status_code = status;
    if let Outage::SqliteLocked(path, _) = &outage {
        // SQLite still reads: the window is not written while the store refuses writes.
        let reader = rusqlite::Connection::open(path).unwrap();
        let n: i64 = reader
            .query_row("SELECT count(*) FROM reconcile_no_retry_windows", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 0, "written while the store was down");
    }
    outage.end();

    let store = files.open_store().await;
    let window = wait_for("the no-retry window written", WAIT, || async {
        store
            .open_no_retry_windows("gh")
            .await
            .ok()
            .and_then(|w| w.first().copied())
    })
    .await;
    assert!(
        window.started_at_ms >= sent_at_ms && window.started_at_ms - sent_at_ms < 2_000,
        "the window starts when the refused delivery arrived: {window:?} vs {sent_at_ms}"
    );

    // Told to start after the outage, the run still starts at the window and redelivers.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let since = jiff::Timestamp::now().to_string();
    let (code, run, stderr) = reconcile(&files, &["--since", &since]);
    assert_eq!(code, 0, "{run}\n{stderr}");
    assert_eq!(run["redelivered"], 1, "{run}");
    assert_eq!(attempts(&state), vec![1]);
    let arrived = wait_for("the redelivery stored", WAIT, || async {
        rows(&store).await.remove("guid-outage")
    })
    .await;
    assert_eq!(arrived.source, hookgate_core::EventSource::Webhook);
    assert!(store.open_no_retry_windows("gh").await.unwrap().is_empty());

    p.terminate();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_outage_window_is_redelivered_on_sqlite() {
    a_store_outage_window_is_redelivered(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_outage_window_is_redelivered_on_postgres() {
    a_store_outage_window_is_redelivered(Backend::Postgres).await;
}
