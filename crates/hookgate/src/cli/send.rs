//! `hookgate send`: sign a payload as the endpoint's provider would and POST it.

use std::path::PathBuf;

use anyhow::{Context, bail};
use hookgate_providers::pack::{Pack, SignTarget, SignedDelivery, SigningKey};
use hookgate_providers::{IdLocation, SecretMaterial, SignRequest};

use crate::config::{Config, EndpointConfig, SecretVersion};

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    #[arg(long, short)]
    pub config: PathBuf,
    /// Endpoint id from the configuration.
    #[arg(long)]
    pub endpoint: String,
    /// Logical event id; a fresh one when absent. Send the same id twice to see `duplicate`.
    #[arg(long)]
    pub event_id: Option<String>,
    /// Event type for providers that carry it in a header (GitHub, Shopify).
    #[arg(long)]
    pub event_type: Option<String>,
    /// Target URL; default: the configured listener.
    #[arg(long)]
    pub url: Option<String>,
    /// The provider's private key, for providers that sign with one (Discord, SendGrid,
    /// PayPal): Ed25519 seed (hex), or a PKCS#8 PEM key.
    #[arg(long)]
    pub private_key: Option<PathBuf>,
    /// The JSON payload file.
    pub payload: PathBuf,
}

/// A fresh id in the provider's own style.
pub fn fresh_event_id(pack: &Pack) -> String {
    let uuid = uuid::Uuid::new_v4();
    match pack.id() {
        "stripe" => format!("evt_{}", uuid.simple()),
        "standard_webhooks" | "svix" => format!("msg_{}", uuid.simple()),
        "slack" => format!("Ev{}", &uuid.simple().to_string()[..10].to_uppercase()),
        _ => uuid.to_string(),
    }
}

/// Puts `event_id` where the provider carries it: inside the body for body-id providers
/// (not for batches, whose items carry their own, nor for ids composed of several fields).
pub fn place_event_id(pack: &Pack, body: &[u8], event_id: &str) -> anyhow::Result<Vec<u8>> {
    match pack.id_location() {
        IdLocation::BodyPointer(pointer) if !pack.batched() && !pack.id_composed() => {
            let mut value: serde_json::Value =
                serde_json::from_slice(body).context("payload is not JSON")?;
            let slot = value.pointer_mut(pointer).with_context(|| {
                format!("payload has no field at {pointer} to carry the event id")
            })?;
            *slot = serde_json::Value::String(event_id.to_owned());
            Ok(serde_json::to_vec_pretty(&value)?)
        }
        _ => Ok(body.to_vec()),
    }
}

/// Event type for header-typed providers: the flag, else the body's `type`, else a default.
fn event_type_for(pack: &Pack, explicit: Option<&str>, body: &[u8]) -> Option<String> {
    if let Some(t) = explicit {
        return Some(t.to_owned());
    }
    let from_body = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned));
    from_body.or_else(|| match pack.id() {
        "github" => Some("ping".into()),
        "shopify" => Some("orders/create".into()),
        _ => None,
    })
}

/// What signs a delivery: the endpoint's trusted shared secret, or the private key of a
/// public-key provider (`--private-key`).
pub enum Signer<'a> {
    /// The endpoint's first trusted secret version, read from its source.
    Secret(&'a Config),
    PrivateKey(&'a SigningKey),
}

/// Signs `body` for `endpoint` as its provider would: headers, the body as sent (Adyen and
/// Mailgun carry the signature in it) and, for packs that sign the URL, the signed URL.
pub fn sign_delivery(
    endpoint: &EndpointConfig,
    signer: Signer<'_>,
    event_id: &str,
    event_type: Option<&str>,
    body: &[u8],
    timestamp: i64,
) -> anyhow::Result<SignedDelivery> {
    let pack = endpoint.pack;
    let body = place_event_id(pack, body, event_id)?;
    let event_type = event_type_for(pack, event_type, &body);
    let request = SignRequest {
        event_id,
        event_type: event_type.as_deref(),
        timestamp,
        body: &body,
    };
    let target = SignTarget {
        public_url: endpoint.public_url.as_deref(),
        options: Some(&endpoint.options),
    };
    match signer {
        Signer::PrivateKey(key) => Ok(pack.sign_with_private_key(key, &request, &target)),
        Signer::Secret(_) if !pack.has_shared_secret() => bail!(
            "provider {} verifies with a public key: pass --private-key FILE to sign",
            pack.id()
        ),
        Signer::Secret(config) => {
            let material = trusted_secret_blocking(config, endpoint, timestamp)?;
            if material.is_ed25519_public() {
                bail!(
                    "endpoint {}'s first trusted secret is a whpk_ public key, which cannot sign: \
                     pass --private-key FILE holding the whsk_ secret key",
                    endpoint.id
                );
            }
            Ok(pack.sign_delivery(&material, &request, &target))
        }
    }
}

/// The URL to post to: `base` with the query of the URL the provider signed (a request's
/// query replaces `public_url`'s when verified, so the appended parameters must travel).
fn post_url(base: &str, signed: Option<&str>) -> String {
    match signed.and_then(|url| url.split_once('?')) {
        Some((_, query)) => {
            let base = base.split_once('?').map_or(base, |(b, _)| b);
            format!("{base}?{query}")
        }
        None => base.to_owned(),
    }
}

pub fn default_url(config: &Config, endpoint_id: &str) -> String {
    let mut addr = config.server.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let scheme = if config.server.tls.is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{addr}/webhooks/{endpoint_id}")
}

/// The value of `endpoint`'s first version trusted at `now`, read from its source as the
/// gateway reads it.
pub fn trusted_secret_blocking(
    config: &Config,
    endpoint: &EndpointConfig,
    now: i64,
) -> anyhow::Result<SecretMaterial> {
    let version = endpoint
        .secrets
        .iter()
        .find(|s| s.trusted_at(now))
        .with_context(|| {
            format!(
                "endpoint {} has no trusted secret to sign with",
                endpoint.id
            )
        })?;
    secret_version_blocking(config, endpoint, version)
}

/// One secret version's value, read from its source as the gateway reads it (on a thread of
/// its own, so it works inside and outside a runtime) and decoded for the endpoint's pack.
pub fn secret_version_blocking(
    config: &Config,
    endpoint: &EndpointConfig,
    version: &SecretVersion,
) -> anyhow::Result<SecretMaterial> {
    let reader = config.secrets.reader(true);
    let value = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime
                    .block_on(reader.read(&version.source, &version.reference))
                    .map(|(value, _)| value)
                    .map_err(anyhow::Error::from)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the secret reader panicked"))?
    })
    .with_context(|| {
        format!(
            "endpoint {} secret version {:?}",
            endpoint.id, version.version
        )
    })?;
    endpoint
        .pack
        .decode_secret(value.expose())
        .map_err(|e| anyhow::anyhow!("{e} for provider {}", endpoint.pack.id()))
}

pub async fn run(args: SendArgs) -> anyhow::Result<i32> {
    let config = Config::load(&args.config)?;
    let Some(endpoint) = config.endpoint(&args.endpoint) else {
        bail!(
            "no endpoint {:?} in {}",
            args.endpoint,
            args.config.display()
        );
    };
    let payload = std::fs::read(&args.payload)
        .with_context(|| format!("cannot read payload {}", args.payload.display()))?;
    let event_id = args
        .event_id
        .clone()
        .unwrap_or_else(|| fresh_event_id(endpoint.pack));
    let timestamp = jiff::Timestamp::now().as_second();
    let private_key = match &args.private_key {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read private key {}", path.display()))?;
            let key = endpoint.pack.decode_signing_key(&text).with_context(|| {
                format!(
                    "{} is not a private key for provider {}",
                    path.display(),
                    endpoint.pack.id()
                )
            })?;
            Some(key)
        }
        None => None,
    };
    let signer = match &private_key {
        Some(key) => Signer::PrivateKey(key),
        None => Signer::Secret(&config),
    };
    let signed = sign_delivery(
        endpoint,
        signer,
        &event_id,
        args.event_type.as_deref(),
        &payload,
        timestamp,
    )?;
    let base = args
        .url
        .clone()
        .unwrap_or_else(|| default_url(&config, &endpoint.id));
    let url = post_url(&base, signed.url.as_deref());
    let (headers, body) = (signed.headers, signed.body);
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?;
    let mut request = client.post(&url).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    println!("event id: {event_id}");
    println!("HTTP {}", status.as_u16());
    println!("{text}");
    Ok(if status.is_success() { 0 } else { 1 })
}
