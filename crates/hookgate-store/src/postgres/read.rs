//! Reads: rows back into [`InboxRecord`]s, listing, counts.

use hookgate_core::{InboxStatus, Outcome};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::{EventFilter, InboxRecord, StoreError};

/// Columns in the order [`record`] reads them.
pub(super) const COLUMNS: &str = "inbox_id, provider, endpoint_id, provider_event_id, \
    event_type, object_id, object_version, provider_created_at, received_at, payload, \
    payload_key_version, payload_digest, matched_secret_version, status, outcome, \
    attempt_count, next_attempt_at, last_error, processed_at";

fn corrupt(msg: &str) -> StoreError {
    StoreError::Corrupt(msg.to_owned())
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("inbox column {i}: {e}")))
}

pub(super) fn record(r: &Row) -> Result<InboxRecord, StoreError> {
    let status = get::<String>(r, 13)?
        .parse::<InboxStatus>()
        .map_err(|_| corrupt("inbox row has an unknown status"))?;
    let outcome = get::<Option<String>>(r, 14)?
        .map(|s| s.parse::<Outcome>())
        .transpose()
        .map_err(|_| corrupt("inbox row has an unknown outcome"))?;
    let payload_key_version = u32::try_from(get::<i64>(r, 10)?)
        .map_err(|_| corrupt("inbox row has an out-of-range payload_key_version"))?;
    Ok(InboxRecord {
        inbox_id: get(r, 0)?,
        provider: get(r, 1)?,
        endpoint_id: get(r, 2)?,
        provider_event_id: get(r, 3)?,
        event_type: get(r, 4)?,
        object_id: get(r, 5)?,
        object_version: get(r, 6)?,
        provider_created_at: get(r, 7)?,
        received_at_ms: get(r, 8)?,
        payload: get(r, 9)?,
        payload_key_version,
        payload_digest: get(r, 11)?,
        matched_secret_version: get(r, 12)?,
        status,
        outcome,
        attempt_count: get(r, 15)?,
        next_attempt_at_ms: get(r, 16)?,
        last_error: get(r, 17)?,
        processed_at_ms: get(r, 18)?,
    })
}

pub(super) fn get_event_sql() -> String {
    format!("SELECT {COLUMNS} FROM inbox WHERE inbox_id = $1")
}

/// One statement text per filter shape (four at most, each cached per connection), so the
/// planner can use the indexes instead of `$n IS NULL OR …` scans. Newest first.
pub(super) struct ListQuery<'a> {
    pub(super) sql: String,
    status: Option<&'static str>,
    endpoint_id: Option<&'a str>,
    limit: Option<i64>,
}

impl<'a> ListQuery<'a> {
    pub(super) fn new(filter: &'a EventFilter) -> Self {
        let status = filter.status.map(InboxStatus::as_str);
        let endpoint_id = filter.endpoint_id.as_deref();
        let mut clauses = Vec::new();
        let mut n = 0;
        if status.is_some() {
            n += 1;
            clauses.push(format!("status = ${n}"));
        }
        if endpoint_id.is_some() {
            n += 1;
            clauses.push(format!("endpoint_id = ${n}"));
        }
        let where_clause = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        // `LIMIT NULL` is no limit.
        let sql = format!(
            "SELECT {COLUMNS} FROM inbox {where_clause} \
             ORDER BY received_at DESC, inbox_id DESC LIMIT ${}",
            n + 1
        );
        ListQuery {
            sql,
            status,
            endpoint_id,
            limit: filter.limit.map(i64::from),
        }
    }

    pub(super) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut p: Vec<&(dyn ToSql + Sync)> = Vec::new();
        if let Some(s) = &self.status {
            p.push(s);
        }
        if let Some(e) = &self.endpoint_id {
            p.push(e);
        }
        p.push(&self.limit);
        p
    }
}

pub(super) const COUNT_SQL: &str = "SELECT count(*) FROM inbox";

/// Byte order (`COLLATE "C"`), as SQLite sorts, whatever the database's collation.
pub(super) const DISTINCT_IDS_SQL: &str = "SELECT DISTINCT provider_event_id COLLATE \"C\" AS id \
     FROM inbox WHERE endpoint_id = $1 ORDER BY id";

/// Touches a table of ours (not just the server), cheaply.
pub(super) const PING_SQL: &str = "SELECT 1 FROM schema_migrations LIMIT 1";
