//! The [`RetentionStore`] impl: every batch is one command of the single writer, run under
//! its own savepoint inside a group-commit transaction between acceptances (`command.rs`), so
//! it shares their fsync and holds the write lock only for its own few hundred rows.
//!
//! Each search is an index range scan: expired payloads through `inbox_payload_expiry`
//! (rows whose payload is still stored, by `received_at`), expired rows through
//! `inbox_endpoint_received` or `inbox_status`, object state through `object_state_expiry`,
//! replay claims through `replay_digests_expiry` (schema version 7). Freed pages go back to
//! the file system with `PRAGMA incremental_vacuum` (`auto_vacuum = INCREMENTAL`, see
//! `SqliteStore::open`).

use rusqlite::{Connection, ToSql};

use super::SqliteStore;
use super::command::Failed;
use crate::retention::{
    AUDIT_EVENTS_PURGE, AuditRecord, DONE_STATUSES, DeletedRows, ExpiredRows, PurgeBatch,
    PurgeRequest, purge_detail,
};
use crate::{ProcessingError, RetentionStore, StoreError};

#[async_trait::async_trait]
impl RetentionStore for SqliteStore {
    async fn purge_expired_payloads(
        &self,
        received_before_ms: i64,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.write(move |conn| {
            let sql = format!(
                "SELECT inbox_id FROM inbox INDEXED BY inbox_payload_expiry \
                 WHERE payload_purged_at IS NULL AND received_at < ?1 \
                   AND status IN ({DONE_STATUSES}) \
                   AND NOT EXISTS (SELECT 1 FROM outbox o \
                       WHERE o.inbox_id = inbox.inbox_id AND o.status = 'PENDING') \
                 ORDER BY received_at LIMIT ?2"
            );
            let ids = strings(conn, &sql, &[&received_before_ms, &i64::from(limit)])?;
            for id in &ids {
                purge_one(conn, id, now_ms)?;
            }
            Ok(ids.len() as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn delete_expired_rows(&self, scope: ExpiredRows<'_>) -> Result<DeletedRows, StoreError> {
        let endpoint = scope.endpoint_id.map(str::to_owned);
        let (before, limit) = (scope.received_before_ms, i64::from(scope.limit));
        self.write(move |conn| {
            let doomed: Vec<(String, String, String, String)> = match &endpoint {
                Some(endpoint) => {
                    let sql = format!(
                        "SELECT inbox_id, provider, endpoint_id, provider_event_id \
                         FROM inbox INDEXED BY inbox_endpoint_received \
                         WHERE endpoint_id = ?1 AND received_at < ?2 \
                           AND status IN ({DONE_STATUSES}) \
                         ORDER BY received_at LIMIT ?3"
                    );
                    keys(conn, &sql, &[endpoint, &before, &limit])?
                }
                None => {
                    let sql = format!(
                        "SELECT inbox_id, provider, endpoint_id, provider_event_id \
                         FROM inbox INDEXED BY inbox_status \
                         WHERE status IN ({DONE_STATUSES}) AND received_at < ?1 LIMIT ?2"
                    );
                    keys(conn, &sql, &[&before, &limit])?
                }
            };
            let mut deleted = DeletedRows::default();
            for (inbox_id, provider, endpoint_id, event_id) in &doomed {
                deleted.payloads += conn
                    .prepare_cached("DELETE FROM inbox_payload WHERE inbox_id = ?1")?
                    .execute([inbox_id])? as u64;
                deleted.outbox += conn
                    .prepare_cached("DELETE FROM outbox WHERE inbox_id = ?1")?
                    .execute([inbox_id])? as u64;
                deleted.processed_markers +=
                    conn.prepare_cached(
                        "DELETE FROM processed_events \
                         WHERE provider = ?1 AND endpoint_id = ?2 AND provider_event_id = ?3",
                    )?
                    .execute([provider, endpoint_id, event_id])? as u64;
                deleted.inbox += conn
                    .prepare_cached("DELETE FROM inbox WHERE inbox_id = ?1")?
                    .execute([inbox_id])? as u64;
            }
            Ok(deleted)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn delete_expired_object_state(
        &self,
        endpoint_id: &str,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.write(move |conn| {
            // `object_state` is WITHOUT ROWID: deleted by its primary key.
            Ok(conn
                .prepare_cached(
                    "DELETE FROM object_state WHERE (provider, endpoint_id, object_id) IN \
                     (SELECT provider, endpoint_id, object_id FROM object_state \
                      INDEXED BY object_state_expiry \
                      WHERE endpoint_id = ?1 AND updated_at < ?2 LIMIT ?3)",
                )?
                .execute(rusqlite::params![endpoint_id, updated_before_ms, limit])?
                as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn delete_expired_replay_claims(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.write(move |conn| {
            Ok(conn
                .prepare_cached(
                    "DELETE FROM replay_digests WHERE (endpoint_id, digest) IN \
                     (SELECT endpoint_id, digest FROM replay_digests \
                      INDEXED BY replay_digests_expiry WHERE expires_at < ?1 LIMIT ?2)",
                )?
                .execute(rusqlite::params![now_ms, limit])? as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn oldest_stored_payload_ms(&self) -> Result<Option<i64>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT min(received_at) FROM inbox INDEXED BY inbox_payload_expiry \
                 WHERE payload_purged_at IS NULL",
            )?
            .query_row([], |r| r.get::<_, Option<i64>>(0))
        })
        .await
    }

    async fn reclaim_space(&self, max_pages: u32) -> Result<u64, StoreError> {
        self.write(move |conn| {
            let free = |conn: &Connection| {
                conn.query_row("PRAGMA freelist_count", [], |r| r.get::<_, i64>(0))
            };
            let before = free(conn)?;
            if before == 0 {
                return Ok(0);
            }
            // A no-op unless the file is in `auto_vacuum = INCREMENTAL` mode.
            conn.execute_batch(&format!("PRAGMA incremental_vacuum({max_pages})"))?;
            Ok(u64::try_from(before - free(conn)?).unwrap_or(0))
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn purge_payloads(&self, request: PurgeRequest<'_>) -> Result<PurgeBatch, StoreError> {
        request.selection.validate()?;
        let selection = request.selection.clone();
        let (limit, now_ms) = (request.limit, request.now_ms);
        let (actor, audit_id) = (request.actor.to_owned(), request.audit_id.to_owned());
        self.write(move |conn| {
            let params: Vec<&dyn ToSql> = selection.params(|s| s as _, |n| n as _);
            let conditions = selection.conditions(1, |n| format!("?{n}"));
            let limit = i64::from(limit);
            let sql = format!(
                "SELECT inbox_id FROM inbox WHERE payload_purged_at IS NULL \
                 AND status <> 'RECEIVED'{conditions} ORDER BY received_at LIMIT {limit}"
            );
            let purged = strings(conn, &sql, &params)?;
            for id in &purged {
                purge_one(conn, id, now_ms)?;
            }
            let mut batch = PurgeBatch {
                still_received: 0,
                purged,
            };
            if (batch.purged.len() as i64) < limit {
                let sql = format!(
                    "SELECT count(*) FROM inbox WHERE payload_purged_at IS NULL \
                     AND status = 'RECEIVED'{conditions}"
                );
                batch.still_received = conn
                    .prepare_cached(&sql)?
                    .query_row(params.as_slice(), |r| r.get::<_, i64>(0))?
                    as u64;
            }
            conn.prepare_cached(
                "INSERT INTO audit_log (audit_id, at, actor, action, target, detail) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(rusqlite::params![
                audit_id,
                now_ms,
                actor,
                AUDIT_EVENTS_PURGE,
                selection.describe(),
                purge_detail(&batch),
            ])?;
            Ok(batch)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}

/// Removes one row's sealed payload and records when (the row stays, as its id record).
fn purge_one(conn: &Connection, inbox_id: &str, now_ms: i64) -> Result<(), Failed> {
    conn.prepare_cached("DELETE FROM inbox_payload WHERE inbox_id = ?1")?
        .execute([inbox_id])?;
    conn.prepare_cached("UPDATE inbox SET payload_purged_at = ?2 WHERE inbox_id = ?1")?
        .execute(rusqlite::params![inbox_id, now_ms])?;
    Ok(())
}

fn strings(conn: &Connection, sql: &str, params: &[&dyn ToSql]) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, |r| r.get::<_, String>(0))?;
    rows.collect()
}

type RowKey = (String, String, String, String);

fn keys(conn: &Connection, sql: &str, params: &[&dyn ToSql]) -> rusqlite::Result<Vec<RowKey>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}

/// The newest `limit` audit rows (the [`crate::InspectStore`] read).
pub(super) fn audit_log(conn: &Connection, limit: u32) -> rusqlite::Result<Vec<AuditRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT audit_id, at, actor, action, target, detail, result, filter FROM audit_log \
         ORDER BY at DESC, audit_id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([i64::from(limit)], |r| {
        Ok(AuditRecord {
            audit_id: r.get(0)?,
            at_ms: r.get(1)?,
            actor: r.get(2)?,
            action: r.get(3)?,
            target: r.get(4)?,
            detail: r.get(5)?,
            result: r.get(6)?,
            filter: r.get(7)?,
        })
    })?;
    rows.collect()
}
