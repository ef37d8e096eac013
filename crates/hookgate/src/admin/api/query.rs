//! The event list's query parameters (the same names are a bulk job's `filter`) and its
//! opaque cursor. An unknown or repeated parameter, an unknown status, a malformed time or
//! cursor, or a `limit` outside 1..=500 is 400.

use base64::Engine;
use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::operator::MAX_PAGE;
use hookgate_store::{EventQuery, PageKey};

use super::error::ApiError;

/// Events on a page when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 50;

/// Every filter parameter of `GET /api/v1/events` (besides `limit` and `cursor`).
pub const FILTERS: [&str; 11] = [
    "status",
    "provider",
    "endpoint_id",
    "event_type",
    "received_after",
    "received_before",
    "provider_event_id",
    "object_id",
    "matched_secret_version",
    "destination",
    "delivery_status",
];

/// Parses a query string into the store's query (with `limit` as asked, not + 1).
pub fn parse(raw: Option<&str>) -> Result<EventQuery, ApiError> {
    let mut q = EventQuery {
        limit: DEFAULT_LIMIT,
        ..EventQuery::default()
    };
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if seen.iter().any(|k| *k == key) {
            return Err(ApiError::bad_request(format!("{key} is given twice")));
        }
        seen.push(key.to_string());
        let value = value.into_owned();
        match key.as_ref() {
            "limit" => {
                q.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("limit must be 1 to {MAX_PAGE}"))
                    })?;
            }
            "cursor" => q.after = Some(decode_cursor(&value)?),
            other => set_filter(&mut q, other, value)?,
        }
    }
    Ok(q)
}

/// Sets one filter of `q` from its parameter (also a job filter's field).
pub fn set_filter(q: &mut EventQuery, key: &str, value: String) -> Result<(), ApiError> {
    let text = |v: String| -> Result<Option<String>, ApiError> {
        if v.is_empty() || v.len() > 512 {
            return Err(ApiError::bad_request(format!(
                "{key} must be 1 to 512 bytes"
            )));
        }
        Ok(Some(v))
    };
    match key {
        "status" => {
            q.status = Some(value.parse::<InboxStatus>().map_err(|_| {
                ApiError::bad_request("status must be received, processed, failed or ignored")
            })?)
        }
        "delivery_status" => {
            q.delivery_status = Some(value.parse::<OutboxStatus>().map_err(|_| {
                ApiError::bad_request("delivery_status must be pending, delivered or failed")
            })?)
        }
        "provider" => q.provider = text(value)?,
        "endpoint_id" => q.endpoint_id = text(value)?,
        "event_type" => q.event_type = text(value)?,
        "provider_event_id" => q.provider_event_id = text(value)?,
        "object_id" => q.object_id = text(value)?,
        "matched_secret_version" => q.matched_secret_version = text(value)?,
        "destination" => q.destination = text(value)?,
        "received_after" => q.received_after_ms = Some(time(key, &value)?),
        "received_before" => q.received_before_ms = Some(time(key, &value)?),
        other => {
            return Err(ApiError::bad_request(format!(
                "unknown parameter {other:?}: filters are {}, plus limit and cursor",
                FILTERS.join(", ")
            )));
        }
    }
    Ok(())
}

/// An RFC 3339 time (`2026-01-31T12:00:00Z`) or unix milliseconds.
fn time(key: &str, value: &str) -> Result<i64, ApiError> {
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    value
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "{key} must be an RFC 3339 time or unix milliseconds"
            ))
        })
}

const CURSOR_PREFIX: &str = "v1:";

/// The cursor after `key`: opaque to clients (base64url of the keyset position).
pub fn encode_cursor(key: &PageKey) -> String {
    let text = format!("{CURSOR_PREFIX}{}:{}", key.received_at_ms, key.inbox_id);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

pub fn decode_cursor(cursor: &str) -> Result<PageKey, ApiError> {
    let bad = || ApiError::bad_request("malformed cursor: pass next_cursor as it was given");
    if cursor.len() > 256 {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let rest = text.strip_prefix(CURSOR_PREFIX).ok_or_else(bad)?;
    let (at, id) = rest.split_once(':').ok_or_else(bad)?;
    let received_at_ms = at.parse::<i64>().map_err(|_| bad())?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(bad());
    }
    Ok(PageKey {
        received_at_ms,
        inbox_id: id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_limits_and_cursors_parse_or_are_refused() {
        let q = parse(Some(
            "status=Failed&endpoint_id=ep&event_type=invoice.*&received_after=2026-01-01T00:00:00Z&limit=500",
        ))
        .unwrap();
        assert_eq!(q.status, Some(InboxStatus::Failed));
        assert_eq!(q.endpoint_id.as_deref(), Some("ep"));
        assert_eq!(q.received_after_ms, Some(1_767_225_600_000));
        assert_eq!(q.limit, 500);
        assert_eq!(parse(None).unwrap().limit, DEFAULT_LIMIT);
        let key = PageKey {
            received_at_ms: 42,
            inbox_id: "0190-ab".into(),
        };
        let q = parse(Some(&format!("cursor={}", encode_cursor(&key)))).unwrap();
        assert_eq!(q.after, Some(key));
        for bad in [
            "limit=501",
            "limit=0",
            "status=done",
            "colour=red",
            "cursor=zzz",
            "status=failed&status=ignored",
            "received_before=yesterday",
        ] {
            assert_eq!(parse(Some(bad)).unwrap_err().status.as_u16(), 400, "{bad}");
        }
    }
}
