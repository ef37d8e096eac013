//! The real binary: crash at a failpoint, storage failing, disk full, logs, signals.

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY: &[u8] = br#"{"type":"invoice.paid","data":{"id":"inv_SENSITIVE_BODY_MARKER"}}"#;

/// The gateway these tests run as the real binary: SQLite, debug logs (the log test reads
/// them), workers at their defaults, one Standard Webhooks endpoint with `secret_value`.
async fn write_config(secret_value: &str) -> GatewayFiles {
    TestGateway::builder()
        .log_level("debug")
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[secret_value],
            "",
        ))
        .write()
        .await
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn request(id: &str, secret: &str) -> Vec<u8> {
    let headers = signed_headers("standard_webhooks", secret, id, now(), BODY);
    build_request("POST", "/webhooks/sw", &headers, BODY)
}

/// Sends and returns `None` when the connection died without an answer.
#[cfg(feature = "failpoints")]
fn try_send(addr: std::net::SocketAddr, bytes: &[u8]) -> Option<RawResponse> {
    std::panic::catch_unwind(|| send_raw(addr, bytes)).ok()
}

async fn count_rows(files: &GatewayFiles) -> usize {
    let store =
        hookgate_store::sqlite::SqliteStore::open(files.db.as_ref().unwrap(), Default::default())
            .unwrap();
    use hookgate_store::{InboxStore, InspectStore};
    let n = store.list_events(&Default::default()).await.unwrap().len();
    store.close().await;
    n
}

#[cfg(not(feature = "failpoints"))]
#[test]
fn failpoints_feature_is_required() {
    panic!(
        "crash tests need the failpoints build: run `cargo test --workspace --features hookgate/failpoints` (the README's test command)"
    );
}

#[cfg(feature = "failpoints")]
#[tokio::test]
async fn crash_after_commit_before_response_then_retry_is_duplicate() {
    let files = write_config(SECRET).await;
    let mut p = files.serve(Some("ingress.after_commit_before_response=abort"));
    let addr = p.addr();
    let answer = tokio::task::spawn_blocking(move || try_send(addr, &request("msg_crash", SECRET)))
        .await
        .unwrap();
    assert!(
        answer.is_none() || answer.as_ref().unwrap().status == 0,
        "got an answer: {answer:?}"
    );
    let status = p.wait_exit();
    assert!(!status.success(), "the process must have aborted");

    let p = files.serve(None);
    let addr = p.addr();
    let r = tokio::task::spawn_blocking(move || send_raw(addr, &request("msg_crash", SECRET)))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "duplicate");
    p.terminate();
    assert_eq!(count_rows(&files).await, 1);
}

#[cfg(feature = "failpoints")]
#[tokio::test]
async fn store_commit_error_is_503_never_2xx() {
    let files = write_config(SECRET).await;
    let p = files.serve(Some("store.commit=error"));
    let addr = p.addr();
    for i in 0..5 {
        let r = tokio::task::spawn_blocking(move || {
            send_raw(addr, &request(&format!("msg_e{i}"), SECRET))
        })
        .await
        .unwrap();
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.json()["error"], "unavailable");
        assert!(r.header("retry-after").is_some());
    }
    p.terminate();
    assert_eq!(count_rows(&files).await, 0);
}

#[tokio::test]
async fn logs_never_contain_secrets_signatures_or_bodies() {
    let files = write_config(SECRET).await;
    let p = files.serve(None);
    let addr = p.addr();
    let good = request("msg_log", SECRET);
    let sig_values: Vec<String> =
        signed_headers("standard_webhooks", SECRET, "msg_log", now(), BODY)
            .into_iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("webhook-signature"))
            .map(|(_, v)| v)
            .collect();
    let forged = request(
        "msg_forged",
        "whsec_Zm9yZ2VkLXNlY3JldC1mb3ItdGVzdHMtMTIzNA==",
    );
    tokio::task::spawn_blocking(move || {
        assert_eq!(send_raw(addr, &good).status, 200);
        assert_eq!(send_raw(addr, &good).status, 200);
        assert_eq!(send_raw(addr, &forged).status, 401);
    })
    .await
    .unwrap();
    let logs = p.terminate();
    assert!(
        logs.contains("hookgate listening"),
        "expected some logs: {logs}"
    );
    assert!(
        !logs.contains("SENSITIVE_BODY_MARKER"),
        "body bytes in logs"
    );
    assert!(
        !logs.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        "secret in logs"
    );
    assert!(!logs.contains(PAYLOAD_KEY), "payload key in logs");
    for s in sig_values {
        let sig = s.split(',').nth(1).unwrap_or(&s).to_owned();
        assert!(!logs.contains(&sig), "signature in logs");
    }
}

#[tokio::test]
async fn sighup_rotates_file_secret_and_bad_reload_keeps_running_config() {
    let new_secret = "whsec_bmV3LXNlY3JldC1hZnRlci1yb3RhdGlvbi0xMjM0";
    let files = write_config("file:secret").await;
    let secret_file = files.dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(
        &secret_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let p = files.serve(None);
    let addr = p.addr();
    let send = |id: &'static str, secret: &'static str| {
        tokio::task::spawn_blocking(move || send_raw(addr, &request(id, secret)))
    };
    assert_eq!(send("msg_a", SECRET).await.unwrap().status, 200);
    assert_eq!(send("msg_b", new_secret).await.unwrap().status, 401);

    std::fs::write(&secret_file, format!("{new_secret}\n")).unwrap();
    p.signal("-HUP");
    wait_until(
        "SIGHUP to pick up the new secret",
        Duration::from_secs(5),
        || async { send("msg_b", new_secret).await.unwrap().status == 200 },
    )
    .await;
    assert_eq!(
        send("msg_c", SECRET).await.unwrap().status,
        401,
        "old secret must be gone"
    );

    // A broken config on reload: the running one stays.
    std::fs::write(&files.config_path, "this is = not [valid").unwrap();
    p.signal("-HUP");
    p.wait_for_log("reload failed");
    assert_eq!(send("msg_d", new_secret).await.unwrap().status, 200);
    let logs = p.terminate();
    assert!(logs.contains("reload failed"), "{logs}");
}

#[tokio::test]
async fn sigterm_lets_in_flight_request_commit_and_answer() {
    use std::io::Write;
    let files = write_config(SECRET).await;
    let mut p = files.serve(None);
    let addr = p.addr();
    let bytes = request("msg_drain", SECRET);
    let split = bytes.len() - 10;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&bytes[..split]).unwrap();
    // The gateway has read the partial request: it is in flight there when SIGTERM comes.
    wait_until_server_has_read(addr, s.local_addr().unwrap(), Duration::from_secs(10));
    p.signal("-TERM");
    p.wait_for_log("webhook listener closed");
    // Draining: the listener is closed to new connections…
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "new connections must be refused once draining started"
    );
    // …while the request in flight finishes, commits and gets its answer.
    s.write_all(&bytes[split..]).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let r = parse_response(&buf);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    let status = p.wait_exit();
    assert!(status.success());
    assert_eq!(count_rows(&files).await, 1);
}

#[tokio::test]
async fn full_disk_gives_503_never_2xx_and_recovers() {
    let mnt = tempfile::tempdir().unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(mnt.path())
        .status()
        .expect("running mount");
    assert!(
        status.success(),
        "this test mounts a tiny tmpfs and needs root (CAP_SYS_ADMIN)"
    );
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _guard = Unmount(mnt.path().to_owned());
    let dir = mnt.path();
    let db = dir.join("hookgate.db");
    let endpoints = endpoint_toml(
        "sw",
        "standard_webhooks",
        &[SECRET],
        "max_body_bytes = 65536",
    );
    let now_s = now();
    let mut gw = TestGateway::builder()
        .sqlite_file(&db)
        .fixed_clock(now_s)
        .workers(0)
        .endpoints(&endpoints)
        .start()
        .await;
    // Fill the disk with a file we can delete later.
    let filler = dir.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 1024 * 1024 + 512 * 1024]);
    let body = format!(r#"{{"type":"x","data":"{}"}}"#, "y".repeat(30_000)).into_bytes();
    let mut accepted = Vec::new();
    let mut saw_503 = false;
    for i in 0..200 {
        let r = post_signed(
            gw.addr,
            "sw",
            "standard_webhooks",
            SECRET,
            &format!("m{i}"),
            now_s,
            &body,
        )
        .await;
        match r.status {
            200 => accepted.push(format!("m{i}")),
            503 => {
                saw_503 = true;
                assert_eq!(r.json()["error"], "unavailable");
                break;
            }
            other => panic!("unexpected {other}: {}", r.body),
        }
    }
    assert!(saw_503, "the disk never filled");
    // Every acknowledged event is really there.
    let rows = gw.store().list_events(&Default::default()).await.unwrap();
    for id in &accepted {
        assert!(
            rows.iter().any(|r| &r.provider_event_id == id),
            "acknowledged {id} is missing"
        );
    }
    std::fs::remove_file(&filler).unwrap();
    let r = post_signed(
        gw.addr,
        "sw",
        "standard_webhooks",
        SECRET,
        "after",
        now_s,
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "after freeing space: {}", r.body);
    gw.stop().await;
}
