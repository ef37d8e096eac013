//! `hookgate events list|show|retry`: what operators (and scripts) see of stored events.
//!
//! `list --json` prints one JSON object per line; `show` prints metadata only, unless
//! `--payload` asks to decrypt the stored body, which is logged as a deliberate act.

use std::path::{Path, PathBuf};

use base64::Engine;
use clap::Subcommand;
use hookgate_core::{InboxStatus, RowIdentity};
use hookgate_store::{EventFilter, InboxRecord, SharedStore};
use serde_json::{Value, json};

use crate::app::open_store;
use crate::config::Config;
use crate::state::{Clock, SystemClock};
use crate::telemetry;

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List events, newest first.
    List {
        #[arg(long, short)]
        config: PathBuf,
        /// received, processed, failed or ignored.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        /// Only events this secret version verified (after a leak: what it let in).
        #[arg(long)]
        secret_version: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show one event's metadata (and, with --payload, its decrypted body).
    Show {
        #[arg(long, short)]
        config: PathBuf,
        id: String,
        /// Decrypt and print the stored payload (logged).
        #[arg(long)]
        payload: bool,
    },
    /// Put a FAILED event back to RECEIVED, due now, attempts reset; or, for a processed
    /// event, put only its FAILED deliveries back to PENDING.
    Retry {
        #[arg(long, short)]
        config: PathBuf,
        id: String,
    },
}

pub fn run(command: EventsCommand) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match command {
            EventsCommand::List {
                config,
                status,
                endpoint,
                secret_version,
                limit,
                json,
            } => {
                let status = status
                    .map(|s| {
                        s.parse::<InboxStatus>().map_err(|_| {
                            anyhow::anyhow!(
                                "--status must be received, processed, failed or ignored"
                            )
                        })
                    })
                    .transpose()?;
                let (_, store) = open(&config).await?;
                let filter = EventFilter {
                    status,
                    endpoint_id: endpoint,
                    matched_secret_version: secret_version,
                    limit,
                };
                let result = crate::relay::ops::list_events(&store, &filter).await;
                store.close().await;
                let events = result?;
                if json {
                    for e in &events {
                        println!("{}", metadata(e));
                    }
                } else {
                    println!(
                        "{:<36}  {:<10}  {:<8}  {:<4}  {:<18}  {:<20}  EVENT",
                        "ID", "STATUS", "OUTCOME", "TRY", "PROVIDER", "ENDPOINT"
                    );
                    for e in &events {
                        println!(
                            "{:<36}  {:<10}  {:<8}  {:<4}  {:<18}  {:<20}  {}",
                            e.inbox_id,
                            e.status,
                            e.outcome.map_or("-", |o| o.as_str()),
                            e.attempt_count,
                            e.provider,
                            e.endpoint_id,
                            e.provider_event_id
                        );
                    }
                }
                Ok(0)
            }
            EventsCommand::Show {
                config,
                id,
                payload,
            } => {
                let (config, store) = open(&config).await?;
                let result = store.get_event(&id).await;
                let deliveries = store.list_deliveries(&id).await;
                store.close().await;
                let Some(event) = result? else {
                    eprintln!("no event {id}");
                    return Ok(1);
                };
                let mut out = metadata(&event);
                out["deliveries"] = crate::relay::ops::deliveries_json(&deliveries?);
                if payload {
                    out["payload"] = decrypt(&config, &event)?;
                }
                println!("{}", serde_json::to_string_pretty(&out)?);
                Ok(0)
            }
            EventsCommand::Retry { config, id } => {
                let (_, store) = open(&config).await?;
                let result = retry(&store, &id).await;
                store.close().await;
                result
            }
        }
    })
}

async fn open(path: &Path) -> anyhow::Result<(Config, SharedStore)> {
    let config = Config::load(path)?;
    telemetry::init_logging(&config.log);
    let store = open_store(&config).await?;
    Ok((config, store))
}

async fn retry(store: &SharedStore, id: &str) -> anyhow::Result<i32> {
    let now = SystemClock.now_ms();
    if store.retry_event(id, now).await? {
        tracing::info!(inbox_id = %id, "event put back for processing by operator");
        println!("event {id} is RECEIVED again; a worker will process it");
        return Ok(0);
    }
    // Only the FAILED deliveries of the event; delivered ones are not sent again.
    let deliveries = store.retry_deliveries(id, now).await?;
    if deliveries > 0 {
        tracing::info!(inbox_id = %id, deliveries, "failed deliveries put back by operator");
        println!(
            "{deliveries} FAILED deliveries of event {id} are PENDING again; the relay will deliver them"
        );
        return Ok(0);
    }
    match store.get_event(id).await? {
        Some(e) => eprintln!(
            "event {id} is {}, not FAILED, and has no FAILED delivery: nothing to retry",
            e.status
        ),
        None => eprintln!("no event {id}"),
    }
    Ok(1)
}

/// The stored body, decrypted on purpose: logged, with who asked being the operator.
fn decrypt(config: &Config, event: &InboxRecord) -> anyhow::Result<Value> {
    let Some(sealed) = &event.payload else {
        return Ok(Value::Null);
    };
    let keyring = config.payload_keys.keyring();
    let identity = RowIdentity {
        provider: &event.provider,
        endpoint_id: &event.endpoint_id,
        provider_event_id: &event.provider_event_id,
    };
    let body = keyring
        .open(&identity, event.payload_key_version, sealed)
        .map_err(|e| anyhow::anyhow!("cannot decrypt the payload: {e}"))?;
    tracing::warn!(inbox_id = %event.inbox_id, "payload decrypted on operator request (events show --payload)");
    eprintln!("note: payload of {} decrypted on request", event.inbox_id);
    Ok(match std::str::from_utf8(&body) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(&*body) }),
    })
}

/// Metadata of one event (never the payload).
fn metadata(e: &InboxRecord) -> Value {
    json!({
        "id": e.inbox_id,
        "provider": e.provider,
        "endpoint_id": e.endpoint_id,
        "provider_event_id": e.provider_event_id,
        "event_type": e.event_type,
        "status": e.status.as_str(),
        "outcome": e.outcome.map(|o| o.as_str()),
        "attempt_count": e.attempt_count,
        "object_id": e.object_id,
        "object_version": e.object_version,
        "provider_created_at": e.provider_created_at,
        "received_at_ms": e.received_at_ms,
        "next_attempt_at_ms": e.next_attempt_at_ms,
        "processed_at_ms": e.processed_at_ms,
        "last_error": e.last_error,
        "payload_key_version": e.payload_key_version,
        "matched_secret_version": e.matched_secret_version,
        "payload_stored": e.payload.is_some(),
    })
}
