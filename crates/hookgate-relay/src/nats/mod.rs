//! NATS JetStream destinations: publish each event on a subject rendered from a template,
//! with `Nats-Msg-Id: <inbox_id>:<destination>` so JetStream drops a re-publish inside the
//! stream's duplicate window. Success is the JetStream publish ack (the message is stored).
//!
//! The stream is created if missing (subjects = the template with placeholders as `*`,
//! file storage) with its duplicate window set explicitly — it must be longer than a relay
//! lease plus a restart, or a crash between publish and mark could store a message twice. An
//! existing stream is used as it is; a shorter duplicate window there is logged as a warning.
//!
//! The client connects in the background and reconnects forever, so a NATS server that is down
//! at start or mid-run never fails the gateway: publishes time out (transient), deliveries
//! wait in the outbox with backoff, and go out when the server is back.
//!
//! - `settings`: [`NatsSettings`].

mod settings;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};

use async_nats::jetstream::{self, stream};

pub use settings::NatsSettings;

use crate::subject::SubjectValues;
use crate::{Delivered, DeliveryError, Destination, Message, header_safe};

/// A NATS JetStream destination.
pub struct NatsDestination {
    settings: NatsSettings,
    js: jetstream::Context,
    /// The stream exists (created or found); cleared after a failed publish so the next one
    /// checks again (the stream may have been deleted).
    stream_ready: AtomicBool,
}

impl NatsDestination {
    /// Starts the client (connecting in the background); never fails because the server is
    /// down. Fails only for an unusable URL.
    pub async fn connect(settings: NatsSettings) -> Result<NatsDestination, String> {
        let client = async_nats::ConnectOptions::new()
            .name(format!("hookgate-relay-{}", settings.id))
            .retry_on_initial_connect()
            .connection_timeout(settings.timeout)
            .max_reconnects(None)
            .connect(settings.url.as_str())
            .await
            .map_err(|e| format!("cannot use the NATS url: {e}"))?;
        let mut js = jetstream::new(client);
        js.set_timeout(settings.timeout);
        Ok(NatsDestination {
            settings,
            js,
            stream_ready: AtomicBool::new(false),
        })
    }

    async fn ensure_stream(&self) -> Result<(), DeliveryError> {
        if self.stream_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let config = stream::Config {
            name: self.settings.stream.clone(),
            subjects: vec![self.settings.subject.filter()],
            duplicate_window: self.settings.duplicate_window,
            storage: stream::StorageType::File,
            ..Default::default()
        };
        let mut stream = self
            .js
            .get_or_create_stream(config)
            .await
            .map_err(|e| DeliveryError::transient(format!("jetstream stream: {e}")))?;
        match stream.info().await {
            Ok(info) if info.config.duplicate_window < self.settings.duplicate_window => {
                tracing::warn!(
                    destination = %self.settings.id,
                    stream = %self.settings.stream,
                    existing_ms = info.config.duplicate_window.as_millis() as u64,
                    wanted_ms = self.settings.duplicate_window.as_millis() as u64,
                    "the existing stream's duplicate window is shorter than configured; re-deliveries after it are not deduplicated"
                );
            }
            _ => {}
        }
        self.stream_ready.store(true, Ordering::Release);
        Ok(())
    }

    async fn publish(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        self.ensure_stream().await?;
        let subject = self.settings.subject.render(&SubjectValues {
            provider: m.provider,
            endpoint: m.endpoint_id,
            event_type: m.event_type,
            destination: &self.settings.id,
        });
        let headers = headers(m, &self.settings.id);
        let ack = self
            .js
            .publish_with_headers(subject, headers, bytes::Bytes::copy_from_slice(m.body))
            .await
            .map_err(|e| DeliveryError::transient(format!("jetstream publish: {e}")))?
            .await
            .map_err(|e| DeliveryError::transient(format!("jetstream publish ack: {e}")))?;
        Ok(Delivered {
            duplicate: ack.duplicate,
            http_status: None,
        })
    }
}

/// The headers of `m` published to destination `id`: `Nats-Msg-Id` and the metadata.
pub fn headers(m: &Message<'_>, id: &str) -> async_nats::HeaderMap {
    let mut headers = async_nats::HeaderMap::new();
    let msg_id = format!("{}:{id}", m.idempotency_key);
    headers.insert("Nats-Msg-Id", header_safe(&msg_id).as_str());
    headers.insert("X-Hookgate-Inbox-Id", header_safe(m.inbox_id).as_str());
    headers.insert("X-Hookgate-Provider", header_safe(m.provider).as_str());
    headers.insert("X-Hookgate-Endpoint", header_safe(m.endpoint_id).as_str());
    headers.insert(
        "X-Hookgate-Event-Id",
        header_safe(m.provider_event_id).as_str(),
    );
    headers.insert(
        "X-Hookgate-Event-Type",
        header_safe(m.event_type.unwrap_or("")).as_str(),
    );
    headers.insert("Content-Type", m.content_type());
    headers
}

#[async_trait::async_trait]
impl Destination for NatsDestination {
    fn id(&self) -> &str {
        &self.settings.id
    }

    async fn deliver(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        // Bounded even while the client is disconnected and buffering.
        let result = match tokio::time::timeout(self.settings.timeout, self.publish(m)).await {
            Ok(result) => result,
            Err(_) => Err(DeliveryError::transient(format!(
                "jetstream publish timed out after {} ms",
                self.settings.timeout.as_millis()
            ))),
        };
        if result.is_err() {
            self.stream_ready.store(false, Ordering::Release);
        }
        result
    }
}
