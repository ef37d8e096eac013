//! API-version holds through the real binary, on both backends: an endpoint pins the API
//! versions its consumers understand (`api_versions`); a verified event stamped with another
//! is acknowledged as always (200 `accepted`) and then `HELD` with its reason instead of being
//! processed and delivered, counted by `hookgate_events_held`, listed, and released by
//! `hookgate events release` (on the store directly) and `POST /api/v1/events/release`.
//! Stripe stamps the version in the body (`api_version`), Shopify in a header
//! (`X-Shopify-API-Version`).

use std::path::Path;
use std::time::Duration;

use hookgate_core::{EventSource, InboxStatus, OutboxStatus};
use hookgate_store::SharedStore;
use serde_json::Value;

use crate::delivery::Receiver;
use crate::support::*;

const STRIPE_SECRET: &str = "whsec_hookgate_holds_test_secret";
const SHOPIFY_SECRET: &str = "shpss_hookgate_holds_test_secret";
const OPERATE: &str = "operate-token-holds-0123456789";
const WAIT: Duration = Duration::from_secs(60);

fn stripe_event(id: &str, api_version: Option<&str>) -> Vec<u8> {
    let version = api_version.map_or(String::new(), |v| format!(r#""api_version":"{v}","#));
    format!(
        r#"{{"id":"{id}","object":"event",{version}"created":1764547200,"type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_{id}","object":"payment_intent","amount":2000}}}}}}"#
    )
    .into_bytes()
}

async fn send_stripe(addr: std::net::SocketAddr, id: &str, api_version: Option<&str>) -> String {
    let body = stripe_event(id, api_version);
    let r = post_signed(
        addr,
        "stripe-main",
        "stripe",
        STRIPE_SECRET,
        id,
        unix_now(),
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted", "{}", r.body);
    r.json()["id"].as_str().unwrap().to_owned()
}

fn events(config: &Path, args: &[&str]) -> (i32, String, String) {
    run_hookgate(config, &[&["events"], args].concat())
}

async fn status_of(store: &SharedStore, id: &str) -> InboxStatus {
    store.get_event(id).await.unwrap().unwrap().status
}

async fn delivered(store: &SharedStore, id: &str) -> bool {
    store
        .list_deliveries(id)
        .await
        .unwrap()
        .iter()
        .any(|d| d.status == OutboxStatus::Delivered)
}

async fn api_versions_hold_until_released(backend: Backend) {
    let receiver = Receiver::start().await;
    let files = TestGateway::builder()
        .backend(backend)
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20")
        .admin_settings(&format!(
            "[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\", \"operate\"]\nvalue = {}\n",
            q(OPERATE)
        ))
        .destinations(&format!(
            "[[destinations]]\nid = \"app\"\nkind = \"http\"\nurl = {}\n\
             allow_private_network = true\nsigning_secrets = [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n",
            q(&receiver.url())
        ))
        .endpoints(&endpoint_toml(
            "stripe-main",
            "stripe",
            &[STRIPE_SECRET],
            "api_versions = [\"2024-06-20\", \"2024-09-30.acacia\"]\ndestinations = [\"app\"]",
        ))
        .write()
        .await;
    let gateway = files.serve(None);
    let addr = gateway.webhook.unwrap();
    let admin = gateway.admin.unwrap();
    let store = files.open_store().await;

    let pinned = send_stripe(addr, "evt_pinned", Some("2024-06-20")).await;
    let unstamped = send_stripe(addr, "evt_unstamped", None).await;
    let old = send_stripe(addr, "evt_old", Some("2023-10-16")).await;
    let older = send_stripe(addr, "evt_older", Some("2022-11-15")).await;
    for id in [&pinned, &unstamped] {
        wait_until("pinned and unstamped events delivered", WAIT, || {
            let (store, id) = (store.clone(), id.clone());
            async move { delivered(&store, &id).await }
        })
        .await;
    }
    for id in [&old, &older] {
        wait_until("events of other versions HELD", WAIT, || {
            let (store, id) = (store.clone(), id.clone());
            async move { status_of(&store, &id).await == InboxStatus::Held }
        })
        .await;
    }
    let held = store.get_event(&old).await.unwrap().unwrap();
    assert_eq!(held.api_version.as_deref(), Some("2023-10-16"));
    assert_eq!(held.source, EventSource::Webhook);
    let reason = held.held_reason.clone().unwrap();
    assert!(
        reason.contains("2023-10-16") && reason.contains("api_versions"),
        "{reason}"
    );
    assert!(
        store.list_deliveries(&old).await.unwrap().is_empty(),
        "a held event is not delivered"
    );
    assert_eq!(
        store
            .get_event(&pinned)
            .await
            .unwrap()
            .unwrap()
            .api_version
            .as_deref(),
        Some("2024-06-20")
    );
    wait_until("hookgate_events_held counts both", WAIT, || async move {
        metric(admin, "hookgate_events_held") == Some(2.0)
    })
    .await;

    // The operator sees them, through the real binary on the same store.
    let config = files.config_path.clone();
    let (code, out, err) = events(&config, &["list", "--status", "held", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids: Vec<&str> = listed.iter().map(|e| e["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let mut want = vec![old.as_str(), older.as_str()];
    want.sort_unstable();
    assert_eq!(ids, want);
    let (code, out, err) = events(&config, &["show", &old]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["status"], "HELD");
    assert_eq!(shown["source"], "webhook");
    assert_eq!(shown["api_version"], "2023-10-16");
    assert_eq!(shown["held_reason"].as_str(), Some(reason.as_str()));

    // Nothing to release for another endpoint: exit 1, nothing changed.
    let (code, out, _) = events(&config, &["release", "--endpoint", "elsewhere"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(status_of(&store, &old).await, InboxStatus::Held);

    // One event by id, on the store directly: processed and delivered, not held again.
    let (code, out, err) = events(&config, &["release", "--id", &old]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["released"], 1);
    wait_until("the released event delivered", WAIT, || {
        let (store, id) = (store.clone(), old.clone());
        async move { delivered(&store, &id).await }
    })
    .await;
    let released = store.get_event(&old).await.unwrap().unwrap();
    assert_eq!(released.status, InboxStatus::Processed);
    assert!(released.released_at_ms.is_some());
    assert_eq!(status_of(&store, &older).await, InboxStatus::Held);

    // The other through the operator API (audited), by endpoint.
    let client = reqwest::Client::new();
    let answer = client
        .post(format!("http://{admin}/api/v1/events/release"))
        .bearer_auth(OPERATE)
        .json(&serde_json::json!({ "endpoint": "stripe-main" }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["released"], 1);
    wait_until("the API-released event delivered", WAIT, || {
        let (store, id) = (store.clone(), older.clone());
        async move { delivered(&store, &id).await }
    })
    .await;
    let unauthorized = client
        .post(format!("http://{admin}/api/v1/events/release"))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let audit: Value = client
        .get(format!("http://{admin}/api/v1/audit"))
        .bearer_auth(OPERATE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        audit.to_string().contains("endpoint:stripe-main"),
        "the API release is audited: {audit}"
    );
    wait_until("hookgate_events_held back to 0", WAIT, || async move {
        metric(admin, "hookgate_events_held") == Some(0.0)
    })
    .await;
    // Every event reached the consumer once, under its own key.
    let keys = receiver.logical();
    for id in [&pinned, &unstamped, &old, &older] {
        assert!(keys.contains(id.as_str()), "{id} delivered");
    }
    assert_eq!(keys.len(), 4);
    store.close().await;
    drop(gateway);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_api_versions_hold_until_released() {
    api_versions_hold_until_released(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_api_versions_hold_until_released() {
    api_versions_hold_until_released(Backend::Postgres).await;
}

/// Shopify stamps the version in `X-Shopify-API-Version`: read at acceptance (the header is
/// not stored), checked at processing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shopify_api_version_header_is_held() {
    let files = TestGateway::builder()
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .endpoints(&endpoint_toml(
            "shop",
            "shopify",
            &[SHOPIFY_SECRET],
            "api_versions = [\"2025-01\"]",
        ))
        .write()
        .await;
    let gateway = files.serve(None);
    let addr = gateway.webhook.unwrap();
    let store = files.open_store().await;
    let mut ids = Vec::new();
    // Two orders (the same body under another id would be answered as a replay).
    for (event_id, version, order) in [("wh_new", "2025-01", 1), ("wh_old", "2024-04", 2)] {
        let body =
            format!(r#"{{"id":{order},"admin_graphql_api_id":"gid://shopify/Order/{order}"}}"#);
        let body = body.as_bytes();
        let mut headers = signed_headers("shopify", SHOPIFY_SECRET, event_id, unix_now(), body);
        headers.push(("X-Shopify-API-Version".into(), version.into()));
        let r = send_raw_async(
            addr,
            build_request("POST", "/webhooks/shop", &headers, body),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["status"], "accepted", "{}", r.body);
        ids.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    for (id, want) in [
        (&ids[0], InboxStatus::Processed),
        (&ids[1], InboxStatus::Held),
    ] {
        wait_until("shopify events settled", WAIT, || {
            let (store, id) = (store.clone(), id.clone());
            async move { status_of(&store, &id).await == want }
        })
        .await;
    }
    let held = store.get_event(&ids[1]).await.unwrap().unwrap();
    assert_eq!(held.api_version.as_deref(), Some("2024-04"));
    store.close().await;
    drop(gateway);
}

/// `api_versions` is refused, naming the key, where the provider stamps no version, and when
/// it is empty or repeats a version.
#[test]
fn api_versions_config_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    for (provider, secret, line, want) in [
        (
            "github",
            "gh-secret",
            "api_versions = [\"2022-11-28\"]",
            "endpoints[0].api_versions",
        ),
        (
            "stripe",
            STRIPE_SECRET,
            "api_versions = []",
            "endpoints[0].api_versions",
        ),
        (
            "stripe",
            STRIPE_SECRET,
            "api_versions = [\"2024-06-20\", \"2024-06-20\"]",
            "endpoints[0].api_versions[1]",
        ),
    ] {
        let (code, _, stderr) = config_check_endpoint(dir.path(), provider, secret, line);
        assert_ne!(code, 0, "{line} must be refused");
        assert!(stderr.contains(want), "{line}: {stderr}");
    }
}
