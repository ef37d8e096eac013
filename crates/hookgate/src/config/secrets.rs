//! The secrets part of the resolve phase: endpoint secret versions (references checked, never
//! read here: the gateway's secret cache reads them), `[secrets]` and `[vault]`, and the
//! warnings about versions close to their `not_after`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookgate_providers::pack::Pack;

use super::raw::{self, RawSecret};
use super::{ConfigError, EndpointConfig, SecretVersion, SecretsConfig, err};
use crate::secrets::{self, SecretSource, SecretString};

/// `refresh_seconds` when not set.
pub(super) const DEFAULT_SECRET_REFRESH_SECONDS: u64 = 60;
/// `max_age_seconds` when not set.
pub(super) const DEFAULT_SECRET_MAX_AGE_SECONDS: u64 = 3600;
/// A secret this close to its `not_after` is warned about at load (and by `config check`).
const EXPIRY_WARNING_SECONDS: i64 = 7 * 24 * 3600;

/// Warns about a version within [`EXPIRY_WARNING_SECONDS`] of its `not_after`, or past it.
fn warn_expiry(key: &str, version: &str, not_after: i64, warnings: &mut Vec<String>) {
    let now = jiff::Timestamp::now().as_second();
    let at = jiff::Timestamp::from_second(not_after)
        .map(|t| t.to_string())
        .unwrap_or_default();
    if now > not_after {
        warnings.push(format!(
            "{key} (version {version:?}) is past its not_after {at}: it is no longer trusted"
        ));
    } else if not_after - now <= EXPIRY_WARNING_SECONDS {
        let days = (not_after - now) as f64 / 86_400.0;
        warnings.push(format!(
            "{key} (version {version:?}) expires at {at}, in {days:.1} days: add its successor \
             and have the provider sign with it before then"
        ));
    }
}

/// An endpoint's `secrets`: every version's reference parsed, a literal decoded at once (a bad
/// literal is a config error, not an outage), `refresh_seconds`/`max_age_seconds` checked.
pub(super) fn resolve_endpoint_secrets(
    raw: Vec<RawSecret>,
    i: usize,
    pack: &'static Pack,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<SecretVersion>, ConfigError> {
    if raw.is_empty() {
        return Err(err(
            format!("endpoints[{i}].secrets"),
            "at least one secret version is required",
        ));
    }
    let mut secrets_out: Vec<SecretVersion> = Vec::with_capacity(raw.len());
    for (j, s) in raw.into_iter().enumerate() {
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
        let source =
            secrets::source_of(&s.value, base).map_err(|e| err(format!("{key}.value"), e))?;
        if source == SecretSource::Literal {
            warnings.push(format!(
                "{key}.value is a literal in the config file; use env: or file: outside development"
            ));
            // A literal needs no source: a bad one is a config error, not an outage.
            let value = secrets::resolve(&s.value, base)
                .map_err(|e| err(format!("{key}.value"), e))?
                .1;
            pack.decode_secret(value.expose()).map_err(|e| {
                err(
                    format!("{key}.value"),
                    format!("{e} for provider {}", pack.id()),
                )
            })?;
        }
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
        let refresh_seconds = s.refresh_seconds.unwrap_or(DEFAULT_SECRET_REFRESH_SECONDS);
        if refresh_seconds == 0 || refresh_seconds > 24 * 3600 {
            return Err(err(
                format!("{key}.refresh_seconds"),
                "must be between 1 and 86400",
            ));
        }
        let max_age_seconds = s.max_age_seconds.unwrap_or(DEFAULT_SECRET_MAX_AGE_SECONDS);
        if max_age_seconds < refresh_seconds || max_age_seconds > 30 * 24 * 3600 {
            return Err(err(
                format!("{key}.max_age_seconds"),
                format!(
                    "must be between refresh_seconds ({refresh_seconds}) and 2592000: a value \
                     older than max_age_seconds stops verifying, so it has to be refreshed before"
                ),
            ));
        }
        if !s.retired
            && let Some(t) = not_after
        {
            warn_expiry(&key, &s.version, t, warnings);
        }
        secrets_out.push(SecretVersion {
            version: s.version,
            source,
            reference: SecretString::new(s.value),
            not_after,
            retired: s.retired,
            refresh: Duration::from_secs(refresh_seconds),
            max_age: Duration::from_secs(max_age_seconds),
        });
    }
    Ok(secrets_out)
}

/// `[secrets]` and `[vault]`. `[vault]` is required as soon as a `vault:` secret is used.
pub(super) fn resolve_secrets(
    raw: Option<&raw::RawSecrets>,
    vault: Option<&raw::RawVault>,
    endpoints: &[EndpointConfig],
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<SecretsConfig, ConfigError> {
    let exec_timeout_ms = raw.and_then(|r| r.exec_timeout_ms).unwrap_or(5000);
    if exec_timeout_ms == 0 || exec_timeout_ms > 120_000 {
        return Err(err(
            "secrets.exec_timeout_ms",
            "must be between 1 and 120000",
        ));
    }
    let vault_used = endpoints.iter().enumerate().find_map(|(i, e)| {
        e.secrets
            .iter()
            .position(|s| !s.retired && matches!(s.source, SecretSource::Vault { .. }))
            .map(|j| format!("endpoints[{i}].secrets[{j}]"))
    });
    let (client, address) = match vault {
        None => {
            if let Some(key) = vault_used {
                return Err(err(
                    format!("{key}.value"),
                    "a vault: secret needs [vault] address and token",
                ));
            }
            (None, None)
        }
        Some(v) => {
            let address = v.address.trim().trim_end_matches('/').to_owned();
            if !address.starts_with("https://") || reqwest::Url::parse(&address).is_err() {
                return Err(err(
                    "vault.address",
                    "must be an https:// URL, e.g. https://vault.internal:8200 (the token travels with every read)",
                ));
            }
            let (token_source, token) =
                secrets::resolve(&v.token, base).map_err(|e| err("vault.token", e))?;
            if token_source == SecretSource::Literal {
                warnings.push(
                    "vault.token is a literal in the config file; use env: or file: outside development"
                        .into(),
                );
            }
            let ca_file = v.ca_file.as_ref().map(|p| base.join(p));
            let client = secrets::vault::VaultClient::new(&address, token, ca_file.as_deref())
                .map_err(|e| err("vault.ca_file", e))?;
            (Some(Arc::new(client)), Some(address))
        }
    };
    Ok(SecretsConfig {
        exec_timeout: Duration::from_millis(exec_timeout_ms),
        vault: client,
        vault_address: address,
    })
}
