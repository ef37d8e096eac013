//! Every shared vector of the six built-in providers through the real HTTP server, with the
//! clock pinned to the vector's `now`: complete valid deliveries are accepted (then a second
//! copy is a duplicate), handshakes are answered, invalid ones get their rejection.

use crate::support::*;

const PROVIDERS: &[&str] = &[
    "stripe",
    "github",
    "standard_webhooks",
    "svix",
    "shopify",
    "slack",
];

fn expected_rejection(reason: &str) -> (u16, Option<&'static str>) {
    match reason {
        "stale_timestamp" | "future_timestamp" => (401, Some("stale_timestamp")),
        "body_tampered"
        | "whitespace_changed"
        | "wrong_secret"
        | "signature_mismatch"
        | "wrong_key_derivation" => (401, Some("invalid_signature")),
        "missing_signature_header"
        | "missing_timestamp_header"
        | "missing_id_header"
        | "missing_body"
        | "malformed_signature_header" => (400, Some("bad_request")),
        // e.g. Stripe's v0-only header: no signature of a scheme we implement.
        _ => (0, None),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_vectors_over_http() {
    let mut checked = 0;
    for provider in PROVIDERS {
        for v in load_vectors(provider) {
            let name = v["name"].as_str().unwrap().to_owned();
            let headers = vector_headers(&v);
            let body = vector_body(&v);
            let valid = v["expect"] == "valid";
            let handshake =
                valid && std::str::from_utf8(&body).is_ok_and(|b| b.contains("url_verification"));
            let complete = valid && (v["event_id"].is_string() || handshake);
            let has_content_type = headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
            if valid && !complete || !has_content_type {
                continue; // not a full delivery: judged by the adapter table tests only
            }
            let secrets: Vec<&str> = v["secrets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            let endpoint = endpoint_toml("ep", provider, &secrets, "");
            let mut g = TestGateway::start(&endpoint, v["now"].as_i64().unwrap()).await;
            let request = build_request("POST", "/webhooks/ep", &headers, &body);
            let r = send_raw_async(g.addr, request.clone()).await;
            if handshake {
                assert_eq!(r.status, 200, "{name}: {}", r.body);
                let challenge =
                    serde_json::from_slice::<serde_json::Value>(&body).unwrap()["challenge"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                assert!(r.body.contains(&challenge), "{name}: {}", r.body);
                let stored = g.store().list_events(&Default::default()).await.unwrap();
                assert!(stored.is_empty(), "{name}: a handshake must not be stored");
            } else if valid {
                assert_eq!(r.status, 200, "{name}: {}", r.body);
                assert_eq!(r.json()["status"], "accepted", "{name}");
                let again = send_raw_async(g.addr, request).await;
                assert_eq!(again.json()["status"], "duplicate", "{name}");
                assert_eq!(again.json()["id"], r.json()["id"], "{name}");
                let stored = g.store().list_events(&Default::default()).await.unwrap();
                assert_eq!(stored.len(), 1, "{name}");
                assert_eq!(
                    stored[0].provider_event_id,
                    v["event_id"].as_str().unwrap(),
                    "{name}"
                );
                let idx = v["matched_secret_index"].as_u64().unwrap() as usize;
                let expected_version = format!("v{}", secrets.len() - idx);
                assert_eq!(stored[0].matched_secret_version, expected_version, "{name}");
            } else {
                let (status, error) = expected_rejection(v["reason"].as_str().unwrap());
                if status == 0 {
                    assert!(r.status == 400 || r.status == 401, "{name}: {}", r.status);
                } else {
                    assert_eq!(r.status, status, "{name}: {}", r.body);
                    assert_eq!(r.json()["error"].as_str(), error, "{name}");
                }
                assert!(
                    g.store()
                        .list_events(&Default::default())
                        .await
                        .unwrap()
                        .is_empty(),
                    "{name}"
                );
            }
            checked += 1;
            g.stop().await;
        }
    }
    assert!(checked >= 50, "only {checked} vectors went through HTTP");
}
