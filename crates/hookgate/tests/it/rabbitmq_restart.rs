//! A RabbitMQ broker restart mid-run (docs/destinations.md, "RabbitMQ"): events flow to a
//! `kind = "rabbitmq"` destination while the broker is stopped and started again; deliveries
//! wait in the outbox, the relay reconnects, every event ends up DELIVERED and in the queue
//! under its own inbox id.
//!
//! The broker is a private node — its own node name, AMQP and distribution ports, data and log
//! directories and Erlang cookie in a temp dir — so stopping it never disturbs the shared
//! server the other tests use. It needs `rabbitmq-server` (scripts/ensure-rabbitmq.sh
//! installs it) and an epmd on 127.0.0.1 (rabbitmq-server starts one when none runs).

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hookgate_core::OutboxStatus;

use crate::delivery::{WAIT, delivered, deliveries, event_body, gateway, send, sw_endpoint};
use crate::rabbitmq::{Admin, rabbitmq_destination};
use crate::support::*;

// ---------------------------------------------------------------------------------------
// The private node: stopped and started again on the same ports and data.

fn rabbitmq_server_binary() -> PathBuf {
    // The Debian wrapper in /usr/sbin switches to the `rabbitmq` user; the script behind it
    // runs the node as whoever starts it, with the files of this temp dir.
    for candidate in [
        "/usr/lib/rabbitmq/bin/rabbitmq-server",
        "/usr/local/sbin/rabbitmq-server",
        "/usr/sbin/rabbitmq-server",
    ] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!(
        "rabbitmq-server not found: the broker-restart test runs a private RabbitMQ node. \
         Run scripts/ensure-rabbitmq.sh (installs Debian's rabbitmq-server package)."
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct PrivateRabbit {
    child: Option<Child>,
    port: u16,
    dist_port: u16,
    node: String,
    dir: tempfile::TempDir,
}

impl PrivateRabbit {
    fn start() -> PrivateRabbit {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let dist_port = free_port();
        for sub in ["home", "mnesia", "log"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        std::fs::write(
            dir.path().join("rabbitmq.conf"),
            format!("listeners.tcp.default = 127.0.0.1:{port}\n"),
        )
        .unwrap();
        // No plugins: a management or Prometheus listener would take the shared server's port.
        std::fs::write(dir.path().join("enabled_plugins"), "[].\n").unwrap();
        // An empty env file in place of /etc/rabbitmq/rabbitmq-env.conf (the shared node's).
        std::fs::write(dir.path().join("rabbitmq-env.conf"), "").unwrap();
        let mut r = PrivateRabbit {
            child: None,
            port,
            dist_port,
            node: format!("hookgate-it-{}-{port}@localhost", std::process::id()),
            dir,
        };
        r.up();
        r
    }

    /// Starts the node and waits (bounded) until it says it has booted.
    fn up(&mut self) {
        assert!(self.child.is_none());
        let d = self.dir.path();
        let mut child = Command::new(rabbitmq_server_binary())
            .env("HOME", d.join("home"))
            .env("RABBITMQ_CONF_ENV_FILE", d.join("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: the fallback in `down` ends the node and nothing else.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start a private RabbitMQ node ({e}): run scripts/ensure-rabbitmq.sh")
            });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tail: Vec<String> = Vec::new();
            let mut lines = std::io::BufReader::new(stdout).lines();
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                if line.contains("Starting broker... completed") {
                    let _ = tx.send(Ok(()));
                    break;
                }
                tail.push(line);
                if tail.len() > 40 {
                    tail.remove(0);
                }
            }
            let _ = tx.send(Err(tail.join("\n")));
            // Keep draining so the node never blocks on a full pipe.
            for _ in lines {}
        });
        self.child = Some(child);
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(())) => {}
            Ok(Err(output)) => {
                self.down();
                panic!(
                    "the private RabbitMQ node {} did not start (node port {}, distribution port {}); \
                     its output:\n{output}\nCheck that epmd can run on 127.0.0.1:4369 and that \
                     rabbitmq-server (scripts/ensure-rabbitmq.sh) runs for this user; its logs \
                     are in {}",
                    self.node,
                    self.port,
                    self.dist_port,
                    self.dir.path().join("log").display()
                );
            }
            Err(e) => {
                self.down();
                panic!(
                    "the private RabbitMQ node {} did not boot within 120 s ({e}); logs in {}",
                    self.node,
                    self.dir.path().join("log").display()
                );
            }
        }
    }

    /// Stops the node the way an operator restart does (SIGTERM: `rabbitmqctl stop`), bounded;
    /// a node that does not stop is killed with its process group.
    fn down(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            if Instant::now() > deadline {
                let _ = Command::new("kill")
                    .args(["-KILL", &format!("-{pid}")])
                    .status();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }
}

impl Drop for PrivateRabbit {
    fn drop(&mut self) {
        self.down();
    }
}

// ---------------------------------------------------------------------------------------
// The broker restarts mid-run: deliveries wait in the outbox while it is down, reconnect when
// it is back, and every event ends up DELIVERED and in the queue under its own inbox id.

/// Sends `count` events numbered from `*next` on; returns their inbox ids.
async fn send_events(addr: SocketAddr, next: &mut usize, count: usize) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for _ in 0..count {
        let n = *next;
        *next += 1;
        ids.insert(send(addr, &format!("msg_restart_{n}"), &event_body(n, 1)).await);
    }
    ids
}

async fn broker_restart_mid_run(backend: Backend) {
    let mut rabbit = tokio::task::spawn_blocking(PrivateRabbit::start)
        .await
        .unwrap();
    let (exchange, queue) = ("hooks", "hooks-consumer");
    let admin = Admin::connect(&rabbit.url()).await;
    admin.declare(exchange, queue, "#").await;
    let _ = admin.connection.close(200, "declared".into()).await;
    let mut h = gateway(backend)
        .destinations(&rabbitmq_destination("bus", &rabbit.url(), exchange, ""))
        .endpoints(&sw_endpoint(&["bus"]))
        .start()
        .await;
    let addr = h.addr;
    let mut next = 0;
    let mut ids = send_events(addr, &mut next, 10).await;
    let store = h.store().clone();
    wait_until("the first ten delivered", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == 10 }
    })
    .await;

    // Events keep coming while the broker stops: a delivery in flight may lose its confirm (a
    // transient error, published again later under the same message id).
    let (during, stopped) = tokio::join!(
        send_events(addr, &mut next, 10),
        tokio::task::spawn_blocking(move || {
            rabbit.down();
            rabbit
        })
    );
    let mut rabbit = stopped.unwrap();
    // While it is down, more events arrive, and their deliveries retry in the outbox.
    let mut waiting = during;
    waiting.extend(send_events(addr, &mut next, 5).await);
    ids.extend(waiting.iter().cloned());
    wait_until("deliveries wait in the outbox, retrying", WAIT, || {
        let (store, waiting) = (store.clone(), waiting.clone());
        async move {
            let mut retrying = 0;
            for id in &waiting {
                let d = deliveries(&store, id).await;
                if d.get("bus")
                    .is_some_and(|d| d.status == OutboxStatus::Pending && d.attempt_count >= 2)
                {
                    retrying += 1;
                }
            }
            retrying >= 5
        }
    })
    .await;
    assert!(
        delivered(h.store()).await < ids.len() as u64,
        "some deliveries wait for the broker"
    );

    let rabbit = tokio::task::spawn_blocking(move || {
        rabbit.up();
        rabbit
    })
    .await
    .unwrap();
    ids.extend(send_events(addr, &mut next, 5).await);
    let total = ids.len() as u64;
    wait_until("every event DELIVERED after the restart", WAIT, || {
        let store = store.clone();
        async move { delivered(&store).await == total }
    })
    .await;
    for id in &ids {
        assert_eq!(
            deliveries(h.store(), id).await["bus"].status,
            OutboxStatus::Delivered,
            "{id}"
        );
    }

    // The consumer's view: every inbox id arrived; each message carries its own event's id as
    // message_id (nothing delivered under two keys); a re-publish after a lost confirm is the
    // same message_id again, which the consumer dedupes on.
    let admin = Admin::connect(&rabbit.url()).await;
    let got = admin.drain(queue).await;
    let mut keys_of_event: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in &got {
        assert_eq!(m.delivery_mode, Some(2), "persistent");
        keys_of_event
            .entry(m.headers["X-Hookgate-Inbox-Id"].clone())
            .or_default()
            .insert(m.message_id.clone());
    }
    for (inbox_id, keys) in &keys_of_event {
        assert_eq!(
            keys,
            &BTreeSet::from([inbox_id.clone()]),
            "one key per event"
        );
    }
    let seen: BTreeSet<String> = got.iter().map(|m| m.message_id.clone()).collect();
    assert_eq!(
        seen, ids,
        "every event arrived (deduplicated on message_id)"
    );
    h.stop().await;
    let _ = admin.connection.close(200, "done".into()).await;
    drop(rabbit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_rabbitmq_broker_restart_mid_run() {
    broker_restart_mid_run(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_rabbitmq_broker_restart_mid_run() {
    broker_restart_mid_run(Backend::Postgres).await;
}
