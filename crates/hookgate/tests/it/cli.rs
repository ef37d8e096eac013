//! The operator-facing commands: `config check` and `send` against the real binary.

use std::process::Command;

use crate::support::*;

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The sample config with a temp database and the webhook listener on `listen` (the admin
/// listener on port 0).
fn sample_config(dir: &std::path::Path, listen: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(examples_dir().join("hookgate.toml")).unwrap();
    let db = dir.join("data/hookgate.db");
    let text = text
        .replace("127.0.0.1:8080", listen)
        .replace("127.0.0.1:9090", "127.0.0.1:0")
        .replace(
            "sqlite://data/hookgate.db",
            &format!("sqlite://{}", db.display()),
        );
    let path = dir.join("hookgate.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn config_check_redacts_and_names_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_config(dir.path(), "127.0.0.1:0");
    let out = Command::new(binary())
        .args(["config", "check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("stripe-main"));
    assert!(
        !stdout.contains("whsec_hookgate_dev_stripe_secret"),
        "secret printed"
    );
    assert!(
        !stdout.contains("aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM="),
        "payload key printed"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("literal"),
        "literal secrets must warn"
    );

    let cases = [
        (
            "provider = \"stripe\"",
            "provider = \"stripey\"",
            "endpoints[0].provider",
        ),
        (
            "listen = \"127.0.0.1:",
            "listen = \"0.0.0.0:",
            "server.listen",
        ),
        (
            "listen = \"127.0.0.1:",
            "trusted_proxies = [\"10.0.0.0/8\", \"0.0.0.0/0\"]\nlisten = \"127.0.0.1:",
            "server.trusted_proxies[1]",
        ),
        (
            "listen = \"127.0.0.1:",
            "trusted_proxies = [\"198.51.100.0/24\"]\nlisten = \"127.0.0.1:",
            "server.trusted_proxies_allow_public",
        ),
        (
            "key = \"aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM=\"",
            "key = \"c2hvcnQ=\"",
            "payload_encryption.keys[0].key",
        ),
        (
            "value = \"whsec_hookgate_dev_stripe_secret\"",
            "value = \"exec:get-secret-from-path\"",
            "endpoints[0].secrets[0].value",
        ),
        (
            "public_url = \"https://hooks.example.com/webhooks/twilio\"",
            "public_url = \"hooks.example.com/webhooks/twilio\"",
            "endpoints[7].public_url",
        ),
        (
            "[[endpoints]]",
            "[[endpoints]]\nid = \"pp\"\nprovider = \"paypal\"\noptions = { webhook_id = \"\" }\n\
             secrets = [{ version = \"v1\", value = \"not a certificate\" }]\n\n[[endpoints]]",
            "endpoints[0].options.webhook_id",
        ),
        (
            "provider = \"adyen\"",
            "provider = \"adyen\"\noptions = { colour = \"red\" }",
            "endpoints[6].options.colour",
        ),
        (
            "replay_key = \"aG9va2dhdGUtZGV2LXJlcGxheS1kaWdlc3Qta2V5ISE=\"",
            "replay_key = \"c2hvcnQ=\"",
            "payload_encryption.replay_key",
        ),
    ];
    let original = std::fs::read_to_string(&path).unwrap();
    for (from, to, key) in cases {
        assert!(original.contains(from), "{from}");
        std::fs::write(&path, original.replacen(from, to, 1)).unwrap();
        let out = Command::new(binary())
            .args(["config", "check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "expected {key} in: {stderr}");
        assert!(!stderr.contains("whsec_hookgate_dev_stripe_secret"));
        // A bad config also refuses to serve, with the same message, before listening.
        let out = Command::new(binary())
            .args(["serve", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains(key));
    }
}

#[test]
fn send_shows_accepted_then_duplicate_for_every_example() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_config(dir.path(), "127.0.0.1:0");
    let gateway = BinaryGateway::start(BinaryRole::Serve, &path, None);
    // `send` finds the gateway from the config, as an operator's would: point it at the
    // address the gateway bound (the running gateway does not re-read its file).
    let path = sample_config(dir.path(), &gateway.addr().to_string());
    let examples = [
        ("stripe-main", "stripe"),
        ("github", "github"),
        ("standard", "standard_webhooks"),
        ("clerk", "svix"),
        ("shopify", "shopify"),
        ("slack", "slack"),
        ("adyen", "adyen"),
        ("twilio", "twilio"),
    ];
    for (endpoint, file) in examples {
        let event_id = format!("demo-{file}-1");
        let send = || {
            Command::new(binary())
                .args(["send", "--config"])
                .arg(&path)
                .args(["--endpoint", endpoint, "--event-id", &event_id])
                .arg(examples_dir().join(if file == "twilio" {
                    "events/twilio.form".to_owned()
                } else {
                    format!("events/{file}.json")
                }))
                .output()
                .unwrap()
        };
        let first = send();
        let out = String::from_utf8_lossy(&first.stdout);
        assert!(
            first.status.success(),
            "{endpoint}: {out} {}",
            String::from_utf8_lossy(&first.stderr)
        );
        let second = send();
        let out2 = String::from_utf8_lossy(&second.stdout);
        assert!(second.status.success());
        if endpoint == "adyen" {
            // Adyen requires its own answer to every accepted notification, copies included.
            assert!(out.contains("HTTP 200\n[accepted]"), "{endpoint}: {out}");
            assert!(out2.contains("HTTP 200\n[accepted]"), "{endpoint}: {out2}");
            continue;
        }
        assert!(out.contains("\"status\":\"accepted\""), "{endpoint}: {out}");
        assert!(
            out2.contains("\"status\":\"duplicate\""),
            "{endpoint}: {out2}"
        );
    }
    // Without --event-id every send is a fresh event.
    let fresh = Command::new(binary())
        .args(["send", "--config"])
        .arg(&path)
        .args(["--endpoint", "standard"])
        .arg(examples_dir().join("events/standard_webhooks.json"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&fresh.stdout).contains("accepted"));
    gateway.terminate();
}

/// `send` for a provider that signs in a query parameter (PandaDoc's `?signature=`): the
/// signature rides on the URL it posts to, the gateway verifies it there, and the same body
/// again is a duplicate (no event id: the body digest).
#[tokio::test]
async fn send_puts_a_query_signature_on_the_url_it_posts_to() {
    let files = TestGateway::builder()
        .endpoints(&endpoint_toml("pd", "pandadoc", &["pd-dev-shared-key"], ""))
        .write()
        .await;
    let serve = files.serve(None);
    let payload = files.dir.path().join("pandadoc.json");
    std::fs::write(
        &payload,
        r#"[{"event":"document_state_changed","data":{"id":"msFYActMfJHqNTKH8YSvF1","status":"document.completed"}}]"#,
    )
    .unwrap();
    let url = format!("http://{}/webhooks/pd", serve.addr());
    let send = || {
        let out = Command::new(binary())
            .args(["send", "--config"])
            .arg(&files.config_path)
            .args(["--endpoint", "pd", "--url", &url])
            .arg(&payload)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = send();
    assert!(first.contains("\"status\":\"accepted\""), "{first}");
    let second = send();
    assert!(second.contains("\"status\":\"duplicate\""), "{second}");
    // Without the parameter the same body is refused before anything is stored.
    let bare = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body(std::fs::read(&payload).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 400);
    let store = files.open_store().await;
    let rows = store
        .list_events(&hookgate_store::EventFilter::default())
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "one stored event");
    serve.terminate();
}

/// `send` for the two code schemes that write more than a signature header: Braintree's form
/// (`bt_signature` / `bt_payload`, keyed with a `public:private` key pair; no id, so the same
/// body again is a duplicate by its digest) and Contentful's canonical request (the signed
/// headers list, the millisecond timestamp, the path of `public_url`; the same `--event-id`
/// again is a duplicate). Each verifies at the gateway; the unsigned bodies are refused.
#[tokio::test]
async fn send_signs_braintree_forms_and_contentful_canonical_requests() {
    let endpoints = [
        endpoint_toml("bt", "braintree", &["pub-key-1:private-key-1"], ""),
        endpoint_toml(
            "cf",
            "contentful",
            &["y5h897MKUQirysGhiMOEg8c113v7SsI0VPo7JsyP2rCXwV1k7NImZ1IKmZPycmH7"],
            "public_url = \"https://hooks.example.com/contentful/webhook?src=cms\"",
        ),
    ]
    .concat();
    let files = TestGateway::builder().endpoints(&endpoints).write().await;
    let serve = files.serve(None);
    let payloads = [
        (
            "bt",
            "braintree.xml",
            "<notification><kind>check</kind></notification>",
        ),
        (
            "cf",
            "contentful.json",
            r#"{"sys":{"type":"Entry","id":"e1"}}"#,
        ),
    ];
    for (endpoint, name, body) in payloads {
        let payload = files.dir.path().join(name);
        std::fs::write(&payload, body).unwrap();
        let url = format!("http://{}/webhooks/{endpoint}", serve.addr());
        let send = || {
            let out = Command::new(binary())
                .args(["send", "--config"])
                .arg(&files.config_path)
                .args([
                    "--endpoint",
                    endpoint,
                    "--url",
                    &url,
                    "--event-id",
                    "demo-1",
                ])
                .arg(&payload)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{endpoint}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let first = send();
        assert!(
            first.contains("\"status\":\"accepted\""),
            "{endpoint}: {first}"
        );
        let second = send();
        assert!(
            second.contains("\"status\":\"duplicate\""),
            "{endpoint}: {second}"
        );
        // The same bytes without the signature are refused before anything is stored.
        let content_type = if endpoint == "bt" {
            "application/x-www-form-urlencoded"
        } else {
            "application/vnd.contentful.management.v1+json"
        };
        let bare = reqwest::Client::new()
            .post(&url)
            .header("content-type", content_type)
            .body(if endpoint == "bt" {
                format!("bt_payload={body}")
            } else {
                body.to_owned()
            })
            .send()
            .await
            .unwrap();
        assert_eq!(bare.status(), 400, "{endpoint}");
    }
    let store = files.open_store().await;
    let rows = store
        .list_events(&hookgate_store::EventFilter::default())
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "one stored event per endpoint");
    serve.terminate();
}

/// `serve` and `worker` report where they listen in one line on stdout, in the agreed shape,
/// with the ports the kernel picked for port 0; a worker has no webhook listener.
#[tokio::test]
async fn serve_and_worker_report_their_bound_addresses() {
    let files = TestGateway::builder()
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            "",
        ))
        .write()
        .await;
    let serve = files.serve(None);
    let (webhook, admin) = (serve.addr(), serve.admin.expect("admin reported"));
    assert!(webhook.port() != 0 && admin.port() != 0, "{}", serve.report);
    assert_eq!(
        serve.report,
        format!(r#"{{"listening":{{"webhook":"{webhook}","admin":"{admin}"}}}}"#)
    );
    assert_eq!(get(admin, "/healthz").status, 200);
    let r = get(webhook, "/webhooks/nope");
    assert!((400..500).contains(&r.status), "{r:?}");

    let worker = BinaryGateway::start(BinaryRole::Worker, &files.config_path, None);
    assert_eq!(worker.webhook, None);
    assert!(
        worker
            .report
            .starts_with(r#"{"listening":{"webhook":null,"admin":"#),
        "{}",
        worker.report
    );
    worker.terminate();
    serve.terminate();
}
