//! OpenTelemetry traces (docs/tracing.md): the spans hookgate records and, with `[tracing]`
//! and the `otlp` feature, their export over OTLP/HTTP (protobuf).
//!
//! Spans are ordinary `tracing` spans with the target [`hookgate_core::TRACE_TARGET`]; only
//! the exporter's layer (`tracing-opentelemetry`) is interested in that target, so logs never
//! show them and, without `[tracing]`, creating one costs a cached callsite check. Their names
//! and attributes are a contract (docs/tracing.md) and never carry a body, a signature, a
//! secret or a header value: endpoint and destination ids, provider ids, our own inbox ids,
//! verdicts, outcomes, attempt numbers and HTTP status codes.
//!
//! The exporter never sits on the request path: ended spans go into the SDK's bounded queue
//! (`max_queue_size`; when full, new spans are dropped and the SDK logs it once), a thread of
//! the batch processor sends them every `export_interval_ms`, and a failed export is counted
//! (`hookgate_trace_export_failures_total`) and its spans dropped. A graceful stop flushes
//! what is buffered, waiting at most [`SHUTDOWN_FLUSH`].

use std::time::Duration;

use hookgate_core::TRACE_TARGET;

/// The longest a graceful stop waits for the last export.
pub const SHUTDOWN_FLUSH: Duration = Duration::from_secs(5);

/// The `ingress.request` span of one webhook request; `verdict` and the rest are recorded
/// by [`request_answered`].
pub fn request_span(endpoint: &str, provider: &str) -> tracing::Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: None,
        "ingress.request",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        hookgate.endpoint = endpoint,
        hookgate.provider = provider,
        hookgate.verdict = tracing::field::Empty,
        hookgate.reason = tracing::field::Empty,
        hookgate.inbox_id = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    )
}

/// Records how a request was answered on its span. `reason` is a rejection's fixed reason
/// (`missing_event_id`), never text from the request.
pub fn request_answered(
    span: &tracing::Span,
    verdict: &'static str,
    reason: Option<&'static str>,
    inbox_id: Option<&str>,
    status: u16,
) {
    if span.is_disabled() {
        return;
    }
    span.record("hookgate.verdict", verdict);
    if let Some(reason) = reason {
        span.record("hookgate.reason", reason);
    }
    if let Some(id) = inbox_id {
        span.record("hookgate.inbox_id", id);
    }
    span.record("http.response.status_code", u64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
}

/// The `worker.attempt` span of one processing attempt (a trace of its own: the request's
/// trace context is not stored with the row; `hookgate.inbox_id` joins them).
pub fn attempt_span(inbox_id: &str, endpoint: &str, provider: &str, attempt: u32) -> tracing::Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: None,
        "worker.attempt",
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        hookgate.inbox_id = inbox_id,
        hookgate.endpoint = endpoint,
        hookgate.provider = provider,
        hookgate.attempt = attempt,
        hookgate.outcome = tracing::field::Empty,
    )
}

/// The `relay.delivery` span of one delivery attempt to one destination.
pub fn delivery_span(
    inbox_id: &str,
    endpoint: &str,
    destination: &str,
    kind: &'static str,
    attempt: u32,
) -> tracing::Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        parent: None,
        "relay.delivery",
        otel.kind = "producer",
        otel.status_code = tracing::field::Empty,
        hookgate.inbox_id = inbox_id,
        hookgate.endpoint = endpoint,
        hookgate.destination = destination,
        hookgate.destination.kind = kind,
        hookgate.attempt = attempt,
        hookgate.outcome = tracing::field::Empty,
        hookgate.error = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    )
}

/// Records the response status of an HTTP destination.
pub fn http_status(span: &tracing::Span, status: u16) {
    span.record("http.response.status_code", u64::from(status));
}

/// Records why a delivery attempt did not succeed: the redacted reason (status codes and
/// error kinds, never bodies, secrets or URLs with credentials), bounded.
pub fn delivery_error(span: &tracing::Span, error: &hookgate_relay::DeliveryError) {
    if span.is_disabled() {
        return;
    }
    let reason: String = error.to_string().chars().take(256).collect();
    span.record("hookgate.error", reason.as_str());
}

/// Records how an attempt or delivery ended: `failed` and `retrying` mark the span an error.
pub fn outcome(span: &tracing::Span, outcome: &'static str) {
    if span.is_disabled() {
        return;
    }
    span.record("hookgate.outcome", outcome);
    if matches!(outcome, "failed" | "retrying" | "store_failed") {
        span.record("otel.status_code", "error");
    }
}

/// The W3C `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`), for the requests it
/// makes; `None` when traces are not exported.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        if !sc.is_valid() {
            return None;
        }
        Some(format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ))
    }
    #[cfg(not(feature = "otlp"))]
    None
}

#[cfg(feature = "otlp")]
pub use export::{Exporter, start};

#[cfg(feature = "otlp")]
mod export {
    use std::time::Duration;

    use opentelemetry::KeyValue;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{
        BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, SpanData,
        SpanExporter,
    };

    use crate::config::traces::TracingConfig;
    use crate::telemetry;

    /// The running exporter; [`Exporter::shutdown`] flushes it.
    pub struct Exporter {
        provider: SdkTracerProvider,
    }

    impl Exporter {
        /// Exports what is buffered, waiting at most `timeout`, and stops the exporter.
        pub fn shutdown(self, timeout: Duration) {
            if let Err(e) = self.provider.shutdown_with_timeout(timeout) {
                tracing::warn!(error = %e, "trace export: the last spans may not have been sent");
            }
        }
    }

    /// Builds the exporter of `config` and its tracer. Must run outside a Tokio runtime:
    /// the blocking HTTP client owns one of its own.
    pub fn start(config: &TracingConfig) -> anyhow::Result<(Exporter, SdkTracer)> {
        let client = reqwest::blocking::Client::builder()
            .user_agent(concat!("hookgate/", env!("CARGO_PKG_VERSION")))
            .timeout(config.export_timeout)
            .redirect(reqwest::redirect::Policy::none())
            // As for destinations: no HTTP(S)_PROXY / ALL_PROXY from the environment.
            .no_proxy()
            .build()?;
        let headers = config
            .headers
            .iter()
            .map(|h| (h.name.clone(), h.value.expose().to_owned()))
            .collect();
        let otlp = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.traces_url.as_str())
            .with_timeout(config.export_timeout)
            .with_headers(headers)
            .build()?;
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(config.max_queue_size)
            .with_max_export_batch_size(config.max_queue_size.min(512))
            .with_scheduled_delay(config.export_interval)
            .build();
        let processor = BatchSpanProcessor::builder(CountingExporter { inner: otlp })
            .with_batch_config(batch)
            .build();
        // Not `Resource::builder()`: its detectors read OTEL_SERVICE_NAME and
        // OTEL_RESOURCE_ATTRIBUTES, and the config file is what says what this service is.
        let resource = Resource::builder_empty()
            .with_service_name(config.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("hookgate");
        Ok((Exporter { provider }, tracer))
    }

    /// The OTLP exporter, counting the spans of every failed export.
    #[derive(Debug)]
    struct CountingExporter {
        inner: opentelemetry_otlp::SpanExporter,
    }

    impl SpanExporter for CountingExporter {
        fn export(
            &self,
            batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            let spans = batch.len();
            let export = self.inner.export(batch);
            async move {
                let result = export.await;
                if let Err(e) = &result {
                    telemetry::trace_export_failed(spans, &e.to_string());
                }
                result
            }
        }

        fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
            self.inner.shutdown_with_timeout(timeout)
        }

        fn force_flush(&mut self) -> OTelSdkResult {
            self.inner.force_flush()
        }

        fn set_resource(&mut self, resource: &Resource) {
            self.inner.set_resource(resource);
        }
    }
}
