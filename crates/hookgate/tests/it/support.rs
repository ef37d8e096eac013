//! Test support: start a gateway in-process on port 0, talk raw HTTP/1.1 over a socket, read
//! the shared provider vectors, run the real binary.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hookgate::app::{Gateway, GatewayParts, Roles};
use hookgate::config::Config;
use hookgate::state::{Clock, FixedClock};

pub(crate) const PAYLOAD_KEY: &str = "aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM=";

/// A TOML string literal (JSON string syntax is valid TOML basic-string syntax).
pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Config text for a gateway on port 0 with the given `[[endpoints]]` tables appended. No
/// workers run (ingress tests see rows as accepted); processing tests drive them.
pub(crate) fn config_text(db: &Path, extra_server: &str, endpoints: &str) -> String {
    config_text_with_store(db, extra_server, NEVER_SHED, endpoints)
}

/// Tests not about overload never shed: a loaded CI machine could make rows wait past the
/// default `max_queue_wait_ms`.
pub(crate) const NEVER_SHED: &str = "max_queue_wait_ms = 3600000";

/// [`config_text`] with `extra_store` lines in `[store]` instead of [`NEVER_SHED`].
pub(crate) fn config_text_with_store(
    db: &Path,
    extra_server: &str,
    extra_store: &str,
    endpoints: &str,
) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{extra_server}\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [store]\nurl = {}\n{extra_store}\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n\
         [worker]\nconcurrency = 0\n\
         {endpoints}\n",
        q(&format!("sqlite://{}", db.display()))
    )
}

pub(crate) fn endpoint_toml(id: &str, provider: &str, secrets: &[&str], extra: &str) -> String {
    let list: Vec<String> = secrets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "{{ version = \"v{}\", value = {} }}",
                secrets.len() - i,
                q(s)
            )
        })
        .collect();
    format!(
        "[[endpoints]]\nid = {}\nprovider = {}\nsecrets = [{}]\n{extra}\n",
        q(id),
        q(provider),
        list.join(", ")
    )
}

pub(crate) struct TestGateway {
    pub(crate) gateway: Option<Gateway>,
    pub(crate) addr: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) clock: Arc<FixedClock>,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) db: PathBuf,
}

impl TestGateway {
    pub(crate) async fn start(endpoints: &str, now_secs: i64) -> TestGateway {
        Self::start_with(endpoints, "", now_secs).await
    }

    pub(crate) async fn start_with(
        endpoints: &str,
        extra_server: &str,
        now_secs: i64,
    ) -> TestGateway {
        Self::start_with_store(endpoints, extra_server, NEVER_SHED, now_secs).await
    }

    pub(crate) async fn start_with_store(
        endpoints: &str,
        extra_server: &str,
        extra_store: &str,
        now_secs: i64,
    ) -> TestGateway {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("hookgate.db");
        let path = dir.path().join("hookgate.toml");
        let text = config_text_with_store(&db, extra_server, extra_store, endpoints);
        std::fs::write(&path, text).unwrap();
        let config = Config::load(&path).expect("test config is valid");
        let clock = FixedClock::at_secs(now_secs);
        let gateway = Gateway::start_with(
            config,
            Roles::SERVE,
            GatewayParts::clock(clock.clone() as Arc<dyn Clock>),
        )
        .await
        .unwrap();
        TestGateway {
            addr: gateway.webhook_addr.unwrap(),
            admin: gateway.admin_addr.unwrap(),
            gateway: Some(gateway),
            clock,
            dir,
            db,
        }
    }

    pub(crate) async fn stop(&mut self) {
        if let Some(g) = self.gateway.take() {
            g.shutdown().await;
        }
    }

    pub(crate) fn store(&self) -> &hookgate_store::SharedStore {
        &self.gateway.as_ref().unwrap().state.store
    }
}

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl RawResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

/// Builds request bytes: request line, headers as given, Content-Length (unless `headers`
/// already has one or `no_length`), then the body.
pub(crate) fn build_request(
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends raw bytes on a fresh connection and reads the whole response (blocking; call from
/// `spawn_blocking` in async tests or use [`send_raw_async`]).
pub(crate) fn send_raw(addr: SocketAddr, bytes: &[u8]) -> RawResponse {
    send_raw_with(addr, bytes, false)
}

/// Like [`send_raw`]; with `half_close` the client shuts its write side after sending, as
/// some HTTP clients do.
pub(crate) fn send_raw_with(addr: SocketAddr, bytes: &[u8], half_close: bool) -> RawResponse {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may answer and close before reading everything (413): ignore write errors.
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse_response(&buf)
}

pub(crate) async fn send_raw_async(addr: SocketAddr, bytes: Vec<u8>) -> RawResponse {
    tokio::task::spawn_blocking(move || send_raw(addr, &bytes))
        .await
        .unwrap()
}

pub(crate) fn parse_response(buf: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response: {text:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    RawResponse {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// Signs with the adapter exactly as the provider would and POSTs over a raw socket.
pub(crate) async fn post_signed(
    addr: SocketAddr,
    endpoint: &str,
    provider: &str,
    secret: &str,
    event_id: &str,
    timestamp: i64,
    body: &[u8],
) -> RawResponse {
    let headers = signed_headers(provider, secret, event_id, timestamp, body);
    send_raw_async(
        addr,
        build_request("POST", &format!("/webhooks/{endpoint}"), &headers, body),
    )
    .await
}

pub(crate) fn signed_headers(
    provider: &str,
    secret: &str,
    event_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    let kind = hookgate_providers::ProviderKind::from_id(provider).unwrap();
    let adapter = kind.adapter();
    let key = adapter.decode_secret(secret).unwrap();
    adapter
        .sign(
            &key,
            &hookgate_providers::SignRequest {
                event_id,
                event_type: Some("test.event"),
                timestamp,
                body,
            },
        )
        .into_iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

pub(crate) fn vectors_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vectors");
    assert!(
        dir.is_dir(),
        "provider vectors not found at {} (they live in the repository's testdata/vectors)",
        dir.display()
    );
    dir
}

pub(crate) fn load_vectors(provider: &str) -> Vec<serde_json::Value> {
    let path = vectors_dir().join(format!("{provider}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["vectors"].as_array().unwrap().clone()
}

pub(crate) fn vector_body(v: &serde_json::Value) -> Vec<u8> {
    use base64::Engine;
    match (v.get("body"), v.get("body_b64")) {
        (Some(b), _) if b.is_string() => b.as_str().unwrap().as_bytes().to_vec(),
        (_, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.as_str().unwrap())
            .unwrap(),
        _ => panic!("vector without body"),
    }
}

pub(crate) fn vector_headers(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, val) in v["headers"].as_object().unwrap() {
        match val {
            serde_json::Value::Array(items) => {
                for i in items {
                    out.push((k.clone(), i.as_str().unwrap().to_owned()));
                }
            }
            other => out.push((k.clone(), other.as_str().unwrap().to_owned())),
        }
    }
    out
}

/// Path of the gateway binary built for this test run (with `failpoints` when the test
/// command enables it).
pub(crate) fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hookgate"))
}

/// Waits until `addr` accepts connections.
pub(crate) fn wait_for_port(addr: SocketAddr, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes a config for `hookgate serve` on fixed local ports with any `store.url` (SQLite or
/// PostgreSQL) and the given `[[endpoints]]` tables; returns its path.
pub(crate) fn write_serve_config(
    dir: &Path,
    name: &str,
    store_url: &str,
    port: u16,
    admin_port: Option<u16>,
    endpoints: &str,
) -> PathBuf {
    let admin = admin_port.map_or(String::new(), |p| {
        format!("[admin]\nlisten = \"127.0.0.1:{p}\"\n")
    });
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n{admin}[store]\nurl = {}\n{NEVER_SHED}\n\
         [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n\
         [log]\nformat = \"json\"\nlevel = \"info\"\n\n{endpoints}\n",
        q(store_url)
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A `hookgate serve` child process. stderr is drained continuously (a chatty child never
/// blocks on a full pipe); dropping it kills the child if it still runs, so a failed test
/// leaves no gateway behind.
pub(crate) struct ServeProc {
    child: Option<std::process::Child>,
    pub(crate) addr: SocketAddr,
    pub(crate) admin: Option<SocketAddr>,
    logs: Option<std::thread::JoinHandle<String>>,
}

impl ServeProc {
    /// Starts the binary without waiting for it to listen (see [`ServeProc::wait_listening`]).
    pub(crate) fn spawn(
        config: &Path,
        port: u16,
        admin_port: Option<u16>,
        failpoints: Option<&str>,
    ) -> ServeProc {
        let mut cmd = std::process::Command::new(binary());
        cmd.args(["serve", "--config"])
            .arg(config)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .env_remove("HOOKGATE_LOG");
        match failpoints {
            Some(f) => cmd.env("HOOKGATE_FAILPOINTS", f),
            None => cmd.env_remove("HOOKGATE_FAILPOINTS"),
        };
        let mut child = cmd.spawn().expect("spawn hookgate serve");
        let mut stderr = child.stderr.take().unwrap();
        let logs = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let local = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        ServeProc {
            child: Some(child),
            addr: local(port),
            admin: admin_port.map(local),
            logs: Some(logs),
        }
    }

    /// Spawns and waits until the webhook listener accepts connections.
    pub(crate) fn start(
        config: &Path,
        port: u16,
        admin_port: Option<u16>,
        failpoints: Option<&str>,
    ) -> ServeProc {
        let mut p = Self::spawn(config, port, admin_port, failpoints);
        p.wait_listening();
        p
    }

    /// Waits (up to 30 s) until the webhook listener accepts connections; on failure, panics
    /// with the child's logs.
    pub(crate) fn wait_listening(&mut self) {
        if wait_for_port(self.addr, Duration::from_secs(30)) {
            return;
        }
        let status = self.kill();
        let addr = self.addr;
        let logs = self.take_logs();
        panic!("gateway on {addr} did not start ({status:?}); logs:\n{logs}");
    }

    /// Waits for the child to exit by itself (e.g. a failpoint abort).
    pub(crate) fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("child already reaped");
        child.wait().unwrap()
    }

    /// SIGTERM, wait, assert a clean exit; returns the logs.
    pub(crate) fn terminate(mut self) -> String {
        let mut child = self.child.take().expect("child already reaped");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "SIGTERM failed");
        let status = child.wait().unwrap();
        let logs = self.take_logs();
        assert!(
            status.success(),
            "gateway exited with {status:?}; logs:\n{logs}"
        );
        logs
    }

    /// The child's stderr so far (once it has exited).
    pub(crate) fn take_logs(&mut self) -> String {
        self.logs
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }

    fn kill(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for ServeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `GET path` on a fresh connection (admin endpoints).
pub(crate) fn get(addr: SocketAddr, path: &str) -> RawResponse {
    send_raw(addr, &build_request("GET", path, &[], b""))
}

/// Unix seconds now (the real binary uses the real clock).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
