//! The response table (`docs/receiving.md`): every answer the receiver gives, as one enum, so
//! status codes and JSON bodies are decided in one place. Bodies never echo input.

use bytes::Bytes;
use hookgate_providers::Rejection;
use hookgate_providers::pack::Answer as ProviderAnswer;
use http::header::{ALLOW, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;

pub type HttpResponse = Response<Full<Bytes>>;

/// Every outcome of one webhook request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    UnknownEndpoint,
    MethodNotAllowed,
    HttpsRequired,
    RateLimited {
        retry_after_secs: u64,
    },
    UnsupportedMediaType,
    BadRequest(&'static str),
    PayloadTooLarge,
    RequestTimeout,
    InvalidSignature,
    StaleTimestamp,
    /// A provider handshake, answered exactly as the provider requires; nothing stored.
    Handshake(ProviderAnswer),
    Unavailable {
        retry_after_secs: u64,
    },
    /// Shed: the commit queue already holds `store.max_queue_wait_ms` of work. Nothing was
    /// written; the provider retries after `Retry-After`.
    Overloaded {
        retry_after_secs: u64,
    },
    /// Stored data inconsistent with this version: an operator must look.
    Internal,
    Ignored {
        id: String,
    },
    Accepted {
        id: String,
    },
    Duplicate {
        id: String,
    },
    /// The verified body was already accepted under another (unsigned) id within the replay
    /// window: answered as a duplicate of the first row; nothing stored.
    ReplaySuspected {
        id: String,
    },
    /// A batch: every event's row and what became of it, in body order.
    Batch {
        events: Vec<(String, &'static str)>,
    },
    /// Events committed, answered with the body the provider requires (Adyen `[accepted]`,
    /// Discord 204); `of` is the answer hookgate would give otherwise (its metric label).
    Provider {
        answer: ProviderAnswer,
        of: Box<Answer>,
    },
}

impl Answer {
    /// Whether the gateway refused the request for its own reasons (shed, rate-limited by
    /// its own limits, the store down or failing): nothing wrong with the request, which a
    /// provider that never retries does not send again (a no-retry window).
    pub fn refused_for_own_reasons(&self) -> bool {
        match self {
            Answer::RateLimited { .. }
            | Answer::Unavailable { .. }
            | Answer::Overloaded { .. }
            | Answer::Internal => true,
            Answer::Provider { of, .. } => of.refused_for_own_reasons(),
            _ => false,
        }
    }

    /// The metric label of this outcome (`hookgate_requests_total{outcome=…}`).
    pub fn outcome(&self) -> &'static str {
        match self {
            Answer::UnknownEndpoint => "unknown_endpoint",
            Answer::MethodNotAllowed => "method_not_allowed",
            Answer::HttpsRequired => "https_required",
            Answer::RateLimited { .. } => "rate_limited",
            Answer::UnsupportedMediaType => "unsupported_media_type",
            Answer::BadRequest(_) => "bad_request",
            Answer::PayloadTooLarge => "payload_too_large",
            Answer::RequestTimeout => "request_timeout",
            Answer::InvalidSignature => "invalid_signature",
            Answer::StaleTimestamp => "stale_timestamp",
            Answer::Handshake(_) => "handshake",
            Answer::Unavailable { .. } => "unavailable",
            Answer::Overloaded { .. } => "overloaded",
            Answer::Internal => "internal",
            Answer::Ignored { .. } => "ignored",
            Answer::Accepted { .. } => "accepted",
            Answer::Duplicate { .. } => "duplicate",
            Answer::ReplaySuspected { .. } => "replay_suspected",
            Answer::Batch { events } => {
                let any = |word: &str| events.iter().any(|(_, s)| *s == word);
                if any("accepted") {
                    "accepted"
                } else if any("duplicate") {
                    "duplicate"
                } else {
                    "ignored"
                }
            }
            Answer::Provider { of, .. } => of.outcome(),
        }
    }

    /// The inbox row this answer acknowledges (the first of a batch), when it is an
    /// acknowledgement after a commit.
    pub fn acknowledged_id(&self) -> Option<&str> {
        match self {
            Answer::Accepted { id }
            | Answer::Duplicate { id }
            | Answer::Ignored { id }
            | Answer::ReplaySuspected { id } => Some(id),
            Answer::Batch { events } => events.first().map(|(id, _)| id.as_str()),
            Answer::Provider { of, .. } => of.acknowledged_id(),
            _ => None,
        }
    }

    pub fn into_response(self) -> HttpResponse {
        let this = match self {
            Answer::Handshake(answer) | Answer::Provider { answer, .. } => {
                return provider_response(answer);
            }
            other => other,
        };
        let (status, body): (StatusCode, String) = match &this {
            Answer::UnknownEndpoint => (StatusCode::NOT_FOUND, error("unknown_endpoint")),
            Answer::MethodNotAllowed => {
                (StatusCode::METHOD_NOT_ALLOWED, error("method_not_allowed"))
            }
            Answer::HttpsRequired => (StatusCode::FORBIDDEN, error("https_required")),
            Answer::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, error("rate_limited")),
            Answer::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                error("unsupported_media_type"),
            ),
            Answer::BadRequest(reason) => (
                StatusCode::BAD_REQUEST,
                format!(r#"{{"error":"bad_request","reason":"{reason}"}}"#),
            ),
            Answer::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, error("payload_too_large")),
            Answer::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, error("request_timeout")),
            Answer::InvalidSignature => (StatusCode::UNAUTHORIZED, error("invalid_signature")),
            Answer::StaleTimestamp => (StatusCode::UNAUTHORIZED, error("stale_timestamp")),
            Answer::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, error("unavailable")),
            Answer::Overloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, error("overloaded")),
            Answer::Internal => (StatusCode::INTERNAL_SERVER_ERROR, error("internal")),
            Answer::Ignored { id } => (StatusCode::OK, status("ignored", id)),
            Answer::Accepted { id } => (StatusCode::OK, status("accepted", id)),
            Answer::Duplicate { id } | Answer::ReplaySuspected { id } => {
                (StatusCode::OK, status("duplicate", id))
            }
            Answer::Batch { events } => (StatusCode::OK, batch(events)),
            Answer::Handshake(_) | Answer::Provider { .. } => unreachable!("answered above"),
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match this {
            Answer::MethodNotAllowed => {
                headers.insert(ALLOW, HeaderValue::from_static("POST"));
            }
            Answer::RateLimited { retry_after_secs }
            | Answer::Unavailable { retry_after_secs }
            | Answer::Overloaded { retry_after_secs } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs.max(1)));
            }
            _ => {}
        }
        response
    }
}

fn error(code: &str) -> String {
    format!(r#"{{"error":"{code}"}}"#)
}

/// Exactly the answer a provider requires: status, content type (none for an empty body),
/// body.
fn provider_response(answer: ProviderAnswer) -> HttpResponse {
    let mut r = Response::new(Full::new(Bytes::from(answer.body)));
    *r.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    if let Some(content_type) = answer.content_type {
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    // A handshake's own headers; the pack bounded their values to printable ASCII.
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            r.headers_mut().insert(name, value);
        }
    }
    r
}

/// `{"status":"accepted","events":[{"id":…,"status":…},…]}`: ids are UUIDs we generated.
fn batch(events: &[(String, &'static str)]) -> String {
    let mut out = String::with_capacity(32 + events.len() * 64);
    out.push_str(r#"{"status":"accepted","events":["#);
    for (i, (id, word)) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(r#"{{"id":"{id}","status":"{word}"}}"#));
    }
    out.push_str("]}");
    out
}

/// Inbox ids are UUIDs we generated; nothing to escape.
fn status(word: &str, id: &str) -> String {
    format!(r#"{{"status":"{word}","id":"{id}"}}"#)
}

impl From<Rejection> for Answer {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::UnsupportedMediaType => Answer::UnsupportedMediaType,
            Rejection::BadRequest(reason) => Answer::BadRequest(reason.as_str()),
            Rejection::InvalidSignature => Answer::InvalidSignature,
            Rejection::StaleTimestamp => Answer::StaleTimestamp,
        }
    }
}
