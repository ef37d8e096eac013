//! The NATS destination: a `nats-server -js` of the runner's own (loopback, a free port chosen
//! by the server on the first start and kept across restarts, its store in the run's
//! directory), and a reader of what the stream holds at the end, speaking the NATS text
//! protocol and the JetStream API directly (so the runner needs no broker client).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// The JetStream stream the gateway publishes into (it creates it on first use).
pub(crate) const STREAM: &str = "CHAOS";

pub(crate) struct NatsServer {
    binary: PathBuf,
    store_dir: PathBuf,
    log: PathBuf,
    port: Option<u16>,
    child: Option<Child>,
}

impl NatsServer {
    pub(crate) async fn start(
        binary: PathBuf,
        store_dir: PathBuf,
        log: PathBuf,
    ) -> anyhow::Result<NatsServer> {
        let mut n = NatsServer {
            binary,
            store_dir,
            log,
            port: None,
            child: None,
        };
        n.up().await?;
        Ok(n)
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port.unwrap_or(0))
    }

    /// Starts the server and waits (bounded) for its "ready" log line.
    pub(crate) async fn up(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            bail!("nats-server already running");
        }
        let port = self.port.map_or_else(|| "-1".to_owned(), |p| p.to_string());
        let mut child = Command::new(&self.binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"])
            .arg(&self.store_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", self.binary.display()))?;
        let stderr = child.stderr.take().context("nats-server stderr")?;
        self.child = Some(child);
        let log_path = self.log.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut log = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .await
                .ok();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                const LISTENING: &str = "Listening for client connections on ";
                if let Some((_, addr)) = line.split_once(LISTENING) {
                    let _ = tx.send(Some(addr.trim().parse::<SocketAddr>().ok()));
                } else if line.contains("Server is ready") {
                    let _ = tx.send(None);
                }
                if let Some(f) = log.as_mut() {
                    let _ = f.write_all(format!("{line}\n").as_bytes()).await;
                }
            }
        });
        let mut bound = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Some(addr))) => bound = addr,
                Ok(Some(None)) => break,
                Ok(None) => bail!("nats-server exited before it was ready (see its log)"),
                Err(_) => bail!("nats-server not ready within 20 s"),
            }
        }
        let bound = bound.context("nats-server logged no client address")?;
        if self.port.is_some_and(|p| p != bound.port()) {
            bail!("nats-server came back on another port");
        }
        self.port = Some(bound.port());
        Ok(())
    }

    /// Stops the server (SIGTERM, bounded; SIGKILL after): the outage under test.
    pub(crate) async fn down(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            crate::gateway::signal(pid, "TERM")?;
        }
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }
}

/// What the stream holds at the end: messages per `X-Hookgate-Inbox-Id`.
#[derive(Debug, Default)]
pub(crate) struct StreamContents {
    pub(crate) messages: u64,
    pub(crate) by_inbox_id: HashMap<String, u64>,
    /// Messages without an `X-Hookgate-Inbox-Id` header (a violation).
    pub(crate) without_inbox_id: u64,
}

/// Reads every message of [`STREAM`] through the JetStream API (`STREAM.INFO`, then
/// `STREAM.MSG.GET` per sequence).
pub(crate) async fn read_stream(addr: &str) -> anyhow::Result<StreamContents> {
    let mut c = Client::connect(addr).await?;
    let info: serde_json::Value = serde_json::from_slice(
        &c.request(&format!("$JS.API.STREAM.INFO.{STREAM}"), b"")
            .await?,
    )?;
    if let Some(err) = info.get("error") {
        if err.get("code").and_then(|c| c.as_u64()) == Some(404) {
            return Ok(StreamContents::default());
        }
        bail!("STREAM.INFO: {err}");
    }
    let state = &info["state"];
    let first = state["first_seq"].as_u64().unwrap_or(0);
    let last = state["last_seq"].as_u64().unwrap_or(0);
    let mut out = StreamContents::default();
    if state["messages"].as_u64().unwrap_or(0) == 0 {
        return Ok(out);
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    for seq in first..=last {
        let subject = format!("$JS.API.STREAM.MSG.GET.{STREAM}");
        let reply: serde_json::Value = serde_json::from_slice(
            &c.request(&subject, format!("{{\"seq\":{seq}}}").as_bytes())
                .await?,
        )?;
        if reply.get("error").is_some() {
            continue; // a deleted sequence
        }
        out.messages += 1;
        let headers = reply["message"]["hdrs"]
            .as_str()
            .and_then(|h| b64.decode(h).ok())
            .map(|h| String::from_utf8_lossy(&h).into_owned())
            .unwrap_or_default();
        let inbox_id = headers.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("X-Hookgate-Inbox-Id")
                .then(|| value.trim().to_owned())
        });
        match inbox_id {
            Some(id) => *out.by_inbox_id.entry(id).or_default() += 1,
            None => out.without_inbox_id += 1,
        }
    }
    Ok(out)
}

/// A minimal NATS client: one connection, one reply subscription, one request at a time.
struct Client {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

const REPLY: &str = "chaos.reply";

impl Client {
    async fn connect(addr: &str) -> anyhow::Result<Client> {
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
            .await
            .context("connect to nats: timed out")??;
        let (r, writer) = stream.into_split();
        let mut c = Client {
            reader: BufReader::new(r),
            writer,
        };
        let info = c.line().await?;
        if !info.starts_with("INFO ") {
            bail!("nats: expected INFO");
        }
        c.writer
            .write_all(
                format!(
                    "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\
                     \"no_responders\":true,\"protocol\":1}}\r\nSUB {REPLY} 1\r\n"
                )
                .as_bytes(),
            )
            .await?;
        Ok(c)
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .context("nats: no answer within 10 s")??;
        if n == 0 {
            bail!("nats: connection closed");
        }
        Ok(line.trim_end().to_owned())
    }

    async fn request(&mut self, subject: &str, payload: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut msg = format!("PUB {subject} {REPLY} {}\r\n", payload.len()).into_bytes();
        msg.extend_from_slice(payload);
        msg.extend_from_slice(b"\r\n");
        self.writer.write_all(&msg).await?;
        loop {
            let line = self.line().await?;
            let mut parts = line.split(' ');
            match parts.next() {
                Some("PING") => self.writer.write_all(b"PONG\r\n").await?,
                Some("+OK" | "PONG" | "INFO") => {}
                Some("-ERR") => bail!("nats: {line}"),
                Some("MSG") => {
                    let len: usize = parts.nth(2).context("MSG size")?.parse()?;
                    return self.payload(len).await;
                }
                Some("HMSG") => {
                    // Only a status (no responders: JetStream is not up yet) comes with headers.
                    let total: usize = parts.nth(3).context("HMSG size")?.parse()?;
                    let body = self.payload(total).await?;
                    bail!(
                        "nats: status reply {:?}",
                        String::from_utf8_lossy(&body).lines().next().unwrap_or("")
                    );
                }
                _ => bail!("nats: unexpected {line:?}"),
            }
        }
    }

    async fn payload(&mut self, len: usize) -> anyhow::Result<Vec<u8>> {
        let mut buf = vec![0; len + 2];
        self.reader.read_exact(&mut buf).await?;
        buf.truncate(len);
        Ok(buf)
    }
}
