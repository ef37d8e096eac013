//! The configuration file as written (TOML): what the file says, before validation. Every key
//! is documented in `docs/configuration.md`; unknown keys are errors. `[[destinations]]` and
//! `[relay]` are written as their own module defines them (`destinations/`).

use serde::Deserialize;

use super::destinations::{RawDestination, RawRelay};
use super::policies::{RawRate, RawRetry};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub server: RawServer,
    #[serde(default)]
    pub admin: Option<super::admin::RawAdmin>,
    pub store: RawStore,
    pub payload_encryption: RawPayloadEncryption,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub endpoints: Vec<RawEndpoint>,
    #[serde(default)]
    pub worker: Option<RawWorker>,
    #[serde(default)]
    pub providers: Option<RawProviders>,
    #[serde(default)]
    pub relay: Option<RawRelay>,
    #[serde(default)]
    pub destinations: Vec<RawDestination>,
    /// User-defined provider packs, each in the schema of the built-in packs (kept as TOML
    /// here; `packs.rs` compiles them, naming errors by index).
    #[serde(default)]
    pub provider_packs: Vec<toml::Value>,
    /// A folder whose `*.json` files are provider packs (relative to the config file).
    pub provider_packs_dir: Option<String>,
    #[serde(default)]
    pub secrets: Option<RawSecrets>,
    #[serde(default)]
    pub vault: Option<RawVault>,
    #[serde(default)]
    pub retention: Option<super::retention::RawRetention>,
    #[serde(default)]
    pub jobs: Option<super::operations::RawJobs>,
    #[serde(default)]
    pub rejections: Option<super::operations::RawRejections>,
    #[serde(default)]
    pub reconcile: Option<super::reconcile::RawReconcile>,
    /// OpenTelemetry traces over OTLP/HTTP; absent = off.
    #[serde(default)]
    pub tracing: Option<super::traces::RawTracing>,
}

/// `[secrets]`: how secret sources are read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecrets {
    pub exec_timeout_ms: Option<u64>,
}

/// `[vault]`: the HashiCorp Vault server of `vault:` secrets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVault {
    pub address: String,
    /// A secret value itself (`env:VAULT_TOKEN`, `file:…`).
    pub token: String,
    pub ca_file: Option<String>,
}

/// `[worker]`: the processing pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorker {
    pub concurrency: Option<usize>,
    pub lease_seconds: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// `[providers.*]`: provider APIs the handlers call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProviders {
    pub stripe: Option<RawStripeApi>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStripeApi {
    pub api_base: Option<String>,
    pub api_key: String,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: String,
    pub tls: Option<RawTls>,
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    pub max_in_flight: Option<usize>,
    pub max_connections: Option<usize>,
    pub per_client_rate: Option<RawRate>,
    pub max_header_count: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub request_timeout_ms: Option<u64>,
    pub max_body_readers: Option<usize>,
    pub per_client_body_readers: Option<usize>,
    pub min_body_bytes_per_second: Option<usize>,
    /// Allows `trusted_proxies` entries outside private, loopback and link-local ranges.
    #[serde(default)]
    pub trusted_proxies_allow_public: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub cert: String,
    pub key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub url: String,
    pub group_commit: Option<bool>,
    pub max_batch: Option<usize>,
    pub queue_capacity: Option<usize>,
    pub max_queue_wait_ms: Option<u64>,
    pub pool_size: Option<usize>,
    pub startup_wait_seconds: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPayloadEncryption {
    pub active: u32,
    pub keys: Vec<RawPayloadKey>,
    /// The key of the replay digests (32 bytes, base64; `env:`/`file:` like keys).
    pub replay_key: Option<String>,
    /// How often the re-seal stage looks for payloads under retired key versions.
    pub reseal_interval_seconds: Option<u64>,
    /// Payloads re-sealed per batch (one short write each).
    pub reseal_batch: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPayloadKey {
    pub version: u32,
    pub key: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub format: Option<String>,
    pub level: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    pub id: String,
    pub provider: String,
    pub tolerance_seconds: Option<u64>,
    pub max_body_bytes: Option<usize>,
    pub allowed_event_types: Option<Vec<String>>,
    pub secrets: Vec<RawSecret>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    pub handlers: Option<Vec<String>>,
    pub object_id_pointer: Option<String>,
    pub object_version_pointer: Option<String>,
    pub destinations: Option<Vec<String>>,
    /// The URL registered with the provider, for packs that sign it.
    pub public_url: Option<String>,
    /// Provider-specific settings, named by the pack (a table value is taken as JSON).
    pub options: Option<std::collections::BTreeMap<String, toml::Value>>,
    /// How long a verified body is remembered against replays under a fresh unsigned id.
    pub replay_window_seconds: Option<u64>,
    /// How long this endpoint's id records are kept (overrides `[retention]`).
    pub idempotency_days: Option<u32>,
    /// Provider reconciliation through the provider's API (packs that declare it).
    pub reconcile: Option<super::reconcile::RawEndpointReconcile>,
    /// The provider API versions this endpoint's consumers understand; others are `HELD`.
    pub api_versions: Option<Vec<String>>,
    /// JSON pointer to the event's sequence within its object (sequenced deltas).
    pub sequence_pointer: Option<String>,
    /// How long an object's events wait for a missing one before they are held.
    pub sequence_gap_seconds: Option<u64>,
    /// How many events of one object may wait for a missing one.
    pub sequence_gap_max: Option<u32>,
    /// `"any"`: an object's first event starts its sequence (else it must be 1).
    pub sequence_start: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecret {
    pub version: String,
    pub value: String,
    pub not_after: Option<String>,
    #[serde(default)]
    pub retired: bool,
    pub refresh_seconds: Option<u64>,
    pub max_age_seconds: Option<u64>,
}
