//! The admin listener: `/metrics` (Prometheus; each scrape also reads the durable backlog for
//! the lag gauges), `/healthz` (the process runs), `/readyz` (503 only when the store does not
//! answer or a background stage is down; its JSON body lists every problem, degraded ones
//! too: endpoints without a usable secret, a failed reload). Kept off the webhook listener so providers never see it.
//! The operator API ([`api`]) and the web console that uses it ([`console`], `/console`) are
//! served beside them unless the configuration turned the API off.

pub mod api;
pub mod console;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;

use crate::config::AdminConfig;
use crate::state::AppState;
use crate::telemetry;

#[derive(Clone)]
struct AdminState {
    app: Arc<AppState>,
    metrics: PrometheusHandle,
}

pub fn router(app: Arc<AppState>, metrics: PrometheusHandle) -> Router {
    let serve_api = app.runtime.load().config.admin.api;
    let probes = Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(AdminState {
            app: app.clone(),
            metrics,
        });
    if serve_api {
        probes.merge(api::router(app)).merge(console::routes())
    } else {
        probes
    }
}

/// Serves `router` on `listener` until `shutdown` flips: every connection has
/// `request_timeout` to send its request head, and past `max_connections` open ones the next
/// waits in the kernel's accept queue — half-sent requests cannot exhaust the process's file
/// descriptors (which the webhook listener needs too).
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
    config: AdminConfig,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.request_timeout)
        .keep_alive(true);
    let connections = Arc::new(tokio::sync::Semaphore::new(config.max_connections));
    loop {
        let slot = tokio::select! {
            slot = connections.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let service = TowerToHyperService::new(router.clone());
        match &tls {
            None => {
                let connection =
                    graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    let _slot = slot;
                    let _ = connection.await;
                });
            }
            Some(acceptor) => {
                // The handshake runs in the connection's task, bounded like a request head.
                let acceptor = acceptor.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                let timeout = config.request_timeout;
                tokio::spawn(async move {
                    let _slot = slot;
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(timeout, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    let connection =
                        watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
                    let _ = connection.await;
                });
            }
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(crate::ingress::DRAIN_TIMEOUT, graceful.shutdown()).await;
}

async fn render_metrics(State(s): State<AdminState>) -> String {
    let probe =
        tokio::time::timeout(std::time::Duration::from_secs(1), s.app.store.backlog()).await;
    match probe {
        Ok(Ok(backlog)) => telemetry::backlog_observed(&backlog, s.app.clock.now_ms()),
        _ => telemetry::backlog_unavailable(),
    }
    let waiting = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        s.app.store.received_per_endpoint(),
    )
    .await;
    if let Ok(Ok(waiting)) = waiting {
        let runtime = s.app.runtime.load();
        telemetry::orphans_observed(
            waiting
                .iter()
                .filter(|(endpoint, _)| !runtime.endpoints.contains_key(endpoint)),
        );
    }
    s.metrics.render()
}

/// Something `/readyz` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Problem {
    /// The store did not answer a ping within a second.
    StoreUnreachable,
    /// A loop of this background stage died and is not running again yet.
    StageDown { stage: &'static str },
    /// No secret version of this endpoint verifies (none read within its max_age, or all
    /// retired): it answers 503. Listed only, other endpoints keep working.
    NoUsableSecret { endpoint: String },
    /// The last reload failed (the running configuration stays); cleared by a good reload.
    ConfigReloadFailed { reason: String },
}

impl Problem {
    /// Whether the gateway is unready with this problem (degraded states are listed only).
    fn blocks_readiness(&self) -> bool {
        match self {
            Problem::StoreUnreachable | Problem::StageDown { .. } => true,
            Problem::NoUsableSecret { .. } | Problem::ConfigReloadFailed { .. } => false,
        }
    }
}

#[derive(Debug, Serialize)]
struct Readiness {
    ready: bool,
    problems: Vec<Problem>,
}

async fn ready(State(s): State<AdminState>) -> (StatusCode, Json<Readiness>) {
    let probe = tokio::time::timeout(std::time::Duration::from_secs(1), s.app.store.ping()).await;
    let mut problems = Vec::new();
    if !matches!(probe, Ok(Ok(()))) {
        problems.push(Problem::StoreUnreachable);
    }
    problems.extend(
        s.app
            .stages
            .down()
            .into_iter()
            .map(|stage| Problem::StageDown { stage }),
    );
    if s.app.verifies_webhooks {
        let runtime = s.app.runtime.load();
        problems.extend(
            runtime
                .endpoints_without_usable_secret(s.app.clock.now_secs())
                .into_iter()
                .map(|endpoint| Problem::NoUsableSecret { endpoint }),
        );
    }
    if let Some(reason) = s.app.reload_failure.load_full() {
        problems.push(Problem::ConfigReloadFailed {
            reason: reason.as_str().to_owned(),
        });
    }
    let ready = !problems.iter().any(Problem::blocks_readiness);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(Readiness { ready, problems }))
}
