//! `[retention]` and each endpoint's `idempotency_days`: raw keys, resolution (defaults from
//! the provider's pack; an id record never shorter-lived than its payload), and the
//! `config check` lines with the effective windows.
//!
//! Two windows per row: the sealed payload is kept `payload_days` (global); the id record (the
//! inbox row without payload, with its markers, deliveries and object state) is kept its
//! endpoint's idempotency window — `endpoints[].idempotency_days`, else `[retention]
//! idempotency_days`, else the larger of 30 days and the pack's redelivery horizon, and 90 days
//! for packs that sign no timestamp (the id record is their only replay defence). Never shorter
//! than `payload_days`: an explicit shorter value is refused naming its key, a default is raised.

use std::fmt::Write;
use std::time::Duration;

use hookgate_providers::pack::Pack;
use serde::Deserialize;

use super::{ConfigError, err};

pub const DEFAULT_PAYLOAD_DAYS: u32 = 30;
pub const DEFAULT_INTERVAL_SECONDS: u64 = 300;
pub const DEFAULT_BATCH_SIZE: u32 = 256;
/// The floor of the default idempotency window.
pub const MIN_DEFAULT_IDEMPOTENCY_DAYS: u32 = 30;
/// The default idempotency window of packs that sign no timestamp.
pub const UNSIGNED_TIMESTAMP_IDEMPOTENCY_DAYS: u32 = 90;
/// Longest window a key accepts (100 years: beyond it is a typo, not a policy).
const MAX_DAYS: u32 = 36_500;
const MAX_BATCH_SIZE: u32 = 10_000;
const DAY_MS: i64 = 86_400_000;

/// `[retention]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRetention {
    pub payload_days: Option<u32>,
    pub idempotency_days: Option<u32>,
    pub interval_seconds: Option<u64>,
    pub batch_size: Option<u32>,
}

/// `[retention]` resolved.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    /// Days a sealed payload is kept after receipt.
    pub payload_days: u32,
    /// `[retention] idempotency_days`, when set (endpoints without their own use it).
    pub idempotency_days: Option<u32>,
    /// Time between purge passes; the first runs within a minute of start-up.
    pub interval: Duration,
    /// Rows per purge batch (each batch one short transaction).
    pub batch_size: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            payload_days: DEFAULT_PAYLOAD_DAYS,
            idempotency_days: None,
            interval: Duration::from_secs(DEFAULT_INTERVAL_SECONDS),
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }
}

impl RetentionConfig {
    pub fn payload_window_ms(&self) -> i64 {
        i64::from(self.payload_days) * DAY_MS
    }

    /// The window for rows of endpoints not (or no longer) configured: no configured
    /// endpoint keeps rows longer, so a row past it is expired whoever received it.
    pub fn unconfigured_window_ms(&self, endpoints: &[super::EndpointConfig]) -> i64 {
        let days = endpoints
            .iter()
            .map(|e| e.idempotency.days)
            .chain(self.idempotency_days)
            .chain([UNSIGNED_TIMESTAMP_IDEMPOTENCY_DAYS, self.payload_days])
            .max()
            .unwrap_or(UNSIGNED_TIMESTAMP_IDEMPOTENCY_DAYS);
        i64::from(days) * DAY_MS
    }
}

/// Where an endpoint's idempotency window came from (printed by `config check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    Endpoint,
    Retention,
    /// The pack's redelivery horizon (or the 30-day floor when that is shorter or unknown).
    ProviderHorizon,
    /// The pack signs no timestamp: 90 days.
    UnsignedTimestamp,
    /// A default raised to `payload_days`.
    PayloadDays,
}

impl WindowSource {
    fn describe(self) -> &'static str {
        match self {
            WindowSource::Endpoint => "endpoints[].idempotency_days",
            WindowSource::Retention => "[retention] idempotency_days",
            WindowSource::ProviderHorizon => {
                "default: the larger of 30 days and the provider's redelivery horizon"
            }
            WindowSource::UnsignedTimestamp => {
                "default for providers that sign no timestamp (the id record is the only replay defence)"
            }
            WindowSource::PayloadDays => "default raised to payload_days",
        }
    }
}

/// An endpoint's effective idempotency window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyWindow {
    pub days: u32,
    pub source: WindowSource,
}

impl IdempotencyWindow {
    /// Before `[retention]` is applied (`resolve` sets every endpoint's window right after);
    /// the longest default, should it ever be read.
    pub(super) const UNRESOLVED: IdempotencyWindow = IdempotencyWindow {
        days: UNSIGNED_TIMESTAMP_IDEMPOTENCY_DAYS,
        source: WindowSource::UnsignedTimestamp,
    };

    pub fn window_ms(&self) -> i64 {
        i64::from(self.days) * DAY_MS
    }
}

pub(super) fn resolve_retention(raw: Option<RawRetention>) -> Result<RetentionConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let payload_days = days(raw.payload_days, "retention.payload_days")?;
    let payload_days = payload_days.unwrap_or(DEFAULT_PAYLOAD_DAYS);
    let idempotency_days = days(raw.idempotency_days, "retention.idempotency_days")?;
    if let Some(d) = idempotency_days
        && d < payload_days
    {
        return Err(shorter_than_payload(
            "retention.idempotency_days",
            d,
            payload_days,
        ));
    }
    let interval_seconds = raw.interval_seconds.unwrap_or(DEFAULT_INTERVAL_SECONDS);
    if interval_seconds == 0 || interval_seconds > 86_400 {
        return Err(err(
            "retention.interval_seconds",
            "must be between 1 and 86400",
        ));
    }
    let batch_size = raw.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
    if batch_size == 0 || batch_size > MAX_BATCH_SIZE {
        return Err(err(
            "retention.batch_size",
            format!("must be between 1 and {MAX_BATCH_SIZE}"),
        ));
    }
    Ok(RetentionConfig {
        payload_days,
        idempotency_days,
        interval: Duration::from_secs(interval_seconds),
        batch_size,
    })
}

/// An endpoint's window from its own key (at `key`), the global one, or its pack.
pub(super) fn resolve_window(
    own: Option<u32>,
    key: &str,
    pack: &Pack,
    retention: &RetentionConfig,
    warnings: &mut Vec<String>,
) -> Result<IdempotencyWindow, ConfigError> {
    let horizon_days = pack
        .redelivery_horizon_seconds()
        .map(|s| u32::try_from(s.div_ceil(86_400)).unwrap_or(u32::MAX));
    let explicit = match days(own, key)? {
        Some(d) => Some((d, WindowSource::Endpoint, key.to_owned())),
        None => retention.idempotency_days.map(|d| {
            (
                d,
                WindowSource::Retention,
                "retention.idempotency_days".to_owned(),
            )
        }),
    };
    if let Some((days, source, key)) = explicit {
        if days < retention.payload_days {
            return Err(shorter_than_payload(&key, days, retention.payload_days));
        }
        if let Some(h) = horizon_days.filter(|h| days < *h) {
            warnings.push(format!(
                "{key} = {days} is shorter than {}'s redelivery horizon ({h} days): a \
                 redelivery after the id record is gone would be accepted again",
                pack.id()
            ));
        }
        return Ok(IdempotencyWindow { days, source });
    }
    let (days, source) = if !pack.timestamp_signed() {
        (
            UNSIGNED_TIMESTAMP_IDEMPOTENCY_DAYS,
            WindowSource::UnsignedTimestamp,
        )
    } else {
        (
            horizon_days.unwrap_or(0).max(MIN_DEFAULT_IDEMPOTENCY_DAYS),
            WindowSource::ProviderHorizon,
        )
    };
    Ok(if days < retention.payload_days {
        IdempotencyWindow {
            days: retention.payload_days,
            source: WindowSource::PayloadDays,
        }
    } else {
        IdempotencyWindow { days, source }
    })
}

fn days(value: Option<u32>, key: &str) -> Result<Option<u32>, ConfigError> {
    match value {
        Some(0) => Err(err(key, "must be at least 1 (day)")),
        Some(d) if d > MAX_DAYS => Err(err(key, format!("must be at most {MAX_DAYS}"))),
        other => Ok(other),
    }
}

fn shorter_than_payload(key: &str, days: u32, payload_days: u32) -> ConfigError {
    err(
        key,
        format!(
            "{days} days is shorter than retention.payload_days ({payload_days}): the id \
             record must outlive the payload"
        ),
    )
}

/// The `[retention]` section of `config check`, with each endpoint's effective windows.
pub(super) fn render(c: &super::Config, out: &mut String) {
    let r = &c.retention;
    let _ = writeln!(
        out,
        "\n[retention]\npayload_days = {}\ninterval_seconds = {}\nbatch_size = {}",
        r.payload_days,
        r.interval.as_secs(),
        r.batch_size
    );
    match r.idempotency_days {
        Some(d) => {
            let _ = writeln!(out, "idempotency_days = {d}");
        }
        None => {
            let _ = writeln!(out, "# idempotency_days: per endpoint from its provider");
        }
    }
    for e in &c.endpoints {
        let _ = writeln!(
            out,
            "# endpoint {:?}: payload kept {} days, id record kept {} days ({})",
            e.id,
            r.payload_days,
            e.idempotency.days,
            e.idempotency.source.describe()
        );
    }
}
