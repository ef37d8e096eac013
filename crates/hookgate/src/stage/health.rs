//! Which background stages are running: each stage counts its loops that are down (between a
//! panic and their restart). `/readyz` names the stages with any loop down, and
//! `hookgate_background_stage_up{stage}` is 1 or 0 to match.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::telemetry;

/// The health of every background stage of one gateway.
#[derive(Debug, Default)]
pub struct StageHealth {
    /// Loops down, by stage.
    down: Mutex<BTreeMap<&'static str, usize>>,
}

impl StageHealth {
    /// A stage starts, with every loop running.
    pub fn register(&self, stage: &'static str) {
        self.lock().insert(stage, 0);
        telemetry::stage_registered(stage);
    }

    /// A loop of `stage` stopped running on its own (it will be restarted).
    pub fn loop_down(&self, stage: &'static str) {
        self.update(stage, |down| *down += 1);
    }

    /// A loop of `stage` that was down runs again.
    pub fn loop_up(&self, stage: &'static str) {
        self.update(stage, |down| *down = down.saturating_sub(1));
    }

    /// The stages with a loop down, by name.
    pub fn down(&self) -> Vec<&'static str> {
        self.lock()
            .iter()
            .filter(|(_, down)| **down > 0)
            .map(|(stage, _)| *stage)
            .collect()
    }

    fn update(&self, stage: &'static str, change: impl FnOnce(&mut usize)) {
        let mut stages = self.lock();
        let down = stages.entry(stage).or_default();
        change(down);
        // Set under the lock, so concurrent changes reach the gauge in order.
        telemetry::stage_up(stage, *down == 0);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, usize>> {
        // A panic while holding this lock leaves the counts whole (each change is one write).
        self.down
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_is_down_while_any_loop_is() {
        let health = StageHealth::default();
        health.register("processing");
        health.register("delivery");
        assert!(health.down().is_empty());
        health.loop_down("processing");
        health.loop_down("processing");
        assert_eq!(health.down(), ["processing"]);
        health.loop_up("processing");
        assert_eq!(health.down(), ["processing"]);
        health.loop_up("processing");
        assert!(health.down().is_empty());
    }
}
