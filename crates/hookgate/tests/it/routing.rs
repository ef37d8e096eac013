//! Per-destination filters and transforms end to end (docs/destinations.md, "Filters" and
//! "Transforms"): real provider payloads from `examples/events/` in over real sockets, signed
//! as the provider signs them; the processing stage writes outbox rows only for the
//! destinations whose filter matches; the relay delivers to real HTTP servers in this process.
//! Bad filters and programs are refused by the real binary's `config check`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::{OutboxRecord, SharedStore};

use crate::delivery::{
    DEST_SECRET, Nats, Receiver, http_destination, nats_destination, standard_webhooks_verify,
    stream_messages,
};
use crate::support::*;

const STRIPE_SECRET: &str = "whsec_routing_tests_stripe_secret";
const WAIT: Duration = Duration::from_secs(60);

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
    types_route_charges_and_customers_apart,
    where_predicates_read_the_payload,
    transforms_reshape_skip_and_fail,
);

fn gateway(backend: Backend) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .workers(2)
        .worker_settings("lease_seconds = 30\npoll_interval_ms = 20")
        .relay_settings("lease_seconds = 4\npoll_interval_ms = 20")
}

/// Destination ids carry the backend: both backends' tests share this process's metrics.
fn id(name: &str, backend: Backend) -> String {
    format!("{name}-{backend:?}").to_ascii_lowercase()
}

fn stripe_endpoint(destinations: &[&str]) -> String {
    let list: Vec<String> = destinations.iter().map(|d| q(d)).collect();
    endpoint_toml(
        "stripe",
        "stripe",
        &[STRIPE_SECRET],
        &format!("destinations = [{}]", list.join(", ")),
    )
}

/// `examples/events/stripe.json`, the real shape of a Stripe event, with `edit` applied.
fn stripe_event(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/events/stripe.json");
    let mut event: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut event);
    serde_json::to_vec(&event).unwrap()
}

fn stripe_typed(event_id: &str, event_type: &str) -> Vec<u8> {
    stripe_event(|e| {
        e["id"] = event_id.into();
        e["type"] = event_type.into();
    })
}

/// Posts a Stripe-signed event; returns the inbox id from the acknowledgement.
async fn send_stripe(addr: SocketAddr, body: &[u8]) -> String {
    let r = post_signed(
        addr,
        "stripe",
        "stripe",
        STRIPE_SECRET,
        "",
        unix_now(),
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    v["inbox_id"]
        .as_str()
        .or_else(|| v["id"].as_str())
        .unwrap_or_else(|| panic!("no inbox id in {v}"))
        .to_owned()
}

async fn deliveries(store: &SharedStore, inbox_id: &str) -> HashMap<String, OutboxRecord> {
    store
        .list_deliveries(inbox_id)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.destination.clone(), d))
        .collect()
}

async fn processed(store: &SharedStore, inbox_id: &str) -> bool {
    store
        .get_event(inbox_id)
        .await
        .unwrap()
        .is_some_and(|e| e.status == InboxStatus::Processed)
}

/// Waits until every event is PROCESSED and each of its outbox rows DELIVERED or FAILED.
async fn finished(store: &SharedStore, ids: &[String]) {
    wait_until("every delivery finished", WAIT, || {
        let (store, ids) = (store.clone(), ids.to_vec());
        async move {
            for id in &ids {
                if !processed(&store, id).await {
                    return false;
                }
                let d = deliveries(&store, id).await;
                if d.values().any(|d| d.status == OutboxStatus::Pending) {
                    return false;
                }
            }
            true
        }
    })
    .await;
}

/// Waits until every event is PROCESSED and each of its outbox rows DELIVERED.
async fn settled(store: &SharedStore, ids: &[String]) {
    wait_until("every event processed and delivered", WAIT, || {
        let (store, ids) = (store.clone(), ids.to_vec());
        async move {
            for id in &ids {
                if !processed(&store, id).await {
                    return false;
                }
                let d = deliveries(&store, id).await;
                if d.values().any(|d| d.status != OutboxStatus::Delivered) {
                    return false;
                }
            }
            true
        }
    })
    .await;
}

fn filtered(metrics: &str, destination: &str) -> f64 {
    series_value(
        metrics,
        &format!("hookgate_destination_filtered_total{{destination=\"{destination}\"}}"),
    )
    .unwrap_or(0.0)
}

fn destination_set(d: &HashMap<String, OutboxRecord>) -> Vec<String> {
    let mut ids: Vec<String> = d.keys().cloned().collect();
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------------------
// Types: `charge.*` to billing, `customer.*` to the CRM, an unfiltered audit log gets all.

async fn types_route_charges_and_customers_apart(backend: Backend) {
    let billing_sink = Receiver::start().await;
    let crm_sink = Receiver::start().await;
    let audit_sink = Receiver::start().await;
    let (billing, crm, audit) = (
        id("billing", backend),
        id("crm", backend),
        id("audit", backend),
    );
    let mut h = gateway(backend)
        .destinations(&http_destination(
            &billing,
            &billing_sink.url(),
            "filter = { types = [\"charge.*\"], providers = [\"stripe\"] }",
        ))
        .destinations(&http_destination(
            &crm,
            &crm_sink.url(),
            "filter = { types = [\"customer.*\", \"nothing.matches\"] }",
        ))
        .destinations(&http_destination(&audit, &audit_sink.url(), ""))
        .endpoints(&stripe_endpoint(&[&billing, &crm, &audit]))
        .start()
        .await;
    let charge = send_stripe(h.addr, &stripe_typed("evt_route_1", "charge.succeeded")).await;
    let refund = send_stripe(h.addr, &stripe_typed("evt_route_2", "charge.refunded")).await;
    let customer = send_stripe(h.addr, &stripe_typed("evt_route_3", "customer.created")).await;
    let invoice = send_stripe(h.addr, &stripe_typed("evt_route_4", "invoice.paid")).await;
    let all = [
        charge.clone(),
        refund.clone(),
        customer.clone(),
        invoice.clone(),
    ];
    settled(h.store(), &all).await;

    let store = h.store();
    assert_eq!(
        destination_set(&deliveries(store, &charge).await),
        [audit.as_str(), billing.as_str()]
    );
    assert_eq!(
        destination_set(&deliveries(store, &refund).await),
        [audit.as_str(), billing.as_str()]
    );
    assert_eq!(
        destination_set(&deliveries(store, &customer).await),
        [audit.as_str(), crm.as_str()]
    );
    assert_eq!(
        destination_set(&deliveries(store, &invoice).await),
        [audit.as_str()]
    );

    let ids = |r: &Receiver| {
        let mut v: Vec<String> = r
            .received()
            .iter()
            .map(|r| r.headers["idempotency-key"].clone())
            .collect();
        v.sort();
        v
    };
    let mut want_billing = vec![charge.as_str(), refund.as_str()];
    want_billing.sort();
    assert_eq!(ids(&billing_sink), want_billing);
    assert_eq!(ids(&crm_sink), [customer.as_str()]);
    assert_eq!(ids(&audit_sink).len(), 4);
    for r in billing_sink.received() {
        assert!(r.headers["x-hookgate-event-type"].starts_with("charge."));
    }

    let metrics = metrics_text(h.admin).await;
    assert_eq!(filtered(&metrics, &billing), 2.0, "customer and invoice");
    assert_eq!(filtered(&metrics, &crm), 3.0, "two charges and the invoice");
    assert_eq!(filtered(&metrics, &audit), 0.0);
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// `where`: a numeric comparison, a pointer that exists, one that never does.

async fn where_predicates_read_the_payload(backend: Backend) {
    let big_sink = Receiver::start().await;
    let flagged_sink = Receiver::start().await;
    let ghost_sink = Receiver::start().await;
    let (big, flagged, ghost) = (
        id("big", backend),
        id("flagged", backend),
        id("ghost", backend),
    );
    let mut h = gateway(backend)
        .destinations(&http_destination(
            &big,
            &big_sink.url(),
            "filter = { types = [\"payment_intent.*\"], where = [{ pointer = \"/data/object/amount\", op = \"gt\", value = 1000 }] }",
        ))
        .destinations(&http_destination(
            &flagged,
            &flagged_sink.url(),
            "filter = { where = [{ pointer = \"/data/object/metadata/review\", op = \"exists\" }] }",
        ))
        .destinations(&http_destination(
            &ghost,
            &ghost_sink.url(),
            "filter = { where = [{ pointer = \"/data/object/no_such_field\", op = \"ne\", value = \"x\" }] }",
        ))
        .endpoints(&stripe_endpoint(&[&big, &flagged, &ghost]))
        .start()
        .await;
    // As written in examples/events: amount 2000.
    let large = send_stripe(h.addr, &stripe_event(|e| e["id"] = "evt_where_1".into())).await;
    let small = send_stripe(
        h.addr,
        &stripe_event(|e| {
            e["id"] = "evt_where_2".into();
            e["data"]["object"]["amount"] = 500.into();
            e["data"]["object"]["metadata"] = serde_json::json!({ "review": "manual" });
        }),
    )
    .await;
    // The amount a string: a type mismatch does not match.
    let odd = send_stripe(
        h.addr,
        &stripe_event(|e| {
            e["id"] = "evt_where_3".into();
            e["data"]["object"]["amount"] = "5000".into();
        }),
    )
    .await;
    let all = [large.clone(), small.clone(), odd.clone()];
    settled(h.store(), &all).await;

    let store = h.store();
    assert_eq!(
        destination_set(&deliveries(store, &large).await),
        [big.as_str()]
    );
    assert_eq!(
        destination_set(&deliveries(store, &small).await),
        [flagged.as_str()]
    );
    assert!(deliveries(store, &odd).await.is_empty());
    assert!(
        ghost_sink.received().is_empty(),
        "a missing pointer never matches"
    );
    assert_eq!(big_sink.received().len(), 1);
    assert_eq!(
        big_sink.received()[0].body,
        stripe_event(|e| e["id"] = "evt_where_1".into()),
        "the provider's original bytes"
    );

    let metrics = metrics_text(h.admin).await;
    assert_eq!(filtered(&metrics, &big), 2.0);
    assert_eq!(filtered(&metrics, &flagged), 2.0);
    assert_eq!(filtered(&metrics, &ghost), 3.0);
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// Transforms on a real Stripe event: a reshape (signed as sent), `null` skips, a string is
// text/plain, a runtime error and several outputs fail the delivery with a redacted reason.

async fn transforms_reshape_skip_and_fail(backend: Backend) {
    let sinks: Vec<Receiver> = receivers(6).await;
    let names = ["reshape", "skip", "text", "broken", "several", "raw"];
    let ids: Vec<String> = names.iter().map(|n| id(n, backend)).collect();
    let programs = [
        "{event: .id, kind: .type, amount: .data.object.amount, currency: (.data.object.currency | ascii_upcase)}",
        "if .data.object.amount > 5000 then . else null end",
        "\"\\(.type) \\(.data.object.amount) \\(.data.object.currency)\"",
        ".data.object.currency + 1",
        ".data.object.id, .data.object.amount",
        "",
    ];
    let mut builder = gateway(backend);
    for ((id, sink), program) in ids.iter().zip(&sinks).zip(programs) {
        let extra = if program.is_empty() {
            String::new()
        } else {
            format!("transform = {}", q(program))
        };
        builder = builder.destinations(&http_destination(id, &sink.url(), &extra));
    }
    // A broker destination: the transform's output as the message, its type in a header.
    let nats = Nats::start();
    let bus = id("bus", backend);
    builder = builder.destinations(&nats_destination(
        &bus,
        &nats.url(),
        &format!("transform = {}", q("\"\\(.type) \\(.data.object.id)\"")),
    ));
    let mut list: Vec<&str> = ids.iter().map(String::as_str).collect();
    list.push(&bus);
    let mut h = builder.endpoints(&stripe_endpoint(&list)).start().await;
    let body = stripe_event(|e| e["id"] = "evt_transform_1".into());
    let inbox_id = send_stripe(h.addr, &body).await;
    finished(h.store(), std::slice::from_ref(&inbox_id)).await;
    let d = deliveries(h.store(), &inbox_id).await;
    let status = |i: usize| (d[&ids[i]].status, d[&ids[i]].last_error.clone());

    // Reshaped, as JSON, signed over the bytes sent.
    assert_eq!(status(0), (OutboxStatus::Delivered, None));
    let got = sinks[0].received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["content-type"], "application/json");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&got[0].body).unwrap(),
        serde_json::json!({"event": "evt_transform_1", "kind": "payment_intent.succeeded",
                           "amount": 2000, "currency": "USD"})
    );
    assert!(standard_webhooks_verify(
        DEST_SECRET,
        &got[0].headers,
        &got[0].body
    ));
    assert_eq!(got[0].headers["idempotency-key"], inbox_id);

    // `null`: nothing sent, DELIVERED with the reason, counted.
    assert_eq!(
        status(1),
        (
            OutboxStatus::Delivered,
            Some("skipped: transform output null".to_owned())
        )
    );
    assert!(sinks[1].received().is_empty());

    // A string: text/plain, its bytes as they are.
    assert_eq!(status(2), (OutboxStatus::Delivered, None));
    let got = sinks[2].received();
    assert_eq!(got[0].headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(got[0].body, b"payment_intent.succeeded 2000 usd");
    assert!(standard_webhooks_verify(
        DEST_SECRET,
        &got[0].headers,
        &got[0].body
    ));

    // A runtime error: FAILED at once (the program would fail every attempt), the reason
    // redacted; nothing sent.
    let (broken_status, broken_error) = status(3);
    assert_eq!(broken_status, OutboxStatus::Failed);
    let broken_error = broken_error.unwrap();
    assert!(
        broken_error.starts_with("permanent: transform: transform error: arithmetic"),
        "{broken_error}"
    );
    assert!(!broken_error.contains("usd"), "{broken_error}");
    assert_eq!(d[&ids[3]].attempt_count, 1);
    assert!(sinks[3].received().is_empty());

    // Several outputs: FAILED.
    let (several_status, several_error) = status(4);
    assert_eq!(several_status, OutboxStatus::Failed);
    assert!(
        several_error.unwrap().contains("more than one output"),
        "several outputs"
    );
    assert!(sinks[4].received().is_empty());

    // Without a transform: the provider's bytes; the stored payload is unchanged.
    let got = sinks[5].received();
    assert_eq!(got[0].body, body);
    assert_eq!(got[0].headers["content-type"], "application/json");

    assert_eq!(d[&bus].status, OutboxStatus::Delivered);
    let msgs = stream_messages(&nats.url(), "HOOKS").await;
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        msgs[0].body,
        b"payment_intent.succeeded pi_3QdevExample0001"
    );
    assert_eq!(msgs[0].content_type, "text/plain; charset=utf-8");
    assert_eq!(msgs[0].inbox_id, inbox_id);

    let metrics = metrics_text(h.admin).await;
    let skipped = |d: &str| {
        series_value(
            &metrics,
            &format!("hookgate_transform_skipped_total{{destination=\"{d}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(skipped(&ids[1]), 1.0);
    assert_eq!(skipped(&ids[0]), 0.0);
    h.stop().await;
}

async fn receivers(n: usize) -> Vec<Receiver> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(Receiver::start().await);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Bad filters are refused at start-up by the real binary, naming the key.

fn config_check(dir: &Path, destination_extra: &str) -> (i32, String) {
    let config = dir.join("hookgate.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\
         [store]\nurl = {}\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = {} }}]\n\
         [[destinations]]\nid = \"fine\"\nkind = \"http\"\nurl = \"https://example.com/hook\"\n\
         [[destinations]]\nid = \"billing\"\nkind = \"http\"\nurl = \"https://example.com/hook\"\n\
         {destination_extra}\n{}",
        q(&format!("sqlite://{}", dir.join("db.sqlite").display())),
        q(PAYLOAD_KEY),
        stripe_endpoint(&["fine", "billing"]),
    );
    std::fs::write(&config, text).unwrap();
    let out = Command::new(binary())
        .args(["config", "check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn bad_transforms_are_refused_at_start_up_naming_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = config_check(dir.path(), "transform = \"{id: .id,, }\"");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("`destinations[1].transform`"), "{out}");
    assert!(
        out.contains("destination \"billing\""),
        "names the id: {out}"
    );
    assert!(out.contains("jq syntax error"), "{out}");
    for (program, problem) in [
        ("transform = \"input\"", "undefined filter"),
        ("transform = \"$ENV.HOME\"", "undefined variable"),
        ("transform = 5", "must be a string"),
    ] {
        let (code, out) = config_check(dir.path(), program);
        assert_ne!(code, 0, "{program}: {out}");
        assert!(
            out.contains("`destinations[1].transform`") && out.contains(problem),
            "{program}: {out}"
        );
    }
    let (code, out) = config_check(
        dir.path(),
        "transform = \"{id, amount: .data.object.amount}\"",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("transform = \"{id, amount: .data.object.amount}\""),
        "config check shows the program: {out}"
    );
}

#[test]
fn bad_filters_are_refused_at_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, key) in [
        (
            "filter = { where = [{ pointer = \"/data/object/amount\", op = \"gte\", value = 1 }] }",
            "destinations[1].filter.where[0].op",
        ),
        (
            "filter = { where = [{ pointer = \"data\", op = \"exists\" }] }",
            "destinations[1].filter.where[0].pointer",
        ),
        (
            "filter = { where = [{ pointer = \"/a\", op = \"gt\", value = \"big\" }] }",
            "destinations[1].filter.where[0].value",
        ),
        ("filter = { types = [] }", "destinations[1].filter.types"),
        // A provider no endpoint routing here has would never match (a typo drops everything).
        (
            "filter = { providers = [\"strpe\"] }",
            "destinations[1].filter.providers[0]",
        ),
        (
            "filter = { event_types = [\"x\"] }",
            "destinations[1].filter",
        ),
    ] {
        let (code, out) = config_check(dir.path(), extra);
        assert_ne!(code, 0, "{extra} was accepted: {out}");
        assert!(out.contains(&format!("`{key}`")), "{extra}: {out}");
    }
    let (code, out) = config_check(
        dir.path(),
        "filter = { types = [\"charge.*\"], where = [{ pointer = \"/data/object/amount\", op = \"gt\", value = 100 }] }",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("filter = { types = [\"charge.*\"], where = [{ pointer = \"/data/object/amount\", op = \"gt\", value = 100 }] }"),
        "config check shows the filter: {out}"
    );
}
