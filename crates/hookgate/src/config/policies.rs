//! Rate limits and retry policies: the two value types endpoints and destinations share, as
//! written and resolved. A leaf module, so the raw and destination modules both use it without
//! importing each other.

use hookgate_core::retry::RetryPolicy;
use serde::Deserialize;

use super::{ConfigError, err};

/// `{ per_second, burst }` as written.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RawRate {
    pub per_second: u32,
    pub burst: Option<u32>,
}

/// `retry = { base_ms, cap_ms, max_attempts }` as written.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    pub base_ms: Option<u64>,
    pub cap_ms: Option<u64>,
    pub max_attempts: Option<u32>,
}

/// A rate: sustained per second, with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}

/// A rate at `key`; `burst` defaults to `per_second`.
pub(super) fn resolve_rate(raw: Option<RawRate>, key: &str) -> Result<Option<Rate>, ConfigError> {
    let Some(r) = raw else { return Ok(None) };
    if r.per_second == 0 {
        return Err(err(format!("{key}.per_second"), "must be at least 1"));
    }
    let burst = r.burst.unwrap_or(r.per_second);
    if burst == 0 {
        return Err(err(format!("{key}.burst"), "must be at least 1"));
    }
    Ok(Some(Rate {
        per_second: r.per_second,
        burst,
    }))
}

/// A retry policy at `at`; absent keys take [`RetryPolicy::default`]'s, and an absent
/// `cap_ms` is at least `base_ms`.
pub(super) fn resolve_retry(raw: Option<RawRetry>, at: &str) -> Result<RetryPolicy, ConfigError> {
    let defaults = RetryPolicy::default();
    let Some(r) = raw else { return Ok(defaults) };
    let policy = RetryPolicy {
        base_ms: r.base_ms.unwrap_or(defaults.base_ms),
        cap_ms: r
            .cap_ms
            .unwrap_or(defaults.cap_ms.max(r.base_ms.unwrap_or(0))),
        max_attempts: r.max_attempts.unwrap_or(defaults.max_attempts),
    };
    if policy.base_ms == 0 {
        return Err(err(format!("{at}.base_ms"), "must be greater than 0"));
    }
    if policy.cap_ms < policy.base_ms {
        return Err(err(format!("{at}.cap_ms"), "must be at least base_ms"));
    }
    if policy.max_attempts == 0 || policy.max_attempts > 1000 {
        return Err(err(
            format!("{at}.max_attempts"),
            "must be between 1 and 1000",
        ));
    }
    Ok(policy)
}
