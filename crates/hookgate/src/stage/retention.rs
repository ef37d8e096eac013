//! The retention stage: removes what `[retention]` says has expired, in the background.
//!
//! A pass runs within [`FIRST_PASS_MAX_DELAY`] of start-up and then every
//! `[retention] interval_seconds`. Each step of the pass is one round: one bounded batch of
//! each kind (expired payloads; per configured endpoint its expired id records and object
//! state; rows of endpoints no longer configured; ended replay claims; then freed pages back
//! to the file system). Each batch is one short store transaction (SQLite: a writer command
//! between acceptance batches; PostgreSQL: `SKIP LOCKED`), so acceptance never waits long on
//! retention; rounds repeat while any batch came back full. The stage keeps no state of its
//! own: it deletes what is expired by the clock now, so a restart simply resumes, and several
//! instances on one PostgreSQL share the work.
//!
//! Only `PROCESSED` and `IGNORED` rows are touched (a `RECEIVED` or `FAILED` row keeps its
//! payload and its record), and a payload with a delivery still `PENDING` is kept.

use std::sync::Arc;
use std::time::Duration;

use hookgate_store::{ExpiredRows, StoreError};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{StageLoop, StagePool, Step};
use crate::state::AppState;
use crate::telemetry;

/// The first pass starts this long after start-up at the latest (sooner with a shorter
/// interval), leaving the start-up burst (redeliveries after an outage) to the ingress.
pub const FIRST_PASS_MAX_DELAY: Duration = Duration::from_secs(30);

/// Freed SQLite pages handed back per round (4 MiB of 4 KiB pages).
const RECLAIM_PAGES_PER_ROUND: u32 = 1024;

/// What one pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassTotals {
    pub payloads: u64,
    pub inbox: u64,
    pub outbox: u64,
    pub processed_markers: u64,
    pub object_state: u64,
    pub replay_digests: u64,
    pub reclaimed_pages: u64,
}

/// The stage; its one loop's local state is when the next pass is due.
pub struct Retention {
    state: Arc<AppState>,
}

/// Where the loop is.
pub struct Schedule {
    next_pass: Instant,
    /// The pass in progress: when it started and what it removed so far.
    current: Option<(Instant, PassTotals)>,
}

impl Retention {
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// One round: a batch of every kind. `Ok(true)` when some batch was full (more is
    /// expired than one round removes).
    pub async fn round(&self, totals: &mut PassTotals) -> Result<bool, (&'static str, StoreError)> {
        let runtime = self.state.runtime.load_full();
        let config = &runtime.config;
        let retention = &config.retention;
        let store = &self.state.store;
        let limit = retention.batch_size;
        let now = self.state.clock.now_ms();
        let mut full = false;

        let payloads = store
            .purge_expired_payloads(now - retention.payload_window_ms(), now, limit)
            .await
            .map_err(|e| ("payload", e))?;
        telemetry::retention_purged("payload", payloads);
        totals.payloads += payloads;
        full |= payloads >= u64::from(limit);

        let mut deleted_any = payloads > 0;
        let scopes = config
            .endpoints
            .iter()
            .map(|e| (Some(e.id.as_str()), e.idempotency.window_ms()))
            .chain([(None, retention.unconfigured_window_ms(&config.endpoints))]);
        for (endpoint_id, window_ms) in scopes {
            let rows = store
                .delete_expired_rows(ExpiredRows {
                    endpoint_id,
                    received_before_ms: now - window_ms,
                    limit,
                })
                .await
                .map_err(|e| ("inbox", e))?;
            telemetry::retention_purged("inbox", rows.inbox);
            telemetry::retention_purged("payload", rows.payloads);
            telemetry::retention_purged("outbox", rows.outbox);
            telemetry::retention_purged("processed_marker", rows.processed_markers);
            totals.inbox += rows.inbox;
            totals.payloads += rows.payloads;
            totals.outbox += rows.outbox;
            totals.processed_markers += rows.processed_markers;
            full |= rows.inbox >= u64::from(limit);
            deleted_any |= rows.inbox > 0;
            if let Some(endpoint_id) = endpoint_id {
                let objects = store
                    .delete_expired_object_state(endpoint_id, now - window_ms, limit)
                    .await
                    .map_err(|e| ("object_state", e))?;
                telemetry::retention_purged("object_state", objects);
                totals.object_state += objects;
                full |= objects >= u64::from(limit);
            }
        }

        let claims = store
            .delete_expired_replay_claims(now, limit)
            .await
            .map_err(|e| ("replay_digest", e))?;
        telemetry::retention_purged("replay_digest", claims);
        totals.replay_digests += claims;
        full |= claims >= u64::from(limit);

        if deleted_any {
            totals.reclaimed_pages += store
                .reclaim_space(RECLAIM_PAGES_PER_ROUND)
                .await
                .map_err(|e| ("reclaim", e))?;
        }
        Ok(full)
    }

    /// A whole pass, round after round until nothing expired is left (tests call this).
    pub async fn run_pass(&self) -> Result<PassTotals, StoreError> {
        let mut totals = PassTotals::default();
        while self.round(&mut totals).await.map_err(|(_, e)| e)? {}
        Ok(totals)
    }

    fn interval(&self) -> Duration {
        self.state.runtime.load().config.retention.interval
    }

    async fn finish_pass(&self, started: Instant, totals: &PassTotals) {
        let oldest = self.state.store.oldest_stored_payload_ms().await;
        let now = self.state.clock.now_ms();
        match oldest {
            Ok(oldest) => {
                telemetry::retention_pass_finished(totals, started.elapsed(), oldest, now)
            }
            Err(e) => telemetry::retention_failed("oldest_payload", &e),
        }
    }
}

impl StageLoop for Retention {
    type Local = Schedule;

    fn name(&self) -> &'static str {
        super::RETENTION
    }

    fn start_loop(&self, _index: usize) -> Schedule {
        Schedule {
            next_pass: Instant::now() + self.interval().min(FIRST_PASS_MAX_DELAY),
            current: None,
        }
    }

    async fn step(&self, schedule: &mut Schedule, _stop: &mut watch::Receiver<bool>) -> Step {
        if schedule.current.is_none() {
            if Instant::now() < schedule.next_pass {
                return Step::Idle;
            }
            schedule.current = Some((Instant::now(), PassTotals::default()));
        }
        let Some((started, mut totals)) = schedule.current.take() else {
            return Step::Idle;
        };
        match self.round(&mut totals).await {
            Ok(true) => {
                schedule.current = Some((started, totals));
                Step::Busy
            }
            Ok(false) => {
                self.finish_pass(started, &totals).await;
                schedule.next_pass = Instant::now() + self.interval();
                Step::Idle
            }
            Err((what, e)) => {
                telemetry::retention_failed(what, &e);
                schedule.next_pass = Instant::now() + self.interval();
                Step::Idle
            }
        }
    }
}

/// Starts the retention stage (one supervised loop).
pub fn start(state: &Arc<AppState>) -> StagePool {
    let poll = state
        .runtime
        .load()
        .config
        .retention
        .interval
        .min(Duration::from_secs(1));
    StagePool::start(
        Arc::new(Retention::new(Arc::clone(state))),
        1,
        poll,
        Arc::clone(&state.stages),
    )
}

/// Shutdown waits at most this long for a batch in flight (one short transaction).
pub const GRACE: Duration = Duration::from_secs(5);
