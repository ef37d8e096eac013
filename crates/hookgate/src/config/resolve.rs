//! The resolve phase: validates what the file says ([`super::raw`]), applies defaults and reads
//! secrets, producing the typed [`Config`]. Each error names the key it is about.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use hookgate_core::seal::ReplayKey;
use hookgate_providers::pack::{self, Pack};
use ipnet::IpNet;
use zeroize::Zeroizing;

use super::policies::{resolve_rate, resolve_retry};
use super::raw::{self, RawConfig, RawEndpoint};
use super::secrets::{resolve_endpoint_secrets, resolve_secrets};
use super::{
    AdminConfig, Config, ConfigError, DEFAULT_MAX_BODY_BYTES, EndpointConfig, HandlerKind,
    LogConfig, LogFormat, PayloadKeys, ProvidersConfig, ServerConfig, StripeApiConfig, TlsPaths,
    WorkerConfig, destinations, err, valid_id,
};
use crate::secrets::{self, SecretSource};

const MAX_BODY_CEILING: usize = 64 * 1024 * 1024;

pub(super) fn resolve(raw: RawConfig, path: &Path, base: &Path) -> Result<Config, ConfigError> {
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
    check_trusted_proxies(&trusted_proxies, raw.server.trusted_proxies_allow_public)?;
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
        per_client_rate: resolve_rate(raw.server.per_client_rate, "server.per_client_rate")?,
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
        max_body_readers: positive(raw.server.max_body_readers, 1024, "server.max_body_readers")?,
        per_client_body_readers: positive(
            raw.server.per_client_body_readers,
            64,
            "server.per_client_body_readers",
        )?,
        min_body_bytes_per_second: positive(
            raw.server.min_body_bytes_per_second,
            1024,
            "server.min_body_bytes_per_second",
        )? as u64,
    };

    let (admin_listen, admin) = match raw.admin {
        None => (None, AdminConfig::default()),
        Some(a) => super::admin::resolve_admin(a, base, &mut warnings)?,
    };

    let store = super::store::resolve_store(&raw.store, base, &mut warnings)?;

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

    let provider_packs = super::packs::resolve_user_packs(
        raw.provider_packs,
        raw.provider_packs_dir.as_deref(),
        base,
    )?;
    let retention = super::retention::resolve_retention(raw.retention)?;
    let jobs = super::operations::resolve_jobs(raw.jobs)?;
    let rejections = super::operations::resolve_rejections(raw.rejections)?;
    let reconcile = super::reconcile::resolve_reconcile(raw.reconcile, worker.lease)?;
    let tracing = super::traces::resolve_tracing(raw.tracing, base, &mut warnings)?;
    let mut endpoints: Vec<EndpointConfig> = Vec::with_capacity(raw.endpoints.len());
    for (i, mut e) in raw.endpoints.into_iter().enumerate() {
        let wanted_destinations = e.destinations.take();
        let idempotency_days = e.idempotency_days.take();
        let mut ep = resolve_endpoint(e, i, base, &provider_packs, &mut warnings)?;
        ep.idempotency = super::retention::resolve_window(
            idempotency_days,
            &format!("endpoints[{i}].idempotency_days"),
            ep.pack,
            &retention,
            &mut warnings,
        )?;
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
    destinations::filter::check_providers(&destinations, &endpoints)?;
    check_handler_timeouts(&endpoints, &providers, &worker)?;
    let secrets = resolve_secrets(
        raw.secrets.as_ref(),
        raw.vault.as_ref(),
        &endpoints,
        base,
        &mut warnings,
    )?;
    // Every literal was warned about as `<key> is a literal in the config file`.
    let literal_secrets = warnings
        .iter()
        .filter_map(|w| w.split_once(" is a literal in the config file"))
        .map(|(key, _)| key.to_owned())
        .collect();

    Ok(Config {
        path: path.to_owned(),
        server,
        admin_listen,
        admin,
        store,
        payload_keys,
        log,
        endpoints,
        worker,
        providers,
        relay,
        destinations,
        secrets,
        literal_secrets,
        provider_packs,
        retention,
        jobs,
        rejections,
        reconcile,
        tracing,
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

/// Room a leased row keeps after its slowest handler call, to commit the result before the
/// lease ends (as the relay keeps a second after a destination's `timeout_ms`).
pub(super) const LEASE_MARGIN: Duration = Duration::from_secs(1);

/// Leases are not renewed: a handler call that may outlive `[worker] lease_seconds` lets a
/// second worker lease and process the same event while the first is still waiting. So every
/// handler timeout some endpoint uses must end `LEASE_MARGIN` before the lease does.
fn check_handler_timeouts(
    endpoints: &[EndpointConfig],
    providers: &ProvidersConfig,
    worker: &WorkerConfig,
) -> Result<(), ConfigError> {
    let uses_stripe = endpoints
        .iter()
        .any(|e| e.handlers.contains(&HandlerKind::PaymentsProjection));
    let Some(stripe) = providers.stripe.as_ref().filter(|_| uses_stripe) else {
        return Ok(());
    };
    if stripe.timeout + LEASE_MARGIN > worker.lease {
        return Err(err(
            "providers.stripe.timeout_ms",
            format!(
                "{} ms does not fit in worker.lease_seconds ({} s) with {} ms left to commit: \
                 leases are not renewed, so a slower call would let another worker process the \
                 same event; lower timeout_ms or raise worker.lease_seconds",
                stripe.timeout.as_millis(),
                worker.lease.as_secs(),
                LEASE_MARGIN.as_millis(),
            ),
        ));
    }
    Ok(())
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

/// A JSON pointer (RFC 6901): empty or starting with `/`. It overrides the pack's object
/// location; a batch has one per item, so batched packs take none.
fn resolve_pointer(
    value: Option<String>,
    key: String,
    pack: &Pack,
) -> Result<Option<String>, ConfigError> {
    let Some(pointer) = value else {
        return Ok(None);
    };
    if pack.batched() {
        return Err(err(
            key,
            format!(
                "provider {} sends batches; each item's object comes from the pack",
                pack.id()
            ),
        ));
    }
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err(err(key, "must be a JSON pointer, e.g. /data/version"));
    }
    Ok(Some(pointer))
}

/// The default replay window: how long a verified body is remembered for providers that sign
/// neither the id nor a timestamp (DESIGN: the idempotency record of such providers is kept
/// longer than any provider's redelivery horizon).
pub(super) const DEFAULT_REPLAY_WINDOW_SECONDS: u64 = 90 * 24 * 3600;

/// `options = { … }` as the pack reads them: strings as written, a table as JSON text.
fn option_text(value: toml::Value) -> String {
    match value {
        toml::Value::String(s) => s,
        other => serde_json::to_string(&other).unwrap_or_default(),
    }
}

/// `/0` trusts every address (any client could then claim any address and scheme), so it is
/// refused outright; a public range only with `trusted_proxies_allow_public`.
fn check_trusted_proxies(proxies: &[IpNet], allow_public: bool) -> Result<(), ConfigError> {
    for (i, net) in proxies.iter().enumerate() {
        let key = format!("server.trusted_proxies[{i}]");
        if net.prefix_len() == 0 {
            return Err(err(
                key,
                format!("{net} trusts every address: list the proxies' own addresses"),
            ));
        }
        if !allow_public && !crate::ingress::limits::is_non_public(net) {
            return Err(err(
                key,
                format!(
                    "{net} is (or includes) a public range; set \
                     server.trusted_proxies_allow_public = true if the proxy really is there"
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn positive(
    value: Option<usize>,
    default: usize,
    key: &str,
) -> Result<usize, ConfigError> {
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
        let (source, key) = decode_key32(&k.key, base, &key_name)?;
        if source == SecretSource::Literal {
            warnings.push(format!(
                "{key_name} is a literal in the config file; use env: or file: outside development"
            ));
        }
        keys.push((k.version, source, key));
    }
    if !keys.iter().any(|(v, _, _)| *v == raw.active) {
        return Err(err(
            "payload_encryption.active",
            format!("no key with version {}", raw.active),
        ));
    }
    let (replay_key, replay_key_source) = match &raw.replay_key {
        Some(reference) => {
            let key_name = "payload_encryption.replay_key";
            let (source, bytes) = decode_key32(reference, base, key_name)?;
            if source == SecretSource::Literal {
                warnings.push(format!(
                    "{key_name} is a literal in the config file; use env: or file: outside development"
                ));
            }
            (ReplayKey::derive(&bytes[..]), Some(source))
        }
        None => {
            // Derived from the lowest version: it stays while newer keys are added, but
            // changes when that key is removed, so a configured key is recommended.
            let (version, _, lowest) = keys
                .iter()
                .min_by_key(|(v, _, _)| *v)
                .expect("at least one key");
            warnings.push(format!(
                "payload_encryption.replay_key is not set: replay digests use a key derived from \
                 payload key version {version}; set replay_key so that it stays stable when that \
                 key is removed"
            ));
            (ReplayKey::derive(&lowest[..]), None)
        }
    };
    let reseal_interval_seconds = raw.reseal_interval_seconds.unwrap_or(60);
    if reseal_interval_seconds == 0 || reseal_interval_seconds > 24 * 3600 {
        return Err(err(
            "payload_encryption.reseal_interval_seconds",
            "must be between 1 and 86400",
        ));
    }
    let reseal_batch = raw.reseal_batch.unwrap_or(100);
    if reseal_batch == 0 || reseal_batch > 10_000 {
        return Err(err(
            "payload_encryption.reseal_batch",
            "must be between 1 and 10000",
        ));
    }
    Ok(PayloadKeys {
        active: raw.active,
        keys,
        replay_key: Arc::new(replay_key),
        replay_key_source,
        reseal_interval: Duration::from_secs(reseal_interval_seconds),
        reseal_batch,
    })
}

/// A 32-byte key, base64-encoded, from a literal or an `env:`/`file:` reference.
fn decode_key32(
    reference: &str,
    base: &Path,
    key_name: &str,
) -> Result<(SecretSource, Zeroizing<[u8; 32]>), ConfigError> {
    let (source, value) = secrets::resolve(reference, base).map_err(|e| err(key_name, e))?;
    let bytes = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(value.expose().trim())
            .map_err(|_| err(key_name, "must be 32 bytes, base64-encoded"))?,
    );
    let key: [u8; 32] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| err(key_name, "must be 32 bytes, base64-encoded"))?;
    Ok((source, Zeroizing::new(key)))
}

fn resolve_endpoint(
    e: RawEndpoint,
    i: usize,
    base: &Path,
    user_packs: &[&'static Pack],
    warnings: &mut Vec<String>,
) -> Result<EndpointConfig, ConfigError> {
    let at = |k: &str| format!("endpoints[{i}].{k}");
    if !valid_id(&e.id) {
        return Err(err(
            at("id"),
            "must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ));
    }
    let pack = super::packs::find_pack(&e.provider, user_packs).ok_or_else(|| {
        err(
            at("provider"),
            format!(
                "unknown provider {:?}; known: {}",
                e.provider,
                super::packs::known_ids(user_packs)
            ),
        )
    })?;
    pack.check_public_url(e.public_url.as_deref())
        .map_err(|problem| err(at("public_url"), problem))?;
    let options = e
        .options
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, option_text(v)))
        .collect();
    let options = pack.check_options(&options).map_err(|problem| {
        let key = match &problem {
            pack::OptionError::Unknown { key, .. }
            | pack::OptionError::Missing { key, .. }
            | pack::OptionError::Malformed { key, .. } => key.clone(),
        };
        // The error text starts with `options.<key>: `; the key goes into the path.
        let text = problem.to_string();
        let text = text
            .strip_prefix(&format!("options.{key}: "))
            .unwrap_or(&text)
            .to_owned();
        err(at(&format!("options.{key}")), text)
    })?;
    let replay_window_ms = match (pack.replay_defence(), e.replay_window_seconds) {
        (None, Some(_)) => {
            return Err(err(
                at("replay_window_seconds"),
                format!(
                    "provider {} signs its event id or a timestamp, so it needs no replay window",
                    pack.id()
                ),
            ));
        }
        (Some(_), Some(0)) => {
            return Err(err(at("replay_window_seconds"), "must be greater than 0"));
        }
        (Some(_), seconds) => {
            let seconds = seconds.unwrap_or(DEFAULT_REPLAY_WINDOW_SECONDS);
            Some(i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX))
        }
        (None, None) => None,
    };
    let max_body_bytes = e.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_CEILING {
        return Err(err(
            at("max_body_bytes"),
            format!("must be between 1 and {MAX_BODY_CEILING}"),
        ));
    }
    if e.tolerance_seconds.is_some() && pack.default_tolerance_seconds().is_none() {
        return Err(err(
            at("tolerance_seconds"),
            format!(
                "provider {} signs no timestamp, so there is nothing to check",
                pack.id()
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
    if let Some(versions) = &e.api_versions {
        if !pack.reads_api_version() {
            return Err(err(
                at("api_versions"),
                format!(
                    "provider {} stamps no API version hookgate reads, so there is nothing to pin",
                    pack.id()
                ),
            ));
        }
        if versions.is_empty() {
            return Err(err(
                at("api_versions"),
                "must list at least one version (leave it out to process every version)",
            ));
        }
        for (j, v) in versions.iter().enumerate() {
            if v.trim().is_empty() || v.trim() != v {
                return Err(err(
                    format!("endpoints[{i}].api_versions[{j}]"),
                    "must be a version string without surrounding spaces",
                ));
            }
            if versions[..j].contains(v) {
                return Err(err(
                    format!("endpoints[{i}].api_versions[{j}]"),
                    format!("duplicate version {v:?}"),
                ));
            }
        }
    }
    let secrets_out = resolve_endpoint_secrets(e.secrets, i, pack, base, warnings)?;
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
        if kind == HandlerKind::PaymentsProjection && pack.id() != "stripe" {
            return Err(err(
                &key,
                "payments_projection handles Stripe endpoints only",
            ));
        }
        handlers.push(kind);
    }
    let reconcile = super::reconcile::resolve_endpoint_reconcile(
        e.reconcile,
        &e.id,
        &at,
        pack,
        base,
        warnings,
    )?;
    let object_id_pointer = resolve_pointer(e.object_id_pointer, at("object_id_pointer"), pack)?;
    let object_version_pointer =
        resolve_pointer(e.object_version_pointer, at("object_version_pointer"), pack)?;
    let sequence = super::sequence::resolve(
        super::sequence::RawSequencing {
            pointer: resolve_pointer(e.sequence_pointer, at("sequence_pointer"), pack)?,
            gap_seconds: e.sequence_gap_seconds,
            gap_max: e.sequence_gap_max,
            start: e.sequence_start,
        },
        i,
        pack,
        object_id_pointer.as_deref(),
    )?;
    Ok(EndpointConfig {
        sequence,
        retry: resolve_retry(e.retry, &at("retry"))?,
        handlers,
        object_id_pointer,
        object_version_pointer,
        destinations: Vec::new(),
        idempotency: super::retention::IdempotencyWindow::UNRESOLVED,
        id: e.id,
        pack,
        public_url: e.public_url,
        options,
        replay_window_ms,
        tolerance_seconds: e.tolerance_seconds.or(pack.default_tolerance_seconds()),
        max_body_bytes,
        allowed_event_types: e.allowed_event_types,
        api_versions: e.api_versions,
        secrets: secrets_out,
        rate_limit: resolve_rate(e.rate_limit, &at("rate_limit"))?,
        reconcile,
    })
}
