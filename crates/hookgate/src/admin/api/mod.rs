//! The operator API on the admin listener (`/api/v1/…`, `/openapi.json`): bearer tokens
//! with scopes ([`auth`]), JSON errors ([`error`]), the event list and its filters
//! ([`query`]), one event, its payload and the operations ([`events`]), the audit log
//! ([`audit`]), reconciliation runs and findings ([`reconcile`]); the OpenAPI 3.1 document is generated from these handlers and types
//! ([`openapi`]).
//!
//! Every decrypt and every operation is recorded in `audit_log` (token name, action, target,
//! filter, result), and so is every refused request (`result = "denied"`). Other routers
//! (bulk jobs, rejections, the console) merge into [`router`]'s result.

pub mod audit;
pub mod auth;
pub mod error;
pub mod events;
pub mod jobs;
pub mod openapi;
pub mod query;
pub mod reconcile;
pub mod rejections;
pub mod types;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use hookgate_store::NewAudit;

use self::auth::Refusal;
use self::error::ApiError;
use crate::config::admin::Scope;
use crate::state::AppState;

/// Longest `target` an audit entry of a refused request keeps (it comes from the path).
const MAX_AUDIT_TARGET_CHARS: usize = 128;

/// What every handler of the API sees.
#[derive(Clone)]
pub struct ApiState {
    pub app: Arc<AppState>,
}

/// The operator API's routes (with their state applied).
pub fn router(app: Arc<AppState>) -> Router {
    Router::new()
        .route("/openapi.json", get(openapi::document))
        .route("/api/v1/events", get(events::list))
        .route("/api/v1/events/release", post(events::release))
        .route("/api/v1/events/{id}", get(events::show))
        .route("/api/v1/events/{id}/payload", get(events::payload))
        .route("/api/v1/events/{id}/retry", post(events::retry))
        .route("/api/v1/events/{id}/replay", post(events::replay))
        .route("/api/v1/audit", get(audit::list))
        .route("/api/v1/jobs", get(jobs::list).post(jobs::create))
        .route("/api/v1/jobs/{id}", get(jobs::show))
        .route("/api/v1/jobs/{id}/pause", post(jobs::pause))
        .route("/api/v1/jobs/{id}/resume", post(jobs::resume))
        .route("/api/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/api/v1/rejections", get(rejections::list))
        .route("/api/v1/reconcile", post(reconcile::start))
        .route("/api/v1/reconcile/runs/{id}", get(reconcile::show_run))
        .route("/api/v1/reconcile/findings", get(reconcile::findings))
        .with_state(ApiState { app })
}

/// An audit entry being built.
pub struct Audit {
    entry: NewAudit,
}

impl Audit {
    pub fn new(token: &str, action: &str, target: &str) -> Self {
        Self {
            entry: NewAudit {
                audit_id: String::new(),
                at_ms: 0,
                actor: token.to_owned(),
                action: action.to_owned(),
                target: target.to_owned(),
                filter: None,
                result: String::new(),
                detail: None,
            },
        }
    }

    pub fn ok(mut self) -> Self {
        self.entry.result = "ok".into();
        self
    }

    pub fn detail(mut self, detail: serde_json::Value) -> Self {
        self.entry.detail = Some(detail.to_string());
        self
    }

    pub fn filter(mut self, filter: serde_json::Value) -> Self {
        self.entry.filter = Some(filter.to_string());
        self
    }
}

impl ApiState {
    /// The caller's token name if it may use `scope`; otherwise the refusal (401 / 403),
    /// audited with `result = "denied"` as `action` on `target`.
    pub async fn authorize(
        &self,
        headers: &HeaderMap,
        scope: Scope,
        action: &str,
        target: &str,
    ) -> Result<String, ApiError> {
        let refused = {
            let tokens = self.app.api_tokens.load();
            match tokens.authorize(headers, scope) {
                Ok(name) => return Ok(name.to_owned()),
                Err((refusal, name)) => (refusal, name.map(str::to_owned)),
            }
        };
        let (refusal, name) = refused;
        let error = match refusal {
            Refusal::Unauthenticated => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                Some("send Authorization: Bearer <token> with a configured token".into()),
            ),
            Refusal::Forbidden => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                Some(format!("this token has no {:?} scope", scope.as_str())),
            ),
        };
        // The target comes from the request's path: bounded before it is stored.
        let target: String = target.chars().take(MAX_AUDIT_TARGET_CHARS).collect();
        let mut audit = Audit::new(name.as_deref().unwrap_or("-"), action, &target);
        audit.entry.result = "denied".into();
        audit = audit.detail(serde_json::json!({ "scope": scope.as_str() }));
        if let Err(e) = self.record(audit).await {
            tracing::warn!(error = ?e.body, "a refused request could not be audited");
        }
        Err(error)
    }

    /// Writes `audit` (stamped now); a store error is 503 and the answer is not sent.
    pub async fn record(&self, audit: Audit) -> Result<(), ApiError> {
        let mut entry = audit.entry;
        entry.audit_id = uuid::Uuid::now_v7().to_string();
        entry.at_ms = self.app.clock.now_ms();
        let (action, result) = (entry.action.clone(), entry.result.clone());
        self.app
            .store
            .record_audit(entry)
            .await
            .map(|()| crate::telemetry::api_audited(&action, &result))
            .map_err(|e| {
                tracing::warn!(error = %e, "operator API: audit write failed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    Some("the audit log could not be written".into()),
                )
            })
    }

    /// Audits an operation the store (or the request) refused, with the error's code as
    /// its result, and gives the error back.
    pub async fn refused(&self, mut audit: Audit, error: ApiError) -> ApiError {
        audit.entry.result = error.code().to_owned();
        match self.record(audit).await {
            Ok(()) => error,
            Err(e) => e,
        }
    }
}
