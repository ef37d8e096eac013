//! Provider reconciliation (issue 18, "With the providers"): for an endpoint whose pack
//! declares how (`reconcile` in the pack) and whose configuration has `reconcile = { … }`,
//! ask the provider's API what it sent since the endpoint's checkpoint and bring in what
//! never arrived, through the same unique key as a webhook (provider, endpoint, event id): a
//! found event that already has its row is a duplicate and nothing else happens.
//!
//! - Stripe (`stripe_events`): `GET /v1/events`, created since the checkpoint, paginated by
//!   `has_more` / `starting_after`; each event without a row is stored sealed like any
//!   payload, `source = reconciled`, with the body the API call authenticated.
//! - GitHub (`github_deliveries`, `github.rs`): the hook's deliveries since the start; a GUID
//!   neither in the inbox nor ever answered 2xx is redelivered once (its latest failed
//!   delivery), and arrives as a signed webhook.
//!
//! Where a run starts: `--since`, else the endpoint's checkpoint, else the provider's listing
//! horizon back from now; an open no-retry window older than that start moves it back. A run
//! that completed saves its checkpoint (the time it started, less [`CHECKPOINT_OVERLAP`]);
//! one that failed saves nothing, so the next one reads the same span again.

use std::time::Duration;

use hookgate_core::{InboxStatus, RowIdentity};
use hookgate_providers::pack::ReconcileApi;
use hookgate_store::{Acceptance, NewInboxRow, SharedStore, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{ApiClient, ApiError};
use crate::config::reconcile::EndpointReconcile;
use crate::config::{Config, EndpointConfig};
use crate::telemetry;

/// A checkpoint is saved this long before the run started: an event created while the run
/// listed, or stamped by a provider clock slightly behind ours, is listed again next time
/// (and is then a duplicate).
pub const CHECKPOINT_OVERLAP: Duration = Duration::from_secs(60);

/// The most pages one run reads of one endpoint's listing; a run that stops there saves no
/// checkpoint (the next run lists again from the same start).
pub const MAX_PAGES: u32 = 1_000;

/// Events per listed page (Stripe's and GitHub's maximum).
pub const PAGE_SIZE: u32 = 100;

/// What the `matched_secret_version` column says of a reconciled row: no secret verified it,
/// the provider's API authenticated it.
pub const API_AUTHENTICATED: &str = "api";

/// Why a provider run of one endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("provider reconcile store call ({what}) failed: {source}")]
    Store {
        what: &'static str,
        #[source]
        source: StoreError,
    },
}

pub(super) fn store_err(what: &'static str) -> impl FnOnce(StoreError) -> ProviderError {
    move |source| ProviderError::Store { what, source }
}

/// One event or delivery a run looked at.
#[derive(Debug, Clone)]
pub struct Looked {
    /// The provider's event id (Stripe) or delivery GUID (GitHub).
    pub event_id: String,
    /// `found`, `already_present`, `answered` (GitHub: not in the inbox, but a delivery of it
    /// was answered 2xx, so it is not asked for again), `redelivered`; a dry run's `found` /
    /// `redelivered` say what a run would do.
    pub outcome: &'static str,
    pub inbox_id: Option<String>,
}

/// What a provider run found on one endpoint.
#[derive(Debug, Clone)]
pub struct ProviderReport {
    pub endpoint: String,
    pub provider: &'static str,
    pub api: ReconcileApi,
    /// Where the listing started, unix ms.
    pub from_ms: i64,
    pub found: u64,
    pub already_present: u64,
    pub answered: u64,
    pub redelivered: u64,
    /// Redelivery requests GitHub refused for that delivery (422: too old, or not
    /// redeliverable): counted and listed, the run goes on.
    pub redelivery_refused: u64,
    /// The checkpoint saved (`None`: a dry run, or a run that stopped at [`MAX_PAGES`]).
    pub checkpoint_ms: Option<i64>,
    /// The listing was longer than one run reads.
    pub more: bool,
    pub looked: Vec<Looked>,
}

impl ProviderReport {
    pub(super) fn new(ep: &EndpointConfig, api: ReconcileApi, from_ms: i64) -> Self {
        Self {
            endpoint: ep.id.clone(),
            provider: ep.provider_id(),
            api,
            from_ms,
            found: 0,
            already_present: 0,
            answered: 0,
            redelivered: 0,
            redelivery_refused: 0,
            checkpoint_ms: None,
            more: false,
            looked: Vec::new(),
        }
    }

    pub(super) fn look(
        &mut self,
        dry_run: bool,
        event_id: &str,
        outcome: &'static str,
        inbox_id: Option<String>,
    ) {
        match outcome {
            "found" => self.found += 1,
            "redelivered" => self.redelivered += 1,
            "redelivery_refused" => self.redelivery_refused += 1,
            "answered" => self.answered += 1,
            _ => self.already_present += 1,
        }
        if !dry_run {
            telemetry::reconciled(self.provider, &self.endpoint, event_id, outcome);
        }
        self.looked.push(Looked {
            event_id: event_id.to_owned(),
            outcome,
            inbox_id,
        });
    }

    pub fn json(&self) -> Value {
        json!({
            "api": self.api.as_str(),
            "from": jiff::Timestamp::from_millisecond(self.from_ms).ok().map(|t| t.to_string()),
            "found": self.found,
            "already_present": self.already_present,
            "answered": self.answered,
            "redelivered": self.redelivered,
            "redelivery_refused": self.redelivery_refused,
            "checkpoint": self.checkpoint_ms
                .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map(|t| t.to_string()),
            "more": self.more,
            "events": self.looked.iter().map(|l| json!({
                "id": l.event_id,
                "outcome": l.outcome,
                "inbox_id": l.inbox_id,
            })).collect::<Vec<_>>(),
        })
    }
}

/// One provider run's context.
pub struct ProviderRun<'a> {
    pub store: &'a SharedStore,
    pub config: &'a Config,
    pub client: &'a ApiClient,
    /// `--since`: overrides the checkpoint.
    pub since_ms: Option<i64>,
    /// List (and, for GitHub, decide), change nothing: no row, no redelivery, no checkpoint.
    pub dry_run: bool,
    pub now_ms: i64,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl ProviderRun<'_> {
    /// Whether the endpoint's inbox has the event (the webhook's unique key: provider,
    /// endpoint, event id); if so it is looked at as `already_present`.
    pub(super) async fn already_present(
        &self,
        ep: &EndpointConfig,
        event_id: &str,
        report: &mut ProviderReport,
    ) -> Result<bool, ProviderError> {
        let Some(inbox_id) = self
            .store
            .inbox_id_of(ep.provider_id(), &ep.id, event_id)
            .await
            .map_err(store_err("look up an event id"))?
        else {
            return Ok(false);
        };
        report.look(self.dry_run, event_id, "already_present", Some(inbox_id));
        Ok(true)
    }

    /// Reconciles `ep` with its provider. `Ok(None)` for an endpoint without `reconcile`.
    pub async fn endpoint(
        &self,
        ep: &EndpointConfig,
    ) -> Result<Option<ProviderReport>, ProviderError> {
        let Some(rc) = &ep.reconcile else {
            return Ok(None);
        };
        let result = self.reconcile(ep, rc).await;
        if !self.dry_run {
            telemetry::provider_reconcile_finished(
                ep.provider_id(),
                &ep.id,
                result.as_ref().err().map(|e| e.to_string()).as_deref(),
            );
        }
        result.map(Some)
    }

    async fn reconcile(
        &self,
        ep: &EndpointConfig,
        rc: &EndpointReconcile,
    ) -> Result<ProviderReport, ProviderError> {
        let horizon_start = self.now_ms.saturating_sub(ms(rc.horizon));
        let windows = if rc.api.needs_hook() {
            self.store
                .open_no_retry_windows(&ep.id)
                .await
                .map_err(store_err("open no-retry windows"))?
        } else {
            Vec::new()
        };
        let from_ms = match self.since_ms {
            Some(since) => since,
            None => self
                .store
                .checkpoint(&ep.id)
                .await
                .map_err(store_err("checkpoint"))?
                .map_or(horizon_start, |c| c.checkpoint_at_ms),
        };
        // A window the checkpoint already passed (written after a run that started later)
        // is covered by starting at it, less the overlap: the provider stamps a delivery
        // with its own clock, when it sent it.
        let from_ms = windows
            .iter()
            .map(|w| w.started_at_ms.saturating_sub(ms(CHECKPOINT_OVERLAP)))
            .fold(from_ms, i64::min)
            .max(horizon_start);
        let mut report = ProviderReport::new(ep, rc.api, from_ms);
        match rc.api {
            ReconcileApi::StripeEvents => self.stripe(ep, rc, &mut report).await?,
            ReconcileApi::GithubDeliveries => self.github(ep, rc, &mut report).await?,
        }
        if !self.dry_run && !report.more {
            let checkpoint = self.now_ms.saturating_sub(ms(CHECKPOINT_OVERLAP));
            self.store
                .save_checkpoint(&ep.id, ep.provider_id(), checkpoint, self.now_ms)
                .await
                .map_err(store_err("save checkpoint"))?;
            if let Some(last) = windows.last() {
                self.store
                    .cover_no_retry_windows(&ep.id, last.window_id, self.now_ms)
                    .await
                    .map_err(store_err("cover no-retry windows"))?;
            }
            report.checkpoint_ms = Some(checkpoint);
        }
        Ok(report)
    }

    /// Stripe: every event created at or after the start, newest first, page by page.
    async fn stripe(
        &self,
        ep: &EndpointConfig,
        rc: &EndpointReconcile,
        report: &mut ProviderReport,
    ) -> Result<(), ProviderError> {
        let provider = ep.provider_id();
        let url = format!("{}/v1/events", rc.api_base);
        let created_gte = report.from_ms.div_euclid(1000).to_string();
        let limit = PAGE_SIZE.to_string();
        let mut starting_after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let answer = self
                .client
                .call(provider, &ep.id, "list events", |http| {
                    let mut query = vec![
                        ("created[gte]", created_gte.as_str()),
                        ("limit", limit.as_str()),
                    ];
                    if let Some(after) = &starting_after {
                        query.push(("starting_after", after.as_str()));
                    }
                    if rc.undelivered_only {
                        query.push(("delivery_success", "false"));
                    }
                    http.get(&url)
                        .query(&query)
                        .bearer_auth(rc.api_key.expose())
                })
                .await?;
            let malformed = |reason: String| ApiError::Malformed {
                provider,
                endpoint: ep.id.clone(),
                what: "list events",
                reason,
            };
            if answer.status != 200 {
                return Err(ApiError::Status {
                    provider,
                    endpoint: ep.id.clone(),
                    what: "list events",
                    status: answer.status,
                }
                .into());
            }
            let page: StripeList = serde_json::from_slice(&answer.body).map_err(|e| {
                malformed(format!(
                    "not an event list (line {}, column {})",
                    e.line(),
                    e.column()
                ))
            })?;
            if page.object != "list" {
                return Err(malformed(format!("object is {:?}, not \"list\"", page.object)).into());
            }
            for event in &page.data {
                let id = event
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty() && id.len() <= 512)
                    .ok_or_else(|| malformed("an event without an id".into()))?
                    .to_owned();
                self.stripe_event(ep, &id, event, report).await?;
            }
            match (page.has_more, page.data.last()) {
                (true, Some(last)) => {
                    starting_after = last.get("id").and_then(Value::as_str).map(str::to_owned);
                }
                _ => return Ok(()),
            }
        }
        report.more = true;
        Ok(())
    }

    /// One listed Stripe event: present (a duplicate: nothing happens) or brought in.
    async fn stripe_event(
        &self,
        ep: &EndpointConfig,
        id: &str,
        event: &Value,
        report: &mut ProviderReport,
    ) -> Result<(), ProviderError> {
        let provider = ep.provider_id();
        if self.already_present(ep, id, report).await? {
            return Ok(());
        }
        if self.dry_run {
            report.look(true, id, "found", None);
            return Ok(());
        }
        let body = event.to_string();
        let mut envelope =
            ep.pack
                .api_envelope(body.as_bytes())
                .map_err(|e| ApiError::Malformed {
                    provider,
                    endpoint: ep.id.clone(),
                    what: "list events",
                    reason: format!("event {id}: {e}"),
                })?;
        if ep.object_id_pointer.is_some() || ep.object_version_pointer.is_some() {
            crate::ingress::pipeline::object_from_pointers(ep, body.as_bytes(), &mut envelope);
        }
        let row = sealed_row(self.config, ep, envelope, body.as_bytes(), self.now_ms);
        let acceptance = self
            .store
            .accept(row)
            .await
            .map_err(store_err("store a reconciled event"))?;
        match acceptance {
            Acceptance::Accepted { inbox_id } => {
                report.look(false, id, "found", Some(inbox_id));
            }
            // The webhook arrived meanwhile: same key, one row.
            Acceptance::Duplicate { inbox_id } | Acceptance::ReplaySuspected { inbox_id } => {
                report.look(false, id, "already_present", Some(inbox_id));
            }
        }
        Ok(())
    }
}

/// The inbox row of an event the provider's API listed: sealed under its own identity like any
/// payload, its digest keyed the same way, allowed types `RECEIVED` and others `IGNORED` as
/// at the ingress.
fn sealed_row(
    config: &Config,
    ep: &EndpointConfig,
    envelope: hookgate_core::Envelope,
    body: &[u8],
    now_ms: i64,
) -> NewInboxRow {
    let keyring = config.payload_keys.keyring();
    let provider = ep.provider_id();
    let identity = RowIdentity {
        provider,
        endpoint_id: &ep.id,
        provider_event_id: &envelope.event_id,
    };
    let sealed = keyring.seal(&mut rand::thread_rng(), &identity, body);
    let status = if ep.allows(envelope.event_type.as_deref()) {
        InboxStatus::Received
    } else {
        InboxStatus::Ignored
    };
    NewInboxRow {
        inbox_id: uuid::Uuid::now_v7().to_string(),
        provider: provider.to_owned(),
        endpoint_id: ep.id.clone(),
        provider_event_id: envelope.event_id,
        event_type: envelope.event_type,
        object_id: envelope.object_id,
        object_version: envelope.object_version,
        provider_created_at: envelope.created_at,
        received_at_ms: now_ms,
        payload: sealed.bytes,
        payload_key_version: sealed.key_version,
        payload_digest: keyring.digest(body).to_vec(),
        matched_secret_version: API_AUTHENTICATED.to_owned(),
        status,
        source: hookgate_core::EventSource::Reconciled,
        api_version: envelope.api_version,
        replay_digest: None,
        sequence_number: envelope.sequence,
    }
}

/// Stripe's list object (`{"object": "list", "data": [...], "has_more": …, "url": …}`).
#[derive(Deserialize)]
struct StripeList {
    object: String,
    data: Vec<Value>,
    has_more: bool,
}
