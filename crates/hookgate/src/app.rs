//! Building and running a gateway: open the store, bind the listeners (port 0 works and is
//! reported), serve, reload on request, and shut down in order.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use hookgate_store::SharedStore;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::state::{AppState, Clock, Runtime};
use crate::worker::{Processor, WorkerPool};
use crate::{admin, ingress, telemetry};

/// Opens the backend named by `store.url` (see [`hookgate_store::open`]).
pub async fn open_store(config: &Config) -> anyhow::Result<SharedStore> {
    let url = &config.store.url;
    let options = hookgate_store::OpenOptions {
        pool_size: config.store.pool_size,
        group_commit: config.store.group_commit.clone(),
    };
    hookgate_store::open(url, options)
        .await
        .with_context(|| format!("store.url: cannot open {}", crate::config::redact_url(url)))
}

/// A running gateway.
pub struct Gateway {
    pub webhook_addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub state: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    ingress: JoinHandle<()>,
    admin: Option<JoinHandle<()>>,
    /// `None` when `[worker] concurrency = 0`.
    workers: Option<WorkerPool>,
    /// `None` without destinations or with `[relay] enabled = false`.
    relay: Option<crate::relay::RelayPool>,
    config_path: PathBuf,
}

impl Gateway {
    /// Binds both listeners and starts serving.
    pub async fn start(config: Config, clock: Arc<dyn Clock>) -> anyhow::Result<Gateway> {
        let store = open_store(&config).await?;
        Self::start_with_store(config, store, clock).await
    }

    pub async fn start_with_store(
        config: Config,
        store: SharedStore,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Gateway> {
        let tls = match &config.server.tls {
            Some(t) => Some(ingress::tls_acceptor(&t.cert, &t.key)?),
            None => None,
        };
        let listener = ingress::bind(config.server.listen, config.server.max_connections)
            .with_context(|| format!("server.listen: cannot bind {}", config.server.listen))?;
        let webhook_addr = listener.local_addr()?;
        let admin_listener = match config.admin_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("admin.listen: cannot bind {addr}"))?,
            ),
            None => None,
        };
        let admin_addr = admin_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()?;
        let server = config.server.clone();
        let config_path = config.path.clone();
        let state = AppState::new(Arc::new(config), store, clock);
        let (shutdown, shutdown_rx) = watch::channel(false);

        let admin = admin_listener.map(|listener| {
            let router = admin::router(state.clone(), telemetry::metrics_handle());
            let mut rx = shutdown_rx.clone();
            tokio::spawn(async move {
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = rx.changed().await;
                    })
                    .await;
            })
        });
        if let Some(limiter_state) = state.client_limiter.as_ref().map(|_| state.clone()) {
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
                loop {
                    tick.tick().await;
                    if let Some(l) = &limiter_state.client_limiter {
                        l.prune();
                    }
                }
            });
        }
        let ingress = tokio::spawn(ingress::serve(
            listener,
            tls,
            state.clone(),
            server,
            shutdown_rx,
        ));
        let workers = start_workers(&state)?;
        let relay = crate::relay::start(&state).await?;
        tracing::info!(%webhook_addr, admin = ?admin_addr, "hookgate listening");
        Ok(Gateway {
            webhook_addr,
            admin_addr,
            state,
            shutdown,
            ingress,
            admin,
            workers,
            relay,
            config_path,
        })
    }

    /// Re-reads the configuration file and its `file:` secrets. On any error the running
    /// configuration stays and the error is returned (and logged by the caller).
    pub fn reload(&self) -> anyhow::Result<()> {
        let config = Config::load(&self.config_path)?;
        let current = self.state.runtime.load();
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
        self.state
            .runtime
            .store(Arc::new(Runtime::new(Arc::new(config))));
        Ok(())
    }

    /// Stops accepting, lets in-flight requests finish (commit and answer), then closes the store.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let workers = self.workers.map(|pool| {
            let grace = worker_grace(&self.state);
            tokio::spawn(pool.shutdown(grace))
        });
        let relay = self.relay.map(|pool| {
            let grace = crate::relay::grace(&self.state);
            tokio::spawn(pool.shutdown(grace))
        });
        let _ = self.ingress.await;
        if let Some(workers) = workers {
            let _ = workers.await;
        }
        if let Some(relay) = relay {
            let _ = relay.await;
        }
        if let Some(admin) = self.admin {
            let _ = admin.await;
        }
        self.state.store.close().await;
        tracing::info!("hookgate stopped");
    }
}

/// Starts `[worker] concurrency` workers on `state` (none when it is 0).
pub fn start_workers(state: &Arc<AppState>) -> anyhow::Result<Option<WorkerPool>> {
    let worker = state.runtime.load().config.worker.clone();
    if worker.concurrency == 0 {
        return Ok(None);
    }
    let processor = Arc::new(Processor::new(state.clone())?);
    Ok(Some(WorkerPool::start(
        processor,
        worker.concurrency,
        worker.poll_interval,
    )))
}

/// How long shutdown waits for in-flight events: at most the lease (after it, the event
/// would return to the inbox anyway), at most 10 s.
pub fn worker_grace(state: &AppState) -> std::time::Duration {
    state
        .runtime
        .load()
        .config
        .worker
        .lease
        .min(std::time::Duration::from_secs(10))
}
