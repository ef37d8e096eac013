//! `hookgate reconcile`: one reconciliation run by hand, on the store directly (safely beside
//! a running gateway on the same database: SQLite through the store's normal open, whose
//! writes wait on the other process's lock; PostgreSQL as any instance). It prints what it
//! found per endpoint as one JSON document; its repairs are work the running gateway's
//! workers and relays pick up at their next poll. `--dry-run` changes nothing and writes
//! nothing (no run record, no findings). Exit 0 when the run completed, whatever it found;
//! ≠ 0 on a store error. Never refused because another run ran recently.
//!
//! Endpoints with `reconcile = { … }` are then reconciled with their provider's API
//! ([`crate::reconcile::provider`]): each endpoint's object in the output gets `provider`
//! (what the listing found, or the run's `error`). A provider run that failed (an API refusal
//! such as 401/403, a store error) makes the exit status ≠ 0; the others still run.

use clap::Args;
use hookgate_store::{NewRun, RunState, RunTrigger};
use serde_json::json;

use crate::app::open_store;
use crate::config::Config;
use crate::reconcile::api::ApiClient;
use crate::reconcile::provider::ProviderRun;
use crate::reconcile::{self, Scope};
use crate::state::process_clock;
use crate::telemetry;

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    #[arg(long, short)]
    pub config: std::path::PathBuf,
    /// Only this endpoint.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Only events received (deliveries created) at or after this time (RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Find and print; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: ReconcileArgs) -> anyhow::Result<i32> {
    let config = Config::load(&args.config)?;
    telemetry::init_logging(&config.log);
    if let Some(id) = &args.endpoint
        && config.endpoint(id).is_none()
    {
        anyhow::bail!("--endpoint {id:?} is not configured");
    }
    let since_ms = args
        .since
        .as_deref()
        .map(|t| {
            t.parse::<jiff::Timestamp>()
                .map(|t| t.as_millisecond())
                .map_err(|e| anyhow::anyhow!("--since must be an RFC 3339 time: {e}"))
        })
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let store = open_store(&config).await?;
        let result = run_once(&store, &config, &args, since_ms).await;
        store.close().await;
        result
    })
}

async fn run_once(
    store: &hookgate_store::SharedStore,
    config: &Config,
    args: &ReconcileArgs,
    since_ms: Option<i64>,
) -> anyhow::Result<i32> {
    let clock = process_clock();
    let scope = Scope {
        endpoint: args.endpoint.clone(),
        since_ms,
        dry_run: args.dry_run,
        record: !args.dry_run,
    };
    let run_id = uuid::Uuid::now_v7().to_string();
    let owner = format!("cli-{run_id}");
    if !args.dry_run {
        store
            .create_run(NewRun {
                run_id: run_id.clone(),
                trigger: RunTrigger::Cli,
                endpoint_id: args.endpoint.clone(),
                since_ms,
                dry_run: false,
                state: RunState::Running,
                requested_by: super::purge::os_user(),
                owner: Some(owner.clone()),
                lease_ms: i64::try_from(crate::stage::reconcile::RUN_LEASE.as_millis())
                    .unwrap_or(i64::MAX),
                now_ms: clock.now_ms(),
            })
            .await?;
    }
    let result = reconcile::run(store, config, &run_id, &scope, clock.now_ms()).await;
    if !args.dry_run {
        let (state, summary, error) = match &result {
            Ok(report) => (RunState::Done, Some(report.summary().to_string()), None),
            Err(e) => (RunState::Failed, None, Some(e.to_string())),
        };
        telemetry::reconcile_run_finished(
            &run_id,
            RunTrigger::Cli.as_str(),
            result.as_ref().map_or(0, |r| r.total()),
            error.as_deref(),
        );
        // Recording the end is best effort once the run itself failed.
        let finished = store
            .finish_run(
                &run_id,
                &owner,
                state,
                summary.as_deref(),
                error.as_deref(),
                clock.now_ms(),
            )
            .await;
        if result.is_ok() {
            finished?;
        }
    }
    let report = result?;
    let mut endpoints = report.detailed();
    let provider_failed =
        reconcile_providers(store, config, args, since_ms, &mut endpoints).await?;
    println!(
        "{}",
        json!({
            "run_id": (!args.dry_run).then_some(&run_id),
            "dry_run": args.dry_run,
            "total": report.total(),
            "endpoints": endpoints,
        })
    );
    Ok(if provider_failed { 2 } else { 0 })
}

/// The provider runs of the endpoints in scope, each added to its endpoint's object as
/// `provider`. `true` when one failed (logged, and its `error` printed).
async fn reconcile_providers(
    store: &hookgate_store::SharedStore,
    config: &Config,
    args: &ReconcileArgs,
    since_ms: Option<i64>,
    endpoints: &mut serde_json::Value,
) -> anyhow::Result<bool> {
    let in_scope: Vec<_> = config
        .endpoints
        .iter()
        .filter(|ep| ep.reconcile.is_some())
        .filter(|ep| args.endpoint.as_ref().is_none_or(|id| *id == ep.id))
        .collect();
    if in_scope.is_empty() {
        return Ok(false);
    }
    let client = ApiClient::new()?;
    let run = ProviderRun {
        store,
        config,
        client: &client,
        since_ms,
        dry_run: args.dry_run,
        now_ms: process_clock().now_ms(),
    };
    let mut failed = false;
    for ep in in_scope {
        let provider = match run.endpoint(ep).await {
            Ok(Some(report)) => report.json(),
            Ok(None) => continue,
            Err(e) => {
                failed = true;
                eprintln!(
                    "provider reconciliation of endpoint {:?} failed: {e}",
                    ep.id
                );
                json!({ "error": e.to_string() })
            }
        };
        if let Some(slot) = endpoints
            .as_array_mut()
            .and_then(|list| list.iter_mut().find(|e| e["endpoint"] == ep.id.as_str()))
        {
            slot["provider"] = provider;
        }
    }
    Ok(failed)
}
