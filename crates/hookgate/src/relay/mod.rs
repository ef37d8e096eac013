//! The outbox relay, the delivery stage: delivers `PENDING` outbox rows to their
//! destinations and records the result.
//!
//! One loop per destination, so a destination that is down or slow only ever holds its own
//! rows: each loop first takes free delivery slots (`concurrency`), then as many send permits
//! of its rate limit as it has slots (waiting for the first), and only then leases at most
//! that many due rows of ITS destination — so no leased row ever waits for the rate limiter
//! while its lease runs out (a permit taken when nothing is due is spent unused). Each row is
//! delivered in its own task; memory is bounded by `concurrency` deliveries per destination.
//! Nothing here runs on the acknowledgement path, and no transaction is open while a
//! delivery is on the network: the lease is one short store call, the result another, fenced
//! on the lease.
//!
//! For one leased delivery: open the sealed payload with the runtime keyring (the provider's
//! original bytes), hand it to the destination with the inbox id as idempotency key, then
//! `DELIVERED`, or a retry with backoff and full jitter (`Retry-After` as a floor), or
//! `FAILED` (permanent, or attempts exhausted) with a redacted, bounded `last_error`. A crash
//! between publish and mark (failpoint `relay.after_publish_before_mark`) re-delivers after
//! the lease with the same key: effectively once, never "exactly once".
//!
//! [`Relay::run_once`] delivers one batch of one destination without sleeping beyond its rate
//! limit (tests drain with it); [`start`] runs the loops as the supervised `delivery` stage
//! ([`crate::stage`]).

pub mod ops;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hookgate_relay::http::HttpDestination;
#[cfg(feature = "nats")]
use hookgate_relay::nats::NatsDestination;
#[cfg(feature = "rabbitmq")]
use hookgate_relay::rabbitmq::RabbitMqDestination;
#[cfg(feature = "redis-stream")]
use hookgate_relay::redis_stream::RedisStreamDestination;
use hookgate_relay::transform::Transformed;
use hookgate_relay::{DeliveryError, Destination, Message};
use hookgate_store::{FailedDelivery, LeasedDelivery, ProcessingError, StoreError};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::destinations::{DestinationConfig, DestinationKind};
use crate::stage::attempt::{
    Failure, NextAttempt, Subject, abandoned, attempt_number, next_attempt, open_payload,
    settle_failure,
};
use crate::stage::{self, Settled, StageLoop, StagePool, Step};
use crate::state::AppState;
use crate::{telemetry, traces};
use tracing::Instrument as _;

/// Most rows one lease call takes (bounded further by free delivery slots and send permits).
const MAX_LEASE_BATCH: usize = 64;

/// A delivery the destination accepted; `duplicate` when it had already seen the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub duplicate: bool,
}

/// How one leased delivery ended, for logs and tests: `Retrying` is still `PENDING`, due then.
pub type DeliveryOutcome = Settled<Delivered>;

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
    /// RabbitMQ and Redis at their first delivery, so a broker that is down never stops the
    /// gateway from starting.
    pub async fn new(state: Arc<AppState>) -> anyhow::Result<Relay> {
        let config = state.runtime.load().config.clone();
        let mut destinations = Vec::with_capacity(config.destinations.len());
        for d in &config.destinations {
            let destination: Box<dyn Destination> = match &d.kind {
                DestinationKind::Http { settings, .. } => Box::new(
                    HttpDestination::new(settings.clone())
                        .map_err(|e| anyhow::anyhow!("destination {}: {e}", d.id))?,
                ),
                #[cfg(feature = "nats")]
                DestinationKind::Nats(settings) => Box::new(
                    NatsDestination::connect(settings.clone())
                        .await
                        .map_err(|e| anyhow::anyhow!("destination {}: {e}", d.id))?,
                ),
                #[cfg(feature = "rabbitmq")]
                DestinationKind::RabbitMq { settings, .. } => Box::new(
                    RabbitMqDestination::new(settings.clone())
                        .map_err(|e| anyhow::anyhow!("destination {}: {e}", d.id))?,
                ),
                #[cfg(feature = "redis-stream")]
                DestinationKind::RedisStream { settings, .. } => Box::new(
                    RedisStreamDestination::new(settings.clone())
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

    /// Takes up to `limit` send permits of `destination`'s rate limit (waiting for the first),
    /// leases at most that many due deliveries for `owner` and delivers them one after
    /// another; never sleeps otherwise. Empty: nothing was due.
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
        let granted = d
            .send_permits(usize::try_from(limit).unwrap_or(usize::MAX))
            .await;
        let leased = self.lease(d, owner, granted).await?;
        let mut out = Vec::with_capacity(leased.len());
        for row in leased {
            out.push(deliver_one(&self.state, d, owner, row).await);
        }
        Ok(out)
    }

    /// Leases up to `limit` due deliveries of `d` for `owner`.
    async fn lease(
        &self,
        d: &DestinationRuntime,
        owner: &str,
        limit: usize,
    ) -> Result<Vec<LeasedDelivery>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let now = self.state.clock.now_ms();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        self.state
            .store
            .lease_deliveries(&d.config.id, owner, now, self.lease_ms(), limit)
            .await
    }
}

impl DestinationRuntime {
    /// Waits until the rate limit lets one message go, then takes up to `max` send permits in
    /// all without waiting more; returns how many were granted (`max` without a rate limit).
    async fn send_permits(&self, max: usize) -> usize {
        let Some(limiter) = &self.limiter else {
            return max;
        };
        if max == 0 {
            return 0;
        }
        limiter.until_ready().await;
        let mut granted = 1;
        while granted < max && limiter.check().is_ok() {
            granted += 1;
        }
        granted
    }
}

/// Delivers one leased row and records the result (see the module docs), in its
/// `relay.delivery` span.
async fn deliver_one(
    state: &AppState,
    d: &DestinationRuntime,
    owner: &str,
    row: LeasedDelivery,
) -> DeliveryOutcome {
    let span = traces::delivery_span(
        &row.event.inbox_id,
        &row.event.endpoint_id,
        &d.config.id,
        d.config.kind.name(),
        attempt_number(row.delivery.attempt_count),
    );
    let outcome = deliver_attempt(state, d, owner, row, &span)
        .instrument(span.clone())
        .await;
    traces::outcome(
        &span,
        outcome.outcome_word(|done| {
            if done.duplicate {
                "duplicate"
            } else {
                "delivered"
            }
        }),
    );
    outcome
}

async fn deliver_attempt(
    state: &AppState,
    d: &DestinationRuntime,
    owner: &str,
    row: LeasedDelivery,
    span: &tracing::Span,
) -> DeliveryOutcome {
    let LeasedDelivery { delivery, event } = row;
    let destination = d.config.id.as_str();
    let subject = Subject {
        stage: stage::DELIVERY,
        endpoint: &event.endpoint_id,
        inbox_id: &event.inbox_id,
        destination: Some(destination),
        attempt: attempt_number(delivery.attempt_count),
    };
    // Leased more often than its attempts allow: a crash loop, not worth another send.
    if let Some(next) = abandoned(
        &d.config.retry,
        delivery.attempt_count,
        delivery.last_error.as_deref(),
    ) {
        return record_failure(state, &delivery.outbox_id, owner, &subject, next).await;
    }
    let runtime = state.runtime.load_full();
    let result = match open_payload(&runtime.keyring, &event) {
        Ok(body) => match transformed(d, &event.inbox_id, &body).await {
            Ok(None) => send(state, d, &delivery, &event, &body, None, span).await,
            Ok(Some(Transformed::Skip)) => Ok(Sent::Skipped),
            Ok(Some(Transformed::Body {
                bytes,
                content_type,
            })) => {
                send(
                    state,
                    d,
                    &delivery,
                    &event,
                    &bytes,
                    Some(content_type),
                    span,
                )
                .await
            }
            Err(reason) => Err(DeliveryError::Permanent(reason)),
        },
        Err(e) => Err(DeliveryError::Permanent(e.to_string())),
    };
    let failure = match result {
        Ok(sent) => {
            hookgate_core::fail_point!("relay.after_publish_before_mark");
            let now = state.clock.now_ms();
            let started = std::time::Instant::now();
            let note = match sent {
                Sent::Delivered(_) => None,
                Sent::Skipped => Some(SKIPPED_NULL),
            };
            let marked = state
                .store
                .mark_delivered(&delivery.outbox_id, owner, now, note)
                .await;
            telemetry::delivery_committed(started.elapsed());
            return match (marked, sent) {
                (Ok(()), Sent::Delivered(delivered)) => {
                    telemetry::delivered(
                        &event.inbox_id,
                        destination,
                        subject.attempt,
                        delivered.duplicate,
                    );
                    DeliveryOutcome::Completed(Delivered {
                        duplicate: delivered.duplicate,
                    })
                }
                (Ok(()), Sent::Skipped) => {
                    telemetry::transform_skipped(&event.inbox_id, destination);
                    DeliveryOutcome::Completed(Delivered { duplicate: false })
                }
                (Err(ProcessingError::LeaseLost), _) => {
                    tracing::warn!(inbox_id = %event.inbox_id, destination, "delivered, but the lease was lost before marking; it may be delivered again (consumers dedupe)");
                    DeliveryOutcome::LeaseLost
                }
                (Err(ProcessingError::Store(e)), _) => {
                    tracing::warn!(inbox_id = %event.inbox_id, destination, error = %e, "delivered, but marking failed; it will be delivered again after the lease (consumers dedupe)");
                    DeliveryOutcome::StoreFailed
                }
            };
        }
        Err(DeliveryError::Permanent(reason)) => Failure {
            message: format!("permanent: {reason}"),
            transient: false,
            retry_after: None,
        },
        Err(DeliveryError::Transient {
            reason,
            retry_after,
        }) => Failure {
            message: format!("transient: {reason}"),
            transient: true,
            retry_after,
        },
    };
    let now = state.clock.now_ms();
    let next = next_attempt(
        Some(&d.config.retry),
        subject.attempt,
        failure,
        now,
        rand::random::<u64>(),
    );
    record_failure(state, &delivery.outbox_id, owner, &subject, next).await
}

/// `last_error` of a delivery its transform skipped (it is `DELIVERED`: nothing is due).
pub const SKIPPED_NULL: &str = "skipped: transform output null";

/// How a delivery that did not fail ended.
enum Sent {
    Delivered(hookgate_relay::Delivered),
    /// The transform gave `null`: nothing was sent.
    Skipped,
}

/// The destination's transform of `body` (`None`: it has none, the body goes as it is). An
/// error is the redacted reason (never payload bytes): the program is deterministic and
/// would fail every attempt, so the delivery fails permanently.
async fn transformed(
    d: &DestinationRuntime,
    inbox_id: &str,
    body: &[u8],
) -> Result<Option<Transformed>, String> {
    let Some(transform) = &d.config.transform else {
        return Ok(None);
    };
    transform.apply(body).await.map(Some).map_err(|e| {
        tracing::warn!(inbox_id, destination = %d.config.id, error = %e, "transform failed");
        format!("transform: {e}")
    })
}

/// Hands one body to the destination; `content_type` is the transform's (`None`: the
/// provider's bytes).
async fn send(
    state: &AppState,
    d: &DestinationRuntime,
    delivery: &hookgate_store::OutboxRecord,
    event: &hookgate_store::InboxRecord,
    body: &[u8],
    content_type: Option<&str>,
    span: &tracing::Span,
) -> Result<Sent, DeliveryError> {
    let traceparent = traces::traceparent(span);
    let message = Message {
        inbox_id: &event.inbox_id,
        idempotency_key: delivery.idempotency_key(event),
        provider: &event.provider,
        endpoint_id: &event.endpoint_id,
        provider_event_id: &event.provider_event_id,
        event_type: event.event_type.as_deref(),
        body,
        content_type,
        timestamp: state.clock.now_secs(),
        traceparent: traceparent.as_deref(),
    };
    let result = d.destination.deliver(&message).await;
    match &result {
        Ok(delivered) => {
            if let Some(status) = delivered.http_status {
                traces::http_status(span, status);
            }
        }
        Err(e) => traces::delivery_error(span, e),
    }
    result.map(Sent::Delivered)
}

/// Records the failed delivery attempt `next` decided, fenced on the lease.
async fn record_failure(
    state: &AppState,
    outbox_id: &str,
    owner: &str,
    subject: &Subject<'_>,
    next: NextAttempt,
) -> DeliveryOutcome {
    let now = state.clock.now_ms();
    let started = std::time::Instant::now();
    let recorded = state
        .store
        .fail_delivery(FailedDelivery {
            outbox_id: outbox_id.to_owned(),
            owner: owner.to_owned(),
            now_ms: now,
            error: next.last_error(),
            retry_at_ms: next.retry_at_ms,
        })
        .await;
    telemetry::delivery_committed(started.elapsed());
    settle_failure(subject, &next, now, recorded)
}

struct DeliveryLoops {
    relay: Arc<Relay>,
    instance: uuid::Uuid,
}

/// One destination's loop: its lease owner id and its deliveries in flight.
struct DestinationLoop {
    destination: Arc<DestinationRuntime>,
    owner: String,
    in_flight: JoinSet<()>,
}

impl StageLoop for DeliveryLoops {
    type Local = DestinationLoop;

    fn name(&self) -> &'static str {
        stage::DELIVERY
    }

    fn start_loop(&self, index: usize) -> DestinationLoop {
        let destination = Arc::clone(&self.relay.destinations[index]);
        DestinationLoop {
            owner: format!("relay-{}/{}", self.instance, destination.config.id),
            destination,
            in_flight: JoinSet::new(),
        }
    }

    async fn step(&self, l: &mut DestinationLoop, stop: &mut watch::Receiver<bool>) -> Step {
        while l.in_flight.try_join_next().is_some() {}
        let d = &l.destination;
        // Wait for a free slot, then take every free slot (bounded) …
        let first = tokio::select! {
            p = Arc::clone(&d.slots).acquire_owned() => match p { Ok(p) => p, Err(_) => return Step::Stopped },
            _ = stop.changed() => return Step::Stopped,
        };
        let mut slots = vec![first];
        while slots.len() < MAX_LEASE_BATCH {
            match Arc::clone(&d.slots).try_acquire_owned() {
                Ok(p) => slots.push(p),
                Err(_) => break,
            }
        }
        // … and as many send permits, so every row leased below can go out at once.
        let granted = tokio::select! {
            n = d.send_permits(slots.len()) => n,
            _ = stop.changed() => return Step::Stopped,
        };
        slots.truncate(granted);
        let rows = match self.relay.lease(d, &l.owner, granted).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(destination = %d.config.id, error = %e, "leasing deliveries failed");
                return Step::Idle;
            }
        };
        let got = rows.len();
        for (row, slot) in rows.into_iter().zip(slots) {
            let state = Arc::clone(&self.relay.state);
            let d = Arc::clone(d);
            let owner = l.owner.clone();
            l.in_flight.spawn(async move {
                deliver_one(&state, &d, &owner, row).await;
                drop(slot);
            });
        }
        if got < granted {
            Step::Idle
        } else {
            Step::Busy
        }
    }

    async fn finish(&self, mut l: DestinationLoop) {
        // Deliveries in flight finish and record their result (bounded by the pool's grace).
        while l.in_flight.join_next().await.is_some() {}
    }
}

/// Starts the relay when `[relay] enabled` and destinations are configured.
pub async fn start(state: &Arc<AppState>) -> anyhow::Result<Option<StagePool>> {
    let config = state.runtime.load().config.clone();
    if !config.relay.enabled || config.destinations.is_empty() {
        return Ok(None);
    }
    let relay = Arc::new(Relay::new(Arc::clone(state)).await?);
    tracing::info!(destinations = ?relay.destination_ids(), "relay starting");
    let loops = relay.destinations.len();
    let stage = DeliveryLoops {
        relay,
        instance: uuid::Uuid::now_v7(),
    };
    Ok(Some(StagePool::start(
        Arc::new(stage),
        loops,
        config.relay.poll_interval,
        Arc::clone(&state.stages),
    )))
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
