//! The render phase: the resolved configuration printed back as TOML-like text, every secret
//! redacted (`hookgate config check`). Each destination kind prints its own keys.

use std::fmt::Write;

use hookgate_core::retry::RetryPolicy;

use super::destinations::{DestinationConfig, RelayConfig};
use super::{Config, LogFormat, Rate, redact_url};

/// The resolved configuration as TOML-like text with secrets redacted (`config check`).
pub fn render_redacted(c: &Config) -> String {
    let mut out = String::new();
    let s = &c.server;
    let _ = writeln!(out, "[server]\nlisten = \"{}\"", s.listen);
    if let Some(t) = &s.tls {
        let _ = writeln!(
            out,
            "tls = {{ cert = \"{}\", key = \"{}\" }}",
            t.cert.display(),
            t.key.display()
        );
    }
    let proxies: Vec<String> = s
        .trusted_proxies
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect();
    let _ = writeln!(out, "trusted_proxies = [{}]", proxies.join(", "));
    let _ = writeln!(out, "max_in_flight = {}", s.max_in_flight);
    let _ = writeln!(out, "max_connections = {}", s.max_connections);
    if let Some(r) = s.per_client_rate {
        let _ = writeln!(
            out,
            "per_client_rate = {{ per_second = {}, burst = {} }}",
            r.per_second, r.burst
        );
    }
    let _ = writeln!(
        out,
        "max_header_count = {}\nmax_header_bytes = {}",
        s.max_header_count, s.max_header_bytes
    );
    let _ = writeln!(
        out,
        "request_timeout_ms = {}",
        s.request_timeout.as_millis()
    );
    let _ = writeln!(
        out,
        "max_body_readers = {}\nper_client_body_readers = {}\nmin_body_bytes_per_second = {}",
        s.max_body_readers, s.per_client_body_readers, s.min_body_bytes_per_second
    );
    if let Some(a) = c.admin_listen {
        super::admin::render(&mut out, a, &c.admin);
    }
    let st = &c.store;
    let _ = writeln!(out, "\n[store]\nurl = \"{}\"", redact_url(&st.url));
    if let Some(source) = &st.url_source {
        let _ = writeln!(out, "# url read from {source}");
    }
    if let Ok(tls) = hookgate_store::postgres::PostgresStore::tls_settings(&st.url)
        && !st.url.starts_with("sqlite://")
    {
        let origin = if tls.explicit {
            ""
        } else {
            " (default for these hosts)"
        };
        let _ = writeln!(out, "# sslmode = {}{origin}", tls.mode.as_str());
    }
    let _ = writeln!(
        out,
        "group_commit = {}\nmax_batch = {}\nqueue_capacity = {}\nmax_queue_wait_ms = {}\npool_size = {}\nstartup_wait_seconds = {}",
        st.group_commit.enabled,
        st.group_commit.max_batch,
        st.group_commit.queue_capacity,
        st.group_commit.max_queue_wait.as_millis(),
        st.pool_size,
        st.startup_wait.as_secs()
    );
    let _ = writeln!(
        out,
        "\n[payload_encryption]\nactive = {}\nreseal_interval_seconds = {}\nreseal_batch = {}",
        c.payload_keys.active,
        c.payload_keys.reseal_interval.as_secs(),
        c.payload_keys.reseal_batch
    );
    for (v, src, _) in &c.payload_keys.keys {
        let _ = writeln!(out, "# key version {v}: from {src} (32 bytes, redacted)");
    }
    match &c.payload_keys.replay_key_source {
        Some(src) => {
            let _ = writeln!(out, "# replay_key from {src} (32 bytes, redacted)");
        }
        None => {
            let _ = writeln!(
                out,
                "# replay_key: not set (derived from the lowest payload key version)"
            );
        }
    }
    let _ = writeln!(
        out,
        "\n[log]\nformat = \"{}\"\nlevel = \"{}\"",
        if c.log.format == LogFormat::Json {
            "json"
        } else {
            "text"
        },
        c.log.level
    );
    let _ = writeln!(
        out,
        "\n[worker]\nconcurrency = {}\nlease_seconds = {}\npoll_interval_ms = {}",
        c.worker.concurrency,
        c.worker.lease.as_secs(),
        c.worker.poll_interval.as_millis()
    );
    if let Some(s) = &c.providers.stripe {
        let _ = writeln!(
            out,
            "\n[providers.stripe]\napi_base = \"{}\"\n# api_key from {} (redacted)\ntimeout_ms = {}",
            s.api_base,
            s.api_key_source,
            s.timeout.as_millis()
        );
    }
    for p in &c.provider_packs {
        // The definition is in the file; `providers show ID --config` prints what it verifies.
        let _ = writeln!(
            out,
            "\n# user provider pack {:?} ({}, scheme {})",
            p.id(),
            p.display_name(),
            p.scheme().as_str()
        );
    }
    for e in &c.endpoints {
        let _ = writeln!(
            out,
            "\n[[endpoints]]\nid = \"{}\"\nprovider = \"{}\"",
            e.id,
            e.provider_id()
        );
        if let Some(url) = &e.public_url {
            let _ = writeln!(out, "public_url = {url:?}");
        }
        for name in e.pack.options().iter().map(|o| o.name) {
            if let Some(value) = e.options.get(name) {
                let _ = writeln!(out, "options.{name} = {value:?}");
            }
        }
        if let Some(ms) = e.replay_window_ms {
            let _ = writeln!(out, "replay_window_seconds = {}", ms / 1000);
        }
        let _ = writeln!(
            out,
            "idempotency_days = {}\n# payload kept {} days (retention.payload_days)",
            e.idempotency.days, c.retention.payload_days
        );
        match e.tolerance_seconds {
            Some(t) => {
                let _ = writeln!(out, "tolerance_seconds = {t}");
            }
            None => {
                let _ = writeln!(out, "# tolerance: provider signs no timestamp");
            }
        }
        let _ = writeln!(out, "max_body_bytes = {}", e.max_body_bytes);
        match &e.allowed_event_types {
            Some(t) => {
                let _ = writeln!(out, "allowed_event_types = {t:?}");
            }
            None => {
                let _ = writeln!(out, "# allowed_event_types: all");
            }
        }
        if let Some(v) = &e.api_versions {
            let _ = writeln!(out, "api_versions = {v:?}");
        }
        render_rate_and_retry(&mut out, e.rate_limit, &e.retry);
        let names: Vec<&str> = e.handlers.iter().map(|h| h.name()).collect();
        let _ = writeln!(out, "handlers = {names:?}");
        if !e.destinations.is_empty() {
            let _ = writeln!(out, "destinations = {:?}", e.destinations);
        }
        if let Some(p) = &e.object_id_pointer {
            let _ = writeln!(out, "object_id_pointer = {p:?}");
        }
        if let Some(p) = &e.object_version_pointer {
            let _ = writeln!(out, "object_version_pointer = {p:?}");
        }
        if let Some(s) = &e.sequence {
            super::sequence::render(&mut out, s);
        }
        if let Some(rc) = &e.reconcile {
            super::reconcile::render_endpoint(&mut out, rc);
        }
        for sv in &e.secrets {
            let mut state = String::new();
            if sv.retired {
                state.push_str(", retired = true");
            }
            let _ = write!(
                state,
                ", refresh_seconds = {}, max_age_seconds = {}",
                sv.refresh.as_secs(),
                sv.max_age.as_secs()
            );
            if let Some(t) = sv.not_after {
                let ts = jiff::Timestamp::from_second(t)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                let _ = write!(state, ", not_after = \"{ts}\"");
            }
            let _ = writeln!(
                out,
                "# secret version {:?} from {} (redacted){state}",
                sv.version, sv.source
            );
        }
    }
    render_relay(&c.relay, &c.destinations, &mut out);
    let _ = writeln!(
        out,
        "\n[secrets]\nexec_timeout_ms = {}",
        c.secrets.exec_timeout.as_millis()
    );
    if let Some(address) = &c.secrets.vault_address {
        let _ = writeln!(out, "\n[vault]\naddress = {address:?}\n# token redacted");
    }
    super::retention::render(c, &mut out);
    super::operations::render(c, &mut out);
    super::reconcile::render(c, &mut out);
    super::traces::render(c, &mut out);
    out
}

/// The `rate_limit` (when set) and `retry` lines shared by endpoints and destinations.
fn render_rate_and_retry(out: &mut String, rate: Option<Rate>, retry: &RetryPolicy) {
    if let Some(r) = rate {
        let _ = writeln!(
            out,
            "rate_limit = {{ per_second = {}, burst = {} }}",
            r.per_second, r.burst
        );
    }
    let _ = writeln!(
        out,
        "retry = {{ base_ms = {}, cap_ms = {}, max_attempts = {} }}",
        retry.base_ms, retry.cap_ms, retry.max_attempts
    );
}

/// `[relay]` and `[[destinations]]`: the keys every kind has around the kind's own.
fn render_relay(relay: &RelayConfig, destinations: &[DestinationConfig], out: &mut String) {
    let _ = writeln!(
        out,
        "\n[relay]\nenabled = {}\nlease_seconds = {}\npoll_interval_ms = {}",
        relay.enabled,
        relay.lease.as_secs(),
        relay.poll_interval.as_millis()
    );
    for d in destinations {
        let _ = writeln!(out, "\n[[destinations]]\nid = \"{}\"", d.id);
        d.kind.render(out);
        if let Some(filter) = &d.filter {
            filter.render(out);
        }
        if let Some(transform) = &d.transform {
            // A JSON string literal is a TOML basic string.
            let _ = writeln!(
                out,
                "transform = {}",
                serde_json::Value::from(transform.source())
            );
        }
        let _ = writeln!(
            out,
            "timeout_ms = {}\nconcurrency = {}",
            d.timeout.as_millis(),
            d.concurrency
        );
        render_rate_and_retry(out, d.rate_limit, &d.retry);
    }
}
