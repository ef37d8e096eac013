//! What a `kind = "nats"` destination is configured with.

use std::time::Duration;

use crate::subject::SubjectTemplate;

/// A resolved NATS destination (`kind = "nats"`). `Debug` hides credentials in the URL.
#[derive(Clone)]
pub struct NatsSettings {
    pub id: String,
    /// `nats://host:port` (credentials in the URL are not logged).
    pub url: String,
    pub stream: String,
    pub subject: SubjectTemplate,
    /// The stream's duplicate window (set on the stream when this destination creates it).
    pub duplicate_window: Duration,
    /// Longest wait for a publish ack.
    pub timeout: Duration,
}

impl std::fmt::Debug for NatsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = match self.url.rsplit_once('@') {
            Some((_, host)) => format!("nats://<redacted>@{host}"),
            None => self.url.clone(),
        };
        f.debug_struct("NatsSettings")
            .field("id", &self.id)
            .field("url", &url)
            .field("stream", &self.stream)
            .field("subject", &self.subject.filter())
            .field("duplicate_window", &self.duplicate_window)
            .field("timeout", &self.timeout)
            .finish()
    }
}
