//! Reconciliation inside the gateway (issue 18): one run compares accepted inbox rows with
//! processed markers and outbox deliveries, per configured endpoint, and finds five kinds of
//! lost or stalled work ([`FindingKind`]): `received_overdue`, `missing_outbox`,
//! `outbox_stuck`, `orphan_marker` and `sequence_waiting` (docs/reconcile.md says what each
//! means).
//!
//! What is safe to redo is re-enqueued: an overdue row or a stuck delivery is made due now,
//! a missing delivery is inserted `PENDING` (its idempotency key is the inbox id, like every
//! delivery processing writes, so a consumer that saw it already drops it). What is not safe
//! (an orphan marker, a row waiting for a missing sequence) is reported only. Every repair re-checks, in its own statement, what
//! the scan found, and is recorded in `reconcile_findings` in the same transaction
//! ([`hookgate_store::ReconcileStore::record_findings`]): a row a worker took meanwhile is not
//! touched, two instances reconciling at once repair each thing once, and a run killed at any
//! point leaves only committed repairs, each listed.
//!
//! A run is one call of [`run`], made by the `reconcile` stage (its schedule, and runs the
//! operator API requested), and by `hookgate reconcile` on the store directly. Every scan is
//! bounded (`[reconcile] batch_size` rows a read, no payload read).

pub mod api;
pub mod asks;
mod github;
pub mod provider;

use std::collections::BTreeMap;

use hookgate_store::{
    FindingBatch, FindingKind, FoundEvent, MarkerKey, MissingScan, NewFinding, ReceivedRows,
    ReceivedScan, SharedStore, StoreError, StuckScan,
};
use serde_json::{Value, json};

use crate::config::destinations::filter::FilterInput;

use crate::config::{Config, EndpointConfig};
use crate::telemetry;

/// Whether `destination` receives `event` under the current configuration: its filter
/// decides, as where processing writes the outbox, so a filtered-out event is never a
/// `missing_outbox` finding. A filter with `where` predicates reads the verified payload
/// (opened with the configured keys); one that cannot be read (purged, or it does not open)
/// is not judged missing: reconciliation never invents a delivery it cannot justify.
async fn routes(
    config: &Config,
    store: &SharedStore,
    destination: &str,
    event: &FoundEvent,
) -> Result<bool, RunError> {
    let Some(filter) = config
        .destinations
        .iter()
        .find(|d| d.id == destination)
        .and_then(|d| d.filter.as_ref())
    else {
        return Ok(true);
    };
    let payload: Option<Value> = if filter.reads_payload() {
        let Some(record) = store
            .get_event(&event.inbox_id)
            .await
            .map_err(store_err("the event a filter reads"))?
        else {
            return Ok(false);
        };
        match crate::stage::attempt::open_payload(&config.payload_keys.keyring(), &record) {
            Ok(body) => serde_json::from_slice(&body).ok(),
            Err(_) => return Ok(false),
        }
    } else {
        None
    };
    Ok(filter.matches(&FilterInput {
        provider: &event.provider,
        event_type: event.event_type.as_deref(),
        payload: payload.as_ref(),
    }))
}

/// What one run looks at and may change.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// One endpoint; `None`: every configured endpoint.
    pub endpoint: Option<String>,
    /// Only rows received (deliveries created) at or after this time, unix ms. Without it,
    /// `missing_outbox` looks back `[reconcile] lookback_hours`, the others at every row.
    pub since_ms: Option<i64>,
    /// Find, change nothing.
    pub dry_run: bool,
    /// Write the findings (`reconcile_findings`): always for a run that repairs; for a dry
    /// run only when the operator API asked (its findings are listed as `dry_run`), never for
    /// `hookgate reconcile --dry-run`, which writes nothing at all.
    pub record: bool,
}

/// One finding of a run, as reported.
#[derive(Debug, Clone)]
pub struct Found {
    pub finding: NewFinding,
    /// `made_due`, `enqueued`, `reported`, `dry_run`; `none` for a dry run that records
    /// nothing.
    pub action: &'static str,
}

/// What a run found on one endpoint.
#[derive(Debug, Clone, Default)]
pub struct EndpointReport {
    pub endpoint: String,
    pub counts: BTreeMap<FindingKind, u64>,
    pub findings: Vec<Found>,
    /// Some scan stopped at its batch: more may be found by the next run.
    pub more: bool,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub endpoints: Vec<EndpointReport>,
}

impl Report {
    pub fn total(&self) -> u64 {
        self.endpoints.iter().flat_map(|e| e.counts.values()).sum()
    }

    /// Per endpoint and kind, the counts (a run record's `summary`).
    pub fn summary(&self) -> Value {
        json!({
            "endpoints": self.endpoints.iter().map(|e| json!({
                "endpoint": e.endpoint,
                "found": counts_json(&e.counts),
                "more": e.more,
            })).collect::<Vec<_>>(),
            "total": self.total(),
        })
    }

    /// Everything, findings included (`hookgate reconcile`'s output).
    pub fn detailed(&self) -> Value {
        json!(
            self.endpoints
                .iter()
                .map(|e| json!({
                    "endpoint": e.endpoint,
                    "found": counts_json(&e.counts),
                    "more": e.more,
                    "findings": e.findings.iter().map(found_json).collect::<Vec<_>>(),
                }))
                .collect::<Vec<_>>()
        )
    }
}

fn counts_json(counts: &BTreeMap<FindingKind, u64>) -> Value {
    let mut map = serde_json::Map::new();
    for kind in FindingKind::ALL {
        map.insert(
            kind.as_str().into(),
            json!(counts.get(&kind).copied().unwrap_or(0)),
        );
    }
    Value::Object(map)
}

fn found_json(f: &Found) -> Value {
    let n = &f.finding;
    json!({
        "kind": n.kind.as_str(),
        "inbox_id": n.inbox_id,
        "provider_event_id": n.provider_event_id,
        "destination": n.destination,
        "consumer": n.consumer,
        "action": f.action,
    })
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("endpoint {0:?} is not configured")]
    UnknownEndpoint(String),
    #[error("reconcile store call ({what}) failed: {source}")]
    Store {
        what: &'static str,
        #[source]
        source: StoreError,
    },
}

fn store_err(what: &'static str) -> impl FnOnce(StoreError) -> RunError {
    move |source| RunError::Store { what, source }
}

fn event_finding(kind: FindingKind, e: &FoundEvent, destination: Option<&str>) -> NewFinding {
    NewFinding {
        kind,
        endpoint_id: e.endpoint_id.clone(),
        provider: Some(e.provider.clone()),
        provider_event_id: Some(e.provider_event_id.clone()),
        inbox_id: Some(e.inbox_id.clone()),
        destination: destination.map(str::to_owned),
        consumer: None,
    }
}

fn marker_finding(m: &MarkerKey) -> NewFinding {
    NewFinding {
        kind: FindingKind::OrphanMarker,
        endpoint_id: m.endpoint_id.clone(),
        provider: Some(m.provider.clone()),
        provider_event_id: Some(m.provider_event_id.clone()),
        inbox_id: None,
        destination: None,
        consumer: Some(m.consumer.clone()),
    }
}

/// One run's context.
struct Run<'a> {
    store: &'a SharedStore,
    run_id: &'a str,
    scope: &'a Scope,
    now_ms: i64,
    threshold_ms: i64,
    batch: u32,
}

impl Run<'_> {
    /// Repairs (or, dry, only records) `findings` and adds those that held to `report`.
    async fn settle(
        &self,
        findings: Vec<NewFinding>,
        report: &mut EndpointReport,
    ) -> Result<(), RunError> {
        if findings.is_empty() {
            return Ok(());
        }
        let held: Vec<bool> = if self.scope.record {
            self.store
                .record_findings(FindingBatch {
                    run_id: self.run_id.to_owned(),
                    repair: !self.scope.dry_run,
                    threshold_ms: self.threshold_ms,
                    now_ms: self.now_ms,
                    findings: findings.clone(),
                })
                .await
                .map_err(store_err("record findings"))?
        } else {
            vec![true; findings.len()]
        };
        for (finding, held) in findings.into_iter().zip(held) {
            if !held {
                continue;
            }
            let action = match (self.scope.dry_run, self.scope.record) {
                (false, _) => finding.kind.repair_action().as_str(),
                (true, true) => "dry_run",
                (true, false) => "none",
            };
            if !self.scope.dry_run {
                telemetry::reconcile_finding(
                    finding.kind.as_str(),
                    &finding.endpoint_id,
                    finding.inbox_id.as_deref(),
                    action,
                );
            }
            *report.counts.entry(finding.kind).or_default() += 1;
            report.findings.push(Found { finding, action });
        }
        Ok(())
    }

    async fn endpoint(
        &self,
        config: &Config,
        ep: &EndpointConfig,
    ) -> Result<EndpointReport, RunError> {
        let mut report = EndpointReport {
            endpoint: ep.id.clone(),
            ..Default::default()
        };
        let since_all = self.scope.since_ms.unwrap_or(0);
        let limit = self.batch;

        for rows in [ReceivedRows::Overdue, ReceivedRows::WaitingForSequence] {
            let found = self
                .store
                .received_rows(&ReceivedScan {
                    endpoint_id: &ep.id,
                    rows,
                    threshold_ms: self.threshold_ms,
                    since_ms: since_all,
                    limit,
                })
                .await
                .map_err(store_err("received rows"))?;
            report.more |= found.len() >= limit as usize;
            let findings = found
                .iter()
                .map(|e| event_finding(rows.finding(), e, None))
                .collect();
            self.settle(findings, &mut report).await?;
        }

        let lookback_ms = i64::try_from(config.reconcile.lookback.as_millis()).unwrap_or(i64::MAX);
        let since_missing = self
            .scope
            .since_ms
            .unwrap_or(self.now_ms.saturating_sub(lookback_ms));
        for destination in &ep.destinations {
            let mut after = None;
            loop {
                let page = self
                    .store
                    .processed_without_delivery(&MissingScan {
                        endpoint_id: &ep.id,
                        destination,
                        since_ms: since_missing,
                        after: after.clone(),
                        limit,
                    })
                    .await
                    .map_err(store_err("events without a delivery"))?;
                let full = page.len() >= limit as usize;
                after = page.last().map(|e| (e.received_at_ms, e.inbox_id.clone()));
                let mut findings = Vec::new();
                for e in &page {
                    if routes(config, self.store, destination, e).await? {
                        findings.push(event_finding(
                            FindingKind::MissingOutbox,
                            e,
                            Some(destination),
                        ));
                    }
                }
                self.settle(findings, &mut report).await?;
                if !full {
                    break;
                }
            }
        }

        for destination in &config.destinations {
            let stuck = self
                .store
                .stuck_deliveries(&StuckScan {
                    endpoint_id: &ep.id,
                    destination: &destination.id,
                    threshold_ms: self.threshold_ms,
                    now_ms: self.now_ms,
                    since_ms: since_all,
                    limit,
                })
                .await
                .map_err(store_err("stuck deliveries"))?;
            report.more |= stuck.len() >= limit as usize;
            let findings = stuck
                .iter()
                .map(|e| event_finding(FindingKind::OutboxStuck, e, Some(&destination.id)))
                .collect();
            self.settle(findings, &mut report).await?;
        }

        let mut after: Option<MarkerKey> = None;
        loop {
            let page = self
                .store
                .orphan_markers(&ep.id, after.as_ref(), limit)
                .await
                .map_err(store_err("orphan markers"))?;
            let full = page.len() >= limit as usize;
            after = page.last().cloned();
            self.settle(page.iter().map(marker_finding).collect(), &mut report)
                .await?;
            if !full {
                break;
            }
        }
        Ok(report)
    }
}

/// One reconciliation run over `scope`, under `run_id` (the findings' run), at `now_ms`.
pub async fn run(
    store: &SharedStore,
    config: &Config,
    run_id: &str,
    scope: &Scope,
    now_ms: i64,
) -> Result<Report, RunError> {
    let endpoints: Vec<&EndpointConfig> = match &scope.endpoint {
        Some(id) => vec![
            config
                .endpoint(id)
                .ok_or_else(|| RunError::UnknownEndpoint(id.clone()))?,
        ],
        None => config.endpoints.iter().collect(),
    };
    let grace_ms = i64::try_from(config.reconcile.grace.as_millis()).unwrap_or(i64::MAX);
    let run = Run {
        store,
        run_id,
        scope,
        now_ms,
        threshold_ms: now_ms.saturating_sub(grace_ms),
        batch: config.reconcile.batch_size,
    };
    let mut report = Report::default();
    for ep in endpoints {
        report.endpoints.push(run.endpoint(config, ep).await?);
    }
    Ok(report)
}
