//! `GET /api/v1/audit`: the newest audit entries (scope `read`).

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::types::{AuditEntry, AuditPage};
use crate::config::admin::Scope;

/// The newest audit entries.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    params(("limit" = Option<u32>, Query, description = "1 to 500, default 50")),
    responses(
        (status = 200, body = AuditPage),
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
) -> Result<Json<AuditPage>, ApiError> {
    s.authorize(&headers, Scope::Read, "audit.list", "-")
        .await?;
    let mut limit = super::query::DEFAULT_LIMIT;
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "limit" => {
                limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=hookgate_store::operator::MAX_PAGE).contains(n))
                    .ok_or_else(|| ApiError::bad_request("limit must be 1 to 500"))?;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: only limit"
                )));
            }
        }
    }
    let rows = s.app.store.audit_log(limit).await?;
    Ok(Json(AuditPage {
        entries: rows.iter().map(AuditEntry::from).collect(),
    }))
}
