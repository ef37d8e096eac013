//! The one way tests start a gateway: [`GatewayBuilder`] writes the config (backend, clock,
//! workers, relay, destinations, endpoints) and then either starts it in this process
//! ([`GatewayBuilder::start`] → [`TestGateway`]) or leaves the files for the real binary
//! ([`GatewayBuilder::write`] → [`GatewayFiles::serve`] → [`BinaryGateway`]).
//!
//! Every listener is configured on port 0: in-process the addresses come from the running
//! gateway, from the binary they come from the one line it prints on stdout once it has bound
//! them (`{"listening":{"webhook":…,"admin":…}}`). No test guesses a free port.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookgate::app::{Gateway, GatewayParts, Roles};
use hookgate::config::Config;
use hookgate::state::{AppState, Clock, FixedClock, SystemClock};
use hookgate::worker::Processor;
use hookgate_store::{EventFilter, InboxRecord, SharedStore};

use super::{PAYLOAD_KEY, binary, q};

/// Tests not about overload never shed: a loaded CI machine could make rows wait past the
/// default `max_queue_wait_ms`.
pub(crate) const NEVER_SHED: &str = "max_queue_wait_ms = 3600000";

/// How long a spawned binary may take to report its listeners (or to exit once told to).
const PROCESS_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// Which `hookgate` subcommand a [`BinaryGateway`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryRole {
    /// `hookgate serve`: webhook listener, admin listener, workers and relay.
    Serve,
    /// `hookgate worker`: workers and relay, no webhook listener.
    Worker,
}

/// What a test gateway runs: the configuration, and in-process the clock.
#[derive(Debug, Clone)]
pub(crate) struct GatewayBuilder {
    backend: Backend,
    store_url: Option<String>,
    sqlite_file: Option<PathBuf>,
    fixed_clock: Option<i64>,
    listen: String,
    server: Vec<String>,
    store: Vec<String>,
    workers: Option<usize>,
    worker_settings: Vec<String>,
    relay: Option<bool>,
    relay_settings: Vec<String>,
    sections: Vec<String>,
    destinations: Vec<String>,
    endpoints: Vec<String>,
    log_level: String,
    admin: Vec<String>,
    dev: bool,
}

impl Default for GatewayBuilder {
    fn default() -> Self {
        GatewayBuilder {
            backend: Backend::Sqlite,
            store_url: None,
            sqlite_file: None,
            fixed_clock: None,
            listen: "127.0.0.1:0".into(),
            server: Vec::new(),
            store: vec![NEVER_SHED.into()],
            workers: None,
            worker_settings: Vec::new(),
            relay: None,
            relay_settings: Vec::new(),
            sections: Vec::new(),
            destinations: Vec::new(),
            endpoints: Vec::new(),
            log_level: "info".into(),
            admin: Vec::new(),
            dev: false,
        }
    }
}

impl GatewayBuilder {
    /// A fresh database of this backend per gateway (PostgreSQL: `hookgate_testkit::postgres`).
    pub(crate) fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// A database the test owns (shared by several gateways, or on a cluster it stops).
    pub(crate) fn store_url(mut self, url: &str) -> Self {
        self.store_url = Some(url.to_owned());
        self
    }

    /// SQLite at this path instead of one in the gateway's temp dir.
    pub(crate) fn sqlite_file(mut self, path: &Path) -> Self {
        self.sqlite_file = Some(path.to_owned());
        self
    }

    /// In-process only: a pinned clock at `secs` (settable through [`TestGateway::clock`]).
    /// Without it the gateway uses the real clock, as the binary always does.
    pub(crate) fn fixed_clock(mut self, secs: i64) -> Self {
        self.fixed_clock = Some(secs);
        self
    }

    /// The webhook listener's address (port 0 always: only the host is the test's choice).
    pub(crate) fn listen(mut self, addr: &str) -> Self {
        assert!(addr.ends_with(":0"), "test gateways bind port 0: {addr}");
        self.listen = addr.to_owned();
        self
    }

    /// Extra `[server]` lines.
    pub(crate) fn server(mut self, lines: &str) -> Self {
        self.server.push(lines.to_owned());
        self
    }

    /// Extra `[admin]` lines (its `listen` stays `127.0.0.1:0`).
    pub(crate) fn admin_settings(mut self, lines: &str) -> Self {
        self.admin.push(lines.to_owned());
        self
    }

    /// `[store]` lines instead of [`NEVER_SHED`].
    pub(crate) fn store_settings(mut self, lines: &str) -> Self {
        self.store = vec![lines.to_owned()];
        self
    }

    /// `[worker] concurrency`; without it the config's default applies (as in production).
    pub(crate) fn workers(mut self, concurrency: usize) -> Self {
        self.workers = Some(concurrency);
        self
    }

    /// Extra `[worker]` lines (`lease_seconds`, `poll_interval_ms`).
    pub(crate) fn worker_settings(mut self, lines: &str) -> Self {
        self.worker_settings.push(lines.to_owned());
        self
    }

    /// `[relay] enabled`; without it the config's default applies.
    pub(crate) fn relay(mut self, enabled: bool) -> Self {
        self.relay = Some(enabled);
        self
    }

    /// Extra `[relay]` lines.
    pub(crate) fn relay_settings(mut self, lines: &str) -> Self {
        self.relay_settings.push(lines.to_owned());
        self
    }

    /// A whole table of its own (e.g. `[providers.stripe]`).
    pub(crate) fn section(mut self, toml: &str) -> Self {
        self.sections.push(toml.to_owned());
        self
    }

    /// `[[destinations]]` tables.
    pub(crate) fn destinations(mut self, toml: &str) -> Self {
        self.destinations.push(toml.to_owned());
        self
    }

    /// `[[endpoints]]` tables.
    pub(crate) fn endpoints(mut self, toml: &str) -> Self {
        self.endpoints.push(toml.to_owned());
        self
    }

    /// In-process only: what `--dev` does (literal secrets on a non-loopback listener).
    pub(crate) fn dev(mut self) -> Self {
        self.dev = true;
        self
    }

    /// `[log] level` (the binary's logs; in-process tests install no subscriber).
    pub(crate) fn log_level(mut self, level: &str) -> Self {
        self.log_level = level.to_owned();
        self
    }

    /// The configuration file's text for a gateway on `store_url`.
    pub(crate) fn render(&self, store_url: &str) -> String {
        let lines = |l: &[String]| l.join("\n");
        let mut worker = self
            .workers
            .map_or_else(String::new, |n| format!("concurrency = {n}\n"));
        worker.push_str(&lines(&self.worker_settings));
        let mut relay = self
            .relay
            .map_or_else(String::new, |on| format!("enabled = {on}\n"));
        relay.push_str(&lines(&self.relay_settings));
        format!(
            "[server]\nlisten = {}\n{}\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n{}\n\
             [store]\nurl = {}\n{}\n\
             [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n\
             [log]\nformat = \"json\"\nlevel = {}\n\
             [worker]\n{worker}\n\
             [relay]\n{relay}\n\
             {}\n{}\n{}\n",
            q(&self.listen),
            lines(&self.server),
            lines(&self.admin),
            q(store_url),
            lines(&self.store),
            q(&self.log_level),
            lines(&self.sections),
            lines(&self.destinations),
            lines(&self.endpoints),
        )
    }

    /// Creates the gateway's temp dir, its database (a fresh PostgreSQL one for
    /// [`Backend::Postgres`]) and `hookgate.toml`; starts nothing.
    pub(crate) async fn write(&self) -> GatewayFiles {
        let dir = tempfile::tempdir().unwrap();
        let (store_url, db, pg) = match (&self.store_url, self.backend) {
            (Some(url), _) => (url.clone(), None, None),
            (None, Backend::Sqlite) => {
                let db = self
                    .sqlite_file
                    .clone()
                    .unwrap_or_else(|| dir.path().join("hookgate.db"));
                (format!("sqlite://{}", db.display()), Some(db), None)
            }
            (None, Backend::Postgres) => {
                let pg = hookgate_testkit::postgres().await;
                (pg.url().to_owned(), None, Some(pg))
            }
        };
        let config_path = dir.path().join("hookgate.toml");
        std::fs::write(&config_path, self.render(&store_url)).unwrap();
        GatewayFiles {
            config_path,
            db,
            store_url,
            _pg: pg,
            dir,
        }
    }

    /// Writes the files and starts the gateway in this process; every listener is bound
    /// when this returns.
    pub(crate) async fn start(self) -> TestGateway {
        let files = self.write().await;
        let config = Config::load(&files.config_path).expect("test config is valid");
        let fixed = self.fixed_clock.map(FixedClock::at_secs);
        let clock: Arc<dyn Clock> = match &fixed {
            Some(c) => c.clone(),
            None => Arc::new(SystemClock),
        };
        let parts = GatewayParts {
            dev: self.dev,
            ..GatewayParts::clock(clock)
        };
        let gateway = Gateway::start_with(config, Roles::SERVE, parts)
            .await
            .unwrap();
        TestGateway {
            addr: gateway
                .webhook_addr
                .expect("test gateways run the ingress role"),
            admin: gateway
                .admin_addr
                .expect("test gateways have an admin listener"),
            gateway: Some(gateway),
            clock: fixed,
            files,
        }
    }
}

/// A test gateway's files; they outlive the processes started on them (restarts, CLI runs).
pub(crate) struct GatewayFiles {
    pub(crate) config_path: PathBuf,
    /// The SQLite file, when the store is SQLite.
    pub(crate) db: Option<PathBuf>,
    pub(crate) store_url: String,
    _pg: Option<hookgate_testkit::PgTestDb>,
    pub(crate) dir: tempfile::TempDir,
}

impl GatewayFiles {
    /// `hookgate serve` on these files, with `HOOKGATE_FAILPOINTS` when given; returns once
    /// it has reported its listeners.
    pub(crate) fn serve(&self, failpoints: Option<&str>) -> BinaryGateway {
        BinaryGateway::start(BinaryRole::Serve, &self.config_path, failpoints)
    }

    /// `hookgate serve` on these files with extra environment variables (e.g. proxies).
    pub(crate) fn serve_with_env(&self, env: &[(&str, &str)]) -> BinaryGateway {
        let mut p = BinaryGateway::launch_with_env(BinaryRole::Serve, &self.config_path, None, env);
        p.wait_listening();
        p
    }

    /// The store the gateway uses, opened from its config (the read API tests check rows
    /// with).
    pub(crate) async fn open_store(&self) -> SharedStore {
        let config = Config::load(&self.config_path).unwrap();
        hookgate::app::open_store(&config).await.unwrap()
    }
}

/// A gateway running in this process.
pub(crate) struct TestGateway {
    gateway: Option<Gateway>,
    pub(crate) addr: SocketAddr,
    pub(crate) admin: SocketAddr,
    clock: Option<Arc<FixedClock>>,
    pub(crate) files: GatewayFiles,
}

impl TestGateway {
    pub(crate) fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// Shorthand: `endpoints` on SQLite, the clock pinned at `now_secs`, no workers (ingress
    /// tests see rows as accepted).
    pub(crate) async fn start(endpoints: &str, now_secs: i64) -> TestGateway {
        Self::builder()
            .fixed_clock(now_secs)
            .workers(0)
            .endpoints(endpoints)
            .start()
            .await
    }

    pub(crate) async fn stop(&mut self) {
        if let Some(g) = self.gateway.take() {
            g.shutdown().await;
        }
    }

    pub(crate) fn state(&self) -> &Arc<AppState> {
        &self.gateway.as_ref().expect("gateway stopped").state
    }

    pub(crate) fn store(&self) -> &SharedStore {
        &self.state().store
    }

    /// The pinned clock ([`GatewayBuilder::fixed_clock`]).
    pub(crate) fn clock(&self) -> &FixedClock {
        self.clock.as_deref().expect("built without fixed_clock")
    }

    /// Sets the pinned clock (its setter has second resolution: rounds down).
    pub(crate) fn set_ms(&self, ms: i64) {
        self.clock().set_secs(ms.div_euclid(1000));
    }

    /// A processing step tests drive themselves (`run_once`).
    pub(crate) fn processor(&self) -> Processor {
        Processor::new(self.state().clone()).unwrap()
    }

    pub(crate) async fn events(&self) -> Vec<InboxRecord> {
        self.store()
            .list_events(&EventFilter::default())
            .await
            .unwrap()
    }

    pub(crate) fn dir(&self) -> &Path {
        self.files.dir.path()
    }

    pub(crate) fn config_path(&self) -> &Path {
        &self.files.config_path
    }

    pub(crate) fn db(&self) -> &Path {
        self.files.db.as_deref().expect("not a SQLite gateway")
    }

    /// The ingress permits (`max_in_flight` of them; a request being handled holds one).
    pub(crate) fn in_flight_permits(&self) -> Arc<tokio::sync::Semaphore> {
        self.state().in_flight.clone()
    }

    /// Waits until exactly `busy` requests hold an ingress permit, out of `max_in_flight`.
    pub(crate) async fn wait_in_flight(&self, busy: usize, max_in_flight: usize) {
        let permits = self.in_flight_permits();
        super::wait_until(
            &format!("{busy} request(s) in flight"),
            Duration::from_secs(10),
            || {
                let free = permits.available_permits();
                async move { free + busy == max_in_flight }
            },
        )
        .await;
    }
}

/// The bound addresses the binary reports on stdout, and the line that said so.
#[derive(Debug, Clone)]
struct Listening {
    webhook: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    line: String,
}

fn parse_listening(line: &str) -> Option<Listening> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let l = v.get("listening")?;
    let addr = |key: &str| match &l[key] {
        serde_json::Value::Null => Some(None),
        serde_json::Value::String(s) => s.parse().ok().map(Some),
        _ => None,
    };
    Some(Listening {
        webhook: addr("webhook")?,
        admin: addr("admin")?,
        line: line.to_owned(),
    })
}

/// The real binary as a child process. stdout and stderr are drained continuously (a chatty
/// child never blocks on a full pipe); stderr is kept for [`BinaryGateway::wait_for_log`] and
/// [`BinaryGateway::take_logs`]. Dropping it kills the child if it still runs, so a failed
/// test leaves no gateway behind.
pub(crate) struct BinaryGateway {
    child: Option<Child>,
    /// The webhook listener (`None` for [`BinaryRole::Worker`]).
    pub(crate) webhook: Option<SocketAddr>,
    pub(crate) admin: Option<SocketAddr>,
    /// The stdout line the addresses came from.
    pub(crate) report: String,
    logs: Arc<Mutex<String>>,
    log_reader: Option<std::thread::JoinHandle<()>>,
    listening: std::sync::mpsc::Receiver<Listening>,
}

impl BinaryGateway {
    /// Starts `hookgate <role> --config <config>` without waiting (see
    /// [`BinaryGateway::wait_listening`]); several can be launched before any is waited for.
    pub(crate) fn launch(
        role: BinaryRole,
        config: &Path,
        failpoints: Option<&str>,
    ) -> BinaryGateway {
        Self::launch_with_env(role, config, failpoints, &[])
    }

    /// [`BinaryGateway::launch`] with `env` added to the child's environment.
    pub(crate) fn launch_with_env(
        role: BinaryRole,
        config: &Path,
        failpoints: Option<&str>,
        env: &[(&str, &str)],
    ) -> BinaryGateway {
        Self::launch_with_args(role, config, failpoints, env, &[])
    }

    /// [`BinaryGateway::launch_with_env`] with extra arguments after `--config` (`--dev`).
    pub(crate) fn launch_with_args(
        role: BinaryRole,
        config: &Path,
        failpoints: Option<&str>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> BinaryGateway {
        let mut cmd = Command::new(binary());
        cmd.envs(env.iter().copied());
        cmd.arg(match role {
            BinaryRole::Serve => "serve",
            BinaryRole::Worker => "worker",
        })
        .arg("--config")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("HOOKGATE_LOG");
        match failpoints {
            Some(f) => cmd.env("HOOKGATE_FAILPOINTS", f),
            None => cmd.env_remove("HOOKGATE_FAILPOINTS"),
        };
        let mut child = cmd.spawn().expect("spawn hookgate");
        let stdout = child.stdout.take().unwrap();
        let (tx, listening) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref() {
                let Ok(line) = line else { return };
                if let Some(l) = parse_listening(&line) {
                    let _ = tx.send(l);
                    break;
                }
            }
            // Keep draining: the child must never block on a full stdout pipe.
            for _ in lines {}
        });
        let mut stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(String::new()));
        let sink = logs.clone();
        let log_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        BinaryGateway {
            child: Some(child),
            webhook: None,
            admin: None,
            report: String::new(),
            logs,
            log_reader: Some(log_reader),
            listening,
        }
    }

    /// Launches and waits until the process has reported its listeners.
    pub(crate) fn start(
        role: BinaryRole,
        config: &Path,
        failpoints: Option<&str>,
    ) -> BinaryGateway {
        let mut p = Self::launch(role, config, failpoints);
        p.wait_listening();
        p
    }

    /// Waits (bounded) for the listening line; on failure panics with the child's logs.
    pub(crate) fn wait_listening(&mut self) {
        match self.listening.recv_timeout(PROCESS_DEADLINE) {
            Ok(l) => {
                self.webhook = l.webhook;
                self.admin = l.admin;
                self.report = l.line;
            }
            Err(e) => {
                let status = self.kill();
                let logs = self.take_logs();
                panic!("hookgate did not report its listeners ({e}; {status:?}); logs:\n{logs}");
            }
        }
    }

    /// The webhook listener's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.webhook.expect("no webhook listener reported")
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("child already reaped").id()
    }

    /// Sends a signal (`"-HUP"`, `"-TERM"`).
    pub(crate) fn signal(&self, sig: &str) {
        let sent = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {sig} failed");
    }

    /// Waits (bounded) until the child's stderr contains `needle`; panics with the logs.
    pub(crate) fn wait_for_log(&self, needle: &str) {
        let logs = self.logs.clone();
        super::wait_until_blocking(&format!("log line {needle:?}"), PROCESS_DEADLINE, || {
            logs.lock().unwrap().contains(needle)
        });
    }

    /// Waits (bounded) for the child to exit by itself (a failpoint abort, a drain).
    pub(crate) fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("child already reaped");
        let deadline = Instant::now() + PROCESS_DEADLINE;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            if Instant::now() >= deadline {
                let status = self.kill();
                let logs = self.take_logs();
                panic!(
                    "hookgate did not exit within {PROCESS_DEADLINE:?} ({status:?}); logs:\n{logs}"
                );
            }
            // Poll interval of a bounded wait on the process's state.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, wait (bounded), assert a clean exit; returns the logs.
    pub(crate) fn terminate(mut self) -> String {
        self.signal("-TERM");
        let status = self.wait_exit();
        let logs = self.take_logs();
        assert!(
            status.success(),
            "hookgate exited with {status:?}; logs:\n{logs}"
        );
        logs
    }

    /// The child's whole stderr (once it has exited; before, what it wrote so far).
    pub(crate) fn take_logs(&mut self) -> String {
        if self.child.is_none()
            && let Some(h) = self.log_reader.take()
        {
            let _ = h.join();
        }
        self.logs.lock().unwrap().clone()
    }

    fn kill(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for BinaryGateway {
    fn drop(&mut self) {
        self.kill();
    }
}
