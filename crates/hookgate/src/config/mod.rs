//! Configuration: parse the TOML ([`raw`]), then resolve it once into typed, validated values.
//!
//! A bad configuration fails at start-up (or on a reload, which then keeps the running one)
//! with a message naming the key and the problem — never at the first request.

pub mod destinations;
pub mod raw;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use hookgate_core::retry::RetryPolicy;
use hookgate_providers::{ProviderKind, SecretMaterial};
use hookgate_store::GroupCommitOptions;
use ipnet::IpNet;
use zeroize::Zeroizing;

use crate::secrets::{self, SecretSource, SecretString};
use raw::{RawConfig, RawEndpoint, RawRate};

pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
const MAX_BODY_CEILING: usize = 64 * 1024 * 1024;

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

/// A rate: sustained per second, with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
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
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub url: String,
    pub group_commit: GroupCommitOptions,
    pub pool_size: usize,
}

/// One trusted (or formerly trusted) secret version of an endpoint.
#[derive(Debug, Clone)]
pub struct SecretVersion {
    pub version: String,
    pub source: SecretSource,
    pub material: Arc<SecretMaterial>,
    /// Unix seconds after which this version is no longer trusted.
    pub not_after: Option<i64>,
    pub retired: bool,
}

impl SecretVersion {
    pub fn trusted_at(&self, now: i64) -> bool {
        !self.retired && self.not_after.is_none_or(|t| now <= t)
    }
}

#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub id: String,
    pub provider: ProviderKind,
    pub tolerance_seconds: Option<u64>,
    pub max_body_bytes: usize,
    pub allowed_event_types: Option<Vec<String>>,
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
    /// `[[destinations]]` ids this endpoint's processed events are delivered to (fan-out):
    /// one outbox row each, written by the processing transaction.
    pub destinations: Vec<String>,
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

/// `[worker]`: the processing pool beside ingress (DESIGN.md §5).
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
            .finish()
    }
}

impl PayloadKeys {
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
        resolve(raw, path, base)
    }

    pub fn endpoint(&self, id: &str) -> Option<&EndpointConfig> {
        self.endpoints.iter().find(|e| e.id == id)
    }
}

/// `line N` for a parse error at byte `offset`.
fn locate(text: &str, offset: usize) -> String {
    let line = text[..offset.min(text.len())].matches('\n').count() + 1;
    format!("line {line}")
}

fn rate(raw: Option<RawRate>, key: &str) -> Result<Option<Rate>, ConfigError> {
    let Some(r) = raw else { return Ok(None) };
    if r.per_second == 0 {
        return Err(err(format!("{key}.per_second"), "must be at least 1"));
    }
    let burst = r.burst.unwrap_or(r.per_second);
    if burst == 0 {
        return Err(err(format!("{key}.burst"), "must be at least 1"));
    }
    Ok(Some(Rate {
        per_second: r.per_second,
        burst,
    }))
}

fn resolve(raw: RawConfig, path: &Path, base: &Path) -> Result<Config, ConfigError> {
    let mut warnings = Vec::new();

    let listen: SocketAddr = raw
        .server
        .listen
        .parse()
        .map_err(|_| err("server.listen", "must be IP:PORT, e.g. 127.0.0.1:8080"))?;
    let tls = raw.server.tls.map(|t| TlsPaths {
        cert: base.join(&t.cert),
        key: base.join(&t.key),
    });
    let trusted_proxies = raw
        .server
        .trusted_proxies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.parse::<IpNet>()
                .or_else(|_| p.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    err(
                        format!("server.trusted_proxies[{i}]"),
                        "must be an IP or CIDR",
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if tls.is_none() && trusted_proxies.is_empty() && !listen.ip().is_loopback() {
        return Err(err(
            "server.listen",
            format!(
                "{listen} is not a loopback address, and neither server.tls nor \
                 server.trusted_proxies is set: refusing to receive webhooks over plain HTTP \
                 (use 127.0.0.1 for development)"
            ),
        ));
    }
    let server = ServerConfig {
        listen,
        tls,
        trusted_proxies,
        max_in_flight: positive(raw.server.max_in_flight, 128, "server.max_in_flight")?,
        max_connections: positive(raw.server.max_connections, 4096, "server.max_connections")?,
        per_client_rate: rate(raw.server.per_client_rate, "server.per_client_rate")?,
        max_header_count: positive(raw.server.max_header_count, 64, "server.max_header_count")?,
        max_header_bytes: positive(
            raw.server.max_header_bytes,
            16 * 1024,
            "server.max_header_bytes",
        )?,
        request_timeout: Duration::from_millis(positive(
            raw.server.request_timeout_ms.map(|v| v as usize),
            10_000,
            "server.request_timeout_ms",
        )? as u64),
    };

    let admin_listen = raw
        .admin
        .map(|a| {
            a.listen
                .parse()
                .map_err(|_| err("admin.listen", "must be IP:PORT"))
        })
        .transpose()?;

    let store_url = raw.store.url.trim().to_owned();
    if !(store_url.starts_with("sqlite://")
        || store_url.starts_with("postgres://")
        || store_url.starts_with("postgresql://"))
    {
        return Err(err("store.url", "must start with sqlite:// or postgres://"));
    }
    let defaults = GroupCommitOptions::default();
    let store = StoreConfig {
        url: store_url,
        group_commit: GroupCommitOptions {
            enabled: raw.store.group_commit.unwrap_or(true),
            max_batch: positive(raw.store.max_batch, defaults.max_batch, "store.max_batch")?,
            queue_capacity: positive(
                raw.store.queue_capacity,
                defaults.queue_capacity,
                "store.queue_capacity",
            )?,
            max_queue_wait: Duration::from_millis(positive(
                raw.store.max_queue_wait_ms.map(|v| v as usize),
                defaults.max_queue_wait.as_millis() as usize,
                "store.max_queue_wait_ms",
            )? as u64),
        },
        pool_size: positive(raw.store.pool_size, 16, "store.pool_size")?,
    };
    if !store.group_commit.enabled {
        warnings.push(
            "store.group_commit = false: one transaction per request (for measurement only)".into(),
        );
    }

    let payload_keys = resolve_payload_keys(&raw.payload_encryption, base, &mut warnings)?;

    let log = LogConfig {
        format: match raw.log.format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(_) => return Err(err("log.format", "must be \"text\" or \"json\"")),
        },
        level: raw.log.level.unwrap_or_else(|| "info".into()),
    };

    let worker = resolve_worker(raw.worker.as_ref())?;
    let providers = resolve_providers(raw.providers.as_ref(), base, &mut warnings)?;

    let relay = destinations::resolve_relay(raw.relay.as_ref())?;
    let destinations =
        destinations::resolve_destinations(raw.destinations, &relay, base, &mut warnings)?;

    let mut endpoints: Vec<EndpointConfig> = Vec::with_capacity(raw.endpoints.len());
    for (i, mut e) in raw.endpoints.into_iter().enumerate() {
        let wanted_destinations = e.destinations.take();
        let mut ep = resolve_endpoint(e, i, base, &mut warnings)?;
        ep.destinations =
            destinations::resolve_endpoint_destinations(wanted_destinations, i, &destinations)?;
        if endpoints.iter().any(|other| other.id == ep.id) {
            return Err(err(
                format!("endpoints[{i}].id"),
                format!("duplicate endpoint id {:?}", ep.id),
            ));
        }
        if ep.handlers.contains(&HandlerKind::PaymentsProjection) && providers.stripe.is_none() {
            return Err(err(
                format!("endpoints[{i}].handlers"),
                "payments_projection fetches from Stripe's API: configure [providers.stripe]",
            ));
        }
        endpoints.push(ep);
    }
    if endpoints.is_empty() {
        warnings.push("no [[endpoints]] configured: every webhook will get 404".into());
    }

    Ok(Config {
        path: path.to_owned(),
        server,
        admin_listen,
        store,
        payload_keys,
        log,
        endpoints,
        worker,
        providers,
        relay,
        destinations,
        warnings,
    })
}

fn resolve_worker(raw: Option<&raw::RawWorker>) -> Result<WorkerConfig, ConfigError> {
    let concurrency = raw.and_then(|w| w.concurrency).unwrap_or(4);
    if concurrency > 1024 {
        return Err(err("worker.concurrency", "must be at most 1024"));
    }
    let lease_seconds = raw.and_then(|w| w.lease_seconds).unwrap_or(30);
    if lease_seconds == 0 || lease_seconds > 24 * 3600 {
        return Err(err("worker.lease_seconds", "must be between 1 and 86400"));
    }
    let poll_ms = raw.and_then(|w| w.poll_interval_ms).unwrap_or(200);
    if poll_ms == 0 || poll_ms > 60_000 {
        return Err(err(
            "worker.poll_interval_ms",
            "must be between 1 and 60000",
        ));
    }
    Ok(WorkerConfig {
        concurrency,
        lease: Duration::from_secs(lease_seconds),
        poll_interval: Duration::from_millis(poll_ms),
    })
}

fn resolve_providers(
    raw: Option<&raw::RawProviders>,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<ProvidersConfig, ConfigError> {
    let Some(stripe) = raw.and_then(|p| p.stripe.as_ref()) else {
        return Ok(ProvidersConfig::default());
    };
    let api_base = stripe
        .api_base
        .as_deref()
        .unwrap_or("https://api.stripe.com")
        .trim()
        .trim_end_matches('/')
        .to_owned();
    if !(api_base.starts_with("https://") || api_base.starts_with("http://"))
        || reqwest::Url::parse(&api_base).is_err()
    {
        return Err(err(
            "providers.stripe.api_base",
            "must be an http(s) URL, e.g. https://api.stripe.com",
        ));
    }
    let (api_key_source, api_key) =
        secrets::resolve(&stripe.api_key, base).map_err(|e| err("providers.stripe.api_key", e))?;
    if api_key_source == SecretSource::Literal {
        warnings.push(
            "providers.stripe.api_key is a literal in the config file; use env: or file: outside development"
                .into(),
        );
    }
    let timeout_ms = stripe.timeout_ms.unwrap_or(10_000);
    if timeout_ms == 0 || timeout_ms > 120_000 {
        return Err(err(
            "providers.stripe.timeout_ms",
            "must be between 1 and 120000",
        ));
    }
    Ok(ProvidersConfig {
        stripe: Some(StripeApiConfig {
            api_base,
            api_key,
            api_key_source,
            timeout: Duration::from_millis(timeout_ms),
        }),
    })
}

fn resolve_retry(raw: Option<raw::RawRetry>, at: &str) -> Result<RetryPolicy, ConfigError> {
    let defaults = RetryPolicy::default();
    let Some(r) = raw else { return Ok(defaults) };
    let policy = RetryPolicy {
        base_ms: r.base_ms.unwrap_or(defaults.base_ms),
        cap_ms: r
            .cap_ms
            .unwrap_or(defaults.cap_ms.max(r.base_ms.unwrap_or(0))),
        max_attempts: r.max_attempts.unwrap_or(defaults.max_attempts),
    };
    if policy.base_ms == 0 {
        return Err(err(format!("{at}.base_ms"), "must be greater than 0"));
    }
    if policy.cap_ms < policy.base_ms {
        return Err(err(format!("{at}.cap_ms"), "must be at least base_ms"));
    }
    if policy.max_attempts == 0 || policy.max_attempts > 1000 {
        return Err(err(
            format!("{at}.max_attempts"),
            "must be between 1 and 1000",
        ));
    }
    Ok(policy)
}

/// A JSON pointer (RFC 6901): empty or starting with `/`.
fn resolve_pointer(
    value: Option<String>,
    key: String,
    provider: ProviderKind,
) -> Result<Option<String>, ConfigError> {
    let Some(pointer) = value else {
        return Ok(None);
    };
    if !matches!(
        provider,
        ProviderKind::StandardWebhooks | ProviderKind::Svix
    ) {
        return Err(err(
            key,
            format!(
                "only Standard Webhooks and Svix endpoints take object pointers; {} extracts its own",
                provider.id()
            ),
        ));
    }
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err(err(key, "must be a JSON pointer, e.g. /data/version"));
    }
    Ok(Some(pointer))
}

fn positive(value: Option<usize>, default: usize, key: &str) -> Result<usize, ConfigError> {
    match value {
        Some(0) => Err(err(key, "must be greater than 0")),
        Some(v) => Ok(v),
        None => Ok(default),
    }
}

fn resolve_payload_keys(
    raw: &raw::RawPayloadEncryption,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<PayloadKeys, ConfigError> {
    if raw.keys.is_empty() {
        return Err(err(
            "payload_encryption.keys",
            "at least one key is required",
        ));
    }
    let mut keys = Vec::with_capacity(raw.keys.len());
    for (i, k) in raw.keys.iter().enumerate() {
        let key_name = format!("payload_encryption.keys[{i}].key");
        if keys.iter().any(|(v, _, _)| *v == k.version) {
            return Err(err(
                format!("payload_encryption.keys[{i}].version"),
                "duplicate version",
            ));
        }
        let (source, value) = secrets::resolve(&k.key, base).map_err(|e| err(&key_name, e))?;
        if source == SecretSource::Literal {
            warnings.push(format!(
                "{key_name} is a literal in the config file; use env: or file: outside development"
            ));
        }
        let bytes = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(value.expose().trim())
                .map_err(|_| err(&key_name, "must be 32 bytes, base64-encoded"))?,
        );
        let key: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| err(&key_name, "must be 32 bytes, base64-encoded"))?;
        keys.push((k.version, source, Zeroizing::new(key)));
    }
    if !keys.iter().any(|(v, _, _)| *v == raw.active) {
        return Err(err(
            "payload_encryption.active",
            format!("no key with version {}", raw.active),
        ));
    }
    Ok(PayloadKeys {
        active: raw.active,
        keys,
    })
}

fn valid_endpoint_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn resolve_endpoint(
    e: RawEndpoint,
    i: usize,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<EndpointConfig, ConfigError> {
    let at = |k: &str| format!("endpoints[{i}].{k}");
    if !valid_endpoint_id(&e.id) {
        return Err(err(
            at("id"),
            "must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ));
    }
    let provider = ProviderKind::from_id(&e.provider).ok_or_else(|| {
        let known: Vec<&str> = ProviderKind::ALL.iter().map(|p| p.id()).collect();
        err(
            at("provider"),
            format!(
                "unknown provider {:?}; known: {}",
                e.provider,
                known.join(", ")
            ),
        )
    })?;
    let adapter = provider.adapter();
    let max_body_bytes = e.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_CEILING {
        return Err(err(
            at("max_body_bytes"),
            format!("must be between 1 and {MAX_BODY_CEILING}"),
        ));
    }
    if e.tolerance_seconds.is_some() && adapter.default_tolerance_seconds().is_none() {
        return Err(err(
            at("tolerance_seconds"),
            format!(
                "provider {} signs no timestamp, so there is nothing to check",
                provider.id()
            ),
        ));
    }
    if e.tolerance_seconds == Some(0) {
        return Err(err(at("tolerance_seconds"), "must be greater than 0"));
    }
    if let Some(types) = &e.allowed_event_types {
        for (j, t) in types.iter().enumerate() {
            if t.is_empty() || t[..t.len().saturating_sub(1)].contains('*') {
                return Err(err(
                    format!("endpoints[{i}].allowed_event_types[{j}]"),
                    "must be a type name or a prefix ending in a single trailing *",
                ));
            }
        }
    }
    if e.secrets.is_empty() {
        return Err(err(
            at("secrets"),
            "at least one secret version is required",
        ));
    }
    let mut secrets_out: Vec<SecretVersion> = Vec::with_capacity(e.secrets.len());
    for (j, s) in e.secrets.into_iter().enumerate() {
        let key = format!("endpoints[{i}].secrets[{j}]");
        if s.version.is_empty() {
            return Err(err(format!("{key}.version"), "must not be empty"));
        }
        if secrets_out.iter().any(|o| o.version == s.version) {
            return Err(err(
                format!("{key}.version"),
                format!("duplicate version {:?}", s.version),
            ));
        }
        let (source, value) =
            secrets::resolve(&s.value, base).map_err(|e| err(format!("{key}.value"), e))?;
        if source == SecretSource::Literal {
            warnings.push(format!(
                "{key}.value is a literal in the config file; use env: or file: outside development"
            ));
        }
        let material = adapter.decode_secret(value.expose()).map_err(|e| {
            err(
                format!("{key}.value"),
                format!("{e} for provider {}", provider.id()),
            )
        })?;
        let not_after = s
            .not_after
            .as_deref()
            .map(|t| {
                t.parse::<jiff::Timestamp>()
                    .map(|ts| ts.as_second())
                    .map_err(|_| {
                        err(
                            format!("{key}.not_after"),
                            "must be an RFC 3339 time, e.g. 2026-12-07T00:00:00Z",
                        )
                    })
            })
            .transpose()?;
        secrets_out.push(SecretVersion {
            version: s.version,
            source,
            material: Arc::new(material),
            not_after,
            retired: s.retired,
        });
    }
    let mut handlers = Vec::new();
    for (j, name) in e.handlers.iter().flatten().enumerate() {
        let key = format!("endpoints[{i}].handlers[{j}]");
        let known: Vec<&str> = HandlerKind::ALL.iter().map(|h| h.name()).collect();
        let kind = HandlerKind::from_name(name).ok_or_else(|| {
            err(
                &key,
                format!("unknown handler {name:?}; known: {}", known.join(", ")),
            )
        })?;
        if handlers.contains(&kind) {
            return Err(err(&key, format!("duplicate handler {name:?}")));
        }
        if kind == HandlerKind::PaymentsProjection && provider != ProviderKind::Stripe {
            return Err(err(
                &key,
                "payments_projection handles Stripe endpoints only",
            ));
        }
        handlers.push(kind);
    }
    let object_id_pointer =
        resolve_pointer(e.object_id_pointer, at("object_id_pointer"), provider)?;
    let object_version_pointer = resolve_pointer(
        e.object_version_pointer,
        at("object_version_pointer"),
        provider,
    )?;
    Ok(EndpointConfig {
        retry: resolve_retry(e.retry, &at("retry"))?,
        handlers,
        object_id_pointer,
        object_version_pointer,
        destinations: Vec::new(),
        id: e.id,
        provider,
        tolerance_seconds: e.tolerance_seconds.or(adapter.default_tolerance_seconds()),
        max_body_bytes,
        allowed_event_types: e.allowed_event_types,
        secrets: secrets_out,
        rate_limit: rate(e.rate_limit, &at("rate_limit"))?,
    })
}

/// The resolved configuration as TOML-like text with secrets redacted (`config check`).
pub fn render_redacted(c: &Config) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let s = &c.server;
    let _ = writeln!(out, "[server]\nlisten = \"{}\"", s.listen);
    if let Some(t) = &s.tls {
        let _ = writeln!(
            out,
            "tls = {{ cert = \"{}\", key = \"{}\" }}",
            t.cert.display(),
            t.key.display()
        );
    }
    let proxies: Vec<String> = s
        .trusted_proxies
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect();
    let _ = writeln!(out, "trusted_proxies = [{}]", proxies.join(", "));
    let _ = writeln!(out, "max_in_flight = {}", s.max_in_flight);
    let _ = writeln!(out, "max_connections = {}", s.max_connections);
    if let Some(r) = s.per_client_rate {
        let _ = writeln!(
            out,
            "per_client_rate = {{ per_second = {}, burst = {} }}",
            r.per_second, r.burst
        );
    }
    let _ = writeln!(
        out,
        "max_header_count = {}\nmax_header_bytes = {}",
        s.max_header_count, s.max_header_bytes
    );
    let _ = writeln!(
        out,
        "request_timeout_ms = {}",
        s.request_timeout.as_millis()
    );
    if let Some(a) = c.admin_listen {
        let _ = writeln!(out, "\n[admin]\nlisten = \"{a}\"");
    }
    let st = &c.store;
    let _ = writeln!(out, "\n[store]\nurl = \"{}\"", redact_url(&st.url));
    let _ = writeln!(
        out,
        "group_commit = {}\nmax_batch = {}\nqueue_capacity = {}\nmax_queue_wait_ms = {}\npool_size = {}",
        st.group_commit.enabled,
        st.group_commit.max_batch,
        st.group_commit.queue_capacity,
        st.group_commit.max_queue_wait.as_millis(),
        st.pool_size
    );
    let _ = writeln!(
        out,
        "\n[payload_encryption]\nactive = {}",
        c.payload_keys.active
    );
    for (v, src, _) in &c.payload_keys.keys {
        let _ = writeln!(out, "# key version {v}: from {src} (32 bytes, redacted)");
    }
    let _ = writeln!(
        out,
        "\n[log]\nformat = \"{}\"\nlevel = \"{}\"",
        if c.log.format == LogFormat::Json {
            "json"
        } else {
            "text"
        },
        c.log.level
    );
    let _ = writeln!(
        out,
        "\n[worker]\nconcurrency = {}\nlease_seconds = {}\npoll_interval_ms = {}",
        c.worker.concurrency,
        c.worker.lease.as_secs(),
        c.worker.poll_interval.as_millis()
    );
    if let Some(s) = &c.providers.stripe {
        let _ = writeln!(
            out,
            "\n[providers.stripe]\napi_base = \"{}\"\n# api_key from {} (redacted)\ntimeout_ms = {}",
            s.api_base,
            s.api_key_source,
            s.timeout.as_millis()
        );
    }
    for e in &c.endpoints {
        let _ = writeln!(
            out,
            "\n[[endpoints]]\nid = \"{}\"\nprovider = \"{}\"",
            e.id,
            e.provider.id()
        );
        match e.tolerance_seconds {
            Some(t) => {
                let _ = writeln!(out, "tolerance_seconds = {t}");
            }
            None => {
                let _ = writeln!(out, "# tolerance: provider signs no timestamp");
            }
        }
        let _ = writeln!(out, "max_body_bytes = {}", e.max_body_bytes);
        match &e.allowed_event_types {
            Some(t) => {
                let _ = writeln!(out, "allowed_event_types = {t:?}");
            }
            None => {
                let _ = writeln!(out, "# allowed_event_types: all");
            }
        }
        render_rate_and_retry(&mut out, e.rate_limit, &e.retry);
        let names: Vec<&str> = e.handlers.iter().map(|h| h.name()).collect();
        let _ = writeln!(out, "handlers = {names:?}");
        if !e.destinations.is_empty() {
            let _ = writeln!(out, "destinations = {:?}", e.destinations);
        }
        if let Some(p) = &e.object_id_pointer {
            let _ = writeln!(out, "object_id_pointer = {p:?}");
        }
        if let Some(p) = &e.object_version_pointer {
            let _ = writeln!(out, "object_version_pointer = {p:?}");
        }
        for sv in &e.secrets {
            let mut state = String::new();
            if sv.retired {
                state.push_str(", retired = true");
            }
            if let Some(t) = sv.not_after {
                let ts = jiff::Timestamp::from_second(t)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                let _ = write!(state, ", not_after = \"{ts}\"");
            }
            let _ = writeln!(
                out,
                "# secret version {:?} from {} (redacted){state}",
                sv.version, sv.source
            );
        }
    }
    destinations::render(&c.relay, &c.destinations, &mut out);
    out
}

/// The `rate_limit` (when set) and `retry` lines shared by endpoints and destinations.
pub(crate) fn render_rate_and_retry(out: &mut String, rate: Option<Rate>, retry: &RetryPolicy) {
    use std::fmt::Write;
    if let Some(r) = rate {
        let _ = writeln!(
            out,
            "rate_limit = {{ per_second = {}, burst = {} }}",
            r.per_second, r.burst
        );
    }
    let _ = writeln!(
        out,
        "retry = {{ base_ms = {}, cap_ms = {}, max_attempts = {} }}",
        retry.base_ms, retry.cap_ms, retry.max_attempts
    );
}

/// Hides a password in a database URL.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    format!("{}://{user}:<redacted>{}", &url[..scheme_end], &url[at..])
                }
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}
#[cfg(test)]
mod tests;
