//! What a `kind = "rabbitmq"` destination is configured with, and the checks config runs on
//! it at load (so `config check` and SIGHUP refuse what a publish would).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::redact_password;
use crate::subject::SubjectTemplate;

/// The longest routing key AMQP 0-9-1 carries (a short string).
pub const MAX_ROUTING_KEY_BYTES: usize = 255;

/// A resolved RabbitMQ destination. `Debug` hides the URL's password.
#[derive(Clone)]
pub struct RabbitMqSettings {
    pub id: String,
    /// `amqp://` or `amqps://` with credentials and virtual host (a secret: never logged).
    pub url: String,
    /// The exchange every message is published to; hookgate never declares it.
    pub exchange: String,
    pub routing_key: SubjectTemplate,
    /// Longest wait for one publish: connecting (when needed) and the broker's confirm.
    pub timeout: Duration,
}

impl fmt::Debug for RabbitMqSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqSettings")
            .field("id", &self.id)
            .field("url", &redact_password(&self.url))
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key.filter())
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `url` checked as lapin will read it: `amqp://` or `amqps://`, a well-formed URI. The
/// message never quotes the URL (it holds a password).
pub fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("amqp://") || url.starts_with("amqps://")) {
        return Err("must start with amqp:// or amqps://".into());
    }
    lapin::uri::AMQPUri::from_str(url)
        .map(|_| ())
        .map_err(|_| "is not a valid AMQP URI (amqp://user:password@host:port/vhost, the virtual host percent-encoded: %2f for /)".into())
}

/// `exchange` checked: 1-255 characters of `A-Z a-z 0-9 - _ . :` (AMQP 0-9-1's exchange
/// names). The default exchange (`""`) is refused: it cannot be declared passively and routes
/// by queue name only.
pub fn check_exchange(exchange: &str) -> Result<(), String> {
    if exchange.is_empty() || exchange.len() > 255 {
        return Err("must be 1-255 characters (the default exchange \"\" is not supported)".into());
    }
    if !exchange
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err("must be characters of A-Z a-z 0-9 - _ . : only".into());
    }
    Ok(())
}
