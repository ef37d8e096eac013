//! Command-line interface: `serve` (the gateway), `worker` (the background stages alone),
//! `config check`, `send` (one signed request), `providers list` / `show` / `docs` (the
//! built-in packs), `bench` and `bench-seed` (the load generator and the retention
//! benchmark's backlog, with the default-on `bench` feature), `events list` / `show` /
//! `retry` / `purge` (operator inspection, retry and deletion on request), `jobs` (bulk jobs
//! over the operator API), `reconcile` (one reconciliation run) and `keys status`
//! (stored payloads per payload key version).
//! `serve` and `worker` run the same [`Gateway`] with different [`Roles`].

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod bench_seed;
pub mod events;
pub mod events_api;
pub mod jobs;
pub mod keys;
pub mod providers;
pub mod providers_test;
pub mod purge;
pub mod reconcile;
pub mod send;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::app::{Gateway, Roles};
use crate::config::{self, Config};
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
        /// Development: allow literal and published example secrets on non-loopback listeners.
        #[arg(long)]
        dev: bool,
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
    /// Bench only: fill the store with finished rows received long ago (the retention
    /// benchmark's backlog).
    #[cfg(feature = "bench")]
    #[command(name = "bench-seed", hide = true)]
    BenchSeed(bench_seed::SeedArgs),
    /// Run the processing workers and the relay alone (no webhook listener; the admin
    /// listener when configured), for split deployments.
    Worker {
        #[arg(long, short)]
        config: PathBuf,
        /// Development: allow literal and published example secrets on non-loopback listeners.
        #[arg(long)]
        dev: bool,
    },
    /// Inspect and retry stored events.
    Events {
        #[command(subcommand)]
        command: events::EventsCommand,
    },
    /// Bulk retry / replay / redeliver jobs, through the operator API.
    Jobs {
        #[command(subcommand)]
        command: jobs::JobsCommand,
    },
    /// One reconciliation run on the store: lost work found per endpoint, what is safe to
    /// redo re-enqueued (`--dry-run`: found, nothing changed).
    Reconcile(reconcile::ReconcileArgs),
    /// Payload key rotation: stored payloads per key version.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Describe the provider packs (built-in, or a configuration's with --config) and test a
    /// captured request against an endpoint's pack.
    Providers {
        #[command(subcommand)]
        command: providers::ProvidersCommand,
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
        Command::Serve { config, dev } => run_gateway(config, Roles::SERVE, dev),
        Command::Config {
            command: ConfigCommand::Check { config },
        } => {
            let config = Config::load(&config)?;
            for w in &config.warnings {
                eprintln!("warning: {w}");
            }
            for problem in check_secret_sources(&config)? {
                eprintln!("warning: {problem}");
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
        #[cfg(feature = "bench")]
        Command::BenchSeed(args) => bench_seed::run_blocking(args),
        Command::Worker { config, dev } => run_gateway(config, Roles::WORKER, dev),
        Command::Events { command } => events::run(command),
        Command::Jobs { command } => jobs::run(command),
        Command::Keys { command } => keys::run(command),
        Command::Reconcile(args) => reconcile::run(args),
        Command::Providers { command } => providers::run(command),
    }
}

/// Reads every secret that is not retired once, as the gateway would: what cannot be read
/// (the gateway would start, but that endpoint would answer 503).
fn check_secret_sources(config: &Config) -> anyhow::Result<Vec<String>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let reader = config.secrets.reader(true);
    Ok(runtime.block_on(async {
        let mut problems = Vec::new();
        for (i, e) in config.endpoints.iter().enumerate() {
            for (j, v) in e.secrets.iter().enumerate().filter(|(_, v)| !v.retired) {
                let read = reader.read(&v.source, &v.reference).await;
                let decoded = read.map_err(|e| e.to_string()).and_then(|(value, _)| {
                    e.pack
                        .decode_secret(value.expose())
                        .map(|_| ())
                        .map_err(|err| format!("{err} for provider {}", e.pack.id()))
                });
                if let Err(problem) = decoded {
                    problems.push(format!(
                        "endpoints[{i}].secrets[{j}] (version {:?}) cannot be read now: {problem}; \
                         the endpoint answers 503 while no version can be read",
                        v.version
                    ));
                }
            }
        }
        problems
    }))
}

/// Runs a gateway with `roles` until SIGTERM or SIGINT, then drains it.
fn run_gateway(path: PathBuf, roles: Roles, dev: bool) -> anyhow::Result<i32> {
    let config = Config::load(&path)?;
    let traces = telemetry::init_logging_and_traces(&config.log, config.tracing.as_ref())?;
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    if !roles.ingress && config.worker.concurrency == 0 && !relay_runs(&config) {
        anyhow::bail!(
            "worker.concurrency is 0 and no relay runs (no destinations, or relay.enabled = false): nothing to run"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async move {
        let _ = telemetry::metrics_handle();
        // Handlers first: whoever reads the listening line (printed by `Gateway::start`) may
        // signal us at once, and a signal without a handler would kill the process.
        let signals = Signals::install().context("installing signal handlers")?;
        let gateway = Gateway::start(config, roles, dev).await?;
        signals.wait(&gateway).await;
        gateway.shutdown().await;
        Ok(0)
    });
    // After the drain, outside the runtime: the spans of the last requests go out too.
    traces.finish();
    result
}

/// The configuration starts the delivery stage.
fn relay_runs(config: &Config) -> bool {
    config.relay.enabled && !config.destinations.is_empty()
}

/// The signals a gateway process handles: SIGHUP reloads; SIGTERM or SIGINT drains.
struct Signals {
    hup: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            hup: signal(SignalKind::hangup())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Reloads on SIGHUP; returns on SIGTERM or SIGINT so the caller drains and exits.
    async fn wait(mut self, gateway: &Gateway) {
        loop {
            tokio::select! {
                // Both outcomes are logged (and counted) by `reload`.
                _ = self.hup.recv() => { let _ = gateway.reload().await; }
                _ = self.term.recv() => { tracing::info!("SIGTERM: draining"); return; }
                _ = self.int.recv() => { tracing::info!("SIGINT: draining"); return; }
            }
        }
    }
}
