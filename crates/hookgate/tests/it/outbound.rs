//! Outbound connections and proxies: the real binary runs with `HTTP_PROXY`, `HTTPS_PROXY` and
//! `ALL_PROXY` in its environment (only the child's, so no other test is affected) pointing at a
//! recording proxy. Destinations connect directly (the private-address guard resolves their
//! names) and the environment's proxy sees nothing; a destination's own `proxy` is used.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookgate_core::OutboxStatus;
use hookgate_store::{OutboxRecord, SharedStore};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Never resolves (RFC 6761): a request for it can only be answered by a proxy.
const UNRESOLVABLE: &str = "http://hookgate-destination.invalid/hook";
const WAIT: Duration = Duration::from_secs(60);

/// A plain HTTP server on a real socket that records each request line and answers 200: an
/// HTTP proxy sees absolute-form lines (`POST http://host/path`), a destination `POST /path`.
struct Recorder {
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, seen.clone()));
            }
        });
        Recorder { addr, lines }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// Reads one request (head and `Content-Length` body), records its first line, answers 200.
async fn answer(stream: tokio::net::TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    let mut first = None;
    let mut length = 0usize;
    while reader.read_line(&mut line).await.unwrap_or(0) > 0 {
        let l = line.trim_end().to_owned();
        line.clear();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        first.get_or_insert(l);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body).await;
    seen.lock().unwrap().extend(first);
    let _ = reader
        .into_inner()
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await;
}

fn destination(id: &str, url: &str, extra: &str) -> String {
    format!(
        "[[destinations]]\nid = {}\nkind = \"http\"\nurl = {}\ntimeout_ms = 2000\n\
         retry = {{ base_ms = 20, cap_ms = 100, max_attempts = 1000 }}\n{extra}\n",
        q(id),
        q(url),
    )
}

async fn deliveries(store: &SharedStore, inbox_id: &str) -> Vec<OutboxRecord> {
    store.list_deliveries(inbox_id).await.unwrap()
}

fn find<'a>(d: &'a [OutboxRecord], id: &str) -> &'a OutboxRecord {
    d.iter().find(|r| r.destination == id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn environment_proxies_are_ignored_and_an_explicit_proxy_is_used() {
    let env_proxy = Recorder::start().await;
    let own_proxy = Recorder::start().await;
    let receiver = Recorder::start().await;
    let destinations = [
        // Loopback, allowed: delivered directly, not through the environment's proxy.
        destination(
            "direct",
            &format!("{}/hook", receiver.url()),
            "allow_private_network = true",
        ),
        // Guarded: the resolver must see the name (it does not resolve, so this retries);
        // through the environment's proxy it would have been "delivered" unchecked.
        destination("guarded", UNRESOLVABLE, ""),
        // Its own proxy: only that proxy can answer for a name that never resolves.
        destination(
            "proxied",
            UNRESOLVABLE,
            &format!(
                "allow_private_network = true\nproxy = {}",
                q(&own_proxy.url())
            ),
        ),
    ]
    .concat();
    let files = TestGateway::builder()
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20")
        .destinations(&destinations)
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"direct\", \"guarded\", \"proxied\"]",
        ))
        .write()
        .await;
    let proxy = env_proxy.url();
    let mut env = vec![("NO_PROXY", ""), ("no_proxy", "")];
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        env.push((name, proxy.as_str()));
    }
    let gateway = files.serve_with_env(&env);

    let body = br#"{"type":"invoice.paid","timestamp":"2026-12-01T00:00:00Z","data":{"id":"o1"}}"#;
    let r = post_signed(
        gateway.addr(),
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_proxy_1",
        unix_now(),
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let ack = r.json();
    let inbox_id = ack["inbox_id"]
        .as_str()
        .or_else(|| ack["id"].as_str())
        .unwrap_or_else(|| panic!("no inbox id in {ack}"))
        .to_owned();

    let store = files.open_store().await;
    wait_until(
        "direct and proxied settled, guarded attempted twice (or settled)",
        WAIT,
        || {
            let (store, id) = (store.clone(), inbox_id.clone());
            async move {
                let d = deliveries(&store, &id).await;
                let settled = |r: &OutboxRecord| r.status != OutboxStatus::Pending;
                d.len() == 3
                    && settled(find(&d, "direct"))
                    && settled(find(&d, "proxied"))
                    && (find(&d, "guarded").attempt_count >= 2 || settled(find(&d, "guarded")))
            }
        },
    )
    .await;
    let d = deliveries(&store, &inbox_id).await;
    assert_eq!(find(&d, "direct").status, OutboxStatus::Delivered, "{d:?}");
    assert_eq!(find(&d, "proxied").status, OutboxStatus::Delivered, "{d:?}");
    let guarded = find(&d, "guarded");
    assert_eq!(guarded.status, OutboxStatus::Pending, "{guarded:?}");
    assert!(
        guarded
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("connection failed") || e.contains("timed out")),
        "the direct connection's lookup failed: {guarded:?}"
    );
    gateway.terminate();

    assert_eq!(env_proxy.lines(), Vec::<String>::new(), "environment proxy");
    assert_eq!(receiver.lines(), ["POST /hook HTTP/1.1"], "direct delivery");
    assert_eq!(
        own_proxy.lines(),
        [format!("POST {UNRESOLVABLE} HTTP/1.1")],
        "the destination's own proxy"
    );
    store.close().await;
}
