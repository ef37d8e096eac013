//! One attempt on a leased row, the parts every stage shares: opening its sealed payload, and
//! after a failure deciding the next attempt (full jitter, a `Retry-After` floor, giving up
//! after `max_attempts`) and settling the row with a bounded `last_error`.

use std::time::Duration;

use hookgate_core::RowIdentity;
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, RetryDecision, RetryPolicy, bounded};
use hookgate_core::seal::{Keyring, SealError};
use hookgate_store::{InboxRecord, ProcessingError};
use zeroize::Zeroizing;

use super::Settled;
use crate::telemetry;

/// Why a sealed payload could not be opened. Both are permanent: retrying changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("payload was purged (retention or events purge)")]
    Purged,
    #[error("cannot open the sealed payload: {0}")]
    Open(#[from] SealError),
}

/// Decrypts the row's sealed payload with `keyring`; the row identity is the associated data,
/// so a payload moved to another row does not open.
pub fn open_payload(
    keyring: &Keyring,
    record: &InboxRecord,
) -> Result<Zeroizing<Vec<u8>>, PayloadError> {
    let sealed = record.payload.as_deref().ok_or(PayloadError::Purged)?;
    let identity = RowIdentity {
        provider: &record.provider,
        endpoint_id: &record.endpoint_id,
        provider_event_id: &record.provider_event_id,
    };
    Ok(keyring.open(&identity, record.payload_key_version, sealed)?)
}

/// The 1-based number of the attempt that just ran, from a leased row's `attempt_count`.
pub fn attempt_number(attempt_count: i64) -> u32 {
    u32::try_from(attempt_count.max(1)).unwrap_or(u32::MAX)
}

/// A failed attempt as a stage reports it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What failed, with its class first (`transient: …`, `permanent: …`); no payload bytes.
    pub message: String,
    /// Worth another attempt later.
    pub transient: bool,
    /// The far side asked for at least this long before the next attempt.
    pub retry_after: Option<Duration>,
}

/// What becomes of a row after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextAttempt {
    /// Due again at this time; `None`: `FAILED`.
    pub retry_at_ms: Option<i64>,
    /// The message logged and (bounded) stored as `last_error`.
    pub message: String,
}

impl NextAttempt {
    /// The message as the store keeps it.
    pub fn last_error(&self) -> String {
        bounded(&self.message, MAX_LAST_ERROR_CHARS)
    }
}

/// Decides after failed attempt `attempt` (1-based): a transient failure waits a full-jitter
/// backoff under `policy` (at least its `retry_after`), unless attempts are exhausted; any
/// other failure, or no policy, is final. `random` is uniform over `u64`.
pub fn next_attempt(
    policy: Option<&RetryPolicy>,
    attempt: u32,
    failure: Failure,
    now_ms: i64,
    random: u64,
) -> NextAttempt {
    let decision = match policy {
        Some(policy) if failure.transient => policy.decide(attempt, random),
        _ => {
            return NextAttempt {
                retry_at_ms: None,
                message: failure.message,
            };
        }
    };
    match decision {
        RetryDecision::RetryAfterMs(ms) => {
            let floor = failure
                .retry_after
                .map_or(0, |r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX));
            let wait = i64::try_from(ms.max(floor)).unwrap_or(i64::MAX);
            NextAttempt {
                retry_at_ms: Some(now_ms.saturating_add(wait)),
                message: failure.message,
            }
        }
        RetryDecision::GiveUp => NextAttempt {
            retry_at_ms: None,
            message: format!("attempts exhausted ({attempt}); last: {}", failure.message),
        },
    }
}

/// A row leased more times than its policy allows attempts (`attempt_count > max_attempts`)
/// without completing — its handler or delivery kept killing the process, outliving the
/// lease, or the store kept refusing the result — ends `FAILED` instead of being leased
/// forever: the stage checks this right after the lease, before any work. The diagnostic
/// names the count and the previous (already redacted, bounded) `last_error` only.
pub fn abandoned(
    policy: &RetryPolicy,
    attempt_count: i64,
    last_error: Option<&str>,
) -> Option<NextAttempt> {
    if attempt_count <= i64::from(policy.max_attempts) {
        return None;
    }
    let mut message = format!(
        "abandoned after {attempt_count} leases without completing (max_attempts = {})",
        policy.max_attempts
    );
    if let Some(last) = last_error {
        message.push_str("; last: ");
        message.push_str(last);
    }
    Some(NextAttempt {
        retry_at_ms: None,
        message,
    })
}

/// The row an attempt was about, for logs and metrics (never payload bytes).
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub stage: &'static str,
    /// The row's endpoint (`hookgate_processing_retries_total{endpoint}`).
    pub endpoint: &'a str,
    pub inbox_id: &'a str,
    /// The destination, for deliveries.
    pub destination: Option<&'a str>,
    pub attempt: u32,
}

/// How recording a failed attempt ended (`recorded` is the store's answer), logged and counted.
pub fn settle_failure<T>(
    subject: &Subject<'_>,
    next: &NextAttempt,
    now_ms: i64,
    recorded: Result<(), ProcessingError>,
) -> Settled<T> {
    match recorded {
        Ok(()) => match next.retry_at_ms {
            Some(at_ms) => {
                telemetry::attempt_retrying(subject, at_ms - now_ms, &next.message);
                Settled::Retrying { at_ms }
            }
            None => {
                telemetry::attempt_failed(subject, &next.message);
                Settled::Failed
            }
        },
        Err(ProcessingError::LeaseLost) => Settled::LeaseLost,
        Err(ProcessingError::Store(e)) => {
            telemetry::attempt_not_recorded(subject, &e);
            Settled::StoreFailed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        base_ms: 100,
        cap_ms: 1_000,
        max_attempts: 3,
    };

    fn transient(retry_after: Option<Duration>) -> Failure {
        Failure {
            message: "transient: down".into(),
            transient: true,
            retry_after,
        }
    }

    #[test]
    fn transient_failures_back_off_with_a_retry_after_floor() {
        let next = next_attempt(Some(&POLICY), 1, transient(None), 1_000, 50);
        assert_eq!(next.retry_at_ms, Some(1_050));
        let floored = next_attempt(
            Some(&POLICY),
            1,
            transient(Some(Duration::from_secs(2))),
            1_000,
            50,
        );
        assert_eq!(floored.retry_at_ms, Some(3_000));
        assert_eq!(floored.message, "transient: down");
    }

    #[test]
    fn exhausted_permanent_or_unpoliced_failures_are_final() {
        let next = next_attempt(Some(&POLICY), 3, transient(None), 0, 1);
        assert_eq!(next.retry_at_ms, None);
        assert_eq!(
            next.message,
            "attempts exhausted (3); last: transient: down"
        );
        let permanent = Failure {
            message: "permanent: gone".into(),
            transient: false,
            retry_after: None,
        };
        let next = next_attempt(Some(&POLICY), 1, permanent, 0, 1);
        assert_eq!(next.retry_at_ms, None);
        assert_eq!(next.message, "permanent: gone");
        assert_eq!(
            next_attempt(None, 1, transient(None), 0, 1).retry_at_ms,
            None
        );
    }

    #[test]
    fn last_error_is_bounded() {
        let next = NextAttempt {
            retry_at_ms: None,
            message: "x".repeat(MAX_LAST_ERROR_CHARS * 2),
        };
        assert_eq!(next.last_error().chars().count(), MAX_LAST_ERROR_CHARS);
    }

    #[test]
    fn rows_leased_beyond_their_attempts_are_abandoned() {
        assert_eq!(abandoned(&POLICY, 3, None), None);
        let next = abandoned(&POLICY, 4, Some("transient: down")).unwrap();
        assert_eq!(next.retry_at_ms, None);
        assert_eq!(
            next.message,
            "abandoned after 4 leases without completing (max_attempts = 3); last: transient: down"
        );
    }

    #[test]
    fn attempt_numbers_start_at_one() {
        assert_eq!(attempt_number(0), 1);
        assert_eq!(attempt_number(4), 4);
        assert_eq!(attempt_number(i64::MAX), u32::MAX);
    }
}
