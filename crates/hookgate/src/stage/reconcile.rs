//! The `reconcile` stage: runs the internal reconciliation ([`crate::reconcile`]) on its
//! schedule (`[reconcile] interval_seconds`) and the runs the operator API requested
//! (`POST /api/v1/reconcile`, stored `pending`).
//!
//! Endpoints with `reconcile = { … }` are reconciled with their provider's API on their own
//! schedule (`reconcile.interval_seconds`, see [`Reconcile::provider_runs`]) by the same loop,
//! and at once when the `sequence_gaps` stage asks for a missing event
//! ([`crate::reconcile::asks`]).
//!
//! One loop per worker process. A step first leases a requested run (a `pending` one, or a
//! `running` one whose runner died: its lease expired), runs it and ends it with its summary;
//! otherwise, when the schedule is due, it records a run of its own and runs it, then trims
//! findings older than `[reconcile] findings_retention_days`. Every repair of a run is
//! conditional and recorded with its finding in one transaction, so instances on one
//! PostgreSQL reconciling at once repair each thing once, and a run cut short by a restart
//! leaves only committed repairs (a requested run is then run again from the start: its
//! repairs already made are no longer findings).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hookgate_store::{NewRun, RunRecord, RunState, RunTrigger};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{StageLoop, StagePool, Step};
use crate::reconcile::api::ApiClient;
use crate::reconcile::provider::ProviderRun;
use crate::reconcile::{self, Scope};
use crate::state::AppState;
use crate::telemetry;

/// Stage name of the reconciliation runner.
pub const RECONCILE: &str = "reconcile";

/// Shutdown waits at most this long for a run's transaction in flight.
pub const GRACE: Duration = Duration::from_secs(5);

/// A runner's lease on a run: longer than any bounded run takes; a runner that died is
/// replaced after it.
pub const RUN_LEASE: Duration = Duration::from_secs(600);

/// The first scheduled run starts this long after start-up at the latest (sooner with a
/// shorter interval), after the workers took back what a crash left leased.
pub const FIRST_RUN_MAX_DELAY: Duration = Duration::from_secs(60);

/// How often an idle loop looks for a requested run.
const POLL: Duration = Duration::from_secs(1);

/// Findings removed per trim statement.
const TRIM_BATCH: u32 = 1_000;

/// The stage.
pub struct Reconcile {
    state: Arc<AppState>,
    owner: String,
    /// The providers' API client, made at the first provider run.
    client: std::sync::OnceLock<Option<ApiClient>>,
}

/// When the loop's next scheduled runs are due.
pub struct Schedule {
    next_run: Instant,
    /// Per endpoint with `reconcile = { … }`: its next provider run at the earliest.
    next_provider_run: HashMap<String, Instant>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Reconcile {
    pub fn new(state: Arc<AppState>) -> Self {
        Self {
            state,
            owner: format!("reconcile-{}", uuid::Uuid::now_v7()),
            client: std::sync::OnceLock::new(),
        }
    }

    /// The scheduled provider runs that are due: an endpoint's runs are at least its
    /// `reconcile.interval_seconds` apart, in this process (what it tried, failed or not) and
    /// across instances on one database (the checkpoint's `updated_at`, written by the last
    /// run that completed anywhere).
    pub async fn provider_runs(&self, schedule: &mut Schedule) {
        let config = self.state.runtime.load_full();
        let config = &config.config;
        let asked = self.state.provider_asks.take();
        let due: Vec<_> = config
            .endpoints
            .iter()
            .filter_map(|ep| ep.reconcile.as_ref().map(|rc| (ep, rc.interval)))
            .map(|(ep, interval)| {
                let since = asked.iter().find(|(id, _)| *id == ep.id).map(|(_, s)| *s);
                (ep, interval, since)
            })
            .filter(|(ep, _, since)| {
                since.is_some()
                    || schedule
                        .next_provider_run
                        .get(&ep.id)
                        .is_none_or(|at| Instant::now() >= *at)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let Some(client) = self
            .client
            .get_or_init(|| match ApiClient::new() {
                Ok(client) => Some(client),
                Err(e) => {
                    tracing::error!(error = %e, "provider reconcile: no HTTP client");
                    None
                }
            })
            .as_ref()
        else {
            return;
        };
        for (ep, interval, asked_since) in due {
            schedule
                .next_provider_run
                .insert(ep.id.clone(), Instant::now() + interval);
            let now = self.state.clock.now_ms();
            match self.state.store.checkpoint(&ep.id).await {
                Ok(Some(c))
                    if asked_since.is_none()
                        && now.saturating_sub(c.updated_at_ms) < ms(interval) =>
                {
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    telemetry::reconcile_store_failed("checkpoint", &e);
                    continue;
                }
            }
            let run = ProviderRun {
                store: &self.state.store,
                config,
                client,
                since_ms: asked_since,
                dry_run: false,
                now_ms: now,
            };
            // Logged and counted by the run; the next one reads the same span again.
            let _ = run.endpoint(ep).await;
        }
    }

    /// Runs `record` (leased by this runner) and ends it. `Ok(())` also when the run failed
    /// (it is recorded `failed`); `Err` only when ending it failed.
    pub async fn execute(&self, record: &RunRecord) -> Result<(), hookgate_store::StoreError> {
        let config = self.state.runtime.load_full();
        let scope = Scope {
            endpoint: record.endpoint_id.clone(),
            since_ms: record.since_ms,
            dry_run: record.dry_run,
            record: true,
        };
        let now = self.state.clock.now_ms();
        let result = reconcile::run(
            &self.state.store,
            &config.config,
            &record.run_id,
            &scope,
            now,
        )
        .await;
        let (state, summary, error) = match &result {
            Ok(report) => (RunState::Done, Some(report.summary().to_string()), None),
            Err(e) => (RunState::Failed, None, Some(e.to_string())),
        };
        telemetry::reconcile_run_finished(
            &record.run_id,
            record.trigger.as_str(),
            result.as_ref().map_or(0, |r| r.total()),
            error.as_deref(),
        );
        self.state
            .store
            .finish_run(
                &record.run_id,
                &self.owner,
                state,
                summary.as_deref(),
                error.as_deref(),
                self.state.clock.now_ms(),
            )
            .await
            .map(|_| ())
    }

    /// A scheduled run: recorded, run, ended; then old findings trimmed.
    pub async fn scheduled(&self) -> Result<(), hookgate_store::StoreError> {
        let now = self.state.clock.now_ms();
        let run = NewRun {
            run_id: uuid::Uuid::now_v7().to_string(),
            trigger: RunTrigger::Schedule,
            endpoint_id: None,
            since_ms: None,
            dry_run: false,
            state: RunState::Running,
            requested_by: "schedule".into(),
            owner: Some(self.owner.clone()),
            lease_ms: ms(RUN_LEASE),
            now_ms: now,
        };
        let run_id = run.run_id.clone();
        self.state.store.create_run(run).await?;
        let record =
            self.state.store.get_run(&run_id).await?.ok_or_else(|| {
                hookgate_store::StoreError::Corrupt("reconcile run vanished".into())
            })?;
        self.execute(&record).await?;
        let keep = self
            .state
            .runtime
            .load()
            .config
            .reconcile
            .findings_retention;
        let before = self.state.clock.now_ms().saturating_sub(ms(keep));
        while self.state.store.trim_findings(before, TRIM_BATCH).await? >= u64::from(TRIM_BATCH) {}
        Ok(())
    }

    fn interval(&self) -> Duration {
        self.state.runtime.load().config.reconcile.interval
    }
}

impl StageLoop for Reconcile {
    type Local = Schedule;

    fn name(&self) -> &'static str {
        RECONCILE
    }

    fn start_loop(&self, _index: usize) -> Schedule {
        let first = Instant::now() + self.interval().min(FIRST_RUN_MAX_DELAY);
        Schedule {
            next_run: first,
            next_provider_run: HashMap::new(),
        }
    }

    async fn step(&self, schedule: &mut Schedule, _stop: &mut watch::Receiver<bool>) -> Step {
        let now = self.state.clock.now_ms();
        match self
            .state
            .store
            .lease_run(&self.owner, now, ms(RUN_LEASE))
            .await
        {
            Ok(Some(record)) => {
                if let Err(e) = self.execute(&record).await {
                    telemetry::reconcile_store_failed("finish run", &e);
                }
                return Step::Busy;
            }
            Ok(None) => {}
            Err(e) => {
                telemetry::reconcile_store_failed("lease run", &e);
                return Step::Idle;
            }
        }
        let enabled = self.state.runtime.load().config.reconcile.enabled;
        if enabled && Instant::now() >= schedule.next_run {
            if let Err(e) = self.scheduled().await {
                telemetry::reconcile_store_failed("scheduled run", &e);
            }
            schedule.next_run = Instant::now() + self.interval();
        }
        if enabled {
            self.provider_runs(schedule).await;
        }
        Step::Idle
    }
}

/// Starts the reconcile stage (one supervised loop).
pub fn start(state: &Arc<AppState>) -> StagePool {
    StagePool::start(
        Arc::new(Reconcile::new(Arc::clone(state))),
        1,
        POLL,
        Arc::clone(&state.stages),
    )
}
