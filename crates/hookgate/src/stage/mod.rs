//! The loop every background stage shares (processing and delivery lease rows; retention,
//! [`retention`], runs timed passes over expired data; [`reseal`] re-seals payloads after a
//! key rotation; reconciliation later): lease due rows → open the sealed payload → do the stage's work →
//! settle each row, fenced on its lease, with backoff or `FAILED`.
//!
//! What is the same for every stage lives here: opening a payload and deciding the next
//! attempt ([`attempt`]), how a row settled ([`Settled`]), and a supervised pool of loops
//! ([`pool`]) that polls when idle, stops together, and restarts a loop that panicked (counted,
//! and reported by `/readyz` while it is down, see [`health`]). A stage supplies only its step
//! ([`StageLoop`]); its run-once step (one batch, then return) is what tests drive.

pub mod attempt;
pub mod health;
pub mod jobs;
pub mod pool;
pub mod reconcile;
pub mod reseal;
pub mod retention;
pub mod sequence_gaps;

use std::future::Future;

use tokio::sync::watch;

pub use self::health::StageHealth;
pub use self::pool::StagePool;

/// Stage name of the workers that run handlers on inbox rows.
pub const PROCESSING: &str = "processing";
/// Stage name of the relay that delivers outbox rows.
pub const DELIVERY: &str = "delivery";
/// Stage name of the purge of expired payloads and id records.
pub const RETENTION: &str = "retention";

/// How one leased row ended, for logs and tests. `T` is the stage's success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled<T> {
    /// The work is done (and recorded).
    Completed(T),
    /// The attempt failed; the row is due again at this time.
    Retrying { at_ms: i64 },
    /// The attempt failed for good (or attempts are exhausted): `FAILED`.
    Failed,
    /// Set aside for an operator (`HELD`): processing waits for `hookgate events release`.
    Held,
    /// The lease was lost before the result was recorded; another owner has the row.
    LeaseLost,
    /// Recording the result failed; the row returns after its lease.
    StoreFailed,
}

impl<T> Settled<T> {
    /// How the attempt ended, as the trace spans say it (`completed` names a success).
    pub fn outcome_word(&self, completed: impl FnOnce(&T) -> &'static str) -> &'static str {
        match self {
            Settled::Completed(done) => completed(done),
            Settled::Retrying { .. } => "retrying",
            Settled::Failed => "failed",
            Settled::Held => "held",
            Settled::LeaseLost => "lease_lost",
            Settled::StoreFailed => "store_failed",
        }
    }
}

/// What one step of a loop found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Work was done and more may be due: step again at once.
    Busy,
    /// Nothing (or less than asked) was due: wait the poll interval.
    Idle,
    /// The step saw the stop signal while waiting.
    Stopped,
}

/// One background stage: what each of its loops does per step.
pub trait StageLoop: Send + Sync + 'static {
    /// What one loop keeps between its steps (made afresh when a loop restarts).
    type Local: Send + 'static;

    /// The stage's name in metrics, logs and `/readyz`.
    fn name(&self) -> &'static str;

    /// The state of loop `index` (0-based) of the pool.
    fn start_loop(&self, index: usize) -> Self::Local;

    /// One unit of work. Never cancelled by stop (work in flight finishes within the pool's
    /// grace); a step that waits for capacity watches `stop` itself.
    fn step(
        &self,
        local: &mut Self::Local,
        stop: &mut watch::Receiver<bool>,
    ) -> impl Future<Output = Step> + Send;

    /// After stop: lets work the loop started in the background finish.
    fn finish(&self, local: Self::Local) -> impl Future<Output = ()> + Send {
        let _ = local;
        async {}
    }
}
