//! Background loops that stop together: the worker pool and the relay share this shutdown
//! choreography (stop leasing, wait a bounded grace for work in flight, then abandon it —
//! its lease expires and it is done again, with the same idempotency key).

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A group of loops that watch one stop signal.
pub struct StoppableTasks {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl StoppableTasks {
    /// The stop signal to hand to each loop, and the group to add them to.
    pub fn new() -> (StoppableTasks, watch::Receiver<bool>) {
        let (stop, stop_rx) = watch::channel(false);
        (
            StoppableTasks {
                stop,
                tasks: Vec::new(),
            },
            stop_rx,
        )
    }

    pub fn push(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Signals stop and waits up to `grace` for every loop; loops still busy then are
    /// aborted, and `abandoned` is logged for each.
    pub async fn shutdown(self, grace: Duration, abandoned: &'static str) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + grace;
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
                tracing::warn!("{abandoned}");
            }
        }
    }
}
