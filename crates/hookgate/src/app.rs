//! Building and running a gateway: open the store, bind the listeners of its roles (port 0
//! works and is reported), serve, start the background stages, reload on request, and shut
//! down in order. `hookgate serve` and `hookgate worker` are this one gateway with different
//! [`Roles`].

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hookgate_store::SharedStore;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::secrets::cache::{FILE_CHECK, refresh_slots};
use crate::stage::StagePool;
use crate::state::{AppState, Clock, Runtime};
use crate::tasks::StoppableTasks;
use crate::{admin, ingress, telemetry};

/// Opens the backend named by `store.url` (see [`hookgate_store::open`]) once: the commands
/// that work on the store directly fail at once when it cannot be reached.
pub async fn open_store(config: &Config) -> anyhow::Result<SharedStore> {
    hookgate_store::open(&config.store.url, store_options(config))
        .await
        .with_context(|| cannot_open(config))
}

/// The longest pause between two attempts of [`open_store_waiting`].
const STARTUP_RETRY_MAX_PAUSE: Duration = Duration::from_secs(2);

/// Opens the store for a starting gateway: while the database is unreachable (not started
/// yet, restarting, a connection that timed out on a loaded host) it tries again, with a
/// growing pause and a warning per attempt, for at most `store.startup_wait_seconds`. What
/// retrying cannot fix (a bad URL, a refused migration, corrupt data) fails at once.
pub async fn open_store_waiting(config: &Config) -> anyhow::Result<SharedStore> {
    let deadline = tokio::time::Instant::now() + config.store.startup_wait;
    let mut pause = Duration::from_millis(250);
    let mut attempt: u32 = 1;
    loop {
        match hookgate_store::open(&config.store.url, store_options(config)).await {
            Ok(store) => {
                if attempt > 1 {
                    tracing::info!(attempt, "store reachable; starting");
                }
                return Ok(store);
            }
            Err(error) if is_transient(&error) => {
                let now = tokio::time::Instant::now();
                if now + pause > deadline {
                    return Err(anyhow::Error::new(error).context(format!(
                        "{} (gave up after {attempt} attempts within store.startup_wait_seconds = {})",
                        cannot_open(config),
                        config.store.startup_wait.as_secs()
                    )));
                }
                tracing::warn!(
                    attempt,
                    retry_in_ms = pause.as_millis() as u64,
                    error = %error,
                    "store not reachable yet; trying again"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(STARTUP_RETRY_MAX_PAUSE);
                attempt += 1;
            }
            Err(error) => return Err(anyhow::Error::new(error).context(cannot_open(config))),
        }
    }
}

/// Whether another attempt may succeed: the database was unreachable or overloaded, not
/// misconfigured or inconsistent.
fn is_transient(error: &hookgate_store::StoreError) -> bool {
    use hookgate_store::StoreError;
    matches!(
        error,
        StoreError::Unavailable(_) | StoreError::CommitUnknown(_) | StoreError::Overloaded
    )
}

fn store_options(config: &Config) -> hookgate_store::OpenOptions {
    hookgate_store::OpenOptions {
        pool_size: config.store.pool_size,
        group_commit: config.store.group_commit.clone(),
    }
}

fn cannot_open(config: &Config) -> String {
    format!(
        "store.url: cannot open {}",
        crate::config::redact_url(&config.store.url)
    )
}

/// What one gateway process does. A role whose configuration is absent (no `[admin]`,
/// `[worker] concurrency = 0`, no destinations or `[relay] enabled = false`) is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// The webhook listener.
    pub ingress: bool,
    /// The processing stage (`[worker]`).
    pub workers: bool,
    /// The delivery stage (`[relay]`, `[[destinations]]`).
    pub relay: bool,
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin: bool,
}

impl Roles {
    /// `hookgate serve`: everything that is configured.
    pub const SERVE: Roles = Roles {
        ingress: true,
        workers: true,
        relay: true,
        admin: true,
    };
    /// `hookgate worker`: the background stages and the admin listener, no webhook listener.
    pub const WORKER: Roles = Roles {
        ingress: false,
        ..Roles::SERVE
    };
}

/// What a gateway is built from besides its configuration (tests pass their own).
pub struct GatewayParts {
    /// `None`: open the store named by `store.url`.
    pub store: Option<SharedStore>,
    pub clock: Arc<dyn Clock>,
    /// Print the [`Listening`] line on stdout once every listener is bound.
    pub announce: bool,
    /// `--dev`: literal and published example secrets are allowed on any listener.
    pub dev: bool,
}

impl GatewayParts {
    /// The store named by the configuration, read with `clock`, not announced.
    pub fn clock(clock: Arc<dyn Clock>) -> GatewayParts {
        GatewayParts {
            store: None,
            clock,
            announce: false,
            dev: false,
        }
    }

    /// These parts with `store` instead of the configured one.
    pub fn with_store(self, store: SharedStore) -> GatewayParts {
        GatewayParts {
            store: Some(store),
            ..self
        }
    }
}

/// The addresses a gateway bound, `None` for a listener its roles or configuration leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    pub webhook: Option<SocketAddr>,
    pub admin: Option<SocketAddr>,
}

impl Listening {
    /// The one stdout line that reports them:
    /// `{"listening":{"webhook":"127.0.0.1:PORT","admin":"127.0.0.1:PORT"}}` (`null` when absent).
    pub fn line(&self) -> String {
        // Written by hand: the key order is part of the format (webhook first).
        let addr =
            |a: Option<SocketAddr>| a.map_or_else(|| "null".to_owned(), |a| format!("\"{a}\""));
        format!(
            "{{\"listening\":{{\"webhook\":{},\"admin\":{}}}}}",
            addr(self.webhook),
            addr(self.admin)
        )
    }
}

/// A running gateway.
pub struct Gateway {
    /// `None` without the ingress role.
    pub webhook_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    pub state: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    ingress: Option<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
    /// The running background stages (processing, delivery, retention).
    stages: Vec<(StagePool, std::time::Duration)>,
    /// The secret refresher.
    refresher: StoppableTasks,
    config_path: PathBuf,
    /// Whether this process runs the webhook listener, and `--dev`: the literal-secret rule.
    webhook_role: bool,
    dev: bool,
    /// The webhook listener's certificate (built-in TLS), re-read on SIGHUP too.
    tls_cert: Option<Arc<ingress::tls::ReloadingCert>>,
    /// The admin listener's certificate (`[admin] tls`), polled and re-read on SIGHUP like
    /// the webhook one.
    admin_tls_cert: Option<Arc<ingress::tls::ReloadingCert>>,
}

impl Gateway {
    /// Opens the configured store and starts `roles` on the system clock, announcing the
    /// bound addresses on stdout (what the `serve` and `worker` commands run).
    pub async fn start(config: Config, roles: Roles, dev: bool) -> anyhow::Result<Gateway> {
        let parts = GatewayParts {
            announce: true,
            dev,
            ..GatewayParts::clock(crate::state::process_clock())
        };
        Self::start_with(config, roles, parts).await
    }

    /// Binds every listener of `roles`, serves them, then starts the background stages.
    pub async fn start_with(
        config: Config,
        roles: Roles,
        parts: GatewayParts,
    ) -> anyhow::Result<Gateway> {
        config.check_dev_only(roles.ingress, parts.dev)?;
        let store = match parts.store {
            Some(store) => store,
            None => open_store_waiting(&config).await?,
        };
        let key_rows =
            crate::stage::reseal::refuse_removed_versions(&store, &config.payload_keys).await?;
        telemetry::payload_key_rows(&key_rows, &config.payload_keys.versions());
        telemetry::config_loaded();
        let mut tls_cert = None;
        let webhook = if roles.ingress {
            let tls = match &config.server.tls {
                Some(paths) => {
                    let cert = ingress::tls::ReloadingCert::load(paths)?;
                    let acceptor = cert.acceptor()?;
                    cert.spawn_polling();
                    tls_cert = Some(cert);
                    Some(acceptor)
                }
                None => None,
            };
            let listener = ingress::bind(config.server.listen, config.server.max_connections)
                .with_context(|| format!("server.listen: cannot bind {}", config.server.listen))?;
            Some((listener, tls))
        } else {
            None
        };
        let admin_tls = match (
            &config.admin.tls,
            config.admin_listen.filter(|_| roles.admin),
        ) {
            (Some(paths), Some(_)) => {
                let cert = ingress::tls::ReloadingCert::load(paths).context("admin.tls")?;
                let acceptor = cert.acceptor()?;
                cert.spawn_polling();
                Some((cert, acceptor))
            }
            _ => None,
        };
        let admin_listener = match config.admin_listen.filter(|_| roles.admin) {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("admin.listen: cannot bind {addr}"))?,
            ),
            None => None,
        };
        let listening = Listening {
            webhook: webhook.as_ref().map(|(l, _)| l.local_addr()).transpose()?,
            admin: admin_listener
                .as_ref()
                .map(|l| l.local_addr())
                .transpose()?,
        };
        if parts.announce {
            announce(&listening).context("writing the listening line to stdout")?;
        }
        let server = config.server.clone();
        let config_path = config.path.clone();
        let allow_examples = config.allows_example_values(roles.ingress, parts.dev);
        // Secrets are read before the first request; a source that is down leaves its
        // endpoint answering 503 (and listed by /readyz) until the refresher reads it.
        // A worker verifies no webhook: it needs no endpoint secret.
        let runtime = Runtime::replacing(Arc::new(config), None, allow_examples);
        if roles.ingress {
            refresh_slots(&runtime.secret_slots(), &runtime.secret_reader, true).await;
        }
        let api_tokens = if roles.admin {
            admin::api::auth::ApiTokens::read(&runtime.config.admin.tokens, &runtime.secret_reader)
                .await?
        } else {
            Default::default()
        };
        let state = AppState::new(runtime, store, parts.clock, roles.ingress);
        state.api_tokens.store(Arc::new(api_tokens));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (mut refresher, refresher_stop) = StoppableTasks::new();
        if roles.ingress {
            telemetry::secrets_observed(&state.runtime.load(), state.clock.now_secs());
            refresher.push(tokio::spawn(refresh_secrets(
                Arc::downgrade(&state),
                refresher_stop.clone(),
            )));
            // Stopped with the refresher, after the ingress: its last flush writes the
            // rejections of the drain.
            refresher.push(tokio::spawn(crate::rejections::flusher(
                state.clone(),
                refresher_stop.clone(),
            )));
            // Likewise: its last flush writes the no-retry windows of the drain (what the
            // store refuses then is lost with the process; the next run still covers the
            // time since the last checkpoint).
            refresher.push(tokio::spawn(crate::no_retry::flusher(
                state.clone(),
                refresher_stop,
            )));
        }

        let admin = admin_listener.map(|listener| {
            let router = admin::router(state.clone(), telemetry::metrics_handle());
            tokio::spawn(admin::serve(
                listener,
                admin_tls.as_ref().map(|(_, acceptor)| acceptor.clone()),
                router,
                state.runtime.load().config.admin.clone(),
                shutdown_rx.clone(),
            ))
        });
        let ingress = webhook.map(|(listener, tls)| {
            spawn_client_limiter_pruning(&state);
            tokio::spawn(ingress::serve(
                listener,
                tls,
                state.clone(),
                server,
                shutdown_rx,
            ))
        });
        let mut stages = Vec::new();
        if roles.workers
            && let Some(pool) = crate::worker::start(&state)?
        {
            stages.push((pool, crate::worker::grace(&state)));
        }
        if roles.relay
            && let Some(pool) = crate::relay::start(&state).await?
        {
            stages.push((pool, crate::relay::grace(&state)));
        }
        if roles.workers {
            stages.push((
                crate::stage::reseal::start(&state),
                std::time::Duration::from_secs(5),
            ));
            // Bulk jobs run where processing does (`[worker] concurrency = 0` is ingress only).
            if state.runtime.load().config.worker.concurrency > 0 {
                stages.push((crate::stage::jobs::start(&state), crate::stage::jobs::GRACE));
                // Reconciliation too: its repairs are work for these workers and relays.
                stages.push((
                    crate::stage::reconcile::start(&state),
                    crate::stage::reconcile::GRACE,
                ));
                // Gaps are held where their events are processed.
                stages.push((
                    crate::stage::sequence_gaps::start(&state),
                    crate::stage::sequence_gaps::GRACE,
                ));
            }
        }
        // Every process with the store runs it: it is stateless and instances on one
        // PostgreSQL skip each other's rows.
        stages.push((
            crate::stage::retention::start(&state),
            crate::stage::retention::GRACE,
        ));
        tracing::info!(webhook = ?listening.webhook, admin = ?listening.admin, "hookgate listening");
        Ok(Gateway {
            webhook_addr: listening.webhook,
            admin_addr: listening.admin,
            state,
            shutdown,
            ingress,
            admin,
            stages,
            refresher,
            config_path,
            webhook_role: roles.ingress,
            dev: parts.dev,
            tls_cert,
            admin_tls_cert: admin_tls.map(|(cert, _)| cert),
        })
    }
    /// Re-reads the configuration file and every secret that is not retired. A secret that
    /// cannot be read keeps its cached value (it does not fail the reload); a retired one is
    /// never read. On any configuration error the running configuration stays, the failure
    /// is counted and shown by `/readyz` until a reload succeeds, and the error is returned;
    /// so is a configuration without a payload key some stored payload is sealed under.
    pub async fn reload(&self) -> anyhow::Result<()> {
        match self.try_reload().await {
            Ok(()) => {
                self.state.reload_failure.store(None);
                telemetry::config_reloaded();
                Ok(())
            }
            Err(e) => {
                let reason = format!("{e:#}");
                telemetry::config_reload_failed(&reason);
                self.state.reload_failure.store(Some(Arc::new(reason)));
                Err(e)
            }
        }
    }

    async fn try_reload(&self) -> anyhow::Result<()> {
        // The certificate files are independent of the configuration's validity.
        for cert in self.tls_cert.iter().chain(&self.admin_tls_cert) {
            cert.reload_if_changed();
        }
        let config = Config::load(&self.config_path)?;
        config.check_dev_only(self.webhook_role, self.dev)?;
        crate::stage::reseal::refuse_removed_versions(&self.state.store, &config.payload_keys)
            .await?;
        let current = self.state.runtime.load_full();
        if config.server.listen != current.config.server.listen
            || config.store.url != current.config.store.url
        {
            tracing::warn!(
                "server and store settings change only on restart; endpoints, secrets and payload keys were reloaded"
            );
        }
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let allow_examples = config.allows_example_values(self.webhook_role, self.dev);
        let runtime = Runtime::replacing(Arc::new(config), Some(&current), allow_examples);
        if self.webhook_role {
            refresh_slots(&runtime.secret_slots(), &runtime.secret_reader, true).await;
        }
        // Tokens are read before anything is swapped: one that cannot be read fails the
        // reload, and the running tokens stay.
        let api_tokens =
            admin::api::auth::ApiTokens::read(&runtime.config.admin.tokens, &runtime.secret_reader)
                .await?;
        self.state.runtime.store(Arc::new(runtime));
        self.state.api_tokens.store(Arc::new(api_tokens));
        if self.webhook_role {
            telemetry::secrets_observed(&self.state.runtime.load(), self.state.clock.now_secs());
        }
        Ok(())
    }

    /// Stops accepting, lets in-flight requests finish (commit and answer), stops the
    /// background stages (each within its grace), then closes the store.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let stages: Vec<_> = self
            .stages
            .into_iter()
            .map(|(pool, grace)| tokio::spawn(pool.shutdown(grace)))
            .collect();
        if let Some(ingress) = self.ingress {
            let _ = ingress.await;
        }
        for stage in stages {
            let _ = stage.await;
        }
        self.refresher
            .shutdown(
                std::time::Duration::from_secs(1),
                "secret refresher stopped mid-read",
            )
            .await;
        if let Some(admin) = self.admin {
            let _ = admin.await;
        }
        self.state.store.close().await;
        tracing::info!("hookgate stopped");
    }
}

/// Prints the listening line on stdout (logs go to stderr) and flushes it.
fn announce(listening: &Listening) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", listening.line())?;
    out.flush()
}

/// The secret refresher: every [`FILE_CHECK`], reads the versions that are due (their
/// `refresh_seconds` elapsed, or their file changed) and updates the secret gauges. Reads
/// happen here, never on the request path.
async fn refresh_secrets(state: std::sync::Weak<AppState>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(FILE_CHECK) => {}
            _ = stop.changed() => return,
        }
        let Some(state) = state.upgrade() else { return };
        let runtime = state.runtime.load_full();
        refresh_slots(&runtime.secret_slots(), &runtime.secret_reader, false).await;
        telemetry::secrets_observed(&runtime, state.clock.now_secs());
    }
}

/// Forgets idle per-client rate-limit entries once a minute (ingress only).
fn spawn_client_limiter_pruning(state: &Arc<AppState>) {
    if state.client_limiter.is_none() {
        return;
    }
    let state = Arc::downgrade(state);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else { return };
            if let Some(l) = &state.client_limiter {
                l.prune();
            }
        }
    });
}
