//! The operator API's errors: JSON `{"error": <code>}` with the status (and a `message` for
//! people). Never payload bytes, token values or SQL.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// An error answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A stable code: `unauthorized`, `forbidden`, `bad_request`, `not_found`,
    /// `payload_purged`, `not_failed`, `in_progress`, `not_processed`,
    /// `unknown_destination`, `invalid_state` (a job control its state does not take),
    /// `unavailable`.
    pub error: String,
    /// What was wrong, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: Option<String>) -> Self {
        Self {
            status,
            body: ErrorBody {
                error: code.to_owned(),
                message,
            },
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", Some(message.into()))
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            Some(format!("no {what}")),
        )
    }

    pub fn conflict(code: &str, message: &str) -> Self {
        Self::new(StatusCode::CONFLICT, code, Some(message.to_owned()))
    }

    pub fn unavailable(e: &hookgate_store::StoreError) -> Self {
        tracing::warn!(error = %e, "operator API: store error");
        let status = match e {
            hookgate_store::StoreError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        Self::new(
            status,
            "unavailable",
            Some("the store did not answer".into()),
        )
    }

    pub fn code(&self) -> &str {
        &self.body.error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<hookgate_store::StoreError> for ApiError {
    fn from(e: hookgate_store::StoreError) -> Self {
        ApiError::unavailable(&e)
    }
}
