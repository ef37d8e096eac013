//! Reads: one helper runs every read statement, rows map through `crate::rows`; the
//! [`InspectStore`] impl.

use std::sync::LazyLock;
use std::time::Duration;

use hookgate_core::{InboxStatus, OutboxStatus};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use super::{PostgresStore, finish_read, payments};
use crate::rows::{self, Columns, OUTBOX_COLUMNS, Value, inbox_record, outbox_record};
use crate::statements::{
    BACKLOG, COUNT_DELIVERIES, COUNT_INBOX, OBJECT_VERSION, RECEIVED_PER_ENDPOINT,
};
use crate::{
    Backlog, EventFilter, InboxRecord, InspectStore, OutboxRecord, PaymentState, StoreError,
};

/// The inbox columns in the order `crate::rows::inbox_record` reads them.
pub(super) static COLUMNS: LazyLock<String> =
    LazyLock::new(|| rows::inbox_select_list(str::to_owned));

impl Columns for Row {
    fn value(&self, i: usize) -> Result<Value, StoreError> {
        let bad = |e: tokio_postgres::Error| StoreError::Corrupt(format!("column {i}: {e}"));
        let ty = self
            .columns()
            .get(i)
            .ok_or_else(|| StoreError::Corrupt(format!("no column {i}")))?
            .type_();
        let value = if *ty == Type::INT8 {
            self.try_get::<_, Option<i64>>(i)
                .map_err(bad)?
                .map(Value::Int)
        } else if *ty == Type::INT4 {
            self.try_get::<_, Option<i32>>(i)
                .map_err(bad)?
                .map(|n| Value::Int(n.into()))
        } else if *ty == Type::TEXT || *ty == Type::VARCHAR {
            self.try_get::<_, Option<String>>(i)
                .map_err(bad)?
                .map(Value::Text)
        } else if *ty == Type::BYTEA {
            self.try_get::<_, Option<Vec<u8>>>(i)
                .map_err(bad)?
                .map(Value::Blob)
        } else {
            return Err(StoreError::Corrupt(format!("column {i} has type {ty}")));
        };
        Ok(value.unwrap_or(Value::Null))
    }
}

impl PostgresStore {
    /// Runs one read statement on a pooled connection within `timeout`; a connection that
    /// timed out is discarded, not pooled again.
    pub(super) async fn query_within(
        &self,
        timeout: Duration,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let res = tokio::time::timeout(timeout, async {
            let stmt = client.prepare_cached(sql).await?;
            client.query(&stmt, params).await
        })
        .await;
        finish_read(client, res)
    }

    /// [`PostgresStore::query_within`] the read timeout.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.query_within(self.read_timeout(), sql, params).await
    }

    /// The one row a query returns, mapped by `map`.
    async fn query_one<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        map: impl Fn(&Row) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let rows = self.query(sql, params).await?;
        map(rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("a query returned no row".into()))?)
    }

    /// The first column of every row, as text.
    async fn strings(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<String>, StoreError> {
        self.query(sql, params)
            .await?
            .iter()
            .map(|r| r.text(0))
            .collect()
    }
}

/// One statement text per filter shape (eight at most, each cached per connection), so the
/// planner can use the indexes instead of `$n IS NULL OR …` scans. Newest first.
pub(super) struct ListQuery<'a> {
    pub(super) sql: String,
    status: Option<&'static str>,
    endpoint_id: Option<&'a str>,
    matched_secret_version: Option<&'a str>,
    limit: Option<i64>,
}

impl<'a> ListQuery<'a> {
    pub(super) fn new(filter: &'a EventFilter) -> Self {
        let status = filter.status.map(InboxStatus::as_str);
        let endpoint_id = filter.endpoint_id.as_deref();
        let matched_secret_version = filter.matched_secret_version.as_deref();
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
        if matched_secret_version.is_some() {
            n += 1;
            clauses.push(format!("matched_secret_version = ${n}"));
        }
        let where_clause = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        // `LIMIT NULL` is no limit.
        let sql = format!(
            "SELECT {} FROM inbox {where_clause} \
             ORDER BY received_at DESC, inbox_id DESC LIMIT ${}",
            *COLUMNS,
            n + 1
        );
        ListQuery {
            sql,
            status,
            endpoint_id,
            matched_secret_version,
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
        if let Some(v) = &self.matched_secret_version {
            p.push(v);
        }
        p.push(&self.limit);
        p
    }
}

#[async_trait::async_trait]
impl InspectStore for PostgresStore {
    async fn get_event(&self, inbox_id: &str) -> Result<Option<InboxRecord>, StoreError> {
        let sql = format!("SELECT {} FROM inbox WHERE inbox_id = $1", *COLUMNS);
        self.query(&sql, &[&inbox_id])
            .await?
            .first()
            .map(inbox_record)
            .transpose()
    }

    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<InboxRecord>, StoreError> {
        let query = ListQuery::new(filter);
        self.query(&query.sql, &query.params())
            .await?
            .iter()
            .map(inbox_record)
            .collect()
    }

    async fn page_events(&self, query: &crate::EventQuery) -> Result<Vec<InboxRecord>, StoreError> {
        self.page(query).await
    }

    async fn count_inbox(&self) -> Result<u64, StoreError> {
        self.query_one(COUNT_INBOX.postgres(), &[], |r| r.count(0))
            .await
    }

    async fn backlog(&self) -> Result<Backlog, StoreError> {
        self.query_one(BACKLOG.postgres(), &[], rows::backlog).await
    }

    async fn received_per_endpoint(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.query(RECEIVED_PER_ENDPOINT.postgres(), &[])
            .await?
            .iter()
            .map(|r| Ok((r.text(0)?, r.count(1)?)))
            .collect()
    }

    /// In byte order (`COLLATE "C"`), as SQLite sorts, whatever the database's collation.
    async fn distinct_event_ids(&self, endpoint_id: &str) -> Result<Vec<String>, StoreError> {
        self.strings(
            "SELECT DISTINCT provider_event_id COLLATE \"C\" AS id \
             FROM inbox WHERE endpoint_id = $1 ORDER BY id",
            &[&endpoint_id],
        )
        .await
    }

    async fn list_deliveries(&self, inbox_id: &str) -> Result<Vec<OutboxRecord>, StoreError> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE inbox_id = $1 \
             ORDER BY destination COLLATE \"C\""
        );
        self.query(&sql, &[&inbox_id])
            .await?
            .iter()
            .map(outbox_record)
            .collect()
    }

    async fn events_with_failed_deliveries(
        &self,
        filter: &EventFilter,
    ) -> Result<Vec<InboxRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM inbox WHERE inbox_id IN \
                 (SELECT inbox_id FROM outbox WHERE status = 'FAILED') \
               AND ($1::TEXT IS NULL OR endpoint_id = $1) \
             ORDER BY received_at DESC, inbox_id DESC LIMIT $2",
            *COLUMNS
        );
        let endpoint_id = filter.endpoint_id.as_deref();
        let limit = filter.limit.map(i64::from);
        self.query(&sql, &[&endpoint_id, &limit])
            .await?
            .iter()
            .map(inbox_record)
            .collect()
    }

    async fn count_deliveries(&self, status: OutboxStatus) -> Result<u64, StoreError> {
        self.query_one(COUNT_DELIVERIES.postgres(), &[&status.as_str()], |r| {
            r.count(0)
        })
        .await
    }

    async fn object_version(
        &self,
        provider: &str,
        endpoint_id: &str,
        object_id: &str,
    ) -> Result<Option<i64>, StoreError> {
        let rows = self
            .query(
                OBJECT_VERSION.postgres(),
                &[&provider, &endpoint_id, &object_id],
            )
            .await?;
        rows.first().map(|r| r.int(0)).transpose()
    }

    async fn processed_markers(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.strings(
            "SELECT consumer FROM processed_events \
             WHERE provider = $1 AND endpoint_id = $2 AND provider_event_id = $3 \
             ORDER BY consumer COLLATE \"C\"",
            &[&provider, &endpoint_id, &provider_event_id],
        )
        .await
    }

    async fn payment_state(&self, object_id: &str) -> Result<Option<PaymentState>, StoreError> {
        payments::read(self, object_id).await
    }

    async fn audit_log(&self, limit: u32) -> Result<Vec<crate::AuditRecord>, StoreError> {
        super::retention::audit_log(self, limit).await
    }
}

/// Touches a table of ours (not just the server), cheaply.
pub(super) const PING_SQL: &str = "SELECT 1 FROM schema_migrations LIMIT 1";
