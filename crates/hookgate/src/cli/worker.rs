//! `hookgate worker --config F`: the processing workers (and the outbox relay, when
//! destinations are configured) alone, without the webhook listener,
//! for deployments that split ingress and processing (PostgreSQL: any number of instances).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::app::{open_store, start_workers, worker_grace};
use crate::config::Config;
use crate::state::{AppState, SystemClock};
use crate::telemetry;

pub fn run(path: PathBuf) -> anyhow::Result<i32> {
    let config = Config::load(&path)?;
    telemetry::init_logging(&config.log);
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    if config.worker.concurrency == 0 {
        anyhow::bail!("worker.concurrency is 0: nothing to run");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let _ = telemetry::metrics_handle();
        let store = open_store(&config).await?;
        let state = AppState::new(Arc::new(config), store, Arc::new(SystemClock));
        let stop = stop_signals().context("installing signal handlers")?;
        // Signals are handled from here on. No webhook listener and (for now) no admin
        // listener: both are reported as null.
        super::report_listening(None, None);
        let pool = start_workers(&state)?.context("no workers configured")?;
        let relay = crate::relay::start(&state).await?;
        stop.await;
        pool.shutdown(worker_grace(&state)).await;
        if let Some(relay) = relay {
            relay.shutdown(crate::relay::grace(&state)).await;
        }
        state.store.close().await;
        Ok(0)
    })
}

/// Installs the SIGTERM and SIGINT handlers now; the returned future ends at the first signal.
fn stop_signals() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: stopping workers"),
            _ = int.recv() => tracing::info!("SIGINT: stopping workers"),
        }
    })
}
