//! Logs and metrics. Each observable thing has one function here that counts and logs
//! together, so metric names are not scattered strings. Nothing here ever sees a body, a
//! signature or a secret: only endpoint ids, provider ids, outcomes and our own inbox ids.
//! The `metrics` macros are allowed only in this file (`clippy.toml`).
#![allow(clippy::disallowed_macros)]

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::config::{LogConfig, LogFormat};
use crate::ingress::response::Answer;

pub const REQUESTS: &str = "hookgate_requests_total";
pub const ACK_LATENCY: &str = "hookgate_ack_latency_seconds";
pub const COMMIT_LATENCY: &str = "hookgate_commit_latency_seconds";
pub const SECRET_MATCHED: &str = "hookgate_secret_version_matched_total";
pub const COMMIT_FAILURES: &str = "hookgate_commit_failures_total";
pub const INBOX_RECEIVED: &str = "hookgate_inbox_received";
pub const INBOX_OLDEST_AGE: &str = "hookgate_inbox_oldest_received_age_seconds";
pub const INBOX_FAILED: &str = "hookgate_inbox_failed";
pub const OUTBOX_PENDING: &str = "hookgate_outbox_pending";
pub const OUTBOX_OLDEST_AGE: &str = "hookgate_outbox_oldest_pending_age_seconds";
pub const OUTBOX_FAILED: &str = "hookgate_outbox_failed";
pub const EVENTS_ORPHANED: &str = "hookgate_events_orphaned";
pub const EVENTS_UNVERSIONED: &str = "hookgate_events_unversioned_total";
pub const BACKLOG_PROBE_FAILURES: &str = "hookgate_backlog_probe_failures_total";
pub const EVENTS_PROCESSED: &str = "hookgate_events_processed_total";
pub const EVENTS_FAILED: &str = "hookgate_events_failed_total";
pub const DELIVERIES: &str = "hookgate_deliveries_total";
pub const BACKGROUND_RESTARTS: &str = "hookgate_background_restarts_total";
pub const BACKGROUND_STAGE_UP: &str = "hookgate_background_stage_up";
pub const SECRET_AGE: &str = "hookgate_secret_age_seconds";
pub const SECRET_REFRESH_FAILURES: &str = "hookgate_secret_refresh_failures_total";
pub const ENDPOINT_SECRET_USABLE: &str = "hookgate_endpoint_secret_usable";
pub const CONFIG_RELOAD_FAILURES: &str = "hookgate_config_reload_failures_total";
pub const CONFIG_LAST_RELOAD_OK: &str = "hookgate_config_last_reload_successful";
pub const PAYLOAD_KEY_ROWS: &str = "hookgate_payload_key_rows";
pub const PAYLOADS_RESEALED: &str = "hookgate_payloads_resealed_total";
pub const RESEAL_FAILURES: &str = "hookgate_payload_reseal_failures_total";
pub const TLS_CERT_RELOADS: &str = "hookgate_tls_certificate_reloads_total";
pub const RETENTION_PURGED: &str = "hookgate_retention_purged_total";
pub const OLDEST_PAYLOAD_AGE: &str = "hookgate_oldest_payload_age_seconds";
pub const RETENTION_FAILURES: &str = "hookgate_retention_failures_total";
pub const JOB_EVENTS: &str = "hookgate_job_events_total";
pub const JOBS_FINISHED: &str = "hookgate_jobs_finished_total";
pub const REJECTIONS: &str = "hookgate_rejections_total";
pub const REJECTIONS_DROPPED: &str = "hookgate_rejections_dropped_total";
pub const REJECTION_FLUSH_FAILURES: &str = "hookgate_rejection_flush_failures_total";
pub const ADMIN_API_AUDITED: &str = "hookgate_admin_api_audited_total";
pub const PROCESSING_RETRIES: &str = "hookgate_processing_retries_total";
pub const PROCESSING_COMMIT_LATENCY: &str = "hookgate_processing_commit_latency_seconds";
pub const DELIVERY_COMMIT_LATENCY: &str = "hookgate_delivery_commit_latency_seconds";
pub const EVENTS_HELD: &str = "hookgate_events_held";
pub const DESTINATION_FILTERED: &str = "hookgate_destination_filtered_total";
pub const TRANSFORM_SKIPPED: &str = "hookgate_transform_skipped_total";
pub const RECONCILE_FINDINGS: &str = "hookgate_reconcile_findings_total";
pub const RECONCILE_RUNS: &str = "hookgate_reconcile_runs_total";
/// Objects of sequenced endpoints whose gap is open (events wait or are held for a missing
/// sequence), read from the store at each scrape.
pub const SEQUENCE_GAPS_OPEN: &str = "hookgate_sequence_gaps_open";
pub const RECONCILED: &str = "hookgate_reconciled_total";
pub const PROVIDER_RECONCILE_RUNS: &str = "hookgate_provider_reconcile_runs_total";
/// Spans lost because their OTLP export failed (the collector refused them or was away).
pub const TRACE_EXPORT_FAILURES: &str = "hookgate_trace_export_failures_total";

// Finer between 50 and 250 ms, where overload behaviour is judged (the 100 ms target).
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0, 2.0,
    5.0,
];

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global metrics recorder once per process and returns its handle.
pub fn metrics_handle() -> PrometheusHandle {
    PROMETHEUS
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            // In tests several gateways share one process; the first recorder wins.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Sets up `tracing` output. Safe to call more than once (later calls are ignored).
pub fn init_logging(log: &LogConfig) {
    install_subscriber(log, None);
}

/// What [`init_logging_and_traces`] started besides logs: the trace exporter, if any.
#[must_use = "finish() flushes the buffered spans"]
pub struct TraceExport {
    #[cfg(feature = "otlp")]
    exporter: Option<crate::traces::Exporter>,
}

impl TraceExport {
    /// Exports the spans still buffered (bounded by [`crate::traces::SHUTDOWN_FLUSH`]). Call
    /// outside the Tokio runtime, after the gateway drained.
    pub fn finish(self) {
        #[cfg(feature = "otlp")]
        if let Some(exporter) = self.exporter {
            exporter.shutdown(crate::traces::SHUTDOWN_FLUSH);
        }
    }
}

/// Sets up `tracing` output and, with `[tracing]`, the OTLP trace exporter as a second layer
/// that sees only the trace spans ([`hookgate_core::TRACE_TARGET`]). Call before starting a
/// Tokio runtime (the exporter's HTTP client owns one).
pub fn init_logging_and_traces(
    log: &LogConfig,
    tracing_config: Option<&crate::config::traces::TracingConfig>,
) -> anyhow::Result<TraceExport> {
    #[cfg(feature = "otlp")]
    {
        let Some(config) = tracing_config else {
            install_subscriber(log, None);
            return Ok(TraceExport { exporter: None });
        };
        let (exporter, tracer) = crate::traces::start(config)?;
        counter!(TRACE_EXPORT_FAILURES).increment(0);
        install_subscriber(log, Some(tracer));
        tracing::info!(
            traces_url = %config.traces_url,
            sample_ratio = config.sample_ratio,
            "exporting traces over OTLP"
        );
        Ok(TraceExport {
            exporter: Some(exporter),
        })
    }
    #[cfg(not(feature = "otlp"))]
    {
        // Refused at load: `[tracing]` needs the `otlp` feature.
        debug_assert!(tracing_config.is_none());
        install_subscriber(log, None);
        Ok(TraceExport {})
    }
}

#[cfg(feature = "otlp")]
type Tracer = opentelemetry_sdk::trace::SdkTracer;
#[cfg(not(feature = "otlp"))]
type Tracer = std::convert::Infallible;

/// The log layer (`HOOKGATE_LOG`, else `log.level`; never the trace spans) and, given a
/// tracer, the OpenTelemetry layer (only the trace spans).
fn install_subscriber(log: &LogConfig, tracer: Option<Tracer>) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::FilterExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    type Boxed = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&log.level));
    let not_traces =
        tracing_subscriber::filter::filter_fn(|meta| meta.target() != hookgate_core::TRACE_TARGET);
    let fmt: Boxed = match log.format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
    };
    #[cfg_attr(not(feature = "otlp"), allow(unused_mut))]
    let mut layers: Vec<Boxed> = vec![fmt.with_filter(filter.and(not_traces)).boxed()];
    #[cfg(feature = "otlp")]
    if let Some(tracer) = tracer {
        let only_traces = tracing_subscriber::filter::Targets::new()
            .with_target(hookgate_core::TRACE_TARGET, tracing::Level::INFO);
        layers.push(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_filter(only_traces)
                .boxed(),
        );
    }
    #[cfg(not(feature = "otlp"))]
    let _ = tracer;
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

/// Spans whose export failed, dropped (never retried: the exporter must not grow a backlog).
pub fn trace_export_failed(spans: usize, error: &str) {
    counter!(TRACE_EXPORT_FAILURES).increment(spans as u64);
    // The collector's answer may be long; its first part says enough.
    let error: String = error.chars().take(300).collect();
    tracing::warn!(spans, error, "trace export failed; its spans are dropped");
}

/// A webhook request got its answer.
pub fn request_answered(
    endpoint: &str,
    provider: &'static str,
    answer: &Answer,
    elapsed: Duration,
) {
    let outcome = answer.outcome();
    counter!(REQUESTS, "outcome" => outcome, "endpoint" => endpoint.to_owned(), "provider" => provider)
        .increment(1);
    if let Some(id) = answer.acknowledged_id() {
        histogram!(ACK_LATENCY, "endpoint" => endpoint.to_owned()).record(elapsed.as_secs_f64());
        if matches!(answer, Answer::ReplaySuspected { .. }) {
            // A verified body already accepted under another unsigned id: a captured request
            // replayed with a fresh id header (or a provider re-sending under a new id).
            tracing::info!(endpoint, provider, outcome, inbox_id = %id, "replay suspected; answered as duplicate");
        } else {
            tracing::debug!(endpoint, provider, outcome, inbox_id = %id, "webhook acknowledged");
        }
        return;
    }
    match answer {
        Answer::Unavailable { .. } | Answer::Internal => {
            tracing::warn!(endpoint, provider, outcome, "webhook not acknowledged");
        }
        Answer::Handshake(_) => tracing::debug!(endpoint, provider, outcome, "handshake answered"),
        _ => tracing::debug!(endpoint, provider, outcome, "webhook rejected"),
    }
}

/// How a row's trip to the store ended, for the commit metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitEnd {
    /// Committed (a new row or a duplicate's lookup).
    Committed,
    /// The store failed the commit.
    Failed,
    /// Shed by the commit queue (`Overloaded`): it never reached a transaction.
    Shed,
}

impl CommitEnd {
    pub fn of<T>(result: &Result<T, hookgate_store::StoreError>) -> CommitEnd {
        match result {
            Ok(_) => CommitEnd::Committed,
            Err(hookgate_store::StoreError::Overloaded) => CommitEnd::Shed,
            Err(_) => CommitEnd::Failed,
        }
    }
}

/// A commit (or its failure) finished, `elapsed` after the request reached the store. A shed
/// row is neither: it is left out of the latency histogram (answered at once, it would make
/// commits look faster exactly under overload) and is not a commit failure.
pub fn commit_finished(elapsed: Duration, end: CommitEnd) {
    match end {
        CommitEnd::Shed => return,
        CommitEnd::Failed => counter!(COMMIT_FAILURES).increment(1),
        CommitEnd::Committed => {}
    }
    histogram!(COMMIT_LATENCY).record(elapsed.as_secs_f64());
}

/// The processing transaction of one lease (`complete_all`: version gate, business changes,
/// outbox rows, `PROCESSED`) took `elapsed`, whatever its rows' results.
pub fn processing_committed(elapsed: Duration) {
    histogram!(PROCESSING_COMMIT_LATENCY).record(elapsed.as_secs_f64());
}

/// A delivery's fenced result (`DELIVERED`, or the failed attempt) took `elapsed` to record.
pub fn delivery_committed(elapsed: Duration) {
    histogram!(DELIVERY_COMMIT_LATENCY).record(elapsed.as_secs_f64());
}

/// Which secret version verified a request (for rotation: retire the old one when unused).
pub fn secret_matched(endpoint: &str, version: &str) {
    counter!(SECRET_MATCHED, "endpoint" => endpoint.to_owned(), "version" => version.to_owned())
        .increment(1);
}

/// The durable backlog as read at a `/metrics` scrape: what is waiting, how old the oldest
/// waiting item is, and what failed. These are the figures to alert on.
pub fn backlog_observed(b: &hookgate_store::Backlog, now_ms: i64) {
    let age = |at: Option<i64>| at.map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0);
    gauge!(INBOX_RECEIVED).set(b.received as f64);
    gauge!(INBOX_OLDEST_AGE).set(age(b.oldest_received_at_ms));
    gauge!(INBOX_FAILED).set(b.failed as f64);
    gauge!(OUTBOX_PENDING).set(b.outbox_pending as f64);
    gauge!(OUTBOX_OLDEST_AGE).set(age(b.oldest_pending_at_ms));
    gauge!(OUTBOX_FAILED).set(b.outbox_failed as f64);
    gauge!(EVENTS_HELD).set(b.held as f64);
    gauge!(SEQUENCE_GAPS_OPEN).set(b.sequence_gaps_open as f64);
    // The failure counter exists from the first scrape, so `rate()` sees its first failure.
    counter!(BACKLOG_PROBE_FAILURES).increment(0);
}

/// `RECEIVED` rows of endpoints missing from the config, read at a `/metrics` scrape: they
/// are not leased (their attempts do not grow) and resume when the endpoint is configured
/// again. Each such endpoint is named in a warning.
pub fn orphans_observed<'a>(orphaned: impl Iterator<Item = &'a (String, u64)>) {
    let mut total = 0u64;
    for (endpoint, rows) in orphaned {
        total += rows;
        tracing::warn!(
            endpoint,
            rows,
            "events wait for an endpoint that is not configured; they resume when it is"
        );
    }
    gauge!(EVENTS_ORPHANED).set(total as f64);
}

/// The endpoint's `object_version_pointer` found no usable version in a verified event: it
/// is stored without one, and the version gate does not order it.
pub fn event_unversioned(endpoint: &str) {
    counter!(EVENTS_UNVERSIONED, "endpoint" => endpoint.to_owned()).increment(1);
    tracing::warn!(
        endpoint,
        "object_version_pointer resolved to no integer version; the version gate is skipped for this event"
    );
}

/// The backlog could not be read for a scrape; the gauges keep their last values.
pub fn backlog_unavailable() {
    counter!(BACKLOG_PROBE_FAILURES).increment(1);
    tracing::warn!("backlog probe failed; lag gauges are stale");
}

/// An inbox row's processing was committed with `outcome`.
pub fn event_processed(inbox_id: &str, endpoint: &str, outcome: hookgate_core::Outcome) {
    tracing::debug!(inbox_id, endpoint, %outcome, "event processed");
    counter!(EVENTS_PROCESSED, "outcome" => outcome.as_str()).increment(1);
}

/// A sequenced event arrived ahead of its object's next one: it waits (not due, its attempt
/// not counted) until the missing one is applied, or its gap is held.
pub fn event_waiting(inbox_id: &str, endpoint: &str, sequence: Option<i64>, waits_for: i64) {
    tracing::info!(
        inbox_id,
        endpoint,
        sequence,
        waits_for,
        "event waits for an earlier sequence of its object"
    );
}

/// The sequence-gap check held an object's waiting events: its missing sequence outlived
/// `sequence_gap_seconds` or more than `sequence_gap_max` events waited for it.
pub fn sequence_gap_held(endpoint: &str, object_id: &str, missing: i64, rows: u64) {
    tracing::warn!(
        endpoint,
        object_id,
        missing,
        rows,
        "sequence gap held for an operator; `hookgate events release` applies the held events over it"
    );
}

/// An endpoint with `sequence_pointer` received an event whose sequence (or object id) it
/// could not read: that event is applied without waiting for its turn.
pub fn event_unsequenced(endpoint: &str) {
    tracing::warn!(
        endpoint,
        "sequence_pointer (or the object id) resolved to nothing usable; the event is applied without sequence order"
    );
}

/// A leased row was set aside for an operator (`HELD`); `hookgate_events_held` counts what
/// is held at each scrape.
pub fn event_held(inbox_id: &str, endpoint: &str, reason: &str) {
    tracing::warn!(
        inbox_id,
        endpoint,
        reason,
        "event held for an operator; `hookgate events release` processes it"
    );
}

/// A processed event got no outbox row for `destination`: its filter did not match.
pub fn destination_filtered(inbox_id: &str, destination: &str) {
    tracing::debug!(inbox_id, destination, "filtered out for the destination");
    counter!(DESTINATION_FILTERED, "destination" => destination.to_owned()).increment(1);
}

/// A delivery was settled `DELIVERED` without sending: the destination's transform gave `null`.
pub fn transform_skipped(inbox_id: &str, destination: &str) {
    tracing::debug!(inbox_id, destination, "skipped: transform output null");
    counter!(TRANSFORM_SKIPPED, "destination" => destination.to_owned()).increment(1);
}

/// A leased row was delivered and marked `DELIVERED`.
pub fn delivered(inbox_id: &str, destination: &str, attempt: u32, duplicate: bool) {
    if duplicate {
        tracing::info!(
            inbox_id,
            destination,
            attempt,
            "delivered (deduplicated by the destination: an earlier publish had landed)"
        );
    } else {
        tracing::debug!(inbox_id, destination, attempt, "delivered");
    }
    counter!(DELIVERIES, "destination" => destination.to_owned(), "result" => "delivered")
        .increment(1);
}

/// An attempt failed and the row is due again in `retry_in_ms`.
pub fn attempt_retrying(
    subject: &crate::stage::attempt::Subject<'_>,
    retry_in_ms: i64,
    error: &str,
) {
    let crate::stage::attempt::Subject {
        stage,
        endpoint,
        inbox_id,
        destination,
        attempt,
    } = *subject;
    tracing::info!(
        stage,
        endpoint,
        inbox_id,
        destination,
        attempt,
        retry_in_ms,
        error,
        "attempt failed; will retry"
    );
    match destination {
        Some(destination) => {
            counter!(DELIVERIES, "destination" => destination.to_owned(), "result" => "retrying")
                .increment(1);
        }
        None => counter!(PROCESSING_RETRIES, "endpoint" => endpoint.to_owned()).increment(1),
    }
}

/// An attempt failed for good: the row is `FAILED` (an operator may retry it).
pub fn attempt_failed(subject: &crate::stage::attempt::Subject<'_>, error: &str) {
    let crate::stage::attempt::Subject {
        stage,
        endpoint,
        inbox_id,
        destination,
        attempt,
    } = *subject;
    tracing::warn!(
        stage,
        endpoint,
        inbox_id,
        destination,
        attempt,
        error,
        "attempt failed; the row is FAILED"
    );
    match destination {
        Some(destination) => {
            counter!(DELIVERIES, "destination" => destination.to_owned(), "result" => "failed")
                .increment(1);
        }
        None => counter!(EVENTS_FAILED).increment(1),
    }
}

/// Recording a failed attempt failed: the row returns after its lease.
pub fn attempt_not_recorded(
    subject: &crate::stage::attempt::Subject<'_>,
    error: &hookgate_store::StoreError,
) {
    let crate::stage::attempt::Subject {
        stage,
        inbox_id,
        destination,
        ..
    } = *subject;
    tracing::warn!(stage, inbox_id, destination, error = %error, "recording the failed attempt failed; the row returns after its lease");
}

/// A background stage starts: its gauge and restart counter exist from now on.
pub fn stage_registered(stage: &'static str) {
    counter!(BACKGROUND_RESTARTS, "stage" => stage).increment(0);
    stage_up(stage, true);
}

/// Whether every loop of a background stage runs (1) or one is down (0).
pub fn stage_up(stage: &'static str, up: bool) {
    gauge!(BACKGROUND_STAGE_UP, "stage" => stage).set(if up { 1.0 } else { 0.0 });
}

/// A loop of a background stage stopped without being asked to; it restarts after `backoff`.
pub fn stage_loop_died(stage: &'static str, index: usize, cause: &str, backoff: Duration) {
    tracing::error!(
        stage,
        index,
        cause,
        restart_in_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
        "background loop died; restarting it"
    );
}

/// A loop that died runs again.
pub fn stage_loop_restarted(stage: &'static str, index: usize) {
    counter!(BACKGROUND_RESTARTS, "stage" => stage).increment(1);
    tracing::info!(stage, index, "background loop restarted");
}

/// A request found no usable secret version: it is answered 503 (fail closed).
pub fn no_usable_secret(endpoint: &str) {
    tracing::error!(
        endpoint,
        "no usable secret version for endpoint (retired, expired, or not read within max_age): 503"
    );
}

/// Reading a secret version's source failed; its cached value (if any) keeps serving until
/// its `max_age`. The error names the source, never the value.
pub fn secret_refresh_failed(endpoint: &str, version: &str, error: &crate::secrets::SecretError) {
    counter!(SECRET_REFRESH_FAILURES, "endpoint" => endpoint.to_owned()).increment(1);
    tracing::warn!(endpoint, version, error = %error, "secret refresh failed; the cached value serves until its max_age");
}

/// A secret version that failed to refresh was read again.
pub fn secret_recovered(endpoint: &str, version: &str) {
    tracing::info!(endpoint, version, "secret read again after failures");
}

/// The secret gauges, once per refresher pass: each version's age since its last
/// successful read, and whether each endpoint has a version that verifies.
pub fn secrets_observed(runtime: &crate::state::Runtime, now_secs: i64) {
    for endpoint in runtime.endpoints.values() {
        let id = endpoint.config.id.clone();
        counter!(SECRET_REFRESH_FAILURES, "endpoint" => id.clone()).increment(0);
        for slot in &endpoint.secrets {
            if let Some(age) = slot.age() {
                gauge!(SECRET_AGE, "endpoint" => id.clone(), "version" => slot.config.version.clone())
                    .set(age.as_secs_f64());
            }
        }
        let usable = !endpoint.usable_secrets(now_secs).is_empty();
        gauge!(ENDPOINT_SECRET_USABLE, "endpoint" => id).set(if usable { 1.0 } else { 0.0 });
    }
}

/// The configuration was loaded at start-up: no reload has failed yet.
pub fn config_loaded() {
    counter!(CONFIG_RELOAD_FAILURES).increment(0);
    gauge!(CONFIG_LAST_RELOAD_OK).set(1.0);
}

/// A reload (SIGHUP) failed: the running configuration stays. The gauge stays 0 until a
/// reload succeeds (what `/readyz` shows as `config_reload_failed`): the alert's signal.
pub fn config_reload_failed(reason: &str) {
    counter!(CONFIG_RELOAD_FAILURES).increment(1);
    gauge!(CONFIG_LAST_RELOAD_OK).set(0.0);
    tracing::error!(reason, "reload failed; keeping the running configuration");
}

/// A reload succeeded.
pub fn config_reloaded() {
    counter!(CONFIG_RELOAD_FAILURES).increment(0);
    gauge!(CONFIG_LAST_RELOAD_OK).set(1.0);
    tracing::info!("configuration reloaded");
}

/// Stored payloads per key version (`counts`), and 0 for every other `configured` version.
pub fn payload_key_rows(counts: &[hookgate_store::KeyVersionRows], configured: &[u32]) {
    for version in configured {
        if !counts.iter().any(|c| c.version == *version) {
            gauge!(PAYLOAD_KEY_ROWS, "version" => version.to_string()).set(0.0);
        }
    }
    for c in counts {
        gauge!(PAYLOAD_KEY_ROWS, "version" => c.version.to_string()).set(c.rows as f64);
    }
}

/// A batch of payloads re-sealed from key version `from` to `to` (progress of a rotation).
pub fn payloads_resealed(from: u32, to: u32, written: u64, remaining_before: u64) {
    counter!(PAYLOADS_RESEALED, "from_version" => from.to_string()).increment(written);
    tracing::info!(
        from_version = from,
        to_version = to,
        resealed = written,
        remaining = remaining_before.saturating_sub(written),
        "payloads re-sealed with the active key"
    );
}

/// A stored payload that could not be opened to re-seal it (left as it is).
pub fn reseal_failed(inbox_id: &str, version: u32, reason: &str) {
    counter!(RESEAL_FAILURES).increment(1);
    tracing::error!(
        inbox_id,
        key_version = version,
        reason,
        "cannot re-seal a stored payload"
    );
}

/// The re-seal stage could not read or write the store this step (it tries again later).
pub fn reseal_store_failed(error: &hookgate_store::StoreError) {
    counter!(RESEAL_FAILURES).increment(1);
    tracing::warn!(error = %error, "re-seal batch failed; retrying later");
}

/// The webhook listener's certificate files were read again: `result` is `"reloaded"`,
/// `"unchanged"` is not counted, or `"failed"` (the previous certificate stays).
pub fn tls_certificate_reload(result: &'static str, reason: Option<&str>) {
    counter!(TLS_CERT_RELOADS, "result" => result).increment(1);
    match reason {
        None => tracing::info!("server.tls: certificate and key reloaded"),
        Some(reason) => tracing::error!(
            reason,
            "server.tls: the new certificate or key is unusable; still serving the previous one"
        ),
    }
}

/// What retention removed in one batch: `what` is `payload`, `inbox`, `outbox`,
/// `processed_marker`, `object_state` or `replay_digest` (an operator's `events purge`
/// counts as `payload_on_request`). Counted only when non-zero.
pub fn retention_purged(what: &'static str, rows: u64) {
    if rows > 0 {
        counter!(RETENTION_PURGED, "what" => what).increment(rows);
    }
}

/// One retention pass ended: what it removed in total, how long it took, and the age of the
/// oldest payload still stored (0 when none is).
pub fn retention_pass_finished(
    removed: &crate::stage::retention::PassTotals,
    elapsed: Duration,
    oldest_payload_ms: Option<i64>,
    now_ms: i64,
) {
    let age = oldest_payload_ms.map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0);
    gauge!(OLDEST_PAYLOAD_AGE).set(age);
    tracing::info!(
        payloads = removed.payloads,
        inbox = removed.inbox,
        outbox = removed.outbox,
        processed_markers = removed.processed_markers,
        object_state = removed.object_state,
        replay_digests = removed.replay_digests,
        reclaimed_pages = removed.reclaimed_pages,
        elapsed_ms = elapsed.as_millis() as u64,
        oldest_payload_age_seconds = age,
        "retention pass finished"
    );
}

/// A retention batch failed (the store is down or refused it); the pass stops and the next
/// one starts after the interval.
pub fn retention_failed(what: &'static str, error: &hookgate_store::StoreError) {
    counter!(RETENTION_FAILURES).increment(1);
    tracing::warn!(what, error = %error, "retention batch failed; retrying at the next pass");
}

/// An operator purged payloads (`hookgate events purge`), recorded in the audit log.
pub fn payloads_purged_by_operator(actor: &str, purged: u64, audit_id: &str) {
    counter!(RETENTION_PURGED, "what" => "payload_on_request").increment(purged);
    tracing::warn!(
        actor,
        purged,
        audit_id,
        "payloads purged on operator request"
    );
}

/// A bulk job's first run started, with the events its filter matched.
pub fn job_started(job_id: &str, action: &str, total: u64) {
    tracing::info!(job_id, action, total, "bulk job started");
}

/// A bulk job's batch committed: `done` events took the action, `failed` could not.
pub fn job_batch(action: &'static str, done: u64, failed: u64) {
    counter!(JOB_EVENTS, "action" => action, "result" => "done").increment(done);
    counter!(JOB_EVENTS, "action" => action, "result" => "failed").increment(failed);
}

/// A reconciliation run found (and repaired, or reported) lost work.
pub fn reconcile_finding(
    kind: &'static str,
    endpoint: &str,
    inbox_id: Option<&str>,
    action: &'static str,
) {
    counter!(RECONCILE_FINDINGS, "kind" => kind).increment(1);
    tracing::warn!(
        kind,
        endpoint,
        inbox_id = inbox_id.unwrap_or("-"),
        action,
        "reconcile finding"
    );
}

/// A reconciliation run ended (`done` or `failed`), started by `trigger`.
pub fn reconcile_run_finished(
    run_id: &str,
    trigger: &'static str,
    found: u64,
    error: Option<&str>,
) {
    let result = if error.is_some() { "failed" } else { "done" };
    counter!(RECONCILE_RUNS, "trigger" => trigger, "result" => result).increment(1);
    match error {
        None => tracing::info!(run_id, trigger, found, "reconcile run finished"),
        Some(error) => tracing::warn!(run_id, trigger, found, error, "reconcile run failed"),
    }
}

/// Provider reconciliation looked at one event or delivery: `found` (brought in),
/// `already_present` (its row exists: a duplicate, nothing else happens), `answered` (no row,
/// but the provider lists a 2xx answer to it: not asked again) or `redelivered` (a
/// redelivery requested from the provider).
pub fn reconciled(provider: &'static str, endpoint: &str, event_id: &str, outcome: &'static str) {
    counter!(RECONCILED, "provider" => provider, "outcome" => outcome).increment(1);
    if outcome != "already_present" {
        tracing::info!(provider, endpoint, event_id, outcome, "provider reconcile");
    }
}

/// A provider reconciliation run of one endpoint ended (`done` or `failed`, with why).
pub fn provider_reconcile_finished(provider: &'static str, endpoint: &str, error: Option<&str>) {
    let result = if error.is_some() { "failed" } else { "done" };
    counter!(PROVIDER_RECONCILE_RUNS, "provider" => provider, "result" => result).increment(1);
    match error {
        None => tracing::info!(provider, endpoint, "provider reconcile run finished"),
        Some(error) => tracing::warn!(provider, endpoint, error, "provider reconcile run failed"),
    }
}

/// A no-retry window of the endpoint was written (recorded, or its open window extended).
pub fn no_retry_window_recorded(endpoint: &str, started_at_ms: i64, ended_at_ms: i64) {
    tracing::info!(
        endpoint,
        started_at_ms,
        ended_at_ms,
        "no-retry window recorded: the next provider reconciliation covers it"
    );
}

/// The gateway answered a provider that never retries with non-2xx: its no-retry window
/// could not be written yet (kept in memory, written when the store is back).
pub fn no_retry_window_pending(endpoint: &str, error: &hookgate_store::StoreError) {
    tracing::warn!(endpoint, error = %error, "no-retry window kept in memory until the store is back");
}

/// A reconciliation store call failed; the stage tries again at its next step.
pub fn reconcile_store_failed(what: &'static str, error: &hookgate_store::StoreError) {
    tracing::warn!(what, error = %error, "reconcile: store call failed");
}

/// A bulk job ended (`done` or `failed`, with why).
pub fn job_finished(job_id: &str, state: &'static str, error: Option<&str>) {
    counter!(JOBS_FINISHED, "state" => state).increment(1);
    match error {
        None => tracing::info!(job_id, state, "bulk job finished"),
        Some(error) => tracing::warn!(job_id, state, error, "bulk job failed"),
    }
}

/// A runner let a job go: paused, cancelled, or taken over by another runner.
pub fn job_released(job_id: &str, state: Option<&'static str>) {
    tracing::info!(
        job_id,
        state = state.unwrap_or("gone"),
        "bulk job released by its runner"
    );
}

/// A job's store call failed; the job is taken again after its lease.
pub fn job_store_failed(job_id: &str, error: &hookgate_store::StoreError) {
    tracing::warn!(job_id, error = %error, "bulk job: store call failed; retried after the lease");
}

/// A rejected webhook request (every one, sampled into the log or not).
pub fn request_rejected(cause: &'static str) {
    counter!(REJECTIONS, "cause" => cause).increment(1);
}

/// Sampled rejections dropped because the in-memory ring was full (never blocks the ingress).
pub fn rejections_dropped(n: u64) {
    counter!(REJECTIONS_DROPPED).increment(n);
}

/// Writing the rejection log failed; those entries are lost (the counts are kept for the
/// next flush).
pub fn rejection_flush_failed(error: &hookgate_store::StoreError, entries: usize) {
    counter!(REJECTION_FLUSH_FAILURES).increment(1);
    tracing::warn!(error = %error, entries, "rejection log: flush failed");
}

/// An operator API request written to the audit log: `action` (`decrypt`, `replay`, …, or a
/// refused read's `events.list`) and `result` (`ok`, `denied`, or a refusal's code) — a
/// rising `denied` count is someone trying tokens.
pub fn api_audited(action: &str, result: &str) {
    counter!(ADMIN_API_AUDITED, "action" => action.to_owned(), "result" => result.to_owned())
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples in the commit-latency histogram after `ends`, read from a recorder of its own.
    fn commit_samples(ends: &[CommitEnd]) -> u64 {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
            .expect("non-empty buckets")
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            for end in ends {
                commit_finished(Duration::from_micros(50), *end);
            }
        });
        let rendered = handle.render();
        rendered
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{COMMIT_LATENCY}_count ")))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    }

    #[test]
    fn shed_rows_stay_out_of_the_commit_latency_histogram() {
        assert_eq!(
            commit_samples(&[CommitEnd::Shed, CommitEnd::Shed, CommitEnd::Shed]),
            0
        );
        assert_eq!(
            commit_samples(&[CommitEnd::Committed, CommitEnd::Shed, CommitEnd::Failed]),
            2
        );
        assert_eq!(
            CommitEnd::of::<()>(&Err(hookgate_store::StoreError::Overloaded)),
            CommitEnd::Shed
        );
        assert_eq!(
            CommitEnd::of::<()>(&Err(hookgate_store::StoreError::Unavailable("x".into()))),
            CommitEnd::Failed
        );
        assert_eq!(CommitEnd::of(&Ok(())), CommitEnd::Committed);
    }
}
