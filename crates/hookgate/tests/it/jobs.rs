//! Bulk jobs over HTTP against the real binary, on both backends (issue 17): a replay job
//! over 40 processed events is interrupted by `kill -9` of the gateway and resumed by the
//! next process from its last committed batch, ending with exact progress counts (every
//! event replayed, none twice); a second job is paused (its progress stays put while another
//! job runs), resumed, and cancelled; refusals and the audit trail. Every answer is validated
//! against the OpenAPI document the binary serves.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OPERATE: &str = "jobs-operate-token-0123456789abcdef";
const READ: &str = "jobs-read-token-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(90);
const EVENTS: usize = 40;

/// A client of the operator API whose every answer is checked against the served OpenAPI
/// document (the documented schema of that route and status).
pub(crate) struct Api {
    base: String,
    client: reqwest::Client,
    doc: Value,
}

impl Api {
    pub(crate) async fn new(admin: SocketAddr) -> Api {
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
        Api { base, client, doc }
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        template: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(b) = body {
            request = request.json(&b);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"));
        let operation = &self.doc["paths"][template][method.to_ascii_lowercase()];
        assert!(
            operation.is_object(),
            "{method} {template} is not documented"
        );
        let schema =
            &operation["responses"][status.to_string()]["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {template} answered {status}, which the document does not list: {value}"
        );
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::new(&root).unwrap();
        if let Err(e) = validator.validate(&value) {
            panic!("{method} {template} {status}: {value} does not match the document: {e}");
        }
        (status, value)
    }

    async fn job(&self, id: &str) -> Value {
        let (status, job) = self
            .call(
                "GET",
                "/api/v1/jobs/{id}",
                &format!("/api/v1/jobs/{id}"),
                READ,
                None,
            )
            .await;
        assert_eq!(status, 200, "{job}");
        job
    }

    async fn control(&self, id: &str, what: &str) -> (u16, Value) {
        let template = format!("/api/v1/jobs/{{id}}/{what}");
        self.call(
            "POST",
            &template,
            &format!("/api/v1/jobs/{id}/{what}"),
            OPERATE,
            None,
        )
        .await
    }

    async fn create(&self, body: Value) -> (u16, Value) {
        self.call("POST", "/api/v1/jobs", "/api/v1/jobs", OPERATE, Some(body))
            .await
    }

    /// Ids of events in `status` (one page of up to 500).
    async fn ids(&self, status: &str) -> Vec<String> {
        let path = format!("/api/v1/events?status={status}&limit=500");
        let (code, page) = self.call("GET", "/api/v1/events", &path, READ, None).await;
        assert_eq!(code, 200, "{page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn wait_job(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_for(&format!("job {id}: {what}"), WAIT, || async {
            let job = self.job(id).await;
            done(&job).then_some(job)
        })
        .await
    }
}

fn gateway(backend: Backend) -> GatewayBuilder {
    TestGateway::builder()
        .backend(backend)
        .admin_settings(&format!(
            "[[admin.tokens]]\nname = \"ops\"\nscopes = [\"operate\", \"read\"]\nvalue = {}\n\
             [[admin.tokens]]\nname = \"viewer\"\nscopes = [\"read\"]\nvalue = {}\n",
            q(OPERATE),
            q(READ)
        ))
        .workers(1)
        .worker_settings("poll_interval_ms = 20")
        // Slow enough that a kill lands mid-job; short leases so the next process takes over.
        .section("[jobs]\nrate_per_second = 5\nbatch_size = 5\nlease_seconds = 5\npoll_interval_ms = 50\n")
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
}

async fn post_event(webhook: SocketAddr, id: &str) -> String {
    let body = format!(r#"{{"type":"invoice.paid","data":{{"id":"{id}"}}}}"#);
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
    r.json()["id"].as_str().unwrap().to_owned()
}

fn progress(job: &Value) -> (Option<u64>, u64, u64) {
    let p = &job["progress"];
    (
        p["total"].as_u64(),
        p["done"].as_u64().unwrap(),
        p["failed"].as_u64().unwrap(),
    )
}

async fn bulk_job_survives_kill_9(backend: Backend) {
    let files = gateway(backend).write().await;
    let mut p = files.serve(None);
    let api = Api::new(p.admin.unwrap()).await;
    let mut ids = Vec::new();
    for i in 0..EVENTS {
        ids.push(post_event(p.addr(), &format!("msg_{i:03}")).await);
    }
    wait_until("every event processed", WAIT, || async {
        api.ids("processed").await.len() == EVENTS
    })
    .await;
    let store = files.open_store().await;
    let processed_before: std::collections::HashMap<String, i64> = {
        let mut m = std::collections::HashMap::new();
        for id in &ids {
            let e = store.get_event(id).await.unwrap().unwrap();
            m.insert(id.clone(), e.processed_at_ms.unwrap());
        }
        m
    };

    // Refusals: a bad action, an unknown filter, a destination for a replay, no scope.
    for (body, code) in [
        (json!({"action": "purge", "filter": {}}), 400),
        (
            json!({"action": "replay", "filter": {"colour": "red"}}),
            400,
        ),
        (
            json!({"action": "replay", "filter": {"status": "done"}}),
            400,
        ),
        (
            json!({"action": "replay", "filter": {}, "destination": "x"}),
            400,
        ),
        (
            json!({"action": "redeliver", "filter": {}, "destination": "nowhere"}),
            404,
        ),
    ] {
        let (status, answer) = api.create(body.clone()).await;
        assert_eq!(status, code, "{body}: {answer}");
    }
    let (status, _) = api
        .call(
            "POST",
            "/api/v1/jobs",
            "/api/v1/jobs",
            READ,
            Some(json!({"action": "replay", "filter": {}})),
        )
        .await;
    assert_eq!(status, 403, "creating a job needs the operate scope");

    let (status, created) = api
        .create(json!({"action": "replay", "filter": {"status": "PROCESSED", "endpoint_id": "sw"}}))
        .await;
    assert_eq!(status, 201, "{created}");
    let job_id = created["id"].as_str().unwrap().to_owned();
    let job = api.job(&job_id).await;
    assert_eq!(job["action"], "replay");
    assert_eq!(
        job["filter"],
        json!({"status": "PROCESSED", "endpoint_id": "sw"})
    );

    // kill -9 mid-job: some batches committed, not all.
    let mid = api
        .wait_job(&job_id, "some batches done", |j| {
            let (_, done, _) = progress(j);
            done >= 10
        })
        .await;
    p.signal("-KILL");
    let status = tokio::task::spawn_blocking(move || {
        let s = p.wait_exit();
        drop(p);
        s
    })
    .await
    .unwrap();
    assert!(!status.success(), "killed: {status:?}");
    let (total, done_at_kill, _) = progress(&mid);
    assert_eq!(
        total,
        Some(EVENTS as u64),
        "the total is counted at the start"
    );
    let after_kill = store.get_job(&job_id).await.unwrap().unwrap();
    assert!(
        after_kill.done < EVENTS as u64,
        "the kill landed before the end ({} done, {done_at_kill} seen)",
        after_kill.done
    );
    assert_eq!(
        after_kill.state,
        hookgate_store::JobState::Running,
        "left running"
    );

    // The next process takes the job over once the dead runner's lease expires.
    let p = files.serve(None);
    let api = Api::new(p.admin.unwrap()).await;
    let finished = api
        .wait_job(&job_id, "done after the restart", |j| j["state"] == "done")
        .await;
    assert_eq!(
        progress(&finished),
        (Some(EVENTS as u64), EVENTS as u64, 0),
        "exact counts: every event once, none twice: {finished}"
    );
    assert!(finished["finished_at"].is_string());
    wait_until("every replayed event processed again", WAIT, || async {
        api.ids("processed").await.len() == EVENTS
    })
    .await;
    for id in &ids {
        let e = store.get_event(id).await.unwrap().unwrap();
        assert!(
            e.processed_at_ms.unwrap() > processed_before[id],
            "{id} was replayed and processed again"
        );
    }

    // Pause, resume, cancel: a slow job over the same events.
    let (_, created) = api
        .create(json!({"action": "replay", "filter": {"endpoint_id": "sw"}}))
        .await;
    let slow = created["id"].as_str().unwrap().to_owned();
    api.wait_job(&slow, "started", |j| progress(j).1 >= 5).await;
    let (status, paused) = api.control(&slow, "pause").await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["state"], "paused");
    let (_, done_paused, _) = progress(&paused);
    // While it is paused another job runs to its end; the paused one does not move.
    let (_, other) = api
        .create(json!({"action": "retry", "filter": {"status": "failed"}}))
        .await;
    let other = other["id"].as_str().unwrap().to_owned();
    let other_done = api
        .wait_job(&other, "the other job done", |j| j["state"] == "done")
        .await;
    assert_eq!(
        progress(&other_done),
        (Some(0), 0, 0),
        "no FAILED event to retry"
    );
    let still = api.job(&slow).await;
    assert_eq!(still["state"], "paused");
    assert_eq!(progress(&still).1, done_paused, "no batch after the pause");
    let (status, again) = api.control(&slow, "pause").await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"], "invalid_state");
    let (status, resumed) = api.control(&slow, "resume").await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["state"], "pending");
    api.wait_job(&slow, "moving again", |j| progress(j).1 > done_paused)
        .await;
    let (status, cancelled) = api.control(&slow, "cancel").await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    let (_, done_cancelled, _) = progress(&cancelled);
    assert!(done_cancelled < EVENTS as u64, "cancelled before its end");
    let (status, _) = api.control(&slow, "resume").await;
    assert_eq!(status, 409, "a cancelled job stays cancelled");
    let (status, missing) = api.control("no-such-job", "cancel").await;
    assert_eq!(status, 404, "{missing}");

    // The list, newest first, paged.
    let (status, page) = api
        .call("GET", "/api/v1/jobs", "/api/v1/jobs?limit=2", READ, None)
        .await;
    assert_eq!(status, 200, "{page}");
    let listed: Vec<&str> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![other.as_str(), slow.as_str()]);
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, rest) = api
        .call(
            "GET",
            "/api/v1/jobs",
            &format!("/api/v1/jobs?limit=2&cursor={cursor}"),
            READ,
            None,
        )
        .await;
    assert_eq!(rest["jobs"][0]["id"], job_id.as_str());
    assert!(rest["next_cursor"].is_null());

    // Audited: creation with its filter, each control, the refused creation.
    let (_, audit) = api
        .call(
            "GET",
            "/api/v1/audit",
            "/api/v1/audit?limit=500",
            READ,
            None,
        )
        .await;
    let entries = audit["entries"].as_array().unwrap();
    let has = |action: &str, target: &str, result: &str| {
        entries
            .iter()
            .any(|e| e["action"] == action && e["target"] == target && e["result"] == result)
    };
    assert!(has("job.create", &job_id, "ok"), "{audit}");
    assert!(has("job.pause", &slow, "ok"));
    assert!(has("job.pause", &slow, "invalid_state"));
    assert!(has("job.resume", &slow, "ok"));
    assert!(has("job.cancel", &slow, "ok"));
    assert!(has("job.create", "-", "denied"), "the read token's attempt");
    let created_entry = entries
        .iter()
        .find(|e| e["action"] == "job.create" && e["target"] == job_id.as_str())
        .unwrap();
    assert_eq!(created_entry["token"], "ops");
    assert!(
        created_entry["filter"].to_string().contains("PROCESSED"),
        "{created_entry}"
    );

    // The CLI: create over the API, follow it with a progress bar, refuse a finished one.
    wait_until("the cancelled job's replays processed", WAIT, || async {
        api.ids("processed").await.len() == EVENTS
    })
    .await;
    let url = format!("http://{}", p.admin.unwrap());
    let out = cli(&[
        "jobs",
        "create",
        "--url",
        &url,
        "--action",
        "replay",
        "--status",
        "processed",
        "--endpoint",
        "sw",
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cli_job = created["id"].as_str().unwrap().to_owned();
    let out = cli(&[
        "jobs",
        "show",
        "--url",
        &url,
        &cli_job,
        "--watch",
        "--interval-ms",
        "100",
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["state"], "done", "--watch returns once the job ended");
    assert_eq!(progress(&shown), (Some(EVENTS as u64), EVENTS as u64, 0));
    assert_eq!(
        shown["filter"],
        json!({"status": "processed", "endpoint_id": "sw"})
    );
    let out = cli(&["jobs", "pause", "--url", &url, &cli_job]).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_state"));
    let out = cli(&["jobs", "list", "--url", &url, "--limit", "1"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["jobs"][0]["id"], cli_job.as_str());

    store.close().await;
    tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
}

/// Runs `hookgate <args>` with the operate token in `HOOKGATE_ADMIN_TOKEN`.
async fn cli(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary())
            .args(&args)
            .env("HOOKGATE_ADMIN_TOKEN", OPERATE)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_job_survives_kill_9_on_sqlite() {
    bulk_job_survives_kill_9(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_job_survives_kill_9_on_postgres() {
    bulk_job_survives_kill_9(Backend::Postgres).await;
}

/// An HTTP destination on a real socket that records each request's `Idempotency-Key`.
struct Receiver {
    addr: SocketAddr,
    keys: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let keys = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = keys.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut reader = tokio::io::BufReader::new(stream);
                    loop {
                        let (mut key, mut length, mut any) = (String::new(), 0usize, false);
                        let mut line = String::new();
                        while reader.read_line(&mut line).await.unwrap_or(0) > 0 {
                            any = true;
                            let l = line.trim_end().to_ascii_lowercase();
                            line.clear();
                            if l.is_empty() {
                                break;
                            }
                            if let Some(v) = l.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                            if let Some(v) = l.strip_prefix("idempotency-key:") {
                                key = v.trim().to_owned();
                            }
                        }
                        let mut body = vec![0; length];
                        if !any || reader.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        seen.lock().unwrap().push(key);
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if reader.get_mut().write_all(ok).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver { addr, keys }
    }

    fn keys(&self) -> Vec<String> {
        self.keys.lock().unwrap().clone()
    }
}

/// A redeliver job sends each processed event to the destination again: once with the same
/// `Idempotency-Key` (the inbox id), once with a fresh key per event; events not processed
/// are counted as failed.
async fn redeliver_job(backend: Backend) {
    let receiver = Receiver::start().await;
    let files = gateway(backend)
        .relay_settings("poll_interval_ms = 20")
        .destinations(&format!(
            "[[destinations]]\nid = \"recv\"\nkind = \"http\"\nurl = \"http://{}/hook\"\n\
             timeout_ms = 2000\nallow_private_network = true\n",
            receiver.addr
        ))
        .endpoints(&endpoint_toml(
            "ep2",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"recv\"]\nallowed_event_types = [\"invoice.*\"]",
        ))
        .write()
        .await;
    let p = files.serve(None);
    let api = Api::new(p.admin.unwrap()).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let body = format!(r#"{{"type":"invoice.paid","data":{{"id":"r{i}"}}}}"#);
        let r = post_signed(
            p.addr(),
            "ep2",
            "standard_webhooks",
            SW_SECRET,
            &format!("r_{i}"),
            unix_now(),
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        ids.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    // One ignored event on the same endpoint: never processed, so never delivered.
    let ignored = post_signed(
        p.addr(),
        "ep2",
        "standard_webhooks",
        SW_SECRET,
        "r_ign",
        unix_now(),
        br#"{"type":"user.deleted","data":{}}"#,
    )
    .await;
    assert_eq!(ignored.json()["status"], "ignored");
    wait_until("six deliveries", WAIT, || async {
        receiver.keys().len() == 6
    })
    .await;

    let (status, created) = api
        .create(
            json!({"action": "redeliver", "filter": {"endpoint_id": "ep2"}, "destination": "recv"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let same = created["id"].as_str().unwrap().to_owned();
    let job = api.wait_job(&same, "done", |j| j["state"] == "done").await;
    assert_eq!(
        progress(&job),
        (Some(7), 6, 1),
        "the IGNORED event cannot be re-delivered"
    );
    wait_until("twelve deliveries", WAIT, || async {
        receiver.keys().len() == 12
    })
    .await;
    let keys = receiver.keys();
    let mut again: Vec<String> = keys[6..].to_vec();
    again.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(again, expected, "the same Idempotency-Key: the inbox id");

    let (status, created) = api
        .create(json!({"action": "redeliver", "filter": {"endpoint_id": "ep2", "status": "processed"}, "destination": "recv", "fresh_key": true}))
        .await;
    assert_eq!(status, 201, "{created}");
    let fresh = created["id"].as_str().unwrap().to_owned();
    let job = api.wait_job(&fresh, "done", |j| j["state"] == "done").await;
    assert_eq!(progress(&job), (Some(6), 6, 0));
    assert_eq!(job["fresh_key"], true);
    wait_until("eighteen deliveries", WAIT, || async {
        receiver.keys().len() == 18
    })
    .await;
    let fresh_keys: std::collections::HashSet<String> =
        receiver.keys()[12..].iter().cloned().collect();
    assert_eq!(fresh_keys.len(), 6, "one new key per event");
    assert!(
        fresh_keys.iter().all(|k| !ids.contains(k)),
        "new keys, not the inbox ids"
    );
    tokio::task::spawn_blocking(move || p.terminate())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redeliver_job_on_sqlite() {
    redeliver_job(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redeliver_job_on_postgres() {
    redeliver_job(Backend::Postgres).await;
}
