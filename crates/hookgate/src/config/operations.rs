//! `[jobs]` (the bulk jobs stage) and `[rejections]` (the rejection log): raw keys,
//! resolution with errors naming the key, and `config check`'s lines.

use std::fmt::Write;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, err};

/// Events per second a bulk job handles by default (issue 17), so that a bulk replay cannot
/// starve live processing.
pub const DEFAULT_JOB_RATE: u32 = 50;
pub const DEFAULT_JOB_BATCH: u32 = 50;
pub const DEFAULT_JOB_LEASE_SECONDS: u64 = 30;
pub const DEFAULT_JOB_POLL_MS: u64 = 1_000;
pub const DEFAULT_REJECTION_RETENTION_HOURS: u32 = 72;
pub const DEFAULT_REJECTION_MAX_ENTRIES: u64 = 100_000;

/// `[jobs]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawJobs {
    pub rate_per_second: Option<u32>,
    pub batch_size: Option<u32>,
    pub lease_seconds: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// `[jobs]` resolved.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// Most events per second one runner applies a job's action to.
    pub rate_per_second: u32,
    /// Events per batch (one transaction with the job's progress); at most the rate.
    pub batch_size: u32,
    /// A runner's lease on its job, renewed by every batch; a runner that dies is taken over
    /// after it.
    pub lease: Duration,
    /// How often an idle runner looks for a runnable job.
    pub poll_interval: Duration,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            rate_per_second: DEFAULT_JOB_RATE,
            batch_size: DEFAULT_JOB_BATCH,
            lease: Duration::from_secs(DEFAULT_JOB_LEASE_SECONDS),
            poll_interval: Duration::from_millis(DEFAULT_JOB_POLL_MS),
        }
    }
}

/// `[rejections]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRejections {
    pub enabled: Option<bool>,
    pub retention_hours: Option<u32>,
    pub max_entries: Option<u64>,
}

/// `[rejections]` resolved.
#[derive(Debug, Clone)]
pub struct RejectionsConfig {
    /// Whether rejected webhook requests are logged (sampled) at all.
    pub enabled: bool,
    /// Entries and counts older than this are removed.
    pub retention: Duration,
    /// The log keeps at most this many entries (the newest).
    pub max_entries: u64,
}

impl Default for RejectionsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention: Duration::from_secs(u64::from(DEFAULT_REJECTION_RETENTION_HOURS) * 3600),
            max_entries: DEFAULT_REJECTION_MAX_ENTRIES,
        }
    }
}

pub(super) fn resolve_jobs(raw: Option<RawJobs>) -> Result<JobsConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let rate = raw.rate_per_second.unwrap_or(DEFAULT_JOB_RATE);
    if !(1..=100_000).contains(&rate) {
        return Err(err("jobs.rate_per_second", "must be 1 to 100000"));
    }
    let batch = raw.batch_size.unwrap_or(DEFAULT_JOB_BATCH.min(rate));
    if batch == 0 || batch as usize > hookgate_store::jobs::MAX_JOB_BATCH {
        return Err(err(
            "jobs.batch_size",
            format!("must be 1 to {}", hookgate_store::jobs::MAX_JOB_BATCH),
        ));
    }
    if batch > rate {
        return Err(err(
            "jobs.batch_size",
            "must not exceed jobs.rate_per_second (a batch is at most one second of work)",
        ));
    }
    let lease = raw.lease_seconds.unwrap_or(DEFAULT_JOB_LEASE_SECONDS);
    if !(5..=3600).contains(&lease) {
        return Err(err("jobs.lease_seconds", "must be 5 to 3600"));
    }
    let poll = raw.poll_interval_ms.unwrap_or(DEFAULT_JOB_POLL_MS);
    if !(10..=60_000).contains(&poll) {
        return Err(err("jobs.poll_interval_ms", "must be 10 to 60000"));
    }
    Ok(JobsConfig {
        rate_per_second: rate,
        batch_size: batch,
        lease: Duration::from_secs(lease),
        poll_interval: Duration::from_millis(poll),
    })
}

pub(super) fn resolve_rejections(
    raw: Option<RawRejections>,
) -> Result<RejectionsConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let hours = raw
        .retention_hours
        .unwrap_or(DEFAULT_REJECTION_RETENTION_HOURS);
    if !(1..=8760).contains(&hours) {
        return Err(err("rejections.retention_hours", "must be 1 to 8760"));
    }
    let max = raw.max_entries.unwrap_or(DEFAULT_REJECTION_MAX_ENTRIES);
    if !(100..=100_000_000).contains(&max) {
        return Err(err("rejections.max_entries", "must be 100 to 100000000"));
    }
    Ok(RejectionsConfig {
        enabled: raw.enabled.unwrap_or(true),
        retention: Duration::from_secs(u64::from(hours) * 3600),
        max_entries: max,
    })
}

pub(super) fn render(c: &super::Config, out: &mut String) {
    let j = &c.jobs;
    let _ = writeln!(
        out,
        "\n[jobs]\nrate_per_second = {}\nbatch_size = {}\nlease_seconds = {}\npoll_interval_ms = {}",
        j.rate_per_second,
        j.batch_size,
        j.lease.as_secs(),
        j.poll_interval.as_millis()
    );
    let r = &c.rejections;
    let _ = writeln!(
        out,
        "\n[rejections]\nenabled = {}\nretention_hours = {}\nmax_entries = {}",
        r.enabled,
        r.retention.as_secs() / 3600,
        r.max_entries
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals_name_the_key() {
        let j = resolve_jobs(None).unwrap();
        assert_eq!((j.rate_per_second, j.batch_size), (50, 50));
        let slow = resolve_jobs(Some(RawJobs {
            rate_per_second: Some(5),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(slow.batch_size, 5, "the default batch follows a lower rate");
        for (raw, key) in [
            (
                RawJobs {
                    rate_per_second: Some(0),
                    ..Default::default()
                },
                "jobs.rate_per_second",
            ),
            (
                RawJobs {
                    rate_per_second: Some(10),
                    batch_size: Some(20),
                    ..Default::default()
                },
                "jobs.batch_size",
            ),
            (
                RawJobs {
                    lease_seconds: Some(1),
                    ..Default::default()
                },
                "jobs.lease_seconds",
            ),
        ] {
            assert_eq!(resolve_jobs(Some(raw)).unwrap_err().key, key);
        }
        let r = resolve_rejections(None).unwrap();
        assert!(r.enabled);
        assert_eq!(r.max_entries, 100_000);
        let bad = resolve_rejections(Some(RawRejections {
            max_entries: Some(1),
            ..Default::default()
        }));
        assert_eq!(bad.unwrap_err().key, "rejections.max_entries");
    }
}
