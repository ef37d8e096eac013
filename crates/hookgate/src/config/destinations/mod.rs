//! `[[destinations]]` and `[relay]`: where processed events are delivered, and the outbox relay
//! that delivers them. Each kind owns its keys as written, their validation and its lines of
//! `config check` (`http.rs`, `nats.rs`, `rabbitmq.rs`, `redis_stream.rs`); this module holds
//! what every kind shares, so adding a kind is a file here plus a variant of
//! [`RawDestinationKind`] and [`DestinationKind`] (behind the kind's cargo feature when it has
//! one). Every key is documented in `docs/configuration.md` ("Destinations"). `filter`
//! (`filter.rs`) and `transform` (a jq program, `hookgate_relay::transform`) are keys of every
//! kind, taken out of the table before the kind's struct reads it.

#[cfg(any(feature = "rabbitmq", feature = "redis-stream"))]
mod broker_url;
pub mod filter;
pub mod http;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis-stream")]
pub mod redis_stream;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookgate_core::retry::RetryPolicy;
use hookgate_relay::http::HttpSettings;
#[cfg(feature = "nats")]
use hookgate_relay::nats::NatsSettings;
#[cfg(feature = "rabbitmq")]
use hookgate_relay::rabbitmq::RabbitMqSettings;
#[cfg(feature = "redis-stream")]
use hookgate_relay::redis_stream::RedisStreamSettings;
use hookgate_relay::transform::Transform;
use serde::Deserialize;

use self::filter::DestinationFilter;
use super::policies::{Rate, RawRate, RawRetry, resolve_rate, resolve_retry};
use super::{ConfigError, err, valid_id};
use crate::secrets::SecretSource;

/// `[relay]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRelay {
    pub enabled: Option<bool>,
    pub lease_seconds: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// `[[destinations]]` as written: `kind` chooses the variant, and each kind's struct refuses
/// the keys of the other kinds.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RawDestinationKind {
    Http(http::RawHttpDestination),
    #[cfg(feature = "nats")]
    Nats(nats::RawNatsDestination),
    #[cfg(feature = "rabbitmq")]
    #[serde(rename = "rabbitmq")]
    RabbitMq(rabbitmq::RawRabbitMqDestination),
    #[cfg(feature = "redis-stream")]
    #[serde(rename = "redis_stream")]
    RedisStream(redis_stream::RawRedisStreamDestination),
}

/// The `kind` values of [`RawDestinationKind`], for the error on any other.
const KINDS: &[&str] = &[
    "http",
    #[cfg(feature = "nats")]
    "nats",
    #[cfg(feature = "rabbitmq")]
    "rabbitmq",
    #[cfg(feature = "redis-stream")]
    "redis_stream",
];

/// Kinds this build was compiled without, with the cargo feature that has them.
const KINDS_LEFT_OUT: &[(&str, &str)] = &[
    #[cfg(not(feature = "nats"))]
    ("nats", "nats"),
    #[cfg(not(feature = "rabbitmq"))]
    ("rabbitmq", "rabbitmq"),
    #[cfg(not(feature = "redis-stream"))]
    ("redis_stream", "redis-stream"),
];

/// One `[[destinations]]` table. Parsed through a table first so that an unknown `kind` says
/// so and lists the known ones (serde's own message would be about a "variant"), and so that
/// the keys every kind shares without a meaning for the kind (`filter`, `transform`) are taken out before
/// the kind's struct, which refuses unknown keys, sees the rest.
#[derive(Debug, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct RawDestination {
    pub kind: RawDestinationKind,
    /// `filter` as written, resolved with the destination's index (errors name its keys).
    pub filter: Option<toml::Value>,
    /// `transform` as written: a jq program.
    pub transform: Option<toml::Value>,
}

impl TryFrom<toml::Table> for RawDestination {
    type Error = String;

    fn try_from(mut table: toml::Table) -> Result<Self, String> {
        let filter = table.remove("filter");
        let transform = table.remove("transform");
        let kind = match table.get("kind") {
            Some(toml::Value::String(kind)) if !KINDS.contains(&kind.as_str()) => {
                if let Some((_, feature)) = KINDS_LEFT_OUT.iter().find(|(k, _)| k == kind) {
                    return Err(format!(
                        "kind {kind:?} is not in this build of hookgate (cargo feature `{feature}`)"
                    ));
                }
                return Err(format!(
                    "unknown kind {kind:?}; known: {}",
                    KINDS.join(", ")
                ));
            }
            Some(toml::Value::String(kind)) => Some(kind.clone()),
            _ => None,
        };
        RawDestinationKind::deserialize(toml::Value::Table(table))
            .map(|kind| RawDestination {
                kind,
                filter,
                transform,
            })
            .map_err(|e| match kind {
                // Says which kind's keys the message lists.
                Some(kind) => format!("kind = {kind:?}: {}", e.message()),
                None => e.message().to_owned(),
            })
    }
}

/// The keys every kind has, as written.
struct RawCommon {
    id: String,
    url: Option<String>,
    timeout_ms: Option<u64>,
    concurrency: Option<usize>,
    rate_limit: Option<RawRate>,
    retry: Option<RawRetry>,
}

impl RawDestinationKind {
    fn common(&self) -> RawCommon {
        macro_rules! common {
            ($d:expr) => {
                RawCommon {
                    id: $d.id.clone(),
                    url: $d.url.clone(),
                    timeout_ms: $d.timeout_ms,
                    concurrency: $d.concurrency,
                    rate_limit: $d.rate_limit,
                    retry: $d.retry,
                }
            };
        }
        match self {
            RawDestinationKind::Http(d) => common!(d),
            #[cfg(feature = "nats")]
            RawDestinationKind::Nats(d) => common!(d),
            #[cfg(feature = "rabbitmq")]
            RawDestinationKind::RabbitMq(d) => common!(d),
            #[cfg(feature = "redis-stream")]
            RawDestinationKind::RedisStream(d) => common!(d),
        }
    }
}

/// What a kind's validation needs from the keys every kind has, already validated.
pub(super) struct KindContext<'a> {
    index: usize,
    id: &'a str,
    url: &'a str,
    timeout: Duration,
    // Only NATS reads it (its duplicate window must outlast a lease).
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    relay: &'a RelayConfig,
    base: &'a Path,
}

impl KindContext<'_> {
    /// The full name of this destination's `key`, for errors.
    fn at(&self, key: &str) -> String {
        format!("destinations[{}].{key}", self.index)
    }
}

/// `[relay]`: the outbox relay beside the workers.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// `false`: this instance writes outbox rows but delivers nothing (another does).
    pub enabled: bool,
    /// How long a leased delivery is this relay's; longer than any destination timeout.
    pub lease: Duration,
    /// Sleep of an idle destination loop before it looks for due deliveries again.
    pub poll_interval: Duration,
}

/// What kind of destination, with its kind's settings.
#[derive(Debug, Clone)]
pub enum DestinationKind {
    Http {
        settings: HttpSettings,
        /// Where each signing secret came from (`config check`).
        secret_sources: Vec<SecretSource>,
    },
    #[cfg(feature = "nats")]
    Nats(NatsSettings),
    #[cfg(feature = "rabbitmq")]
    RabbitMq {
        settings: RabbitMqSettings,
        /// Where the URL came from (`config check`).
        url_source: SecretSource,
    },
    #[cfg(feature = "redis-stream")]
    RedisStream {
        settings: RedisStreamSettings,
        /// Where the URL came from (`config check`).
        url_source: SecretSource,
    },
}

impl DestinationKind {
    /// The `kind` as written in the config (`http`, `nats`, `rabbitmq`, `redis_stream`).
    pub fn name(&self) -> &'static str {
        match self {
            DestinationKind::Http { .. } => "http",
            #[cfg(feature = "nats")]
            DestinationKind::Nats(_) => "nats",
            #[cfg(feature = "rabbitmq")]
            DestinationKind::RabbitMq { .. } => "rabbitmq",
            #[cfg(feature = "redis-stream")]
            DestinationKind::RedisStream { .. } => "redis_stream",
        }
    }

    /// The kind's own lines of `config check`.
    pub(super) fn render(&self, out: &mut String) {
        match self {
            DestinationKind::Http {
                settings,
                secret_sources,
            } => http::render(settings, secret_sources, out),
            #[cfg(feature = "nats")]
            DestinationKind::Nats(settings) => nats::render(settings, out),
            #[cfg(feature = "rabbitmq")]
            DestinationKind::RabbitMq {
                settings,
                url_source,
            } => rabbitmq::render(settings, url_source, out),
            #[cfg(feature = "redis-stream")]
            DestinationKind::RedisStream {
                settings,
                url_source,
            } => redis_stream::render(settings, url_source, out),
        }
    }
}

/// One resolved `[[destinations]]` table.
#[derive(Debug, Clone)]
pub struct DestinationConfig {
    pub id: String,
    pub kind: DestinationKind,
    /// Deliveries in flight at once to this destination.
    pub concurrency: usize,
    /// Deliveries started per second (burst), if limited.
    pub rate_limit: Option<Rate>,
    /// Backoff of transient delivery failures; `max_attempts` then `FAILED`.
    pub retry: RetryPolicy,
    pub timeout: Duration,
    /// Which processed events get an outbox row for this destination; `None`: every event of
    /// the endpoints that list it.
    pub filter: Option<DestinationFilter>,
    /// What is sent instead of the stored body, compiled at load.
    pub transform: Option<Arc<Transform>>,
}

/// Time a delivery keeps after its timeout, before its lease ends, to record the result.
const RECORD_MARGIN: Duration = Duration::from_secs(1);

impl DestinationConfig {
    /// The most deliveries one relay lease of `lease` should take for this destination: each
    /// must get its rate-limiter slot early enough to run for its whole `timeout` and leave
    /// [`RECORD_MARGIN`] before the lease ends. `concurrency` without a `rate_limit`; with one,
    /// the slots granted in `lease - timeout - 1 s` at one slot every `1/per_second`, the
    /// burst not counted (earlier batches may have emptied the bucket). Never 0 for a loaded
    /// configuration: resolution rejects one that could not take a single row.
    pub fn max_rows_per_lease(&self, lease: Duration) -> u32 {
        let concurrency = u32::try_from(self.concurrency).unwrap_or(u32::MAX);
        let Some(rate) = self.rate_limit else {
            return concurrency;
        };
        let waiting = lease.saturating_sub(self.timeout.saturating_add(RECORD_MARGIN));
        let grants = waiting.as_millis() * u128::from(rate.per_second) / 1000;
        u32::try_from(grants).unwrap_or(u32::MAX).min(concurrency)
    }
}

const DEFAULT_TIMEOUT_MS: u64 = 10_000;

pub(super) fn resolve_relay(raw: Option<&RawRelay>) -> Result<RelayConfig, ConfigError> {
    let lease_seconds = raw.and_then(|r| r.lease_seconds).unwrap_or(60);
    if lease_seconds == 0 || lease_seconds > 24 * 3600 {
        return Err(err("relay.lease_seconds", "must be between 1 and 86400"));
    }
    let poll_ms = raw.and_then(|r| r.poll_interval_ms).unwrap_or(200);
    if poll_ms == 0 || poll_ms > 60_000 {
        return Err(err("relay.poll_interval_ms", "must be between 1 and 60000"));
    }
    Ok(RelayConfig {
        enabled: raw.and_then(|r| r.enabled).unwrap_or(true),
        lease: Duration::from_secs(lease_seconds),
        poll_interval: Duration::from_millis(poll_ms),
    })
}

pub(super) fn resolve_destinations(
    raw: Vec<RawDestination>,
    relay: &RelayConfig,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<DestinationConfig>, ConfigError> {
    let mut out: Vec<DestinationConfig> = Vec::with_capacity(raw.len());
    for (i, d) in raw.into_iter().enumerate() {
        let resolved = resolve_destination(d, i, relay, base, warnings)?;
        if out.iter().any(|o| o.id == resolved.id) {
            return Err(err(
                format!("destinations[{i}].id"),
                format!("duplicate destination id {:?}", resolved.id),
            ));
        }
        out.push(resolved);
    }
    Ok(out)
}

/// The keys every kind has, then the kind's own, then the rule that binds the rate limit to
/// the relay's lease.
fn resolve_destination(
    raw: RawDestination,
    i: usize,
    relay: &RelayConfig,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<DestinationConfig, ConfigError> {
    let at = |k: &str| format!("destinations[{i}].{k}");
    let RawDestination {
        kind: d,
        filter,
        transform,
    } = raw;
    let c = d.common();
    if !valid_id(&c.id) {
        return Err(err(
            at("id"),
            "must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ));
    }
    let timeout_ms = c.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > 300_000 {
        return Err(err(at("timeout_ms"), "must be between 1 and 300000"));
    }
    let timeout = Duration::from_millis(timeout_ms);
    if timeout + RECORD_MARGIN >= relay.lease {
        return Err(err(
            at("timeout_ms"),
            format!(
                "must be shorter than relay.lease_seconds ({} s) by at least a second, or a slow delivery would be taken over while still running",
                relay.lease.as_secs()
            ),
        ));
    }
    let concurrency = c.concurrency.unwrap_or(8);
    if concurrency == 0 || concurrency > 1024 {
        return Err(err(at("concurrency"), "must be between 1 and 1024"));
    }
    let rate_limit = resolve_rate(c.rate_limit, &at("rate_limit"))?;
    let retry = resolve_retry(c.retry, &at("retry"))?;
    let filter = filter
        .map(|f| filter::resolve(f, &format!("destinations[{i}]")))
        .transpose()?;
    let transform = transform
        .map(|t| resolve_transform(t, &c.id, &at("transform")))
        .transpose()?;
    let url = c
        .url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| err(at("url"), "is required"))?;
    let cx = KindContext {
        index: i,
        id: &c.id,
        url,
        timeout,
        relay,
        base,
    };
    let kind = match d {
        RawDestinationKind::Http(h) => h.resolve(&cx, warnings)?,
        #[cfg(feature = "nats")]
        RawDestinationKind::Nats(n) => n.resolve(&cx)?,
        #[cfg(feature = "rabbitmq")]
        RawDestinationKind::RabbitMq(r) => r.resolve(&cx, warnings)?,
        #[cfg(feature = "redis-stream")]
        RawDestinationKind::RedisStream(r) => r.resolve(&cx, warnings)?,
    };
    let config = DestinationConfig {
        id: c.id.clone(),
        kind,
        concurrency,
        rate_limit,
        retry,
        timeout,
        filter,
        transform,
    };
    let one_row_fits = config.max_rows_per_lease(relay.lease) > 0;
    if let (Some(rate), false) = (rate_limit, one_row_fits) {
        let waiting = relay.lease - timeout - RECORD_MARGIN;
        return Err(err(
            at("rate_limit.per_second"),
            format!(
                "destination {:?} could not deliver a single row per lease: at {} per second a delivery may wait {} ms for its slot, but relay.lease_seconds ({} s) leaves only {} ms after timeout_ms ({} ms) and a second to record the result; raise rate_limit.per_second or relay.lease_seconds, or lower timeout_ms",
                c.id,
                rate.per_second,
                1000 / u64::from(rate.per_second),
                relay.lease.as_secs(),
                waiting.as_millis(),
                timeout_ms,
            ),
        ));
    }
    Ok(config)
}

/// `transform`: a jq program, compiled now so a syntax error stops the start (naming the
/// destination's id).
fn resolve_transform(
    value: toml::Value,
    id: &str,
    key: &str,
) -> Result<Arc<Transform>, ConfigError> {
    let toml::Value::String(program) = value else {
        return Err(err(key, "must be a string: a jq program"));
    };
    if program.trim().is_empty() {
        return Err(err(
            key,
            "must not be empty (leave the key out to send the body as it is)",
        ));
    }
    Transform::compile(&program)
        .map(Arc::new)
        .map_err(|e| err(key, format!("destination {id:?}: {e}")))
}

/// `destinations = [...]` of one endpoint: known ids, no repeats.
pub(super) fn resolve_endpoint_destinations(
    ids: Option<Vec<String>>,
    endpoint_index: usize,
    known: &[DestinationConfig],
) -> Result<Vec<String>, ConfigError> {
    let mut out: Vec<String> = Vec::new();
    for (j, id) in ids.into_iter().flatten().enumerate() {
        let key = format!("endpoints[{endpoint_index}].destinations[{j}]");
        if !known.iter().any(|d| d.id == id) {
            let names: Vec<&str> = known.iter().map(|d| d.id.as_str()).collect();
            return Err(err(
                key,
                format!(
                    "unknown destination {id:?}; configured: [{}]",
                    names.join(", ")
                ),
            ));
        }
        if out.contains(&id) {
            return Err(err(key, format!("duplicate destination {id:?}")));
        }
        out.push(id);
    }
    Ok(out)
}
