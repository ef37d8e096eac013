//! `[reconcile]`: the internal reconciliation job (the `reconcile` stage and `hookgate
//! reconcile`), and an endpoint's `reconcile = { … }` (provider reconciliation through the
//! provider's API, where its pack says how): raw keys, resolution with errors naming the key,
//! and `config check`'s lines.

use std::fmt::Write;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use hookgate_providers::pack::{Pack, ReconcileApi};
use serde::Deserialize;

use super::{ConfigError, err};
use crate::secrets::{self, SecretSource, SecretString};

pub const DEFAULT_PROVIDER_RECONCILE_INTERVAL_SECONDS: u64 = 600;

/// An endpoint's `reconcile = { api_key, api_base, interval_seconds, hook, undelivered_only }`
/// as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpointReconcile {
    pub api_key: String,
    pub api_base: Option<String>,
    pub interval_seconds: Option<u64>,
    pub hook: Option<String>,
    pub undelivered_only: Option<bool>,
}

/// An endpoint's provider reconciliation, resolved.
#[derive(Debug, Clone)]
pub struct EndpointReconcile {
    /// The pack's API (`reconcile.api` in the pack).
    pub api: ReconcileApi,
    /// How far back the API lists: a first run without a checkpoint or `--since` looks back
    /// this far.
    pub horizon: Duration,
    /// Without a trailing slash, e.g. `https://api.stripe.com`.
    pub api_base: String,
    pub api_key: SecretString,
    pub api_key_source: SecretSource,
    /// Time between two scheduled runs of this endpoint (also the least time between two
    /// scheduled runs, whichever instance makes them).
    pub interval: Duration,
    /// GitHub: `repos/{owner}/{repo}/hooks/{id}` or `orgs/{org}/hooks/{id}`.
    pub hook: Option<String>,
    /// Stripe: list only events not yet delivered to every webhook endpoint
    /// (`delivery_success=false`). An event this endpoint never stored is among them.
    pub undelivered_only: bool,
}

/// Whether `host` is an address on this machine or a private network (allowed for
/// `api_base` only, with a warning).
fn private_or_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00 || v6.is_unicast_link_local()
        }
    }
}

fn host_ip(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// A GitHub account (user or organisation) name: letters, digits and single hyphens, not at
/// either end, at most 39 characters.
fn valid_account(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 39
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// A GitHub repository name: letters, digits, `-`, `_` and `.`, at most 100, not `.` or `..`.
fn valid_repository(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s != "."
        && s != ".."
}

/// `repos/{owner}/{repo}/hooks/{id}` or `orgs/{org}/hooks/{id}`: GitHub's names, a numeric id
/// (no leading zero), nothing else — the hook becomes part of the URL the key is sent to.
fn valid_hook(hook: &str) -> bool {
    let parts: Vec<&str> = hook.split('/').collect();
    let id_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 19
            && s.bytes().all(|b| b.is_ascii_digit())
            && !s.starts_with('0')
    };
    match parts.as_slice() {
        ["repos", owner, repo, "hooks", id] => {
            valid_account(owner) && valid_repository(repo) && id_ok(id)
        }
        ["orgs", org, "hooks", id] => valid_account(org) && id_ok(id),
        _ => false,
    }
}

pub(super) fn resolve_endpoint_reconcile(
    raw: Option<RawEndpointReconcile>,
    endpoint_id: &str,
    at: &dyn Fn(&str) -> String,
    pack: &Pack,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<EndpointReconcile>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let Some(rule) = pack.reconcile() else {
        return Err(err(
            at("reconcile"),
            format!(
                "provider {} has no API reconciliation in its pack (`reconcile`)",
                pack.id()
            ),
        ));
    };
    let api_base = raw
        .api_base
        .as_deref()
        .unwrap_or(rule.api.default_api_base())
        .trim()
        .trim_end_matches('/')
        .to_owned();
    let url = url::Url::parse(&api_base)
        .ok()
        // Credentials in the URL would be sent (and printed) beside the key: refused.
        .filter(|u| {
            u.host().is_some()
                && u.query().is_none()
                && u.fragment().is_none()
                && u.username().is_empty()
                && u.password().is_none()
        })
        .ok_or_else(|| {
            err(
                at("reconcile.api_base"),
                format!(
                    "must be an https URL without credentials or query, e.g. {}",
                    rule.api.default_api_base()
                ),
            )
        })?;
    let ip = host_ip(&url);
    match url.scheme() {
        "https" => {
            if ip.is_some_and(private_or_loopback) {
                warnings.push(format!(
                    "{} is a private or loopback address",
                    at("reconcile.api_base")
                ));
            }
        }
        "http" if ip.is_some_and(|ip| ip.is_loopback()) => warnings.push(format!(
            "{} is plain http on a loopback address (tests only)",
            at("reconcile.api_base")
        )),
        _ => {
            return Err(err(
                at("reconcile.api_base"),
                "must use https (http only on a loopback address)",
            ));
        }
    }
    let (api_key_source, api_key) =
        secrets::resolve(&raw.api_key, base).map_err(|e| err(at("reconcile.api_key"), e))?;
    if api_key_source == SecretSource::Literal {
        warnings.push(format!(
            "{} is a literal in the config file; use env: or file: outside development",
            at("reconcile.api_key")
        ));
    }
    let interval = raw
        .interval_seconds
        .unwrap_or(DEFAULT_PROVIDER_RECONCILE_INTERVAL_SECONDS);
    if !(10..=86_400).contains(&interval) {
        return Err(err(at("reconcile.interval_seconds"), "must be 10 to 86400"));
    }
    let hook = match (rule.api.needs_hook(), raw.hook) {
        (true, Some(hook)) if valid_hook(&hook) => Some(hook),
        (true, Some(_)) => {
            return Err(err(
                at("reconcile.hook"),
                format!(
                    "endpoint {endpoint_id:?}: must be repos/{{owner}}/{{repo}}/hooks/{{id}} or \
                     orgs/{{org}}/hooks/{{id}} (GitHub's owner, repository and organisation \
                     names; a numeric hook id)"
                ),
            ));
        }
        (true, None) => {
            return Err(err(
                at("reconcile.hook"),
                format!(
                    "endpoint {endpoint_id:?}: provider {} reconciles one hook's deliveries: set \
                     hook = \"repos/{{owner}}/{{repo}}/hooks/{{id}}\" or \"orgs/{{org}}/hooks/{{id}}\"",
                    pack.id()
                ),
            ));
        }
        (false, Some(_)) => {
            return Err(err(
                at("reconcile.hook"),
                format!(
                    "endpoint {endpoint_id:?}: provider {}'s reconciliation ({}) has no hook to \
                     name; remove it",
                    pack.id(),
                    rule.api.as_str()
                ),
            ));
        }
        (false, None) => None,
    };
    let undelivered_only = raw.undelivered_only.unwrap_or(false);
    if undelivered_only && rule.api != ReconcileApi::StripeEvents {
        return Err(err(
            at("reconcile.undelivered_only"),
            format!(
                "endpoint {endpoint_id:?}: only Stripe's event listing filters by delivery; \
                 provider {}'s reconciliation ({}) has no such filter",
                pack.id(),
                rule.api.as_str()
            ),
        ));
    }
    Ok(Some(EndpointReconcile {
        api: rule.api,
        horizon: Duration::from_secs(rule.horizon_seconds),
        api_base,
        api_key,
        api_key_source,
        interval: Duration::from_secs(interval),
        hook,
        undelivered_only,
    }))
}

pub const DEFAULT_RECONCILE_INTERVAL_SECONDS: u64 = 300;
pub const DEFAULT_RECONCILE_LOOKBACK_HOURS: u64 = 24;
pub const DEFAULT_RECONCILE_BATCH: u32 = 500;
pub const DEFAULT_FINDINGS_RETENTION_DAYS: u64 = 30;

/// `[reconcile]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReconcile {
    pub enabled: Option<bool>,
    pub interval_seconds: Option<u64>,
    pub grace_seconds: Option<u64>,
    pub lookback_hours: Option<u64>,
    pub batch_size: Option<u32>,
    pub findings_retention_days: Option<u64>,
}

/// `[reconcile]` resolved.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// Whether the `reconcile` stage runs on its own schedule (runs by hand and through the
    /// operator API work either way).
    pub enabled: bool,
    /// Time between two scheduled runs.
    pub interval: Duration,
    /// How far past its due time (or past its lease's end) a row must be to be a finding, so
    /// a busy worker pool or relay is not one. Default: `[worker] lease_seconds`.
    pub grace: Duration,
    /// Without `--since`, `missing_outbox` looks at events received this long ago or later.
    pub lookback: Duration,
    /// Rows one scan reads (and findings one transaction records).
    pub batch_size: u32,
    /// Findings older than this are removed.
    pub findings_retention: Duration,
}

pub(super) fn resolve_reconcile(
    raw: Option<RawReconcile>,
    worker_lease: Duration,
) -> Result<ReconcileConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let interval = raw
        .interval_seconds
        .unwrap_or(DEFAULT_RECONCILE_INTERVAL_SECONDS);
    if !(1..=86_400).contains(&interval) {
        return Err(err("reconcile.interval_seconds", "must be 1 to 86400"));
    }
    let grace = raw.grace_seconds.unwrap_or(worker_lease.as_secs());
    if !(1..=86_400).contains(&grace) {
        return Err(err("reconcile.grace_seconds", "must be 1 to 86400"));
    }
    let lookback = raw
        .lookback_hours
        .unwrap_or(DEFAULT_RECONCILE_LOOKBACK_HOURS);
    if !(1..=24 * 365).contains(&lookback) {
        return Err(err("reconcile.lookback_hours", "must be 1 to 8760"));
    }
    let batch = raw.batch_size.unwrap_or(DEFAULT_RECONCILE_BATCH);
    if !(1..=5_000).contains(&batch) {
        return Err(err("reconcile.batch_size", "must be 1 to 5000"));
    }
    let keep = raw
        .findings_retention_days
        .unwrap_or(DEFAULT_FINDINGS_RETENTION_DAYS);
    if !(1..=3_650).contains(&keep) {
        return Err(err(
            "reconcile.findings_retention_days",
            "must be 1 to 3650",
        ));
    }
    Ok(ReconcileConfig {
        enabled: raw.enabled.unwrap_or(true),
        interval: Duration::from_secs(interval),
        grace: Duration::from_secs(grace),
        lookback: Duration::from_secs(lookback * 3600),
        batch_size: batch,
        findings_retention: Duration::from_secs(keep * 86_400),
    })
}

/// An endpoint's `reconcile = { … }` as `config check` prints it: the key only by its source.
pub(super) fn render_endpoint(out: &mut String, rc: &EndpointReconcile) {
    let mut extra = rc
        .hook
        .as_deref()
        .map(|h| format!(", hook = {h:?}"))
        .unwrap_or_default();
    if rc.undelivered_only {
        extra.push_str(", undelivered_only = true");
    }
    let _ = writeln!(
        out,
        "reconcile = {{ api_base = {:?}, interval_seconds = {}{extra} }}\n\
         # reconcile: {} API, first run looks back {} s; api_key from {} (redacted)",
        rc.api_base,
        rc.interval.as_secs(),
        rc.api.as_str(),
        rc.horizon.as_secs(),
        rc.api_key_source
    );
}

pub(super) fn render(c: &super::Config, out: &mut String) {
    let r = &c.reconcile;
    let _ = writeln!(
        out,
        "\n[reconcile]\nenabled = {}\ninterval_seconds = {}\ngrace_seconds = {}\n\
         lookback_hours = {}\nbatch_size = {}\nfindings_retention_days = {}",
        r.enabled,
        r.interval.as_secs(),
        r.grace.as_secs(),
        r.lookback.as_secs() / 3600,
        r.batch_size,
        r.findings_retention.as_secs() / 86_400
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_repository_or_organisation_hooks() {
        for ok in [
            "repos/octo/hello-world/hooks/12345",
            "repos/octo-cat/my_repo.rs/hooks/9",
            "orgs/octo/hooks/1",
        ] {
            assert!(valid_hook(ok), "{ok}");
        }
        for bad in [
            "repos/octo/hooks/1",
            "repos/octo/x/hooks/abc",
            "repos/octo/x/hooks/01",
            "repos/octo/x/hooks/",
            "repos/octo/../hooks/1",
            "repos/octo_cat/x/hooks/1",
            "repos/-octo/x/hooks/1",
            "repos/octo/x y/hooks/1",
            "orgs/../hooks/1",
            "orgs/o.o/hooks/1",
            "orgs/o/hooks/1/deliveries",
            "/orgs/o/hooks/1",
            "orgs/o/hooks/1/",
            "users/o/hooks/1",
            "orgs/o%2F/hooks/1",
            "orgs/o/hooks/1?x=1",
        ] {
            assert!(!valid_hook(bad), "{bad}");
        }
    }

    #[test]
    fn only_private_and_loopback_addresses_are_flagged() {
        for ip in ["127.0.0.1", "10.1.2.3", "192.168.0.1", "::1", "fd00::1"] {
            assert!(private_or_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "2606:4700::1111"] {
            assert!(!private_or_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn defaults_follow_the_worker_lease_and_refusals_name_the_key() {
        let r = resolve_reconcile(None, Duration::from_secs(45)).unwrap();
        assert!(r.enabled);
        assert_eq!(r.interval, Duration::from_secs(300));
        assert_eq!(r.grace, Duration::from_secs(45), "the lease length");
        assert_eq!(r.lookback, Duration::from_secs(24 * 3600));
        for (raw, key) in [
            (
                RawReconcile {
                    interval_seconds: Some(0),
                    ..Default::default()
                },
                "reconcile.interval_seconds",
            ),
            (
                RawReconcile {
                    batch_size: Some(0),
                    ..Default::default()
                },
                "reconcile.batch_size",
            ),
            (
                RawReconcile {
                    grace_seconds: Some(0),
                    ..Default::default()
                },
                "reconcile.grace_seconds",
            ),
        ] {
            let e = resolve_reconcile(Some(raw), Duration::from_secs(30)).unwrap_err();
            assert_eq!(e.key, key);
        }
    }
}
