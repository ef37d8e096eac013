//! The admin listener: `/metrics` (Prometheus; each scrape also reads the durable backlog for
//! the lag gauges), `/healthz` (the process runs), `/readyz`
//! (ready only when the store answers). Kept off the webhook listener so providers never see it.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::state::AppState;
use crate::telemetry;

#[derive(Clone)]
struct AdminState {
    app: Arc<AppState>,
    metrics: PrometheusHandle,
}

pub fn router(app: Arc<AppState>, metrics: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(AdminState { app, metrics })
}

async fn render_metrics(State(s): State<AdminState>) -> String {
    let probe =
        tokio::time::timeout(std::time::Duration::from_secs(1), s.app.store.backlog()).await;
    match probe {
        Ok(Ok(backlog)) => telemetry::backlog_observed(&backlog, s.app.clock.now_ms()),
        _ => telemetry::backlog_unavailable(),
    }
    s.metrics.render()
}

async fn ready(State(s): State<AdminState>) -> (StatusCode, &'static str) {
    let probe = tokio::time::timeout(std::time::Duration::from_secs(1), s.app.store.ping()).await;
    match probe {
        Ok(Ok(())) => (StatusCode::OK, "ready\n"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n"),
    }
}
