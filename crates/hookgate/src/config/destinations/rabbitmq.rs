//! `kind = "rabbitmq"`: a confirmed, persistent publish to an existing RabbitMQ exchange.

use std::fmt::Write;

use hookgate_relay::rabbitmq::{RabbitMqSettings, check_exchange, check_url};
use hookgate_relay::subject::SubjectTemplate;
use serde::Deserialize;

use super::broker_url::{render_url_secret, resolve_url_secret};
use super::{DestinationKind, KindContext};
use crate::config::policies::{RawRate, RawRetry};
use crate::config::{ConfigError, err};
use crate::secrets::SecretSource;

/// `[[destinations]]` with `kind = "rabbitmq"`, as written. The keys every kind has come first
/// (repeated in each kind: `deny_unknown_fields` does not combine with `flatten`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRabbitMqDestination {
    pub id: String,
    /// A secret source (`env:`, `file:` or the `amqp://` URL itself): it holds the password.
    pub url: Option<String>,
    pub timeout_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    pub exchange: Option<String>,
    pub routing_key: Option<String>,
}

impl RawRabbitMqDestination {
    pub(super) fn resolve(
        self,
        cx: &KindContext<'_>,
        warnings: &mut Vec<String>,
    ) -> Result<DestinationKind, ConfigError> {
        let (url_source, url) = resolve_url_secret(cx, warnings)?;
        check_url(&url).map_err(|e| err(cx.at("url"), e))?;
        let exchange = self
            .exchange
            .ok_or_else(|| err(cx.at("exchange"), "is required for kind = \"rabbitmq\""))?;
        check_exchange(&exchange).map_err(|e| err(cx.at("exchange"), e))?;
        let routing_key = SubjectTemplate::parse(
            self.routing_key
                .as_deref()
                .unwrap_or("webhooks.{provider}.{event_type}"),
        )
        .map_err(|e| err(cx.at("routing_key"), e))?;
        Ok(DestinationKind::RabbitMq {
            settings: RabbitMqSettings {
                id: cx.id.to_owned(),
                url,
                exchange,
                routing_key,
                timeout: cx.timeout,
            },
            url_source,
        })
    }
}

/// This kind's lines of `config check`: the URL's password redacted.
pub(super) fn render(s: &RabbitMqSettings, url_source: &SecretSource, out: &mut String) {
    let _ = writeln!(
        out,
        "kind = \"rabbitmq\"\n{}\nexchange = \"{}\"\n# routing key pattern: {}",
        render_url_secret(&s.url, url_source),
        s.exchange,
        s.routing_key.filter()
    );
}
