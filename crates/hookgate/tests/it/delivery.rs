//! Delivery end to end (ARCHITECTURE.md, "One delivery"): webhooks in over real sockets, workers
//! write one outbox row per destination, the relay delivers to a real HTTP server in this
//! process (which verifies hookgate's Standard Webhooks signature with an independent
//! implementation below) and to a real `nats-server -js` started per test.
//!
//! Needs `nats-server` (Debian package `nats-server`; `scripts/ensure-nats.sh` installs it).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use hmac::Mac;
use hookgate::config::Config;
use hookgate_core::{InboxStatus, OutboxStatus};
use hookgate_store::{EventFilter, OutboxRecord, SharedStore};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The secret hookgate signs deliveries with (the internal service's verification secret).
pub(crate) const DEST_SECRET: &str = "whsec_aG9va2dhdGUtZGVzdGluYXRpb24tc2lnbmluZy1rISE=";
/// A second, rotated-in secret: every listed secret signs.
const DEST_SECRET_2: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// ---------------------------------------------------------------------------------------
// An independent Standard Webhooks verifier (the receiving service's side): HMAC-SHA256 over
// `<webhook-id>.<webhook-timestamp>.<body>` with the base64-decoded `whsec_` secret, compared
// against each space-separated `v1,<base64>` entry.

pub(crate) fn standard_webhooks_verify(
    secret: &str,
    headers: &HashMap<String, String>,
    body: &[u8],
) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .unwrap();
    let (Some(id), Some(ts), Some(sigs)) = (
        headers.get("webhook-id"),
        headers.get("webhook-timestamp"),
        headers.get("webhook-signature"),
    ) else {
        return false;
    };
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(ts.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
    sigs.split(' ').any(|s| s == expected)
}

// ---------------------------------------------------------------------------------------
// The HTTP destination: a real server that records what it got and answers as scripted.

#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Vec<u8>,
    at: std::time::Instant,
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    /// Statuses to answer first, in order; then `default_status`.
    script: Mutex<VecDeque<u16>>,
    default_status: AtomicUsize,
    /// Never answer (the client times out).
    hang: AtomicBool,
    /// `Retry-After` seconds sent with a 429 (0: none).
    retry_after: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    addr: SocketAddr,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let state = Arc::new(ReceiverState::default());
        state.default_status.store(200, Ordering::SeqCst);
        let router = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Receiver { addr, state }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub(crate) fn script(&self, statuses: &[u16], then: u16) {
        *self.state.script.lock().unwrap() = statuses.iter().copied().collect();
        self.state
            .default_status
            .store(usize::from(then), Ordering::SeqCst);
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Logical deliveries: requests deduplicated on `Idempotency-Key` (what a consumer does).
    pub(crate) fn logical(&self) -> BTreeSet<String> {
        self.received()
            .iter()
            .map(|r| r.headers["idempotency-key"].clone())
            .collect()
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    struct Done<'a>(&'a AtomicUsize);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _done = Done(&state.in_flight);
    let headers: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    state.received.lock().unwrap().push(Received {
        headers,
        body: body.to_vec(),
        at: std::time::Instant::now(),
    });
    if state.hang.load(Ordering::SeqCst) {
        // The behaviour under test: a destination that never answers.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let status = state
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| state.default_status.load(Ordering::SeqCst) as u16);
    let status = StatusCode::from_u16(status).unwrap();
    let retry_after = state.retry_after.load(Ordering::SeqCst);
    if status == StatusCode::TOO_MANY_REQUESTS && retry_after > 0 {
        return (status, [("retry-after", retry_after.to_string())]).into_response();
    }
    status.into_response()
}

// ---------------------------------------------------------------------------------------
// A real NATS server with JetStream, on a free loopback port, its store in a temp dir; it can
// be stopped and started again on the same port and store.

pub(crate) fn nats_server_binary() -> PathBuf {
    for candidate in ["/usr/sbin/nats-server", "/usr/bin/nats-server"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    if let Ok(out) = Command::new("sh")
        .args(["-c", "command -v nats-server"])
        .output()
    {
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !path.is_empty() {
            return PathBuf::from(path);
        }
    }
    panic!(
        "nats-server not found: the delivery tests run a real NATS JetStream server. \
         Run scripts/ensure-nats.sh (installs Debian's nats-server package)."
    );
}

pub(crate) struct Nats {
    child: Option<Child>,
    /// Chosen by nats-server on the first start (`-p -1`), reused on restarts so the
    /// gateway's configured URL stays valid.
    port: Option<u16>,
    dir: tempfile::TempDir,
}

impl Nats {
    pub(crate) fn start() -> Nats {
        let mut n = Nats {
            child: None,
            port: None,
            dir: tempfile::tempdir().unwrap(),
        };
        n.up();
        n
    }

    /// Starts nats-server and waits (bounded) until its log says it is ready, learning its
    /// port from the log on the first start.
    fn up(&mut self) {
        assert!(self.child.is_none());
        let port = self.port.map_or_else(|| "-1".to_owned(), |p| p.to_string());
        let mut child = Command::new(nats_server_binary())
            .args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"])
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nats-server");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stderr).lines();
            for line in lines.by_ref() {
                let Ok(line) = line else { return };
                const LISTENING: &str = "Listening for client connections on ";
                if let Some((_, addr)) = line.split_once(LISTENING) {
                    let _ = tx.send(addr.trim().parse::<SocketAddr>().ok());
                } else if line.contains("Server is ready") {
                    let _ = tx.send(None);
                    break;
                }
            }
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut bound = None;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(Some(addr)) => bound = Some(addr),
                Ok(None) => break,
                Err(e) => panic!("nats-server did not become ready: {e}"),
            }
        }
        let bound = bound.expect("nats-server logged no client address");
        assert!(self.port.is_none_or(|p| p == bound.port()));
        self.port = Some(bound.port());
    }

    fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port.expect("started"))
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.down();
    }
}

#[derive(Debug, Clone)]
pub(crate) struct NatsMessage {
    pub(crate) subject: String,
    pub(crate) inbox_id: String,
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
}

/// Every message stored in `stream` (empty when the stream does not exist yet).
pub(crate) async fn stream_messages(url: &str, stream: &str) -> Vec<NatsMessage> {
    let client = async_nats::connect(url).await.expect("connect to nats");
    let js = async_nats::jetstream::new(client);
    let Ok(mut s) = js.get_stream(stream).await else {
        return Vec::new();
    };
    let info = s.info().await.unwrap().clone();
    let mut out = Vec::new();
    if info.state.messages == 0 {
        return out;
    }
    for seq in info.state.first_sequence..=info.state.last_sequence {
        let Ok(m) = s.get_raw_message(seq).await else {
            continue;
        };
        let h = |name: &str| {
            m.headers
                .get(name)
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default()
        };
        out.push(NatsMessage {
            subject: m.subject.to_string(),
            inbox_id: h("X-Hookgate-Inbox-Id"),
            content_type: h("Content-Type"),
            body: m.payload.to_vec(),
        });
    }
    out
}

// ---------------------------------------------------------------------------------------
// The gateway: in-process (real clock) or the real binary, through the tests' one builder.

/// Workers and relay polling fast, a short relay lease (crash tests wait for it).
fn gateway(backend: Backend) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .workers(2)
        .worker_settings("lease_seconds = 30\npoll_interval_ms = 20")
        .relay_settings("lease_seconds = 4\npoll_interval_ms = 20")
}

pub(crate) fn http_destination(id: &str, url: &str, extra: &str) -> String {
    format!(
        "[[destinations]]\nid = {}\nkind = \"http\"\nurl = {}\nallow_private_network = true\n\
         signing_secrets = [{}, {}]\ntimeout_ms = 2000\n\
         retry = {{ base_ms = 20, cap_ms = 100, max_attempts = 10 }}\n{extra}\n",
        q(id),
        q(url),
        q(DEST_SECRET),
        q(DEST_SECRET_2),
    )
}

pub(crate) fn nats_destination(id: &str, url: &str, extra: &str) -> String {
    format!(
        "[[destinations]]\nid = {}\nkind = \"nats\"\nurl = {}\nstream = \"HOOKS\"\n\
         subject = \"webhooks.{{provider}}.{{event_type}}\"\ntimeout_ms = 1000\n\
         retry = {{ base_ms = 50, cap_ms = 300, max_attempts = 1000 }}\n{extra}\n",
        q(id),
        q(url),
    )
}

fn sw_endpoint(destinations: &[&str]) -> String {
    let list: Vec<String> = destinations.iter().map(|d| q(d)).collect();
    endpoint_toml(
        "sw",
        "standard_webhooks",
        &[SW_SECRET],
        &format!(
            "object_id_pointer = \"/data/id\"\nobject_version_pointer = \"/data/version\"\n\
             destinations = [{}]",
            list.join(", ")
        ),
    )
}

fn event_body(n: usize, version: i64) -> Vec<u8> {
    format!(
        r#"{{"type":"invoice.paid","timestamp":"2026-12-01T00:00:00Z","data":{{"id":"obj_{n}","version":{version},"amount":{n}}}}}"#
    )
    .into_bytes()
}

/// Sends one signed Standard Webhooks event; returns the inbox id from the acknowledgement.
async fn send(addr: SocketAddr, event_id: &str, body: &[u8]) -> String {
    let r = post_signed(
        addr,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        event_id,
        unix_now(),
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    v["inbox_id"]
        .as_str()
        .or_else(|| v["id"].as_str())
        .unwrap_or_else(|| panic!("no inbox id in {v}"))
        .to_owned()
}

async fn deliveries(store: &SharedStore, inbox_id: &str) -> HashMap<String, OutboxRecord> {
    store
        .list_deliveries(inbox_id)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.destination.clone(), d))
        .collect()
}

async fn delivered(store: &SharedStore) -> u64 {
    store
        .count_deliveries(OutboxStatus::Delivered)
        .await
        .unwrap()
}

const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// Fan-out: every processed event reaches both destinations, signed and with its headers.

async fn fan_out_to_http_and_nats(backend: Backend) {
    let receiver = Receiver::start().await;
    let nats = Nats::start();
    let mut h = gateway(backend)
        .destinations(&http_destination("app", &receiver.url(), ""))
        .destinations(&nats_destination("bus", &nats.url(), ""))
        .endpoints(&sw_endpoint(&["app", "bus"]))
        .start()
        .await;
    const N: usize = 12;
    let mut sent = HashMap::new();
    for i in 0..N {
        let body = event_body(i, 1);
        let inbox_id = send(h.addr, &format!("msg_fan_{i}"), &body).await;
        sent.insert(inbox_id, (format!("msg_fan_{i}"), body));
    }
    let store = h.store().clone();
    wait_until("every delivery DELIVERED", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == 2 * N as u64 }
    })
    .await;

    // HTTP: each event once, the original bytes, verified signature, the documented headers.
    let got = receiver.received();
    assert_eq!(got.len(), N, "one request per event (no failure, no retry)");
    for r in &got {
        let id = &r.headers["idempotency-key"];
        let (event_id, body) = &sent[id];
        assert_eq!(&r.body, body, "the provider's original bytes");
        assert_eq!(&r.headers["webhook-id"], id);
        assert!(
            standard_webhooks_verify(DEST_SECRET, &r.headers, &r.body),
            "signature verifies with the first secret"
        );
        assert!(
            standard_webhooks_verify(DEST_SECRET_2, &r.headers, &r.body),
            "and with the second (rotation)"
        );
        assert!(!standard_webhooks_verify(
            "whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC14eA==",
            &r.headers,
            &r.body
        ));
        assert_eq!(r.headers["x-hookgate-provider"], "standard_webhooks");
        assert_eq!(r.headers["x-hookgate-endpoint"], "sw");
        assert_eq!(&r.headers["x-hookgate-event-id"], event_id);
        assert_eq!(r.headers["x-hookgate-event-type"], "invoice.paid");
        assert_eq!(r.headers["content-type"], "application/json");
    }
    assert_eq!(
        receiver.logical(),
        sent.keys().cloned().collect::<BTreeSet<_>>()
    );

    // NATS: each event once, on the sanitised subject, with the documented message id.
    let msgs = stream_messages(&nats.url(), "HOOKS").await;
    assert_eq!(msgs.len(), N);
    for m in &msgs {
        assert_eq!(m.subject, "webhooks.standard_webhooks.invoice_paid");
        assert_eq!(m.body, sent[&m.inbox_id].1);
        assert_eq!(m.content_type, "application/json");
    }
    // The stream deduplicates on `Nats-Msg-Id: <inbox_id>:<destination>`: a re-publish of a
    // delivered event (what a crash between publish and mark causes) is acknowledged as a
    // duplicate and not stored again.
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    for m in &msgs {
        let ack = js
            .send_publish(
                m.subject.clone(),
                async_nats::jetstream::message::PublishMessage::build()
                    .payload(m.body.clone().into())
                    .message_id(format!("{}:bus", m.inbox_id)),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(
            ack.duplicate,
            "{} was published with its message id",
            m.inbox_id
        );
    }
    assert_eq!(stream_messages(&nats.url(), "HOOKS").await.len(), N);
    let ids: BTreeSet<_> = msgs.iter().map(|m| m.inbox_id.clone()).collect();
    assert_eq!(ids, sent.keys().cloned().collect::<BTreeSet<_>>());
    for id in sent.keys() {
        let d = deliveries(h.store(), id).await;
        assert_eq!(d.len(), 2);
        assert!(d.values().all(|d| d.status == OutboxStatus::Delivered
            && d.delivered_at_ms.is_some()
            && d.attempt_count == 1));
        let e = h.store().get_event(id).await.unwrap().unwrap();
        assert_eq!(e.status, InboxStatus::Processed);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_fan_out_to_http_and_nats() {
    fan_out_to_http_and_nats(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_fan_out_to_http_and_nats() {
    fan_out_to_http_and_nats(Backend::Postgres).await;
}

// ---------------------------------------------------------------------------------------
// Retries: 500 a few times then 200 → DELIVERED; 400 → FAILED while the sibling delivers;
// the operator sees it (`events list --status failed`, `events show`) and re-drives only it.

fn cli(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
        .arg("events")
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("HOOKGATE_FAILPOINTS")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn retries_then_delivered_and_permanent_failure(backend: Backend) {
    let flaky = Receiver::start().await;
    flaky.script(&[500, 503, 500], 200);
    let rejecting = Receiver::start().await;
    rejecting.script(&[], 400);
    let mut h = gateway(backend)
        .destinations(&http_destination("flaky", &flaky.url(), ""))
        .destinations(&http_destination("rejecting", &rejecting.url(), ""))
        .endpoints(&sw_endpoint(&["flaky", "rejecting"]))
        .start()
        .await;
    let id = send(h.addr, "msg_retry_1", &event_body(1, 1)).await;
    let store = h.store().clone();
    wait_until("flaky DELIVERED and rejecting FAILED", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move {
            let d = deliveries(&store, &id).await;
            d.get("flaky")
                .is_some_and(|d| d.status == OutboxStatus::Delivered)
                && d.get("rejecting")
                    .is_some_and(|d| d.status == OutboxStatus::Failed)
        }
    })
    .await;
    let d = deliveries(h.store(), &id).await;
    assert_eq!(d["flaky"].attempt_count, 4, "three 5xx, then 200");
    assert_eq!(flaky.received().len(), 4);
    assert_eq!(flaky.logical().len(), 1, "one logical delivery");
    assert_eq!(
        d["rejecting"].attempt_count, 1,
        "4xx is permanent: no retry"
    );
    assert_eq!(
        d["rejecting"].last_error.as_deref(),
        Some("permanent: http status 400")
    );
    let event = h.store().get_event(&id).await.unwrap().unwrap();
    assert_eq!(
        event.status,
        InboxStatus::Processed,
        "the inbox row stays PROCESSED"
    );

    // The operator's view, through the real binary on the same store.
    let config = h.config_path().to_owned();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        cli(&config, &["list", "--status", "failed", "--json"])
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&id),
        "a FAILED delivery lists the event: {out}"
    );
    let config = h.config_path().to_owned();
    let id2 = id.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || cli(&config, &["show", &id2]))
        .await
        .unwrap();
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ds = shown["deliveries"].as_array().unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(ds[0]["destination"], "flaky");
    assert_eq!(ds[0]["status"], "DELIVERED");
    assert_eq!(ds[1]["destination"], "rejecting");
    assert_eq!(ds[1]["status"], "FAILED");

    // Fix the service, re-drive: only the failed delivery goes out again.
    rejecting.script(&[], 200);
    let config = h.config_path().to_owned();
    let id2 = id.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || cli(&config, &["retry", &id2]))
        .await
        .unwrap();
    assert_eq!(code, 0, "{out}{err}");
    wait_until("rejecting DELIVERED after retry", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move {
            deliveries(&store, &id)
                .await
                .get("rejecting")
                .is_some_and(|d| d.status == OutboxStatus::Delivered)
        }
    })
    .await;
    assert_eq!(rejecting.received().len(), 2);
    assert_eq!(
        flaky.received().len(),
        4,
        "the delivered sibling is not re-sent"
    );
    let failed = h
        .store()
        .events_with_failed_deliveries(&EventFilter::default())
        .await
        .unwrap();
    assert!(failed.is_empty());
    // Every recorded result, delivered or failed, was timed (the recorder is the process's:
    // other tests only add to the count).
    let metrics = metrics_text(h.admin).await;
    let timed = series_value(&metrics, "hookgate_delivery_commit_latency_seconds_count")
        .unwrap_or_default();
    assert!(timed >= 6.0, "{timed} delivery results timed");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_retries_then_delivered_and_400_is_failed() {
    retries_then_delivered_and_permanent_failure(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_retries_then_delivered_and_400_is_failed() {
    retries_then_delivered_and_permanent_failure(Backend::Postgres).await;
}

// ---------------------------------------------------------------------------------------
// A destination that hangs: its deliveries time out and wait; acknowledgements and the
// sibling destination are unaffected; at most `concurrency` requests hang at once.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hanging_destination_times_out_without_touching_acks_or_siblings() {
    let hanging = Receiver::start().await;
    hanging.state.hang.store(true, Ordering::SeqCst);
    let fine = Receiver::start().await;
    let mut h = gateway(Backend::Sqlite)
        .destinations(
            &http_destination(
                "hanging",
                &hanging.url(),
                "concurrency = 2\ntimeout_ms = 300",
            )
            .replace("timeout_ms = 2000\n", ""),
        )
        .destinations(&http_destination("fine", &fine.url(), ""))
        .endpoints(&sw_endpoint(&["hanging", "fine"]))
        .start()
        .await;
    const N: usize = 10;
    let mut ids = Vec::new();
    for i in 0..N {
        // Every acknowledgement is a 200 (asserted in `send`), whatever the hanging one does.
        ids.push(send(h.addr, &format!("msg_hang_{i}"), &event_body(i, 1)).await);
    }
    let store = h.store().clone();
    wait_until("every delivery to `fine`", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == N as u64 }
    })
    .await;
    assert_eq!(fine.logical().len(), N);
    wait_until("timeouts recorded on the hanging destination", WAIT, || {
        let (store, id) = (store.clone(), ids[0].clone());
        async move {
            deliveries(&store, &id).await["hanging"]
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("timed out"))
        }
    })
    .await;
    for id in &ids {
        let d = deliveries(h.store(), id).await;
        assert_eq!(d["fine"].status, OutboxStatus::Delivered);
        assert_eq!(
            d["hanging"].status,
            OutboxStatus::Pending,
            "waits, not lost"
        );
    }
    assert!(
        hanging.state.max_in_flight.load(Ordering::SeqCst) <= 2,
        "bounded by the destination's concurrency"
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// 429 with Retry-After: the next attempt waits at least that long (the backoff alone would
// retry within 100 ms here).

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn too_many_requests_honours_retry_after() {
    let receiver = Receiver::start().await;
    receiver.script(&[429], 200);
    receiver.state.retry_after.store(1, Ordering::SeqCst);
    let mut h = gateway(Backend::Sqlite)
        .destinations(&http_destination("app", &receiver.url(), ""))
        .endpoints(&sw_endpoint(&["app"]))
        .start()
        .await;
    let id = send(h.addr, "msg_429", &event_body(1, 1)).await;
    let store = h.store().clone();
    wait_until("delivered after the 429", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move {
            deliveries(&store, &id)
                .await
                .get("app")
                .is_some_and(|d| d.status == OutboxStatus::Delivered)
        }
    })
    .await;
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert!(
        got[1].at.duration_since(got[0].at) >= Duration::from_millis(900),
        "waited for Retry-After: {:?}",
        got[1].at.duration_since(got[0].at)
    );
    assert_eq!(deliveries(h.store(), &id).await["app"].attempt_count, 2);
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// Stale events (the version gate) produce no delivery.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_events_produce_no_delivery() {
    let receiver = Receiver::start().await;
    let mut h = gateway(Backend::Sqlite)
        .destinations(&http_destination("app", &receiver.url(), ""))
        .endpoints(&sw_endpoint(&["app"]))
        .start()
        .await;
    let newer = send(h.addr, "msg_v2", &event_body(7, 2)).await;
    let store = h.store().clone();
    wait_until("version 2 delivered", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == 1 }
    })
    .await;
    let older = send(h.addr, "msg_v1", &event_body(7, 1)).await;
    wait_until("version 1 processed", WAIT, || {
        let (store, id) = (store.clone(), older.clone());
        async move { store.get_event(&id).await.unwrap().unwrap().status == InboxStatus::Processed }
    })
    .await;
    let e = h.store().get_event(&older).await.unwrap().unwrap();
    assert_eq!(e.outcome, Some(hookgate_core::Outcome::Stale));
    assert!(
        deliveries(h.store(), &older).await.is_empty(),
        "no outbox row"
    );
    wait_until("the outbox drained", WAIT, || {
        let store = store.clone();
        async move { store.count_deliveries(OutboxStatus::Pending).await.unwrap() == 0 }
    })
    .await;
    assert_eq!(
        receiver.logical(),
        BTreeSet::from([newer]),
        "only the applied version was delivered"
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------
// NATS stopped mid-run, then started: deliveries wait in the outbox, then all arrive; none
// twice after the consumer's dedupe on the inbox id.

async fn nats_outage_then_recovery(backend: Backend) {
    let mut nats = Nats::start();
    let mut h = gateway(backend)
        .destinations(&nats_destination("bus", &nats.url(), ""))
        .endpoints(&sw_endpoint(&["bus"]))
        .start()
        .await;
    let mut ids = BTreeSet::new();
    for i in 0..5 {
        ids.insert(send(h.addr, &format!("msg_before_{i}"), &event_body(i, 1)).await);
    }
    let store = h.store().clone();
    wait_until("first five delivered", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == 5 }
    })
    .await;

    nats.down();
    let mut during = Vec::new();
    for i in 0..5 {
        let id = send(h.addr, &format!("msg_during_{i}"), &event_body(100 + i, 1)).await;
        ids.insert(id.clone());
        during.push(id);
    }
    wait_until("deliveries wait in the outbox, retrying", WAIT, || {
        let (store, during) = (store.clone(), during.clone());
        async move {
            let mut all = true;
            for id in &during {
                let d = deliveries(&store, id).await;
                all &= d
                    .get("bus")
                    .is_some_and(|d| d.status == OutboxStatus::Pending && d.attempt_count >= 2);
            }
            all
        }
    })
    .await;
    assert_eq!(delivered(h.store()).await, 5);

    nats.up();
    wait_until("all ten delivered after NATS is back", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == 10 }
    })
    .await;
    let msgs = stream_messages(&nats.url(), "HOOKS").await;
    // The consumer dedupes on the inbox id (a publish buffered while down may also land).
    let seen: BTreeSet<String> = msgs.iter().map(|m| m.inbox_id.clone()).collect();
    assert_eq!(seen, ids, "every event arrived");
    assert_eq!(
        msgs.len(),
        ids.len(),
        "JetStream already dropped re-publishes"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_nats_outage_then_recovery() {
    nats_outage_then_recovery(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_nats_outage_then_recovery() {
    nats_outage_then_recovery(Backend::Postgres).await;
}

// ---------------------------------------------------------------------------------------
// Config validation.

#[test]
fn destination_config_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let load = |rest: &str| {
        let text = gateway(Backend::Sqlite)
            .section(rest)
            .render("sqlite://x.db");
        Config::from_toml(&text, &dir.path().join("c.toml"), dir.path())
    };
    let ok = load(&format!(
        "{}{}",
        http_destination("a", "http://127.0.0.1:9/x", ""),
        sw_endpoint(&["a"])
    ))
    .unwrap();
    assert_eq!(ok.endpoints[0].destinations, vec!["a".to_owned()]);
    let rendered = hookgate::config::render_redacted(&ok);
    assert!(rendered.contains("[[destinations]]"));
    assert!(
        !rendered.contains("aG9va2dhdGUtZGVzdGluYXRpb24"),
        "secret redacted"
    );
    let cases: &[(&str, &str)] = &[
        (
            "[[destinations]]\nid = \"a\"\nkind = \"http\"\nurl = \"http://127.0.0.1:9/\"\n",
            "private",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"smtp\"\nurl = \"x\"\n",
            "unknown kind",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"nats\"\nurl = \"nats://h:4222\"\n",
            "stream",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"nats\"\nurl = \"nats://h:4222\"\nstream = \"S\"\nsubject = \"a.*\"\n",
            "subject",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"nats\"\nurl = \"nats://h:4222\"\nstream = \"S\"\nduplicate_window_seconds = 10\n",
            "duplicate_window_seconds",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"http\"\nurl = \"https://example.com/\"\nsigning_secrets = [\"not base64!\"]\n",
            "signing_secrets[0]",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"http\"\nurl = \"https://example.com/\"\nheaders = { \"webhook-id\" = \"x\" }\n",
            "headers.webhook-id",
        ),
        (
            "[[destinations]]\nid = \"a\"\nkind = \"http\"\nurl = \"https://example.com/\"\ntimeout_ms = 4000\n",
            "timeout_ms",
        ),
    ];
    for (rest, needle) in cases {
        let rest = if rest.contains("timeout_ms") {
            rest.to_string()
        } else {
            format!("{rest}timeout_ms = 1000\n")
        };
        let e = load(&rest).expect_err(&rest).to_string();
        assert!(e.contains(needle), "{rest}: {e}");
    }
    let e = load(&sw_endpoint(&["nope"])).unwrap_err().to_string();
    assert!(e.contains("endpoints[0].destinations[0]"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Crash with the real binary after publishing but before marking the outbox row: restart, the
// event is delivered again with the same key and deduplicated; nothing is lost.

#[cfg(feature = "failpoints")]
async fn crash_after_publish_before_mark(backend: Backend, kind: &str) {
    let receiver = Receiver::start().await;
    let nats = Nats::start();
    let destination = match kind {
        "http" => http_destination("dest", &receiver.url(), ""),
        _ => nats_destination("dest", &nats.url(), ""),
    };
    let files = gateway(backend)
        .destinations(&destination)
        .endpoints(&sw_endpoint(&["dest"]))
        .write()
        .await;
    let mut first = files.serve(Some("relay.after_publish_before_mark=abort"));
    let body = event_body(1, 1);
    let id = send(first.addr(), "msg_crash_1", &body).await;
    let status = tokio::task::spawn_blocking(move || {
        let status = first.wait_exit();
        (status, first.take_logs())
    })
    .await
    .unwrap();
    assert!(!status.0.success(), "the failpoint aborts: {status:?}");

    // Published (HTTP: the receiver got it; NATS: the stream has it), not marked.
    let store = files.open_store().await;
    let d = deliveries(&store, &id).await;
    assert_eq!(
        d["dest"].status,
        OutboxStatus::Pending,
        "not marked before the crash"
    );
    match kind {
        "http" => assert_eq!(receiver.received().len(), 1),
        _ => assert_eq!(stream_messages(&nats.url(), "HOOKS").await.len(), 1),
    }

    let second = files.serve(None);
    wait_until("re-delivered and marked after the lease", WAIT, || {
        let (store, id) = (store.clone(), id.clone());
        async move { deliveries(&store, &id).await["dest"].status == OutboxStatus::Delivered }
    })
    .await;
    let logs = tokio::task::spawn_blocking(move || second.terminate())
        .await
        .unwrap();
    match kind {
        "http" => {
            let got = receiver.received();
            assert_eq!(got.len(), 2, "delivered twice (effectively once)");
            assert!(got.iter().all(|r| r.headers["idempotency-key"] == id
                && r.body == body
                && standard_webhooks_verify(DEST_SECRET, &r.headers, &r.body)));
            assert_eq!(
                receiver.logical(),
                BTreeSet::from([id.clone()]),
                "one logical delivery"
            );
        }
        _ => {
            let msgs = stream_messages(&nats.url(), "HOOKS").await;
            assert_eq!(
                msgs.len(),
                1,
                "JetStream's duplicate window dropped the re-publish"
            );
            assert_eq!(msgs[0].inbox_id, id);
            assert!(
                logs.contains("deduplicated by the destination"),
                "the re-publish was acknowledged as a duplicate; logs:\n{logs}"
            );
        }
    }
    store.close().await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_crash_after_publish_before_mark_http() {
    crash_after_publish_before_mark(Backend::Sqlite, "http").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_crash_after_publish_before_mark_nats() {
    crash_after_publish_before_mark(Backend::Sqlite, "nats").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_crash_after_publish_before_mark_http() {
    crash_after_publish_before_mark(Backend::Postgres, "http").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_crash_after_publish_before_mark_nats() {
    crash_after_publish_before_mark(Backend::Postgres, "nats").await;
}
