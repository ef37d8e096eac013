//! The [`RetentionStore`] impl: each batch is one short transaction that takes its rows
//! `FOR UPDATE SKIP LOCKED` (a row a worker or another instance holds is left for the next
//! pass, so nothing waits on retention) and removes them with set-based statements.
//!
//! Searches are index range scans: expired payloads through `inbox_payload_expiry`, rows
//! through `inbox_endpoint_received` / `inbox_status`, object state through
//! `object_state_expiry`, replay claims through `replay_digests_expiry` (schema version 8).
//! Freed space is reused after autovacuum; a purged payload's TOAST chunks go with it.

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::retention::{
    AUDIT_EVENTS_PURGE, AuditRecord, DONE_STATUSES, DeletedRows, ExpiredRows, PurgeBatch,
    PurgeRequest, PurgeSelection, purge_detail,
};
use crate::rows::Columns;
use crate::{RetentionStore, StoreError};

enum Op<'r> {
    PurgeExpired {
        received_before_ms: i64,
        now_ms: i64,
        limit: i64,
    },
    DeleteRows(ExpiredRows<'r>),
    DeleteObjectState {
        endpoint_id: &'r str,
        updated_before_ms: i64,
        limit: i64,
    },
    DeleteReplayClaims {
        now_ms: i64,
        limit: i64,
    },
    Purge(PurgeRequest<'r>),
}

enum Done {
    Count(u64),
    Rows(DeletedRows),
    Batch(PurgeBatch),
}

impl RetryableWrite for Op<'_> {
    type Output = Done;
    const LABEL: &'static str = "retention";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Done, Failed> {
        Ok(match self {
            Op::PurgeExpired {
                received_before_ms,
                now_ms,
                limit,
            } => {
                let sql = format!(
                    "WITH doomed AS (SELECT inbox_id FROM inbox i \
                         WHERE payload_purged_at IS NULL AND received_at < $1 \
                           AND status IN ({DONE_STATUSES}) \
                           AND NOT EXISTS (SELECT 1 FROM outbox o \
                               WHERE o.inbox_id = i.inbox_id AND o.status = 'PENDING') \
                         ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
                     UPDATE inbox SET payload = NULL, payload_purged_at = $3 \
                     FROM doomed WHERE inbox.inbox_id = doomed.inbox_id"
                );
                let stmt = tx.prepare_cached(&sql).await?;
                Done::Count(
                    tx.execute(&stmt, &[received_before_ms, limit, now_ms])
                        .await?,
                )
            }
            Op::DeleteRows(scope) => Done::Rows(delete_rows_in(tx, scope).await?),
            Op::DeleteObjectState {
                endpoint_id,
                updated_before_ms,
                limit,
            } => {
                let stmt = tx
                    .prepare_cached(
                        "DELETE FROM object_state WHERE (provider, endpoint_id, object_id) IN \
                         (SELECT provider, endpoint_id, object_id FROM object_state \
                          WHERE endpoint_id = $1 AND updated_at < $2 LIMIT $3 \
                          FOR UPDATE SKIP LOCKED)",
                    )
                    .await?;
                Done::Count(
                    tx.execute(&stmt, &[endpoint_id, updated_before_ms, limit])
                        .await?,
                )
            }
            Op::DeleteReplayClaims { now_ms, limit } => {
                let stmt = tx
                    .prepare_cached(
                        "DELETE FROM replay_digests WHERE (endpoint_id, digest) IN \
                         (SELECT endpoint_id, digest FROM replay_digests \
                          WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
                    )
                    .await?;
                Done::Count(tx.execute(&stmt, &[now_ms, limit]).await?)
            }
            Op::Purge(request) => Done::Batch(purge_in(tx, request).await?),
        })
    }
}

/// Expired rows and what follows them, in one statement: the data-modifying CTEs see the
/// same rows, and the outbox's foreign key is checked at its end, when both are gone.
async fn delete_rows_in(
    tx: &Transaction<'_>,
    scope: &ExpiredRows<'_>,
) -> Result<DeletedRows, Failed> {
    let limit = i64::from(scope.limit);
    let (doomed, params): (String, Vec<&(dyn ToSql + Sync)>) = match &scope.endpoint_id {
        Some(endpoint) => (
            format!(
                "SELECT inbox_id, provider, endpoint_id, provider_event_id, \
                     payload_purged_at IS NULL AS had_payload FROM inbox \
                 WHERE endpoint_id = $1 AND received_at < $2 AND status IN ({DONE_STATUSES}) \
                 ORDER BY received_at LIMIT $3 FOR UPDATE SKIP LOCKED"
            ),
            vec![endpoint, &scope.received_before_ms, &limit],
        ),
        None => (
            format!(
                "SELECT inbox_id, provider, endpoint_id, provider_event_id, \
                     payload_purged_at IS NULL AS had_payload FROM inbox \
                 WHERE status IN ({DONE_STATUSES}) AND received_at < $1 \
                 LIMIT $2 FOR UPDATE SKIP LOCKED"
            ),
            vec![&scope.received_before_ms, &limit],
        ),
    };
    let sql = format!(
        "WITH doomed AS ({doomed}), \
         o AS (DELETE FROM outbox USING doomed WHERE outbox.inbox_id = doomed.inbox_id \
               RETURNING 1), \
         m AS (DELETE FROM processed_events p USING doomed d \
               WHERE p.provider = d.provider AND p.endpoint_id = d.endpoint_id \
                 AND p.provider_event_id = d.provider_event_id RETURNING 1), \
         i AS (DELETE FROM inbox USING doomed WHERE inbox.inbox_id = doomed.inbox_id \
               RETURNING doomed.had_payload) \
         SELECT (SELECT count(*) FROM i), (SELECT count(*) FROM i WHERE had_payload), \
                (SELECT count(*) FROM o), (SELECT count(*) FROM m)"
    );
    let stmt = tx.prepare_cached(&sql).await?;
    let row = tx.query_one(&stmt, &params).await?;
    let count = |i: usize| {
        row.count(i)
            .map_err(|e| Failed::Db(super::error::Failure::Fail(e)))
    };
    Ok(DeletedRows {
        inbox: count(0)?,
        payloads: count(1)?,
        outbox: count(2)?,
        processed_markers: count(3)?,
    })
}

async fn purge_in(tx: &Transaction<'_>, request: &PurgeRequest<'_>) -> Result<PurgeBatch, Failed> {
    let selection: &PurgeSelection = request.selection;
    let params: Vec<&(dyn ToSql + Sync)> = selection.params(|s| s as _, |n| n as _);
    let conditions = selection.conditions(1, |n| format!("${n}"));
    let now = params.len() + 1;
    let limit = i64::from(request.limit);
    let sql = format!(
        "WITH doomed AS (SELECT inbox_id, received_at FROM inbox \
             WHERE payload_purged_at IS NULL AND status <> 'RECEIVED'{conditions} \
             ORDER BY received_at LIMIT {limit} FOR UPDATE SKIP LOCKED) \
         UPDATE inbox SET payload = NULL, payload_purged_at = ${now} \
         FROM doomed WHERE inbox.inbox_id = doomed.inbox_id \
         RETURNING inbox.inbox_id, doomed.received_at"
    );
    let mut with_now = params.clone();
    with_now.push(&request.now_ms);
    let stmt = tx.prepare_cached(&sql).await?;
    let mut rows: Vec<(i64, String)> = tx
        .query(&stmt, &with_now)
        .await?
        .iter()
        .map(|r| (r.get::<_, i64>(1), r.get::<_, String>(0)))
        .collect();
    rows.sort();
    let mut batch = PurgeBatch {
        purged: rows.into_iter().map(|(_, id)| id).collect(),
        still_received: 0,
    };
    if (batch.purged.len() as i64) < limit {
        let sql = format!(
            "SELECT count(*) FROM inbox WHERE payload_purged_at IS NULL \
             AND status = 'RECEIVED'{conditions}"
        );
        let stmt = tx.prepare_cached(&sql).await?;
        batch.still_received = tx.query_one(&stmt, &params).await?.get::<_, i64>(0) as u64;
    }
    let stmt = tx
        .prepare_cached(
            "INSERT INTO audit_log (audit_id, at, actor, action, target, detail) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &request.audit_id,
            &request.now_ms,
            &request.actor,
            &AUDIT_EVENTS_PURGE,
            &selection.describe(),
            &purge_detail(&batch),
        ],
    )
    .await?;
    Ok(batch)
}

impl PostgresStore {
    async fn retention(&self, op: Op<'_>) -> Result<Done, StoreError> {
        with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected retention result".into())
}

fn count(done: Done) -> Result<u64, StoreError> {
    match done {
        Done::Count(n) => Ok(n),
        _ => Err(unexpected()),
    }
}

#[async_trait::async_trait]
impl RetentionStore for PostgresStore {
    async fn purge_expired_payloads(
        &self,
        received_before_ms: i64,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        count(
            self.retention(Op::PurgeExpired {
                received_before_ms,
                now_ms,
                limit: i64::from(limit),
            })
            .await?,
        )
    }

    async fn delete_expired_rows(&self, scope: ExpiredRows<'_>) -> Result<DeletedRows, StoreError> {
        match self.retention(Op::DeleteRows(scope)).await? {
            Done::Rows(rows) => Ok(rows),
            _ => Err(unexpected()),
        }
    }

    async fn delete_expired_object_state(
        &self,
        endpoint_id: &str,
        updated_before_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        count(
            self.retention(Op::DeleteObjectState {
                endpoint_id,
                updated_before_ms,
                limit: i64::from(limit),
            })
            .await?,
        )
    }

    async fn delete_expired_replay_claims(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        count(
            self.retention(Op::DeleteReplayClaims {
                now_ms,
                limit: i64::from(limit),
            })
            .await?,
        )
    }

    async fn oldest_stored_payload_ms(&self) -> Result<Option<i64>, StoreError> {
        let rows = self
            .query(
                "SELECT min(received_at) FROM inbox WHERE payload_purged_at IS NULL",
                &[],
            )
            .await?;
        match rows.first() {
            Some(r) => r.opt_int(0),
            None => Ok(None),
        }
    }

    async fn reclaim_space(&self, _max_pages: u32) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn purge_payloads(&self, request: PurgeRequest<'_>) -> Result<PurgeBatch, StoreError> {
        request.selection.validate()?;
        match self.retention(Op::Purge(request)).await? {
            Done::Batch(batch) => Ok(batch),
            _ => Err(unexpected()),
        }
    }
}

/// The newest `limit` audit rows (the [`crate::InspectStore`] read).
pub(super) async fn audit_log(
    store: &PostgresStore,
    limit: u32,
) -> Result<Vec<AuditRecord>, StoreError> {
    let rows = store
        .query(
            "SELECT audit_id, at, actor, action, target, detail, result, filter FROM audit_log \
             ORDER BY at DESC, audit_id DESC LIMIT $1",
            &[&i64::from(limit)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AuditRecord {
                audit_id: r.text(0)?,
                at_ms: r.int(1)?,
                actor: r.text(2)?,
                action: r.text(3)?,
                target: r.text(4)?,
                detail: r.opt_text(5)?,
                result: r.text(6)?,
                filter: r.opt_text(7)?,
            })
        })
        .collect()
}
