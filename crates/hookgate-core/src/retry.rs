//! Retry with exponential backoff and full jitter (processing and delivery), sans-I/O: the
//! caller passes the random number, so the schedule is a pure function and tests pin it.
//!
//! Attempt `n` (1-based: the attempt that just failed) waits a uniformly random time in
//! `[0, min(cap, base * 2^(n-1))]` ("full jitter"), so retries of many events that failed
//! together spread out instead of arriving in waves. After `max_attempts` failed attempts the
//! event is given up (`FAILED`, retryable by an operator).

/// Longest `last_error` the store keeps, in characters.
pub const MAX_LAST_ERROR_CHARS: usize = 500;

/// Per-endpoint retry settings (`retry = { base_ms, cap_ms, max_attempts }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Ceiling of the first wait.
    pub base_ms: u64,
    /// Ceiling of any wait.
    pub cap_ms: u64,
    /// Attempts in all, the first included; at least 1.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base_ms: 1_000,
            cap_ms: 5 * 60 * 1_000,
            max_attempts: 8,
        }
    }
}

/// What to do after a transient failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try again after this many milliseconds.
    RetryAfterMs(u64),
    /// Attempts are exhausted: give up (`FAILED`).
    GiveUp,
}

impl RetryPolicy {
    /// The ceiling of the wait after failed attempt `attempt` (1-based), before jitter.
    pub fn ceiling_ms(&self, attempt: u32) -> u64 {
        let exp = attempt.saturating_sub(1).min(63);
        self.base_ms
            .saturating_mul(1u64.checked_shl(exp).unwrap_or(u64::MAX))
            .min(self.cap_ms)
    }

    /// Decides after failed attempt `attempt` (1-based), with `random` uniform over `u64`.
    pub fn decide(&self, attempt: u32, random: u64) -> RetryDecision {
        if attempt >= self.max_attempts {
            return RetryDecision::GiveUp;
        }
        let ceiling = self.ceiling_ms(attempt);
        RetryDecision::RetryAfterMs(match ceiling.checked_add(1) {
            Some(span) => random % span,
            None => random,
        })
    }
}

/// `msg` cut to at most `max_chars` characters (on a character boundary), with a marker when
/// cut. Used for `last_error`, which must stay bounded.
pub fn bounded(msg: &str, max_chars: usize) -> String {
    match msg.char_indices().nth(max_chars) {
        None => msg.to_owned(),
        Some((cut, _)) => {
            let keep = msg[..cut]
                .char_indices()
                .nth(max_chars.saturating_sub(1))
                .map_or(cut, |(i, _)| i);
            let mut out = msg[..keep].to_owned();
            out.push('…');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: RetryPolicy = RetryPolicy {
        base_ms: 100,
        cap_ms: 1_000,
        max_attempts: 5,
    };

    #[test]
    fn ceiling_doubles_then_caps() {
        let c: Vec<u64> = (1..=6).map(|a| P.ceiling_ms(a)).collect();
        assert_eq!(c, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(P.ceiling_ms(200), 1_000, "no overflow on huge attempts");
    }

    #[test]
    fn full_jitter_spans_zero_to_ceiling() {
        assert_eq!(P.decide(1, 0), RetryDecision::RetryAfterMs(0));
        assert_eq!(P.decide(1, 100), RetryDecision::RetryAfterMs(100));
        assert_eq!(P.decide(1, 101), RetryDecision::RetryAfterMs(0));
        assert_eq!(
            P.decide(3, u64::MAX),
            RetryDecision::RetryAfterMs(u64::MAX % 401)
        );
        for r in [0, 7, 12_345, u64::MAX] {
            match P.decide(4, r) {
                RetryDecision::RetryAfterMs(ms) => assert!(ms <= 800),
                RetryDecision::GiveUp => panic!("attempt 4 of 5 retries"),
            }
        }
    }

    #[test]
    fn gives_up_after_max_attempts() {
        assert_eq!(P.decide(5, 1), RetryDecision::GiveUp);
        assert_eq!(P.decide(9, 1), RetryDecision::GiveUp);
        let once = RetryPolicy {
            max_attempts: 1,
            ..P
        };
        assert_eq!(once.decide(1, 1), RetryDecision::GiveUp);
    }

    #[test]
    fn bounded_cuts_on_char_boundaries() {
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("abcdef", 6), "abcdef");
        assert_eq!(bounded("abcdefg", 6), "abcde…");
        let s = "é".repeat(600);
        let b = bounded(&s, MAX_LAST_ERROR_CHARS);
        assert_eq!(b.chars().count(), MAX_LAST_ERROR_CHARS);
    }
}
