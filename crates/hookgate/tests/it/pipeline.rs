//! Every row of the response table (`docs/receiving.md`), from raw bytes over a real socket.

use hookgate_core::InboxStatus;
use hookgate_store::EventFilter;

use crate::support::*;

const NOW: i64 = 1_764_547_200;
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SW_OLD: &str = "whsec_aG9va2dhdGUtb2xkLXNlY3JldC1mb3ItdGVzdHMh";
const STRIPE_SECRET: &str = "whsec_test_pipeline_secret";
const SLACK_SECRET: &str = "slack-test-signing-secret";

fn endpoints() -> String {
    [
        endpoint_toml("sw", "standard_webhooks", &[SW_SECRET, SW_OLD], "max_body_bytes = 1024\nallowed_event_types = [\"invoice.*\", \"user.created\"]"),
        endpoint_toml("stripe", "stripe", &[STRIPE_SECRET], ""),
        endpoint_toml("slack", "slack", &[SLACK_SECRET], ""),
        endpoint_toml("budget", "standard_webhooks", &[SW_SECRET], "rate_limit = { per_second = 1, burst = 2 }"),
        format!(
            "[[endpoints]]\nid = \"rotating\"\nprovider = \"standard_webhooks\"\nsecrets = [\
             {{ version = \"v3\", value = {} }}, \
             {{ version = \"v2\", value = {}, retired = true }}, \
             {{ version = \"v1\", value = \"whsec_ZXhwaXJlZC1zZWNyZXQtZm9yLXRlc3RzLTEyMzQ=\", not_after = \"2025-01-01T00:00:00Z\" }}]\n",
            q(SW_SECRET), q(SW_OLD)
        ),
        format!(
            "[[endpoints]]\nid = \"all-retired\"\nprovider = \"standard_webhooks\"\nsecrets = [{{ version = \"v1\", value = {}, retired = true }}]\n",
            q(SW_SECRET)
        ),
    ]
    .concat()
}

fn sw_body(kind: &str) -> Vec<u8> {
    format!(r#"{{"type":"{kind}","data":{{"id":"inv_1"}}}}"#).into_bytes()
}

/// The gateway these tests run: SQLite, the clock pinned at [`NOW`], no workers.
fn gateway() -> GatewayBuilder {
    TestGateway::builder()
        .fixed_clock(NOW)
        .workers(0)
        .endpoints(&endpoints())
}

async fn post_sw(
    g: &TestGateway,
    endpoint: &str,
    secret: &str,
    id: &str,
    body: &[u8],
) -> RawResponse {
    post_signed(g.addr, endpoint, "standard_webhooks", secret, id, NOW, body).await
}

async fn rows(g: &TestGateway) -> Vec<hookgate_store::InboxRecord> {
    g.store()
        .list_events(&EventFilter::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn unknown_endpoint_and_method() {
    let mut g = gateway().start().await;
    let r = send_raw_async(g.addr, build_request("POST", "/webhooks/nope", &[], b"{}")).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("unknown_endpoint"))
    );
    let r = send_raw_async(g.addr, build_request("POST", "/other", &[], b"{}")).await;
    assert_eq!(r.status, 404);
    let r = send_raw_async(g.addr, build_request("GET", "/webhooks/sw", &[], b"")).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["error"], "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    g.stop().await;
}

#[tokio::test]
async fn content_type_headers_and_size() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    let mut headers = signed_headers("standard_webhooks", SW_SECRET, "msg_1", NOW, &body);

    // 415: the adapter does not accept text/plain.
    let mut wrong_type = headers.clone();
    wrong_type.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
    wrong_type.push(("Content-Type".into(), "text/plain".into()));
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &wrong_type, &body),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (415, Some("unsupported_media_type"))
    );

    // 400: no signature header.
    let missing: Vec<_> = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("webhook-signature"))
        .cloned()
        .collect();
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &missing, &body),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "bad_request");
    assert_eq!(r.json()["reason"], "missing_signature");

    // 400: the signature header twice.
    let sig = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("webhook-signature"))
        .unwrap()
        .clone();
    let mut doubled = headers.clone();
    doubled.push(sig);
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &doubled, &body),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["reason"], "duplicated_signature");

    // 400: too many headers.
    let mut many = headers.clone();
    for i in 0..80 {
        many.push((format!("X-Filler-{i}"), "x".into()));
    }
    let r = send_raw_async(g.addr, build_request("POST", "/webhooks/sw", &many, &body)).await;
    assert!(r.status == 400 || r.status == 431, "got {}", r.status);

    // 413 from Content-Length alone (the endpoint limit is 1024 bytes).
    let big = vec![b'a'; 4096];
    let big_headers = signed_headers("standard_webhooks", SW_SECRET, "msg_big", NOW, &big);
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &big_headers, &big),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (413, Some("payload_too_large"))
    );

    // 413 while streaming: chunked, no Content-Length.
    let mut chunked = big_headers.clone();
    chunked.push(("Transfer-Encoding".into(), "chunked".into()));
    chunked.push(("Content-Length".into(), String::new()));
    chunked.retain(|(k, v)| !(k == "Content-Length" && v.is_empty()));
    let mut raw = String::from("POST /webhooks/sw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (k, v) in &big_headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("Transfer-Encoding: chunked\r\n\r\n");
    let mut bytes = raw.into_bytes();
    for chunk in big.chunks(512) {
        bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        bytes.extend_from_slice(chunk);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    let r = send_raw_async(g.addr, bytes).await;
    assert_eq!(r.status, 413);

    // A Content-Length that understates the body reads only what it declares: the signature
    // is over fewer bytes, so it cannot verify.
    let mut lying = headers.clone();
    lying.push(("Content-Length".into(), (body.len() - 5).to_string()));
    let r = send_raw_async(g.addr, build_request("POST", "/webhooks/sw", &lying, &body)).await;
    assert_eq!(r.status, 401);

    // Nothing of the above was stored.
    assert!(rows(&g).await.is_empty());

    // Finally the same request, well-formed, is accepted.
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-length"));
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &headers, &body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    g.stop().await;
}

#[tokio::test]
async fn signature_and_timestamp_rejections() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    let r = post_sw(
        &g,
        "sw",
        "whsec_d3Jvbmctc2VjcmV0LWZvci10ZXN0cy0xMjM0NQ==",
        "msg_x",
        &body,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (401, Some("invalid_signature"))
    );

    let stale = post_signed(
        g.addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_s",
        NOW - 301,
        &body,
    )
    .await;
    assert_eq!(
        (stale.status, stale.json()["error"].as_str()),
        (401, Some("stale_timestamp"))
    );
    let future = post_signed(
        g.addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_f",
        NOW + 301,
        &body,
    )
    .await;
    assert_eq!(future.json()["error"], "stale_timestamp");
    // A stale timestamp with a bad signature is an invalid signature (signature first).
    let both = post_signed(
        g.addr,
        "sw",
        "standard_webhooks",
        SW_OLD.replace('a', "b").as_str(),
        "msg_b",
        NOW - 999,
        &body,
    )
    .await;
    assert_eq!(both.status, 401);
    // Rejection bodies never echo input.
    for r in [&r, &stale, &future, &both] {
        assert!(
            !r.body.contains("inv_1") && !r.body.contains("msg_"),
            "{}",
            r.body
        );
    }
    assert!(rows(&g).await.is_empty());
    g.stop().await;
}

#[tokio::test]
async fn verified_without_event_id_or_unparseable() {
    let mut g = gateway().start().await;
    let no_id = br#"{"object":"event","type":"charge.refunded"}"#;
    let r = post_signed(
        g.addr,
        "stripe",
        "stripe",
        STRIPE_SECRET,
        "ignored",
        NOW,
        no_id,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"], "bad_request");
    assert_eq!(r.json()["reason"], "missing_event_id");
    let not_json = b"this is not json";
    let r = post_signed(
        g.addr,
        "stripe",
        "stripe",
        STRIPE_SECRET,
        "ignored",
        NOW,
        not_json,
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(rows(&g).await.is_empty());
    g.stop().await;
}

#[tokio::test]
async fn slack_handshake_is_answered_not_stored() {
    let mut g = gateway().start().await;
    let body = br#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let r = post_signed(g.addr, "slack", "slack", SLACK_SECRET, "", NOW, body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body
            .contains("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    );
    // A forged handshake is not answered.
    let forged = post_signed(g.addr, "slack", "slack", "other-secret", "", NOW, body).await;
    assert_eq!(forged.status, 401);
    assert!(rows(&g).await.is_empty());
    g.stop().await;
}

#[tokio::test]
async fn accepted_duplicate_ignored() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    let first = post_sw(&g, "sw", SW_SECRET, "msg_dup", &body).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["status"], "accepted");
    let id = first.json()["id"].as_str().unwrap().to_owned();
    // The provider's retry: same id, new timestamp and signature; this client half-closes
    // its side after sending and must still get the answer after the commit.
    let headers = signed_headers("standard_webhooks", SW_SECRET, "msg_dup", NOW + 60, &body);
    let request = build_request("POST", "/webhooks/sw", &headers, &body);
    let addr = g.addr;
    let retry = tokio::task::spawn_blocking(move || send_raw_with(addr, &request, true))
        .await
        .unwrap();
    assert_eq!(retry.status, 200);
    assert_eq!(retry.json()["status"], "duplicate");
    assert_eq!(retry.json()["id"], id.as_str());

    // A type outside the allow-list is stored IGNORED and answered "ignored".
    let ignored = post_sw(&g, "sw", SW_SECRET, "msg_ign", &sw_body("customer.deleted")).await;
    assert_eq!(ignored.status, 200);
    assert_eq!(ignored.json()["status"], "ignored");

    let all = rows(&g).await;
    assert_eq!(all.len(), 2);
    let accepted = all.iter().find(|r| r.inbox_id == id).unwrap();
    assert_eq!(accepted.status, InboxStatus::Received);
    assert_eq!(accepted.matched_secret_version, "v2");
    assert_eq!(accepted.provider_event_id, "msg_dup");
    // Sealed: the stored payload is not the body.
    let stored = accepted.payload.as_ref().unwrap();
    assert!(!stored.windows(7).any(|w| w == b"inv_1\"}"));
    let ign = all
        .iter()
        .find(|r| r.provider_event_id == "msg_ign")
        .unwrap();
    assert_eq!(ign.status, InboxStatus::Ignored);
    g.stop().await;
}

#[tokio::test]
async fn secret_rotation_previous_retired_expired() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    // Previous version, still trusted: passes and records that version.
    let r = post_sw(&g, "sw", SW_OLD, "msg_old", &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rec = g
        .store()
        .get_event(r.json()["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.matched_secret_version, "v1");
    // Retired version: refused.
    let r = post_sw(&g, "rotating", SW_OLD, "msg_retired", &body).await;
    assert_eq!(r.status, 401);
    // Version past not_after: refused.
    let r = post_sw(
        &g,
        "rotating",
        "whsec_ZXhwaXJlZC1zZWNyZXQtZm9yLXRlc3RzLTEyMzQ=",
        "msg_exp",
        &body,
    )
    .await;
    assert_eq!(r.status, 401);
    // The current one passes.
    let r = post_sw(&g, "rotating", SW_SECRET, "msg_cur", &body).await;
    assert_eq!(r.status, 200);
    // No trusted version left: fail closed with 503.
    let r = post_sw(&g, "all-retired", SW_SECRET, "msg_none", &body).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (503, Some("unavailable"))
    );
    assert!(r.header("retry-after").is_some());
    g.stop().await;
}

#[tokio::test]
async fn verified_budget_is_not_consumed_by_forgeries() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    for i in 0..20 {
        let r = post_sw(
            &g,
            "budget",
            "whsec_Zm9yZ2VkLXNlY3JldC1mb3ItdGVzdHMtMTIzNA==",
            &format!("f{i}"),
            &body,
        )
        .await;
        assert_eq!(r.status, 401);
    }
    let a = post_sw(&g, "budget", SW_SECRET, "b1", &body).await;
    let b = post_sw(&g, "budget", SW_SECRET, "b2", &body).await;
    assert_eq!((a.status, b.status), (200, 200));
    let c = post_sw(&g, "budget", SW_SECRET, "b3", &body).await;
    assert_eq!(
        (c.status, c.json()["error"].as_str()),
        (429, Some("rate_limited"))
    );
    assert!(c.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    g.stop().await;
}

#[tokio::test]
async fn flood_protection_per_client_before_verification() {
    let mut g = gateway()
        .server("per_client_rate = { per_second = 1, burst = 3 }")
        .start()
        .await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let r = send_raw_async(
            g.addr,
            build_request(
                "POST",
                "/webhooks/sw",
                &[("Content-Type".into(), "application/json".into())],
                b"{}",
            ),
        )
        .await;
        statuses.push(r.status);
    }
    assert_eq!(&statuses[..3], &[400, 400, 400]);
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    g.stop().await;
}

/// Holds the only slot of a `max_in_flight = 1` gateway: a signed request, sent whole, that
/// waits for its commit behind another connection holding SQLite's write lock (the processing
/// permit is taken once the body is read, and held until the answer); returns once the
/// gateway holds its permit. A send on the returned channel ends the stall and closes that
/// connection (the held request then finishes and frees the slot); join the handle to wait
/// for it.
async fn hold_the_only_slot(
    g: &TestGateway,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let addr = g.addr;
    let blocker = rusqlite::Connection::open(g.db()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let body = sw_body("invoice.paid");
    let headers = signed_headers("standard_webhooks", SW_SECRET, "msg_slow", NOW, &body);
    let request = build_request("POST", "/webhooks/sw", &headers, &body);
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&request).unwrap();
        let _ = released.recv();
        blocker.execute_batch("COMMIT").unwrap();
        drop(blocker);
        drop(s);
    });
    g.wait_in_flight(1, 1).await;
    (release, holder)
}

#[tokio::test]
async fn global_in_flight_cap() {
    let mut g = gateway().server("max_in_flight = 1").start().await;
    let (release, holder) = hold_the_only_slot(&g).await;
    let body = sw_body("invoice.paid");
    let r = post_sw(&g, "sw", SW_SECRET, "msg_other", &body).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (503, Some("overloaded"))
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    release.send(()).unwrap();
    holder.join().unwrap();
    g.wait_in_flight(0, 1).await;
    let r = post_sw(&g, "sw", SW_SECRET, "msg_after", &body).await;
    assert_eq!(r.status, 200);
    g.stop().await;
}

/// Reads one response (head and Content-Length body) from a kept-alive connection.
fn read_one_response(s: &mut std::net::TcpStream) -> RawResponse {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "connection closed before a response"
        );
        buf.push(byte[0]);
    }
    let head = parse_response(&buf);
    let len: usize = head.header("content-length").unwrap().parse().unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    buf.extend_from_slice(&body);
    parse_response(&buf)
}

/// A request shed with 503 keeps its connection: its body (here larger than hyper's first
/// read) is read before the processing permit is asked for, instead of making hyper close the socket, so the client's next
/// request goes out on the same connection rather than paying a new handshake.
#[tokio::test]
async fn shed_request_keeps_its_connection() {
    use std::io::Write;
    let mut g = gateway().server("max_in_flight = 1").start().await;
    let addr = g.addr;
    let (held_tx, holder) = hold_the_only_slot(&g).await;
    let permits = g.in_flight_permits();

    let keep_alive = |bytes: Vec<u8>| {
        let text = String::from_utf8(bytes).unwrap();
        text.replacen("Connection: close", "Connection: keep-alive", 1)
            .into_bytes()
    };
    let big = vec![b'x'; 40_000];
    let big_headers = signed_headers("standard_webhooks", SW_SECRET, "msg_big", NOW, &big);
    let shed = keep_alive(build_request(
        "POST",
        "/webhooks/budget",
        &big_headers,
        &big,
    ));
    let after_body = sw_body("invoice.paid");
    let after_headers = signed_headers(
        "standard_webhooks",
        SW_SECRET,
        "msg_same_conn",
        NOW,
        &after_body,
    );
    let after = keep_alive(build_request(
        "POST",
        "/webhooks/sw",
        &after_headers,
        &after_body,
    ));
    let (first, second) = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(&shed).unwrap();
        let first = read_one_response(&mut s);
        // Free the only slot, then reuse the same socket.
        held_tx.send(()).unwrap();
        wait_until_blocking(
            "the held slot to be free",
            std::time::Duration::from_secs(10),
            || permits.available_permits() == 1,
        );
        s.write_all(&after).unwrap();
        let second = read_one_response(&mut s);
        (first, second)
    })
    .await
    .unwrap();
    assert_eq!(
        (first.status, first.json()["error"].as_str()),
        (503, Some("overloaded"))
    );
    assert_ne!(first.header("connection"), Some("close"));
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["status"], "accepted");
    holder.join().unwrap();
    g.stop().await;
}

/// A stalled store (another connection holds SQLite's write lock): requests that would wait
/// past `max_queue_wait_ms` are answered 503 `overloaded` with `Retry-After` and never stored,
/// every 200 is stored, and once the stall ends the gateway accepts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_store_sheds_with_503_and_keeps_every_acknowledged_event() {
    let mut g = gateway()
        .store_settings("max_queue_wait_ms = 100")
        .start()
        .await;
    let blocker = rusqlite::Connection::open(g.db()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let max_in_flight = g.in_flight_permits().available_permits();
    let mut tasks = Vec::new();
    for i in 0..30 {
        let addr = g.addr;
        let id = format!("msg_stall_{i}");
        tasks.push(tokio::spawn(async move {
            let body = sw_body("invoice.paid");
            let r = post_signed(addr, "sw", "standard_webhooks", SW_SECRET, &id, NOW, &body).await;
            (id, r)
        }));
        // Pacing, not synchronisation: requests keep arriving while the store is stalled.
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Every request has reached the gateway and waits behind the stall…
    g.wait_in_flight(30, max_in_flight).await;
    // …and the behaviour under test: the stall outlasts `max_queue_wait_ms` (100 ms) for the
    // requests queued behind the writer's current batch.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    blocker.execute_batch("COMMIT").unwrap();
    let (mut acknowledged, mut shed) = (Vec::new(), 0);
    for t in tasks {
        let (id, r) = t.await.unwrap();
        match r.status {
            200 => acknowledged.push(id),
            503 => {
                assert_eq!(r.json()["error"], "overloaded", "{}", r.body);
                assert_eq!(r.header("retry-after"), Some("1"));
                shed += 1;
            }
            other => panic!("only 200 or 503 under a stall, got {other}: {}", r.body),
        }
    }
    assert!(shed > 0, "requests queued behind the stall must be shed");
    assert!(
        !acknowledged.is_empty(),
        "the batch taken before the stall commits"
    );
    let stored: std::collections::HashSet<String> = rows(&g)
        .await
        .into_iter()
        .map(|r| r.provider_event_id)
        .collect();
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "shed requests are never stored"
    );
    for id in &acknowledged {
        assert!(stored.contains(id), "acknowledged {id} lost");
    }
    // The queue has drained: admitted again.
    let g_ref = &g;
    wait_until(
        "admitted again after the stall",
        std::time::Duration::from_secs(10),
        || async move {
            let body = sw_body("invoice.paid");
            post_sw(g_ref, "sw", SW_SECRET, "msg_after_stall", &body)
                .await
                .status
                == 200
        },
    )
    .await;
    g.stop().await;
}

/// Past `max_connections` a new connection is not served until an open one closes (memory
/// stays bounded however many clients connect); nothing is refused or lost meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_defers_new_connections() {
    let mut g = gateway().server("max_connections = 2").start().await;
    // Two kept-alive connections, each answered once: both are being served, so both slots
    // are taken (they stay open and idle).
    let addr = g.addr;
    let idle: Vec<std::net::TcpStream> = tokio::task::spawn_blocking(move || {
        (0..2)
            .map(|_| {
                use std::io::Write;
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .unwrap();
                // No body, so nothing is left unread and the connection stays open.
                let probe = String::from_utf8(build_request("GET", "/webhooks/nope", &[], b""))
                    .unwrap()
                    .replacen("Connection: close", "Connection: keep-alive", 1);
                s.write_all(probe.as_bytes()).unwrap();
                let r = read_one_response(&mut s);
                assert!((400..500).contains(&r.status), "{r:?}");
                assert_ne!(r.header("connection"), Some("close"));
                s
            })
            .collect()
    })
    .await
    .unwrap();
    let addr = g.addr;
    let waiting = tokio::spawn(async move {
        let body = sw_body("invoice.paid");
        post_signed(
            addr,
            "sw",
            "standard_webhooks",
            SW_SECRET,
            "msg_third",
            NOW,
            &body,
        )
        .await
    });
    // The behaviour under test: a third connection is still not served after a while.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert!(
        !waiting.is_finished(),
        "a third connection must wait for a slot"
    );
    drop(idle);
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("served once a slot frees")
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    g.stop().await;
}

#[tokio::test]
async fn https_required_unless_from_trusted_proxy() {
    let mut g = gateway()
        .server("trusted_proxies = [\"10.0.0.0/8\"]")
        .start()
        .await;
    let body = sw_body("invoice.paid");
    let r = post_sw(&g, "sw", SW_SECRET, "msg_p", &body).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (403, Some("https_required"))
    );
    g.stop().await;

    let mut g = gateway()
        .server("trusted_proxies = [\"127.0.0.1/32\"]")
        .start()
        .await;
    let mut headers = signed_headers("standard_webhooks", SW_SECRET, "msg_p", NOW, &body);
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &headers, &body),
    )
    .await;
    assert_eq!(
        r.status, 403,
        "a trusted proxy must say the client used HTTPS"
    );
    headers.push(("X-Forwarded-Proto".into(), "https".into()));
    let r = send_raw_async(
        g.addr,
        build_request("POST", "/webhooks/sw", &headers, &body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_concurrent_copies_one_row() {
    let mut g = gateway().server("max_in_flight = 2048").start().await;
    let body = br#"{"id":"evt_concurrent_1","object":"event","type":"charge.refunded","created":1764547200,"data":{"object":{"id":"ch_1"}}}"#;
    let mut tasks = Vec::new();
    for i in 0..500 {
        let addr = g.addr;
        // Some copies are provider retries: fresh timestamp and signature, same event id.
        let ts = NOW - (i % 5) as i64 * 10;
        tasks.push(tokio::spawn(async move {
            post_signed(addr, "stripe", "stripe", STRIPE_SECRET, "unused", ts, body).await
        }));
    }
    let mut accepted = 0;
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let j = r.json();
        if j["status"] == "accepted" {
            accepted += 1;
        } else {
            assert_eq!(j["status"], "duplicate");
        }
        ids.insert(j["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(accepted, 1);
    assert_eq!(ids.len(), 1);
    assert_eq!(rows(&g).await.len(), 1);
    g.stop().await;
}

#[tokio::test]
async fn readyz_and_metrics() {
    let mut g = gateway().start().await;
    let body = sw_body("invoice.paid");
    assert_eq!(
        post_sw(&g, "sw", SW_SECRET, "msg_m", &body).await.status,
        200
    );
    let r = send_raw_async(g.admin, build_request("GET", "/readyz", &[], b"")).await;
    assert_eq!(r.status, 200);
    let r = send_raw_async(g.admin, build_request("GET", "/healthz", &[], b"")).await;
    assert_eq!(r.status, 200);
    let r = send_raw_async(g.admin, build_request("GET", "/metrics", &[], b"")).await;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("hookgate_requests_total"), "{}", r.body);
    assert!(r.body.contains("outcome=\"accepted\""));
    assert!(r.body.contains("hookgate_ack_latency_seconds"));
    assert!(r.body.contains("hookgate_commit_latency_seconds"));
    assert!(r.body.contains("hookgate_secret_version_matched_total"));
    // Lag gauges come from the durable state: one event waits (no workers run here), and its
    // age follows the clock.
    assert!(r.body.contains("hookgate_inbox_received 1\n"), "{}", r.body);
    assert!(r.body.contains("hookgate_inbox_failed 0\n"));
    assert!(r.body.contains("hookgate_outbox_pending 0\n"));
    g.clock().set_secs(NOW + 90);
    let r = send_raw_async(g.admin, build_request("GET", "/metrics", &[], b"")).await;
    assert!(
        r.body
            .contains("hookgate_inbox_oldest_received_age_seconds 90\n"),
        "{}",
        r.body
    );
    // The store going away makes /readyz fail.
    g.store().close().await;
    let r = send_raw_async(g.admin, build_request("GET", "/readyz", &[], b"")).await;
    assert_eq!(r.status, 503);
    g.stop().await;
}
