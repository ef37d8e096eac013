//! The end of one request (ARCHITECTURE.md, "One request", steps 9–11): the verified events
//! become inbox rows — each sealed under its own row identity — committed as ONE unit
//! (`InboxStore::accept_request`, all or nothing), and the answer is built from what the store
//! says: hookgate's own (`accepted` / `duplicate` / `ignored`, or the batch form), unless the
//! pack requires its own body.

use std::time::Instant;

use hookgate_core::{Envelope, InboxStatus, RowIdentity};
use hookgate_providers::pack::Answer as ProviderAnswer;
use hookgate_store::{Acceptance, NewInboxRow, ReplayDigest, StoreError};

use super::response::Answer;
use crate::config::EndpointConfig;
use crate::state::AppState;
use crate::telemetry::{self, CommitEnd};

const RETRY_AFTER_UNAVAILABLE: u64 = 2;

/// `Retry-After` when shed under overload: the queue drains within `max_queue_wait`.
pub(super) const RETRY_AFTER_OVERLOADED: u64 = 1;

/// What the verified request holds, ready to commit.
pub(super) struct Verified<'a> {
    pub body: &'a [u8],
    pub events: Vec<Envelope>,
    pub matched_version: &'a str,
    pub received_at_ms: i64,
    /// The keyed digest that recognises a replay under a fresh unsigned id (first row only:
    /// the digest is the request's, and a request is one unit).
    pub replay: Option<ReplayDigest>,
    /// The provider's required answer, when it has one.
    pub provider_answer: Option<ProviderAnswer>,
}

/// Seals and commits the request's rows, then answers.
pub(super) async fn commit(state: &AppState, cfg: &EndpointConfig, v: Verified<'_>) -> Answer {
    let runtime = state.runtime.load();
    let provider = cfg.provider_id();
    let digest = runtime.keyring.digest(v.body);
    let mut replay = v.replay;
    let mut statuses = Vec::with_capacity(v.events.len());
    let mut rows = Vec::with_capacity(v.events.len());
    for envelope in v.events {
        let status = if cfg.allows(envelope.event_type.as_deref()) {
            InboxStatus::Received
        } else {
            InboxStatus::Ignored
        };
        let identity = RowIdentity {
            provider,
            endpoint_id: &cfg.id,
            provider_event_id: &envelope.event_id,
        };
        let sealed = runtime
            .keyring
            .seal(&mut rand::thread_rng(), &identity, v.body);
        statuses.push(status);
        rows.push(NewInboxRow {
            inbox_id: uuid::Uuid::now_v7().to_string(),
            provider: provider.to_owned(),
            endpoint_id: cfg.id.clone(),
            provider_event_id: envelope.event_id,
            event_type: envelope.event_type,
            object_id: envelope.object_id,
            object_version: envelope.object_version,
            provider_created_at: envelope.created_at,
            received_at_ms: v.received_at_ms,
            payload: sealed.bytes,
            payload_key_version: sealed.key_version,
            payload_digest: digest.to_vec(),
            matched_secret_version: v.matched_version.to_owned(),
            status,
            source: hookgate_core::EventSource::Webhook,
            api_version: envelope.api_version,
            replay_digest: replay.take(),
        });
    }
    if rows.is_empty() {
        // A verified batch of no events (LINE's verify request): nothing to store.
        let own = Answer::Batch { events: Vec::new() };
        return match v.provider_answer {
            Some(answer) => Answer::Provider {
                answer,
                of: Box::new(own),
            },
            None => own,
        };
    }
    let single = rows.len() == 1;
    let commit_started = Instant::now();
    let result = if single {
        let row = rows.pop().expect("one row");
        state.store.accept(row).await.map(|a| vec![a])
    } else {
        state.store.accept_request(rows).await
    };
    telemetry::commit_finished(commit_started.elapsed(), CommitEnd::of(&result));
    let acceptances = match result {
        Ok(acceptances) if acceptances.len() == statuses.len() => acceptances,
        Ok(_) => {
            tracing::error!(endpoint = %cfg.id, "store answered a different number of rows");
            return Answer::Internal;
        }
        Err(StoreError::Corrupt(reason)) => {
            tracing::error!(endpoint = %cfg.id, %reason, "store reports corrupt data");
            return Answer::Internal;
        }
        Err(StoreError::Overloaded) => {
            return Answer::Overloaded {
                retry_after_secs: RETRY_AFTER_OVERLOADED,
            };
        }
        Err(e) => {
            tracing::warn!(endpoint = %cfg.id, error = %e, "commit failed; answering 503");
            return Answer::Unavailable {
                retry_after_secs: RETRY_AFTER_UNAVAILABLE,
            };
        }
    };
    hookgate_core::fail_point!("ingress.after_commit_before_response");
    let own = own_answer(acceptances, &statuses, single);
    match v.provider_answer {
        Some(answer) => Answer::Provider {
            answer,
            of: Box::new(own),
        },
        None => own,
    }
}

/// hookgate's own answer: one event as before; a batch with each event's row and status. A
/// replay of the request's body (its first row) makes the whole request a duplicate.
fn own_answer(mut acceptances: Vec<Acceptance>, statuses: &[InboxStatus], single: bool) -> Answer {
    if let Some(Acceptance::ReplaySuspected { inbox_id }) = acceptances.first() {
        return Answer::ReplaySuspected {
            id: inbox_id.clone(),
        };
    }
    let word = |acceptance: &Acceptance, status: InboxStatus| match acceptance {
        Acceptance::Duplicate { .. } | Acceptance::ReplaySuspected { .. } => "duplicate",
        Acceptance::Accepted { .. } if status == InboxStatus::Ignored => "ignored",
        Acceptance::Accepted { .. } => "accepted",
    };
    if single && let Some(acceptance) = acceptances.pop() {
        let w = word(&acceptance, statuses[0]);
        let id = match acceptance {
            Acceptance::Accepted { inbox_id }
            | Acceptance::Duplicate { inbox_id }
            | Acceptance::ReplaySuspected { inbox_id } => inbox_id,
        };
        return match w {
            "duplicate" => Answer::Duplicate { id },
            "ignored" => Answer::Ignored { id },
            _ => Answer::Accepted { id },
        };
    }
    let events = acceptances
        .into_iter()
        .zip(statuses)
        .map(|(acceptance, status)| {
            let w = word(&acceptance, *status);
            (acceptance.inbox_id().to_owned(), w)
        })
        .collect();
    Answer::Batch { events }
}
