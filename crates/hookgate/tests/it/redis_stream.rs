//! Redis Streams delivery end to end (docs/destinations.md, "Redis Streams"): webhooks in over
//! real sockets, workers write one outbox row per event, the relay appends to a stream of a
//! real Redis server, and the test reads it back with `XRANGE`.
//!
//! The server is `HOOKGATE_TEST_REDIS_URL`, else 127.0.0.1:6379; scripts/ensure-redis.sh
//! installs and starts it. Every test uses stream names of its own and deletes them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use hookgate::config::Config;
use hookgate_core::OutboxStatus;
use redis::Value;
use redis::streams::StreamRangeReply;

use crate::delivery::{WAIT, delivered, deliveries, event_body, gateway, send, sw_endpoint};
use crate::support::*;

fn redis_url() -> String {
    std::env::var("HOOKGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

/// A stream prefix no other test (or earlier run) uses (one literal token of a template).
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("hookgate-it-{what}-{}-{nanos}", std::process::id())
}

fn redis_destination(id: &str, url: &str, stream: &str, extra: &str) -> String {
    format!(
        "[[destinations]]\nid = {}\nkind = \"redis_stream\"\nurl = {}\nstream = {}\n\
         max_len = 10000\ntimeout_ms = 2000\n\
         retry = {{ base_ms = 50, cap_ms = 300, max_attempts = 1000 }}\n{extra}\n",
        q(id),
        q(url),
        q(stream),
    )
}

async fn connection() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "Redis at {} is not reachable ({e}): run scripts/ensure-redis.sh, or set HOOKGATE_TEST_REDIS_URL",
                hookgate_relay::redact_password(&redis_url())
            )
        })
}

/// Every entry of `stream`, its fields as bytes.
async fn entries(
    c: &mut redis::aio::MultiplexedConnection,
    stream: &str,
) -> Vec<HashMap<String, Vec<u8>>> {
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(c)
        .await
        .unwrap();
    reply
        .ids
        .into_iter()
        .map(|e| {
            e.map
                .into_iter()
                .map(|(k, v)| match v {
                    Value::BulkString(b) => (k, b),
                    other => panic!("{k}: {other:?}"),
                })
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Every processed event is one entry of the rendered stream, with its key and metadata.

async fn appends_every_event(backend: Backend) {
    let prefix = unique("append");
    let stream = format!("{prefix}.invoice_paid");
    let mut c = connection().await;
    let mut h = gateway(backend)
        .destinations(&redis_destination(
            "log",
            &redis_url(),
            &format!("{prefix}.{{event_type}}"),
            "",
        ))
        .endpoints(&sw_endpoint(&["log"]))
        .start()
        .await;
    const N: usize = 8;
    let mut sent = BTreeMap::new();
    for i in 0..N {
        let body = event_body(i, 1);
        let id = send(h.addr, &format!("msg_redis_{i}"), &body).await;
        sent.insert(id, (format!("msg_redis_{i}"), body));
    }
    let store = h.store().clone();
    wait_until("every event DELIVERED", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == N as u64 }
    })
    .await;
    let got = entries(&mut c, &stream).await;
    assert_eq!(got.len(), N, "one entry per event");
    let text = |e: &HashMap<String, Vec<u8>>, k: &str| String::from_utf8(e[k].clone()).unwrap();
    for e in &got {
        let key = text(e, "idempotency_key");
        let (event_id, body) = &sent[&key];
        assert_eq!(&e["body"], body, "the provider's original bytes");
        assert_eq!(text(e, "X-Hookgate-Inbox-Id"), key);
        assert_eq!(text(e, "X-Hookgate-Provider"), "standard_webhooks");
        assert_eq!(text(e, "X-Hookgate-Endpoint"), "sw");
        assert_eq!(&text(e, "X-Hookgate-Event-Id"), event_id);
        assert_eq!(text(e, "X-Hookgate-Event-Type"), "invoice.paid");
        assert_eq!(text(e, "content_type"), "application/json");
    }
    let keys: BTreeSet<String> = got.iter().map(|e| text(e, "idempotency_key")).collect();
    assert_eq!(keys, sent.keys().cloned().collect::<BTreeSet<_>>());
    for id in sent.keys() {
        let d = deliveries(h.store(), id).await;
        assert_eq!(d["log"].status, OutboxStatus::Delivered);
        assert_eq!(d["log"].attempt_count, 1);
    }
    h.stop().await;
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut c)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_redis_stream_appends_every_event() {
    appends_every_event(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_redis_stream_appends_every_event() {
    appends_every_event(Backend::Postgres).await;
}

// ---------------------------------------------------------------------------------------
// A stream key of another type (an operator's mistake Redis refuses with WRONGTYPE): the
// delivery retries with the reason, and goes out once the key is fixed.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_append_retries_until_fixed() {
    let stream = unique("wrongtype");
    let mut c = connection().await;
    let _: () = redis::cmd("SET")
        .arg(&stream)
        .arg("not a stream")
        .query_async(&mut c)
        .await
        .unwrap();
    let mut h = gateway(Backend::Sqlite)
        .destinations(&redis_destination("log", &redis_url(), &stream, ""))
        .endpoints(&sw_endpoint(&["log"]))
        .start()
        .await;
    let id = send(h.addr, "msg_wrongtype", &event_body(1, 1)).await;
    let store = h.store().clone();
    wait_until("a retry with Redis's reason", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move {
            deliveries(&store, &id).await.get("log").is_some_and(|d| {
                d.status == OutboxStatus::Pending
                    && d.attempt_count >= 2
                    && d.last_error
                        .as_deref()
                        .is_some_and(|e| e.contains("WRONGTYPE"))
            })
        }
    })
    .await;
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut c)
        .await
        .unwrap();
    wait_until("delivered once the key is a stream", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move { deliveries(&store, &id).await["log"].status == OutboxStatus::Delivered }
    })
    .await;
    let got = entries(&mut c, &stream).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["idempotency_key"], id.as_bytes());
    h.stop().await;
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut c)
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// Bad configs: refused at load and by `serve` at start-up, naming the key.

#[tokio::test]
async fn bad_redis_stream_configs_are_refused_naming_the_key() {
    let base = "[[destinations]]\nid = \"log\"\nkind = \"redis_stream\"\ntimeout_ms = 1000\n";
    let url = "url = \"redis://127.0.0.1:6379/\"\n";
    let cases: &[(String, &str)] = &[
        (
            "stream = \"s\"\nmax_len = 10\n".into(),
            "destinations[0].url",
        ),
        (
            "url = \"amqp://127.0.0.1/\"\nstream = \"s\"\nmax_len = 10\n".into(),
            "destinations[0].url",
        ),
        (format!("{url}max_len = 10\n"), "destinations[0].stream"),
        (
            format!("{url}stream = \"a..b\"\nmax_len = 10\n"),
            "destinations[0].stream",
        ),
        (format!("{url}stream = \"s\"\n"), "destinations[0].max_len"),
        (
            format!("{url}stream = \"s\"\nmax_len = 0\n"),
            "destinations[0].max_len",
        ),
        (
            format!("{url}stream = \"s\"\nmax_len = 10\nexchange = \"x\"\n"),
            "exchange",
        ),
    ];
    for (rest, key) in cases {
        let files = gateway(Backend::Sqlite)
            .destinations(&format!("{base}{rest}"))
            .endpoints(&sw_endpoint(&["log"]))
            .write()
            .await;
        assert_refused_naming(&files, rest, key);
    }
    // A URL with a password: redacted wherever the config is shown.
    let text = gateway(Backend::Sqlite)
        .destinations(&redis_destination(
            "log",
            "redis://:s3cret@127.0.0.1:6379/0",
            "s",
            "",
        ))
        .endpoints(&sw_endpoint(&["log"]))
        .render("sqlite://x.db");
    let dir = tempfile::tempdir().unwrap();
    let c = Config::from_toml(&text, &dir.path().join("c.toml"), dir.path()).unwrap();
    assert!(c.literal_secrets.iter().any(|k| k == "destinations[0].url"));
    let rendered = hookgate::config::render_redacted(&c);
    assert!(!rendered.contains("s3cret"), "{rendered}");
    assert!(rendered.contains("max_len = 10000"), "{rendered}");
}
