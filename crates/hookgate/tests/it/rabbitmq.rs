//! RabbitMQ delivery end to end (docs/destinations.md, "RabbitMQ"): webhooks in over real
//! sockets, workers write one outbox row per event, the relay publishes to a real RabbitMQ
//! server, and the test reads the queue bound to the exchange.
//!
//! The server is `HOOKGATE_TEST_AMQP_URL`, else 127.0.0.1:5672 (guest/guest);
//! scripts/ensure-rabbitmq.sh installs and starts it. Every test declares exchanges and queues
//! of its own. The broker-restart test (`rabbitmq_restart.rs`) runs a private node instead.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hookgate::config::Config;
use hookgate_core::OutboxStatus;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties, ExchangeKind};

use crate::delivery::{WAIT, delivered, deliveries, event_body, gateway, send, sw_endpoint};
use crate::support::*;

fn shared_url() -> String {
    std::env::var("HOOKGATE_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A name no other test (or earlier run) uses.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("hookgate-it.{what}.{}.{nanos}", std::process::id())
}

/// The URL in an owner-only file, so the destination reads it as a `file:` secret.
fn url_file(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("amqp-url");
    std::fs::write(&path, format!("{url}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

pub(crate) fn rabbitmq_destination(id: &str, url: &str, exchange: &str, extra: &str) -> String {
    format!(
        "[[destinations]]\nid = {}\nkind = \"rabbitmq\"\nurl = {}\nexchange = {}\n\
         routing_key = \"webhooks.{{provider}}.{{event_type}}\"\ntimeout_ms = 2000\n\
         retry = {{ base_ms = 50, cap_ms = 300, max_attempts = 1000 }}\n{extra}\n",
        q(id),
        q(url),
        q(exchange),
    )
}

/// One message as a consumer reads it.
#[derive(Debug, Clone)]
pub(crate) struct Consumed {
    pub(crate) message_id: String,
    pub(crate) routing_key: String,
    pub(crate) delivery_mode: Option<u8>,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

/// The test's own connection: declares and reads what the destination publishes to.
pub(crate) struct Admin {
    pub(crate) connection: Connection,
    channel: lapin::Channel,
}

impl Admin {
    pub(crate) async fn connect(url: &str) -> Admin {
        let connection = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "RabbitMQ at {} is not reachable ({e}): run scripts/ensure-rabbitmq.sh, or set HOOKGATE_TEST_AMQP_URL",
                    hookgate_relay::redact_password(url)
                )
            });
        let channel = connection.create_channel().await.unwrap();
        Admin {
            connection,
            channel,
        }
    }

    /// A durable topic exchange with one durable queue bound for `pattern`.
    pub(crate) async fn declare(&self, exchange: &str, queue: &str, pattern: &str) {
        self.channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                pattern.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    }

    /// Every message in `queue`, taken off it.
    pub(crate) async fn drain(&self, queue: &str) -> Vec<Consumed> {
        let mut out = Vec::new();
        while let Some(m) = self
            .channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let p = &m.delivery.properties;
            let headers = p
                .headers()
                .as_ref()
                .map(|h| {
                    h.inner()
                        .iter()
                        .filter_map(|(k, v)| match v {
                            AMQPValue::LongString(s) => Some((
                                k.as_str().to_owned(),
                                String::from_utf8_lossy(s.as_bytes()).into_owned(),
                            )),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Consumed {
                message_id: p
                    .message_id()
                    .as_ref()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                routing_key: m.delivery.routing_key.as_str().to_owned(),
                delivery_mode: *p.delivery_mode(),
                headers,
                body: m.delivery.data.clone(),
            });
        }
        out
    }

    async fn remove(&self, exchange: &str, queue: &str) {
        let _ = self
            .channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await;
        let _ = self
            .channel
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await;
        let _ = self.connection.close(200, "done".into()).await;
    }
}

// ---------------------------------------------------------------------------------------
// Every processed event is published once, persistent, with its key and metadata.

async fn publishes_every_event(backend: Backend) {
    let admin = Admin::connect(&shared_url()).await;
    let (exchange, queue) = (unique("ex"), unique("q"));
    admin.declare(&exchange, &queue, "webhooks.#").await;
    let secrets = tempfile::tempdir().unwrap();
    let url_ref = format!("file:{}", url_file(secrets.path(), &shared_url()).display());
    let mut h = gateway(backend)
        .destinations(&rabbitmq_destination("bus", &url_ref, &exchange, ""))
        .endpoints(&sw_endpoint(&["bus"]))
        .start()
        .await;
    const N: usize = 8;
    let mut sent = BTreeMap::new();
    for i in 0..N {
        let body = event_body(i, 1);
        let id = send(h.addr, &format!("msg_amqp_{i}"), &body).await;
        sent.insert(id, (format!("msg_amqp_{i}"), body));
    }
    let store = h.store().clone();
    wait_until("every event DELIVERED", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == N as u64 }
    })
    .await;
    let got = admin.drain(&queue).await;
    assert_eq!(
        got.len(),
        N,
        "one message per event, nothing unconfirmed re-sent"
    );
    for m in &got {
        let (event_id, body) = &sent[&m.message_id];
        assert_eq!(&m.body, body, "the provider's original bytes");
        assert_eq!(m.routing_key, "webhooks.standard_webhooks.invoice_paid");
        assert_eq!(m.delivery_mode, Some(2), "persistent");
        assert_eq!(m.headers["X-Hookgate-Inbox-Id"], m.message_id);
        assert_eq!(m.headers["X-Hookgate-Provider"], "standard_webhooks");
        assert_eq!(m.headers["X-Hookgate-Endpoint"], "sw");
        assert_eq!(&m.headers["X-Hookgate-Event-Id"], event_id);
        assert_eq!(m.headers["X-Hookgate-Event-Type"], "invoice.paid");
    }
    let ids: BTreeSet<&String> = got.iter().map(|m| &m.message_id).collect();
    assert_eq!(ids, sent.keys().collect::<BTreeSet<_>>());
    for id in sent.keys() {
        let d = deliveries(h.store(), id).await;
        assert_eq!(d["bus"].status, OutboxStatus::Delivered);
        assert_eq!(d["bus"].attempt_count, 1);
    }
    // `config check` shows where the URL came from, never its password.
    let rendered = hookgate::config::render_redacted(&h.state().runtime.load().config);
    assert!(rendered.contains("kind = \"rabbitmq\""), "{rendered}");
    assert!(rendered.contains("# url from file:"), "{rendered}");
    assert!(!rendered.contains("guest:guest@"), "{rendered}");
    h.stop().await;
    admin.remove(&exchange, &queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_rabbitmq_publishes_every_event() {
    publishes_every_event(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_rabbitmq_publishes_every_event() {
    publishes_every_event(Backend::Postgres).await;
}

// ---------------------------------------------------------------------------------------
// hookgate declares no exchange: a missing one is a retrying delivery whose last_error names
// it, delivered once the operator creates it.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_exchange_retries_naming_it_until_created() {
    let (exchange, queue) = (unique("absent-ex"), unique("absent-q"));
    let mut h = gateway(Backend::Sqlite)
        .destinations(&rabbitmq_destination("bus", &shared_url(), &exchange, ""))
        .endpoints(&sw_endpoint(&["bus"]))
        .start()
        .await;
    let id = send(h.addr, "msg_absent", &event_body(1, 1)).await;
    let store = h.store().clone();
    let needle = format!("exchange {exchange:?} does not exist");
    wait_until("a retry naming the exchange", WAIT, || {
        let (store, id, needle) = (store.clone(), id.clone(), needle.clone());
        async move {
            deliveries(&store, &id).await.get("bus").is_some_and(|d| {
                d.status == OutboxStatus::Pending
                    && d.attempt_count >= 2
                    && d.last_error.as_deref().is_some_and(|e| e.contains(&needle))
            })
        }
    })
    .await;
    let admin = Admin::connect(&shared_url()).await;
    admin.declare(&exchange, &queue, "#").await;
    wait_until("delivered once the exchange exists", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move { deliveries(&store, &id).await["bus"].status == OutboxStatus::Delivered }
    })
    .await;
    let got = admin.drain(&queue).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message_id, id);
    h.stop().await;
    admin.remove(&exchange, &queue).await;
}

// ---------------------------------------------------------------------------------------
// Bad configs: refused at load and by `serve` at start-up, naming the key.

#[tokio::test]
async fn bad_rabbitmq_configs_are_refused_naming_the_key() {
    let base = "[[destinations]]\nid = \"bus\"\nkind = \"rabbitmq\"\ntimeout_ms = 1000\n";
    let cases: &[(&str, &str)] = &[
        ("exchange = \"hooks\"\n", "destinations[0].url"),
        (
            "url = \"http://127.0.0.1:5672/\"\nexchange = \"hooks\"\n",
            "destinations[0].url",
        ),
        (
            "url = \"env:HOOKGATE_IT_NO_SUCH_AMQP_URL\"\nexchange = \"hooks\"\n",
            "destinations[0].url",
        ),
        (
            "url = \"amqp://127.0.0.1:5672/%2f\"\n",
            "destinations[0].exchange",
        ),
        (
            "url = \"amqp://127.0.0.1:5672/%2f\"\nexchange = \"a b\"\n",
            "destinations[0].exchange",
        ),
        (
            "url = \"amqp://127.0.0.1:5672/%2f\"\nexchange = \"hooks\"\nrouting_key = \"a.{nope}\"\n",
            "destinations[0].routing_key",
        ),
        (
            "url = \"amqp://127.0.0.1:5672/%2f\"\nexchange = \"hooks\"\nsubject = \"a\"\n",
            "subject",
        ),
    ];
    for (rest, key) in cases {
        let files = gateway(Backend::Sqlite)
            .destinations(&format!("{base}{rest}"))
            .endpoints(&sw_endpoint(&["bus"]))
            .write()
            .await;
        assert_refused_naming(&files, rest, key);
    }
    // A literal URL with a password is a literal secret: warned about, loopback/--dev only.
    let text = gateway(Backend::Sqlite)
        .destinations(&rabbitmq_destination(
            "bus",
            "amqp://guest:s3cret@127.0.0.1:5672/%2f",
            "hooks",
            "",
        ))
        .endpoints(&sw_endpoint(&["bus"]))
        .render("sqlite://x.db");
    let dir = tempfile::tempdir().unwrap();
    let c = Config::from_toml(&text, &dir.path().join("c.toml"), dir.path()).unwrap();
    assert!(
        c.literal_secrets.iter().any(|k| k == "destinations[0].url"),
        "{:?}",
        c.literal_secrets
    );
    let rendered = hookgate::config::render_redacted(&c);
    assert!(!rendered.contains("s3cret"), "{rendered}");
    assert!(
        rendered.contains("guest:<redacted>@127.0.0.1:5672"),
        "{rendered}"
    );
}
