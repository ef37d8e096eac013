//! IGNORED is replayable by design (issue #17): the real binary stores an event outside the
//! endpoint's allow-list `IGNORED`; the allow-list is widened and the configuration reloaded
//! with SIGHUP; the provider's redelivery is answered `duplicate` with the same id, and the
//! stored row goes back to work and ends `PROCESSED` — on both backends.

use std::time::Duration;

use hookgate_core::InboxStatus;

use crate::support::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(30);

fn builder(backend: Backend, allowed: &str) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SECRET],
            &format!("allowed_event_types = {allowed}"),
        ))
}

async fn send(addr: std::net::SocketAddr, event_id: &str, kind: &str) -> RawResponse {
    let body = format!(r#"{{"type":"{kind}","data":{{"id":"obj_1"}}}}"#);
    post_signed(
        addr,
        "sw",
        "standard_webhooks",
        SECRET,
        event_id,
        unix_now(),
        body.as_bytes(),
    )
    .await
}

async fn ignored_then_allowed_redelivery_is_processed(backend: Backend) {
    let narrow = builder(backend, r#"["invoice.*"]"#);
    let files = narrow.write().await;
    let p = files.serve(None);
    let store = files.open_store().await;

    let first = send(p.addr(), "msg_late", "customer.deleted").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["status"], "ignored");
    let id = first.json()["id"].as_str().unwrap().to_owned();
    // An allowed event is processed meanwhile: the worker runs, and leaves IGNORED alone.
    let other = send(p.addr(), "msg_ok", "invoice.paid").await;
    let other_id = other.json()["id"].as_str().unwrap().to_owned();
    wait_until("the allowed event processed", WAIT, || {
        let (store, other_id) = (store.clone(), other_id.clone());
        async move {
            store.get_event(&other_id).await.unwrap().unwrap().status == InboxStatus::Processed
        }
    })
    .await;
    assert_eq!(
        store.get_event(&id).await.unwrap().unwrap().status,
        InboxStatus::Ignored
    );
    // Redelivered before the allow-list changes: still a plain duplicate, still IGNORED.
    let again = send(p.addr(), "msg_late", "customer.deleted").await;
    assert_eq!(again.json()["status"], "duplicate");
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(
        store.get_event(&id).await.unwrap().unwrap().status,
        InboxStatus::Ignored
    );

    // The operator fixes the allow-list and reloads.
    let wide = builder(backend, r#"["invoice.*", "customer.*"]"#);
    std::fs::write(&files.config_path, wide.render(&files.store_url)).unwrap();
    p.signal("-HUP");
    p.wait_for_log("configuration reloaded");

    let redelivery = send(p.addr(), "msg_late", "customer.deleted").await;
    assert_eq!(redelivery.status, 200, "{}", redelivery.body);
    assert_eq!(redelivery.json()["status"], "duplicate");
    assert_eq!(
        redelivery.json()["id"],
        id.as_str(),
        "same id as the first answer"
    );
    let processed = wait_for("the revived row processed", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move {
            let e = store.get_event(&id).await.unwrap().unwrap();
            (e.status == InboxStatus::Processed).then_some(e)
        }
    })
    .await;
    assert_eq!(processed.attempt_count, 1);
    assert_eq!(store.count_inbox().await.unwrap(), 2, "no new row");
    // A later redelivery of the processed row changes nothing.
    let late = send(p.addr(), "msg_late", "customer.deleted").await;
    assert_eq!(late.json()["status"], "duplicate");
    assert_eq!(
        store.get_event(&id).await.unwrap().unwrap().status,
        InboxStatus::Processed
    );
    store.close().await;
    let logs = tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
    assert!(!logs.contains("obj_1"), "no payload bytes in the logs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_then_allowed_redelivery_is_processed_sqlite() {
    ignored_then_allowed_redelivery_is_processed(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_then_allowed_redelivery_is_processed_postgres() {
    ignored_then_allowed_redelivery_is_processed(Backend::Postgres).await;
}
