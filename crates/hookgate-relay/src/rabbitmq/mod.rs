//! RabbitMQ destinations (`kind = "rabbitmq"`): each event is published to a configured
//! exchange with a routing key rendered from a template (the NATS subject placeholders and
//! sanitisation, [`crate::subject`]), on a channel in confirm mode. Success is the broker's
//! publisher confirm (`basic.ack`) for a message that some queue took.
//!
//! Every message is persistent (`delivery_mode = 2`) with `message_id` = the idempotency key
//! (the inbox id, or an operator's fresh key), `timestamp`, `app_id = "hookgate"`, `type` = the
//! event type, `content_type` (`application/json` for a JSON body, else
//! `application/octet-stream`) and the headers `X-Hookgate-Inbox-Id`, `X-Hookgate-Provider`,
//! `X-Hookgate-Endpoint`, `X-Hookgate-Event-Id`, `X-Hookgate-Event-Type`. The body is the
//! message's bytes as the relay hands them over. RabbitMQ does not deduplicate: a re-publish
//! (a crash between publish and mark, a confirm lost with its connection) arrives again with
//! the same `message_id`, and consumers dedupe on it.
//!
//! hookgate declares no exchange, queue or binding: on connecting it declares the exchange
//! *passively* (a check that it exists), so a missing exchange is a delivery error naming it
//! rather than a channel closed mid-publish. Messages are published `mandatory`: one that no
//! queue is bound to take comes back (`basic.return`) and is a transient error, not a
//! delivery, so nothing is marked `DELIVERED` that the broker dropped.
//!
//! One connection with one confirm channel per destination, shared by its concurrent
//! deliveries, opened at the first delivery (a broker that is down never stops the gateway
//! from starting). Any failure — the broker restarting, a connection or channel closed, a
//! timeout, a negative confirm — drops that connection: the delivery is a transient error and
//! the next attempt connects again.
//!
//! - `settings`: [`RabbitMqSettings`] and the checks config runs at load.

mod settings;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind};
use tokio::sync::Mutex;

pub use settings::{MAX_ROUTING_KEY_BYTES, RabbitMqSettings, check_exchange, check_url};

use crate::subject::SubjectValues;
use crate::{Delivered, DeliveryError, Destination, Message, header_safe};

/// An open connection and its confirm-mode channel.
struct Session {
    // Kept so the connection lives as long as its channel; dropping it closes the connection.
    connection: Connection,
    channel: Channel,
}

impl Session {
    fn usable(&self) -> bool {
        self.connection.status().connected() && self.channel.status().connected()
    }
}

/// A RabbitMQ destination.
pub struct RabbitMqDestination {
    settings: RabbitMqSettings,
    /// The shared session; locked while one is opened so concurrent deliveries wait for one
    /// connection instead of each opening their own.
    session: Mutex<Option<Arc<Session>>>,
}

impl RabbitMqDestination {
    /// Checks the settings; connects at the first delivery, never here.
    pub fn new(settings: RabbitMqSettings) -> Result<RabbitMqDestination, String> {
        check_url(&settings.url).map_err(|e| format!("url {e}"))?;
        check_exchange(&settings.exchange).map_err(|e| format!("exchange {e}"))?;
        Ok(RabbitMqDestination {
            settings,
            session: Mutex::new(None),
        })
    }

    /// The session to publish on: the open one, or a new one when there is none or it died.
    async fn session(&self) -> Result<Arc<Session>, DeliveryError> {
        let mut slot = self.session.lock().await;
        if let Some(s) = slot.as_ref().filter(|s| s.usable()) {
            return Ok(Arc::clone(s));
        }
        *slot = None;
        let session = Arc::new(self.open().await?);
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Drops `dead` if it is still the shared session (a newer one is left alone).
    async fn forget(&self, dead: &Arc<Session>) {
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, dead)) {
            *slot = None;
        }
    }

    async fn open(&self) -> Result<Session, DeliveryError> {
        let properties = ConnectionProperties::default()
            .with_connection_name(format!("hookgate-relay-{}", self.settings.id).into());
        let connection = Connection::connect(&self.settings.url, properties)
            .await
            .map_err(|e| DeliveryError::transient(format!("amqp connect: {}", describe(&e))))?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| DeliveryError::transient(format!("amqp channel: {}", describe(&e))))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| {
                DeliveryError::transient(format!("amqp confirm.select: {}", describe(&e)))
            })?;
        let exchange = &self.settings.exchange;
        let passive = ExchangeDeclareOptions {
            passive: true,
            ..ExchangeDeclareOptions::default()
        };
        // Passive: the broker only says whether it exists (the kind given is not compared).
        if let Err(e) = channel
            .exchange_declare(
                exchange.as_str().into(),
                lapin::ExchangeKind::Topic,
                passive,
                FieldTable::default(),
            )
            .await
        {
            return Err(DeliveryError::transient(if is_not_found(&e) {
                format!(
                    "exchange {exchange:?} does not exist on the broker (hookgate declares none: create it and bind a queue)"
                )
            } else {
                format!("exchange {exchange:?}: {}", describe(&e))
            }));
        }
        Ok(Session {
            connection,
            channel,
        })
    }

    /// The routing key of `m`: the template rendered, at most 255 bytes.
    pub fn routing_key(&self, m: &Message<'_>) -> Result<ShortString, DeliveryError> {
        let key = self.settings.routing_key.render(&SubjectValues {
            provider: m.provider,
            endpoint: m.endpoint_id,
            event_type: m.event_type,
            destination: &self.settings.id,
        });
        let len = key.len();
        ShortString::try_new(key).map_err(|_| {
            DeliveryError::Permanent(format!(
                "routing key of {len} bytes: AMQP allows at most {MAX_ROUTING_KEY_BYTES}"
            ))
        })
    }

    async fn publish(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        let routing_key = self.routing_key(m)?;
        let properties = properties(m)?;
        let session = self.session().await?;
        let exchange = &self.settings.exchange;
        let result = async {
            let confirm = session
                .channel
                .basic_publish(
                    exchange.as_str().into(),
                    routing_key.clone(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    m.body,
                    properties,
                )
                .await
                .map_err(|e| publish_error(exchange, &e))?
                .await
                .map_err(|e| publish_error(exchange, &e))?;
            match confirm {
                Confirmation::Ack(None) => Ok(Delivered::default()),
                Confirmation::Ack(Some(_)) | Confirmation::Nack(Some(_)) => {
                    Err(DeliveryError::transient(format!(
                        "unroutable: no queue is bound to exchange {exchange:?} for routing key {:?} (returned by the broker)",
                        routing_key.as_str()
                    )))
                }
                Confirmation::Nack(None) => Err(DeliveryError::transient(format!(
                    "the broker refused the message on exchange {exchange:?} (basic.nack)"
                ))),
                Confirmation::NotRequested => Err(DeliveryError::transient(
                    "the channel is not in confirm mode",
                )),
            }
        }
        .await;
        if result.is_err() {
            self.forget(&session).await;
        }
        result
    }
}

/// The message's properties (see the module docs). A `message_id` longer than an AMQP short
/// string cannot be sent (idempotency keys are inbox ids or short fresh keys).
pub fn properties(m: &Message<'_>) -> Result<BasicProperties, DeliveryError> {
    let message_id = ShortString::try_new(header_safe(m.idempotency_key)).map_err(|_| {
        DeliveryError::Permanent("the idempotency key is too long for message_id".into())
    })?;
    let mut headers = FieldTable::default();
    for (name, value) in [
        ("X-Hookgate-Inbox-Id", m.inbox_id),
        ("X-Hookgate-Provider", m.provider),
        ("X-Hookgate-Endpoint", m.endpoint_id),
        ("X-Hookgate-Event-Id", m.provider_event_id),
        ("X-Hookgate-Event-Type", m.event_type.unwrap_or("")),
    ] {
        headers.insert(
            name.into(),
            AMQPValue::LongString(LongString::from(header_safe(value))),
        );
    }
    let mut p = BasicProperties::default()
        .with_message_id(message_id)
        .with_delivery_mode(2)
        .with_content_type(m.content_type().to_owned().into())
        .with_app_id("hookgate".into())
        .with_timestamp(u64::try_from(m.timestamp).unwrap_or(0))
        .with_headers(headers);
    // `header_safe` keeps at most 256 characters; a type that still does not fit is left out.
    if let Some(kind) = m
        .event_type
        .and_then(|t| ShortString::try_new(header_safe(t)).ok())
    {
        p = p.with_type(kind);
    }
    Ok(p)
}

/// The broker said the exchange (or what was named) does not exist.
fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), ErrorKind::ProtocolError(p)
        if *p.kind() == AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND))
}

fn publish_error(exchange: &str, e: &lapin::Error) -> DeliveryError {
    if is_not_found(e) {
        return DeliveryError::transient(format!(
            "exchange {exchange:?} does not exist on the broker (hookgate declares none: create it and bind a queue)"
        ));
    }
    DeliveryError::transient(format!("amqp publish: {}", describe(e)))
}

/// lapin's error text: kinds, broker reply texts and socket errors, never the URL.
fn describe(e: &lapin::Error) -> String {
    let text = e.to_string();
    // Bounded: the relay stores it as `last_error`.
    text.chars().take(300).collect()
}

#[async_trait::async_trait]
impl Destination for RabbitMqDestination {
    fn id(&self) -> &str {
        &self.settings.id
    }

    async fn deliver(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        match tokio::time::timeout(self.settings.timeout, self.publish(m)).await {
            Ok(result) => result,
            Err(_) => {
                // Whatever stalled (a connection half-open after a broker restart, a blocked
                // connection), the next attempt starts on a fresh one.
                // A delivery still opening a session holds the lock: that one is fresh anyway.
                if let Ok(mut slot) = self.session.try_lock() {
                    *slot = None;
                }
                Err(DeliveryError::transient(format!(
                    "amqp publish timed out after {} ms",
                    self.settings.timeout.as_millis()
                )))
            }
        }
    }
}
