//! `kind = "nats"`: a publish to a NATS JetStream stream.

use std::fmt::Write;
use std::time::Duration;

use hookgate_relay::nats::NatsSettings;
use hookgate_relay::subject::SubjectTemplate;
use serde::Deserialize;

use super::{DestinationKind, KindContext};
use crate::config::policies::{RawRate, RawRetry};
use crate::config::{ConfigError, err, redact_url};

/// Default duplicate window: 2 minutes beyond the default lease would do; a day costs little.
const DEFAULT_DUPLICATE_WINDOW_S: u64 = 24 * 3600;

/// `[[destinations]]` with `kind = "nats"`, as written. The keys every kind has come first
/// (repeated in each kind: `deny_unknown_fields` does not combine with `flatten`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNatsDestination {
    pub id: String,
    pub url: Option<String>,
    pub timeout_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    pub stream: Option<String>,
    pub subject: Option<String>,
    pub duplicate_window_seconds: Option<u64>,
}

impl RawNatsDestination {
    pub(super) fn resolve(self, cx: &KindContext<'_>) -> Result<DestinationKind, ConfigError> {
        if !(cx.url.starts_with("nats://") || cx.url.starts_with("tls://")) {
            return Err(err(cx.at("url"), "must start with nats:// or tls://"));
        }
        let stream = self
            .stream
            .ok_or_else(|| err(cx.at("stream"), "is required for kind = \"nats\""))?;
        if stream.is_empty()
            || stream.len() > 64
            || !stream
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return Err(err(
                cx.at("stream"),
                "must be 1-64 characters of A-Z a-z 0-9 - _",
            ));
        }
        let subject = SubjectTemplate::parse(
            self.subject
                .as_deref()
                .unwrap_or("webhooks.{provider}.{event_type}"),
        )
        .map_err(|e| err(cx.at("subject"), e))?;
        let window = Duration::from_secs(
            self.duplicate_window_seconds
                .unwrap_or(DEFAULT_DUPLICATE_WINDOW_S),
        );
        // A crashed relay's delivery returns after its lease; a restart takes a while more.
        let minimum = cx.relay.lease + Duration::from_secs(120);
        if window < minimum {
            return Err(err(
                cx.at("duplicate_window_seconds"),
                format!(
                    "must be at least relay.lease_seconds + 120 ({} s): longer than a lease plus a restart",
                    minimum.as_secs()
                ),
            ));
        }
        Ok(DestinationKind::Nats(NatsSettings {
            id: cx.id.to_owned(),
            url: cx.url.to_owned(),
            stream,
            subject,
            duplicate_window: window,
            timeout: cx.timeout,
        }))
    }
}

/// This kind's lines of `config check`: URL credentials redacted.
pub(super) fn render(n: &NatsSettings, out: &mut String) {
    let _ = writeln!(
        out,
        "kind = \"nats\"\nurl = \"{}\"\nstream = \"{}\"\n# subject filter: {}\nduplicate_window_seconds = {}",
        redact_url(&n.url),
        n.stream,
        n.subject.filter(),
        n.duplicate_window.as_secs()
    );
}
