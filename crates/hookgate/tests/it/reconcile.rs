//! Reconciliation inside the gateway through the real binary, on both backends (issue 18):
//! each finding made to happen for real — events processed before their endpoint had a
//! destination (`missing_outbox`), a worker killed mid-lease (`received_overdue`: its lease is
//! taken through the store and never settled), a relay killed mid-delivery (`outbox_stuck`) —
//! found by `hookgate reconcile` (a dry run first, which changes and writes nothing) and by a
//! run requested through the operator API (listed, counted on `/metrics`); the re-enqueued
//! work is then delivered exactly once per event under its inbox id as `Idempotency-Key`, and
//! a later run finds nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::{FindingQuery, LeaseRequest, SharedStore};
use serde_json::{Value, json};

use crate::jobs::Api;
use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const DEST_SECRET: &str = "whsec_aG9va2dhdGUtZGVzdGluYXRpb24tc2lnbmluZy1rISE=";
const OPERATE: &str = "reconcile-operate-token-0123456789";
const WAIT: Duration = Duration::from_secs(60);

/// An HTTP destination that counts the requests per `Idempotency-Key`.
#[derive(Clone, Default)]
struct Receiver {
    keys: Arc<Mutex<BTreeMap<String, u32>>>,
}

impl Receiver {
    async fn start(&self) -> SocketAddr {
        let keys = Arc::clone(&self.keys);
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap| {
                let keys = Arc::clone(&keys);
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_owned();
                    *keys.lock().unwrap().entry(key).or_default() += 1;
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        addr
    }

    fn keys(&self) -> BTreeMap<String, u32> {
        self.keys.lock().unwrap().clone()
    }
}

fn gateway(backend: Backend) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .admin_settings(&format!(
            "[[admin.tokens]]\nname = \"ops\"\nscopes = [\"operate\", \"read\"]\nvalue = {}\n",
            q(OPERATE)
        ))
        .workers(1)
        .worker_settings("poll_interval_ms = 20\nlease_seconds = 2")
        .relay_settings("poll_interval_ms = 20")
        // Runs here are by hand and through the API; the schedule has its own test below.
        .section("[reconcile]\nenabled = false\ngrace_seconds = 1\n")
}

/// The same gateway once its endpoint delivers to `hook`.
fn with_destination(backend: Backend, receiver: SocketAddr, relay: bool) -> GatewayBuilder {
    gateway(backend)
        .relay(relay)
        .destinations(&format!(
            "[[destinations]]\nid = \"hook\"\nkind = \"http\"\nurl = {}\n\
             allow_private_network = true\nsigning_secrets = [{}]\ntimeout_ms = 2000\n",
            q(&format!("http://{receiver}/hook")),
            q(DEST_SECRET)
        ))
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"hook\"]",
        ))
}

async fn post_event(webhook: SocketAddr, id: &str) -> String {
    let body = format!(r#"{{"type":"invoice.paid","data":{{"id":"{id}"}}}}"#);
    let r = post_signed(
        webhook,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        id,
        unix_now(),
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["id"].as_str().unwrap().to_owned()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `hookgate reconcile --config F` with `args`: its exit status and its JSON report.
fn reconcile(files: &GatewayFiles, args: &[&str]) -> (i32, Value) {
    let out = Command::new(binary())
        .arg("reconcile")
        .arg("--config")
        .arg(&files.config_path)
        .args(args)
        .env_remove("HOOKGATE_FAILPOINTS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let code = out.status.code().unwrap_or(-1);
    let report = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "not a JSON report (exit {code}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, report)
}

fn found(report: &Value, kind: &str) -> u64 {
    report["endpoints"][0]["found"][kind].as_u64().unwrap()
}

fn actions(report: &Value) -> Vec<(String, String)> {
    let mut a: Vec<(String, String)> = report["endpoints"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    a.sort();
    a
}

async fn status(store: &SharedStore, id: &str) -> InboxStatus {
    store.get_event(id).await.unwrap().unwrap().status
}

async fn deliveries(store: &SharedStore, id: &str) -> Vec<(String, OutboxStatus)> {
    store
        .list_deliveries(id)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.destination, d.status))
        .collect()
}

async fn lost_work_is_found_reenqueued_and_delivered_once(backend: Backend) {
    let receiver = Receiver::default();
    let receiver_addr = receiver.start().await;

    // 1. Two events processed while their endpoint had no destination.
    let files = gateway(backend)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
        .write()
        .await;
    let p = files.serve(None);
    let e1 = post_event(p.addr(), "msg_1").await;
    let e2 = post_event(p.addr(), "msg_2").await;
    let store = files.open_store().await;
    wait_until("both processed", WAIT, || async {
        status(&store, &e1).await == InboxStatus::Processed
            && status(&store, &e2).await == InboxStatus::Processed
    })
    .await;
    p.terminate();

    // 2. A third event whose worker dies mid-lease: accepted by an ingress-only process,
    //    leased (through the store, as the worker did) and never settled.
    let ingress_only = gateway(backend)
        .store_url(&files.store_url)
        .workers(0)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""));
    std::fs::write(&files.config_path, ingress_only.render(&files.store_url)).unwrap();
    let p = files.serve(None);
    let e3 = post_event(p.addr(), "msg_3").await;
    p.terminate();
    let leased = store
        .lease(LeaseRequest {
            owner: "killed-worker",
            now_ms: now_ms(),
            lease_ms: 200,
            limit: 10,
            with_payload: false,
            endpoints: None,
        })
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].inbox_id, e3);

    // 3. The endpoint now delivers to `hook`; the grace (1 s) passes.
    let v2 = |relay| with_destination(backend, receiver_addr, relay).store_url(&files.store_url);
    std::fs::write(&files.config_path, v2(false).render(&files.store_url)).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let e3_before = store.get_event(&e3).await.unwrap().unwrap();

    // A dry run finds both kinds and changes (and writes) nothing.
    let (code, dry) = reconcile(&files, &["--dry-run"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert!(dry["run_id"].is_null(), "a dry run records no run");
    assert_eq!(found(&dry, "missing_outbox"), 2, "{dry}");
    assert_eq!(found(&dry, "received_overdue"), 1, "{dry}");
    assert!(actions(&dry).iter().all(|(_, a)| a == "none"), "{dry}");
    assert!(deliveries(&store, &e1).await.is_empty());
    assert!(deliveries(&store, &e2).await.is_empty());
    assert_eq!(store.get_event(&e3).await.unwrap().unwrap(), e3_before);
    let none = store
        .list_findings(&FindingQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "a dry run records no finding");

    // The real run repairs both; the missing deliveries wait PENDING.
    let (code, run) = reconcile(&files, &["--endpoint", "sw"]);
    assert_eq!(code, 0, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        actions(&run),
        vec![
            ("missing_outbox".into(), "enqueued".into()),
            ("missing_outbox".into(), "enqueued".into()),
            ("received_overdue".into(), "made_due".into()),
        ],
        "{run}"
    );
    for id in [&e1, &e2] {
        assert_eq!(
            deliveries(&store, id).await,
            vec![("hook".into(), OutboxStatus::Pending)]
        );
    }
    let e3_after = store.get_event(&e3).await.unwrap().unwrap();
    assert_eq!(e3_after.status, InboxStatus::Received);
    assert!(e3_after.next_attempt_at_ms >= e3_before.next_attempt_at_ms);
    // Repaired once: a second run finds no missing delivery (the overdue row stays a
    // finding while no worker runs).
    let (code, again) = reconcile(&files, &[]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(found(&again, "missing_outbox"), 0, "{again}");

    // 4. A gateway without a relay processes the third event; then a relay takes the three
    //    deliveries and dies (its leases, taken through the store, are never settled).
    let p = files.serve(None);
    wait_until("the third event processed", WAIT, || async {
        status(&store, &e3).await == InboxStatus::Processed
    })
    .await;
    let taken = store
        .lease_deliveries("hook", "killed-relay", now_ms(), 200, 10)
        .await
        .unwrap();
    assert_eq!(taken.len(), 3);
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    // A run through the operator API finds them stuck; listed and counted.
    let api = Api::new(p.admin.unwrap()).await;
    let (code, refused) = api
        .call(
            "POST",
            "/api/v1/reconcile",
            "/api/v1/reconcile",
            OPERATE,
            Some(json!({"endpoint": "nowhere"})),
        )
        .await;
    assert_eq!(
        (code, refused["error"].as_str()),
        (404, Some("unknown_endpoint"))
    );
    let (code, started) = api
        .call(
            "POST",
            "/api/v1/reconcile",
            "/api/v1/reconcile",
            OPERATE,
            Some(json!({"endpoint": "sw"})),
        )
        .await;
    assert_eq!(code, 202, "{started}");
    let api_run = started["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/reconcile/runs/{api_run}");
    let done = wait_for("the API's run done", WAIT, || async {
        let (code, r) = api
            .call("GET", "/api/v1/reconcile/runs/{id}", &path, OPERATE, None)
            .await;
        assert_eq!(code, 200, "{r}");
        (r["state"] == "done").then_some(r)
    })
    .await;
    assert_eq!(done["trigger"], "api");
    assert_eq!(
        done["summary"]["endpoints"][0]["found"]["outbox_stuck"], 3,
        "{done}"
    );
    assert_eq!(done["summary"]["total"], 3, "{done}");
    let listed = |query: String| {
        let api = &api;
        async move {
            let path = format!("/api/v1/reconcile/findings?{query}");
            let (code, page) = api
                .call("GET", "/api/v1/reconcile/findings", &path, OPERATE, None)
                .await;
            assert_eq!(code, 200, "{page}");
            page["findings"].as_array().unwrap().clone()
        }
    };
    let stuck = listed(format!("run={api_run}")).await;
    assert_eq!(stuck.len(), 3);
    assert!(stuck.iter().all(|f| f["kind"] == "outbox_stuck"
        && f["action"] == "made_due"
        && f["destination"] == "hook"));
    let cli = listed(format!("run={run_id}&kind=missing_outbox")).await;
    let mut cli_ids: Vec<&str> = cli
        .iter()
        .map(|f| f["inbox_id"].as_str().unwrap())
        .collect();
    cli_ids.sort_unstable();
    let mut expected = vec![e1.as_str(), e2.as_str()];
    expected.sort_unstable();
    assert_eq!(cli_ids, expected);
    let first = listed("limit=1".into()).await;
    assert_eq!(first.len(), 1, "bounded");
    let (code, _) = api
        .call(
            "GET",
            "/api/v1/reconcile/findings",
            "/api/v1/reconcile/findings?kind=lost",
            OPERATE,
            None,
        )
        .await;
    assert_eq!(code, 400);
    let admin = p.admin.unwrap();
    assert_eq!(
        metric(
            admin,
            "hookgate_reconcile_findings_total{kind=\"outbox_stuck\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        metric(
            admin,
            "hookgate_reconcile_runs_total{trigger=\"api\",result=\"done\"}"
        ),
        Some(1.0)
    );
    p.terminate();

    // 5. With the relay back, every event is delivered exactly once, under its inbox id.
    std::fs::write(&files.config_path, v2(true).render(&files.store_url)).unwrap();
    let p = files.serve(None);
    wait_until("three deliveries", WAIT, || async {
        receiver.keys().len() == 3
    })
    .await;
    let mut want: Vec<String> = vec![e1.clone(), e2.clone(), e3.clone()];
    want.sort();
    assert_eq!(receiver.keys().into_keys().collect::<Vec<_>>(), want);
    for id in [&e1, &e2, &e3] {
        wait_until("delivered", WAIT, || async {
            deliveries(&store, id).await == vec![("hook".into(), OutboxStatus::Delivered)]
        })
        .await;
    }
    let (code, after) = reconcile(&files, &[]);
    assert_eq!((code, after["total"].as_u64()), (0, Some(0)), "{after}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        receiver.keys().values().all(|n| *n == 1),
        "each key once: {:?}",
        receiver.keys()
    );
    p.terminate();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_work_is_found_reenqueued_and_delivered_once_on_sqlite() {
    lost_work_is_found_reenqueued_and_delivered_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_work_is_found_reenqueued_and_delivered_once_on_postgres() {
    lost_work_is_found_reenqueued_and_delivered_once(Backend::Postgres).await;
}

/// The schedule: a gateway with `[reconcile] interval_seconds = 1` finds a missing delivery
/// on its own, repairs it, counts it, and its relay delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reconcile_stage_runs_on_its_schedule() {
    let receiver = Receiver::default();
    let receiver_addr = receiver.start().await;
    let files = gateway(Backend::Sqlite)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
        .write()
        .await;
    let p = files.serve(None);
    let e1 = post_event(p.addr(), "msg_s1").await;
    let store = files.open_store().await;
    wait_until("processed", WAIT, || async {
        status(&store, &e1).await == InboxStatus::Processed
    })
    .await;
    p.terminate();
    let scheduled = with_destination(Backend::Sqlite, receiver_addr, true)
        .store_url(&files.store_url)
        .section("[reconcile]\ninterval_seconds = 1\ngrace_seconds = 1\n");
    let mut text = scheduled.render(&files.store_url);
    text = text.replace("[reconcile]\nenabled = false\ngrace_seconds = 1\n", "");
    std::fs::write(&files.config_path, text).unwrap();
    let p = files.serve(None);
    wait_until("delivered by the schedule's repair", WAIT, || async {
        receiver.keys().contains_key(&e1)
    })
    .await;
    let admin = p.admin.unwrap();
    wait_until("counted", WAIT, || async {
        metric(
            admin,
            "hookgate_reconcile_findings_total{kind=\"missing_outbox\"}",
        ) == Some(1.0)
    })
    .await;
    let findings = store
        .list_findings(&FindingQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(findings.len(), 1);
    let run = store.get_run(&findings[0].run_id).await.unwrap().unwrap();
    assert_eq!(run.trigger.as_str(), "schedule");
    p.terminate();
    store.close().await;
}
