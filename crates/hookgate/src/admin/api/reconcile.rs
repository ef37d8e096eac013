//! `/api/v1/reconcile…`: reconciliation runs and their findings. A run requested here is its
//! own record (`reconcile_runs`, not a bulk job: it selects no events by filter), stored
//! `pending` and run by a `reconcile` stage (the worker processes'), which leases it; scope
//! `operate` to start one (audited `reconcile.start`), `read` to look.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use hookgate_store::{
    FindingKind, FindingQuery, FindingRecord, NewRun, RunRecord, RunState, RunTrigger,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::types::rfc3339;
use super::{ApiState, Audit};
use crate::config::admin::Scope;

/// `POST /api/v1/reconcile`'s body (every field optional).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReconcileRequest {
    /// One configured endpoint; absent: every endpoint.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// RFC 3339: only events received (deliveries created) at or after it.
    #[serde(default)]
    pub since: Option<String>,
    /// Find and list (action `dry_run`), change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `202` of `POST /api/v1/reconcile`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReconcileStarted {
    pub id: String,
    /// `pending`: a `reconcile` stage runs it next.
    pub state: String,
}

/// A reconciliation run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReconcileRun {
    pub id: String,
    /// `schedule`, `cli` or `api`.
    pub trigger: String,
    pub endpoint: Option<String>,
    pub since: Option<String>,
    pub dry_run: bool,
    /// `pending`, `running`, `done` or `failed`.
    pub state: String,
    pub requested_by: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Once done: per endpoint, findings per kind (`{"endpoints": [{"endpoint", "found":
    /// {kind: n}, "more"}], "total"}`).
    #[schema(value_type = Option<Object>)]
    pub summary: Option<serde_json::Value>,
    /// Why a `failed` run stopped.
    pub error: Option<String>,
}

impl From<&RunRecord> for ReconcileRun {
    fn from(r: &RunRecord) -> Self {
        Self {
            id: r.run_id.clone(),
            trigger: r.trigger.as_str().to_owned(),
            endpoint: r.endpoint_id.clone(),
            since: r.since_ms.map(rfc3339),
            dry_run: r.dry_run,
            state: r.state.as_str().to_owned(),
            requested_by: r.requested_by.clone(),
            created_at: rfc3339(r.created_at_ms),
            started_at: r.started_at_ms.map(rfc3339),
            finished_at: r.finished_at_ms.map(rfc3339),
            summary: r
                .summary
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok()),
            error: r.last_error.clone(),
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    /// Opaque, ascending: newer findings have greater ids.
    pub id: String,
    pub run_id: String,
    /// `received_overdue`, `missing_outbox`, `outbox_stuck`, `orphan_marker` or `sequence_waiting`.
    pub kind: String,
    pub endpoint: String,
    pub provider: Option<String>,
    pub provider_event_id: Option<String>,
    /// The event (absent for an orphan marker, whose event is gone).
    pub inbox_id: Option<String>,
    /// The delivery's destination (`missing_outbox`, `outbox_stuck`).
    pub destination: Option<String>,
    /// The marker's consumer (`orphan_marker`).
    pub consumer: Option<String>,
    /// `made_due`, `enqueued`, `reported` or `dry_run`.
    pub action: String,
    pub found_at: String,
}

impl From<&FindingRecord> for Finding {
    fn from(f: &FindingRecord) -> Self {
        Self {
            id: f.finding_id.to_string(),
            run_id: f.run_id.clone(),
            kind: f.kind.as_str().to_owned(),
            endpoint: f.endpoint_id.clone(),
            provider: f.provider.clone(),
            provider_event_id: f.provider_event_id.clone(),
            inbox_id: f.inbox_id.clone(),
            destination: f.destination.clone(),
            consumer: f.consumer.clone(),
            action: f.action.as_str().to_owned(),
            found_at: rfc3339(f.found_at_ms),
        }
    }
}

/// A page of `GET /api/v1/reconcile/findings`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FindingPage {
    pub findings: Vec<Finding>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

fn parse_since(text: &str) -> Result<i64, ApiError> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| ApiError::bad_request("since must be an RFC 3339 time"))
}

/// Starts a reconciliation run; a `reconcile` stage runs it.
#[utoipa::path(
    post,
    path = "/api/v1/reconcile",
    request_body = ReconcileRequest,
    responses(
        (status = 202, body = ReconcileStarted),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "unknown_endpoint"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn start(
    State(s): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<ReconcileStarted>), ApiError> {
    let token = s
        .authorize(&headers, Scope::Operate, "reconcile.start", "-")
        .await?;
    let request: ReconcileRequest = if body.is_empty() {
        ReconcileRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("the body is not a reconcile request: {e}"))
        })?
    };
    let since_ms = request.since.as_deref().map(parse_since).transpose()?;
    let detail = serde_json::json!({
        "endpoint": request.endpoint,
        "since": request.since,
        "dry_run": request.dry_run,
    });
    if let Some(endpoint) = &request.endpoint {
        let configured = s.app.runtime.load().config.endpoint(endpoint).is_some();
        if !configured {
            let audit = Audit::new(&token, "reconcile.start", "-").detail(detail);
            let error = ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_endpoint",
                Some(format!("no endpoint {endpoint:?} is configured")),
            );
            return Err(s.refused(audit, error).await);
        }
    }
    let id = uuid::Uuid::now_v7().to_string();
    s.app
        .store
        .create_run(NewRun {
            run_id: id.clone(),
            trigger: RunTrigger::Api,
            endpoint_id: request.endpoint.clone(),
            since_ms,
            dry_run: request.dry_run,
            state: RunState::Pending,
            requested_by: token.clone(),
            owner: None,
            lease_ms: 0,
            now_ms: s.app.clock.now_ms(),
        })
        .await?;
    s.record(
        Audit::new(&token, "reconcile.start", &id)
            .detail(detail)
            .ok(),
    )
    .await?;
    tracing::info!(run_id = %id, token = %token, "reconcile run requested");
    Ok((
        StatusCode::ACCEPTED,
        Json(ReconcileStarted {
            id,
            state: RunState::Pending.as_str().to_owned(),
        }),
    ))
}

/// One reconciliation run, with its summary once done.
#[utoipa::path(
    get,
    path = "/api/v1/reconcile/runs/{id}",
    params(("id" = String, Path, description = "the run id")),
    responses(
        (status = 200, body = ReconcileRun),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub async fn show_run(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<ReconcileRun>, ApiError> {
    s.authorize(&headers, Scope::Read, "reconcile.show", &id)
        .await?;
    let run = s
        .app
        .store
        .get_run(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("such run"))?;
    Ok(Json(ReconcileRun::from(&run)))
}

/// Findings of reconciliation runs, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/reconcile/findings",
    params(
        ("run" = Option<String>, Query, description = "only this run's"),
        ("kind" = Option<String>, Query, description = "received_overdue, missing_outbox, outbox_stuck, orphan_marker or sequence_waiting"),
        ("endpoint" = Option<String>, Query, description = "only this endpoint's"),
        ("limit" = Option<u32>, Query, description = "1 to 500, default 50"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, body = FindingPage),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub async fn findings(
    State(s): State<ApiState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<FindingPage>, ApiError> {
    s.authorize(&headers, Scope::Read, "reconcile.findings", "-")
        .await?;
    let mut query = FindingQuery {
        limit: super::query::DEFAULT_LIMIT,
        ..Default::default()
    };
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "run" => query.run_id = Some(value.into_owned()),
            "endpoint" => query.endpoint_id = Some(value.into_owned()),
            "kind" => {
                query.kind = Some(FindingKind::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(
                        "kind must be received_overdue, missing_outbox, outbox_stuck, \
                         orphan_marker or sequence_waiting",
                    )
                })?);
            }
            "limit" => {
                query.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=hookgate_store::reconcile::MAX_FINDINGS_PAGE).contains(n))
                    .ok_or_else(|| ApiError::bad_request("limit must be 1 to 500"))?;
            }
            "cursor" => {
                query.before_id = Some(value.parse::<i64>().map_err(|_| {
                    ApiError::bad_request("malformed cursor: pass next_cursor as it was given")
                })?);
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: only run, kind, endpoint, limit and cursor"
                )));
            }
        }
    }
    let limit = query.limit;
    query.limit = limit + 1;
    let mut rows = s.app.store.list_findings(&query).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|f| f.finding_id.to_string())
    } else {
        None
    };
    Ok(Json(FindingPage {
        findings: rows.iter().map(Finding::from).collect(),
        next_cursor,
    }))
}
