//! The `reseal` stage: after a payload key rotation (a new `active` version), re-seals the
//! stored payloads still under retired versions with the active key, in bounded batches, and
//! keeps `hookgate_payload_key_rows{version}` current. When it reports 0 rows for a version,
//! that version may be removed from the configuration ([`refuse_removed_versions`] refuses it
//! before).
//!
//! One loop walks the rows of one retired version in `inbox_id` order (a cursor, so a payload
//! that cannot be opened is counted and passed over, never retried in a tight loop), then the
//! next version; when none is left it waits `reseal_interval_seconds`. Each batch is read
//! outside any transaction, opened and sealed here (the associated data is the row identity,
//! unchanged), and written by one fenced store call: rows leased, purged or re-sealed by
//! another instance in between are left alone. Several instances may run it at once.

use std::sync::Arc;

use hookgate_core::RowIdentity;
use hookgate_store::{KeyVersionRows, ResealedPayload, SealedPayload, SharedStore, StoreError};
use tokio::sync::watch;

use super::{StageLoop, StagePool, Step};
use crate::config::PayloadKeys;
use crate::state::AppState;
use crate::telemetry;

/// Stage name of the loop that re-seals payloads under retired key versions.
pub const RESEAL: &str = "reseal";

/// Refuses a configuration that no longer has a key some stored payload is sealed under: it
/// would make those payloads unreadable. Names each missing version and its row count.
pub async fn refuse_removed_versions(
    store: &SharedStore,
    keys: &PayloadKeys,
) -> anyhow::Result<Vec<KeyVersionRows>> {
    let counts = store.payload_key_rows().await.map_err(|e| {
        anyhow::anyhow!(
            "payload_encryption.keys: cannot count stored payloads per key version: {e}"
        )
    })?;
    let configured = keys.versions();
    let missing: Vec<String> = counts
        .iter()
        .filter(|c| c.rows > 0 && !configured.contains(&c.version))
        .map(|c| format!("version {} seals {} stored payload(s)", c.version, c.rows))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "payload_encryption.keys: a key still in use was removed ({}); put it back until \
             `hookgate keys status` shows 0 rows for it (the reseal stage re-seals them with the \
             active key)",
            missing.join("; ")
        );
    }
    Ok(counts)
}

/// Starts the stage (one loop) when this process runs the background stages.
pub fn start(state: &Arc<AppState>) -> StagePool {
    let interval = state.runtime.load().config.payload_keys.reseal_interval;
    StagePool::start(
        Arc::new(ResealLoop {
            state: Arc::clone(state),
        }),
        1,
        interval,
        Arc::clone(&state.stages),
    )
}

/// How the loop is doing between steps.
#[derive(Debug, Default)]
pub struct Pass {
    /// The retired version being walked, the rows it had when the walk began, and the last
    /// `inbox_id` done.
    current: Option<(u32, u64, Option<String>)>,
}

pub struct ResealLoop {
    state: Arc<AppState>,
}

impl ResealLoop {
    /// The stage for `state` (tests drive [`ResealLoop::run_once`]).
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// One step: pick the next retired version if none is being walked (refreshing the
    /// gauge), then re-seal one batch of it. `Idle` when nothing is left to do.
    pub async fn run_once(&self, pass: &mut Pass) -> Result<Step, StoreError> {
        let runtime = self.state.runtime.load_full();
        let keys = &runtime.config.payload_keys;
        let active = runtime.keyring.active_version();
        if pass
            .current
            .as_ref()
            .is_some_and(|(version, _, _)| *version == active)
        {
            // A reload made the version being walked the active one: nothing to do for it.
            pass.current = None;
        }
        if pass.current.is_none() {
            let counts = self.state.store.payload_key_rows().await?;
            telemetry::payload_key_rows(&counts, &keys.versions());
            let next = counts.iter().find(|c| {
                c.version != active && c.rows > 0 && keys.versions().contains(&c.version)
            });
            match next {
                Some(c) => pass.current = Some((c.version, c.rows, None)),
                None => return Ok(Step::Idle),
            }
        }
        let Some((version, remaining, after)) = pass.current.as_mut() else {
            return Ok(Step::Idle);
        };
        let now_ms = self.state.clock.now_ms();
        let batch = self
            .state
            .store
            .sealed_under(*version, after.as_deref(), now_ms, keys.reseal_batch)
            .await?;
        let Some(last) = batch.last() else {
            // The walk is done. What is left (leased rows, payloads that do not open) waits
            // for the next walk, after the interval.
            pass.current = None;
            return Ok(Step::Idle);
        };
        *after = Some(last.inbox_id.clone());
        let full = batch.len() >= keys.reseal_batch as usize;
        let resealed: Vec<ResealedPayload> = batch
            .iter()
            .filter_map(|row| reseal_one(&runtime.keyring, row))
            .collect();
        let written = self.state.store.reseal(resealed, now_ms).await?;
        telemetry::payloads_resealed(*version, active, written, *remaining);
        *remaining = remaining.saturating_sub(written);
        if full {
            return Ok(Step::Busy);
        }
        // This version's walk is done; the next step counts again and picks the next.
        pass.current = None;
        Ok(Step::Idle)
    }
}

/// Opens `row` with its key and seals it with the active one; `None` (counted) when it does
/// not open — it stays as it is, and its version stays pinned.
fn reseal_one(
    keyring: &hookgate_core::seal::Keyring,
    row: &SealedPayload,
) -> Option<ResealedPayload> {
    let identity = RowIdentity {
        provider: &row.provider,
        endpoint_id: &row.endpoint_id,
        provider_event_id: &row.provider_event_id,
    };
    match keyring.open(&identity, row.key_version, &row.payload) {
        Ok(plaintext) => {
            let sealed = keyring.seal(&mut rand::thread_rng(), &identity, &plaintext);
            Some(ResealedPayload {
                inbox_id: row.inbox_id.clone(),
                from_version: row.key_version,
                key_version: sealed.key_version,
                payload: sealed.bytes,
                payload_digest: keyring.digest(&plaintext).to_vec(),
            })
        }
        Err(e) => {
            telemetry::reseal_failed(&row.inbox_id, row.key_version, &e.to_string());
            None
        }
    }
}

impl StageLoop for ResealLoop {
    type Local = Pass;

    fn name(&self) -> &'static str {
        RESEAL
    }

    fn start_loop(&self, _index: usize) -> Pass {
        Pass::default()
    }

    async fn step(&self, pass: &mut Pass, _stop: &mut watch::Receiver<bool>) -> Step {
        match self.run_once(pass).await {
            Ok(step) => step,
            Err(e) => {
                telemetry::reseal_store_failed(&e);
                // Start the walk again from a fresh count after the interval.
                pass.current = None;
                Step::Idle
            }
        }
    }
}
