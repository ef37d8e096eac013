//! `hookgate send`: sign a payload as the endpoint's provider would and POST it.

use std::path::PathBuf;

use anyhow::{Context, bail};
use hookgate_providers::{IdLocation, ProviderKind, SignRequest};

use crate::config::{Config, EndpointConfig};

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
    /// The JSON payload file.
    pub payload: PathBuf,
}

/// A fresh id in the provider's own style.
pub fn fresh_event_id(provider: ProviderKind) -> String {
    let uuid = uuid::Uuid::new_v4();
    match provider {
        ProviderKind::Stripe => format!("evt_{}", uuid.simple()),
        ProviderKind::StandardWebhooks | ProviderKind::Svix => format!("msg_{}", uuid.simple()),
        ProviderKind::Slack => format!("Ev{}", &uuid.simple().to_string()[..10].to_uppercase()),
        ProviderKind::Github | ProviderKind::Shopify => uuid.to_string(),
    }
}

/// Puts `event_id` where the provider carries it: inside the body for body-id providers.
pub fn place_event_id(
    provider: ProviderKind,
    body: &[u8],
    event_id: &str,
) -> anyhow::Result<Vec<u8>> {
    match provider.adapter().id_location() {
        IdLocation::Header(_) => Ok(body.to_vec()),
        IdLocation::BodyPointer(pointer) => {
            let mut value: serde_json::Value =
                serde_json::from_slice(body).context("payload is not JSON")?;
            let slot = value.pointer_mut(pointer).with_context(|| {
                format!("payload has no field at {pointer} to carry the event id")
            })?;
            *slot = serde_json::Value::String(event_id.to_owned());
            Ok(serde_json::to_vec_pretty(&value)?)
        }
    }
}

/// Event type for header-typed providers: the flag, else the body's `type`, else a default.
fn event_type_for(provider: ProviderKind, explicit: Option<&str>, body: &[u8]) -> Option<String> {
    if let Some(t) = explicit {
        return Some(t.to_owned());
    }
    let from_body = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned));
    from_body.or_else(|| match provider {
        ProviderKind::Github => Some("ping".into()),
        ProviderKind::Shopify => Some("orders/create".into()),
        _ => None,
    })
}

/// Headers and final body of a delivery, as the provider would send it.
pub type SignedDelivery = (Vec<(http::HeaderName, http::HeaderValue)>, Vec<u8>);

/// Signs `body` for `endpoint` as its provider would.
pub fn sign_delivery(
    endpoint: &EndpointConfig,
    event_id: &str,
    event_type: Option<&str>,
    body: &[u8],
    timestamp: i64,
) -> anyhow::Result<SignedDelivery> {
    let now = timestamp;
    let secret = endpoint
        .secrets
        .iter()
        .find(|s| s.trusted_at(now))
        .with_context(|| {
            format!(
                "endpoint {} has no trusted secret to sign with",
                endpoint.id
            )
        })?;
    let body = place_event_id(endpoint.provider, body, event_id)?;
    let event_type = event_type_for(endpoint.provider, event_type, &body);
    let headers = endpoint.provider.adapter().sign(
        &secret.material,
        &SignRequest {
            event_id,
            event_type: event_type.as_deref(),
            timestamp,
            body: &body,
        },
    );
    Ok((headers, body))
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
        .unwrap_or_else(|| fresh_event_id(endpoint.provider));
    let timestamp = jiff::Timestamp::now().as_second();
    let (headers, body) = sign_delivery(
        endpoint,
        &event_id,
        args.event_type.as_deref(),
        &payload,
        timestamp,
    )?;
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| default_url(&config, &endpoint.id));
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
