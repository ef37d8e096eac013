//! `hookgate events list|show|retry|replay|release|purge`: what operators (and scripts) see of stored
//! events, and the operations on them — through the operator API (`--url`, token in
//! `HOOKGATE_ADMIN_TOKEN`) or on the store directly (`--config`), the same operations
//! either way (`crate::admin::api`).
//!
//! `list` pages (500 at a time, never a payload) and prints one JSON object per line with
//! `--json`; `show` prints metadata only, unless `--payload` asks to decrypt the stored body
//! (audited as `decrypt`). On the store directly, operations are audited with the OS user as
//! the token.

use std::path::Path;

use base64::Engine;
use clap::Subcommand;
use hookgate_core::RowIdentity;
use hookgate_store::{InboxRecord, NewAudit, OperationResult, Redelivery, SharedStore};
use reqwest::Method;
use serde_json::{Value, json};

use super::events_api::{ApiClient, Filters, Target, refused};
use crate::app::open_store;
use crate::config::Config;
use crate::state::process_clock;
use crate::telemetry;

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List events, newest first, a page at a time.
    List {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filters: Filters,
        /// At most this many events (default: all that match).
        #[arg(long)]
        limit: Option<u32>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show one event's metadata (and, with --payload, its decrypted body).
    Show {
        #[command(flatten)]
        target: Target,
        id: String,
        /// Decrypt and print the stored payload (audited).
        #[arg(long)]
        payload: bool,
    },
    /// Put a FAILED event back to RECEIVED, due now, attempts reset; or, for a processed
    /// event, put only its FAILED deliveries back to PENDING.
    /// Refused (exit 3, `{"error":"payload_purged"}` on stderr) when the event's payload
    /// was purged: nothing is left to process or deliver.
    Retry {
        #[command(flatten)]
        target: Target,
        id: String,
    },
    /// Replay a PROCESSED, IGNORED or FAILED event through processing (whatever the
    /// allow-list says now), or with --destination re-deliver it to that destination only.
    Replay {
        #[command(flatten)]
        target: Target,
        id: String,
        #[arg(long)]
        destination: Option<String>,
        /// With --destination: a new Idempotency-Key (recorded).
        #[arg(long, requires = "destination")]
        fresh_key: bool,
    },
    /// Put HELD events (an API version the endpoint does not pin, a sequence gap that outlived
    /// its window) back to RECEIVED, due now: all of them, one endpoint's, or one event.
    /// Released events are processed without that check again (the operator decided).
    /// Exit 0 when at least one was released, 1 when none was.
    Release {
        #[command(flatten)]
        target: Target,
        /// Only this endpoint's held events.
        #[arg(long)]
        endpoint: Option<String>,
        /// Only this event (its inbox id).
        #[arg(long)]
        id: Option<String>,
    },
    /// Remove the sealed payloads of events now (privacy request), keep their id records,
    /// and record it in the audit log. Select by ids and/or --endpoint, --before, --older-than.
    Purge(super::purge::PurgeArgs),
}

/// Exit code of `events retry` for an event whose payload was purged.
pub const EXIT_PAYLOAD_PURGED: i32 = 3;

/// Rows per page of `events list`.
const PAGE: u32 = 500;

/// Where a command works, opened.
enum Conn {
    Store(Box<Config>, SharedStore),
    Api(ApiClient),
}

impl Conn {
    async fn open(target: &Target) -> anyhow::Result<Conn> {
        match (&target.url, &target.config) {
            (Some(url), _) => Ok(Conn::Api(ApiClient::new(url)?)),
            (None, Some(path)) => {
                let (config, store) = open(path).await?;
                Ok(Conn::Store(Box::new(config), store))
            }
            (None, None) => anyhow::bail!("give --config or --url"),
        }
    }

    async fn close(self) {
        if let Conn::Store(_, store) = self {
            store.close().await;
        }
    }
}

pub fn run(command: EventsCommand) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match command {
            EventsCommand::List {
                target,
                filters,
                limit,
                json,
            } => {
                let conn = Conn::open(&target).await?;
                let result = list(&conn, &filters, limit).await;
                conn.close().await;
                print_list(&result?, json);
                Ok(0)
            }
            EventsCommand::Show {
                target,
                id,
                payload,
            } => {
                let conn = Conn::open(&target).await?;
                let result = show(&conn, &id, payload).await;
                conn.close().await;
                result
            }
            EventsCommand::Retry { target, id } => {
                let conn = Conn::open(&target).await?;
                let result = match &conn {
                    Conn::Store(_, store) => retry(store, &id).await,
                    Conn::Api(api) => {
                        operate(api, &format!("/api/v1/events/{id}/retry"), None).await
                    }
                };
                conn.close().await;
                result
            }
            EventsCommand::Replay {
                target,
                id,
                destination,
                fresh_key,
            } => {
                let conn = Conn::open(&target).await?;
                let result = match &conn {
                    Conn::Store(config, store) => {
                        replay(config, store, &id, destination.as_deref(), fresh_key).await
                    }
                    Conn::Api(api) => {
                        let body = match &destination {
                            Some(d) => json!({ "destination": d, "fresh_key": fresh_key }),
                            None => json!({}),
                        };
                        operate(api, &format!("/api/v1/events/{id}/replay"), Some(body)).await
                    }
                };
                conn.close().await;
                result
            }
            EventsCommand::Release {
                target,
                endpoint,
                id,
            } => {
                let conn = Conn::open(&target).await?;
                let result = release(&conn, endpoint, id).await;
                conn.close().await;
                result
            }
            EventsCommand::Purge(args) => {
                let (_, store) = open(&args.config).await?;
                let result = super::purge::run(&store, &args, &*process_clock()).await;
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

/// Every matching event (up to `limit`), page by page. `--status failed` also lists events
/// with a FAILED delivery (their inbox row stays PROCESSED), as before.
async fn list(conn: &Conn, filters: &Filters, limit: Option<u32>) -> anyhow::Result<Vec<Value>> {
    let pairs = filters.pairs();
    let failed = filters
        .status
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("failed"));
    let mut events = pages(conn, &pairs, limit).await?;
    if failed && filters.delivery_status.is_none() {
        let mut deliveries: Vec<(&'static str, String)> = pairs
            .iter()
            .filter(|(k, _)| *k != "status")
            .cloned()
            .collect();
        deliveries.push(("delivery_status", "failed".into()));
        for e in pages(conn, &deliveries, limit).await? {
            if !events.iter().any(|x| x["id"] == e["id"]) {
                events.push(e);
            }
        }
        let key = |e: &Value| {
            (
                e["received_at_ms"].as_i64(),
                e["id"].as_str().map(str::to_owned),
            )
        };
        events.sort_by_key(|e| std::cmp::Reverse(key(e)));
        if let Some(limit) = limit {
            events.truncate(limit as usize);
        }
    }
    Ok(events)
}

async fn pages(
    conn: &Conn,
    pairs: &[(&'static str, String)],
    limit: Option<u32>,
) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let want = limit.map_or(PAGE, |l| (l as usize - out.len()).min(PAGE as usize) as u32);
        if want == 0 {
            break;
        }
        let (rows, next) = match conn {
            Conn::Store(_, store) => {
                let mut query = hookgate_store::EventQuery {
                    limit: want,
                    ..Default::default()
                };
                for (k, v) in pairs {
                    crate::admin::api::query::set_filter(&mut query, k, v.clone())
                        .map_err(|e| anyhow::anyhow!("{}", e.body.message.unwrap_or_default()))?;
                }
                if let Some(c) = &cursor {
                    query.after =
                        Some(crate::admin::api::query::decode_cursor(c).map_err(|e| {
                            anyhow::anyhow!("{}", e.body.message.unwrap_or_default())
                        })?);
                }
                let (rows, next) = crate::admin::api::events::page(store, query).await?;
                (rows.iter().map(metadata).collect::<Vec<_>>(), next)
            }
            Conn::Api(api) => {
                let mut query: Vec<(&str, String)> = pairs.to_vec();
                query.push(("limit", want.to_string()));
                if let Some(c) = &cursor {
                    query.push(("cursor", c.clone()));
                }
                let page = api
                    .call(Method::GET, "/api/v1/events", &query, None)
                    .await?
                    .map_err(|r| anyhow::anyhow!("the API refused the list: {}", r.body))?;
                let rows = page["events"].as_array().cloned().unwrap_or_default();
                (rows, page["next_cursor"].as_str().map(str::to_owned))
            }
        };
        out.extend(rows);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(out)
}

fn print_list(events: &[Value], json: bool) {
    if json {
        for e in events {
            println!("{e}");
        }
        return;
    }
    println!(
        "{:<36}  {:<10}  {:<8}  {:<4}  {:<18}  {:<20}  EVENT",
        "ID", "STATUS", "OUTCOME", "TRY", "PROVIDER", "ENDPOINT"
    );
    let s = |v: &Value| v.as_str().map_or_else(|| "-".to_owned(), str::to_owned);
    for e in events {
        println!(
            "{:<36}  {:<10}  {:<8}  {:<4}  {:<18}  {:<20}  {}",
            s(&e["id"]),
            s(&e["status"]),
            s(&e["outcome"]),
            e["attempt_count"],
            s(&e["provider"]),
            s(&e["endpoint_id"]),
            s(&e["provider_event_id"])
        );
    }
}

async fn show(conn: &Conn, id: &str, payload: bool) -> anyhow::Result<i32> {
    let out = match conn {
        Conn::Store(config, store) => {
            let Some(event) = store.get_event(id).await? else {
                eprintln!("no event {id}");
                return Ok(1);
            };
            let deliveries = store.list_deliveries(id).await?;
            let mut out = metadata(&event);
            out["deliveries"] = crate::relay::ops::deliveries_json(&deliveries);
            if payload {
                out["payload"] = decrypt(config, &event)?;
                audit(store, "decrypt", id, None).await?;
            }
            out
        }
        Conn::Api(api) => {
            let mut out = match api
                .call(Method::GET, &format!("/api/v1/events/{id}"), &[], None)
                .await?
            {
                Ok(v) => v,
                Err(r) => return Ok(refused(&r)),
            };
            if payload {
                let p = match api
                    .call(
                        Method::GET,
                        &format!("/api/v1/events/{id}/payload"),
                        &[],
                        None,
                    )
                    .await?
                {
                    Ok(v) => v,
                    Err(r) => return Ok(refused(&r)),
                };
                out["payload"] = if p["encoding"] == "base64" {
                    json!({ "base64": p["body"] })
                } else {
                    p["body"].clone()
                };
                eprintln!("note: payload of {id} decrypted on request (audited)");
            }
            out
        }
    };
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(0)
}

/// An operation through the API: prints the answer, or the refusal with its exit code.
async fn operate(api: &ApiClient, path: &str, body: Option<Value>) -> anyhow::Result<i32> {
    match api.call(Method::POST, path, &[], body).await? {
        Ok(v) => {
            println!("{v}");
            Ok(0)
        }
        Err(r) => Ok(refused(&r)),
    }
}

/// An audit row for an action on the store directly (the OS user as the token).
async fn audit(
    store: &SharedStore,
    action: &str,
    target: &str,
    detail: Option<Value>,
) -> anyhow::Result<()> {
    store
        .record_audit(NewAudit {
            audit_id: uuid::Uuid::now_v7().to_string(),
            at_ms: process_clock().now_ms(),
            actor: super::purge::os_user(),
            action: action.into(),
            target: target.into(),
            filter: None,
            result: "ok".into(),
            detail: detail.map(|d| d.to_string()),
        })
        .await?;
    Ok(())
}

async fn retry(store: &SharedStore, id: &str) -> anyhow::Result<i32> {
    let now = process_clock().now_ms();
    if store.retry_event(id, now).await? {
        audit(store, "retry", id, None).await?;
        tracing::info!(inbox_id = %id, "event put back for processing by operator");
        println!("event {id} is RECEIVED again; a worker will process it");
        return Ok(0);
    }
    // Only the FAILED deliveries of the event; delivered ones are not sent again.
    let deliveries = store.retry_deliveries(id, now).await?;
    if deliveries > 0 {
        audit(
            store,
            "retry",
            id,
            Some(json!({ "deliveries": deliveries })),
        )
        .await?;
        tracing::info!(inbox_id = %id, deliveries, "failed deliveries put back by operator");
        println!(
            "{deliveries} FAILED deliveries of event {id} are PENDING again; the relay will deliver them"
        );
        return Ok(0);
    }
    match store.get_event(id).await? {
        Some(e) if !e.payload_stored() => return Ok(purged(id)),
        Some(e) => eprintln!(
            "event {id} is {}, not FAILED, and has no FAILED delivery: nothing to retry",
            e.status
        ),
        None => eprintln!("no event {id}"),
    }
    Ok(1)
}

/// `events release`: on the store directly (audited with the OS user) or through the API.
async fn release(conn: &Conn, endpoint: Option<String>, id: Option<String>) -> anyhow::Result<i32> {
    let released = match conn {
        Conn::Store(config, store) => {
            if let Some(e) = &endpoint
                && !config.endpoints.iter().any(|c| &c.id == e)
            {
                eprintln!("warning: no endpoint {e:?} is configured");
            }
            let target = release_target(endpoint.as_deref(), id.as_deref());
            let request = hookgate_store::ReleaseRequest {
                endpoint_id: endpoint,
                inbox_id: id,
                now_ms: process_clock().now_ms(),
            };
            let n = store.release_held(request).await?;
            if n > 0 {
                audit(store, "release", &target, Some(json!({ "released": n }))).await?;
                tracing::info!(released = n, target = %target, "held events released by operator");
            }
            n
        }
        Conn::Api(api) => {
            let body = json!({ "endpoint": endpoint, "id": id });
            match api
                .call(Method::POST, "/api/v1/events/release", &[], Some(body))
                .await?
            {
                Ok(v) => v["released"].as_u64().unwrap_or(0),
                Err(r) => return Ok(refused(&r)),
            }
        }
    };
    println!("{}", json!({ "released": released }));
    if released == 0 {
        eprintln!("no HELD event matched (or its payload was purged): nothing released");
        return Ok(1);
    }
    Ok(0)
}

/// The audit target of a release: the event, the endpoint, or every held event.
pub(crate) fn release_target(endpoint: Option<&str>, id: Option<&str>) -> String {
    match (endpoint, id) {
        (_, Some(id)) => id.to_owned(),
        (Some(e), None) => format!("endpoint:{e}"),
        (None, None) => "*".to_owned(),
    }
}

fn purged(id: &str) -> i32 {
    let refused = crate::relay::ops::ReplayRefused::PayloadPurged;
    eprintln!("{}", refused.body());
    eprintln!(
        "event {id} cannot be replayed: its payload was purged (retention or events purge); \
         only its id record is left"
    );
    EXIT_PAYLOAD_PURGED
}

async fn replay(
    config: &Config,
    store: &SharedStore,
    id: &str,
    destination: Option<&str>,
    fresh_key: bool,
) -> anyhow::Result<i32> {
    let now = process_clock().now_ms();
    let (action, result, detail) = match destination {
        None => ("replay", store.replay_event(id, now).await?, None),
        Some(d) => {
            if !config.destinations.iter().any(|c| c.id == d) {
                eprintln!("no destination {d:?} is configured");
                return Ok(1);
            }
            let key = fresh_key.then(|| uuid::Uuid::now_v7().to_string());
            let result = store
                .redeliver(Redelivery {
                    inbox_id: id,
                    destination: d,
                    fresh_key: key.as_deref(),
                    outbox_id: &uuid::Uuid::now_v7().to_string(),
                    now_ms: now,
                })
                .await?;
            let detail = json!({ "destination": d, "fresh_key": key });
            ("redeliver", result, Some(detail))
        }
    };
    match result {
        OperationResult::Done => {
            audit(store, action, id, detail.clone()).await?;
            println!(
                "{}",
                json!({ "id": id, "action": action, "detail": detail })
            );
            Ok(0)
        }
        OperationResult::PayloadPurged => Ok(purged(id)),
        OperationResult::NotFound => {
            eprintln!("no event {id}");
            Ok(1)
        }
        OperationResult::InProgress => {
            eprintln!(
                "event {id} is still RECEIVED, or a relay is delivering it now: nothing changed"
            );
            Ok(1)
        }
        OperationResult::NotProcessed => {
            eprintln!("event {id} is not PROCESSED: it has no deliveries to re-deliver yet");
            Ok(1)
        }
    }
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
        "payload_stored": e.payload_stored(),
        "payload_purged_at_ms": e.payload_purged_at_ms,
        "source": e.source.as_str(),
        "api_version": e.api_version,
        "held_reason": e.held_reason,
        "released_at_ms": e.released_at_ms,
    })
}
