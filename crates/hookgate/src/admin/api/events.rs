//! `/api/v1/events…`: the list, one event, its payload (scope `decrypt`, audited) and the
//! operations (scope `operate`, audited): retry, replay through processing, re-delivery.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use base64::Engine;
use hookgate_core::RowIdentity;
use hookgate_store::{OperationResult, PageKey, Redelivery};

use super::error::{ApiError, ErrorBody};
use super::types::{
    EventDetail, EventPage, EventSummary, HeldRelease, OperationDone, Payload, Released,
    ReplayRequest,
};
use super::{ApiState, Audit};
use crate::config::admin::Scope;

/// List events, newest first, by filter, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/events",
    params(
        ("status" = Option<String>, Query, description = "received, processed, failed, ignored or held (any case)"),
        ("provider" = Option<String>, Query, description = "provider id"),
        ("endpoint_id" = Option<String>, Query, description = "endpoint id"),
        ("event_type" = Option<String>, Query, description = "glob: * any run, ? one character"),
        ("received_after" = Option<String>, Query, description = "RFC 3339 or unix ms, inclusive"),
        ("received_before" = Option<String>, Query, description = "RFC 3339 or unix ms, exclusive"),
        ("provider_event_id" = Option<String>, Query, description = "the provider's event id"),
        ("object_id" = Option<String>, Query, description = "the object the event is about"),
        ("matched_secret_version" = Option<String>, Query, description = "the secret version that verified it"),
        ("destination" = Option<String>, Query, description = "has a delivery to this destination"),
        ("delivery_status" = Option<String>, Query, description = "pending, delivered or failed (with destination: of that delivery)"),
        ("limit" = Option<u32>, Query, description = "1 to 500, default 50"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
    ),
    responses(
        (status = 200, body = EventPage),
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
) -> Result<Json<EventPage>, ApiError> {
    s.authorize(&headers, Scope::Read, "events.list", "-")
        .await?;
    let query = super::query::parse(raw.as_deref())?;
    let (rows, next_cursor) = page(&s.app.store, query).await?;
    Ok(Json(EventPage {
        events: rows.iter().map(EventSummary::from).collect(),
        next_cursor,
    }))
}

/// One page for `query` (its `limit` as asked) and the cursor of the next page (`None` on
/// the last): one more row is read to know whether there is a next page. The CLI on the
/// store directly pages with this too.
pub async fn page(
    store: &hookgate_store::SharedStore,
    mut query: hookgate_store::EventQuery,
) -> Result<(Vec<hookgate_store::InboxRecord>, Option<String>), hookgate_store::StoreError> {
    let limit = query.limit as usize;
    query.limit += 1;
    let mut rows = store.page_events(&query).await?;
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|last| {
            super::query::encode_cursor(&PageKey {
                received_at_ms: last.received_at_ms,
                inbox_id: last.inbox_id.clone(),
            })
        })
    } else {
        None
    };
    Ok((rows, next_cursor))
}

/// One event with its attempts and deliveries.
#[utoipa::path(
    get,
    path = "/api/v1/events/{id}",
    params(("id" = String, Path, description = "the inbox id")),
    responses(
        (status = 200, body = EventDetail),
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
) -> Result<Json<EventDetail>, ApiError> {
    s.authorize(&headers, Scope::Read, "events.show", &id)
        .await?;
    let event = s
        .app
        .store
        .get_event(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("such event"))?;
    let deliveries = s.app.store.list_deliveries(&id).await?;
    Ok(Json(EventDetail::new(&event, &deliveries)))
}

/// The decrypted payload; every read is audited (`decrypt`), before it is answered.
#[utoipa::path(
    get,
    path = "/api/v1/events/{id}/payload",
    params(("id" = String, Path, description = "the inbox id")),
    responses(
        (status = 200, body = Payload),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "payload_purged"),
    ),
    security(("bearer" = ["decrypt"])),
)]
pub async fn payload(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Payload>, ApiError> {
    let token = s
        .authorize(&headers, Scope::Decrypt, "decrypt", &id)
        .await?;
    let audit = Audit::new(&token, "decrypt", &id);
    let found = s.app.store.get_event(&id).await?;
    let Some(event) = found else {
        return Err(s.refused(audit, ApiError::not_found("such event")).await);
    };
    let Some(sealed) = &event.payload else {
        return Err(s.refused(audit, purged()).await);
    };
    let keyring = &s.app.runtime.load().keyring;
    let identity = RowIdentity {
        provider: &event.provider,
        endpoint_id: &event.endpoint_id,
        provider_event_id: &event.provider_event_id,
    };
    let body = match keyring.open(&identity, event.payload_key_version, sealed) {
        Ok(body) => body,
        Err(_) => {
            let error = ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "undecryptable",
                Some("the stored payload does not open with the configured keys".into()),
            );
            return Err(s.refused(audit, error).await);
        }
    };
    // Audited first: a payload nobody recorded reading is never answered.
    s.record(audit.ok()).await?;
    tracing::warn!(inbox_id = %id, token = %token, "payload decrypted through the operator API");
    let (encoding, body) = match std::str::from_utf8(&body) {
        Ok(text) => ("utf8", text.to_owned()),
        Err(_) => (
            "base64",
            base64::engine::general_purpose::STANDARD.encode(&*body),
        ),
    };
    Ok(Json(Payload {
        id,
        encoding: encoding.into(),
        body,
    }))
}

fn purged() -> ApiError {
    ApiError::conflict(
        "payload_purged",
        "the event's payload was purged: nothing is left to process, send or show",
    )
}

/// Retry a FAILED event (back to RECEIVED, attempts reset), or else its FAILED deliveries.
#[utoipa::path(
    post,
    path = "/api/v1/events/{id}/retry",
    params(("id" = String, Path, description = "the inbox id")),
    responses(
        (status = 200, body = OperationDone),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "payload_purged, or not_failed: neither the event nor a delivery is FAILED"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn retry(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<OperationDone>, ApiError> {
    let token = s.authorize(&headers, Scope::Operate, "retry", &id).await?;
    let audit = Audit::new(&token, "retry", &id);
    let now = s.app.clock.now_ms();
    let done = |status: &str, deliveries: u64| OperationDone {
        id: id.clone(),
        action: "retry".into(),
        status: status.into(),
        deliveries: Some(deliveries),
        destination: None,
        idempotency_key: None,
    };
    if s.app.store.retry_event(&id, now).await? {
        s.record(audit.ok()).await?;
        return Ok(Json(done("RECEIVED", 0)));
    }
    let n = s.app.store.retry_deliveries(&id, now).await?;
    let event = s.app.store.get_event(&id).await?;
    if n > 0 {
        s.record(audit.ok().detail(serde_json::json!({ "deliveries": n })))
            .await?;
        let status = event.map_or("PROCESSED", |e| e.status.as_str());
        return Ok(Json(done(status, n)));
    }
    let error = match event {
        None => ApiError::not_found("such event"),
        Some(e) if !e.payload_stored() => purged(),
        Some(e) => ApiError::conflict(
            "not_failed",
            &format!(
                "the event is {} and has no FAILED delivery: nothing to retry",
                e.status
            ),
        ),
    };
    Err(s.refused(audit, error).await)
}

/// Release `HELD` events: back to `RECEIVED`, due now (all, one endpoint's, or one event).
#[utoipa::path(
    post,
    path = "/api/v1/events/release",
    request_body(content = Option<HeldRelease>, description = "empty or {}: every held event; endpoint and/or id narrow it"),
    responses(
        (status = 200, body = Released, description = "released may be 0: nothing matched"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn release(
    State(s): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Released>, ApiError> {
    let token = s
        .authorize(&headers, Scope::Operate, "release", "-")
        .await?;
    let request: HeldRelease = if body.iter().all(u8::is_ascii_whitespace) {
        HeldRelease::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not a release request: {e}")))?
    };
    let target =
        crate::cli::events::release_target(request.endpoint.as_deref(), request.id.as_deref());
    let released = s
        .app
        .store
        .release_held(hookgate_store::ReleaseRequest {
            endpoint_id: request.endpoint,
            inbox_id: request.id,
            now_ms: s.app.clock.now_ms(),
        })
        .await?;
    let audit = Audit::new(&token, "release", &target);
    s.record(
        audit
            .ok()
            .detail(serde_json::json!({ "released": released })),
    )
    .await?;
    tracing::info!(released, target = %target, token = %token, "held events released");
    Ok(Json(Released { released }))
}

/// Replay through processing (empty body or `{}`), or re-deliver to one destination.
#[utoipa::path(
    post,
    path = "/api/v1/events/{id}/replay",
    params(("id" = String, Path, description = "the inbox id")),
    request_body(content = Option<ReplayRequest>, description = "empty or {}: through processing; {\"destination\"}: re-deliver to it; fresh_key: with a new Idempotency-Key"),
    responses(
        (status = 200, body = OperationDone),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "not_found, or unknown_destination"),
        (status = 409, body = ErrorBody, description = "payload_purged, in_progress (still RECEIVED, or a relay holds the delivery) or not_processed"),
    ),
    security(("bearer" = ["operate"])),
)]
pub async fn replay(
    State(s): State<ApiState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<OperationDone>, ApiError> {
    // The scope is checked before the body is looked at.
    let action_hint = "replay";
    let token = s
        .authorize(&headers, Scope::Operate, action_hint, &id)
        .await?;
    let request: ReplayRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ReplayRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not a replay request: {e}")))?
    };
    let now = s.app.clock.now_ms();
    let Some(destination) = request.destination else {
        if request.fresh_key {
            return Err(ApiError::bad_request(
                "fresh_key needs a destination: a replay through processing sends each \
                 delivery with its own key",
            ));
        }
        let audit = Audit::new(&token, "replay", &id);
        return match s.app.store.replay_event(&id, now).await? {
            OperationResult::Done => {
                s.record(audit.ok()).await?;
                tracing::info!(inbox_id = %id, token = %token, "event replayed through processing");
                Ok(Json(OperationDone {
                    id,
                    action: "replay".into(),
                    status: "RECEIVED".into(),
                    deliveries: None,
                    destination: None,
                    idempotency_key: None,
                }))
            }
            other => Err(s.refused(audit, refusal(other)).await),
        };
    };
    let audit = Audit::new(&token, "redeliver", &id);
    let configured = s
        .app
        .runtime
        .load()
        .config
        .destinations
        .iter()
        .any(|d| d.id == destination);
    if !configured {
        let error = ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "unknown_destination",
            Some(format!("no destination {destination:?} is configured")),
        );
        return Err(s.refused(audit, error).await);
    }
    let fresh_key = request.fresh_key.then(|| uuid::Uuid::now_v7().to_string());
    let outbox_id = uuid::Uuid::now_v7().to_string();
    let result = s
        .app
        .store
        .redeliver(Redelivery {
            inbox_id: &id,
            destination: &destination,
            fresh_key: fresh_key.as_deref(),
            outbox_id: &outbox_id,
            now_ms: now,
        })
        .await?;
    let detail = serde_json::json!({ "destination": destination, "fresh_key": fresh_key });
    if result != OperationResult::Done {
        return Err(s.refused(audit.detail(detail), refusal(result)).await);
    }
    s.record(audit.ok().detail(detail)).await?;
    tracing::info!(inbox_id = %id, destination = %destination, token = %token, fresh_key = fresh_key.is_some(), "event re-delivered by operator");
    let key = s
        .app
        .store
        .list_deliveries(&id)
        .await?
        .into_iter()
        .find(|d| d.destination == destination)
        .map(|d| d.idempotency_key.unwrap_or(d.inbox_id));
    Ok(Json(OperationDone {
        id,
        action: "redeliver".into(),
        status: "PROCESSED".into(),
        deliveries: None,
        destination: Some(destination),
        idempotency_key: key,
    }))
}

fn refusal(result: OperationResult) -> ApiError {
    match result {
        OperationResult::Done => ApiError::bad_request("nothing refused"),
        OperationResult::NotFound => ApiError::not_found("such event"),
        OperationResult::PayloadPurged => purged(),
        OperationResult::InProgress => ApiError::conflict(
            "in_progress",
            "the event is still RECEIVED (waiting or being processed), or a relay is delivering it now",
        ),
        OperationResult::NotProcessed => ApiError::conflict(
            "not_processed",
            "only a PROCESSED event has deliveries to re-deliver",
        ),
    }
}
