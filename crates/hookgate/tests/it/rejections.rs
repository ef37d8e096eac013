//! The rejection log over HTTP against the real binary, on both backends (issue 17): a
//! flood of forged requests next to a valid one (still accepted), stale and unknown-endpoint
//! requests; `GET /api/v1/rejections` pages the sampled entries (every rejection up to 100
//! per endpoint and cause per minute, then 1 in 100), filters them, counts every rejection
//! per cause, and never shows a body or a signature; the table is bounded
//! (`[rejections] max_entries`) after a restart.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::jobs::Api;
use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FORGED_SECRET: &str = "whsec_aG9va2dhdGUtb2xkLXNlY3JldC1mb3ItdGVzdHMh";
const READ: &str = "rejections-read-token-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(60);
const FORGED: usize = 250;
/// A marker inside every forged body: it must never appear in an answer or a log.
const MARKER: &str = "forged-body-marker-7f3a";

fn gateway(backend: Backend, max_entries: u64) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .admin_settings(&format!(
            "[[admin.tokens]]\nname = \"viewer\"\nscopes = [\"read\"]\nvalue = {}\n",
            q(READ)
        ))
        .workers(0)
        .section(&format!("[rejections]\nmax_entries = {max_entries}\n"))
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
}

fn body(i: usize) -> Vec<u8> {
    format!(r#"{{"type":"invoice.paid","data":{{"id":"{MARKER}-{i}"}}}}"#).into_bytes()
}

/// Kept of `n` rejections in one minute: all up to 100, then every 100th.
fn kept(n: u64) -> u64 {
    n.min(100) + n.saturating_sub(100) / 100
}

async fn page(api: &Api, query: &str) -> Value {
    let path = format!("/api/v1/rejections?{query}");
    let (status, page) = api
        .call("GET", "/api/v1/rejections", &path, READ, None)
        .await;
    assert_eq!(status, 200, "{query}: {page}");
    page
}

fn counts(page: &Value) -> BTreeMap<String, (u64, u64)> {
    page["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cause"].as_str().unwrap().to_owned(),
                (c["seen"].as_u64().unwrap(), c["logged"].as_u64().unwrap()),
            )
        })
        .collect()
}

/// Every entry matching `query`, page after page (50 a page).
async fn all_entries(api: &Api, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = format!("limit=50&{query}");
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={c}"));
        }
        let p = page(api, &q).await;
        out.extend(p["rejections"].as_array().unwrap().iter().cloned());
        match p["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

async fn flood(addr: SocketAddr) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..FORGED {
        tasks.spawn(async move {
            let b = body(i);
            let r = post_signed(
                addr,
                "sw",
                "standard_webhooks",
                FORGED_SECRET,
                &format!("msg_forged_{i}"),
                unix_now(),
                &b,
            )
            .await;
            assert_eq!(r.status, 401, "{}", r.body);
        });
        if tasks.len() >= 16 {
            tasks.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(t) = tasks.join_next().await {
        t.unwrap();
    }
}

async fn rejection_log(backend: Backend) {
    let files = gateway(backend, 1_000).write().await;
    let p = files.serve(None);
    let api = Api::new(p.admin.unwrap()).await;
    let addr = p.addr();

    // A valid event is acknowledged in the middle of the flood.
    let flooding = tokio::spawn(flood(addr));
    let ok = post_signed(
        addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_valid",
        unix_now(),
        &body(9999),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["status"], "accepted");
    flooding.await.unwrap();
    for i in 0..3 {
        let b = body(10_000 + i);
        let r = post_signed(
            addr,
            "sw",
            "standard_webhooks",
            SW_SECRET,
            &format!("msg_stale_{i}"),
            unix_now() - 3_600,
            &b,
        )
        .await;
        assert_eq!(r.status, 401);
        assert_eq!(r.json()["error"], "stale_timestamp");
    }
    for path in ["/webhooks/nope", "/webhooks/other"] {
        let r = send_raw_async(addr, build_request("POST", path, &[], b"{}")).await;
        assert_eq!(r.status, 404);
    }
    let unsigned = send_raw_async(
        addr,
        build_request(
            "POST",
            "/webhooks/sw",
            &[("Content-Type".into(), "application/json".into())],
            &body(20_000),
        ),
    )
    .await;
    assert_eq!(unsigned.status, 400, "{}", unsigned.body);

    // Flushed about once a second: every rejection counted per cause.
    let all = wait_for("every rejection counted", WAIT, || async {
        let p = page(&api, "limit=500").await;
        let c = counts(&p);
        let seen = |cause: &str| c.get(cause).map_or(0, |x| x.0);
        (seen("invalid_signature") == FORGED as u64
            && seen("stale_timestamp") == 3
            && seen("unknown_endpoint") == 2
            && seen("bad_request") == 1)
            .then_some(p)
    })
    .await;
    let c = counts(&all);
    assert_eq!(c.len(), 4, "{c:?}");
    for cause in ["stale_timestamp", "unknown_endpoint", "bad_request"] {
        assert_eq!(
            c[cause].0, c[cause].1,
            "{cause}: few enough to keep each one"
        );
    }

    // Sampled: per minute, every forged request up to 100, then 1 in 100.
    let forged = all_entries(&api, "cause=invalid_signature&endpoint=sw").await;
    assert_eq!(forged.len() as u64, c["invalid_signature"].1);
    let ids: HashSet<i64> = forged.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), forged.len(), "no entry on two pages");
    let mut minutes: BTreeMap<i64, u64> = BTreeMap::new();
    for e in &forged {
        *minutes
            .entry(e["at_ms"].as_i64().unwrap() / 60_000 * 60_000)
            .or_insert(0) += 1;
    }
    let mut seen_total = 0;
    for (minute, logged) in &minutes {
        let p = page(
            &api,
            &format!(
                "cause=invalid_signature&since={minute}&until={}",
                minute + 60_000
            ),
        )
        .await;
        let (seen, _) = counts(&p)["invalid_signature"];
        seen_total += seen;
        assert_eq!(*logged, kept(seen), "minute {minute}: {seen} seen");
    }
    assert_eq!(seen_total, FORGED as u64);
    assert!(forged.len() < FORGED, "sampled, not all {FORGED} kept");

    // An entry: headers with redacted values, size and keyed digest, never the body.
    let e = &forged[0];
    assert_eq!(e["endpoint"], "sw");
    let headers = e["headers"].as_array().unwrap();
    let value_of = |name: &str| {
        headers
            .iter()
            .find(|h| h["name"] == name)
            .map(|h| h["value"].as_str().unwrap().to_owned())
    };
    assert!(
        value_of("webhook-signature")
            .unwrap()
            .starts_with("[redacted, ")
    );
    assert!(value_of("webhook-id").unwrap().starts_with("[redacted, "));
    assert!(value_of("content-length").is_some());
    let size = e["body_size"].as_u64().unwrap();
    assert!(size > MARKER.len() as u64);
    assert_eq!(e["body_digest"].as_str().unwrap().len(), 64);
    let text = all.to_string();
    assert!(!text.contains(MARKER), "no body in the log");
    assert!(!text.contains("v1,"), "no signature in the log");

    // Filters.
    let unknown = all_entries(&api, "endpoint=_unknown").await;
    assert_eq!(unknown.len(), 2);
    assert!(unknown.iter().all(|e| e["cause"] == "unknown_endpoint"));
    let bad = all_entries(&api, "cause=bad_request").await;
    assert_eq!(bad.len(), 1);
    assert!(bad[0]["reason"].is_string(), "{}", bad[0]);
    let stale = all_entries(&api, "cause=stale_timestamp").await;
    assert_eq!(stale.len(), 3);
    let newest = stale
        .iter()
        .map(|e| e["at_ms"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        all_entries(&api, &format!("since={}", newest + 60_000))
            .await
            .is_empty()
    );
    let (status, _) = api
        .call(
            "GET",
            "/api/v1/rejections",
            "/api/v1/rejections?colour=red",
            READ,
            None,
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .call(
            "GET",
            "/api/v1/rejections",
            "/api/v1/rejections",
            "not-a-token-at-all-xxxxxxxx",
            None,
        )
        .await;
    assert_eq!(status, 401);

    // Bounded: with `max_entries = 100`, the next process trims the log at its first flush.
    let logged: u64 = c.values().map(|(_, l)| l).sum();
    assert!(logged > 100, "{logged} entries before the trim");
    let logs = tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
    assert!(!logs.contains(MARKER), "no body bytes in the logs");
    std::fs::write(
        &files.config_path,
        gateway(backend, 100).render(&files.store_url),
    )
    .unwrap();
    let p = files.serve(None);
    let api = Api::new(p.admin.unwrap()).await;
    wait_until("the log trimmed to max_entries", WAIT, || async {
        all_entries(&api, "").await.len() == 100
    })
    .await;
    tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rejection_log_on_sqlite() {
    rejection_log(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rejection_log_on_postgres() {
    rejection_log(Backend::Postgres).await;
}
