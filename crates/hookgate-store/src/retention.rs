//! What retention and deletion on request ask of the store, for both backends.
//!
//! Two clocks of a row's life: its sealed payload is kept `payload_days`, its id record (the
//! inbox row without the payload, with its processed markers and deliveries) its endpoint's
//! `idempotency_days`. Both are found by index range scans and removed in small batches,
//! each its own short transaction (SQLite: a command of the single writer, sharing the
//! group commit; PostgreSQL: `FOR UPDATE SKIP LOCKED`, so acceptance and processing never
//! wait on it). Only rows whose work is done are touched: `PROCESSED` and `IGNORED`. The
//! payload of a row with a delivery still `PENDING` is kept until it is delivered or fails.
//!
//! An operator's purge ([`PurgeRequest`]) removes payloads at once, whatever their age,
//! except of rows still `RECEIVED` (their processing needs it), and records each committed
//! batch in `audit_log` in the same transaction.

/// Most ids one [`PurgeSelection`] may name (one statement's parameters).
pub const MAX_PURGE_IDS: usize = 1000;

/// Statuses whose rows retention may purge or delete; `RECEIVED`, `FAILED` (and `HELD`)
/// rows still have work, or an operator's decision, ahead of them.
pub(crate) const DONE_STATUSES: &str = "'PROCESSED', 'IGNORED'";

/// Expired id records of one endpoint (or of all, for endpoints no longer configured).
#[derive(Debug, Clone, Copy)]
pub struct ExpiredRows<'a> {
    /// `None`: any endpoint (the caller passes a cutoff no configured endpoint keeps longer).
    pub endpoint_id: Option<&'a str>,
    /// Rows received before this time (unix ms) are expired.
    pub received_before_ms: i64,
    /// Most inbox rows removed by this call.
    pub limit: u32,
}

/// What one call of [`crate::RetentionStore::delete_expired_rows`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeletedRows {
    pub inbox: u64,
    /// Payloads still stored with them (a row past its payload window normally has none).
    pub payloads: u64,
    pub outbox: u64,
    pub processed_markers: u64,
}

/// Which events an operator's purge is about; every given part must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeSelection {
    /// These events (at most [`MAX_PURGE_IDS`]); empty = no id condition.
    pub inbox_ids: Vec<String>,
    pub endpoint_id: Option<String>,
    /// Received before this time (unix ms).
    pub received_before_ms: Option<i64>,
}

impl PurgeSelection {
    /// Refuses a selection that names nothing (it would purge every payload).
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        if self.inbox_ids.is_empty()
            && self.endpoint_id.is_none()
            && self.received_before_ms.is_none()
        {
            return Err(crate::StoreError::Config(
                "a purge names event ids, an endpoint or a time".into(),
            ));
        }
        if self.inbox_ids.len() > MAX_PURGE_IDS {
            return Err(crate::StoreError::Config(format!(
                "a purge names at most {MAX_PURGE_IDS} ids at once"
            )));
        }
        Ok(())
    }

    /// The selection as the audit row's `target`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.inbox_ids.is_empty() {
            parts.push(format!("ids={}", self.inbox_ids.join(",")));
        }
        if let Some(e) = &self.endpoint_id {
            parts.push(format!("endpoint={e}"));
        }
        if let Some(t) = self.received_before_ms {
            parts.push(format!("received_before_ms={t}"));
        }
        parts.join(" ")
    }

    /// The values [`PurgeSelection::conditions`] binds, in its placeholder order, as the
    /// backend's parameter type (`text` and `int` turn a value into it).
    pub(crate) fn params<'a, P: ?Sized>(
        &'a self,
        text: impl Fn(&'a String) -> &'a P,
        int: impl Fn(&'a i64) -> &'a P,
    ) -> Vec<&'a P> {
        let mut out: Vec<&'a P> = self.inbox_ids.iter().map(&text).collect();
        out.extend(self.endpoint_id.as_ref().map(&text));
        out.extend(self.received_before_ms.as_ref().map(int));
        out
    }

    /// `WHERE` conditions after the fixed ones, with placeholders from `placeholder(n)`
    /// (numbered from `first`), in the order [`PurgeSelection::params`] binds them. The ids
    /// are bound one placeholder each (`IN (…)` reads the same on both backends).
    pub(crate) fn conditions(&self, first: usize, placeholder: impl Fn(usize) -> String) -> String {
        let mut n = first;
        let mut next = || {
            let p = placeholder(n);
            n += 1;
            p
        };
        let mut clauses = Vec::new();
        if !self.inbox_ids.is_empty() {
            let list: Vec<String> = self.inbox_ids.iter().map(|_| next()).collect();
            clauses.push(format!("inbox_id IN ({})", list.join(", ")));
        }
        if self.endpoint_id.is_some() {
            clauses.push(format!("endpoint_id = {}", next()));
        }
        if self.received_before_ms.is_some() {
            clauses.push(format!("received_at < {}", next()));
        }
        clauses
            .iter()
            .map(|c| format!(" AND {c}"))
            .collect::<String>()
    }
}

/// One batch of an operator's purge.
#[derive(Debug, Clone, Copy)]
pub struct PurgeRequest<'a> {
    pub selection: &'a PurgeSelection,
    /// Most payloads purged by this call; the caller calls again until fewer come back.
    pub limit: u32,
    pub now_ms: i64,
    /// Who asked (the OS user, or the operator API's caller later).
    pub actor: &'a str,
    /// Id of the audit row this batch writes (UUIDv7 text from the caller).
    pub audit_id: &'a str,
}

/// What one purge batch did, committed with its audit row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PurgeBatch {
    /// Events whose payload this batch removed, in the order found.
    pub purged: Vec<String>,
    /// Matching events left alone because they are still `RECEIVED` (counted only in a
    /// batch that found fewer than its limit: the last one).
    pub still_received: u64,
}

/// The audit action of an operator's purge.
pub const AUDIT_EVENTS_PURGE: &str = "events.purge";

/// A row of `audit_log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub audit_id: String,
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    /// JSON.
    pub detail: Option<String>,
    /// `ok`, or `denied` for a refused request (schema version 9 / 10; older rows: `ok`).
    pub result: String,
    /// The filter of an action over many events (JSON), `None` for one event.
    pub filter: Option<String>,
}

/// The detail of a purge batch's audit row: `{"purged":[ids],"still_received":n}`. Ids are
/// UUIDs the store allocated, so they need no escaping beyond what is done here.
pub(crate) fn purge_detail(batch: &PurgeBatch) -> String {
    let ids: Vec<String> = batch
        .purged
        .iter()
        .map(|id| format!("\"{}\"", id.replace(['"', '\\'], "")))
        .collect();
    format!(
        "{{\"purged\":[{}],\"still_received\":{}}}",
        ids.join(","),
        batch.still_received
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_conditions_number_their_placeholders_in_bind_order() {
        let s = PurgeSelection {
            inbox_ids: vec!["a".into(), "b".into()],
            endpoint_id: Some("ep".into()),
            received_before_ms: Some(5),
        };
        assert_eq!(
            s.conditions(3, |n| format!("${n}")),
            " AND inbox_id IN ($3, $4) AND endpoint_id = $5 AND received_at < $6"
        );
        assert!(PurgeSelection::default().validate().is_err());
        assert_eq!(s.describe(), "ids=a,b endpoint=ep received_before_ms=5");
    }

    #[test]
    fn purge_detail_is_json() {
        let d = purge_detail(&PurgeBatch {
            purged: vec!["x".into()],
            still_received: 2,
        });
        assert_eq!(d, r#"{"purged":["x"],"still_received":2}"#);
    }
}
