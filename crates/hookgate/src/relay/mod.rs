//! The outbox relay (DESIGN.md §5, step 3): delivers `PENDING` outbox rows to their
//! destinations and records the result.
//!
//! One loop per destination, so a destination that is down or slow only ever holds its own
//! rows: each loop leases at most as many due rows of ITS destination as it has free
//! delivery slots (`concurrency`), waits for its rate limit, and delivers each in its own
//! task; memory is bounded by `concurrency` deliveries per destination. Nothing here runs on
//! the acknowledgement path, and no transaction is open while a delivery is on the network:
//! the lease is one short store call, the result another, fenced on the lease.
//!
//! For one leased delivery: open the sealed payload with the runtime keyring (the provider's
//! original bytes), hand it to the destination with the inbox id as idempotency key, then
//! `DELIVERED`, or a retry with backoff and full jitter (`Retry-After` as a floor), or
//! `FAILED` (permanent, or attempts exhausted) with a redacted, bounded `last_error`. A crash
//! between publish and mark (failpoint `relay.after_publish_before_mark`) re-delivers after
//! the lease with the same key: effectively once, never "exactly once".
//!
//! [`Relay::run_once`] delivers one batch of one destination without sleeping (tests drain
//! with it); [`RelayPool`] runs the loops.

pub mod ops;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hookgate_core::RowIdentity;
use hookgate_core::retry::{MAX_LAST_ERROR_CHARS, RetryDecision, bounded};
use hookgate_relay::http::HttpDestination;
use hookgate_relay::nats::NatsDestination;
use hookgate_relay::{DeliveryError, Destination, Message};
use hookgate_store::{FailedDelivery, LeasedDelivery, ProcessingError, StoreError};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::destinations::{DestinationConfig, DestinationKind};
use crate::state::AppState;
use crate::tasks::StoppableTasks;

/// Most rows one lease call takes (bounded further by free delivery slots).
const MAX_LEASE_BATCH: usize = 64;

/// How one leased delivery ended, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// `DELIVERED`; `duplicate` when the destination had already seen the key.
    Delivered {
        duplicate: bool,
    },
    /// Still `PENDING`, due at this time.
    Retrying {
        at_ms: i64,
    },
    Failed,
    /// The lease expired before the result was recorded; another relay owns the row.
    LeaseLost,
    /// Recording the result failed; the row returns after its lease.
    StoreFailed,
}

/// One destination as the relay uses it.
pub struct DestinationRuntime {
    pub config: DestinationConfig,
    destination: Box<dyn Destination>,
    limiter: Option<DefaultDirectRateLimiter>,
    /// Free delivery slots (`concurrency`).
    slots: Arc<Semaphore>,
}

/// Delivers leased outbox rows.
pub struct Relay {
    state: Arc<AppState>,
    destinations: Vec<Arc<DestinationRuntime>>,
}

impl Relay {
    /// Builds every configured destination's client. NATS clients connect in the background,
    /// so a broker that is down never stops the gateway from starting.
    pub async fn new(state: Arc<AppState>) -> anyhow::Result<Relay> {
        let config = state.runtime.load().config.clone();
        let mut destinations = Vec::with_capacity(config.destinations.len());
        for d in &config.destinations {
            let destination: Box<dyn Destination> = match &d.kind {
                DestinationKind::Http { settings, .. } => Box::new(
                    HttpDestination::new(settings.clone())
                        .map_err(|e| anyhow::anyhow!("destination {}: {e}", d.id))?,
                ),
                DestinationKind::Nats(settings) => Box::new(
                    NatsDestination::connect(settings.clone())
                        .await
                        .map_err(|e| anyhow::anyhow!("destination {}: {e}", d.id))?,
                ),
            };
            let limiter = d.rate_limit.map(|r| {
                RateLimiter::direct(
                    Quota::per_second(NonZeroU32::new(r.per_second).unwrap_or(NonZeroU32::MIN))
                        .allow_burst(NonZeroU32::new(r.burst).unwrap_or(NonZeroU32::MIN)),
                )
            });
            destinations.push(Arc::new(DestinationRuntime {
                config: d.clone(),
                destination,
                limiter,
                slots: Arc::new(Semaphore::new(d.concurrency)),
            }));
        }
        Ok(Relay {
            state,
            destinations,
        })
    }

    pub fn destination_ids(&self) -> Vec<String> {
        self.destinations
            .iter()
            .map(|d| d.config.id.clone())
            .collect()
    }

    fn lease_ms(&self) -> i64 {
        let lease = self.state.runtime.load().config.relay.lease;
        i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Leases up to `limit` due deliveries of `destination` for `owner` and delivers them one
    /// after another; never sleeps (beyond the rate limit). Empty: nothing was due.
    pub async fn run_once(
        &self,
        destination: &str,
        owner: &str,
        limit: u32,
    ) -> Result<Vec<DeliveryOutcome>, StoreError> {
        let Some(d) = self
            .destinations
            .iter()
            .find(|d| d.config.id == destination)
        else {
            return Ok(Vec::new());
        };
        let now = self.state.clock.now_ms();
        let leased = self
            .state
            .store
            .lease_deliveries(destination, owner, now, self.lease_ms(), limit)
            .await?;
        let mut out = Vec::with_capacity(leased.len());
        for row in leased {
            if let Some(l) = &d.limiter {
                l.until_ready().await;
            }
            out.push(deliver_one(&self.state, d, owner, row).await);
        }
        Ok(out)
    }
}

/// Delivers one leased row and records the result (see the module docs).
async fn deliver_one(
    state: &AppState,
    d: &DestinationRuntime,
    owner: &str,
    row: LeasedDelivery,
) -> DeliveryOutcome {
    let LeasedDelivery { delivery, event } = row;
    let runtime = state.runtime.load_full();
    let body = match &event.payload {
        None => Err(DeliveryError::Permanent(
            "payload was purged by retention".into(),
        )),
        Some(sealed) => runtime
            .keyring
            .open(
                &RowIdentity {
                    provider: &event.provider,
                    endpoint_id: &event.endpoint_id,
                    provider_event_id: &event.provider_event_id,
                },
                event.payload_key_version,
                sealed,
            )
            .map_err(|e| DeliveryError::Permanent(format!("cannot open the sealed payload: {e}"))),
    };
    let result = match &body {
        Ok(body) => {
            let message = Message {
                inbox_id: &event.inbox_id,
                provider: &event.provider,
                endpoint_id: &event.endpoint_id,
                provider_event_id: &event.provider_event_id,
                event_type: event.event_type.as_deref(),
                body,
                timestamp: state.clock.now_secs(),
            };
            d.destination.deliver(&message).await
        }
        Err(e) => Err(e.clone()),
    };
    drop(body);
    let destination = d.config.id.as_str();
    let attempt = u32::try_from(delivery.attempt_count.max(1)).unwrap_or(u32::MAX);
    let (retry_at_ms, message) = match result {
        Ok(delivered) => {
            hookgate_core::fail_point!("relay.after_publish_before_mark");
            let now = state.clock.now_ms();
            return match state
                .store
                .mark_delivered(&delivery.outbox_id, owner, now)
                .await
            {
                Ok(()) => {
                    if delivered.duplicate {
                        tracing::info!(inbox_id = %event.inbox_id, destination, attempt, "delivered (deduplicated by the destination: an earlier publish had landed)");
                    } else {
                        tracing::debug!(inbox_id = %event.inbox_id, destination, attempt, "delivered");
                    }
                    metrics::counter!("hookgate_deliveries_total", "destination" => destination.to_owned(), "result" => "delivered").increment(1);
                    DeliveryOutcome::Delivered {
                        duplicate: delivered.duplicate,
                    }
                }
                Err(ProcessingError::LeaseLost) => {
                    tracing::warn!(inbox_id = %event.inbox_id, destination, "delivered, but the lease was lost before marking; it may be delivered again (consumers dedupe)");
                    DeliveryOutcome::LeaseLost
                }
                Err(ProcessingError::Store(e)) => {
                    tracing::warn!(inbox_id = %event.inbox_id, destination, error = %e, "delivered, but marking failed; it will be delivered again after the lease (consumers dedupe)");
                    DeliveryOutcome::StoreFailed
                }
            };
        }
        Err(DeliveryError::Permanent(reason)) => (None, format!("permanent: {reason}")),
        Err(DeliveryError::Transient {
            reason,
            retry_after,
        }) => {
            let now = state.clock.now_ms();
            match d.config.retry.decide(attempt, rand::random::<u64>()) {
                RetryDecision::RetryAfterMs(ms) => {
                    let floor = retry_after.map_or(0, |r| r.as_millis() as u64);
                    let wait = i64::try_from(ms.max(floor)).unwrap_or(i64::MAX);
                    (
                        Some(now.saturating_add(wait)),
                        format!("transient: {reason}"),
                    )
                }
                RetryDecision::GiveUp => (
                    None,
                    format!("attempts exhausted ({attempt}); last: transient: {reason}"),
                ),
            }
        }
    };
    let now = state.clock.now_ms();
    let failure = FailedDelivery {
        outbox_id: delivery.outbox_id.clone(),
        owner: owner.to_owned(),
        now_ms: now,
        error: bounded(&message, MAX_LAST_ERROR_CHARS),
        retry_at_ms,
    };
    match state.store.fail_delivery(failure).await {
        Ok(()) => match retry_at_ms {
            Some(at_ms) => {
                tracing::info!(inbox_id = %event.inbox_id, destination, attempt, retry_in_ms = at_ms - now, error = %message, "delivery failed; will retry");
                metrics::counter!("hookgate_deliveries_total", "destination" => destination.to_owned(), "result" => "retrying").increment(1);
                DeliveryOutcome::Retrying { at_ms }
            }
            None => {
                tracing::warn!(inbox_id = %event.inbox_id, destination, attempt, error = %message, "delivery FAILED");
                metrics::counter!("hookgate_deliveries_total", "destination" => destination.to_owned(), "result" => "failed").increment(1);
                DeliveryOutcome::Failed
            }
        },
        Err(ProcessingError::LeaseLost) => DeliveryOutcome::LeaseLost,
        Err(ProcessingError::Store(e)) => {
            tracing::warn!(inbox_id = %event.inbox_id, destination, error = %e, "recording the failed delivery failed; it returns after its lease");
            DeliveryOutcome::StoreFailed
        }
    }
}

/// The relay's loops, one per destination.
pub struct RelayPool {
    tasks: StoppableTasks,
}

impl RelayPool {
    pub fn start(relay: Arc<Relay>, poll_interval: Duration) -> RelayPool {
        let (mut tasks, stop_rx) = StoppableTasks::new();
        let instance = uuid::Uuid::now_v7();
        for d in &relay.destinations {
            let owner = format!("relay-{instance}/{}", d.config.id);
            tasks.push(tokio::spawn(destination_loop(
                Arc::clone(&relay),
                Arc::clone(d),
                owner,
                poll_interval,
                stop_rx.clone(),
            )));
        }
        tracing::info!(destinations = ?relay.destination_ids(), "relay started");
        RelayPool { tasks }
    }

    /// Stops leasing; waits up to `grace` for deliveries in flight, then abandons them (their
    /// leases expire and they are delivered again, with the same key).
    pub async fn shutdown(self, grace: Duration) {
        self.tasks
            .shutdown(
                grace,
                "deliveries were still in flight at shutdown; they return after the lease",
            )
            .await;
        tracing::info!("relay stopped");
    }
}

async fn destination_loop(
    relay: Arc<Relay>,
    d: Arc<DestinationRuntime>,
    owner: String,
    poll_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut in_flight: JoinSet<()> = JoinSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        while in_flight.try_join_next().is_some() {}
        // Wait for a free slot, then take every free slot (bounded) as this batch's limit.
        let first = tokio::select! {
            p = Arc::clone(&d.slots).acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stop.changed() => break,
        };
        let mut slots = vec![first];
        while slots.len() < MAX_LEASE_BATCH {
            match Arc::clone(&d.slots).try_acquire_owned() {
                Ok(p) => slots.push(p),
                Err(_) => break,
            }
        }
        let wanted = slots.len();
        let now = relay.state.clock.now_ms();
        let leased = relay
            .state
            .store
            .lease_deliveries(
                &d.config.id,
                &owner,
                now,
                relay.lease_ms(),
                u32::try_from(wanted).unwrap_or(u32::MAX),
            )
            .await;
        let got = match leased {
            Ok(rows) => {
                let got = rows.len();
                for row in rows {
                    if let Some(l) = &d.limiter {
                        l.until_ready().await;
                    }
                    let Some(slot) = slots.pop() else { break };
                    let state = Arc::clone(&relay.state);
                    let d = Arc::clone(&d);
                    let owner = owner.clone();
                    in_flight.spawn(async move {
                        deliver_one(&state, &d, &owner, row).await;
                        drop(slot);
                    });
                }
                got
            }
            Err(e) => {
                tracing::warn!(destination = %d.config.id, error = %e, "leasing deliveries failed");
                0
            }
        };
        drop(slots);
        if got < wanted {
            tokio::select! {
                _ = tokio::time::sleep(poll_interval) => {}
                _ = stop.changed() => break,
            }
        }
    }
    // Let deliveries in flight finish and record their result (bounded by the pool's grace).
    while in_flight.join_next().await.is_some() {}
}

/// Starts the relay when `[relay] enabled` and destinations are configured.
pub async fn start(state: &Arc<AppState>) -> anyhow::Result<Option<RelayPool>> {
    let config = state.runtime.load().config.clone();
    if !config.relay.enabled || config.destinations.is_empty() {
        return Ok(None);
    }
    let relay = Arc::new(Relay::new(Arc::clone(state)).await?);
    Ok(Some(RelayPool::start(relay, config.relay.poll_interval)))
}

/// How long shutdown waits for deliveries in flight: the longest destination timeout plus a
/// second, at most 10 s.
pub fn grace(state: &AppState) -> Duration {
    let config = state.runtime.load().config.clone();
    config
        .destinations
        .iter()
        .map(|d| d.timeout)
        .max()
        .unwrap_or_default()
        .saturating_add(Duration::from_secs(1))
        .min(Duration::from_secs(10))
}
