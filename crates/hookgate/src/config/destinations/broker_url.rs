//! The `url` of the broker kinds that carry credentials in it (`rabbitmq`, `redis_stream`): a
//! secret source like every other secret — `env:NAME`, `file:PATH` or the URL itself — read
//! once at load. A literal URL with a password counts as a literal secret (development only:
//! loopback listeners or `--dev`).

use hookgate_relay::redact_password;

use super::KindContext;
use crate::config::{ConfigError, err};
use crate::secrets::{self, SecretSource};

/// The URL `cx.url` refers to, and where it came from; errors name the key and the source,
/// never the URL.
pub(super) fn resolve_url_secret(
    cx: &KindContext<'_>,
    warnings: &mut Vec<String>,
) -> Result<(SecretSource, String), ConfigError> {
    let (source, value) = secrets::resolve(cx.url, cx.base).map_err(|e| err(cx.at("url"), e))?;
    let url = value.expose().trim().to_owned();
    if source == SecretSource::Literal && redact_password(&url) != url {
        warnings.push(format!(
            "{} is a literal in the config file and holds a password; use env: or file: outside development",
            cx.at("url")
        ));
    }
    Ok((source, url))
}

/// The `url` line of `config check`: the redacted URL, and its source when it is not a literal.
pub(super) fn render_url_secret(url: &str, source: &SecretSource) -> String {
    match source {
        SecretSource::Literal => format!("url = \"{}\"", redact_password(url)),
        other => format!("# url from {other}: {}", redact_password(url)),
    }
}
