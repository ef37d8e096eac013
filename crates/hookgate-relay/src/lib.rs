//! hookgate's delivery side: the [`Destination`] trait and its kinds (ARCHITECTURE.md, "One
//! delivery").
//!
//! The relay (in the binary, `relay/`) leases `PENDING` outbox rows, opens the sealed payload
//! and hands each event to its destination here as a [`Message`]. A destination does the
//! network I/O and classifies the result: `Ok` (delivered: a 2xx, a JetStream publish ack),
//! [`DeliveryError::Transient`] (try again after backoff) or [`DeliveryError::Permanent`]
//! (`FAILED`, retryable by an operator). Only this crate knows broker and HTTP clients.
//!
//! Every outbound message carries the inbox id as its idempotency key: `Idempotency-Key` and
//! `webhook-id` over HTTP, `Nats-Msg-Id: <inbox_id>:<destination>` on JetStream, `message_id`
//! on RabbitMQ, the `idempotency_key` field of a Redis stream entry. Publishing may happen
//! twice (a crash between publish and mark); consumers dedupe on the inbox id.
//!
//! - [`http`]: POST with the provider's original bytes, re-signed with Standard Webhooks.
//! - `nats` (feature `nats`): JetStream publish with an explicit duplicate window.
//! - `rabbitmq` (feature `rabbitmq`): a persistent, confirmed, mandatory publish to an
//!   existing exchange.
//! - `redis_stream` (feature `redis-stream`): `XADD` with an approximate `MAXLEN`.
//! - [`subject`]: subject templates with sanitised tokens (also routing keys and stream names).
//! - [`transform`]: a destination's jq program, sandboxed and bounded.

pub mod http;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis-stream")]
pub mod redis_stream;
pub mod subject;
pub mod transform;

use std::fmt;
use std::time::Duration;

/// One event to deliver. `Debug` never shows the body.
pub struct Message<'a> {
    /// The inbox id (`X-Hookgate-Inbox-Id`).
    pub inbox_id: &'a str,
    /// The idempotency key (`Idempotency-Key`, `webhook-id`, JetStream's `Nats-Msg-Id`): the
    /// inbox id, unless an operator's re-delivery with `fresh_key` gave the delivery a new one.
    pub idempotency_key: &'a str,
    pub provider: &'a str,
    pub endpoint_id: &'a str,
    pub provider_event_id: &'a str,
    pub event_type: Option<&'a str>,
    /// The provider's original bytes, as verified, or the destination's transform of them.
    pub body: &'a [u8],
    /// The body's media type when a transform made it; `None`: the provider's bytes, typed by
    /// [`Message::content_type`].
    pub content_type: Option<&'a str>,
    /// Unix seconds of this attempt (signed into `webhook-timestamp`).
    pub timestamp: i64,
    /// The W3C `traceparent` of this delivery's span when traces are exported (sent by HTTP
    /// destinations as the `traceparent` header); `None`: no header.
    pub traceparent: Option<&'a str>,
}

impl fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("inbox_id", &self.inbox_id)
            .field("provider", &self.provider)
            .field("endpoint_id", &self.endpoint_id)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl Message<'_> {
    /// The `Content-Type` to send: the transform's, else `application/json` for a body that
    /// is a JSON object or array and `application/octet-stream` for anything else.
    pub fn content_type(&self) -> &str {
        if let Some(content_type) = self.content_type {
            return content_type;
        }
        match self.body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{' | b'[') => "application/json",
            _ => "application/octet-stream",
        }
    }
}

/// Why a delivery did not succeed. Messages are redacted by construction: status codes, error
/// kinds, never bodies, secrets or URLs with credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// Worth retrying (5xx, 408, 429, timeout, connection refused, no ack): backoff with full
    /// jitter; `retry_after` (from `Retry-After`) is a floor on the wait.
    #[error("transient: {reason}")]
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Will not succeed as is (other 4xx, refused address): `FAILED`.
    #[error("permanent: {0}")]
    Permanent(String),
}

impl DeliveryError {
    pub fn transient(reason: impl Into<String>) -> Self {
        DeliveryError::Transient {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// What a successful delivery knew (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivered {
    /// The destination said it had seen this idempotency key already (JetStream's duplicate
    /// window). HTTP destinations cannot tell.
    pub duplicate: bool,
    /// The response status of an HTTP destination.
    pub http_status: Option<u16>,
}

/// A configured destination. Implementations are shared by concurrent deliveries.
#[async_trait::async_trait]
pub trait Destination: Send + Sync {
    /// The destination id from config (`[[destinations]] id`).
    fn id(&self) -> &str;

    /// Delivers one message; never holds anything the store owns.
    async fn deliver(&self, message: &Message<'_>) -> Result<Delivered, DeliveryError>;
}

/// A broker URL with its password replaced (userinfo and a `password=` query parameter), for
/// `Debug` and `config check`; text without `://` is hidden whole.
pub fn redact_password(url: &str) -> String {
    const HIDDEN: &str = "<redacted>";
    let Some(scheme_end) = url.find("://") else {
        return HIDDEN.into();
    };
    let (scheme, rest) = (&url[..scheme_end], &url[scheme_end + 3..]);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{HIDDEN}@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={HIDDEN}"),
                    _ => kv.to_owned(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// A header value from untrusted text: visible ASCII and spaces only (others become `_`), at
/// most 256 bytes.
pub fn header_safe(value: &str) -> String {
    value
        .chars()
        .take(256)
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '_'
            }
        })
        .collect()
}
