//! Over HTTP through the real binary: the setup handshakes of Dropbox, Nylas, X (Twitter),
//! Trello, Okta, Front, LinkedIn, Smartcar and Tebex — unsigned GET and HEAD requests, header challenges, digest answers —
//! answered exactly as each provider documents, bounded, and never stored; the events of the
//! same endpoints still verify and are stored.

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;

use crate::support::{
    BinaryGateway, RawResponse, TestGateway, build_request, endpoint_toml, load_vectors, q,
    send_raw_async, signed_headers, vector_body, vector_headers,
};

const DROPBOX: &str = "dbx-app-secret-7hq2k";
const TWITTER: &str = "x-consumer-secret-z3ZX4v7mAAUGykl3";
const NYLAS: &str = "nylas-webhook-secret-8c1f2e";
const TRELLO: &str = "trello-oauth-secret-5a7c";
const OKTA: &str = "okta-hook-secret-Me_rShK8JHsTnby";
const FRONT: &str = "front-app-secret-3d9f1c";
const LINKEDIN: &str = "linkedin-client-secret-Wq8x";
const SMARTCAR: &str = "smartcar-amt-9f8e7d6c";
const TEBEX: &str = "tebex-webhook-secret-2c116b11";
const TRELLO_URL: &str = "https://hooks.example.com/webhooks/trello-1";

fn hmac_sha256(key: &str, message: &str) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(message.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn get(path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    build_request("GET", path, &headers, b"")
}

/// The first valid vector of `provider`, sent as the provider signed it.
fn first_valid(provider: &str) -> (Vec<(String, String)>, Vec<u8>) {
    let v = load_vectors(provider)
        .into_iter()
        .find(|v| v["expect"] == "valid")
        .unwrap_or_else(|| panic!("{provider} has a valid vector"));
    (vector_headers(&v), vector_body(&v))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn assert_refused(r: &RawResponse, status: u16, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.body);
}

#[tokio::test]
async fn setup_handshakes_are_answered_as_documented_over_the_real_binary() {
    let endpoints = endpoint_toml("dropbox-1", "dropbox", &[DROPBOX], "")
        + &endpoint_toml("nylas-1", "nylas", &[NYLAS], "")
        + &endpoint_toml("x-1", "twitter", &[TWITTER], "")
        + &endpoint_toml(
            "trello-1",
            "trello",
            &[TRELLO],
            &format!("public_url = {}", q(TRELLO_URL)),
        )
        + &endpoint_toml("okta-1", "okta", &[OKTA], "")
        + &endpoint_toml("front-1", "frontapp", &[FRONT], "")
        + &endpoint_toml("linkedin-1", "linkedin", &[LINKEDIN], "")
        + &endpoint_toml("smartcar-1", "smartcar", &[SMARTCAR], "")
        + &endpoint_toml("tebex-1", "tebex", &[TEBEX], "");
    let files = TestGateway::builder().endpoints(&endpoints).write().await;
    let gateway = BinaryGateway::start(crate::support::BinaryRole::Serve, &files.config_path, None);
    let addr = gateway.addr();
    let send = |bytes: Vec<u8>| send_raw_async(addr, bytes);

    // Dropbox: the unsigned GET challenge is echoed as text/plain with nosniff.
    let r = send(get(
        "/webhooks/dropbox-1?challenge=vJ1FS3yt2LWAr5jBh3Gbn",
        &[],
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, "vJ1FS3yt2LWAr5jBh3Gbn");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    // Markup, an over-long or empty challenge are not reflected; a GET without one is no
    // handshake (and carries no signature); HEAD and PUT are not Dropbox's methods.
    let markup = send(get(
        "/webhooks/dropbox-1?challenge=%3Cscript%3Ex%3C%2Fscript%3E",
        &[],
    ))
    .await;
    assert_refused(&markup, 400, "markup");
    assert!(!markup.body.contains("script"), "{}", markup.body);
    let long = format!("/webhooks/dropbox-1?challenge={}", "a".repeat(513));
    assert_refused(&send(get(&long, &[])).await, 400, "513 characters");
    assert_refused(
        &send(get("/webhooks/dropbox-1?challenge=", &[])).await,
        400,
        "empty",
    );
    let plain = send(get("/webhooks/dropbox-1", &[])).await;
    assert_refused(&plain, 400, "no challenge");
    assert_eq!(plain.json()["reason"], "missing_signature");
    let head = build_request("HEAD", "/webhooks/dropbox-1?challenge=x", &[], b"");
    assert_refused(&send(head).await, 405, "HEAD on dropbox");
    let put = build_request("PUT", "/webhooks/dropbox-1?challenge=x", &[], b"");
    assert_refused(&send(put).await, 405, "PUT");

    // Nylas: the same echo.
    let r = send(get("/webhooks/nylas-1?challenge=3c6d1f4e-ok", &[])).await;
    assert_eq!((r.status, r.body.as_str()), (200, "3c6d1f4e-ok"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));

    // X: the CRC answer is sha256= + base64 HMAC-SHA256(consumer secret, crc_token),
    // computed here independently of the engine.
    let token = "9b4507b3-9040-4669-9ca3-6b94edb50553";
    let r = send(get(&format!("/webhooks/x-1?crc_token={token}"), &[])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let want = format!(
        "sha256={}",
        base64::engine::general_purpose::STANDARD.encode(hmac_sha256(TWITTER, token))
    );
    assert_eq!(r.json(), serde_json::json!({ "response_token": want }));
    // A token outside letters, digits and -._~+/= is not signed.
    let r = send(get("/webhooks/x-1?crc_token=%7B%22a%22%3A1%7D", &[])).await;
    assert_refused(&r, 400, "a JSON crc_token");
    // The answer to the CRC of "12345" is a valid signature of the body "12345": such a
    // body, a JSON number, is refused as an event.
    let r = send(get("/webhooks/x-1?crc_token=12345", &[])).await;
    let signature = r.json()["response_token"].as_str().unwrap().to_owned();
    let forged = build_request(
        "POST",
        "/webhooks/x-1",
        &[
            ("Content-Type".into(), "application/json".into()),
            ("x-twitter-webhooks-signature".into(), signature),
        ],
        b"12345",
    );
    let r = send(forged).await;
    assert_refused(&r, 400, "a number body signed by a CRC answer");
    assert_eq!(r.json()["reason"], "unparseable_envelope");

    // Trello: the creation HEAD is answered 200 with nothing.
    let r = send(build_request("HEAD", "/webhooks/trello-1", &[], b"")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.is_empty());

    // Okta: the verification GET carries the hook's Authorization secret; only then is the
    // challenge header answered as {"verification": …}.
    let challenge = "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg";
    let r = send(get(
        "/webhooks/okta-1",
        &[
            ("Authorization", OKTA),
            ("X-Okta-Verification-Challenge", challenge),
        ],
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), serde_json::json!({ "verification": challenge }));
    let r = send(get(
        "/webhooks/okta-1",
        &[
            ("Authorization", "wrong"),
            ("X-Okta-Verification-Challenge", challenge),
        ],
    ))
    .await;
    assert_refused(&r, 401, "okta with a wrong secret");
    let r = send(get(
        "/webhooks/okta-1",
        &[("X-Okta-Verification-Challenge", challenge)],
    ))
    .await;
    assert_refused(&r, 400, "okta without its secret");

    // Front: the signed validation request's x-front-challenge is answered as JSON; the same
    // request with a wrong signature is not.
    let body = br#"{"type":"sync","authorization":{"id":"cmp_abc"}}"#;
    let mut headers = signed_headers("frontapp", FRONT, "", unix_now(), body);
    headers.push(("x-front-challenge".into(), "c4a7f1e0-challenge".into()));
    let r = send(build_request("POST", "/webhooks/front-1", &headers, body)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({ "challenge": "c4a7f1e0-challenge" })
    );
    let forged: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            let v = if k.eq_ignore_ascii_case("x-front-signature") {
                base64::engine::general_purpose::STANDARD.encode([7u8; 32])
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let r = send(build_request("POST", "/webhooks/front-1", &forged, body)).await;
    assert_refused(&r, 401, "front challenge with a wrong signature");

    // LinkedIn: the unsigned challengeCode GET is answered with the code and its hex HMAC.
    let code = "890e4665-4dfe-4ab1-b689-ed553bceeed0";
    let r = send(get(
        &format!("/webhooks/linkedin-1?challengeCode={code}"),
        &[],
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let hex = |bytes: Vec<u8>| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        r.json(),
        serde_json::json!({"challengeCode": code, "challengeResponse": hex(hmac_sha256(LINKEDIN, code))})
    );
    let long = format!("/webhooks/linkedin-1?challengeCode={}", "a".repeat(65));
    assert_refused(
        &send(get(&long, &[])).await,
        400,
        "a 65-character challengeCode",
    );

    // Smartcar: the signed VERIFY event is answered with the hex HMAC of its challenge.
    let body = br#"{"eventId":"52f6e0bb-1369-45da-a61c-9e67d092d6db","eventType":"VERIFY","data":{"challenge":"r4nd0m-string"},"meta":{"version":"4.0"}}"#;
    let headers = signed_headers("smartcar", SMARTCAR, "", unix_now(), body);
    let r = send(build_request(
        "POST",
        "/webhooks/smartcar-1",
        &headers,
        body,
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"challenge": hex(hmac_sha256(SMARTCAR, "r4nd0m-string"))})
    );
    let unsigned = build_request(
        "POST",
        "/webhooks/smartcar-1",
        &[("Content-Type".into(), "application/json".into())],
        body,
    );
    assert_refused(&send(unsigned).await, 400, "an unsigned VERIFY");

    // Tebex: the signed validation webhook is answered with its id.
    let body = br#"{"id":"2c116b11-1110-91e0-b266-b792c8da5f11","type":"validation.webhook","date":"2021-08-24T12:21:47+00:00","subject":{}}"#;
    let headers = signed_headers("tebex", TEBEX, "", unix_now(), body);
    let r = send(build_request("POST", "/webhooks/tebex-1", &headers, body)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"id": "2c116b11-1110-91e0-b266-b792c8da5f11"})
    );

    // No handshake stored anything; the providers' events still verify and are stored.
    let store = files.open_store().await;
    let stored = |store: &hookgate_store::SharedStore| {
        let store = store.clone();
        async move {
            store
                .list_events(&hookgate_store::EventFilter::default())
                .await
                .unwrap()
        }
    };
    assert!(
        stored(&store).await.is_empty(),
        "a handshake stores nothing"
    );
    for (endpoint, provider) in [
        ("dropbox-1", "dropbox"),
        ("nylas-1", "nylas"),
        ("x-1", "twitter"),
        ("trello-1", "trello"),
        ("okta-1", "okta"),
        ("linkedin-1", "linkedin"),
        ("smartcar-1", "smartcar"),
        ("tebex-1", "tebex"),
    ] {
        let (headers, body) = first_valid(provider);
        let r = send(build_request(
            "POST",
            &format!("/webhooks/{endpoint}"),
            &headers,
            &body,
        ))
        .await;
        assert_eq!(r.status, 200, "{provider}: {}", r.body);
        let json: Value = r.json();
        assert_eq!(json["status"], "accepted", "{provider}: {}", r.body);
    }
    let body = br#"{"type":"inbound_received","payload":{"id":"evt_1"}}"#;
    let headers = signed_headers("frontapp", FRONT, "", unix_now(), body);
    let r = send(build_request("POST", "/webhooks/front-1", &headers, body)).await;
    assert_eq!(r.json()["status"], "accepted", "{}", r.body);
    let rows = stored(&store).await;
    assert_eq!(rows.len(), 9, "one row per event, none per handshake");
    drop(gateway);
}
