//! `payments_projection`: a Stripe payment state projection (`payment_state`).
//!
//! Stripe objects carry no version, and webhooks arrive in any order (a refund before its
//! charge, `succeeded` before `processing`). So `prepare` ignores what the event says about
//! the object and fetches its *current* state through Stripe's REST API, and `apply` stores
//! that: whatever the arrival order, the projection converges on the provider's truth. (If two
//! race, the store keeps the fetch made under the later lease — a database sequence, never the
//! instances' clocks; see `BusinessChange::UpsertPaymentState`.)
//!
//! Fetchers are behind [`ObjectFetcher`], so other providers can add theirs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hookgate_store::BusinessChange;
use serde::Deserialize;

use super::handler::{Handler, HandlerError, VerifiedEvent};
use crate::config::StripeApiConfig;

/// The object types this projection follows, with their REST collection names.
const FOLLOWED: &[(&str, &str)] = &[
    ("payment_intent", "payment_intents"),
    ("charge", "charges"),
    ("refund", "refunds"),
    ("dispute", "disputes"),
];

/// A provider object's current state, as its API says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedObject {
    pub object_type: String,
    pub id: String,
    pub status: String,
    pub amount: Option<i64>,
    pub currency: Option<String>,
}

pub type FetchFuture<'a> =
    Pin<Box<dyn Future<Output = Result<FetchedObject, HandlerError>> + Send + 'a>>;

/// Fetches the current state of one object from a provider's API.
pub trait ObjectFetcher: Send + Sync {
    fn fetch<'a>(&'a self, object_type: &'a str, object_id: &'a str) -> FetchFuture<'a>;
}

/// Stripe's REST API: `GET {api_base}/v1/{collection}/{id}` with `Authorization: Bearer`.
pub struct StripeFetcher {
    client: reqwest::Client,
    config: StripeApiConfig,
}

impl StripeFetcher {
    pub fn new(client: reqwest::Client, config: StripeApiConfig) -> Self {
        Self { client, config }
    }
}

#[derive(Deserialize)]
struct StripeObject {
    id: String,
    object: String,
    status: Option<String>,
    amount: Option<i64>,
    currency: Option<String>,
}

#[derive(Deserialize)]
struct StripeErrorBody {
    error: StripeErrorDetail,
}

#[derive(Deserialize)]
struct StripeErrorDetail {
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<String>,
}

/// Bytes of a Stripe answer we are willing to read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

impl ObjectFetcher for StripeFetcher {
    fn fetch<'a>(&'a self, object_type: &'a str, object_id: &'a str) -> FetchFuture<'a> {
        Box::pin(async move {
            let collection = FOLLOWED
                .iter()
                .find(|(t, _)| *t == object_type)
                .map(|(_, c)| *c)
                .ok_or_else(|| {
                    HandlerError::Schema(format!("unfollowed object type {object_type}"))
                })?;
            let url = format!("{}/v1/{collection}/{object_id}", self.config.api_base);
            let response = self
                .client
                .get(&url)
                .bearer_auth(self.config.api_key.expose())
                .timeout(self.config.timeout)
                .send()
                .await
                .map_err(|e| {
                    // Without the URL: it is ours, but keep diagnostics short and stable.
                    let what = if e.is_timeout() {
                        "timed out"
                    } else if e.is_connect() {
                        "connection failed"
                    } else {
                        "request failed"
                    };
                    HandlerError::Transient(format!("stripe API {what}"))
                })?;
            let status = response.status();
            let bytes = read_bounded(response).await?;
            if status.is_success() {
                let object: StripeObject = serde_json::from_slice(&bytes).map_err(|_| {
                    HandlerError::Transient("stripe API answered an unreadable object".into())
                })?;
                if object.object != object_type || object.id != object_id {
                    return Err(HandlerError::Permanent(format!(
                        "stripe API answered a {} for a {object_type}",
                        object.object
                    )));
                }
                let status = object.status.ok_or_else(|| {
                    HandlerError::Permanent(format!("stripe {object_type} has no status"))
                })?;
                return Ok(FetchedObject {
                    object_type: object.object,
                    id: object.id,
                    status,
                    amount: object.amount,
                    currency: object.currency,
                });
            }
            let detail = serde_json::from_slice::<StripeErrorBody>(&bytes)
                .ok()
                .map(|b| {
                    let mut d = b.error.kind.unwrap_or_default();
                    if let Some(code) = b.error.code {
                        d.push_str(&format!("/{code}"));
                    }
                    d
                })
                .unwrap_or_default();
            let msg = format!("stripe API answered {} {detail}", status.as_u16());
            let msg = msg.trim_end().to_owned();
            if status.as_u16() == 429
                || status.is_server_error()
                || status.as_u16() == 401
                || status.as_u16() == 403
                || status.as_u16() == 409
            {
                Err(HandlerError::Transient(msg))
            } else {
                Err(HandlerError::Permanent(msg))
            }
        })
    }
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, HandlerError> {
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| HandlerError::Transient("stripe API answer cut off".into()))?
    {
        if out.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(HandlerError::Transient(
                "stripe API answer too large".into(),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The `payments_projection` handler.
pub struct PaymentsProjection {
    fetcher: Arc<dyn ObjectFetcher>,
}

impl PaymentsProjection {
    pub const NAME: &'static str = "payments_projection";

    pub fn new(fetcher: Arc<dyn ObjectFetcher>) -> Self {
        Self { fetcher }
    }
}

/// What `prepare` found.
#[derive(Debug)]
pub enum PaymentPrepared {
    /// The event is about an object this projection does not follow: nothing to change.
    NotFollowed,
    Fetched(FetchedObject),
}

/// Object ids go into a URL path: Stripe ids are `[A-Za-z0-9_]`.
fn valid_object_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 255 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Handler for PaymentsProjection {
    type Prepared = PaymentPrepared;

    fn name(&self) -> &'static str {
        Self::NAME
    }

    async fn prepare<'a>(
        &'a self,
        event: &'a VerifiedEvent,
    ) -> Result<PaymentPrepared, HandlerError> {
        let json = event.json()?;
        let object = json
            .pointer("/data/object")
            .ok_or_else(|| HandlerError::Schema("Stripe event without data.object".into()))?;
        let Some(object_type) = object.get("object").and_then(|v| v.as_str()) else {
            return Err(HandlerError::Schema(
                "Stripe data.object without an object type".into(),
            ));
        };
        if !FOLLOWED.iter().any(|(t, _)| *t == object_type) {
            return Ok(PaymentPrepared::NotFollowed);
        }
        let id = object
            .get("id")
            .and_then(|v| v.as_str())
            .filter(|id| valid_object_id(id))
            .ok_or_else(|| HandlerError::Schema("Stripe data.object without a valid id".into()))?;
        let fetched = self.fetcher.fetch(object_type, id).await?;
        Ok(PaymentPrepared::Fetched(fetched))
    }

    fn apply(
        &self,
        event: &VerifiedEvent,
        prepared: PaymentPrepared,
        prepared_at_ms: i64,
    ) -> Result<Vec<BusinessChange>, HandlerError> {
        Ok(match prepared {
            PaymentPrepared::NotFollowed => Vec::new(),
            PaymentPrepared::Fetched(o) => vec![BusinessChange::UpsertPaymentState {
                object_id: o.id,
                object_type: o.object_type,
                status: o.status,
                amount: o.amount,
                currency: o.currency,
                refreshed_at_ms: prepared_at_ms,
                last_event_id: event.provider_event_id.clone(),
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_path_safe() {
        assert!(valid_object_id("pi_3MtwBwLkdIwHu7ix28a3tqPa"));
        for bad in ["", "../x", "pi_1/refunds", "pi 1", "pi_1?x=1"] {
            assert!(!valid_object_id(bad), "{bad}");
        }
    }
}
