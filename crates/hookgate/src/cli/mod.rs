//! Command-line interface: `serve` (the gateway), `worker` (processing alone), `config check`,
//! `send` (one signed request), `bench` (the load generator, with the default-on `bench`
//! feature) and `events list` / `show` / `retry` (operator inspection and retry).

#[cfg(feature = "bench")]
pub mod bench;
pub mod events;
pub mod send;
pub mod worker;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::app::Gateway;
use crate::config::{self, Config};
use crate::state::SystemClock;
use crate::telemetry;

#[derive(Debug, Parser)]
#[command(
    name = "hookgate",
    version,
    about = "Webhook ingestion gateway: verify, commit durably, then acknowledge"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway (webhook listener and admin listener).
    Serve {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Sign a payload exactly as the endpoint's provider would and POST it to the gateway.
    Send(send::SendArgs),
    /// Load-generate signed traffic against a running gateway, then verify its store.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
    /// Run the processing workers alone (no webhook listener), for split deployments.
    Worker {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Inspect and retry stored events.
    Events {
        #[command(subcommand)]
        command: events::EventsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print it resolved, with secrets redacted.
    Check {
        #[arg(long, short)]
        config: PathBuf,
    },
}

/// Runs the CLI; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Serve { config } => serve(config),
        Command::Config {
            command: ConfigCommand::Check { config },
        } => {
            let config = Config::load(&config)?;
            for w in &config.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", config::render_redacted(&config));
            eprintln!("configuration OK");
            Ok(0)
        }
        Command::Send(args) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(send::run(args))
        }
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run_blocking(args),
        Command::Worker { config } => worker::run(config),
        Command::Events { command } => events::run(command),
    }
}

fn serve(path: PathBuf) -> anyhow::Result<i32> {
    let config = Config::load(&path)?;
    telemetry::init_logging(&config.log);
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let _ = telemetry::metrics_handle();
        let gateway = Gateway::start(config, Arc::new(SystemClock)).await?;
        wait_for_signals(&gateway)
            .await
            .context("installing signal handlers")?;
        gateway.shutdown().await;
        Ok(0)
    })
}

/// SIGHUP reloads; SIGTERM or SIGINT returns so the caller drains and exits.
async fn wait_for_signals(gateway: &Gateway) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            _ = hup.recv() => match gateway.reload() {
                Ok(()) => tracing::info!("configuration reloaded"),
                Err(e) => tracing::error!(error = %e, "reload failed; keeping the running configuration"),
            },
            _ = term.recv() => { tracing::info!("SIGTERM: draining"); return Ok(()); }
            _ = int.recv() => { tracing::info!("SIGINT: draining"); return Ok(()); }
        }
    }
}
