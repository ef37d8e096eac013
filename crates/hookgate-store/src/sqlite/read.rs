//! Reads on their own connections, so they never wait behind the writer (WAL readers see the
//! last committed snapshot). Callers run these inside `spawn_blocking`.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use hookgate_core::{InboxStatus, Outcome};
use rusqlite::{Connection, OptionalExtension, Row};

use super::error::{from_sqlite, is_environmental};
use super::open_read_connection;
use crate::{EventFilter, InboxRecord, StoreError};

/// Read connections checked out one per call: a call never waits for another reader, since
/// an empty pool opens a fresh connection; at most `max_idle` are kept for reuse.
pub(super) struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
}

impl ReadPool {
    pub(super) fn new(path: PathBuf, max_idle: usize) -> Self {
        Self {
            path,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// Runs `f` on a pooled connection (blocking; call from `spawn_blocking`).
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_read_connection(&self.path)?,
        };
        match f(&conn) {
            Ok(value) => {
                let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                if idle.len() < self.max_idle {
                    idle.push(conn);
                }
                Ok(value)
            }
            Err(err) => {
                // Keep a connection after an ordinary error, not after an I/O-class one.
                if !is_environmental(&err) {
                    let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                    if idle.len() < self.max_idle {
                        idle.push(conn);
                    }
                }
                Err(from_row_error(err))
            }
        }
    }

    /// Closes the idle connections (later reads open new ones).
    pub(super) fn clear(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Carries a [`StoreError::Corrupt`] out of a rusqlite row callback.
#[derive(Debug)]
struct CorruptValue(String);

impl std::fmt::Display for CorruptValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CorruptValue {}

pub(super) fn corrupt(msg: String) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(CorruptValue(msg)))
}

pub(super) fn from_row_error(err: rusqlite::Error) -> StoreError {
    match &err {
        rusqlite::Error::ToSqlConversionFailure(inner) => {
            match inner.downcast_ref::<CorruptValue>() {
                Some(CorruptValue(msg)) => StoreError::Corrupt(msg.clone()),
                None => from_sqlite(err),
            }
        }
        _ => from_sqlite(err),
    }
}

/// The columns [`record`] maps, in its order; `$payload` is the expression giving the sealed
/// payload, which lives in `inbox_payload` (schema version 4), NULL once purged.
macro_rules! inbox_columns {
    ($payload:literal) => {
        concat!(
            "inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id, \
             object_version, provider_created_at, received_at, ",
            $payload,
            ", payload_key_version, payload_digest, matched_secret_version, status, outcome, \
             attempt_count, next_attempt_at, last_error, processed_at"
        )
    };
}

/// An inbox row with its payload: `SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} WHERE ...`.
/// A purged payload has no `inbox_payload` row, hence the LEFT JOIN (`payload` is NULL).
pub(super) const COLUMNS: &str = inbox_columns!("inbox_payload.payload");
pub(super) const INBOX_WITH_PAYLOAD: &str = "inbox LEFT JOIN inbox_payload USING (inbox_id)";

/// The same columns for `UPDATE inbox ... RETURNING`, which cannot join: the payload is
/// looked up by primary key per returned row, so the UPDATE's own search stays on `inbox`.
pub(super) const RETURNING_COLUMNS: &str = inbox_columns!(
    "(SELECT payload FROM inbox_payload WHERE inbox_payload.inbox_id = inbox.inbox_id)"
);

/// [`RETURNING_COLUMNS`] with a NULL payload, for leases that do not need it.
pub(super) const RETURNING_COLUMNS_WITHOUT_PAYLOAD: &str = inbox_columns!("NULL");

pub(super) fn record(r: &Row<'_>) -> rusqlite::Result<InboxRecord> {
    let status: String = r.get(13)?;
    let status = status
        .parse::<InboxStatus>()
        .map_err(|_| corrupt("inbox row has an unknown status".into()))?;
    let outcome = r
        .get::<_, Option<String>>(14)?
        .map(|s| s.parse::<Outcome>())
        .transpose()
        .map_err(|_| corrupt("inbox row has an unknown outcome".into()))?;
    let key_version: i64 = r.get(10)?;
    let payload_key_version = u32::try_from(key_version)
        .map_err(|_| corrupt("inbox row has an out-of-range payload_key_version".into()))?;
    Ok(InboxRecord {
        inbox_id: r.get(0)?,
        provider: r.get(1)?,
        endpoint_id: r.get(2)?,
        provider_event_id: r.get(3)?,
        event_type: r.get(4)?,
        object_id: r.get(5)?,
        object_version: r.get(6)?,
        provider_created_at: r.get(7)?,
        received_at_ms: r.get(8)?,
        payload: r.get(9)?,
        payload_key_version,
        payload_digest: r.get(11)?,
        matched_secret_version: r.get(12)?,
        status,
        outcome,
        attempt_count: r.get(15)?,
        next_attempt_at_ms: r.get(16)?,
        last_error: r.get(17)?,
        processed_at_ms: r.get(18)?,
    })
}

pub(super) fn get_event(
    conn: &Connection,
    inbox_id: &str,
) -> rusqlite::Result<Option<InboxRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id = ?1"
    ))?
    .query_row([inbox_id], record)
    .optional()
}

pub(super) fn list_events(
    conn: &Connection,
    filter: &EventFilter,
) -> rusqlite::Result<Vec<InboxRecord>> {
    // One statement text per filter shape (four at most, each cached), so the planner can
    // use the indexes instead of `?n IS NULL OR ...` scans.
    let mut clauses = Vec::new();
    let mut params: Vec<&dyn rusqlite::ToSql> = Vec::new();
    let status = filter.status.map(InboxStatus::as_str);
    if let Some(status) = &status {
        params.push(status);
        clauses.push(format!("status = ?{}", params.len()));
    }
    if let Some(endpoint_id) = &filter.endpoint_id {
        params.push(endpoint_id);
        clauses.push(format!("endpoint_id = ?{}", params.len()));
    }
    let limit = filter.limit.map_or(-1, i64::from);
    params.push(&limit);
    let where_clause = if clauses.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", clauses.join(" AND "))
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} {where_clause} \
         ORDER BY received_at DESC, inbox_id DESC LIMIT ?{}",
        params.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params.as_slice(), record)?;
    rows.collect()
}

pub(super) fn count_inbox(conn: &Connection) -> rusqlite::Result<u64> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM inbox")?
        .query_row([], |r| r.get(0))?;
    u64::try_from(n).map_err(|_| corrupt("negative row count".into()))
}

pub(super) fn backlog(conn: &Connection) -> rusqlite::Result<crate::Backlog> {
    conn.prepare_cached(crate::BACKLOG_SQL)?.query_row([], |r| {
        let count = |i: usize| -> rusqlite::Result<u64> {
            u64::try_from(r.get::<_, i64>(i)?).map_err(|_| corrupt("negative row count".into()))
        };
        Ok(crate::Backlog {
            received: count(0)?,
            oldest_received_at_ms: r.get(1)?,
            failed: count(2)?,
            outbox_pending: count(3)?,
            oldest_pending_at_ms: r.get(4)?,
            outbox_failed: count(5)?,
        })
    })
}

pub(super) fn distinct_event_ids(
    conn: &Connection,
    endpoint_id: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT provider_event_id FROM inbox WHERE endpoint_id = ?1 ORDER BY provider_event_id",
    )?;
    let rows = stmt.query_map([endpoint_id], |r| r.get(0))?;
    rows.collect()
}

/// Touches the database file (not just the library), cheaply.
pub(super) fn ping(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("SELECT count(*) FROM schema_migrations")?
        .query_row([], |_| Ok(()))
}
