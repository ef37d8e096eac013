//! After the run: the store holds exactly one inbox row per logical event of this run that got
//! a 2xx — none missing, none twice — and every answer for one event named the same row.
//!
//! Only ids with this run's prefix are compared, so rows from earlier runs do not matter. "None
//! twice" is checked three ways: the unique key (ids are distinct by construction of the
//! query), at most one `accepted` answer per event with every 2xx answer naming the same inbox
//! id, and the endpoint's rows growing by exactly as many as this run's ids stored (which
//! assumes no other traffic to the endpoint during the run; other endpoints' rows are not
//! counted, since the retention stage may delete them meanwhile).

use std::collections::HashMap;

use hookgate_store::SharedStore;

use crate::load::{Outcome, Record};
use crate::plan::SEQ_DIGITS;

#[derive(Debug, Default, serde::Serialize)]
pub struct Verification {
    pub store_verified: bool,
    /// Distinct events of this run that got at least one 2xx.
    pub acknowledged_events: u64,
    /// Distinct ids of this run in the store.
    pub stored_events: u64,
    /// Acknowledged but not in the store (lost: fails the run).
    pub missing: u64,
    /// Events answered `accepted` more than once (fails the run).
    pub accepted_twice: u64,
    /// Events whose 2xx answers named different inbox ids (fails the run).
    pub inconsistent_ids: u64,
    /// Stored ids of this run that were never sent (fails the run).
    pub unknown_stored: u64,
    /// Stored but never acknowledged (allowed: a 503 or a timeout whose commit landed).
    pub stored_unacknowledged: u64,
    /// The endpoint's inbox rows added during the run (count after − count before; other
    /// endpoints' rows are left out, since retention may delete them meanwhile).
    pub inbox_rows_added: u64,
    /// Inbox rows still waiting for processing (`RECEIVED`, all endpoints) when the load
    /// stopped: how far the workers were behind acceptance (0 when they kept up).
    pub waiting_for_processing: u64,
    pub problems: Vec<String>,
}

pub async fn verify(
    store: &SharedStore,
    endpoint: &str,
    prefix: &str,
    rows_before: u64,
    records: &[Record],
) -> anyhow::Result<Verification> {
    #[derive(Default)]
    struct Seen<'a> {
        sent: bool,
        acked: bool,
        accepted: u32,
        ids: Option<&'a str>,
        inconsistent: bool,
    }
    let mut events: HashMap<u32, Seen<'_>> = HashMap::new();
    for r in records {
        let e = events.entry(r.event).or_default();
        if r.outcome != Outcome::NotSent {
            e.sent = true;
        }
        if r.outcome.is_success() {
            e.acked = true;
            if r.outcome == Outcome::Accepted {
                e.accepted += 1;
            }
            match (e.ids, r.inbox_id.as_deref()) {
                (None, Some(id)) => e.ids = Some(id),
                (Some(a), Some(b)) if a != b => e.inconsistent = true,
                _ => {}
            }
        }
    }
    let stored_all = store.distinct_event_ids(endpoint).await?;
    let rows_after = stored_all.len() as u64;
    let mut v = Verification {
        inbox_rows_added: rows_after.saturating_sub(rows_before),
        waiting_for_processing: store.backlog().await?.received,
        ..Default::default()
    };
    let mut stored: HashMap<u32, ()> = HashMap::new();
    for id in stored_all.iter().filter(|id| id.starts_with(prefix)) {
        v.stored_events += 1;
        let seq = id[prefix.len()..]
            .parse::<u32>()
            .ok()
            .filter(|_| id.len() == prefix.len() + SEQ_DIGITS);
        match seq.and_then(|s| events.get(&s).filter(|e| e.sent).map(|_| s)) {
            Some(s) => {
                stored.insert(s, ());
            }
            None => {
                v.unknown_stored += 1;
                if v.unknown_stored <= 3 {
                    v.problems
                        .push(format!("stored id {id:?} was never sent by this run"));
                }
            }
        }
    }
    let mut sorted: Vec<(&u32, &Seen<'_>)> = events.iter().collect();
    sorted.sort_by_key(|(k, _)| **k);
    for (seq, e) in sorted {
        let is_stored = stored.contains_key(seq);
        if e.acked {
            v.acknowledged_events += 1;
            if !is_stored {
                v.missing += 1;
                if v.missing <= 3 {
                    v.problems.push(format!(
                        "event {prefix}{seq:0SEQ_DIGITS$} was acknowledged but is not in the store"
                    ));
                }
            }
        } else if is_stored {
            v.stored_unacknowledged += 1;
        }
        if e.accepted > 1 {
            v.accepted_twice += 1;
            if v.accepted_twice <= 3 {
                v.problems.push(format!(
                    "event {prefix}{seq:0SEQ_DIGITS$} was answered `accepted` {} times",
                    e.accepted
                ));
            }
        }
        if e.inconsistent {
            v.inconsistent_ids += 1;
            if v.inconsistent_ids <= 3 {
                v.problems.push(format!(
                    "event {prefix}{seq:0SEQ_DIGITS$} got 2xx answers naming different inbox ids"
                ));
            }
        }
    }
    // The prefix is fresh, so none of this run's rows predate it.
    if v.inbox_rows_added != v.stored_events {
        v.problems.push(format!(
            "the endpoint's rows grew by {} but this run stored {} events (rows twice, or \
             other traffic to the endpoint during the run)",
            v.inbox_rows_added, v.stored_events
        ));
    }
    v.store_verified = v.problems.is_empty();
    Ok(v)
}
