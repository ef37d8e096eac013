//! `hookgate send` with a private key, end to end: the real binary signs, the real gateway
//! verifies. Standard Webhooks `v1a` (Ed25519, a `whsk_` key; the `whpk_` public key and the
//! key pair come from testdata/vectors/standard_webhooks.generated.json, made by Python's
//! `cryptography`, independent of the engine), beside `v1` (HMAC) on one endpoint; PayPal's
//! RSA signature checked against the pinned test certificate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::*;

const PAYLOAD: &str = r#"{"type":"invoice.paid","data":{"id":"inv_send_1"}}"#;
const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The v1a key pair of the generated vectors: (`whsk_` secret key, its `whpk_` public key),
/// and a public key of another pair.
fn v1a_keys() -> (String, String, String) {
    let path = hookgate_testkit::vectors::dir().join("standard_webhooks.generated.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let secret = doc["signing_keys"]["a"].as_str().unwrap().to_owned();
    let vector = |name: &str| {
        doc["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == format!("standard_webhooks/generated/{name}"))
            .unwrap_or_else(|| panic!("vector {name}"))
            .clone()
    };
    let public = vector("v1a_only")["secrets"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let other = vector("v1a_wrong_secret")["secrets"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(secret.starts_with("whsk_") && public.starts_with("whpk_") && public != other);
    (secret, public, other)
}

fn write_private(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn send(
    config: &Path,
    url: &str,
    endpoint: &str,
    event_id: &str,
    key: Option<&Path>,
    payload: &Path,
) -> Output {
    let mut cmd = Command::new(binary());
    cmd.args(["send", "--config"]).arg(config).args([
        "--endpoint",
        endpoint,
        "--event-id",
        event_id,
        "--url",
        url,
    ]);
    if let Some(key) = key {
        cmd.arg("--private-key").arg(key);
    }
    cmd.arg(payload).output().unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `send` exited 0 and the gateway answered `status`.
fn answered(out: &Output, status: &str) {
    assert!(out.status.success(), "{}", said(out));
    let want = format!("\"status\":\"{status}\"");
    assert!(said(out).contains(&want), "{}", said(out));
}

/// `send` exited non-zero saying `what` (the gateway's 401, or why it did not post).
fn refused(out: &Output, what: &str) {
    assert!(!out.status.success(), "{}", said(out));
    assert!(said(out).contains(what), "{}", said(out));
}

/// The stored events as `events list --json` prints them.
fn listed(config: &Path) -> Vec<Value> {
    let out = Command::new(binary())
        .args(["events", "list", "--json", "--config"])
        .arg(config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn send_signs_v1a_with_a_whsk_key_and_the_gateway_verifies_it_beside_v1() {
    let (secret, public, other) = v1a_keys();
    let files = TestGateway::builder()
        .workers(0)
        .endpoints(&format!(
            "{}{}{}",
            endpoint_toml("mixed", "standard_webhooks", &[WHSEC, &public], ""),
            endpoint_toml("public", "standard_webhooks", &[&public], ""),
            endpoint_toml("other", "standard_webhooks", &[&other], ""),
        ))
        .write()
        .await;
    let p = files.serve(None);
    let url = |e: &str| format!("http://{}/webhooks/{e}", p.addr());
    let dir = files.dir.path();
    let key = write_private(dir, "sender.whsk", &format!("{secret}\n"));
    let payload = dir.join("payload.json");
    std::fs::write(&payload, PAYLOAD).unwrap();
    let config = &files.config_path;

    // One endpoint trusting a whsec_ secret (v2) and a whpk_ key (v1): the shared secret
    // signs v1, the private key v1a, and each verifies with its own secret version.
    answered(
        &send(config, &url("mixed"), "mixed", "msg_hmac_1", None, &payload),
        "accepted",
    );
    answered(
        &send(
            config,
            &url("mixed"),
            "mixed",
            "msg_ed_1",
            Some(&key),
            &payload,
        ),
        "accepted",
    );
    answered(
        &send(
            config,
            &url("mixed"),
            "mixed",
            "msg_ed_1",
            Some(&key),
            &payload,
        ),
        "duplicate",
    );

    // Only the public key configured: v1a verifies; a key the endpoint does not trust is 401.
    answered(
        &send(
            config,
            &url("public"),
            "public",
            "msg_ed_2",
            Some(&key),
            &payload,
        ),
        "accepted",
    );
    refused(
        &send(
            config,
            &url("other"),
            "other",
            "msg_ed_3",
            Some(&key),
            &payload,
        ),
        "401",
    );

    // A public key cannot sign: send says what to pass instead of posting an unsigned request.
    refused(
        &send(config, &url("public"), "public", "msg_ed_4", None, &payload),
        "--private-key",
    );

    let mut seen: Vec<(String, String, String)> = listed(config)
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (
                s("endpoint_id"),
                s("provider_event_id"),
                s("matched_secret_version"),
            )
        })
        .collect();
    seen.sort();
    let want = |e: &str, id: &str, v: &str| (e.to_owned(), id.to_owned(), v.to_owned());
    assert_eq!(
        seen,
        [
            want("mixed", "msg_ed_1", "v1"),
            want("mixed", "msg_hmac_1", "v2"),
            want("public", "msg_ed_2", "v1"),
        ]
    );
    let logs = p.terminate();
    assert!(
        !logs.contains(&secret[5..]),
        "the secret key reached the logs"
    );
}

#[tokio::test]
async fn send_signs_paypal_with_its_private_key_and_the_gateway_checks_the_pinned_certificate() {
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hookgate-providers/tests/it/keys");
    let cert = std::fs::read_to_string(keys.join("paypal-1.cert.pem")).unwrap();
    let files = TestGateway::builder()
        .workers(0)
        .endpoints(&endpoint_toml(
            "paypal",
            "paypal",
            &[&cert],
            "options = { webhook_id = \"WH-SEND-TEST-1\" }",
        ))
        .write()
        .await;
    let p = files.serve(None);
    let url = format!("http://{}/webhooks/paypal", p.addr());
    let payload = files.dir.path().join("paypal.json");
    std::fs::write(
        &payload,
        r#"{"id":"WH-SEND-1","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"CAP-1"}}"#,
    )
    .unwrap();
    let config = &files.config_path;
    let key = |n: u8| keys.join(format!("paypal-{n}.key.pem"));

    answered(
        &send(config, &url, "paypal", "WH-SEND-1", Some(&key(1)), &payload),
        "accepted",
    );
    answered(
        &send(config, &url, "paypal", "WH-SEND-1", Some(&key(1)), &payload),
        "duplicate",
    );
    // Signed by a key whose certificate is not pinned: 401, nothing stored.
    refused(
        &send(config, &url, "paypal", "WH-SEND-2", Some(&key(2)), &payload),
        "401",
    );
    // Without the private key send refuses to post an unsigned request.
    refused(
        &send(config, &url, "paypal", "WH-SEND-3", None, &payload),
        "--private-key",
    );

    let ids: Vec<String> = listed(config)
        .iter()
        .map(|e| e["provider_event_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["WH-SEND-1"]);
    p.terminate();
}
