//! Workers and the relay on a bad day, against the real binary: crash loops end `FAILED`, a
//! removed endpoint's backlog waits for it (through a reload and a restart), and a version
//! pointer that finds nothing is counted.

use std::net::SocketAddr;
use std::time::Duration;

use hookgate_core::InboxStatus;
#[cfg(feature = "failpoints")]
use hookgate_core::OutboxStatus;
use hookgate_store::{InboxRecord, SharedStore};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WAIT: Duration = Duration::from_secs(60);

fn body(n: usize) -> Vec<u8> {
    format!(r#"{{"type":"invoice.paid","data":{{"id":"obj_{n}"}}}}"#).into_bytes()
}

/// Sends one signed Standard Webhooks event to `endpoint`; returns its inbox id.
async fn send(addr: SocketAddr, endpoint: &str, event_id: &str, body: &[u8]) -> String {
    let r = post_signed(
        addr,
        endpoint,
        "standard_webhooks",
        SW_SECRET,
        event_id,
        unix_now(),
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["id"].as_str().expect("the inbox id").to_owned()
}

async fn event(store: &SharedStore, id: &str) -> InboxRecord {
    store.get_event(id).await.unwrap().expect("stored")
}

/// The value of an unlabelled sample (or one with exactly `labels`) on a `/metrics` page.
fn sample(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap())
}

/// Waits for the (aborting) binary to exit by itself.
#[cfg(feature = "failpoints")]
async fn exits(mut p: BinaryGateway) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || p.wait_exit())
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// Crash loops.

/// An event whose processing kills the process after every lease is leased `max_attempts`
/// times, then the next lease ends it `FAILED` ("abandoned after N leases") before any work —
/// instead of being leased (and, with handlers, calling the provider) forever.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_crash_loop_in_processing_ends_failed_after_max_attempts() {
    let files = TestGateway::builder()
        .workers(1)
        .worker_settings("lease_seconds = 2\npoll_interval_ms = 20")
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "retry = { base_ms = 10, cap_ms = 20, max_attempts = 2 }",
        ))
        .write()
        .await;
    let mut id = None;
    for lease in 1..=2 {
        let p = files.serve(Some("worker.after_lease=abort"));
        if id.is_none() {
            id = Some(send(p.addr(), "sw", "evt_loop", &body(1)).await);
        }
        let status = exits(p).await;
        assert!(!status.success(), "lease {lease}: the failpoint aborts");
    }
    let id = id.unwrap();
    let store = files.open_store().await;
    let row = event(&store, &id).await;
    assert_eq!(row.status, InboxStatus::Received);
    assert_eq!(row.attempt_count, 2);

    // The third lease exceeds max_attempts: FAILED before the failpoint is reached.
    let p = files.serve(Some("worker.after_lease=abort"));
    wait_until("the looping event to be abandoned", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move { event(&store, &id).await.status == InboxStatus::Failed }
    })
    .await;
    let logs = tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
    let row = event(&store, &id).await;
    assert_eq!(row.attempt_count, 3);
    let error = row.last_error.unwrap();
    assert!(
        error.starts_with("abandoned after 3 leases without completing (max_attempts = 2)"),
        "{error}"
    );
    assert!(!error.contains("obj_1"), "no payload bytes: {error}");
    assert!(logs.contains("the row is FAILED"), "{logs}");
}

/// A plain HTTP receiver on a thread: answers every request `200` (the relay's destination).
#[cfg(feature = "failpoints")]
fn accept_everything() -> SocketAddr {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Head, then as many body bytes as Content-Length says.
                let (head_end, length) = loop {
                    let Ok(n) = stream.read(&mut chunk) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse::<usize>().unwrap_or(0));
                        break (at + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            });
        }
    });
    addr
}

/// The same for a delivery: the relay dies after every publish, and after `max_attempts`
/// leases the delivery ends `FAILED` instead of being published forever.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_crash_loop_in_delivery_ends_failed_after_max_attempts() {
    let receiver = accept_everything();
    let files = TestGateway::builder()
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("lease_seconds = 2\npoll_interval_ms = 20")
        .destinations(&format!(
            "[[destinations]]\nid = \"dest\"\nkind = \"http\"\nurl = {}\n\
             allow_private_network = true\nsigning_secrets = [{}]\ntimeout_ms = 500\n\
             retry = {{ base_ms = 10, cap_ms = 20, max_attempts = 2 }}\n",
            q(&format!("http://{receiver}/hook")),
            q(SW_SECRET),
        ))
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"dest\"]",
        ))
        .write()
        .await;
    let mut id = None;
    for lease in 1..=2 {
        let p = files.serve(Some("relay.after_publish_before_mark=abort"));
        if id.is_none() {
            id = Some(send(p.addr(), "sw", "evt_dloop", &body(2)).await);
        }
        let status = exits(p).await;
        assert!(!status.success(), "lease {lease}: the failpoint aborts");
    }
    let id = id.unwrap();
    let store = files.open_store().await;
    let delivery = |store: SharedStore, id: String| async move {
        store
            .list_deliveries(&id)
            .await
            .unwrap()
            .pop()
            .expect("one delivery")
    };
    let d = delivery(store.clone(), id.clone()).await;
    assert_eq!((d.status, d.attempt_count), (OutboxStatus::Pending, 2));

    let p = files.serve(Some("relay.after_publish_before_mark=abort"));
    wait_until("the looping delivery to be abandoned", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move { delivery(store, id).await.status == OutboxStatus::Failed }
    })
    .await;
    tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
    let d = delivery(store, id).await;
    assert_eq!(d.attempt_count, 3);
    let error = d.last_error.unwrap();
    assert!(
        error.starts_with("abandoned after 3 leases without completing (max_attempts = 2)"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------
// A removed endpoint.

/// Rows of an endpoint missing from the workers' config — after a SIGHUP reload, and after a
/// restart — are not leased: they stay `RECEIVED` with no attempt counted, the workers'
/// `/metrics` shows them as `hookgate_events_orphaned`, and they are processed once the
/// endpoint is configured again. (An ingress keeps receiving for the endpoint; the workers
/// run as their own process on the same PostgreSQL database, as in production.)
#[tokio::test]
async fn a_removed_endpoints_backlog_waits_and_resumes() {
    let endpoints = |with_gone: bool| {
        let mut e = endpoint_toml("keep", "standard_webhooks", &[SW_SECRET], "");
        if with_gone {
            e.push_str(&endpoint_toml(
                "gone",
                "standard_webhooks",
                &[SW_SECRET],
                "",
            ));
        }
        e
    };
    let ingress_files = TestGateway::builder()
        .backend(Backend::Postgres)
        .workers(0)
        .endpoints(&endpoints(true))
        .write()
        .await;
    let worker_config = ingress_files.dir.path().join("worker.toml");
    let write_worker_config = |with_gone: bool| {
        let text = TestGateway::builder()
            .workers(1)
            .worker_settings("poll_interval_ms = 20")
            .endpoints(&endpoints(with_gone))
            .render(&ingress_files.store_url);
        std::fs::write(&worker_config, text).unwrap();
    };
    let reload = |p: &mut BinaryGateway| {
        let before = p.take_logs().matches("configuration reloaded").count();
        p.signal("-HUP");
        wait_until_blocking("the reload", WAIT, || {
            p.take_logs().matches("configuration reloaded").count() > before
        });
    };
    let ingress = ingress_files.serve(None);
    let store = ingress_files.open_store().await;
    let processed = |id: String| {
        let store = store.clone();
        async move {
            wait_until("the event to be processed", WAIT, || {
                let (store, id) = (store.clone(), id.clone());
                async move { event(&store, &id).await.status == InboxStatus::Processed }
            })
            .await;
        }
    };
    let orphaned = |admin: SocketAddr, expected: f64| async move {
        wait_until("the orphan gauge", WAIT, || async move {
            sample(&metrics_text(admin).await, "hookgate_events_orphaned", "") == Some(expected)
        })
        .await;
    };

    write_worker_config(true);
    let mut worker = BinaryGateway::start(BinaryRole::Worker, &worker_config, None);
    processed(send(ingress.addr(), "keep", "keep_1", &body(1)).await).await;

    // Reload without "gone"; its events keep arriving at the ingress.
    write_worker_config(false);
    reload(&mut worker);
    let mut gone = Vec::new();
    for n in 0..3 {
        gone.push(send(ingress.addr(), "gone", &format!("gone_{n}"), &body(n)).await);
    }
    // Accepted after them, so due after them: once it is processed, a lease has passed them.
    processed(send(ingress.addr(), "keep", "keep_2", &body(2)).await).await;
    for id in &gone {
        let row = event(&store, id).await;
        assert_eq!(row.status, InboxStatus::Received, "after reload");
        assert_eq!(
            row.attempt_count, 0,
            "not leased while the endpoint is absent"
        );
    }
    orphaned(worker.admin.unwrap(), 3.0).await;

    // A restart without it: still waiting.
    tokio::task::spawn_blocking(move || worker.terminate())
        .await
        .unwrap();
    worker = BinaryGateway::start(BinaryRole::Worker, &worker_config, None);
    processed(send(ingress.addr(), "keep", "keep_3", &body(3)).await).await;
    for id in &gone {
        let row = event(&store, id).await;
        assert_eq!(row.status, InboxStatus::Received, "after restart");
        assert_eq!(row.attempt_count, 0, "not leased after the restart");
    }
    orphaned(worker.admin.unwrap(), 3.0).await;
    // The warning is logged on the scrape `orphaned` saw; its line may still be in transit.
    worker.wait_for_log("events wait for an endpoint that is not configured");

    // The endpoint comes back: its backlog is processed.
    write_worker_config(true);
    reload(&mut worker);
    for id in &gone {
        processed(id.clone()).await;
        assert_eq!(event(&store, id).await.attempt_count, 1);
    }
    orphaned(worker.admin.unwrap(), 0.0).await;
    tokio::task::spawn_blocking(move || {
        worker.terminate();
        ingress.terminate();
    })
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------
// Version pointers.

/// A configured `object_version_pointer` that finds no integer in a verified event is
/// counted per endpoint (`hookgate_events_unversioned_total`) and warned about; the event is
/// still stored (without a version), and an event with one is not counted.
#[tokio::test]
async fn an_unresolved_version_pointer_is_counted() {
    let files = TestGateway::builder()
        .workers(0)
        .endpoints(&endpoint_toml(
            "unversioned",
            "standard_webhooks",
            &[SW_SECRET],
            "object_id_pointer = \"/data/id\"\nobject_version_pointer = \"/data/version\"",
        ))
        .write()
        .await;
    let p = files.serve(None);
    let with_version = br#"{"type":"a","data":{"id":"obj_v","version":7}}"#;
    let v = send(p.addr(), "unversioned", "evt_v", with_version).await;
    let admin = p.admin.unwrap();
    let counted = |metrics: &str| {
        sample(
            metrics,
            "hookgate_events_unversioned_total",
            "endpoint=\"unversioned\"",
        )
    };
    assert_eq!(
        counted(&metrics_text(admin).await),
        None,
        "a resolved version"
    );
    let without = send(p.addr(), "unversioned", "evt_nv", &body(9)).await;
    let wrong_type = br#"{"type":"a","data":{"id":"obj_w","version":"seven"}}"#;
    send(p.addr(), "unversioned", "evt_w", wrong_type).await;
    assert_eq!(counted(&metrics_text(admin).await), Some(2.0));
    let logs = tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
    assert!(
        logs.contains("object_version_pointer resolved to no integer version"),
        "{logs}"
    );
    let store = files.open_store().await;
    assert_eq!(event(&store, &v).await.object_version, Some(7));
    assert_eq!(event(&store, &without).await.object_version, None);
}
