//! The message as built (no broker), then publishes against the real RabbitMQ server:
//! `HOOKGATE_TEST_AMQP_URL`, else the local server at 127.0.0.1:5672 (guest/guest), which
//! scripts/ensure-rabbitmq.sh installs and starts. Every test uses exchanges and queues of
//! its own, deleted at the end.

use std::time::Duration;

use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties, ExchangeKind};

use super::*;
use crate::redact_password;
use crate::subject::SubjectTemplate;

fn amqp_url() -> String {
    std::env::var("HOOKGATE_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A name no other test (or earlier run) uses.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("hookgate-test.{what}.{}.{nanos}", std::process::id())
}

fn settings(url: &str, exchange: &str, routing_key: &str) -> RabbitMqSettings {
    RabbitMqSettings {
        id: "bus".into(),
        url: url.into(),
        exchange: exchange.into(),
        routing_key: SubjectTemplate::parse(routing_key).unwrap(),
        timeout: Duration::from_secs(5),
    }
}

fn message<'a>(key: &'a str, event_type: Option<&'a str>, body: &'a [u8]) -> Message<'a> {
    Message {
        inbox_id: "01J0INBOX",
        idempotency_key: key,
        provider: "stripe",
        endpoint_id: "stripe-main",
        provider_event_id: "evt_1",
        event_type,
        body,
        content_type: None,
        timestamp: 1_767_225_600,
        traceparent: None,
    }
}

fn header<'a>(p: &'a BasicProperties, name: &str) -> Option<&'a [u8]> {
    match p.headers().as_ref()?.inner().get(name)? {
        AMQPValue::LongString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

#[test]
fn properties_carry_the_key_persistence_and_metadata() {
    let m = message("01J0KEY", Some("payment_intent.succeeded"), b" {\"a\":1}");
    let p = properties(&m).unwrap();
    assert_eq!(p.message_id().as_ref().unwrap().as_str(), "01J0KEY");
    assert_eq!(*p.delivery_mode(), Some(2), "persistent");
    assert_eq!(
        p.content_type().as_ref().unwrap().as_str(),
        "application/json"
    );
    assert_eq!(
        p.kind().as_ref().unwrap().as_str(),
        "payment_intent.succeeded"
    );
    assert_eq!(*p.timestamp(), Some(1_767_225_600));
    assert_eq!(header(&p, "X-Hookgate-Inbox-Id"), Some(&b"01J0INBOX"[..]));
    assert_eq!(header(&p, "X-Hookgate-Provider"), Some(&b"stripe"[..]));
    assert_eq!(header(&p, "X-Hookgate-Endpoint"), Some(&b"stripe-main"[..]));
    assert_eq!(header(&p, "X-Hookgate-Event-Id"), Some(&b"evt_1"[..]));
    assert_eq!(
        header(&p, "X-Hookgate-Event-Type"),
        Some(&b"payment_intent.succeeded"[..])
    );
    // A sender's control characters never reach a header; a binary body is bytes.
    let m = message("k", Some("a\r\nb"), b"\x00\x01");
    let p = properties(&m).unwrap();
    assert_eq!(header(&p, "X-Hookgate-Event-Type"), Some(&b"a__b"[..]));
    assert_eq!(
        p.content_type().as_ref().unwrap().as_str(),
        "application/octet-stream"
    );
}

#[test]
fn routing_keys_are_sanitised_and_bounded() {
    let d = RabbitMqDestination::new(settings(
        "amqp://127.0.0.1:5672/%2f",
        "hooks",
        "webhooks.{provider}.{event_type}",
    ))
    .unwrap();
    let m = message("k", Some("charge.succeeded"), b"{}");
    assert_eq!(
        d.routing_key(&m).unwrap().as_str(),
        "webhooks.stripe.charge_succeeded"
    );
    let m = message("k", Some("*.#"), b"{}");
    assert_eq!(d.routing_key(&m).unwrap().as_str(), "webhooks.stripe.__#");
    let long = "x".repeat(200);
    let d = RabbitMqDestination::new(settings(
        "amqp://127.0.0.1:5672/%2f",
        "hooks",
        "{event_type}.{event_type}",
    ))
    .unwrap();
    let m = message("k", Some(&long), b"{}");
    match d.routing_key(&m) {
        Err(DeliveryError::Permanent(reason)) => assert!(reason.contains("255"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn urls_and_exchanges_are_checked() {
    assert!(check_url("amqp://guest:guest@127.0.0.1:5672/%2f").is_ok());
    assert!(check_url("amqps://u:p@broker.example:5671/prod").is_ok());
    for bad in ["http://h/", "nats://h:4222", "amqp://h:notaport/"] {
        let e = check_url(bad).unwrap_err();
        assert!(!e.contains("h:"), "the message never quotes the URL: {e}");
    }
    assert!(check_exchange("amq.topic").is_ok());
    assert!(check_exchange("billing:events-v1_x").is_ok());
    for bad in ["", "a b", "ex/1", &"e".repeat(256)] {
        assert!(check_exchange(bad).is_err(), "{bad:?}");
    }
    let s = settings(
        "amqp://user:s3cret@h:5672/%2f",
        "hooks",
        "webhooks.{provider}",
    );
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("s3cret") && shown.contains("user:<redacted>@h:5672"),
        "{shown}"
    );
}

/// An admin connection of the test: declares and removes what the destination uses.
struct Broker {
    connection: Connection,
    channel: lapin::Channel,
}

impl Broker {
    async fn connect() -> Broker {
        let connection = Connection::connect(&amqp_url(), ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "RabbitMQ at {} is not reachable ({e}): run scripts/ensure-rabbitmq.sh, or set HOOKGATE_TEST_AMQP_URL",
                    redact_password(&amqp_url())
                )
            });
        let channel = connection.create_channel().await.unwrap();
        Broker {
            connection,
            channel,
        }
    }

    /// A topic exchange with one queue bound for `pattern`.
    async fn exchange_with_queue(&self, exchange: &str, queue: &str, pattern: &str) {
        self.channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    auto_delete: false,
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

    async fn get(&self, queue: &str) -> Option<lapin::message::BasicGetMessage> {
        self.channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
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

#[tokio::test]
async fn publishes_persistent_confirmed_messages_and_reconnects() {
    let broker = Broker::connect().await;
    let (exchange, queue) = (unique("publish-ex"), unique("publish-q"));
    broker
        .exchange_with_queue(&exchange, &queue, "webhooks.stripe.*")
        .await;
    let d = RabbitMqDestination::new(settings(
        &amqp_url(),
        &exchange,
        "webhooks.{provider}.{event_type}",
    ))
    .unwrap();
    let body = br#"{"id":"evt_1","type":"charge.succeeded"}"#;
    d.deliver(&message("01J0KEY1", Some("charge.succeeded"), body))
        .await
        .unwrap();
    let got = broker.get(&queue).await.expect("one message in the queue");
    assert_eq!(got.delivery.data, body);
    assert_eq!(
        got.delivery.routing_key.as_str(),
        "webhooks.stripe.charge_succeeded"
    );
    let p = &got.delivery.properties;
    assert_eq!(p.message_id().as_ref().unwrap().as_str(), "01J0KEY1");
    assert_eq!(*p.delivery_mode(), Some(2));
    assert_eq!(header(p, "X-Hookgate-Inbox-Id"), Some(&b"01J0INBOX"[..]));

    // The connection dies under the destination (what a broker restart does): the next
    // delivery connects again.
    let first = d.session.lock().await.clone().expect("a session");
    first.connection.close(320, "test".into()).await.unwrap();
    d.deliver(&message("01J0KEY2", Some("charge.succeeded"), body))
        .await
        .unwrap();
    let second = d.session.lock().await.clone().expect("a session");
    assert!(!Arc::ptr_eq(&first, &second), "a new connection");
    let got = broker.get(&queue).await.expect("the second message");
    assert_eq!(
        got.delivery
            .properties
            .message_id()
            .as_ref()
            .unwrap()
            .as_str(),
        "01J0KEY2"
    );
    assert!(broker.get(&queue).await.is_none());
    broker.remove(&exchange, &queue).await;
}

#[tokio::test]
async fn a_missing_exchange_is_an_error_naming_it() {
    let exchange = unique("missing-ex");
    let d =
        RabbitMqDestination::new(settings(&amqp_url(), &exchange, "webhooks.{provider}")).unwrap();
    for _ in 0..2 {
        match d.deliver(&message("k", None, b"{}")).await {
            Err(DeliveryError::Transient { reason, .. }) => {
                assert!(
                    reason.contains(&format!("exchange {exchange:?} does not exist")),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // Created by the operator: the next attempt delivers.
    let broker = Broker::connect().await;
    let queue = unique("missing-q");
    broker.exchange_with_queue(&exchange, &queue, "#").await;
    d.deliver(&message("k", None, b"{}")).await.unwrap();
    assert!(broker.get(&queue).await.is_some());
    broker.remove(&exchange, &queue).await;
}

#[tokio::test]
async fn a_message_no_queue_takes_is_not_delivered() {
    let broker = Broker::connect().await;
    let (exchange, queue) = (unique("unroutable-ex"), unique("unroutable-q"));
    broker
        .exchange_with_queue(&exchange, &queue, "only.this")
        .await;
    let d =
        RabbitMqDestination::new(settings(&amqp_url(), &exchange, "webhooks.{provider}")).unwrap();
    match d.deliver(&message("k", None, b"{}")).await {
        Err(DeliveryError::Transient { reason, .. }) => {
            assert!(reason.contains("unroutable"), "{reason}");
            assert!(reason.contains("webhooks.stripe"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(broker.get(&queue).await.is_none());
    broker.remove(&exchange, &queue).await;
}

#[tokio::test]
async fn a_broker_that_is_down_is_transient() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = RabbitMqDestination::new(settings(
        &format!("amqp://guest:s3cret@127.0.0.1:{port}/%2f"),
        "hooks",
        "webhooks.{provider}",
    ))
    .unwrap();
    match d.deliver(&message("k", None, b"{}")).await {
        Err(DeliveryError::Transient { reason, .. }) => {
            assert!(reason.starts_with("amqp connect"), "{reason}");
            assert!(!reason.contains("s3cret"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
