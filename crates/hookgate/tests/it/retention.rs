//! Retention and deletion on request through the real binary, on both backends:
//!
//! - time moved forward (the `failpoints` build's clock offset): payloads purged after
//!   `payload_days` with the id records kept (a redelivery is still a duplicate, `events show`
//!   says `payload_stored: false`, `events retry` is refused with `payload_purged`), then the
//!   id records gone after `idempotency_days`; metrics on `/metrics`;
//! - a purge of thousands of expired rows while webhooks arrive: every acknowledged event is
//!   there afterwards;
//! - `hookgate events purge` by id and by filter, with its audit rows.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hookgate_store::SharedStore;

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(60);

fn sw_endpoint() -> String {
    endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], "")
}

fn body(n: usize) -> Vec<u8> {
    format!(r#"{{"type":"invoice.paid","data":{{"id":"obj_{n}","amount":{n}}}}}"#).into_bytes()
}

/// Sends one signed event as the provider would at `unix_secs`; returns the answer.
async fn send_at(addr: std::net::SocketAddr, event_id: &str, unix_secs: i64) -> RawResponse {
    post_signed(
        addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        event_id,
        unix_secs,
        &body(event_id.len()),
    )
    .await
}

/// `hookgate events <args> --config <config>` with `env`; (exit code, stdout, stderr).
fn events_cli(config: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(binary())
        .arg("events")
        .args(args)
        .arg("--config")
        .arg(config)
        .envs(env.iter().copied())
        .env_remove("HOOKGATE_FAILPOINTS")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn events_cli_async(config: &Path, args: &[&str]) -> (i32, String, String) {
    let config = config.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        events_cli(&config, &args, &[])
    })
    .await
    .unwrap()
}

fn shown(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("events show printed {out:?}: {e}"))
}

async fn all_processed(store: &SharedStore, ids: &[String]) -> bool {
    for id in ids {
        match store.get_event(id).await.unwrap() {
            Some(e) if e.status == hookgate_core::InboxStatus::Processed => {}
            _ => return false,
        }
    }
    true
}

/// The value of one series (`name{label="x"}`), 0 if absent.
fn metric_or_zero(admin: std::net::SocketAddr, series: &str) -> f64 {
    metric(admin, series).unwrap_or(0.0)
}

#[cfg(feature = "failpoints")]
mod clock_moved_forward {
    use super::*;
    use hookgate::state::TEST_CLOCK_OFFSET_ENV;

    const DAY: i64 = 86_400;

    async fn payloads_then_id_records_expire(backend: Backend) {
        let files = TestGateway::builder()
            .backend(backend)
            .section("[retention]\npayload_days = 1\nidempotency_days = 3\ninterval_seconds = 1")
            .endpoints(&sw_endpoint())
            .write()
            .await;
        let store = files.open_store().await;

        // Day 0: three events arrive and are processed.
        let gw = files.serve(None);
        let mut ids = Vec::new();
        for n in 0..3 {
            let r = send_at(gw.addr(), &format!("msg_{n}"), unix_now()).await;
            assert_eq!(r.status, 200, "{}", r.body);
            ids.push(r.json()["id"].as_str().unwrap().to_owned());
        }
        wait_until("all three PROCESSED", WAIT, || all_processed(&store, &ids)).await;
        let (code, out, err) = events_cli_async(&files.config_path, &["show", &ids[0]]).await;
        assert_eq!(code, 0, "{err}");
        assert_eq!(shown(&out)["payload_stored"], true);
        gw.terminate();

        // Day 2: past payload_days, within idempotency_days. The first pass runs within
        // the interval of start-up; the restart finds the work still to do (nothing kept).
        let offset = (2 * DAY).to_string();
        let env = [(TEST_CLOCK_OFFSET_ENV, offset.as_str())];
        let gw = files.serve_with_env(&env);
        wait_until("payloads purged", WAIT, || {
            let (store, ids) = (store.clone(), ids.clone());
            async move {
                for id in &ids {
                    if store.get_event(id).await.unwrap().unwrap().payload_stored() {
                        return false;
                    }
                }
                true
            }
        })
        .await;
        let admin = gw.admin.unwrap();
        assert!(metric_or_zero(admin, "hookgate_retention_purged_total{what=\"payload\"}") >= 3.0);
        let (code, out, err) = events_cli_async(&files.config_path, &["show", &ids[0]]).await;
        assert_eq!(code, 0, "{err}");
        let event = shown(&out);
        assert_eq!(event["payload_stored"], false, "{event}");
        assert_eq!(event["status"], "PROCESSED", "the id record stays");
        // A redelivery is still caught by the id record.
        let again = send_at(gw.addr(), "msg_0", unix_now() + 2 * DAY).await;
        assert_eq!(again.status, 200, "{}", again.body);
        assert_eq!(again.json()["status"], "duplicate");
        assert_eq!(again.json()["id"], ids[0].as_str());
        // Nothing left to replay.
        let (code, _, err) = events_cli_async(&files.config_path, &["retry", &ids[0]]).await;
        assert_eq!(code, 3, "{err}");
        assert!(err.contains(r#"{"error":"payload_purged"}"#), "{err}");
        gw.terminate();

        // Day 4: past idempotency_days: the records go, the key is new again.
        let offset = (4 * DAY).to_string();
        let env = [(TEST_CLOCK_OFFSET_ENV, offset.as_str())];
        let gw = files.serve_with_env(&env);
        wait_until("id records deleted", WAIT, || {
            let (store, ids) = (store.clone(), ids.clone());
            async move {
                for id in &ids {
                    if store.get_event(id).await.unwrap().is_some() {
                        return false;
                    }
                }
                true
            }
        })
        .await;
        assert!(
            metric_or_zero(
                gw.admin.unwrap(),
                "hookgate_retention_purged_total{what=\"inbox\"}"
            ) >= 3.0
        );
        let (code, _, err) = events_cli_async(&files.config_path, &["show", &ids[0]]).await;
        assert_eq!(code, 1, "{err}");
        let fresh = send_at(gw.addr(), "msg_0", unix_now() + 4 * DAY).await;
        assert_eq!(fresh.json()["status"], "accepted", "{}", fresh.body);
        // The new copy's payload is stored: the oldest stored payload is minutes old.
        wait_until("oldest payload gauge", WAIT, || {
            let admin = gw.admin.unwrap();
            async move {
                let text = get(admin, "/metrics").body;
                text.contains("hookgate_oldest_payload_age_seconds")
            }
        })
        .await;
        assert!(
            metric_or_zero(gw.admin.unwrap(), "hookgate_oldest_payload_age_seconds") < DAY as f64
        );
        gw.terminate();
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_payloads_then_id_records_expire() {
        payloads_then_id_records_expire(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_payloads_then_id_records_expire() {
        payloads_then_id_records_expire(Backend::Postgres).await;
    }
}

/// Rows seeded as a gateway would have stored them `days_ago`, already finished (`IGNORED`).
async fn seed_expired(store: &SharedStore, count: usize, days_ago: i64) {
    let received_at_ms = (unix_now() - days_ago * 86_400) * 1000;
    let mut rows = Vec::new();
    for i in 0..count {
        rows.push(hookgate_store::NewInboxRow {
            inbox_id: uuid::Uuid::now_v7().to_string(),
            provider: "standard_webhooks".into(),
            endpoint_id: "sw".into(),
            provider_event_id: format!("old_{i}"),
            event_type: Some("invoice.paid".into()),
            object_id: None,
            object_version: None,
            provider_created_at: None,
            received_at_ms,
            payload: vec![0x5A; 2048],
            payload_key_version: 1,
            payload_digest: vec![0; 32],
            matched_secret_version: "v1".into(),
            status: hookgate_core::InboxStatus::Ignored,
            source: hookgate_core::EventSource::Webhook,
            api_version: None,
            replay_digest: None,
        });
        if rows.len() == 200 {
            store
                .accept_request(std::mem::take(&mut rows))
                .await
                .unwrap();
        }
    }
    if !rows.is_empty() {
        store.accept_request(rows).await.unwrap();
    }
}

/// While retention deletes thousands of expired rows in small batches, webhooks keep
/// arriving: every one acknowledged during the purge is stored afterwards, with its payload.
async fn purge_under_load_keeps_every_acknowledged_event(backend: Backend) {
    const EXPIRED: usize = 4_000;
    let files = TestGateway::builder()
        .backend(backend)
        .section("[retention]\npayload_days = 1\nidempotency_days = 2\ninterval_seconds = 1\nbatch_size = 50")
        .endpoints(&sw_endpoint())
        .write()
        .await;
    let store = files.open_store().await;
    seed_expired(&store, EXPIRED, 10).await;
    assert_eq!(store.count_inbox().await.unwrap(), EXPIRED as u64);

    let gw = files.serve(None);
    let addr = gw.addr();
    let mut acknowledged = Vec::new();
    let mut round = 0usize;
    // Send while expired rows remain (and at least a few rounds), 8 requests at a time.
    loop {
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..8 {
            let event_id = format!("live_{round}_{k}");
            tasks.spawn(async move { send_at(addr, &event_id, unix_now()).await });
        }
        while let Some(r) = tasks.join_next().await {
            let r = r.unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            acknowledged.push(r.json()["id"].as_str().unwrap().to_owned());
        }
        round += 1;
        let left = store.count_inbox().await.unwrap() as usize - acknowledged.len();
        if left == 0 && round >= 5 {
            break;
        }
        assert!(
            round < 10_000,
            "retention never finished: {left} expired rows left"
        );
    }
    let purged = metric_or_zero(
        gw.admin.unwrap(),
        "hookgate_retention_purged_total{what=\"inbox\"}",
    );
    assert!(purged >= EXPIRED as f64, "purged {purged}");
    gw.terminate();
    for id in &acknowledged {
        let e = store
            .get_event(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged event {id} lost"));
        assert!(e.payload_stored(), "{id} keeps its payload");
    }
    assert_eq!(
        store.count_inbox().await.unwrap() as usize,
        acknowledged.len(),
        "exactly the acknowledged events are left"
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_purge_under_load_keeps_every_acknowledged_event() {
    purge_under_load_keeps_every_acknowledged_event(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_purge_under_load_keeps_every_acknowledged_event() {
    purge_under_load_keeps_every_acknowledged_event(Backend::Postgres).await;
}

/// `events purge` removes payloads at once (by id, then by filter), keeps the id records,
/// writes an audit row per batch naming the actor (the OS user by default), and a purged
/// event cannot be retried.
async fn events_purge_is_immediate_and_audited(backend: Backend) {
    let files = TestGateway::builder()
        .backend(backend)
        .endpoints(&sw_endpoint())
        .write()
        .await;
    let store = files.open_store().await;
    let gw = files.serve(None);
    let mut ids = Vec::new();
    for n in 0..3 {
        let r = send_at(gw.addr(), &format!("priv_{n}"), unix_now()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        ids.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    wait_until("all PROCESSED", WAIT, || all_processed(&store, &ids)).await;

    let (code, out, err) = events_cli_async(
        &files.config_path,
        &["purge", &ids[0], "--actor", "dpo@example.com"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["purged"], 1, "{report}");
    let (_, out, _) = events_cli_async(&files.config_path, &["show", &ids[0]]).await;
    assert_eq!(shown(&out)["payload_stored"], false);
    let (_, out, _) = events_cli_async(&files.config_path, &["show", &ids[1]]).await;
    assert_eq!(shown(&out)["payload_stored"], true, "only the named event");

    // By filter, as the OS user.
    let (code, out, err) = events_cli_async(
        &files.config_path,
        &["purge", "--endpoint", "sw", "--older-than", "0s"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["purged"], 2, "{report}");
    for id in &ids {
        let e = store.get_event(id).await.unwrap().expect("id record kept");
        assert!(!e.payload_stored());
    }
    // Refusing to purge everything by accident.
    let (code, _, err) = events_cli_async(&files.config_path, &["purge"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("name what to purge"), "{err}");

    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 2, "{audit:?}");
    let os_user =
        String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    assert_eq!(audit[0].actor, os_user.trim(), "default actor: the OS user");
    assert_eq!(audit[1].actor, "dpo@example.com");
    for a in &audit {
        assert_eq!(a.action, "events.purge");
    }
    assert!(audit[1].target.contains(&ids[0]));
    assert!(audit[1].detail.as_deref().unwrap().contains(&ids[0]));
    assert!(audit[0].target.contains("endpoint=sw"));

    let (code, _, err) = events_cli_async(&files.config_path, &["retry", &ids[1]]).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(r#"{"error":"payload_purged"}"#), "{err}");
    // A redelivery is still a duplicate of the kept id record.
    let again = send_at(gw.addr(), "priv_1", unix_now()).await;
    assert_eq!(again.json()["status"], "duplicate", "{}", again.body);
    gw.terminate();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_events_purge_is_immediate_and_audited() {
    events_purge_is_immediate_and_audited(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_events_purge_is_immediate_and_audited() {
    events_purge_is_immediate_and_audited(Backend::Postgres).await;
}
