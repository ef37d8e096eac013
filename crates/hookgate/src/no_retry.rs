//! No-retry windows (issue 18, "Shedding without loss for providers that do not retry"): when
//! the gateway answers an endpoint whose provider never sends a failed delivery again (its
//! pack's reconcile API says so: GitHub) with non-2xx for its own reasons — shed, store down,
//! commit failed, its own rate limits; never a rejection of the request itself (401, 400, …)
//! —, it notes the time here, in memory, at no cost to the answer. A background flusher
//! writes each endpoint's window to the store about once a second; a write that fails (the
//! store is what is down) keeps the window in memory, merged with what came since, and is
//! tried again at the next flush. The endpoint's next provider reconciliation starts no later
//! than the oldest open window's start, so what was refused then is redelivered.
//!
//! Bounded: at most one window per endpoint in memory (extended: the earliest start, the
//! latest end), and one open window per endpoint in the store (`record_no_retry_window`
//! extends it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::state::AppState;
use crate::telemetry;

/// How often windows noted in memory are written.
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// A span of non-2xx answers of one endpoint, unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
}

impl Window {
    fn merge(&mut self, other: Window) {
        self.started_at_ms = self.started_at_ms.min(other.started_at_ms);
        self.ended_at_ms = self.ended_at_ms.max(other.ended_at_ms);
    }
}

/// The windows not written yet, one per endpoint.
#[derive(Debug, Default)]
pub struct NoRetryWindows {
    pending: Mutex<HashMap<String, Window>>,
}

impl NoRetryWindows {
    /// The gateway answered `endpoint` non-2xx for its own reasons at `answered_ms`, to a
    /// request that arrived at `arrived_ms`.
    pub fn note(&self, endpoint: &str, arrived_ms: i64, answered_ms: i64) {
        let at = Window {
            started_at_ms: arrived_ms.min(answered_ms),
            ended_at_ms: answered_ms,
        };
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get_mut(endpoint) {
            Some(w) => w.merge(at),
            None => {
                pending.insert(endpoint.to_owned(), at);
            }
        }
    }

    /// The windows noted and not written yet (for `/readyz`-style checks and tests).
    pub fn pending(&self) -> Vec<(String, Window)> {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.iter().map(|(e, w)| (e.clone(), *w)).collect()
    }

    fn take(&self) -> HashMap<String, Window> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A window whose write failed goes back, merged with what was noted meanwhile.
    fn put_back(&self, endpoint: String, window: Window) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending
            .entry(endpoint)
            .and_modify(|w| w.merge(window))
            .or_insert(window);
    }
}

/// Writes the pending windows about once a second until `stop`, then once more.
pub async fn flusher(state: Arc<AppState>, mut stop: watch::Receiver<bool>) {
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(FLUSH_INTERVAL) => false,
            _ = stop.changed() => true,
        };
        flush(&state).await;
        if stopping || *stop.borrow() {
            return;
        }
    }
}

/// Writes every pending window; one whose write fails stays pending. Returns how many were
/// written.
pub async fn flush(state: &AppState) -> usize {
    let mut written = 0;
    for (endpoint, window) in state.no_retry.take() {
        match state
            .store
            .record_no_retry_window(&endpoint, window.started_at_ms, window.ended_at_ms)
            .await
        {
            Ok(()) => {
                written += 1;
                telemetry::no_retry_window_recorded(
                    &endpoint,
                    window.started_at_ms,
                    window.ended_at_ms,
                );
            }
            Err(e) => {
                telemetry::no_retry_window_pending(&endpoint, &e);
                state.no_retry.put_back(endpoint, window);
            }
        }
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_window_per_endpoint_spans_its_answers() {
        let w = NoRetryWindows::default();
        w.note("gh", 2_000, 2_000);
        w.note("gh", 1_000, 1_200);
        w.note("gh", 2_500, 3_000);
        w.note("other", 5_000, 5_000);
        let mut taken: Vec<_> = w.take().into_iter().collect();
        taken.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            taken,
            vec![
                (
                    "gh".to_owned(),
                    Window {
                        started_at_ms: 1_000,
                        ended_at_ms: 3_000
                    }
                ),
                (
                    "other".to_owned(),
                    Window {
                        started_at_ms: 5_000,
                        ended_at_ms: 5_000
                    }
                ),
            ]
        );
        assert!(w.pending().is_empty());
        // A failed write goes back merged with what came meanwhile.
        w.note("gh", 4_000, 4_000);
        w.put_back(
            "gh".into(),
            Window {
                started_at_ms: 1_000,
                ended_at_ms: 3_000,
            },
        );
        assert_eq!(
            w.pending(),
            vec![(
                "gh".to_owned(),
                Window {
                    started_at_ms: 1_000,
                    ended_at_ms: 4_000
                }
            )]
        );
    }
}
