//! Configuration, by phase: [`raw`] is what the TOML file says (serde types, unknown keys
//! are errors), `resolve` validates it, applies defaults and reads secrets into the typed
//! [`Config`] below, and `render` prints it back with secrets redacted (`config check`).
//! Destinations and the relay have their own folder, one file per destination kind.
//!
//! A bad configuration fails at start-up (or on a reload, which then keeps the running one)
//! with a message naming the key and the problem — never at the first request.

pub mod admin;
pub mod destinations;
pub mod operations;
mod packs;
mod policies;
pub mod raw;
pub mod reconcile;
mod render;
mod resolve;
pub mod retention;
mod secrets;
pub mod sequence;
mod store;
pub mod traces;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hookgate_core::retry::RetryPolicy;
use hookgate_core::seal::ReplayKey;
use hookgate_providers::pack::{EndpointOptions, Pack};
use hookgate_store::GroupCommitOptions;
use ipnet::IpNet;
use zeroize::Zeroizing;

use crate::secrets::{SecretSource, SecretString};
use raw::RawConfig;

pub use policies::Rate;
pub use render::render_redacted;
pub use store::redact_url;

pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// A configuration problem, naming the key (`endpoints[0].secrets[1].value`) and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("config error at `{key}`: {problem}")]
pub struct ConfigError {
    pub key: String,
    pub problem: String,
}

fn err(key: impl Into<String>, problem: impl ToString) -> ConfigError {
    ConfigError {
        key: key.into(),
        problem: problem.to_string(),
    }
}

#[derive(Debug, Clone)]
pub struct TlsPaths {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub tls: Option<TlsPaths>,
    /// Plain HTTP is accepted only from these, and only with `X-Forwarded-Proto: https`.
    pub trusted_proxies: Vec<IpNet>,
    /// Requests being handled at once across all endpoints; beyond it: 503 `overloaded`.
    pub max_in_flight: usize,
    /// Open client connections; beyond it new ones wait in the kernel's accept queue. With
    /// `max_in_flight` and the body limits, this bounds the listener's memory.
    pub max_connections: usize,
    /// Flood protection per client address, before verification.
    pub per_client_rate: Option<Rate>,
    pub max_header_count: usize,
    pub max_header_bytes: usize,
    pub request_timeout: Duration,
    /// Requests whose body is being read at once (before the processing permit is taken).
    pub max_body_readers: usize,
    /// Of those, from one client address (IPv6: its /64).
    pub per_client_body_readers: usize,
    /// A body arriving slower than this (checked after its first second) is cut off: 408.
    pub min_body_bytes_per_second: u64,
}

/// `[admin]`: the admin listener's own bounds (defaults when there is no `[admin]`).
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// How long a client has to send a request head.
    pub request_timeout: Duration,
    /// Open admin connections; past it new ones wait in the kernel's accept queue.
    pub max_connections: usize,
    /// `[admin] tls`: built-in TLS of the admin listener.
    pub tls: Option<TlsPaths>,
    /// `[[admin.tokens]]`: the operator API's bearer tokens (values read at start).
    pub tokens: Vec<admin::TokenConfig>,
    /// Whether the operator API is served (not on a non-loopback listener without tokens).
    pub api: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            max_connections: 64,
            tls: None,
            tokens: Vec::new(),
            api: true,
        }
    }
}

#[derive(Clone)]
pub struct StoreConfig {
    /// The connection URL as resolved (it may hold a password: print only [`redact_url`]).
    pub url: String,
    /// Where the URL came from when `store.url` was `env:NAME` or `file:PATH`.
    pub url_source: Option<SecretSource>,
    pub group_commit: GroupCommitOptions,
    pub pool_size: usize,
    /// `startup_wait_seconds`: how long `serve` and `worker` keep trying to reach the store
    /// at start before giving up (0 = fail at the first unreachable attempt).
    pub startup_wait: Duration,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &redact_url(&self.url))
            .field("url_source", &self.url_source)
            .field("group_commit", &self.group_commit)
            .field("pool_size", &self.pool_size)
            .field("startup_wait", &self.startup_wait)
            .finish()
    }
}

/// One trusted (or formerly trusted) secret version of an endpoint. Its value is not here:
/// it lives in the gateway's secret cache (`secrets::cache`), read from `source`.
#[derive(Debug, Clone)]
pub struct SecretVersion {
    pub version: String,
    pub source: SecretSource,
    /// The `value` as written: the reference, or the value itself for a literal.
    pub reference: SecretString,
    /// Unix seconds after which this version is no longer trusted.
    pub not_after: Option<i64>,
    /// Never read, never trusted: retirement needs nothing from the source.
    pub retired: bool,
    /// `refresh_seconds`: how often the source is read again.
    pub refresh: Duration,
    /// `max_age_seconds`: how long after the last successful read the value still serves.
    pub max_age: Duration,
}

/// `[secrets]` and `[vault]`: how the gateway reads secret sources.
#[derive(Debug, Clone)]
pub struct SecretsConfig {
    /// `[secrets] exec_timeout_ms`.
    pub exec_timeout: Duration,
    pub vault: Option<Arc<crate::secrets::vault::VaultClient>>,
    /// `[vault] address`, for `config check`.
    pub vault_address: Option<String>,
}

impl SecretsConfig {
    /// The reader of every secret source (`allow_example_values` only for development).
    pub fn reader(&self, allow_example_values: bool) -> crate::secrets::cache::SecretReader {
        crate::secrets::cache::SecretReader {
            exec_timeout: self.exec_timeout,
            vault: self.vault.clone(),
            allow_example_values,
        }
    }
}

impl SecretVersion {
    pub fn trusted_at(&self, now: i64) -> bool {
        !self.retired && self.not_after.is_none_or(|t| now <= t)
    }
}

#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub id: String,
    /// The provider's pack (`provider = "<id>"`).
    pub pack: &'static Pack,
    /// The URL as registered with the provider (packs that sign the URL), byte for byte.
    pub public_url: Option<String>,
    /// The pack's options, checked at load.
    pub options: EndpointOptions,
    /// The replay window of packs with a replay defence (`replay_window_seconds`), in ms.
    pub replay_window_ms: Option<i64>,
    pub tolerance_seconds: Option<u64>,
    pub max_body_bytes: usize,
    pub allowed_event_types: Option<Vec<String>>,
    /// `api_versions`: the provider API versions the consumers understand. A verified event
    /// stamped with another is accepted as always, then `HELD` at processing (not processed
    /// in a shape its consumers cannot read) until an operator releases it.
    pub api_versions: Option<Vec<String>>,
    pub secrets: Vec<SecretVersion>,
    /// Budget on *verified* traffic; beyond it: 429.
    pub rate_limit: Option<Rate>,
    /// Backoff of transient processing failures (`retry = { base_ms, cap_ms, max_attempts }`).
    pub retry: RetryPolicy,
    /// Business handlers run by the workers for this endpoint's events, in order.
    pub handlers: Vec<HandlerKind>,
    /// JSON pointer to the object id in the verified body (Standard Webhooks / Svix).
    pub object_id_pointer: Option<String>,
    /// JSON pointer to the authoritative object version (an integer) in the verified body.
    pub object_version_pointer: Option<String>,
    /// `sequence_pointer` and its limits: each object's events are applied in sequence order.
    pub sequence: Option<sequence::Sequencing>,
    /// `[[destinations]]` ids this endpoint's processed events are delivered to (fan-out):
    /// one outbox row each, written by the processing transaction.
    pub destinations: Vec<String>,
    /// How long this endpoint's id records are kept (see [`retention`]).
    pub idempotency: retention::IdempotencyWindow,
    /// Provider reconciliation (`reconcile = { … }`), where the pack supports it.
    pub reconcile: Option<reconcile::EndpointReconcile>,
}

/// The business handlers a config can name (`handlers = [...]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// Stripe payment state projection: fetches the object's current state from Stripe's API.
    PaymentsProjection,
}

impl HandlerKind {
    pub const ALL: &'static [HandlerKind] = &[HandlerKind::PaymentsProjection];

    /// The name in config, also the `processed_events` consumer name.
    pub fn name(self) -> &'static str {
        match self {
            HandlerKind::PaymentsProjection => "payments_projection",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|h| h.name() == name)
    }
}

/// `[worker]`: the processing pool beside ingress.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Workers in `hookgate serve` (and `hookgate worker`); 0 = ingress only.
    pub concurrency: usize,
    /// How long a leased row is this worker's; a crashed worker's rows return after it.
    pub lease: Duration,
    /// Sleep of an idle worker before it looks for due rows again.
    pub poll_interval: Duration,
}

/// `[providers.stripe]`: Stripe's REST API, for handlers that fetch current object state.
#[derive(Debug, Clone)]
pub struct StripeApiConfig {
    /// Without a trailing slash, e.g. `https://api.stripe.com`.
    pub api_base: String,
    pub api_key: SecretString,
    pub api_key_source: SecretSource,
    pub timeout: Duration,
}

/// `[providers.*]`.
#[derive(Debug, Clone, Default)]
pub struct ProvidersConfig {
    pub stripe: Option<StripeApiConfig>,
}

impl EndpointConfig {
    /// The provider id (the pack's id): the `provider` column and metrics label.
    pub fn provider_id(&self) -> &'static str {
        self.pack.id()
    }

    /// Exact names, or a prefix ending in `*` (`payment_intent.*`); absent list = all.
    pub fn allows(&self, event_type: Option<&str>) -> bool {
        let Some(patterns) = &self.allowed_event_types else {
            return true;
        };
        let Some(event_type) = event_type else {
            return false;
        };
        patterns.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => event_type.starts_with(prefix),
            None => p == event_type,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: String,
}

pub struct PayloadKeys {
    pub active: u32,
    pub keys: Vec<(u32, SecretSource, Zeroizing<[u8; 32]>)>,
    /// The key of replay digests: `replay_key`, else derived from the lowest payload key.
    pub replay_key: std::sync::Arc<ReplayKey>,
    /// Where `replay_key` came from: the configured source, or `None` when derived.
    pub replay_key_source: Option<SecretSource>,
    /// How often the re-seal stage looks for payloads under retired versions.
    pub reseal_interval: Duration,
    /// Payloads re-sealed per batch.
    pub reseal_batch: u32,
}

impl std::fmt::Debug for PayloadKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let versions: Vec<String> = self
            .keys
            .iter()
            .map(|(v, s, _)| format!("v{v} from {s}"))
            .collect();
        f.debug_struct("PayloadKeys")
            .field("active", &self.active)
            .field("keys", &versions)
            .field("replay_key_source", &self.replay_key_source)
            .field("reseal_interval", &self.reseal_interval)
            .field("reseal_batch", &self.reseal_batch)
            .finish()
    }
}

impl PayloadKeys {
    /// The configured key versions, ascending.
    pub fn versions(&self) -> Vec<u32> {
        let mut versions: Vec<u32> = self.keys.iter().map(|(v, _, _)| *v).collect();
        versions.sort_unstable();
        versions
    }

    pub fn keyring(&self) -> hookgate_core::seal::Keyring {
        hookgate_core::seal::Keyring::new(
            self.active,
            self.keys.iter().map(|(v, _, k)| (*v, k.clone())),
        )
        .expect("validated at load")
    }
}

/// The resolved configuration.
#[derive(Debug)]
pub struct Config {
    pub path: PathBuf,
    pub server: ServerConfig,
    pub admin_listen: Option<SocketAddr>,
    pub admin: AdminConfig,
    pub store: StoreConfig,
    pub payload_keys: PayloadKeys,
    pub log: LogConfig,
    pub endpoints: Vec<EndpointConfig>,
    pub worker: WorkerConfig,
    pub providers: ProvidersConfig,
    /// `[relay]`: the outbox relay.
    pub relay: destinations::RelayConfig,
    /// `[[destinations]]`, in file order.
    pub destinations: Vec<destinations::DestinationConfig>,
    /// `[secrets]`, `[vault]`.
    pub secrets: SecretsConfig,
    /// Keys whose secret is a literal in the file: development only (loopback or `--dev`).
    pub literal_secrets: Vec<String>,
    /// User-defined provider packs (`[[provider_packs]]`, then `provider_packs_dir`).
    pub provider_packs: Vec<&'static Pack>,
    /// `[retention]`: how long payloads and id records are kept.
    pub retention: retention::RetentionConfig,
    /// `[jobs]`: the bulk jobs stage.
    pub jobs: operations::JobsConfig,
    /// `[rejections]`: the rejection log.
    pub rejections: operations::RejectionsConfig,
    /// `[reconcile]`: the internal reconciliation job.
    pub reconcile: reconcile::ReconcileConfig,
    /// `[tracing]`: OpenTelemetry traces over OTLP (`None`: off).
    pub tracing: Option<traces::TracingConfig>,
    /// Non-fatal findings (literal secrets, …) to log once logging is up.
    pub warnings: Vec<String>,
}

impl Config {
    /// Reads and resolves `path`. Relative `file:` secrets resolve against the config's folder.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err("<file>", format!("cannot read {}: {e}", path.display())))?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        Self::from_toml(&text, path, &base)
    }

    pub fn from_toml(text: &str, path: &Path, base: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .map(|s| locate(text, s.start))
                .unwrap_or_else(|| "<file>".into());
            err(key, e.message())
        })?;
        resolve::resolve(raw, path, base)
    }

    pub fn endpoint(&self, id: &str) -> Option<&EndpointConfig> {
        self.endpoints.iter().find(|e| e.id == id)
    }

    /// Literal secrets (and so the published examples) run only where nobody else can
    /// reach them: every listener this process binds on loopback, or `--dev`.
    /// `trusted_proxies` does not change that: a proxy in front makes the listener public.
    pub fn check_dev_only(&self, webhook: bool, dev: bool) -> Result<(), ConfigError> {
        if dev {
            return Ok(());
        }
        let public = [
            webhook.then_some(("server.listen", self.server.listen)),
            self.admin_listen.map(|a| ("admin.listen", a)),
        ]
        .into_iter()
        .flatten()
        .find(|(_, addr)| !addr.ip().is_loopback());
        match (public, self.literal_secrets.first()) {
            (Some((listener, addr)), Some(key)) => Err(err(
                key.clone(),
                format!(
                    "is a literal secret, and {listener} {addr} is not a loopback address: \
                     literal and published example secrets are for development only; use \
                     env:, file:, exec: or vault:, or pass --dev"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether published example values may be used (loopback everywhere, or `--dev`).
    pub fn allows_example_values(&self, webhook: bool, dev: bool) -> bool {
        dev || ((!webhook || self.server.listen.ip().is_loopback())
            && self.admin_listen.is_none_or(|a| a.ip().is_loopback()))
    }
}

/// `line N` for a parse error at byte `offset`.
fn locate(text: &str, offset: usize) -> String {
    let line = text[..offset.min(text.len())].matches('\n').count() + 1;
    format!("line {line}")
}

/// An endpoint or destination id: 1-128 characters of `A-Z a-z 0-9 - _ .` (it appears in
/// URLs, metrics labels and NATS message ids).
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

// The table tests use NATS as the second destination kind throughout.
#[cfg(all(test, feature = "nats"))]
mod tests;
