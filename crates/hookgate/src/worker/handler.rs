//! The business handler interface: `prepare` may do I/O, `apply` is pure (ARCHITECTURE.md,
//! "One processed event").
//!
//! A handler has two halves:
//!
//! - [`Handler::prepare`]: async, gets the verified event, may do network I/O (fetch the
//!   provider's current state of the object). Runs outside any transaction and outside the
//!   store's writer, so a slow provider slows only this worker.
//! - [`Handler::apply`]: pure; turns what `prepare` learned into typed
//!   [`BusinessChange`]s. The store applies them inside the processing transaction together
//!   with the version gate, the handler's `processed_events` marker, the outbox rows and
//!   `PROCESSED` — only the store knows SQL — so a worker retry is a no-op.

use std::fmt;
use std::future::Future;

use hookgate_store::BusinessChange;
use zeroize::Zeroizing;

/// A verified event, decrypted for the handlers. `Debug` never shows the body.
pub struct VerifiedEvent {
    pub inbox_id: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: Option<String>,
    pub object_id: Option<String>,
    pub object_version: Option<i64>,
    body: Zeroizing<Vec<u8>>,
}

impl VerifiedEvent {
    pub fn new(record: &hookgate_store::InboxRecord, body: Zeroizing<Vec<u8>>) -> VerifiedEvent {
        VerifiedEvent {
            inbox_id: record.inbox_id.clone(),
            provider: record.provider.clone(),
            endpoint_id: record.endpoint_id.clone(),
            provider_event_id: record.provider_event_id.clone(),
            event_type: record.event_type.clone(),
            object_id: record.object_id.clone(),
            object_version: record.object_version,
            body,
        }
    }

    /// The exact verified bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as JSON; a body that is not JSON is a schema error.
    pub fn json(&self) -> Result<serde_json::Value, HandlerError> {
        serde_json::from_slice(&self.body)
            .map_err(|_| HandlerError::Schema("event body is not JSON".into()))
    }
}

impl fmt::Debug for VerifiedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedEvent")
            .field("inbox_id", &self.inbox_id)
            .field("provider", &self.provider)
            .field("endpoint_id", &self.endpoint_id)
            .field("provider_event_id", &self.provider_event_id)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// Why a handler could not process an event. Messages are redacted by construction: never
/// payload bytes, never secrets (they end up in `last_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Worth retrying later (provider API down, rate limited, timed out): backoff with jitter.
    #[error("transient: {0}")]
    Transient(String),
    /// Will never succeed as is (object unknown to the provider, bad credentials class that
    /// needs an operator): FAILED at once, retryable by command.
    #[error("permanent: {0}")]
    Permanent(String),
    /// The event does not have the shape the handler needs: FAILED at once.
    #[error("schema: {0}")]
    Schema(String),
}

impl HandlerError {
    pub fn is_transient(&self) -> bool {
        matches!(self, HandlerError::Transient(_))
    }
}

/// A business handler (see the module docs).
pub trait Handler: Send + Sync {
    /// What `prepare` learned, handed to `apply`.
    type Prepared: Send;

    /// The name in config and the `processed_events` consumer name.
    fn name(&self) -> &'static str;

    /// Outside any transaction; may do network I/O.
    fn prepare<'a>(
        &'a self,
        event: &'a VerifiedEvent,
    ) -> impl Future<Output = Result<Self::Prepared, HandlerError>> + Send + 'a;

    /// Pure: the business changes to commit. `prepared_at_ms` is when `prepare` finished.
    fn apply(
        &self,
        event: &VerifiedEvent,
        prepared: Self::Prepared,
        prepared_at_ms: i64,
    ) -> Result<Vec<BusinessChange>, HandlerError>;
}
