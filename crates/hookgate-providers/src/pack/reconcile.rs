//! `reconcile` in a pack: whether and how the provider's API can tell what it sent, so the
//! gateway's provider reconciliation (issue 18) can bring in what never arrived. Each API is
//! one [`ReconcileApi`]: a provider can follow by naming one that fits, or by a new variant
//! with its client in the binary.
//!
//! ```json
//! "reconcile": {"api": "stripe_events", "horizon_seconds": 2592000}
//! ```

use http::HeaderMap;
use serde::Deserialize;

use super::syntax::{Paths, pick};
use super::{IdRule, Pack, PackError};
use crate::{Envelope, Metadata, Rejection};

/// `reconcile` as written in a pack.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileSpec {
    /// Which API lists what the provider sent (see [`ReconcileApi`]).
    pub api: String,
    /// How far back the API lists (a first run without a checkpoint looks back this far).
    pub horizon_seconds: u64,
}

/// How a provider's sent events are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconcileApi {
    /// Stripe's `GET /v1/events` (created since a checkpoint, paginated by `starting_after`):
    /// each event listed is the body a webhook would carry, authenticated by the API call, and
    /// is stored as it is listed.
    StripeEvents,
    /// GitHub's hook deliveries (`GET /{hook}/deliveries`, paginated by the `Link` header's
    /// cursor): each listed delivery names its GUID (the `X-GitHub-Delivery` header, the
    /// event id) and the status code the receiver answered; a delivery never answered 2xx is
    /// asked for again (`POST /{hook}/deliveries/{id}/attempts`) and arrives signed as a
    /// webhook. GitHub never retries on its own, so the gateway's own non-2xx answers are
    /// recorded as no-retry windows the next run covers.
    GithubDeliveries,
}

impl ReconcileApi {
    pub const ALL: [ReconcileApi; 2] = [ReconcileApi::StripeEvents, ReconcileApi::GithubDeliveries];

    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileApi::StripeEvents => "stripe_events",
            ReconcileApi::GithubDeliveries => "github_deliveries",
        }
    }

    /// The public API an endpoint's `reconcile.api_base` defaults to.
    pub fn default_api_base(self) -> &'static str {
        match self {
            ReconcileApi::StripeEvents => "https://api.stripe.com",
            ReconcileApi::GithubDeliveries => "https://api.github.com",
        }
    }

    /// Whether an endpoint names its hook (`reconcile.hook`): the API lists one hook's
    /// deliveries.
    pub fn needs_hook(self) -> bool {
        match self {
            ReconcileApi::StripeEvents => false,
            ReconcileApi::GithubDeliveries => true,
        }
    }

    /// Whether the provider sends a delivery it was answered non-2xx again on its own. When
    /// it does not (GitHub), the gateway records the times it answered such an endpoint with
    /// non-2xx for its own reasons (no-retry windows), and the endpoint's next run covers
    /// them.
    pub fn provider_retries(self) -> bool {
        match self {
            ReconcileApi::StripeEvents => true,
            ReconcileApi::GithubDeliveries => false,
        }
    }
}

/// A pack's compiled `reconcile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileRule {
    pub api: ReconcileApi,
    pub horizon_seconds: u64,
}

/// The longest listing horizon a pack may declare (a year).
const MAX_HORIZON_SECONDS: u64 = 366 * 86_400;

pub(super) fn compile(
    paths: &Paths,
    spec: Option<&ReconcileSpec>,
    event_id: &IdRule,
) -> Result<Option<ReconcileRule>, PackError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let allowed: Vec<(&str, ReconcileApi)> =
        ReconcileApi::ALL.iter().map(|a| (a.as_str(), *a)).collect();
    let api = pick(paths, "reconcile.api", "reconcile api", &spec.api, &allowed)?;
    if !(1..=MAX_HORIZON_SECONDS).contains(&spec.horizon_seconds) {
        return Err(paths.err(
            "reconcile.horizon_seconds",
            format!("must be 1 to {MAX_HORIZON_SECONDS}"),
        ));
    }
    // Events stored from a listing have no request head: their id must be in the body.
    if api == ReconcileApi::StripeEvents && !matches!(event_id, IdRule::Json(p) if !p.is_empty()) {
        return Err(paths.err(
            "reconcile.api",
            "stripe_events needs an event id read from the JSON body",
        ));
    }
    // A delivery is matched to its row by the GUID, which only the delivery's header carries.
    if api == ReconcileApi::GithubDeliveries
        && !matches!(event_id, IdRule::Headers(h) if h.iter().any(|n| n.eq_ignore_ascii_case("x-github-delivery")))
    {
        return Err(paths.err(
            "reconcile.api",
            "github_deliveries needs the event id read from the X-GitHub-Delivery header",
        ));
    }
    Ok(Some(ReconcileRule {
        api,
        horizon_seconds: spec.horizon_seconds,
    }))
}

impl Pack {
    /// Whether and how the provider can be reconciled through its API.
    pub fn reconcile(&self) -> Option<ReconcileRule> {
        self.reconcile
    }

    /// The envelope of one event as the provider's API listed it (authenticated by the API
    /// call, not by a signature): the same locations as a webhook's body.
    pub fn api_envelope(&self, body: &[u8]) -> Result<Envelope, Rejection> {
        let headers = HeaderMap::new();
        let json = self.document(&headers, body)?;
        self.envelope(&Metadata::default(), &headers, &json, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::compile_builtin;

    #[test]
    fn stripe_and_github_declare_their_apis_and_stripe_events_have_envelopes() {
        let stripe = compile_builtin("stripe").unwrap().unwrap();
        assert_eq!(
            stripe.reconcile(),
            Some(ReconcileRule {
                api: ReconcileApi::StripeEvents,
                horizon_seconds: 30 * 86_400
            })
        );
        let github = compile_builtin("github").unwrap().unwrap();
        assert_eq!(
            github.reconcile(),
            Some(ReconcileRule {
                api: ReconcileApi::GithubDeliveries,
                horizon_seconds: 3 * 86_400
            })
        );
        assert!(github.reconcile().unwrap().api.needs_hook());
        assert!(!github.reconcile().unwrap().api.provider_retries());
        assert!(stripe.reconcile().unwrap().api.provider_retries());
        assert!(
            compile_builtin("shopify")
                .unwrap()
                .unwrap()
                .reconcile()
                .is_none()
        );
        let e = stripe
            .api_envelope(br#"{"id":"evt_1","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1"}}}"#)
            .unwrap();
        assert_eq!(e.event_id, "evt_1");
        assert_eq!(e.event_type.as_deref(), Some("charge.succeeded"));
        assert_eq!(e.object_id.as_deref(), Some("ch_1"));
        assert_eq!(e.created_at, Some(1_700_000_000));
        assert!(stripe.api_envelope(br#"{"object":"event"}"#).is_err());
    }

    #[test]
    fn unknown_apis_bad_horizons_and_header_ids_are_refused_naming_the_field() {
        let paths = Paths {
            root: "packs.x".into(),
        };
        let json = IdRule::Json(vec!["/id"]);
        let spec = |api: &str, horizon_seconds| ReconcileSpec {
            api: api.into(),
            horizon_seconds,
        };
        let e = compile(&paths, Some(&spec("ftp", 10)), &json).unwrap_err();
        assert!(e.to_string().contains("packs.x.reconcile.api"), "{e}");
        let e = compile(&paths, Some(&spec("stripe_events", 0)), &json).unwrap_err();
        assert!(e.to_string().contains("reconcile.horizon_seconds"), "{e}");
        let headers = IdRule::Headers(vec!["x-id"]);
        assert!(compile(&paths, Some(&spec("stripe_events", 10)), &headers).is_err());
        let e = compile(&paths, Some(&spec("github_deliveries", 10)), &json).unwrap_err();
        assert!(e.to_string().contains("X-GitHub-Delivery"), "{e}");
        let guid = IdRule::Headers(vec!["x-github-delivery"]);
        assert!(compile(&paths, Some(&spec("github_deliveries", 10)), &guid).is_ok());
        assert_eq!(compile(&paths, None, &json).unwrap(), None);
    }
}
