//! `/api/v1/jobs…`: bulk retry / replay / redeliver by filter, stored in the database and run
//! by the `jobs` stage (scope `operate` to create and control, `read` to look; audited as
//! `job.create`, `job.pause`, `job.resume`, `job.cancel`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use hookgate_store::{JobAction, JobControl, JobControlResult, JobRecord, NewJob};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::types::rfc3339;
use super::{ApiState, Audit};
use crate::config::admin::Scope;

/// `POST /api/v1/jobs`'s body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// `retry` (FAILED events and FAILED deliveries), `replay` (through processing) or
    /// `redeliver` (to `destination`).
    pub action: String,
    /// The events list's query-parameter names and values (`status`, `endpoint_id`,
    /// `event_type`, `received_after`, …), without `limit` and `cursor`.
    #[schema(value_type = Object)]
    pub filter: serde_json::Value,
    /// For `redeliver`: the configured destination.
    #[serde(default)]
    pub destination: Option<String>,
    /// For `redeliver`: a new Idempotency-Key per event (recorded on its delivery).
    #[serde(default)]
    pub fresh_key: bool,
}

/// `201` of `POST /api/v1/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobCreated {
    pub id: String,
}

/// How far a job got.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobProgress {
    /// Events the filter matched when the job first started (`null` before).
    pub total: Option<u64>,
    /// Events the action applied to.
    pub done: u64,
    /// Events it could not apply to (not in a state the action takes, payload purged).
    pub failed: u64,
}

/// A bulk job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: String,
    /// `retry`, `replay` or `redeliver`.
    pub action: String,
    #[schema(value_type = Object)]
    pub filter: serde_json::Value,
    pub destination: Option<String>,
    pub fresh_key: bool,
    /// `pending`, `running`, `paused`, `cancelled`, `done` or `failed`.
    pub state: String,
    pub progress: JobProgress,
    /// The token that created it.
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    /// Why a `failed` job stopped.
    pub error: Option<String>,
}

impl From<&JobRecord> for Job {
    fn from(j: &JobRecord) -> Self {
        Self {
            id: j.job_id.clone(),
            action: j.action.as_str().to_owned(),
            filter: serde_json::from_str(&j.filter).unwrap_or(serde_json::Value::Null),
            destination: j.destination.clone(),
            fresh_key: j.fresh_key,
            state: j.state.as_str().to_owned(),
            progress: JobProgress {
                total: j.total,
                done: j.done,
                failed: j.failed,
            },
            created_by: j.created_by.clone(),
            created_at: rfc3339(j.created_at_ms),
            updated_at: rfc3339(j.updated_at_ms),
            finished_at: j.finished_at_ms.map(rfc3339),
            error: j.last_error.clone(),
        }
    }
}

/// A page of `GET /api/v1/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

fn unknown_destination(d: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_destination",
        Some(format!("no destination {d:?} is configured")),
    )
}

/// Creates a bulk job; the `jobs` stage runs it.
#[utoipa::path(
    post,
    path = "/api/v1/jobs",
    request_body = JobRequest,
    responses(
        (status = 201, body = JobCreated),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "unknown_destination"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn create(
    State(s): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<JobCreated>), ApiError> {
    let token = s
        .authorize(&headers, Scope::Operate, "job.create", "-")
        .await?;
    let request: JobRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a job request: {e}")))?;
    let action = JobAction::parse(&request.action)
        .ok_or_else(|| ApiError::bad_request("action must be retry, replay or redeliver"))?;
    crate::stage::jobs::parse_filter(&request.filter).map_err(ApiError::bad_request)?;
    let audit = Audit::new(&token, "job.create", "-").filter(request.filter.clone());
    match (action, &request.destination) {
        (JobAction::Redeliver, None) => {
            return Err(ApiError::bad_request("a redeliver job names a destination"));
        }
        (JobAction::Redeliver, Some(d)) => {
            let configured = s
                .app
                .runtime
                .load()
                .config
                .destinations
                .iter()
                .any(|c| c.id == *d);
            if !configured {
                return Err(s.refused(audit, unknown_destination(d)).await);
            }
        }
        (_, Some(_)) => {
            return Err(ApiError::bad_request(
                "only a redeliver job names a destination",
            ));
        }
        (_, None) if request.fresh_key => {
            return Err(ApiError::bad_request("fresh_key is for redeliver jobs"));
        }
        _ => {}
    }
    let id = uuid::Uuid::now_v7().to_string();
    s.app
        .store
        .create_job(NewJob {
            job_id: id.clone(),
            action,
            filter: request.filter.to_string(),
            destination: request.destination.clone(),
            fresh_key: request.fresh_key,
            created_by: token.clone(),
            now_ms: s.app.clock.now_ms(),
        })
        .await?;
    let mut audit = Audit::new(&token, "job.create", &id)
        .filter(request.filter.clone())
        .ok();
    audit = audit.detail(serde_json::json!({
        "action": action.as_str(),
        "destination": request.destination,
        "fresh_key": request.fresh_key,
    }));
    s.record(audit).await?;
    tracing::info!(job_id = %id, action = action.as_str(), token = %token, "bulk job created");
    Ok((StatusCode::CREATED, Json(JobCreated { id })))
}

/// One job with its progress.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{id}",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, body = Job),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub async fn show(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Job>, ApiError> {
    s.authorize(&headers, Scope::Read, "job.show", &id).await?;
    let job = s
        .app
        .store
        .get_job(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("such job"))?;
    Ok(Json(Job::from(&job)))
}

/// Jobs, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/jobs",
    params(
        ("limit" = Option<u32>, Query, description = "1 to 500, default 50"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, body = JobPage),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
pub async fn list(
    State(s): State<ApiState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<JobPage>, ApiError> {
    s.authorize(&headers, Scope::Read, "job.list", "-").await?;
    let mut limit = super::query::DEFAULT_LIMIT;
    let mut cursor: Option<String> = None;
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "limit" => {
                limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=hookgate_store::operator::MAX_PAGE).contains(n))
                    .ok_or_else(|| ApiError::bad_request("limit must be 1 to 500"))?;
            }
            "cursor" => {
                if value.is_empty()
                    || value.len() > 64
                    || !value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                {
                    return Err(ApiError::bad_request(
                        "malformed cursor: pass next_cursor as it was given",
                    ));
                }
                cursor = Some(value.into_owned());
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: only limit and cursor"
                )));
            }
        }
    }
    let mut rows = s.app.store.list_jobs(limit + 1, cursor.as_deref()).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|j| j.job_id.clone())
    } else {
        None
    };
    Ok(Json(JobPage {
        jobs: rows.iter().map(Job::from).collect(),
        next_cursor,
    }))
}

async fn control(
    s: ApiState,
    headers: HeaderMap,
    id: String,
    control: JobControl,
) -> Result<Json<Job>, ApiError> {
    let action = format!("job.{}", control.as_str());
    let token = s.authorize(&headers, Scope::Operate, &action, &id).await?;
    let audit = Audit::new(&token, &action, &id);
    let now = s.app.clock.now_ms();
    match s.app.store.control_job(&id, control, now).await? {
        JobControlResult::Changed(job) => {
            s.record(audit.ok()).await?;
            tracing::info!(job_id = %id, action = %action, token = %token, "bulk job controlled");
            Ok(Json(Job::from(&job)))
        }
        JobControlResult::Conflict(job) => {
            let error = ApiError::conflict(
                "invalid_state",
                &format!(
                    "the job is {}: it cannot {}",
                    job.state.as_str(),
                    control.as_str()
                ),
            );
            Err(s.refused(audit, error).await)
        }
        JobControlResult::NotFound => Err(s.refused(audit, ApiError::not_found("such job")).await),
    }
}

/// Pauses a pending or running job (its runner stops after the batch in flight).
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/pause",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, body = Job),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "invalid_state"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn pause(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Job>, ApiError> {
    control(s, headers, id, JobControl::Pause).await
}

/// Resumes a paused job from where it stopped.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/resume",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, body = Job),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "invalid_state"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn resume(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Job>, ApiError> {
    control(s, headers, id, JobControl::Resume).await
}

/// Cancels a job that has not ended; what it did so far stays done.
#[utoipa::path(
    post,
    path = "/api/v1/jobs/{id}/cancel",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, body = Job),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "invalid_state"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn cancel(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Job>, ApiError> {
    control(s, headers, id, JobControl::Cancel).await
}
