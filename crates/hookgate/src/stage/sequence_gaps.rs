//! The `sequence_gaps` stage: once a second, each sequenced endpoint's objects whose gap
//! outlived `sequence_gap_seconds`, or with more than `sequence_gap_max` waiting events, have
//! their waiting events set aside as `HELD` with a reason naming the missing sequence (one
//! statement per endpoint, `ProcessingStore::hold_sequence_gaps`). Nothing is skipped: an
//! operator's `hookgate events release` applies the held events in order over the gap.
//! Where the endpoint is reconciled with its provider (`reconcile = { … }`), the `reconcile`
//! stage is asked for a run at once ([`crate::reconcile::asks`]): the missing event it brings
//! in is applied, and the held ones, released, then follow it in order rather than over it.
//!
//! Stateless: gap openings are stored (`object_sequence.gap_opened_at`), so a restart loses
//! nothing and several instances may run it on one database (a row is held once).

use std::sync::Arc;
use std::time::Duration;

use hookgate_store::{SequenceGapCheck, StoreError};
use tokio::sync::watch;

use super::{StageLoop, StagePool, Step};
use crate::reconcile::asks::GAP_LOOKBACK;
use crate::state::AppState;
use crate::telemetry;

/// Stage name of the sequence-gap check.
pub const SEQUENCE_GAPS: &str = "sequence_gaps";

/// How often the gaps are checked: a gap is held at most this long after its window ends.
const INTERVAL: Duration = Duration::from_secs(1);

/// Shutdown waits at most this long for a check in flight (one statement per endpoint).
pub const GRACE: Duration = Duration::from_secs(5);

/// Starts the stage (one loop) in a process that runs the workers.
pub fn start(state: &Arc<AppState>) -> StagePool {
    StagePool::start(
        Arc::new(SequenceGaps {
            state: Arc::clone(state),
        }),
        1,
        INTERVAL,
        Arc::clone(&state.stages),
    )
}

pub struct SequenceGaps {
    state: Arc<AppState>,
}

impl SequenceGaps {
    /// The stage for `state` (tests drive [`SequenceGaps::run_once`]).
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// One check of every sequenced endpoint; how many rows it held.
    pub async fn run_once(&self) -> Result<u64, StoreError> {
        let runtime = self.state.runtime.load_full();
        let now_ms = self.state.clock.now_ms();
        let mut held = 0;
        for endpoint in runtime.endpoints.values() {
            let Some(sequencing) = &endpoint.config.sequence else {
                continue;
            };
            let gap_ms = i64::try_from(sequencing.gap.as_millis()).unwrap_or(i64::MAX);
            let check = SequenceGapCheck {
                endpoint_id: endpoint.config.id.clone(),
                opened_before_ms: now_ms.saturating_sub(gap_ms),
                max_waiting: sequencing.gap_max,
                reason: format!(
                    " (held: gap older than sequence_gap_seconds = {} or more than \
                     sequence_gap_max = {} waiting events)",
                    sequencing.gap.as_secs(),
                    sequencing.gap_max
                ),
            };
            let gaps = self.state.store.hold_sequence_gaps(check).await?;
            for gap in &gaps {
                telemetry::sequence_gap_held(
                    &endpoint.config.id,
                    &gap.object_id,
                    gap.missing,
                    gap.rows,
                );
                held += gap.rows;
            }
            if !gaps.is_empty() && endpoint.config.reconcile.is_some() {
                // The provider may still list the missing event: ask for it now, from
                // before the gap opened.
                let lookback_ms = i64::try_from(GAP_LOOKBACK.as_millis()).unwrap_or(i64::MAX);
                let since_ms = now_ms.saturating_sub(gap_ms).saturating_sub(lookback_ms);
                self.state.provider_asks.ask(&endpoint.config.id, since_ms);
                tracing::info!(
                    endpoint = %endpoint.config.id,
                    since_ms,
                    "sequence gap held; provider reconciliation asked for the missing events"
                );
            }
        }
        Ok(held)
    }
}

impl StageLoop for SequenceGaps {
    type Local = ();

    fn name(&self) -> &'static str {
        SEQUENCE_GAPS
    }

    fn start_loop(&self, _index: usize) {}

    async fn step(&self, _local: &mut (), _stop: &mut watch::Receiver<bool>) -> Step {
        if let Err(e) = self.run_once().await {
            tracing::warn!(error = %e, "sequence gap check failed; it runs again shortly");
        }
        Step::Idle
    }
}
