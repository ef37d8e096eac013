//! What the operator API asks of the store, for both backends: a page of events by filter
//! (keyset paging, never the payloads), the audit trail of operators' requests, and the
//! operations that put stored events back to work (replay through processing, re-delivery
//! to one destination).
//!
//! Every operation is one conditional statement, so it is atomic against the stages: a
//! replay only touches rows no worker may hold (`PROCESSED`, `IGNORED`, `FAILED` are never
//! leased; a live lease is on a `RECEIVED` row), and a re-delivery refuses a delivery a relay
//! holds a live lease on. What the lease holder writes next is fenced on its lease, which the
//! operation cleared: never two workers on one row.

use hookgate_core::{InboxStatus, OutboxStatus};

/// Most events one page may hold.
pub const MAX_PAGE: u32 = 500;

/// Where a page starts: after this event in the list's order (newest first by
/// `received_at`, ties by `inbox_id`, both descending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageKey {
    pub received_at_ms: i64,
    pub inbox_id: String,
}

/// Which events a page lists; every given part must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    pub status: Option<InboxStatus>,
    pub provider: Option<String>,
    pub endpoint_id: Option<String>,
    /// A glob over `event_type`: `*` any run of characters, `?` one; case-sensitive. An
    /// event without a type never matches.
    pub event_type: Option<String>,
    /// Received at or after this time (unix ms).
    pub received_after_ms: Option<i64>,
    /// Received before this time (unix ms).
    pub received_before_ms: Option<i64>,
    pub provider_event_id: Option<String>,
    pub object_id: Option<String>,
    pub matched_secret_version: Option<String>,
    /// With `delivery_status`: a delivery to this destination in that status; alone: any
    /// delivery to this destination.
    pub destination: Option<String>,
    /// With `destination`: see there; alone: a delivery in this status to any destination.
    pub delivery_status: Option<OutboxStatus>,
    /// Start after this event (the previous page's last one).
    pub after: Option<PageKey>,
    /// Most events returned (at most [`MAX_PAGE`] + 1: callers ask one more to learn whether
    /// a next page exists).
    pub limit: u32,
}

/// A bound parameter of a built statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// How a backend matches a glob over text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GlobDialect {
    /// SQLite's `GLOB` (case-sensitive; `[` starts a class, so it is escaped as `[[]`).
    Glob,
    /// PostgreSQL's `LIKE … ESCAPE '\'` (`%`, `_` and `\` escaped).
    Like,
}

/// `pattern` (only `*` and `?` are special) as the backend's pattern.
pub(crate) fn glob_pattern(pattern: &str, dialect: GlobDialect) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    for c in pattern.chars() {
        match (dialect, c) {
            (GlobDialect::Glob, '[') => out.push_str("[[]"),
            (GlobDialect::Glob, c) => out.push(c),
            (GlobDialect::Like, '*') => out.push('%'),
            (GlobDialect::Like, '?') => out.push('_'),
            (GlobDialect::Like, '%' | '_' | '\\') => {
                out.push('\\');
                out.push(c);
            }
            (GlobDialect::Like, c) => out.push(c),
        }
    }
    out
}

/// The `WHERE` conditions and `LIMIT` of a page (after `SELECT … FROM inbox`), with
/// placeholders from `placeholder(n)` numbered from 1, and the parameters in that order.
pub(crate) fn page_conditions(
    q: &EventQuery,
    dialect: GlobDialect,
    placeholder: impl Fn(usize) -> String,
) -> (String, Vec<Param>) {
    let mut params = Vec::new();
    let mut clauses = Vec::new();
    let bind = |p: Param, params: &mut Vec<Param>| {
        params.push(p);
        placeholder(params.len())
    };
    if let Some(s) = q.status {
        let p = bind(Param::Text(s.as_str().into()), &mut params);
        clauses.push(format!("status = {p}"));
    }
    for (column, value) in [
        ("provider", &q.provider),
        ("endpoint_id", &q.endpoint_id),
        ("provider_event_id", &q.provider_event_id),
        ("object_id", &q.object_id),
        ("matched_secret_version", &q.matched_secret_version),
    ] {
        if let Some(v) = value {
            let p = bind(Param::Text(v.clone()), &mut params);
            clauses.push(format!("{column} = {p}"));
        }
    }
    if let Some(glob) = &q.event_type {
        let p = bind(Param::Text(glob_pattern(glob, dialect)), &mut params);
        clauses.push(match dialect {
            GlobDialect::Glob => format!("event_type GLOB {p}"),
            GlobDialect::Like => format!("event_type LIKE {p} ESCAPE '\\'"),
        });
    }
    if let Some(t) = q.received_after_ms {
        let p = bind(Param::Int(t), &mut params);
        clauses.push(format!("received_at >= {p}"));
    }
    if let Some(t) = q.received_before_ms {
        let p = bind(Param::Int(t), &mut params);
        clauses.push(format!("received_at < {p}"));
    }
    if q.destination.is_some() || q.delivery_status.is_some() {
        let mut inner = vec!["o.inbox_id = inbox.inbox_id".to_owned()];
        if let Some(d) = &q.destination {
            let p = bind(Param::Text(d.clone()), &mut params);
            inner.push(format!("o.destination = {p}"));
        }
        if let Some(s) = q.delivery_status {
            let p = bind(Param::Text(s.as_str().into()), &mut params);
            inner.push(format!("o.status = {p}"));
        }
        clauses.push(format!(
            "EXISTS (SELECT 1 FROM outbox o WHERE {})",
            inner.join(" AND ")
        ));
    }
    if let Some(after) = &q.after {
        let at = bind(Param::Int(after.received_at_ms), &mut params);
        let id = bind(Param::Text(after.inbox_id.clone()), &mut params);
        clauses.push(format!(
            "(received_at < {at} OR (received_at = {at} AND inbox_id < {id}))"
        ));
    }
    let where_clause = if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    };
    let limit = bind(Param::Int(i64::from(q.limit)), &mut params);
    (
        format!("{where_clause} ORDER BY received_at DESC, inbox_id DESC LIMIT {limit}"),
        params,
    )
}

/// One entry of `audit_log` to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAudit {
    /// UUIDv7 text from the caller.
    pub audit_id: String,
    pub at_ms: i64,
    /// Who: the token's name (or the OS user for the CLI on the store directly).
    pub actor: String,
    /// `decrypt`, `retry`, `replay`, `redeliver`, … (see the API docs).
    pub action: String,
    /// The inbox id acted on (or what else the action names).
    pub target: String,
    /// The filter of an action over many events (JSON), `None` for one event.
    pub filter: Option<String>,
    /// `ok` or `denied` (or another refusal the API names).
    pub result: String,
    /// JSON with more about it (e.g. a fresh idempotency key).
    pub detail: Option<String>,
}

/// What an operation on one stored event found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationResult {
    /// Done, committed.
    Done,
    /// No such event.
    NotFound,
    /// Its payload was purged: nothing is left to process or send.
    PayloadPurged,
    /// A replay of an event still `RECEIVED` (waiting or being processed), or a re-delivery
    /// a relay holds a live lease on: nothing changed.
    InProgress,
    /// A re-delivery of an event not `PROCESSED` (processing has not written its deliveries).
    NotProcessed,
}

/// A re-delivery of one event to one destination.
#[derive(Debug, Clone)]
pub struct Redelivery<'a> {
    pub inbox_id: &'a str,
    pub destination: &'a str,
    /// A new idempotency key, recorded on the delivery; `None` keeps the one it has (the
    /// inbox id unless an earlier re-delivery gave it a fresh one).
    pub fresh_key: Option<&'a str>,
    /// Id of the outbox row if the event has no delivery to that destination yet.
    pub outbox_id: &'a str,
    pub now_ms: i64,
}

/// Operator replay: a `PROCESSED`, `IGNORED` or `FAILED` event with its payload goes back to
/// `RECEIVED`, due now, attempts reset. Parameters: inbox id, now (ms).
pub(crate) const REPLAY_EVENT: &str = "UPDATE inbox SET status = 'RECEIVED', outcome = NULL, attempt_count = 0, \
         next_attempt_at = $2, lease_owner = NULL, lease_until = NULL, last_error = NULL, \
         processed_at = NULL \
     WHERE inbox_id = $1 AND status IN ('PROCESSED', 'IGNORED', 'FAILED') \
       AND payload_purged_at IS NULL";

/// Operator re-delivery: the event's delivery to one destination becomes `PENDING`, due now,
/// attempts reset (inserted when it has none), unless a relay holds a live lease on it; only
/// for a `PROCESSED` event whose payload is stored. Parameters: outbox id, destination, now
/// (ms), fresh key (or NULL), inbox id.
pub(crate) const REDELIVER: &str = "INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
         next_attempt_at, created_at, idempotency_key) \
     SELECT $1, i.inbox_id, $2, 'PENDING', 0, $3, $3, $4 FROM inbox i \
     WHERE i.inbox_id = $5 AND i.status = 'PROCESSED' AND i.payload_purged_at IS NULL \
     ON CONFLICT (inbox_id, destination) DO UPDATE SET status = 'PENDING', attempt_count = 0, \
         next_attempt_at = excluded.next_attempt_at, lease_owner = NULL, lease_until = NULL, \
         last_error = NULL, delivered_at = NULL, \
         idempotency_key = coalesce(excluded.idempotency_key, outbox.idempotency_key) \
     WHERE outbox.status <> 'PENDING' OR outbox.lease_until IS NULL \
        OR outbox.lease_until <= excluded.next_attempt_at";

/// Why nothing changed: the event's status and whether its payload was purged. Parameter:
/// inbox id.
pub(crate) const EVENT_STATE: &str =
    "SELECT status, payload_purged_at IS NOT NULL FROM inbox WHERE inbox_id = $1";

/// Parameters: audit id, at, actor, action, target, detail, result, filter.
pub(crate) const INSERT_AUDIT: &str = "INSERT INTO audit_log (audit_id, at, actor, action, target, detail, result, filter) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Why an operation changed nothing, from [`EVENT_STATE`]'s row (`None`: no event).
pub(crate) fn classify(state: Option<(String, bool)>, redelivery: bool) -> OperationResult {
    match state {
        None => OperationResult::NotFound,
        Some((_, true)) => OperationResult::PayloadPurged,
        Some((status, false)) if redelivery && status != InboxStatus::Processed.as_str() => {
            OperationResult::NotProcessed
        }
        Some(_) => OperationResult::InProgress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_become_each_backends_pattern() {
        assert_eq!(
            glob_pattern("invoice.*_a%[x]?", GlobDialect::Like),
            "invoice.%\\_a\\%[x]_"
        );
        assert_eq!(
            glob_pattern("invoice.*[x]?", GlobDialect::Glob),
            "invoice.*[[]x]?"
        );
    }

    #[test]
    fn page_conditions_bind_in_placeholder_order() {
        let q = EventQuery {
            status: Some(InboxStatus::Failed),
            endpoint_id: Some("ep".into()),
            destination: Some("d".into()),
            after: Some(PageKey {
                received_at_ms: 5,
                inbox_id: "x".into(),
            }),
            limit: 3,
            ..EventQuery::default()
        };
        let (sql, params) = page_conditions(&q, GlobDialect::Like, |n| format!("${n}"));
        assert_eq!(
            sql,
            " WHERE status = $1 AND endpoint_id = $2 AND EXISTS (SELECT 1 FROM outbox o \
             WHERE o.inbox_id = inbox.inbox_id AND o.destination = $3) AND (received_at < $4 \
             OR (received_at = $4 AND inbox_id < $5)) ORDER BY received_at DESC, inbox_id DESC \
             LIMIT $6"
        );
        assert_eq!(params.len(), 6);
        assert_eq!(params[5], Param::Int(3));
    }
}
