//! `hookgate events purge`: deletion of payloads on request (privacy). The sealed payloads of
//! the selected events are removed at once, whatever their age; their id records stay (a
//! redelivery is still a duplicate). Each committed batch writes an `audit_log` row (action
//! `events.purge`, the actor, the selection, the ids) in the same transaction.
//!
//! Events still `RECEIVED` are left alone (their processing needs the payload) and
//! reported; purge them once processed. A `FAILED` event purged here cannot be retried.

use std::time::Duration;

use clap::Args;
use hookgate_store::{PurgeRequest, PurgeSelection, SharedStore, retention::MAX_PURGE_IDS};
use serde_json::json;

use crate::state::Clock;
use crate::telemetry;

/// Rows per purge transaction.
const PURGE_BATCH: u32 = 500;

#[derive(Debug, Args)]
pub struct PurgeArgs {
    #[arg(long, short)]
    pub config: std::path::PathBuf,
    /// Event ids (inbox ids) to purge.
    pub ids: Vec<String>,
    /// Only events of this endpoint.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Only events received before this time (RFC 3339, e.g. 2026-01-31T00:00:00Z).
    #[arg(long, conflicts_with = "older_than")]
    pub before: Option<String>,
    /// Only events received longer ago than this (e.g. 90d, 12h, 30m, 45s).
    #[arg(long)]
    pub older_than: Option<String>,
    /// Who asks, for the audit log (default: the OS user running the command).
    #[arg(long)]
    pub actor: Option<String>,
}

impl PurgeArgs {
    /// The selection, with times resolved against `now_ms`.
    pub fn selection(&self, now_ms: i64) -> anyhow::Result<PurgeSelection> {
        let received_before_ms = match (&self.before, &self.older_than) {
            (Some(t), _) => Some(
                t.parse::<jiff::Timestamp>()
                    .map_err(|e| anyhow::anyhow!("--before must be an RFC 3339 time: {e}"))?
                    .as_millisecond(),
            ),
            (None, Some(age)) => {
                let age = parse_age(age)?;
                Some(now_ms - i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
            }
            (None, None) => None,
        };
        if self.ids.len() > MAX_PURGE_IDS {
            anyhow::bail!("at most {MAX_PURGE_IDS} ids at once");
        }
        let selection = PurgeSelection {
            inbox_ids: self.ids.clone(),
            endpoint_id: self.endpoint.clone(),
            received_before_ms,
        };
        if selection.validate().is_err() {
            anyhow::bail!(
                "name what to purge: event ids, --endpoint, --before or --older-than \
                 (refusing to purge every payload)"
            );
        }
        Ok(selection)
    }

    pub fn actor(&self) -> String {
        self.actor.clone().unwrap_or_else(os_user)
    }
}

/// Purges batch after batch until a batch finds fewer than its limit; prints one JSON line
/// with what was done. Exit code 0, also when nothing matched.
pub async fn run(store: &SharedStore, args: &PurgeArgs, clock: &dyn Clock) -> anyhow::Result<i32> {
    let selection = args.selection(clock.now_ms())?;
    let actor = args.actor();
    let mut purged: Vec<String> = Vec::new();
    let mut audit_ids = Vec::new();
    let still_received = loop {
        let audit_id = uuid::Uuid::now_v7().to_string();
        let batch = store
            .purge_payloads(PurgeRequest {
                selection: &selection,
                limit: PURGE_BATCH,
                now_ms: clock.now_ms(),
                actor: &actor,
                audit_id: &audit_id,
            })
            .await?;
        telemetry::payloads_purged_by_operator(&actor, batch.purged.len() as u64, &audit_id);
        let last = batch.purged.len() < PURGE_BATCH as usize;
        purged.extend(batch.purged);
        audit_ids.push(audit_id);
        if last {
            break batch.still_received;
        }
    };
    println!(
        "{}",
        json!({
            "purged": purged.len(),
            "ids": purged,
            "still_received": still_received,
            "actor": actor,
            "audit_ids": audit_ids,
        })
    );
    if still_received > 0 {
        eprintln!(
            "note: {still_received} matching events are still RECEIVED and kept their payload; \
             purge them again once processed"
        );
    }
    Ok(0)
}

/// `90d`, `12h`, `30m`, `45s`.
fn parse_age(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("--older-than must look like 90d, 12h, 30m or 45s"))?;
    let unit_secs = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => anyhow::bail!("--older-than must look like 90d, 12h, 30m or 45s"),
    };
    Ok(Duration::from_secs(n.saturating_mul(unit_secs)))
}

/// The OS user running the command (looked up by uid, not `$USER`).
pub(crate) fn os_user() -> String {
    whoami::username().unwrap_or_else(|_| "unknown-os-user".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_in_their_units() {
        assert_eq!(parse_age("90d").unwrap(), Duration::from_secs(90 * 86_400));
        assert_eq!(parse_age("12h").unwrap(), Duration::from_secs(12 * 3_600));
        assert_eq!(parse_age("45s").unwrap(), Duration::from_secs(45));
        assert!(parse_age("3 weeks").is_err());
        assert!(parse_age("d").is_err());
    }
}
