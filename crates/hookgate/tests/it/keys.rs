//! Payload key rotation through the real binary: events sealed under version 1; a config
//! without version 1 is refused (start-up and SIGHUP) naming the version and its rows; with a
//! new active version the reseal stage re-seals every stored payload (progress in `keys
//! status` and `hookgate_payload_key_rows{version}`), and the bodies still open (the row
//! identity stays the associated data).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Base64 of the 32 bytes `hookgate-rotated-payload-key-32b`.
const ROTATED_KEY: &str = "aG9va2dhdGUtcm90YXRlZC1wYXlsb2FkLWtleS0zMmI=";
const EVENTS: usize = 5;

fn payload_section(config: &str) -> String {
    let original = format!(
        "[payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n"
    );
    assert!(
        config.contains(&original),
        "test config has an unexpected shape"
    );
    original
}

/// Rewrites the `[payload_encryption]` section of the config file.
fn set_keys(config: &Path, section: &str) {
    let text = std::fs::read_to_string(config).unwrap();
    let text = match text.find("# keys under test\n") {
        Some(start) => {
            let end = text[start..].find("# end keys\n").unwrap() + start + "# end keys\n".len();
            format!("{}{}{}", &text[..start], wrap(section), &text[end..])
        }
        None => text.replacen(&payload_section(&text), &wrap(section), 1),
    };
    std::fs::write(config, text).unwrap();
}

fn wrap(section: &str) -> String {
    format!("# keys under test\n{section}# end keys\n")
}

fn hookgate(config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(binary())
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("HOOKGATE_FAILPOINTS")
        .output()
        .unwrap()
}

fn keys_status(config: &Path) -> Value {
    let out = hookgate(config, &["keys", "status", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn rows_of(status: &Value, version: u64) -> Option<u64> {
    status["versions"]
        .as_array()?
        .iter()
        .find(|v| v["version"] == version)
        .and_then(|v| v["rows"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_reseals_stored_payloads_and_refuses_removing_a_key_in_use_sqlite() {
    rotation_reseals_and_refuses_removal(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_reseals_stored_payloads_and_refuses_removing_a_key_in_use_postgres() {
    rotation_reseals_and_refuses_removal(Backend::Postgres).await;
}

async fn rotation_reseals_and_refuses_removal(backend: Backend) {
    let files = TestGateway::builder()
        .backend(backend)
        .workers(0)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
        .write()
        .await;
    let config = files.config_path.clone();

    // Version 1 seals the first events.
    let gateway = files.serve(None);
    for i in 0..EVENTS {
        let body = format!("{{\"type\":\"invoice.paid\",\"n\":{i}}}");
        let r = post_signed(
            gateway.addr(),
            "sw",
            "standard_webhooks",
            SW_SECRET,
            &format!("msg_rot_{i}"),
            unix_now(),
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    gateway.terminate();
    let status = keys_status(&config);
    assert_eq!(status["active"], 1);
    assert_eq!(rows_of(&status, 1), Some(EVENTS as u64), "{status}");
    let text = hookgate(&config, &["keys", "status"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("active"),
        "{text:?}"
    );

    // Version 1 removed while it still seals stored payloads: start-up refuses.
    set_keys(
        &config,
        &format!(
            "[payload_encryption]\nactive = 2\nkeys = [{{ version = 2, key = \"{ROTATED_KEY}\" }}]\n"
        ),
    );
    let refused = hookgate(&config, &["serve"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("version 1 seals 5 stored payload(s)"),
        "start-up must name the version and its rows: {stderr}"
    );

    // Version 2 active, version 1 kept: the reseal stage moves every payload to version 2.
    set_keys(
        &config,
        &format!(
            "[payload_encryption]\nactive = 2\nreseal_interval_seconds = 1\nreseal_batch = 2\n\
             keys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}, {{ version = 2, key = \"{ROTATED_KEY}\" }}]\n"
        ),
    );
    let gateway = files.serve(None);
    let admin = gateway.admin.expect("admin listener");
    wait_until_blocking(
        "every payload re-sealed under version 2",
        Duration::from_secs(60),
        || {
            let status = keys_status(&config);
            rows_of(&status, 1) == Some(0) && rows_of(&status, 2) == Some(EVENTS as u64)
        },
    );
    wait_until_blocking(
        "the gauge shows version 1 empty",
        Duration::from_secs(30),
        || {
            metric(admin, "hookgate_payload_key_rows{version=\"1\"}") == Some(0.0)
                && metric(admin, "hookgate_payload_key_rows{version=\"2\"}") == Some(EVENTS as f64)
        },
    );
    let status = keys_status(&config);
    assert_eq!(status["pending_reseal"], 0, "{status}");

    // Every body still opens, now under version 2.
    let listed = hookgate(&config, &["events", "list", "--json"]);
    let listed: Vec<Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), EVENTS);
    for event in &listed {
        let id = event["id"].as_str().unwrap();
        let shown = hookgate(&config, &["events", "show", id, "--payload"]);
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(shown["payload_key_version"], 2, "{shown}");
        let n = event["provider_event_id"]
            .as_str()
            .unwrap()
            .trim_start_matches("msg_rot_")
            .to_owned();
        assert_eq!(
            shown["payload"],
            format!("{{\"type\":\"invoice.paid\",\"n\":{n}}}"),
            "{shown}"
        );
    }

    // Version 2 seals every payload now: a reload that drops it is refused and logged, and the
    // running configuration stays (events are still accepted and sealed under version 2).
    set_keys(
        &config,
        &format!(
            "[payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n"
        ),
    );
    gateway.signal("-HUP");
    gateway.wait_for_log("version 2 seals 5 stored payload(s)");
    let r = post_signed(
        gateway.addr(),
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_rot_after",
        unix_now(),
        b"{\"type\":\"invoice.paid\"}",
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // Version 1 seals nothing any more: dropping it is accepted.
    set_keys(
        &config,
        &format!(
            "[payload_encryption]\nactive = 2\nkeys = [{{ version = 2, key = \"{ROTATED_KEY}\" }}]\n"
        ),
    );
    gateway.signal("-HUP");
    gateway.wait_for_log("configuration reloaded");
    let logs = gateway.terminate();
    assert!(
        !logs.contains(ROTATED_KEY) && !logs.contains(PAYLOAD_KEY),
        "a key was logged"
    );
    let status = keys_status(&config);
    assert_eq!(rows_of(&status, 2), Some(EVENTS as u64 + 1), "{status}");
    assert_eq!(rows_of(&status, 1), None, "{status}");
}
