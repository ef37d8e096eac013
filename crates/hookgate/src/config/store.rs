//! `[store]`: the URL (as written, or from `env:` / `file:`), what the store would refuse about
//! it checked at load (so `config check` and SIGHUP say it too), and the one way its password
//! is hidden wherever a URL is shown ([`redact_url`]).

use std::path::Path;
use std::time::Duration;

use hookgate_store::GroupCommitOptions;

use super::resolve::positive;
use super::{ConfigError, StoreConfig, err, raw};
use crate::secrets::SecretSource;

pub(super) fn resolve_store(
    raw: &raw::RawStore,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<StoreConfig, ConfigError> {
    let (url_source, store_url) = resolve_store_url(raw.url.trim(), base)?;
    if !(store_url.starts_with("sqlite://")
        || store_url.starts_with("postgres://")
        || store_url.starts_with("postgresql://"))
    {
        return Err(err("store.url", "must start with sqlite:// or postgres://"));
    }
    let defaults = GroupCommitOptions::default();
    check_store_url(&store_url)?;
    let store = StoreConfig {
        url: store_url,
        url_source,
        group_commit: GroupCommitOptions {
            enabled: raw.group_commit.unwrap_or(true),
            max_batch: positive(raw.max_batch, defaults.max_batch, "store.max_batch")?,
            queue_capacity: positive(
                raw.queue_capacity,
                defaults.queue_capacity,
                "store.queue_capacity",
            )?,
            max_queue_wait: Duration::from_millis(positive(
                raw.max_queue_wait_ms.map(|v| v as usize),
                defaults.max_queue_wait.as_millis() as usize,
                "store.max_queue_wait_ms",
            )? as u64),
        },
        pool_size: positive(raw.pool_size, 16, "store.pool_size")?,
        startup_wait: Duration::from_secs(startup_wait_seconds(raw.startup_wait_seconds)?),
    };
    if !store.group_commit.enabled {
        warnings.push(
            "store.group_commit = false: one transaction per request (for measurement only)".into(),
        );
    }
    Ok(store)
}

/// How long a starting gateway waits for an unreachable store by default: long enough for a
/// database started beside it (a compose file, a restarting pod) to come up.
const DEFAULT_STARTUP_WAIT_SECONDS: u64 = 30;

/// Beyond an hour a gateway that cannot reach its store should fail and be seen failing.
const MAX_STARTUP_WAIT_SECONDS: u64 = 3_600;

fn startup_wait_seconds(written: Option<u64>) -> Result<u64, ConfigError> {
    match written {
        None => Ok(DEFAULT_STARTUP_WAIT_SECONDS),
        Some(s) if s <= MAX_STARTUP_WAIT_SECONDS => Ok(s),
        Some(_) => Err(err(
            "store.startup_wait_seconds",
            format!("must be at most {MAX_STARTUP_WAIT_SECONDS}"),
        )),
    }
}

/// `store.url` as written, or read from `env:NAME` / `file:PATH` so that the password is not in
/// the TOML. Errors name the source, never the URL.
fn resolve_store_url(
    written: &str,
    base: &Path,
) -> Result<(Option<SecretSource>, String), ConfigError> {
    if !(written.starts_with("env:") || written.starts_with("file:")) {
        return Ok((None, written.to_owned()));
    }
    let (source, value) =
        crate::secrets::resolve(written, base).map_err(|e| err("store.url", e))?;
    Ok((Some(source), value.expose().trim().to_owned()))
}

/// What the store would refuse at open, refused at load (so `config check` and SIGHUP say it
/// too): a PostgreSQL URL's `sslmode` / `sslrootcert`. Messages never quote the URL.
fn check_store_url(url: &str) -> Result<(), ConfigError> {
    if url.starts_with("sqlite://") {
        return Ok(());
    }
    hookgate_store::postgres::PostgresStore::tls_settings(url)
        .map(|_| ())
        .map_err(|e| err("store.url", e))
}

/// Hides a password in a database URL.
pub fn redact_url(url: &str) -> String {
    const HIDDEN: &str = "<redacted>";
    let Some(scheme_end) = url.find("://") else {
        // `key=value` form: hide the value of `password=` (quoted values included).
        return redact_key_value_password(url);
    };
    let (before_query, query) = match url[scheme_end..].find('?') {
        Some(q) => url.split_at(scheme_end + q),
        None => (url, ""),
    };
    let mut out = match before_query.rfind('@') {
        Some(at) if at > scheme_end => {
            let userinfo = &before_query[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!(
                    "{}://{user}:{HIDDEN}{}",
                    &before_query[..scheme_end],
                    &before_query[at..]
                ),
                None => before_query.to_owned(),
            }
        }
        _ => before_query.to_owned(),
    };
    if let Some(query) = query.strip_prefix('?') {
        let params: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                    format!("{key}={HIDDEN}")
                }
                _ => kv.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// `host=h password='p w' dbname=d` → `host=h password=<redacted> dbname=d` (libpq allows
/// spaces around `=` and quoted values with `\'` escapes).
fn redact_key_value_password(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((key_end, value_start)) = find_password_value(rest) {
        out.push_str(&rest[..key_end]);
        out.push_str("=<redacted>");
        let value = &rest[value_start..];
        let value_len = if let Some(quoted) = value.strip_prefix('\'') {
            // A quoted value ends at the first quote not escaped by a backslash.
            let mut escaped = false;
            quoted
                .char_indices()
                .find(|&(_, c)| {
                    let end = c == '\'' && !escaped;
                    escaped = c == '\\' && !escaped;
                    end
                })
                .map_or(value.len(), |(i, _)| i + 2)
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        rest = &value[value_len..];
    }
    out.push_str(rest);
    out
}

/// The end of a `password` key (at the start or after whitespace, any case) that is followed
/// by `=`, and where its value starts.
fn find_password_value(text: &str) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("password") {
        let at = from + i;
        let key_end = at + "password".len();
        let boundary = lower[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after_key = &text[key_end..];
        let trimmed = after_key.trim_start();
        if boundary && let Some(value) = trimmed.strip_prefix('=') {
            let value_start = text.len() - value.trim_start().len();
            return Some((key_end, value_start));
        }
        from = key_end;
    }
    None
}
