//! Ingress and the admin listener under attack: slow forged bodies, ambiguous proxy headers,
//! half-sent admin requests (issue 14). Real HTTP over sockets against an in-process gateway.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::*;

const NOW: i64 = 1_764_547_200;
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FORGED: &str = "whsec_aG9va2dhdGUtZm9yZ2VkLXNlY3JldC1mb3ItdGVzdHMh";

fn gateway() -> GatewayBuilder {
    TestGateway::builder()
        .fixed_clock(NOW)
        .workers(0)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SECRET], ""))
}

fn body(id: &str) -> Vec<u8> {
    format!(r#"{{"type":"invoice.paid","data":{{"id":"{id}"}}}}"#).into_bytes()
}

/// A request head with a syntactically valid signature under the wrong secret, a large
/// Content-Length and `sent` bytes of its body.
fn slow_forged_start(addr: SocketAddr, id: &str, sent: usize) -> TcpStream {
    let full = vec![b'{'; 100_000];
    let headers = signed_headers("standard_webhooks", FORGED, id, NOW, &full);
    let mut bytes = build_request("POST", "/webhooks/sw", &headers, &full);
    bytes.truncate(bytes.len() - full.len() + sent);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&bytes).unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_forged_bodies_do_not_starve_a_signed_request() {
    let mut g = gateway()
        .server("max_in_flight = 4\nmin_body_bytes_per_second = 1\nrequest_timeout_ms = 30000")
        .start()
        .await;
    let addr = g.addr;
    let free = g.state().body_readers.available();
    // 24 bodies from 127.0.0.1, each 10 bytes in: at 1 B/s they may stay for 10 s.
    let slow = tokio::task::spawn_blocking(move || {
        (0..24)
            .map(|i| slow_forged_start(addr, &format!("msg_forged_{i}"), 10))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let readers = g.state().clone();
    wait_until("24 bodies being read", Duration::from_secs(10), || {
        let busy = free - readers.body_readers.available();
        async move { busy == 24 }
    })
    .await;
    let started = Instant::now();
    let b = body("inv_ok");
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        post_signed(addr, "sw", "standard_webhooks", SECRET, "msg_ok", NOW, &b),
    )
    .await
    .expect("answered without waiting for the slow bodies");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        free - g.state().body_readers.available(),
        24,
        "the slow bodies were still open while the signed request was answered"
    );
    drop(slow);
    g.stop().await;
}

#[tokio::test]
async fn a_body_below_the_minimum_rate_is_cut_off() {
    let mut g = gateway().server("request_timeout_ms = 30000").start().await;
    let addr = g.addr;
    let (elapsed, response) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut s = slow_forged_start(addr, "msg_slow", 10);
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        (started.elapsed(), buf)
    })
    .await
    .unwrap();
    // 10 bytes in the first second is far below the default 1024 B/s: cut off after about a
    // second, long before request_timeout_ms.
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    if !response.is_empty() {
        assert_eq!(parse_response(&response).status, 408);
    }
    g.stop().await;
}

#[tokio::test]
async fn forwarded_proto_must_be_exactly_one_https() {
    let mut g = gateway()
        .server("trusted_proxies = [\"127.0.0.1/32\"]")
        .start()
        .await;
    let b = body("inv_p");
    let signed = |id: &str, extra: &[(&str, &str)]| {
        let mut headers = signed_headers("standard_webhooks", SECRET, id, NOW, &b);
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        build_request("POST", "/webhooks/sw", &headers, &b)
    };
    let r = send_raw_async(g.addr, signed("msg_none", &[])).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (403, Some("https_required"))
    );
    for (id, extra) in [
        (
            "msg_two",
            &[
                ("X-Forwarded-Proto", "https"),
                ("X-Forwarded-Proto", "http"),
            ][..],
        ),
        ("msg_list", &[("X-Forwarded-Proto", "http, https")][..]),
        ("msg_list2", &[("X-Forwarded-Proto", "https,https")][..]),
    ] {
        let r = send_raw_async(g.addr, signed(id, extra)).await;
        assert_eq!(r.status, 400, "{id}: {}", r.body);
        assert_eq!(r.json()["reason"], "ambiguous_forwarded_proto", "{id}");
    }
    let r = send_raw_async(g.addr, signed("msg_http", &[("X-Forwarded-Proto", "http")])).await;
    assert_eq!(r.status, 403);
    let r = send_raw_async(g.addr, signed("msg_ok", &[("X-Forwarded-Proto", "https")])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    g.stop().await;
}

fn admin_get(admin: SocketAddr, path: &str) -> RawResponse {
    send_raw(admin, &build_request("GET", path, &[], b""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_admin_requests_do_not_break_the_webhook_listener() {
    let mut g = gateway()
        .admin_settings("request_timeout_ms = 300\nmax_connections = 8")
        .start()
        .await;
    let admin = g.admin;
    let half = tokio::task::spawn_blocking(move || {
        (0..150)
            .map(|_| {
                let mut s = TcpStream::connect(admin).unwrap();
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
                s
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let b = body("inv_admin");
    let r = post_signed(
        g.addr,
        "sw",
        "standard_webhooks",
        SECRET,
        "msg_admin",
        NOW,
        &b,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The half-sent heads time out (8 at a time) and the admin listener answers again.
    let mut first = half.into_iter().next().unwrap();
    let closed = tokio::task::spawn_blocking(move || {
        first
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = Vec::new();
        first.read_to_end(&mut buf).is_ok()
    })
    .await
    .unwrap();
    assert!(
        closed,
        "a half-sent admin request is closed by its header timeout"
    );
    let health = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(&build_request("GET", "/healthz", &[], b""))
            .unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        parse_response(&buf)
    })
    .await
    .unwrap();
    assert_eq!(health.status, 200);
    g.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connection_cap_holds() {
    let mut g = gateway()
        .admin_settings("request_timeout_ms = 20000\nmax_connections = 2")
        .start()
        .await;
    let admin = g.admin;
    let outcome = tokio::task::spawn_blocking(move || {
        let mut held: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = TcpStream::connect(admin).unwrap();
                s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
                s
            })
            .collect();
        let mut third = TcpStream::connect(admin).unwrap();
        third
            .write_all(&build_request("GET", "/healthz", &[], b""))
            .unwrap();
        third
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut byte = [0u8; 1];
        let early = third.read(&mut byte);
        // Closing one held connection frees a slot: the third is accepted and answered.
        drop(held.remove(0));
        third
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = Vec::new();
        let _ = third.read_to_end(&mut buf);
        (early.is_err(), parse_response(&buf))
    })
    .await
    .unwrap();
    assert!(
        outcome.0,
        "a third connection is not served while two hold the cap"
    );
    assert_eq!(outcome.1.status, 200);
    assert_eq!(admin_get(g.admin, "/healthz").status, 200);
    g.stop().await;
}
