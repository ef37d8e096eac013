//! Gateway roles and supervised background stages (issue 12): `hookgate worker` is the same
//! gateway as `serve` without the webhook listener — admin listener, SIGHUP reload, SIGTERM
//! drain — a stage loop that panics is restarted and reported by `/readyz` while it is down,
//! and the relay leases only what its rate limit lets it send now.
//!
//! Processes are the real binary on port 0; their addresses come from the one listening line
//! they print on stdout.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookgate::app::{Gateway, GatewayParts, Roles};
use hookgate::config::Config;
use hookgate::relay::{Delivered, DeliveryOutcome, Relay};
use hookgate::state::{Clock, FixedClock};
use hookgate::worker::Processor;
use hookgate_core::OutboxStatus;
use serde_json::Value;

use crate::support::{PAYLOAD_KEY, endpoint_toml, post_signed, q, unix_now};

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Config for a gateway process: every listener on port 0, one worker polling fast.
fn process_config(dir: &Path, worker: &str, rest: &str) -> PathBuf {
    let path = dir.join("hookgate.toml");
    let db = dir.join("hookgate.db");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [store]\nurl = {}\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n\
         [log]\nformat = \"json\"\nlevel = \"info\"\n\
         [worker]\n{worker}\n\
         {rest}\n{}",
        q(&format!("sqlite://{}", db.display())),
        endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A running `hookgate` process; killed if a test fails before it exits.
struct Proc {
    child: Child,
    webhook: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    stderr: PathBuf,
}

impl Proc {
    /// Starts `hookgate <command> --config <config>` and waits (bounded) for its listening line.
    fn start(command: &str, config: &Path, failpoints: Option<&str>) -> Proc {
        let stderr = config.with_extension("stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookgate"));
        cmd.args([command, "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .env_remove("HOOKGATE_FAILPOINTS");
        if let Some(f) = failpoints {
            cmd.env("HOOKGATE_FAILPOINTS", f);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => line,
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "no listening line ({e}); stderr: {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                );
            }
        };
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let addr = |key: &str| {
            let a = &v["listening"][key];
            assert!(a.is_null() || a.is_string(), "{line}");
            a.as_str().map(|s| s.parse::<SocketAddr>().unwrap())
        };
        Proc {
            webhook: addr("webhook"),
            admin: addr("admin"),
            child,
            stderr,
        }
    }

    fn admin(&self) -> SocketAddr {
        self.admin.expect("admin listener")
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `within` for the process to exit.
    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {within:?}; stderr: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET http://addr/path`: status and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls `check` until it returns `Some`; panics after `within` naming `what`.
async fn poll<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn worker_process_serves_admin_reloads_on_sighup_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), "concurrency = 1\npoll_interval_ms = 20", "");
    let mut worker = Proc::start("worker", &config, None);
    assert_eq!(worker.webhook, None, "a worker has no webhook listener");
    let admin = worker.admin();

    // The line is printed once the listeners are bound, just before the stages start.
    poll(
        "the processing stage's gauge",
        Duration::from_secs(10),
        || async move {
            let (status, body) = get(admin, "/metrics").await;
            assert_eq!(status, 200);
            body.contains("hookgate_background_stage_up{stage=\"processing\"} 1")
                .then_some(())
        },
    )
    .await;
    assert_eq!(get(admin, "/healthz").await.0, 200);
    let (status, body) = get(admin, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready, serde_json::json!({"ready": true, "problems": []}));

    // SIGHUP reloads (it used to kill `hookgate worker`): a second endpoint appears.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&endpoint_toml("sw2", "standard_webhooks", &[SW_SECRET], ""));
    std::fs::write(&config, text).unwrap();
    worker.signal("HUP");
    poll("the reload to be logged", Duration::from_secs(10), || {
        let logs = worker.logs();
        async move { logs.contains("configuration reloaded").then_some(()) }
    })
    .await;
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "SIGHUP killed it"
    );
    assert_eq!(get(admin, "/readyz").await.0, 200);

    worker.signal("TERM");
    let status = worker.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}: {}", worker.logs());
}

#[tokio::test]
async fn serve_prints_both_listening_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), "concurrency = 1", "");
    let mut serve = Proc::start("serve", &config, None);
    let webhook = serve.webhook.expect("webhook listener");
    assert_ne!(webhook.port(), 0);
    assert_ne!(serve.admin().port(), 0);
    assert_eq!(get(serve.admin(), "/readyz").await.0, 200);
    serve.signal("TERM");
    assert!(serve.wait_exit(Duration::from_secs(15)).success());
}

#[test]
fn worker_with_nothing_to_run_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), "concurrency = 0", "");
    let out = Command::new(env!("CARGO_BIN_EXE_hookgate"))
        .args(["worker", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing to run"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was bound");
}

/// `stage.panic` makes the first three steps of each stage panic: the processing loop dies,
/// `/readyz` says so (503 naming the stage) while it waits to restart, and after the
/// restarts (100, 200, 400 ms apart) the stage runs and the gateway is ready again.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn a_panicking_stage_is_restarted_and_reported_while_down() {
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), "concurrency = 1\npoll_interval_ms = 20", "");
    let mut worker = Proc::start("worker", &config, Some("stage.panic=error"));
    let admin = worker.admin();

    // Every stage panics its first steps (counted per stage), so a 503 may first name another
    // stage (e.g. `reseal`) alone: wait for the one that names processing.
    let down = poll(
        "/readyz to report the processing stage down",
        Duration::from_secs(10),
        || async move {
            let (status, body) = get(admin, "/readyz").await;
            (status == 503 && body.contains(r#""stage":"processing""#)).then_some(body)
        },
    )
    .await;
    let down: Value = serde_json::from_str(&down).unwrap();
    assert_eq!(down["ready"], false, "{down}");
    assert!(
        down["problems"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"kind": "stage_down", "stage": "processing"})),
        "{down}"
    );

    poll(
        "the stage to run again",
        Duration::from_secs(20),
        || async move {
            let (status, _) = get(admin, "/readyz").await;
            let (_, metrics) = get(admin, "/metrics").await;
            (status == 200
                && metrics.contains("hookgate_background_restarts_total{stage=\"processing\"} 3")
                && metrics.contains("hookgate_background_stage_up{stage=\"processing\"} 1"))
            .then_some(())
        },
    )
    .await;
    assert!(worker.logs().contains("background loop restarted"));

    worker.signal("TERM");
    let status = worker.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}: {}", worker.logs());
}

/// What the destination received, by idempotency key.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<BTreeMap<String, usize>>>);

async fn receive(
    axum::extract::State(counts): axum::extract::State<Counts>,
    headers: axum::http::HeaderMap,
) -> &'static str {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    *counts.0.lock().unwrap().entry(key).or_default() += 1;
    "ok"
}

/// With a rate limit of one delivery per second, a relay leases one row per permit: rows it
/// could not send yet stay unleased, so when its leases would have expired a second relay
/// takes only rows nobody holds, and no row is delivered twice.
#[tokio::test]
async fn a_rate_limited_relay_leases_only_what_it_can_send() {
    let counts = Counts::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = listener.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(counts.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let destination = format!(
        "[[destinations]]\nid = \"slow\"\nkind = \"http\"\nurl = {}\n\
         allow_private_network = true\nsigning_secrets = [{}]\ntimeout_ms = 500\n\
         rate_limit = {{ per_second = 1, burst = 1 }}\n",
        q(&format!("http://{receiver}/hook")),
        q(SW_SECRET),
    );
    let path = dir.path().join("hookgate.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\
         [store]\nurl = {}\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n\
         [worker]\nconcurrency = 0\n\
         [relay]\nenabled = false\nlease_seconds = 3\n\
         {destination}\n{}",
        q(&format!(
            "sqlite://{}",
            dir.path().join("hookgate.db").display()
        )),
        endpoint_toml(
            "sw",
            "standard_webhooks",
            &[SW_SECRET],
            "destinations = [\"slow\"]"
        ),
    );
    std::fs::write(&path, text).unwrap();
    let now = unix_now();
    let clock = FixedClock::at_secs(now);
    let gateway = Gateway::start_with(
        Config::load(&path).unwrap(),
        Roles::SERVE,
        GatewayParts::clock(clock.clone() as Arc<dyn Clock>),
    )
    .await
    .unwrap();
    let addr = gateway.webhook_addr.unwrap();
    for n in 0..3 {
        let body = format!(r#"{{"type":"invoice.paid","data":{{"id":"obj_{n}"}}}}"#);
        let r = post_signed(
            addr,
            "sw",
            "standard_webhooks",
            SW_SECRET,
            &format!("msg_{n}"),
            now,
            body.as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let processor = Processor::new(gateway.state.clone()).unwrap();
    assert_eq!(processor.run_once("w", 10).await.unwrap().len(), 3);

    // Two relays (two processes), each with its own rate limiter.
    let first = Arc::new(Relay::new(gateway.state.clone()).await.unwrap());
    let second = Relay::new(gateway.state.clone()).await.unwrap();
    let delivered = || DeliveryOutcome::Completed(Delivered { duplicate: false });
    assert_eq!(
        first.run_once("slow", "first", 3).await.unwrap(),
        [delivered()],
        "one send permit, one leased row: the other two were not leased to wait"
    );
    // Past the lease of anything the first relay could hold: the second takes only free rows.
    clock.set_secs(now + 10);
    assert_eq!(
        second.run_once("slow", "second", 3).await.unwrap(),
        [delivered()]
    );

    let store = gateway.state.store.clone();
    poll("every row delivered", Duration::from_secs(20), || {
        let (first, second, store) = (Arc::clone(&first), &second, store.clone());
        async move {
            first.run_once("slow", "first", 3).await.unwrap();
            second.run_once("slow", "second", 3).await.unwrap();
            let mut all = Vec::new();
            for e in store.list_events(&Default::default()).await.unwrap() {
                all.extend(store.list_deliveries(&e.inbox_id).await.unwrap());
            }
            all.iter()
                .all(|d| d.status == OutboxStatus::Delivered)
                .then_some(())
        }
    })
    .await;
    let received = counts.0.lock().unwrap().clone();
    assert_eq!(received.len(), 3, "{received:?}");
    assert!(
        received.values().all(|n| *n == 1),
        "no row was delivered twice: {received:?}"
    );
    gateway.shutdown().await;
}
