//! `[reconcile]`: the internal reconciliation job (the `reconcile` stage and `hookgate
//! reconcile`): raw keys, resolution with errors naming the key, and `config check`'s lines.

use std::fmt::Write;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, err};

pub const DEFAULT_RECONCILE_INTERVAL_SECONDS: u64 = 300;
pub const DEFAULT_RECONCILE_LOOKBACK_HOURS: u64 = 24;
pub const DEFAULT_RECONCILE_BATCH: u32 = 500;
pub const DEFAULT_FINDINGS_RETENTION_DAYS: u64 = 30;

/// `[reconcile]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReconcile {
    pub enabled: Option<bool>,
    pub interval_seconds: Option<u64>,
    pub grace_seconds: Option<u64>,
    pub lookback_hours: Option<u64>,
    pub batch_size: Option<u32>,
    pub findings_retention_days: Option<u64>,
}

/// `[reconcile]` resolved.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// Whether the `reconcile` stage runs on its own schedule (runs by hand and through the
    /// operator API work either way).
    pub enabled: bool,
    /// Time between two scheduled runs.
    pub interval: Duration,
    /// How far past its due time (or past its lease's end) a row must be to be a finding, so
    /// a busy worker pool or relay is not one. Default: `[worker] lease_seconds`.
    pub grace: Duration,
    /// Without `--since`, `missing_outbox` looks at events received this long ago or later.
    pub lookback: Duration,
    /// Rows one scan reads (and findings one transaction records).
    pub batch_size: u32,
    /// Findings older than this are removed.
    pub findings_retention: Duration,
}

pub(super) fn resolve_reconcile(
    raw: Option<RawReconcile>,
    worker_lease: Duration,
) -> Result<ReconcileConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let interval = raw
        .interval_seconds
        .unwrap_or(DEFAULT_RECONCILE_INTERVAL_SECONDS);
    if !(1..=86_400).contains(&interval) {
        return Err(err("reconcile.interval_seconds", "must be 1 to 86400"));
    }
    let grace = raw.grace_seconds.unwrap_or(worker_lease.as_secs());
    if !(1..=86_400).contains(&grace) {
        return Err(err("reconcile.grace_seconds", "must be 1 to 86400"));
    }
    let lookback = raw
        .lookback_hours
        .unwrap_or(DEFAULT_RECONCILE_LOOKBACK_HOURS);
    if !(1..=24 * 365).contains(&lookback) {
        return Err(err("reconcile.lookback_hours", "must be 1 to 8760"));
    }
    let batch = raw.batch_size.unwrap_or(DEFAULT_RECONCILE_BATCH);
    if !(1..=5_000).contains(&batch) {
        return Err(err("reconcile.batch_size", "must be 1 to 5000"));
    }
    let keep = raw
        .findings_retention_days
        .unwrap_or(DEFAULT_FINDINGS_RETENTION_DAYS);
    if !(1..=3_650).contains(&keep) {
        return Err(err(
            "reconcile.findings_retention_days",
            "must be 1 to 3650",
        ));
    }
    Ok(ReconcileConfig {
        enabled: raw.enabled.unwrap_or(true),
        interval: Duration::from_secs(interval),
        grace: Duration::from_secs(grace),
        lookback: Duration::from_secs(lookback * 3600),
        batch_size: batch,
        findings_retention: Duration::from_secs(keep * 86_400),
    })
}

pub(super) fn render(c: &super::Config, out: &mut String) {
    let r = &c.reconcile;
    let _ = writeln!(
        out,
        "\n[reconcile]\nenabled = {}\ninterval_seconds = {}\ngrace_seconds = {}\n\
         lookback_hours = {}\nbatch_size = {}\nfindings_retention_days = {}",
        r.enabled,
        r.interval.as_secs(),
        r.grace.as_secs(),
        r.lookback.as_secs() / 3600,
        r.batch_size,
        r.findings_retention.as_secs() / 86_400
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_worker_lease_and_refusals_name_the_key() {
        let r = resolve_reconcile(None, Duration::from_secs(45)).unwrap();
        assert!(r.enabled);
        assert_eq!(r.interval, Duration::from_secs(300));
        assert_eq!(r.grace, Duration::from_secs(45), "the lease length");
        assert_eq!(r.lookback, Duration::from_secs(24 * 3600));
        for (raw, key) in [
            (
                RawReconcile {
                    interval_seconds: Some(0),
                    ..Default::default()
                },
                "reconcile.interval_seconds",
            ),
            (
                RawReconcile {
                    batch_size: Some(0),
                    ..Default::default()
                },
                "reconcile.batch_size",
            ),
            (
                RawReconcile {
                    grace_seconds: Some(0),
                    ..Default::default()
                },
                "reconcile.grace_seconds",
            ),
        ] {
            let e = resolve_reconcile(Some(raw), Duration::from_secs(30)).unwrap_err();
            assert_eq!(e.key, key);
        }
    }
}
