//! Shared state of a running gateway: the swappable runtime configuration (endpoints, secrets,
//! payload keys — replaced whole on SIGHUP), the store, the clock and the global limits.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arc_swap::ArcSwap;
use hookgate_core::seal::Keyring;
use hookgate_store::SharedStore;
use tokio::sync::Semaphore;

use crate::config::{Config, EndpointConfig};
use crate::ingress::limits::{ClientLimiter, EndpointBudget};
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
}

/// Everything a reload replaces at once.
pub struct Runtime {
    pub config: Arc<Config>,
    pub endpoints: HashMap<String, Arc<EndpointRuntime>>,
    pub keyring: Keyring,
}

impl Runtime {
    pub fn new(config: Arc<Config>) -> Self {
        let endpoints = config
            .endpoints
            .iter()
            .map(|e| {
                let rt = EndpointRuntime {
                    config: e.clone(),
                    budget: e.rate_limit.map(EndpointBudget::new),
                };
                (e.id.clone(), Arc::new(rt))
            })
            .collect();
        let keyring = config.payload_keys.keyring();
        Self {
            config,
            endpoints,
            keyring,
        }
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
}

impl AppState {
    pub fn new(config: Arc<Config>, store: SharedStore, clock: Arc<dyn Clock>) -> Arc<Self> {
        let server = config.server.clone();
        Arc::new(Self {
            runtime: ArcSwap::from_pointee(Runtime::new(config)),
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
        })
    }
}
