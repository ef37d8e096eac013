//! A supervised pool of a stage's loops. Each loop steps until stopped, waiting the poll
//! interval when idle. A loop that panics (or ends without being stopped) is restarted after a
//! backoff (100 ms doubling to 10 s, back to 100 ms once a loop has run 10 s), each restart
//! counted in `hookgate_background_restarts_total{stage}`; while it is down its stage is down
//! in [`StageHealth`]. Rows a dead loop had leased return after their lease.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{StageHealth, StageLoop, Step};
use crate::tasks::StoppableTasks;
use crate::telemetry;

/// First wait before restarting a loop that died.
const RESTART_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest wait before a restart; a loop that ran this long starts again from the minimum.
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// The running loops of one stage.
pub struct StagePool {
    stage: &'static str,
    tasks: StoppableTasks,
}

impl StagePool {
    /// Starts `loops` supervised loops of `stage`.
    pub fn start<S: StageLoop>(
        stage: Arc<S>,
        loops: usize,
        poll_interval: Duration,
        health: Arc<StageHealth>,
    ) -> StagePool {
        let name = stage.name();
        health.register(name);
        let (mut tasks, stop) = StoppableTasks::new();
        for index in 0..loops {
            tasks.push(tokio::spawn(supervise(
                Arc::clone(&stage),
                index,
                poll_interval,
                Arc::clone(&health),
                stop.clone(),
            )));
        }
        tracing::info!(stage = name, loops, "stage started");
        StagePool { stage: name, tasks }
    }

    /// Stops leasing; waits up to `grace` for work in flight, then abandons it (its leases
    /// expire and it is done again, with the same idempotency key).
    pub async fn shutdown(self, grace: Duration) {
        self.tasks
            .shutdown(
                grace,
                "a background loop was still busy at shutdown; its rows return after their lease",
            )
            .await;
        tracing::info!(stage = self.stage, "stage stopped");
    }
}

/// Aborts the task when dropped, so aborting the supervisor also ends the loop it runs.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs loop `index` of `stage`, restarting it until stopped.
async fn supervise<S: StageLoop>(
    stage: Arc<S>,
    index: usize,
    poll_interval: Duration,
    health: Arc<StageHealth>,
    mut stop: watch::Receiver<bool>,
) {
    let name = stage.name();
    let mut backoff = RESTART_BACKOFF_MIN;
    loop {
        let started = Instant::now();
        let mut running = AbortOnDrop(tokio::spawn(run_loop(
            Arc::clone(&stage),
            index,
            poll_interval,
            stop.clone(),
        )));
        let ended = (&mut running.0).await;
        if *stop.borrow() {
            return;
        }
        let cause = match &ended {
            Ok(()) => "ended",
            Err(e) if e.is_panic() => "panicked",
            Err(_) => "was cancelled",
        };
        if started.elapsed() >= RESTART_BACKOFF_MAX {
            backoff = RESTART_BACKOFF_MIN;
        }
        health.loop_down(name);
        telemetry::stage_loop_died(name, index, cause, backoff);
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(RESTART_BACKOFF_MAX);
        telemetry::stage_loop_restarted(name, index);
        health.loop_up(name);
    }
}

/// One loop: step until stopped, sleeping `poll_interval` when idle.
async fn run_loop<S: StageLoop>(
    stage: Arc<S>,
    index: usize,
    poll_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut local = stage.start_loop(index);
    loop {
        if *stop.borrow() {
            break;
        }
        hookgate_core::fail_point!("stage.panic", panic_for_test(stage.name()));
        match stage.step(&mut local, &mut stop).await {
            Step::Busy => {}
            Step::Idle => tokio::select! {
                _ = tokio::time::sleep(poll_interval) => {}
                _ = stop.changed() => break,
            },
            Step::Stopped => break,
        }
    }
    stage.finish(local).await;
}

/// `stage.panic=error`: the first few steps of each lease stage panic, so tests of the real
/// binary see a loop die, its stage reported down, and the loop restarted. Counted per stage,
/// so a stage that starts alongside (`reseal`) does not take another stage's panics; the
/// retention loop, which runs in every process, is left out.
#[cfg(feature = "failpoints")]
fn panic_for_test(stage: &'static str) {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    const PANICS: u32 = 3;
    if stage == super::RETENTION {
        return;
    }
    static PANICKED: Mutex<Option<HashMap<&'static str, u32>>> = Mutex::new(None);
    let panicked = {
        let mut counts = PANICKED.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts
            .get_or_insert_with(HashMap::new)
            .entry(stage)
            .or_insert(0);
        *count += 1;
        *count
    };
    if panicked <= PANICS {
        panic!("failpoint stage.panic in stage {stage}");
    }
}
