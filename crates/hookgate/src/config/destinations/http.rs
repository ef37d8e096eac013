//! `kind = "http"`: a POST to an internal service, signed as Standard Webhooks.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use hookgate_providers::pack;
use hookgate_relay::http::{HttpDestination, HttpSettings};
use serde::Deserialize;

use super::{DestinationKind, KindContext};
use crate::config::policies::{RawRate, RawRetry};
use crate::config::{ConfigError, err};
use crate::secrets::{self, SecretSource};

/// `[[destinations]]` with `kind = "http"`, as written. The keys every kind has come first
/// (repeated in each kind: `deny_unknown_fields` does not combine with `flatten`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttpDestination {
    pub id: String,
    pub url: Option<String>,
    pub timeout_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    pub headers: Option<BTreeMap<String, String>>,
    pub signing_secrets: Option<Vec<String>>,
    pub allow_private_network: Option<bool>,
    /// A forward proxy for this destination only; environment proxies are never used.
    pub proxy: Option<String>,
}

/// Headers hookgate sets on every request; a configured header may not replace them.
fn reserved_header(lower: &str) -> bool {
    lower.starts_with("webhook-")
        || lower.starts_with("x-hookgate-")
        || lower == "idempotency-key"
        || lower == "content-length"
        || lower == "host"
}

impl RawHttpDestination {
    pub(super) fn resolve(
        self,
        cx: &KindContext<'_>,
        warnings: &mut Vec<String>,
    ) -> Result<DestinationKind, ConfigError> {
        let parsed: url::Url = cx
            .url
            .parse()
            .map_err(|_| err(cx.at("url"), "must be an absolute http:// or https:// URL"))?;
        let proxy = match &self.proxy {
            Some(p) => Some(p.parse::<url::Url>().map_err(|_| {
                err(
                    cx.at("proxy"),
                    "must be an absolute http:// or https:// proxy URL",
                )
            })?),
            None => None,
        };
        let mut headers = Vec::new();
        for (name, value) in self.headers.iter().flatten() {
            let key = cx.at(&format!("headers.{name}"));
            if reserved_header(&name.to_ascii_lowercase()) {
                return Err(err(key, "is set by hookgate and cannot be overridden"));
            }
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| err(&key, "is not a valid header name"))?;
            let value = http::HeaderValue::from_str(value)
                .map_err(|_| err(&key, "is not a valid header value"))?;
            headers.push((name, value));
        }
        let pack = pack::builtin("standard_webhooks").expect("a built-in pack");
        let mut signing_secrets = Vec::new();
        let mut secret_sources = Vec::new();
        for (j, reference) in self.signing_secrets.iter().flatten().enumerate() {
            let key = cx.at(&format!("signing_secrets[{j}]"));
            let (source, value) = secrets::resolve(reference, cx.base).map_err(|e| err(&key, e))?;
            if source == SecretSource::Literal {
                warnings.push(format!(
                    "{key} is a literal in the config file; use env: or file: outside development"
                ));
            }
            let material = pack
                .decode_secret(value.expose())
                .map_err(|e| err(&key, format!("{e} (a whsec_ Standard Webhooks secret)")))?;
            if material.is_ed25519_public() {
                return Err(err(
                    &key,
                    "a whpk_ public key cannot sign: give the whsec_ secret the destination verifies",
                ));
            }
            signing_secrets.push(Arc::new(material));
            secret_sources.push(source);
        }
        if signing_secrets.is_empty() {
            warnings.push(format!(
                "{} has no signing_secrets: its requests are not signed",
                cx.at("id")
            ));
        }
        let settings = HttpSettings {
            id: cx.id.to_owned(),
            url: parsed,
            timeout: cx.timeout,
            headers,
            signing_secrets,
            allow_private_network: self.allow_private_network.unwrap_or(false),
            proxy,
        };
        // Validates scheme, host and private literals now rather than at first delivery.
        HttpDestination::new(settings.clone()).map_err(|e| {
            let key = if e.starts_with("proxy") {
                "proxy"
            } else {
                "url"
            };
            err(cx.at(key), e)
        })?;
        Ok(DestinationKind::Http {
            settings,
            secret_sources,
        })
    }
}

/// This kind's lines of `config check`: header values and secrets redacted.
pub(super) fn render(settings: &HttpSettings, secret_sources: &[SecretSource], out: &mut String) {
    let _ = writeln!(
        out,
        "kind = \"http\"\nurl = \"{}\"\nallow_private_network = {}",
        hookgate_relay::http::redacted_url(&settings.url),
        settings.allow_private_network
    );
    if let Some(proxy) = &settings.proxy {
        let _ = writeln!(
            out,
            "proxy = \"{}\"",
            hookgate_relay::http::redacted_url(proxy)
        );
    }
    let names: Vec<&str> = settings.headers.iter().map(|(n, _)| n.as_str()).collect();
    let _ = writeln!(out, "# headers (values redacted): {names:?}");
    for s in secret_sources {
        let _ = writeln!(out, "# signing secret from {s} (redacted)");
    }
}
