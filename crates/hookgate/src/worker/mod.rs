//! The processing stage: lease due inbox rows, run the endpoint's handlers, commit the outcome
//! under the version gate (ARCHITECTURE.md, "One processed event").
//!
//! For one leased row: decrypt the sealed payload with the runtime keyring (only when the
//! endpoint has handlers), run every handler's `prepare` (network I/O allowed; no transaction,
//! nothing inside the store's writer) and `apply` (pure). Then ONE store call for all the rows
//! of the lease, [`Store::complete_all`], commits for each row the version gate, the business
//! changes, the markers, the outbox rows and `PROCESSED`, each fenced on its own lease. A
//! transient handler failure schedules the next attempt with full-jitter backoff
//! (per-endpoint `retry`); a schema or permanent failure, or exhausted attempts, is `FAILED`.
//! `last_error` names the handler and the error kind only (never payload bytes or secrets)
//! and is bounded. A worker leases one row at a time while any endpoint has handlers, up to
//! [`lease_batch`] rows when none has.
//!
//! Leases are not renewed: a row whose processing outlives `[worker] lease_seconds` returns to
//! the inbox, another worker may take it, and the slow worker's commit is refused
//! (`LeaseLost`) — so config refuses handler timeouts that do not fit in the lease. A row
//! leased more often than its endpoint's `max_attempts` allows is abandoned (`FAILED`) at that
//! lease, before any work: a crash loop ends. Leases name the configured endpoints, so rows of
//! a removed endpoint wait for it.
//!
//! [`Processor::run_once`] does one unit of work without sleeping (tests drain with it);
//! [`start`] runs `concurrency` supervised loops of it as the `processing` stage
//! ([`crate::stage`]), with a short idle sleep.

pub mod handler;
pub mod payments;

use std::sync::Arc;
use std::time::Duration;

use hookgate_store::{
    Completion, FailedAttempt, HandlerOutput, HeldEvent, InboxRecord, LeaseRequest,
    ProcessingError, ProcessingResult, StoreError,
};
use tokio::sync::watch;

use self::handler::{Handler, HandlerError, VerifiedEvent};
use self::payments::{PaymentsProjection, StripeFetcher};
use crate::config::HandlerKind;
use crate::config::destinations::filter::{DestinationFilter, FilterInput};
use crate::stage::attempt::{
    Failure, NextAttempt, Subject, abandoned, attempt_number, next_attempt, open_payload,
    settle_failure,
};
use crate::stage::{self, Settled, StageLoop, StagePool, Step};
use crate::state::{AppState, Runtime};
use crate::{telemetry, traces};
use tracing::Instrument as _;

/// Runs leased rows through their endpoint's handlers and commits the outcome.
pub struct Processor {
    state: Arc<AppState>,
    http: reqwest::Client,
}

/// How one leased row ended, for logs and tests: `Retrying` is back to RECEIVED, due then;
/// `Completed(Completion::Waiting { .. })` waits in its object's sequence gap.
pub type Processed = Settled<Completion>;

impl Processor {
    pub fn new(state: Arc<AppState>) -> anyhow::Result<Processor> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("hookgate/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            // As for destinations: no HTTP(S)_PROXY / ALL_PROXY from the environment.
            .no_proxy()
            .build()?;
        Ok(Processor { state, http })
    }

    /// Leases up to `limit` due rows for `owner`, runs their handlers one after another, then
    /// commits every outcome with one store call; returns what became of each, in lease order
    /// (empty: nothing was due). Never sleeps.
    pub async fn run_once(&self, owner: &str, limit: u32) -> Result<Vec<Processed>, StoreError> {
        let runtime = self.state.runtime.load_full();
        let lease_ms = i64::try_from(runtime.config.worker.lease.as_millis()).unwrap_or(i64::MAX);
        let now = self.state.clock.now_ms();
        // Decided on the same runtime snapshot that processes the rows: without handlers and
        // `where` predicates nothing opens a payload, so none is read.
        // Only rows of configured endpoints: those of an endpoint removed from the config wait
        // (RECEIVED, attempts unchanged) until it comes back, counted as orphaned.
        let endpoints: Vec<String> = runtime.endpoints.keys().cloned().collect();
        let leased = self
            .state
            .store
            .lease(LeaseRequest {
                owner,
                now_ms: now,
                lease_ms,
                limit,
                with_payload: reads_payloads(&runtime),
                endpoints: Some(&endpoints),
            })
            .await?;
        let mut out: Vec<Option<Processed>> = Vec::with_capacity(leased.len());
        let mut spans = Vec::with_capacity(leased.len());
        let mut ready = Vec::new();
        let mut ready_rows = Vec::new();
        for record in leased {
            let span = traces::attempt_span(
                &record.inbox_id,
                &record.endpoint_id,
                &record.provider,
                attempt_number(record.attempt_count),
            );
            spans.push(span.clone());
            match self
                .prepare(owner, &runtime, &record)
                .instrument(span)
                .await
            {
                Ok((result, filtered_out)) => {
                    ready.push(result);
                    ready_rows.push((out.len(), record, filtered_out));
                    out.push(None);
                }
                Err(done) => out.push(Some(done)),
            }
        }
        if !ready.is_empty() {
            let started = std::time::Instant::now();
            let committed = self.state.store.complete_all(ready).await;
            telemetry::processing_committed(started.elapsed());
            for ((at, record, filtered_out), result) in ready_rows.into_iter().zip(committed) {
                // Counted once the decision is committed (a lost lease decides again).
                if result.is_ok() {
                    for destination in &filtered_out {
                        telemetry::destination_filtered(&record.inbox_id, destination);
                    }
                }
                out[at] = Some(committed_outcome(&record, result));
            }
        }
        let out: Vec<Processed> = out.into_iter().flatten().collect();
        for (span, processed) in spans.iter().zip(&out) {
            traces::outcome(
                span,
                processed.outcome_word(|done| match done {
                    Completion::Processed(outcome) => outcome.as_str(),
                    Completion::Waiting { .. } => "waiting",
                }),
            );
        }
        Ok(out)
    }

    /// Runs the row's handlers and filters its destinations; returns what to commit for it
    /// with the destinations its filters left out, or, when a handler (or the payload) failed,
    /// how its failed attempt was recorded.
    async fn prepare(
        &self,
        owner: &str,
        runtime: &Runtime,
        record: &InboxRecord,
    ) -> Result<(ProcessingResult, Vec<String>), Processed> {
        let endpoint = runtime.endpoints.get(&record.endpoint_id);
        if let Some(next) = endpoint.and_then(|e| {
            abandoned(
                &e.config.retry,
                record.attempt_count,
                record.last_error.as_deref(),
            )
        }) {
            return Err(self.record_failure(owner, record, next).await);
        }
        hookgate_core::fail_point!("worker.after_lease");
        // Not reached while leases name the runtime's endpoints (the same snapshot).
        let Some(endpoint) = endpoint else {
            return Err(self
                .fail(
                    owner,
                    record,
                    None,
                    HandlerError::Permanent("endpoint is no longer configured".into()),
                )
                .await);
        };
        let cfg = &endpoint.config;
        if let Some(reason) = api_version_hold(cfg, record) {
            return Err(self.hold(owner, record, reason).await);
        }
        let routes = Routes::of(runtime, &cfg.destinations);
        let mut outputs = Vec::with_capacity(cfg.handlers.len());
        // Opened once for the handlers and the `where` predicates alike.
        let event = if !cfg.handlers.is_empty() || routes.read_payload {
            match self.open(runtime, record) {
                Ok(event) => Some(event),
                Err(e) => return Err(self.fail(owner, record, Some(&cfg.retry), e).await),
            }
        } else {
            None
        };
        if let Some(event) = event.as_ref().filter(|_| !cfg.handlers.is_empty()) {
            for kind in &cfg.handlers {
                let result = match kind {
                    HandlerKind::PaymentsProjection => {
                        let Some(stripe) = runtime.config.providers.stripe.clone() else {
                            let e = HandlerError::Permanent(
                                "[providers.stripe] is not configured".into(),
                            );
                            return Err(self
                                .fail_handler(owner, record, &cfg.retry, kind.name(), e)
                                .await);
                        };
                        let fetcher = StripeFetcher::new(self.http.clone(), stripe);
                        self.run_handler(&PaymentsProjection::new(Arc::new(fetcher)), event)
                            .await
                    }
                };
                match result {
                    Ok(output) => outputs.push(output),
                    Err(e) => {
                        return Err(self
                            .fail_handler(owner, record, &cfg.retry, kind.name(), e)
                            .await);
                    }
                }
            }
        }
        let (destinations, filtered_out) = routes.route(record, event.as_ref());
        Ok((
            ProcessingResult {
                inbox_id: record.inbox_id.clone(),
                owner: owner.to_owned(),
                now_ms: self.state.clock.now_ms(),
                handlers: outputs,
                // One outbox row per destination of the endpoint whose filter the event passes.
                destinations,
                sequence: cfg.sequence.as_ref().map(|s| s.start),
            },
            filtered_out,
        ))
    }

    /// Sets the leased row aside for an operator (`HELD` with `reason`), fenced on the lease.
    async fn hold(&self, owner: &str, record: &InboxRecord, reason: String) -> Processed {
        let held = HeldEvent {
            inbox_id: record.inbox_id.clone(),
            owner: owner.to_owned(),
            now_ms: self.state.clock.now_ms(),
            reason,
        };
        let reason = held.stored_reason();
        match self.state.store.hold_event(held).await {
            Ok(()) => {
                telemetry::event_held(&record.inbox_id, &record.endpoint_id, &reason);
                Processed::Held
            }
            Err(ProcessingError::LeaseLost) => Processed::LeaseLost,
            Err(ProcessingError::Store(e)) => {
                tracing::warn!(inbox_id = %record.inbox_id, error = %e, "holding the event failed; it returns after its lease");
                Processed::StoreFailed
            }
        }
    }

    /// Runs one handler: `prepare` (may do I/O), then `apply` (pure).
    async fn run_handler<H: Handler>(
        &self,
        handler: &H,
        event: &VerifiedEvent,
    ) -> Result<HandlerOutput, HandlerError> {
        let prepared = handler.prepare(event).await?;
        let changes = handler.apply(event, prepared, self.state.clock.now_ms())?;
        Ok(HandlerOutput {
            consumer: handler.name().to_owned(),
            changes,
        })
    }

    /// Decrypts the sealed payload (the row identity is the associated data).
    fn open(&self, runtime: &Runtime, record: &InboxRecord) -> Result<VerifiedEvent, HandlerError> {
        let body = open_payload(&runtime.keyring, record)
            .map_err(|e| HandlerError::Permanent(e.to_string()))?;
        Ok(VerifiedEvent::new(record, body))
    }

    async fn fail_handler(
        &self,
        owner: &str,
        record: &InboxRecord,
        policy: &hookgate_core::retry::RetryPolicy,
        handler: &str,
        error: HandlerError,
    ) -> Processed {
        let error = match error {
            HandlerError::Transient(m) => HandlerError::Transient(format!("{handler}: {m}")),
            HandlerError::Permanent(m) => HandlerError::Permanent(format!("{handler}: {m}")),
            HandlerError::Schema(m) => HandlerError::Schema(format!("{handler}: {m}")),
        };
        self.fail(owner, record, Some(policy), error).await
    }

    /// Records a failed attempt: transient → next attempt with full jitter, unless attempts
    /// are exhausted; anything else → FAILED.
    async fn fail(
        &self,
        owner: &str,
        record: &InboxRecord,
        policy: Option<&hookgate_core::retry::RetryPolicy>,
        error: HandlerError,
    ) -> Processed {
        let now = self.state.clock.now_ms();
        let attempt = attempt_number(record.attempt_count);
        let failure = Failure {
            message: error.to_string(),
            transient: error.is_transient(),
            retry_after: None,
        };
        let next = next_attempt(policy, attempt, failure, now, rand::random::<u64>());
        self.record_failure(owner, record, next).await
    }

    /// Records the failed attempt `next` decided, fenced on the lease.
    async fn record_failure(
        &self,
        owner: &str,
        record: &InboxRecord,
        next: NextAttempt,
    ) -> Processed {
        let now = self.state.clock.now_ms();
        let attempt = attempt_number(record.attempt_count);
        let failed = FailedAttempt {
            inbox_id: record.inbox_id.clone(),
            owner: owner.to_owned(),
            now_ms: now,
            error: next.last_error(),
            retry_at_ms: next.retry_at_ms,
        };
        let recorded = self.state.store.fail_attempt(failed).await;
        let subject = Subject {
            stage: stage::PROCESSING,
            endpoint: &record.endpoint_id,
            inbox_id: &record.inbox_id,
            destination: None,
            attempt,
        };
        settle_failure(&subject, &next, now, recorded)
    }
}

/// Why the row must wait for an operator instead of being processed: its API version stamp is
/// not one the endpoint pins (`api_versions`). An event without a stamp is processed; one an
/// operator released is processed whatever its version (that was the operator's decision).
fn api_version_hold(cfg: &crate::config::EndpointConfig, record: &InboxRecord) -> Option<String> {
    let pinned = cfg.api_versions.as_ref()?;
    let version = record.api_version.as_deref()?;
    if record.released_at_ms.is_some() || pinned.iter().any(|v| v == version) {
        return None;
    }
    Some(format!(
        "api version {version:?} is not in the endpoint's api_versions {pinned:?}"
    ))
}

/// How one row's commit ended, logged and counted.
fn committed_outcome(
    record: &InboxRecord,
    result: Result<Completion, ProcessingError>,
) -> Processed {
    match result {
        Ok(Completion::Processed(outcome)) => {
            hookgate_core::fail_point!("worker.after_apply_commit");
            telemetry::event_processed(&record.inbox_id, &record.endpoint_id, outcome);
            Processed::Completed(Completion::Processed(outcome))
        }
        Ok(waiting @ Completion::Waiting { for_sequence }) => {
            telemetry::event_waiting(
                &record.inbox_id,
                &record.endpoint_id,
                record.sequence_number,
                for_sequence,
            );
            Processed::Completed(waiting)
        }
        Err(ProcessingError::LeaseLost) => {
            tracing::warn!(inbox_id = %record.inbox_id, "lease lost before commit; another worker owns the event");
            Processed::LeaseLost
        }
        Err(ProcessingError::Store(e)) => {
            tracing::warn!(inbox_id = %record.inbox_id, error = %e, "commit of processing failed; the event returns after its lease");
            Processed::StoreFailed
        }
    }
}

/// Starts `[worker] concurrency` supervised worker loops on `state` (none when it is 0).
pub fn start(state: &Arc<AppState>) -> anyhow::Result<Option<StagePool>> {
    let worker = state.runtime.load().config.worker.clone();
    if worker.concurrency == 0 {
        return Ok(None);
    }
    let loops = ProcessingLoops {
        processor: Processor::new(Arc::clone(state))?,
        instance: uuid::Uuid::now_v7(),
    };
    Ok(Some(StagePool::start(
        Arc::new(loops),
        worker.concurrency,
        worker.poll_interval,
        Arc::clone(&state.stages),
    )))
}

/// How long shutdown waits for in-flight events: at most the lease (after it, the event
/// would return to the inbox anyway), at most 10 s.
pub fn grace(state: &AppState) -> Duration {
    state
        .runtime
        .load()
        .config
        .worker
        .lease
        .min(Duration::from_secs(10))
}

/// The processing stage: each loop is one worker with its own lease owner id.
struct ProcessingLoops {
    processor: Processor,
    instance: uuid::Uuid,
}

impl StageLoop for ProcessingLoops {
    /// The loop's lease owner id.
    type Local = String;

    fn name(&self) -> &'static str {
        stage::PROCESSING
    }

    fn start_loop(&self, index: usize) -> String {
        format!("{}/{index}", self.instance)
    }

    async fn step(&self, owner: &mut String, _stop: &mut watch::Receiver<bool>) -> Step {
        let limit = lease_batch(&self.processor.state.runtime.load());
        match self.processor.run_once(owner, limit).await {
            Ok(done) if !done.is_empty() => Step::Busy,
            Ok(_) => Step::Idle,
            Err(e) => {
                tracing::warn!(error = %e, "leasing failed");
                Step::Idle
            }
        }
    }
}

/// Rows a worker leases at once when no endpoint has handlers. Processing is then database
/// work only (version gate, outbox rows, status), so one lease commit serves many rows instead
/// of one each (PostgreSQL, 4 workers saturated: ~60 % more events processed, acknowledgements
/// unchanged).
const LEASE_BATCH_WITHOUT_HANDLERS: u32 = 16;

/// How many rows a worker leases at a time: one while any endpoint has handlers, whose network
/// calls may each take up to their timeout — rows leased together are processed one after
/// another, and a batch of slow calls would outlive its leases.
pub fn lease_batch(runtime: &Runtime) -> u32 {
    if without_handlers(runtime) {
        LEASE_BATCH_WITHOUT_HANDLERS
    } else {
        1
    }
}

/// Whether processing opens payloads: some endpoint has handlers, or a destination that some
/// endpoint lists has `where` predicates (they read the verified payload).
fn reads_payloads(runtime: &Runtime) -> bool {
    runtime.endpoints.values().any(|e| {
        !e.config.handlers.is_empty() || Routes::of(runtime, &e.config.destinations).read_payload
    })
}

/// The destinations of one endpoint with their filters, for one event.
struct Routes<'a> {
    destinations: Vec<(&'a str, Option<&'a DestinationFilter>)>,
    /// Some filter has `where` predicates.
    read_payload: bool,
}

impl<'a> Routes<'a> {
    fn of(runtime: &'a Runtime, ids: &'a [String]) -> Routes<'a> {
        let destinations: Vec<_> = ids
            .iter()
            .map(|id| {
                let filter = runtime
                    .config
                    .destinations
                    .iter()
                    .find(|d| &d.id == id)
                    .and_then(|d| d.filter.as_ref());
                (id.as_str(), filter)
            })
            .collect();
        let read_payload = destinations
            .iter()
            .any(|(_, f)| f.is_some_and(DestinationFilter::reads_payload));
        Routes {
            destinations,
            read_payload,
        }
    }

    /// The destinations that get an outbox row for `record`, and those filtered out.
    fn route(
        &self,
        record: &InboxRecord,
        event: Option<&VerifiedEvent>,
    ) -> (Vec<String>, Vec<String>) {
        // Parsed once for every predicate; a body that is not JSON matches none.
        let payload: Option<serde_json::Value> = if self.read_payload {
            event.and_then(|e| serde_json::from_slice(e.body()).ok())
        } else {
            None
        };
        let input = FilterInput {
            provider: &record.provider,
            event_type: record.event_type.as_deref(),
            payload: payload.as_ref(),
        };
        let mut routed = Vec::with_capacity(self.destinations.len());
        let mut filtered_out = Vec::new();
        for (id, filter) in &self.destinations {
            if filter.is_none_or(|f| f.matches(&input)) {
                routed.push((*id).to_owned());
            } else {
                filtered_out.push((*id).to_owned());
            }
        }
        (routed, filtered_out)
    }
}

/// No endpoint has handlers: processing leases several rows at once.
fn without_handlers(runtime: &Runtime) -> bool {
    runtime
        .endpoints
        .values()
        .all(|e| e.config.handlers.is_empty())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn runtime(endpoint_extra: &str) -> Runtime {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\
             [store]\nurl = \"sqlite:///tmp/unused.db\"\n\
             [payload_encryption]\nactive = 1\n\
             keys = [{{ version = 1, key = \"MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=\" }}]\n\
             [providers.stripe]\napi_key = \"sk_test_x\"\n\
             [[endpoints]]\nid = \"plain\"\nprovider = \"stripe\"\n\
             secrets = [{{ version = \"v1\", value = \"whsec_a\" }}]\n\
             [[endpoints]]\nid = \"other\"\nprovider = \"stripe\"\n\
             secrets = [{{ version = \"v1\", value = \"whsec_b\" }}]\n{endpoint_extra}\n"
        );
        let config = Config::from_toml(&text, Path::new("t.toml"), Path::new("/tmp"))
            .unwrap_or_else(|e| panic!("{e}"));
        Runtime::new(Arc::new(config))
    }

    #[test]
    fn leases_in_batches_only_without_handlers() {
        assert_eq!(lease_batch(&runtime("")), LEASE_BATCH_WITHOUT_HANDLERS);
        assert_eq!(
            lease_batch(&runtime("handlers = [\"payments_projection\"]")),
            1
        );
    }
}
