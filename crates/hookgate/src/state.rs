//! Shared state of a running gateway: the swappable runtime configuration (endpoints, secret
//! slots, payload keys — replaced whole on SIGHUP, cached secret values carried over), the
//! store, the clock and the global limits.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};
use hookgate_core::seal::Keyring;
use hookgate_providers::SecretMaterial;
use hookgate_store::SharedStore;
use tokio::sync::Semaphore;

use crate::config::{Config, EndpointConfig};
use crate::ingress::limits::{ClientLimiter, EndpointBudget};
use crate::secrets::cache::{SecretReader, SecretSlot};
use crate::stage::StageHealth;

/// The wall clock of ingress, workers and relay (freshness, leases, due times); tests pin it.
/// Outside it: the store stamps applied migrations, and `send` / `bench` sign with the time now.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
    fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        d.as_millis() as i64
    }
}

/// Environment variable that moves the binary's clock by this many seconds — only in builds
/// with the `failpoints` feature (tests of the real binary let rows expire without waiting
/// days); a default build never reads it.
#[cfg(feature = "failpoints")]
pub const TEST_CLOCK_OFFSET_ENV: &str = "HOOKGATE_TEST_CLOCK_OFFSET_SECONDS";

/// The clock the binary runs on (`serve`, `worker`, the `events` commands): the system
/// clock, moved by [`TEST_CLOCK_OFFSET_ENV`] in `failpoints` builds.
pub fn process_clock() -> Arc<dyn Clock> {
    #[cfg(feature = "failpoints")]
    if let Ok(text) = std::env::var(TEST_CLOCK_OFFSET_ENV) {
        match text.trim().parse::<i64>() {
            Ok(secs) => {
                tracing::warn!(offset_seconds = secs, "test clock offset in effect");
                return Arc::new(OffsetClock(secs.saturating_mul(1000)));
            }
            Err(_) => tracing::warn!("{TEST_CLOCK_OFFSET_ENV} is not a number of seconds; ignored"),
        }
    }
    Arc::new(SystemClock)
}

/// The system clock moved by a fixed number of milliseconds (tests of the real binary).
#[cfg(feature = "failpoints")]
struct OffsetClock(i64);

#[cfg(feature = "failpoints")]
impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.0)
    }
}

/// A clock tests set by hand.
pub struct FixedClock(AtomicI64);

impl FixedClock {
    pub fn at_secs(secs: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(secs * 1000)))
    }
    pub fn set_secs(&self, secs: i64) {
        self.0.store(secs * 1000, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// One endpoint as the pipeline uses it.
pub struct EndpointRuntime {
    pub config: EndpointConfig,
    pub budget: Option<Arc<EndpointBudget>>,
    /// One slot per configured secret version, in config order (the cache of their values).
    pub secrets: Vec<Arc<SecretSlot>>,
}

impl EndpointRuntime {
    /// The versions that verify at `now_secs`: trusted, and read within their `max_age`.
    pub fn usable_secrets(&self, now_secs: i64) -> Vec<(&str, Arc<SecretMaterial>)> {
        self.secrets
            .iter()
            .filter_map(|slot| {
                slot.usable(now_secs)
                    .map(|m| (slot.config.version.as_str(), m))
            })
            .collect()
    }
}

/// Everything a reload replaces at once.
pub struct Runtime {
    pub config: Arc<Config>,
    pub endpoints: HashMap<String, Arc<EndpointRuntime>>,
    pub keyring: Keyring,
    /// Reads the endpoints' secret sources (`[secrets]`, `[vault]`).
    pub secret_reader: SecretReader,
}

impl Runtime {
    /// A runtime whose secrets are not read yet (published example values allowed when every
    /// listener is on loopback).
    pub fn new(config: Arc<Config>) -> Self {
        let allow = config.allows_example_values(true, false);
        Self::replacing(config, None, allow)
    }

    /// A runtime that keeps the cached values of `previous`'s secrets it still has (same
    /// endpoint, version and source), so a reload never empties the cache; retired versions
    /// keep nothing.
    pub fn replacing(
        config: Arc<Config>,
        previous: Option<&Runtime>,
        allow_example_values: bool,
    ) -> Self {
        let endpoints = config
            .endpoints
            .iter()
            .map(|e| {
                let secrets = e
                    .secrets
                    .iter()
                    .map(|v| {
                        let slot = SecretSlot::new(&e.id, v.clone(), e.pack);
                        if let Some(old) = previous
                            .and_then(|p| p.endpoints.get(&e.id))
                            .and_then(|old| old.secrets.iter().find(|o| o.same_secret(&slot)))
                        {
                            slot.inherit(old);
                        }
                        Arc::new(slot)
                    })
                    .collect();
                let rt = EndpointRuntime {
                    config: e.clone(),
                    budget: e.rate_limit.map(EndpointBudget::new),
                    secrets,
                };
                (e.id.clone(), Arc::new(rt))
            })
            .collect();
        let keyring = config.payload_keys.keyring();
        let secret_reader = config.secrets.reader(allow_example_values);
        Self {
            config,
            endpoints,
            keyring,
            secret_reader,
        }
    }

    /// Every secret slot of every endpoint.
    pub fn secret_slots(&self) -> Vec<Arc<SecretSlot>> {
        self.endpoints
            .values()
            .flat_map(|e| e.secrets.iter().cloned())
            .collect()
    }

    /// Endpoints with no version that verifies at `now_secs`, sorted.
    pub fn endpoints_without_usable_secret(&self, now_secs: i64) -> Vec<String> {
        let mut ids: Vec<String> = self
            .endpoints
            .values()
            .filter(|e| e.usable_secrets(now_secs).is_empty())
            .map(|e| e.config.id.clone())
            .collect();
        ids.sort();
        ids
    }
}

pub struct AppState {
    pub runtime: ArcSwap<Runtime>,
    pub store: SharedStore,
    pub clock: Arc<dyn Clock>,
    /// Global cap on requests being handled (flood protection before verification).
    pub in_flight: Arc<Semaphore>,
    pub client_limiter: Option<ClientLimiter>,
    /// Caps on bodies being read (before the processing permit is taken).
    pub body_readers: crate::ingress::limits::BodyReaders,
    /// Bytes shed requests may hold while their bodies are drained.
    pub shed_drain: crate::ingress::limits::DrainBudget,
    /// Which background stages run (for `/readyz`).
    pub stages: Arc<StageHealth>,
    /// Why the last reload failed, until one succeeds (for `/readyz`).
    pub reload_failure: ArcSwapOption<String>,
    /// Whether this process verifies webhooks (the ingress role): only then are endpoint
    /// secrets read, refreshed and reported.
    pub verifies_webhooks: bool,
    /// The operator API's tokens, read at start and on reload (none: every API call is 401).
    pub api_tokens: ArcSwap<crate::admin::api::auth::ApiTokens>,
    /// The rejection log's sampler and ring (drained by `rejections::flusher`).
    pub rejections: crate::rejections::RejectionLog,
    /// Provider reconcile runs the `sequence_gaps` stage asked the `reconcile` stage for.
    pub provider_asks: crate::reconcile::asks::ProviderAsks,
    /// No-retry windows noted by the ingress and not written yet (`no_retry::flusher`).
    pub no_retry: crate::no_retry::NoRetryWindows,
}

impl AppState {
    pub fn new(
        runtime: Runtime,
        store: SharedStore,
        clock: Arc<dyn Clock>,
        verifies_webhooks: bool,
    ) -> Arc<Self> {
        let server = runtime.config.server.clone();
        let rejections = crate::rejections::RejectionLog::new(runtime.config.rejections.enabled);
        Arc::new(Self {
            runtime: ArcSwap::from_pointee(runtime),
            store,
            clock,
            in_flight: Arc::new(Semaphore::new(server.max_in_flight)),
            client_limiter: server.per_client_rate.map(ClientLimiter::new),
            body_readers: crate::ingress::limits::BodyReaders::new(
                server.max_body_readers,
                server.per_client_body_readers,
            ),
            shed_drain: crate::ingress::limits::DrainBudget::new(
                crate::ingress::limits::SHED_DRAIN_BUDGET_BYTES,
            ),
            stages: Arc::new(StageHealth::default()),
            reload_failure: ArcSwapOption::empty(),
            verifies_webhooks,
            api_tokens: ArcSwap::from_pointee(Default::default()),
            rejections,
            provider_asks: Default::default(),
            no_retry: Default::default(),
        })
    }
}
