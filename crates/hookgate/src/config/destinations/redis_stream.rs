//! `kind = "redis_stream"`: an `XADD` to a Redis stream, trimmed with `MAXLEN ~`.

use std::fmt::Write;

use hookgate_relay::redis_stream::{RedisStreamSettings, check_max_len, check_url};
use hookgate_relay::subject::SubjectTemplate;
use serde::Deserialize;

use super::broker_url::{render_url_secret, resolve_url_secret};
use super::{DestinationKind, KindContext};
use crate::config::policies::{RawRate, RawRetry};
use crate::config::{ConfigError, err};
use crate::secrets::SecretSource;

/// `[[destinations]]` with `kind = "redis_stream"`, as written. The keys every kind has come
/// first (repeated in each kind: `deny_unknown_fields` does not combine with `flatten`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedisStreamDestination {
    pub id: String,
    /// A secret source (`env:`, `file:` or the `redis://` URL itself): it may hold a password.
    pub url: Option<String>,
    pub timeout_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<RawRate>,
    pub retry: Option<RawRetry>,
    pub stream: Option<String>,
    pub max_len: Option<u64>,
}

impl RawRedisStreamDestination {
    pub(super) fn resolve(
        self,
        cx: &KindContext<'_>,
        warnings: &mut Vec<String>,
    ) -> Result<DestinationKind, ConfigError> {
        let (url_source, url) = resolve_url_secret(cx, warnings)?;
        check_url(&url).map_err(|e| err(cx.at("url"), e))?;
        let stream = SubjectTemplate::parse(
            &self
                .stream
                .ok_or_else(|| err(cx.at("stream"), "is required for kind = \"redis_stream\""))?,
        )
        .map_err(|e| err(cx.at("stream"), e))?;
        // No default: how much a lagging consumer may miss is the operator's decision.
        let max_len = self.max_len.ok_or_else(|| {
            err(
                cx.at("max_len"),
                "is required for kind = \"redis_stream\" (entries kept: XADD … MAXLEN ~ max_len)",
            )
        })?;
        check_max_len(max_len).map_err(|e| err(cx.at("max_len"), e))?;
        Ok(DestinationKind::RedisStream {
            settings: RedisStreamSettings {
                id: cx.id.to_owned(),
                url,
                stream,
                max_len,
                timeout: cx.timeout,
            },
            url_source,
        })
    }
}

/// This kind's lines of `config check`: the URL's password redacted.
pub(super) fn render(s: &RedisStreamSettings, url_source: &SecretSource, out: &mut String) {
    let _ = writeln!(
        out,
        "kind = \"redis_stream\"\n{}\n# stream key pattern: {}\nmax_len = {}",
        render_url_secret(&s.url, url_source),
        s.stream.filter(),
        s.max_len
    );
}
