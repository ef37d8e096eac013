//! Reads on their own connections, so they never wait behind the writer (WAL readers see the
//! last committed snapshot), run inside `spawn_blocking`; the [`InspectStore`] impl.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use hookgate_core::{InboxStatus, OutboxStatus};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

use super::error::{from_sqlite, is_environmental};
use super::{SqliteStore, open_read_connection, payments};
use crate::rows::{Columns, OUTBOX_COLUMNS, Value, inbox_record, outbox_record};
use crate::{
    Backlog, EventFilter, InboxRecord, InspectStore, OutboxRecord, PaymentState, StoreError, rows,
    statements,
};

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

/// Carries a [`StoreError`] out of a rusqlite row callback.
#[derive(Debug)]
struct Carried(StoreError);

impl std::fmt::Display for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Carried {}

/// `err` as a rusqlite error, for returning from row callbacks; [`from_row_error`] gets it
/// back unchanged.
pub(super) fn carry(err: StoreError) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(Carried(err)))
}

pub(super) fn from_row_error(err: rusqlite::Error) -> StoreError {
    match &err {
        rusqlite::Error::ToSqlConversionFailure(inner) => match inner.downcast_ref::<Carried>() {
            Some(Carried(e)) => e.clone(),
            None => from_sqlite(err),
        },
        _ => from_sqlite(err),
    }
}

impl Columns for Row<'_> {
    fn value(&self, i: usize) -> Result<Value, StoreError> {
        Ok(match self.get_ref(i).map_err(from_sqlite)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Text(t) => Value::Text(
                String::from_utf8(t.to_vec())
                    .map_err(|_| StoreError::Corrupt(format!("column {i} is not UTF-8")))?,
            ),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            ValueRef::Real(_) => {
                return Err(StoreError::Corrupt(format!("column {i} is a real number")));
            }
        })
    }
}

/// Maps a row with `f` inside a rusqlite callback.
pub(super) fn mapped<T>(
    f: impl Fn(&Row<'_>) -> Result<T, StoreError>,
) -> impl Fn(&Row<'_>) -> rusqlite::Result<T> {
    move |r| f(r).map_err(carry)
}

/// The inbox columns with the payload as `payload` (an expression for it).
fn inbox_columns(payload: &str) -> String {
    rows::inbox_select_list(|c| match c {
        "payload" => payload.to_owned(),
        c => c.to_owned(),
    })
}

/// An inbox row with its payload: `SELECT {COLUMNS} FROM {INBOX_WITH_PAYLOAD} WHERE ...`.
/// A purged payload has no `inbox_payload` row, hence the LEFT JOIN (`payload` is NULL).
pub(super) static COLUMNS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| inbox_columns("inbox_payload.payload"));
pub(super) const INBOX_WITH_PAYLOAD: &str = "inbox LEFT JOIN inbox_payload USING (inbox_id)";

/// The same columns for `UPDATE inbox ... RETURNING`, which cannot join: the payload is
/// looked up by primary key per returned row, so the UPDATE's own search stays on `inbox`.
pub(super) static RETURNING_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    inbox_columns(
        "(SELECT payload FROM inbox_payload WHERE inbox_payload.inbox_id = inbox.inbox_id)",
    )
});

/// [`RETURNING_COLUMNS`] with a NULL payload, for leases that do not need it.
pub(super) static RETURNING_COLUMNS_WITHOUT_PAYLOAD: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| inbox_columns("NULL"));

pub(super) fn record(r: &Row<'_>) -> rusqlite::Result<InboxRecord> {
    inbox_record(r).map_err(carry)
}

fn list_events(conn: &Connection, filter: &EventFilter) -> rusqlite::Result<Vec<InboxRecord>> {
    // One statement text per filter shape (eight at most, each cached), so the planner can
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
    if let Some(version) = &filter.matched_secret_version {
        params.push(version);
        clauses.push(format!("matched_secret_version = ?{}", params.len()));
    }
    let limit = filter.limit.map_or(-1, i64::from);
    params.push(&limit);
    let where_clause = if clauses.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", clauses.join(" AND "))
    };
    let sql = format!(
        "SELECT {} FROM {INBOX_WITH_PAYLOAD} {where_clause} \
         ORDER BY received_at DESC, inbox_id DESC LIMIT ?{}",
        *COLUMNS,
        params.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params.as_slice(), record)?;
    rows.collect()
}

/// Touches the database file (not just the library), cheaply.
pub(super) fn ping(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("SELECT count(*) FROM schema_migrations")?
        .query_row([], |_| Ok(()))
}

/// The values of a one-column text query, in order.
fn strings(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<String>> {
    conn.prepare_cached(sql)?
        .query_map(params, |r| r.get(0))?
        .collect()
}

#[async_trait::async_trait]
impl InspectStore for SqliteStore {
    async fn get_event(&self, inbox_id: &str) -> Result<Option<InboxRecord>, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id = ?1",
                *COLUMNS
            ))?
            .query_row([inbox_id], record)
            .optional()
        })
        .await
    }

    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<InboxRecord>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn| list_events(conn, &filter)).await
    }

    async fn page_events(&self, query: &crate::EventQuery) -> Result<Vec<InboxRecord>, StoreError> {
        let query = query.clone();
        self.read(move |conn| super::operator::page_events(conn, &query))
            .await
    }

    async fn count_inbox(&self) -> Result<u64, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(statements::COUNT_INBOX.sqlite())?
                .query_row([], mapped(|r| r.count(0)))
        })
        .await
    }

    async fn backlog(&self) -> Result<Backlog, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(statements::BACKLOG.sqlite())?
                .query_row([], mapped(|r| rows::backlog(r)))
        })
        .await
    }

    async fn received_per_endpoint(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT endpoint_id, count(*) FROM inbox INDEXED BY inbox_due \
                 WHERE status = 'RECEIVED' GROUP BY endpoint_id",
            )?
            .query_map([], mapped(|r| Ok((r.text(0)?, r.count(1)?))))?
            .collect()
        })
        .await
    }

    async fn distinct_event_ids(&self, endpoint_id: &str) -> Result<Vec<String>, StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.read(move |conn| {
            strings(
                conn,
                "SELECT DISTINCT provider_event_id FROM inbox WHERE endpoint_id = ?1 \
                 ORDER BY provider_event_id",
                [endpoint_id],
            )
        })
        .await
    }

    async fn list_deliveries(&self, inbox_id: &str) -> Result<Vec<OutboxRecord>, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE inbox_id = ?1 ORDER BY destination"
            ))?
            .query_map([inbox_id], mapped(|r| outbox_record(r)))?
            .collect()
        })
        .await
    }

    async fn events_with_failed_deliveries(
        &self,
        filter: &EventFilter,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let endpoint_id = filter.endpoint_id.clone();
        let limit = filter.limit.map_or(-1, i64::from);
        self.read(move |conn| {
            let sql = format!(
                "SELECT {} FROM {INBOX_WITH_PAYLOAD} WHERE inbox_id IN \
                     (SELECT inbox_id FROM outbox WHERE status = 'FAILED') \
                   AND (?1 IS NULL OR endpoint_id = ?1) \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT ?2",
                *COLUMNS
            );
            conn.prepare_cached(&sql)?
                .query_map(rusqlite::params![endpoint_id, limit], record)?
                .collect()
        })
        .await
    }

    async fn count_deliveries(&self, status: OutboxStatus) -> Result<u64, StoreError> {
        self.read(move |conn| {
            conn.prepare_cached(statements::COUNT_DELIVERIES.sqlite())?
                .query_row([status.as_str()], mapped(|r| r.count(0)))
        })
        .await
    }

    async fn object_version(
        &self,
        provider: &str,
        endpoint_id: &str,
        object_id: &str,
    ) -> Result<Option<i64>, StoreError> {
        let key = [provider, endpoint_id, object_id].map(str::to_owned);
        self.read(move |conn| {
            conn.prepare_cached(statements::OBJECT_VERSION.sqlite())?
                .query_row(key, |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn processed_markers(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        let key = [provider, endpoint_id, provider_event_id].map(str::to_owned);
        self.read(move |conn| {
            strings(
                conn,
                "SELECT consumer FROM processed_events \
                 WHERE provider = ?1 AND endpoint_id = ?2 AND provider_event_id = ?3 \
                 ORDER BY consumer",
                key,
            )
        })
        .await
    }

    async fn payment_state(&self, object_id: &str) -> Result<Option<PaymentState>, StoreError> {
        let object_id = object_id.to_owned();
        self.read(move |conn| payments::read(conn, &object_id))
            .await
    }

    async fn audit_log(&self, limit: u32) -> Result<Vec<crate::AuditRecord>, StoreError> {
        self.read(move |conn| super::retention::audit_log(conn, limit))
            .await
    }
}
