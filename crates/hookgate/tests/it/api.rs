//! The operator API over HTTP against the real binary, on both backends: tokens and scopes
//! (401 / 403, audited as denied), every list filter, keyset paging while events are being
//! accepted, one event, its payload (audited decrypt), replay of IGNORED and PROCESSED events,
//! re-delivery to one destination with the same and with a fresh Idempotency-Key (a real HTTP
//! receiver over a socket), retry refusals, the audit log. Every answer is validated against
//! the OpenAPI document the binary serves.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const READ: &str = "read-token-0123456789abcdef";
const DECRYPT: &str = "decrypt-token-0123456789abcdef";
const OPERATE: &str = "operate-token-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(60);

fn tokens() -> String {
    [
        ("reader", "[\"read\"]", READ),
        ("decryptor", "[\"read\", \"decrypt\"]", DECRYPT),
        ("operator", "[\"operate\"]", OPERATE),
    ]
    .iter()
    .map(|(name, scopes, value)| {
        format!(
            "[[admin.tokens]]\nname = {}\nscopes = {scopes}\nvalue = {}\n",
            q(name),
            q(value)
        )
    })
    .collect()
}

/// An HTTP destination on a real socket: records each request's `Idempotency-Key`, answers
/// 200.
struct Receiver {
    addr: SocketAddr,
    keys: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    async fn start_on(addr: SocketAddr) -> Receiver {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let keys = Arc::new(Mutex::new(Vec::new()));
        let seen = keys.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, seen.clone()));
            }
        });
        Receiver { addr, keys }
    }

    fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }
}

async fn answer(stream: tokio::net::TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut reader = tokio::io::BufReader::new(stream);
    loop {
        let mut line = String::new();
        let mut key = None;
        let mut length = 0usize;
        let mut got_head = false;
        while reader.read_line(&mut line).await.unwrap_or(0) > 0 {
            got_head = true;
            let l = line.trim_end().to_owned();
            line.clear();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("idempotency-key:") {
                key = Some(l["idempotency-key:".len()..].trim().to_owned());
            }
        }
        if !got_head {
            return;
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        seen.lock().unwrap().push(key.unwrap_or_default());
        if reader
            .get_mut()
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    }
}

/// The operator API's client: every answer is checked against the served OpenAPI document
/// (the schema of the documented response for that route and status).
struct Api {
    base: String,
    client: reqwest::Client,
    doc: Value,
}

impl Api {
    async fn new(admin: SocketAddr) -> Api {
        let base = format!("http://{admin}");
        let client = reqwest::Client::new();
        let doc: Value = client
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            doc["openapi"].as_str().unwrap().starts_with("3.1"),
            "{}",
            doc["openapi"]
        );
        Api { base, client, doc }
    }

    /// Sends `method path` (`template` is its route in the document) with `token` and
    /// `body`; returns the status and the JSON answer, validated.
    async fn call(
        &self,
        method: &str,
        template: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method.parse().unwrap(), format!("{}{path}", self.base));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(&b);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"));
        self.validate(&method.to_ascii_lowercase(), template, status, &value);
        (status, value)
    }

    fn validate(&self, method: &str, template: &str, status: u16, value: &Value) {
        let operation = &self.doc["paths"][template][method];
        assert!(
            operation.is_object(),
            "{method} {template} is not in the OpenAPI document"
        );
        let schema =
            &operation["responses"][status.to_string()]["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {template} answered {status}, which the document does not list"
        );
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("schema of {method} {template} {status}: {e}"));
        if let Err(e) = validator.validate(value) {
            panic!("{method} {template} {status}: {value} does not match the document: {e}");
        }
    }

    async fn get(&self, template: &str, path: &str, token: Option<&str>) -> (u16, Value) {
        self.call("GET", template, path, token, None).await
    }

    /// `GET /api/v1/events?query` with the read token: the ids of the page (asserting 200).
    async fn ids(&self, query: &str) -> Vec<String> {
        let (status, page) = self
            .get(
                "/api/v1/events",
                &format!("/api/v1/events?{query}"),
                Some(READ),
            )
            .await;
        assert_eq!(status, 200, "{query}: {page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn event(&self, id: &str) -> Value {
        let (status, e) = self
            .get(
                "/api/v1/events/{id}",
                &format!("/api/v1/events/{id}"),
                Some(READ),
            )
            .await;
        assert_eq!(status, 200, "{e}");
        e
    }

    async fn post(
        &self,
        template: &str,
        id: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let path = template.replace("{id}", id);
        self.call("POST", template, &path, Some(token), body).await
    }

    async fn audit(&self) -> Vec<Value> {
        let (status, page) = self
            .get("/api/v1/audit", "/api/v1/audit?limit=500", Some(READ))
            .await;
        assert_eq!(status, 200, "{page}");
        page["entries"].as_array().unwrap().clone()
    }
}

async fn post_event(webhook: SocketAddr, id: &str, event_type: &str, object: &str) -> String {
    let body = format!(
        r#"{{"type":"{event_type}","timestamp":"2026-12-01T00:00:00Z","data":{{"id":"{object}"}}}}"#
    );
    let r = post_signed(
        webhook,
        "sw",
        "standard_webhooks",
        SW_SECRET,
        id,
        unix_now(),
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let ack = r.json();
    ack["inbox_id"]
        .as_str()
        .or_else(|| ack["id"].as_str())
        .unwrap_or_else(|| panic!("no inbox id in {ack}"))
        .to_owned()
}

fn gateway(backend: Backend, receiver: &Receiver) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .admin_settings(&tokens())
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20")
        .destinations(&format!(
            "[[destinations]]\nid = \"recv\"\nkind = \"http\"\nurl = \"http://{}/hook\"\n\
             timeout_ms = 2000\nallow_private_network = true\n",
            receiver.addr
        ))
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "allowed_event_types = [\"invoice.*\"]\ndestinations = [\"recv\"]\n\
             object_id_pointer = \"/data/id\"",
        ))
}

async fn wait_status(api: &Api, id: &str, status: &str) -> Value {
    wait_for(&format!("{id} {status}"), WAIT, || async {
        let e = api.event(id).await;
        (e["status"] == status).then_some(e)
    })
    .await
}

async fn wait_keys(receiver: &Receiver, n: usize) -> Vec<String> {
    wait_for(&format!("{n} deliveries received"), WAIT, || async {
        let keys = receiver.keys();
        (keys.len() >= n).then_some(keys)
    })
    .await
}

async fn operator_api(backend: Backend) {
    let receiver = Receiver::start().await;
    let files = gateway(backend, &receiver).write().await;
    let gw = files.serve(None);
    let api = Api::new(gw.admin.unwrap()).await;
    let webhook = gw.addr();

    let paid = post_event(webhook, "msg_1", "invoice.paid", "o1").await;
    let failed = post_event(webhook, "msg_2", "invoice.failed", "o2").await;
    let ignored = post_event(webhook, "msg_3", "customer.created", "o3").await;
    wait_status(&api, &paid, "PROCESSED").await;
    wait_status(&api, &failed, "PROCESSED").await;
    assert_eq!(api.event(&ignored).await["status"], "IGNORED");
    let keys = wait_keys(&receiver, 2).await;
    assert_eq!(
        keys.iter().cloned().collect::<HashSet<_>>(),
        HashSet::from([paid.clone(), failed.clone()]),
        "deliveries carry the inbox id as Idempotency-Key"
    );

    // Tokens and scopes: 401 without a known token, 403 without the scope.
    let list = "/api/v1/events";
    assert_eq!(api.get(list, list, None).await.0, 401);
    assert_eq!(
        api.get(list, list, Some("not-a-configured-token-at-all"))
            .await
            .0,
        401
    );
    let raw = reqwest::Client::new()
        .get(format!("{}{list}", api.base))
        .header("authorization", format!("Basic {READ}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        raw.status().as_u16(),
        401,
        "a malformed Authorization is 401"
    );
    assert_eq!(
        raw.headers().get("www-authenticate").unwrap(),
        "Bearer",
        "401 names the scheme"
    );
    let (status, body) = api.get(list, list, Some(OPERATE)).await;
    assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")));
    let payload_path = format!("/api/v1/events/{paid}/payload");
    let (status, _) = api
        .get("/api/v1/events/{id}/payload", &payload_path, Some(READ))
        .await;
    assert_eq!(status, 403, "read does not include decrypt");
    let (status, _) = api
        .post("/api/v1/events/{id}/replay", &paid, READ, None)
        .await;
    assert_eq!(status, 403, "read does not include operate");
    // The probes stay open.
    let open = reqwest::get(format!("{}/healthz", api.base)).await.unwrap();
    assert_eq!(open.status().as_u16(), 200);
    let metrics = reqwest::get(format!("{}/metrics", api.base)).await.unwrap();
    assert_eq!(metrics.status().as_u16(), 200);

    // Every filter.
    let all = api.ids("").await;
    assert_eq!(
        all,
        vec![ignored.clone(), failed.clone(), paid.clone()],
        "newest first"
    );
    assert_eq!(api.ids("status=ignored").await, vec![ignored.clone()]);
    assert_eq!(
        api.ids("status=PROCESSED").await,
        vec![failed.clone(), paid.clone()]
    );
    assert_eq!(api.ids("status=Failed").await, Vec::<String>::new());
    assert_eq!(api.ids("provider=standard_webhooks").await, all);
    assert_eq!(api.ids("provider=github").await, Vec::<String>::new());
    assert_eq!(api.ids("endpoint_id=sw").await, all);
    assert_eq!(api.ids("endpoint_id=other").await, Vec::<String>::new());
    assert_eq!(
        api.ids("event_type=invoice.*").await,
        vec![failed.clone(), paid.clone()]
    );
    assert_eq!(
        api.ids("event_type=invoice.p%3Fid").await,
        vec![paid.clone()]
    );
    assert_eq!(
        api.ids("event_type=Invoice.*").await,
        Vec::<String>::new(),
        "case-sensitive"
    );
    assert_eq!(
        api.ids("provider_event_id=msg_2").await,
        vec![failed.clone()]
    );
    assert_eq!(api.ids("object_id=o1").await, vec![paid.clone()]);
    assert_eq!(api.ids("matched_secret_version=v1").await, all);
    assert_eq!(
        api.ids("matched_secret_version=v9").await,
        Vec::<String>::new()
    );
    assert_eq!(
        api.ids("destination=recv&delivery_status=delivered").await,
        vec![failed.clone(), paid.clone()]
    );
    assert_eq!(
        api.ids("destination=recv").await,
        vec![failed.clone(), paid.clone()]
    );
    assert_eq!(
        api.ids("delivery_status=FAILED").await,
        Vec::<String>::new()
    );
    assert_eq!(api.ids("destination=elsewhere").await, Vec::<String>::new());
    let received = |id: &str| {
        let id = id.to_owned();
        let api = &api;
        async move { api.event(&id).await["received_at_ms"].as_i64().unwrap() }
    };
    let t_failed = received(&failed).await;
    let t_ignored = received(&ignored).await;
    let (after, before) = (t_failed, t_ignored);
    let mut window = api
        .ids(&format!("received_after={after}&received_before={before}"))
        .await;
    window.retain(|id| *id != paid); // same millisecond as `failed` is possible
    assert_eq!(
        window,
        vec![failed.clone()],
        "after is inclusive, before exclusive"
    );
    assert_eq!(
        api.ids("received_after=2100-01-01T00:00:00Z").await,
        Vec::<String>::new()
    );
    assert_eq!(
        api.ids("received_before=2000-01-01T00:00:00Z").await,
        Vec::<String>::new()
    );
    assert_eq!(api.ids("limit=1").await, vec![ignored.clone()]);
    for bad in [
        "colour=red",
        "status=done",
        "limit=501",
        "limit=0",
        "cursor=bm90LWEtY3Vyc29y",
        "delivery_status=lost",
        "received_after=yesterday",
    ] {
        let (status, body) = api.get(list, &format!("{list}?{bad}"), Some(READ)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}"
        );
    }

    // One event: top-level status, attempts, deliveries.
    let e = api.event(&paid).await;
    assert_eq!(e["status"], "PROCESSED");
    assert_eq!(e["attempts"]["count"], 1);
    assert_eq!(e["deliveries"][0]["destination"], "recv");
    assert_eq!(e["deliveries"][0]["status"], "DELIVERED");
    assert_eq!(e["deliveries"][0]["idempotency_key"], paid.as_str());
    let (status, body) = api
        .get(
            "/api/v1/events/{id}",
            "/api/v1/events/0190-nope",
            Some(READ),
        )
        .await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));

    // The payload, decrypted for the decrypt scope, and audited.
    let (status, p) = api
        .get("/api/v1/events/{id}/payload", &payload_path, Some(DECRYPT))
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["encoding"], "utf8");
    assert!(
        p["body"]
            .as_str()
            .unwrap()
            .contains(r#""type":"invoice.paid""#),
        "{p}"
    );

    // Replay of an IGNORED event: processed whatever the allow-list says, then delivered.
    let (status, done) = api
        .post("/api/v1/events/{id}/replay", &ignored, OPERATE, None)
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["action"], "replay");
    wait_status(&api, &ignored, "PROCESSED").await;
    let keys = wait_keys(&receiver, 3).await;
    assert_eq!(
        keys[2], ignored,
        "the replayed event is delivered once processed"
    );

    // Replay of a PROCESSED event ({} body): processing runs again; its delivery already
    // exists, so nothing is sent again (see docs/api.md).
    let before = api.event(&paid).await;
    let (status, _) = api
        .post(
            "/api/v1/events/{id}/replay",
            &paid,
            OPERATE,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200);
    let after = wait_for("the replayed event processed again", WAIT, || async {
        let e = api.event(&paid).await;
        (e["status"] == "PROCESSED" && e["processed_at_ms"] != before["processed_at_ms"])
            .then_some(e)
    })
    .await;
    assert_eq!(after["attempt_count"], 1, "attempts were reset");
    assert_eq!(
        after["deliveries"], before["deliveries"],
        "the delivery is untouched"
    );

    // Re-delivery to one destination, with the same key, then with a fresh one.
    let (status, done) = api
        .post(
            "/api/v1/events/{id}/replay",
            &paid,
            OPERATE,
            Some(json!({ "destination": "recv" })),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["action"], "redeliver");
    assert_eq!(done["idempotency_key"], paid.as_str());
    let keys = wait_keys(&receiver, 4).await;
    assert_eq!(keys[3], paid, "the same Idempotency-Key by default");
    assert_eq!(keys.len(), 4, "the PROCESSED replay sent nothing: {keys:?}");
    let (status, done) = api
        .post(
            "/api/v1/events/{id}/replay",
            &paid,
            OPERATE,
            Some(json!({ "destination": "recv", "fresh_key": true })),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    let fresh = done["idempotency_key"].as_str().unwrap().to_owned();
    assert_ne!(fresh, paid);
    let keys = wait_keys(&receiver, 5).await;
    assert_eq!(keys[4], fresh, "the fresh key is sent");
    wait_for("the fresh key recorded on the delivery", WAIT, || async {
        let e = api.event(&paid).await;
        (e["deliveries"][0]["status"] == "DELIVERED"
            && e["deliveries"][0]["idempotency_key"] == fresh.as_str())
        .then_some(())
    })
    .await;

    // Refusals.
    let (status, body) = api
        .post(
            "/api/v1/events/{id}/replay",
            &paid,
            OPERATE,
            Some(json!({ "destination": "nowhere" })),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_destination"))
    );
    let (status, body) = api
        .post(
            "/api/v1/events/{id}/replay",
            &paid,
            OPERATE,
            Some(json!({ "fresh_key": true })),
        )
        .await;
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")));
    let (status, body) = api
        .post("/api/v1/events/{id}/retry", &paid, OPERATE, None)
        .await;
    assert_eq!((status, body["error"].as_str()), (409, Some("not_failed")));
    let (status, body) = api
        .post("/api/v1/events/{id}/replay", "0190-nope", OPERATE, None)
        .await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_found")));

    // The audit log: every decrypt, operation and refusal.
    let audit = api.audit().await;
    let has = |token: &str, action: &str, target: &str, result: &str| {
        audit.iter().any(|a| {
            a["token"] == token
                && a["action"] == action
                && a["target"] == target
                && a["result"] == result
        })
    };
    assert!(has("decryptor", "decrypt", &paid, "ok"), "{audit:#?}");
    assert!(has("operator", "replay", &ignored, "ok"));
    assert!(has("operator", "replay", &paid, "ok"));
    assert!(has("operator", "redeliver", &paid, "ok"));
    assert!(has("operator", "redeliver", &paid, "unknown_destination"));
    assert!(has("operator", "retry", &paid, "not_failed"));
    assert!(has("reader", "decrypt", &paid, "denied"));
    assert!(has("reader", "replay", &paid, "denied"));
    assert!(has("operator", "events.list", "-", "denied"));
    assert!(
        has("-", "events.list", "-", "denied"),
        "unknown tokens are audited as -"
    );
    let fresh_entry = audit
        .iter()
        .find(|a| {
            a["action"] == "redeliver" && a["detail"].as_str().is_some_and(|d| d.contains(&fresh))
        })
        .expect("the fresh key is recorded in the audit");
    assert_eq!(fresh_entry["result"], "ok");
    for a in &audit {
        for field in ["at", "token", "action", "target", "filter", "result"] {
            assert!(a.get(field).is_some(), "{field} missing in {a}");
        }
    }
    let metrics = reqwest::get(format!("{}/metrics", api.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted = |action: &str, result: &str| {
        metrics.lines().any(|l| {
            l.starts_with("hookgate_admin_api_audited_total{")
                && l.contains(&format!("action=\"{action}\""))
                && l.contains(&format!("result=\"{result}\""))
        })
    };
    assert!(counted("decrypt", "ok"), "{metrics}");
    assert!(counted("events.list", "denied"), "{metrics}");
    let logs = gw.terminate();
    for secret in [
        READ,
        DECRYPT,
        OPERATE,
        SW_SECRET,
        r#""type":"invoice.paid""#,
    ] {
        assert!(!logs.contains(secret), "{secret} in the logs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_api_on_sqlite() {
    operator_api(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_api_on_postgres() {
    operator_api(Backend::Postgres).await;
}

/// Pages of 7 while a task keeps accepting events: every event stored before paging began is
/// listed exactly once, in order, and nothing is listed twice.
async fn paging_under_inserts(backend: Backend) {
    let receiver = Receiver::start().await;
    let files = gateway(backend, &receiver).write().await;
    let gw = files.serve(None);
    let api = Api::new(gw.admin.unwrap()).await;
    let webhook = gw.addr();
    let mut existing = HashSet::new();
    for i in 0..40 {
        existing.insert(post_event(webhook, &format!("pre_{i}"), "invoice.paid", "o").await);
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (stop, accepted) = (stop.clone(), accepted.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                post_event(webhook, &format!("during_{n}"), "invoice.paid", "o").await;
                n += 1;
                accepted.store(n, std::sync::atomic::Ordering::SeqCst);
            }
            n
        })
    };
    let mut seen: Vec<(i64, String)> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/events?limit=7&cursor={c}"),
            None => "/api/v1/events?limit=7".to_owned(),
        };
        let (status, page) = api.get("/api/v1/events", &path, Some(READ)).await;
        assert_eq!(status, 200, "{page}");
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 7);
        for e in events {
            seen.push((
                e["received_at_ms"].as_i64().unwrap(),
                e["id"].as_str().unwrap().to_owned(),
            ));
        }
        // Between pages, events are being accepted: wait until a few more were.
        let target = accepted.load(std::sync::atomic::Ordering::SeqCst) + 2;
        wait_until("more events accepted between pages", WAIT, || {
            let accepted = accepted.clone();
            async move { accepted.load(std::sync::atomic::Ordering::SeqCst) >= target }
        })
        .await;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let during = writer.await.unwrap();
    let ids: HashSet<&String> = seen.iter().map(|(_, id)| id).collect();
    assert_eq!(ids.len(), seen.len(), "no event listed twice");
    for id in &existing {
        assert!(ids.contains(id), "{id} was skipped");
    }
    assert!(
        seen.windows(2).all(|w| w[0] > w[1]),
        "newest first by (received_at, id)"
    );
    assert!(during > 0, "events were accepted while paging");
    gw.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paging_is_stable_under_concurrent_inserts_on_sqlite() {
    paging_under_inserts(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paging_is_stable_under_concurrent_inserts_on_postgres() {
    paging_under_inserts(Backend::Postgres).await;
}

/// `[admin] tls`: the operator API (and the probes) over HTTPS with the listener's own
/// certificate; plain HTTP gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_api_over_admin_tls() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("admin.pem"), dir.path().join("admin.key"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let admin = format!(
        "tls = {{ cert = {}, key = {} }}\n{}",
        q(&cert_path.display().to_string()),
        q(&key_path.display().to_string()),
        tokens()
    );
    let files = TestGateway::builder()
        .admin_settings(&admin)
        .workers(0)
        .write()
        .await;
    let gw = files.serve(None);
    let port = gw.admin.unwrap().port();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", ([127, 0, 0, 1], port).into())
        .https_only(true)
        .build()
        .unwrap();
    let page = client
        .get(format!("https://localhost:{port}/api/v1/events"))
        .bearer_auth(READ)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page: Value = page.json().await.unwrap();
    assert_eq!(page, json!({ "events": [], "next_cursor": null }));
    let denied = client
        .get(format!("https://localhost:{port}/api/v1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    let health = client
        .get(format!("https://localhost:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/v1/events"))
        .bearer_auth(READ)
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
    gw.terminate();
}

/// `hookgate events …` runs the same operations over the API (`--url`, the token in
/// `HOOKGATE_ADMIN_TOKEN`) as on the store directly (`--config`), and pages with the list's
/// filters.
async fn events_cli(backend: Backend) {
    let receiver = Receiver::start().await;
    let files = gateway(backend, &receiver).write().await;
    let gw = files.serve(None);
    let admin = gw.admin.unwrap();
    let api = Api::new(admin).await;
    let webhook = gw.addr();
    let paid = post_event(webhook, "msg_1", "invoice.paid", "o1").await;
    let failed = post_event(webhook, "msg_2", "invoice.failed", "o2").await;
    let ignored = post_event(webhook, "msg_3", "customer.created", "o3").await;
    wait_status(&api, &paid, "PROCESSED").await;
    wait_status(&api, &failed, "PROCESSED").await;
    wait_keys(&receiver, 2).await;
    let url = format!("http://{admin}");
    let config = files.config_path.clone();
    let run = move |args: Vec<String>, token: Option<&'static str>| {
        let (url, config) = (url.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(binary());
            cmd.arg("events")
                .args(&args)
                .env_remove("HOOKGATE_ADMIN_TOKEN");
            match token {
                Some(t) => {
                    cmd.arg("--url").arg(&url).env("HOOKGATE_ADMIN_TOKEN", t);
                }
                None => {
                    cmd.arg("--config").arg(&config);
                }
            }
            let out = cmd.output().unwrap();
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let ids = |out: &str| {
        out.lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    for token in [Some(READ), None] {
        let (code, out, err) = run(args(&["list", "--json", "--status", "IGNORED"]), token)
            .await
            .unwrap();
        assert_eq!(code, 0, "{err}");
        assert_eq!(ids(&out), vec![ignored.clone()], "{token:?}");
        let (code, out, err) = run(
            args(&[
                "list",
                "--json",
                "--event-type",
                "invoice.*",
                "--limit",
                "1",
            ]),
            token,
        )
        .await
        .unwrap();
        assert_eq!(code, 0, "{err}");
        assert_eq!(ids(&out), vec![failed.clone()]);
        let (code, out, _) = run(args(&["list", "--json"]), token).await.unwrap();
        assert_eq!(code, 0);
        assert_eq!(
            ids(&out),
            vec![ignored.clone(), failed.clone(), paid.clone()]
        );
    }
    let (code, _, err) = run(args(&["list", "--json"]), Some(OPERATE)).await.unwrap();
    assert_ne!(code, 0, "the operate token has no read scope");
    assert!(err.contains("forbidden"), "{err}");

    // Replay of the IGNORED event over the API, re-delivery with a fresh key on the store.
    let (code, out, err) = run(args(&["replay", &ignored]), Some(OPERATE))
        .await
        .unwrap();
    assert_eq!(code, 0, "{out}{err}");
    wait_status(&api, &ignored, "PROCESSED").await;
    wait_keys(&receiver, 3).await;
    let (code, out, err) = run(
        args(&["replay", &paid, "--destination", "recv", "--fresh-key"]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let keys = wait_keys(&receiver, 4).await;
    assert!(!keys[..3].contains(&keys[3]), "a fresh key: {keys:?}");
    // Show with the payload over the API: the fields of `events show`, and the body.
    let (code, out, err) = run(args(&["show", &paid, "--payload"]), Some(DECRYPT))
        .await
        .unwrap();
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    for field in [
        "id",
        "status",
        "payload_stored",
        "matched_secret_version",
        "deliveries",
    ] {
        assert!(shown.get(field).is_some(), "{field} in {shown}");
    }
    assert!(shown["payload"].as_str().unwrap().contains("invoice.paid"));
    let (code, _, err) = run(args(&["retry", &paid]), Some(OPERATE)).await.unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("not_failed"), "{err}");
    // Both ways are audited.
    let audit = api.audit().await;
    assert!(audit.iter().any(|a| a["action"] == "replay"
        && a["token"] == "operator"
        && a["target"] == ignored.as_str()));
    assert!(audit.iter().any(|a| a["action"] == "redeliver"
        && a["token"] != "operator"
        && a["target"] == paid.as_str()
        && a["result"] == "ok"));
    assert!(
        audit
            .iter()
            .any(|a| a["action"] == "decrypt" && a["token"] == "decryptor")
    );
    gw.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_cli_over_the_api_and_the_store_on_sqlite() {
    events_cli(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_cli_over_the_api_and_the_store_on_postgres() {
    events_cli(Backend::Postgres).await;
}

/// Retry of a FAILED delivery over the API, then the refusals once the payload is purged
/// (`hookgate events purge`): retry, replay, re-delivery and the payload are 409
/// `payload_purged`, and audited so.
async fn retry_and_purged_payloads(backend: Backend) {
    let receiver = Receiver::start().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_addr = closed.local_addr().unwrap();
    let down_url = format!("http://{down_addr}/hook");
    drop(closed);
    let files = TestGateway::builder()
        .backend(backend)
        .admin_settings(&tokens())
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20")
        .destinations(&format!(
            "[[destinations]]\nid = \"recv\"\nkind = \"http\"\nurl = \"http://{}/hook\"\n\
             timeout_ms = 2000\nallow_private_network = true\n\
             [[destinations]]\nid = \"down\"\nkind = \"http\"\nurl = {}\n\
             timeout_ms = 2000\nallow_private_network = true\n\
             retry = {{ base_ms = 20, cap_ms = 50, max_attempts = 1 }}\n",
            receiver.addr,
            q(&down_url)
        ))
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"recv\", \"down\"]",
        ))
        .write()
        .await;
    let gw = files.serve(None);
    let api = Api::new(gw.admin.unwrap()).await;
    let id = post_event(gw.addr(), "msg_r1", "invoice.paid", "o1").await;
    let failed_delivery = || async {
        let e = api.event(&id).await;
        let down = e["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["destination"] == "down")
            .cloned();
        down.filter(|d| d["status"] == "FAILED")
    };
    wait_for("the delivery to down FAILED", WAIT, failed_delivery).await;
    assert_eq!(
        api.ids("destination=down&delivery_status=failed").await,
        vec![id.clone()]
    );
    assert_eq!(
        api.ids("destination=recv&delivery_status=failed").await,
        Vec::<String>::new()
    );
    // The destination is back: a retry delivers the FAILED delivery (and only it).
    let back = Receiver::start_on(down_addr).await;
    let (status, done) = api
        .post("/api/v1/events/{id}/retry", &id, OPERATE, None)
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (done["deliveries"].as_u64(), done["status"].as_str()),
        (Some(1), Some("PROCESSED"))
    );
    assert_eq!(wait_keys(&back, 1).await, vec![id.clone()]);
    wait_until("the retried delivery DELIVERED", WAIT, || async {
        api.ids("destination=down&delivery_status=delivered").await == vec![id.clone()]
    })
    .await;
    assert_eq!(
        receiver.keys(),
        vec![id.clone()],
        "recv was not sent it again"
    );

    // Purge the payload, then everything that needs it is refused.
    let config = files.config_path.clone();
    let purge_id = id.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary())
            .args(["events", "purge", &purge_id, "--config"])
            .arg(&config)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (template, body) in [
        ("/api/v1/events/{id}/retry", None),
        ("/api/v1/events/{id}/replay", None),
        (
            "/api/v1/events/{id}/replay",
            Some(json!({ "destination": "recv" })),
        ),
    ] {
        let (status, refused) = api.post(template, &id, OPERATE, body).await;
        assert_eq!(
            (status, refused["error"].as_str()),
            (409, Some("payload_purged")),
            "{template}"
        );
    }
    let (status, refused) = api
        .get(
            "/api/v1/events/{id}/payload",
            &format!("/api/v1/events/{id}/payload"),
            Some(DECRYPT),
        )
        .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (409, Some("payload_purged"))
    );
    assert_eq!(api.event(&id).await["payload_stored"], false);
    let audit = api.audit().await;
    for action in ["retry", "replay", "redeliver", "decrypt"] {
        assert!(
            audit
                .iter()
                .any(|a| a["action"] == action && a["result"] == "payload_purged"),
            "{action}: {audit:#?}"
        );
    }
    assert!(
        audit
            .iter()
            .any(|a| a["action"] == "retry" && a["result"] == "ok")
    );
    assert!(audit.iter().any(|a| a["action"] == "events.purge"));
    gw.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_and_purged_payloads_on_sqlite() {
    retry_and_purged_payloads(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_and_purged_payloads_on_postgres() {
    retry_and_purged_payloads(Backend::Postgres).await;
}

/// The real binary refuses to start with a non-loopback admin listener and no token (the
/// error names `admin.tokens`), and with tokens but no TLS there (`admin.tls`).
#[tokio::test]
async fn a_public_admin_listener_needs_tokens_and_tls() {
    let with_tokens = tokens();
    for (extra, key) in [("", "admin.tokens"), (with_tokens.as_str(), "admin.tls")] {
        let files = TestGateway::builder()
            .admin_settings(extra)
            .workers(0)
            .write()
            .await;
        let text = std::fs::read_to_string(&files.config_path).unwrap();
        let public = text.replacen(
            "[admin]\nlisten = \"127.0.0.1:0\"",
            "[admin]\nlisten = \"0.0.0.0:0\"",
            1,
        );
        assert_ne!(public, text);
        std::fs::write(&files.config_path, public).unwrap();
        let mut gw = BinaryGateway::launch(BinaryRole::Serve, &files.config_path, None);
        let status = gw.wait_exit();
        let logs = gw.take_logs();
        assert!(!status.success(), "{logs}");
        assert!(logs.contains(&format!("config error at `{key}`")), "{logs}");
    }
}

/// Tokens are read again on SIGHUP: a token removed from the file is refused at once, a new
/// one works, and a token whose source cannot be read fails the reload (the running tokens
/// stay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_replaced_on_reload() {
    let files = TestGateway::builder()
        .admin_settings(
            "[[admin.tokens]]\nname = \"old\"\nscopes = [\"read\"]\nvalue = \"old-token-0123456789abcdef\"\n",
        )
        .workers(0)
        .write()
        .await;
    let gw = files.serve(None);
    let api = Api::new(gw.admin.unwrap()).await;
    let list = "/api/v1/events";
    assert_eq!(
        api.get(list, list, Some("old-token-0123456789abcdef"))
            .await
            .0,
        200
    );
    let text = std::fs::read_to_string(&files.config_path).unwrap();
    let swapped = text.replace(
        "name = \"old\"\nscopes = [\"read\"]\nvalue = \"old-token-0123456789abcdef\"",
        "name = \"new\"\nscopes = [\"read\"]\nvalue = \"new-token-0123456789abcdef\"",
    );
    assert_ne!(swapped, text);
    std::fs::write(&files.config_path, &swapped).unwrap();
    gw.signal("-HUP");
    wait_until("the new token is accepted", WAIT, || async {
        api.get(list, list, Some("new-token-0123456789abcdef"))
            .await
            .0
            == 200
    })
    .await;
    assert_eq!(
        api.get(list, list, Some("old-token-0123456789abcdef"))
            .await
            .0,
        401
    );
    // A token from an environment variable that is not set: the reload fails, "new" stays.
    let broken = swapped.replace(
        "value = \"new-token-0123456789abcdef\"",
        "value = \"env:HOOKGATE_TEST_SURELY_UNSET_TOKEN\"",
    );
    std::fs::write(&files.config_path, broken).unwrap();
    gw.signal("-HUP");
    let admin = gw.admin.unwrap();
    wait_until("the failed reload is reported", WAIT, || async move {
        let r = reqwest::get(format!("http://{admin}/readyz"))
            .await
            .unwrap();
        r.text().await.unwrap().contains("config_reload_failed")
    })
    .await;
    assert_eq!(
        api.get(list, list, Some("new-token-0123456789abcdef"))
            .await
            .0,
        200
    );
    gw.terminate();
}
