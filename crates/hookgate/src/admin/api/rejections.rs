//! `GET /api/v1/rejections`: the sampled log of rejected webhook requests, newest first,
//! with per-cause counts (scope `read`). Entries never hold a body: header names with
//! redacted values, the body's size and keyed digest.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use hookgate_store::{RejectionQuery, RejectionRecord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::types::rfc3339;
use crate::config::admin::Scope;

/// One header of a rejected request: its name, and its value redacted (`[redacted, N
/// bytes]`) unless it is `content-type`, `content-length`, `content-encoding` or `user-agent`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RejectedHeader {
    pub name: String,
    pub value: String,
}

/// One sampled rejection.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Rejection {
    pub id: i64,
    /// When it was answered (RFC 3339).
    pub at: String,
    pub at_ms: i64,
    /// The endpoint id (`_unknown` for a path no endpoint has).
    pub endpoint: String,
    /// The answer: `invalid_signature`, `stale_timestamp`, `bad_request`, `unknown_endpoint`,
    /// `method_not_allowed`, `https_required`, `rate_limited`, `unsupported_media_type`,
    /// `payload_too_large`, `request_timeout`.
    pub cause: String,
    /// A `bad_request`'s reason (`missing_event_id`, …).
    pub reason: Option<String>,
    pub headers: Vec<RejectedHeader>,
    /// Bytes of the body read, or its declared Content-Length when it was not read.
    pub body_size: Option<u64>,
    /// Hex of the keyed digest of the body (the same digest as a stored event's), when read.
    pub body_digest: Option<String>,
}

impl From<&RejectionRecord> for Rejection {
    fn from(r: &RejectionRecord) -> Self {
        let e = &r.entry;
        let headers: Vec<(String, String)> =
            serde_json::from_str(&e.headers_json).unwrap_or_default();
        Self {
            id: r.id,
            at: rfc3339(e.at_ms),
            at_ms: e.at_ms,
            endpoint: e.endpoint.clone(),
            cause: e.cause.clone(),
            reason: e.reason.clone(),
            headers: headers
                .into_iter()
                .map(|(name, value)| RejectedHeader { name, value })
                .collect(),
            body_size: e.body_size,
            body_digest: e
                .body_digest
                .as_ref()
                .map(|d| d.iter().map(|b| format!("{b:02x}")).collect()),
        }
    }
}

/// Rejections per cause, over the query's endpoint, cause and time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CauseCount {
    pub cause: String,
    /// Every rejection counted (sampled into the log or not; per minute, so a time range
    /// counts the whole minutes it touches).
    pub seen: u64,
    /// Entries of the log.
    pub logged: u64,
}

/// A page of `GET /api/v1/rejections`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RejectionPage {
    pub rejections: Vec<Rejection>,
    pub counts: Vec<CauseCount>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

fn time(key: &str, value: &str) -> Result<i64, ApiError> {
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    value
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| ApiError::bad_request(format!("{key} must be an RFC 3339 time or unix ms")))
}

/// Parses the query string (`endpoint`, `cause`, `since`, `until`, `limit`, `cursor`).
pub fn parse(raw: Option<&str>) -> Result<RejectionQuery, ApiError> {
    let mut q = RejectionQuery {
        limit: super::query::DEFAULT_LIMIT,
        ..Default::default()
    };
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if seen.iter().any(|k| *k == key) {
            return Err(ApiError::bad_request(format!("{key} is given twice")));
        }
        seen.push(key.to_string());
        let text = |v: &str| -> Result<String, ApiError> {
            if v.is_empty() || v.len() > 512 {
                return Err(ApiError::bad_request(format!(
                    "{key} must be 1 to 512 bytes"
                )));
            }
            Ok(v.to_owned())
        };
        match key.as_ref() {
            "endpoint" => q.endpoint = Some(text(&value)?),
            "cause" => q.cause = Some(text(&value)?),
            "since" => q.since_ms = Some(time("since", &value)?),
            "until" => q.until_ms = Some(time("until", &value)?),
            "limit" => {
                q.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=hookgate_store::operator::MAX_PAGE).contains(n))
                    .ok_or_else(|| ApiError::bad_request("limit must be 1 to 500"))?;
            }
            "cursor" => {
                q.before_id = Some(value.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(
                    || ApiError::bad_request("malformed cursor: pass next_cursor as it was given"),
                )?);
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: filters are endpoint, cause, since, until, \
                     plus limit and cursor"
                )));
            }
        }
    }
    Ok(q)
}

/// Rejected requests, newest first, with counts per cause.
#[utoipa::path(
    get,
    path = "/api/v1/rejections",
    params(
        ("endpoint" = Option<String>, Query, description = "endpoint id (`_unknown` for unknown paths)"),
        ("cause" = Option<String>, Query, description = "invalid_signature, stale_timestamp, bad_request, …"),
        ("since" = Option<String>, Query, description = "RFC 3339 or unix ms, inclusive"),
        ("until" = Option<String>, Query, description = "RFC 3339 or unix ms, exclusive"),
        ("limit" = Option<u32>, Query, description = "1 to 500, default 50"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, body = RejectionPage),
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
) -> Result<Json<RejectionPage>, ApiError> {
    s.authorize(&headers, Scope::Read, "rejections.list", "-")
        .await?;
    let mut query = parse(raw.as_deref())?;
    let limit = query.limit as usize;
    query.limit += 1;
    let mut rows = s.app.store.list_rejections(&query).await?;
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|r| r.id.to_string())
    } else {
        None
    };
    let counts = s.app.store.rejection_counts(&query).await?;
    Ok(Json(RejectionPage {
        rejections: rows.iter().map(Rejection::from).collect(),
        counts: counts
            .into_iter()
            .map(|c| CauseCount {
                cause: c.cause,
                seen: c.seen,
                logged: c.logged,
            })
            .collect(),
        next_cursor,
    }))
}
