//! OpenTelemetry traces through the real binary: a collector stand-in on loopback accepts
//! OTLP/HTTP `POST /v1/traces`, decodes each protobuf `ExportTraceServiceRequest` and keeps the
//! spans; the gateway, with `[tracing]`, must export `ingress.request` (with the verdict),
//! `store.commit_batch` (linked to the request), `worker.attempt` and `relay.delivery`, and
//! the HTTP destination must get the delivery span's `traceparent`. Without `[tracing]`, no
//! destination gets a `traceparent`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

use crate::delivery::{DEST_SECRET, Receiver, WAIT, delivered, event_body, http_destination};
use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTLP_TOKEN: &str = "Bearer otlp-collector-token-7c1e";

/// One export request as the collector stand-in saw it.
#[derive(Debug, Clone)]
struct Export {
    headers: HashMap<String, String>,
    raw: Vec<u8>,
    request: ExportTraceServiceRequest,
}

#[derive(Default)]
struct CollectorState {
    exports: Mutex<Vec<Export>>,
    /// The status every export is answered with (200 unless a test makes it fail).
    status: AtomicU16,
}

/// A collector stand-in speaking OTLP/HTTP with protobuf bodies.
#[derive(Clone)]
struct Collector {
    addr: SocketAddr,
    state: Arc<CollectorState>,
}

impl Collector {
    async fn start(status: u16) -> Collector {
        let state = Arc::new(CollectorState::default());
        state.status.store(status, Ordering::SeqCst);
        let router = axum::Router::new()
            .route("/v1/traces", axum::routing::post(collect))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Collector { addr, state }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn exports(&self) -> Vec<Export> {
        self.state.exports.lock().unwrap().clone()
    }

    /// Every span received, with the `service.name` of its resource.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for export in self.exports() {
            for rs in export.request.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| string_attr(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        out.push((service.clone(), span));
                    }
                }
            }
        }
        out
    }
}

async fn collect(
    State(state): State<Arc<CollectorState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let request = ExportTraceServiceRequest::decode(body.as_ref())
        .expect("an OTLP/HTTP protobuf ExportTraceServiceRequest");
    let headers = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    state.exports.lock().unwrap().push(Export {
        headers,
        raw: body.to_vec(),
        request,
    });
    StatusCode::from_u16(state.status.load(Ordering::SeqCst)).unwrap()
}

fn string_attr(
    attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<String> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            Value::StringValue(s) => s.clone(),
            Value::IntValue(i) => i.to_string(),
            Value::BoolValue(b) => b.to_string(),
            Value::DoubleValue(d) => d.to_string(),
            other => format!("{other:?}"),
        })
}

fn attr(span: &Span, key: &str) -> Option<String> {
    string_attr(&span.attributes, key)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn tracing_section(collector: &Collector, interval_ms: u64) -> String {
    format!(
        "[tracing]\notlp_endpoint = {}\nservice_name = \"hookgate-it\"\nsample_ratio = 1.0\n\
         export_interval_ms = {interval_ms}\nheaders = {{ authorization = \"file:otlp-token\" }}\n",
        q(&collector.base_url())
    )
}

/// The collector token the `[tracing]` section reads (`file:otlp-token`, beside the config).
fn write_token(files: &crate::support::GatewayFiles) {
    let path = files.dir.path().join("otlp-token");
    std::fs::write(&path, OTLP_TOKEN).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

fn endpoint() -> String {
    endpoint_toml(
        "sw",
        "standard_webhooks",
        &[SW_SECRET],
        "destinations = [\"hook\"]",
    )
}

/// A signed event with a `traceparent` of the sender's own (which must not become a parent).
async fn send_with_foreign_traceparent(
    addr: SocketAddr,
    event_id: &str,
    body: &[u8],
) -> RawResponse {
    let mut headers = signed_headers("standard_webhooks", SW_SECRET, event_id, unix_now(), body);
    headers.push((
        "traceparent".into(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
    ));
    send_raw_async(addr, build_request("POST", "/webhooks/sw", &headers, body)).await
}

/// Spans of the one accepted event and the one rejected request, exported at the graceful
/// stop (the export interval is longer than the test).
async fn traces_cover_the_event(backend: Backend) {
    let collector = Collector::start(200).await;
    let destination = Receiver::start().await;
    let files = crate::delivery::gateway(backend)
        .section(&tracing_section(&collector, 60_000))
        .destinations(&http_destination("hook", &destination.url(), ""))
        .endpoints(&endpoint())
        .write()
        .await;
    write_token(&files);
    let (code, checked, _) = run_hookgate(&files.config_path, &["config", "check"]);
    assert_eq!(code, 0, "{checked}");
    assert!(checked.contains("\n[tracing]\n"), "{checked}");
    assert!(
        checked.contains("# header \"authorization\" from file:"),
        "{checked}"
    );
    assert!(
        !checked.contains(OTLP_TOKEN),
        "config check shows the token"
    );
    let gateway = files.serve(None);
    let body = event_body(7, 1);
    let accepted = send_with_foreign_traceparent(gateway.addr(), "msg_traced_1", &body).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let inbox_id = accepted.json()["id"].as_str().unwrap().to_owned();
    let forged = post_signed(
        gateway.addr(),
        "sw",
        "standard_webhooks",
        "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "msg_forged",
        unix_now(),
        &body,
    )
    .await;
    assert_eq!(forged.status, 401, "{}", forged.body);
    let store = files.open_store().await;
    wait_until("the delivery is recorded", WAIT, || async {
        delivered(&store).await == 1
    })
    .await;
    assert!(
        collector.exports().is_empty(),
        "nothing is exported before the interval or the stop"
    );
    let logs = gateway.terminate();

    // What the collector got: protobuf with the configured header, after the stop.
    let exports = collector.exports();
    assert!(!exports.is_empty(), "the stop flushed the buffered spans");
    for export in &exports {
        assert_eq!(export.headers["content-type"], "application/x-protobuf");
        assert_eq!(export.headers["authorization"], OTLP_TOKEN);
        for secret in [SW_SECRET, DEST_SECRET] {
            assert!(
                !export
                    .raw
                    .windows(secret.len())
                    .any(|w| w == secret.as_bytes()),
                "an export carries a secret"
            );
        }
        assert!(
            !export.raw.windows(body.len()).any(|w| w == body.as_slice()),
            "an export carries the payload"
        );
        assert!(
            !export.raw.windows(9).any(|w| w == b"\"amount\":"),
            "an export carries payload bytes"
        );
    }
    assert!(!logs.contains(OTLP_TOKEN), "the collector token is logged");

    let spans = collector.spans();
    let named = |name: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(_, s)| s)
            .collect()
    };
    assert!(spans.iter().all(|(service, _)| service == "hookgate-it"));

    let requests = named("ingress.request");
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let request = requests
        .iter()
        .find(|s| attr(s, "hookgate.verdict").as_deref() == Some("accepted"))
        .expect("the accepted request's span");
    assert_eq!(attr(request, "hookgate.endpoint").as_deref(), Some("sw"));
    assert_eq!(
        attr(request, "hookgate.provider").as_deref(),
        Some("standard_webhooks")
    );
    assert_eq!(
        attr(request, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(attr(request, "hookgate.inbox_id"), Some(inbox_id.clone()));
    assert!(
        request.parent_span_id.is_empty(),
        "an incoming traceparent is not trusted as a parent"
    );
    assert_ne!(hex(&request.trace_id), "0af7651916cd43dd8448eb211c80319c");
    let rejected = requests
        .iter()
        .find(|s| attr(s, "hookgate.verdict").as_deref() == Some("invalid_signature"))
        .expect("the rejected request's span says its verdict");
    assert_eq!(
        attr(rejected, "http.response.status_code").as_deref(),
        Some("401")
    );
    assert_eq!(attr(rejected, "hookgate.inbox_id"), None);

    let backend_name = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let batch = named("store.commit_batch")
        .into_iter()
        .find(|b| {
            b.links
                .iter()
                .any(|l| l.span_id == request.span_id && l.trace_id == request.trace_id)
        })
        .expect("a commit batch links to the accepted request's span");
    assert_eq!(
        attr(batch, "hookgate.store.backend").as_deref(),
        Some(backend_name)
    );
    assert_eq!(attr(batch, "hookgate.batch.rows").as_deref(), Some("1"));
    assert_eq!(
        attr(batch, "hookgate.batch.outcome").as_deref(),
        Some("committed")
    );
    assert!(batch.parent_span_id.is_empty(), "a batch is a root span");

    let attempts = named("worker.attempt");
    let attempt = attempts
        .iter()
        .find(|s| attr(s, "hookgate.inbox_id") == Some(inbox_id.clone()))
        .expect("the processing attempt's span");
    assert_eq!(attr(attempt, "hookgate.endpoint").as_deref(), Some("sw"));
    assert_eq!(attr(attempt, "hookgate.attempt").as_deref(), Some("1"));
    assert_eq!(
        attr(attempt, "hookgate.outcome").as_deref(),
        Some("applied")
    );

    let deliveries = named("relay.delivery");
    assert_eq!(deliveries.len(), 1, "{deliveries:#?}");
    let delivery = deliveries[0];
    assert_eq!(attr(delivery, "hookgate.inbox_id"), Some(inbox_id.clone()));
    assert_eq!(
        attr(delivery, "hookgate.destination").as_deref(),
        Some("hook")
    );
    assert_eq!(
        attr(delivery, "hookgate.destination.kind").as_deref(),
        Some("http")
    );
    assert_eq!(
        attr(delivery, "hookgate.outcome").as_deref(),
        Some("delivered")
    );
    assert_eq!(
        attr(delivery, "http.response.status_code").as_deref(),
        Some("200")
    );

    // The destination got the delivery span's context.
    let received = destination.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].headers.get("traceparent").map(String::as_str),
        Some(
            format!(
                "00-{}-{}-01",
                hex(&delivery.trace_id),
                hex(&delivery.span_id)
            )
            .as_str()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_cover_request_batch_attempt_and_delivery_sqlite() {
    traces_cover_the_event(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_cover_request_batch_attempt_and_delivery_postgres() {
    traces_cover_the_event(Backend::Postgres).await;
}

/// Without `[tracing]` nothing reaches the collector and destinations get no `traceparent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tracing_no_trace_context_is_sent() {
    let collector = Collector::start(200).await;
    let destination = Receiver::start().await;
    let files = crate::delivery::gateway(Backend::Sqlite)
        .destinations(&http_destination("hook", &destination.url(), ""))
        .endpoints(&endpoint())
        .write()
        .await;
    let gateway = files.serve(None);
    let accepted =
        send_with_foreign_traceparent(gateway.addr(), "msg_untraced_1", &event_body(8, 1)).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let store = files.open_store().await;
    wait_until("the delivery is recorded", WAIT, || async {
        delivered(&store).await == 1
    })
    .await;
    gateway.terminate();
    let received = destination.received();
    assert_eq!(received.len(), 1);
    assert!(
        !received[0].headers.contains_key("traceparent"),
        "{:?}",
        received[0].headers
    );
    assert!(collector.exports().is_empty());
}

/// A collector that refuses every export costs the requests nothing: they are answered as
/// always, and the lost spans are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_collector_never_fails_requests_and_is_counted() {
    let collector = Collector::start(503).await;
    let files = crate::delivery::gateway(Backend::Sqlite)
        .section(&tracing_section(&collector, 100))
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
        .write()
        .await;
    write_token(&files);
    let gateway = files.serve(None);
    let admin = gateway.admin.expect("an admin listener");
    for n in 0..3 {
        let r = post_signed(
            gateway.addr(),
            "sw",
            "standard_webhooks",
            SW_SECRET,
            &format!("msg_refused_{n}"),
            unix_now(),
            &event_body(n, 1),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    wait_until("failed exports are counted", WAIT, || async {
        metric(admin, "hookgate_trace_export_failures_total").is_some_and(|n| n >= 1.0)
    })
    .await;
    assert!(!collector.exports().is_empty(), "exports were attempted");
    let logs = gateway.terminate();
    assert!(logs.contains("trace export failed"), "{logs}");
    assert!(!logs.contains(OTLP_TOKEN));
}
