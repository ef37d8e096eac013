//! The response table (`docs/receiving.md`): every answer the receiver gives, as one enum, so
//! status codes and JSON bodies are decided in one place. Bodies never echo input.

use bytes::Bytes;
use hookgate_providers::Rejection;
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
    Handshake {
        content_type: &'static str,
        body: Vec<u8>,
    },
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
}

impl Answer {
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
            Answer::Handshake { .. } => "handshake",
            Answer::Unavailable { .. } => "unavailable",
            Answer::Overloaded { .. } => "overloaded",
            Answer::Internal => "internal",
            Answer::Ignored { .. } => "ignored",
            Answer::Accepted { .. } => "accepted",
            Answer::Duplicate { .. } => "duplicate",
        }
    }

    pub fn into_response(self) -> HttpResponse {
        let (status, body): (StatusCode, String) = match &self {
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
            Answer::Duplicate { id } => (StatusCode::OK, status("duplicate", id)),
            Answer::Handshake { content_type, body } => {
                let mut r = Response::new(Full::new(Bytes::from(body.clone())));
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
                return r;
            }
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match self {
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
