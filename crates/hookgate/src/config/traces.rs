//! `[tracing]`: OpenTelemetry traces exported over OTLP/HTTP (docs/tracing.md). Absent = off:
//! no exporter, no span is even created. Raw keys, resolution with errors naming the key, and
//! `config check`'s lines (header values redacted).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, err};
use crate::secrets::{self, SecretSource, SecretString};

pub const DEFAULT_SERVICE_NAME: &str = "hookgate";
pub const DEFAULT_EXPORT_INTERVAL_MS: u64 = 5_000;
pub const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_MAX_QUEUE_SIZE: usize = 2_048;
/// The OTLP/HTTP path of traces under the collector's base URL.
pub const TRACES_PATH: &str = "/v1/traces";

/// `[tracing]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTracing {
    /// The collector's base URL (`http://127.0.0.1:4318`); spans are POSTed to `/v1/traces`.
    pub otlp_endpoint: String,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
    /// Headers of every export request (collector auth); values are secret references.
    pub headers: Option<BTreeMap<String, String>>,
    pub export_interval_ms: Option<u64>,
    pub export_timeout_ms: Option<u64>,
    pub max_queue_size: Option<usize>,
}

/// One export header: its name, its value as read, and where the value came from.
#[derive(Debug, Clone)]
pub struct ExportHeader {
    pub name: String,
    pub value: SecretString,
    pub source: SecretSource,
}

/// `[tracing]` resolved.
#[derive(Debug, Clone)]
pub struct TracingConfig {
    /// Where spans are POSTed: the base URL with [`TRACES_PATH`].
    pub traces_url: url::Url,
    pub service_name: String,
    /// Fraction of new traces kept (a trace's spans are all kept or all dropped).
    pub sample_ratio: f64,
    pub headers: Vec<ExportHeader>,
    /// How often buffered spans are sent.
    pub export_interval: Duration,
    /// How long one export request may take.
    pub export_timeout: Duration,
    /// Ended spans buffered for export; past it, new ones are dropped (never waited for).
    pub max_queue_size: usize,
}

/// Headers the exporter sets itself.
fn reserved_header(lower: &str) -> bool {
    matches!(lower, "content-type" | "content-length" | "host")
}

pub(super) fn resolve_tracing(
    raw: Option<RawTracing>,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<TracingConfig>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    if !cfg!(feature = "otlp") {
        return Err(err(
            "tracing",
            "this build has no OTLP exporter (cargo feature `otlp`): remove [tracing] or use a build with it",
        ));
    }
    let endpoint: url::Url = raw.otlp_endpoint.parse().map_err(|_| {
        err(
            "tracing.otlp_endpoint",
            "must be an absolute http:// or https:// URL, e.g. http://127.0.0.1:4318",
        )
    })?;
    if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host().is_none() {
        return Err(err(
            "tracing.otlp_endpoint",
            "must be an absolute http:// or https:// URL, e.g. http://127.0.0.1:4318",
        ));
    }
    if !endpoint.username().is_empty() || endpoint.password().is_some() {
        return Err(err(
            "tracing.otlp_endpoint",
            "must not carry credentials: put them in tracing.headers (secret references)",
        ));
    }
    if endpoint.query().is_some() || endpoint.fragment().is_some() {
        return Err(err(
            "tracing.otlp_endpoint",
            "is the collector's base URL: no query or fragment (/v1/traces is appended)",
        ));
    }
    let mut traces_url = endpoint.clone();
    traces_url.set_path(&format!(
        "{}{TRACES_PATH}",
        endpoint.path().trim_end_matches('/')
    ));

    let service_name = raw
        .service_name
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.into());
    if service_name.is_empty()
        || service_name.len() > 255
        || service_name.chars().any(char::is_control)
    {
        return Err(err(
            "tracing.service_name",
            "must be 1 to 255 characters without control characters",
        ));
    }
    let sample_ratio = raw.sample_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(err("tracing.sample_ratio", "must be between 0.0 and 1.0"));
    }

    let mut headers = Vec::new();
    for (name, reference) in raw.headers.iter().flatten() {
        let key = format!("tracing.headers.{name}");
        let lower = name.to_ascii_lowercase();
        if reserved_header(&lower) {
            return Err(err(key, "is set by the exporter and cannot be overridden"));
        }
        if http::HeaderName::from_bytes(lower.as_bytes()).is_err() {
            return Err(err(key, "is not a valid header name"));
        }
        let (source, value) = secrets::resolve(reference, base).map_err(|e| err(&key, e))?;
        if http::HeaderValue::from_str(value.expose()).is_err() {
            return Err(err(&key, "is not a valid header value"));
        }
        if source == SecretSource::Literal {
            warnings.push(format!(
                "{key} is a literal in the config file; use env: or file: outside development"
            ));
        }
        headers.push(ExportHeader {
            name: lower,
            value,
            source,
        });
    }
    let loopback = match endpoint.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if !headers.is_empty() && endpoint.scheme() == "http" && !loopback {
        warnings.push(
            "tracing.headers are sent over plain http:// to a non-loopback collector: use https://"
                .into(),
        );
    }

    let interval = raw.export_interval_ms.unwrap_or(DEFAULT_EXPORT_INTERVAL_MS);
    if !(50..=60_000).contains(&interval) {
        return Err(err("tracing.export_interval_ms", "must be 50 to 60000"));
    }
    let timeout = raw.export_timeout_ms.unwrap_or(DEFAULT_EXPORT_TIMEOUT_MS);
    if !(100..=60_000).contains(&timeout) {
        return Err(err("tracing.export_timeout_ms", "must be 100 to 60000"));
    }
    let max_queue_size = raw.max_queue_size.unwrap_or(DEFAULT_MAX_QUEUE_SIZE);
    if !(64..=1_000_000).contains(&max_queue_size) {
        return Err(err("tracing.max_queue_size", "must be 64 to 1000000"));
    }
    Ok(Some(TracingConfig {
        traces_url,
        service_name,
        sample_ratio,
        headers,
        export_interval: Duration::from_millis(interval),
        export_timeout: Duration::from_millis(timeout),
        max_queue_size,
    }))
}

pub(super) fn render(c: &super::Config, out: &mut String) {
    let Some(t) = &c.tracing else {
        let _ = writeln!(out, "\n# [tracing] not configured: no traces are exported");
        return;
    };
    let _ = writeln!(
        out,
        "\n[tracing]\n# spans are POSTed to {}\notlp_endpoint = {:?}\nservice_name = {:?}\nsample_ratio = {}\nexport_interval_ms = {}\nexport_timeout_ms = {}\nmax_queue_size = {}",
        t.traces_url,
        t.traces_url
            .as_str()
            .strip_suffix(TRACES_PATH)
            .unwrap_or(t.traces_url.as_str()),
        t.service_name,
        t.sample_ratio,
        t.export_interval.as_millis(),
        t.export_timeout.as_millis(),
        t.max_queue_size
    );
    for h in &t.headers {
        let _ = writeln!(out, "# header {:?} from {} (redacted)", h.name, h.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(endpoint: &str) -> RawTracing {
        RawTracing {
            otlp_endpoint: endpoint.into(),
            service_name: None,
            sample_ratio: None,
            headers: None,
            export_interval_ms: None,
            export_timeout_ms: None,
            max_queue_size: None,
        }
    }

    fn resolve(raw: RawTracing) -> Result<Option<TracingConfig>, ConfigError> {
        resolve_tracing(Some(raw), Path::new("."), &mut Vec::new())
    }

    #[test]
    fn absent_table_is_off() {
        assert!(
            resolve_tracing(None, Path::new("."), &mut Vec::new())
                .unwrap()
                .is_none()
        );
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn defaults_and_the_traces_path() {
        let t = resolve(raw("http://127.0.0.1:4318")).unwrap().unwrap();
        assert_eq!(t.traces_url.as_str(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(t.service_name, "hookgate");
        assert!((t.sample_ratio - 1.0).abs() < f64::EPSILON);
        assert_eq!(t.export_interval, Duration::from_secs(5));
        let t = resolve(raw("https://collector.example/otlp/"))
            .unwrap()
            .unwrap();
        assert_eq!(
            t.traces_url.as_str(),
            "https://collector.example/otlp/v1/traces"
        );
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn bad_values_name_their_key() {
        let cases: Vec<(RawTracing, &str)> = vec![
            (raw("ftp://127.0.0.1:4318"), "tracing.otlp_endpoint"),
            (raw("not a url"), "tracing.otlp_endpoint"),
            (
                raw("http://user:pw@127.0.0.1:4318"),
                "tracing.otlp_endpoint",
            ),
            (raw("http://127.0.0.1:4318/?x=1"), "tracing.otlp_endpoint"),
            (
                RawTracing {
                    sample_ratio: Some(1.5),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.sample_ratio",
            ),
            (
                RawTracing {
                    sample_ratio: Some(f64::NAN),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.sample_ratio",
            ),
            (
                RawTracing {
                    service_name: Some(String::new()),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.service_name",
            ),
            (
                RawTracing {
                    headers: Some(BTreeMap::from([("content-type".into(), "x".into())])),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.headers.content-type",
            ),
            (
                RawTracing {
                    headers: Some(BTreeMap::from([(
                        "authorization".into(),
                        "env:HOOKGATE_TEST_UNSET_OTLP_TOKEN".into(),
                    )])),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.headers.authorization",
            ),
            (
                RawTracing {
                    max_queue_size: Some(1),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.max_queue_size",
            ),
            (
                RawTracing {
                    export_interval_ms: Some(0),
                    ..raw("http://127.0.0.1:4318")
                },
                "tracing.export_interval_ms",
            ),
        ];
        for (raw, key) in cases {
            assert_eq!(resolve(raw).unwrap_err().key, key);
        }
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn header_values_are_read_from_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "Bearer s3cr3t-otlp\n").unwrap();
        std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let mut warnings = Vec::new();
        let t = resolve_tracing(
            Some(RawTracing {
                headers: Some(BTreeMap::from([(
                    "Authorization".into(),
                    "file:token".into(),
                )])),
                ..raw("https://collector.example")
            }),
            dir.path(),
            &mut warnings,
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.headers[0].name, "authorization");
        assert_eq!(t.headers[0].value.expose(), "Bearer s3cr3t-otlp");
        assert!(warnings.is_empty(), "{warnings:?}");
        let mut warnings = Vec::new();
        resolve_tracing(
            Some(RawTracing {
                headers: Some(BTreeMap::from([("x-token".into(), "file:token".into())])),
                ..raw("http://collector.example:4318")
            }),
            dir.path(),
            &mut warnings,
        )
        .unwrap();
        assert!(
            warnings.iter().any(|w| w.contains("plain http://")),
            "{warnings:?}"
        );
    }
}
