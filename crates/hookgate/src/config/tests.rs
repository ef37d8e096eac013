//! Table tests over [`Config::from_toml`]: valid files with their resolved values, and invalid
//! files with the exact error that names the bad key; plus the exact `config check` output.

use std::path::Path;
use std::time::Duration;

use super::destinations::DestinationKind;
use super::*;

const PAYLOAD_KEY: &str = "aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM=";
const SW_SECRET: &str = "whsec_aG9va2dhdGUtZGV2LXN0YW5kYXJkLXdlYmhvb2tzLXNlY3JldCEh";

/// The smallest valid file: the three required sections.
fn base() -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:8080\"\n\n[store]\nurl = \"sqlite://x.db\"\n\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n"
    )
}

/// `base()` with `from` replaced by `to` (which must occur).
fn base_with(from: &str, to: &str) -> String {
    let b = base();
    assert!(b.contains(from), "{from}");
    b.replacen(from, to, 1)
}

/// `base()` plus more sections.
fn plus(rest: &str) -> String {
    format!("{}\n{rest}", base())
}

fn github_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"gh\"\nprovider = \"github\"\n\
         secrets = [{{ version = \"v1\", value = \"gh-secret\" }}]\n{extra}"
    )
}

fn stripe_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\n\
         secrets = [{{ version = \"v1\", value = \"whsec_x\" }}]\n{extra}"
    )
}

fn sw_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"sw\"\nprovider = \"standard_webhooks\"\n\
         secrets = [{{ version = \"v1\", value = \"{SW_SECRET}\" }}]\n{extra}"
    )
}

fn adyen_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"ad\"\nprovider = \"adyen\"\n\
         secrets = [{{ version = \"v1\", value = \"44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056\" }}]\n{extra}"
    )
}

fn twilio_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"tw\"\nprovider = \"twilio\"\n\
         secrets = [{{ version = \"v1\", value = \"twilio-auth-token\" }}]\n{extra}"
    )
}

/// PayPal's (test) certificate from its vectors, as a TOML basic string's content.
fn paypal_cert() -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vectors/paypal.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"][0]["secrets"][0]
        .as_str()
        .unwrap()
        .replace('\n', "\\n")
}

fn paypal_endpoint(extra: &str) -> String {
    format!(
        "[[endpoints]]\nid = \"pp\"\nprovider = \"paypal\"\n\
         secrets = [{{ version = \"v1\", value = \"{}\" }}]\n{extra}",
        paypal_cert()
    )
}

fn http_destination(extra: &str) -> String {
    format!(
        "[[destinations]]\nid = \"svc\"\nkind = \"http\"\nurl = \"https://example.com/hook\"\n{extra}"
    )
}

fn nats_destination(extra: &str) -> String {
    format!(
        "[[destinations]]\nid = \"bus\"\nkind = \"nats\"\nurl = \"nats://127.0.0.1:4222\"\nstream = \"HOOKS\"\n{extra}"
    )
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(
        text,
        Path::new("/nonexistent/hookgate.toml"),
        Path::new("/nonexistent"),
    )
}

#[test]
fn config_defaults_of_the_smallest_file() {
    let c = load(&base()).unwrap();
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    assert!(c.server.tls.is_none());
    assert!(c.server.trusted_proxies.is_empty());
    assert_eq!(c.server.max_in_flight, 128);
    assert_eq!(c.server.max_connections, 4096);
    assert_eq!(c.server.per_client_rate, None);
    assert_eq!(c.server.max_header_count, 64);
    assert_eq!(c.server.max_header_bytes, 16 * 1024);
    assert_eq!(c.server.request_timeout, Duration::from_secs(10));
    assert_eq!(c.admin_listen, None);
    assert_eq!(c.store.url, "sqlite://x.db");
    assert!(c.store.group_commit.enabled);
    assert_eq!(c.store.group_commit.max_batch, 512);
    assert_eq!(c.store.group_commit.queue_capacity, 8192);
    assert_eq!(
        c.store.group_commit.max_queue_wait,
        Duration::from_millis(250)
    );
    assert_eq!(c.store.pool_size, 16);
    assert_eq!(c.store.startup_wait, Duration::from_secs(30));
    assert_eq!(c.payload_keys.active, 1);
    assert_eq!(c.payload_keys.keys.len(), 1);
    assert_eq!(c.log.format, LogFormat::Text);
    assert_eq!(c.log.level, "info");
    assert_eq!(c.worker.concurrency, 4);
    assert_eq!(c.worker.lease, Duration::from_secs(30));
    assert_eq!(c.worker.poll_interval, Duration::from_millis(200));
    assert!(c.providers.stripe.is_none());
    assert!(c.relay.enabled);
    assert_eq!(c.relay.lease, Duration::from_secs(60));
    assert_eq!(c.relay.poll_interval, Duration::from_millis(200));
    assert!(c.endpoints.is_empty());
    assert!(c.destinations.is_empty());
    assert_eq!(
        c.warnings,
        vec![
            "payload_encryption.keys[0].key is a literal in the config file; use env: or file: outside development",
            "payload_encryption.replay_key is not set: replay digests use a key derived from payload key version 1; set replay_key so that it stays stable when that key is removed",
            "no [[endpoints]] configured: every webhook will get 404",
        ]
    );
}

/// One valid file per case, with what it must resolve to.
#[test]
fn config_valid_files_resolve() {
    type Check = fn(&Config);
    let cases: Vec<(&str, String, Check)> = vec![
        (
            "server, every key",
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"0.0.0.0:8443\"\ntls = { cert = \"c.pem\", key = \"k.pem\" }\n\
                 trusted_proxies = [\"10.0.0.0/8\", \"192.168.1.1\"]\nmax_in_flight = 7\n\
                 max_connections = 9\nper_client_rate = { per_second = 5 }\nmax_header_count = 3\n\
                 max_header_bytes = 100\nrequest_timeout_ms = 1500\n",
            ),
            |c| {
                let s = &c.server;
                assert_eq!(s.listen.to_string(), "0.0.0.0:8443");
                let tls = s.tls.as_ref().unwrap();
                assert_eq!(tls.cert, Path::new("/nonexistent/c.pem"));
                assert_eq!(tls.key, Path::new("/nonexistent/k.pem"));
                let proxies: Vec<String> =
                    s.trusted_proxies.iter().map(|p| p.to_string()).collect();
                assert_eq!(proxies, ["10.0.0.0/8", "192.168.1.1/32"]);
                assert_eq!(s.max_in_flight, 7);
                assert_eq!(s.max_connections, 9);
                assert_eq!(
                    s.per_client_rate,
                    Some(Rate {
                        per_second: 5,
                        burst: 5
                    })
                );
                assert_eq!(s.max_header_count, 3);
                assert_eq!(s.max_header_bytes, 100);
                assert_eq!(s.request_timeout, Duration::from_millis(1500));
            },
        ),
        (
            "plain HTTP on a public address behind trusted proxies",
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"0.0.0.0:8080\"\ntrusted_proxies = [\"10.0.0.1\"]\n",
            ),
            |c| assert_eq!(c.server.listen.to_string(), "0.0.0.0:8080"),
        ),
        (
            "admin, store, log and worker",
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"  postgres://u:pw@db:5432/hooks?sslmode=require  \"\ngroup_commit = false\nmax_batch = 3\n\
                 queue_capacity = 4\nmax_queue_wait_ms = 5\npool_size = 6\n\n\
                 [admin]\nlisten = \"127.0.0.1:9090\"\n\n[log]\nformat = \"json\"\nlevel = \"debug\"\n\n\
                 [worker]\nconcurrency = 0\nlease_seconds = 86400\npoll_interval_ms = 60000\n",
            ),
            |c| {
                assert_eq!(c.admin_listen.unwrap().to_string(), "127.0.0.1:9090");
                assert_eq!(c.store.url, "postgres://u:pw@db:5432/hooks?sslmode=require");
                assert!(!c.store.group_commit.enabled);
                assert_eq!(c.store.group_commit.max_batch, 3);
                assert_eq!(c.store.group_commit.queue_capacity, 4);
                assert_eq!(
                    c.store.group_commit.max_queue_wait,
                    Duration::from_millis(5)
                );
                assert_eq!(c.store.pool_size, 6);
                assert_eq!(c.log.format, LogFormat::Json);
                assert_eq!(c.log.level, "debug");
                assert_eq!(c.worker.concurrency, 0);
                assert_eq!(c.worker.lease, Duration::from_secs(86400));
                assert_eq!(c.worker.poll_interval, Duration::from_secs(60));
                assert!(
                    c.warnings
                        .iter()
                        .any(|w| w.starts_with("store.group_commit = false"))
                );
            },
        ),
        (
            "payload keys: several versions, the active one not first",
            base_with("active = 1\n", "active = 2\n").replacen(
                "keys = [{",
                &format!("keys = [{{ version = 2, key = \"{PAYLOAD_KEY}\" }}, {{"),
                1,
            ),
            |c| {
                assert_eq!(c.payload_keys.active, 2);
                let versions: Vec<u32> = c.payload_keys.keys.iter().map(|k| k.0).collect();
                assert_eq!(versions, [2, 1]);
            },
        ),
        (
            "a short lease without handlers, whatever the Stripe timeout",
            plus(
                "[worker]\nlease_seconds = 2\n[providers.stripe]\napi_key = \"sk\"\ntimeout_ms = 120000\n",
            ),
            |c| assert_eq!(c.worker.lease, Duration::from_secs(2)),
        ),
        (
            "a handler timeout that fits in the lease with its margin",
            plus(
                "[worker]\nlease_seconds = 11\n[providers.stripe]\napi_key = \"sk\"\n\
                 [[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nsecrets = [{ version = \"v1\", value = \"whsec_x\" }]\n\
                 handlers = [\"payments_projection\"]\n",
            ),
            |c| assert_eq!(c.worker.lease, Duration::from_secs(11)),
        ),
        (
            "providers.stripe and a payments endpoint",
            plus(
                "[providers.stripe]\napi_base = \"https://stripe.test/\"\napi_key = \"sk_test\"\ntimeout_ms = 500\n\n\
                 [[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nhandlers = [\"payments_projection\"]\n\
                 allowed_event_types = [\"payment_intent.*\", \"charge.refunded\"]\n\
                 secrets = [{ version = \"v2\", value = \"whsec_new\" }, \
                 { version = \"v1\", value = \"whsec_old\", not_after = \"2026-12-07T00:00:00Z\", retired = true }]\n",
            ),
            |c| {
                let s = c.providers.stripe.as_ref().unwrap();
                assert_eq!(s.api_base, "https://stripe.test");
                assert_eq!(s.api_key.expose(), "sk_test");
                assert_eq!(s.timeout, Duration::from_millis(500));
                let e = c.endpoint("pay").unwrap();
                assert_eq!(e.provider_id(), "stripe");
                assert_eq!(e.tolerance_seconds, Some(300));
                assert_eq!(e.handlers, [HandlerKind::PaymentsProjection]);
                assert!(e.allows(Some("payment_intent.created")));
                assert!(e.allows(Some("charge.refunded")));
                assert!(!e.allows(Some("charge.captured")));
                assert!(!e.allows(None));
                assert_eq!(e.secrets.len(), 2);
                assert_eq!(e.secrets[0].version, "v2");
                assert!(e.secrets[0].trusted_at(i64::MAX));
                assert_eq!(e.secrets[1].not_after, Some(1_796_601_600));
                assert!(e.secrets[1].retired);
                assert!(!e.secrets[1].trusted_at(0));
            },
        ),
        (
            "an endpoint with every key",
            plus(&sw_endpoint(
                "tolerance_seconds = 60\nmax_body_bytes = 2048\nrate_limit = { per_second = 10, burst = 20 }\n\
                 retry = { base_ms = 50, max_attempts = 3 }\nobject_id_pointer = \"/data/id\"\n\
                 object_version_pointer = \"\"\n",
            )),
            |c| {
                let e = &c.endpoints[0];
                assert_eq!(e.id, "sw");
                assert_eq!(e.tolerance_seconds, Some(60));
                assert_eq!(e.max_body_bytes, 2048);
                assert_eq!(
                    e.rate_limit,
                    Some(Rate {
                        per_second: 10,
                        burst: 20
                    })
                );
                assert_eq!(e.retry.base_ms, 50);
                assert_eq!(e.retry.cap_ms, 300_000);
                assert_eq!(e.retry.max_attempts, 3);
                assert_eq!(e.object_id_pointer.as_deref(), Some("/data/id"));
                assert_eq!(e.object_version_pointer.as_deref(), Some(""));
                assert!(e.allows(None), "no allowed_event_types: everything");
            },
        ),
        (
            "endpoint defaults; a provider that signs no timestamp",
            plus(&github_endpoint("")),
            |c| {
                let e = &c.endpoints[0];
                assert_eq!(e.provider_id(), "github");
                assert_eq!(e.tolerance_seconds, None);
                assert_eq!(e.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
                assert_eq!(e.rate_limit, None);
                assert_eq!(e.retry, hookgate_core::retry::RetryPolicy::default());
                assert!(e.handlers.is_empty());
                assert!(e.destinations.is_empty());
            },
        ),
        (
            "a pack's public_url and options, byte for byte; replay windows",
            plus(&format!(
                "{}{}{}",
                twilio_endpoint("public_url = \"https://example.com:8443/sms?x=1\"\n"),
                paypal_endpoint("options = { webhook_id = \"WH-1\" }\n"),
                github_endpoint(
                    "replay_window_seconds = 3600\nobject_id_pointer = \"/repository/id\"\n"
                )
                .replace("id = \"gh\"", "id = \"gh2\"")
            )),
            |c| {
                let tw = &c.endpoints[0];
                assert_eq!(tw.provider_id(), "twilio");
                assert_eq!(
                    tw.public_url.as_deref(),
                    Some("https://example.com:8443/sms?x=1")
                );
                assert_eq!(tw.replay_window_ms, Some(90 * 24 * 3600 * 1000));
                let pp = &c.endpoints[1];
                assert_eq!(pp.options.get("webhook_id"), Some("WH-1"));
                assert_eq!(pp.replay_window_ms, None);
                let gh = &c.endpoints[2];
                assert_eq!(gh.replay_window_ms, Some(3_600_000));
                // The pointers override the pack for every single-event provider.
                assert_eq!(gh.object_id_pointer.as_deref(), Some("/repository/id"));
                assert!(c.warnings.iter().any(|w| w.starts_with(
                    "payload_encryption.replay_key is not set: replay digests use a key derived from payload key version 1"
                )));
            },
        ),
        (
            "a configured replay key: no warning, the same digests as its own derivation",
            base_with(
                "keys = [",
                &format!("replay_key = \"{PAYLOAD_KEY}\"\nkeys = ["),
            ),
            |c| {
                assert!(c.payload_keys.replay_key_source.is_some());
                assert!(
                    !c.warnings
                        .iter()
                        .any(|w| w.contains("replay_key is not set"))
                );
                let own = hookgate_core::seal::ReplayKey::derive(
                    &base64::Engine::decode(
                        &base64::engine::general_purpose::STANDARD,
                        PAYLOAD_KEY,
                    )
                    .unwrap(),
                );
                assert_eq!(c.payload_keys.replay_key.digest(b"x"), own.digest(b"x"));
            },
        ),
        (
            "a retry cap defaults to at least base_ms",
            plus(&github_endpoint("retry = { base_ms = 600000 }\n")),
            |c| {
                assert_eq!(c.endpoints[0].retry.base_ms, 600_000);
                assert_eq!(c.endpoints[0].retry.cap_ms, 600_000);
            },
        ),
        (
            "http and nats destinations, fan-out, relay",
            plus(&format!(
                "[relay]\nenabled = false\nlease_seconds = 30\npoll_interval_ms = 50\n\n{}\n{}\n{}",
                http_destination(
                    "timeout_ms = 2000\nconcurrency = 3\nrate_limit = { per_second = 4, burst = 8 }\n\
                     retry = { base_ms = 10, cap_ms = 20, max_attempts = 5 }\n\
                     headers = { \"X-Team\" = \"payments\" }\nsigning_secrets = [\"whsec_aG9va2dhdGUtZGVzdGluYXRpb24tc2VjcmV0\"]\n",
                ),
                nats_destination(
                    "subject = \"hooks.{endpoint}.{event_type}\"\nduplicate_window_seconds = 150\n",
                ),
                sw_endpoint("destinations = [\"bus\", \"svc\"]\n"),
            )),
            |c| {
                assert!(!c.relay.enabled);
                assert_eq!(c.relay.lease, Duration::from_secs(30));
                assert_eq!(c.relay.poll_interval, Duration::from_millis(50));
                assert_eq!(c.endpoints[0].destinations, ["bus", "svc"]);
                let svc = &c.destinations[0];
                assert_eq!(svc.id, "svc");
                assert_eq!(svc.timeout, Duration::from_secs(2));
                assert_eq!(svc.concurrency, 3);
                assert_eq!(
                    svc.rate_limit,
                    Some(Rate {
                        per_second: 4,
                        burst: 8
                    })
                );
                assert_eq!(svc.retry.max_attempts, 5);
                let DestinationKind::Http {
                    settings,
                    secret_sources,
                } = &svc.kind
                else {
                    panic!("svc is http")
                };
                assert_eq!(settings.url.as_str(), "https://example.com/hook");
                assert_eq!(settings.headers.len(), 1);
                assert_eq!(settings.headers[0].0.as_str(), "x-team");
                assert_eq!(settings.signing_secrets.len(), 1);
                assert_eq!(secret_sources.len(), 1);
                assert!(!settings.allow_private_network);
                let bus = &c.destinations[1];
                assert_eq!(bus.concurrency, 8);
                assert_eq!(bus.timeout, Duration::from_secs(10));
                let DestinationKind::Nats(n) = &bus.kind else {
                    panic!("bus is nats")
                };
                assert_eq!(n.url, "nats://127.0.0.1:4222");
                assert_eq!(n.stream, "HOOKS");
                assert_eq!(n.subject.filter(), "hooks.*.*");
                assert_eq!(n.duplicate_window, Duration::from_secs(150));
            },
        ),
        (
            "an http destination on a private address when allowed; nats defaults",
            plus(&format!(
                "{}\n{}",
                http_destination("allow_private_network = true\n")
                    .replace("https://example.com/hook", "http://127.0.0.1:9/x"),
                nats_destination(""),
            )),
            |c| {
                let DestinationKind::Http { settings, .. } = &c.destinations[0].kind else {
                    panic!("http")
                };
                assert!(settings.allow_private_network);
                let DestinationKind::Nats(n) = &c.destinations[1].kind else {
                    panic!("nats")
                };
                assert_eq!(n.subject.filter(), "webhooks.*.*");
                assert_eq!(n.duplicate_window, Duration::from_secs(86400));
                assert!(c.warnings.iter().any(|w| w
                    == "destinations[0].id has no signing_secrets: its requests are not signed"));
            },
        ),
        (
            "filters on either kind, taken out before the kind's keys are read",
            plus(&format!(
                "{}\n{}",
                http_destination("filter = { types = [\"charge.*\"], providers = [\"stripe\"] }\n"),
                nats_destination(
                    "filter = { where = [{ pointer = \"/data/object/amount\", op = \"gt\", value = 100 }] }\n"
                ),
            )),
            |c| {
                let http = c.destinations[0].filter.as_ref().unwrap();
                assert_eq!(http.types.as_deref(), Some(&["charge.*".to_owned()][..]));
                assert!(!http.reads_payload());
                let nats = c.destinations[1].filter.as_ref().unwrap();
                assert!(nats.types.is_none() && nats.providers.is_none());
                assert!(nats.reads_payload());
                let shown = crate::config::render::render_redacted(c);
                assert!(
                    shown.contains("filter = { types = [\"charge.*\"], providers = [\"stripe\"] }"),
                    "{shown}"
                );
            },
        ),
        (
            "rows per relay lease: concurrency, or what the rate limit grants within the lease",
            plus(&format!(
                "{}\n{}\n{}",
                http_destination("concurrency = 64\nrate_limit = { per_second = 1, burst = 64 }\n"),
                nats_destination("timeout_ms = 58800\nrate_limit = { per_second = 5 }\n"),
                http_destination("concurrency = 3\n").replace("\"svc\"", "\"plain\""),
            )),
            |c| {
                let lease = c.relay.lease;
                // (60 s - 10 s - 1 s) at 1/s: 49 slots, fewer than the 64 it could run.
                assert_eq!(c.destinations[0].max_rows_per_lease(lease), 49);
                // 200 ms of waiting at 5/s: exactly one slot.
                assert_eq!(c.destinations[1].max_rows_per_lease(lease), 1);
                assert_eq!(c.destinations[2].max_rows_per_lease(lease), 3);
                // A longer lease leaves more time for slots, up to concurrency.
                assert_eq!(
                    c.destinations[0].max_rows_per_lease(Duration::from_secs(600)),
                    64
                );
            },
        ),
    ];
    for (name, text, check) in cases {
        let config = load(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        check(&config);
    }
}

#[test]
fn config_file_secrets_resolve_against_the_config_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gh.secret"), "from-a-file\n").unwrap();
    std::fs::set_permissions(
        dir.path().join("gh.secret"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let text = plus(&github_endpoint("").replace("\"gh-secret\"", "\"file:gh.secret\""));
    let config = Config::from_toml(&text, &dir.path().join("c.toml"), dir.path()).unwrap();
    let secret = &config.endpoints[0].secrets[0];
    assert_eq!(
        secret.source,
        crate::secrets::SecretSource::File(dir.path().join("gh.secret"))
    );
    assert!(
        !config
            .warnings
            .iter()
            .any(|w| w.starts_with("endpoints[0].secrets[0]")),
        "a file: secret is not a literal: {:?}",
        config.warnings
    );
}

/// Every invalid file, with the exact error.
/// The unknown-kind error lists the kinds of this build (some are cargo features).
const UNKNOWN_SMTP_KIND: &str = match (cfg!(feature = "rabbitmq"), cfg!(feature = "redis-stream")) {
    (true, true) => {
        "config error at `line 11`: unknown kind \"smtp\"; known: http, nats, rabbitmq, redis_stream"
    }
    (true, false) => {
        "config error at `line 11`: unknown kind \"smtp\"; known: http, nats, rabbitmq"
    }
    (false, true) => {
        "config error at `line 11`: unknown kind \"smtp\"; known: http, nats, redis_stream"
    }
    (false, false) => "config error at `line 11`: unknown kind \"smtp\"; known: http, nats",
};

fn invalid_cases() -> Vec<(String, &'static str)> {
    vec![
        // [retention] and endpoints' idempotency windows.
        (
            plus("[retention]\npayload_days = 0\n"),
            "config error at `retention.payload_days`: must be at least 1 (day)",
        ),
        (
            plus("[retention]\npayload_days = 60\nidempotency_days = 45\n"),
            "config error at `retention.idempotency_days`: 45 days is shorter than retention.payload_days (60): the id record must outlive the payload",
        ),
        (
            plus(&format!(
                "[retention]\npayload_days = 40\n\n{}",
                sw_endpoint("idempotency_days = 35\n")
            )),
            "config error at `endpoints[0].idempotency_days`: 35 days is shorter than retention.payload_days (40): the id record must outlive the payload",
        ),
        (
            plus(&format!(
                "[retention]\npayload_days = 40\nidempotency_days = 50\n\n{}",
                sw_endpoint("idempotency_days = 39\n")
            )),
            "config error at `endpoints[0].idempotency_days`: 39 days is shorter than retention.payload_days (40): the id record must outlive the payload",
        ),
        (
            plus("[retention]\ninterval_seconds = 0\n"),
            "config error at `retention.interval_seconds`: must be between 1 and 86400",
        ),
        (
            plus("[retention]\nbatch_size = 0\n"),
            "config error at `retention.batch_size`: must be between 1 and 10000",
        ),
        (
            plus("[retention]\nkeep_forever = true\n"),
            "config error at `line 12`: unknown field `keep_forever`, expected one of `payload_days`, `idempotency_days`, `interval_seconds`, `batch_size`",
        ),
        // The file as a whole.
        (
            "".into(),
            "config error at `line 1`: missing field `server`",
        ),
        (
            plus("[nope]\n"),
            "config error at `line 11`: unknown field `nope`, expected one of `server`, `admin`, `store`, `payload_encryption`, `log`, `endpoints`, `worker`, `providers`, `relay`, `destinations`, `provider_packs`, `provider_packs_dir`, `secrets`, `vault`, `retention`, `jobs`, `rejections`, `reconcile`, `tracing`",
        ),
        (
            base_with("listen = \"127.0.0.1:8080\"\n", "listen = 8080\n"),
            "config error at `line 2`: invalid type: integer `8080`, expected a string",
        ),
        (
            base().replace("[store]\nurl = \"sqlite://x.db\"\n", ""),
            "config error at `line 1`: missing field `store`",
        ),
        (
            "[server]\nlisten = \"127.0.0.1:8080\"\n[store]\nurl = \"sqlite://x.db\"\n".into(),
            "config error at `line 1`: missing field `payload_encryption`",
        ),
        (
            plus("[server]\n"),
            "config error at `line 11`: invalid table header\nduplicate key `server` in document root",
        ),
        // [server]
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nport = 1\n",
            ),
            "config error at `line 3`: unknown field `port`, expected one of `listen`, `tls`, `trusted_proxies`, `max_in_flight`, `max_connections`, `per_client_rate`, `max_header_count`, `max_header_bytes`, `request_timeout_ms`, `max_body_readers`, `per_client_body_readers`, `min_body_bytes_per_second`, `trusted_proxies_allow_public`",
        ),
        (
            base_with("127.0.0.1:8080", "localhost:8080"),
            "config error at `server.listen`: must be IP:PORT, e.g. 127.0.0.1:8080",
        ),
        (
            base_with("127.0.0.1:8080", "0.0.0.0:8080"),
            "config error at `server.listen`: 0.0.0.0:8080 is not a loopback address, and neither server.tls nor server.trusted_proxies is set: refusing to receive webhooks over plain HTTP (use 127.0.0.1 for development)",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"10.0.0.1\", \"proxy\"]\n",
            ),
            "config error at `server.trusted_proxies[1]`: must be an IP or CIDR",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"10.0.0.1\", \"0.0.0.0/0\"]\n",
            ),
            "config error at `server.trusted_proxies[1]`: 0.0.0.0/0 trusts every address: list the proxies' own addresses",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"::/0\"]\ntrusted_proxies_allow_public = true\n",
            ),
            "config error at `server.trusted_proxies[0]`: ::/0 trusts every address: list the proxies' own addresses",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"10.0.0.0/8\", \"203.0.113.0/24\"]\n",
            ),
            "config error at `server.trusted_proxies[1]`: 203.0.113.0/24 is (or includes) a public range; set server.trusted_proxies_allow_public = true if the proxy really is there",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_body_readers = 0\n",
            ),
            "config error at `server.max_body_readers`: must be greater than 0",
        ),
        (
            plus("[admin]\nlisten = \"0.0.0.0:9090\"\n"),
            "config error at `admin.tokens`: admin.listen 0.0.0.0:9090 is not a loopback address and no [[admin.tokens]] is configured: the operator API refuses to serve there; add tokens (and admin.tls), or set admin.allow_unauthenticated = true to serve only /metrics and the health probes",
        ),
        // [[admin.tokens]] and [admin] tls
        (
            plus("[admin]\nlisten = \"0.0.0.0:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\"]\nvalue = \"env:HOOKGATE_TEST_TOKEN\"\n"),
            "config error at `admin.tls`: admin.listen 0.0.0.0:9090 is not a loopback address: with [[admin.tokens]] the admin listener needs admin.tls = { cert, key }, so tokens never cross the network in clear text",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\", \"write\"]\nvalue = \"env:HOOKGATE_TEST_TOKEN\"\n"),
            "config error at `admin.tokens[0].scopes[1]`: unknown scope \"write\": one of \"read\", \"decrypt\", \"operate\"",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = []\nvalue = \"env:HOOKGATE_TEST_TOKEN\"\n"),
            "config error at `admin.tokens[0].scopes`: must name at least one of \"read\", \"decrypt\", \"operate\"",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"on call\"\nscopes = [\"read\"]\nvalue = \"env:HOOKGATE_TEST_TOKEN\"\n"),
            "config error at `admin.tokens[0].name`: must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\"]\nvalue = \"env:A\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"operate\"]\nvalue = \"env:B\"\n"),
            "config error at `admin.tokens[1].name`: another token is named \"ops\"",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\"]\nvalue = \"short\"\n"),
            "config error at `admin.tokens[0].value`: a token must be at least 16 bytes long",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\"]\nvalue = \"exec:get-token\"\n"),
            "config error at `admin.tokens[0].value`: malformed secret reference: exec:get-token: give the command's path (absolute, or relative to the config file), it is run without a shell or PATH lookup",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\n[[admin.tokens]]\nname = \"ops\"\nscopes = [\"read\"]\n"),
            "config error at `line 13`: missing field `value`",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\nmax_connections = 0\n"),
            "config error at `admin.max_connections`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\ntls = { cert = \"c.pem\" }\n",
            ),
            "config error at `line 3`: missing field `key`",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_in_flight = 0\n",
            ),
            "config error at `server.max_in_flight`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_in_flight = -1\n",
            ),
            "config error at `line 3`: invalid value: integer `-1`, expected usize",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_connections = 0\n",
            ),
            "config error at `server.max_connections`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_header_count = 0\n",
            ),
            "config error at `server.max_header_count`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nmax_header_bytes = 0\n",
            ),
            "config error at `server.max_header_bytes`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nrequest_timeout_ms = 0\n",
            ),
            "config error at `server.request_timeout_ms`: must be greater than 0",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nper_client_rate = { per_second = 0 }\n",
            ),
            "config error at `server.per_client_rate.per_second`: must be at least 1",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nper_client_rate = { per_second = 1, burst = 0 }\n",
            ),
            "config error at `server.per_client_rate.burst`: must be at least 1",
        ),
        (
            base_with(
                "listen = \"127.0.0.1:8080\"\n",
                "listen = \"127.0.0.1:8080\"\nper_client_rate = { burst = 1 }\n",
            ),
            "config error at `line 3`: missing field `per_second`",
        ),
        // [admin]
        (
            plus("[admin]\nlisten = \"nowhere\"\n"),
            "config error at `admin.listen`: must be IP:PORT",
        ),
        (
            plus("[admin]\nlisten = \"127.0.0.1:9090\"\npath = \"/\"\n"),
            "config error at `line 13`: unknown field `path`, expected one of `listen`, `request_timeout_ms`, `max_connections`, `allow_unauthenticated`, `tls`, `tokens`",
        ),
        // [store]
        (
            base_with("sqlite://x.db", "mysql://db/x"),
            "config error at `store.url`: must start with sqlite:// or postgres://",
        ),
        (
            base_with("sqlite://x.db", "postgres://u:pw@db.internal/h"),
            "config error at `store.url`: invalid store configuration: a host that is not \
             loopback (default sslmode=verify-full) verifies the server certificate: add \
             sslrootcert=PATH (a PEM file of the CA) or sslrootcert=system, or say \
             sslmode=require to encrypt without verifying",
        ),
        (
            base_with("sqlite://x.db", "postgres://u:pw@127.0.0.1/h?sslmode=allow"),
            "config error at `store.url`: invalid store configuration: sslmode=allow is not \
             supported: use disable, prefer, require, verify-ca or verify-full",
        ),
        (
            base_with(
                "\"sqlite://x.db\"",
                "\"env:HOOKGATE_TEST_SURELY_UNSET_URL\"",
            ),
            "config error at `store.url`: environment variable HOOKGATE_TEST_SURELY_UNSET_URL \
             is not set or not valid UTF-8",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\nmax_batch = 0\n",
            ),
            "config error at `store.max_batch`: must be greater than 0",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\nqueue_capacity = 0\n",
            ),
            "config error at `store.queue_capacity`: must be greater than 0",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\nmax_queue_wait_ms = 0\n",
            ),
            "config error at `store.max_queue_wait_ms`: must be greater than 0",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\npool_size = 0\n",
            ),
            "config error at `store.pool_size`: must be greater than 0",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\nstartup_wait_seconds = 3601\n",
            ),
            "config error at `store.startup_wait_seconds`: must be at most 3600",
        ),
        (
            base_with(
                "url = \"sqlite://x.db\"\n",
                "url = \"sqlite://x.db\"\ngroup_commit = \"yes\"\n",
            ),
            "config error at `line 6`: invalid type: string \"yes\", expected a boolean",
        ),
        // [payload_encryption]
        (
            base_with(
                &format!("keys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]"),
                "keys = []",
            ),
            "config error at `payload_encryption.keys`: at least one key is required",
        ),
        (
            base_with("active = 1\n", "active = 2\n"),
            "config error at `payload_encryption.active`: no key with version 2",
        ),
        (
            base_with(
                "keys = [{",
                &format!("keys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}, {{"),
            ),
            "config error at `payload_encryption.keys[1].version`: duplicate version",
        ),
        (
            base_with(PAYLOAD_KEY, "c2hvcnQ="),
            "config error at `payload_encryption.keys[0].key`: must be 32 bytes, base64-encoded",
        ),
        (
            base_with(PAYLOAD_KEY, "not base64!"),
            "config error at `payload_encryption.keys[0].key`: must be 32 bytes, base64-encoded",
        ),
        (
            base_with(PAYLOAD_KEY, "env:HOOKGATE_TEST_UNSET_VAR"),
            "config error at `payload_encryption.keys[0].key`: environment variable HOOKGATE_TEST_UNSET_VAR is not set or not valid UTF-8",
        ),
        (
            base_with(PAYLOAD_KEY, "file:missing.key"),
            "config error at `payload_encryption.keys[0].key`: cannot read secret file /nonexistent/missing.key: entity not found",
        ),
        // [log]
        (
            plus("[log]\nformat = \"xml\"\n"),
            "config error at `log.format`: must be \"text\" or \"json\"",
        ),
        (
            plus("[log]\ncolour = true\n"),
            "config error at `line 12`: unknown field `colour`, expected `format` or `level`",
        ),
        // [worker]
        (
            plus("[worker]\nconcurrency = 1025\n"),
            "config error at `worker.concurrency`: must be at most 1024",
        ),
        (
            plus("[worker]\nlease_seconds = 0\n"),
            "config error at `worker.lease_seconds`: must be between 1 and 86400",
        ),
        (
            plus("[worker]\nlease_seconds = 86401\n"),
            "config error at `worker.lease_seconds`: must be between 1 and 86400",
        ),
        (
            plus(
                "[worker]\nlease_seconds = 30\n[providers.stripe]\napi_key = \"sk\"\ntimeout_ms = 120000\n\
                 [[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nsecrets = [{ version = \"v1\", value = \"whsec_x\" }]\n\
                 handlers = [\"payments_projection\"]\n",
            ),
            "config error at `providers.stripe.timeout_ms`: 120000 ms does not fit in worker.lease_seconds (30 s) with 1000 ms left to commit: leases are not renewed, so a slower call would let another worker process the same event; lower timeout_ms or raise worker.lease_seconds",
        ),
        (
            // The default timeout (10 s) against a short lease; the margin counts.
            plus(
                "[worker]\nlease_seconds = 10\n[providers.stripe]\napi_key = \"sk\"\n\
                 [[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nsecrets = [{ version = \"v1\", value = \"whsec_x\" }]\n\
                 handlers = [\"payments_projection\"]\n",
            ),
            "config error at `providers.stripe.timeout_ms`: 10000 ms does not fit in worker.lease_seconds (10 s) with 1000 ms left to commit: leases are not renewed, so a slower call would let another worker process the same event; lower timeout_ms or raise worker.lease_seconds",
        ),
        (
            plus("[worker]\npoll_interval_ms = 0\n"),
            "config error at `worker.poll_interval_ms`: must be between 1 and 60000",
        ),
        (
            plus("[worker]\npoll_interval_ms = 60001\n"),
            "config error at `worker.poll_interval_ms`: must be between 1 and 60000",
        ),
        (
            plus("[worker]\nthreads = 2\n"),
            "config error at `line 12`: unknown field `threads`, expected one of `concurrency`, `lease_seconds`, `poll_interval_ms`",
        ),
        // [providers.stripe]
        (
            plus("[providers.stripe]\napi_key = \"sk\"\napi_base = \"ftp://stripe\"\n"),
            "config error at `providers.stripe.api_base`: must be an http(s) URL, e.g. https://api.stripe.com",
        ),
        (
            plus("[providers.stripe]\napi_key = \"env:HOOKGATE_TEST_UNSET_VAR\"\n"),
            "config error at `providers.stripe.api_key`: environment variable HOOKGATE_TEST_UNSET_VAR is not set or not valid UTF-8",
        ),
        (
            plus("[providers.stripe]\napi_key = \"sk\"\ntimeout_ms = 0\n"),
            "config error at `providers.stripe.timeout_ms`: must be between 1 and 120000",
        ),
        (
            plus("[providers.stripe]\napi_key = \"sk\"\ntimeout_ms = 120001\n"),
            "config error at `providers.stripe.timeout_ms`: must be between 1 and 120000",
        ),
        (
            plus("[providers.stripe]\n"),
            "config error at `line 11`: missing field `api_key`",
        ),
        (
            plus("[providers.github]\napi_key = \"x\"\n"),
            "config error at `line 11`: unknown field `github`, expected `stripe`",
        ),
        // [[endpoints]]
        (
            plus(&github_endpoint("").replace("id = \"gh\"", "id = \"a/b\"")),
            "config error at `endpoints[0].id`: must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ),
        (
            plus(&github_endpoint("").replace("id = \"gh\"", "id = \"\"")),
            "config error at `endpoints[0].id`: must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ),
        (
            plus(&format!("{}\n{}", github_endpoint(""), github_endpoint(""))),
            "config error at `endpoints[1].id`: duplicate endpoint id \"gh\"",
        ),
        (
            plus(&github_endpoint("").replace("github", "gitlub")),
            // every built-in pack, by id (the list grows with packs/)
            Box::leak(
                format!(
                    "config error at `endpoints[0].provider`: unknown provider \"gitlub\"; known: {}",
                    hookgate_providers::pack::builtin_packs()
                        .iter()
                        .map(|p| p.id())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into_boxed_str(),
            ),
        ),
        (
            plus(&github_endpoint("colour = 1\n")),
            "config error at `line 15`: unknown field `colour`, expected one of `id`, `provider`, `tolerance_seconds`, `max_body_bytes`, `allowed_event_types`, `secrets`, `rate_limit`, `retry`, `handlers`, `object_id_pointer`, `object_version_pointer`, `destinations`, `public_url`, `options`, `replay_window_seconds`, `idempotency_days`, `reconcile`, `api_versions`, `sequence_pointer`, `sequence_gap_seconds`, `sequence_gap_max`, `sequence_start`",
        ),
        (
            plus("[[endpoints]]\nid = \"gh\"\nprovider = \"github\"\n"),
            "config error at `line 11`: missing field `secrets`",
        ),
        (
            plus(&github_endpoint("max_body_bytes = 0\n")),
            "config error at `endpoints[0].max_body_bytes`: must be between 1 and 67108864",
        ),
        (
            plus(&github_endpoint("max_body_bytes = 67108865\n")),
            "config error at `endpoints[0].max_body_bytes`: must be between 1 and 67108864",
        ),
        (
            plus(&github_endpoint("tolerance_seconds = 300\n")),
            "config error at `endpoints[0].tolerance_seconds`: provider github signs no timestamp, so there is nothing to check",
        ),
        (
            plus(&sw_endpoint("tolerance_seconds = 0\n")),
            "config error at `endpoints[0].tolerance_seconds`: must be greater than 0",
        ),
        (
            plus(&github_endpoint(
                "allowed_event_types = [\"push\", \"pull_*_request\"]\n",
            )),
            "config error at `endpoints[0].allowed_event_types[1]`: must be a type name or a prefix ending in a single trailing *",
        ),
        (
            plus(&github_endpoint("allowed_event_types = [\"\"]\n")),
            "config error at `endpoints[0].allowed_event_types[0]`: must be a type name or a prefix ending in a single trailing *",
        ),
        (
            plus(
                &github_endpoint("").replace("[{ version = \"v1\", value = \"gh-secret\" }]", "[]"),
            ),
            "config error at `endpoints[0].secrets`: at least one secret version is required",
        ),
        (
            plus(&github_endpoint("").replace("version = \"v1\"", "version = \"\"")),
            "config error at `endpoints[0].secrets[0].version`: must not be empty",
        ),
        (
            plus(&github_endpoint("").replace(
                "[{ version = \"v1\", value = \"gh-secret\" }]",
                "[{ version = \"v1\", value = \"a\" }, { version = \"v1\", value = \"b\" }]",
            )),
            "config error at `endpoints[0].secrets[1].version`: duplicate version \"v1\"",
        ),
        (
            plus(&github_endpoint("").replace("\"gh-secret\"", "\"exec:get-secret\"")),
            "config error at `endpoints[0].secrets[0].value`: malformed secret reference: exec:get-secret: give the command's path (absolute, or relative to the config file), it is run without a shell or PATH lookup",
        ),
        (
            plus(&github_endpoint("").replace("\"gh-secret\"", "\"vault:secret/gh#token\"")),
            "config error at `endpoints[0].secrets[0].value`: a vault: secret needs [vault] address and token",
        ),
        (
            plus(&github_endpoint("").replace(
                "value = \"gh-secret\"",
                "value = \"gh-secret\", refresh_seconds = 60, max_age_seconds = 30",
            )),
            "config error at `endpoints[0].secrets[0].max_age_seconds`: must be between refresh_seconds (60) and 2592000: a value older than max_age_seconds stops verifying, so it has to be refreshed before",
        ),
        (
            plus(&github_endpoint("").replace(
                "value = \"gh-secret\"",
                "value = \"gh-secret\", refresh_seconds = 0",
            )),
            "config error at `endpoints[0].secrets[0].refresh_seconds`: must be between 1 and 86400",
        ),
        (
            plus(
                "[vault]\naddress = \"http://vault:8200\"\ntoken = \"env:HOOKGATE_TEST_UNSET_VAR\"\n",
            ),
            "config error at `vault.address`: must be an https:// URL, e.g. https://vault.internal:8200 (the token travels with every read)",
        ),
        (
            plus(
                "[vault]\naddress = \"https://vault:8200\"\ntoken = \"env:HOOKGATE_TEST_UNSET_VAR\"\n",
            ),
            "config error at `vault.token`: environment variable HOOKGATE_TEST_UNSET_VAR is not set or not valid UTF-8",
        ),
        (
            plus("[secrets]\nexec_timeout_ms = 0\n"),
            "config error at `secrets.exec_timeout_ms`: must be between 1 and 120000",
        ),
        (
            plus(&github_endpoint("").replace("\"gh-secret\"", "\"\"")),
            "config error at `endpoints[0].secrets[0].value`: secret from <literal, redacted> is empty",
        ),
        (
            plus(&sw_endpoint("").replace(SW_SECRET, "whsec_not base64!")),
            "config error at `endpoints[0].secrets[0].value`: secret must be whsec_ followed by base64 for provider standard_webhooks",
        ),
        (
            plus(&github_endpoint("").replace(
                "value = \"gh-secret\"",
                "value = \"gh-secret\", not_after = \"tomorrow\"",
            )),
            "config error at `endpoints[0].secrets[0].not_after`: must be an RFC 3339 time, e.g. 2026-12-07T00:00:00Z",
        ),
        (
            plus(
                &github_endpoint("")
                    .replace("value = \"gh-secret\"", "value = \"gh-secret\", colour = 1"),
            ),
            "config error at `line 14`: unknown field `colour`, expected one of `version`, `value`, `not_after`, `retired`, `refresh_seconds`, `max_age_seconds`",
        ),
        (
            plus(&github_endpoint("handlers = [\"audit\"]\n")),
            "config error at `endpoints[0].handlers[0]`: unknown handler \"audit\"; known: payments_projection",
        ),
        (
            plus(&github_endpoint("handlers = [\"payments_projection\"]\n")),
            "config error at `endpoints[0].handlers[0]`: payments_projection handles Stripe endpoints only",
        ),
        (
            plus(
                "[[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nsecrets = [{ version = \"v1\", value = \"whsec_x\" }]\nhandlers = [\"payments_projection\"]\n",
            ),
            "config error at `endpoints[0].handlers`: payments_projection fetches from Stripe's API: configure [providers.stripe]",
        ),
        (
            plus(
                "[providers.stripe]\napi_key = \"sk\"\n[[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nsecrets = [{ version = \"v1\", value = \"whsec_x\" }]\nhandlers = [\"payments_projection\", \"payments_projection\"]\n",
            ),
            "config error at `endpoints[0].handlers[1]`: duplicate handler \"payments_projection\"",
        ),
        (
            plus(&adyen_endpoint("object_id_pointer = \"/id\"\n")),
            "config error at `endpoints[0].object_id_pointer`: provider adyen sends batches; each item's object comes from the pack",
        ),
        (
            plus(&twilio_endpoint("")),
            "config error at `endpoints[0].public_url`: public_url is required by provider twilio (it signs the URL)",
        ),
        (
            plus(&twilio_endpoint("public_url = \"example.com/sms\"\n")),
            "config error at `endpoints[0].public_url`: public_url must be an absolute http:// or https:// URL with a host",
        ),
        (
            plus(&twilio_endpoint("public_url = \"ftp://example.com/sms\"\n")),
            "config error at `endpoints[0].public_url`: public_url must be an absolute http:// or https:// URL with a host",
        ),
        (
            plus(&paypal_endpoint("")),
            "config error at `endpoints[0].options.webhook_id`: required by provider paypal",
        ),
        (
            plus(&paypal_endpoint(
                "options = { webhook_id = \"WH-1\", colour = \"red\" }\n",
            )),
            "config error at `endpoints[0].options.colour`: unknown option for provider paypal (known: webhook_id)",
        ),
        (
            plus(&paypal_endpoint("options = { webhook_id = \" \" }\n")),
            "config error at `endpoints[0].options.webhook_id`: must be a non-empty string",
        ),
        (
            plus(&github_endpoint("options = { webhook_id = \"WH-1\" }\n")),
            "config error at `endpoints[0].options.webhook_id`: unknown option for provider github (known: none)",
        ),
        (
            plus(&sw_endpoint("replay_window_seconds = 60\n")),
            "config error at `endpoints[0].replay_window_seconds`: provider standard_webhooks signs its event id or a timestamp, so it needs no replay window",
        ),
        (
            plus(&github_endpoint("replay_window_seconds = 0\n")),
            "config error at `endpoints[0].replay_window_seconds`: must be greater than 0",
        ),
        (
            base_with("keys = [", "replay_key = \"c2hvcnQ=\"\nkeys = ["),
            "config error at `payload_encryption.replay_key`: must be 32 bytes, base64-encoded",
        ),
        (
            plus(&sw_endpoint("object_version_pointer = \"data.version\"\n")),
            "config error at `endpoints[0].object_version_pointer`: must be a JSON pointer, e.g. /data/version",
        ),
        // Provider reconciliation.
        (
            plus(&sw_endpoint("reconcile = { api_key = \"k\" }\n")),
            "config error at `endpoints[0].reconcile`: provider standard_webhooks has no API reconciliation in its pack (`reconcile`)",
        ),
        (
            plus(&github_endpoint("reconcile = { api_key = \"k\" }\n")),
            "config error at `endpoints[0].reconcile.hook`: endpoint \"gh\": provider github reconciles one hook's deliveries: set hook = \"repos/{owner}/{repo}/hooks/{id}\" or \"orgs/{org}/hooks/{id}\"",
        ),
        (
            plus(&github_endpoint(
                "reconcile = { api_key = \"k\", hook = \"repos/octo/hello/hooks/1/deliveries\" }\n",
            )),
            "config error at `endpoints[0].reconcile.hook`: endpoint \"gh\": must be repos/{owner}/{repo}/hooks/{id} or orgs/{org}/hooks/{id} (GitHub's owner, repository and organisation names; a numeric hook id)",
        ),
        (
            plus(&github_endpoint(
                "reconcile = { api_key = \"k\", hook = \"orgs/octo_cat/hooks/1\" }\n",
            )),
            "config error at `endpoints[0].reconcile.hook`: endpoint \"gh\": must be repos/{owner}/{repo}/hooks/{id} or orgs/{org}/hooks/{id} (GitHub's owner, repository and organisation names; a numeric hook id)",
        ),
        (
            plus(&stripe_endpoint(
                "reconcile = { api_key = \"k\", api_base = \"http://api.example.com\" }\n",
            )),
            "config error at `endpoints[0].reconcile.api_base`: must use https (http only on a loopback address)",
        ),
        (
            plus(&stripe_endpoint(
                "reconcile = { api_key = \"k\", api_base = \"https://api.stripe.com?x=1\" }\n",
            )),
            "config error at `endpoints[0].reconcile.api_base`: must be an https URL without credentials or query, e.g. https://api.stripe.com",
        ),
        (
            plus(&stripe_endpoint(
                "reconcile = { api_key = \"k\", api_base = \"https://user:pw@api.stripe.com\" }\n",
            )),
            "config error at `endpoints[0].reconcile.api_base`: must be an https URL without credentials or query, e.g. https://api.stripe.com",
        ),
        (
            plus(&github_endpoint(
                "reconcile = { api_key = \"k\", hook = \"orgs/octo/hooks/1\", undelivered_only = true }\n",
            )),
            "config error at `endpoints[0].reconcile.undelivered_only`: endpoint \"gh\": only Stripe's event listing filters by delivery; provider github's reconciliation (github_deliveries) has no such filter",
        ),
        (
            plus(&stripe_endpoint(
                "reconcile = { api_key = \"k\", interval_seconds = 1 }\n",
            )),
            "config error at `endpoints[0].reconcile.interval_seconds`: must be 10 to 86400",
        ),
        (
            plus(&stripe_endpoint(
                "reconcile = { api_key = \"k\", hook = \"orgs/o/hooks/1\" }\n",
            )),
            "config error at `endpoints[0].reconcile.hook`: endpoint \"pay\": provider stripe's reconciliation (stripe_events) has no hook to name; remove it",
        ),
        (
            plus(&github_endpoint("retry = { base_ms = 0 }\n")),
            "config error at `endpoints[0].retry.base_ms`: must be greater than 0",
        ),
        (
            plus(&github_endpoint("retry = { base_ms = 100, cap_ms = 10 }\n")),
            "config error at `endpoints[0].retry.cap_ms`: must be at least base_ms",
        ),
        (
            plus(&github_endpoint("retry = { max_attempts = 0 }\n")),
            "config error at `endpoints[0].retry.max_attempts`: must be between 1 and 1000",
        ),
        (
            plus(&github_endpoint("retry = { max_attempts = 1001 }\n")),
            "config error at `endpoints[0].retry.max_attempts`: must be between 1 and 1000",
        ),
        (
            plus(&github_endpoint("retry = { jitter = true }\n")),
            "config error at `line 15`: unknown field `jitter`, expected one of `base_ms`, `cap_ms`, `max_attempts`",
        ),
        (
            plus(&github_endpoint("rate_limit = { per_second = 0 }\n")),
            "config error at `endpoints[0].rate_limit.per_second`: must be at least 1",
        ),
        (
            plus(&github_endpoint("destinations = [\"nope\"]\n")),
            "config error at `endpoints[0].destinations[0]`: unknown destination \"nope\"; configured: []",
        ),
        (
            plus(&format!(
                "{}\n{}",
                http_destination(""),
                github_endpoint("destinations = [\"svc\", \"svc\"]\n")
            )),
            "config error at `endpoints[0].destinations[1]`: duplicate destination \"svc\"",
        ),
        // [relay]
        (
            plus("[relay]\nlease_seconds = 0\n"),
            "config error at `relay.lease_seconds`: must be between 1 and 86400",
        ),
        (
            plus("[relay]\nlease_seconds = 86401\n"),
            "config error at `relay.lease_seconds`: must be between 1 and 86400",
        ),
        (
            plus("[relay]\npoll_interval_ms = 0\n"),
            "config error at `relay.poll_interval_ms`: must be between 1 and 60000",
        ),
        (
            plus("[relay]\nbatch = 3\n"),
            "config error at `line 12`: unknown field `batch`, expected one of `enabled`, `lease_seconds`, `poll_interval_ms`",
        ),
        // [[destinations]], both kinds
        (
            plus(&http_destination("").replace("id = \"svc\"", "id = \"a b\"")),
            "config error at `destinations[0].id`: must be 1-128 characters of A-Z a-z 0-9 - _ .",
        ),
        (
            plus(&format!(
                "{}\n{}",
                http_destination(""),
                http_destination("")
            )),
            "config error at `destinations[1].id`: duplicate destination id \"svc\"",
        ),
        (
            plus("[[destinations]]\nid = \"svc\"\nkind = \"smtp\"\nurl = \"x\"\n"),
            UNKNOWN_SMTP_KIND,
        ),
        (
            plus("[[destinations]]\nid = \"svc\"\nurl = \"x\"\n"),
            "config error at `line 11`: missing field `kind`",
        ),
        (
            plus("[[destinations]]\nid = \"svc\"\nkind = \"http\"\n"),
            "config error at `destinations[0].url`: is required",
        ),
        (
            plus("[[destinations]]\nid = \"svc\"\nkind = \"http\"\nurl = \" \"\n"),
            "config error at `destinations[0].url`: is required",
        ),
        (
            plus("[[destinations]]\nkind = \"http\"\nurl = \"https://example.com/\"\n"),
            "config error at `line 11`: kind = \"http\": missing field `id`",
        ),
        (
            plus(&http_destination("timeout_ms = 0\n")),
            "config error at `destinations[0].timeout_ms`: must be between 1 and 300000",
        ),
        (
            plus(&http_destination("timeout_ms = 300001\n")),
            "config error at `destinations[0].timeout_ms`: must be between 1 and 300000",
        ),
        (
            plus(&http_destination("timeout_ms = 59000\n")),
            "config error at `destinations[0].timeout_ms`: must be shorter than relay.lease_seconds (60 s) by at least a second, or a slow delivery would be taken over while still running",
        ),
        (
            plus(&nats_destination("timeout_ms = 4000\n").replace(
                "[[destinations]]",
                "[relay]\nlease_seconds = 5\n\n[[destinations]]",
            )),
            "config error at `destinations[0].timeout_ms`: must be shorter than relay.lease_seconds (5 s) by at least a second, or a slow delivery would be taken over while still running",
        ),
        (
            plus(&http_destination("filter = { types = [] }\n")),
            "config error at `destinations[0].filter.types`: must not be empty (leave the key out to match every event)",
        ),
        (
            plus(&format!(
                "{}\n{}",
                http_destination(""),
                nats_destination(
                    "filter = { where = [{ pointer = \"/a\", op = \"exists\" }, { pointer = \"/b\", op = \"gte\", value = 1 }] }\n"
                ),
            )),
            "config error at `destinations[1].filter.where[1].op`: unknown op \"gte\"; known: eq, ne, in, exists, gt, lt",
        ),
        (
            plus(&nats_destination("filter = \"charge.*\"\n")),
            "config error at `destinations[0].filter`: invalid type: string \"charge.*\", expected struct RawFilter (keys: types, providers, where)",
        ),
        (
            plus(&http_destination("concurrency = 0\n")),
            "config error at `destinations[0].concurrency`: must be between 1 and 1024",
        ),
        (
            plus(&nats_destination("concurrency = 1025\n")),
            "config error at `destinations[0].concurrency`: must be between 1 and 1024",
        ),
        (
            plus(&http_destination("rate_limit = { per_second = 0 }\n")),
            "config error at `destinations[0].rate_limit.per_second`: must be at least 1",
        ),
        (
            plus(&nats_destination(
                "rate_limit = { per_second = 1, burst = 0 }\n",
            )),
            "config error at `destinations[0].rate_limit.burst`: must be at least 1",
        ),
        (
            plus(&http_destination("retry = { base_ms = 0 }\n")),
            "config error at `destinations[0].retry.base_ms`: must be greater than 0",
        ),
        (
            plus(&nats_destination("retry = { max_attempts = 0 }\n")),
            "config error at `destinations[0].retry.max_attempts`: must be between 1 and 1000",
        ),
        (
            plus(&http_destination("colour = 1\n")),
            "config error at `line 11`: kind = \"http\": unknown field `colour`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `headers`, `signing_secrets`, `allow_private_network`, `proxy`",
        ),
        // The relay's lease must fit one rate-limiter slot, the timeout and a second.
        (
            plus(&http_destination(
                "timeout_ms = 58800\nrate_limit = { per_second = 4, burst = 100 }\n",
            )),
            "config error at `destinations[0].rate_limit.per_second`: destination \"svc\" could not deliver a single row per lease: at 4 per second a delivery may wait 250 ms for its slot, but relay.lease_seconds (60 s) leaves only 200 ms after timeout_ms (58800 ms) and a second to record the result; raise rate_limit.per_second or relay.lease_seconds, or lower timeout_ms",
        ),
        (
            plus(
                &nats_destination("timeout_ms = 1500\nrate_limit = { per_second = 1 }\n").replace(
                    "[[destinations]]",
                    "[relay]\nlease_seconds = 3\n\n[[destinations]]",
                ),
            ),
            "config error at `destinations[0].rate_limit.per_second`: destination \"bus\" could not deliver a single row per lease: at 1 per second a delivery may wait 1000 ms for its slot, but relay.lease_seconds (3 s) leaves only 500 ms after timeout_ms (1500 ms) and a second to record the result; raise rate_limit.per_second or relay.lease_seconds, or lower timeout_ms",
        ),
        // kind = "http"
        (
            plus(&http_destination("").replace("https://example.com/hook", "not a url")),
            "config error at `destinations[0].url`: must be an absolute http:// or https:// URL",
        ),
        (
            plus(&http_destination("").replace("https://example.com/hook", "ftp://example.com/")),
            "config error at `destinations[0].url`: url must be http:// or https://",
        ),
        (
            plus(&http_destination("proxy = \"not a url\"\n")),
            "config error at `destinations[0].proxy`: must be an absolute http:// or https:// proxy URL",
        ),
        (
            plus(&http_destination("proxy = \"socks5://127.0.0.1:1080\"\n")),
            "config error at `destinations[0].proxy`: proxy must be an http:// or https:// URL with a host",
        ),
        (
            plus(&http_destination("").replace("https://example.com/hook", "http://127.0.0.1:9/")),
            "config error at `destinations[0].url`: url is a private or loopback address; set allow_private_network = true to allow it",
        ),
        (
            plus(&http_destination("").replace("https://example.com/hook", "http://localhost/")),
            "config error at `destinations[0].url`: url is a private or loopback address; set allow_private_network = true to allow it",
        ),
        (
            plus(&http_destination("headers = { \"webhook-id\" = \"x\" }\n")),
            "config error at `destinations[0].headers.webhook-id`: is set by hookgate and cannot be overridden",
        ),
        (
            plus(&http_destination("headers = { \"Host\" = \"x\" }\n")),
            "config error at `destinations[0].headers.Host`: is set by hookgate and cannot be overridden",
        ),
        (
            plus(&http_destination("headers = { \"bad header\" = \"x\" }\n")),
            "config error at `destinations[0].headers.bad header`: is not a valid header name",
        ),
        (
            plus(&http_destination(
                "headers = { \"X-A\" = \"line\\nbreak\" }\n",
            )),
            "config error at `destinations[0].headers.X-A`: is not a valid header value",
        ),
        (
            plus(&http_destination("signing_secrets = [\"not base64!\"]\n")),
            "config error at `destinations[0].signing_secrets[0]`: secret must be whsec_ followed by base64 (a whsec_ Standard Webhooks secret)",
        ),
        (
            plus(&http_destination(
                "signing_secrets = [\"whpk_dsbrSEy1BnmWGQrsgrkDiO3E0DEWITMBpdI/RGrdPlI=\"]\n",
            )),
            "config error at `destinations[0].signing_secrets[0]`: a whpk_ public key cannot sign: give the whsec_ secret the destination verifies",
        ),
        (
            plus(&http_destination(
                "signing_secrets = [\"env:HOOKGATE_TEST_UNSET_VAR\"]\n",
            )),
            "config error at `destinations[0].signing_secrets[0]`: environment variable HOOKGATE_TEST_UNSET_VAR is not set or not valid UTF-8",
        ),
        (
            plus(&http_destination("stream = \"S\"\n")),
            "config error at `line 11`: kind = \"http\": unknown field `stream`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `headers`, `signing_secrets`, `allow_private_network`, `proxy`",
        ),
        (
            plus(&http_destination("subject = \"a.b\"\n")),
            "config error at `line 11`: kind = \"http\": unknown field `subject`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `headers`, `signing_secrets`, `allow_private_network`, `proxy`",
        ),
        (
            plus(&http_destination("duplicate_window_seconds = 200\n")),
            "config error at `line 11`: kind = \"http\": unknown field `duplicate_window_seconds`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `headers`, `signing_secrets`, `allow_private_network`, `proxy`",
        ),
        (
            plus(&http_destination("allow_private_network = \"yes\"\n")),
            "config error at `line 11`: kind = \"http\": invalid type: string \"yes\", expected a boolean",
        ),
        // kind = "nats"
        (
            plus(&nats_destination("").replace("nats://127.0.0.1:4222", "http://127.0.0.1:4222")),
            "config error at `destinations[0].url`: must start with nats:// or tls://",
        ),
        (
            plus(&nats_destination("").replace("stream = \"HOOKS\"\n", "")),
            "config error at `destinations[0].stream`: is required for kind = \"nats\"",
        ),
        (
            plus(&nats_destination("").replace("\"HOOKS\"", "\"HO.OKS\"")),
            "config error at `destinations[0].stream`: must be 1-64 characters of A-Z a-z 0-9 - _",
        ),
        (
            plus(&nats_destination("").replace("\"HOOKS\"", "\"\"")),
            "config error at `destinations[0].stream`: must be 1-64 characters of A-Z a-z 0-9 - _",
        ),
        (
            plus(&nats_destination("subject = \"a.*\"\n")),
            "config error at `destinations[0].subject`: token \"*\": a placeholder must be a whole token, and literal tokens contain no wildcards or whitespace",
        ),
        (
            plus(&nats_destination("subject = \"a..b\"\n")),
            "config error at `destinations[0].subject`: has an empty token (`..`, or a leading or trailing `.`)",
        ),
        (
            plus(&nats_destination("subject = \"a.{tenant}\"\n")),
            "config error at `destinations[0].subject`: unknown placeholder {tenant}; known: {provider}, {endpoint}, {event_type}, {destination}",
        ),
        (
            plus(&nats_destination("duplicate_window_seconds = 179\n")),
            "config error at `destinations[0].duplicate_window_seconds`: must be at least relay.lease_seconds + 120 (180 s): longer than a lease plus a restart",
        ),
        (
            plus(&nats_destination("headers = { \"X-A\" = \"b\" }\n")),
            "config error at `line 11`: kind = \"nats\": unknown field `headers`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `stream`, `subject`, `duplicate_window_seconds`",
        ),
        (
            plus(&nats_destination("signing_secrets = []\n")),
            "config error at `line 11`: kind = \"nats\": unknown field `signing_secrets`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `stream`, `subject`, `duplicate_window_seconds`",
        ),
        (
            plus(&nats_destination("allow_private_network = true\n")),
            "config error at `line 11`: kind = \"nats\": unknown field `allow_private_network`, expected one of `id`, `url`, `timeout_ms`, `concurrency`, `rate_limit`, `retry`, `stream`, `subject`, `duplicate_window_seconds`",
        ),
    ]
}

#[test]
fn public_proxies_and_open_admin_binds_need_their_keys() {
    let c = load(&base_with(
        "listen = \"127.0.0.1:8080\"\n",
        "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"203.0.113.0/24\"]\n\
         trusted_proxies_allow_public = true\n",
    ))
    .unwrap();
    assert_eq!(c.server.trusted_proxies[0].to_string(), "203.0.113.0/24");
    // Tokens: sources kept (never read at load), scopes sorted and deduplicated; on a
    // non-loopback listener with TLS; a literal is flagged for the loopback / --dev rule.
    let c = load(&plus(
        "[admin]\nlisten = \"0.0.0.0:9443\"\ntls = { cert = \"admin.pem\", key = \"admin.key\" }\n\
         [[admin.tokens]]\nname = \"oncall\"\nscopes = [\"operate\", \"read\", \"read\"]\n\
         value = \"env:HOOKGATE_TEST_SURELY_UNSET_TOKEN\"\n\
         [[admin.tokens]]\nname = \"dev\"\nscopes = [\"decrypt\"]\nvalue = \"a-literal-token-for-dev\"\n",
    ))
    .unwrap();
    use super::admin::Scope;
    assert_eq!(c.admin.tokens.len(), 2);
    assert_eq!(c.admin.tokens[0].name, "oncall");
    assert_eq!(c.admin.tokens[0].scopes, vec![Scope::Read, Scope::Operate]);
    assert_eq!(
        c.admin.tokens[0].source,
        crate::secrets::SecretSource::Env("HOOKGATE_TEST_SURELY_UNSET_TOKEN".into())
    );
    assert!(c.admin.api);
    assert_eq!(
        c.admin.tls.as_ref().unwrap().cert,
        Path::new("/nonexistent/admin.pem")
    );
    assert!(
        c.literal_secrets
            .contains(&"admin.tokens[1].value".to_owned())
    );
    assert!(
        c.check_dev_only(false, false).is_err(),
        "a literal token on a non-loopback admin listener needs --dev"
    );
    let rendered = crate::config::render::render_redacted(&c);
    assert!(
        rendered.contains("# value from env:HOOKGATE_TEST_SURELY_UNSET_TOKEN (redacted)"),
        "{rendered}"
    );
    assert!(!rendered.contains("a-literal-token-for-dev"), "{rendered}");
    let c = load(&plus(
        "[admin]\nlisten = \"0.0.0.0:9090\"\nallow_unauthenticated = true\n\
         request_timeout_ms = 250\nmax_connections = 3\n",
    ))
    .unwrap();
    assert!(
        !c.admin.api,
        "without tokens, not on loopback: only /metrics and probes"
    );
    assert_eq!(c.admin_listen.unwrap().to_string(), "0.0.0.0:9090");
    assert_eq!(c.admin.request_timeout.as_millis(), 250);
    assert_eq!(c.admin.max_connections, 3);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("admin.allow_unauthenticated")),
        "{:?}",
        c.warnings
    );
    let c = load(&base()).unwrap();
    assert_eq!(
        (
            c.server.max_body_readers,
            c.server.per_client_body_readers,
            c.server.min_body_bytes_per_second
        ),
        (1024, 64, 1024)
    );
    assert_eq!(c.admin.request_timeout.as_millis(), 10_000);
    assert_eq!(c.admin.max_connections, 64);
}

/// Each endpoint's idempotency window: its own key, else `[retention]`'s, else from its
/// pack (the larger of 30 days and the redelivery horizon; 90 without a signed timestamp),
/// never below `payload_days`.
#[test]
fn retention_windows_resolve_per_endpoint() {
    use super::retention::WindowSource;
    let window = |c: &Config, id: &str| c.endpoint(id).unwrap().idempotency;
    let c = load(&plus(&format!(
        "{}\n{}",
        sw_endpoint(""),
        github_endpoint("")
    )))
    .unwrap();
    assert_eq!(c.retention.payload_days, 30);
    assert_eq!(c.retention.interval, Duration::from_secs(300));
    assert_eq!(c.retention.batch_size, 256);
    assert_eq!(window(&c, "sw").days, 30);
    assert_eq!(window(&c, "sw").source, WindowSource::ProviderHorizon);
    assert_eq!(window(&c, "gh").days, 90, "GitHub signs no timestamp");
    assert_eq!(window(&c, "gh").source, WindowSource::UnsignedTimestamp);
    assert_eq!(
        c.retention.unconfigured_window_ms(&c.endpoints),
        90 * 86_400_000
    );

    // Adyen redelivers for 30 days and signs no timestamp: 90. Svix (27.5 h horizon): 30.
    let adyen = load(&plus(&adyen_endpoint(""))).unwrap();
    assert_eq!(window(&adyen, "ad").days, 90);

    let c = load(&plus(&format!(
        "[retention]\npayload_days = 45\nidempotency_days = 60\ninterval_seconds = 5\n\n{}\n{}",
        sw_endpoint("idempotency_days = 400\n"),
        github_endpoint("")
    )))
    .unwrap();
    assert_eq!(window(&c, "sw").days, 400);
    assert_eq!(window(&c, "sw").source, WindowSource::Endpoint);
    assert_eq!(
        window(&c, "gh").days,
        60,
        "the global key overrides the pack"
    );
    assert_eq!(window(&c, "gh").source, WindowSource::Retention);
    assert_eq!(c.retention.interval, Duration::from_secs(5));
    assert_eq!(
        c.retention.unconfigured_window_ms(&c.endpoints),
        400 * 86_400_000,
        "rows of removed endpoints: the longest window"
    );

    // A default below payload_days is raised to it.
    let c = load(&plus(&format!(
        "[retention]\npayload_days = 120\n\n{}",
        github_endpoint("")
    )))
    .unwrap();
    assert_eq!(window(&c, "gh").days, 120);
    assert_eq!(window(&c, "gh").source, WindowSource::PayloadDays);

    // Shorter than the provider's horizon is allowed, with a warning.
    let c = load(&plus(&format!(
        "[retention]\npayload_days = 1\n\n{}",
        adyen_endpoint("idempotency_days = 7\n")
    )))
    .unwrap();
    assert_eq!(window(&c, "ad").days, 7);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("endpoints[0].idempotency_days = 7") && w.contains("30 days")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn provider_reconcile_resolves_with_warnings_for_loopback_and_literal_keys() {
    let c = load(&plus(&stripe_endpoint(
        "reconcile = { api_key = \"rk_test_1\", api_base = \"http://127.0.0.1:9/\" }\n",
    )))
    .unwrap();
    let rc = c.endpoints[0].reconcile.as_ref().unwrap();
    assert_eq!(rc.api_base, "http://127.0.0.1:9");
    assert_eq!(rc.interval, std::time::Duration::from_secs(600));
    assert_eq!(rc.horizon, std::time::Duration::from_secs(30 * 86_400));
    assert_eq!(rc.api_key.expose(), "rk_test_1");
    for needle in [
        "endpoints[0].reconcile.api_base is plain http on a loopback address",
        "endpoints[0].reconcile.api_key is a literal",
    ] {
        assert!(
            c.warnings.iter().any(|w| w.contains(needle)),
            "{needle}: {:?}",
            c.warnings
        );
    }
    let c = load(&plus(&stripe_endpoint(
        "reconcile = { api_key = \"rk_test_1\" }\n",
    )))
    .unwrap();
    assert_eq!(
        c.endpoints[0].reconcile.as_ref().unwrap().api_base,
        "https://api.stripe.com"
    );
    assert!(
        load(&plus(&stripe_endpoint(""))).unwrap().endpoints[0]
            .reconcile
            .is_none()
    );
    let c = load(&plus(&github_endpoint(
        "reconcile = { api_key = \"ghp_1\", hook = \"repos/octo-cat/hello.world/hooks/42\" }\n",
    )))
    .unwrap();
    let rc = c.endpoints[0].reconcile.as_ref().unwrap();
    assert_eq!(
        rc.api,
        hookgate_providers::pack::ReconcileApi::GithubDeliveries
    );
    assert_eq!(rc.api_base, "https://api.github.com");
    assert_eq!(
        rc.hook.as_deref(),
        Some("repos/octo-cat/hello.world/hooks/42")
    );
    assert_eq!(rc.horizon, std::time::Duration::from_secs(3 * 86_400));
}

#[test]
fn config_invalid_files_name_the_key() {
    let mut wrong = Vec::new();
    for (text, expected) in invalid_cases() {
        match load(&text) {
            Ok(_) => wrong.push(format!("accepted:\n{text}")),
            Err(e) if e.to_string() == expected => {}
            Err(e) => wrong.push(format!(
                "{:?}\n  expected {expected:?}\n  in:\n{text}",
                e.to_string()
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        invalid_cases().len(),
        wrong.join("\n\n")
    );
}

/// A file with every section, for the exact `config check` output. The Stripe API key is
/// `env:PATH`, a variable every test process has, so an `env:` source is printed.
fn full_file() -> String {
    format!(
        "{}\n{}\n{}\n{}\n{}",
        base_with(
            "listen = \"127.0.0.1:8080\"\n",
            "listen = \"0.0.0.0:8443\"\ntls = { cert = \"c.pem\", key = \"k.pem\" }\n\
             trusted_proxies = [\"10.0.0.0/8\"]\nper_client_rate = { per_second = 5, burst = 6 }\n",
        )
        .replacen(
            "sqlite://x.db",
            "postgres://hook:hunter2@db:5432/hooks?sslrootcert=system&password=hunter3",
            1,
        ) + "\n[admin]\nlisten = \"127.0.0.1:9090\"\n\n[log]\nformat = \"json\"\n\n\
           [providers.stripe]\napi_key = \"env:PATH\"\n\n[relay]\nlease_seconds = 90\n",
        "[[endpoints]]\nid = \"pay\"\nprovider = \"stripe\"\nhandlers = [\"payments_projection\"]\n\
         allowed_event_types = [\"payment_intent.*\"]\nrate_limit = { per_second = 3 }\n\
         secrets = [{ version = \"v2\", value = \"whsec_new\" }, \
         { version = \"v1\", value = \"whsec_old\", not_after = \"2026-12-07T00:00:00Z\", retired = true }]\n",
        sw_endpoint(
            "destinations = [\"svc\", \"bus\"]\nobject_id_pointer = \"/data/id\"\nobject_version_pointer = \"/data/v\"\n"
        ),
        http_destination(
            "rate_limit = { per_second = 4 }\nheaders = { \"X-Team\" = \"payments\" }\n\
             signing_secrets = [\"whsec_aG9va2dhdGUtZGVzdGluYXRpb24tc2VjcmV0\"]\n"
        )
        .replace(
            "https://example.com/hook",
            "https://user:pw@example.com/hook?token=abc"
        ),
        nats_destination("").replace("nats://127.0.0.1:4222", "nats://bus:pw@127.0.0.1:4222"),
    )
}

#[test]
fn store_url_passwords_are_redacted_in_every_form() {
    for (url, expected) in [
        ("postgres://u:pw@h/db", "postgres://u:<redacted>@h/db"),
        (
            "postgres://u@h/db?password=pw&sslmode=require",
            "postgres://u@h/db?password=<redacted>&sslmode=require",
        ),
        (
            "postgres://u:a@b@h/db?PASSWORD=x",
            "postgres://u:<redacted>@h/db?PASSWORD=<redacted>",
        ),
        (
            "host=h password=pw dbname=d",
            "host=h password=<redacted> dbname=d",
        ),
        (
            "host=h password='p w\\' x' dbname=d",
            "host=h password=<redacted> dbname=d",
        ),
        ("host=h mypassword=keep", "host=h mypassword=keep"),
        (
            "host=h password = pw dbname=d",
            "host=h password=<redacted> dbname=d",
        ),
        ("sqlite://data/h.db", "sqlite://data/h.db"),
    ] {
        assert_eq!(redact_url(url), expected, "{url}");
    }
}

#[test]
fn store_url_from_a_file_is_resolved_against_the_config_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("db-url"), "postgres://u:pw@127.0.0.1/h\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.path().join("db-url"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let text = base_with("\"sqlite://x.db\"", "\"file:db-url\"");
    let c = Config::from_toml(&text, &dir.path().join("hookgate.toml"), dir.path()).unwrap();
    assert_eq!(c.store.url, "postgres://u:pw@127.0.0.1/h");
    assert_eq!(
        c.store.url_source,
        Some(crate::secrets::SecretSource::File(
            dir.path().join("db-url")
        ))
    );
    assert!(
        !format!("{c:?}").contains("pw@"),
        "Debug shows the password"
    );
}

/// `config check` prints exactly this: every resolved value, secrets and URL credentials redacted.
#[test]
fn config_check_output_is_exact() {
    let c = load(&full_file()).unwrap();
    let expected = r#"[server]
listen = "0.0.0.0:8443"
tls = { cert = "/nonexistent/c.pem", key = "/nonexistent/k.pem" }
trusted_proxies = ["10.0.0.0/8"]
max_in_flight = 128
max_connections = 4096
per_client_rate = { per_second = 5, burst = 6 }
max_header_count = 64
max_header_bytes = 16384
request_timeout_ms = 10000
max_body_readers = 1024
per_client_body_readers = 64
min_body_bytes_per_second = 1024

[admin]
listen = "127.0.0.1:9090"
request_timeout_ms = 10000
max_connections = 64

[store]
url = "postgres://hook:<redacted>@db:5432/hooks?sslrootcert=system&password=<redacted>"
# sslmode = verify-full (default for these hosts)
group_commit = true
max_batch = 512
queue_capacity = 8192
max_queue_wait_ms = 250
pool_size = 16
startup_wait_seconds = 30

[payload_encryption]
active = 1
reseal_interval_seconds = 60
reseal_batch = 100
# key version 1: from <literal, redacted> (32 bytes, redacted)
# replay_key: not set (derived from the lowest payload key version)

[log]
format = "json"
level = "info"

[worker]
concurrency = 4
lease_seconds = 30
poll_interval_ms = 200

[providers.stripe]
api_base = "https://api.stripe.com"
# api_key from env:PATH (redacted)
timeout_ms = 10000

[[endpoints]]
id = "pay"
provider = "stripe"
idempotency_days = 30
# payload kept 30 days (retention.payload_days)
tolerance_seconds = 300
max_body_bytes = 1048576
allowed_event_types = ["payment_intent.*"]
rate_limit = { per_second = 3, burst = 3 }
retry = { base_ms = 1000, cap_ms = 300000, max_attempts = 8 }
handlers = ["payments_projection"]
# secret version "v2" from <literal, redacted> (redacted), refresh_seconds = 60, max_age_seconds = 3600
# secret version "v1" from <literal, redacted> (redacted), retired = true, refresh_seconds = 60, max_age_seconds = 3600, not_after = "2026-12-07T00:00:00Z"

[[endpoints]]
id = "sw"
provider = "standard_webhooks"
idempotency_days = 30
# payload kept 30 days (retention.payload_days)
tolerance_seconds = 300
max_body_bytes = 1048576
# allowed_event_types: all
retry = { base_ms = 1000, cap_ms = 300000, max_attempts = 8 }
handlers = []
destinations = ["svc", "bus"]
object_id_pointer = "/data/id"
object_version_pointer = "/data/v"
# secret version "v1" from <literal, redacted> (redacted), refresh_seconds = 60, max_age_seconds = 3600

[relay]
enabled = true
lease_seconds = 90
poll_interval_ms = 200

[[destinations]]
id = "svc"
kind = "http"
url = "https://example.com/hook?%3Credacted%3E"
allow_private_network = false
# headers (values redacted): ["x-team"]
# signing secret from <literal, redacted> (redacted)
timeout_ms = 10000
concurrency = 8
rate_limit = { per_second = 4, burst = 4 }
retry = { base_ms = 1000, cap_ms = 300000, max_attempts = 8 }

[[destinations]]
id = "bus"
kind = "nats"
url = "nats://bus:<redacted>@127.0.0.1:4222"
stream = "HOOKS"
# subject filter: webhooks.*.*
duplicate_window_seconds = 86400
timeout_ms = 10000
concurrency = 8
retry = { base_ms = 1000, cap_ms = 300000, max_attempts = 8 }

[secrets]
exec_timeout_ms = 5000

[retention]
payload_days = 30
interval_seconds = 300
batch_size = 256
# idempotency_days: per endpoint from its provider
# endpoint "pay": payload kept 30 days, id record kept 30 days (default: the larger of 30 days and the provider's redelivery horizon)
# endpoint "sw": payload kept 30 days, id record kept 30 days (default: the larger of 30 days and the provider's redelivery horizon)

[jobs]
rate_per_second = 50
batch_size = 50
lease_seconds = 30
poll_interval_ms = 1000

[rejections]
enabled = true
retention_hours = 72
max_entries = 100000

[reconcile]
enabled = true
interval_seconds = 300
grace_seconds = 30
lookback_hours = 24
batch_size = 500
findings_retention_days = 30

# [tracing] not configured: no traces are exported
"#;
    assert_eq!(render_redacted(&c), expected);
}

#[test]
fn secrets_near_or_past_not_after_are_warned_about() {
    let now = jiff::Timestamp::now().as_second();
    let at = |secs: i64| jiff::Timestamp::from_second(secs).unwrap().to_string();
    let text = plus(&github_endpoint("").replace(
        "[{ version = \"v1\", value = \"gh-secret\" }]",
        &format!(
            "[{{ version = \"soon\", value = \"a\", not_after = \"{}\" }}, \
              {{ version = \"later\", value = \"b\", not_after = \"{}\" }}, \
              {{ version = \"gone\", value = \"c\", not_after = \"{}\" }}, \
              {{ version = \"retired\", value = \"d\", retired = true, not_after = \"{}\" }}]",
            at(now + 3 * 86_400),
            at(now + 30 * 86_400),
            at(now - 60),
            at(now + 86_400),
        ),
    ));
    let config = Config::from_toml(&text, Path::new("t.toml"), Path::new("/nonexistent")).unwrap();
    let about = |version: &str| {
        config
            .warnings
            .iter()
            .filter(|w| w.contains(&format!("(version \"{version}\")")))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        about("soon")[0].contains("expires at"),
        "{:?}",
        config.warnings
    );
    assert!(about("later").is_empty(), "{:?}", config.warnings);
    assert!(
        about("gone")[0].contains("no longer trusted"),
        "{:?}",
        config.warnings
    );
    assert!(about("retired").is_empty(), "{:?}", config.warnings);
}

#[test]
fn literal_secrets_run_only_on_loopback_or_with_dev() {
    let loopback = Config::from_toml(
        &plus(&github_endpoint("")),
        Path::new("t.toml"),
        Path::new("/nonexistent"),
    )
    .unwrap();
    assert!(loopback.check_dev_only(true, false).is_ok());
    assert!(
        loopback
            .literal_secrets
            .contains(&"endpoints[0].secrets[0].value".to_owned()),
        "{:?}",
        loopback.literal_secrets
    );
    // Behind a trusted proxy on a public address: still refused without --dev.
    let text = plus(&github_endpoint("")).replacen(
        "listen = \"127.0.0.1:8080\"",
        "listen = \"0.0.0.0:8080\"\ntrusted_proxies = [\"10.0.0.1\"]",
        1,
    );
    let public = Config::from_toml(&text, Path::new("t.toml"), Path::new("/nonexistent")).unwrap();
    let refused = public.check_dev_only(true, false).unwrap_err().to_string();
    assert!(
        refused.contains("server.listen 0.0.0.0:8080 is not a loopback address"),
        "{refused}"
    );
    assert!(refused.contains("--dev"), "{refused}");
    assert!(public.check_dev_only(true, true).is_ok());
    // A worker binds no webhook listener.
    assert!(public.check_dev_only(false, false).is_ok());
}

/// `config check` shows an endpoint's `reconcile` (where, how often, which hook, where its key
/// comes from), never the key.
#[test]
fn config_check_shows_endpoint_reconcile_without_the_key() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("gh-token");
    std::fs::write(&key, "ghp_render_secret_token").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = load(&plus(&github_endpoint(&format!(
        "reconcile = {{ api_key = \"file:{}\", hook = \"repos/octo/hello/hooks/7\", \
         interval_seconds = 900 }}\n",
        key.display()
    ))))
    .unwrap();
    let shown = crate::config::render::render_redacted(&c);
    assert!(
        shown.contains(&format!(
            "reconcile = {{ api_base = \"https://api.github.com\", interval_seconds = 900, \
             hook = \"repos/octo/hello/hooks/7\" }}\n\
             # reconcile: github_deliveries API, first run looks back 259200 s; \
             api_key from file:{} (redacted)\n",
            key.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains("ghp_render_secret_token"), "{shown}");
}
