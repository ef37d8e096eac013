//! `hookgate bench-seed`: fills a store with finished rows received long ago, for the
//! retention benchmark (`scripts/bench.sh sqlite-retention`). Bench-only (the `bench`
//! feature); never part of serving.
//!
//! The rows go through the store's own acceptance path in large units (the group commit of
//! either backend), so the file or tables look as a gateway would have left them — sealed
//! payloads under the configured key, every index — at tens of thousands of rows a second
//! instead of one HTTP request each. They are `IGNORED` (finished: retention may purge them,
//! no worker leases them) and belong to an endpoint id the configuration need not have.

use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hookgate_core::{InboxStatus, RowIdentity};
use hookgate_store::NewInboxRow;

use crate::config::Config;

/// Rows per acceptance unit, and per transaction: seeding opens the store with a batch of
/// this size (serving keeps its configured one), so a million rows cost 200 fsyncs.
const UNIT: usize = 5000;

#[derive(Debug, Args)]
pub struct SeedArgs {
    #[arg(long, short)]
    pub config: std::path::PathBuf,
    /// Rows to insert.
    #[arg(long)]
    pub rows: u64,
    /// Their `received_at`, this many days before now.
    #[arg(long)]
    pub days_ago: u32,
    /// Endpoint id the rows belong to.
    #[arg(long, default_value = "seeded")]
    pub endpoint: String,
    /// Plaintext bytes per payload (sealed before storing).
    #[arg(long, default_value_t = 512)]
    pub payload_bytes: usize,
    /// Units in flight at once.
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
}

pub fn run_blocking(args: SeedArgs) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

async fn run(args: SeedArgs) -> anyhow::Result<i32> {
    let config = Config::load(&args.config)?;
    let options = hookgate_store::OpenOptions {
        pool_size: config.store.pool_size,
        group_commit: hookgate_store::GroupCommitOptions {
            enabled: true,
            max_batch: UNIT,
            queue_capacity: UNIT * 4,
            max_queue_wait: std::time::Duration::from_secs(3600),
        },
    };
    let store = hookgate_store::open(&config.store.url, options).await?;
    let keyring = Arc::new(config.payload_keys.keyring());
    let received_at_ms =
        jiff::Timestamp::now().as_millisecond() - i64::from(args.days_ago) * 86_400_000;
    let started = Instant::now();
    let permits = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0u64;
    let run_id = uuid::Uuid::now_v7().simple().to_string();
    while next < args.rows {
        let count = (args.rows - next).min(UNIT as u64);
        let permit = Arc::clone(&permits).acquire_owned().await?;
        let (store, keyring) = (Arc::clone(&store), Arc::clone(&keyring));
        let (endpoint, payload_bytes, run_id) =
            (args.endpoint.clone(), args.payload_bytes, run_id.clone());
        let first = next;
        tasks.spawn(async move {
            let plaintext = vec![b'x'; payload_bytes];
            let rows: Vec<NewInboxRow> = (first..first + count)
                .map(|n| {
                    let event_id = format!("seed_{run_id}_{n}");
                    let identity = RowIdentity {
                        provider: "stripe",
                        endpoint_id: &endpoint,
                        provider_event_id: &event_id,
                    };
                    let sealed = keyring.seal(&mut rand::thread_rng(), &identity, &plaintext);
                    NewInboxRow {
                        inbox_id: uuid::Uuid::now_v7().to_string(),
                        provider: "stripe".into(),
                        endpoint_id: endpoint.clone(),
                        provider_event_id: event_id,
                        event_type: Some("seeded".into()),
                        object_id: None,
                        object_version: None,
                        provider_created_at: None,
                        received_at_ms,
                        payload: sealed.bytes,
                        payload_key_version: sealed.key_version,
                        payload_digest: keyring.digest(&plaintext).to_vec(),
                        matched_secret_version: "seed".into(),
                        status: InboxStatus::Ignored,
                        source: hookgate_core::EventSource::Webhook,
                        api_version: None,
                        replay_digest: None,
                    }
                })
                .collect();
            // A unit shed by the admission gate is offered again: seeding waits, never drops.
            let result = loop {
                match store.accept_request(rows.clone()).await {
                    Err(hookgate_store::StoreError::Overloaded) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    other => break other,
                }
            };
            drop(permit);
            result
        });
        next += count;
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    store.close().await;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "seeded_rows": args.rows,
            "endpoint": args.endpoint,
            "days_ago": args.days_ago,
            "seconds": secs,
            "rows_per_second": args.rows as f64 / secs.max(1e-9),
        })
    );
    Ok(0)
}
