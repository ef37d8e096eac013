//! `[[destinations]]` and `[relay]`: where processed events are delivered (DESIGN.md §5,
//! step 3), parsed then resolved like the rest of the configuration. Every key is documented
//! in `docs/configuration.md` ("Destinations").

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookgate_core::retry::RetryPolicy;
use hookgate_providers::ProviderKind;
use hookgate_relay::http::HttpSettings;
use hookgate_relay::nats::NatsSettings;
use hookgate_relay::subject::SubjectTemplate;
use serde::Deserialize;

use super::raw::{RawRate, RawRetry};
use super::{ConfigError, Rate, err, rate, resolve_retry, valid_endpoint_id};
use crate::secrets::{self, SecretSource};

/// `[[destinations]]` as written. Keys of the other kind are errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDestination {
    pub id: String,
    pub kind: String,
    pub url: Option<String>,
    pub timeout_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    // http
    pub headers: Option<BTreeMap<String, String>>,
    pub signing_secrets: Option<Vec<String>>,
    pub allow_private_network: Option<bool>,
    // nats
    pub stream: Option<String>,
    pub subject: Option<String>,
    pub duplicate_window_seconds: Option<u64>,
}

/// `[relay]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRelay {
    pub enabled: Option<bool>,
    pub lease_seconds: Option<u64>,
    pub poll_interval_ms: Option<u64>,
}

/// `[relay]`: the outbox relay beside the workers.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// `false`: this instance writes outbox rows but delivers nothing (another does).
    pub enabled: bool,
    /// How long a leased delivery is this relay's; longer than any destination timeout.
    pub lease: Duration,
    /// Sleep of an idle destination loop before it looks for due deliveries again.
    pub poll_interval: Duration,
}

/// What kind of destination, with its kind's settings.
#[derive(Debug, Clone)]
pub enum DestinationKind {
    Http {
        settings: HttpSettings,
        /// Where each signing secret came from (`config check`).
        secret_sources: Vec<SecretSource>,
    },
    Nats(NatsSettings),
}

/// One resolved `[[destinations]]` table.
#[derive(Debug, Clone)]
pub struct DestinationConfig {
    pub id: String,
    pub kind: DestinationKind,
    /// Deliveries in flight at once to this destination.
    pub concurrency: usize,
    /// Deliveries started per second (burst), if limited.
    pub rate_limit: Option<Rate>,
    /// Backoff of transient delivery failures; `max_attempts` then `FAILED`.
    pub retry: RetryPolicy,
    pub timeout: Duration,
}

const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Default duplicate window: 2 minutes beyond the default lease would do; a day costs little.
const DEFAULT_DUPLICATE_WINDOW_S: u64 = 24 * 3600;

pub(super) fn resolve_relay(raw: Option<&RawRelay>) -> Result<RelayConfig, ConfigError> {
    let lease_seconds = raw.and_then(|r| r.lease_seconds).unwrap_or(60);
    if lease_seconds == 0 || lease_seconds > 24 * 3600 {
        return Err(err("relay.lease_seconds", "must be between 1 and 86400"));
    }
    let poll_ms = raw.and_then(|r| r.poll_interval_ms).unwrap_or(200);
    if poll_ms == 0 || poll_ms > 60_000 {
        return Err(err("relay.poll_interval_ms", "must be between 1 and 60000"));
    }
    Ok(RelayConfig {
        enabled: raw.and_then(|r| r.enabled).unwrap_or(true),
        lease: Duration::from_secs(lease_seconds),
        poll_interval: Duration::from_millis(poll_ms),
    })
}

pub(super) fn resolve_destinations(
    raw: Vec<RawDestination>,
    relay: &RelayConfig,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<DestinationConfig>, ConfigError> {
    let mut out: Vec<DestinationConfig> = Vec::with_capacity(raw.len());
    for (i, d) in raw.into_iter().enumerate() {
        let resolved = resolve_destination(d, i, relay, base, warnings)?;
        if out.iter().any(|o| o.id == resolved.id) {
            return Err(err(
                format!("destinations[{i}].id"),
                format!("duplicate destination id {:?}", resolved.id),
            ));
        }
        out.push(resolved);
    }
    Ok(out)
}

fn resolve_destination(
    d: RawDestination,
    i: usize,
    relay: &RelayConfig,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<DestinationConfig, ConfigError> {
    let at = |k: &str| format!("destinations[{i}].{k}");
    if !valid_endpoint_id(&d.id) {
        return Err(err(
            at("id"),
            "must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ));
    }
    let timeout_ms = d.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > 300_000 {
        return Err(err(at("timeout_ms"), "must be between 1 and 300000"));
    }
    let timeout = Duration::from_millis(timeout_ms);
    if timeout + Duration::from_secs(1) >= relay.lease {
        return Err(err(
            at("timeout_ms"),
            format!(
                "must be shorter than relay.lease_seconds ({} s) by at least a second, or a slow delivery would be taken over while still running",
                relay.lease.as_secs()
            ),
        ));
    }
    let concurrency = d.concurrency.unwrap_or(8);
    if concurrency == 0 || concurrency > 1024 {
        return Err(err(at("concurrency"), "must be between 1 and 1024"));
    }
    let rate_limit = rate(d.rate_limit, &at("rate_limit"))?;
    let retry = resolve_retry(d.retry, &at("retry"))?;
    let url = d
        .url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| err(at("url"), "is required"))?;
    let only = |present: bool, key: &str, kind: &str| {
        if present {
            Err(err(at(key), format!("is not a key of kind = \"{kind}\"")))
        } else {
            Ok(())
        }
    };
    let kind = match d.kind.as_str() {
        "http" => {
            only(d.stream.is_some(), "stream", "http")?;
            only(d.subject.is_some(), "subject", "http")?;
            only(
                d.duplicate_window_seconds.is_some(),
                "duplicate_window_seconds",
                "http",
            )?;
            let parsed: url::Url = url
                .parse()
                .map_err(|_| err(at("url"), "must be an absolute http:// or https:// URL"))?;
            let mut headers = Vec::new();
            for (name, value) in d.headers.iter().flatten() {
                let key = format!("destinations[{i}].headers.{name}");
                let lower = name.to_ascii_lowercase();
                if lower.starts_with("webhook-")
                    || lower.starts_with("x-hookgate-")
                    || lower == "idempotency-key"
                    || lower == "content-length"
                    || lower == "host"
                {
                    return Err(err(key, "is set by hookgate and cannot be overridden"));
                }
                let name = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| err(&key, "is not a valid header name"))?;
                let value = http::HeaderValue::from_str(value)
                    .map_err(|_| err(&key, "is not a valid header value"))?;
                headers.push((name, value));
            }
            let adapter = ProviderKind::StandardWebhooks.adapter();
            let mut signing_secrets = Vec::new();
            let mut secret_sources = Vec::new();
            for (j, reference) in d.signing_secrets.iter().flatten().enumerate() {
                let key = format!("destinations[{i}].signing_secrets[{j}]");
                let (source, value) =
                    secrets::resolve(reference, base).map_err(|e| err(&key, e))?;
                if source == SecretSource::Literal {
                    warnings.push(format!(
                        "{key} is a literal in the config file; use env: or file: outside development"
                    ));
                }
                let material = adapter
                    .decode_secret(value.expose())
                    .map_err(|e| err(&key, format!("{e} (a whsec_ Standard Webhooks secret)")))?;
                signing_secrets.push(Arc::new(material));
                secret_sources.push(source);
            }
            if signing_secrets.is_empty() {
                warnings.push(format!(
                    "{} has no signing_secrets: its requests are not signed",
                    at("id")
                ));
            }
            let settings = HttpSettings {
                id: d.id.clone(),
                url: parsed,
                timeout,
                headers,
                signing_secrets,
                allow_private_network: d.allow_private_network.unwrap_or(false),
            };
            // Validates scheme, host and private literals now rather than at first delivery.
            hookgate_relay::http::HttpDestination::new(settings.clone())
                .map_err(|e| err(at("url"), e))?;
            DestinationKind::Http {
                settings,
                secret_sources,
            }
        }
        "nats" => {
            only(d.headers.is_some(), "headers", "nats")?;
            only(d.signing_secrets.is_some(), "signing_secrets", "nats")?;
            only(
                d.allow_private_network.is_some(),
                "allow_private_network",
                "nats",
            )?;
            if !(url.starts_with("nats://") || url.starts_with("tls://")) {
                return Err(err(at("url"), "must start with nats:// or tls://"));
            }
            let stream = d
                .stream
                .ok_or_else(|| err(at("stream"), "is required for kind = \"nats\""))?;
            if stream.is_empty()
                || stream.len() > 64
                || !stream
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
            {
                return Err(err(
                    at("stream"),
                    "must be 1-64 characters of A-Z a-z 0-9 - _",
                ));
            }
            let subject = SubjectTemplate::parse(
                d.subject
                    .as_deref()
                    .unwrap_or("webhooks.{provider}.{event_type}"),
            )
            .map_err(|e| err(at("subject"), e))?;
            let window_s = d
                .duplicate_window_seconds
                .unwrap_or(DEFAULT_DUPLICATE_WINDOW_S);
            let window = Duration::from_secs(window_s);
            // A crashed relay's delivery returns after its lease; a restart takes a while more.
            let minimum = relay.lease + Duration::from_secs(120);
            if window < minimum {
                return Err(err(
                    at("duplicate_window_seconds"),
                    format!(
                        "must be at least relay.lease_seconds + 120 ({} s): longer than a lease plus a restart",
                        minimum.as_secs()
                    ),
                ));
            }
            DestinationKind::Nats(NatsSettings {
                id: d.id.clone(),
                url: url.to_owned(),
                stream,
                subject,
                duplicate_window: window,
                timeout,
            })
        }
        other => {
            return Err(err(
                at("kind"),
                format!("unknown kind {other:?}; known: http, nats"),
            ));
        }
    };
    Ok(DestinationConfig {
        id: d.id,
        kind,
        concurrency,
        rate_limit,
        retry,
        timeout,
    })
}

/// `destinations = [...]` of one endpoint: known ids, no repeats.
pub(super) fn resolve_endpoint_destinations(
    ids: Option<Vec<String>>,
    endpoint_index: usize,
    known: &[DestinationConfig],
) -> Result<Vec<String>, ConfigError> {
    let mut out: Vec<String> = Vec::new();
    for (j, id) in ids.into_iter().flatten().enumerate() {
        let key = format!("endpoints[{endpoint_index}].destinations[{j}]");
        if !known.iter().any(|d| d.id == id) {
            let names: Vec<&str> = known.iter().map(|d| d.id.as_str()).collect();
            return Err(err(
                key,
                format!(
                    "unknown destination {id:?}; configured: [{}]",
                    names.join(", ")
                ),
            ));
        }
        if out.contains(&id) {
            return Err(err(key, format!("duplicate destination {id:?}")));
        }
        out.push(id);
    }
    Ok(out)
}

/// `config check` output for `[relay]` and `[[destinations]]`, secrets redacted.
pub(super) fn render(relay: &RelayConfig, destinations: &[DestinationConfig], out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "\n[relay]\nenabled = {}\nlease_seconds = {}\npoll_interval_ms = {}",
        relay.enabled,
        relay.lease.as_secs(),
        relay.poll_interval.as_millis()
    );
    for d in destinations {
        let _ = writeln!(out, "\n[[destinations]]\nid = \"{}\"", d.id);
        match &d.kind {
            DestinationKind::Http {
                settings,
                secret_sources,
            } => {
                let _ = writeln!(
                    out,
                    "kind = \"http\"\nurl = \"{}\"\nallow_private_network = {}",
                    hookgate_relay::http::redacted_url(&settings.url),
                    settings.allow_private_network
                );
                let names: Vec<&str> = settings.headers.iter().map(|(n, _)| n.as_str()).collect();
                let _ = writeln!(out, "# headers (values redacted): {names:?}");
                for s in secret_sources {
                    let _ = writeln!(out, "# signing secret from {s} (redacted)");
                }
            }
            DestinationKind::Nats(n) => {
                let _ = writeln!(
                    out,
                    "kind = \"nats\"\nurl = \"{}\"\nstream = \"{}\"\n# subject filter: {}\nduplicate_window_seconds = {}",
                    super::redact_url(&n.url),
                    n.stream,
                    n.subject.filter(),
                    n.duplicate_window.as_secs()
                );
            }
        }
        let _ = writeln!(
            out,
            "timeout_ms = {}\nconcurrency = {}",
            d.timeout.as_millis(),
            d.concurrency
        );
        super::render_rate_and_retry(out, d.rate_limit, &d.retry);
    }
}
