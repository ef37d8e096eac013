//! Over HTTP through the real server: a pack's `content_encoding` (Stream Chat's gzip bodies
//! are verified decoded, within `max_body_bytes` counted after decoding; other codings are
//! 415) and token handshakes (Meta's unsigned GET verification request, answered only when
//! `hub.verify_token` equals the endpoint's option).

use std::io::Write;

use crate::support::{TestGateway, build_request, endpoint_toml, send_raw_async, signed_headers};

const NOW: i64 = 1_767_225_600;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn with_header(
    mut headers: Vec<(String, String)>,
    name: &str,
    value: &str,
) -> Vec<(String, String)> {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
    headers
}

#[tokio::test]
async fn gzip_bodies_are_verified_decoded_within_the_limit_and_other_codings_refused() {
    let secret = "stream-api-secret";
    let toml = endpoint_toml(
        "stream-1",
        "stream_chat",
        &[secret],
        "max_body_bytes = 4096",
    ) + &endpoint_toml("stripe-1", "stripe", &["whsec_plain"], "");
    let mut g = TestGateway::start(&toml, NOW).await;
    let path = "/webhooks/stream-1";
    let body = br#"{"type":"message.new","cid":"messaging:general","message":{"id":"m-1"}}"#;
    let headers = signed_headers("stream_chat", secret, "wh-1", NOW, body);

    // The signature covers the decoded bytes.
    let coded = with_header(headers.clone(), "Content-Encoding", "gzip");
    let r = send_raw_async(g.addr, build_request("POST", path, &coded, &gzip(body))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    let rows = g.events().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].provider_event_id, "wh-1");

    // A small coded body that decodes past the limit, corrupt coded bytes, another coding.
    let bomb = gzip(&vec![b' '; 64 * 1024]);
    assert!(bomb.len() < 4096, "the coded bomb fits the limit itself");
    let r = send_raw_async(g.addr, build_request("POST", path, &coded, &bomb)).await;
    assert_eq!(r.status, 413, "{}", r.body);
    let r = send_raw_async(
        g.addr,
        build_request("POST", path, &coded, b"not gzip at all"),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["reason"], "undecodable_body");
    let brotli = with_header(headers.clone(), "Content-Encoding", "br");
    let r = send_raw_async(g.addr, build_request("POST", path, &brotli, body)).await;
    assert_eq!(r.status, 415, "{}", r.body);

    // A pack that declares no coding refuses gzip before reading the body.
    let stripe = with_header(
        signed_headers("stripe", "whsec_plain", "evt_1", NOW, body),
        "Content-Encoding",
        "gzip",
    );
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/stripe-1", &stripe, &gzip(body)),
    )
    .await;
    assert_eq!(r.status, 415, "{}", r.body);
    assert_eq!(g.events().await.len(), 1, "nothing else was stored");
    g.stop().await;
}

#[tokio::test]
async fn meta_verification_request_is_answered_only_with_the_endpoint_token() {
    let secret = "meta-app-secret";
    let toml = endpoint_toml(
        "meta-1",
        "meta",
        &[secret],
        r#"options = { verify_token = "tok-1" }"#,
    ) + &endpoint_toml("meta-2", "meta", &[secret], "");
    let mut g = TestGateway::start(&toml, NOW).await;
    let get = |path: String| build_request("GET", &path, &[], b"");

    let ok = "/webhooks/meta-1?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=tok-1";
    let r = send_raw_async(g.addr, get(ok.to_owned())).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, "1158201444");

    // A wrong token, an endpoint without the option, a GET that is no verification request.
    let wrong = "/webhooks/meta-1?hub.mode=subscribe&hub.challenge=1&hub.verify_token=tok-2";
    assert_eq!(
        send_raw_async(g.addr, get(wrong.to_owned())).await.status,
        401
    );
    let unset = "/webhooks/meta-2?hub.mode=subscribe&hub.challenge=1&hub.verify_token=tok-1";
    assert_eq!(
        send_raw_async(g.addr, get(unset.to_owned())).await.status,
        401
    );
    let other = "/webhooks/meta-1?hub.challenge=1&hub.verify_token=tok-1";
    let r = send_raw_async(g.addr, get(other.to_owned())).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["reason"], "missing_signature");
    assert!(g.events().await.is_empty(), "a handshake stores nothing");

    // Notifications are signed POSTs, identified by their signature.
    let body = br#"{"object":"page","entry":[{"id":"1","time":1767225590,"changes":[]}]}"#;
    let headers = signed_headers("meta", secret, "", NOW, body);
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/meta-1", &headers, body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    let rows = g.events().await;
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].provider_event_id.starts_with("sig:"),
        "{}",
        rows[0].provider_event_id
    );
    let unsigned = with_header(headers, "X-Hub-Signature-256", "sha256=00");
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/meta-1", &unsigned, body),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    g.stop().await;
}

#[tokio::test]
async fn oura_verification_request_and_upper_case_hex_signatures() {
    let secret = "oura-client-secret";
    let toml = endpoint_toml(
        "oura-1",
        "oura",
        &[secret],
        r#"options = { verification_token = "vt-1" }"#,
    );
    let mut g = TestGateway::start(&toml, NOW).await;
    let get = |path: &str| build_request("GET", path, &[], b"");

    // The subscription GET is answered {"challenge": …} only with the endpoint's token.
    let r = send_raw_async(
        g.addr,
        get("/webhooks/oura-1?verification_token=vt-1&challenge=ch4ll-3nge"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), serde_json::json!({"challenge": "ch4ll-3nge"}));
    let wrong = get("/webhooks/oura-1?verification_token=vt-2&challenge=x");
    assert_eq!(send_raw_async(g.addr, wrong).await.status, 401);
    assert!(g.events().await.is_empty(), "a handshake stores nothing");

    // `hookgate send`'s signing writes upper-case hex, which verifies; so does the same
    // signature in lower case (the case is not confirmed), and a changed body does not.
    let body = br#"{"event_type":"create","data_type":"sleep","object_id":"o-1","event_time":"2025-12-31T23:59:50+00:00","user_id":"u"}"#;
    let headers = signed_headers("oura", secret, "", NOW - 2, body);
    let sig = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-oura-signature"))
        .map(|(_, v)| v.clone())
        .unwrap();
    assert_eq!(sig.len(), 64);
    assert!(
        sig.chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()),
        "{sig}"
    );
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/oura-1", &headers, body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rows = g.events().await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].provider_event_id, "sleep:create:o-1");
    let lower: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            let v = if k.eq_ignore_ascii_case("x-oura-signature") {
                v.to_ascii_lowercase()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/oura-1", &lower, body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "duplicate", "{}", r.body);
    let mut tampered = body.to_vec();
    tampered[20] ^= 1;
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/oura-1", &headers, &tampered),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(g.events().await.len(), 1);
    g.stop().await;
}
