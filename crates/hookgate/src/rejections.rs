//! The rejection log: rejected webhook requests, sampled, kept off the acceptance path.
//!
//! The ingress calls [`RejectionLog::record`] after it has answered a request it rejected
//! (404, 405, 401 `invalid_signature`, 400, 413, 429, …; not `overloaded` / `unavailable`,
//! which are the gateway's own state, not the request's). Recording is cheap and never waits:
//! a counter per endpoint, cause and minute under a short lock decides whether this one is
//! kept — every rejection up to 100 per endpoint and cause per minute, then 1 in 100 — and a
//! kept one is redacted (header names with redacted values; the body's size and keyed digest,
//! never the body) and handed to a bounded ring with `try_send`: a full ring drops it,
//! counted in `hookgate_rejections_dropped_total`. A flood of forged requests therefore costs
//! the ingress a counter and, at most, a bounded copy of header names.
//!
//! A background task ([`flusher`]) drains the ring about once a second into the
//! `rejections` table with the per-minute counts of every rejection (sampled or not), and
//! trims the table to `[rejections] retention_hours` and `max_entries` (at its first flush,
//! then every minute).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hookgate_store::{RejectionCount, RejectionEntry};
use http::HeaderMap;
use tokio::sync::{mpsc, watch};

use crate::ingress::response::Answer;
use crate::state::AppState;
use crate::telemetry;

/// Sampled entries the ring holds before new ones are dropped.
pub const RING_CAPACITY: usize = 4096;
/// Every rejection is kept up to this many per endpoint and cause per minute…
pub const KEEP_ALL_PER_MINUTE: u64 = 100;
/// …then one in this many.
pub const KEEP_ONE_IN: u64 = 100;
/// Headers recorded per entry (names and redacted values).
const MAX_HEADERS: usize = 64;
/// Longest header name recorded.
const MAX_NAME: usize = 64;
/// Headers whose values are shown (truncated); every other value is redacted.
const SHOWN: [&str; 4] = [
    "content-type",
    "content-length",
    "content-encoding",
    "user-agent",
];
/// Longest shown value.
const MAX_SHOWN_VALUE: usize = 128;
/// How often the flusher writes what is queued.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Most entries one flush writes (one transaction).
const FLUSH_BATCH: usize = 1000;
/// How often the table is trimmed.
const TRIM_INTERVAL: Duration = Duration::from_secs(60);
const TRIM_BATCH: u32 = 1000;
const MINUTE_MS: i64 = 60_000;

/// The cause (and a `bad_request`'s reason) of a rejected answer; `None` for an answer that
/// is not a rejection of the request.
pub fn cause_of(answer: &Answer) -> Option<(&'static str, Option<&'static str>)> {
    Some(match answer {
        Answer::UnknownEndpoint
        | Answer::MethodNotAllowed
        | Answer::HttpsRequired
        | Answer::RateLimited { .. }
        | Answer::UnsupportedMediaType
        | Answer::PayloadTooLarge
        | Answer::RequestTimeout
        | Answer::InvalidSignature
        | Answer::StaleTimestamp => (answer.outcome(), None),
        Answer::BadRequest(reason) => ("bad_request", Some(*reason)),
        _ => return None,
    })
}

/// One rejected request, as the ingress sees it after answering.
pub struct Rejected<'a> {
    pub at_ms: i64,
    pub endpoint: &'a str,
    pub cause: &'static str,
    pub reason: Option<&'static str>,
    pub headers: &'a HeaderMap,
    /// The body bytes, when they were read.
    pub body: Option<&'a [u8]>,
    /// The keyed digest of body bytes.
    pub digest: &'a dyn Fn(&[u8]) -> [u8; 32],
}

#[derive(Default)]
struct Sampler {
    /// Per endpoint, per cause: the minute being counted and how many so far.
    minutes: HashMap<String, HashMap<&'static str, (i64, u64)>>,
    /// Rejections not yet written, per (minute, endpoint, cause).
    pending: HashMap<(i64, String, &'static str), u64>,
}

impl Sampler {
    /// Counts one rejection; whether it is kept.
    fn count(&mut self, minute: i64, endpoint: &str, cause: &'static str) -> bool {
        let causes = match self.minutes.get_mut(endpoint) {
            Some(c) => c,
            None => self.minutes.entry(endpoint.to_owned()).or_default(),
        };
        let slot = causes.entry(cause).or_insert((minute, 0));
        if slot.0 != minute {
            *slot = (minute, 0);
        }
        slot.1 += 1;
        let n = slot.1;
        *self
            .pending
            .entry((minute, endpoint.to_owned(), cause))
            .or_insert(0) += 1;
        n <= KEEP_ALL_PER_MINUTE || (n - KEEP_ALL_PER_MINUTE).is_multiple_of(KEEP_ONE_IN)
    }
}

/// The ingress's side of the log and the ring the flusher drains.
pub struct RejectionLog {
    enabled: bool,
    sampler: Mutex<Sampler>,
    tx: mpsc::Sender<RejectionEntry>,
    rx: Mutex<Option<mpsc::Receiver<RejectionEntry>>>,
    dropped: AtomicU64,
}

impl RejectionLog {
    pub fn new(enabled: bool) -> Self {
        let (tx, rx) = mpsc::channel(RING_CAPACITY);
        Self {
            enabled,
            sampler: Mutex::new(Sampler::default()),
            tx,
            rx: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
        }
    }

    /// Counts a rejection and, when sampled, queues its redacted entry; never waits.
    pub fn record(&self, r: Rejected<'_>) {
        telemetry::request_rejected(r.cause);
        if !self.enabled {
            return;
        }
        let minute = r.at_ms - r.at_ms.rem_euclid(MINUTE_MS);
        let keep = self
            .sampler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count(minute, r.endpoint, r.cause);
        if !keep {
            return;
        }
        let declared = r
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let entry = RejectionEntry {
            at_ms: r.at_ms,
            endpoint: r.endpoint.to_owned(),
            cause: r.cause.to_owned(),
            reason: r.reason.map(str::to_owned),
            headers_json: redacted_headers(r.headers),
            body_size: r.body.map(|b| b.len() as u64).or(declared),
            body_digest: r.body.map(|b| (r.digest)(b).to_vec()),
        };
        if self.tx.try_send(entry).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            telemetry::rejections_dropped(1);
        }
    }

    /// Entries dropped because the ring was full, since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn take_counts(&self) -> Vec<RejectionCount> {
        let pending = std::mem::take(
            &mut self
                .sampler
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pending,
        );
        pending
            .into_iter()
            .map(|((minute_ms, endpoint, cause), seen)| RejectionCount {
                minute_ms,
                endpoint,
                cause: cause.to_owned(),
                seen,
            })
            .collect()
    }

    fn restore_counts(&self, counts: Vec<RejectionCount>) {
        let mut sampler = self.sampler.lock().unwrap_or_else(PoisonError::into_inner);
        for c in counts {
            let Some(cause) = STATIC_CAUSES.iter().find(|s| **s == c.cause) else {
                continue;
            };
            *sampler
                .pending
                .entry((c.minute_ms, c.endpoint, cause))
                .or_insert(0) += c.seen;
        }
    }
}

/// Every cause [`cause_of`] gives (to restore counts whose write failed).
const STATIC_CAUSES: [&str; 10] = [
    "unknown_endpoint",
    "method_not_allowed",
    "https_required",
    "rate_limited",
    "unsupported_media_type",
    "payload_too_large",
    "request_timeout",
    "invalid_signature",
    "stale_timestamp",
    "bad_request",
];

/// `[[name, value], …]` with every value redacted except a few harmless ones (truncated).
fn redacted_headers(headers: &HeaderMap) -> String {
    let list: Vec<(String, String)> = headers
        .iter()
        .take(MAX_HEADERS)
        .map(|(name, value)| {
            let name = name.as_str();
            let shown = SHOWN.contains(&name);
            let value = if shown {
                String::from_utf8_lossy(value.as_bytes())
                    .chars()
                    .take(MAX_SHOWN_VALUE)
                    .collect()
            } else {
                format!("[redacted, {} bytes]", value.len())
            };
            (name.chars().take(MAX_NAME).collect(), value)
        })
        .collect();
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}

/// Drains the ring into the store about once a second and trims the table; ends on stop,
/// after a last flush.
pub async fn flusher(state: Arc<AppState>, mut stop: watch::Receiver<bool>) {
    let Some(mut rx) = state
        .rejections
        .rx
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    // The first flush trims too: a restart bounds a table that grew past its limits.
    let mut last_trim: Option<tokio::time::Instant> = None;
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(FLUSH_INTERVAL) => false,
            _ = stop.changed() => true,
        };
        flush(&state, &mut rx).await;
        if last_trim.is_none_or(|t| t.elapsed() >= TRIM_INTERVAL) {
            trim(&state).await;
            last_trim = Some(tokio::time::Instant::now());
        }
        if stopping || *stop.borrow() {
            return;
        }
    }
}

/// Writes what the ring holds (in batches) and the counts so far.
pub async fn flush(state: &AppState, rx: &mut mpsc::Receiver<RejectionEntry>) {
    loop {
        let mut entries = Vec::new();
        while entries.len() < FLUSH_BATCH {
            match rx.try_recv() {
                Ok(e) => entries.push(e),
                Err(_) => break,
            }
        }
        let counts = state.rejections.take_counts();
        if entries.is_empty() && counts.is_empty() {
            return;
        }
        let full = entries.len() == FLUSH_BATCH;
        let n = entries.len();
        if let Err(e) = state.store.record_rejections(entries, counts.clone()).await {
            telemetry::rejection_flush_failed(&e, n);
            state.rejections.restore_counts(counts);
            return;
        }
        if !full {
            return;
        }
    }
}

async fn trim(state: &AppState) {
    let cfg = state.runtime.load().config.rejections.clone();
    let before = state.clock.now_ms() - i64::try_from(cfg.retention.as_millis()).unwrap_or(0);
    loop {
        match state
            .store
            .trim_rejections(before, cfg.max_entries, TRIM_BATCH)
            .await
        {
            Ok(n) if n >= u64::from(TRIM_BATCH) => continue,
            Ok(_) => return,
            Err(e) => {
                telemetry::rejection_flush_failed(&e, 0);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rejection_up_to_100_per_minute_then_one_in_100() {
        let mut s = Sampler::default();
        let kept = (0..1_000)
            .filter(|_| s.count(0, "ep", "invalid_signature"))
            .count();
        assert_eq!(kept, 100 + 9, "100, then the 200th, 300th, … 1000th");
        assert!(s.count(0, "ep", "stale_timestamp"), "per cause");
        assert!(s.count(0, "other", "invalid_signature"), "per endpoint");
        assert!(s.count(MINUTE_MS, "ep", "invalid_signature"), "per minute");
        assert_eq!(s.pending[&(0, "ep".to_owned(), "invalid_signature")], 1_000);
    }

    #[test]
    fn a_full_ring_drops_and_counts_without_waiting() {
        let log = RejectionLog::new(true);
        let headers = HeaderMap::new();
        let digest = |_: &[u8]| [0u8; 32];
        let total = RING_CAPACITY + 500;
        // 100 a minute are all kept: spread over minutes so every one is sampled.
        for i in 0..total {
            log.record(Rejected {
                at_ms: (i as i64 / 100) * MINUTE_MS,
                endpoint: "ep",
                cause: "invalid_signature",
                reason: None,
                headers: &headers,
                body: Some(b"forged"),
                digest: &digest,
            });
        }
        assert_eq!(
            log.dropped(),
            500,
            "nobody drains the ring: the excess is dropped"
        );
        let mut rx = log.rx.lock().unwrap().take().unwrap();
        let mut queued = 0;
        while let Ok(e) = rx.try_recv() {
            assert_eq!(e.body_size, Some(6));
            assert_eq!(e.body_digest.as_deref(), Some(&[0u8; 32][..]));
            queued += 1;
        }
        assert_eq!(queued, RING_CAPACITY);
        let seen: u64 = log.take_counts().iter().map(|c| c.seen).sum();
        assert_eq!(seen, total as u64, "dropped entries are still counted");
    }

    #[test]
    fn header_values_are_redacted_except_harmless_ones() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "application/json".parse().unwrap());
        h.insert("webhook-signature", "v1,c2VjcmV0".parse().unwrap());
        let json = redacted_headers(&h);
        assert!(
            json.contains(r#"["content-type","application/json"]"#),
            "{json}"
        );
        assert!(
            json.contains(r#"["webhook-signature","[redacted, 11 bytes]"]"#),
            "{json}"
        );
        assert!(!json.contains("c2VjcmV0"));
    }

    #[test]
    fn causes_are_the_rejections_only() {
        assert_eq!(
            cause_of(&Answer::BadRequest("missing_event_id")),
            Some(("bad_request", Some("missing_event_id")))
        );
        assert_eq!(
            cause_of(&Answer::InvalidSignature),
            Some(("invalid_signature", None))
        );
        assert_eq!(
            cause_of(&Answer::Overloaded {
                retry_after_secs: 1
            }),
            None
        );
        assert_eq!(cause_of(&Answer::Accepted { id: "x".into() }), None);
        for c in STATIC_CAUSES {
            assert!(!c.is_empty());
        }
    }
}
