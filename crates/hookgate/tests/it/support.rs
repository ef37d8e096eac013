//! Test support: one builder for every test gateway (in-process or the real binary, see
//! [`gateway`]), raw HTTP/1.1 over a socket, bounded waits on observable state, the shared
//! provider vectors.

#![allow(dead_code)]

mod gateway;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) use gateway::*;

pub(crate) const PAYLOAD_KEY: &str = "aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM=";

/// A TOML string literal (JSON string syntax is valid TOML basic-string syntax).
pub(crate) fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
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
    let pack = hookgate_providers::pack::builtin(provider).unwrap();
    let key = pack.decode_secret(secret).unwrap();
    pack.sign_delivery(
        &key,
        &hookgate_providers::SignRequest {
            event_id,
            event_type: Some("test.event"),
            timestamp,
            body,
        },
        &hookgate_providers::pack::SignTarget::default(),
    )
    .headers
    .into_iter()
    .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
    .collect()
}

/// Every vector of `provider` as written (`<id>.json`, then `<id>.generated.json`), through
/// the one loader the provider crate's tests use too.
pub(crate) fn load_vectors(provider: &str) -> Vec<serde_json::Value> {
    hookgate_testkit::vectors::load(provider)
        .into_iter()
        .map(|v| v.raw)
        .collect()
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

/// How often the bounded waits below look again.
const POLL: Duration = Duration::from_millis(25);

/// Polls `check` until it returns `Some`, and returns that; panics after `within` naming
/// `what`. The one way tests wait for something asynchronous to have happened.
pub(crate) async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for: {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_for`] with a yes/no condition.
pub(crate) async fn wait_until<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_for(what, within, || {
        let fut = check();
        async move { fut.await.then_some(()) }
    })
    .await
}

/// [`wait_until`] for blocking code (threads, `spawn_blocking`).
pub(crate) fn wait_until_blocking(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for: {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// Waits until the server end of the TCP connection `server` ← `client` has read every byte
/// sent to it (its receive queue in `/proc/net/tcp` is empty): the request's head has reached
/// the gateway, so it is in flight there, not merely queued in the kernel.
pub(crate) fn wait_until_server_has_read(server: SocketAddr, client: SocketAddr, within: Duration) {
    wait_until_blocking(
        &format!("{server} to read everything {client} sent"),
        within,
        || server_receive_queue(server, client) == Some(0),
    );
}

/// The receive queue (bytes not yet read) of the IPv4 socket `local` ← `remote`, from
/// `/proc/net/tcp`; `None` while no such socket exists (not accepted yet).
fn server_receive_queue(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    // Addresses are `IP:PORT` in hex, the IP as the kernel's in-memory u32.
    let parse = |field: &str| -> Option<SocketAddr> {
        let (ip, port) = field.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?.to_ne_bytes();
        let port = u16::from_str_radix(port, 16).ok()?;
        Some(SocketAddr::from((ip, port)))
    };
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if parse(fields.get(1)?)? != local || parse(fields.get(2)?)? != remote {
            return None;
        }
        let (_, rx) = fields.get(4)?.split_once(':')?;
        u64::from_str_radix(rx, 16).ok()
    })
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

/// The value of one series (`name{labels}` exactly as exposed, no trailing space) in a
/// `/metrics` text.
pub(crate) fn series_value(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The value of one series on an admin listener's `/metrics` (a blocking GET).
pub(crate) fn metric(admin: SocketAddr, series: &str) -> Option<f64> {
    series_value(&get(admin, "/metrics").body, series)
}

/// `/metrics` of an admin listener.
pub(crate) async fn metrics_text(admin: SocketAddr) -> String {
    reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the /metrics body")
}

/// `hookgate <args…> --config <config>` through the real binary, without failpoints: its exit
/// code, stdout and stderr.
pub(crate) fn run_hookgate(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
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

/// The configuration in `files` is refused naming `key` both where it is loaded and by
/// `hookgate serve`, which exits non-zero (`what` says which case, for the messages).
pub(crate) fn assert_refused_naming(files: &GatewayFiles, what: &str, key: &str) {
    let text = std::fs::read_to_string(&files.config_path).unwrap();
    let e = hookgate::config::Config::from_toml(&text, &files.config_path, files.dir.path())
        .expect_err(what)
        .to_string();
    assert!(e.contains(key), "{what}: {e}");
    let (code, _, stderr) = run_hookgate(&files.config_path, &["serve"]);
    assert_ne!(code, 0, "serve started with {what}");
    assert!(stderr.contains(key), "{what}: {stderr}");
}

/// `hookgate config check` on a minimal SQLite config in `dir` with one endpoint
/// (`endpoint_toml("ep", provider, [secret], extra)`): its exit code, stdout and stderr.
pub(crate) fn config_check_endpoint(
    dir: &Path,
    provider: &str,
    secret: &str,
    extra: &str,
) -> (i32, String, String) {
    let config = dir.join("hookgate.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[store]\nurl = \"sqlite://{}\"\n\
             [payload_encryption]\nactive = 1\n\
             keys = [{{ version = 1, key = \"MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=\" }}]\n{}",
            dir.join("db.sqlite").display(),
            endpoint_toml("ep", provider, &[secret], extra)
        ),
    )
    .unwrap();
    run_hookgate(&config, &["config", "check"])
}
