//! Every vector of every built-in pack through the real HTTP server — one gateway per provider,
//! each vector on an endpoint of its own configured from the vector (`secrets`, `config` → `options`, `url` →
//! `public_url`, the request carrying the URL's query), with the clock pinned to the vector's
//! `now`: valid deliveries are answered 200 (or the provider's own answer) with one inbox row
//! per logical event whose `provider_event_id` is the vector's `event_id` (each element of a
//! batch), and a second copy converges on the same rows; handshakes get the provider's answer
//! and store nothing; invalid ones get their rejection. Then what the pack engine adds over
//! HTTP: replays of unsigned ids (GitHub, Shopify), batches all or nothing (SendGrid, Adyen),
//! Mailgun's reused token.

use std::collections::BTreeMap;

use hookgate_providers::pack::{self, Answer, Delivery, EndpointOptions, Pack, RequestContext};
use hookgate_providers::{SecretMaterial, SignRequest, TrustedSecret};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::Value;

use crate::support::*;

/// Invalid vectors refused earlier than their reason code says (as in the engine's table).
const EARLIER_REJECTIONS: &[(&str, u16, &str)] = &[
    (
        "mollie/shared/invalid_classic_unsigned_webhook",
        415,
        "unsupported_media_type",
    ),
    // a signed header of the template (Anthropic's webhook-id; its id is the body's)
    (
        "anthropic/shared/invalid_missing_id_header",
        400,
        "bad_request",
    ),
    // no signature under the pack's key (v1, not v0): nothing matches
    (
        "elevenlabs/shared/invalid_malformed_signature",
        401,
        "invalid_signature",
    ),
];

/// Invalid vectors whose only difference is trailing whitespace of a header value: HTTP does
/// not carry it (RFC 9110 §5.5: optional whitespace around a field value is not part of it),
/// so over the wire they are the valid delivery. The engine's table test refuses them.
const TRIMMED_ON_THE_WIRE: &[&str] = &["gitlab/shared/invalid_token_trailing_space"];

/// The status, error and (400) reason a rejected vector gets over HTTP.
fn expected_rejection(name: &str, reason: &str) -> (u16, &'static str, Option<&'static str>) {
    if let Some((_, status, error)) = EARLIER_REJECTIONS.iter().find(|(n, ..)| *n == name) {
        return (*status, error, None);
    }
    let bad = |r| (400, "bad_request", Some(r));
    match reason {
        "signature_mismatch"
        | "body_tampered"
        | "whitespace_changed"
        | "wrong_secret"
        | "wrong_key_derivation"
        | "unsupported_scheme"
        | "url_mismatch"
        | "body_hash_mismatch" => (401, "invalid_signature", None),
        "stale_timestamp" | "future_timestamp" => (401, "stale_timestamp", None),
        "missing_signature_header" => bad("missing_signature"),
        "missing_timestamp_header" | "missing_timestamp" => bad("missing_timestamp"),
        "missing_id_header" => bad("missing_id"),
        "missing_body" => bad("missing_body"),
        "malformed_signature_header" => bad("malformed_signature"),
        other => panic!("{name}: unmapped reason {other}"),
    }
}

/// The endpoint a vector needs: its secrets (first = newest), `public_url` and options.
fn vector_endpoint(id: &str, provider: &str, v: &Value) -> String {
    let secrets: Vec<&str> = v["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let mut extra = String::new();
    if let Some(url) = v.get("url").and_then(Value::as_str) {
        extra.push_str(&format!("public_url = {}\n", q(url)));
    }
    let options = vector_options(v);
    if !options.is_empty() {
        let pairs: Vec<String> = options
            .iter()
            .map(|(k, v)| format!("{k} = {}", q(v)))
            .collect();
        extra.push_str(&format!("options = {{ {} }}\n", pairs.join(", ")));
    }
    endpoint_toml(id, provider, &secrets, &extra)
}

/// The vector's `config` minus test data: exactly the pack's option names.
fn vector_options(v: &Value) -> BTreeMap<String, String> {
    let mut options = BTreeMap::new();
    if let Some(Value::Object(config)) = v.get("config") {
        for (k, value) in config {
            if k != "expected_response" {
                options.insert(k.clone(), value.as_str().unwrap().to_owned());
            }
        }
    }
    options
}

/// The request path: the endpoint, with the signed URL's query (providers post to the URL
/// they sign).
fn vector_path(endpoint: &str, v: &Value) -> String {
    match v
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| u.split_once('?'))
    {
        Some((_, query)) => format!("/webhooks/{endpoint}?{query}"),
        None => format!("/webhooks/{endpoint}"),
    }
}

/// What the pack engine itself makes of a valid vector (handshake, or events with their
/// answer), to compare the HTTP layer with; `None` when it refuses it after verification.
fn engine_delivery(pack: &Pack, v: &Value, body: &[u8]) -> Option<Delivery> {
    let mut headers = HeaderMap::new();
    for (k, value) in vector_headers(v) {
        headers.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    let options = pack.check_options(&vector_options(v)).unwrap();
    let options: &EndpointOptions = &options;
    let ctx = RequestContext {
        method: &Method::POST,
        headers: &headers,
        raw_query: None,
        public_url: v.get("url").and_then(Value::as_str),
        options,
    };
    let keys: Vec<SecretMaterial> = v["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| pack.decode_secret(s.as_str().unwrap()).unwrap())
        .collect();
    let trusted: Vec<TrustedSecret<'_>> = keys
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    let metadata = pack.parse_metadata(&ctx).ok()?;
    let now = v["now"].as_i64().unwrap();
    let verified = pack
        .verify(
            &ctx,
            &metadata,
            body,
            &trusted,
            now,
            pack.default_tolerance_seconds(),
        )
        .ok()?;
    pack.extract(
        &ctx,
        &metadata,
        body,
        Some(&keys[verified.matched_secret_index]),
    )
    .ok()
}

/// The handshake answer the provider expects (independent of the engine).
fn expected_handshake(provider: &str, v: &Value, body: &[u8]) -> Value {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Some(expected) = v.get("config").and_then(|c| c.get("expected_response")) {
        expected.clone()
    } else if json["type"] == "url_verification" {
        serde_json::json!({"challenge": json["challenge"]})
    } else if provider == "discord" {
        serde_json::json!({"type": 1})
    } else {
        Value::String(json["challenge"].as_str().unwrap().to_owned())
    }
}

fn vector_ids(v: &Value) -> Option<Vec<String>> {
    match &v["event_id"] {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => Some(
            items
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect(),
        ),
        _ => None,
    }
}

/// The response must be the provider's required answer, byte for byte.
fn assert_provider_answer(name: &str, r: &RawResponse, answer: &Answer) {
    assert_eq!(r.status, answer.status, "{name}: {}", r.body);
    assert_eq!(
        r.header("content-type"),
        answer.content_type,
        "{name}: content type"
    );
    assert_eq!(r.body.as_bytes(), &answer.body[..], "{name}: body");
}

/// hookgate's own answer to the events of one request: `(inbox ids, statuses)`.
fn own_answer(name: &str, r: &RawResponse, events: usize) -> (Vec<String>, Vec<String>) {
    assert_eq!(r.status, 200, "{name}: {}", r.body);
    let json = r.json();
    if events == 1 {
        return (
            vec![json["id"].as_str().unwrap().to_owned()],
            vec![json["status"].as_str().unwrap().to_owned()],
        );
    }
    assert_eq!(json["status"], "accepted", "{name}");
    let items = json["events"].as_array().unwrap();
    assert_eq!(items.len(), events, "{name}: {}", r.body);
    items
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_owned(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .unzip()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vector_over_http_one_gateway_per_provider() {
    let mut failures = Vec::new();
    let mut total = 0;
    let (mut events_stored, mut handshakes, mut rejections) = (0, 0, 0);
    // Every built-in pack, with the vector count it declares (the provider crate's table test
    // checks each declared count against its files). One gateway per provider, with one
    // endpoint per vector (its secrets, `public_url` and options) and the clock set to each
    // vector's `now` before it is sent.
    for pack in pack::builtin_packs() {
        let provider = pack.id();
        let vectors = load_vectors(provider);
        assert_eq!(
            vectors.len(),
            pack.vectors() as usize,
            "{provider}: vector count"
        );
        let endpoints: String = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| vector_endpoint(&format!("v{i}"), provider, v))
            .collect();
        let mut g = TestGateway::start(&endpoints, vectors[0]["now"].as_i64().unwrap()).await;
        for (i, v) in vectors.into_iter().enumerate() {
            total += 1;
            let endpoint = format!("v{i}");
            g.clock().set_secs(v["now"].as_i64().unwrap());
            let name = v["name"].as_str().unwrap().to_owned();
            let headers = vector_headers(&v);
            let body = vector_body(&v);
            let method = v["method"].as_str().unwrap_or("POST").to_owned();
            let request = build_request(&method, &vector_path(&endpoint, &v), &headers, &body);
            let r = send_raw_async(g.addr, request.clone()).await;
            let stored = events_of(&g, &endpoint).await;
            if TRIMMED_ON_THE_WIRE.contains(&name.as_str()) {
                // What differs is whitespace HTTP does not carry: the field arrives as the
                // valid token, and is accepted like it.
                assert_eq!(r.status, 200, "{name}: {}", r.body);
                assert_eq!(stored.len(), 1, "{name}");
                rejections += 1;
                continue;
            }
            if v["expect"] != "valid" {
                let (status, error, reason) =
                    expected_rejection(&name, v["reason"].as_str().unwrap());
                if r.status != status
                    || r.json()["error"] != error
                    || reason.is_some_and(|want| r.json()["reason"] != want)
                {
                    failures.push(format!("{name}: got {} {}", r.status, r.body));
                }
                if !stored.is_empty() {
                    failures.push(format!("{name}: a refused request stored rows"));
                }
                rejections += 1;
                continue;
            }
            match engine_delivery(pack, &v, &body) {
                Some(Delivery::Handshake(answer)) => {
                    assert_provider_answer(&name, &r, &answer);
                    let want = expected_handshake(provider, &v, &body);
                    let got: Value = serde_json::from_str(&r.body)
                        .unwrap_or_else(|_| Value::String(r.body.clone()));
                    assert_eq!(got, want, "{name}: handshake answer");
                    assert!(stored.is_empty(), "{name}: a handshake must not be stored");
                    handshakes += 1;
                }
                Some(Delivery::Events { events, answer, .. }) => {
                    // The vector's ids when it names them, else the ids the pack composes
                    // (the engine's table test pins those).
                    let want_ids = vector_ids(&v)
                        .unwrap_or_else(|| events.iter().map(|e| e.event_id.clone()).collect());
                    let got_ids: Vec<&str> = stored
                        .iter()
                        .map(|e| e.provider_event_id.as_str())
                        .collect();
                    let mut sorted_want: Vec<&str> = want_ids.iter().map(String::as_str).collect();
                    sorted_want.sort_unstable();
                    let mut sorted_got = got_ids.clone();
                    sorted_got.sort_unstable();
                    assert_eq!(sorted_got, sorted_want, "{name}: stored event ids");
                    let idx = v["matched_secret_index"].as_u64().unwrap() as usize;
                    let secrets = v["secrets"].as_array().unwrap().len();
                    for row in &stored {
                        assert_eq!(
                            row.matched_secret_version,
                            format!("v{}", secrets - idx),
                            "{name}"
                        );
                        assert_eq!(row.provider, *provider, "{name}");
                    }
                    let again = send_raw_async(g.addr, request).await;
                    match &answer {
                        Some(answer) => {
                            assert_provider_answer(&name, &r, answer);
                            assert_provider_answer(&name, &again, answer);
                        }
                        None => {
                            let (ids, statuses) = own_answer(&name, &r, want_ids.len());
                            assert!(statuses.iter().all(|s| s == "accepted"), "{name}");
                            let (ids_again, statuses_again) =
                                own_answer(&name, &again, want_ids.len());
                            assert!(statuses_again.iter().all(|s| s == "duplicate"), "{name}");
                            assert_eq!(ids_again, ids, "{name}: a copy converges on its rows");
                            for (id, event_id) in ids.iter().zip(&want_ids) {
                                let row = stored.iter().find(|e| e.inbox_id == *id).unwrap();
                                assert_eq!(&row.provider_event_id, event_id, "{name}: order");
                            }
                        }
                    }
                    assert_eq!(
                        events_of(&g, &endpoint).await.len(),
                        want_ids.len(),
                        "{name}: copy stored"
                    );
                    events_stored += want_ids.len();
                }
                None => {
                    // Verified, but without a logical id (docs vectors without delivery
                    // headers, slash commands): 400, nothing stored.
                    assert!(vector_ids(&v).is_none(), "{name}: the engine refused it");
                    assert_eq!(r.status, 400, "{name}: {}", r.body);
                    let reason = r.json()["reason"].as_str().unwrap().to_owned();
                    assert!(
                        reason == "missing_event_id" || reason == "unparseable_envelope",
                        "{name}: {reason}"
                    );
                    assert!(stored.is_empty(), "{name}");
                    rejections += 1;
                }
            }
        }
        g.stop().await;
    }
    assert!(
        failures.is_empty(),
        "{} vectors wrong over HTTP:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let declared: u32 = pack::builtin_packs().iter().map(Pack::vectors).sum();
    assert_eq!(total, declared as usize);
    // At least the Slack, Zoom, Twitch and Discord handshakes; rows from the valid deliveries
    // (batches included); the rest refused (with the verified ones that carry no id).
    assert!(handshakes >= 4, "{handshakes} handshakes");
    assert!(events_stored >= 100, "{events_stored} rows");
    assert!(rejections >= 161, "{rejections} refused");
}

/// The rows one endpoint of a shared gateway stored.
async fn events_of(g: &TestGateway, endpoint: &str) -> Vec<hookgate_store::InboxRecord> {
    g.events()
        .await
        .into_iter()
        .filter(|e| e.endpoint_id == endpoint)
        .collect()
}

/// The `hookgate_requests_total` sample of one outcome on one endpoint, if any.
async fn requests_counted(g: &TestGateway, endpoint: &str, outcome: &str) -> u64 {
    let r = send_raw_async(g.admin, build_request("GET", "/metrics", &[], b"")).await;
    r.body
        .lines()
        .filter(|l| l.starts_with("hookgate_requests_total{"))
        .filter(|l| l.contains(&format!("endpoint=\"{endpoint}\"")))
        .filter(|l| l.contains(&format!("outcome=\"{outcome}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A captured GitHub or Shopify delivery replayed under a fresh id header verifies (the id is
/// not signed) but answers `duplicate` of the first row, stores nothing and is counted; a
/// replay under another topic is the same duplicate; a different body is a new event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_of_unsigned_ids_are_duplicates_of_the_first_row() {
    const NOW: i64 = 1_767_225_600;
    for (provider, endpoint, secret) in [
        ("github", "gh-replay", "gh-replay-secret"),
        ("shopify", "shop-replay", "shop-replay-secret"),
    ] {
        let mut g =
            TestGateway::start(&endpoint_toml(endpoint, provider, &[secret], ""), NOW).await;
        let body = br#"{"action":"opened","number":7,"order":{"id":820982911946154508}}"#;
        let first = post_signed(g.addr, endpoint, provider, secret, "delivery-1", NOW, body).await;
        assert_eq!(first.status, 200, "{provider}: {}", first.body);
        assert_eq!(first.json()["status"], "accepted", "{provider}");
        let first_id = first.json()["id"].as_str().unwrap().to_owned();

        // The same bytes under a fresh id header, and under another topic.
        let replay = post_signed(g.addr, endpoint, provider, secret, "delivery-2", NOW, body).await;
        assert_eq!(replay.status, 200, "{provider}: {}", replay.body);
        assert_eq!(replay.json()["status"], "duplicate", "{provider}");
        assert_eq!(replay.json()["id"], first_id.as_str(), "{provider}");
        let mut headers = signed_headers(provider, secret, "delivery-3", NOW, body);
        for (name, value) in headers.iter_mut() {
            if name.eq_ignore_ascii_case("x-github-event")
                || name.eq_ignore_ascii_case("x-shopify-topic")
            {
                *value = "another.topic".into();
            }
        }
        let path = format!("/webhooks/{endpoint}");
        let topic = send_raw_async(g.addr, build_request("POST", &path, &headers, body)).await;
        assert_eq!(
            topic.json()["status"],
            "duplicate",
            "{provider}: {}",
            topic.body
        );
        assert_eq!(topic.json()["id"], first_id.as_str(), "{provider}");
        let rows = g.events().await;
        assert_eq!(rows.len(), 1, "{provider}: a replay creates no work");
        assert_eq!(rows[0].provider_event_id, "delivery-1", "{provider}");
        assert_eq!(
            requests_counted(&g, endpoint, "replay_suspected").await,
            2,
            "{provider}: replays are counted"
        );

        // A redelivery under the same id is an ordinary duplicate; another body is new.
        let redelivery =
            post_signed(g.addr, endpoint, provider, secret, "delivery-1", NOW, body).await;
        assert_eq!(redelivery.json()["status"], "duplicate", "{provider}");
        assert_eq!(redelivery.json()["id"], first_id.as_str(), "{provider}");
        let other = br#"{"action":"closed","number":7,"order":{"id":820982911946154508}}"#;
        let new = post_signed(g.addr, endpoint, provider, secret, "delivery-4", NOW, other).await;
        assert_eq!(new.json()["status"], "accepted", "{provider}: {}", new.body);
        assert_ne!(new.json()["id"], first_id.as_str(), "{provider}");
        assert_eq!(g.events().await.len(), 2, "{provider}");
        assert_eq!(
            requests_counted(&g, endpoint, "replay_suspected").await,
            2,
            "{provider}"
        );
        g.stop().await;
    }
}

/// One valid vector of `provider` by name.
fn vector(provider: &str, name: &str) -> Value {
    load_vectors(provider)
        .into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

/// A batch is one unit: every item is its own row, committed together; one bad item refuses
/// the whole request and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_one_bad_item_is_refused_whole() {
    // SendGrid signs the whole array (ECDSA): one byte of the second item changed.
    let v = vector("sendgrid", "sendgrid/shared/valid_batch");
    let body = String::from_utf8(vector_body(&v)).unwrap();
    let ids = vector_ids(&v).unwrap();
    assert_eq!(ids.len(), 3);
    let tampered = body.replacen(&ids[1], &format!("{}x", ids[1]), 1);
    assert_ne!(tampered, body);
    let mut g = TestGateway::start(
        &vector_endpoint("ep", "sendgrid", &v),
        v["now"].as_i64().unwrap(),
    )
    .await;
    let r = send_raw_async(
        g.addr,
        build_request(
            "POST",
            "/webhooks/ep",
            &vector_headers(&v),
            tampered.as_bytes(),
        ),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(g.events().await.is_empty(), "nothing of a refused batch");
    g.stop().await;

    // Adyen signs each item: a batch signed by the pack, then one item's amount changed.
    let v = vector("adyen", "adyen/shared/valid_batch_three_items");
    let secret = v["secrets"][0].as_str().unwrap().to_owned();
    let adyen = pack::builtin("adyen").unwrap();
    let key = adyen.decode_secret(&secret).unwrap();
    let now = v["now"].as_i64().unwrap();
    let unsigned: Value = serde_json::from_slice(&vector_body(&v)).unwrap();
    let mut plain = unsigned.clone();
    for item in plain["notificationItems"].as_array_mut().unwrap() {
        item["NotificationRequestItem"]["additionalData"]
            .as_object_mut()
            .map(|d| d.remove("hmacSignature"));
    }
    let plain = plain.to_string();
    let signed = adyen.sign_delivery(
        &key,
        &SignRequest {
            event_id: "unused",
            event_type: None,
            timestamp: now,
            body: plain.as_bytes(),
        },
        &pack::SignTarget::default(),
    );
    let mut g = TestGateway::start(&vector_endpoint("ep", "adyen", &v), now).await;
    let headers: Vec<(String, String)> = signed
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let mut bad: Value = serde_json::from_slice(&signed.body).unwrap();
    bad["notificationItems"][1]["NotificationRequestItem"]["amount"]["value"] =
        Value::from(999_999);
    let bad = bad.to_string();
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/ep", &headers, bad.as_bytes()),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(g.events().await.is_empty(), "nothing of a refused batch");
    // The batch as signed: three rows, Adyen's own answer.
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/ep", &headers, &signed.body),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, "[accepted]"));
    let rows = g.events().await;
    assert_eq!(rows.len(), 3);
    let mut stored: Vec<&str> = rows.iter().map(|e| e.provider_event_id.as_str()).collect();
    stored.sort_unstable();
    let mut want = vector_ids(&v).unwrap();
    want.sort_unstable();
    assert_eq!(stored, want);
    g.stop().await;
}

/// Mailgun signs a one-time token: a delivery that reuses it answers 200 `duplicate` of the row
/// it first created, never 401, and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_mailgun_token_is_a_duplicate_of_the_first_row() {
    let v = vector("mailgun", "mailgun/shared/valid_json_webhook");
    let now = v["now"].as_i64().unwrap();
    let secret = v["secrets"][0].as_str().unwrap().to_owned();
    let mailgun = pack::builtin("mailgun").unwrap();
    let key = mailgun.decode_secret(&secret).unwrap();
    let mut g = TestGateway::start(&vector_endpoint("mg-token", "mailgun", &v), now).await;
    let first = send_raw_async(
        g.addr,
        build_request(
            "POST",
            "/webhooks/mg-token",
            &vector_headers(&v),
            &vector_body(&v),
        ),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["status"], "accepted");
    let first_id = first.json()["id"].as_str().unwrap().to_owned();

    // Another event, signed again with the same token (and timestamp).
    let mut doc: Value = serde_json::from_slice(&vector_body(&v)).unwrap();
    doc["event-data"]["id"] = Value::from("another-event-id");
    doc["signature"]
        .as_object_mut()
        .unwrap()
        .remove("signature");
    let body = doc.to_string();
    let signed = mailgun.sign_delivery(
        &key,
        &SignRequest {
            event_id: "another-event-id",
            event_type: None,
            timestamp: now,
            body: body.as_bytes(),
        },
        &pack::SignTarget::default(),
    );
    let resigned: Value = serde_json::from_slice(&signed.body).unwrap();
    assert_eq!(
        resigned["signature"]["token"],
        v_token(&v),
        "the token is kept"
    );
    let headers: Vec<(String, String)> = signed
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let reuse = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/mg-token", &headers, &signed.body),
    )
    .await;
    assert_eq!(reuse.status, 200, "{}", reuse.body);
    assert_eq!(reuse.json()["status"], "duplicate");
    assert_eq!(reuse.json()["id"], first_id.as_str());
    let rows = g.events().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].provider_event_id, v["event_id"].as_str().unwrap());
    assert_eq!(
        requests_counted(&g, "mg-token", "replay_suspected").await,
        1
    );
    g.stop().await;
}

fn v_token(v: &Value) -> Value {
    let doc: Value = serde_json::from_slice(&vector_body(v)).unwrap();
    doc["signature"]["token"].clone()
}
