//! The message as built (the publish itself is tested against a real `nats-server -js` in
//! crates/hookgate/tests/it/delivery.rs).

use std::time::Duration;

use super::*;
use crate::subject::SubjectTemplate;

#[test]
fn headers_carry_the_message_id_and_metadata() {
    let m = Message {
        inbox_id: "01J0INBOX",
        idempotency_key: "01J0KEY",
        provider: "stripe",
        endpoint_id: "stripe-main",
        provider_event_id: "evt_1",
        event_type: Some("charge.succeeded\r\n"),
        body: b"{}",
        content_type: None,
        timestamp: 1_767_225_600,
        traceparent: None,
    };
    let h = headers(&m, "bus");
    let get = |name: &str| h.get(name).map(|v| v.as_str().to_owned());
    assert_eq!(get("Nats-Msg-Id").as_deref(), Some("01J0KEY:bus"));
    assert_eq!(get("X-Hookgate-Inbox-Id").as_deref(), Some("01J0INBOX"));
    assert_eq!(get("X-Hookgate-Provider").as_deref(), Some("stripe"));
    assert_eq!(get("X-Hookgate-Endpoint").as_deref(), Some("stripe-main"));
    assert_eq!(get("X-Hookgate-Event-Id").as_deref(), Some("evt_1"));
    assert_eq!(
        get("X-Hookgate-Event-Type").as_deref(),
        Some("charge.succeeded__"),
        "no control characters in a header"
    );
}

#[test]
fn settings_never_show_credentials() {
    let s = NatsSettings {
        id: "bus".into(),
        url: "nats://user:s3cret@127.0.0.1:4222".into(),
        stream: "HOOKS".into(),
        subject: SubjectTemplate::parse("webhooks.{provider}").unwrap(),
        duplicate_window: Duration::from_secs(3600),
        timeout: Duration::from_secs(1),
    };
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("user"),
        "{shown}"
    );
    assert!(
        shown.contains("nats://<redacted>@127.0.0.1:4222"),
        "{shown}"
    );
}
