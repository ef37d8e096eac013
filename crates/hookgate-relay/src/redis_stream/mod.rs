//! Redis Streams destinations (`kind = "redis_stream"`): each event is one entry appended with
//!
//! ```text
//! XADD <stream> MAXLEN ~ <max_len> * idempotency_key <key> X-Hookgate-Inbox-Id <id>
//!      X-Hookgate-Provider <p> X-Hookgate-Endpoint <e> X-Hookgate-Event-Id <id>
//!      X-Hookgate-Event-Type <t> content_type <type> body <bytes>
//! ```
//!
//! on a stream key rendered from a template (the NATS subject placeholders and sanitisation,
//! [`crate::subject`]). Success is Redis's reply with the new entry's id.
//!
//! `MAXLEN ~` (approximate) rather than `=`: Redis then trims only whole nodes of its radix
//! tree, which costs next to nothing per `XADD`, and the stream never holds *fewer* than
//! `max_len` entries — it may hold somewhat more until a node fills. An exact `=` trim would
//! be paid on every append for a bound nobody downstream needs exactly; what matters for a
//! consumer that falls behind is the lower bound: the newest `max_len` entries are always
//! there, older ones may be trimmed unread (size `max_len` to the longest outage a consumer
//! must survive).
//!
//! Redis has no idempotent append: a re-publish (a crash between `XADD` and marking the
//! delivery) adds a second entry with the same `idempotency_key`, and consumers dedupe on it.
//! Durability is Redis's own: the reply comes before any fsync (docs/destinations.md).
//!
//! The client is redis' connection manager, created without connecting (a Redis that is down
//! never stops the gateway from starting); it connects at the first `XADD` and reconnects
//! after a lost connection, each failure a transient error.
//!
//! - `settings`: [`RedisStreamSettings`] and the checks config runs at load.

mod settings;
#[cfg(test)]
mod tests;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::StreamMaxlen;

pub use settings::{MAX_MAX_LEN, RedisStreamSettings, check_max_len, check_url};

use crate::subject::SubjectValues;
use crate::{Delivered, DeliveryError, Destination, Message, header_safe};

/// Connection attempts of one reconnect before the manager gives up until the next command.
const RECONNECT_ATTEMPTS: usize = 3;

/// A Redis Streams destination.
pub struct RedisStreamDestination {
    settings: RedisStreamSettings,
    connection: ConnectionManager,
}

impl RedisStreamDestination {
    /// Checks the settings and sets up the client; connects at the first delivery, never here.
    /// Needs a tokio runtime.
    pub fn new(settings: RedisStreamSettings) -> Result<RedisStreamDestination, String> {
        check_url(&settings.url).map_err(|e| format!("url {e}"))?;
        check_max_len(settings.max_len).map_err(|e| format!("max_len {e}"))?;
        let client = redis::Client::open(settings.url.as_str())
            .map_err(|_| "url is not a valid Redis URL".to_owned())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(RECONNECT_ATTEMPTS)
            .set_max_delay(settings.timeout);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("redis client: {}", describe(&e)))?;
        Ok(RedisStreamDestination {
            settings,
            connection,
        })
    }

    /// The stream key of `m`.
    pub fn stream_key(&self, m: &Message<'_>) -> String {
        self.settings.stream.render(&SubjectValues {
            provider: m.provider,
            endpoint: m.endpoint_id,
            event_type: m.event_type,
            destination: &self.settings.id,
        })
    }

    /// The `XADD` of `m` (see the module docs).
    pub fn command(&self, m: &Message<'_>) -> redis::Cmd {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.stream_key(m))
            .arg(StreamMaxlen::Approx(
                usize::try_from(self.settings.max_len).unwrap_or(usize::MAX),
            ))
            .arg("*");
        for (field, value) in entry_metadata(m) {
            cmd.arg(field).arg(value);
        }
        cmd.arg("body").arg(m.body);
        cmd
    }

    async fn append(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        let cmd = self.command(m);
        // A clone shares the manager's one multiplexed connection.
        let mut connection = self.connection.clone();
        let _entry_id: String = cmd
            .query_async(&mut connection)
            .await
            .map_err(|e| classify(&e))?;
        Ok(Delivered::default())
    }
}

/// The entry's fields before `body`, in order.
pub fn entry_metadata(m: &Message<'_>) -> [(&'static str, String); 7] {
    [
        ("idempotency_key", header_safe(m.idempotency_key)),
        ("X-Hookgate-Inbox-Id", header_safe(m.inbox_id)),
        ("X-Hookgate-Provider", header_safe(m.provider)),
        ("X-Hookgate-Endpoint", header_safe(m.endpoint_id)),
        ("X-Hookgate-Event-Id", header_safe(m.provider_event_id)),
        (
            "X-Hookgate-Event-Type",
            header_safe(m.event_type.unwrap_or("")),
        ),
        ("content_type", m.content_type().to_owned()),
    ]
}

/// Every Redis failure is worth another attempt (a server down, restarting, loading, out of
/// memory, or a key of another type an operator can fix) except the ones that name a
/// command this server does not have (Redis < 5, or `XADD` renamed or disabled).
fn classify(e: &redis::RedisError) -> DeliveryError {
    let reason = format!("redis XADD: {}", describe(e));
    if e.code().is_some_and(|c| c == "ERR")
        && e.detail().is_some_and(|d| d.contains("unknown command"))
    {
        return DeliveryError::Permanent(reason);
    }
    DeliveryError::transient(reason)
}

/// The client's error text: kinds, codes and server messages, never the URL; bounded.
fn describe(e: &redis::RedisError) -> String {
    e.to_string().chars().take(300).collect()
}

#[async_trait::async_trait]
impl Destination for RedisStreamDestination {
    fn id(&self) -> &str {
        &self.settings.id
    }

    async fn deliver(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        match tokio::time::timeout(self.settings.timeout, self.append(m)).await {
            Ok(result) => result,
            Err(_) => Err(DeliveryError::transient(format!(
                "redis XADD timed out after {} ms",
                self.settings.timeout.as_millis()
            ))),
        }
    }
}
