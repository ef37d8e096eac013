//! The command as built (no server), then appends against the real Redis server:
//! `HOOKGATE_TEST_REDIS_URL`, else the local server at 127.0.0.1:6379, which
//! scripts/ensure-redis.sh installs and starts. Every test uses streams of its own, deleted at
//! the end.

use std::collections::HashMap;
use std::time::Duration;

use redis::Value;
use redis::streams::StreamRangeReply;

use super::*;
use crate::redact_password;
use crate::subject::SubjectTemplate;

fn redis_url() -> String {
    std::env::var("HOOKGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

/// A stream name no other test (or earlier run) uses.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("hookgate-test.{what}.{}.{nanos}", std::process::id())
}

fn settings(url: &str, stream: &str, max_len: u64) -> RedisStreamSettings {
    RedisStreamSettings {
        id: "stream".into(),
        url: url.into(),
        stream: SubjectTemplate::parse(stream).unwrap(),
        max_len,
        timeout: Duration::from_secs(5),
    }
}

fn message<'a>(key: &'a str, body: &'a [u8]) -> Message<'a> {
    Message {
        inbox_id: key,
        idempotency_key: key,
        provider: "stripe",
        endpoint_id: "stripe-main",
        provider_event_id: "evt_1",
        event_type: Some("charge.succeeded"),
        body,
        content_type: None,
        timestamp: 1_767_225_600,
        traceparent: None,
    }
}

fn args(cmd: &redis::Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => b"<not simple>".to_vec(),
        })
        .collect()
}

#[tokio::test]
async fn the_command_is_an_approximate_maxlen_xadd() {
    let d = RedisStreamDestination::new(settings(
        "redis://127.0.0.1:6379/",
        "webhooks.{endpoint}.{event_type}",
        5000,
    ))
    .unwrap();
    let m = message("01J0KEY", b"{\"a\":1}");
    let got = args(&d.command(&m));
    let text: Vec<String> = got[..5]
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(
        text,
        [
            "XADD",
            "webhooks.stripe-main.charge_succeeded",
            "MAXLEN",
            "~",
            "5000"
        ]
    );
    assert_eq!(got[5], b"*");
    assert_eq!(got[6], b"idempotency_key");
    assert_eq!(got[7], b"01J0KEY");
    assert_eq!(got[got.len() - 2], b"body");
    assert_eq!(got[got.len() - 1], b"{\"a\":1}");
}

#[test]
fn urls_and_max_len_are_checked() {
    assert!(check_url("redis://127.0.0.1:6379/0").is_ok());
    assert!(check_url("rediss://:pw@cache.example:6380/").is_ok());
    for bad in ["http://h/", "redis://h:notaport/"] {
        let e = check_url(bad).unwrap_err();
        assert!(!e.contains("h:"), "the message never quotes the URL: {e}");
    }
    assert!(check_max_len(1).is_ok());
    assert!(check_max_len(0).is_err());
    assert!(check_max_len(MAX_MAX_LEN + 1).is_err());
    let shown = format!("{:?}", settings("redis://:s3cret@h:6379/", "s", 10));
    assert!(
        !shown.contains("s3cret") && shown.contains(":<redacted>@h:6379"),
        "{shown}"
    );
}

async fn connection() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis_url()).unwrap();
    client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "Redis at {} is not reachable ({e}): run scripts/ensure-redis.sh, or set HOOKGATE_TEST_REDIS_URL",
                redact_password(&redis_url())
            )
        })
}

fn text(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn appends_entries_with_the_key_metadata_and_body() {
    let mut admin = connection().await;
    let stream = unique("append");
    let d = RedisStreamDestination::new(settings(&redis_url(), &stream, 1000)).unwrap();
    let body = b"{\"id\":\"evt_1\"}\x00 raw bytes kept";
    for key in ["01J0A", "01J0B"] {
        d.deliver(&message(key, body)).await.unwrap();
    }
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(reply.ids.len(), 2);
    for (entry, key) in reply.ids.iter().zip(["01J0A", "01J0B"]) {
        let fields: HashMap<&str, Vec<u8>> = entry
            .map
            .iter()
            .map(|(k, v)| (k.as_str(), text(v)))
            .collect();
        assert_eq!(fields["idempotency_key"], key.as_bytes());
        assert_eq!(fields["X-Hookgate-Inbox-Id"], key.as_bytes());
        assert_eq!(fields["X-Hookgate-Provider"], b"stripe");
        assert_eq!(fields["X-Hookgate-Endpoint"], b"stripe-main");
        assert_eq!(fields["X-Hookgate-Event-Id"], b"evt_1");
        assert_eq!(fields["X-Hookgate-Event-Type"], b"charge.succeeded");
        assert_eq!(fields["content_type"], b"application/json");
        assert_eq!(fields["body"], body);
    }
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn max_len_keeps_at_least_the_newest_entries() {
    let mut admin = connection().await;
    let stream = unique("trim");
    let d = RedisStreamDestination::new(settings(&redis_url(), &stream, 10)).unwrap();
    for i in 0..450 {
        let key = format!("k{i}");
        d.deliver(&message(&key, b"{}")).await.unwrap();
    }
    let len: u64 = redis::cmd("XLEN")
        .arg(&stream)
        .query_async(&mut admin)
        .await
        .unwrap();
    // `~` trims whole nodes (stream-node-max-entries, 100 by default): never below max_len.
    assert!((10..450).contains(&len), "{len} entries left");
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut admin)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_server_that_is_down_is_transient() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = RedisStreamDestination::new(settings(
        &format!("redis://:s3cret@127.0.0.1:{port}/"),
        "s",
        10,
    ))
    .unwrap();
    for _ in 0..2 {
        match d.deliver(&message("k", b"{}")).await {
            Err(DeliveryError::Transient { reason, .. }) => {
                assert!(reason.starts_with("redis XADD"), "{reason}");
                assert!(!reason.contains("s3cret"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
