//! The real `hookgate serve` as a child process: started, told apart by the listening line it
//! prints once bound, killed with SIGKILL (the crash under test) or stopped with SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// Where the binary is and how to run it.
#[derive(Debug, Clone)]
pub(crate) struct GatewayCommand {
    pub(crate) binary: PathBuf,
    pub(crate) config: PathBuf,
    /// Every instance's stderr is appended here (one file for the whole run).
    pub(crate) log: PathBuf,
}

/// The addresses a started instance reported.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listening {
    pub(crate) webhook: SocketAddr,
    pub(crate) admin: SocketAddr,
}

/// One running instance.
pub(crate) struct Gateway {
    child: Child,
    listening: Option<oneshot::Receiver<Listening>>,
}

impl GatewayCommand {
    pub(crate) fn spawn_with_env(&self, env: &[(&str, String)]) -> anyhow::Result<Gateway> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("open {}", self.log.display()))?;
        let mut child = Command::new(&self.binary)
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", self.binary.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                let Some(l) = parse_listening(&line) else {
                    continue;
                };
                if let Some(tx) = tx.take() {
                    let _ = tx.send(l);
                }
            }
        });
        Ok(Gateway {
            child,
            listening: Some(rx),
        })
    }
}

fn parse_listening(line: &str) -> Option<Listening> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let l = v.get("listening")?;
    Some(Listening {
        webhook: l.get("webhook")?.as_str()?.parse().ok()?,
        admin: l.get("admin")?.as_str()?.parse().ok()?,
    })
}

impl Gateway {
    /// Waits (bounded) for the listening line. Fails if the process exits first.
    pub(crate) async fn wait_listening(&mut self, within: Duration) -> anyhow::Result<Listening> {
        let rx = self
            .listening
            .take()
            .context("listening line already taken")?;
        tokio::select! {
            l = rx => l.context("the gateway closed stdout without a listening line"),
            status = self.child.wait() => bail!("the gateway exited before it was listening: {status:?}"),
            () = tokio::time::sleep(within) => bail!("no listening line within {within:?}"),
        }
    }

    /// The crash under test: SIGKILL, then reap.
    pub(crate) async fn kill9(mut self) -> anyhow::Result<()> {
        self.child.start_kill().context("kill -9 the gateway")?;
        self.child.wait().await.context("reap the gateway")?;
        Ok(())
    }

    /// SIGTERM (the gateway drains), bounded; SIGKILL if it does not end in time.
    pub(crate) async fn stop(mut self, grace: Duration) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            signal(pid, "TERM")?;
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.child.start_kill().context("kill the gateway")?;
            self.child.wait().await.context("reap the gateway")?;
            bail!("the gateway did not stop within {grace:?} of SIGTERM");
        }
        Ok(())
    }
}

/// Sends `SIG<name>` to `pid` through kill(1) (the crate forbids unsafe code, so no libc).
pub(crate) fn signal(pid: u32, name: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .context("run kill")?;
    if !status.success() {
        bail!("kill -{name} {pid} failed: {status}");
    }
    Ok(())
}

/// The config the runner gives the gateway: one Stripe endpoint delivering to an HTTP receiver
/// (and NATS when it runs), short leases so a killed instance's rows come back quickly, and
/// retry budgets large enough that outages do not exhaust them.
pub(crate) fn write_config(
    path: &Path,
    store_url: &str,
    receiver: SocketAddr,
    nats_url: Option<&str>,
) -> anyhow::Result<()> {
    let mut destinations = vec!["\"receiver\""];
    let mut text = format!(
        r#"[server]
listen = "127.0.0.1:0"

[admin]
listen = "127.0.0.1:0"

[store]
url = "{store_url}"

[payload_encryption]
active = 1
keys = [{{ version = 1, key = "env:HOOKGATE_CHAOS_PAYLOAD_KEY" }}]

[log]
level = "warn"

[worker]
concurrency = 2
lease_seconds = 2
poll_interval_ms = 50

[relay]
lease_seconds = 3
poll_interval_ms = 50

[[destinations]]
id = "receiver"
kind = "http"
url = "http://{receiver}/hook"
allow_private_network = true
timeout_ms = 1000
retry = {{ base_ms = 50, cap_ms = 500, max_attempts = 1000 }}
"#
    );
    if let Some(url) = nats_url {
        destinations.push("\"nats\"");
        text.push_str(&format!(
            r#"
[[destinations]]
id = "nats"
kind = "nats"
url = "{url}"
stream = "{}"
subject = "chaos.{{provider}}.{{event_type}}"
timeout_ms = 1000
retry = {{ base_ms = 50, cap_ms = 500, max_attempts = 1000 }}
"#,
            crate::nats::STREAM
        ));
    }
    text.push_str(&format!(
        r#"
[[endpoints]]
id = "{}"
provider = "stripe"
secrets = [{{ version = "v1", value = "env:HOOKGATE_CHAOS_STRIPE_SECRET" }}]
retry = {{ base_ms = 50, cap_ms = 500, max_attempts = 1000 }}
destinations = [{}]
"#,
        crate::ENDPOINT,
        destinations.join(", ")
    ));
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::parse_listening;

    #[test]
    fn reads_the_listening_line_and_ignores_other_output() {
        let l = parse_listening(
            r#"{"listening":{"webhook":"127.0.0.1:4100","admin":"127.0.0.1:4101"}}"#,
        )
        .expect("a listening line");
        assert_eq!(l.webhook.port(), 4100);
        assert_eq!(l.admin.port(), 4101);
        assert!(
            parse_listening(r#"{"listening":{"webhook":null,"admin":"127.0.0.1:1"}}"#).is_none()
        );
        assert!(parse_listening("warning: literal secret").is_none());
    }
}
