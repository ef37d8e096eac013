//! Provider runs asked for out of schedule: when a sequenced endpoint's gap outlives its
//! window (the `sequence_gaps` stage holds its waiting events), the provider reconciliation
//! of that endpoint is asked for the missing event at once instead of at its next scheduled
//! run, over a span that reaches back before the gap opened ([`GAP_LOOKBACK`]).
//!
//! In memory, per process: the stages that ask and answer run in the same worker process. An
//! ask lost to a restart costs nothing but time: the scheduled run lists from its checkpoint,
//! and the held events wait for `hookgate events release` either way.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How far before a gap's window the asked run starts listing: the missing event was created
/// before the first event waiting for it, by the provider's clock, possibly well before.
pub const GAP_LOOKBACK: Duration = Duration::from_secs(24 * 3_600);

/// Endpoints whose provider run is asked for, each with where its listing should start.
#[derive(Debug, Default)]
pub struct ProviderAsks {
    asked: Mutex<HashMap<String, i64>>,
}

impl ProviderAsks {
    /// Asks for a run of `endpoint` listing from `since_ms` (the earliest of its asks).
    pub fn ask(&self, endpoint: &str, since_ms: i64) {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        asked
            .entry(endpoint.to_owned())
            .and_modify(|s| *s = (*s).min(since_ms))
            .or_insert(since_ms);
    }

    /// The asks so far, each once.
    pub fn take(&self) -> Vec<(String, i64)> {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken: Vec<_> = asked.drain().collect();
        taken.sort();
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_keep_the_earliest_start_and_are_taken_once() {
        let asks = ProviderAsks::default();
        asks.ask("pay", 500);
        asks.ask("pay", 300);
        asks.ask("pay", 400);
        asks.ask("other", 7);
        assert_eq!(
            asks.take(),
            vec![("other".to_owned(), 7), ("pay".to_owned(), 300)]
        );
        assert!(asks.take().is_empty());
    }
}
